/* kernels/math_cuda_rows.cu: the CUDA versions of rms_norm, rms_norm_fwd and rms_norm_bwd
 * (float32 and float64): the row kernels, how rows are spread over blocks (held in registers,
 * or split over several blocks with partial sums in scratch memory), and their C-callable
 * launchers, each enqueued on a given stream, returning the cudaError_t. */
#include "math_cuda.h"

#include "math_cuda_common.cuh"

#include <type_traits>

namespace {

/* A row held in registers by rms_norm's row kernels spans at most this many packs per thread
 * (8192 float32 or 4096 float64 values per row); longer rows are read twice. */
constexpr int kMaxRowPacks = 8;
/* Long rows, too few to give every multiprocessor a block, are split into chunks of at least
 * this many values (16 per thread) and a multiple of kChunkAlign (a whole number of packs per
 * thread), aiming at kSplitBlocksPerSm blocks per multiprocessor. */
constexpr int64_t kMinChunk = 16 * kBlock;
constexpr int64_t kChunkAlign = 4 * kBlock;
constexpr int kSplitBlocksPerSm = 4;

static_assert(kChunkAlign % (kVecBytes / sizeof(float)) == 0, "chunks start on a pack");

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

/* ---- kernels ---- */

/* One block per row: the sum of squares (in double) by a block reduction, then the scaling.
 * Each thread reads and writes the same columns in both passes, so out may equal x. The
 * general case: any alignment, any row length (rows too long for the registers are read twice,
 * the second time mostly from L1/L2). */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    rms_norm_kernel(const T* x, T* out, T* inv_rms, int64_t rows, int64_t cols, double eps) {
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_scale;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    double acc = thread_dot<T, true>(xr, nullptr, 0, cols, false);
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) {
      const double inv = inverse_rms(acc, cols, eps);
      row_scale = inv;
      if (inv_rms != nullptr) {
        inv_rms[row] = static_cast<T>(inv);
      }
    }
    __syncthreads();
    /* Read once here: thread 0 rewrites row_scale only after the next row's first barrier. */
    scale_range(xr, out + row * cols, 0, cols, false, row_scale);
  }
}

/* rms_norm with the row in registers: aligned rows of whole packs, at most kPacks per thread,
 * all loaded before the reduction, so x is read once. */
template <typename T, int kPacks>
__global__ void __launch_bounds__(kBlock)
    rms_norm_row_kernel(const T* x, T* out, T* inv_rms, int64_t rows, int64_t cols, double eps) {
  constexpr int kW = Pack<T>::kSize;
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_scale;
  const int64_t packs = cols / kW;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Pack<T>* xr = packs_of(x) + row * packs;
    Pack<T>* yr = packs_of(out) + row * packs;
    Pack<T> v[kPacks];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t k = threadIdx.x + p * kBlock;
      v[p] = k < packs ? xr[k] : Pack<T>{};
    }
    double acc = 0.0;
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
#pragma unroll
      for (int e = 0; e < kW; ++e) {
        const double d = v[p].v[e];
        acc += d * d;
      }
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) {
      const double inv = inverse_rms(acc, cols, eps);
      row_scale = inv;
      if (inv_rms != nullptr) {
        inv_rms[row] = static_cast<T>(inv);
      }
    }
    __syncthreads();
    const double scale = row_scale;
    const bool wide = scale > largest(T{});
    const T s = static_cast<T>(wide ? 1.0 : scale);
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t k = threadIdx.x + p * kBlock;
      if (k < packs) {
#pragma unroll
        for (int e = 0; e < kW; ++e) {
          v[p].v[e] = wide ? static_cast<T>(static_cast<double>(v[p].v[e]) * scale) : v[p].v[e] * s;
        }
        yr[k] = v[p];
      }
    }
  }
}

/* Pass 1 of a long row split over blocks: block (chunk, row) of a (chunks, rows) grid writes
 * its chunk's sum of x² (of ct·x with kBwd), in double, to partial[row * chunks + chunk]. */
