/* tests/test_kernels_math.c: unit tests of the CPU kernels in kernels/kmath.h against plain
 * double-precision references written here, in float32 and float64, across shapes. */
#include "kernels/kmath.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seconds per test case: generous, so that the suite also passes under valgrind. */
#define TEST_TIMEOUT 300

/* ---- helpers ---- */

/* A small deterministic generator (xorshift64*), so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static double rand_uniform(double lo, double hi) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t bits = (rng_state * 0x2545F4914F6CDD1Du) >> 11;
  return lo + (hi - lo) * ((double)bits * 0x1p-53);
}

static void* xmalloc(size_t n) {
  void* p = malloc(n > 0 ? n : 1);
  ck_assert_ptr_nonnull(p);
  return p;
}

static float* rand_f32(int64_t n, double lo, double hi) {
  float* p = xmalloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    p[i] = (float)rand_uniform(lo, hi);
  }
  return p;
}

static double* rand_f64(int64_t n, double lo, double hi) {
  double* p = xmalloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; ++i) {
    p[i] = rand_uniform(lo, hi);
  }
  return p;
}

static double* widen(const float* p, int64_t n) {
  double* q = xmalloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; ++i) {
    q[i] = p[i];
  }
  return q;
}

/* Compensated sum of a[i] * b[i] (Neumaier), the reference for every reduction. */
static double ref_dot(const double* a, const double* b, int64_t n) {
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
static double max_rel_err_f32(const float* got, const double* ref, int64_t n, double tiny) {
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

static double max_rel_err_f64(const double* got, const double* ref, int64_t n, double tiny) {
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

/* Shapes (rows, cols) that every rms_norm test runs through: empty, rows of no columns, single
 * row, batched, odd column counts, rows scaled in the pass that sums the next (up to 8 KiB:
 * 1023 of either type, 2047 floats), rows summed then scaled forward (2049 floats, 2047
 * doubles) and from their end (over 16 KiB: 2049 doubles, 5001, 100003), and one of over 4 MiB,
 * which takes the path of non-temporal stores and prefetches. */
static const int64_t SHAPES[][2] = {{0, 0},    {0, 5},      {4, 0},      {1, 1},    {1, 17},
                                    {5, 33},   {7, 3},      {64, 1023},  {9, 2047}, {9, 2049},
                                    {3, 5001}, {3, 100003}, {1031, 1024}};
#define NUM_SHAPES ((int)(sizeof(SHAPES) / sizeof(SHAPES[0])))

/* Reference rms_norm in double; inv_rms may be NULL. */
static void ref_rms_norm(const double* x, double* out, double* inv_rms, int64_t rows, int64_t cols,
                         double eps) {
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

/* ---- add_n ---- */

static const int64_t COUNTS[] = {0, 1, 13, 4099, 100000};
#define NUM_COUNTS ((int)(sizeof(COUNTS) / sizeof(COUNTS[0])))

START_TEST(test_add_n_f32) {
  for (int k = 0; k < NUM_COUNTS; ++k) {
    int64_t n = COUNTS[k];
    float* x = rand_f32(n, -100, 100);
    float* out = rand_f32(n + 1, 0, 1);
    out[n] = 42.0f; /* sentinel: nothing past count is written */
    pf__k_add_n_f32(x, out, n, 2.5f);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; ++i) {
      bad = (out[i] == x[i] + 2.5f) ? -1 : i;
    }
    ck_assert_msg(bad < 0, "count %lld: wrong at index %lld", (long long)n, (long long)bad);
    ck_assert(out[n] == 42.0f);
    /* In place. */
    float first = n > 0 ? x[0] : 0.0f;
    pf__k_add_n_f32(x, x, n, -1.0f);
    if (n > 0) {
      ck_assert(x[0] == first - 1.0f);
    }
    free(x);
    free(out);
  }
}
END_TEST

START_TEST(test_add_n_f64) {
  for (int k = 0; k < NUM_COUNTS; ++k) {
    int64_t n = COUNTS[k];
    double* x = rand_f64(n, -100, 100);
    double* out = rand_f64(n + 1, 0, 1);
    out[n] = 42.0;
    pf__k_add_n_f64(x, out, n, 1e-3);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; ++i) {
      bad = (out[i] == x[i] + 1e-3) ? -1 : i;
    }
    ck_assert_msg(bad < 0, "count %lld: wrong at index %lld", (long long)n, (long long)bad);
    ck_assert(out[n] == 42.0);
    double first = n > 0 ? x[0] : 0.0;
    pf__k_add_n_f64(x, x, n, 3.0);
    if (n > 0) {
      ck_assert(x[0] == first + 3.0);
    }
    free(x);
    free(out);
  }
}
END_TEST

/* ---- rms_norm ---- */

START_TEST(test_rms_norm_f32) {
  const float eps = 1e-5f;
  for (int k = 0; k < NUM_SHAPES; ++k) {
    int64_t rows = SHAPES[k][0], cols = SHAPES[k][1], n = rows * cols;
    float* x = rand_f32(n, -3, 3);
    double* xd = widen(x, n);
    double* ref = xmalloc((size_t)n * sizeof(double));
    double* ref_inv = xmalloc((size_t)rows * sizeof(double));
    ref_rms_norm(xd, ref, ref_inv, rows, cols, eps);
    /* One spare element in front: out + 1 is misaligned, which exercises the store prologue. */
    float* buf = xmalloc((size_t)(n + 2) * sizeof(float));
    float* out = buf + 1;
    buf[0] = buf[n + 1] = 42.0f;

    pf__k_rms_norm_f32(x, out, rows, cols, eps);
    double err = max_rel_err_f32(out, ref, n, 1e-30);
    ck_assert_msg(err <= 4 * FLT_EPSILON, "rms_norm_f32 %lldx%lld: rel err %g", (long long)rows,
                  (long long)cols, err);
    ck_assert(buf[0] == 42.0f && buf[n + 1] == 42.0f);

    float* inv = xmalloc((size_t)(rows + 1) * sizeof(float));
    inv[rows] = 42.0f;
    memset(out, 0, (size_t)n * sizeof(float));
    pf__k_rms_norm_fwd_f32(x, out, inv, rows, cols, eps);
    ck_assert(max_rel_err_f32(out, ref, n, 1e-30) <= 4 * FLT_EPSILON);
    err = max_rel_err_f32(inv, ref_inv, rows, 0.0);
    ck_assert_msg(err <= 2 * FLT_EPSILON, "rms_norm_fwd_f32 %lldx%lld: inv_rms rel err %g",
                  (long long)rows, (long long)cols, err);
    ck_assert(inv[rows] == 42.0f);

    /* In place. */
    pf__k_rms_norm_f32(x, x, rows, cols, eps);
    ck_assert(max_rel_err_f32(x, ref, n, 1e-30) <= 4 * FLT_EPSILON);

    free(x);
    free(xd);
    free(ref);
    free(ref_inv);
    free(buf);
    free(inv);
  }
}
END_TEST

START_TEST(test_rms_norm_f64) {
  const double eps = 1e-6;
  for (int k = 0; k < NUM_SHAPES; ++k) {
    int64_t rows = SHAPES[k][0], cols = SHAPES[k][1], n = rows * cols;
    double* x = rand_f64(n, -3, 3);
    double* ref = xmalloc((size_t)n * sizeof(double));
    double* ref_inv = xmalloc((size_t)rows * sizeof(double));
    ref_rms_norm(x, ref, ref_inv, rows, cols, eps);
    double* buf = xmalloc((size_t)(n + 2) * sizeof(double));
    double* out = buf + 1;
    buf[0] = buf[n + 1] = 42.0;

    pf__k_rms_norm_f64(x, out, rows, cols, eps);
    double err = max_rel_err_f64(out, ref, n, 1e-300);
    ck_assert_msg(err <= 4 * DBL_EPSILON, "rms_norm_f64 %lldx%lld: rel err %g", (long long)rows,
                  (long long)cols, err);
    ck_assert(buf[0] == 42.0 && buf[n + 1] == 42.0);

    double* inv = xmalloc((size_t)(rows + 1) * sizeof(double));
    inv[rows] = 42.0;
    pf__k_rms_norm_fwd_f64(x, out, inv, rows, cols, eps);
    ck_assert(max_rel_err_f64(out, ref, n, 1e-300) <= 4 * DBL_EPSILON);
    err = max_rel_err_f64(inv, ref_inv, rows, 0.0);
    ck_assert_msg(err <= 4 * DBL_EPSILON, "rms_norm_fwd_f64 %lldx%lld: inv_rms rel err %g",
                  (long long)rows, (long long)cols, err);
    ck_assert(inv[rows] == 42.0);

    pf__k_rms_norm_f64(x, x, rows, cols, eps);
    ck_assert(max_rel_err_f64(x, ref, n, 1e-300) <= 4 * DBL_EPSILON);

    free(x);
    free(ref);
    free(ref_inv);
    free(buf);
    free(inv);
  }
}
END_TEST

/* A row of zero columns has mean square 0, so inv_rms = 1 / sqrt(eps). */
START_TEST(test_rms_norm_fwd_zero_cols) {
  float inv32[3] = {0, 0, 0};
  double inv64[3] = {0, 0, 0};
  float x32 = 1.0f;
  double x64 = 1.0;
  pf__k_rms_norm_fwd_f32(&x32, &x32, inv32, 3, 0, 0.25f);
  pf__k_rms_norm_fwd_f64(&x64, &x64, inv64, 3, 0, 0.25);
  for (int r = 0; r < 3; ++r) {
    ck_assert(inv32[r] == 2.0f);
    ck_assert(inv64[r] == 2.0);
  }
  ck_assert(x32 == 1.0f && x64 == 1.0);
}
END_TEST

/* Rows long enough for the float lanes (33 columns), of values whose squares overflow or
 * underflow float: the sums fall back on double products and stay exact. With eps = 0 a row of
 * zeros gives 0 * (1 / sqrt(0)) = NaN, as the formula says; with eps > 0 it gives zeros. */
START_TEST(test_rms_norm_extreme_rows) {
  enum { COLS = 33 };
  float x[4][COLS], out[4][COLS], inv[4];
  double xd[4][COLS], ref[4][COLS], ref_inv[4];
  for (int c = 0; c < COLS; ++c) {
    x[0][c] = 0.0f;
    x[1][c] = (c % 2) ? 1e30f : -1e30f;
    x[2][c] = (float)(c + 1) * 1e-30f;
    x[3][c] = (float)(c - 16) * 1e-44f; /* subnormal */
    for (int r = 0; r < 4; ++r) {
      xd[r][c] = x[r][c];
    }
  }
  pf__k_rms_norm_fwd_f32(&x[0][0], &out[0][0], inv, 4, COLS, 0.0f);
  ref_rms_norm(&xd[0][0], &ref[0][0], ref_inv, 4, COLS, 0.0);
  for (int c = 0; c < COLS; ++c) {
    ck_assert(isnan(out[0][c]));
  }
  ck_assert(isinf(inv[0]));
  double err = max_rel_err_f32(&out[1][0], &ref[1][0], 3 * COLS, 1e-300);
  ck_assert_msg(err <= 4 * FLT_EPSILON, "extreme rows: rel err %g", err);
  ck_assert(max_rel_err_f32(&inv[1], &ref_inv[1], 2, 0.0) <= 2 * FLT_EPSILON);

  pf__k_rms_norm_f32(&x[0][0], &out[0][0], 1, COLS, 1e-5f);
  for (int c = 0; c < COLS; ++c) {
    ck_assert(out[0][c] == 0.0f);
  }
}
END_TEST

/* ---- rms_norm_bwd ---- */

/* Reference vector-Jacobian product in double, from the closed form, and for each element
 * the scale its rounding errors are relative to: the two terms, which may cancel, and the
 * second term with the mean taken over |ct * x| (the error bound of any dot product). */
static void ref_rms_norm_bwd(const double* x, const double* inv_rms, const double* ct, double* dx,
                             double* scale, int64_t rows, int64_t cols) {
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

/* sum ct * rms_norm(x) for one row, the scalar whose gradient rms_norm_bwd returns. */
static double loss_row(const double* x, const double* ct, int64_t cols, double eps) {
  double inv = 1.0 / sqrt(ref_dot(x, x, cols) / (double)cols + eps);
  return ref_dot(ct, x, cols) * inv;
}

/* Largest |got - ref| / (scale + floor) where scale bounds the terms of the closed form. */
static double bwd_err_f32(const float* got, const double* ref, const double* scale, int64_t n) {
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

static double bwd_err_f64(const double* got, const double* ref, const double* scale, int64_t n) {
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

START_TEST(test_rms_norm_bwd_f32) {
  const float eps = 1e-5f;
  for (int k = 0; k < NUM_SHAPES; ++k) {
    int64_t rows = SHAPES[k][0], cols = SHAPES[k][1], n = rows * cols;
    float* x = rand_f32(n, -2, 2);
    float* ct = rand_f32(n, -1, 1);
    float* y = xmalloc((size_t)n * sizeof(float));
    float* inv = xmalloc((size_t)rows * sizeof(float));
    float* dx = xmalloc((size_t)(n + 1) * sizeof(float));
    dx[n] = 42.0f;
    pf__k_rms_norm_fwd_f32(x, y, inv, rows, cols, eps);
    pf__k_rms_norm_bwd_f32(x, inv, ct, dx, rows, cols);
    ck_assert(dx[n] == 42.0f);

    double* xd = widen(x, n);
    double* cd = widen(ct, n);
    double* invd = widen(inv, rows);
    double* ref = xmalloc((size_t)n * sizeof(double));
    double* scale = xmalloc((size_t)n * sizeof(double));
    ref_rms_norm_bwd(xd, invd, cd, ref, scale, rows, cols);
    double err = bwd_err_f32(dx, ref, scale, n);
    ck_assert_msg(err <= 2 * FLT_EPSILON, "rms_norm_bwd_f32 %lldx%lld: err %g", (long long)rows,
                  (long long)cols, err);

    /* dx may be x itself, or the cotangent. */
    float* x_copy = xmalloc((size_t)n * sizeof(float));
    memcpy(x_copy, x, (size_t)n * sizeof(float));
    pf__k_rms_norm_bwd_f32(x_copy, inv, ct, x_copy, rows, cols);
    ck_assert(bwd_err_f32(x_copy, ref, scale, n) <= 2 * FLT_EPSILON);
    pf__k_rms_norm_bwd_f32(x, inv, ct, ct, rows, cols);
    ck_assert(bwd_err_f32(ct, ref, scale, n) <= 2 * FLT_EPSILON);
    free(x_copy);

    free(x);
    free(ct);
    free(y);
    free(inv);
    free(dx);
    free(xd);
    free(cd);
    free(invd);
    free(ref);
    free(scale);
  }
}
END_TEST

START_TEST(test_rms_norm_bwd_f64) {
  const double eps = 1e-6;
  for (int k = 0; k < NUM_SHAPES; ++k) {
    int64_t rows = SHAPES[k][0], cols = SHAPES[k][1], n = rows * cols;
    double* x = rand_f64(n, -2, 2);
    double* ct = rand_f64(n, -1, 1);
    double* y = xmalloc((size_t)n * sizeof(double));
    double* inv = xmalloc((size_t)rows * sizeof(double));
    double* dx = xmalloc((size_t)(n + 1) * sizeof(double));
    dx[n] = 42.0;
    pf__k_rms_norm_fwd_f64(x, y, inv, rows, cols, eps);
    pf__k_rms_norm_bwd_f64(x, inv, ct, dx, rows, cols);
    ck_assert(dx[n] == 42.0);

    double* ref = xmalloc((size_t)n * sizeof(double));
    double* scale = xmalloc((size_t)n * sizeof(double));
    ref_rms_norm_bwd(x, inv, ct, ref, scale, rows, cols);
    double err = bwd_err_f64(dx, ref, scale, n);
    ck_assert_msg(err <= 4 * DBL_EPSILON, "rms_norm_bwd_f64 %lldx%lld: err %g", (long long)rows,
                  (long long)cols, err);

    /* dx may be x itself. */
    pf__k_rms_norm_bwd_f64(x, inv, ct, x, rows, cols);
    ck_assert(bwd_err_f64(x, ref, scale, n) <= 4 * DBL_EPSILON);

    free(x);
    free(ct);
    free(y);
    free(inv);
    free(dx);
    free(ref);
    free(scale);
  }
}
END_TEST

/* The closed form is checked above; here the kernel is checked against the definition, the
 * gradient of sum(ct * rms_norm(x)), by central differences. */
START_TEST(test_rms_norm_bwd_finite_differences) {
  static const int64_t shapes[][2] = {{1, 1}, {1, 5}, {3, 7}, {2, 64}};
  const double eps = 1e-3; /* large enough to matter in the gradient */
  for (int k = 0; k < 4; ++k) {
    int64_t rows = shapes[k][0], cols = shapes[k][1], n = rows * cols;
    double* x = rand_f64(n, -2, 2);
    double* ct = rand_f64(n, -1, 1);
    double* y = xmalloc((size_t)n * sizeof(double));
    double* inv = xmalloc((size_t)rows * sizeof(double));
    double* dx = xmalloc((size_t)n * sizeof(double));
    float* x32 = xmalloc((size_t)n * sizeof(float));
    float* ct32 = xmalloc((size_t)n * sizeof(float));
    float* y32 = xmalloc((size_t)n * sizeof(float));
    float* inv32 = xmalloc((size_t)rows * sizeof(float));
    float* dx32 = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      x32[i] = (float)x[i];
      ct32[i] = (float)ct[i];
      x[i] = x32[i]; /* both precisions see the same point */
      ct[i] = ct32[i];
    }
    pf__k_rms_norm_fwd_f64(x, y, inv, rows, cols, eps);
    pf__k_rms_norm_bwd_f64(x, inv, ct, dx, rows, cols);
    pf__k_rms_norm_fwd_f32(x32, y32, inv32, rows, cols, (float)eps);
    pf__k_rms_norm_bwd_f32(x32, inv32, ct32, dx32, rows, cols);

    for (int64_t r = 0; r < rows; ++r) {
      double* xr = x + r * cols;
      double* cr = ct + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        double saved = xr[c];
        double h = 1e-5 * fmax(1.0, fabs(saved));
        xr[c] = saved + h;
        double up = loss_row(xr, cr, cols, eps);
        xr[c] = saved - h;
        double down = loss_row(xr, cr, cols, eps);
        xr[c] = saved;
        double fd = (up - down) / (2 * h);
        double got = dx[r * cols + c];
        double got32 = dx32[r * cols + c];
        ck_assert_msg(fabs(got - fd) <= 1e-8 * (1 + fabs(fd)),
                      "f64 %lldx%lld [%lld][%lld]: bwd %.17g, finite difference %.17g",
                      (long long)rows, (long long)cols, (long long)r, (long long)c, got, fd);
        ck_assert_msg(fabs(got32 - fd) <= 1e-5 * (1 + fabs(fd)),
                      "f32 %lldx%lld [%lld][%lld]: bwd %.9g, finite difference %.17g",
                      (long long)rows, (long long)cols, (long long)r, (long long)c, got32, fd);
      }
    }
    free(x);
    free(ct);
    free(y);
    free(inv);
    free(dx);
    free(x32);
    free(ct32);
    free(y32);
    free(inv32);
    free(dx32);
  }
}
END_TEST

/* ---- kepler ---- */

static const double ECCS[] = {0.0, 1e-9, 0.01, 0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99};
#define NUM_ECCS ((int)(sizeof(ECCS) / sizeof(ECCS[0])))
#define NUM_M    2001 /* M on a grid over [-10, 10] */
#define TWO_PI   6.283185307179586476925286766559

/* (E - e sin E) - M reduced into [-pi, pi]: how far (sin E, cos E) misses Kepler's equation. */
static double kepler_residual(double m, double e, double s, double c) {
  double big_e = atan2(s, c);
  double d = (big_e - e * s) - m;
  return fabs(remainder(d, TWO_PI));
}

/* Rounds m and e to float in place, runs pf__k_kepler_f32 on them, and widens its outputs into
 * s and c. */
static void run_kepler_f32(double* m, double* e, double* s, double* c, int64_t n) {
  float* m32 = xmalloc((size_t)n * sizeof(float));
  float* e32 = xmalloc((size_t)n * sizeof(float));
  float* s32 = xmalloc((size_t)n * sizeof(float));
  float* c32 = xmalloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    m32[i] = (float)m[i];
    e32[i] = (float)e[i];
    m[i] = m32[i];
    e[i] = e32[i];
  }
  pf__k_kepler_f32(m32, e32, s32, c32, n);
  for (int64_t i = 0; i < n; ++i) {
    s[i] = s32[i];
    c[i] = c32[i];
  }
  free(m32);
  free(e32);
  free(s32);
  free(c32);
}

/* Checks one precision over the grid: sin^2 + cos^2 = 1 and the equation hold to tol_unit and
 * tol_eq * (1 + |M|) (M itself carries an ulp of that size). */
static void check_kepler_grid(int f32, double tol_unit, double tol_eq) {
  int64_t n = (int64_t)NUM_ECCS * NUM_M;
  double* m = xmalloc((size_t)n * sizeof(double));
  double* e = xmalloc((size_t)n * sizeof(double));
  for (int k = 0; k < NUM_ECCS; ++k) {
    for (int j = 0; j < NUM_M; ++j) {
      m[k * NUM_M + j] = -10.0 + 20.0 * j / (NUM_M - 1);
      e[k * NUM_M + j] = ECCS[k];
    }
  }
  double* s = xmalloc((size_t)n * sizeof(double));
  double* c = xmalloc((size_t)n * sizeof(double));
  if (f32) {
    run_kepler_f32(m, e, s, c, n);
  } else {
    pf__k_kepler_f64(m, e, s, c, n);
  }
  /* The worst case of each check, so that one failure message names it. */
  int64_t worst_unit = 0, worst_eq = 0;
  double unit_err = 0.0, eq_err = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double unit = fabs(s[i] * s[i] + c[i] * c[i] - 1.0) / tol_unit;
    double eq = kepler_residual(m[i], e[i], s[i], c[i]) / (tol_eq * (1 + fabs(m[i])));
    if (!(unit <= unit_err) && !isnan(unit_err)) { /* a NaN, once seen, stays */
      unit_err = unit;
      worst_unit = i;
    }
    if (!(eq <= eq_err) && !isnan(eq_err)) {
      eq_err = eq;
      worst_eq = i;
    }
  }
  ck_assert_msg(unit_err <= 1.0, "M=%.17g e=%.17g: sin^2+cos^2-1 is %g tolerances", m[worst_unit],
                e[worst_unit], unit_err);
  ck_assert_msg(eq_err <= 1.0, "M=%.17g e=%.17g: residual of Kepler's equation is %g tolerances",
                m[worst_eq], e[worst_eq], eq_err);
  free(m);
  free(e);
  free(s);
  free(c);
}

START_TEST(test_kepler_grid_f64) {
  check_kepler_grid(0, 2 * DBL_EPSILON, 4 * DBL_EPSILON);
}
END_TEST

START_TEST(test_kepler_grid_f32) {
  check_kepler_grid(1, 2 * FLT_EPSILON, 2 * FLT_EPSILON);
}
END_TEST

/* asin(s) - s for |s| <= 0.5, by its series s^3/6 + 3 s^5/40 + ..., without cancellation. */
static double asin_minus_x(double s) {
  double s2 = s * s;
  double term = s;
  double sum = 0.0;
  for (int k = 1; k < 40; ++k) {
    term *= s2 * (2.0 * k - 1) * (2.0 * k - 1) / ((2.0 * k) * (2.0 * k + 1));
    sum += term;
  }
  return sum;
}

/* Near e -> 1, M -> 0 the equation is nearly degenerate (f' = 1 - e cos E -> 1 - e), where a
 * careless solver loses most digits. With E recovered from s = sin E,
 *   E - e sin E = (1 - e) s + (asin(s) - s)
 * is free of cancellation, so the relative residual measures the relative error of E. */
START_TEST(test_kepler_near_parabolic) {
  static const double eccs[] = {0.5, 0.9, 0.99, 0.999, 0.999999};
  for (int k = 0; k < 5; ++k) {
    for (int p = -300; p <= -40; ++p) {
      double m = pow(10.0, p / 20.0) * ((p & 1) ? -1.0 : 1.0); /* |M| from 1e-15 to 1e-2 */
      double e = eccs[k];
      double s, c;
      pf__k_kepler_f64(&m, &e, &s, &c, 1);
      double rel = fabs(((1 - e) * s + asin_minus_x(s)) - m) / fabs(m);
      int ok = fabs(s) <= 0.5 && c > 0 && rel <= 6 * DBL_EPSILON;

      float m32 = (float)m, e32 = (float)e, s32, c32;
      pf__k_kepler_f32(&m32, &e32, &s32, &c32, 1);
      double md = m32, ed = e32;
      double rel32 = fabs(((1 - ed) * s32 + asin_minus_x(s32)) - md) / fabs(md);
      ok = ok && fabs(s32) <= 0.5f && rel32 <= 2 * FLT_EPSILON;
      if (!ok) {
        ck_abort_msg("M=%.17g e=%.17g: f64 sin E %.17g (relative residual %g), f32 sin E %.9g "
                     "(relative residual %g)",
                     m, e, s, rel, s32, rel32);
      }
    }
  }
}
END_TEST

/* Large |M| must be reduced with 2 pi itself, not its double rounding: the C library's sin and
 * cos reduce exactly, so atan2(sin M, cos M) is an independent reference for M mod 2 pi. */
START_TEST(test_kepler_large_mean_anomaly) {
  /* The last three lie within 1e-16 of a multiple of 2 pi (found from the continued fraction
   * of 2 pi / ulp): their reduced M, and so sin E, is tiny and has to be right relatively,
   * which takes 2 pi to well over 100 bits. */
  static const double ms[] = {7.0,
                              -7.0,
                              100.0,
                              -1234.5678,
                              1e5,
                              -3e6,
                              1e8,
                              2.1e9,
                              -2.2e9,
                              1e12,
                              -5e15,
                              1e20,
                              1e300,
                              6.283185307179586,
                              -12.566370614359172,
                              6283185.307179586,
                              57844706.68111352,
                              -231378826.72445408,
                              925515306.8978163};
  static const double eccs[] = {0.0, 0.2, 0.5};
  for (int i = 0; i < (int)(sizeof(ms) / sizeof(ms[0])); ++i) {
    for (int k = 0; k < 3; ++k) {
      double m = ms[i], e = eccs[k];
      double r = atan2(sin(m), cos(m));
      double s, c, sr, cr;
      pf__k_kepler_f64(&m, &e, &s, &c, 1);
      pf__k_kepler_f64(&r, &e, &sr, &cr, 1);
      /* dE/dM <= 1 / (1 - e) = 2; atan2 and sin/cos carry an ulp or two each. */
      double tol = 8 * DBL_EPSILON;
      double scale = fabs(r) < 1e-3 ? fabs(sr) : 1.0; /* relative where sin E is small */
      ck_assert_msg(fabs(s - sr) <= tol * scale && fabs(c - cr) <= tol,
                    "M=%.17g e=%g: (%.17g, %.17g) vs reduced (%.17g, %.17g)", m, e, s, c, sr, cr);
    }
  }
}
END_TEST

/* a and b are equal or adjacent doubles */
static int within_ulp(double a, double b) {
  return a == b || nextafter(a, b) == b;
}

/* e = 0 gives E = M exactly, so the outputs are the kernel's own sin and cos of M: within an
 * ulp of the C library's over [-10, 10] (all quadrants, both signs, points near multiples of
 * pi / 2 and pi / 4 included by the dense grid). */
START_TEST(test_kepler_circular_sin_cos) {
  enum { N = 20001 };
  double* m = xmalloc(N * sizeof(double));
  double* e = xmalloc(N * sizeof(double));
  double* s = xmalloc(N * sizeof(double));
  double* c = xmalloc(N * sizeof(double));
  for (int i = 0; i < N; ++i) {
    m[i] = -10.0 + 20.0 * i / (N - 1);
    e[i] = 0.0;
  }
  pf__k_kepler_f64(m, e, s, c, N);
  for (int i = 0; i < N; ++i) {
    if (!within_ulp(s[i], sin(m[i])) || !within_ulp(c[i], cos(m[i]))) {
      ck_abort_msg("M=%.17g: (%.17g, %.17g), C library (%.17g, %.17g)", m[i], s[i], c[i], sin(m[i]),
                   cos(m[i]));
    }
  }
  free(m);
  free(e);
  free(s);
  free(c);
}
END_TEST

START_TEST(test_kepler_special_values) {
  double m[] = {0.0, -0.0, 1.0, -2.5, 3.141592653589793, -3.141592653589793, 1e-310,
                0.5, 0.5,  0.5, 0.5,  INFINITY,          -INFINITY,          NAN};
  double e[] = {0.5, 0.5, 0.0, 0.0, 0.9, 0.9, 0.5, 1.0, -0.1, NAN, 1.5, 0.5, 0.5, 0.5};
  enum { N = sizeof(m) / sizeof(m[0]) };
  double s[N], c[N];
  pf__k_kepler_f64(m, e, s, c, N);
  ck_assert(s[0] == 0.0 && !signbit(s[0]) && c[0] == 1.0);
  ck_assert(s[1] == 0.0 && signbit(s[1]) && c[1] == 1.0);
  /* e = 0: E = M exactly; sin and cos within an ulp of the C library's */
  ck_assert(within_ulp(s[2], sin(1.0)) && within_ulp(c[2], cos(1.0)));
  ck_assert(within_ulp(s[3], sin(-2.5)) && within_ulp(c[3], cos(-2.5)));
  /* M = +-pi: E = pi (nearest double) */
  ck_assert(fabs(s[4]) <= 4 * DBL_EPSILON && c[4] == -1.0);
  ck_assert(fabs(s[5]) <= 4 * DBL_EPSILON && c[5] == -1.0);
  ck_assert_msg(fabs(s[6] - 2e-310) <= 1e-323, "subnormal M: %g", s[6]); /* E = M / (1 - e) */
  ck_assert(c[6] == 1.0);
  for (int i = 7; i < N; ++i) {
    ck_assert_msg(isnan(s[i]) && isnan(c[i]), "case %d: (%g, %g) should be NaN", i, s[i], c[i]);
  }

  float m32[] = {0.0f, 1.0f, 0.5f, 0.5f, INFINITY, NAN};
  float e32[] = {0.25f, 0.0f, 1.0f, -1.0f, 0.5f, 0.5f};
  float s32[6], c32[6];
  pf__k_kepler_f32(m32, e32, s32, c32, 6);
  ck_assert(s32[0] == 0.0f && c32[0] == 1.0f);
  ck_assert(s32[1] == (float)sin(1.0) && c32[1] == (float)cos(1.0));
  for (int i = 2; i < 6; ++i) {
    ck_assert(isnan(s32[i]) && isnan(c32[i]));
  }
  pf__k_kepler_f32(m32, e32, s32, c32, 0); /* empty: touches nothing */
}
END_TEST

/* ---- kepler against a long double reference ---- */

/* x - sin x for 0 <= x < 1 in long double, by its series (no cancellation). */
static long double ld_x_minus_sin(long double x) {
  long double x2 = x * x;
  long double term = x;
  long double sum = 0.0L;
  for (int k = 1; k < 16; ++k) {
    term *= -x2 / ((2.0L * k) * (2.0L * k + 1));
    sum -= term;
  }
  return sum;
}

/* asin(s) - s for |s| <= 0.5 in long double, by its series (asin_minus_x in long double). */
static long double ld_asin_minus_x(long double s) {
  long double s2 = s * s;
  long double term = s;
  long double sum = 0.0L;
  for (int k = 1; k < 60; ++k) {
    term *= s2 * (2.0L * k - 1) * (2.0L * k - 1) / ((2.0L * k) * (2.0L * k + 1));
    sum += term;
  }
  return sum;
}

/* E - e sin E - r in long double, without cancellation for small E. */
static long double ld_kepler_f(long double x, long double e, long double r) {
  long double ems = x < 1.0L ? ld_x_minus_sin(x) : x - sinl(x);
  return (1.0L - e) * x + e * ems - r;
}

/* The eccentric anomaly for the double inputs m, e (0 <= e < 1, m finite), in long double,
 * and the reduced mean anomaly r: sinl and cosl reduce m exactly, so atan2l of them is m mod
 * 2 pi; then bisection on [0, pi] down to a relative width of 2^-20 and Newton steps. */
static long double ld_kepler(double m, double e, long double* r_out) {
  long double r = atan2l(sinl(m), cosl(m));
  long double a = fabsl(r);
  long double lo = 0.0L, hi = 3.1415926535897932384626433832795029L;
  long double x = a;
  if (e > 0.0 && a > 0.0L) {
    while (hi - lo > 0x1p-20L * hi) {
      x = 0.5L * (lo + hi);
      if (ld_kepler_f(x, e, a) < 0.0L) {
        lo = x;
      } else {
        hi = x;
      }
    }
    x = 0.5L * (lo + hi);
    for (int it = 0; it < 8; ++it) {
      long double omc = x < 1.0L ? 2.0L * sinl(0.5L * x) * sinl(0.5L * x) : 1.0L - cosl(x);
      x -= ld_kepler_f(x, e, a) / ((1.0L - e) + e * omc);
    }
  }
  *r_out = r;
  return r < 0.0L ? -x : x;
}

/* Draws n Kepler inputs: a quarter each of M in [-pi, pi], in [-1e4, 1e4], log-uniform |M|
 * in [1e-12, 1e12] (beyond 2^31 the scalar solver's reduction takes over), and M near
 * multiples of 2 pi; e uniform in [0, 1), 1 - 10^u for u in [-16, -1] (near 1), 10^u for
 * u in [-12, -1], or exactly 0. */
static void kepler_sample(double* m, double* e, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double u = rand_uniform(0, 1);
    switch (i % 4) {
    case 0:
      m[i] = rand_uniform(-3.141592653589793, 3.141592653589793);
      break;
    case 1:
      m[i] = rand_uniform(-1e4, 1e4);
      break;
    case 2:
      m[i] = (u < 0.5 ? -1 : 1) * pow(10.0, rand_uniform(-12, 12));
      break;
    default:
      m[i] = TWO_PI * floor(rand_uniform(-1e6, 1e6)) + rand_uniform(-1e-6, 1e-6);
      break;
    }
    double v = rand_uniform(0, 1);
    if (v < 0.4) {
      e[i] = rand_uniform(0, 1);
    } else if (v < 0.8) {
      e[i] = 1.0 - pow(10.0, rand_uniform(-16, -1));
    } else if (v < 0.95) {
      e[i] = pow(10.0, rand_uniform(-12, -1));
    } else {
      e[i] = 0.0;
    }
  }
}

