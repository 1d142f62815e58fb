/* packfn_cuda: the optional CUDA library: allocators for cuda, cuda_host and cuda_managed
 * tensors, CUDA errors as packfn errors, the current device and streams, for kernel authors. */
#ifndef PACKFN_CUDA_H_
#define PACKFN_CUDA_H_

/* Link libpackfn_cuda (CMake target packfn::packfn_cuda). This header needs no CUDA header:
 * streams travel as void* (a cudaStream_t) and CUDA errors as int (a cudaError_t). */
#include "packfn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* As PF_INLINE (packfn/config.h) for this library: static inline for every includer, and an
 * exported symbol of libpackfn_cuda (src/cuda/inline.c defines PF_CUDA_INLINE_EXPORT). */
#if defined(PF_CUDA_INLINE_EXPORT)
#define PF_CUDA_INLINE PF_API
#else
#define PF_CUDA_INLINE static inline
#endif

/* Installs packfn's CUDA allocators for device types cuda (cudaMalloc), cuda_host
 * (cudaMallocHost, page-locked) and cuda_managed (cudaMallocManaged), each with a copy hook
 * (cudaMemcpyAsync on the device's current stream, then synchronised; between two GPUs on the
 * destination's, after the work queued on the source's current stream). Runs by itself when
 * libpackfn_cuda loads (which is never unloaded before process exit: it is linked -z nodelete,
 * as the tensors it allocated keep its free hook); call it again to restore them after
 * pf_allocator_set replaced them. Touches no GPU. Returns 0 (never fails). */
PF_API int pf_cuda_register_allocators(void);

/* Number of CUDA devices in *out: 0, without error, when there is no device or no driver
 * (so callers can skip GPU work). Returns 0, or -1 with ValueError (NULL out) or RuntimeError
 * for any other CUDA failure (*out is then 0). */
PF_API int pf_cuda_device_count(int32_t* out);

/* Turns a CUDA runtime status into packfn's convention: 0 for cudaSuccess; otherwise raises
 * "<func>: <what> failed: <cudaGetErrorString> (<cudaGetErrorName>)" (MemoryError for
 * cudaErrorMemoryAllocation, RuntimeError for the rest), clears CUDA's last-error state and
 * returns -1. cudaErrorNoDevice and cudaErrorInsufficientDriver (what a machine without a
 * usable GPU reports) read "... failed: no CUDA device (no GPU, or no CUDA driver for it)
 * (cudaErrorNoDevice)" instead of CUDA's text. `error` is a cudaError_t; func and what may be NULL.
 */
PF_API int pf_cuda_check(int error, const char* func, const char* what);

/* In a function returning int: `PF_CUDA_CHECK("rms_norm", cudaMemsetAsync(p, 0, n, s));`
 * returns -1 from it, with the error raised, when the call fails. */
#define PF_CUDA_CHECK(func, expr)                                                                  \
  do {                                                                                             \
    if (pf_cuda_check(PF__CAST(int, expr), (func), #expr) != 0)                                    \
      return -1;                                                                                   \
  } while (0)

/* Checks that the kernel launched last from this thread started: reads and clears
 * cudaGetLastError, so it reports any CUDA error recorded on this thread since the last clear
 * (a failed launch, or an earlier failed runtime call nobody checked). 0, or -1 with
 * RuntimeError "<func>: launch of <kernel> failed: ...". Does not wait for the kernel. */
PF_API int pf_cuda_check_launch(const char* func, const char* kernel);

/* Makes CUDA device `device_id` current for the calling thread; *prev (may be NULL) receives
 * the device current before, for pf_cuda_device_exit. In a process that sees exactly one GPU,
 * device 0 is always current: entering it makes no CUDA call (*prev = 0). Returns 0, or -1
 * with ValueError (a negative id) or RuntimeError (no such device, no driver; *prev is then
 * -1). */
PF_API int pf_cuda_device_enter(int32_t device_id, int32_t* prev);

/* Makes `prev` current again (a negative prev does nothing). 0, or -1 with RuntimeError. */
PF_API int pf_cuda_device_exit(int32_t prev);

/* The stream kernels on cuda:device_id launch on: the calling thread's current stream for
 * that device (pf_stream_get), a cudaStream_t, or NULL for the default stream. */
PF_CUDA_INLINE void* pf_cuda_stream_get(int32_t device_id) {
  return pf_stream_get(pf_device(PF_DEV_CUDA, device_id));
}

/* Creates a stream on cuda:device_id (blocking: it synchronises with the legacy default
 * stream, as cudaStreamCreate's do). *out receives the cudaStream_t, the caller's to destroy
 * with pf_cuda_stream_destroy. Returns 0, or -1 with ValueError (NULL out, negative id) or
 * RuntimeError; *out is then NULL. */
PF_API int pf_cuda_stream_create(int32_t device_id, void** out);

/* Destroys a stream pf_cuda_stream_create made on cuda:device_id (NULL is a no-op); if it is
 * the calling thread's current stream for that device, the default becomes current again.
 * Returns 0, or -1 with RuntimeError. */
PF_API int pf_cuda_stream_destroy(int32_t device_id, void* stream);

/* Waits for the work queued on `stream` (NULL: the default stream) of cuda:device_id.
 * Returns 0, or -1 with ValueError (a negative id) or RuntimeError (including errors of the
 * kernels that ran there). */
PF_API int pf_cuda_stream_synchronize(int32_t device_id, void* stream);

/* Orders stream `waiter` after the work queued so far on stream `producer`, both of
 * cuda:device_id: work queued on `waiter` after this call starts only once that work has
 * finished; the calling thread does not wait. Streams are cudaStream_t values: NULL for the
 * default stream, or cudaStreamLegacy (1) and cudaStreamPerThread (2). This is what a producer
 * of a DLPack tensor owes a consumer that names its stream: the Python Tensor.__dlpack__(stream=)
 * calls it with packfn's current stream as producer. Nothing is queued when the two are the
 * same value. Returns 0, or -1 with ValueError (a negative id), MemoryError (no memory for the
 * event) or RuntimeError (no such device; an event CUDA could not create, record or wait for,
 * CUDA's error named). */
PF_API int pf_cuda_stream_wait(int32_t device_id, void* waiter, void* producer);

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_CUDA_H_ */
