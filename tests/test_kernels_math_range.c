/* tests/test_kernels_math_range.c: the "rms_norm range" cases of test_kernels_math: rms_norm,
 * rms_norm_fwd and rms_norm_bwd (kernels/kmath.h) on rows of values near the ends of the
 * floating-point range, whose sums of squares or coefficients overflow or underflow although
 * the results are ordinary numbers; empty arrays with a huge number of rows; and the accuracy of
 * float64 rms_norm, in ulps, against a long double reference. */
/* alarm and write: POSIX, which -std=c11 leaves out */
#define _POSIX_C_SOURCE 200809L

#include "kernels/kmath.h"
#include "pf_test_kmath.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Row lengths: all in the scalar tail (3), vector lanes and a tail (33, 1023), and more than one
 * segment of 16384, whose sums are combined (20001). */
static const int64_t RANGE_COLS[] = {3, 33, 1023, 20001};
#define NUM_RANGE_COLS ((int)(sizeof(RANGE_COLS) / sizeof(RANGE_COLS[0])))
#define RANGE_ROWS     2

/* A copy of x[0 .. n - 1] times 2^k (exact where no result is subnormal). */
static double* scaled_copy(const double* x, int64_t n, int k) {
  double* y = xmalloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; ++i) {
    y[i] = ldexp(x[i], k);
  }
  return y;
}

/* rms_norm_fwd, rms_norm and rms_norm in place on float64 rows xs = x 2^k: rms_norm is blind to
 * the scale (with eps scaled by 2^2k), so the outputs must be those of x with eps_x, and inv_rms
 * 2^-k times x's (inf where that is beyond DBL_MAX). x is rebuilt from xs (xs 2^-k is exact:
 * scaling up), so that subnormal xs lose nothing the reference keeps. */
static void check_scaled_f64(const double* x0, int64_t rows, int64_t cols, int k, double eps_x) {
  int64_t n = rows * cols;
  double* xs = scaled_copy(x0, n, k);
  double* x = scaled_copy(xs, n, -k);
  double* ref = xmalloc((size_t)n * sizeof(double));
  double ref_inv[RANGE_ROWS];
  ref_rms_norm(x, ref, ref_inv, rows, cols, eps_x);
  double eps = ldexp(eps_x, 2 * k);
  ck_assert(eps_x == 0.0 || ldexp(eps, -2 * k) == eps_x); /* eps itself exact */
  double* out = xmalloc((size_t)n * sizeof(double));
  double inv[RANGE_ROWS];
  pf__k_rms_norm_fwd_f64(xs, out, inv, rows, cols, eps);
  double err = max_rel_err_f64(out, ref, n, 1e-300);
  ck_assert_msg(err <= 4 * DBL_EPSILON, "%s: %lldx%lld x 2^%d, eps %g: outputs rel err %g",
                pf__k_isa_name(), (long long)rows, (long long)cols, k, eps, err);
  for (int64_t r = 0; r < rows; ++r) {
    double want = ldexp(ref_inv[r], -k);
    double got_err = isinf(want) ? (isinf(inv[r]) ? 0.0 : 1.0) : fabs(inv[r] - want) / want;
    ck_assert_msg(got_err <= 4 * DBL_EPSILON, "%s: %lldx%lld x 2^%d, eps %g: inv_rms %g, want %g",
                  pf__k_isa_name(), (long long)rows, (long long)cols, k, eps, inv[r], want);
  }
  memset(out, 0, (size_t)n * sizeof(double));
  pf__k_rms_norm_f64(xs, out, rows, cols, eps);
  ck_assert(max_rel_err_f64(out, ref, n, 1e-300) <= 4 * DBL_EPSILON);
  pf__k_rms_norm_f64(xs, xs, rows, cols, eps); /* in place */
  ck_assert(max_rel_err_f64(xs, ref, n, 1e-300) <= 4 * DBL_EPSILON);
  free(xs);
  free(x);
  free(ref);
  free(out);
}