template <typename T, bool kBwd>
__global__ void __launch_bounds__(kBlock)
    row_partial_kernel(const T* x, const T* ct, double* partial, int64_t cols, int64_t chunk,
                       bool vec) {
  __shared__ double scratch[kBlock / kWarp];
  const int64_t row = blockIdx.y;
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = begin + chunk < cols ? begin + chunk : cols;
  const T* xr = x + row * cols;
  double acc = kBwd ? thread_dot<T, false>(ct + row * cols, xr, begin, end, vec)
                    : thread_dot<T, true>(xr, nullptr, begin, end, vec);
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) {
    partial[row * gridDim.x + blockIdx.x] = acc;
  }
}

/* The sum of a row's partials, valid in thread 0, added in an order fixed by the chunk count:
 * every block of the row gets the same bits. */
__device__ double row_total(const double* partial, double* scratch) {
  const double* pr = partial + static_cast<int64_t>(blockIdx.y) * gridDim.x;
  double acc = 0.0;
  for (unsigned k = threadIdx.x; k < gridDim.x; k += kBlock) {
    acc += pr[k];
  }
  return block_sum(acc, scratch);
}

/* Pass 2 of rms_norm on split rows: each block combines its row's partials and scales its
 * chunk; the row's first block writes inv_rms. */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    rms_norm_split_kernel(const T* x, T* out, T* inv_rms, const double* partial, int64_t cols,
                          int64_t chunk, double eps, bool vec) {
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_scale;
  const int64_t row = blockIdx.y;
  const double acc = row_total(partial, scratch);
  if (threadIdx.x == 0) {
    const double inv = inverse_rms(acc, cols, eps);
    row_scale = inv;
    if (inv_rms != nullptr && blockIdx.x == 0) {
      inv_rms[row] = static_cast<T>(inv);
    }
  }
  __syncthreads();
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = begin + chunk < cols ? begin + chunk : cols;
  scale_range(x + row * cols, out + row * cols, begin, end, vec, row_scale);
}

/* dx = a * ct - b * x with a = inv and b = inv^3 * mean(ct * x), each rounded to T, as the
 * CPU computes it. */
template <typename T> struct BwdMap {
  T a, b;
  __device__ T operator()(T xv, T cv) const { return a * cv - b * xv; }
};

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
    double acc = thread_dot<T, false>(cr, xr, 0, cols, false);
    acc = block_sum(acc, scratch);
    const double inv = inv_rms[row];
    if (threadIdx.x == 0) {
      row_coef = inv * inv * inv * (acc / static_cast<double>(cols));
    }
    __syncthreads();
    const BwdMap<T> f{static_cast<T>(inv), static_cast<T>(row_coef)};
    thread_map(xr, cr, dx + row * cols, 0, cols, false, f);
  }
}

/* rms_norm_bwd with the row of x and of ct in registers, as rms_norm_row_kernel. */
template <typename T, int kPacks>
__global__ void __launch_bounds__(kBlock)
    rms_norm_bwd_row_kernel(const T* x, const T* inv_rms, const T* ct, T* dx, int64_t rows,
                            int64_t cols) {
  constexpr int kW = Pack<T>::kSize;
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_coef;
  const int64_t packs = cols / kW;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Pack<T>* xr = packs_of(x) + row * packs;
    const Pack<T>* cr = packs_of(ct) + row * packs;
    Pack<T>* dr = packs_of(dx) + row * packs;
    const double inv = inv_rms[row];
    Pack<T> vx[kPacks], vc[kPacks];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t k = threadIdx.x + p * kBlock;
      vx[p] = k < packs ? xr[k] : Pack<T>{};
      vc[p] = k < packs ? cr[k] : Pack<T>{};
    }
    double acc = 0.0;
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
#pragma unroll
      for (int e = 0; e < kW; ++e) {
        acc += static_cast<double>(vc[p].v[e]) * static_cast<double>(vx[p].v[e]);
      }
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) {
      row_coef = inv * inv * inv * (acc / static_cast<double>(cols));
    }
    __syncthreads();
    const BwdMap<T> f{static_cast<T>(inv), static_cast<T>(row_coef)};
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t k = threadIdx.x + p * kBlock;
      if (k < packs) {
#pragma unroll
        for (int e = 0; e < kW; ++e) {
          vx[p].v[e] = f(vx[p].v[e], vc[p].v[e]);
        }
        dr[k] = vx[p];
      }
    }
  }
}

