/* pf_test_kmath.h: what the files of test_kernels_math's Check suite share: the deterministic
 * random numbers, double-precision references, and the TCases each file adds to the suite built
 * in test_kernels_math.c. */
#ifndef PF_TEST_KMATH_H_
#define PF_TEST_KMATH_H_

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* A number in [lo, hi) from a small deterministic generator (xorshift64*), so failures
 * reproduce; one generator for the whole suite, defined in test_kernels_math.c. */
double pf_test_rand_uniform(double lo, double hi);

static inline void* xmalloc(size_t n) {
  void* p = malloc(n > 0 ? n : 1);
  ck_assert_ptr_nonnull(p);
  return p;
}

static inline float* rand_f32(int64_t n, double lo, double hi) {
  float* p = xmalloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    p[i] = (float)pf_test_rand_uniform(lo, hi);
  }
  return p;
}

static inline double* rand_f64(int64_t n, double lo, double hi) {
  double* p = xmalloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; ++i) {
    p[i] = pf_test_rand_uniform(lo, hi);
  }
  return p;
}

static inline double* widen(const float* p, int64_t n) {
  double* q = xmalloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; ++i) {
    q[i] = p[i];
  }
  return q;
}

/* Compensated sum of a[i] * b[i] (Neumaier), the reference for every reduction. */
static inline double ref_dot(const double* a, const double* b, int64_t n) {
  double sum = 0.0;
  double comp = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double term = a[i] * b[i];
    double t = sum + term;
    comp += (fabs(sum) >= fabs(term)) ? (sum - t) + term : (term - t) + sum;
    sum = t;
  }
  return sum + comp;
}

/* Largest |got - ref| / (|ref| + tiny): a relative error that tolerates zeros. */
static inline double max_rel_err_f32(const float* got, const double* ref, int64_t n, double tiny) {
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double err = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + tiny);
    if (isnan(err)) {
      return err; /* a NaN result, or NaN where a number was due */
    }
    worst = fmax(worst, err);
  }
  return worst;
}

static inline double max_rel_err_f64(const double* got, const double* ref, int64_t n, double tiny) {
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double err = fabs(got[i] - ref[i]) / (fabs(ref[i]) + tiny);
    if (isnan(err)) {
      return err;
    }
    worst = fmax(worst, err);
  }
  return worst;
}

/* 1 where long double has no more precision than double (valgrind computes x87 long double in
 * double precision, and a platform may make long double a double): references computed in it
 * then carry double's rounding errors, which the bounds must allow for. */
static inline int ld_is_double(void) {
  volatile long double one = 1.0L;
  volatile long double tiny = 0x1p-60L;
  return one + tiny == one;
}

/* Reference rms_norm in double; inv_rms may be NULL. */
static inline void ref_rms_norm(const double* x, double* out, double* inv_rms, int64_t rows,
                                int64_t cols, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    double mean_sq = cols > 0 ? ref_dot(xr, xr, cols) / (double)cols : 0.0;
    double inv = 1.0 / sqrt(mean_sq + eps);
    if (inv_rms != NULL) {
      inv_rms[r] = inv;
    }
    for (int64_t c = 0; c < cols; ++c) {
      out[r * cols + c] = xr[c] * inv;
    }
  }
}

/* Reference vector-Jacobian product in double, from the closed form, and for each element
 * the scale its rounding errors are relative to: the two terms, which may cancel, and the
 * second term with the mean taken over |ct * x| (the error bound of any dot product). */
static inline void ref_rms_norm_bwd(const double* x, const double* inv_rms, const double* ct,
                                    double* dx, double* scale, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const double* cr = ct + r * cols;
    double a = inv_rms[r];
    double b = a * a * a * ref_dot(cr, xr, cols) / (double)cols;
    double abs_dot = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      abs_dot += fabs(cr[c] * xr[c]);
    }
    double b_abs = a * a * a * abs_dot / (double)cols;
    for (int64_t c = 0; c < cols; ++c) {
      dx[r * cols + c] = a * cr[c] - b * xr[c];
      scale[r * cols + c] = fabs(a * cr[c]) + fabs(b * xr[c]) + b_abs * fabs(xr[c]);
    }
  }
}

/* Largest |got - ref| / (scale + floor) where scale bounds the terms of the closed form. */
static inline double bwd_err_f32(const float* got, const double* ref, const double* scale,
                                 int64_t n) {
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double err = fabs((double)got[i] - ref[i]) / (scale[i] + 1e-30);
    if (isnan(err)) {
      return err;
    }
    worst = fmax(worst, err);
  }
  return worst;
}

static inline double bwd_err_f64(const double* got, const double* ref, const double* scale,
                                 int64_t n) {
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double err = fabs(got[i] - ref[i]) / (scale[i] + 1e-300);
    if (isnan(err)) {
      return err;
    }
    worst = fmax(worst, err);
  }
  return worst;
}

/* A case of the tests tests[0 .. n - 1] that setup (an unchecked fixture) sets the kernel level
 * for, with the suite's timeout. */
TCase* pf_test_kmath_tcase(const char* name, const TTest* const* tests, int n, SFun setup);

/* The kepler case (test_kernels_math_kepler.c) at the level setup sets. */
TCase* pf_test_kmath_kepler_tcase(const char* name, SFun setup);

/* The "rms_norm range" case (test_kernels_math_range.c) at the level setup sets: rows of values
 * at the ends of the floating-point range, empty arrays of huge row counts, float64 accuracy. */
TCase* pf_test_kmath_range_tcase(const char* name, SFun setup);

/* The "levels and threads" case (test_kernels_math_threads.c): the last one, it leaves the
 * default level set. */
TCase* pf_test_kmath_threads_tcase(void);

#endif
