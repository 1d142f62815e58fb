/* kernels/math_cpu.c: the CPU implementations of the raw kernels declared in math.h, single
 * threaded, written so that gcc and clang vectorise them at -O2/-O3 without -ffast-math. */
#include "kmath.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Non-temporal stores: SSE2 is part of every x86-64 CPU. Prefetches: SSE, or the builtin of
 * gcc and clang on other targets. Elsewhere the plain loops run alone. */
#if defined(__SSE2__) && (defined(__x86_64__) || defined(__i386__))
#include <emmintrin.h>
#define PF__K_HAVE_STREAM 1
#define PF__K_PREFETCH(p) _mm_prefetch((const char*)(p), _MM_HINT_T1)
#elif defined(__GNUC__)
#define PF__K_HAVE_STREAM 0
#define PF__K_PREFETCH(p) __builtin_prefetch((p), 0, 2)
#else
#define PF__K_HAVE_STREAM 0
#define PF__K_PREFETCH(p) ((void)(p))
#endif

/* A result this large cannot stay in a core's private caches until its consumer runs. It is
 * written with non-temporal stores where there are any, which skip the read-for-ownership of
 * each line that plain stores pay: that read is a third of rms_norm's memory traffic. */
#define PF__K_BIG_BYTES ((int64_t)4 << 20)
/* While such a result is written one row at a time, the next input row is prefetched into L2,
 * so that reading row r + 1 overlaps writing row r as in a memcpy, instead of the two
 * alternating. Rows longer than this would crowd each other out of L2 (and the hardware
 * prefetcher streams them well once it has locked on). */
#define PF__K_PREFETCH_MAX_ROW_BYTES ((int64_t)256 << 10)
/* Elements scaled per prefetch: one 64-byte cache line of float32. */
#define PF__K_LINE_F32 16
#define PF__K_LINE_F64 8

/* Sum reductions keep this many independent float lanes (half as many double lanes), which
 * the compiler maps onto SIMD registers (four SSE or two AVX registers), hiding the latency of
 * the adds. No reassociation is needed, so this vectorises without -ffast-math. */
#define PF__K_LANES 16
/* Lanes are folded into a double total every this many elements: a float lane then adds only
 * 16 terms in float precision, and the fold costs one add per 16 loads. */
#define PF__K_FOLD 256

/* ---- add_n ---- */

void pf__k_add_n_f32(const float* x, float* out, int64_t count, float n) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = x[i] + n;
  }
}

void pf__k_add_n_f64(const double* x, double* out, int64_t count, double n) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = x[i] + n;
  }
}

/* ---- reductions ---- */

/* sum_i a[i] * b[i] over n floats, in double. Each block of up to PF__K_FOLD elements is
 * summed in float lanes, then added in double. (The block's pointers and length are computed
 * before its loop: gcc 12 leaves a loop that advances the outer index itself unvectorised.) */
static double dot_f32_lanes(const float* a, const float* b, int64_t n) {
  double total = 0.0;
  int64_t i = 0;
  while (n - i >= PF__K_LANES) {
    int64_t len = (n - i >= PF__K_FOLD) ? PF__K_FOLD : (n - i) & ~(int64_t)(PF__K_LANES - 1);
    const float* pa = a + i;
    const float* pb = b + i;
    float lane[PF__K_LANES] = {0};
    for (int64_t k = 0; k < len; k += PF__K_LANES) {
      for (int j = 0; j < PF__K_LANES; ++j) {
        lane[j] += pa[k + j] * pb[k + j];
      }
    }
    double block = 0.0;
    for (int j = 0; j < PF__K_LANES; ++j) {
      block += lane[j];
    }
    total += block;
    i += len;
  }
  for (; i < n; ++i) {
    total += (double)a[i] * b[i];
  }
  return total;
}

/* The same sum with every product in double: half the speed, no float overflow or underflow. */
static double dot_f32_wide(const float* a, const float* b, int64_t n) {
  enum { LANES = PF__K_LANES / 2 };
  double lane[LANES] = {0};
  int64_t i = 0;
  for (; n - i >= LANES; i += LANES) {
    for (int j = 0; j < LANES; ++j) {
      lane[j] += (double)a[i + j] * b[i + j];
    }
  }
  double total = 0.0;
  for (int j = 0; j < LANES; ++j) {
    total += lane[j];
  }
  for (; i < n; ++i) {
    total += (double)a[i] * b[i];
  }
  return total;
}

