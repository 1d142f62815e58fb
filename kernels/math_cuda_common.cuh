/* kernels/math_cuda_common.cuh: what the CUDA kernel files share: the launch constants, the
 * 16-byte Pack type, the launch helpers (multiprocessor count, launch, grid-stride indices),
 * block reductions in double and the pieces of rows the rms_norm kernels are built from.
 *
 * Included by math_cuda.cu and math_cuda_rows.cu only. Everything is in an anonymous namespace,
 * so each of them compiles its own copy (sm_count's cache of multiprocessor counts included). */
#ifndef PACKFN_KERNELS_MATH_CUDA_COMMON_CUH
#define PACKFN_KERNELS_MATH_CUDA_COMMON_CUH

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
/* The widest load or store one thread issues: 16 bytes (float4, double2). packfn's tensors
 * are 256-byte aligned (PF_TENSOR_ALIGNMENT); foreign DLPack ones are checked at each call and
 * take the single-value kernels when they are not. */
constexpr int kVecBytes = 16;
/* Packs a thread of a streaming kernel loads before it computes and stores any of them, so
 * that each thread keeps 64 bytes of loads in flight. */
constexpr int kUnroll = 4;
/* Devices whose multiprocessor count is remembered (others ask CUDA at each call). */
constexpr int kCachedDevices = 64;

static_assert(kBlock % kWarp == 0, "a block is whole warps");

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

/* Multiprocessors of the current device (1 when CUDA cannot say; the failed query's error is
 * cleared, and a launch that then fails reports its own). */
int sm_count() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError(); /* handled here: not the next launch's error */
    return 1;
  }
  const bool cached = dev >= 0 && dev < kCachedDevices;
  int count = cached ? sm_counts[dev].load(std::memory_order_relaxed) : 0;
  if (count > 0) {
    return count;
  }
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      count <= 0) {
    (void)cudaGetLastError();
    return 1;
  }
  if (cached) {
    sm_counts[dev].store(count, std::memory_order_relaxed);
  }
  return count;
}

/* Launches kernel on stream and reports whether the launch was accepted: cudaLaunchKernel's own
 * status. A <<<>>> launch followed by cudaGetLastError reported any error the thread's runtime
 * still held from an earlier call that nobody checked (a host's failed cudaMalloc): a call whose
 * kernel was queued and ran failed with that error as its own (review). The host's error is left
 * to it. The arguments are converted to the kernel's parameter types, as <<<>>> converts them. */
template <typename... Params, typename... Args>
int launch(void (*kernel)(Params...), dim3 grid, void* stream, Args... args) {
  return [&](Params... params) {
    void* slots[] = {&params...};
    return static_cast<int>(
        cudaLaunchKernel(kernel, grid, dim3(kBlock), slots, 0, static_cast<cudaStream_t>(stream)));
  }(args...);
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

/* 1 / sqrt(mean of the squares + eps), from their sum (the CPU multiplies by 1 / cols instead
 * of dividing, and rescales float64 rows whose sum overflowed; see math_cuda.h). */
__device__ double inverse_rms(double sum_sq, int64_t cols, double eps) {
  const double mean_sq = cols > 0 ? sum_sq / static_cast<double>(cols) : 0.0;
  return 1.0 / sqrt(mean_sq + eps);
}

} // namespace

#endif /* PACKFN_KERNELS_MATH_CUDA_COMMON_CUH */
