/* kernels/math_cuda.cu: the CUDA versions of the kernels in math.h (float32 and float64) and
 * their C-callable launchers, each enqueued on a given stream, returning the cudaError_t. */
#include "math_cuda.h"

#include "kmath.h" /* kernels/kmath.h: the scalar Kepler solver, shared with the CPU */

#include <cuda_runtime.h>
#include <float.h>
#include <stdint.h>

namespace {

/* Threads per block: eight warps, enough to keep a row's loads in flight while small enough
 * that many blocks fit on each multiprocessor. Must be a multiple of kWarp. */
constexpr int kBlock = 256;
constexpr int kWarp = 32;
/* Grid-stride kernels launch at most this many blocks (16.7 M threads, more than any GPU runs
 * at once); longer arrays are walked in strides. Row kernels likewise take rows in turn. */
constexpr int64_t kMaxBlocks = 65535;

static_assert(kBlock % kWarp == 0, "a block is whole warps");

unsigned elementwise_grid(int64_t count) {
  int64_t blocks = (count + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

/* Launches kernel on stream and reports whether the launch was accepted. */
template <typename... Params, typename... Args>
int launch(void (*kernel)(Params...), unsigned grid, void* stream, Args... args) {
  kernel<<<grid, kBlock, 0, static_cast<cudaStream_t>(stream)>>>(args...);
  return static_cast<int>(cudaGetLastError());
}

__device__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

/* The largest finite value of each element type (std::numeric_limits is host-only). */
__device__ constexpr double largest(float) {
  return FLT_MAX;
}

__device__ constexpr double largest(double) {
  return DBL_MAX;
}

/* ---- reductions ---- */

__device__ double warp_sum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

/* The sum of v over the block, valid in thread 0. scratch holds kBlock / kWarp values. Every
 * read of scratch happens before the caller's next __syncthreads, so the block may call this
 * again after one. */
__device__ double block_sum(double v, double* scratch) {
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) {
    scratch[warp] = v;
  }
  __syncthreads();
  if (warp == 0) {
    v = (lane < kBlock / kWarp) ? scratch[lane] : 0.0;
    v = warp_sum(v);
  }
  return v;
}

/* ---- kernels ---- */

template <typename T> __global__ void add_n_kernel(const T* x, T* out, int64_t count, T n) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    out[i] = x[i] + n;
  }
}

/* One block per row: the sum of squares (in double) by a block reduction, then the scaling.
 * Each thread reads and writes the same columns in both passes, so out may equal x. */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    rms_norm_kernel(const T* x, T* out, T* inv_rms, int64_t rows, int64_t cols, T eps) {
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_scale;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = out + row * cols;
    double acc = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
      const double v = xr[c];
      acc += v * v;
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) {
      const double mean_sq = cols > 0 ? acc / static_cast<double>(cols) : 0.0;
      const double inv = 1.0 / sqrt(mean_sq + static_cast<double>(eps));
      row_scale = inv;
      if (inv_rms != nullptr) {
        inv_rms[row] = static_cast<T>(inv);
      }
    }
    __syncthreads();
    /* Read once here: thread 0 rewrites row_scale only after the next row's first barrier. */
    const double scale = row_scale;
    if (scale > largest(T{})) {
      /* A row of subnormals with eps ~ 0, as on the CPU: the scale exceeds T, results need not. */
      for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
        yr[c] = static_cast<T>(static_cast<double>(xr[c]) * scale);
      }
      continue;
    }
    const T s = static_cast<T>(scale);
    for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
      yr[c] = xr[c] * s;
    }
  }
}

/* dx = inv * ct - x * inv^3 * mean(ct * x) per row, one block per row as rms_norm_kernel. */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    rms_norm_bwd_kernel(const T* x, const T* inv_rms, const T* ct, T* dx, int64_t rows,
                        int64_t cols) {
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_coef;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    const T* cr = ct + row * cols;
    T* dr = dx + row * cols;
    double acc = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
      acc += static_cast<double>(cr[c]) * static_cast<double>(xr[c]);
    }
    acc = block_sum(acc, scratch);
    const double inv = inv_rms[row];
    if (threadIdx.x == 0) {
      row_coef = inv * inv * inv * (acc / static_cast<double>(cols));
    }
    __syncthreads();
    const T a = static_cast<T>(inv);
    const T b = static_cast<T>(row_coef);
    for (int64_t c = threadIdx.x; c < cols; c += kBlock) {
      dr[c] = a * cr[c] - b * xr[c];
    }
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

