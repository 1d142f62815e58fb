/* bench/bench_cuda_raw.cu: bench_cuda's device code: the library's own add_n, vector_add and
 * Kepler kernels and launchers (kernels/math_cuda_elementwise.cuh, compiled here too, since
 * libpackfn_kernels_cuda hides its launchers), called without packfn around them, and the fill
 * of the benchmark's inputs. */
#include "bench_cuda_raw.h"

#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/kmath.h" /* pf__k_kepler_solve, the solver the library's Kepler kernel runs */
#include "kernels/math_cuda_common.cuh"
#include "kernels/math_cuda_elementwise.cuh"

namespace {

cudaStream_t as_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

template <typename T> __global__ void fill_kernel(T* data, int64_t count, int which) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    data[i] = static_cast<T>(pf_bench_cuda_pattern(which, i));
  }
}

} // namespace

extern "C" {

int pf_bench_cuda_fill(void* data, int f64, int64_t count, int which, void* stream) {
  if (count <= 0) {
    return 0;
  }
  if (f64) {
    fill_kernel<<<elementwise_grid(count), kBlock, 0, as_stream(stream)>>>(
        static_cast<double*>(data), count, which);
  } else {
    fill_kernel<<<elementwise_grid(count), kBlock, 0, as_stream(stream)>>>(
        static_cast<float*>(data), count, which);
  }
  return static_cast<int>(cudaGetLastError());
}

int pf_bench_cuda_raw_add_n_f32(const float* x, float* out, int64_t count, float n, void* stream) {
  return add_n(x, out, count, n, stream);
}

int pf_bench_cuda_raw_vector_add_f32(const float* b, int64_t nb, const float* c, float* a,
                                     int64_t count, void* stream) {
  return vector_add(b, nb, c, a, count, stream);
}

int pf_bench_cuda_raw_kepler(const void* mean_anomaly, const void* ecc, void* sin_e, void* cos_e,
                             int f64, int64_t count, void* stream) {
  if (f64) {
    return kepler(static_cast<const double*>(mean_anomaly), static_cast<const double*>(ecc),
                  static_cast<double*>(sin_e), static_cast<double*>(cos_e), count, stream);
  }
  return kepler(static_cast<const float*>(mean_anomaly), static_cast<const float*>(ecc),
                static_cast<float*>(sin_e), static_cast<float*>(cos_e), count, stream);
}

} /* extern "C" */