/* float64 rows whose squares underflow: partly (x 2^-520: subnormal squares, a few % off when
 * summed as they are), wholly (x 2^-600: inv_rms was inf and every output inf), rows of
 * subnormals (x 2^-1060, inv_rms beyond DBL_MAX: inf, outputs still exact), with eps = 0, with
 * an eps on the scale of the squares (2^-1061), and with an ordinary eps that outweighs them. */
START_TEST(test_rms_norm_f64_tiny_rows) {
  for (int k = 0; k < NUM_RANGE_COLS; ++k) {
    int64_t cols = RANGE_COLS[k];
    double* x = rand_f64(RANGE_ROWS * cols, -1, 1);
    check_scaled_f64(x, RANGE_ROWS, cols, -520, 0.0);
    check_scaled_f64(x, RANGE_ROWS, cols, -600, 0.0);
    check_scaled_f64(x, RANGE_ROWS, cols, -1000, 0.0);
    check_scaled_f64(x, RANGE_ROWS, cols, -1060, 0.0);
    check_scaled_f64(x, RANGE_ROWS, cols, -530, 0.5); /* eps 2^-1061 */
    /* eps = 1e-5 outweighs squares of 2^-1200: out = x / sqrt(1e-5) */
    double* xs = scaled_copy(x, RANGE_ROWS * cols, -600);
    double* ref = xmalloc((size_t)(RANGE_ROWS * cols) * sizeof(double));
    double* out = xmalloc((size_t)(RANGE_ROWS * cols) * sizeof(double));
    for (int64_t i = 0; i < RANGE_ROWS * cols; ++i) {
      ref[i] = xs[i] * (1.0 / sqrt(1e-5));
    }
    pf__k_rms_norm_f64(xs, out, RANGE_ROWS, cols, 1e-5);
    ck_assert(max_rel_err_f64(out, ref, RANGE_ROWS * cols, 1e-300) <= 4 * DBL_EPSILON);
    free(x);
    free(xs);
    free(ref);
    free(out);
  }
  /* three equal values with subnormal squares: exactly 1 each (they were 0.954) */
  double x3[3] = {3e-162, 3e-162, 3e-162}, out3[3], inv3;
  pf__k_rms_norm_fwd_f64(x3, out3, &inv3, 1, 3, 0.0);
  for (int c = 0; c < 3; ++c) {
    ck_assert_msg(fabs(out3[c] - 1.0) <= 2 * DBL_EPSILON, "%s: %.17g", pf__k_isa_name(), out3[c]);
  }
  ck_assert(fabs(inv3 * 3e-162 - 1.0) <= 2 * DBL_EPSILON);
  /* rows of zeros: 1 / sqrt(eps); with eps = 0, inf and NaN outputs, as the formula says */
  double z[2][40] = {{0}}, zo[2][40], zi[2];
  pf__k_rms_norm_fwd_f64(&z[0][0], &zo[0][0], zi, 2, 40, 1e-300);
  ck_assert(zi[0] == 1.0 / sqrt(1e-300) && zi[1] == zi[0]);
  for (int c = 0; c < 40; ++c) {
    ck_assert(zo[0][c] == 0.0 && zo[1][c] == 0.0);
  }
  pf__k_rms_norm_fwd_f64(&z[0][0], &zo[0][0], zi, 2, 40, 0.0);
  ck_assert(isinf(zi[0]) && isnan(zo[0][0]) && isnan(zo[1][39]));
}
END_TEST

/* float64 rows whose squares overflow (x 2^600, 2^1000; a row of 262147, whose second sum was
 * uncompensated and divided by the largest |x| element by element: 15 ulp off), and a row near
 * DBL_MAX, whose inv_rms is subnormal (its outputs are written from the scaled values). */
