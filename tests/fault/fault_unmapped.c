/* A library with nothing of packfn in it: pf_fault maps and unmaps it once before the
 * first-load sweep, so that the dynamic loader's allocation at the process's first unmapping of
 * a library (glibc keeps a list for freeing old scopes, made once) is not counted against a
 * refused first load. */
int pf_fault_unmapped_marker(void);
int pf_fault_unmapped_marker(void) {
  return 1;
}
