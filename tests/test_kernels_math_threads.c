/* tests/test_kernels_math_threads.c: the "levels and threads" case of test_kernels_math: the
 * kernel level and thread count settings of kernels/kmath.h, and the same bits from every
 * thread count at every level. */
/* setenv, unsetenv and strdup: POSIX, which -std=c11 leaves out */
#define _POSIX_C_SOURCE 200809L

#include "kernels/kmath.h"
#include "pf_test_kmath.h"

#include <check.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
  int order = pf__k_stream_order_set(PF__K_STREAM_AUTO);
  ck_assert(order == PF__K_STREAM_LINEAR || order == PF__K_STREAM_PAGES);
  ck_assert_int_eq(pf__k_stream_order_get(), order);
  ck_assert_int_eq(pf__k_stream_order_set(PF__K_STREAM_PAGES), PF__K_STREAM_PAGES);
  ck_assert_int_eq(pf__k_stream_order_get(), PF__K_STREAM_PAGES);
  ck_assert_int_eq(pf__k_stream_order_set(PF__K_STREAM_LINEAR), PF__K_STREAM_LINEAR);
  ck_assert_int_eq(pf__k_stream_order_set(7), order); /* not an order: the CPU's default */
  ck_assert_int_eq(pf__k_stream_order_get(), order);
}
END_TEST

/* PACKFN_KERNEL_THREADS, read again by every pf__k_threads_set(n <= 0): a decimal number with
 * blanks around it allowed on either side ("4 " meant 1 while " 4" meant 4); anything else 1. */
START_TEST(test_threads_environment) {
  static const struct {
    const char* text;
    int threads;
  } cases[] = {{"4", 4},    {" 4", 4},  {"4 ", 4},  {"\t4\n", 4}, {" 7  ", 7}, {"1000", 64},
               {"", 1},     {" ", 1},   {"0", 1},   {"-3", 1},    {"4x", 1},   {"4 5", 1},
               {"0x10", 1}, {"2.5", 1}, {"1e3", 1}, {"four", 1}};
  const char* saved = getenv("PACKFN_KERNEL_THREADS");
  char* copy = saved ? strdup(saved) : NULL;
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); ++i) {
    ck_assert_int_eq(setenv("PACKFN_KERNEL_THREADS", cases[i].text, 1), 0);
    int got = pf__k_threads_set(0);
    ck_assert_msg(got == cases[i].threads, "PACKFN_KERNEL_THREADS=\"%s\": %d threads, want %d",
                  cases[i].text, got, cases[i].threads);
  }
  if (copy) {
    setenv("PACKFN_KERNEL_THREADS", copy, 1);
    free(copy);
  } else {
    unsetenv("PACKFN_KERNEL_THREADS");
  }
  pf__k_threads_set(1);
}
END_TEST

/* Runs every kernel on arrays large enough to be split over threads (over 2 MiB: several
 * times PF__K_PAR_MIN_BYTES) into out, in the order: rms_norm f32 as one long row (streamed),
 * as one row under 4 MiB (not streamed: each thread scales its part from the end), over rows (in
 * place), rms_norm_fwd f64 and its inv_rms, rms_norm_bwd f32, add_n f32,
 * vector_add f64, kepler f64; and float64 rows of tiny values (x 2^-600, whose squares underflow
 * and which are summed again scaled: over rows, rms_norm_fwd and rms_norm_bwd; as one long row,
 * rms_norm). Returns the number of floats/doubles written to each array. */
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
  double* tiny_out; /* THR_ROWS * THR_COLS */
  double* tiny_inv; /* THR_ROWS */
  double* tiny_bwd; /* THR_ROWS * THR_COLS */
  double* tiny_row; /* THR_ROW */
} thr_out_t;

static void thr_run(thr_out_t* o, const float* xf, const double* xd, const float* ct,
                    const float* inv, const double* m, const double* e, const double* tiny) {
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
  pf__k_rms_norm_fwd_f64(tiny, o->tiny_out, o->tiny_inv, THR_ROWS, THR_COLS, 0.0);
  pf__k_rms_norm_bwd_f64(tiny, o->tiny_inv, xd, o->tiny_bwd, THR_ROWS, THR_COLS);
  pf__k_rms_norm_f64(tiny, o->tiny_row, 1, THR_ROW, 0.0);
}

