/* bench/bench_cuda_raw.h: what bench_cuda's C files call in bench_cuda_raw.cu: packfn's CUDA
 * kernel launchers without packfn around them (the raw side of the launch-cost comparison and the
 * Kepler kernel without its packed wrapper), the fill of the inputs on the device, and the value
 * pattern both the device fill and the host reference compute. */
#ifndef PF_BENCH_CUDA_RAW_H
#define PF_BENCH_CUDA_RAW_H

#include <stdint.h>

#ifdef __CUDACC__
#define PF_BENCH_HD __host__ __device__
#else
#define PF_BENCH_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The inputs the fill writes (the argument `which` of pf_bench_cuda_pattern). */
enum {
  PF_BENCH_X = 0,         /* rms_norm, add_n, vector_add inputs: multiples of 1/1000 in [-1, 1] */
  PF_BENCH_COTANGENT = 1, /* rms_norm_bwd's cotangent, and vector_add's b: as PF_BENCH_X */
  PF_BENCH_MEAN_ANOMALY = 2, /* Kepler's M: multiples of 1/100 in [-10, 10] */
  PF_BENCH_ECC = 3           /* Kepler's e: k / 101 for k in 0..99, so in [0, 0.99) */
};

/* Element i of input `which`, in double. Integer hashing and one correctly rounded division,
 * so the host and the device compute the same value (and the same float32 rounding of it). */
static inline PF_BENCH_HD double pf_bench_cuda_pattern(int which, int64_t i) {
  uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)which * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  int64_t k = (int64_t)(h % 2001u); /* 0..2000 */
  switch (which) {
  case PF_BENCH_MEAN_ANOMALY:
    return (double)(k - 1000) / 100.0;
  case PF_BENCH_ECC:
    return (double)(k % 100) / 101.0;
  default:
    return (double)(k - 1000) / 1000.0;
  }
}

/* Fills data[0..count) with pattern `which` (float32 when f64 is 0, else float64) on stream (a
 * cudaStream_t). Returns the cudaError_t of the launch. */
int pf_bench_cuda_fill(void* data, int f64, int64_t count, int which, void* stream);

/* The library's own launchers of add_n, vector_add and kepler (kernels/math_cuda_elementwise.cuh:
 * the same kernels, grids and `<<<>>>` launches, then cudaGetLastError), called directly: the
 * raw side of the launch-cost comparison, and Kepler without its packed wrapper. Each returns
 * the cudaError_t. */
int pf_bench_cuda_raw_add_n_f32(const float* x, float* out, int64_t count, float n, void* stream);
int pf_bench_cuda_raw_vector_add_f32(const float* b, int64_t nb, const float* c, float* a,
                                     int64_t count, void* stream);
int pf_bench_cuda_raw_kepler(const void* mean_anomaly, const void* ecc, void* sin_e, void* cos_e,
                             int f64, int64_t count, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* PF_BENCH_CUDA_RAW_H */