START_TEST(test_rms_norm_f64_huge_rows) {
  for (int k = 0; k < NUM_RANGE_COLS; ++k) {
    int64_t cols = RANGE_COLS[k];
    double* x = rand_f64(RANGE_ROWS * cols, -1, 1);
    check_scaled_f64(x, RANGE_ROWS, cols, 600, 0.0);
    check_scaled_f64(x, RANGE_ROWS, cols, 1000, 0.0);
    free(x);
  }
  int64_t long_row = 262147;
  double* x = rand_f64(long_row, -1, 1);
  check_scaled_f64(x, 1, long_row, 600, 0.0);
  free(x);
  double big[3] = {DBL_MAX, -DBL_MAX / 3, DBL_MAX / 2};
  double small[3], ref[3], ref_inv, out[3], inv;
  for (int c = 0; c < 3; ++c) {
    small[c] = ldexp(big[c], -1000);
  }
  ref_rms_norm(small, ref, &ref_inv, 1, 3, 0.0);
  pf__k_rms_norm_fwd_f64(big, out, &inv, 1, 3, 0.0);
  double err = max_rel_err_f64(out, ref, 3, 1e-300);
  ck_assert_msg(err <= 4 * DBL_EPSILON, "%s: rows near DBL_MAX: rel err %g", pf__k_isa_name(), err);
  ck_assert(fabs(inv - ldexp(ref_inv, -1000)) <= 0x1p-1073); /* subnormal: absolute */
  /* an eps near DBL_MAX with a mean of squares near it too: mean + eps overflowed, and the row
   * came out 0 (review) */
  double one[1] = {1e154}, o1[1], i1;
  pf__k_rms_norm_fwd_f64(one, o1, &i1, 1, 1, DBL_MAX * 0.75);
  /* 1 / sqrt(1e308 + eps) as 0.5 / sqrt(1e308 / 4 + eps / 4): no overflow in double (long
   * double is double under valgrind) */
  double want_inv = 0.5 / sqrt(1e308 / 4 + DBL_MAX * 0.75 / 4);
  double want_out = 1e154 * want_inv;
  ck_assert_msg(fabs(i1 - want_inv) <= 4 * DBL_EPSILON * want_inv &&
                    fabs(o1[0] - want_out) <= 4 * DBL_EPSILON * want_out,
                "%s: huge eps: inv %g, out %g, want %g, %g", pf__k_isa_name(), i1, o1[0], want_inv,
                want_out);
  /* a negative column count writes nothing, inv_rms included (kmath.h) */
  double keep[3] = {7, 7, 7};
  pf__k_rms_norm_fwd_f64(one, o1, keep, 3, -1, 1e-5);
  ck_assert(keep[0] == 7 && keep[1] == 7 && keep[2] == 7);
}
END_TEST

/* float32 rows whose inv_rms is below FLT_MIN although the outputs are ordinary numbers: values
 * of 1e38 with a large eps (1e84: inv_rms 1e-42, a subnormal float of 10 bits; 1e92: below the
 * smallest float). Each row was scaled by its inv_rms rounded to float: outputs 5e-4 relatively
 * off with eps 1e84, and a row of zeros with eps 1e92 (review). rms_norm_fwd, rms_norm and
 * rms_norm in place, against the double reference; inv_rms is that reference rounded to float. */
START_TEST(test_rms_norm_f32_small_inv_rms) {
  static const double eps_of[] = {1e78, 1e84, 1e92};
  for (int k = 0; k < NUM_RANGE_COLS; ++k) {
    int64_t cols = RANGE_COLS[k], n = RANGE_ROWS * cols;
    float* x = rand_f32(n, -1, 1);
    for (int64_t i = 0; i < n; ++i) {
      x[i] *= 1e38f;
    }
    double* xd = widen(x, n);
    double* ref = xmalloc((size_t)n * sizeof(double));
    float* out = xmalloc((size_t)n * sizeof(float));
    for (int e = 0; e < 3; ++e) {
      double eps = eps_of[e], ref_inv[RANGE_ROWS];
      float inv[RANGE_ROWS];
      ref_rms_norm(xd, ref, ref_inv, RANGE_ROWS, cols, eps);
      pf__k_rms_norm_fwd_f32(x, out, inv, RANGE_ROWS, cols, eps);
      double err = max_rel_err_f32(out, ref, n, 1e-30);
      ck_assert_msg(err <= 4 * FLT_EPSILON, "%s: rows of %lld x 1e38, eps %g: outputs rel err %g",
                    pf__k_isa_name(), (long long)cols, eps, err);
      for (int64_t r = 0; r < RANGE_ROWS; ++r) {
        ck_assert(inv[r] == (float)ref_inv[r]);
      }
      memset(out, 0, (size_t)n * sizeof(float));
      pf__k_rms_norm_f32(x, out, RANGE_ROWS, cols, eps);
      ck_assert(max_rel_err_f32(out, ref, n, 1e-30) <= 4 * FLT_EPSILON);
      memcpy(out, x, (size_t)n * sizeof(float));
      pf__k_rms_norm_f32(out, out, RANGE_ROWS, cols, eps); /* in place */
      ck_assert(max_rel_err_f32(out, ref, n, 1e-30) <= 4 * FLT_EPSILON);
    }
    free(x);
    free(xd);
    free(ref);
    free(out);
  }
}
END_TEST

