/* Regression test (review of the installed package, then of that fix): which runtime a library
 * pf_module_load loads binds to.
 *   regress_static_host refuse LIBRARY: this program holds libpackfn.a, its symbols not
 *     exported; LIBRARY, linked against libpackfn.so, got a second runtime (libpackfn.so.0 is no
 *     object of the program): its failing calls returned -1 with no error to take, its globals
 *     went to the other table. pf_module_load refuses it now, naming both runtimes.
 *   regress_static_host refuse-mapped LIBRARY: the same after the program dlopen()ed LIBRARY
 *     itself: a library mapped before the load is judged too, unless pf_module_load accepted
 *     it before (it was accepted unjudged, review).
 *   regress_static_host accept LIBRARY: built as a program that exports its static copy
 *     (-rdynamic, whole archive), or as a non-PIE program linked with the shared libpackfn that
 *     takes pf_error_set's address (PF_TAKE_ADDRESS: its PLT entry then stands for the
 *     function): LIBRARY binds to this runtime, and the first fix refused it. Its error must
 *     reach this program's slot and its global this table.
 *   regress_shared_host refuse ctor_set.c's library: linked with the shared libpackfn; the
 *     library holds a copy of its own, but its constructor registers a global in this runtime
 *     (its calls bind here): refused, and the global must not stay behind pointing into its
 *     unmapped code (a call of it crashed).
 * LIBRARY is otherwise tests/modules/good.c's library. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

#ifdef PF_TAKE_ADDRESS
void (*volatile pf_regress_keep)(const char* kind, const char* fmt, ...);
#endif

static int refused(const char* path) {
  pf_object_t* mod = NULL;
  if (pf_module_load(path, &mod) == 0) {
    fprintf(stderr, "FAIL: a library bound to another packfn runtime was accepted\n");
    pf_object_release(mod);
    return 1;
  }
  pf_object_t* err = pf_error_take();
  if (!err || strcmp(pf_error_kind(err), PF_ERR_RUNTIME) != 0 ||
      !strstr(pf_error_message(err), "is bound to the packfn runtime in") ||
      !strstr(pf_error_message(err), "libpackfn.so") ||
      !strstr(pf_error_message(err), "link a program that holds libpackfn.a with the shared")) {
    fprintf(stderr, "FAIL: unexpected error: %s: %s\n", err ? pf_error_kind(err) : "none",
            err ? pf_error_message(err) : "");
    pf_object_release(err);
    return 1;
  }
  printf("refused: %s\n", pf_error_message(err));
  pf_object_release(err);
  /* the library's globals did not land here either */
  pf_object_t* fn = NULL;
  if (pf_global_get("testmod.good.hello", &fn) != 0 || fn != NULL) {
    fprintf(stderr, "FAIL: the refused library's global is in this table\n");
    pf_object_release(fn);
    return 1;
  }
  return 0;
}

static int accepted(const char* path) {
  pf_object_t* mod = NULL;
  if (pf_module_load(path, &mod) != 0) {
    pf_object_t* err = pf_error_take();
    fprintf(stderr, "FAIL: refused: %s\n", err ? pf_error_message(err) : "(no error)");
    pf_object_release(err);
    return 1;
  }
  int failures = 0;
  pf_any_t result = pf_any_none();
  if (pf_module_call(mod, "fail", NULL, 0, &result) != -1) {
    fprintf(stderr, "FAIL: the library's failing function did not fail\n");
    ++failures;
  }
  pf_object_t* err = pf_error_take();
  if (!err || strcmp(pf_error_message(err), "fail: this kernel always fails") != 0) {
    fprintf(stderr, "FAIL: its error did not reach this runtime: %s\n",
            err ? pf_error_message(err) : "(none)");
    ++failures;
  }
  pf_object_release(err);
  pf_object_t* fn = NULL;
  if (pf_global_get("testmod.good.hello", &fn) != 0 || fn == NULL) {
    fprintf(stderr, "FAIL: the library's global is not in this table\n");
    ++failures;
  }
  pf_object_release(fn);
  pf_object_release(mod);
  if (failures == 0)
    printf("accepted, its error and its global reach this runtime\n");
  return failures != 0;
}

int main(int argc, char** argv) {
#ifdef PF_TAKE_ADDRESS
  pf_regress_keep = pf_error_set;
#endif
  if (argc == 3 && strcmp(argv[1], "refuse-mapped") == 0) {
    /* mapped by a dlopen of the program's own first: still judged (it was accepted unjudged) */
    void* first = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!first) {
      fprintf(stderr, "FAIL: cannot dlopen %s: %s\n", argv[2], dlerror());
      return 1;
    }
    int rc = refused(argv[2]);
    dlclose(first);
    return rc;
  }
  if (argc != 3 || (strcmp(argv[1], "refuse") != 0 && strcmp(argv[1], "accept") != 0)) {
    fprintf(stderr, "usage: regress_static_host refuse|accept LIBRARY\n");
    return 2;
  }
  return strcmp(argv[1], "refuse") == 0 ? refused(argv[2]) : accepted(argv[2]);
}
