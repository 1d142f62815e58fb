/* echo.c: the library tests/test_cli.py loads with --lib: functions that show how packfn call
 * typed its arguments, and that return containers and tensors for the printer; and a stand-in
 * device in host memory, so that `--device vulkan` runs without a GPU. */
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

/* echo(args...) -> Array: the arguments themselves */
static int echo(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  pf_object_t* array;
  if (pf_array_create(args, (size_t)num_args, &array) != 0)
    return -1;
  *result = pf_any_object(array);
  return 0;
}
PF_EXPORT_DOC(echo, echo, "echo(*args) -> Array", "Returns its arguments as an array.");

/* types(args...) -> str: the type names of the arguments, space-separated */
static int types(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  char text[1024] = "";
  for (int32_t i = 0; i < num_args; ++i) {
    size_t used = strlen(text);
    snprintf(text + used, sizeof text - used, "%s%s", i > 0 ? " " : "", pf_any_type_name(&args[i]));
  }
  return pf_string_from_cstr(text, result);
}
PF_EXPORT(types, types);

/* ones(n) -> Tensor: float64 ones of shape (n,) */
static int ones(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t n;
  if (num_args != 1 || pf_any_as_int(&args[0], &n) != 0) {
    pf_error_clear();
    PF_ERROR_SET(PF_ERR_TYPE, "ones: expected one int");
    return -1;
  }
  pf_object_t* t;
  if (pf_tensor_empty(&n, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &t) != 0)
    return -1;
  double* data = pf_dltensor_data(pf_tensor_dltensor(t));
  for (int64_t i = 0; i < n; ++i)
    data[i] = 1.0;
  *result = pf_any_object(t);
  return 0;
}
PF_EXPORT(ones, ones);

/* summary() -> Map: {"name": "cli", "shape": (2, 3), "values": [1, 2.5]} */
static int summary(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  static const int64_t dims[] = {2, 3};
  pf_object_t *map = NULL, *shape = NULL, *values = NULL;
  pf_any_t items[2] = {pf_any_int(1), pf_any_float(2.5)};
  pf_any_t k1 = pf_any_cstr("name"), v1 = pf_any_cstr("cli"), k2 = pf_any_cstr("shape"),
           k3 = pf_any_cstr("values");
  int rc = -1;
  if (pf_map_create(&map) == 0 && pf_shape_create(dims, 2, &shape) == 0 &&
      pf_array_create(items, 2, &values) == 0 && pf_map_set(map, &k1, &v1) == 0) {
    pf_any_t v2 = pf_any_object(shape), v3 = pf_any_object(values);
    rc = pf_map_set(map, &k2, &v2) == 0 && pf_map_set(map, &k3, &v3) == 0 ? 0 : -1;
  }
  pf_object_release(shape);
  pf_object_release(values);
  if (rc != 0) {
    pf_object_release(map);
    return -1;
  }
  *result = pf_any_object(map);
  return 0;
}
PF_EXPORT(summary, summary);

/* twice(x: int) -> int, registered in the global table as cli_test.twice when the library
 * loads (not exported): `packfn list LIB` and `packfn call --lib LIB cli_test.twice` find it. */
PF_TYPED_DEFINE(twice, INT, (INT, x)) {
  *result = pf_any_int(2 * x);
  return 0;
}
PF_TYPED_REGISTER(twice, "cli_test.twice");

/* get_twice() -> Function: the function twice, for printing a function result */
static int get_twice(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  pf_object_t* fn;
  if (PF_TYPED_CREATE(twice, &fn) != 0)
    return -1;
  *result = pf_any_object(fn);
  return 0;
}
PF_EXPORT_DOC(get_twice, get_twice, "get_twice() -> Function", "Returns the function twice.");

/* fill_ones(tensors...) -> None: sets every element of each float32 tensor argument to 1, for
 * calls with several outputs of different sizes */
static int fill_ones(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)result;
  for (int32_t i = 0; i < num_args; ++i) {
    DLTensor* t = args[i].type_index == PF_TYPE_TENSOR ? pf_tensor_dltensor(args[i].v_obj) : NULL;
    if (t == NULL || !pf_dtype_equal(t->dtype, PF_DTYPE_FLOAT32)) {
      PF_ERROR_SET(PF_ERR_TYPE, "fill_ones: argument %d: expected a float32 tensor", (int)i);
      return -1;
    }
    float* data = pf_dltensor_data(t);
    for (int64_t k = 0, n = pf_dltensor_numel(t); k < n; ++k)
      data[k] = 1.0f;
  }
  return 0;
}
PF_EXPORT(fill_ones, fill_ones);

/* silent() returns -1 without raising: a broken function, which the CLI must report as the
 * runtime's RuntimeError naming it (issue 10, defect 7). */
static int silent(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  return -1;
}
PF_EXPORT(silent, silent);

/* first(x, ...) -> x: its first argument itself (a tensor result that is also an argument) */
static int first(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  if (num_args < 1) {
    PF_ERROR_SET(PF_ERR_TYPE, "first: expected at least one argument");
    return -1;
  }
  *result = args[0];
  if (args[0].type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    pf_object_retain(args[0].v_obj);
  return 0;
}
PF_EXPORT(first, first);

/* deep(n) -> Tensor: a float32 tensor of n dimensions of extent 1 holding 1 (more than a .npy
 * file can hold when n > 32) */
static int deep(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t n, shape[64];
  if (num_args != 1 || pf_any_as_int(&args[0], &n) != 0 || n < 0 || n > 64) {
    pf_error_clear();
    PF_ERROR_SET(PF_ERR_TYPE, "deep: expected one int from 0 to 64");
    return -1;
  }
  for (int64_t i = 0; i < n; ++i)
    shape[i] = 1;
  pf_object_t* t;
  if (pf_tensor_empty(shape, (int32_t)n, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t) != 0)
    return -1;
  *(float*)pf_dltensor_data(pf_tensor_dltensor(t)) = 1.0f;
  *result = pf_any_object(t);
  return 0;
}
PF_EXPORT(deep, deep);

/* transpose(x) -> Tensor: a view of the 2-d tensor x with its axes swapped (not contiguous) */
static int transpose(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  DLTensor* t = num_args == 1 && args[0].type_index == PF_TYPE_TENSOR
                    ? pf_tensor_dltensor(args[0].v_obj)
                    : NULL;
  if (t == NULL || t->ndim != 2) {
    PF_ERROR_SET(PF_ERR_TYPE, "transpose: expected one 2-d tensor");
    return -1;
  }
  int32_t axes[2] = {1, 0};
  pf_object_t* view;
  if (pf_tensor_permute(args[0].v_obj, axes, &view) != 0)
    return -1;
  *result = pf_any_object(view);
  return 0;
}
PF_EXPORT(transpose, transpose);

/* A stand-in device: tensors on "vulkan" live in host memory, through packfn's own CPU
 * allocator (its hooks take any device and copy with memmove), installed when the library
 * loads, so that `packfn call --lib ECHO --device vulkan ...` takes the --device path (copies
 * there and back) on any machine. */
__attribute__((constructor)) static void install_stand_in_device(void) {
  pf_allocator_t cpu;
  if (pf_allocator_get(PF_DEV_CPU, &cpu) != 0 || pf_allocator_set(PF_DEV_VULKAN, &cpu) != 0)
    pf_error_clear();
}
