/* A library for regress_refused_module: its constructor registers a global function whose
 * code lies in this library, and its stamp names another ABI major, so pf_module_load
 * refuses it and unmaps it. */
#define PF_NO_ABI_STAMP
#include "packfn/packfn.h"

__attribute__((weak, visibility("default"))) const pf_abi_stamp_t __packfn_abi = {
    PF_ABI_MAGIC, PF_ABI_VERSION_MAJOR + 7, 0, (uint32_t)sizeof(pf_abi_stamp_t)};

static int leftover(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(7);
  return 0;
}

__attribute__((constructor)) static void register_leftover(void) {
  pf_object_t* fn;
  if (pf_function_create_direct(leftover, &fn) != 0) {
    pf_error_clear();
    return;
  }
  if (pf_global_set("regress.leftover", fn, 1) != 0)
    pf_error_clear();
  pf_object_release(fn);
}
