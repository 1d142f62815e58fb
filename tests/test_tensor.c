/* Tests of the tensor layer's core: data types and devices as text, tensor creation and
 * wrapping, DLTensor helpers and checks (views are in test_tensor_view.c; this file's
 * make_suite runs them too). */
#include <stdint.h>

#include "pf_test_tensor.h"

/* ---- data types ---- */

START_TEST(test_dtype_parse_names) {
  static const struct {
    const char* text;
    uint8_t code, bits;
    uint16_t lanes;
  } cases[] = {
      {"bool", PF_DL_BOOL, 8, 1},
      {"int8", PF_DL_INT, 8, 1},
      {"int4", PF_DL_INT, 4, 1},
      {"int64", PF_DL_INT, 64, 1},
      {"uint1", PF_DL_UINT, 1, 1},
      {"uint16", PF_DL_UINT, 16, 1},
      {"float16", PF_DL_FLOAT, 16, 1},
      {"float32", PF_DL_FLOAT, 32, 1},
      {"float64", PF_DL_FLOAT, 64, 1},
      {"bfloat16", PF_DL_BFLOAT, 16, 1},
      {"complex64", PF_DL_COMPLEX, 64, 1},
      {"complex128", PF_DL_COMPLEX, 128, 1},
      {"handle", PF_DL_OPAQUE_HANDLE, 64, 1},
      {"float8_e4m3", PF_DL_FLOAT8_E4M3, 8, 1},
      {"float8_e4m3fn", PF_DL_FLOAT8_E4M3FN, 8, 1},
      {"float8_e4m3fnuz", PF_DL_FLOAT8_E4M3FNUZ, 8, 1},
      {"float8_e4m3b11fnuz", PF_DL_FLOAT8_E4M3B11FNUZ, 8, 1},
      {"float8_e5m2", PF_DL_FLOAT8_E5M2, 8, 1},
      {"float8_e8m0fnu", PF_DL_FLOAT8_E8M0FNU, 8, 1},
      {"float6_e3m2fn", PF_DL_FLOAT6_E3M2FN, 6, 1},
      {"float4_e2m1fn", PF_DL_FLOAT4_E2M1FN, 4, 1},
      {"int8x4", PF_DL_INT, 8, 4},
      {"float32x2", PF_DL_FLOAT, 32, 2},
      {"complex64x2", PF_DL_COMPLEX, 64, 2},
      {"boolx8", PF_DL_BOOL, 8, 8},
      {"float8_e4m3fnx16", PF_DL_FLOAT8_E4M3FN, 8, 16},
      {"uint8x65535", PF_DL_UINT, 8, 65535},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    DLDataType t;
    ck_assert_msg(pf_dtype_parse(cases[i].text, &t) == 0, "parse %s", cases[i].text);
    ck_assert_msg(pf_dtype_equal(t, pf_dtype(cases[i].code, cases[i].bits, cases[i].lanes)),
                  "%s gave {%u, %u, %u}", cases[i].text, t.code, t.bits, t.lanes);
    ck_assert(pf_dtype_is_valid(t));
    char buf[PF_DTYPE_STR_MAX];
    ck_assert_int_eq(pf_dtype_format(t, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, cases[i].text);
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_dtype_parse_errors) {
  static const char* bad[] = {"",         "float",      "float8",   "int0",           "int65",
                              "int128",   "float33",    "bfloat32", "complex16",      "int8x0",
                              "int8x",    "int8x65536", "int8y",    "bool8",          "float32 ",
                              " float32", "Float32",    "f32",      "float8_e4m3fnq", "uintx2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    DLDataType t = PF_DTYPE_FLOAT32;
    ck_assert_msg(pf_dtype_parse(bad[i], &t) == -1, "'%s' parsed", bad[i]);
    ck_assert_int_eq(t.code | t.bits | t.lanes, 0);
    PF_ASSERT_RAISED("ValueError", "pf_dtype_parse: argument s: expected a data type");
  }
  DLDataType t;
  ck_assert_int_eq(pf_dtype_parse("int99", &t), -1);
  PF_ASSERT_RAISED("ValueError", "got \"int99\"");
  /* each type has one name: a width or lane count with a leading zero would parse to a type
   * that formats differently (found by review) */
  static const char* padded[] = {"int08",        "float032",         "int8x04",
                                 "uint008x0002", "int8x00",          "complex064",
                                 "boolx04",      "float8_e4m3fnx02", "int00"};
  for (size_t i = 0; i < sizeof padded / sizeof padded[0]; ++i) {
    t = PF_DTYPE_FLOAT32;
    ck_assert_msg(pf_dtype_parse(padded[i], &t) == -1, "'%s' parsed", padded[i]);
    ck_assert_int_eq(t.code | t.bits | t.lanes, 0);
    PF_ASSERT_RAISED("ValueError", "pf_dtype_parse: argument s: expected a data type");
  }
  /* nor a lane count of 1, which formats as no lane count at all ("int8x1" gave int8) */
  static const char* one_lane[] = {"int8x1", "float32x1", "boolx1", "float8_e4m3fnx1", "handlex1"};
  for (size_t i = 0; i < sizeof one_lane / sizeof one_lane[0]; ++i) {
    t = PF_DTYPE_FLOAT32;
    ck_assert_msg(pf_dtype_parse(one_lane[i], &t) == -1, "'%s' parsed", one_lane[i]);
    ck_assert_int_eq(t.code | t.bits | t.lanes, 0);
    PF_ASSERT_RAISED("ValueError", "pf_dtype_parse: argument s: expected a data type");
  }
  ck_assert_int_eq(pf_dtype_parse("int8x10", &t), 0); /* a zero after the first digit is fine */
  ck_assert(pf_dtype_equal(t, pf_dtype(PF_DL_INT, 8, 10)));
  ck_assert_int_eq(pf_dtype_parse(NULL, &t), -1);
  PF_ASSERT_RAISED("ValueError", "argument s: expected a pointer, got NULL");
  ck_assert_int_eq(pf_dtype_parse("int8", NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
}
END_TEST

START_TEST(test_dtype_format_and_validity) {
  char buf[PF_DTYPE_STR_MAX];
  /* invalid types print their fields and still succeed */
  ck_assert_int_eq(pf_dtype_format(pf_dtype(200, 8, 1), buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "dtype(code=200, bits=8, lanes=1)");
  ck_assert_int_eq(pf_dtype_format(pf_dtype(255, 255, 65535), buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "dtype(code=255, bits=255, lanes=65535)");
  ck_assert(!pf_dtype_is_valid(pf_dtype(PF_DL_FLOAT, 32, 0)));
  ck_assert(!pf_dtype_is_valid(pf_dtype(PF_DL_BOOL, 1, 1)));
  ck_assert(!pf_dtype_is_valid(pf_dtype(PF_DL_BFLOAT, 32, 1)));
  ck_assert(!pf_dtype_is_valid(pf_dtype(PF_DL_FLOAT4_E2M1FN, 8, 1)));
  ck_assert(!pf_dtype_is_valid(pf_dtype(PF_DL_INT, 0, 1)));
  ck_assert(!pf_dtype_is_valid(pf_dtype(99, 8, 1)));
  ck_assert_int_eq(pf_dtype_format(pf_dtype(PF_DL_BOOL, 1, 1), buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "dtype(code=6, bits=1, lanes=1)");
  /* too small: ValueError, what fits is kept */
  char small[6];
  ck_assert_int_eq(pf_dtype_format(PF_DTYPE_FLOAT32, small, sizeof small), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_dtype_format: argument size: expected at least 8 bytes, got 6");
  ck_assert_str_eq(small, "float");
  ck_assert_int_eq(pf_dtype_format(PF_DTYPE_FLOAT32, NULL, 8), -1);
  PF_ASSERT_RAISED("ValueError", "argument buf");
  ck_assert_int_eq(pf_dtype_format(PF_DTYPE_FLOAT32, buf, 0), -1);
  PF_ASSERT_RAISED("ValueError", "got 0");
  /* sizes */
  ck_assert_uint_eq(pf_dtype_bytes(PF_DTYPE_FLOAT32), 4);
  ck_assert_uint_eq(pf_dtype_bytes(PF_DTYPE_BOOL), 1);
  ck_assert_uint_eq(pf_dtype_bytes(pf_dtype(PF_DL_INT, 8, 4)), 4);
  ck_assert_uint_eq(pf_dtype_bytes(pf_dtype(PF_DL_INT, 4, 1)), 0);
  ck_assert_uint_eq(pf_dtype_bytes(pf_dtype(PF_DL_INT, 4, 2)), 1);
  ck_assert(!pf_dtype_equal(PF_DTYPE_FLOAT32, pf_dtype(PF_DL_FLOAT, 32, 2)));
}
END_TEST

/* ---- devices ---- */

START_TEST(test_device_parse_format) {
  static const struct {
    const char* text;
    int32_t type, id;
    const char* printed;
  } cases[] = {
      {"cpu", PF_DEV_CPU, 0, "cpu:0"},
      {"cpu:0", PF_DEV_CPU, 0, "cpu:0"},
      {"cuda", PF_DEV_CUDA, 0, "cuda:0"},
      {"cuda:1", PF_DEV_CUDA, 1, "cuda:1"},
      {"cuda_host", PF_DEV_CUDA_HOST, 0, "cuda_host:0"},
      {"cuda_managed:3", PF_DEV_CUDA_MANAGED, 3, "cuda_managed:3"},
      {"rocm:2147483647", PF_DEV_ROCM, INT32_MAX, "rocm:2147483647"},
      {"rocm_host", PF_DEV_ROCM_HOST, 0, "rocm_host:0"},
      {"opencl", PF_DEV_OPENCL, 0, "opencl:0"},
      {"vulkan:2", PF_DEV_VULKAN, 2, "vulkan:2"},
      {"metal", PF_DEV_METAL, 0, "metal:0"},
      {"vpi", PF_DEV_VPI, 0, "vpi:0"},
      {"ext_dev", PF_DEV_EXT_DEV, 0, "ext_dev:0"},
      {"oneapi", PF_DEV_ONEAPI, 0, "oneapi:0"},
      {"webgpu", PF_DEV_WEBGPU, 0, "webgpu:0"},
      {"hexagon", PF_DEV_HEXAGON, 0, "hexagon:0"},
      {"maia", PF_DEV_MAIA, 0, "maia:0"},
      {"trn:7", PF_DEV_TRN, 7, "trn:7"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    DLDevice d;
    ck_assert_msg(pf_device_parse(cases[i].text, &d) == 0, "parse %s", cases[i].text);
    ck_assert(pf_device_equal(d, pf_device(cases[i].type, cases[i].id)));
    char buf[PF_DEVICE_STR_MAX];
    ck_assert_int_eq(pf_device_format(d, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, cases[i].printed);
  }
  char buf[PF_DEVICE_STR_MAX];
  ck_assert_int_eq(pf_device_format(pf_device(99, 1), buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "device(99):1");
  ck_assert_str_eq(pf_device_type_name(PF_DEV_CUDA), "cuda");
  ck_assert_ptr_null(pf_device_type_name(5));
  ck_assert_ptr_null(pf_device_type_name(-1));
  ck_assert_ptr_null(pf_device_type_name(1000));
  ck_assert(!pf_device_equal(pf_device(PF_DEV_CUDA, 0), pf_device(PF_DEV_CUDA, 1)));
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_device_errors) {
  static const char* bad[] = {"",        "gpu",       "cuda:",   "cuda:-1", "cuda:2147483648",
                              "cuda:1x", "cuda::1",   "CUDA",    "cpu:0:1", " cpu",
                              "cuda_",   "device(2)", "cuda:+1", "cuda:01", "cpu:00"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    DLDevice d = PF_DEVICE_CPU;
    ck_assert_msg(pf_device_parse(bad[i], &d) == -1, "'%s' parsed", bad[i]);
    ck_assert_int_eq(d.device_type, 0);
    PF_ASSERT_RAISED("ValueError", "pf_device_parse: argument s: expected a device");
  }
  DLDevice d;
  ck_assert_int_eq(pf_device_parse(NULL, &d), -1);
  PF_ASSERT_RAISED("ValueError", "argument s: expected a pointer");
  ck_assert_int_eq(pf_device_parse("cpu", NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  char small[5];
  ck_assert_int_eq(pf_device_format(pf_device(PF_DEV_CUDA, 12), small, sizeof small), -1);
  PF_ASSERT_RAISED("ValueError", "pf_device_format: argument size: expected at least 8 bytes");
  ck_assert_str_eq(small, "cuda");
  ck_assert_int_eq(pf_device_format(PF_DEVICE_CPU, NULL, 8), -1);
  PF_ASSERT_RAISED("ValueError", "argument buf");
}
END_TEST

/* ---- creating tensors ---- */

START_TEST(test_empty) {
  int64_t shape[3] = {2, 3, 4};
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_empty(shape, 3, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), 0);
  ck_assert_int_eq(t->type_index, PF_TYPE_TENSOR);
  ck_assert_uint_eq(pf_object_strong_count(t), 1);
  DLTensor* dl = pf_tensor_dltensor(t);
  ck_assert_ptr_eq(dl, (char*)t + 24);
  ck_assert_int_eq(dl->ndim, 3);
  ck_assert(dl->shape != shape);
  ck_assert_int_eq(dl->shape[0], 2);
  ck_assert_int_eq(dl->shape[2], 4);
  ck_assert_int_eq(dl->strides[0], 12);
  ck_assert_int_eq(dl->strides[1], 4);
  ck_assert_int_eq(dl->strides[2], 1);
  ck_assert(pf_dtype_equal(dl->dtype, PF_DTYPE_FLOAT32));
  ck_assert(pf_device_equal(dl->device, PF_DEVICE_CPU));
  ck_assert_uint_eq(dl->byte_offset, 0);
  ck_assert_uint_eq((uintptr_t)dl->data % PF_TENSOR_ALIGNMENT, 0);
  ck_assert_int_eq(pf_dltensor_numel(dl), 24);
  ck_assert_uint_eq(pf_dltensor_nbytes(dl), 96);
  ck_assert(pf_dltensor_is_contiguous(dl));
  memset(pf_dltensor_data(dl), 0, 96); /* the memory is really there (ASan, valgrind) */
  ck_assert(!pf_tensor_is_read_only(t));
  /* an Any holds it like any object */
  pf_any_t v = pf_any_object(t);
  DLTensor* via;
  ck_assert_int_eq(pf_any_as_dltensor(&v, &via), 0);
  ck_assert_ptr_eq(via, dl);
  pf_object_release(t);

  /* 0-d and empty tensors */
  ck_assert_int_eq(pf_tensor_empty(NULL, 0, PF_DTYPE_INT64, PF_DEVICE_CPU, &t), 0);
  ck_assert_int_eq(pf_dltensor_numel(pf_tensor_dltensor(t)), 1);
  *(int64_t*)pf_dltensor_data(pf_tensor_dltensor(t)) = 7;
  pf_object_release(t);
  int64_t empty[2] = {0, 5};
  ck_assert_int_eq(pf_tensor_empty(empty, 2, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), 0);
  dl = pf_tensor_dltensor(t);
  ck_assert_ptr_nonnull(dl->data);
  ck_assert_int_eq(pf_dltensor_numel(dl), 0);
  ck_assert_uint_eq(pf_dltensor_nbytes(dl), 0);
  ck_assert_int_eq(dl->strides[0], 5);
  pf_object_release(t);
  /* vector lanes count in the size */
  ck_assert_int_eq(
      pf_tensor_empty(&(int64_t){3}, 1, pf_dtype(PF_DL_FLOAT, 32, 4), PF_DEVICE_CPU, &t), 0);
  ck_assert_uint_eq(pf_dltensor_nbytes(pf_tensor_dltensor(t)), 48);
  ck_assert_uint_eq((uintptr_t)pf_tensor_dltensor(t)->data % PF_TENSOR_ALIGNMENT, 0);
  memset(pf_tensor_dltensor(t)->data, 0, 48);
  pf_object_release(t);
  /* sub-byte types pack */
  int64_t three = 3;
  ck_assert_int_eq(pf_tensor_empty(&three, 1, pf_dtype(PF_DL_INT, 4, 1), PF_DEVICE_CPU, &t), 0);
  ck_assert_uint_eq(pf_dltensor_nbytes(pf_tensor_dltensor(t)), 2);
  pf_object_release(t);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Buffers on both sides of the slab sizes (4 KiB): every one aligned, all of its bytes writable
 * (ASan, valgrind), and freed whole by the release (a buffer past 4 KiB lies inside a larger
 * malloc block: freeing its aligned address instead would be caught by the checkers). */
START_TEST(test_empty_sizes) {
  const int64_t sizes[] = {
      1, 255, 256, 4095, 4096, 4097, 5000, 65536 + 3, INT64_C(1) << 20, (INT64_C(1) << 22) + 17};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    pf_object_t* t;
    ck_assert_int_eq(pf_tensor_empty(&sizes[i], 1, PF_DTYPE_UINT8, PF_DEVICE_CPU, &t), 0);
    DLTensor* dl = pf_tensor_dltensor(t);
    ck_assert_uint_eq((uintptr_t)dl->data % PF_TENSOR_ALIGNMENT, 0);
    ck_assert_uint_eq(pf_dltensor_nbytes(dl), (uint64_t)sizes[i]);
    memset(dl->data, 0x5a, (size_t)sizes[i]);
    /* a view keeps the buffer alive past the tensor's own release */
    pf_object_t* v;
    int64_t one = 1;
    ck_assert_int_eq(pf_tensor_view(t, 1, &one, NULL, sizes[i] - 1, &v), 0);
    pf_object_release(t);
    ck_assert_uint_eq(*(uint8_t*)pf_dltensor_data(pf_tensor_dltensor(v)), 0x5a);
    pf_object_release(v);
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_empty_errors) {
  int64_t shape[2] = {2, -3};
  pf_object_t* t = (pf_object_t*)&t;
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_empty: argument shape: expected extents >= 0, got -3 at axis 1");
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  /* each message names the argument at fault (ndim and dtype read "argument shape" before
   * review) */
  ck_assert_int_eq(pf_tensor_empty(shape, -1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_empty: argument ndim: expected ndim in 0..64, got -1");
  ck_assert_int_eq(pf_tensor_empty(shape, 65, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_empty: argument ndim: expected ndim in 0..64, got 65");
  ck_assert_int_eq(pf_tensor_empty(NULL, 2, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_empty: argument shape: expected a shape of 2 extents, got NULL");
  shape[1] = 3;
  ck_assert_int_eq(pf_tensor_empty(shape, 2, pf_dtype(PF_DL_FLOAT, 32, 0), PF_DEVICE_CPU, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_empty: argument dtype: expected a valid data type, "
                                 "got dtype(code=2, bits=32, lanes=0)");
  ck_assert_int_eq(pf_tensor_empty(shape, 2, pf_dtype(PF_DL_FLOAT, 33, 1), PF_DEVICE_CPU, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_empty: argument dtype: expected a valid data type, "
                                 "got dtype(code=2, bits=33, lanes=1)");
  int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 2};
  ck_assert_int_eq(pf_tensor_empty(huge, 3, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_empty: argument shape: expected a size that fits in memory");
  int64_t big[2] = {INT64_C(1) << 28, INT64_C(1) << 28}; /* 2^59 bytes */
  ck_assert_int_eq(pf_tensor_empty(big, 2, PF_DTYPE_UINT8, PF_DEVICE_CPU, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("MemoryError", "out of memory");
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, pf_device(PF_DEV_VULKAN, 0), &t),
                   -1);
  PF_ASSERT_RAISED("KeyError", "pf_tensor_empty: no allocator for device type vulkan (7)");
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, pf_device(PF_DEV_CUDA, 0), &t), -1);
  PF_ASSERT_RAISED("KeyError", "link libpackfn_cuda");
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, pf_device(500, 0), &t), -1);
  PF_ASSERT_RAISED("KeyError", "device(500)");
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, pf_device(PF_DEV_CPU, -1), &t), -1);
  PF_ASSERT_RAISED("ValueError", "expected a device index >= 0, got -1");
}
END_TEST

START_TEST(test_dltensor_of_non_tensors) {
  ck_assert_ptr_null(pf_tensor_dltensor(NULL));
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("not a tensor", 12, &s), 0);
  ck_assert_ptr_null(pf_tensor_dltensor(s));
  ck_assert(!pf_tensor_is_read_only(s));
  ck_assert(!pf_tensor_is_read_only(NULL));
  pf_object_t* v = (pf_object_t*)&v;
  ck_assert_int_eq(pf_tensor_reshape(s, 0, NULL, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("TypeError", "pf_tensor_reshape: argument tensor: expected a Tensor, got str");
  ck_assert_int_eq(pf_tensor_slice(NULL, 0, 0, 1, 1, &v), -1);
  PF_ASSERT_RAISED("TypeError", "expected a Tensor, got NULL");
  pf_object_release(s);
}
END_TEST

static int g_freed;
static void count_free(void* ctx) {
  g_freed += *(int*)ctx;
}

START_TEST(test_from_dltensor) {
  double buf[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {3, 2};
  int64_t strides[2] = {1, 3}; /* Fortran order */
  DLTensor desc = {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, strides, 0};
  int one = 1;
  g_freed = 0;
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, &one, count_free, &t), 0);
  shape[0] = 99; /* copied: the tensor does not see later changes */
  strides[0] = 99;
  DLTensor* dl = pf_tensor_dltensor(t);
  ck_assert_ptr_eq(dl->data, buf);
  ck_assert_int_eq(dl->shape[0], 3);
  ck_assert_int_eq(dl->strides[0], 1);
  ck_assert(!pf_dltensor_is_contiguous(dl));
  ck_assert(at(t, (int64_t[]){1, 1}) == 4.0);
  pf_object_t* v;
  ck_assert_int_eq(pf_tensor_select(t, 1, 0, &v), 0);
  pf_object_release(t);
  ck_assert_int_eq(g_freed, 0); /* the view keeps the memory */
  ck_assert(at(v, (int64_t[]){2}) == 2.0);
  pf_object_release(v);
  ck_assert_int_eq(g_freed, 1);

  /* compact strides are filled in; no deleter is fine */
  shape[0] = 2;
  shape[1] = 3;
  desc.strides = NULL;
  desc.byte_offset = 8;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), 0);
  dl = pf_tensor_dltensor(t);
  ck_assert_int_eq(dl->strides[0], 3);
  ck_assert_int_eq(dl->strides[1], 1);
  ck_assert(at(t, (int64_t[]){0, 0}) == 1.0);
  pf_object_release(t);
  /* an empty tensor may have no data */
  shape[0] = 0;
  desc.data = NULL;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), 0);
  pf_object_release(t);
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_from_dltensor_errors) {
  double buf[4];
  int64_t shape[1] = {4};
  int64_t strides[1] = {INT64_MIN};
  int one = 1;
  g_freed = 0;
  pf_object_t* t = (pf_object_t*)&t;
  DLTensor desc = {NULL, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, shape, NULL, 0};
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, &one, count_free, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED(
      "ValueError",
      "pf_tensor_from_dltensor: argument desc: expected data for 4 elements, got NULL");
  desc.data = buf;
  desc.strides = strides;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, &one, count_free, &t), -1);
  PF_ASSERT_RAISED("ValueError", "expected strides whose offsets fit in int64");
  strides[0] = INT64_MAX / 2;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, &one, count_free, &t), -1);
  PF_ASSERT_RAISED("ValueError", "expected strides whose offsets fit in int64");
  desc.strides = NULL;
  desc.device.device_id = -2;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, &one, count_free, &t), -1);
  PF_ASSERT_RAISED("ValueError", "expected a device index >= 0, got -2");
  desc.device.device_id = 0;
  desc.dtype = pf_dtype(77, 8, 1);
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, &one, count_free, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_from_dltensor: argument desc: expected a valid data "
                                 "type, got dtype(code=77, bits=8, lanes=1)");
  desc.dtype = PF_DTYPE_FLOAT64;
  desc.ndim = 65; /* a description names its own fields: the argument is desc */
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, &one, count_free, &t), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_from_dltensor: argument desc: expected ndim in 0..64, got 65");
  desc.ndim = 1;
  ck_assert_int_eq(pf_tensor_from_dltensor(NULL, &one, count_free, &t), -1);
  PF_ASSERT_RAISED("ValueError", "argument desc: expected a DLTensor, got NULL");
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, &one, count_free, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  ck_assert_int_eq(g_freed, 0); /* never called on failure */
}
END_TEST

/* ---- DLTensor helpers and argument checks ---- */

START_TEST(test_contiguity) {
  int64_t shape[3] = {2, 1, 3};
  DLTensor t = {NULL, PF_DEVICE_CPU, 3, PF_DTYPE_FLOAT32, shape, NULL, 0};
  ck_assert(pf_dltensor_is_contiguous(&t));
  int64_t strides[3] = {3, 99, 1}; /* a size-1 dimension's stride does not matter */
  t.strides = strides;
  ck_assert(pf_dltensor_is_contiguous(&t));
  strides[0] = 4;
  ck_assert(!pf_dltensor_is_contiguous(&t));
  shape[1] = 0; /* nothing to lay out */
  ck_assert(pf_dltensor_is_contiguous(&t));
  /* an empty tensor is contiguous even when a stride to the right of its zero extent is not
   * the compact one (x[:, ::2] of shape (0, 6)) */
  int64_t eshape[2] = {0, 3}, estrides[2] = {6, 2};
  DLTensor e = {NULL, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT32, eshape, estrides, 0};
  ck_assert(pf_dltensor_is_contiguous(&e));
  t.ndim = 0;
  ck_assert(pf_dltensor_is_contiguous(&t));
  ck_assert_int_eq(pf_dltensor_numel(&t), 1);
  char buf[16];
  t.data = buf;
  t.byte_offset = 4;
  ck_assert_ptr_eq(pf_dltensor_data(&t), buf + 4);
}
END_TEST

START_TEST(test_check_spec) {
  pf_object_t* x = iota((int64_t[]){2, 3}, 2);
  DLTensor* dl = pf_tensor_dltensor(x);
  pf_tensor_spec_t any = {0};
  ck_assert_int_eq(pf_dltensor_check(dl, &any, "f", 0, "x"), 0);
  pf_tensor_spec_t good = {PF_DTYPES(PF_DTYPE_FLOAT32, PF_DTYPE_FLOAT64), .device_type = PF_DEV_CPU,
                           .ndim = 2, .shape = (const int64_t[]){-1, 3}, .contiguous = 1};
  ck_assert_int_eq(pf_dltensor_check(dl, &good, "f", 0, "x"), 0);
  PF_ASSERT_NO_ERROR();

  pf_tensor_spec_t s = {PF_DTYPES(PF_DTYPE_FLOAT32)};
  ck_assert_int_eq(pf_dltensor_check(dl, &s, "rms_norm", 0, "x"), -1);
  PF_ASSERT_RAISED("TypeError", "rms_norm: argument 0 (x): expected a float32 tensor, got float64");
  pf_tensor_spec_t s3 = {PF_DTYPES(PF_DTYPE_FLOAT16, PF_DTYPE_BFLOAT16, PF_DTYPE_FLOAT32)};
  ck_assert_int_eq(pf_dltensor_check(dl, &s3, "rms_norm", 0, "x"), -1);
  PF_ASSERT_RAISED("TypeError", "expected a float16, bfloat16 or float32 tensor, got float64");
  /* the article follows the dtype's spelling */
  pf_tensor_spec_t s_int = {PF_DTYPES(PF_DTYPE_INT64)};
  ck_assert_int_eq(pf_dltensor_check(dl, &s_int, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("TypeError", "f: argument 0 (x): expected an int64 tensor, got float64");
  pf_tensor_spec_t s_uint = {PF_DTYPES(PF_DTYPE_UINT8)};
  ck_assert_int_eq(pf_dltensor_check(dl, &s_uint, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("TypeError", "f: argument 0 (x): expected a uint8 tensor, got float64");
  pf_tensor_spec_t dev = {.device_type = PF_DEV_CUDA};
  ck_assert_int_eq(pf_dltensor_check(dl, &dev, "rms_norm", 1, NULL), -1);
  PF_ASSERT_RAISED("TypeError", "rms_norm: argument 1: expected a tensor on cuda, got cpu:0");
  pf_tensor_spec_t dev2 = {.device_type = 77};
  ck_assert_int_eq(pf_dltensor_check(dl, &dev2, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("TypeError", "expected a tensor on device(77), got cpu:0");
  DLDevice cuda1 = pf_device(PF_DEV_CUDA, 1);
  pf_tensor_spec_t exact = {.device = &cuda1};
  ck_assert_int_eq(pf_dltensor_check(dl, &exact, "rms_norm", 2, "out"), -1);
  PF_ASSERT_RAISED("TypeError",
                   "rms_norm: argument 2 (out): expected a tensor on cuda:1, got cpu:0");
  exact.device = &dl->device;
  ck_assert_int_eq(pf_dltensor_check(dl, &exact, "rms_norm", 2, "out"), 0);
  pf_tensor_spec_t nd = {.ndim = 3};
  ck_assert_int_eq(pf_dltensor_check(dl, &nd, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 0 (x): expected 3 dimensions, got 2");
  pf_tensor_spec_t nd1 = {.ndim = 1};
  ck_assert_int_eq(pf_dltensor_check(dl, &nd1, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "expected 1 dimension, got 2");
  pf_tensor_spec_t scalar = {.shape = (const int64_t[]){0}}; /* ndim 0 with a shape: a scalar */
  ck_assert_int_eq(pf_dltensor_check(dl, &scalar, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "expected 0 dimensions, got 2");
  pf_tensor_spec_t mn = {.min_ndim = 3};
  ck_assert_int_eq(pf_dltensor_check(dl, &mn, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "expected at least 3 dimensions, got 2");
  pf_tensor_spec_t sh = {.ndim = 2, .shape = (const int64_t[]){-1, 4}};
  ck_assert_int_eq(pf_dltensor_check(dl, &sh, "rms_norm", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "rms_norm: argument 0 (x): expected shape (*, 4), got (2, 3)");
  pf_object_t* tr;
  ck_assert_int_eq(pf_tensor_permute(x, (int32_t[]){1, 0}, &tr), 0);
  pf_tensor_spec_t cont = {.contiguous = 1};
  ck_assert_int_eq(pf_dltensor_check(pf_tensor_dltensor(tr), &cont, "rms_norm", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError",
                   "rms_norm: argument 0 (x): expected a contiguous tensor, got strides (1, 3)");
  pf_object_release(tr);
  ck_assert_int_eq(pf_dltensor_check(NULL, &any, "f", 2, "y"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 2 (y): expected a tensor, got NULL");
  ck_assert_int_eq(pf_dltensor_check(dl, NULL, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_check: argument spec");
  ck_assert_int_eq(pf_dltensor_check(dl, &nd, NULL, 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "?: argument 0: expected 3 dimensions");
  pf_object_release(x);
}
END_TEST

/* A description made by hand with a negative extent, a negative ndim or no shape is refused
 * whatever the spec asks (a kernel's size arithmetic and loops rely on it). */
START_TEST(test_check_spec_refuses_bad_shapes) {
  float data[4] = {0};
  int64_t neg[2] = {2, -2};
  DLTensor t = {data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, neg, NULL, 0};
  pf_tensor_spec_t any = {0};
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 1, "y"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 1 (y): expected extents >= 0, got -2 at axis 1");
  t.ndim = -1;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 1, "y"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 1 (y): expected ndim in 0..64, got -1");
  /* above PF_TENSOR_MAX_NDIM, as pf_tensor_from_dltensor refuses it (it passed before review) */
  int64_t ones[PF_TENSOR_MAX_NDIM + 36];
  for (int i = 0; i < PF_TENSOR_MAX_NDIM + 36; ++i)
    ones[i] = 1;
  t.shape = ones;
  t.ndim = 100;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 1, "y"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 1 (y): expected ndim in 0..64, got 100");
  t.ndim = PF_TENSOR_MAX_NDIM + 1;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 1, "y"), -1);
  PF_ASSERT_RAISED("ValueError", "expected ndim in 0..64, got 65");
  t.ndim = PF_TENSOR_MAX_NDIM;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 1, "y"), 0);
  t.shape = neg;
  t.ndim = 1;
  t.shape = NULL;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 1, "y"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 1 (y): expected a shape, got ndim 1 and NULL");
  t.ndim = 0; /* a scalar needs no shape */
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 1, "y"), 0);
}
END_TEST

/* A description whose lowest byte is at address 0 (data far up, a negative stride reaching
 * down to 0) was accepted: its elements lie "within the address space", but the view of that
 * element had data NULL with one element, a tensor packfn made that packfn refuses (its views
 * and its copy then blamed the tensor; found by the views' differential test). Address 0 is no
 * object's: the description is refused; one whose lowest byte is at address 1 is not. */
START_TEST(test_no_element_at_address_0) {
  int64_t shape[1] = {3}, strides[1] = {-((int64_t)1 << 61)};
  DLTensor desc = {
      (void*)(uintptr_t)((uint64_t)1 << 62), PF_DEVICE_CPU, 1, PF_DTYPE_INT8, shape, strides, 0};
  pf_object_t *t = (pf_object_t*)&t, *v;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_from_dltensor: argument desc: expected the bytes of "
                                 "its elements to lie within the address space from data");
  /* a byte_offset that brings the lowest byte to 0 is refused as well */
  desc.data = (void*)(uintptr_t)(((uint64_t)1 << 62) - 5);
  desc.byte_offset = 5;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), -1);
  PF_ASSERT_RAISED("ValueError", "byte_offset 5: expected the bytes of its elements to lie "
                                 "within the address space");
  desc.byte_offset = 0;
  desc.data = (void*)(uintptr_t)(((uint64_t)1 << 62) + 1);
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), 0);
  ck_assert_int_eq(pf_tensor_select(t, 0, -1, &v), 0);
  ck_assert_ptr_eq(pf_tensor_dltensor(v)->data, (void*)1);
  ck_assert_uint_eq(pf_tensor_dltensor(v)->byte_offset, 0);
  pf_object_release(v);
  pf_object_release(t);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* The bytes of a strided description's elements from data + byte_offset: a byte_offset whose
 * sum with the last element's end passes int64, and data so high that the last element's end
 * passes the address space, are refused, each naming what is at fault. */
START_TEST(test_strided_bytes_at_the_limits) {
  if (UINTPTR_MAX < UINT64_MAX)
    return; /* the addresses below need 64 bits */
  int64_t two[1] = {2}, far[1] = {(int64_t)1 << 62}, step[1] = {2};
  DLTensor desc = {(void*)(uintptr_t)0x1000, PF_DEVICE_CPU, 1, PF_DTYPE_INT8, two, far,
                   (uint64_t)1 << 62};
  pf_object_t* t = (pf_object_t*)&t;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_from_dltensor: argument desc: byte_offset "
                                 "4611686018427387904: expected the bytes of its elements to lie "
                                 "within the address space from data");
  desc.byte_offset = ((uint64_t)1 << 62) - 2; /* its last byte at INT64_MAX - 1 */
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), 0);
  pf_object_release(t);
  desc.byte_offset = 0;
  desc.strides = step;
  /* elements at MAX - 3 and MAX - 1: their end, one past the last byte, is an address */
  desc.data = (void*)(uintptr_t)(UINTPTR_MAX - 3);
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), 0);
  pf_object_release(t);
  desc.data = (void*)(uintptr_t)(UINTPTR_MAX - 2);
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_from_dltensor: argument desc: expected the bytes of "
                                 "its elements to lie within the address space from data");
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* The rest of what pf_tensor_from_dltensor refuses is refused too, whatever the spec: a size
 * whose product overflows (it wrapped pf_dltensor_numel to 0 and the kernels skipped their
 * overlap checks, review), NULL data with elements, a negative device index, strides whose
 * offsets overflow, bytes past the address space, an invalid dtype; an empty tensor may have
 * NULL data. */
START_TEST(test_check_spec_refuses_bad_descriptions) {
  float data[4] = {0};
  pf_tensor_spec_t any = {0};
  int64_t wrap[2] = {(int64_t)1 << 32, (int64_t)1 << 32};
  DLTensor t = {data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, wrap, NULL, 0};
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 1, "y"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 1 (y): expected a size that fits in memory");
  int64_t four[1] = {4}, empty[1] = {0};
  t.ndim = 1;
  t.shape = four;
  t.data = NULL;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 0: expected data for 4 elements, got NULL");
  t.shape = empty;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 0, "x"), 0);
  t.shape = four;
  t.data = data;
  t.device.device_id = -1;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 0 (x): expected a device index >= 0, got -1");
  t.device.device_id = 0;
  int64_t huge_stride[1] = {INT64_MAX / 2};
  t.strides = huge_stride;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 0 (x): expected strides whose offsets fit in int64");
  /* INT64_MIN is refused on any axis, an extent-1 one too (the compact layout's shortcut
   * skips extent-1 axes' strides, not that one) */
  int64_t one[1] = {1}, min_stride[1] = {INT64_MIN};
  t.shape = one;
  t.strides = min_stride;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 0 (x): expected strides whose offsets fit in int64");
  t.shape = four;
  t.strides = NULL;
  t.byte_offset = UINT64_MAX - 8;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 0 (x): byte_offset");
  t.byte_offset = 0;
  t.dtype.lanes = 0;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 0 (x): expected a valid data type");
  t.dtype.lanes = 1;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, NULL, 0, "x"), 0);
  t.data = NULL;
  ck_assert_int_eq(pf_dltensor_check(&t, &any, NULL, 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "?: argument 0 (x): expected data for 4 elements, got NULL");
}
END_TEST

START_TEST(test_check_like) {
  pf_object_t* x = iota((int64_t[]){2, 3}, 2);
  pf_object_t* y = iota((int64_t[]){2, 3}, 2);
  pf_object_t* z = iota((int64_t[]){3, 2}, 2);
  pf_object_t* i;
  ck_assert_int_eq(pf_tensor_empty((int64_t[]){2, 3}, 2, PF_DTYPE_INT64, PF_DEVICE_CPU, &i), 0);
  DLTensor *dx = pf_tensor_dltensor(x), *dy = pf_tensor_dltensor(y);
  ck_assert_int_eq(pf_dltensor_check_like(dy, dx, "add_n", 1, "out", "x"), 0);
  ck_assert_int_eq(pf_dltensor_check_like(pf_tensor_dltensor(z), dx, "add_n", 1, "out", "x"), -1);
  PF_ASSERT_RAISED("ValueError",
                   "add_n: argument 1 (out): expected shape (2, 3) like x, got (3, 2)");
  ck_assert_int_eq(pf_dltensor_check_like(pf_tensor_dltensor(i), dx, "add_n", 1, "out", "x"), -1);
  PF_ASSERT_RAISED("TypeError",
                   "add_n: argument 1 (out): expected a float64 tensor like x, got int64");
  ck_assert_int_eq(pf_dltensor_check_like(dx, pf_tensor_dltensor(i), "add_n", 0, "x", "out"), -1);
  PF_ASSERT_RAISED("TypeError",
                   "add_n: argument 0 (x): expected an int64 tensor like out, got float64");
  DLTensor moved = *dy;
  moved.device = pf_device(PF_DEV_CUDA, 1);
  ck_assert_int_eq(pf_dltensor_check_like(&moved, dx, "add_n", 1, "out", NULL), -1);
  PF_ASSERT_RAISED("TypeError", "expected a tensor on cpu:0 like the reference tensor, got cuda:1");
  DLTensor no_shape = *dy; /* hand-made descriptions with no shape (they crashed, review) */
  no_shape.shape = NULL;
  ck_assert_int_eq(pf_dltensor_check_like(&no_shape, dx, "add_n", 1, "out", "x"), -1);
  PF_ASSERT_RAISED("ValueError",
                   "add_n: argument 1 (out): expected ndim in 0..64 with a shape, got ndim 2 "
                   "and a NULL shape");
  ck_assert_int_eq(pf_dltensor_check_like(dy, &no_shape, "add_n", 1, "out", "x"), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_check_like: argument ref: expected ndim in 0..64");
  no_shape.shape = dy->shape;
  no_shape.ndim = -1;
  ck_assert_int_eq(pf_dltensor_check_like(dy, &no_shape, "add_n", 1, "out", "x"), -1);
  PF_ASSERT_RAISED("ValueError", "argument ref: expected ndim in 0..64 with a shape, got ndim -1");
  ck_assert_int_eq(pf_dltensor_check_like(NULL, dx, "add_n", 1, "out", "x"), -1);
  PF_ASSERT_RAISED("ValueError", "add_n: argument 1 (out): expected a tensor, got NULL");
  ck_assert_int_eq(pf_dltensor_check_like(dy, NULL, "add_n", 1, "out", "x"), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_check_like: argument ref");
  /* a 1-d shape prints as Python does */
  pf_object_t* r;
  ck_assert_int_eq(pf_tensor_reshape(x, 1, (int64_t[]){6}, &r), 0);
  ck_assert_int_eq(pf_dltensor_check_like(pf_tensor_dltensor(r), dx, "f", 0, "a", "b"), -1);
  PF_ASSERT_RAISED("ValueError", "expected shape (2, 3) like b, got (6,)");
  pf_object_release(r);
  pf_object_release(i);
  pf_object_release(z);
  pf_object_release(y);
  pf_object_release(x);
}
END_TEST

START_TEST(test_long_shapes_in_messages) {
  /* 64 dimensions of extent 1000000007 would not fit the message buffer: cut with "...)". */
  int64_t shape[PF_TENSOR_MAX_NDIM], other[PF_TENSOR_MAX_NDIM];
  for (int i = 0; i < PF_TENSOR_MAX_NDIM; ++i) {
    shape[i] = 1;
    other[i] = 1000000007;
  }
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_empty(shape, PF_TENSOR_MAX_NDIM, PF_DTYPE_UINT8, PF_DEVICE_CPU, &t),
                   0);
  pf_tensor_spec_t s = {.ndim = PF_TENSOR_MAX_NDIM, .shape = other};
  ck_assert_int_eq(pf_dltensor_check(pf_tensor_dltensor(t), &s, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "...)");
  /* cut short where a whole entry ended before the last 5 bytes: the ellipsis follows that
   * entry (it was written past the string's end, where no reader saw it) */
  for (int i = 0; i < PF_TENSOR_MAX_NDIM; ++i)
    other[i] = 10000007;
  ck_assert_int_eq(pf_dltensor_check(pf_tensor_dltensor(t), &s, "f", 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", ", 10000007...), got (1, 1");
  pf_object_release(t);
  /* negative strides print as numbers (only a spec's or a reshape's -1 is "*") */
  int64_t four = 4;
  pf_object_t *x, *w = NULL;
  ck_assert_int_eq(pf_tensor_empty(&four, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &x), 0);
  int64_t sh[2] = {2, 2}, st[2] = {-1, -2};
  pf_object_t* g;
  ck_assert_int_eq(pf_tensor_view(x, 2, sh, st, 3, &g), 0);
  ck_assert_int_eq(pf_tensor_reshape(g, 1, &four, &w), -1);
  PF_ASSERT_RAISED("ValueError", "got strides (-1, -2); copy it first with pf_tensor_to_device");
  pf_object_release(g);
  pf_object_release(x);
}
END_TEST

/* ---- failure paths at the edges (coverage) ---- */

static int owner_releases;
static void count_owner_release(void* ctx) {
  ck_assert_ptr_eq(ctx, &owner_releases);
  ++owner_releases;
}

START_TEST(test_weak_reference_outlives_the_data) {
  /* the last strong reference gives the data back (the owner's release, or the allocator's
   * free) while a weak one keeps the header; the weak one's release frees only the header */
  float buf[4] = {1, 2, 3, 4};
  int64_t four = 4;
  DLTensor d = {buf, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT32, &four, NULL, 0};
  pf_object_t* t;
  owner_releases = 0;
  ck_assert_int_eq(pf_tensor_from_dltensor(&d, &owner_releases, count_owner_release, &t), 0);
  pf_object_weak_retain(t);
  pf_object_release(t);
  ck_assert_int_eq(owner_releases, 1);
  ck_assert_int_eq(pf_object_strong_count(t), 0);
  ck_assert_int_eq(pf_object_weak_lock(t), 0);
  pf_object_weak_release(t);
  ck_assert_int_eq(owner_releases, 1);
  /* no owner's release to call */
  ck_assert_int_eq(pf_tensor_from_dltensor(&d, NULL, NULL, &t), 0);
  pf_object_weak_retain(t);
  pf_object_release(t);
  ck_assert_int_eq(pf_object_weak_lock(t), 0);
  pf_object_weak_release(t);
  /* a tensor that allocated its memory */
  ck_assert_int_eq(pf_tensor_empty(&four, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &t), 0);
  pf_object_weak_retain(t);
  ck_assert_int_eq(pf_object_weak_lock(t), 1); /* alive: a second strong reference */
  pf_object_release(t);
  pf_object_release(t);
  ck_assert_int_eq(pf_object_strong_count(t), 0);
  ck_assert_int_eq(pf_object_weak_lock(t), 0);
  pf_object_weak_release(t);
}
END_TEST

START_TEST(test_empty_refusals_at_the_edges) {
  pf_object_t* t = (pf_object_t*)&t;
  /* 2^62 float64 elements: the count fits in int64, its bytes do not */
  int64_t huge = (int64_t)1 << 62;
  ck_assert_int_eq(pf_tensor_empty(&huge, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_empty: argument shape: expected a size that fits in "
                                 "memory (a zero extent counted as 1), got shape "
                                 "(4611686018427387904,)");
  ck_assert_ptr_null(t);
  /* a scalar of a data type that does not exist */
  t = (pf_object_t*)&t;
  DLDataType float7 = {PF_DL_FLOAT, 7, 1};
  ck_assert_int_eq(pf_tensor_empty(NULL, 0, float7, PF_DEVICE_CPU, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_empty: argument dtype: expected a valid data type");
  ck_assert_ptr_null(t);
  /* complex32 (two float16s) is a data type */
  ck_assert_int_eq(pf_dtype_is_valid(pf_dtype(PF_DL_COMPLEX, 32, 1)), 1);
  ck_assert_int_eq(pf_tensor_empty(&huge, 0, pf_dtype(PF_DL_COMPLEX, 32, 1), PF_DEVICE_CPU, &t), 0);
  ck_assert_int_eq(pf_tensor_dltensor(t)->dtype.bits, 32);
  pf_object_release(t);
}
END_TEST

START_TEST(test_check_refusals_at_the_edges) {
  /* a scalar with no data, checked with no function name: refused as invalid, named "?" */
  DLTensor s = {NULL, PF_DEVICE_CPU, 0, PF_DTYPE_FLOAT32, NULL, NULL, 0};
  pf_tensor_spec_t any = {0};
  ck_assert_int_eq(pf_dltensor_check(&s, &any, NULL, 0, "x"), -1);
  PF_ASSERT_RAISED("ValueError", "?: argument 0 (x): expected data for 1 elements, got NULL");
  /* a spec of many data types: their list is cut to the message's buffer */
  DLDataType many[20];
  for (int i = 0; i < 20; ++i)
    many[i] = pf_dtype(PF_DL_FLOAT8_E4M3B11FNUZ, 8, 1);
  pf_tensor_spec_t spec = {.dtypes = many, .num_dtypes = 20};
  float one = 1;
  DLTensor f = {&one, PF_DEVICE_CPU, 0, PF_DTYPE_FLOAT32, NULL, NULL, 0};
  ck_assert_int_eq(pf_dltensor_check(&f, &spec, "f", 0, "x"), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_kind(err), "TypeError");
  const char* msg = pf_error_message(err);
  ck_assert_msg(strncmp(msg,
                        "f: argument 0 (x): expected a float8_e4m3b11fnuz, float8_e4m3b11fnuz,",
                        69) == 0,
                "%s", msg);
  ck_assert_msg(strstr(msg, " tensor, got float32") != NULL, "%s", msg);
  ck_assert_msg(strstr(msg, " or float8_e4m3b11fnuz") == NULL, "%s", msg); /* cut before */
  pf_object_release(err);
  /* pf_dltensor_check_like of a description with too many dimensions (its shape not NULL) */
  int64_t shape[2] = {2, 3};
  double data[6] = {0};
  DLTensor ref = {data, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, NULL, 0};
  DLTensor deep = ref;
  deep.ndim = PF_TENSOR_MAX_NDIM + 1;
  ck_assert_int_eq(pf_dltensor_check_like(&deep, &ref, "f", 1, "out", "x"), -1);
  err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_message(err),
                   "f: argument 1 (out): expected ndim in 0..64 with a shape, got ndim 65");
  pf_object_release(err);
  /* a scalar (no shape needed) like a matrix: the shapes differ */
  DLTensor scalar = {data, PF_DEVICE_CPU, 0, PF_DTYPE_FLOAT64, NULL, NULL, 0};
  ck_assert_int_eq(pf_dltensor_check_like(&scalar, &ref, "f", 1, "out", "x"), -1);
  PF_ASSERT_RAISED("ValueError", "f: argument 1 (out): expected shape (2, 3) like x, got ()");
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("tensor");
  TCase* tc = tcase_create("dtype_device");
  tcase_add_test(tc, test_dtype_parse_names);
  tcase_add_test(tc, test_dtype_parse_errors);
  tcase_add_test(tc, test_dtype_format_and_validity);
  tcase_add_test(tc, test_device_parse_format);
  tcase_add_test(tc, test_device_errors);
  suite_add_tcase(s, tc);
  tc = tcase_create("tensors");
  tcase_add_test(tc, test_empty);
  tcase_add_test(tc, test_empty_sizes);
  tcase_add_test(tc, test_empty_errors);
  tcase_add_test(tc, test_dltensor_of_non_tensors);
  tcase_add_test(tc, test_from_dltensor);
  tcase_add_test(tc, test_from_dltensor_errors);
  tcase_add_test(tc, test_no_element_at_address_0);
  tcase_add_test(tc, test_strided_bytes_at_the_limits);
  suite_add_tcase(s, tc);
  suite_add_tcase(s, pf_test_tensor_views_tcase());
  tc = tcase_create("checks");
  tcase_add_test(tc, test_contiguity);
  tcase_add_test(tc, test_check_spec);
  tcase_add_test(tc, test_check_spec_refuses_bad_shapes);
  tcase_add_test(tc, test_check_spec_refuses_bad_descriptions);
  tcase_add_test(tc, test_check_like);
  tcase_add_test(tc, test_long_shapes_in_messages);
  tcase_add_test(tc, test_weak_reference_outlives_the_data);
  tcase_add_test(tc, test_empty_refusals_at_the_edges);
  tcase_add_test(tc, test_check_refusals_at_the_edges);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
