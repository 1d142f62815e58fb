/* A library for test_module exporting a function with a 200-character name: a typo of it must
 * be suggested whole (it was cut to 127 characters). */
#include "packfn/packfn.h"

#define LONG_NAME                                                                                  \
  f123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678_tail

static int one(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(1);
  return 0;
}
#define EXPORT_AS(name, impl) PF_EXPORT(name, impl) /* expands LONG_NAME first */
EXPORT_AS(LONG_NAME, one);