/* The worst errors of one precision over a sample: the residual |E - e sin E - r| (E recovered
 * from s and c, r the exact reduced M, in long double) relative to |r| where |E| is small, to
 * |E| elsewhere, the absolute errors of sin E and cos E in units of
 * the format's 2^-p (eps / 2), and, where |E| < 1/8, the error of sin E relative to it. */
typedef struct {
  double residual, sin_abs, cos_abs, sin_rel;
  int64_t at_residual, at_sin_abs, at_cos_abs, at_sin_rel;
} kep_err_t;

static void kep_worst(double* worst, int64_t* at, double err, int64_t i) {
  if (!(err <= *worst) && !isnan(*worst)) { /* a NaN, once seen, stays */
    *worst = err;
    *at = i;
  }
}

static kep_err_t kepler_errors(const double* m, const double* e, const double* s, const double* c,
                               int64_t n, double half_eps, int beyond) {
  kep_err_t w = {0};
  for (int64_t i = 0; i < n; ++i) {
    if ((fabs(m[i]) >= PF__K_REDUCE_CW_MAX) != beyond) {
      continue;
    }
    long double r;
    long double big_e = ld_kepler(m[i], e[i], &r);
    long double sr = sinl(big_e), cr = cosl(big_e);
    /* E recovered from the outputs: where it is small, E - e sin E = (1 - e) s + (asin s - s)
     * has no cancellation and the residual is relative to |r|; elsewhere E = atan2(s, c) and
     * the residual is relative to |E| (the size of the terms that cancel). */
    long double res, scale;
    if (fabs(s[i]) <= 0.5 && c[i] > 0.0) {
      res = ((1.0L - e[i]) * s[i] + ld_asin_minus_x(s[i])) - fabsl(r) * (s[i] < 0 ? -1 : 1);
      scale = fabsl(r);
    } else {
      long double got_e = atan2l(s[i], c[i]);
      res = got_e - e[i] * (long double)s[i] - r;
      scale = fabsl(got_e);
    }
    kep_worst(&w.residual, &w.at_residual, (double)(fabsl(res) / (scale + 1e-300L)) / half_eps, i);
    kep_worst(&w.sin_abs, &w.at_sin_abs, (double)fabsl(s[i] - sr) / half_eps, i);
    kep_worst(&w.cos_abs, &w.at_cos_abs, (double)fabsl(c[i] - cr) / half_eps, i);
    if (fabsl(big_e) < 0.125L) {
      kep_worst(&w.sin_rel, &w.at_sin_rel, (double)(fabsl(s[i] - sr) / fabsl(sr)) / half_eps, i);
    }
  }
  return w;
}

