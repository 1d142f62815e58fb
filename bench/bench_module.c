/* bench_module.c: the small kernel library packfn_bench loads for module_call: one export,
 * add1(i) -> i + 1, as packfn (__packfn_add1) and TVM-FFI (__tvm_ffi_add1) loaders find it
 * (PF_EXPORT exports both names). */
#include "packfn/module.h"

static int add1(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  if (num_args != 1 || args[0].type_index != PF_TYPE_INT) {
    PF_ERROR_SET(PF_ERR_TYPE, "add1: expected (int)");
    return -1;
  }
  *result = pf_any_int(args[0].v_int64 + 1);
  return 0;
}

PF_EXPORT(add1, add1);
