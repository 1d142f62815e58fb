/* kernels/math_simd_body.h: the inner loops of kernels/math_simd.h, written once with the
 * vector extension of gcc and clang and compiled once per instruction set. Included only by
 * math_cpu_base.c, math_cpu_avx2.c and math_cpu_avx512.c, each of which defines first
 *   PF__K_VBYTES  the vector width in bytes (16, 32 or 64),
 *   PF__K_NACC    how many independent vector accumulators a reduction keeps,
 *   PF__K_TABLE   the name of the table to define, PF__K_NAME its name as a string,
 * and is compiled with that instruction set's flags (kernels/CMakeLists.math.txt). */
#include "kernels/kmath.h"
#include "kernels/math_simd.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>
#define PF__K_STREAM 1
#else
#define PF__K_STREAM 0 /* no non-temporal stores: the stream flag is ignored */
#endif

typedef float vf_t __attribute__((vector_size(PF__K_VBYTES)));
typedef double vd_t __attribute__((vector_size(PF__K_VBYTES)));
#define WF ((int64_t)(PF__K_VBYTES / 4)) /* floats per vector */
#define WD ((int64_t)(PF__K_VBYTES / 8)) /* doubles per vector */
/* Reduction lanes, and the elements after which float lanes are folded into double: each float
 * lane adds 16 products in float precision. */
#define LANES_F (PF__K_NACC * WF)
#define FOLD_F  (16 * LANES_F)
#define LANES_D (PF__K_NACC * WD)
#define FOLD_D  (16 * LANES_D)
/* Floats and doubles per 64-byte cache line: one prefetch per line written. */
#define LINE_F 16
#define LINE_D 8
/* Loops over accumulators and lanes: unrolled fully, so that the vectors stay in registers
 * (an array of vectors indexed in a loop lives on the stack otherwise). */
#define UNROLL _Pragma("GCC unroll 16")

/* Unaligned loads and stores (memcpy compiles to one vector move). */
static inline vf_t load_f(const float* p) {
  vf_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline vd_t load_d(const double* p) {
  vd_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void store_f(float* p, vf_t v) {
  memcpy(p, &v, sizeof v);
}
static inline void store_d(double* p, vd_t v) {
  memcpy(p, &v, sizeof v);
}

/* put_f(p, v, stream), put_d: store a whole vector to p, non-temporal when stream (p is then
 * vector-aligned). Defined by PF__K_PUT(SUF, T, V, S512, S256, S128, M512, M256, M128) from
 * the streaming store intrinsics of T and their vector types, one pair per vector width. */
#if PF__K_STREAM && PF__K_VBYTES == 64
#define PF__K_STREAM_STORE(p, v, S512, S256, S128, M512, M256, M128) S512(p, (M512)(v))
#elif PF__K_STREAM && PF__K_VBYTES == 32
#define PF__K_STREAM_STORE(p, v, S512, S256, S128, M512, M256, M128) S256(p, (M256)(v))
#elif PF__K_STREAM
#define PF__K_STREAM_STORE(p, v, S512, S256, S128, M512, M256, M128) S128(p, (M128)(v))
#endif
#if PF__K_STREAM
#define PF__K_PUT(SUF, T, V, S512, S256, S128, M512, M256, M128)                                   \
  static inline void put_##SUF(T* p, V v, int stream) {                                            \
    if (stream) {                                                                                  \
      PF__K_STREAM_STORE(p, v, S512, S256, S128, M512, M256, M128);                                \
    } else {                                                                                       \
      store_##SUF(p, v);                                                                           \
    }                                                                                              \
  }
#else
#define PF__K_PUT(SUF, T, V, S512, S256, S128, M512, M256, M128)                                   \
  static inline void put_##SUF(T* p, V v, int stream) {                                            \
    (void)stream;                                                                                  \
    store_##SUF(p, v);                                                                             \
  }
#endif

PF__K_PUT(f, float, vf_t, _mm512_stream_ps, _mm256_stream_ps, _mm_stream_ps, __m512, __m256, __m128)
PF__K_PUT(d, double, vd_t, _mm512_stream_pd, _mm256_stream_pd, _mm_stream_pd, __m512d, __m256d,
          __m128d)

/* Elements to write one by one before out is vector-aligned; 0 unless streaming. */
static inline int64_t head_len(const void* out, int64_t n, int64_t elem, int stream) {
  if (!stream || !PF__K_STREAM) {
    return 0;
  }
  int64_t mis = (int64_t)((uintptr_t)out % PF__K_VBYTES);
  int64_t head = mis == 0 ? 0 : (PF__K_VBYTES - mis) / elem;
  return head < n ? head : n;
}

/* ---- reductions ---- */

/* The low and the high half of v's lanes, widened to double. */
static inline void widen_f(vf_t v, vd_t* lo, vd_t* hi) {
#if PF__K_STREAM && PF__K_VBYTES == 64
  *lo = (vd_t)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)v));
  *hi = (vd_t)_mm512_cvtps_pd(_mm512_extractf32x8_ps((__m512)v, 1));
#elif PF__K_STREAM && PF__K_VBYTES == 32
  *lo = (vd_t)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)v));
  *hi = (vd_t)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)v, 1));