#define KEP_SAMPLE 40000

/* Units of 2^-53 to add to the float64 bounds for the reference's own error: 0 where long
 * double carries more bits than double, 4 where it has only double's (valgrind computes x87
 * long double in double precision, and a platform may make long double a double). */
static double ld_reference_slack(void) {
  volatile long double one = 1.0L;
  volatile long double tiny = 0x1p-60L;
  return one + tiny != one ? 0.0 : 4.0;
}
/* Bounds, in units of 2^-53. kmath.h promises sin E and cos E within 6 * 2^-53, and sin E
 * relatively within 2 ulp (4 * 2^-53) where E is small; the scalar solver that takes |M| >=
 * 2^31 is held to that. The vector lanes are held to 4 * 2^-53 absolute: on this sample they
 * measured sin 2.5, cos 2.0, sin relative 2.8 and a residual of 7.0 (the scalar solver 5.2,
 * 3.5, 1.9 and 3.8). The residual bound follows from the others: f' E <= 3 (E - e sin E). */
#define KEP_F64_RESIDUAL        10
#define KEP_F64_ABS             4
#define KEP_F64_SIN_REL         4
#define KEP_F64_RESIDUAL_BEYOND 10
#define KEP_F64_ABS_BEYOND      6
#define KEP_F64_SIN_REL_BEYOND  4

