/* A library holding packfn statically (packfn_static, linked whole), for
 * regress_dlclose_thread_static: dlclose unmaps it, and packfn's destructors in it take the
 * unload path (PF_PINNED is the shared library's alone). */
int pf_regress_static_packfn_marker(void);
int pf_regress_static_packfn_marker(void) {
  return 1;
}
