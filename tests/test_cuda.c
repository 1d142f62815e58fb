/* Tests of libpackfn_cuda: allocator registration, CUDA statuses as errors, and (on a machine
 * with a GPU) tensors, copies, streams and devices; without one those say they were skipped. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/cuda.h"
#include "pf_test.h"

/* Number of CUDA devices, printing the skip notice once when there is none. */
static int32_t gpus(const char* test) {
  int32_t n = -1;
  ck_assert_int_eq(pf_cuda_device_count(&n), 0);
  ck_assert_int_ge(n, 0);
  if (n == 0)
    printf("test_cuda: %s: skipped: no CUDA device\n", test);
  return n;
}

/* ---- everywhere ---- */

START_TEST(test_allocators_registered) {
  static const int32_t types[] = {PF_DEV_CUDA, PF_DEV_CUDA_HOST, PF_DEV_CUDA_MANAGED};
  for (size_t i = 0; i < 3; ++i) {
    pf_allocator_t a;
    ck_assert_int_eq(pf_allocator_get(types[i], &a), 0);
    ck_assert(a.alloc != NULL && a.free != NULL && a.copy != NULL);
  }
  /* removed by a host, restored by registering again */
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CUDA, NULL), 0);
  pf_allocator_t a;
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CUDA, &a), 0); /* absent: zeroed, no error */
  ck_assert(a.alloc == NULL);
  PF_ASSERT_NO_ERROR();
  ck_assert_int_eq(pf_cuda_register_allocators(), 0);
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CUDA, &a), 0);
}
END_TEST

/* packfn/cuda.h's inline functions also exist as symbols of libpackfn_cuda (for FFIs that bind
 * by name), doing what the inline copies do. */
START_TEST(test_inline_symbols) {
  void* sym = dlsym(RTLD_DEFAULT, "pf_cuda_stream_get");
  ck_assert_ptr_nonnull(sym);
  void* (*stream_get)(int32_t);
  memcpy(&stream_get, &sym, sizeof sym); /* ISO C has no object-to-function pointer cast */
  int marker;
  ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, 3), &marker, NULL), 0);
  ck_assert_ptr_eq(stream_get(3), &marker);
  ck_assert_ptr_eq(stream_get(3), pf_cuda_stream_get(3));
  ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, 3), NULL, NULL), 0);
  ck_assert_ptr_null(stream_get(3));
}
END_TEST

START_TEST(test_check_statuses) {
  ck_assert_int_eq(pf_cuda_check((int)cudaSuccess, "f", "x"), 0);
  PF_ASSERT_NO_ERROR();
  ck_assert_int_eq(pf_cuda_check((int)cudaErrorMemoryAllocation, "rms_norm", "cudaMalloc(&p, n)"),
                   -1);
  PF_ASSERT_RAISED("MemoryError",
                   "rms_norm: cudaMalloc(&p, n) failed: out of memory (cudaErrorMemoryAllocation)");
  ck_assert_int_eq(pf_cuda_check((int)cudaErrorInvalidValue, NULL, NULL), -1);
  PF_ASSERT_RAISED("RuntimeError", "?: CUDA call failed: invalid argument (cudaErrorInvalidValue)");
  /* the two statuses of a machine with no usable GPU say so, not "driver version" */
  ck_assert_int_eq(pf_cuda_check((int)cudaErrorNoDevice, "f", "cudaSetDevice"), -1);
  PF_ASSERT_RAISED("RuntimeError", "f: cudaSetDevice failed: no CUDA device (no GPU, or no CUDA "
                                   "driver for it) (cudaErrorNoDevice)");
  ck_assert_int_eq(pf_cuda_check((int)cudaErrorInsufficientDriver, "f", "cudaGetDevice"), -1);
  PF_ASSERT_RAISED("RuntimeError", "f: cudaGetDevice failed: no CUDA device (no GPU, or no CUDA "
                                   "driver for it) (cudaErrorInsufficientDriver)");
  int32_t n = 0;
  ck_assert_int_eq(pf_cuda_device_count(&n), 0);
  if (n > 0) {
    ck_assert_int_eq(pf_cuda_check_launch("f", "k"), 0); /* nothing launched, nothing failed */
  } else {
    /* without a driver the runtime's failed start is what a launch check sees */
    ck_assert_int_eq(pf_cuda_check_launch("f", "k"), -1);
    PF_ASSERT_RAISED("RuntimeError", "f: launch of k failed: ");
  }
}
END_TEST

