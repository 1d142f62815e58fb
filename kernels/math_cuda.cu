/* kernels/math_cuda.cu: the C-callable launchers (pf__kc_*) of the CUDA elementwise kernels in
 * math_cuda_elementwise.cuh (add_n, vector_add, kepler and its check of the eccentricities;
 * float32 and float64), each enqueued on a given stream, returning the cudaError_t. rms_norm's
 * are in math_cuda_rows.cu; what both share is in math_cuda_common.cuh. */
#include "math_cuda.h"

#include "kmath.h" /* kernels/kmath.h: the scalar Kepler solver, shared with the CPU */

#include "math_cuda_common.cuh"

#include "math_cuda_elementwise.cuh"

/* ---- C entry points ---- */

extern "C" {

const char* pf__kc_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

int pf__kc_add_n_f32(const float* x, float* out, int64_t count, float n, void* stream) {
  return add_n(x, out, count, n, stream);
}

int pf__kc_add_n_f64(const double* x, double* out, int64_t count, double n, void* stream) {
  return add_n(x, out, count, n, stream);
}

int pf__kc_kepler_f32(const float* mean_anomaly, const float* ecc, float* sin_e, float* cos_e,
                      int64_t count, void* stream) {
  return kepler(mean_anomaly, ecc, sin_e, cos_e, count, stream);
}

int pf__kc_kepler_f64(const double* mean_anomaly, const double* ecc, double* sin_e, double* cos_e,
                      int64_t count, void* stream) {
  return kepler(mean_anomaly, ecc, sin_e, cos_e, count, stream);
}

int pf__kc_kepler_check_f32(const float* ecc, int64_t count, int64_t* index, double* value,
                            void* stream) {
  return kepler_check(ecc, count, index, value, stream);
}

int pf__kc_kepler_check_f64(const double* ecc, int64_t count, int64_t* index, double* value,
                            void* stream) {
  return kepler_check(ecc, count, index, value, stream);
}

int pf__kc_vector_add_f32(const float* b, int64_t nb, const float* c, float* a, int64_t count,
                          void* stream) {
  return vector_add(b, nb, c, a, count, stream);
}

int pf__kc_vector_add_f64(const double* b, int64_t nb, const double* c, double* a, int64_t count,
                          void* stream) {
  return vector_add(b, nb, c, a, count, stream);
}

} /* extern "C" */