/* rms_norm_bwd on rows x 2^k, ct in [-1, 1), against the closed form: dx(x 2^k, inv) is
 * 2^-k dx(x, inv 2^k), the reference in double on the unscaled x. Row 1 has a cotangent of zeros
 * (mean 0: dx = 0). Out of place and in place on ct. */
static void check_bwd_scaled(int f64, int64_t cols, int k) {
  enum { ROWS = 3 };
  int64_t n = ROWS * cols;
  double* x = rand_f64(n, -2, 2);
  double* ct = rand_f64(n, -1, 1);
  for (int64_t c = 0; c < cols; ++c) {
    ct[cols + c] = 0.0;
  }
  double* xs = scaled_copy(x, n, k);
  double inv_s[ROWS], inv_big[ROWS];
  double* dx = xmalloc((size_t)n * sizeof(double));
  if (f64) {
    double* y = xmalloc((size_t)n * sizeof(double));
    pf__k_rms_norm_fwd_f64(xs, y, inv_s, ROWS, cols, 0.0);
    pf__k_rms_norm_bwd_f64(xs, inv_s, ct, dx, ROWS, cols);
    free(y);
  } else {
    float* xf = xmalloc((size_t)n * sizeof(float));
    float* cf = xmalloc((size_t)n * sizeof(float));
    float* yf = xmalloc((size_t)n * sizeof(float));
    float* df = xmalloc((size_t)n * sizeof(float));
    float invf[ROWS];
    for (int64_t i = 0; i < n; ++i) {
      xf[i] = (float)xs[i];
      cf[i] = (float)ct[i];
      xs[i] = xf[i]; /* the reference sees the float values */
      ct[i] = cf[i];
    }
    pf__k_rms_norm_fwd_f32(xf, yf, invf, ROWS, cols, 0.0);
    pf__k_rms_norm_bwd_f32(xf, invf, cf, df, ROWS, cols);
    for (int64_t i = 0; i < n; ++i) {
      dx[i] = df[i];
    }
    for (int r = 0; r < ROWS; ++r) {
      inv_s[r] = invf[r];
    }
    pf__k_rms_norm_bwd_f32(xf, invf, cf, cf, ROWS, cols); /* in place on ct */
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; ++i) {
      bad = (cf[i] == df[i]) ? -1 : i;
    }
    ck_assert_msg(bad < 0, "float32 bwd in place differs at %lld", (long long)bad);
    free(xf);
    free(cf);
    free(yf);
    free(df);
  }
  for (int64_t i = 0; i < n; ++i) {
    x[i] = ldexp(xs[i], -k); /* exact: the values the kernel saw, unscaled */
  }
  for (int r = 0; r < ROWS; ++r) {
    inv_big[r] = ldexp(inv_s[r], k);
  }
  double* ref = xmalloc((size_t)n * sizeof(double));
  double* scale = xmalloc((size_t)n * sizeof(double));
  ref_rms_norm_bwd(x, inv_big, ct, ref, scale, ROWS, cols);
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = ldexp(dx[i], k); /* back on the reference's scale (exact: no dx is subnormal) */
  }
  double err = f64 ? bwd_err_f64(dx, ref, scale, n) : 0.0;
  if (!f64) {
    float* d32 = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      d32[i] = (float)dx[i]; /* exact: dx came from float, times a power of two in range */
    }
    err = bwd_err_f32(d32, ref, scale, n);
    free(d32);
  }
  double bound = f64 ? 4 * DBL_EPSILON : 2 * FLT_EPSILON;
  ck_assert_msg(err <= bound, "%s: rms_norm_bwd %s 3x%lld, x 2^%d: err %g", pf__k_isa_name(),
                f64 ? "f64" : "f32", (long long)cols, k, err);
  for (int64_t c = 0; c < cols; ++c) {
    ck_assert(dx[cols + c] == 0.0);
  }
  if (f64) { /* in place on ct: the same bits */
    double* dx2 = xmalloc((size_t)n * sizeof(double));
    memcpy(dx2, ct, (size_t)n * sizeof(double));
    pf__k_rms_norm_bwd_f64(xs, inv_s, dx2, dx2, ROWS, cols);
    for (int64_t i = 0; i < n; ++i) {
      ck_assert(ldexp(dx2[i], k) == dx[i]);
    }
    free(dx2);
  }
  free(x);
  free(ct);
  free(xs);
  free(dx);
  free(ref);
  free(scale);
}