/* Pass 2 of rms_norm_bwd on split rows (pass 1: row_partial_kernel<T, true>). */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    rms_norm_bwd_split_kernel(const T* x, const T* inv_rms, const T* ct, T* dx,
                              const double* partial, int64_t cols, int64_t chunk, bool vec) {
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_coef;
  const int64_t row = blockIdx.y;
  const double acc = row_total(partial, scratch);
  const double inv = inv_rms[row];
  if (threadIdx.x == 0) {
    row_coef = inv * inv * inv * (acc / static_cast<double>(cols));
  }
  __syncthreads();
  const int64_t begin = blockIdx.x * chunk;
  const int64_t end = begin + chunk < cols ? begin + chunk : cols;
  const BwdMap<T> f{static_cast<T>(inv), static_cast<T>(row_coef)};
  thread_map(x + row * cols, ct + row * cols, dx + row * cols, begin, end, vec, f);
}

/* ---- launchers shared by both precisions ---- */

/* How rows are split over blocks: `chunks` blocks per row, each over `chunk` values (the last
 * over the rest). chunks == 1: not split. Only rows too few to put two blocks on every
 * multiprocessor are split, and only when each chunk keeps at least kMinChunk values. */
struct RowSplit {
  int64_t chunk;
  int64_t chunks;
};

