/* A small kernel library for pf_stress: loaded and released concurrently by its threads.
 * stress_mul(a, b) returns a * b; stress_tag() returns the string "stress". */
#include "packfn/packfn.h"

static int stress_mul(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t a;
  int64_t b;
  if (num_args != 2) {
    PF_ERROR_SET(PF_ERR_TYPE, "stress_mul: expected 2 arguments, got %d", (int)num_args);
    return -1;
  }
  if (pf_any_as_int(&args[0], &a) != 0 || pf_any_as_int(&args[1], &b) != 0)
    return -1;
  *result = pf_any_int(a * b);
  return 0;
}
PF_EXPORT_DOC(stress_mul, stress_mul, "stress_mul(a: int, b: int) -> int", "Multiplies.");

static int stress_tag(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  return pf_string_from_cstr("stress", result);
}
PF_EXPORT(stress_tag, stress_tag);
