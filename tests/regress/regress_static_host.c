/* Regression test (review of the installed package): a program holding libpackfn.a loads, with
 * pf_module_load, a kernel library linked against the shared libpackfn. The library got a
 * second runtime (libpackfn.so.0 is no object of the program): its failing calls returned -1
 * with no error to take, its globals went to the other table. pf_module_load refuses it now,
 * naming both runtimes.
 *   regress_static_host PATH_TO_A_LIBRARY_LINKED_WITH_libpackfn.so */
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: regress_static_host LIBRARY\n");
    return 2;
  }
  pf_object_t* mod = NULL;
  if (pf_module_load(argv[1], &mod) == 0) {
    fprintf(stderr, "FAIL: a library bound to another packfn runtime was accepted\n");
    pf_object_release(mod);
    return 1;
  }
  pf_object_t* err = pf_error_take();
  if (!err || strcmp(pf_error_kind(err), PF_ERR_RUNTIME) != 0 ||
      !strstr(pf_error_message(err), "is bound to the packfn runtime in") ||
      !strstr(pf_error_message(err), "libpackfn.so") ||
      !strstr(pf_error_message(err), "link the program with the shared libpackfn")) {
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
