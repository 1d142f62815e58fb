/* kernels/math_cuda.cu: the CUDA versions of the kernels in math.h (float32 and float64) and
 * their C-callable launchers, each enqueued on a given stream, returning the cudaError_t. */
#include "math_cuda.h"

#include "kmath.h" /* kernels/kmath.h: the scalar Kepler solver, shared with the CPU */

#include <cuda_runtime.h>
#include <float.h>
#include <stdint.h>

#include <atomic>

namespace {

/* Threads per block: eight warps, enough to keep a row's loads in flight while small enough
 * that many blocks fit on each multiprocessor. Must be a multiple of kWarp. */
constexpr int kBlock = 256;
constexpr int kWarp = 32;
/* Row kernels launch at most this many blocks and take further rows in turn; so does Kepler's
 * grid-stride kernel (16.7 M threads, more than any GPU runs at once). */
constexpr int64_t kMaxBlocks = 65535;
/* The streaming kernels (add_n, vector_add) launch at most this many blocks per multiprocessor:
 * 8 blocks of 256 threads fill one (2048 threads on sm_80 and sm_90); more would only queue. */
constexpr int kBlocksPerSm = 8;
/* The widest load or store one thread issues: 16 bytes (float4, double2). packfn's tensors
 * are 256-byte aligned (PF_TENSOR_ALIGNMENT); foreign DLPack ones are checked at each call and
 * take the single-value kernels when they are not. */
constexpr int kVecBytes = 16;
/* Packs a thread of a streaming kernel loads before it computes and stores any of them, so
 * that each thread keeps 64 bytes of loads in flight. */
constexpr int kUnroll = 4;
/* A row held in registers by rms_norm's row kernels spans at most this many packs per thread
 * (8192 float32 or 4096 float64 values per row); longer rows are read twice. */
constexpr int kMaxRowPacks = 8;
/* Long rows, too few to give every multiprocessor a block, are split into chunks of at least
 * this many values (16 per thread) and a multiple of kChunkAlign (a whole number of packs per
 * thread), aiming at kSplitBlocksPerSm blocks per multiprocessor. */
constexpr int64_t kMinChunk = 16 * kBlock;
constexpr int64_t kChunkAlign = 4 * kBlock;
constexpr int kSplitBlocksPerSm = 4;
/* Devices whose multiprocessor count is remembered (others ask CUDA at each call). */
constexpr int kCachedDevices = 64;

static_assert(kBlock % kWarp == 0, "a block is whole warps");
static_assert(kChunkAlign % (kVecBytes / sizeof(float)) == 0, "chunks start on a pack");

/* kVecBytes of T, loaded and stored as one vector instruction where the address is aligned. */
template <typename T> struct alignas(kVecBytes) Pack {
  static constexpr int kSize = kVecBytes / sizeof(T);
  T v[kSize];
};

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kVecBytes == 0;
}

template <typename T> __device__ const Pack<T>* packs_of(const T* p) {
  return reinterpret_cast<const Pack<T>*>(p);
}

template <typename T> __device__ Pack<T>* packs_of(T* p) {
  return reinterpret_cast<Pack<T>*>(p);
}

std::atomic<int> sm_counts[kCachedDevices];

/* Multiprocessors of the current device (1 when CUDA cannot say: the launch then reports why). */
int sm_count() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    return 1;
  }
  const bool cached = dev >= 0 && dev < kCachedDevices;
  int count = cached ? sm_counts[dev].load(std::memory_order_relaxed) : 0;
  if (count > 0) {
    return count;
  }
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      count <= 0) {
    return 1;
  }
  if (cached) {
    sm_counts[dev].store(count, std::memory_order_relaxed);
  }
  return count;
}