/* sum_i a[i] * b[i] over n floats, in double. Float products overflow beyond 3e38 and lose
 * bits below 1e-38; a float-lane sum outside [2^-60, DBL_MAX] may have done either (or met a
 * NaN), and only then is the row summed again with double products. Underflow cannot matter
 * above 2^-60: what it loses is at most 2^-149 per product. */
static double dot_f32(const float* a, const float* b, int64_t n) {
  double total = dot_f32_lanes(a, b, n);
  if (fabs(total) >= 0x1p-60 && fabs(total) <= DBL_MAX) {
    return total;
  }
  return dot_f32_wide(a, b, n);
}

/* sum_i a[i] * b[i] over n doubles, blocked like dot_f32. Block totals are added with
 * Neumaier's compensation, so the error stays that of one block however long the row is. */
static double dot_f64(const double* a, const double* b, int64_t n) {
  enum { LANES = PF__K_LANES / 2 };
  double total = 0.0;
  double comp = 0.0;
  int64_t i = 0;
  while (n - i >= LANES) {
    int64_t len = (n - i >= PF__K_FOLD) ? PF__K_FOLD : (n - i) & ~(int64_t)(LANES - 1);
    const double* pa = a + i;
    const double* pb = b + i;
    double lane[LANES] = {0};
    for (int64_t k = 0; k < len; k += LANES) {
      for (int j = 0; j < LANES; ++j) {
        lane[j] += pa[k + j] * pb[k + j];
      }
    }
    double block = 0.0;
    for (int j = 0; j < LANES; ++j) {
      block += lane[j];
    }
    double sum = total + block;
    comp += (fabs(total) >= fabs(block)) ? (total - sum) + block : (block - sum) + total;
    total = sum;
    i += len;
  }
  for (; i < n; ++i) {
    total += a[i] * b[i];
  }
  return total + comp;
}

/* ---- row scaling: out[i] = x[i] * s ---- */

static void scale_f32(const float* x, float* out, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = x[i] * s;
  }
}

static void scale_f64(const double* x, double* out, int64_t n, double s) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = x[i] * s;
  }
}

/* scale_f32 that also prefetches the same offsets of next, one line per line written. */
static void scale_prefetch_f32(const float* x, float* out, int64_t n, float s, const float* next) {
  int64_t i = 0;
  for (; n - i >= PF__K_LINE_F32; i += PF__K_LINE_F32) {
    PF__K_PREFETCH(next + i);
    for (int j = 0; j < PF__K_LINE_F32; ++j) {
      out[i + j] = x[i + j] * s;
    }
  }
  scale_f32(x + i, out + i, n - i, s);
}

static void scale_prefetch_f64(const double* x, double* out, int64_t n, double s,
                               const double* next) {
  int64_t i = 0;
  for (; n - i >= PF__K_LINE_F64; i += PF__K_LINE_F64) {
    PF__K_PREFETCH(next + i);
    for (int j = 0; j < PF__K_LINE_F64; ++j) {
      out[i + j] = x[i + j] * s;
    }
  }
  scale_f64(x + i, out + i, n - i, s);
}

#if PF__K_HAVE_STREAM
/* scale_prefetch_f32 with non-temporal stores once out is 16-byte aligned; out must not overlap
 * x, next may be NULL. */
static void scale_stream_f32(const float* x, float* out, int64_t n, float s, const float* next) {
  int64_t i = 0;
  for (; i < n && ((uintptr_t)(out + i) & 15) != 0; ++i) {
    out[i] = x[i] * s;
  }
  __m128 vs = _mm_set1_ps(s);
  for (; n - i >= PF__K_LINE_F32; i += PF__K_LINE_F32) {
    if (next != NULL) {
      PF__K_PREFETCH(next + i);
    }
    _mm_stream_ps(out + i, _mm_mul_ps(_mm_loadu_ps(x + i), vs));
    _mm_stream_ps(out + i + 4, _mm_mul_ps(_mm_loadu_ps(x + i + 4), vs));
    _mm_stream_ps(out + i + 8, _mm_mul_ps(_mm_loadu_ps(x + i + 8), vs));
    _mm_stream_ps(out + i + 12, _mm_mul_ps(_mm_loadu_ps(x + i + 12), vs));
  }
  scale_f32(x + i, out + i, n - i, s);
}