/* Over a wide random sample (kepler_sample), at the level the case runs at: float64 within
 * the bounds documented in kmath.h, float32 within one rounding of the true values. The sample
 * length is odd, so the padded tail of the vector loop is covered as well. */
START_TEST(test_kepler_random_reference) {
  int64_t n = KEP_SAMPLE + 3;
  double* m = xmalloc((size_t)n * sizeof(double));
  double* e = xmalloc((size_t)n * sizeof(double));
  double* s = xmalloc((size_t)n * sizeof(double));
  double* c = xmalloc((size_t)n * sizeof(double));
  kepler_sample(m, e, n);
  pf__k_kepler_f64(m, e, s, c, n);
  double slack = ld_reference_slack();
  if (slack > 0) {
    printf("kepler: long double has no more precision than double here; float64 bounds widened "
           "by %g * 2^-53 (residual by %g)\n",
           slack, 3 * slack);
  }
  /* |M| below PF__K_REDUCE_CW_MAX: the vector lanes; beyond it: the scalar solver */
  for (int beyond = 0; beyond <= 1; ++beyond) {
    kep_err_t w = kepler_errors(m, e, s, c, n, 0x1p-53, beyond);
    printf("kepler %s float64, %s: relative residual %.2f, sin %.2f, cos %.2f (units of 2^-53), "
           "sin relative where |E| < 1/8 %.2f\n",
           pf__k_isa_name(), beyond ? "|M| >= 2^31" : "|M| < 2^31", w.residual, w.sin_abs,
           w.cos_abs, w.sin_rel);
    double bound_res = (beyond ? KEP_F64_RESIDUAL_BEYOND : KEP_F64_RESIDUAL) + 3 * slack;
    double bound_abs = (beyond ? KEP_F64_ABS_BEYOND : KEP_F64_ABS) + slack;
    double bound_rel = (beyond ? KEP_F64_SIN_REL_BEYOND : KEP_F64_SIN_REL) + slack;
    ck_assert_msg(w.residual <= bound_res, "M=%.17g e=%.17g: relative residual %g",
                  m[w.at_residual], e[w.at_residual], w.residual);
    ck_assert_msg(w.sin_abs <= bound_abs, "M=%.17g e=%.17g: sin E off by %g * 2^-53",
                  m[w.at_sin_abs], e[w.at_sin_abs], w.sin_abs);
    ck_assert_msg(w.cos_abs <= bound_abs, "M=%.17g e=%.17g: cos E off by %g * 2^-53",
                  m[w.at_cos_abs], e[w.at_cos_abs], w.cos_abs);
    ck_assert_msg(w.sin_rel <= bound_rel, "M=%.17g e=%.17g: sin E off by %g * 2^-53 relative",
                  m[w.at_sin_rel], e[w.at_sin_rel], w.sin_rel);
  }

  /* float32: the same draws rounded to float (e below 1 after rounding) */
  for (int64_t i = 0; i < n; ++i) {
    e[i] = fmin(e[i], 1.0 - 0x1p-24);
  }
  run_kepler_f32(m, e, s, c, n);
  kep_err_t w32 = kepler_errors(m, e, s, c, n, 0x1p-24, 0);
  kep_err_t beyond32 = kepler_errors(m, e, s, c, n, 0x1p-24, 1);
  w32.sin_abs = fmax(w32.sin_abs, beyond32.sin_abs);
  w32.cos_abs = fmax(w32.cos_abs, beyond32.cos_abs);
  w32.sin_rel = fmax(w32.sin_rel, beyond32.sin_rel);
  printf("kepler %s float32: relative residual %.2f, sin %.2f, cos %.2f (units of 2^-24), sin "
         "relative where |E| < 1/8 %.2f\n",
         pf__k_isa_name(), w32.residual, w32.sin_abs, w32.cos_abs, w32.sin_rel);
  /* one rounding of a double result: at most 2^-24 absolute (half an ulp of 1) and relative,
   * plus the double result's own error (below 2^-20 of that) */
  double b32 = 1.0 + 0x1p-20;
  ck_assert_msg(w32.sin_abs <= b32 && w32.cos_abs <= b32 && w32.sin_rel <= b32,
                "float32: sin %g (M=%.9g e=%.9g), cos %g (M=%.9g e=%.9g), sin relative %g "
                "(M=%.9g e=%.9g) * 2^-24",
                w32.sin_abs, m[w32.at_sin_abs], e[w32.at_sin_abs], w32.cos_abs, m[w32.at_cos_abs],
                e[w32.at_cos_abs], w32.sin_rel, m[w32.at_sin_rel], e[w32.at_sin_rel]);
  free(m);
  free(e);
  free(s);
  free(c);
}
END_TEST

