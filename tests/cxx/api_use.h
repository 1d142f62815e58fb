/* Every public header and macro of packfn used from C++ (and CUDA): included by cxx_api.cc
 * (built with the C++ compilers) and cuda_api.cu (built with nvcc). pf_cxx_check() runs the
 * functions the macros made and returns the number of failed checks. */
#ifndef PACKFN_TESTS_CXX_API_USE_H_
#define PACKFN_TESTS_CXX_API_USE_H_

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
#include "packfn/object.h"
#include "packfn/packfn.h"
#include "packfn/tensor.h"
#include "packfn/typed.h"

#include <cmath>
#include <cstdio>
#include <cstring>

/* ---- a plain safe-call, exported, exported with texts and registered ---- */
static int cxx_add_impl(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t a, b;
  if (num_args != 2) {
    PF_ERROR_SET(PF_ERR_TYPE, "cxx_add: expected 2 arguments, got %d", num_args);
    return -1;
  }
  if (pf_any_as_int(&args[0], &a) != 0 || pf_any_as_int(&args[1], &b) != 0)
    return -1;
  *result = pf_any_int(a + b);
  return 0;
}
PF_EXPORT(cxx_add, cxx_add_impl);
PF_EXPORT_DOC(cxx_add_doc, cxx_add_impl, "cxx_add_doc(a: int, b: int) -> int", "Adds.");
PF_REGISTER_GLOBAL("cxx.add", cxx_add_impl);

/* ---- a run-time typed function, exported and registered ---- */
static const pf_param_t cxx_scale_params[] = {{"x", PF_PARAM_FLOAT}, {"k", PF_PARAM_INT}};
static const pf_signature_t cxx_scale_sig = {"cxx.scale", 2, cxx_scale_params, PF_PARAM_FLOAT,
                                             "Scales x by k."};
static int cxx_scale_impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_float(args[0].f * static_cast<double>(args[1].i));
  return 0;
}
PF_EXPORT_TYPED(cxx_scale, &cxx_scale_sig, cxx_scale_impl);
PF_REGISTER_GLOBAL_TYPED(&cxx_scale_sig, cxx_scale_impl);

/* ---- compile-time typed functions: every parameter kind ---- */
PF_TYPED_DEFINE(cxx_mul, INT, (INT, a), (INT, b)) {
  *result = pf_any_int(a * b);
  return 0;
}
PF_TYPED_REGISTER(cxx_mul, "cxx.mul");

PF_TYPED_DEFINE(cxx_kinds, INT, (STR, s), (FLOAT, x), (BOOL, flag), (ANY, v), (DTYPE, dt),
                (DEVICE, dev), (PTR, p), (OBJECT, o)) {
  (void)v;
  (void)o;
  int64_t r = static_cast<int64_t>(s.size) + static_cast<int64_t>(x) + flag + dt.bits +
              dev.device_type + (p == nullptr);
  *result = pf_any_int(r);
  return 0;
}

PF_TYPED_DEFINE(cxx_tensor, INT, (TENSOR, t), (BYTES, b), (FUNCTION, f)) {
  (void)f;
  *result = pf_any_int(static_cast<int64_t>(t->ndim) + static_cast<int64_t>(b.size));
  return 0;
}

static const pf_abi_stamp_t cxx_stamp = PF_ABI_STAMP_INIT;

/* PF_SIGNATURE at namespace scope, and below with a name held in a variable */
static const pf_signature_t cxx_file_sig =
    PF_SIGNATURE("cxx.file", PF_PARAM_INT, {"a", PF_PARAM_INT}, {"b", PF_PARAM_STR});
static int cxx_file_impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_int(args[0].i + static_cast<int64_t>(args[1].s.size));
  return 0;
}
/* registered from that signature, which C++ initialises dynamically: a constructor function ran
 * before it and found it zero (review) */
PF_REGISTER_GLOBAL_TYPED(&cxx_file_sig, cxx_file_impl);

