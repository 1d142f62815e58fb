/* A kernel library for export_apart.c: one export that succeeds, one that raises, one that
 * returns -1 raising nothing. */
#include "packfn/packfn.h"

static int ok(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  *result = pf_any_int(num_args);
  return 0;
}
PF_EXPORT(ok, ok);

static int fails(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  PF_ERROR_SET(PF_ERR_VALUE, "fails: bad argument");
  return -1;
}
PF_EXPORT(fails, fails);

static int silent(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  return -1;
}
PF_EXPORT(silent, silent);