/* inv^3 mean overflowed (float32 rows of 1e-20, float64 of 1e-108 and smaller, eps = 0: dx was
 * -inf) or underflowed (float32 rows of 1e20 and beyond, whose b = inv^3 mean is subnormal or 0
 * in float; float64 of 1e108), although dx is an ordinary number; a zero cotangent with inv^3
 * overflowing gave NaN. */
START_TEST(test_rms_norm_bwd_extreme_rows) {
  static const int64_t cols[] = {4, 33, 1023};
  static const int k32[] = {-66, -120, 66, 100};
  static const int k64[] = {-360, -700, 360, -200, 200};
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 4; ++i) {
      check_bwd_scaled(0, cols[c], k32[i]);
    }
    for (int i = 0; i < 5; ++i) {
      check_bwd_scaled(1, cols[c], k64[i]);
    }
  }
  /* the review's case: float32 x = {1, 2, 3, 4} 1e-20, eps = 0 */
  float x[4] = {1e-20f, 2e-20f, 3e-20f, 4e-20f}, ct[4] = {1, -1, 0.5f, 2}, y[4], inv, dx[4];
  pf__k_rms_norm_fwd_f32(x, y, &inv, 1, 4, 0.0);
  pf__k_rms_norm_bwd_f32(x, &inv, ct, dx, 1, 4);
  for (int c = 0; c < 4; ++c) {
    ck_assert_msg(isfinite(dx[c]), "%s: dx[%d] = %g", pf__k_isa_name(), c, dx[c]);
  }
  /* a ct with inv ct beyond the type's largest value, cancelled by b x beyond it too: both
   * products overflowed and dx, finite, came out NaN or -inf (review) */
  enum { C = 100 };
  float xf[C] = {1.5f, 0.1f}, yf[C], invf, ctf[C] = {0}, dxf[C];
  pf__k_rms_norm_fwd_f32(xf, yf, &invf, 1, C, 0.0);
  ctf[0] = (float)(1.2 * FLT_MAX / invf);
  ctf[2] = 1.0f;
  pf__k_rms_norm_bwd_f32(xf, &invf, ctf, dxf, 1, C);
  double b32 = (double)invf * invf * invf * ((double)ctf[0] * xf[0] / C);
  double want32 = (double)invf * ctf[0] - b32 * xf[0];
  ck_assert_msg(fabs(dxf[0] - want32) <= 1e-5 * fabs(want32), "%s: dx[0] = %g, want %g",
                pf__k_isa_name(), dxf[0], want32);
  double xd[C] = {1.5, 0.1}, yd[C], invd, ctd[C] = {0}, dxd[C];
  pf__k_rms_norm_fwd_f64(xd, yd, &invd, 1, C, 0.0);
  ctd[0] = 1.2 * (DBL_MAX / invd);
  pf__k_rms_norm_bwd_f64(xd, &invd, ctd, dxd, 1, C);
  /* dx[0] = inv ct0 (1 - inv^2 x0^2 / C) (ct is 0 elsewhere), in double without an overflow
   * (long double is double under valgrind); the cancellation costs about 2^-45 */
  double wantd = ctd[0] * (invd * (1.0 - invd * invd * xd[0] * xd[0] / C));
  ck_assert_msg(isfinite(dxd[0]) && fabs(dxd[0] - wantd) <= 1e-10 * fabs(wantd),
                "%s: dx[0] = %g, want %g", pf__k_isa_name(), dxd[0], wantd);
}
END_TEST

