/* Regression test, issue 10 defect 2: a library refused at load (here: another ABI major)
 * after its constructor called pf_global_set is unmapped, but the global table keeps the
 * function; calling it jumps into unmapped memory. Expected after the fix: the load fails
 * with ValueError and the name is gone (or still callable, its library kept mapped).
 * Today: the name stays and the call crashes (SIGSEGV).
 *   regress_refused_module PATH_TO_libpf_regress_refused.so */
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  pf_object_t* mod = NULL;
  if (pf_module_load(argv[1], &mod) == 0) {
    fprintf(stderr, "FAIL: the library with another ABI major was accepted\n");
    pf_object_release(mod);
    return 1;
  }
  pf_object_t* err = pf_error_take();
  if (!err || strcmp(pf_error_kind(err), PF_ERR_VALUE) != 0) {
    fprintf(stderr, "FAIL: expected ValueError, got %s\n", err ? pf_error_kind(err) : "none");
    pf_object_release(err);
    return 1;
  }
  pf_object_release(err);
  pf_object_t* fn = NULL;
  if (pf_global_get("regress.leftover", &fn) != 0) {
    fprintf(stderr, "FAIL: pf_global_get raised\n");
    return 1;
  }
  if (!fn) {
    printf("ok: the refused library's global function was removed\n");
    return 0;
  }
  printf("the refused library's function is still registered; calling it\n");
  fflush(stdout);
  pf_any_t res = pf_any_none();
  int rc = pf_function_call(fn, NULL, 0, &res);
  pf_object_release(fn);
  if (rc != 0 || res.type_index != PF_TYPE_INT || res.v_int64 != 7) {
    fprintf(stderr, "FAIL: the call gave rc %d\n", rc);
    return 1;
  }
  printf("ok: the function still works (its library stayed mapped)\n");
  return 0;
}