unsigned elementwise_grid(int64_t count) {
  int64_t blocks = (count + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

/* Blocks for a streaming kernel over `units` (packs or values): one per kBlock units, at most
 * enough to fill the GPU; each thread then walks the array in grid strides. */
unsigned streaming_grid(int64_t units) {
  const int64_t blocks = (units + kBlock - 1) / kBlock;
  const int64_t full = static_cast<int64_t>(sm_count()) * kBlocksPerSm;
  return static_cast<unsigned>(blocks < full ? blocks : full);
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

/* Launches kernel on stream and reports whether the launch was accepted. */
template <typename... Params, typename... Args>
int launch(void (*kernel)(Params...), dim3 grid, void* stream, Args... args) {
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
 * again after one. The order of the additions depends on the block size only, so blocks that
 * sum the same values get the same bits. */
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

/* ---- pieces of rows shared by the row kernels ---- */

/* This thread's share of the sum over [begin, end) of a[c] * b[c] (a[c]² with kSquare), in
 * double: whole packs when vec (begin and end are then multiples of the pack), else values. */
template <typename T, bool kSquare>
__device__ double thread_dot(const T* a, const T* b, int64_t begin, int64_t end, bool vec) {
  double acc = 0.0;
  if (vec) {
    constexpr int kW = Pack<T>::kSize;
    const Pack<T>* ap = packs_of(a);
    const Pack<T>* bp = packs_of(b);
#pragma unroll 4
    for (int64_t k = begin / kW + threadIdx.x; k < end / kW; k += kBlock) {
      const Pack<T> va = ap[k];
      const Pack<T> vb = kSquare ? va : bp[k];
#pragma unroll
      for (int e = 0; e < kW; ++e) {
        acc += static_cast<double>(va.v[e]) * static_cast<double>(vb.v[e]);
      }
    }
    return acc;
  }
  for (int64_t c = begin + threadIdx.x; c < end; c += kBlock) {
    const double va = a[c];
    acc += va * (kSquare ? va : static_cast<double>(b[c]));
  }
  return acc;
}

/* out[c] = f(a[c], b[c]) (b null: f(a[c], 0)) for this thread's share of [begin, end): whole
 * packs when vec, kUnroll of them loaded before any is stored, else values. Each thread reads
 * only what it writes, so out may equal a or b. */
template <typename T, typename F>
__device__ void thread_map(const T* a, const T* b, T* out, int64_t begin, int64_t end, bool vec,
                           F f) {
  if (vec) {
    constexpr int kW = Pack<T>::kSize;
    const Pack<T>* ap = packs_of(a);
    const Pack<T>* bp = packs_of(b);
    Pack<T>* op = packs_of(out);
    const int64_t last = end / kW;
    for (int64_t k0 = begin / kW + threadIdx.x; k0 < last; k0 += kUnroll * kBlock) {
      Pack<T> va[kUnroll], vb[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t k = k0 + u * kBlock;
        va[u] = k < last ? ap[k] : Pack<T>{};
        vb[u] = b != nullptr && k < last ? bp[k] : Pack<T>{};
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t k = k0 + u * kBlock;
        if (k < last) {
#pragma unroll
          for (int e = 0; e < kW; ++e) {
            va[u].v[e] = f(va[u].v[e], vb[u].v[e]);
          }
          op[k] = va[u];
        }
      }
    }
    return;
  }
  for (int64_t c = begin + threadIdx.x; c < end; c += kBlock) {
    out[c] = f(a[c], b != nullptr ? b[c] : T{});
  }
}

/* y = x * scale, in T where the scale fits it, else in double: a row of subnormals with
 * eps ~ 0, as on the CPU, whose scale exceeds T while the results need not. */
template <typename T>
__device__ void scale_range(const T* x, T* y, int64_t begin, int64_t end, bool vec, double scale) {
  if (scale > largest(T{})) {
    thread_map(x, static_cast<const T*>(nullptr), y, begin, end, vec,
               [scale](T v, T) { return static_cast<T>(static_cast<double>(v) * scale); });
    return;
  }
  const T s = static_cast<T>(scale);
  thread_map(x, static_cast<const T*>(nullptr), y, begin, end, vec, [s](T v, T) { return v * s; });
}

/* 1 / sqrt(mean of the squares + eps), from their sum, as the CPU computes it. */
__device__ double inverse_rms(double sum_sq, int64_t cols, double eps) {
  const double mean_sq = cols > 0 ? sum_sq / static_cast<double>(cols) : 0.0;
  return 1.0 / sqrt(mean_sq + eps);
}

/* ---- kernels ---- */

template <typename T>
__global__ void __launch_bounds__(kBlock) add_n_kernel(const T* x, T* out, int64_t count, T n) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    out[i] = x[i] + n;
  }
}

/* add_n on 16-byte aligned arrays: packs in grid strides, kUnroll loaded before any is stored;
 * the last count mod kSize values by the first threads. */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    add_n_packed_kernel(const T* x, T* out, int64_t count, T n) {
  constexpr int kW = Pack<T>::kSize;
  const Pack<T>* xp = packs_of(x);
  Pack<T>* op = packs_of(out);
  const int64_t packs = count / kW;
  const int64_t stride = grid_stride();
  int64_t i = first_index();
  for (; i + (kUnroll - 1) * stride < packs; i += kUnroll * stride) {
    Pack<T> v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      v[u] = xp[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int e = 0; e < kW; ++e) {
        v[u].v[e] = v[u].v[e] + n;
      }
      op[i + u * stride] = v[u];
    }
  }
  for (; i < packs; i += stride) {
    Pack<T> v = xp[i];
#pragma unroll
    for (int e = 0; e < kW; ++e) {
      v.v[e] = v.v[e] + n;
    }
    op[i] = v;
  }
  const int64_t tail = packs * kW + first_index();
  if (tail < count) {
    out[tail] = x[tail] + n;
  }
}

/* One block per row: the sum of squares (in double) by a block reduction, then the scaling.
 * Each thread reads and writes the same columns in both passes, so out may equal x. The
 * general case: any alignment, any row length (rows too long for the registers are read twice,
 * the second time mostly from L1/L2). */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    rms_norm_kernel(const T* x, T* out, T* inv_rms, int64_t rows, int64_t cols, T eps) {
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_scale;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    double acc = thread_dot<T, true>(xr, nullptr, 0, cols, false);
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) {
      const double inv = inverse_rms(acc, cols, static_cast<double>(eps));
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
    rms_norm_row_kernel(const T* x, T* out, T* inv_rms, int64_t rows, int64_t cols, T eps) {
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
      const double inv = inverse_rms(acc, cols, static_cast<double>(eps));
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
                          int64_t chunk, T eps, bool vec) {
  __shared__ double scratch[kBlock / kWarp];
  __shared__ double row_scale;
  const int64_t row = blockIdx.y;
  const double acc = row_total(partial, scratch);
  if (threadIdx.x == 0) {
    const double inv = inverse_rms(acc, cols, static_cast<double>(eps));
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

__device__ bool bad_eccentricity(double e) {
  return !(e >= 0.0 && e < 1.0); /* NaN fails both comparisons */
}

/* Lowers *first to the index of each thread's first eccentricity outside [0, 1), or NaN; a
 * thread stops at its first, which is its smallest index, so the minimum is the first of all. */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    bad_eccentricity_kernel(const T* ecc, int64_t count, unsigned long long* first) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    if (bad_eccentricity(ecc[i])) {
      atomicMin(first, static_cast<unsigned long long>(i));
      return;
    }
  }
}

/* bad_eccentricity_kernel on a 16-byte aligned array: kUnroll packs loaded before any is
 * tested (a test's branch would otherwise hold the next load back), visited in increasing
 * index order; the last count mod kSize values by the first threads. */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    bad_eccentricity_packed_kernel(const T* ecc, int64_t count, unsigned long long* first) {
  constexpr int kW = Pack<T>::kSize;
  const Pack<T>* ep = packs_of(ecc);
  const int64_t packs = count / kW;
  const int64_t stride = grid_stride();
  int64_t found = -1;
  for (int64_t i = first_index(); i < packs && found < 0; i += kUnroll * stride) {
    Pack<T> v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = i + u * stride;
      v[u] = k < packs ? ep[k] : Pack<T>{}; /* 0 is a good eccentricity */
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int e = 0; e < kW; ++e) {
        if (found < 0 && bad_eccentricity(v[u].v[e])) {
          found = (i + u * stride) * kW + e;
        }
      }
    }
  }
  const int64_t tail = packs * kW + first_index();
  if (found < 0 && tail < count && bad_eccentricity(ecc[tail])) {
    found = tail;
  }
  if (found >= 0) {
    atomicMin(first, static_cast<unsigned long long>(found));
  }
}

