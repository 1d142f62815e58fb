/* kernels/kmath.h: the raw numerical kernels (add_n, rms_norm and its gradient, Kepler's
 * equation, broadcast vector add) on contiguous CPU arrays, and the scalar Kepler solver. */
#ifndef PACKFN_KERNELS_MATH_H
#define PACKFN_KERNELS_MATH_H

/* Private to packfn_kernels. Every kernel works on contiguous, row-major arrays given as raw
 * pointers, each at a multiple of its element size (the non-temporal stores of large outputs
 * need it); the kernel checks (kcheck.c) have already checked dtypes, shapes, devices,
 * contiguity, that alignment and overlaps, so nothing here fails or reports errors. A count, rows
 * or cols <= 0 means an empty array: the kernel writes nothing (rms_norm_fwd still writes inv_rms
 * when only cols is 0).
 *
 * Aliasing: an output may be the very same array as an input where a comment says so, never a
 * partial overlap. Sums accumulate in double precision (float32 ones in float partial sums of
 * at most 16 terms first), so float32 results are accurate to a few ulp, float64 ones to about 4
 * (docs/kernels.md). A row is summed in segments whose bounds depend on its length only, and the
 * segment sums are added in order, so that the thread count never changes a result; the
 * instruction set level may change the last bits of a reduction (lane count, fused
 * multiply-adds), never more than those few ulp. */

