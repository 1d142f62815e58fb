/* tests/test_kernels_math.c: unit tests of the CPU kernels in kernels/kmath.h against plain
 * double-precision references written here, in float32 and float64, across shapes: add_n,
 * rms_norm and its backward pass, vector_add, and the suite. In the same executable: kepler in
 * test_kernels_math_kepler.c, rms_norm at the ends of the float range in
 * test_kernels_math_range.c, the kernel levels and threads in test_kernels_math_threads.c;
 * pf_test_kmath.h holds what they share. */
#include "kernels/kmath.h"
#include "pf_test_kmath.h"

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

/* The state of pf_test_rand_uniform (pf_test_kmath.h). */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;

double pf_test_rand_uniform(double lo, double hi) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t bits = (rng_state * 0x2545F4914F6CDD1Du) >> 11;
  return lo + (hi - lo) * ((double)bits * 0x1p-53);
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

/* sum ct * rms_norm(x) for one row, the scalar whose gradient rms_norm_bwd returns. */
static double loss_row(const double* x, const double* ct, int64_t cols, double eps) {
  double inv = 1.0 / sqrt(ref_dot(x, x, cols) / (double)cols + eps);
  return ref_dot(ct, x, cols) * inv;
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

TCase* pf_test_kmath_tcase(const char* name, const TTest* const* tests, int n, SFun setup) {
  TCase* tc = tcase_create(name);
  tcase_set_timeout(tc, TEST_TIMEOUT);
  tcase_add_unchecked_fixture(tc, setup, NULL);
  for (int i = 0; i < n; ++i) {
    tcase_add_test(tc, tests[i]);
  }
  return tc;
}

static void add_case(Suite* s, const char* name, const TTest* const* tests, int n, SFun setup) {
  suite_add_tcase(s, pf_test_kmath_tcase(name, tests, n, setup));
}

static Suite* kernels_math_suite(void) {
  Suite* s = suite_create("kernels_math");
  const TTest* add_n[] = {test_add_n_f32, test_add_n_f64};
  const TTest* rms[] = {test_rms_norm_f32, test_rms_norm_f64, test_rms_norm_fwd_zero_cols,
                        test_rms_norm_extreme_rows};
  const TTest* bwd[] = {test_rms_norm_bwd_f32, test_rms_norm_bwd_f64,
                        test_rms_norm_bwd_finite_differences};
  const TTest* vadd[] = {test_vector_add_f32, test_vector_add_f64};
  /* Every case at every level, forced (a level the CPU lacks is lowered to the best it has,
   * which the output of test_threads_bit_identical's levels then repeats). */
  static const char* const NAMES[3][6] = {{"add_n sse2", "rms_norm sse2", "rms_norm_bwd sse2",
                                           "kepler sse2", "vector_add sse2", "rms_norm range sse2"},
                                          {"add_n avx2", "rms_norm avx2", "rms_norm_bwd avx2",
                                           "kepler avx2", "vector_add avx2", "rms_norm range avx2"},
                                          {"add_n avx512", "rms_norm avx512", "rms_norm_bwd avx512",
                                           "kepler avx512", "vector_add avx512",
                                           "rms_norm range avx512"}};
  SFun setups[3] = {at_base, at_avx2, at_avx512};
  for (int level = 0; level < 3; ++level) {
    add_case(s, NAMES[level][0], add_n, 2, setups[level]);
    add_case(s, NAMES[level][1], rms, 4, setups[level]);
    add_case(s, NAMES[level][2], bwd, 3, setups[level]);
    suite_add_tcase(s, pf_test_kmath_kepler_tcase(NAMES[level][3], setups[level]));
    add_case(s, NAMES[level][4], vadd, 2, setups[level]);
    suite_add_tcase(s, pf_test_kmath_range_tcase(NAMES[level][5], setups[level]));
  }
  suite_add_tcase(s, pf_test_kmath_threads_tcase());
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