static void scale_stream_f64(const double* x, double* out, int64_t n, double s,
                             const double* next) {
  int64_t i = 0;
  for (; i < n && ((uintptr_t)(out + i) & 15) != 0; ++i) {
    out[i] = x[i] * s;
  }
  __m128d vs = _mm_set1_pd(s);
  for (; n - i >= PF__K_LINE_F64; i += PF__K_LINE_F64) {
    if (next != NULL) {
      PF__K_PREFETCH(next + i);
    }
    _mm_stream_pd(out + i, _mm_mul_pd(_mm_loadu_pd(x + i), vs));
    _mm_stream_pd(out + i + 2, _mm_mul_pd(_mm_loadu_pd(x + i + 2), vs));
    _mm_stream_pd(out + i + 4, _mm_mul_pd(_mm_loadu_pd(x + i + 4), vs));
    _mm_stream_pd(out + i + 6, _mm_mul_pd(_mm_loadu_pd(x + i + 6), vs));
  }
  scale_f64(x + i, out + i, n - i, s);
}
#endif

/* How rms_norm writes its rows. */
typedef struct {
  int stream;   /* non-temporal stores (x86 only, never in place: x's lines are cached) */
  int prefetch; /* prefetch the next row while writing one */
} write_plan_t;

static write_plan_t plan_writes(const void* x, const void* out, int64_t rows, int64_t cols,
                                size_t elem) {
  write_plan_t plan = {0, 0};
  if (rows <= 0 || cols <= 0) {
    return plan;
  }
  /* rows * cols * elem could overflow for absurd shapes; dividing keeps the test exact. */
  int64_t limit = PF__K_BIG_BYTES / (int64_t)elem;
  int big = cols >= limit || rows >= (limit + cols - 1) / cols;
  plan.stream = big && PF__K_HAVE_STREAM && x != out;
  plan.prefetch = big && rows > 1 && cols <= PF__K_PREFETCH_MAX_ROW_BYTES / (int64_t)elem;
  return plan;
}

/* Makes non-temporal stores visible to other threads in program order before returning. */
static void end_writes(write_plan_t plan) {
#if PF__K_HAVE_STREAM
  if (plan.stream) {
    _mm_sfence();
  }
#else
  (void)plan;
#endif
}

/* out[0..n) = x[0..n) * s as planned; next is the row after x, or NULL for the last one. */
static void scale_row_f32(const float* x, float* out, int64_t n, float s, const float* next,
                          write_plan_t plan) {
  next = plan.prefetch ? next : NULL;
#if PF__K_HAVE_STREAM
  if (plan.stream) {
    scale_stream_f32(x, out, n, s, next);
    return;
  }
#endif
  if (next != NULL) {
    scale_prefetch_f32(x, out, n, s, next);
  } else {
    scale_f32(x, out, n, s);
  }
}

static void scale_row_f64(const double* x, double* out, int64_t n, double s, const double* next,
                          write_plan_t plan) {
  next = plan.prefetch ? next : NULL;
#if PF__K_HAVE_STREAM
  if (plan.stream) {
    scale_stream_f64(x, out, n, s, next);
    return;
  }
#endif
  if (next != NULL) {
    scale_prefetch_f64(x, out, n, s, next);
  } else {
    scale_f64(x, out, n, s);
  }
}

/* ---- rms_norm ---- */

/* 1 / sqrt(sum_sq / cols + eps) in double; a row of zero columns has mean square 0. */
static double inv_rms_of(double sum_sq, int64_t cols, double eps) {
  double mean_sq = (cols > 0) ? sum_sq / (double)cols : 0.0;
  return 1.0 / sqrt(mean_sq + eps);
}

/* rms_norm over rows, storing the per-row scale in inv_rms unless it is NULL. Each row is read
 * twice, but the second pass finds it in L1 or L2 for any row of up to a few hundred KiB. */
static void rms_norm_rows_f32(const float* x, float* out, float* inv_rms, int64_t rows,
                              int64_t cols, float eps) {
  write_plan_t plan = plan_writes(x, out, rows, cols, sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double inv = inv_rms_of(cols > 0 ? dot_f32(xr, xr, cols) : 0.0, cols, eps);
    if (inv_rms != NULL) {
      inv_rms[r] = (float)inv;
    }
    float* yr = out + r * cols;
    if (inv > FLT_MAX) {
      /* A row of subnormals with eps ~ 0: the scale exceeds float, the results need not. */
      for (int64_t c = 0; c < cols; ++c) {
        yr[c] = (float)(xr[c] * inv);
      }
      continue;
    }
    scale_row_f32(xr, yr, cols, (float)inv, r + 1 < rows ? xr + cols : NULL, plan);
  }
  end_writes(plan);
}