/* ---- vector_add ---- */

/* Shapes (count, nb): no b, broadcast scalar, whole vector, partial last repetition, empty. */
static const int64_t VADD[][2] = {{5, 0},  {0, 1},    {1, 1},     {10, 1}, {10, 10},
                                  {10, 3}, {1000, 7}, {4097, 64}, {5, 8},  {0, 0}};
#define NUM_VADD ((int)(sizeof(VADD) / sizeof(VADD[0])))

START_TEST(test_vector_add_f32) {
  for (int k = 0; k < NUM_VADD; ++k) {
    int64_t n = VADD[k][0], nb = VADD[k][1];
    float* b = rand_f32(nb, -5, 5);
    float* c = rand_f32(n, -5, 5);
    float* a = xmalloc((size_t)(n + 1) * sizeof(float));
    for (int64_t i = 0; i <= n; ++i) {
      a[i] = 42.0f; /* nb <= 0 writes nothing; nothing past count is ever written */
    }
    pf__k_vector_add_f32(b, nb, c, a, n);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; ++i) {
      bad = (a[i] == (nb > 0 ? b[i % nb] + c[i] : 42.0f)) ? -1 : i;
    }
    ck_assert_msg(bad < 0, "count %lld nb %lld: wrong at index %lld", (long long)n, (long long)nb,
                  (long long)bad);
    ck_assert(a[n] == 42.0f);
    if (nb > 0) {
      pf__k_vector_add_f32(b, nb, c, c, n); /* a may equal c */
      ck_assert(n == 0 || memcmp(a, c, (size_t)n * sizeof(float)) == 0);
    }
    free(b);
    free(c);
    free(a);
  }
}
END_TEST