static thr_out_t thr_alloc(void) {
  int64_t grid = (int64_t)THR_ROWS * THR_COLS;
  thr_out_t o = {xmalloc(THR_ROW * sizeof(float)),       xmalloc(THR_MID * sizeof(float)),
                 xmalloc((size_t)grid * sizeof(float)),  xmalloc((size_t)grid * sizeof(double)),
                 xmalloc(THR_ROWS * sizeof(double)),     xmalloc((size_t)grid * sizeof(float)),
                 xmalloc(THR_ROW * sizeof(float)),       xmalloc(THR_VADD * sizeof(double)),
                 xmalloc(THR_KEPLER * sizeof(double)),   xmalloc(THR_KEPLER * sizeof(double)),
                 xmalloc((size_t)grid * sizeof(double)), xmalloc(THR_ROWS * sizeof(double)),
                 xmalloc((size_t)grid * sizeof(double)), xmalloc(THR_ROW * sizeof(double))};
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
  free(o->tiny_out);
  free(o->tiny_inv);
  free(o->tiny_bwd);
  free(o->tiny_row);
}

/* Fills every array of o with 0xff bytes (NaN), so that an element a run leaves unwritten
 * differs from any result rather than keeping an earlier run's value. */
static void thr_poison(thr_out_t* o) {
  size_t grid = (size_t)THR_ROWS * THR_COLS;
  memset(o->row_out, 0xff, THR_ROW * sizeof(float));
  memset(o->mid_out, 0xff, THR_MID * sizeof(float));
  memset(o->fwd_out, 0xff, grid * sizeof(double));
  memset(o->fwd_inv, 0xff, THR_ROWS * sizeof(double));
  memset(o->bwd_out, 0xff, grid * sizeof(float));
  memset(o->addn_out, 0xff, THR_ROW * sizeof(float));
  memset(o->vadd_out, 0xff, THR_VADD * sizeof(double));
  memset(o->kep_s, 0xff, THR_KEPLER * sizeof(double));
  memset(o->kep_c, 0xff, THR_KEPLER * sizeof(double));
  memset(o->tiny_out, 0xff, grid * sizeof(double));
  memset(o->tiny_inv, 0xff, THR_ROWS * sizeof(double));
  memset(o->tiny_bwd, 0xff, grid * sizeof(double));
  memset(o->tiny_row, 0xff, THR_ROW * sizeof(double));
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
  if (memcmp(a->tiny_out, b->tiny_out, grid * sizeof(double)) != 0 ||
      memcmp(a->tiny_inv, b->tiny_inv, THR_ROWS * sizeof(double)) != 0) {
    return "rms_norm_fwd f64, tiny values";
  }
  if (memcmp(a->tiny_bwd, b->tiny_bwd, grid * sizeof(double)) != 0) {
    return "rms_norm_bwd f64, tiny values";
  }
  if (memcmp(a->tiny_row, b->tiny_row, THR_ROW * sizeof(double)) != 0) {
    return "rms_norm f64, one long row of tiny values";
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
  double* tiny = rand_f64(THR_ROW > grid ? THR_ROW : grid, -0x1p-600, 0x1p-600);
  thr_out_t one = thr_alloc();
  thr_out_t many = thr_alloc();
  int best = pf__k_isa_set(PF__K_ISA_AUTO);
  for (int level = PF__K_ISA_BASE; level <= best; ++level) {
    pf__k_isa_set(level);
    pf__k_threads_set(1);
    thr_run(&one, xf, xd, ct, inv, m, e, tiny);
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
    /* both orders of the streamed writes, with 1 to 4 threads, against 1 thread in the
     * order the CPU's default gave */
    for (int order = PF__K_STREAM_LINEAR; order <= PF__K_STREAM_PAGES; ++order) {
      pf__k_stream_order_set(order);
      for (int t = 1; t <= 4; ++t) {
        pf__k_threads_set(t);
        thr_poison(&many); /* rows_io is copied from xf by thr_run */
        thr_run(&many, xf, xd, ct, inv, m, e, tiny);
        const char* diff = thr_diff(&one, &many);
        ck_assert_msg(diff == NULL, "%s, %s order, %d threads: %s differs from 1 thread",
                      pf__k_isa_name(), order == PF__K_STREAM_PAGES ? "pages" : "linear", t, diff);
      }
    }
    pf__k_stream_order_set(PF__K_STREAM_AUTO);
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
  free(tiny);
}
END_TEST

/* The pages order of streamed writes (scale_pages) at every offset of the input and the output
 * in their pages and vectors: the same bits as the linear order, rms_norm float32 and
 * rms_norm_fwd float64 (its inv_rms too), one row that is streamed and one split over threads. */
START_TEST(test_stream_orders_bit_identical) {
  enum { N = (1 << 20) + 37, SLACK = 1024 + 16 };
  static const int offsets[][2] = {{0, 0}, {1, 0}, {0, 3}, {5, 9}, {1021, 2}, {1024, 1023}};
  float* xf = rand_f32(N + SLACK, -3, 3);
  double* xd = rand_f64(N + SLACK, -3, 3);
  float* lf = xmalloc((N + SLACK) * sizeof(float));
  float* pf = xmalloc((N + SLACK) * sizeof(float));
  double* ld = xmalloc((N + SLACK) * sizeof(double));
  double* pd = xmalloc((N + SLACK) * sizeof(double));
  double inv_l, inv_p;
  int best = pf__k_isa_set(PF__K_ISA_AUTO);
  for (int level = PF__K_ISA_BASE; level <= best; ++level) {
    pf__k_isa_set(level);
    for (int threads = 1; threads <= 2; ++threads) {
      pf__k_threads_set(threads);
      for (int k = 0; k < (int)(sizeof offsets / sizeof offsets[0]); ++k) {
        int xo = offsets[k][0], yo = offsets[k][1];
        /* poisoned first: an element neither order writes differs from any result */
        memset(lf, 0xff, (N + SLACK) * sizeof(float));
        memset(pf, 0xfe, (N + SLACK) * sizeof(float));
        memset(ld, 0xff, (N + SLACK) * sizeof(double));
        memset(pd, 0xfe, (N + SLACK) * sizeof(double));
        pf__k_stream_order_set(PF__K_STREAM_LINEAR);
        long long spans = pf__k_stream_pages_spans();
        pf__k_rms_norm_f32(xf + xo, lf + yo, 1, N, 1e-5f);
        pf__k_rms_norm_fwd_f64(xd + xo, ld + yo, &inv_l, 1, N, 1e-9);
        ck_assert_int_eq(pf__k_stream_pages_spans(), spans); /* the linear order ran */
        pf__k_stream_order_set(PF__K_STREAM_PAGES);
        pf__k_rms_norm_f32(xf + xo, pf + yo, 1, N, 1e-5f);
        pf__k_rms_norm_fwd_f64(xd + xo, pd + yo, &inv_p, 1, N, 1e-9);
        /* the pages order ran, a span per thread and call */
        ck_assert_int_eq(pf__k_stream_pages_spans(), spans + 2 * threads);
        ck_assert_msg(memcmp(&inv_l, &inv_p, sizeof inv_l) == 0,
                      "%s, %d threads, offsets %d, %d: rms_norm_fwd's inv_rms differs",
                      pf__k_isa_name(), threads, xo, yo);
        ck_assert_msg(memcmp(lf + yo, pf + yo, N * sizeof(float)) == 0,
                      "%s, %d threads, offsets %d, %d: float32 differs", pf__k_isa_name(), threads,
                      xo, yo);
        ck_assert_msg(memcmp(ld + yo, pd + yo, N * sizeof(double)) == 0,
                      "%s, %d threads, offsets %d, %d: float64 (fwd) differs", pf__k_isa_name(),
                      threads, xo, yo);
      }
    }
  }
  /* the pages order's results are right, not only the same (the linear order's are checked
   * against the reference above) */
  double* wide = widen(xf + 5, N);
  double* ref = xmalloc(N * sizeof(double));
  ref_rms_norm(wide, ref, NULL, 1, N, 1e-5);
  pf__k_isa_set(PF__K_ISA_AUTO);
  pf__k_threads_set(1);
  pf__k_rms_norm_f32(xf + 5, pf + 9, 1, N, 1e-5f);
  double err = max_rel_err_f32(pf + 9, ref, N, 1e-30);
  ck_assert_msg(err < 4 * FLT_EPSILON, "pages order: error %g", err);
  pf__k_stream_order_set(PF__K_STREAM_AUTO);
  free(wide);
  free(ref);
  free(xf);
  free(xd);
  free(lf);
  free(pf);
  free(ld);
  free(pd);
}
END_TEST

/* rms_norm_bwd's dx written with non-temporal stores (4 MiB or more, dx apart from x and the
 * cotangent) against the same rows computed in place (dx the cotangent's copy: not streamed):
 * the same bits at every level and offset of dx, with 1 and 3 threads (a row split over them). */
START_TEST(test_bwd_streamed_bit_identical) {
  enum { ROWS = 3, COLS = (1 << 19) + 5, SLACK = 16 };
  static const int offsets[] = {0, 1, 3, 7};
  int64_t n = (int64_t)ROWS * COLS;
  float* xf = rand_f32(n, -3, 3);
  float* cf = rand_f32(n, -1, 1);
  float* invf = rand_f32(ROWS, 0.5, 2);
  double* xd = rand_f64(n, -3, 3);
  double* cd = rand_f64(n, -1, 1);
  double* invd = rand_f64(ROWS, 0.5, 2);
  float* of = xmalloc((size_t)(n + SLACK) * sizeof(float));
  float* pf = xmalloc((size_t)n * sizeof(float));
  double* od = xmalloc((size_t)(n + SLACK) * sizeof(double));
  double* pd = xmalloc((size_t)n * sizeof(double));
  int best = pf__k_isa_set(PF__K_ISA_AUTO);
  for (int level = PF__K_ISA_BASE; level <= best; ++level) {
    pf__k_isa_set(level);
    for (int threads = 1; threads <= 3; threads += 2) {
      pf__k_threads_set(threads);
      memcpy(pf, cf, (size_t)n * sizeof(float));
      pf__k_rms_norm_bwd_f32(xf, invf, pf, pf, ROWS, COLS);
      memcpy(pd, cd, (size_t)n * sizeof(double));
      pf__k_rms_norm_bwd_f64(xd, invd, pd, pd, ROWS, COLS);
      for (int k = 0; k < (int)(sizeof offsets / sizeof offsets[0]); ++k) {
        int o = offsets[k];
        pf__k_rms_norm_bwd_f32(xf, invf, cf, of + o, ROWS, COLS);
        pf__k_rms_norm_bwd_f64(xd, invd, cd, od + o, ROWS, COLS);
        ck_assert_msg(memcmp(of + o, pf, (size_t)n * sizeof(float)) == 0,
                      "%s, %d threads, dx offset %d: float32 differs from in place",
                      pf__k_isa_name(), threads, o);
        ck_assert_msg(memcmp(od + o, pd, (size_t)n * sizeof(double)) == 0,
                      "%s, %d threads, dx offset %d: float64 differs from in place",
                      pf__k_isa_name(), threads, o);
      }
    }
  }
  pf__k_isa_set(PF__K_ISA_AUTO);
  pf__k_threads_set(1);
  free(xf);
  free(cf);
  free(invf);
  free(xd);
  free(cd);
  free(invd);
  free(of);
  free(pf);
  free(od);
  free(pd);
}
END_TEST

/* rms_norm_bwd's streamed dx where the test above does not reach: one row and two rows split
 * over 3 threads (write_part: each part streams its own span), rows shorter than, as long as and
 * just longer than a vector (n < W: no vector at all; head and tail vectors overlapping), and
 * every 7th row of extreme values (tiny x, inv_rms as large: computed apart by bwd_row_scaled,
 * with plain stores, between streamed rows).
 * The same bits as in place with 1 thread, and nothing written outside dx (poisoned guards). */
START_TEST(test_bwd_streamed_split_and_short_rows) {
  enum { GUARD = 16 };
  static const int64_t shapes[][2] = {
      {1, (1 << 20) + 5}, {2, (1 << 19) + 37}, {(1 << 20) / 3 + 1, 3}, {(1 << 20) / 17 + 1, 17}};
  static const int offsets[] = {0, 1, 5, 15};
  int best = pf__k_isa_set(PF__K_ISA_AUTO);
  for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); ++s) {
    int64_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
    float* xf = rand_f32(n, -3, 3);
    float* cf = rand_f32(n, -1, 1);
    float* invf = rand_f32(rows, 0.5, 2);
    double* xd = rand_f64(n, -3, 3);
    double* cd = rand_f64(n, -1, 1);
    double* invd = rand_f64(rows, 0.5, 2);
    for (int64_t r = 3; rows > 2 && r < rows; r += 7) {
      /* x tiny and inv_rms as large: b = inv^3 mean(ct x) beyond the float32 (1e40) and
       * inv^3 beyond the float64 (2^1800) range, while b x is of the order of a ct */
      invf[r] *= 1e20f;
      invd[r] *= 0x1p600;
      for (int64_t c = 0; c < cols; ++c) {
        xf[r * cols + c] *= 1e-20f;
        xd[r * cols + c] *= 0x1p-600;
      }
    }
    float* pf = xmalloc((size_t)n * sizeof(float));
    double* pd = xmalloc((size_t)n * sizeof(double));
    float* of = xmalloc((size_t)(n + 2 * GUARD) * sizeof(float));
    double* od = xmalloc((size_t)(n + 2 * GUARD) * sizeof(double));
    for (int level = PF__K_ISA_BASE; level <= best; ++level) {
      pf__k_isa_set(level);
      pf__k_threads_set(1);
      memcpy(pf, cf, (size_t)n * sizeof(float));
      pf__k_rms_norm_bwd_f32(xf, invf, pf, pf, rows, cols);
      memcpy(pd, cd, (size_t)n * sizeof(double));
      pf__k_rms_norm_bwd_f64(xd, invd, pd, pd, rows, cols);
      for (int threads = 1; threads <= 3; threads += 2) {
        pf__k_threads_set(threads);
        for (int k = 0; k < (int)(sizeof offsets / sizeof offsets[0]); ++k) {
          int o = offsets[k];
          memset(of, 0xff, (size_t)(n + 2 * GUARD) * sizeof(float));
          memset(od, 0xff, (size_t)(n + 2 * GUARD) * sizeof(double));
          pf__k_rms_norm_bwd_f32(xf, invf, cf, of + GUARD + o, rows, cols);
          pf__k_rms_norm_bwd_f64(xd, invd, cd, od + GUARD + o, rows, cols);
          ck_assert_msg(memcmp(of + GUARD + o, pf, (size_t)n * sizeof(float)) == 0,
                        "%s, %d threads, %lld x %lld, dx offset %d: float32 differs from in place",
                        pf__k_isa_name(), threads, (long long)rows, (long long)cols, o);
          ck_assert_msg(memcmp(od + GUARD + o, pd, (size_t)n * sizeof(double)) == 0,
                        "%s, %d threads, %lld x %lld, dx offset %d: float64 differs from in place",
                        pf__k_isa_name(), threads, (long long)rows, (long long)cols, o);
          for (int64_t g = 0; g < n + 2 * GUARD; g += (g == GUARD + o - 1) ? n + 1 : 1) {
            uint32_t uf;
            uint64_t ud;
            memcpy(&uf, of + g, sizeof uf);
            memcpy(&ud, od + g, sizeof ud);
            ck_assert_msg(uf == UINT32_MAX && ud == UINT64_MAX,
                          "%s, %d threads, %lld x %lld, dx offset %d: element %lld outside dx "
                          "written",
                          pf__k_isa_name(), threads, (long long)rows, (long long)cols, o,
                          (long long)(g - GUARD - o));
          }
        }
      }
    }
    free(xf);
    free(cf);
    free(invf);
    free(xd);
    free(cd);
    free(invd);
    free(pf);
    free(pd);
    free(of);
    free(od);
  }
  pf__k_isa_set(PF__K_ISA_AUTO);
  pf__k_threads_set(1);
}
END_TEST

