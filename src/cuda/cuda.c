/* libpackfn_cuda: CUDA allocators and copies for the tensor layer, CUDA statuses as packfn
 * errors, and the current-device and stream helpers kernel launchers use. */
#include <cuda_runtime_api.h>
#include <stdatomic.h>

#include "packfn/cuda.h"

/* ---- errors ---- */

/* What a failure means, for people: CUDA's own text, except for the two statuses a machine with
 * no usable GPU gives, which read like driver trouble ("CUDA driver version is insufficient")
 * when the cause is that there is no device; `packfn info` reports the same state as
 * "CUDA devices: 0 (no CUDA device)". */
static const char* pf__cuda_reason(cudaError_t e) {
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
    return "no CUDA device (no GPU, or no CUDA driver for it)";
  return cudaGetErrorString(e);
}

int pf_cuda_check(int error, const char* func, const char* what) {
  if (error == (int)cudaSuccess)
    return 0;
  cudaError_t e = (cudaError_t)error;
  (void)cudaGetLastError(); /* clear the last-error state so later checks see their own */
  PF_ERROR_SET(e == cudaErrorMemoryAllocation ? PF_ERR_MEMORY : PF_ERR_RUNTIME,
               "%s: %s failed: %s (%s)", func ? func : "?", what ? what : "CUDA call",
               pf__cuda_reason(e), cudaGetErrorName(e));
  return -1;
}

int pf_cuda_check_launch(const char* func, const char* kernel) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess)
    return 0;
  PF_ERROR_SET(PF_ERR_RUNTIME, "%s: launch of %s failed: %s (%s)", func ? func : "?",
               kernel ? kernel : "a kernel", pf__cuda_reason(e), cudaGetErrorName(e));
  return -1;
}

/* ---- devices ---- */

int pf_cuda_device_count(int32_t* out) {
  if (!out) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_cuda_device_count: argument out: expected a pointer, got NULL");
    return -1;
  }
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  *out = 0;
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    return 0;
  }
  if (pf_cuda_check((int)e, "pf_cuda_device_count", "cudaGetDeviceCount") != 0)
    return -1;
  *out = n;
  return 0;
}

/* 1 when the process sees exactly one CUDA device, 0 when it sees another number (or none),
 * -1 before the first look. The count is fixed for a process (CUDA_VISIBLE_DEVICES is read
 * once, at CUDA's initialisation). */
static atomic_int pf__cuda_single = -1;

/* Whether device 0 is the only device, and so necessarily the current one of every thread:
 * the launch guard then needs no cudaGetDevice (a few hundred ns on the launch path). */
static int pf__cuda_only_device_0(void) {
  int single = atomic_load_explicit(&pf__cuda_single, memory_order_relaxed);
  if (PF_LIKELY(single >= 0))
    return single;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* the guard's own call below reports why */
    n = 0;
  }
  single = n == 1;
  atomic_store_explicit(&pf__cuda_single, single, memory_order_relaxed);
  return single;
}

/* pf_cuda_device_enter with errors named after `func`, for the hooks and helpers here. */
static int pf__cuda_enter(int32_t device_id, const char* func, int32_t* prev) {
  if (prev)
    *prev = -1;
  if (device_id < 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument device_id: expected >= 0, got %d", func,
                 (int)device_id);
    return -1;
  }
  if (device_id == 0 && pf__cuda_only_device_0()) {
    if (prev)
      *prev = 0;
    return 0;
  }
  int cur = -1;
  if (pf_cuda_check((int)cudaGetDevice(&cur), func, "cudaGetDevice") != 0)
    return -1;
  if (cur != device_id && pf_cuda_check((int)cudaSetDevice(device_id), func, "cudaSetDevice") != 0)
    return -1;
  if (prev)
    *prev = cur;
  return 0;
}

int pf_cuda_device_enter(int32_t device_id, int32_t* prev) {
  return pf__cuda_enter(device_id, "pf_cuda_device_enter", prev);
}

int pf_cuda_device_exit(int32_t prev) {
  if (prev < 0)
    return 0;
  return pf_cuda_check((int)cudaSetDevice(prev), "pf_cuda_device_exit", "cudaSetDevice");
}

/* Restores the previous device after pf__cuda_enter(device_id) where nothing may fail
 * (deleters, hooks after their work is done): a failure here only clears CUDA's last error.
 * Nothing to do when the device did not change: no cudaSetDevice, which would also make the
 * device's primary context current over a context the caller had made current itself. */
static void pf__cuda_device_restore(int32_t prev, int32_t device_id) {
  if (prev >= 0 && prev != device_id && cudaSetDevice(prev) != cudaSuccess)
    (void)cudaGetLastError();
}

/* ---- streams ---- */

int pf_cuda_stream_create(int32_t device_id, void** out) {
  if (!out) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_cuda_stream_create: argument out: expected a pointer, got NULL");
    return -1;
  }
  *out = NULL;
  int32_t prev;
  if (pf__cuda_enter(device_id, "pf_cuda_stream_create", &prev) != 0)
    return -1;
  cudaStream_t s = NULL;
  int rc = pf_cuda_check((int)cudaStreamCreate(&s), "pf_cuda_stream_create", "cudaStreamCreate");
  pf__cuda_device_restore(prev, device_id);
  if (rc == 0)
    *out = s;
  return rc;
}

