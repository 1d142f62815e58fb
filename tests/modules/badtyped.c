/* A library for test_module with one typed export whose declaration packfn refuses (a parameter
 * of kind 999) beside a sound one: the library loads and lists both, the bad one without a
 * signature (listing the module failed as a whole, naming pf_module_get_function). */
#include "packfn/packfn.h"

static int impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  (void)args;
  *result = pf_any_int(1);
  return 0;
}
static const pf_param_t params[] = {{"x", PF_PARAM_INT}, {"y", (pf_param_kind_t)999}};
static const pf_signature_t bad = {"badkind", 2, params, PF_PARAM_INT, NULL};
static const pf_signature_t good = {"fine", 1, params, PF_PARAM_INT, NULL};
PF_EXPORT_TYPED(badkind, &bad, impl);
PF_EXPORT_TYPED(fine, &good, impl);
