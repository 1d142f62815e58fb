/* Every public header and the export, registration and typed macros in a C program built with
 * the warnings a strict includer turns on (see CMakeLists.txt: -Wconversion, -Wcast-qual,
 * -Wredundant-decls, -Wmissing-prototypes, -Wmissing-variable-declarations under clang, ...,
 * with -Werror), by gcc and by clang. Then it runs what the macros made, so a header change that
 * only compiles is not enough. Exit status: the number of failed checks. */
#include "packfn/abi.h"
#include "packfn/any.h"
#include "packfn/config.h"
#include "packfn/container.h"
#include "packfn/cuda.h"
#include "packfn/device.h"
#include "packfn/error.h"
#include "packfn/export.h"
#include "packfn/function.h"
#include "packfn/interop.h"
#include "packfn/kernels.h"
#include "packfn/module.h"
#include "packfn/npy.h"
#include "packfn/object.h"
#include "packfn/packfn.h"
#include "packfn/tensor.h"
#include "packfn/typed.h"

#include <stdio.h>
#include <string.h>

static int strict_add(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
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
PF_EXPORT(strict_add, strict_add);
PF_EXPORT_DOC(strict_add_doc, strict_add, "strict_add_doc(*ints) -> int", "Adds integers.");
PF_REGISTER_GLOBAL("strict_c.add", strict_add);

static int strict_scale_impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_float(args[0].f * (double)args[1].i);
  return 0;
}
static const pf_param_t strict_scale_params[] = {{"x", PF_PARAM_FLOAT}, {"k", PF_PARAM_INT}};
static const pf_signature_t strict_scale_sig = {"strict_scale", 2, strict_scale_params,
                                                PF_PARAM_FLOAT, "Multiplies x by k."};
PF_EXPORT_TYPED(strict_scale, &strict_scale_sig, strict_scale_impl);

PF_TYPED_DEFINE(strict_sub, INT, (INT, a), (INT, b)) {
  *result = pf_any_int(a - b);
  return 0;
}

static int failures;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "strict_c: FAILED: %s\n", what);
    ++failures;
  }
}

int main(void) {
  pf_any_t args[2] = {pf_any_int(40), pf_any_int(2)};
  pf_any_t r = pf_any_none();
  check(__packfn_strict_add(NULL, args, 2, &r) == 0 && r.v_int64 == 42, "PF_EXPORT");
  check(__packfn_strict_add_doc(NULL, args, 2, &r) == 0 && r.v_int64 == 42, "PF_EXPORT_DOC");
  check(__packfn_meta_strict_add_doc.magic == PF_EXPORT_META_MAGIC &&
            strcmp(__packfn_meta_strict_add_doc.doc, "Adds integers.") == 0,
        "PF_EXPORT_DOC metadata");
  check(__packfn_abi.magic == PF_ABI_MAGIC && __packfn_abi.major == PF_ABI_VERSION_MAJOR,
        "ABI stamp");

  pf_object_t* fn = NULL;
  check(pf_global_get("strict_c.add", &fn) == 0 && fn != NULL, "PF_REGISTER_GLOBAL");
  if (fn) {
    check(pf_function_call(fn, args, 2, &r) == 0 && r.v_int64 == 42, "registered call");
    pf_object_release(fn);
  }

  pf_any_t fargs[2] = {pf_any_float(1.5), pf_any_int(4)};
  pf_any_t fr = pf_any_none();
  check(__packfn_strict_scale(NULL, fargs, 2, &fr) == 0 && fr.type_index == PF_TYPE_FLOAT &&
            fr.v_float64 == 6.0,
        "PF_EXPORT_TYPED");
  pf_any_release(&fr);
  check(__packfn_strict_scale(NULL, args, 1, &fr) != 0, "PF_EXPORT_TYPED arity refused");
  pf_error_clear();

  pf_object_t* sub = NULL;
  check(PF_TYPED_CREATE(strict_sub, &sub) == 0, "PF_TYPED_CREATE");
  if (sub) {
    check(pf_function_call(sub, args, 2, &r) == 0 && r.v_int64 == 38, "typed call");
    pf_object_release(sub);
  }

  /* the inline accessors whose casts the strict flags look at */
  pf_byte_array_t bytes = {"ab", 2};
  pf_any_t b = pf_any_byte_array(&bytes);
  check(b.v_ptr == (const void*)&bytes, "pf_any_byte_array");
  int64_t shape[1] = {4};
  pf_object_t* t = NULL;
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  check(pf_tensor_empty(shape, 1, f32, cpu, &t) == 0, "pf_tensor_empty");
  if (t) {
    DLTensor* view = pf_tensor_dltensor(t);
    pf_any_t tv = pf_any_object(t);
    DLTensor* got = NULL;
    check(view != NULL && view->shape[0] == 4, "pf_tensor_dltensor");
    check(pf_any_as_dltensor(&tv, &got) == 0 && got == view, "pf_any_as_dltensor");
    pf_object_release(t);
  }
  if (failures == 0)
    printf("strict_c: all checks passed\n");
  return failures;
}