int pf_cuda_stream_destroy(int32_t device_id, void* stream) {
  if (!stream)
    return 0;
  DLDevice dev = pf_device(PF_DEV_CUDA, device_id);
  if (pf_stream_get(dev) == stream)
    pf_stream_set(dev, NULL, NULL); /* returning to the default stream cannot fail */
  return pf_cuda_check((int)cudaStreamDestroy((cudaStream_t)stream), "pf_cuda_stream_destroy",
                       "cudaStreamDestroy");
}

int pf_cuda_stream_synchronize(int32_t device_id, void* stream) {
  int32_t prev;
  if (pf__cuda_enter(device_id, "pf_cuda_stream_synchronize", &prev) != 0)
    return -1;
  int rc = pf_cuda_check((int)cudaStreamSynchronize((cudaStream_t)stream),
                         "pf_cuda_stream_synchronize", "cudaStreamSynchronize");
  pf__cuda_device_restore(prev, device_id);
  return rc;
}

int pf_cuda_stream_wait(int32_t device_id, void* waiter, void* producer) {
  static const char func[] = "pf_cuda_stream_wait";
  int32_t prev;
  if (pf__cuda_enter(device_id, func, &prev) != 0)
    return -1;
  int rc = 0;
  if (waiter != producer) {
    /* an event recorded on the producer and waited for by the waiter; destroying it at once is
     * allowed: CUDA frees it once the wait no longer needs it */
    cudaEvent_t ev = NULL;
    rc = pf_cuda_check((int)cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), func,
                       "cudaEventCreateWithFlags");
    if (rc == 0)
      rc = pf_cuda_check((int)cudaEventRecord(ev, (cudaStream_t)producer), func, "cudaEventRecord");
    if (rc == 0)
      rc = pf_cuda_check((int)cudaStreamWaitEvent((cudaStream_t)waiter, ev, 0), func,
                         "cudaStreamWaitEvent");
    if (ev) {
      cudaError_t e = cudaEventDestroy(ev);
      if (rc == 0)
        rc = pf_cuda_check((int)e, func, "cudaEventDestroy");
      else if (e != cudaSuccess)
        (void)cudaGetLastError(); /* the first error is raised; this one must not linger */
    }
  }
  pf__cuda_device_restore(prev, device_id);
  return rc;
}

/* ---- allocator hooks ---- */

/* cudaMalloc and friends align to at least 256 bytes; more cannot be asked of them. */
#define PF__CUDA_ALIGNMENT 256

static int pf__cuda_alloc_common(DLDevice device, size_t nbytes, size_t alignment, void** out,
                                 const char* func) {
  *out = NULL;
  if (alignment == 0 || alignment > PF__CUDA_ALIGNMENT || (PF__CUDA_ALIGNMENT % alignment) != 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument alignment: expected a divisor of %d, got %zu", func,
                 PF__CUDA_ALIGNMENT, alignment);
    return -1;
  }
  int32_t prev;
  if (pf__cuda_enter(device.device_id, func, &prev) != 0)
    return -1;
  cudaError_t e;
  const char* what;
  switch ((int32_t)device.device_type) {
  case PF_DEV_CUDA_HOST:
    e = cudaMallocHost(out, nbytes);
    what = "cudaMallocHost";
    break;
  case PF_DEV_CUDA_MANAGED:
    e = cudaMallocManaged(out, nbytes, cudaMemAttachGlobal);
    what = "cudaMallocManaged";
    break;
  default:
    e = cudaMalloc(out, nbytes);
    what = "cudaMalloc";
    break;
  }
  pf__cuda_device_restore(prev, device.device_id);
  if (e != cudaSuccess)
    *out = NULL;
  return pf_cuda_check((int)e, func, what);
}

static int pf__cuda_alloc(void* ctx, DLDevice device, size_t nbytes, size_t alignment, void** out) {
  (void)ctx;
  /* named after the device type asked for: cuda_host and cuda_managed said "cuda" (review) */
  int32_t type = (int32_t)device.device_type;
  return pf__cuda_alloc_common(device, nbytes, alignment, out,
                               type == PF_DEV_CUDA_HOST      ? "pf_allocator(cuda_host)"
                               : type == PF_DEV_CUDA_MANAGED ? "pf_allocator(cuda_managed)"
                                                             : "pf_allocator(cuda)");
}

static void pf__cuda_free(void* ctx, DLDevice device, void* ptr) {
  (void)ctx;
  int32_t prev = -1;
  /* Freeing must not fail; errors (e.g. the runtime already unloading at exit) are dropped. */
  if (cudaGetDevice(&prev) != cudaSuccess ||
      (prev != device.device_id && cudaSetDevice(device.device_id) != cudaSuccess))
    (void)cudaGetLastError();
  cudaError_t e =
      (int32_t)device.device_type == PF_DEV_CUDA_HOST ? cudaFreeHost(ptr) : cudaFree(ptr);
  if (e != cudaSuccess)
    (void)cudaGetLastError();
  pf__cuda_device_restore(prev, device.device_id);
}

