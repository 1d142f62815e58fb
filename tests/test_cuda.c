/* Tests of libpackfn_cuda: allocator registration, CUDA statuses as errors, and (on a machine
 * with a GPU) tensors, copies, streams and devices, ordering one stream after another, failed
 * CUDA calls, DLPack import of CUDA memory, and tensors released on other threads; without one
 * those say they were skipped. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* Asserts that an error of `kind` is raised whose message starts with `prefix` and ends with
 * CUDA's error name in parentheses, then clears it. */
static void expect_cuda_error(const char* kind, const char* prefix, const char* cuda_name) {
  pf_object_t* err = pf_error_take();
  ck_assert_msg(err != NULL, "expected %s to be raised", kind);
  const char* msg = pf_error_message(err);
  char tail[96];
  snprintf(tail, sizeof tail, "(%s)", cuda_name);
  size_t n = strlen(msg), m = strlen(tail);
  ck_assert_str_eq(pf_error_kind(err), kind);
  ck_assert_msg(strncmp(msg, prefix, strlen(prefix)) == 0 && n >= m &&
                    strcmp(msg + n - m, tail) == 0,
                "message '%s' does not read '%s...%s'", msg, prefix, tail);
  pf_object_release(err);
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
  ck_assert_int_eq(pf_cuda_stream_wait(-1, NULL, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_cuda_stream_wait: argument device_id: expected >= 0, got -1");
  ck_assert_int_eq(pf_cuda_stream_synchronize(-1, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_cuda_stream_synchronize: argument device_id");
  /* the allocator hook refuses an alignment of 0 (it divided by it) or one 256 is no multiple
   * of, before any CUDA call */
  pf_allocator_t a;
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CUDA, &a), 0);
  void* p = &p;
  ck_assert_int_eq(a.alloc(a.ctx, pf_device(PF_DEV_CUDA, 0), 16, 0, &p), -1);
  ck_assert_ptr_null(p);
  PF_ASSERT_RAISED("ValueError", "argument alignment: expected a divisor of 256, got 0");
  ck_assert_int_eq(a.alloc(a.ctx, pf_device(PF_DEV_CUDA, 0), 16, 48, &p), -1);
  PF_ASSERT_RAISED("ValueError", "got 48");
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
  /* even two equal streams: the device is checked first */
  ck_assert_int_eq(pf_cuda_stream_wait(0, NULL, NULL), -1);
  PF_ASSERT_RAISED("RuntimeError", "pf_cuda_stream_wait: cudaGetDevice failed: no CUDA device");
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
  /* device memory to managed memory and back, through CUDA's hooks */
  pf_object_t *managed2, *dev2;
  ck_assert_int_eq(pf_tensor_to_device(dev, pf_device(PF_DEV_CUDA_MANAGED, 0), &managed2), 0);
  ck_assert(((float*)pf_dltensor_data(pf_tensor_dltensor(managed2)))[13] == 6.5f);
  ck_assert_int_eq(pf_tensor_to_device(managed2, pf_device(PF_DEV_CUDA, 0), &dev2), 0);
  pf_object_release(managed2);
  pf_object_release(dev2);
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

/* A CUDA tensor copied into host memory another runtime describes (rocm_host, which the core
 * counts as host memory): the copy runs on the source's device, not on the device of the host
 * side's index (it entered CUDA device 5 of rocm_host:5, "invalid device ordinal" on a machine
 * without one, or another GPU's stream, unordered with the source's: review). */
START_TEST(test_gpu_copy_into_rocm_host) {
  int32_t n = gpus("test_gpu_copy_into_rocm_host");
  if (n == 0)
    return;
  int64_t shape[1] = {6};
  pf_object_t *host, *dev;
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &host), 0);
  float* p = pf_dltensor_data(pf_tensor_dltensor(host));
  for (int i = 0; i < 6; ++i)
    p[i] = (float)i + 0.25f;
  ck_assert_int_eq(pf_tensor_to_device(host, pf_device(PF_DEV_CUDA, 0), &dev), 0);
  float out[6] = {0};
  DLTensor dst = {out, {(DLDeviceType)PF_DEV_ROCM_HOST, n}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&dst, pf_tensor_dltensor(dev)), 0);
  for (int i = 0; i < 6; ++i)
    ck_assert(out[i] == (float)i + 0.25f);
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
  ck_assert_ptr_null(t);
  expect_cuda_error("MemoryError",
                    "pf_allocator(cuda): cudaMalloc failed: ", "cudaErrorMemoryAllocation");
  /* not sticky: the next allocation works */
  ck_assert_int_eq(pf_tensor_empty(&len, 1, PF_DTYPE_UINT8, pf_device(PF_DEV_CUDA, 0), &t), 0);
  pf_object_release(t);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A host function that holds its stream until *gate opens. It may not call CUDA. */
static void CUDART_CB hold_until_open(void* gate) {
  while (!atomic_load((atomic_int*)gate)) {
    struct timespec t = {0, 1000000L};
    nanosleep(&t, NULL);
  }
}

/* Opens the gate of hold_until_open 50 ms after it starts (a thread's body). */
static void* open_after_50ms(void* gate) {
  struct timespec t = {0, 50 * 1000000L};
  nanosleep(&t, NULL);
  atomic_store((atomic_int*)gate, 1);
  return NULL;
}

/* pf_cuda_stream_wait orders a non-blocking stream, and then the per-thread default stream,
 * after another non-blocking stream held by a host function: an event recorded on the waiter
 * after the wait stays pending for as long as the producer is held (50 ms here), and completes
 * once it is let go. With the wait a no-op the event, on an idle stream, completes at once. */
START_TEST(test_gpu_stream_wait) {
  if (gpus("test_gpu_stream_wait") == 0)
    return;
  cudaStream_t a, b;
  cudaEvent_t e;
  ck_assert_int_eq(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ck_assert_int_eq(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  ck_assert_int_eq(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  cudaStream_t waiters[2] = {b, cudaStreamPerThread};
  for (int w = 0; w < 2; ++w) {
    atomic_int gate;
    atomic_init(&gate, 0);
    ck_assert_int_eq(cudaLaunchHostFunc(a, hold_until_open, &gate), cudaSuccess);
    int waited = pf_cuda_stream_wait(0, waiters[w], a);
    cudaError_t recorded = cudaEventRecord(e, waiters[w]);
    struct timespec t = {0, 50 * 1000000L};
    nanosleep(&t, NULL);
    cudaError_t held = cudaEventQuery(e);
    (void)cudaGetLastError(); /* cudaErrorNotReady is the expected answer, not an error */
    atomic_store(&gate, 1);   /* opened before any assertion, so that nothing stays held */
    ck_assert_int_eq(cudaStreamSynchronize(a), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(waiters[w]), cudaSuccess);
    ck_assert_int_eq(waited, 0);
    ck_assert_int_eq(recorded, cudaSuccess);
    ck_assert_msg(held == cudaErrorNotReady,
                  "waiter %d: the event completed while the producer "
                  "was held (%s)",
                  w, cudaGetErrorName(held));
    ck_assert_int_eq(cudaEventQuery(e), cudaSuccess);
  }
  ck_assert_int_eq(pf_cuda_stream_wait(0, a, a), 0);    /* the same stream: nothing queued */
  ck_assert_int_eq(pf_cuda_stream_wait(0, b, NULL), 0); /* after the default stream */
  ck_assert_int_eq(cudaStreamSynchronize(b), cudaSuccess);
  ck_assert_int_eq(cudaEventDestroy(e), cudaSuccess);
  ck_assert_int_eq(cudaStreamDestroy(a), cudaSuccess);
  ck_assert_int_eq(cudaStreamDestroy(b), cudaSuccess);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A failed CUDA call (an invalid copy direction: refused on the host, before any work is queued,
 * so nothing sticky) raised through PF_CUDA_CHECK names the call and CUDA's error name. */
static int copy_with_bad_kind(void) {
  char src[4] = {1, 2, 3, 4}, dst[4] = {0};
  PF_CUDA_CHECK("copy_with_bad_kind", cudaMemcpy(dst, src, sizeof src, (enum cudaMemcpyKind)42));
  return 0;
}

START_TEST(test_gpu_failed_call_names_cuda_error) {
  if (gpus("test_gpu_failed_call_names_cuda_error") == 0)
    return;
  ck_assert_int_eq(copy_with_bad_kind(), -1);
  expect_cuda_error("RuntimeError",
                    "copy_with_bad_kind: cudaMemcpy(dst, src, sizeof src, (enum cudaMemcpyKind)42) "
                    "failed: ",
                    "cudaErrorInvalidMemcpyDirection");
  ck_assert_int_eq(cudaGetLastError(), cudaSuccess); /* pf_cuda_check cleared it */
  /* pf_cuda_check_launch reports the thread's last CUDA error once, then it is gone */
  char buf[4] = {0};
  ck_assert_int_eq(cudaMemcpy(buf, buf + 2, 2, (enum cudaMemcpyKind)42),
                   cudaErrorInvalidMemcpyDirection);
  ck_assert_int_eq(pf_cuda_check_launch("f", "k"), -1);
  expect_cuda_error("RuntimeError", "f: launch of k failed: ", "cudaErrorInvalidMemcpyDirection");
  ck_assert_int_eq(pf_cuda_check_launch("f", "k"), 0);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* ---- DLPack import of CUDA memory ---- */

/* A foreign producer's CUDA buffer: cudaMalloc'd memory that its DLPack deleter frees, counting
 * its runs and keeping cudaFree's status. */
typedef struct {
  DLManagedTensor legacy;
  pf_dl_managed_tensor_versioned_t versioned;
  int64_t shape[2];
} foreign_t;

static int foreign_deletes;
static cudaError_t foreign_free_status;

static void foreign_free(foreign_t* f, void* data) {
  foreign_free_status = cudaFree(data);
  ++foreign_deletes;
  free(f);
}

static void foreign_legacy_deleter(DLManagedTensor* m) {
  foreign_free(m->manager_ctx, m->dl_tensor.data);
}

static void foreign_versioned_deleter(pf_dl_managed_tensor_versioned_t* m) {
  foreign_free(m->manager_ctx, m->dl_tensor.data);
}

/* A 3x5 float32 CUDA buffer holding 0, 1, ..., 14, described in both DLPack forms. */
static foreign_t* foreign_new(void) {
  float init[15];
  for (int i = 0; i < 15; ++i)
    init[i] = (float)i;
  void* data = NULL;
  ck_assert_int_eq(cudaMalloc(&data, sizeof init), cudaSuccess);
  ck_assert_int_eq(cudaMemcpy(data, init, sizeof init, cudaMemcpyHostToDevice), cudaSuccess);
  foreign_t* f = calloc(1, sizeof *f);
  ck_assert_ptr_nonnull(f);
  f->shape[0] = 3;
  f->shape[1] = 5;
  DLTensor dl = {data, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, f->shape, NULL, 0};
  f->legacy.dl_tensor = dl;
  f->legacy.manager_ctx = f;
  f->legacy.deleter = foreign_legacy_deleter;
  f->versioned.version.major = PF_DLPACK_VERSIONED_MAJOR;
  f->versioned.version.minor = PF_DLPACK_VERSIONED_MINOR;
  f->versioned.dl_tensor = dl;
  f->versioned.manager_ctx = f;
  f->versioned.deleter = foreign_versioned_deleter;
  foreign_deletes = 0;
  foreign_free_status = cudaErrorUnknown;
  return f;
}

/* The imported tensor is the producer's memory (same pointer, cuda:0, 3x5) and reads as it. */
static void check_foreign_import(pf_object_t* t, const void* data) {
  DLTensor* d = pf_tensor_dltensor(t);
  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(d->device.device_type, kDLCUDA);
  ck_assert_int_eq(d->device.device_id, 0);
  ck_assert_ptr_eq(pf_dltensor_data(d), data);
  ck_assert_int_eq(d->ndim, 2);
  ck_assert(d->shape[0] == 3 && d->shape[1] == 5);
  pf_object_t* host;
  ck_assert_int_eq(pf_tensor_to_device(t, PF_DEVICE_CPU, &host), 0);
  ck_assert(((float*)pf_dltensor_data(pf_tensor_dltensor(host)))[14] == 14.0f);
  pf_object_release(host);
}

START_TEST(test_gpu_dlpack_import_cuda) {
  if (gpus("test_gpu_dlpack_import_cuda") == 0)
    return;
  foreign_t* f = foreign_new();
  void* data = f->legacy.dl_tensor.data;
  pf_object_t *t, *row;
  ck_assert_int_eq(pf_tensor_from_dlpack(&f->legacy, &t), 0);
  check_foreign_import(t, data);
  /* a view keeps the producer's memory alive after the tensor is gone */
  ck_assert_int_eq(pf_tensor_select(t, 0, 1, &row), 0);
  ck_assert_ptr_eq(pf_dltensor_data(pf_tensor_dltensor(row)), (float*)data + 5);
  pf_object_release(t);
  ck_assert_int_eq(foreign_deletes, 0);
  pf_object_release(row);
  ck_assert_int_eq(foreign_deletes, 1);
  ck_assert_int_eq(foreign_free_status, cudaSuccess);
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_gpu_dlpack_import_cuda_versioned) {
  if (gpus("test_gpu_dlpack_import_cuda_versioned") == 0)
    return;
  foreign_t* f = foreign_new();
  void* data = f->versioned.dl_tensor.data;
  f->versioned.flags = PF_DLPACK_FLAG_READ_ONLY;
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(&f->versioned, &t), 0);
  check_foreign_import(t, data);
  ck_assert_int_eq(pf_tensor_is_read_only(t), 1);
  ck_assert_int_eq(foreign_deletes, 0);
  pf_object_release(t);
  ck_assert_int_eq(foreign_deletes, 1);
  ck_assert_int_eq(foreign_free_status, cudaSuccess);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Exporting a CUDA tensor and importing the export gives back the same tensor: no copy. */
START_TEST(test_gpu_dlpack_round_trip) {
  if (gpus("test_gpu_dlpack_round_trip") == 0)
    return;
  int64_t shape[2] = {4, 3};
  pf_object_t *dev, *back;
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, pf_device(PF_DEV_CUDA, 0), &dev), 0);
  void* data = pf_dltensor_data(pf_tensor_dltensor(dev));
  DLManagedTensor* m;
  ck_assert_int_eq(pf_tensor_to_dlpack(dev, &m), 0);
  ck_assert_ptr_eq(m->dl_tensor.data, data);
  ck_assert_int_eq(pf_tensor_from_dlpack(m, &back), 0);
  ck_assert_ptr_eq(back, dev);
  ck_assert_ptr_eq(pf_dltensor_data(pf_tensor_dltensor(back)), data);
  pf_object_release(back);
  pf_dl_managed_tensor_versioned_t* v;
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(dev, &v), 0);
  ck_assert_int_eq(v->dl_tensor.device.device_type, kDLCUDA);
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(v, &back), 0);
  ck_assert_ptr_eq(back, dev);
  pf_object_release(back);
  pf_object_release(dev);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* ---- tensors released on another thread ---- */

/* What a thread saw after releasing a tensor: packfn's raised error, CUDA's last error and its
 * current device. */
typedef struct {
  pf_object_t* tensor;
  int raised;
  int cuda_error;
  int device_after;
} release_job_t;

static void* release_on_thread(void* arg) {
  release_job_t* job = arg;
  pf_object_release(job->tensor);
  job->raised = pf_error_peek() != NULL;
  job->cuda_error = (int)cudaGetLastError();
  if (cudaGetDevice(&job->device_after) != cudaSuccess)
    job->device_after = -1;
  return NULL;
}

/* Releases `t` on a new thread, which has never touched CUDA, and checks it ended clean, its
 * current device still `device`. */
static void release_elsewhere(pf_object_t* t, int device) {
  release_job_t job = {t, -1, -1, -1};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, release_on_thread, &job), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_int_eq(job.raised, 0);
  ck_assert_int_eq(job.cuda_error, cudaSuccess);
  ck_assert_int_eq(job.device_after, device);
}

static size_t free_device_memory(void) {
  size_t free_bytes = 0, total = 0;
  ck_assert_int_eq(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  return free_bytes;
}

/* packfn's CUDA allocator caches nothing (cudaMalloc and cudaFree directly), so the memory of a
 * tensor released on another thread is the device's again; 64 MiB of slack covers the driver's
 * own bookkeeping. */
#define RELEASE_BYTES ((int64_t)256 << 20)
#define RELEASE_SLACK ((size_t)64 << 20)

START_TEST(test_gpu_release_on_fresh_thread) {
  if (gpus("test_gpu_release_on_fresh_thread") == 0)
    return;
  static const int32_t types[] = {PF_DEV_CUDA, PF_DEV_CUDA_HOST, PF_DEV_CUDA_MANAGED};
  int64_t len = RELEASE_BYTES;
  size_t before = free_device_memory();
  for (int i = 0; i < 3; ++i) {
    pf_object_t* t;
    ck_assert_int_eq(pf_tensor_empty(&len, 1, PF_DTYPE_UINT8, pf_device(types[i], 0), &t), 0);
    if (types[i] == PF_DEV_CUDA)
      ck_assert_uint_le(free_device_memory() + (size_t)RELEASE_BYTES / 2, before);
    release_elsewhere(t, 0);
  }
  ck_assert_uint_ge(free_device_memory() + RELEASE_SLACK, before);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A tensor made (and filled) on a worker thread, which then ends, is used and released on this
 * one. */
static void* make_on_thread(void* arg) {
  int64_t n = 64;
  pf_object_t *host, **out = arg;
  *out = NULL;
  if (pf_tensor_empty(&n, 1, PF_DTYPE_INT32, PF_DEVICE_CPU, &host) != 0)
    return NULL;
  for (int32_t i = 0; i < 64; ++i)
    ((int32_t*)pf_dltensor_data(pf_tensor_dltensor(host)))[i] = 3 * i;
  if (pf_tensor_to_device(host, pf_device(PF_DEV_CUDA, 0), out) != 0)
    pf_error_clear();
  pf_object_release(host);
  return NULL;
}

START_TEST(test_gpu_tensor_from_ended_thread) {
  if (gpus("test_gpu_tensor_from_ended_thread") == 0)
    return;
  pf_object_t *dev, *back;
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, make_on_thread, &dev), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_ptr_nonnull(dev);
  ck_assert_int_eq(pf_tensor_to_device(dev, PF_DEVICE_CPU, &back), 0);
  ck_assert_int_eq(((int32_t*)pf_dltensor_data(pf_tensor_dltensor(back)))[63], 189);
  pf_object_release(back);
  pf_object_release(dev);
  ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A cuda:1 tensor released by a thread whose current device is cuda:0: freed on its own device,
 * the thread's device unchanged. Needs two GPUs. */
START_TEST(test_gpu_release_other_device) {
  int32_t n = gpus("test_gpu_release_other_device");
  if (n == 0)
    return;
  if (n < 2) {
    printf("test_cuda: test_gpu_release_other_device: skipped: needs 2 CUDA devices, found %d\n",
           (int)n);
    return;
  }
  int64_t len = RELEASE_BYTES;
  int before = -1, after = -1;
  ck_assert_int_eq(cudaGetDevice(&before), cudaSuccess);
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_empty(&len, 1, PF_DTYPE_UINT8, pf_device(PF_DEV_CUDA, 1), &t), 0);
  ck_assert_int_eq(pf_tensor_dltensor(t)->device.device_id, 1);
  release_elsewhere(t, 0);
  ck_assert_int_eq(cudaGetDevice(&after), cudaSuccess);
  ck_assert_int_eq(after, before); /* nor did this thread's */
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A copy from cuda:1 to cuda:0 reads its source after the work queued so far on cuda:1's current
 * stream: with that stream held by a host function and then writing the source (a memset of 7s),
 * the copy gets the 7s. It ran on cuda:0's stream only, which no stream of cuda:1 orders, and
 * copied the zeros there before (found by reading; needs two GPUs). */
START_TEST(test_gpu_copy_between_devices_after_source_stream) {
  int32_t n = gpus("test_gpu_copy_between_devices_after_source_stream");
  if (n == 0)
    return;
  if (n < 2) {
    printf("test_cuda: test_gpu_copy_between_devices_after_source_stream: skipped: needs 2 CUDA "
           "devices, found %d\n",
           (int)n);
    return;
  }
  int64_t len = 1 << 20;
  pf_object_t *src, *dst, *back;
  ck_assert_int_eq(pf_tensor_empty(&len, 1, PF_DTYPE_UINT8, pf_device(PF_DEV_CUDA, 1), &src), 0);
  void* data = pf_dltensor_data(pf_tensor_dltensor(src));
  int32_t prev_dev;
  ck_assert_int_eq(pf_cuda_device_enter(1, &prev_dev), 0);
  ck_assert_int_eq(cudaMemset(data, 0, (size_t)len), cudaSuccess);
  ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t s1;
  ck_assert_int_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  atomic_int gate;
  atomic_init(&gate, 0);
  ck_assert_int_eq(cudaLaunchHostFunc(s1, hold_until_open, &gate), cudaSuccess);
  ck_assert_int_eq(cudaMemsetAsync(data, 7, (size_t)len, s1), cudaSuccess);
  ck_assert_int_eq(pf_cuda_device_exit(prev_dev), 0);
  void* prev_stream;
  ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, 1), s1, &prev_stream), 0);
  /* the copy waits for s1: opened from another thread after 50 ms */
  pthread_t opener;
  ck_assert_int_eq(pthread_create(&opener, NULL, open_after_50ms, &gate), 0);
  int rc = pf_tensor_to_device(src, pf_device(PF_DEV_CUDA, 0), &dst);
  ck_assert_int_eq(pthread_join(opener, NULL), 0);
  ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, 1), prev_stream, NULL), 0);
  ck_assert_msg(rc == 0, "copy: %s", pf_error_message(pf_error_peek()));
  ck_assert_int_eq(pf_tensor_to_device(dst, PF_DEVICE_CPU, &back), 0);
  const unsigned char* got = pf_dltensor_data(pf_tensor_dltensor(back));
  for (int64_t i = 0; i < len; ++i)
    ck_assert_msg(got[i] == 7, "byte %lld: %d, expected 7 (copied before the source was written)",
                  (long long)i, (int)got[i]);
  ck_assert_int_eq(cudaStreamSynchronize(s1), cudaSuccess);
  ck_assert_int_eq(cudaStreamDestroy(s1), cudaSuccess);
  pf_object_release(back);
  pf_object_release(dst);
  pf_object_release(src);
  PF_ASSERT_NO_ERROR();
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
  tcase_add_test(tc, test_gpu_stream_wait);
  tcase_add_test(tc, test_gpu_failed_call_names_cuda_error);
  tcase_add_test(tc, test_gpu_dlpack_import_cuda);
  tcase_add_test(tc, test_gpu_dlpack_import_cuda_versioned);
  tcase_add_test(tc, test_gpu_dlpack_round_trip);
  tcase_add_test(tc, test_gpu_release_on_fresh_thread);
  tcase_add_test(tc, test_gpu_tensor_from_ended_thread);
  tcase_add_test(tc, test_gpu_release_other_device);
  tcase_add_test(tc, test_gpu_copy_between_devices_after_source_stream);
  tcase_add_test(tc, test_gpu_copy_into_rocm_host);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
