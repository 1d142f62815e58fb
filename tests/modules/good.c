/* A well-formed kernel library for test_module: plain, documented and typed exports, one that
 * raises, one whose name looks like metadata, and a global function registered at load. */
#include <stdio.h>

#include "packfn/packfn.h"

static int add_ints(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t sum = 0;
  for (int32_t i = 0; i < num_args; ++i) {
    int64_t x;
    if (pf_any_as_int(&args[i], &x) != 0)
      return -1;
    sum += x;
  }
  *result = pf_any_int(sum);
  return 0;
}
PF_EXPORT(add_ints, add_ints);

static int greet(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  const char* name;
  if (num_args != 1) {
    PF_ERROR_SET(PF_ERR_TYPE, "greet: expected 1 argument, got %d", (int)num_args);
    return -1;
  }
  if (pf_any_as_cstr(&args[0], &name) != 0)
    return -1;
  char text[128];
  snprintf(text, sizeof text, "hello, %s", name);
  return pf_string_from_cstr(text, result);
}
PF_EXPORT_DOC(greet, greet, "greet(name: str) -> str", "Says hello to name.");

static int always_fails(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  PF_ERROR_SET(PF_ERR_RUNTIME, "fail: this kernel always fails");
  return -1;
}
PF_EXPORT(fail, always_fails);

/* a function whose symbol (__packfn_meta_info) has the metadata prefix but is code */
static int meta_info(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  *result = pf_any_int(num_args);
  return 0;
}
PF_EXPORT(meta_info, meta_info);

static int scale_impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_float(args[0].f * (double)args[1].i);
  return 0;
}
static const pf_param_t scale_params[] = {{"x", PF_PARAM_FLOAT}, {"k", PF_PARAM_INT}};
static const pf_signature_t scale_sig = {"scale", 2, scale_params, PF_PARAM_FLOAT,
                                         "Multiplies x by k."};
PF_EXPORT_TYPED(scale, &scale_sig, scale_impl);

static int hello_global(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  return pf_string_from_cstr("hello from the good library", result);
}
PF_REGISTER_GLOBAL("testmod.good.hello", hello_global);

/* exported, but not with the packfn prefix: not a function of the module */
__attribute__((visibility("default"))) int testmod_good_unrelated(void) {
  return 1;
}