START_TEST(test_vector_add_f64) {
  for (int k = 0; k < NUM_VADD; ++k) {
    int64_t n = VADD[k][0], nb = VADD[k][1];
    double* b = rand_f64(nb, -5, 5);
    double* c = rand_f64(n, -5, 5);
    double* a = xmalloc((size_t)(n + 1) * sizeof(double));
    for (int64_t i = 0; i <= n; ++i) {
      a[i] = 42.0; /* nb <= 0 writes nothing; nothing past count is ever written */
    }
    pf__k_vector_add_f64(b, nb, c, a, n);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; ++i) {
      bad = (a[i] == (nb > 0 ? b[i % nb] + c[i] : 42.0)) ? -1 : i;
    }
    ck_assert_msg(bad < 0, "count %lld nb %lld: wrong at index %lld", (long long)n, (long long)nb,
                  (long long)bad);
    ck_assert(a[n] == 42.0);
    if (nb > 0) {
      pf__k_vector_add_f64(b, nb, c, c, n); /* a may equal c */
      ck_assert(n == 0 || memcmp(a, c, (size_t)n * sizeof(double)) == 0);
    }
    free(b);
    free(c);
    free(a);
  }
}
END_TEST

/* ---- instruction set levels and threads ---- */

START_TEST(test_isa_and_threads_settings) {
  int best = pf__k_isa_set(PF__K_ISA_AUTO);
  ck_assert_int_ge(best, PF__K_ISA_BASE);
  ck_assert_int_le(best, PF__K_ISA_AVX512);
  ck_assert_int_eq(pf__k_isa_get(), best);
  ck_assert_int_eq(pf__k_isa_set(PF__K_ISA_AVX512 + 1), best); /* above the CPU: lowered */
  ck_assert_int_eq(pf__k_isa_set(PF__K_ISA_BASE), PF__K_ISA_BASE);
#if defined(__x86_64__)
  ck_assert_str_eq(pf__k_isa_name(), "sse2");
#endif
  if (best >= PF__K_ISA_AVX2) {
    ck_assert_int_eq(pf__k_isa_set(PF__K_ISA_AVX2), PF__K_ISA_AVX2);
    ck_assert_str_eq(pf__k_isa_name(), "avx2");
  }
  pf__k_isa_set(PF__K_ISA_AUTO);
  ck_assert_int_eq(pf__k_threads_set(3), 3);
  ck_assert_int_eq(pf__k_threads_get(), 3);
  ck_assert_int_eq(pf__k_threads_set(100000), PF__K_MAX_THREADS);
  ck_assert_int_ge(pf__k_threads_set(0), 1); /* the default (PACKFN_KERNEL_THREADS, or 1) */
  ck_assert_int_eq(pf__k_threads_set(1), 1);
}
END_TEST