static void rms_norm_rows_f64(const double* x, double* out, double* inv_rms, int64_t rows,
                              int64_t cols, double eps) {
  write_plan_t plan = plan_writes(x, out, rows, cols, sizeof(double));
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    double inv = inv_rms_of(cols > 0 ? dot_f64(xr, xr, cols) : 0.0, cols, eps);
    if (inv_rms != NULL) {
      inv_rms[r] = inv;
    }
    scale_row_f64(xr, out + r * cols, cols, inv, r + 1 < rows ? xr + cols : NULL, plan);
  }
  end_writes(plan);
}

void pf__k_rms_norm_f32(const float* x, float* out, int64_t rows, int64_t cols, float eps) {
  rms_norm_rows_f32(x, out, NULL, rows, cols, eps);
}

void pf__k_rms_norm_f64(const double* x, double* out, int64_t rows, int64_t cols, double eps) {
  rms_norm_rows_f64(x, out, NULL, rows, cols, eps);
}

void pf__k_rms_norm_fwd_f32(const float* x, float* out, float* inv_rms, int64_t rows, int64_t cols,
                            float eps) {
  rms_norm_rows_f32(x, out, inv_rms, rows, cols, eps);
}

void pf__k_rms_norm_fwd_f64(const double* x, double* out, double* inv_rms, int64_t rows,
                            int64_t cols, double eps) {
  rms_norm_rows_f64(x, out, inv_rms, rows, cols, eps);
}

/* ---- rms_norm_bwd ---- */

void pf__k_rms_norm_bwd_f32(const float* x, const float* inv_rms, const float* cotangent, float* dx,
                            int64_t rows, int64_t cols) {
  if (cols <= 0) {
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* ct = cotangent + r * cols;
    float* dr = dx + r * cols;
    double inv = inv_rms[r];
    double mean_ct_x = dot_f32(ct, xr, cols) / (double)cols;
    float a = inv_rms[r];
    float b = (float)(inv * inv * inv * mean_ct_x);
    for (int64_t c = 0; c < cols; ++c) {
      dr[c] = a * ct[c] - b * xr[c];
    }
  }
}

void pf__k_rms_norm_bwd_f64(const double* x, const double* inv_rms, const double* cotangent,
                            double* dx, int64_t rows, int64_t cols) {
  if (cols <= 0) {
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const double* ct = cotangent + r * cols;
    double* dr = dx + r * cols;
    double a = inv_rms[r];
    double b = a * a * a * (dot_f64(ct, xr, cols) / (double)cols);
    for (int64_t c = 0; c < cols; ++c) {
      dr[c] = a * ct[c] - b * xr[c];
    }
  }
}

/* ---- kepler ---- */

void pf__k_kepler_f32(const float* mean_anomaly, const float* ecc, float* sin_e, float* cos_e,
                      int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    double s, c;
    pf__k_kepler_solve(mean_anomaly[i], ecc[i], &s, &c);
    sin_e[i] = (float)s;
    cos_e[i] = (float)c;
  }
}

void pf__k_kepler_f64(const double* mean_anomaly, const double* ecc, double* sin_e, double* cos_e,
                      int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    pf__k_kepler_solve(mean_anomaly[i], ecc[i], &sin_e[i], &cos_e[i]);
  }
}

/* ---- vector_add ---- */

void pf__k_vector_add_f32(const float* b, int64_t nb, const float* c, float* a, int64_t count) {
  if (nb <= 0) {
    return;
  }
  if (nb == 1) {
    float b0 = b[0];
    for (int64_t i = 0; i < count; ++i) {
      a[i] = b0 + c[i];
    }
    return;
  }
  /* One pass per repetition of b avoids a 64-bit division per element. */
  for (int64_t start = 0; start < count; start += nb) {
    int64_t len = (count - start < nb) ? count - start : nb;
    const float* cs = c + start;
    float* as = a + start;
    for (int64_t j = 0; j < len; ++j) {
      as[j] = b[j] + cs[j];
    }
  }
}

void pf__k_vector_add_f64(const double* b, int64_t nb, const double* c, double* a, int64_t count) {
  if (nb <= 0) {
    return;
  }
  if (nb == 1) {
    double b0 = b[0];
    for (int64_t i = 0; i < count; ++i) {
      a[i] = b0 + c[i];
    }
    return;
  }
  for (int64_t start = 0; start < count; start += nb) {
    int64_t len = (count - start < nb) ? count - start : nb;
    const double* cs = c + start;
    double* as = a + start;
    for (int64_t j = 0; j < len; ++j) {
      as[j] = b[j] + cs[j];
    }
  }
}