/* float64 rms_norm_bwd on rows whose every product ct x underflows to 0 (x 2^-332, about 1e-100,
 * and ct 2^-830, about 1e-250: products near 1e-350) although b x = x inv^3 mean(ct x) is of the
 * order of a ct = inv ct: the sum of 0 was taken for a mean of 0, and dx was inv ct, wrong in
 * sign and size (review). dx(x 2^kx, ct 2^kc) = 2^(kc - kx) dx(x, ct), with inv 2^-kx: the
 * reference is the closed form on the unscaled values. Row 1 has a cotangent of zeros (dx 0). */
START_TEST(test_rms_norm_bwd_f64_products_underflow) {
  enum { ROWS = 2, KX = -332, KC = -830 };
  static const int64_t cols[] = {4, 33, 1023};
  for (int k = 0; k < 3; ++k) {
    int64_t n = ROWS * cols[k];
    double* x = rand_f64(n, 0.5, 2);
    double* ct = rand_f64(n, -1, 1);
    for (int64_t c = 0; c < cols[k]; ++c) {
      ct[cols[k] + c] = 0.0;
    }
    double* xs = scaled_copy(x, n, KX);
    double* cs = scaled_copy(ct, n, KC);
    double* y = xmalloc((size_t)n * sizeof(double));
    double* dx = xmalloc((size_t)n * sizeof(double));
    double* ref = xmalloc((size_t)n * sizeof(double));
    double* scale = xmalloc((size_t)n * sizeof(double));
    double inv_s[ROWS], inv[ROWS];
    pf__k_rms_norm_fwd_f64(xs, y, inv_s, ROWS, cols[k], 0.0);
    pf__k_rms_norm_bwd_f64(xs, inv_s, cs, dx, ROWS, cols[k]);
    for (int r = 0; r < ROWS; ++r) {
      inv[r] = ldexp(inv_s[r], KX); /* exact */
    }
    ref_rms_norm_bwd(x, inv, ct, ref, scale, ROWS, cols[k]);
    for (int64_t i = 0; i < n; ++i) {
      dx[i] = ldexp(dx[i], KX - KC); /* exact: no dx is subnormal */
    }
    double err = bwd_err_f64(dx, ref, scale, n);
    ck_assert_msg(err <= 4 * DBL_EPSILON, "%s: rms_norm_bwd f64 2x%lld, x 2^%d, ct 2^%d: err %g",
                  pf__k_isa_name(), (long long)cols[k], KX, KC, err);
    for (int64_t c = 0; c < cols[k]; ++c) {
      ck_assert(dx[cols[k] + c] == 0.0);
    }
    free(x);
    free(ct);
    free(xs);
    free(cs);
    free(y);
    free(dx);
    free(ref);
    free(scale);
  }
}
END_TEST

/* Fails the whole test program: a kernel that does not return cannot be failed otherwise (the
 * suite runs in-process, CK_FORK=no). */
static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "rms_norm on (2^62, 0) did not return within 60 s\n";
  ssize_t written = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)written;
  _exit(EXIT_FAILURE);
}

/* An empty array of 2^62 rows of no columns (valid: a tensor of shape (2^62, 0) holds no byte)
 * returns at once: the rows were visited one by one, for ever. */