/* Runs every kernel on arrays large enough to be split over threads (over 2 MiB: several
 * times PF__K_PAR_MIN_BYTES) into out, in the order: rms_norm f32 as one long row (streamed),
 * as one row under 4 MiB (not streamed: each thread scales its part from the end), over rows (in
 * place), rms_norm_fwd f64 and its inv_rms, rms_norm_bwd f32, add_n f32,
 * vector_add f64, kepler f64. Returns the number of floats/doubles written to each array. */
enum {
  THR_ROW = (1 << 20) + 13,
  THR_MID = 700001,
  THR_ROWS = 257,
  THR_COLS = 4099,
  THR_VADD = (1 << 19) + 7,
  THR_KEPLER = 9001 /* 4.6 MB of work at PF__K_KEPLER_BYTES_PER: 4 threads */
};

typedef struct {
  float* row_out;   /* THR_ROW */
  float* mid_out;   /* THR_MID */
  float* rows_io;   /* THR_ROWS * THR_COLS, in place */
  double* fwd_out;  /* THR_ROWS * THR_COLS */
  double* fwd_inv;  /* THR_ROWS */
  float* bwd_out;   /* THR_ROWS * THR_COLS */
  float* addn_out;  /* THR_ROW */
  double* vadd_out; /* THR_VADD */
  double* kep_s;    /* THR_KEPLER */
  double* kep_c;
} thr_out_t;

static void thr_run(thr_out_t* o, const float* xf, const double* xd, const float* ct,
                    const float* inv, const double* m, const double* e) {
  int64_t grid = (int64_t)THR_ROWS * THR_COLS;
  pf__k_rms_norm_f32(xf, o->row_out, 1, THR_ROW, 1e-5f);
  pf__k_rms_norm_f32(xf, o->mid_out, 1, THR_MID, 1e-5f);
  memcpy(o->rows_io, xf, (size_t)grid * sizeof(float));
  pf__k_rms_norm_f32(o->rows_io, o->rows_io, THR_ROWS, THR_COLS, 1e-5f);
  pf__k_rms_norm_fwd_f64(xd, o->fwd_out, o->fwd_inv, THR_ROWS, THR_COLS, 1e-9);
  pf__k_rms_norm_bwd_f32(xf, inv, ct, o->bwd_out, THR_ROWS, THR_COLS);
  pf__k_add_n_f32(xf, o->addn_out, THR_ROW, 0.25f);
  pf__k_vector_add_f64(xd, 1000, xd + 5, o->vadd_out, THR_VADD);
  pf__k_kepler_f64(m, e, o->kep_s, o->kep_c, THR_KEPLER);
}

static thr_out_t thr_alloc(void) {
  int64_t grid = (int64_t)THR_ROWS * THR_COLS;
  thr_out_t o = {xmalloc(THR_ROW * sizeof(float)),      xmalloc(THR_MID * sizeof(float)),
                 xmalloc((size_t)grid * sizeof(float)), xmalloc((size_t)grid * sizeof(double)),
                 xmalloc(THR_ROWS * sizeof(double)),    xmalloc((size_t)grid * sizeof(float)),
                 xmalloc(THR_ROW * sizeof(float)),      xmalloc(THR_VADD * sizeof(double)),
                 xmalloc(THR_KEPLER * sizeof(double)),  xmalloc(THR_KEPLER * sizeof(double))};
  return o;
}

static void thr_free(thr_out_t* o) {
  free(o->row_out);
  free(o->mid_out);
  free(o->rows_io);
  free(o->fwd_out);
  free(o->fwd_inv);
  free(o->bwd_out);
  free(o->addn_out);
  free(o->vadd_out);
  free(o->kep_s);
  free(o->kep_c);
}