#elif PF__K_STREAM
  *lo = (vd_t)_mm_cvtps_pd((__m128)v);
  *hi = (vd_t)_mm_cvtps_pd(_mm_movehl_ps((__m128)v, (__m128)v));
#else
  for (int64_t k = 0; k < WD; ++k) {
    (*lo)[k] = v[k];
    (*hi)[k] = v[k + WD];
  }
#endif
}

/* Adds the float lanes of acc[0..PF__K_NACC), widened, into the double lanes of *lo (the low
 * half of each vector's lanes) and *hi (the high half). Two plain variables rather than an
 * array, so that they stay in registers. */
static inline void fold_f32(const vf_t* acc, vd_t* lo, vd_t* hi) {
  UNROLL for (int j = 0; j < PF__K_NACC; ++j) {
    vd_t l, h;
    widen_f(acc[j], &l, &h);
    *lo += l;
    *hi += h;
  }
}

/* The sum of the lanes of t, in a fixed tree order. */
static inline double lanes_sum(vd_t t) {
  UNROLL for (int64_t w = WD / 2; w >= 1; w /= 2) {
    UNROLL for (int64_t k = 0; k < w; ++k) {
      t[k] += t[k + w];
    }
  }
  return t[0];
}

/* The sum of the lanes of v[0..count), count a power of two, in a fixed tree order (v is
 * overwritten). A chain of scalar adds would cost its latency once per lane. */
static inline double hsum_d(vd_t* v, int count) {
  UNROLL for (int w = count / 2; w >= 1; w /= 2) {
    UNROLL for (int k = 0; k < w; ++k) {
      v[k] += v[k + w];
    }
  }
  return lanes_sum(v[0]);
}

/* sum_i a[i] * b[i] over n floats (same: a == b, one load per element), in float lanes of
 * at most 16 products folded into two vectors of double lanes (block after block), whose lanes
 * are added in a fixed tree at the end. When x is
 * not NULL the same pass also writes out[i] = x[i] * s (x, out another row than a): the
 * scaling of one row then shares its pass with the reduction of the next, its stores
 * overlapping the reduction's loads as in a memcpy, and the sum is bit for bit the one without.
 * Every vector lives in a register: the accumulators' array is indexed only in unrolled loops,
 * and the double lanes are two variables (as an array they were kept on the stack, zeroed with
 * `rep stos` and spilled at every row's end; AVX-512, rows of 1024 floats against memcpy,
 * before -> after in one program: 0.40 -> 0.45x at 16 KiB, 0.70 -> 0.80x at 64 KiB). */
static inline double dot_core_f32(const float* a, const float* b, int64_t n, int same,
                                  const float* x, float* out, float s) {
  vd_t lo = (vd_t){0};
  vd_t hi = (vd_t){0};
  vf_t vs = (vf_t){0} + s;
  int64_t i = 0;
  while (n - i >= LANES_F) {
    int64_t len = (n - i >= FOLD_F) ? FOLD_F : (n - i) & ~(LANES_F - 1);
    vf_t acc[PF__K_NACC];
    UNROLL for (int j = 0; j < PF__K_NACC; ++j) {
      acc[j] = (vf_t){0};
    }
    for (int64_t k = i; k < i + len; k += LANES_F) {
      UNROLL for (int j = 0; j < PF__K_NACC; ++j) {
        vf_t va = load_f(a + k + j * WF);
        vf_t vb = same ? va : load_f(b + k + j * WF);
        acc[j] += va * vb;
        if (x != NULL) {
          store_f(out + k + j * WF, load_f(x + k + j * WF) * vs);
        }
      }
    }
    fold_f32(acc, &lo, &hi);
    i += len;
  }
  double total = lanes_sum(lo + hi);
  for (; i < n; ++i) {
    total += (double)a[i] * b[i];
    if (x != NULL) {
      out[i] = x[i] * s;
    }
  }
  return total;
}

/* The same over doubles: double lanes, each block's total added with Neumaier's compensation,
 * so the error stays that of one block however long the row is. The tail of fewer than LANES_D
 * products is summed on its own and added the same way: added one by one into the total, each
 * would round at the total's ulp (up to 31 roundings at AVX-512: 6.4 ulp measured on rows of
 * 1023, against 2.5 for rows of 1024). */
static inline double dot_core_f64(const double* a, const double* b, int64_t n, int same,
                                  const double* x, double* out, double s) {
  double total = 0.0;
  double comp = 0.0;
  vd_t vs = (vd_t){0} + s;
  int64_t i = 0;
  while (n - i >= LANES_D) {
    int64_t len = (n - i >= FOLD_D) ? FOLD_D : (n - i) & ~(LANES_D - 1);
    vd_t acc[PF__K_NACC];
    UNROLL for (int j = 0; j < PF__K_NACC; ++j) {
      acc[j] = (vd_t){0};
    }
    for (int64_t k = i; k < i + len; k += LANES_D) {
      UNROLL for (int j = 0; j < PF__K_NACC; ++j) {
        vd_t va = load_d(a + k + j * WD);
        vd_t vb = same ? va : load_d(b + k + j * WD);
        acc[j] += va * vb;
        if (x != NULL) {
          store_d(out + k + j * WD, load_d(x + k + j * WD) * vs);
        }
      }
    }
    double block = hsum_d(acc, PF__K_NACC);
    double sum = total + block;
    comp += (fabs(total) >= fabs(block)) ? (total - sum) + block : (block - sum) + total;
    total = sum;
    i += len;
  }
  double tail = 0.0;
  for (; i < n; ++i) {
    tail += a[i] * b[i];
    if (x != NULL) {
      out[i] = x[i] * s;
    }
  }
  double sum = total + tail;
  comp += (fabs(total) >= fabs(tail)) ? (total - sum) + tail : (tail - sum) + total;
  return sum + comp;
}

