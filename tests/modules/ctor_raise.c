/* A library for test_module whose constructor raises after a PF_REGISTER_GLOBAL registration:
 * every load of it must be refused, and its global removed. */
#include "packfn/packfn.h"

static int one(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(1);
  return 0;
}
PF_EXPORT(one, one);
PF_REGISTER_GLOBAL("test.module.ctor_raise", one);

__attribute__((constructor(200))) static void init(void) {
  PF_ERROR_SET(PF_ERR_RUNTIME, "ctor_raise: cannot initialise the device");
}
