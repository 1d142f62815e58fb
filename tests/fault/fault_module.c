/* A kernel library for pf_fault's first-load sweep (fault.c, program "first load"): a
 * documented export, a typed export and a global function its constructor registers, so that
 * its first load makes every kind of allocation the loader, the metadata and the static
 * registration make. fault_add(a, b) returns a + b; fault_scale(x, k) returns x * k; the
 * global "fault.module.answer" returns 42. */
#include "packfn/packfn.h"

static int add_impl(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t a, b;
  if (num_args != 2) {
    PF_ERROR_SET(PF_ERR_TYPE, "fault_add: expected 2 arguments, got %d", (int)num_args);
    return -1;
  }
  if (pf_any_as_int(&args[0], &a) != 0 || pf_any_as_int(&args[1], &b) != 0)
    return -1;
  *result = pf_any_int(a + b);
  return 0;
}
PF_EXPORT_DOC(fault_add, add_impl, "fault_add(a: int, b: int) -> int", "Adds.");

static const pf_param_t scale_params[] = {{"x", PF_PARAM_FLOAT}, {"k", PF_PARAM_INT}};
static const pf_signature_t scale_sig = {"fault_scale", 2, scale_params, PF_PARAM_FLOAT,
                                         "Scales x by k."};

static int scale_impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_float(args[0].f * (double)args[1].i);
  return 0;
}
PF_EXPORT_TYPED(fault_scale, &scale_sig, scale_impl);

static int answer(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(42);
  return 0;
}
PF_REGISTER_GLOBAL("fault.module.answer", answer);
