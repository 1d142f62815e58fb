/* A library for test_module whose export metadata is malformed (wrong magic): the loader must
 * refuse it with an error naming the symbol. */
#include "packfn/packfn.h"

static int two(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(2);
  return 0;
}
PF_EXPORT(two, two);

__attribute__((visibility("default"))) const pf_export_meta_t __packfn_meta_two = {
    0xdeadbeefu, PF_EXPORT_META_VERSION, "two() -> int", NULL, NULL, NULL};