#define CXX_CHECK(cond)                                                                            \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

/* Calls global `name` on two ints; the result's payload (as int64 bits) or -1 on error. */
static pf_any_t cxx_call2(const char* name, pf_any_t a, pf_any_t b) {
  pf_any_t args[2] = {a, b};
  pf_any_t r = pf_any_none();
  if (pf_global_call(name, args, 2, &r) != 0) {
    pf_error_clear();
    r = pf_any_none();
  }
  return r;
}

static int pf_cxx_check(void) {
  int failures = 0;
  CXX_CHECK(cxx_stamp.magic == PF_ABI_MAGIC && __packfn_abi.major == PF_ABI_VERSION_MAJOR);
  CXX_CHECK(pf_global_static_failures() == 0);

  /* the registrations ran */
  pf_any_t r = cxx_call2("cxx.add", pf_any_int(2), pf_any_int(3));
  CXX_CHECK(r.type_index == PF_TYPE_INT && r.v_int64 == 5);
  r = cxx_call2("cxx.mul", pf_any_int(4), pf_any_int(5));
  CXX_CHECK(r.type_index == PF_TYPE_INT && r.v_int64 == 20);
  r = cxx_call2("cxx.scale", pf_any_float(1.5), pf_any_int(4));
  CXX_CHECK(r.type_index == PF_TYPE_FLOAT && r.v_float64 == 6.0);
  r = cxx_call2("cxx.file", pf_any_int(4), pf_any_cstr("abc"));
  CXX_CHECK(r.type_index == PF_TYPE_INT && r.v_int64 == 7);

  /* the exports, called directly and through the system module */
  pf_any_t args2[2] = {pf_any_int(7), pf_any_int(8)};
  r = pf_any_none();
  CXX_CHECK(__packfn_cxx_add(nullptr, args2, 2, &r) == 0 && r.v_int64 == 15);
  CXX_CHECK(__packfn_meta_cxx_add_doc.magic == PF_EXPORT_META_MAGIC);
  CXX_CHECK(__packfn_meta_cxx_scale.typed_sig == &cxx_scale_sig);
  pf_object_t* sys = nullptr;
  pf_object_t* fn = nullptr;
  CXX_CHECK(pf_module_system(&sys) == 0);
  CXX_CHECK(pf_module_get_function(sys, "cxx_add_doc", &fn) == 0 && fn != nullptr);
  const char* sig = fn ? pf_function_signature(fn) : nullptr;
  CXX_CHECK(sig != nullptr && std::strcmp(sig, "cxx_add_doc(a: int, b: int) -> int") == 0);
  pf_object_release(fn);
  fn = nullptr;
  pf_any_t args_scale[2] = {pf_any_float(2.0), pf_any_int(3)};
  r = pf_any_none();
  CXX_CHECK(pf_module_call(sys, "cxx_scale", args_scale, 2, &r) == 0 && r.v_float64 == 6.0);
  pf_object_release(sys);

  /* lists and dicts (container.h); the process has no TVM-FFI: joining finds none */
  pf_object_t* list = nullptr;
  CXX_CHECK(pf_list_create(&list) == 0);
  pf_any_t one = pf_any_int(1);
  CXX_CHECK(pf_list_append(list, &one) == 0);
  size_t list_count = 0;
  CXX_CHECK(pf_array_count(list, &list_count) == 0 && list_count == 1);
  pf_object_release(list);
  pf_object_t* dict = nullptr;
  CXX_CHECK(pf_dict_create(&dict) == 0);
  CXX_CHECK(pf_dict_set(dict, &one, &one) == 0);
  CXX_CHECK(pf_dict_count(dict, &list_count) == 0 && list_count == 1);
  pf_object_release(dict);
  CXX_CHECK(pf_tvm_ffi_join() == 0 && pf_tvm_ffi_joined() == 0);

  /* PF_TYPED_CREATE with every kind */
  CXX_CHECK(PF_TYPED_CREATE(cxx_kinds, &fn) == 0);
  pf_object_t* map = nullptr;
  CXX_CHECK(pf_map_create(&map) == 0);
  pf_any_t kinds_args[8] = {pf_any_cstr("abcd"),
                            pf_any_float(10.0),
                            pf_any_bool(1),
                            pf_any_none(),
                            pf_any_dtype(PF_DTYPE_FLOAT32),
                            pf_any_device(PF_DEVICE_CPU),
                            pf_any_none(),
                            pf_any_object(map)};
  r = pf_any_none();
  CXX_CHECK(pf_function_call(fn, kinds_args, 8, &r) == 0 && r.v_int64 == 4 + 10 + 1 + 32 + 1 + 1);
  kinds_args[0] = pf_any_int(1);
  CXX_CHECK(pf_function_call(fn, kinds_args, 8, &r) == -1);
  pf_object_t* err = pf_error_take();
  CXX_CHECK(err != nullptr && std::strcmp(pf_error_kind(err), PF_ERR_TYPE) == 0);
  pf_object_release(err);
  pf_object_release(map);
  pf_object_release(fn);

  /* tensors, bytes and functions through PF_TYPED_DEFINE; PF_DTYPES in a spec */
  int64_t shape[2] = {2, 3};
  pf_object_t* t = nullptr;
  CXX_CHECK(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t) == 0);
  pf_tensor_spec_t spec = {
      PF_DTYPES(PF_DTYPE_FLOAT32, PF_DTYPE_FLOAT64), PF_DEV_CPU, 2, 0, nullptr, 1, nullptr};
  CXX_CHECK(spec.num_dtypes == 2 &&
            pf_dltensor_check(pf_tensor_dltensor(t), &spec, "cxx", 0, "x") == 0);
  pf_object_t* add = nullptr;
  CXX_CHECK(pf_global_get("cxx.add", &add) == 0 && add != nullptr);
  CXX_CHECK(PF_TYPED_CREATE(cxx_tensor, &fn) == 0);
  pf_byte_array_t bytes = {"xyz", 3};
  pf_any_t targs[3] = {pf_any_object(t), pf_any_byte_array(&bytes), pf_any_object(add)};
  r = pf_any_none();
  CXX_CHECK(pf_function_call(fn, targs, 3, &r) == 0 && r.v_int64 == 5);
  pf_object_release(fn);
  pf_object_release(add);
  pf_object_release(t);

  /* PF_SIGNATURE and pf_function_create_typed */
  CXX_CHECK(cxx_file_sig.num_params == 2 && cxx_file_sig.params[1].kind == PF_PARAM_STR);
  const char* cxx_scale2_name = "cxx.scale2";
  pf_signature_t s =
      PF_SIGNATURE(cxx_scale2_name, PF_PARAM_FLOAT, {"x", PF_PARAM_FLOAT}, {"k", PF_PARAM_INT});
  CXX_CHECK(s.num_params == 2);
  CXX_CHECK(pf_function_create_typed(&s, cxx_scale_impl, nullptr, nullptr, &fn) == 0);
  CXX_CHECK(std::strcmp(pf_function_signature(fn), "cxx.scale2(x: float, k: int) -> float") == 0);
  pf_object_release(fn);

  /* a missing function: KeyError with a suggestion */
  r = pf_any_none();
  CXX_CHECK(pf_global_call("cxx.mull", args2, 2, &r) == -1);
  err = pf_error_take();
  CXX_CHECK(err != nullptr && std::strcmp(pf_error_kind(err), PF_ERR_KEY) == 0);
  CXX_CHECK(err != nullptr &&
            std::strstr(pf_error_message(err), "did you mean 'cxx.mul'?") != nullptr);
  pf_object_release(err);
  char near[32];
  CXX_CHECK(pf_global_suggest("cxx.ad", near, sizeof near) == 1 &&
            std::strcmp(near, "cxx.add") == 0);
  return failures;
}

#endif /* PACKFN_TESTS_CXX_API_USE_H_ */