RowSplit row_split(int64_t rows, int64_t cols) {
  const int64_t sms = sm_count();
  if (rows >= 2 * sms || cols < 2 * kMinChunk) {
    return {cols, 1};
  }
  const int64_t wanted = (sms * kSplitBlocksPerSm + rows - 1) / rows;
  const int64_t most = cols / kMinChunk;
  const int64_t chunks = wanted < most ? wanted : most;
  if (chunks < 2) {
    return {cols, 1};
  }
  int64_t chunk = (cols + chunks - 1) / chunks;
  chunk = (chunk + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
  return {chunk, (cols + chunk - 1) / chunk};
}

/* Stream-ordered scratch memory for split rows. false, with CUDA's error cleared, where the
 * device has no memory pools or no memory left: the caller then takes the unsplit kernels. */
bool scratch_alloc(double** p, int64_t count, void* stream) {
  if (cudaMallocAsync(reinterpret_cast<void**>(p), static_cast<size_t>(count) * sizeof(double),
                      static_cast<cudaStream_t>(stream)) == cudaSuccess) {
    return true;
  }
  (void)cudaGetLastError();
  return false;
}

/* The launch's error, else the release's. */
int scratch_free(int rc, double* p, void* stream) {
  const int freed = static_cast<int>(cudaFreeAsync(p, static_cast<cudaStream_t>(stream)));
  return rc != 0 ? rc : freed;
}

/* The packs per thread for a row of `packs` packs held in registers (kMaxRowPacks at most). */
int row_packs(int64_t packs) {
  int p = 1;
  while (p < kMaxRowPacks && p * static_cast<int64_t>(kBlock) < packs) {
    p *= 2;
  }
  return p;
}

/* f(std::integral_constant<int, P>{}) for the packs per thread P that row_packs picks for a row
 * of `packs` packs: the register-held kernels are instantiated for P = 1, 2, 4 and 8. */
template <typename F> int with_row_packs(int64_t packs, F f) {
  switch (row_packs(packs)) {
  case 1:
    return f(std::integral_constant<int, 1>{});
  case 2:
    return f(std::integral_constant<int, 2>{});
  case 4:
    return f(std::integral_constant<int, 4>{});
  default:
    return f(std::integral_constant<int, 8>{});
  }
}

template <typename T>
int rms_norm(const T* x, T* out, T* inv_rms, int64_t rows, int64_t cols, double eps, void* stream) {
  /* With cols == 0 only rms_norm_fwd has something to write: inv_rms. */
  if (rows <= 0 || (cols <= 0 && inv_rms == nullptr)) {
    return 0;
  }
  if (cols <= 0) {
    return launch(rms_norm_kernel<T>, row_grid(rows), stream, x, out, inv_rms, rows, int64_t{0},
                  eps);
  }
  constexpr int kW = Pack<T>::kSize;
  const bool vec = cols % kW == 0 && aligned(x) && aligned(out);
  const RowSplit split = row_split(rows, cols);
  double* partial = nullptr;
  if (split.chunks > 1 && scratch_alloc(&partial, rows * split.chunks, stream)) {
    const dim3 grid(static_cast<unsigned>(split.chunks), static_cast<unsigned>(rows));
    int rc = launch(row_partial_kernel<T, false>, grid, stream, x, static_cast<const T*>(nullptr),
                    partial, cols, split.chunk, vec);
    if (rc == 0) {
      rc = launch(rms_norm_split_kernel<T>, grid, stream, x, out, inv_rms,
                  static_cast<const double*>(partial), cols, split.chunk, eps, vec);
    }
    return scratch_free(rc, partial, stream);
  }
  const int64_t packs = cols / kW;
  if (vec && packs <= static_cast<int64_t>(kMaxRowPacks) * kBlock) {
    const unsigned grid = row_grid(rows);
    return with_row_packs(packs, [&](auto p) {
      return launch(rms_norm_row_kernel<T, decltype(p)::value>, grid, stream, x, out, inv_rms, rows,
                    cols, eps);
    });
  }
  return launch(rms_norm_kernel<T>, row_grid(rows), stream, x, out, inv_rms, rows, cols, eps);
}

template <typename T>
int rms_norm_bwd(const T* x, const T* inv_rms, const T* ct, T* dx, int64_t rows, int64_t cols,
                 void* stream) {
  if (rows <= 0 || cols <= 0) {
    return 0;
  }
  constexpr int kW = Pack<T>::kSize;
  const bool vec = cols % kW == 0 && aligned(x) && aligned(ct) && aligned(dx);
  const RowSplit split = row_split(rows, cols);
  double* partial = nullptr;
  if (split.chunks > 1 && scratch_alloc(&partial, rows * split.chunks, stream)) {
    const dim3 grid(static_cast<unsigned>(split.chunks), static_cast<unsigned>(rows));
    int rc =
        launch(row_partial_kernel<T, true>, grid, stream, x, ct, partial, cols, split.chunk, vec);
    if (rc == 0) {
      rc = launch(rms_norm_bwd_split_kernel<T>, grid, stream, x, inv_rms, ct, dx,
                  static_cast<const double*>(partial), cols, split.chunk, vec);
    }
    return scratch_free(rc, partial, stream);
  }
  const int64_t packs = cols / kW;
  if (vec && packs <= static_cast<int64_t>(kMaxRowPacks) * kBlock) {
    const unsigned grid = row_grid(rows);
    return with_row_packs(packs, [&](auto p) {
      return launch(rms_norm_bwd_row_kernel<T, decltype(p)::value>, grid, stream, x, inv_rms, ct,
                    dx, rows, cols);
    });
  }
  return launch(rms_norm_bwd_kernel<T>, row_grid(rows), stream, x, inv_rms, ct, dx, rows, cols);
}

} // namespace

/* ---- C entry points ---- */

extern "C" {

int pf__kc_rms_norm_f32(const float* x, float* out, int64_t rows, int64_t cols, double eps,
                        void* stream) {
  return rms_norm<float>(x, out, nullptr, rows, cols, eps, stream);
}

int pf__kc_rms_norm_f64(const double* x, double* out, int64_t rows, int64_t cols, double eps,
                        void* stream) {
  return rms_norm<double>(x, out, nullptr, rows, cols, eps, stream);
}

int pf__kc_rms_norm_fwd_f32(const float* x, float* out, float* inv_rms, int64_t rows, int64_t cols,
                            double eps, void* stream) {
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

} /* extern "C" */
