/* bench/bench_cuda_raw.cu: bench_cuda's device code: copies of the bodies of kernels/math_cuda.cu's
 * add_n, vector_add and Kepler kernels launched with a plain `<<<>>>` (the library's launchers
 * are hidden in libpackfn_kernels_cuda), and the fill of the benchmark's inputs. */
#include "bench_cuda_raw.h"

#include "kernels/kmath.h" /* pf__k_kepler_solve, the solver the library's Kepler kernel runs */

#include <cuda_runtime.h>
#include <stdint.h>

namespace {

/* kernels/math_cuda.cu's launch configuration. */
constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 65535;

unsigned elementwise_grid(int64_t count) {
  int64_t blocks = (count + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

cudaStream_t as_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

__device__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

template <typename T> __global__ void fill_kernel(T* data, int64_t count, int which) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    data[i] = static_cast<T>(pf_bench_cuda_pattern(which, i));
  }
}

/* The three bodies below are those of kernels/math_cuda.cu. */
__global__ void add_n_kernel(const float* x, float* out, int64_t count, float n) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    out[i] = x[i] + n;
  }
}

__global__ void vector_add_kernel(const float* b, int64_t nb, const float* c, float* a,
                                  int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    a[i] = b[i % nb] + c[i];
  }
}

template <typename T>
__global__ void kepler_kernel(const T* mean_anomaly, const T* ecc, T* sin_e, T* cos_e,
                              int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    double s, c;
    pf__k_kepler_solve(static_cast<double>(mean_anomaly[i]), static_cast<double>(ecc[i]), &s, &c);
    sin_e[i] = static_cast<T>(s);
    cos_e[i] = static_cast<T>(c);
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

void pf_bench_cuda_raw_add_n_f32(const float* x, float* out, int64_t count, float n, void* stream) {
  add_n_kernel<<<elementwise_grid(count), kBlock, 0, as_stream(stream)>>>(x, out, count, n);
}

void pf_bench_cuda_raw_vector_add_f32(const float* b, int64_t nb, const float* c, float* a,
                                      int64_t count, void* stream) {
  vector_add_kernel<<<elementwise_grid(count), kBlock, 0, as_stream(stream)>>>(b, nb, c, a, count);
}

void pf_bench_cuda_raw_kepler(const void* mean_anomaly, const void* ecc, void* sin_e, void* cos_e,
                              int f64, int64_t count, void* stream) {
  if (f64) {
    kepler_kernel<<<elementwise_grid(count), kBlock, 0, as_stream(stream)>>>(
        static_cast<const double*>(mean_anomaly), static_cast<const double*>(ecc),
        static_cast<double*>(sin_e), static_cast<double*>(cos_e), count);
  } else {
    kepler_kernel<<<elementwise_grid(count), kBlock, 0, as_stream(stream)>>>(
        static_cast<const float*>(mean_anomaly), static_cast<const float*>(ecc),
        static_cast<float*>(sin_e), static_cast<float*>(cos_e), count);
  }
}

int pf_bench_cuda_guarded_vector_add_f32(const float* b, int64_t nb, const float* c, float* a,
                                         int64_t count, int device, void* stream) {
  /* The CUDA calls of the packed path on a machine with one GPU: pf_cuda_device_enter makes
   * none (device 0 is the only one, so it is current), the launch is checked with
   * cudaGetLastError, and nothing is restored. With several GPUs the guard adds cudaGetDevice
   * (and cudaSetDevice twice when another device is current). */
  if (device != 0) {
    return static_cast<int>(cudaErrorInvalidDevice);
  }
  vector_add_kernel<<<elementwise_grid(count), kBlock, 0, as_stream(stream)>>>(b, nb, c, a, count);
  return static_cast<int>(cudaGetLastError());
}

} /* extern "C" */