/* add_n and vector_add with outputs of 16 MiB or more apart from their inputs (streamed)
 * against the same computed in place (not streamed): the same bits at every level, offset of the
 * output and thread count, for b of every length vector_add distinguishes (1, a few, all of c). */
START_TEST(test_elementwise_streamed_bit_identical) {
  enum { NF = (1 << 22) + 11, ND = (1 << 21) + 11, SLACK = 16 };
  static const int offsets[] = {0, 3};
  static const int64_t nbs[] = {1, 1000, ND};
  float* xf = rand_f32(NF, -3, 3);
  double* xd = rand_f64(ND, -3, 3);
  double* bd = rand_f64(ND, -1, 1);
  float* of = xmalloc((size_t)(NF + SLACK) * sizeof(float));
  float* pf = xmalloc((size_t)NF * sizeof(float));
  double* od = xmalloc((size_t)(ND + SLACK) * sizeof(double));
  double* pd = xmalloc((size_t)ND * sizeof(double));
  int best = pf__k_isa_set(PF__K_ISA_AUTO);
  for (int level = PF__K_ISA_BASE; level <= best; ++level) {
    pf__k_isa_set(level);
    for (int threads = 1; threads <= 3; threads += 2) {
      pf__k_threads_set(threads);
      memcpy(pf, xf, (size_t)NF * sizeof(float));
      pf__k_add_n_f32(pf, pf, NF, 0.375f);
      for (int k = 0; k < (int)(sizeof offsets / sizeof offsets[0]); ++k) {
        pf__k_add_n_f32(xf, of + offsets[k], NF, 0.375f);
        ck_assert_msg(memcmp(of + offsets[k], pf, (size_t)NF * sizeof(float)) == 0,
                      "%s, %d threads, out offset %d: add_n differs from in place",
                      pf__k_isa_name(), threads, offsets[k]);
      }
      for (int b = 0; b < (int)(sizeof nbs / sizeof nbs[0]); ++b) {
        memcpy(pd, xd, (size_t)ND * sizeof(double));
        pf__k_vector_add_f64(bd, nbs[b], pd, pd, ND);
        for (int k = 0; k < (int)(sizeof offsets / sizeof offsets[0]); ++k) {
          pf__k_vector_add_f64(bd, nbs[b], xd, od + offsets[k], ND);
          ck_assert_msg(memcmp(od + offsets[k], pd, (size_t)ND * sizeof(double)) == 0,
                        "%s, %d threads, b of %lld, out offset %d: vector_add differs from in "
                        "place",
                        pf__k_isa_name(), threads, (long long)nbs[b], offsets[k]);
        }
      }
    }
  }
  pf__k_isa_set(PF__K_ISA_AUTO);
  pf__k_threads_set(1);
  free(xf);
  free(xd);
  free(bd);
  free(of);
  free(pf);
  free(od);
  free(pd);
}
END_TEST

/* ---- test case ---- */

/* The default level: the last case leaves it set. */
static void at_auto(void) {
  pf__k_isa_set(PF__K_ISA_AUTO);
}

TCase* pf_test_kmath_threads_tcase(void) {
  const TTest* settings[] = {test_isa_and_threads_settings,
                             test_threads_environment,
                             test_threads_bit_identical,
                             test_stream_orders_bit_identical,
                             test_bwd_streamed_bit_identical,
                             test_bwd_streamed_split_and_short_rows,
                             test_elementwise_streamed_bit_identical};
  return pf_test_kmath_tcase("levels and threads", settings, 7, at_auto);
}