START_TEST(test_rms_norm_empty_rows_return) {
  int64_t rows = (int64_t)1 << 62;
  float xf = 42.0f;
  double xd = 42.0;
  signal(SIGALRM, on_alarm);
  alarm(60);
  pf__k_rms_norm_f32(&xf, &xf, rows, 0, 1e-5);
  pf__k_rms_norm_f64(&xd, &xd, rows, 0, 1e-5);
  pf__k_rms_norm_bwd_f32(&xf, &xf, &xf, &xf, rows, 0);
  pf__k_rms_norm_bwd_f64(&xd, &xd, &xd, &xd, rows, 0);
  alarm(0);
  signal(SIGALRM, SIG_DFL);
  ck_assert(xf == 42.0f && xd == 42.0);
}
END_TEST

/* The worst errors of float64 rms_norm_fwd over rows of values in [1, 2), eps = 0, in ulps of
 * the long double reference (the squares summed with compensation). */
static void f64_ulp_errors(int64_t rows, int64_t cols, double* inv_ulps, double* out_ulps) {
  int64_t n = rows * cols;
  double* x = rand_f64(n, 1, 2);
  double* out = xmalloc((size_t)n * sizeof(double));
  double* inv = xmalloc((size_t)rows * sizeof(double));
  pf__k_rms_norm_fwd_f64(x, out, inv, rows, cols, 0.0);
  *inv_ulps = *out_ulps = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    long double sum = 0.0L, comp = 0.0L;
    for (int64_t c = 0; c < cols; ++c) {
      long double p = (long double)xr[c] * xr[c];
      long double t = sum + p;
      comp += (sum >= p) ? (sum - t) + p : (p - t) + sum;
      sum = t;
    }
    long double ref_inv = 1.0L / sqrtl((sum + comp) / cols);
    double e = (double)(fabsl(inv[r] - ref_inv) / ldexpl(1.0L, ilogbl(ref_inv) - 52));
    *inv_ulps = fmax(*inv_ulps, e);
    for (int64_t c = 0; c < cols; ++c) {
      long double want = xr[c] * ref_inv;
      e = (double)(fabsl(out[r * cols + c] - want) / ldexpl(1.0L, ilogbl(want) - 52));
      *out_ulps = fmax(*out_ulps, e);
    }
  }
  free(x);
  free(out);
  free(inv);
}

/* float64 rms_norm at every level within 2.5 ulp (inv_rms) and 4 ulp (outputs) on rows whose
 * lengths leave the longest tails after the vector blocks (15 elements at SSE2 and AVX2, 31 at
 * AVX-512): the tail was added into the row's total one product at a time, and these rows
 * measured inv_rms 2.7-4.5 ulp and outputs 4.6-7.2 ulp off (now at most 1.8 and 3.2, over eight
 * samples like this one). Bounds widened by an ulp where long double is no wider than double (the
 * reference then carries double's errors). */
START_TEST(test_rms_norm_f64_ulps) {
  static const int64_t cols[] = {255, 1023, 8191}, rows[] = {3000, 1000, 150};
  double slack = ld_is_double() ? 1.0 : 0.0;
  for (int k = 0; k < 3; ++k) {
    double inv_ulps, out_ulps;
    f64_ulp_errors(rows[k], cols[k], &inv_ulps, &out_ulps);
    printf("rms_norm %s float64, rows of %lld: inv_rms %.2f ulp, outputs %.2f ulp\n",
           pf__k_isa_name(), (long long)cols[k], inv_ulps, out_ulps);
    ck_assert_msg(inv_ulps <= 2.5 + slack && out_ulps <= 4.0 + slack,
                  "%s: rows of %lld: inv_rms %.2f ulp, outputs %.2f ulp", pf__k_isa_name(),
                  (long long)cols[k], inv_ulps, out_ulps);
  }
}
END_TEST

TCase* pf_test_kmath_range_tcase(const char* name, SFun setup) {
  const TTest* tests[] = {test_rms_norm_f64_tiny_rows,
                          test_rms_norm_f64_huge_rows,
                          test_rms_norm_f32_small_inv_rms,
                          test_rms_norm_bwd_extreme_rows,
                          test_rms_norm_bwd_f64_products_underflow,
                          test_rms_norm_empty_rows_return,
                          test_rms_norm_f64_ulps};
  return pf_test_kmath_tcase(name, tests, (int)(sizeof tests / sizeof tests[0]), setup);
}