/* a[i] = b[i mod nb] + c[i], any alignment. j follows i mod nb without a division per element:
 * it moves by stride mod nb and wraps once. */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    vector_add_kernel(const T* b, int64_t nb, const T* c, T* a, int64_t count) {
  const int64_t stride = grid_stride();
  const int64_t step = stride % nb;
  int64_t i = first_index();
  int64_t j = i % nb;
  for (; i < count; i += stride) {
    a[i] = b[j] + c[i];
    j += step;
    if (j >= nb) {
      j -= nb;
    }
  }
}

/* vector_add with c and a 16-byte aligned: c and a in packs as add_n_packed_kernel, b's values
 * for a pack starting at element j = (i * kSize) mod nb read as one pack when kPackedB (b
 * aligned, and nb a multiple of the pack or nb >= count: a pack of b is then never cut by the
 * wrap), else one by one with the wrap. */
template <typename T, bool kPackedB>
__global__ void __launch_bounds__(kBlock)
    vector_add_packed_kernel(const T* b, int64_t nb, const T* c, T* a, int64_t count) {
  constexpr int kW = Pack<T>::kSize;
  const Pack<T>* cp = packs_of(c);
  Pack<T>* ap = packs_of(a);
  const int64_t packs = count / kW;
  const int64_t stride = grid_stride();
  const int64_t step = (stride * kW) % nb;
  int64_t i = first_index();
  int64_t j = (i * kW) % nb;
  /* b's values from element j on (wrapping), then j moved on by one grid stride of packs */
  auto next_b = [&]() {
    Pack<T> vb;
    if constexpr (kPackedB) {
      vb = packs_of(b)[j / kW];
    } else {
      int64_t jk = j;
#pragma unroll
      for (int e = 0; e < kW; ++e) {
        vb.v[e] = b[jk];
        jk = jk + 1 == nb ? 0 : jk + 1;
      }
    }
    j += step;
    if (j >= nb) {
      j -= nb;
    }
    return vb;
  };
  for (; i + (kUnroll - 1) * stride < packs; i += kUnroll * stride) {
    Pack<T> vc[kUnroll], vb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      vc[u] = cp[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      vb[u] = next_b();
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int e = 0; e < kW; ++e) {
        vc[u].v[e] = vb[u].v[e] + vc[u].v[e];
      }
      ap[i + u * stride] = vc[u];
    }
  }
  for (; i < packs; i += stride) {
    Pack<T> vc = cp[i];
    const Pack<T> vb = next_b();
#pragma unroll
    for (int e = 0; e < kW; ++e) {
      vc.v[e] = vb.v[e] + vc.v[e];
    }
    ap[i] = vc;
  }
  const int64_t tail = packs * kW + first_index();
  if (tail < count) {
    a[tail] = b[tail % nb] + c[tail];
  }
}

