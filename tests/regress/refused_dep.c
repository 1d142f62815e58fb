/* The dependency of refused_static.c: its constructor registers a global whose code lies here. */
#include "packfn/packfn.h"

__attribute__((visibility("default"))) int regress_refused_dep_value(void) {
  return 11;
}

static int refused_dep_fn(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(regress_refused_dep_value());
  return 0;
}

PF_REGISTER_GLOBAL("regress.refused_dep", refused_dep_fn);
