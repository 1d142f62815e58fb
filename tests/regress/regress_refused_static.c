/* Regression test (review of the ninth session's tree): refusing a library at load.
 * - A refused library registered with PF_REGISTER_GLOBAL stayed mapped for good: its static
 *   slot's reference counted as a holder elsewhere, so the loader pinned it. It is unmapped now,
 *   its global removed.
 * - A dependency the refused library brought in (mapped by that load) registered a global from
 *   its constructor; the refusal unmapped it with the library and the global's entry pointed
 *   into unmapped code (a call crashed). The dependency now stays, with its global.
 *   regress_refused_static PATH_TO_refused_static PATH_TO_refused_dep */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

static int mapped(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h)
    dlclose(h);
  return h != NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: regress_refused_static REFUSED_LIBRARY ITS_DEPENDENCY\n");
    return 2;
  }
  if (mapped(argv[2])) {
    fprintf(stderr, "FAIL: the dependency is mapped before the load\n");
    return 1;
  }
  pf_object_t* mod = NULL;
  if (pf_module_load(argv[1], &mod) == 0) {
    fprintf(stderr, "FAIL: the library with another ABI major was accepted\n");
    return 1;
  }
  pf_object_t* err = pf_error_take();
  if (!err || strcmp(pf_error_kind(err), PF_ERR_VALUE) != 0) {
    fprintf(stderr, "FAIL: expected ValueError, got %s\n", err ? pf_error_kind(err) : "none");
    return 1;
  }
  pf_object_release(err);
  int failures = 0;
  if (mapped(argv[1])) {
    fprintf(stderr, "FAIL: the refused library stays mapped\n");
    failures++;
  }
  pf_object_t* fn = NULL;
  if (pf_global_get("regress.refused_static", &fn) != 0 || fn) {
    fprintf(stderr, "FAIL: the refused library's global is still registered\n");
    pf_object_release(fn);
    pf_error_clear();
    failures++;
  }
  if (!mapped(argv[2])) {
    fprintf(stderr, "FAIL: the dependency was unmapped\n");
    failures++;
  }
  fn = NULL;
  if (pf_global_get("regress.refused_dep", &fn) != 0 || !fn) {
    fprintf(stderr, "FAIL: the dependency's global is gone\n");
    pf_error_clear();
    return 1;
  }
  pf_any_t result = pf_any_none();
  int rc = pf_function_call(fn, NULL, 0, &result); /* crashed when its code was unmapped */
  pf_object_release(fn);
  if (rc != 0 || result.type_index != PF_TYPE_INT || result.v_int64 != 11) {
    fprintf(stderr, "FAIL: the dependency's global gave rc %d\n", rc);
    return 1;
  }
  if (failures)
    return 1;
  printf("ok: the refused library was unmapped; its dependency and that one's global stay\n");
  return 0;
}