/* ---- launchers shared by both precisions ---- */

template <typename T> int add_n(const T* x, T* out, int64_t count, T n, void* stream) {
  if (count <= 0) {
    return 0;
  }
  if (aligned(x) && aligned(out)) {
    return launch(add_n_packed_kernel<T>, streaming_grid(count / Pack<T>::kSize + 1), stream, x,
                  out, count, n);
  }
  return launch(add_n_kernel<T>, streaming_grid(count), stream, x, out, count, n);
}

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

template <typename T>
int rms_norm(const T* x, T* out, T* inv_rms, int64_t rows, int64_t cols, T eps, void* stream) {
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
    switch (row_packs(packs)) {
    case 1:
      return launch(rms_norm_row_kernel<T, 1>, grid, stream, x, out, inv_rms, rows, cols, eps);
    case 2:
      return launch(rms_norm_row_kernel<T, 2>, grid, stream, x, out, inv_rms, rows, cols, eps);
    case 4:
      return launch(rms_norm_row_kernel<T, 4>, grid, stream, x, out, inv_rms, rows, cols, eps);
    default:
      return launch(rms_norm_row_kernel<T, 8>, grid, stream, x, out, inv_rms, rows, cols, eps);
    }
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
    switch (row_packs(packs)) {
    case 1:
      return launch(rms_norm_bwd_row_kernel<T, 1>, grid, stream, x, inv_rms, ct, dx, rows, cols);
    case 2:
      return launch(rms_norm_bwd_row_kernel<T, 2>, grid, stream, x, inv_rms, ct, dx, rows, cols);
    case 4:
      return launch(rms_norm_bwd_row_kernel<T, 4>, grid, stream, x, inv_rms, ct, dx, rows, cols);
    default:
      return launch(rms_norm_bwd_row_kernel<T, 8>, grid, stream, x, inv_rms, ct, dx, rows, cols);
    }
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

/* The first error of a sequence of CUDA calls made regardless of the earlier ones. */
cudaError_t first_error(cudaError_t a, cudaError_t b) {
  return a != cudaSuccess ? a : b;
}

/* The first bad eccentricity: one kernel over ecc and a copy of its 8-byte answer on stream,
 * then a wait for the stream (and, for a bad one, a copy of that value). The answer lives in
 * stream-ordered memory, or cudaMalloc'd where the device has no memory pools. */
template <typename T>
int kepler_check(const T* ecc, int64_t count, int64_t* index, double* value, void* stream) {
  *index = -1;
  *value = 0.0;
  if (count <= 0) {
    return 0;
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  unsigned long long* first = nullptr;
  bool pooled = true;
  cudaError_t rc = cudaMallocAsync(reinterpret_cast<void**>(&first), sizeof *first, s);
  if (rc == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    pooled = false;
    rc = cudaMalloc(reinterpret_cast<void**>(&first), sizeof *first);
  }
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return static_cast<int>(rc);
  }
  unsigned long long found = ~0ull;
  rc = cudaMemsetAsync(first, 0xff, sizeof *first, s);
  if (rc == cudaSuccess) {
    if (aligned(ecc)) {
      bad_eccentricity_packed_kernel<T>
          <<<streaming_grid(count / Pack<T>::kSize + 1), kBlock, 0, s>>>(ecc, count, first);
    } else {
      bad_eccentricity_kernel<T><<<streaming_grid(count), kBlock, 0, s>>>(ecc, count, first);
    }
    rc = cudaGetLastError();
  }
  if (rc == cudaSuccess) {
    rc = cudaMemcpyAsync(&found, first, sizeof found, cudaMemcpyDeviceToHost, s);
  }
  rc = first_error(rc, cudaStreamSynchronize(s));
  /* Freed after the wait: the default pool gives its unused memory back to the device at each
   * synchronisation (release threshold 0), so a block freed before it would be unmapped and
   * mapped again on every call; freed here, the next call reuses it. */
  rc = first_error(rc, pooled ? cudaFreeAsync(first, s) : cudaFree(first));
  if (rc == cudaSuccess && found != ~0ull) {
    T bad = T(0);
    *index = static_cast<int64_t>(found);
    rc = cudaMemcpyAsync(&bad, ecc + found, sizeof bad, cudaMemcpyDeviceToHost, s);
    rc = first_error(rc, cudaStreamSynchronize(s));
    *value = static_cast<double>(bad);
  }
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
  }
  return static_cast<int>(rc);
}

template <typename T>
int vector_add(const T* b, int64_t nb, const T* c, T* a, int64_t count, void* stream) {
  if (count <= 0 || nb <= 0) {
    return 0;
  }
  constexpr int kW = Pack<T>::kSize;
  if (aligned(c) && aligned(a)) {
    const unsigned grid = streaming_grid(count / kW + 1);
    if (aligned(b) && (nb % kW == 0 || nb >= count)) {
      return launch(vector_add_packed_kernel<T, true>, grid, stream, b, nb, c, a, count);
    }
    return launch(vector_add_packed_kernel<T, false>, grid, stream, b, nb, c, a, count);
  }
  return launch(vector_add_kernel<T>, streaming_grid(count), stream, b, nb, c, a, count);
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