/* Whether memory of this device type belongs to one CUDA device (cuda, cuda_managed), not to
 * the host. */
static int pf__cuda_is_device_memory(DLDevice d) {
  int32_t t = (int32_t)d.device_type;
  return t == PF_DEV_CUDA || t == PF_DEV_CUDA_MANAGED;
}

/* For a copy from src_device to another CUDA device, run on stream `s` of the destination (the
 * current device): an event recorded on the source device's current stream, for `s` to wait
 * for, so the copy reads src after the work queued there so far. A copy between two devices is
 * ordered with neither device's other streams (as cudaMemcpyPeerAsync), so one reading a tensor
 * a kernel on the source device was still writing copied stale bytes (review). Returns 0, or -1
 * with the error raised; the current device is the destination's again either way. */
static int pf__cuda_copy_after_source(DLDevice src_device, cudaStream_t s, const char* func) {
  int32_t prev;
  if (pf__cuda_enter(src_device.device_id, func, &prev) != 0)
    return -1;
  cudaEvent_t ev = NULL;
  int rc = pf_cuda_check((int)cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), func,
                         "cudaEventCreateWithFlags");
  if (rc == 0)
    rc = pf_cuda_check(
        (int)cudaEventRecord(ev, (cudaStream_t)pf_cuda_stream_get(src_device.device_id)), func,
        "cudaEventRecord");
  /* back on the destination, which the caller entered */
  pf__cuda_device_restore(prev, src_device.device_id);
  if (rc == 0)
    rc = pf_cuda_check((int)cudaStreamWaitEvent(s, ev, 0), func, "cudaStreamWaitEvent");
  if (ev && cudaEventDestroy(ev) != cudaSuccess) /* freed by CUDA once the wait is done */
    (void)cudaGetLastError();
  return rc;
}

/* Copies with cudaMemcpyDefault (unified addressing tells the directions apart) on the current
 * stream of the CUDA device involved (the destination's between two devices, after the work
 * queued on the source's), then waits, so the copy is complete on return. */
static int pf__cuda_copy(void* ctx, void* dst, DLDevice dst_device, const void* src,
                         DLDevice src_device, size_t nbytes) {
  (void)ctx;
  static const char func[] = "pf_allocator(cuda).copy";
  /* the CUDA device whose memory the copy writes, else the source's: a host destination may
   * be described by another runtime (rocm_host: the core counts it as host memory), whose
   * index is no CUDA device (it was taken as one: review) */
  DLDevice side = pf__cuda_is_device_memory(dst_device) ? dst_device : src_device;
  int32_t prev;
  if (pf__cuda_enter(side.device_id, func, &prev) != 0)
    return -1;
  cudaStream_t s = (cudaStream_t)pf_cuda_stream_get(side.device_id);
  int rc = 0;
  if (pf__cuda_is_device_memory(dst_device) && pf__cuda_is_device_memory(src_device) &&
      src_device.device_id != dst_device.device_id)
    rc = pf__cuda_copy_after_source(src_device, s, func);
  if (rc == 0)
    rc = pf_cuda_check((int)cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, s), func,
                       "cudaMemcpyAsync");
  if (rc == 0)
    rc = pf_cuda_check((int)cudaStreamSynchronize(s), func, "cudaStreamSynchronize");
  pf__cuda_device_restore(prev, side.device_id);
  return rc;
}

static const int32_t pf__cuda_device_types[] = {PF_DEV_CUDA, PF_DEV_CUDA_HOST, PF_DEV_CUDA_MANAGED};
#define PF__CUDA_NUM_TYPES ((int)(sizeof pf__cuda_device_types / sizeof pf__cuda_device_types[0]))

int pf_cuda_register_allocators(void) {
  const pf_allocator_t hooks = {NULL, pf__cuda_alloc, pf__cuda_free, pf__cuda_copy};
  for (int i = 0; i < PF__CUDA_NUM_TYPES; ++i)
    pf_allocator_set(pf__cuda_device_types[i], &hooks); /* valid arguments: cannot fail */
  return 0;
}

__attribute__((constructor)) static void pf__cuda_load(void) {
  pf_cuda_register_allocators();
}

/* At process exit (the library is never unmapped before: it is linked -z nodelete, since the
 * tensors it allocated keep its free hook), removes its hooks, leaving the thread's raised
 * error (if any) as it found it. */
__attribute__((destructor)) static void pf__cuda_unload(void) {
  pf_object_t* pending = pf_error_take();
  for (int i = 0; i < PF__CUDA_NUM_TYPES; ++i) {
    pf_allocator_t a;
    if (pf_allocator_get(pf__cuda_device_types[i], &a) == 0 && a.alloc == pf__cuda_alloc)
      pf_allocator_set(pf__cuda_device_types[i], NULL);
  }
  pf_error_clear();
  if (pending) {
    pf_error_raise(pending);
    pf_object_release(pending);
  }
}