template <typename T>
__global__ void vector_add_kernel(const T* b, int64_t nb, const T* c, T* a, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    a[i] = b[i % nb] + c[i];
  }
}

/* ---- launchers shared by both precisions ---- */

template <typename T> int add_n(const T* x, T* out, int64_t count, T n, void* stream) {
  if (count <= 0) {
    return 0;
  }
  return launch(add_n_kernel<T>, elementwise_grid(count), stream, x, out, count, n);
}

template <typename T>
int rms_norm(const T* x, T* out, T* inv_rms, int64_t rows, int64_t cols, T eps, void* stream) {
  /* With cols == 0 only rms_norm_fwd has something to write: inv_rms. */
  if (rows <= 0 || (cols <= 0 && inv_rms == nullptr)) {
    return 0;
  }
  return launch(rms_norm_kernel<T>, row_grid(rows), stream, x, out, inv_rms, rows,
                cols > 0 ? cols : int64_t{0}, eps);
}

template <typename T>
int rms_norm_bwd(const T* x, const T* inv_rms, const T* ct, T* dx, int64_t rows, int64_t cols,
                 void* stream) {
  if (rows <= 0 || cols <= 0) {
    return 0;
  }
  return launch(rms_norm_bwd_kernel<T>, row_grid(rows), stream, x, inv_rms, ct, dx, rows, cols);
}

template <typename T>
int kepler(const T* mean_anomaly, const T* ecc, T* sin_e, T* cos_e, int64_t count, void* stream) {
  if (count <= 0) {
    return 0;
  }
  return launch(kepler_kernel<T>, elementwise_grid(count), stream, mean_anomaly, ecc, sin_e, cos_e,
                count);
}

template <typename T>
int vector_add(const T* b, int64_t nb, const T* c, T* a, int64_t count, void* stream) {
  if (count <= 0 || nb <= 0) {
    return 0;
  }
  return launch(vector_add_kernel<T>, elementwise_grid(count), stream, b, nb, c, a, count);
}

} // namespace

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

int pf__kc_rms_norm_f32(const float* x, float* out, int64_t rows, int64_t cols, float eps,
                        void* stream) {
  return rms_norm<float>(x, out, nullptr, rows, cols, eps, stream);
}

int pf__kc_rms_norm_f64(const double* x, double* out, int64_t rows, int64_t cols, double eps,
                        void* stream) {
  return rms_norm<double>(x, out, nullptr, rows, cols, eps, stream);
}

int pf__kc_rms_norm_fwd_f32(const float* x, float* out, float* inv_rms, int64_t rows, int64_t cols,
                            float eps, void* stream) {
  return rms_norm(x, out, inv_rms, rows, cols, eps, stream);
}

int pf__kc_rms_norm_fwd_f64(const double* x, double* out, double* inv_rms, int64_t rows,
                            int64_t cols, double eps, void* stream) {
  return rms_norm(x, out, inv_rms, rows, cols, eps, stream);
}

int pf__kc_rms_norm_bwd_f32(const float* x, const float* inv_rms, const float* cotangent, float* dx,
                            int64_t rows, int64_t cols, void* stream) {
  return rms_norm_bwd(x, inv_rms, cotangent, dx, rows, cols, stream);
}

int pf__kc_rms_norm_bwd_f64(const double* x, const double* inv_rms, const double* cotangent,
                            double* dx, int64_t rows, int64_t cols, void* stream) {
  return rms_norm_bwd(x, inv_rms, cotangent, dx, rows, cols, stream);
}

int pf__kc_kepler_f32(const float* mean_anomaly, const float* ecc, float* sin_e, float* cos_e,
                      int64_t count, void* stream) {
  return kepler(mean_anomaly, ecc, sin_e, cos_e, count, stream);
}

int pf__kc_kepler_f64(const double* mean_anomaly, const double* ecc, double* sin_e, double* cos_e,
                      int64_t count, void* stream) {
  return kepler(mean_anomaly, ecc, sin_e, cos_e, count, stream);
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