static int macro_user(int status) {
  PF_CUDA_CHECK("macro_user", status);
  return 0;
}

START_TEST(test_check_macro) {
  ck_assert_int_eq(macro_user((int)cudaSuccess), 0);
  ck_assert_int_eq(macro_user((int)cudaErrorInvalidDevice), -1);
  PF_ASSERT_RAISED("RuntimeError", "macro_user: status failed: invalid device ordinal");
}
END_TEST

START_TEST(test_argument_errors) {
  ck_assert_int_eq(pf_cuda_device_count(NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_cuda_device_count: argument out");
  int32_t prev = 5;
  ck_assert_int_eq(pf_cuda_device_enter(-1, &prev), -1);
  ck_assert_int_eq(prev, -1);
  PF_ASSERT_RAISED("ValueError", "pf_cuda_device_enter: argument device_id: expected >= 0, got -1");
  ck_assert_int_eq(pf_cuda_device_exit(-1), 0);
  ck_assert_int_eq(pf_cuda_stream_create(0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_cuda_stream_create: argument out");
  void* s = &s;
  ck_assert_int_eq(pf_cuda_stream_create(-1, &s), -1);
  ck_assert_ptr_null(s);
  PF_ASSERT_RAISED("ValueError", "argument device_id");
  ck_assert_int_eq(pf_cuda_stream_destroy(0, NULL), 0);
  ck_assert_ptr_null(pf_cuda_stream_get(0));
}
END_TEST

START_TEST(test_without_gpu_fails_cleanly) {
  int32_t gpu_count = 0;
  ck_assert_int_eq(pf_cuda_device_count(&gpu_count), 0);
  if (gpu_count > 0)
    return; /* this test is for machines without a GPU */
  int64_t n = 4;
  pf_object_t* t = (pf_object_t*)&t;
  ck_assert_int_eq(pf_tensor_empty(&n, 1, PF_DTYPE_FLOAT32, pf_device(PF_DEV_CUDA, 0), &t), -1);
  ck_assert_ptr_null(t);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_kind(err), "RuntimeError");
  ck_assert_ptr_nonnull(strstr(pf_error_message(err), "pf_allocator(cuda): cudaGetDevice failed"));
  ck_assert_ptr_nonnull(strstr(pf_error_message(err), "no CUDA device"));
  pf_object_release(err);
  int32_t prev = 7;
  ck_assert_int_eq(pf_cuda_device_enter(0, &prev), -1);
  ck_assert_int_eq(prev, -1);
  PF_ASSERT_RAISED("RuntimeError", "pf_cuda_device_enter: cudaGetDevice failed: no CUDA device");
}
END_TEST

/* ---- with a GPU ---- */

START_TEST(test_gpu_tensor_round_trip) {
  if (gpus("test_gpu_tensor_round_trip") == 0)
    return;
  int64_t shape[2] = {3, 5};
  pf_object_t *host, *dev, *back;
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &host), 0);
  float* p = pf_dltensor_data(pf_tensor_dltensor(host));
  for (int i = 0; i < 15; ++i)
    p[i] = (float)i * 0.5f;
  ck_assert_int_eq(pf_tensor_to_device(host, pf_device(PF_DEV_CUDA, 0), &dev), 0);
  DLTensor* d = pf_tensor_dltensor(dev);
  ck_assert_uint_eq((uintptr_t)d->data % PF_TENSOR_ALIGNMENT, 0);
  struct cudaPointerAttributes attr;
  ck_assert_int_eq(cudaPointerGetAttributes(&attr, d->data), cudaSuccess);
  ck_assert_int_eq(attr.type, cudaMemoryTypeDevice);
  /* a view on the device, copied back through pinned memory */
  pf_object_t *row, *pinned;
  ck_assert_int_eq(pf_tensor_select(dev, 0, 2, &row), 0);
  ck_assert_int_eq(pf_tensor_to_device(row, pf_device(PF_DEV_CUDA_HOST, 0), &pinned), 0);
  ck_assert(((float*)pf_dltensor_data(pf_tensor_dltensor(pinned)))[4] == 7.0f);
  ck_assert_int_eq(pf_tensor_to_device(dev, PF_DEVICE_CPU, &back), 0);
  ck_assert(((float*)pf_dltensor_data(pf_tensor_dltensor(back)))[14] == 7.0f);
  /* managed memory is readable from the host after the synchronous copy */
  pf_object_t* managed;
  ck_assert_int_eq(pf_tensor_to_device(host, pf_device(PF_DEV_CUDA_MANAGED, 0), &managed), 0);
  ck_assert(((float*)pf_dltensor_data(pf_tensor_dltensor(managed)))[3] == 1.5f);
  /* DLPack export of a device tensor */
  DLManagedTensor* m;
  ck_assert_int_eq(pf_tensor_to_dlpack(dev, &m), 0);
  ck_assert_int_eq(m->dl_tensor.device.device_type, PF_DEV_CUDA);
  m->deleter(m);
  pf_object_release(managed);
  pf_object_release(back);
  pf_object_release(pinned);
  pf_object_release(row);
  pf_object_release(dev);
  pf_object_release(host);
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_gpu_streams_and_devices) {
  int32_t n = gpus("test_gpu_streams_and_devices");
  if (n == 0)
    return;
  void* s;
  ck_assert_int_eq(pf_cuda_stream_create(0, &s), 0);
  ck_assert_ptr_nonnull(s);
  void* prev = &prev;
  ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, 0), s, &prev), 0);
  ck_assert_ptr_null(prev);
  ck_assert_ptr_eq(pf_cuda_stream_get(0), s);
  /* copies run on the current stream */
  int64_t len = 1 << 16;
  pf_object_t *host, *dev;
  ck_assert_int_eq(pf_tensor_empty(&len, 1, PF_DTYPE_UINT8, PF_DEVICE_CPU, &host), 0);
  memset(pf_dltensor_data(pf_tensor_dltensor(host)), 7, (size_t)len);
  ck_assert_int_eq(pf_tensor_to_device(host, pf_device(PF_DEV_CUDA, 0), &dev), 0);
  ck_assert_int_eq(pf_cuda_stream_synchronize(0, s), 0);
  ck_assert_int_eq(pf_cuda_stream_synchronize(0, NULL), 0);
  ck_assert_int_eq(pf_cuda_stream_destroy(0, s), 0);
  ck_assert_ptr_null(pf_cuda_stream_get(0)); /* destroying the current stream resets it */
  pf_object_release(dev);
  pf_object_release(host);
  /* device switching */
  int32_t before, inside = -1;
  ck_assert_int_eq(cudaGetDevice(&before), cudaSuccess);
  ck_assert_int_eq(pf_cuda_device_enter(n - 1, &before), 0);
  ck_assert_int_eq(cudaGetDevice(&inside), cudaSuccess);
  ck_assert_int_eq(inside, n - 1);
  ck_assert_int_eq(pf_cuda_device_exit(before), 0);
  ck_assert_int_eq(pf_cuda_device_enter(n, &before), -1);
  PF_ASSERT_RAISED("RuntimeError", "cudaSetDevice failed");
  /* out of device memory is a MemoryError */
  int64_t huge = INT64_C(1) << 50;
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_empty(&huge, 1, PF_DTYPE_UINT8, pf_device(PF_DEV_CUDA, 0), &t), -1);
  PF_ASSERT_RAISED("MemoryError", "cudaMalloc failed");
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("cuda");
  TCase* tc = tcase_create("everywhere");
  tcase_add_test(tc, test_allocators_registered);
  tcase_add_test(tc, test_inline_symbols);
  tcase_add_test(tc, test_check_statuses);
  tcase_add_test(tc, test_check_macro);
  tcase_add_test(tc, test_argument_errors);
  tcase_add_test(tc, test_without_gpu_fails_cleanly);
  suite_add_tcase(s, tc);
  tc = tcase_create("gpu");
  tcase_add_test(tc, test_gpu_tensor_round_trip);
  tcase_add_test(tc, test_gpu_streams_and_devices);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