/* Which array of thr_out_t differs between a and b, or NULL. */
static const char* thr_diff(const thr_out_t* a, const thr_out_t* b) {
  size_t grid = (size_t)THR_ROWS * THR_COLS;
  if (memcmp(a->row_out, b->row_out, THR_ROW * sizeof(float)) != 0) {
    return "rms_norm f32, one long row";
  }
  if (memcmp(a->mid_out, b->mid_out, THR_MID * sizeof(float)) != 0) {
    return "rms_norm f32, one row under 4 MiB";
  }
  if (memcmp(a->rows_io, b->rows_io, grid * sizeof(float)) != 0) {
    return "rms_norm f32 over rows, in place";
  }
  if (memcmp(a->fwd_out, b->fwd_out, grid * sizeof(double)) != 0 ||
      memcmp(a->fwd_inv, b->fwd_inv, THR_ROWS * sizeof(double)) != 0) {
    return "rms_norm_fwd f64";
  }
  if (memcmp(a->bwd_out, b->bwd_out, grid * sizeof(float)) != 0) {
    return "rms_norm_bwd f32";
  }
  if (memcmp(a->addn_out, b->addn_out, THR_ROW * sizeof(float)) != 0) {
    return "add_n f32";
  }
  if (memcmp(a->vadd_out, b->vadd_out, THR_VADD * sizeof(double)) != 0) {
    return "vector_add f64";
  }
  if (memcmp(a->kep_s, b->kep_s, THR_KEPLER * sizeof(double)) != 0 ||
      memcmp(a->kep_c, b->kep_c, THR_KEPLER * sizeof(double)) != 0) {
    return "kepler f64";
  }
  return NULL;
}

/* Every thread count gives the very same bits as one thread, at every level; and the results
 * of the long row and of the rows still match the reference (the split writes every element). */
START_TEST(test_threads_bit_identical) {
  int64_t grid = (int64_t)THR_ROWS * THR_COLS;
  float* xf = rand_f32(THR_ROW > grid ? THR_ROW : grid, -3, 3);
  double* xd = rand_f64(grid, -3, 3);
  float* ct = rand_f32(grid, -1, 1);
  float* inv = rand_f32(THR_ROWS, 0.5, 2);
  double* m = rand_f64(THR_KEPLER, -10, 10);
  double* e = rand_f64(THR_KEPLER, 0, 0.99);
  thr_out_t one = thr_alloc();
  thr_out_t many = thr_alloc();
  int best = pf__k_isa_set(PF__K_ISA_AUTO);
  for (int level = PF__K_ISA_BASE; level <= best; ++level) {
    pf__k_isa_set(level);
    pf__k_threads_set(1);
    thr_run(&one, xf, xd, ct, inv, m, e);
    /* The single-thread results against the reference (rms_norm only; the other kernels'
     * values are checked by their own tests at every level). */
    double* wide = widen(xf, THR_ROW);
    double* ref = xmalloc(THR_ROW * sizeof(double));
    ref_rms_norm(wide, ref, NULL, 1, THR_ROW, 1e-5);
    double err = max_rel_err_f32(one.row_out, ref, THR_ROW, 1e-30);
    ck_assert_msg(err < 4 * FLT_EPSILON, "%s: long row error %g", pf__k_isa_name(), err);
    ref_rms_norm(wide, ref, NULL, 1, THR_MID, 1e-5);
    err = max_rel_err_f32(one.mid_out, ref, THR_MID, 1e-30);
    ck_assert_msg(err < 4 * FLT_EPSILON, "%s: row under 4 MiB error %g", pf__k_isa_name(), err);
    free(wide);
    free(ref);
    for (int t = 2; t <= 4; ++t) {
      pf__k_threads_set(t);
      thr_run(&many, xf, xd, ct, inv, m, e);
      const char* diff = thr_diff(&one, &many);
      ck_assert_msg(diff == NULL, "%s, %d threads: %s differs from 1 thread", pf__k_isa_name(), t,
                    diff);
    }
  }
  pf__k_threads_set(1);
  pf__k_isa_set(PF__K_ISA_AUTO);
  thr_free(&one);
  thr_free(&many);
  free(xf);
  free(xd);
  free(ct);
  free(inv);
  free(m);
  free(e);
}
END_TEST

/* ---- suite ---- */

/* The level the cases of a TCase run at: its unchecked fixture sets it (CK_FORK=no, so the
 * setting holds for the tests that follow), and the last TCase restores the default. */
static void at_base(void) {
  pf__k_isa_set(PF__K_ISA_BASE);
}
static void at_avx2(void) {
  pf__k_isa_set(PF__K_ISA_AVX2);
}
static void at_avx512(void) {
  pf__k_isa_set(PF__K_ISA_AVX512);
}
static void at_auto(void) {
  pf__k_isa_set(PF__K_ISA_AUTO);
}

static void add_case(Suite* s, const char* name, const TTest* const* tests, int n, SFun setup) {
  TCase* tc = tcase_create(name);
  tcase_set_timeout(tc, TEST_TIMEOUT);
  tcase_add_unchecked_fixture(tc, setup, NULL);
  for (int i = 0; i < n; ++i) {
    tcase_add_test(tc, tests[i]);
  }
  suite_add_tcase(s, tc);
}

static Suite* kernels_math_suite(void) {
  Suite* s = suite_create("kernels_math");
  const TTest* add_n[] = {test_add_n_f32, test_add_n_f64};
  const TTest* rms[] = {test_rms_norm_f32, test_rms_norm_f64, test_rms_norm_fwd_zero_cols,
                        test_rms_norm_extreme_rows};
  const TTest* bwd[] = {test_rms_norm_bwd_f32, test_rms_norm_bwd_f64,
                        test_rms_norm_bwd_finite_differences};
  const TTest* kepler[] = {test_kepler_grid_f64,        test_kepler_grid_f32,
                           test_kepler_near_parabolic,  test_kepler_large_mean_anomaly,
                           test_kepler_special_values,  test_kepler_random_reference,
                           test_kepler_circular_sin_cos};
  const TTest* vadd[] = {test_vector_add_f32, test_vector_add_f64};
  /* Every case at every level, forced (a level the CPU lacks is lowered to the best it has,
   * which the output of test_threads_bit_identical's levels then repeats). */
  static const char* const NAMES[3][5] = {
      {"add_n sse2", "rms_norm sse2", "rms_norm_bwd sse2", "kepler sse2", "vector_add sse2"},
      {"add_n avx2", "rms_norm avx2", "rms_norm_bwd avx2", "kepler avx2", "vector_add avx2"},
      {"add_n avx512", "rms_norm avx512", "rms_norm_bwd avx512", "kepler avx512",
       "vector_add avx512"}};
  SFun setups[3] = {at_base, at_avx2, at_avx512};
  for (int level = 0; level < 3; ++level) {
    add_case(s, NAMES[level][0], add_n, 2, setups[level]);
    add_case(s, NAMES[level][1], rms, 4, setups[level]);
    add_case(s, NAMES[level][2], bwd, 3, setups[level]);
    add_case(s, NAMES[level][3], kepler, (int)(sizeof kepler / sizeof kepler[0]), setups[level]);
    add_case(s, NAMES[level][4], vadd, 2, setups[level]);
  }
  const TTest* settings[] = {test_isa_and_threads_settings, test_threads_bit_identical};
  add_case(s, "levels and threads", settings, 2, at_auto);
  return s;
}

int main(void) {
  printf("kernel levels: this CPU has up to %s\n",
         (pf__k_isa_set(PF__K_ISA_AUTO), pf__k_isa_name()));
  SRunner* sr = srunner_create(kernels_math_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
