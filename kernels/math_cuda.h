/* kernels/math_cuda.h: C-callable launchers of the CUDA versions of the kernels in kmath.h, each
 * enqueued on a caller-given stream, and the message of a CUDA error code they return. */
#ifndef PACKFN_KERNELS_MATH_CUDA_H
#define PACKFN_KERNELS_MATH_CUDA_H

/* Private to packfn_kernels; needs no CUDA header. Every pointer is a device pointer (or
 * managed memory) to a contiguous row-major array; the semantics, aliasing rules and empty
 * cases are those of the CPU kernel of the same name in kmath.h, but for the rows at the ends
 * of the range, which the CPU computes apart (docs/kernels.md) and these do not: rms_norm's
 * float64 rows whose squares overflow (|x| > 1e154: inv_rms 0) or, with eps ~ 0, underflow
 * (|x| < 1e-154: bits lost, below ~1e-162 a sum of 0, inv_rms and outputs inf), and
 * rms_norm_bwd's rows whose coefficient inv_rms^3 mean(ct x) leaves the element type's range
 * (float32 rows below ~1e-19 with eps ~ 0: inf or NaN where the CPU's dx is finite; float64
 * below ~1e-102); and the mean taken as sum / cols where the CPU multiplies by 1 / cols (the
 * last bit may differ).
 *
 * Every launcher only enqueues work on stream (a cudaStream_t; NULL is the legacy default
 * stream) and returns at once: 0 (cudaSuccess) when the launch was accepted, otherwise the
 * cudaError_t value, whose text pf__kc_error_string gives. An error of a kernel that fails
 * while running surfaces later, from whatever synchronises with the stream. A launcher with
 * nothing to do (count, rows or cols <= 0, apart from rms_norm_fwd's inv_rms) launches
 * nothing and returns 0. */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The message of a cudaError_t value (as returned by the launchers below): a static string. */
const char* pf__kc_error_string(int code);

int pf__kc_add_n_f32(const float* x, float* out, int64_t count, float n, void* stream);
int pf__kc_add_n_f64(const double* x, double* out, int64_t count, double n, void* stream);

/* One block per row (rows beyond the grid limit are taken in turn by the same blocks); aligned
 * rows of up to 8192 float32 or 4096 float64 values are held in registers, so x is read once.
 * Rows too few to give each multiprocessor two blocks and long enough (8192 values or more) are
 * split over several blocks each: a first kernel writes each chunk's partial sum (double) to
 * stream-ordered scratch memory (cudaMallocAsync; without memory pools the rows stay unsplit),
 * a second adds each row's partials in a fixed order and scales, so the results do not depend
 * on timing. */
int pf__kc_rms_norm_f32(const float* x, float* out, int64_t rows, int64_t cols, double eps,
                        void* stream);
int pf__kc_rms_norm_f64(const double* x, double* out, int64_t rows, int64_t cols, double eps,
                        void* stream);
int pf__kc_rms_norm_fwd_f32(const float* x, float* out, float* inv_rms, int64_t rows, int64_t cols,
                            double eps, void* stream);
int pf__kc_rms_norm_fwd_f64(const double* x, double* out, double* inv_rms, int64_t rows,
                            int64_t cols, double eps, void* stream);
int pf__kc_rms_norm_bwd_f32(const float* x, const float* inv_rms, const float* cotangent, float* dx,
                            int64_t rows, int64_t cols, void* stream);
int pf__kc_rms_norm_bwd_f64(const double* x, const double* inv_rms, const double* cotangent,
                            double* dx, int64_t rows, int64_t cols, void* stream);

/* The solver of math.h, run per element on the device (float32 solves in double). */
int pf__kc_kepler_f32(const float* mean_anomaly, const float* ecc, float* sin_e, float* cos_e,
                      int64_t count, void* stream);
int pf__kc_kepler_f64(const double* mean_anomaly, const double* ecc, double* sin_e, double* cos_e,
                      int64_t count, void* stream);

/* Finds the first eccentricity outside [0, 1), or NaN: a kernel over ecc enqueued on stream,
 * then a copy of its answer to the host and cudaStreamSynchronize(stream), so unlike the other
 * launchers this one returns after the work queued before it (and cannot be captured into a
 * graph). *index receives that index, or -1 when every value is good; *value the value there,
 * widened to double (0 when none). Returns 0 or the first cudaError_t, with CUDA's last error
 * cleared. */
int pf__kc_kepler_check_f32(const float* ecc, int64_t count, int64_t* index, double* value,
                            void* stream);
int pf__kc_kepler_check_f64(const double* ecc, int64_t count, int64_t* index, double* value,
                            void* stream);

int pf__kc_vector_add_f32(const float* b, int64_t nb, const float* c, float* a, int64_t count,
                          void* stream);
int pf__kc_vector_add_f64(const double* b, int64_t nb, const double* c, double* a, int64_t count,
                          void* stream);

#ifdef __cplusplus
}
#endif

#endif /* PACKFN_KERNELS_MATH_CUDA_H */
