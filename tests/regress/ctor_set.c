/* A kernel library, for regress_shared_host, that registers a global from a constructor of its
 * own with pf_global_set (no destructor removes it) and exports one failing function. Linked
 * with the whole libpackfn.a: it holds a copy of its own, which pf_module_load refuses. */
#include "packfn/packfn.h"

static int hello(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(42);
  return 0;
}

static int fail(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  PF_ERROR_SET(PF_ERR_RUNTIME, "fail: this kernel always fails");
  return -1;
}
PF_EXPORT(fail, fail);

__attribute__((constructor)) static void register_hello(void) {
  pf_object_t* fn = NULL;
  if (pf_function_create_direct(hello, &fn) == 0) {
    (void)pf_global_set("testmod.good.hello", fn, 1);
    pf_object_release(fn);
  }
}