static double dot_f32(const float* a, const float* b, int64_t n) {
  return a == b ? dot_core_f32(a, a, n, 1, NULL, NULL, 0.0f)
                : dot_core_f32(a, b, n, 0, NULL, NULL, 0.0f);
}

static double dot_f64(const double* a, const double* b, int64_t n) {
  return a == b ? dot_core_f64(a, a, n, 1, NULL, NULL, 0.0)
                : dot_core_f64(a, b, n, 0, NULL, NULL, 0.0);
}

static double scale_dot_f32(const float* x, float* out, int64_t n, float s, const float* next) {
  return dot_core_f32(next, next, n, 1, x, out, s);
}

static double scale_dot_f64(const double* x, double* out, int64_t n, double s, const double* next) {
  return dot_core_f64(next, next, n, 1, x, out, s);
}

/* ---- elementwise ---- */

/* The elementwise loops, defined once per element type by PF__K_ELEMENTWISE(SUF, T, V, W,
 * LINE, LOAD, STORE, PUT): SUF names them (f32, f64), T is the element and V its vector of W
 * lanes, LINE the elements per cache line, LOAD/STORE/PUT the vector moves above. */
#define PF__K_ELEMENTWISE(SUF, T, V, W, LINE, LOAD, STORE, PUT)                                    \
  static void scale_##SUF(const T* x, T* out, int64_t n, T s, const T* next, int stream) {         \
    int64_t i = head_len(out, n, (int64_t)sizeof(T), stream);                                      \
    for (int64_t k = 0; k < i; ++k) {                                                              \
      out[k] = x[k] * s;                                                                           \
    }                                                                                              \
    V vs = (V){0} + s;                                                                             \
    for (; n - i >= LINE; i += LINE) {                                                             \
      if (next != NULL) {                                                                          \
        __builtin_prefetch(next + i, 0, 2);                                                        \
      }                                                                                            \
      for (int64_t j = 0; j < LINE; j += W) {                                                      \
        PUT(out + i + j, LOAD(x + i + j) * vs, stream);                                            \
      }                                                                                            \
    }                                                                                              \
    for (; i < n; ++i) {                                                                           \
      out[i] = x[i] * s;                                                                           \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  /* scale with non-temporal stores, the input read PF__K_PAGE_RUNS pages at a time: a line of     \
   * each page in turn (math_simd.h); x is first read up to a page boundary, whole vectors. */     \
  static void scale_pages_##SUF(const T* x, T* out, int64_t n, T s) {                              \
    int64_t i = head_len(out, n, (int64_t)sizeof(T), 1);                                           \
    for (int64_t k = 0; k < i; ++k) {                                                              \
      out[k] = x[k] * s;                                                                           \
    }                                                                                              \
    V vs = (V){0} + s;                                                                             \
    const int64_t page = PF__K_PAGE_BYTES / (int64_t)sizeof(T);                                    \
    const int64_t block = PF__K_PAGE_RUNS * page;                                                  \
    int64_t lead =                                                                                 \
        (int64_t)((PF__K_PAGE_BYTES - (uintptr_t)(x + i) % PF__K_PAGE_BYTES) % PF__K_PAGE_BYTES) / \
        (int64_t)sizeof(T);                                                                        \
    lead -= lead % W;                                                                              \
    for (int64_t end = i + (lead < n - i ? lead : 0); i < end; i += W) {                           \
      PUT(out + i, LOAD(x + i) * vs, 1);                                                           \
    }                                                                                              \
    for (; n - i >= block; i += block) {                                                           \
      for (int64_t l = 0; l < page; l += LINE) {                                                   \
        UNROLL for (int64_t p = 0; p < PF__K_PAGE_RUNS; ++p) {                                     \
          UNROLL for (int64_t j = 0; j < LINE; j += W) {                                           \
            PUT(out + i + p * page + l + j, LOAD(x + i + p * page + l + j) * vs, 1);               \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (; n - i >= W; i += W) {                                                                   \
      PUT(out + i, LOAD(x + i) * vs, 1);                                                           \
    }                                                                                              \
    for (; i < n; ++i) {                                                                           \
      out[i] = x[i] * s;                                                                           \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void scale_back_##SUF(const T* x, T* out, int64_t n, T s) {                               \
    int64_t i = n - n % LINE; /* the blocks scale_ has, so every element takes the same path */    \
    for (int64_t k = n; k-- > i;) {                                                                \
      out[k] = x[k] * s;                                                                           \
    }                                                                                              \
    V vs = (V){0} + s;                                                                             \
    for (; i > 0; i -= LINE) {                                                                     \
      for (int64_t j = LINE - W; j >= 0; j -= W) {                                                 \
        STORE(out + i - LINE + j, LOAD(x + i - LINE + j) * vs);                                    \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  /* Streamed, every element is computed by the vector expression (the compiler may contract the   \
   * scalar one into an FMA otherwise, and which elements a thread's part leaves to it depends on  \
   * the split): the elements before out's first aligned vector by one unaligned vector, those     \
   * after its last aligned vector by one more, both overlapping the aligned ones.                 \
   * (Streamed spans never overlap p or q.) */                                                     \
  static void axpby_##SUF(const T* p, const T* q, T* out, int64_t n, T a, T b, int stream) {       \
    V va = (V){0} + a;                                                                             \
    V vb = (V){0} + b;                                                                             \
    int64_t i = 0;                                                                                 \
    int vec_ends = stream && PF__K_STREAM && n >= W;                                               \
    if (vec_ends && (i = head_len(out, n, (int64_t)sizeof(T), 1)) > 0) {                           \
      STORE(out, va* LOAD(p) - vb * LOAD(q));                                                      \
    }                                                                                              \
    for (; n - i >= W; i += W) {                                                                   \
      PUT(out + i, va * LOAD(p + i) - vb * LOAD(q + i), vec_ends);                                 \
    }                                                                                              \
    if (vec_ends && i < n) {                                                                       \
      STORE(out + n - W, va * LOAD(p + n - W) - vb * LOAD(q + n - W));                             \
      i = n;                                                                                       \
    }                                                                                              \
    for (; i < n; ++i) {                                                                           \
      out[i] = a * p[i] - b * q[i];                                                                \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void add_scalar_##SUF(const T* x, T* out, int64_t n, T s, int stream) {                   \
    V vs = (V){0} + s;                                                                             \
    int64_t i = head_len(out, n, (int64_t)sizeof(T), stream);                                      \
    for (int64_t k = 0; k < i; ++k) {                                                              \
      out[k] = x[k] + s;                                                                           \
    }                                                                                              \
    for (; n - i >= 2 * W; i += 2 * W) {                                                           \
      V v0 = LOAD(x + i) + vs;                                                                     \
      V v1 = LOAD(x + i + W) + vs;                                                                 \
      PUT(out + i, v0, stream);                                                                    \
      PUT(out + i + W, v1, stream);                                                                \
    }                                                                                              \
    for (; i < n; ++i) {                                                                           \
      out[i] = x[i] + s;                                                                           \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void add_##SUF(const T* b, const T* c, T* a, int64_t n, int stream) {                     \
    int64_t i = head_len(a, n, (int64_t)sizeof(T), stream);                                        \
    for (int64_t k = 0; k < i; ++k) {                                                              \
      a[k] = b[k] + c[k];                                                                          \
    }                                                                                              \
    for (; n - i >= 2 * W; i += 2 * W) {                                                           \
      V v0 = LOAD(b + i) + LOAD(c + i);                                                            \
      V v1 = LOAD(b + i + W) + LOAD(c + i + W);                                                    \
      PUT(a + i, v0, stream);                                                                      \
      PUT(a + i + W, v1, stream);                                                                  \
    }                                                                                              \
    for (; i < n; ++i) {                                                                           \
      a[i] = b[i] + c[i];                                                                          \
    }                                                                                              \
  }

PF__K_ELEMENTWISE(f32, float, vf_t, WF, LINE_F, load_f, store_f, put_f)
PF__K_ELEMENTWISE(f64, double, vd_t, WD, LINE_D, load_d, store_d, put_d)

/* ---- kepler ----
 * The Kepler solver of kmath.h's scalar pf__k_kepler_solve, run on KW elements at once: the
 * same reduction modulo 2 pi, Mikkola's starter, and bracketed Halley steps, with sin and cos
 * of the iterate evaluated here as polynomials in vector lanes rather than by the C library.
 * Each lane iterates until its own step is below 2^-26 of its iterate and is then frozen, so
 * an element's result depends on its own inputs only, not on its neighbours or its position in
 * the array. Lanes the vector path does not take (e outside [0, 1), M not finite or |M| >=
 * PF__K_REDUCE_CW_MAX, 0 < |M| < KV_M_MIN, or not converged after KV_ITER steps) are solved by
 * the scalar solver. */

/* KV_U blocks of WD elements are solved together, their steps interleaved, so that the core
 * has independent work while one block waits on a division or a long polynomial (three
 * measured 0-4% faster than two, four no faster than three). */
#define KV_U 3
#define KW   ((int64_t)(KV_U * WD)) /* elements per call of kepler_lanes */
typedef vd_t kd_t;
typedef uint64_t vu_t __attribute__((vector_size(PF__K_VBYTES)));
typedef float vh_t __attribute__((vector_size(PF__K_VBYTES / 2))); /* WD floats */

#define KV(x)    ((kd_t){0} + (x))           /* x in every double lane */
#define KU(x)    ((vu_t){0} + (uint64_t)(x)) /* x in every 64-bit integer lane */
#define KV_SIGN  KU(0x8000000000000000u)     /* the sign bit of a double */
#define KV_MAGIC 0x1.8p52 /* x + KV_MAGIC - KV_MAGIC rounds |x| < 2^51 to an integer */
#define KV_ITER  8        /* Halley steps before a lane is handed to the scalar solver */
/* Lanes with 0 < |M| below this go to the scalar solver, which solves them directly (see
 * PF__K_KEPLER_TINY_M). Above it, f f' of the Halley step stays a normal number down to the last
 * step (f' >= 1 - e >= 2^-53, f of the last step >= 2^-26 x f'), where a subnormal one kept too
 * few bits (M = 3e-310, e = 1 - 1e-10: 1e-5 relative). */
#define KV_M_MIN PF__K_KEPLER_TINY_M

/* a where mask is set, else b (mask lanes are all ones or all zeros). */
static inline kd_t kv_sel(vu_t mask, kd_t a, kd_t b) {
  return (kd_t)((mask & (vu_t)a) | (~mask & (vu_t)b));
}

static inline int kv_any(vu_t mask) {
  uint64_t lane[WD];
  memcpy(lane, &mask, sizeof lane);
  uint64_t any = 0;
  for (int64_t k = 0; k < WD; ++k) {
    any |= lane[k];
  }
  return any != 0;
}

static inline kd_t kv_abs(kd_t x) {
  return (kd_t)((vu_t)x & ~KV_SIGN);
}

static inline kd_t kv_sqrt(kd_t x) {
#if PF__K_STREAM && PF__K_VBYTES == 64
  return (kd_t)_mm512_sqrt_pd((__m512d)x);
#elif PF__K_STREAM && PF__K_VBYTES == 32
  return (kd_t)_mm256_sqrt_pd((__m256d)x);
#elif PF__K_STREAM
  return (kd_t)_mm_sqrt_pd((__m128d)x);
#else
  for (int64_t k = 0; k < WD; ++k) {
    x[k] = sqrt(x[k]);
  }
  return x;
#endif
}

/* The cube root of a positive normal x, to about 2e-6 relative (the starter is itself only
 * within 4e-3 of the root): x = f 2^(3t + rem) with f in [1, 2); a quadratic fitted to cbrt on
 * [1, 2] (1.3e-3 relative), times 2^(rem/3) and 2^t, then one Newton step on y^3 = x. */
static inline kd_t kv_cbrt(kd_t x) {
  vu_t bits = (vu_t)x;
  vu_t biased = ((bits >> 52) & KU(0x7ff)) + KU(177); /* unbiased exponent + 1200 >= 0 */
  vu_t third = (biased * KU(0x5556)) >> 16;           /* biased / 3, exact below 2^15 */
  vu_t rem = biased - third * KU(3);
  kd_t f = (kd_t)((bits & KU(0x000fffffffffffffu)) | KU(0x3ff0000000000000u));
  kd_t y =
      KV(0x1.40b26a9c1907ap-1) + f * (KV(0x1.bbf6ac09ef4bdp-2) + f * KV(-0x1.e058353c32868p-5));
  y *= kv_sel((vu_t)(rem == KU(1)), KV(0x1.428a2f98d728bp+0),
              kv_sel((vu_t)(rem == KU(2)), KV(0x1.965fea53d6e3dp+0), KV(1.0)));
  y *= (kd_t)((third + KU(1023 - 400)) << 52); /* 2^(t) with t = third - 400 */
  return (y + y + x / (y * y)) * KV(1.0 / 3.0);
}

/* 2 pi = KV_2PI_0 + ... + KV_2PI_5 to about 180 bits; all but the last have at most 24
 * significant bits, so k times any of them is exact for |k| < 2^29 (|M| < 2^31). */
#define KV_2PI_0 0x1.921fb6p+2
#define KV_2PI_1 -0x1.777a5cp-23
#define KV_2PI_2 -0x1.ee59dap-48
#define KV_2PI_3 0x1.98a2e0p-75
#define KV_2PI_4 0x1.b839a2p-102
#define KV_2PI_5 0x1.48127044533e6p-128

/* s = a + b with its rounding error added to *err (Knuth's TwoSum). */
static inline kd_t kv_two_sum(kd_t a, kd_t b, kd_t* err) {
  kd_t s = a + b;
  kd_t bb = s - a;
  *err += (a - (s - bb)) + (b - bb);
  return s;
}

/* m reduced modulo 2 pi into [-pi, pi] (a rounding error beyond pi at most), |m| < 2^31, as
 * the double nearest the remainder plus its rounding error *lo (0 where |m| <= pi), without
 * fma: m - k * KV_2PI_0 is exact (the two are within a factor 2: Sterbenz), and the later parts
 * are subtracted by TwoSum, so the cancellation near a multiple of 2 pi is exact. */
static inline kd_t kv_reduce(kd_t m, kd_t* lo) {
  kd_t k = (m * KV(PF__K_INV_TWO_PI) + KV(KV_MAGIC)) - KV(KV_MAGIC);
  kd_t r = m - k * KV(KV_2PI_0);
  kd_t err = KV(0.0);
  r = kv_two_sum(r, -(k * KV(KV_2PI_1)), &err);
  r = kv_two_sum(r, -(k * KV(KV_2PI_2)), &err);
  r = kv_two_sum(r, -(k * KV(KV_2PI_3)), &err);
  kd_t tail = (err - k * KV(KV_2PI_4)) - k * KV(KV_2PI_5);
  kd_t hi = r + tail;
  vu_t small = (vu_t)(kv_abs(m) <= KV(PF__K_PI));
  *lo = kv_sel(small, KV(0.0), tail - (hi - r)); /* |tail| <= |r|: Fast2Sum */
  return kv_sel(small, m, hi);
}

/* pi / 2 = KV_PIO2_0 + _1 + _2; the first two have at most 51 significant bits, so q times
 * them is exact for the quadrants |q| <= 3 that kv_sincos meets. */
#define KV_PIO2_0 0x1.921fb54442d18p+0
#define KV_PIO2_1 0x1.1a62633145c08p-54
#define KV_PIO2_2 -0x1.1f1976b7ed8fcp-106

/* sin and cos of x for |x| <= 5, within an ulp, and x - sin x and
 * 1 - cos x without cancellation where |x| < pi / 4 (elsewhere the plain differences, which
 * lose little): x = q pi / 2 + y + y_lo with |y| <= pi / 4 (x - q KV_PIO2_0 is exact, y_lo is
 * the rounding error of y), Taylor series of sin y (to y^17) and cos y (to y^16), whose first
 * terms left out are below 2^-62 of the result, and 1 - y^2 / 2 added with its rounding error
 * kept (it is most of cos y). */
static inline void kv_sincos(kd_t x, kd_t* s, kd_t* c, kd_t* x_minus_s, kd_t* one_minus_c) {
  kd_t qm = x * KV(0x1.45f306dc9c883p-1) + KV(KV_MAGIC); /* x * 2 / pi, rounded */
  vu_t qi = (vu_t)qm;                                    /* q modulo 4 in the low bits */
  kd_t q = qm - KV(KV_MAGIC);
  kd_t y0 = x - q * KV(KV_PIO2_0);
  kd_t t1 = q * KV(KV_PIO2_1);
  kd_t y = y0 - t1;
  kd_t y_lo = ((y0 - y) - t1) - q * KV(KV_PIO2_2); /* 0 where q = 0 */
  kd_t z = y * y;
  kd_t ps = KV(1.0 / 355687428096000.0);
  ps = KV(-1.0 / 1307674368000.0) + z * ps;
  ps = KV(1.0 / 6227020800.0) + z * ps;
  ps = KV(-1.0 / 39916800.0) + z * ps;
  ps = KV(1.0 / 362880.0) + z * ps;
  ps = KV(-1.0 / 5040.0) + z * ps;
  ps = KV(1.0 / 120.0) + z * ps;
  ps = KV(-1.0 / 6.0) + z * ps;
  kd_t pc = KV(1.0 / 20922789888000.0);
  pc = KV(-1.0 / 87178291200.0) + z * pc;
  pc = KV(1.0 / 479001600.0) + z * pc;
  pc = KV(-1.0 / 3628800.0) + z * pc;
  pc = KV(1.0 / 40320.0) + z * pc;
  pc = KV(-1.0 / 720.0) + z * pc;
  pc = KV(1.0 / 24.0) + z * pc;
  kd_t hz = KV(0.5) * z;
  kd_t sin_minus_y = y * z * ps;    /* sin y - y */
  kd_t cos_rest = z * z * pc;       /* cos y - (1 - y^2 / 2) */
  kd_t cos_minus_1 = cos_rest - hz; /* cos y - 1 */
  kd_t w = KV(1.0) - hz;
  /* sin(y + y_lo) and cos(y + y_lo) to first order in y_lo (below half an ulp of y) */
  kd_t sy = y + (sin_minus_y + y_lo * w);
  kd_t cy = w + (((KV(1.0) - w) - hz) + (cos_rest - y * y_lo));
  /* quadrant q mod 4 = 0, 1, 2, 3: (sin, cos) = (sy, cy), (cy, -sy), (-sy, -cy), (-cy, sy) */
  vu_t odd = (vu_t)((qi & KU(1)) == KU(1));
  *s = (kd_t)((vu_t)kv_sel(odd, cy, sy) ^ ((qi & KU(2)) << 62));
  *c = (kd_t)((vu_t)kv_sel(odd, sy, cy) ^ (((qi + KU(1)) & KU(2)) << 62));
  vu_t q0 = (vu_t)(q == KV(0.0));
  *x_minus_s = kv_sel(q0, -sin_minus_y, x - *s);
  *one_minus_c = kv_sel(q0, -cos_minus_1, KV(1.0) - *c);
}

/* Mikkola's starter for 0 <= m <= pi, 0 <= e < 1, as pf__k_kepler_start (see there), with
 * three divisions instead of six. */
static inline kd_t kv_start(kd_t m, kd_t e) {
  kd_t denom = KV(4.0) * e + KV(0.5);
  kd_t inv = KV(1.0) / denom;
  kd_t alpha = (KV(1.0) - e) * inv;
  kd_t beta = KV(0.5) * m * inv;
  kd_t z = kv_cbrt(beta + kv_sqrt(beta * beta + alpha * alpha * alpha));
  /* 2 beta / (z^2 + alpha + (alpha / z)^2) = 2 beta z^2 / d, and the 1 / (1 + e) below, from
   * one division (every term positive, so nothing cancels) */
  kd_t z2 = z * z;
  kd_t d = z2 * z2 + alpha * z2 + alpha * alpha;
  kd_t ope = KV(1.0) + e;
  kd_t t = KV(1.0) / (d * ope);
  kd_t s = KV(2.0) * beta * z2 * ope * t;
  kd_t s2 = s * s;
  s = s - KV(0.078) * s2 * s2 * s * (d * t);
  return m + e * s * (KV(3.0) - KV(4.0) * s * s);
}

/* One block of WD elements in flight. */
typedef struct {
  kd_t m, m_lo, e, ome; /* |M reduced| as m + m_lo, e, 1 - e */
  kd_t r;               /* M reduced: its sign is that of sin E */
  kd_t lo, hi, x;       /* the bracket and the iterate */
  kd_t so, co;          /* sin E and cos E of the lanes done */
  vu_t ok;              /* lanes the vector path takes */
  vu_t active;          /* lanes still iterating */
} kv_block_t;

static inline void kv_init(kv_block_t* b, kd_t m0, kd_t e0) {
  /* 0 < |M| < KV_M_MIN goes to the scalar solver: f f' of the Halley step could be subnormal
   * where e is near 1 (f ~ M, f' ~ 1 - e) */
  vu_t m_tiny = (vu_t)(kv_abs(m0) < KV(KV_M_MIN)) & (vu_t)(m0 != KV(0.0));
  b->ok = (vu_t)(e0 >= KV(0.0)) & (vu_t)(e0 < KV(1.0)) &
          (vu_t)(kv_abs(m0) < KV(PF__K_REDUCE_CW_MAX)) & ~m_tiny;
  kd_t e = kv_sel(b->ok, e0, KV(0.0)); /* lanes left to the scalar solver compute (0, 0) */
  kd_t r_lo;
  b->r = kv_reduce(kv_sel(b->ok, m0, KV(0.0)), &r_lo);
  kd_t m = kv_abs(b->r); /* E(-m) = -E(m): solve for |r|, give sin E the sign of r */
  /* The reduction's rounding error, kept for f: the last Halley step then carries E below an
   * ulp of x, and sin E and cos E get it from the first-order update. */
  b->m_lo = (kd_t)((vu_t)r_lo ^ ((vu_t)b->r & KV_SIGN));
  /* The bracket of pf__k_kepler_root; E = m exactly where e = 0 or m = 0. */
  b->lo = kv_sel((vu_t)(m <= KV(3.0)), m, m - e);
  b->hi = (m + e) * KV(1.0 + 2.0 * DBL_EPSILON); /* rounded up, see pf__k_kepler_root */
  kd_t x = kv_start(m, e);
  /* x = lo is valid (lo is a lower bound): where e |m| is below half an ulp of m the starter
   * is exactly m, the correctly rounded root, and the bracket's midpoint, about e / 2, would
   * lose m altogether */
  x = kv_sel((vu_t)(x >= b->lo) & (vu_t)(x < b->hi), x, KV(0.5) * (b->lo + b->hi));
  b->x = kv_sel((vu_t)(e == KV(0.0)) | (vu_t)(m == KV(0.0)), m, x);
  b->m = m;
  b->e = e;
  b->ome = KV(1.0) - e;
  b->so = KV(0.0);
  b->co = KV(1.0);
  b->active = KU(~(uint64_t)0);
}

/* One Halley step of the active lanes of b, as in pf__k_kepler_root. */
static inline void kv_step(kv_block_t* b) {
  kd_t x = b->x, e = b->e, ome = b->ome;
  kd_t s, c, ems, omc;
  kv_sincos(x, &s, &c, &ems, &omc);
  /* f = E - e sin E - m. Where x <= 2 m, x - m is exact (Sterbenz) and f = (x - m) - e sin x
   * is off by the rounding of e sin x only; elsewhere (e near 1, x small: the root is at most
   * m / (1 - e)) f = (1 - e) x + e (x - sin x) - m, 1 - e exact and no cancellation in x -
   * sin x; both less the reduction's rounding error m_lo. f' = (1 - e) + e (1 - cos x) keeps
   * full relative accuracy where it is small. */
  kd_t f = kv_sel((vu_t)(x <= b->m + b->m), (x - b->m) - e * s, ome * x + e * ems - b->m) - b->m_lo;
  kd_t lo = kv_sel((vu_t)(f < KV(0.0)), x, b->lo);
  kd_t hi = kv_sel((vu_t)(f > KV(0.0)), x, b->hi);
  kd_t fp = e * omc + ome;
  /* Halley: -f / (f' - f f'' / (2 f')), f'' = e sin x, with one division */
  kd_t step = -f * fp / (fp * fp - KV(0.5) * f * e * s);
  kd_t next = x + step;
  /* A step below 2^-26 of x is the last one: Halley's error after it is of the order of the
   * step cubed (2^-78 relative), so the lane is done at x + step, and sin and cos are rotated
   * by the step to second order (the third-order term is below 2^-79 relative). The step also
   * carries the part of E below an ulp of x (m_lo). */
  vu_t small = (vu_t)(kv_abs(step) <= KV(0x1p-26) * kv_abs(x));
  vu_t done = b->active & small;
  kd_t half_d2 = KV(0.5) * step * step;
  b->so = kv_sel(done, s + (c * step - s * half_d2), b->so);
  b->co = kv_sel(done, c - (s * step + c * half_d2), b->co);
  b->active &= ~small;
  vu_t inside = (vu_t)(next > lo) & (vu_t)(next < hi);
  b->x = kv_sel(b->active, kv_sel(inside, next, KV(0.5) * (lo + hi)), x);
  b->lo = lo;
  b->hi = hi;
}

/* Stores the results of b; lanes the vector path did not take or did not finish go to the
 * scalar solver. */
static inline void kv_finish(const kv_block_t* b, kd_t m0, kd_t e0, double* s_out, double* c_out) {
  store_d(s_out, (kd_t)((vu_t)b->so ^ ((vu_t)b->r & KV_SIGN)));
  store_d(c_out, b->co);
  vu_t slow = ~b->ok | b->active;
  if (kv_any(slow)) {
    uint64_t lane[WD];
    double m_in[WD], e_in[WD];
    memcpy(lane, &slow, sizeof lane);
    store_d(m_in, m0);
    store_d(e_in, e0);
    for (int64_t k = 0; k < WD; ++k) {
      if (lane[k] != 0) {
        pf__k_kepler_solve(m_in[k], e_in[k], &s_out[k], &c_out[k]);
      }
    }
  }
}

/* sin E and cos E for the KW elements of the KV_U vectors m and e, into s and c (see the
 * section comment). */
static inline void kepler_lanes(const kd_t* m, const kd_t* e, double* s, double* c) {
  kv_block_t b[KV_U];
  for (int u = 0; u < KV_U; ++u) {
    kv_init(&b[u], m[u], e[u]);
  }
  for (int it = 0; it < KV_ITER; ++it) {
    vu_t active = KU(0);
    for (int u = 0; u < KV_U; ++u) {
      kv_step(&b[u]);
      active |= b[u].active;
    }
    if (!kv_any(active)) {
      break;
    }
  }
  for (int u = 0; u < KV_U; ++u) {
    kv_finish(&b[u], m[u], e[u], s + u * WD, c + u * WD);
  }
}

/* The tail of n - i < KW elements goes through the same lanes, padded with (0, 0), so that it
 * gets the same results as in a block. */
static void kepler_f64(const double* m, const double* e, double* s, double* c, int64_t n) {
  kd_t mv[KV_U], ev[KV_U];
  int64_t i = 0;
  for (; n - i >= KW; i += KW) {
    for (int u = 0; u < KV_U; ++u) {
      mv[u] = load_d(m + i + u * WD);
      ev[u] = load_d(e + i + u * WD);
    }
    kepler_lanes(mv, ev, s + i, c + i);
  }
  if (i < n) {
    double st[KW], ct[KW];
    size_t bytes = (size_t)(n - i) * sizeof(double);
    memset(mv, 0, sizeof mv);
    memset(ev, 0, sizeof ev);
    memcpy(mv, m + i, bytes);
    memcpy(ev, e + i, bytes);
    kepler_lanes(mv, ev, st, ct);
    memcpy(s + i, st, bytes);
    memcpy(c + i, ct, bytes);
  }
}

/* float32: widened to double lanes, solved as float64, each output rounded once. */
static void kepler_f32(const float* m, const float* e, float* s, float* c, int64_t n) {
  for (int64_t i = 0; i < n; i += KW) {
    int64_t len = n - i < KW ? n - i : KW;
    float mf[KW] = {0}, ef[KW] = {0}, sf[KW], cf[KW];
    const float* mp = m + i;
    const float* ep = e + i;
    if (len < KW) { /* the tail, padded with (0, 0) */
      memcpy(mf, mp, (size_t)len * sizeof(float));
      memcpy(ef, ep, (size_t)len * sizeof(float));
      mp = mf;
      ep = ef;
    }
    kd_t mv[KV_U], ev[KV_U];
    for (int u = 0; u < KV_U; ++u) {
      vh_t h;
      memcpy(&h, mp + u * WD, sizeof h);
      mv[u] = __builtin_convertvector(h, kd_t);
      memcpy(&h, ep + u * WD, sizeof h);
      ev[u] = __builtin_convertvector(h, kd_t);
    }
    double sd[KW], cd[KW];
    kepler_lanes(mv, ev, sd, cd);
    float* sp = len < KW ? sf : s + i;
    float* cp = len < KW ? cf : c + i;
    for (int u = 0; u < KV_U; ++u) {
      vh_t h = __builtin_convertvector(load_d(sd + u * WD), vh_t);
      memcpy(sp + u * WD, &h, sizeof h);
      h = __builtin_convertvector(load_d(cd + u * WD), vh_t);
      memcpy(cp + u * WD, &h, sizeof h);
    }
    if (len < KW) {
      memcpy(s + i, sf, (size_t)len * sizeof(float));
      memcpy(c + i, cf, (size_t)len * sizeof(float));
    }
  }
}

const pf__k_simd_t PF__K_TABLE = {
    PF__K_NAME,      dot_f32,         dot_f64,        scale_f32,      scale_f64,
    scale_pages_f32, scale_pages_f64, scale_back_f32, scale_back_f64, scale_dot_f32,
    scale_dot_f64,   axpby_f32,       axpby_f64,      add_scalar_f32, add_scalar_f64,
    add_f32,         add_f64,         kepler_f32,     kepler_f64,
};