#include <float.h>
#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Instruction set and threads ----
 * The kernels below pick their inner loops at run time from the instruction sets the CPU has
 * (x86-64: SSE2, AVX2 with FMA, AVX-512 F/VL/BW/DQ; elsewhere the compiler's baseline), and may
 * split large arrays over threads. Both settings are process-wide and thread-safe to change; a
 * kernel already running finishes with the settings it started with. */

/* Instruction set levels. A level above what the CPU has is lowered to the best it has. */
enum { PF__K_ISA_AUTO = -1, PF__K_ISA_BASE = 0, PF__K_ISA_AVX2 = 1, PF__K_ISA_AVX512 = 2 };

/* Selects a level (PF__K_ISA_AUTO, the default: the best the CPU has). Returns the level now in
 * effect. For tests and benchmarks: every level gives results within the tolerances above. */
int pf__k_isa_set(int level);
/* The level in effect, and the name of its loops ("sse2", "avx2", "avx512", or "base" off x86). */
int pf__k_isa_get(void);
const char* pf__k_isa_name(void);

/* The most threads one kernel call uses, 1..PF__K_MAX_THREADS; n <= 0 restores the default:
 * the environment variable PACKFN_KERNEL_THREADS when it holds a decimal number >= 1, blanks
 * around it allowed (read at the first kernel call, and by every n <= 0), else 1. Returns the count
 * now in effect. A call uses fewer threads than this when its arrays are small (below
 * PF__K_PAR_MIN_BYTES per thread), and runs its share on the calling thread when a thread cannot be
 * started; results are bit-identical for every thread count. */
#define PF__K_MAX_THREADS   64
#define PF__K_PAR_MIN_BYTES ((int64_t)1 << 20)
int pf__k_threads_set(int n);
int pf__k_threads_get(void);

/* The order in which a result written with non-temporal stores reads its input: the outputs of
 * rms_norm and rms_norm_fwd of 4 MiB or more, not in place, in their spans of at least 128 KiB
 * that prefetch no next row (a row, or the part of a row one thread writes, longer than 256
 * KiB; a job's last row). PF__K_STREAM_LINEAR reads front to back, PF__K_STREAM_PAGES several
 * 4 KiB pages at a time (kernels/math_simd.h). The results are the same bit for bit; only the
 * speed differs, and which order is faster depends on the CPU. PF__K_STREAM_AUTO (the default)
 * picks pages on Intel CPUs and linear elsewhere: one thread of rms_norm over a 256 MiB row ran
 * 1.13-1.14x faster in pages order on a 16-core Xeon (its scaling pass alone 1.21-1.31x), and
 * 0.80x as fast on an AMD EPYC (scaling pass 0.68x): medians of paired runs, as
 * bench/bench_kernels.c's order_ab times them (docs/performance.md). Returns the order now in
 * effect. For tests and benchmarks. */
enum { PF__K_STREAM_AUTO = -1, PF__K_STREAM_LINEAR = 0, PF__K_STREAM_PAGES = 1 };
int pf__k_stream_order_set(int order);
int pf__k_stream_order_get(void);
/* How many spans the process has written in pages order so far (for tests: that the order they
 * set is the one that ran). */
long long pf__k_stream_pages_spans(void);

/* add_n: out[i] = x[i] + n for i < count. out may equal x. */
void pf__k_add_n_f32(const float* x, float* out, int64_t count, float n);
void pf__k_add_n_f64(const double* x, double* out, int64_t count, double n);

/* rms_norm over the last axis of a rows x cols array:
 *   out[r][c] = x[r][c] * inv_rms[r],  inv_rms[r] = 1 / sqrt(mean_c(x[r][c]^2) + eps).
 * out may equal x (in place). A row of zero columns has mean square 0. A float64 row whose sum
 * of squares overflows or underflows is summed again scaled by a power of two, so that its
 * results are as accurate as an ordinary row's (an inv_rms beyond DBL_MAX is stored as inf). */
void pf__k_rms_norm_f32(const float* x, float* out, int64_t rows, int64_t cols, double eps);
void pf__k_rms_norm_f64(const double* x, double* out, int64_t rows, int64_t cols, double eps);

/* rms_norm_fwd: rms_norm that also stores inv_rms[r] (rows values), the residual that
 * rms_norm_bwd needs. out may equal x; inv_rms overlaps neither. */
void pf__k_rms_norm_fwd_f32(const float* x, float* out, float* inv_rms, int64_t rows, int64_t cols,
                            double eps);
void pf__k_rms_norm_fwd_f64(const double* x, double* out, double* inv_rms, int64_t rows,
                            int64_t cols, double eps);

/* rms_norm_bwd: the vector-Jacobian product of out = x * inv_rms(x), eps held fixed inside
 * inv_rms (pass the inv_rms that rms_norm_fwd stored). Since d inv_rms / dx_c = -inv^3 x_c /
 * cols, each row gives
 *   dx[c] = inv * cotangent[c] - x[c] * inv^3 * mean_c(cotangent[c] * x[c]).
 * A row whose inv^3 * mean would overflow or underflow is computed in double (float32) or from
 * values scaled by powers of two (float64). dx may equal x or cotangent. */
void pf__k_rms_norm_bwd_f32(const float* x, const float* inv_rms, const float* cotangent, float* dx,
                            int64_t rows, int64_t cols);
void pf__k_rms_norm_bwd_f64(const double* x, const double* inv_rms, const double* cotangent,
                            double* dx, int64_t rows, int64_t cols);

/* kepler: solves Kepler's equation M = E - e sin E for the eccentric anomaly E of each
 * (mean_anomaly[i], ecc[i]) and stores sin E and cos E. Any finite M is accepted (it is reduced
 * modulo 2 pi first); e must lie in [0, 1). A non-finite M or an e outside [0, 1) gives NaN in
 * both outputs. Errors are a few ulp of the output type: float64 within 6 * 2^-53 of the true
 * sin E and cos E, and relatively within 2 ulp where E is small (e near 1, M near 0); float32
 * solves in double and rounds once. Elements with |M| < PF__K_REDUCE_CW_MAX (but not 0 < |M| <
 * PF__K_KEPLER_TINY_M) are solved several at a time in vector lanes with the kernels' own sin and
 * cos (within 4 * 2^-53; e = 0 gives E = M exactly, and sin and cos within an ulp of the C
 * library's), the others by pf__k_kepler_solve below. An element's result depends on its own
 * inputs only, not on its position or the thread count. Outputs overlap no input. */
void pf__k_kepler_f32(const float* mean_anomaly, const float* ecc, float* sin_e, float* cos_e,
                      int64_t count);
void pf__k_kepler_f64(const double* mean_anomaly, const double* ecc, double* sin_e, double* cos_e,
                      int64_t count);

/* vector_add: a[i] = b[i % nb] + c[i] for i < count (b repeats along a). nb must be >= 1 when
 * count > 0; nb <= 0 writes nothing. a may equal c; a may equal b only when nb >= count. */
void pf__k_vector_add_f32(const float* b, int64_t nb, const float* c, float* a, int64_t count);
void pf__k_vector_add_f64(const double* b, int64_t nb, const double* c, double* a, int64_t count);

/* ---- Scalar Kepler solver, shared by math_cpu.c and math_cuda.cu ----
 * Written in the common subset of C11 and C++17 (CUDA) so that the CPU and the GPU run the same
 * arithmetic. In the reduction modulo 2 pi every product that meets a sum is either exact or an
 * explicit fma, so its exactness does not depend on whether the compiler contracts a * b + c
 * into one fma (nvcc does, gcc may); elsewhere contraction only moves the last bit. */

#ifdef __CUDACC__
#define PF__K_HD __host__ __device__
#else
#define PF__K_HD
#endif

/* 2 pi = PF__K_TWO_PI_0 + _1 + _2 + _3 + _4 to about 180 bits. _0 is 2 pi rounded to double
 * and is only ever used inside an fma; _1 to _3 have at most 22 significant bits, so k times
 * any of them is exact for |k| < 2^31. */
#define PF__K_TWO_PI_0   0x1.921fb54442d18p+2
#define PF__K_TWO_PI_1   0x1.1a626p-52
#define PF__K_TWO_PI_2   0x1.98a2ep-75
#define PF__K_TWO_PI_3   0x1.b839ap-102
#define PF__K_TWO_PI_4   0x1.29024e088a67dp-125
#define PF__K_INV_TWO_PI 0x1.45f306dc9c883p-3
#define PF__K_PI         0x1.921fb54442d18p+1 /* pi rounded down to double */
/* Beyond this |M| the quotient k would reach 2^31 and the split above stops being exact; the
 * reduction then falls back on the C library's own full-range reduction in sin and cos. */
#define PF__K_REDUCE_CW_MAX 0x1p+31
/* Below this |M| (reduced) the root is E = M / (1 - e): E - e sin E = (1 - e) E + e E^3 / 6 - ...,
 * and e E^2 / (6 (1 - e)) < 2^-1400 is far below an ulp. The iteration would lose bits there:
 * f ~ M and f' ~ 1 - e make subnormal products (M = 3e-310, e = 1 - 1e-10 was 31 ulp off). */
#define PF__K_KEPLER_TINY_M 0x1p-800
/* Halley's method takes 2 or 3 steps from the starter; the cap leaves room for the bisection
 * fallback to walk a bracket of width 1 down to one ulp (53 halvings) in the worst case. */
#define PF__K_KEPLER_MAX_ITER 64

/* Sum a + b and its exact rounding error (Knuth's TwoSum). */
static inline PF__K_HD double pf__k_two_sum(double a, double b, double* err) {
  double s = a + b;
  double bb = s - a;
  *err = (a - (s - bb)) + (b - bb);
  return s;
}

/* m reduced modulo 2 pi into [-pi, pi] (a rounding error beyond pi at most). */
static inline PF__K_HD double pf__k_reduce_two_pi(double m) {
  if (fabs(m) <= PF__K_PI) {
    return m;
  }
  if (!(fabs(m) < PF__K_REDUCE_CW_MAX)) {
    return atan2(sin(m), cos(m));
  }
  double k = nearbyint(m * PF__K_INV_TWO_PI);
  /* Exact: m - k * TWO_PI_0 is a multiple of 2^-51 below 4 in magnitude. */
  double r = fma(-k, PF__K_TWO_PI_0, m);
  double e1, e2;
  r = pf__k_two_sum(r, -k * PF__K_TWO_PI_1, &e1);
  r = pf__k_two_sum(r, -k * PF__K_TWO_PI_2, &e2);
  double tail = (e1 + e2) - k * PF__K_TWO_PI_3;
  tail = fma(-k, PF__K_TWO_PI_4, tail);
  return r + tail;
}

/* E - sin E given s = sin E, without the cancellation of the direct difference for small E:
 * nine terms of the series E^3/3! - E^5/5! + ..., for |E| < 1 the first one left out is below
 * 2^-62 of the first. */
static inline PF__K_HD double pf__k_e_minus_sin(double e_anom, double s) {
  if (!(fabs(e_anom) < 1.0)) {
    return e_anom - s;
  }
  double x2 = e_anom * e_anom;
  double t = 1.0 - x2 / 342.0;
  t = 1.0 - x2 / 272.0 * t;
  t = 1.0 - x2 / 210.0 * t;
  t = 1.0 - x2 / 156.0 * t;
  t = 1.0 - x2 / 110.0 * t;
  t = 1.0 - x2 / 72.0 * t;
  t = 1.0 - x2 / 42.0 * t;
  t = 1.0 - x2 / 20.0 * t;
  return e_anom * x2 / 6.0 * t;
}

/* Starting guess for 0 <= m <= pi, 0 < e < 1: Mikkola's cubic approximation (1987), within
 * 4e-3 of the root everywhere, including the hard corner e -> 1, m -> 0. The root
 * s = z - alpha / z of s^3 + 3 alpha s = 2 beta is computed as 2 beta / (z^2 + alpha +
 * (alpha / z)^2), which is the same number without the cancellation that would otherwise
 * leave tiny m with a guess of pure rounding noise. */
static inline PF__K_HD double pf__k_kepler_start(double m, double e) {
  double denom = 4.0 * e + 0.5;
  double alpha = (1.0 - e) / denom;
  double beta = 0.5 * m / denom;
  double z = cbrt(beta + sqrt(beta * beta + alpha * alpha * alpha));
  double y = alpha / z;
  double s = 2.0 * beta / (z * z + alpha + y * y);
  s = s - 0.078 * s * s * s * s * s / (1.0 + e);
  return m + e * s * (3.0 - 4.0 * s * s);
}

/* The root E of E - e sin E = m for 0 <= m <= pi + tiny, 0 < e < 1. f(E) = E - e sin E - m
 * increases strictly (f' >= 1 - e > 0), so the root stays bracketed: Halley steps that leave
 * the bracket are replaced by bisection. f and f' are evaluated as
 *   f  = (1 - e) E + e (E - sin E) - m,   f' = (1 - e) + e (1 - cos E),
 * which keeps full relative accuracy where f' is small (e near 1, E near 0). */
static inline PF__K_HD double pf__k_kepler_root(double m, double e) {
  double one_minus_e = 1.0 - e; /* exact for e >= 0.5 */
  /* f(m) = -e sin m <= 0 while m <= pi (3 keeps clear of an m that reduction left just above
   * pi); f(m - e) <= 0 and f(m + e) >= 0 always. m + e is rounded up: where sin E is near 1 the
   * root lies within an ulp below the exact m + e, and a hi rounded down would exclude it. */
  double lo = (m <= 3.0) ? m : m - e;
  double hi = (m + e) * (1.0 + 2.0 * DBL_EPSILON);
  double x = pf__k_kepler_start(m, e);
  /* x = lo is valid: where e m is below half an ulp of m the starter is exactly m, the correctly
   * rounded root, and the bracket's midpoint, about e / 2, would lose m altogether (the Halley
   * steps from there cancel, and bisection from e / 2 takes more steps than the cap) */
  if (!(x >= lo && x < hi)) {
    x = 0.5 * (lo + hi);
  }
  for (int it = 0; it < PF__K_KEPLER_MAX_ITER; ++it) {
    double s = sin(x);
    double c = cos(x);
    double f = fma(one_minus_e, x, e * pf__k_e_minus_sin(x, s)) - m;
    if (f == 0.0) {
      break;
    }
    if (f < 0.0) {
      lo = x;
    } else {
      hi = x;
    }
    /* 1 - cos x = sin^2 x / (1 + cos x) without cancellation while cos x > 0. */
    double one_minus_cos = (c > 0.0) ? s * s / (1.0 + c) : 1.0 - c;
    double fp = fma(e, one_minus_cos, one_minus_e);
    double newton = -f / fp;
    double step = -f / fma(0.5 * newton, e * s, fp);
    double next = x + step;
    /* A step this small is rounding noise in f: x is the root to within an ulp or two, and
     * the step may even point just outside a bracket that noise has already moved past. */
    if (fabs(step) <= 4.0 * DBL_EPSILON * fabs(x)) {
      return (next >= lo && next <= hi) ? next : x;
    }
    if (!(next > lo && next < hi)) {
      next = 0.5 * (lo + hi); /* bisection keeps the bracket shrinking */
      if (next == lo || next == hi) {
        return next; /* the bracket is down to adjacent doubles */
      }
    }
    x = next;
  }
  return x;
}

/* sin and cos of the eccentric anomaly for mean anomaly m and eccentricity e (see kepler). */
static inline PF__K_HD void pf__k_kepler_solve(double m, double e, double* sin_e, double* cos_e) {
  if (!(e >= 0.0 && e < 1.0) || !(fabs(m) <= DBL_MAX)) {
    *sin_e = NAN;
    *cos_e = NAN;
    return;
  }
  /* e = 0: E = M, whose sin and cos the C library gives to an ulp at any M. Through the
   * reduction (atan2(sin M, cos M) beyond PF__K_REDUCE_CW_MAX, an ulp of pi off) sin E near
   * E = pi was thousands of ulps off (review). */
  if (e == 0.0) {
    *sin_e = sin(m);
    *cos_e = cos(m);
    return;
  }
  double r = pf__k_reduce_two_pi(m);
  double a = fabs(r);
  /* E(-m) = -E(m): solve for |r| and give sin E the sign of r. 1 - e is exact for e >= 0.5 and
   * within 2^-54 below, so a tiny root is within 1.5 ulp. */
  double e_anom = a == 0.0 ? a : a < PF__K_KEPLER_TINY_M ? a / (1.0 - e) : pf__k_kepler_root(a, e);
  *sin_e = copysign(1.0, r) * sin(e_anom);
  *cos_e = cos(e_anom);
}

#ifdef __cplusplus
}
#endif

#endif /* PACKFN_KERNELS_MATH_H */
