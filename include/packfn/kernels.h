/* packfn_kernels: real kernels on CPU and CUDA (add_n, rms_norm and its gradient, Kepler's
 * equation, broadcast vector add), as packed functions and as direct C entry points. */
#ifndef PACKFN_KERNELS_H_
#define PACKFN_KERNELS_H_

/* Two libraries. libpackfn_kernels (CMake target packfn::packfn_kernels) holds the CPU
 * versions and the C entries below, and never needs the CUDA runtime: when it loads, every
 * kernel is registered in the global table as "packfn.kernels.<name>" and exported for module
 * loading as <name>. libpackfn_kernels_cuda (packfn::packfn_kernels_cuda, built when CUDA is
 * found; it links libpackfn_cuda and the CUDA runtime) holds the CUDA versions: when it loads
 * (linked, or through pf_module_load), each is registered as "packfn.kernels.cuda.<name>" and
 * exported as cuda_<name>. The C entries run CUDA tensors through those registered versions.
 * Each export's signature text is generated from the same declaration as the registered
 * function's, so `pf_module_list` and pf_function_signature agree.
 *
 * Calling convention (destination passing): inputs, then outputs, then scalar parameters; the
 * kernel writes its outputs and returns none. Tensors are float32 or float64, all of one
 * dtype, compact row-major, on the version's device (all on the same device); each may be a
 * tensor object or a DLTensor pointer. Bad input (wrong dtype, device, rank or shape, an output
 * that does not match, wrong arity, a CUDA tensor given to the CPU version or the reverse)
 * fails with TypeError or ValueError naming the argument, before any output is touched.
 * CUDA versions run on the calling thread's current stream for the tensors' device
 * (pf_stream_get) and do not wait for the kernel to finish. */

#include "packfn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PF_KERNELS_PREFIX      "packfn.kernels."
#define PF_KERNELS_CUDA_PREFIX "packfn.kernels.cuda."

/* ---- direct C entry points (libpackfn_kernels) ----
 * The same kernels called from C without packing: they dispatch on the device of the first
 * tensor and check their arguments exactly as the packed versions do. CPU tensors run here;
 * CUDA tensors run through "packfn.kernels.cuda.<name>", and fail with NotImplementedError
 * naming libpackfn_kernels_cuda when that library is not loaded (RuntimeError "... no CUDA
 * device ..." when it is, on a machine without a GPU); other devices: NotImplementedError.
 * 0, or -1 with an error. */

/* out = x + n, elementwise; out has x's shape (out may be x). n must be finite, and for a
 * float32 x within float32's range (it is rounded to float32): ValueError otherwise. */
PF_API int pf_kernel_add_n(const DLTensor* x, DLTensor* out, double n);

/* out = x / sqrt(mean(x^2 over the last axis) + eps); x has at least one axis, any leading
 * batch axes; out has x's shape (out may be x). eps >= 0. */
PF_API int pf_kernel_rms_norm(const DLTensor* x, DLTensor* out, double eps);

/* rms_norm that also writes inv_rms = 1/sqrt(mean(x^2) + eps), shaped x.shape[:-1], for the
 * backward pass. */
PF_API int pf_kernel_rms_norm_fwd(const DLTensor* x, DLTensor* out, DLTensor* inv_rms, double eps);

/* Gradient of rms_norm: dx = inv_rms * ct - x * inv_rms^3 * mean(ct * x) along the last
 * axis, for cotangent ct; dx has x's shape (dx may be x or ct). */
PF_API int pf_kernel_rms_norm_bwd(const DLTensor* x, const DLTensor* inv_rms,
                                  const DLTensor* cotangent, DLTensor* dx);

/* Solves Kepler's equation M = E - e sin E for the eccentric anomaly E, elementwise, to full
 * precision for 0 <= e < 1 and any finite M; writes sin E and cos E. All four tensors have one
 * shape. An eccentricity outside [0, 1), or NaN, fails with ValueError before any output is
 * written: "pf_kernel_kepler: argument 1 (eccentricity): expected values in [0, 1), got 1.5 at
 * index 3" (the packed function's message begins "kepler:" instead, and for CUDA tensors, whose
 * values the CUDA version checks, "kepler_cuda:"). The CUDA version checks them on the device
 * and waits for that check, so the call waits for the work queued on the current stream; with
 * no elements it launches nothing and does not wait. A non-finite M gives NaN in both outputs
 * for that element. */
PF_API int pf_kernel_kepler(const DLTensor* mean_anomaly, const DLTensor* eccentricity,
                            DLTensor* sin_e, DLTensor* cos_e);

/* a[i] = b[i mod len(b)] + c[i] over the elements of c (row-major); b is one-dimensional and
 * not empty unless c is; a has c's shape. */
PF_API int pf_kernel_vector_add(const DLTensor* b, const DLTensor* c, DLTensor* a);

/* 1 when the CUDA versions are available to this process (libpackfn_kernels_cuda is loaded and
 * registered them), else 0. Never raises. */
PF_API int pf_kernels_have_cuda(void);

/* Number of kernels (CPU versions) and their short names ("add_n", ...), for listings. Never
 * fails. */
PF_API int32_t pf_kernels_count(void);
/* Short name of kernel i (0 <= i < pf_kernels_count()), a static string, or NULL for an i out of
 * that range. Never raises. */
PF_API const char* pf_kernels_name(int32_t i);

/* CPU kernels: the most threads one kernel call may use, 1..64. n <= 0 restores the default:
 * the environment variable PACKFN_KERNEL_THREADS when it holds a decimal number >= 1, blanks
 * around it allowed, above 64 meaning 64 (read at the first kernel call), else 1. A call uses fewer
 * threads when its arrays are small (under 1 MiB per thread), and results are bit-identical for
 * every thread count. Process-wide; a call already running keeps the count it started with. Returns
 * the count now in effect; never fails. */
PF_API int pf_kernels_set_threads(int n);
/* The thread count pf_kernels_set_threads set (or the default). */
PF_API int pf_kernels_threads(void);
/* The instruction set the CPU kernels' loops were chosen for at run time: "avx512", "avx2" or
 * "sse2" on x86-64, "base" elsewhere. A static string; never NULL. */
PF_API const char* pf_kernels_isa(void);

/* ---- libpackfn_kernels_cuda ---- */

/* Number of CUDA kernels libpackfn_kernels_cuda registers (one per name of pf_kernels_name).
 * Defined in libpackfn_kernels_cuda: a program that links that library for its registrations
 * alone calls this once, so linkers that drop libraries nothing calls (--as-needed) keep it. */
PF_API int32_t pf_kernels_cuda_count(void);

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_KERNELS_H_ */
