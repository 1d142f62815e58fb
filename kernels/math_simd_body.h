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

#define NDV (2 * PF__K_NACC) /* double vectors that hold the LANES_F float lanes */

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

/* Adds the float lanes of acc[0..PF__K_NACC) into the double lanes dv[0..NDV). */
static inline void fold_f32(const vf_t* acc, vd_t* dv) {
  for (int j = 0; j < PF__K_NACC; ++j) {
    vd_t lo, hi;
    widen_f(acc[j], &lo, &hi);
    dv[2 * j] += lo;
    dv[2 * j + 1] += hi;
  }
}

/* The sum of the lanes of v[0..count), count a power of two, in a fixed tree order (v is
 * overwritten). A chain of scalar adds would cost its latency once per lane. */
static inline double hsum_d(vd_t* v, int count) {
  for (int w = count / 2; w >= 1; w /= 2) {
    for (int k = 0; k < w; ++k) {
      v[k] += v[k + w];
    }
  }
  double lane[WD];
  memcpy(lane, &v[0], sizeof lane);
  for (int64_t w = WD / 2; w >= 1; w /= 2) {
    for (int64_t k = 0; k < w; ++k) {
      lane[k] += lane[k + w];
    }
  }
  return lane[0];
}

/* sum_i a[i] * b[i] over n floats (same: a == b, one load per element), in float lanes of
 * at most 16 products folded into double lanes, added in a fixed tree at the end. When x is
 * not NULL the same pass also writes out[i] = x[i] * s (x, out another row than a): the
 * scaling of one row then shares its pass with the reduction of the next, its stores
 * overlapping the reduction's loads as in a memcpy, and the sum is bit for bit the one without.
 * Inlined into each caller with constant same and x, so each gets its own loop. */
static inline double dot_core_f32(const float* a, const float* b, int64_t n, int same,
                                  const float* x, float* out, float s) {
  vd_t dv[NDV];
  for (int j = 0; j < NDV; ++j) {
    dv[j] = (vd_t){0};
  }
  vf_t vs = (vf_t){0} + s;
  int64_t i = 0;
  while (n - i >= LANES_F) {
    int64_t len = (n - i >= FOLD_F) ? FOLD_F : (n - i) & ~(LANES_F - 1);
    vf_t acc[PF__K_NACC];
    for (int j = 0; j < PF__K_NACC; ++j) {
      acc[j] = (vf_t){0};
    }
    for (int64_t k = i; k < i + len; k += LANES_F) {
      for (int j = 0; j < PF__K_NACC; ++j) {
        vf_t va = load_f(a + k + j * WF);
        vf_t vb = same ? va : load_f(b + k + j * WF);
        acc[j] += va * vb;
        if (x != NULL) {
          store_f(out + k + j * WF, load_f(x + k + j * WF) * vs);
        }
      }
    }
    fold_f32(acc, dv);
    i += len;
  }
  double total = hsum_d(dv, NDV);
  for (; i < n; ++i) {
    total += (double)a[i] * b[i];
    if (x != NULL) {
      out[i] = x[i] * s;
    }
  }
  return total;
}

/* The same over doubles: double lanes, each block's total added with Neumaier's compensation,
 * so the error stays that of one block however long the row is. */
static inline double dot_core_f64(const double* a, const double* b, int64_t n, int same,
                                  const double* x, double* out, double s) {
  double total = 0.0;
  double comp = 0.0;
  vd_t vs = (vd_t){0} + s;
  int64_t i = 0;
  while (n - i >= LANES_D) {
    int64_t len = (n - i >= FOLD_D) ? FOLD_D : (n - i) & ~(LANES_D - 1);
    vd_t acc[PF__K_NACC];
    for (int j = 0; j < PF__K_NACC; ++j) {
      acc[j] = (vd_t){0};
    }
    for (int64_t k = i; k < i + len; k += LANES_D) {
      for (int j = 0; j < PF__K_NACC; ++j) {
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
  for (; i < n; ++i) {
    total += a[i] * b[i];
    if (x != NULL) {
      out[i] = x[i] * s;
    }
  }
  return total + comp;
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
  static void axpby_##SUF(const T* p, const T* q, T* out, int64_t n, T a, T b) {                   \
    V va = (V){0} + a;                                                                             \
    V vb = (V){0} + b;                                                                             \
    int64_t i = 0;                                                                                 \
    for (; n - i >= W; i += W) {                                                                   \
      STORE(out + i, va * LOAD(p + i) - vb * LOAD(q + i));                                         \
    }                                                                                              \
    for (; i < n; ++i) {                                                                           \
      out[i] = a * p[i] - b * q[i];                                                                \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void add_scalar_##SUF(const T* x, T* out, int64_t n, T s) {                               \
    V vs = (V){0} + s;                                                                             \
    int64_t i = 0;                                                                                 \
    for (; n - i >= 2 * W; i += 2 * W) {                                                           \
      V v0 = LOAD(x + i) + vs;                                                                     \
      V v1 = LOAD(x + i + W) + vs;                                                                 \
      STORE(out + i, v0);                                                                          \
      STORE(out + i + W, v1);                                                                      \
    }                                                                                              \
    for (; i < n; ++i) {                                                                           \
      out[i] = x[i] + s;                                                                           \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void add_##SUF(const T* b, const T* c, T* a, int64_t n) {                                 \
    int64_t i = 0;                                                                                 \
    for (; n - i >= 2 * W; i += 2 * W) {                                                           \
      V v0 = LOAD(b + i) + LOAD(c + i);                                                            \
      V v1 = LOAD(b + i + W) + LOAD(c + i + W);                                                    \
      STORE(a + i, v0);                                                                            \
      STORE(a + i + W, v1);                                                                        \
    }                                                                                              \
    for (; i < n; ++i) {                                                                           \
      a[i] = b[i] + c[i];                                                                          \
    }                                                                                              \
  }

PF__K_ELEMENTWISE(f32, float, vf_t, WF, LINE_F, load_f, store_f, put_f)
PF__K_ELEMENTWISE(f64, double, vd_t, WD, LINE_D, load_d, store_d, put_d)

/* ---- kepler ---- */

static void kepler_f32(const float* m, const float* e, float* s, float* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double sv, cv;
    pf__k_kepler_solve(m[i], e[i], &sv, &cv);
    s[i] = (float)sv;
    c[i] = (float)cv;
  }
}

static void kepler_f64(const double* m, const double* e, double* s, double* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    pf__k_kepler_solve(m[i], e[i], &s[i], &c[i]);
  }
}

const pf__k_simd_t PF__K_TABLE = {
    PF__K_NAME,     dot_f32,       dot_f64,   scale_f32,  scale_f64,
    scale_dot_f32,  scale_dot_f64, axpby_f32, axpby_f64,  add_scalar_f32,
    add_scalar_f64, add_f32,       add_f64,   kepler_f32, kepler_f64,
};
