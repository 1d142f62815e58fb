/* The export most test libraries of test_module carry: one() returns 1. */
#ifndef PACKFN_TESTS_MODULES_ONE_H_
#define PACKFN_TESTS_MODULES_ONE_H_

#include "packfn/packfn.h"

static int one(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(1);
  return 0;
}
PF_EXPORT(one, one);

#endif /* PACKFN_TESTS_MODULES_ONE_H_ */
