/* kernels/math_cuda_elementwise.cuh: the CUDA elementwise kernels (add_n, vector_add, kepler and
 * its check of the eccentricities; float32 and float64) and their launchers, each enqueued on a
 * given stream and returning the cudaError_t. Compiled into math_cuda.cu, which exports them
 * to C as pf__kc_*, and into bench/bench_cuda_raw.cu, whose "raw" launches are these very
 * launchers without packfn around them. Needs kmath.h (the scalar Kepler solver) and
 * math_cuda_common.cuh included first. */
#ifndef PACKFN_KERNELS_MATH_CUDA_ELEMENTWISE_CUH
#define PACKFN_KERNELS_MATH_CUDA_ELEMENTWISE_CUH

namespace {

/* The streaming kernels (add_n, vector_add) launch at most this many blocks per multiprocessor:
 * 8 blocks of 256 threads fill one (2048 threads on sm_80 and sm_90); more would only queue. */
constexpr int kBlocksPerSm = 8;

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
    /* the launch's own status (launch): an error the host left unchecked is not the check's */
    rc = static_cast<cudaError_t>(
        aligned(ecc)
            ? launch(bad_eccentricity_packed_kernel<T>, streaming_grid(count / Pack<T>::kSize + 1),
                     stream, ecc, count, first)
            : launch(bad_eccentricity_kernel<T>, streaming_grid(count), stream, ecc, count, first));
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

#endif /* PACKFN_KERNELS_MATH_CUDA_ELEMENTWISE_CUH */
