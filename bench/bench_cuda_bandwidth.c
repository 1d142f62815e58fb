/* bench/bench_cuda_bandwidth.c: bench_cuda's bandwidth part: each memory-bound kernel as a packed
 * call on large inputs against a device-to-device cudaMemcpyAsync of its input on the same
 * stream, Kepler (bound by arithmetic) packed and raw; every output checked against the host
 * first (bench_cuda.c describes the whole program). */
#include "bench_cuda.h"
#include "packfn/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TWO_PI 6.283185307179586

/* ---- checks against the host ---- */

/* Tolerances relative to max(1, |expected|): a few float32 ulps (the kernels sum in double and
 * round the scale once), or float64's. */
static double tolerance(int f64) {
  return f64 ? 1e-11 : 2e-5;
}

/* 1 / sqrt(mean(x^2) + eps) of row r of pattern x, in double. */
static double host_inv_rms(int64_t r, int64_t cols, int f64, double eps) {
  double acc = 0.0;
  for (int64_t c = 0; c < cols; ++c) {
    double v = bc_pattern(PF_BENCH_X, r * cols + c, f64);
    acc += v * v;
  }
  return 1.0 / sqrt(acc / (double)cols + eps);
}

/* ---- the operations timed for bandwidth ---- */

enum {
  OP_ADD_N,
  OP_VECTOR_ADD,
  OP_RMS_NORM,
  OP_RMS_NORM_FWD,
  OP_RMS_NORM_BWD,
  OP_KEPLER,    /* the packed call: device check of e, a sync, then the kernel */
  OP_KEPLER_RAW /* the library's launcher called directly (bench_cuda_raw.cu) */
};

static const char* const kOpNames[] = {"add_n",        "vector_add", "rms_norm", "rms_norm_fwd",
                                       "rms_norm_bwd", "kepler",     "kepler"};

#define ADD_N_N 0.5
#define RMS_EPS 1e-5

typedef struct {
  int op;
  int f64;
  int64_t rows, cols; /* the elements are rows x cols; elementwise ones have rows 1 */
  int64_t nb;         /* vector_add: elements of b (0: as many as c) */
} bw_case_t;

typedef struct {
  bw_case_t c;
  pf_object_t* fn;
  pf_any_t args[4];
  int32_t nargs;
  pf_object_t* t[4]; /* the tensors, in argument order */
  pf_object_t* copy_src;
  pf_object_t* copy_dst;
  char label[96];
} op_t;

typedef struct {
  char kernel[40];
  char dtype[8];
  char shape[40];
  const char* model;
  int compute; /* bound by arithmetic: the ratio is not a bandwidth ratio */
  double elements, bytes, copy_bytes;
  int calls, copies;
  double ms_kernel, ms_copy; /* medians, per call */
} bw_result_t;

static void run_op(const op_t* o) {
  if (o->c.op == OP_KEPLER_RAW) {
    CK(pf_bench_cuda_raw_kepler(bc_data_of(o->t[0]), bc_data_of(o->t[1]), bc_data_of(o->t[2]),
                                bc_data_of(o->t[3]), o->c.f64, bc_numel_of(o->t[0]), bc_stream));
    return;
  }
  pf_any_t result = pf_any_none();
  if (pf_function_call(o->fn, o->args, o->nargs, &result) != 0)
    bc_die_raised(o->label);
}

/* Tensors, inputs and arguments of one case; the copy of the input the memcpy rows use. */
static void op_setup(op_t* o, const bw_case_t* c) {
  memset(o, 0, sizeof *o);
  o->c = *c;
  int f64 = c->f64;
  int64_t n = c->rows * c->cols;
  int64_t shape[2] = {c->rows, c->cols};
  char name[64];
  snprintf(name, sizeof name, PF_KERNELS_CUDA_PREFIX "%s", kOpNames[c->op]);
  snprintf(o->label, sizeof o->label, PF_KERNELS_CUDA_PREFIX "%s %s", kOpNames[c->op],
           f64 ? "float64" : "float32");
  if (c->op != OP_KEPLER_RAW)
    o->fn = bc_global_function(name);
  switch (c->op) {
  case OP_ADD_N:
    o->t[0] = bc_cuda_vector(n, f64);
    o->t[1] = bc_cuda_vector(n, f64);
    bc_fill(o->t[0], PF_BENCH_X);
    o->args[0] = pf_any_object(o->t[0]);
    o->args[1] = pf_any_object(o->t[1]);
    o->args[2] = pf_any_float(ADD_N_N);
    o->nargs = 3;
    o->copy_src = o->t[0];
    o->copy_dst = o->t[1];
    break;
  case OP_VECTOR_ADD:
    o->t[0] = bc_cuda_vector(c->nb > 0 ? c->nb : n, f64);
    o->t[1] = bc_cuda_vector(n, f64);
    o->t[2] = bc_cuda_vector(n, f64);
    bc_fill(o->t[0], PF_BENCH_COTANGENT);
    bc_fill(o->t[1], PF_BENCH_X);
    o->nargs = 3;
    o->copy_src = o->t[1];
    o->copy_dst = o->t[2];
    break;
  case OP_RMS_NORM:
  case OP_RMS_NORM_FWD:
    o->t[0] = bc_cuda_tensor(shape, 2, f64);
    o->t[1] = bc_cuda_tensor(shape, 2, f64);
    bc_fill(o->t[0], PF_BENCH_X);
    o->args[0] = pf_any_object(o->t[0]);
    o->args[1] = pf_any_object(o->t[1]);
    if (c->op == OP_RMS_NORM_FWD) {
      o->t[2] = bc_cuda_vector(c->rows, f64);
      o->args[2] = pf_any_object(o->t[2]);
      o->args[3] = pf_any_float(RMS_EPS);
      o->nargs = 4;
    } else {
      o->args[2] = pf_any_float(RMS_EPS);
      o->nargs = 3;
    }
    o->copy_src = o->t[0];
    o->copy_dst = o->t[1];
    break;
  case OP_RMS_NORM_BWD: {
    o->t[0] = bc_cuda_tensor(shape, 2, f64);
    o->t[1] = bc_cuda_vector(c->rows, f64);
    o->t[2] = bc_cuda_tensor(shape, 2, f64);
    o->t[3] = bc_cuda_tensor(shape, 2, f64);
    bc_fill(o->t[0], PF_BENCH_X);
    bc_fill(o->t[2], PF_BENCH_COTANGENT);
    /* inv_rms from the forward kernel (its output goes to dx, overwritten below). */
    pf_object_t* fwd = bc_global_function(PF_KERNELS_CUDA_PREFIX "rms_norm_fwd");
    pf_any_t fargs[4] = {pf_any_object(o->t[0]), pf_any_object(o->t[3]), pf_any_object(o->t[1]),
                         pf_any_float(RMS_EPS)};
    pf_any_t result = pf_any_none();
    if (pf_function_call(fwd, fargs, 4, &result) != 0)
      bc_die_raised("rms_norm_fwd (inv_rms for rms_norm_bwd)");
    pf_object_release(fwd);
    o->nargs = 4;
    o->copy_src = o->t[0];
    o->copy_dst = o->t[3];
    break;
  }
  case OP_KEPLER:
  case OP_KEPLER_RAW:
    for (int k = 0; k < 4; ++k)
      o->t[k] = bc_cuda_vector(n, f64);
    bc_fill(o->t[0], PF_BENCH_MEAN_ANOMALY);
    bc_fill(o->t[1], PF_BENCH_ECC);
    o->nargs = 4;
    o->copy_src = o->t[0];
    o->copy_dst = o->t[2];
    break;
  }
  if (c->op == OP_VECTOR_ADD || c->op == OP_RMS_NORM_BWD || c->op == OP_KEPLER)
    for (int k = 0; k < o->nargs; ++k)
      o->args[k] = pf_any_object(o->t[k]);
}

static void op_teardown(op_t* o) {
  for (int k = 0; k < 4; ++k)
    pf_object_release(o->t[k]);
  pf_object_release(o->fn);
}

/* Checks the output of the call just made (the stream synchronised) at a few elements. */
static void op_verify(const op_t* o) {
  const bw_case_t* c = &o->c;
  int f64 = c->f64;
  double tol = tolerance(f64);
  int64_t n = c->rows * c->cols;
  int64_t idx[5] = {0, 1, n / 2 + 3, n / 3, n - 1};
  switch (c->op) {
  case OP_ADD_N:
    for (int k = 0; k < 5; ++k) {
      double x = bc_pattern(PF_BENCH_X, idx[k], f64);
      double ref = f64 ? x + ADD_N_N : (double)((float)x + (float)ADD_N_N);
      bc_expect_close(o->label, idx[k], bc_read_back(o->t[1], idx[k]), ref, tol);
    }
    break;
  case OP_VECTOR_ADD: {
    int64_t nb = bc_numel_of(o->t[0]);
    for (int k = 0; k < 5; ++k) {
      double b = bc_pattern(PF_BENCH_COTANGENT, idx[k] % nb, f64);
      double x = bc_pattern(PF_BENCH_X, idx[k], f64);
      double ref = f64 ? b + x : (double)((float)b + (float)x);
      bc_expect_close(o->label, idx[k], bc_read_back(o->t[2], idx[k]), ref, tol);
    }
    break;
  }
  case OP_RMS_NORM:
  case OP_RMS_NORM_FWD:
  case OP_RMS_NORM_BWD: {
    int64_t rows[3] = {0, c->rows / 2, c->rows - 1};
    int64_t cols[4] = {0, 1, c->cols / 2, c->cols - 1};
    for (int r = 0; r < 3; ++r) {
      double inv = host_inv_rms(rows[r], c->cols, f64, RMS_EPS);
      double coef = 0.0;
      if (c->op == OP_RMS_NORM_BWD) {
        double acc = 0.0;
        for (int64_t j = 0; j < c->cols; ++j) {
          int64_t i = rows[r] * c->cols + j;
          acc += bc_pattern(PF_BENCH_COTANGENT, i, f64) * bc_pattern(PF_BENCH_X, i, f64);
        }
        coef = inv * inv * inv * (acc / (double)c->cols);
      } else if (c->op == OP_RMS_NORM_FWD) {
        bc_expect_close("rms_norm_fwd inv_rms", rows[r], bc_read_back(o->t[2], rows[r]), inv, tol);
      }
      for (int k = 0; k < 4; ++k) {
        int64_t i = rows[r] * c->cols + cols[k];
        double x = bc_pattern(PF_BENCH_X, i, f64);
        if (c->op == OP_RMS_NORM_BWD) {
          double ref = inv * bc_pattern(PF_BENCH_COTANGENT, i, f64) - coef * x;
          bc_expect_close(o->label, i, bc_read_back(o->t[3], i), ref, 5 * tol);
        } else {
          bc_expect_close(o->label, i, bc_read_back(o->t[1], i), x * inv, tol);
        }
      }
    }
    break;
  }
  case OP_KEPLER:
  case OP_KEPLER_RAW:
    /* M = E - e sin E, with E = atan2(sin E, cos E), up to a whole number of turns. */
    for (int k = 0; k < 5; ++k) {
      double m = bc_pattern(PF_BENCH_MEAN_ANOMALY, idx[k], f64);
      double e = bc_pattern(PF_BENCH_ECC, idx[k], f64);
      double s = bc_read_back(o->t[2], idx[k]);
      double co = bc_read_back(o->t[3], idx[k]);
      double big_e = atan2(s, co);
      bc_expect_close("kepler: M - (E - e sin E), turns removed", idx[k],
                      remainder(big_e - e * s - m, TWO_PI), 0.0, 5 * tol);
      bc_expect_close("kepler: sin^2 E + cos^2 E", idx[k], s * s + co * co, 1.0, 5 * tol);
    }
    break;
  }
}

/* Per-call milliseconds of n runs of `op` (NULL: copies of bytes from src to dst), from events
 * recorded on the stream before the first and after the last. */
static double time_ms(const op_t* op, void* dst, const void* src, size_t bytes, int n) {
  CK(cudaEventRecord(bc_ev_start, bc_stream));
  if (op) {
    for (int i = 0; i < n; ++i)
      run_op(op);
  } else {
    for (int i = 0; i < n; ++i)
      CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, bc_stream));
  }
  CK(cudaEventRecord(bc_ev_stop, bc_stream));
  CK(cudaEventSynchronize(bc_ev_stop));
  float ms = 0.0f;
  CK(cudaEventElapsedTime(&ms, bc_ev_start, bc_ev_stop));
  return (double)ms / n;
}

/* Enough runs for one sample to last cfg.sample_ms, from the time of one. */
static int runs_for(double ms_one) {
  double runs = ceil(bc_cfg.sample_ms / fmax(ms_one, 1e-4));
  return runs < 3 ? 3 : runs > 2000 ? 2000 : (int)runs;
}

static const char* byte_model(const bw_case_t* c) {
  switch (c->op) {
  case OP_ADD_N:
    return "x read, out written";
  case OP_VECTOR_ADD:
    return c->nb > 0 ? "c read, a written, b (small) once" : "b and c read, a written";
  case OP_RMS_NORM:
    return "x read once, out written";
  case OP_RMS_NORM_FWD:
    return "x read once, out and inv_rms written";
  case OP_RMS_NORM_BWD:
    return "x, cotangent, inv_rms read once, dx written";
  case OP_KEPLER:
    return "M, e read, sin E, cos E written; + e checked, then a sync";
  default:
    return "M, e read, sin E, cos E written";
  }
}

static bw_result_t bench_case(const bw_case_t* c) {
  op_t o;
  op_setup(&o, c);
  int64_t n = c->rows * c->cols;
  double es = c->f64 ? 8.0 : 4.0;
  bw_result_t r;
  memset(&r, 0, sizeof r);
  snprintf(r.kernel, sizeof r.kernel, "%s%s", kOpNames[c->op],
           c->op == OP_KEPLER_RAW ? " (raw launcher)" : "");
  snprintf(r.dtype, sizeof r.dtype, "%s", c->f64 ? "f64" : "f32");
  if (c->op == OP_RMS_NORM || c->op == OP_RMS_NORM_FWD || c->op == OP_RMS_NORM_BWD)
    snprintf(r.shape, sizeof r.shape, "%lld x %lld", (long long)c->rows, (long long)c->cols);
  else if (c->op == OP_VECTOR_ADD && c->nb > 0)
    snprintf(r.shape, sizeof r.shape, "%lld, b %lld", (long long)n, (long long)c->nb);
  else
    snprintf(r.shape, sizeof r.shape, "%lld", (long long)n);
  r.model = byte_model(c);
  r.compute = c->op == OP_KEPLER || c->op == OP_KEPLER_RAW;
  r.elements = (double)n;
  double nd = (double)n, rows = (double)c->rows;
  switch (c->op) {
  case OP_ADD_N:
  case OP_RMS_NORM:
    r.bytes = 2 * nd * es;
    break;
  case OP_VECTOR_ADD:
    r.bytes = (2 * nd + (double)(c->nb > 0 ? c->nb : n)) * es;
    break;
  case OP_RMS_NORM_FWD:
    r.bytes = (2 * nd + rows) * es;
    break;
  case OP_RMS_NORM_BWD:
    r.bytes = (3 * nd + rows) * es;
    break;
  default:
    r.bytes = 4 * nd * es;
  }
  r.copy_bytes = nd * es;
  void* dst = bc_data_of(o.copy_dst);
  const void* src = bc_data_of(o.copy_src);
  size_t copy = (size_t)r.copy_bytes;

  /* Warm-up (loads the kernel's module), the check, then the run counts from one timed run. */
  run_op(&o);
  bc_sync_stream();
  op_verify(&o);
  CK(cudaMemcpyAsync(dst, src, copy, cudaMemcpyDeviceToDevice, bc_stream));
  r.calls = runs_for(time_ms(&o, NULL, NULL, 0, 1));
  r.copies = runs_for(time_ms(NULL, dst, src, copy, 1));

  double* tk = bc_xcalloc((size_t)bc_cfg.reps, sizeof(double));
  double* tc = bc_xcalloc((size_t)bc_cfg.reps, sizeof(double));
  for (int s = 0; s < bc_cfg.reps; ++s) {
    tc[s] = time_ms(NULL, dst, src, copy, r.copies);
    tk[s] = time_ms(&o, NULL, NULL, 0, r.calls);
  }
  r.ms_kernel = bc_median(tk, bc_cfg.reps);
  r.ms_copy = bc_median(tc, bc_cfg.reps);
  free(tk);
  free(tc);
  op_teardown(&o);
  return r;
}

static double gbs(double bytes, double ms) {
  return bytes / (ms * 1e-3) / 1e9;
}

/* The bandwidth table's rows, as text columns or as Markdown (where the calls column is left
 * out and a compute-bound kernel's ratio reads "-"). */
static void print_bandwidth_rows(FILE* f, const bw_result_t* r, int count, int markdown) {
  for (int i = 0; i < count; ++i) {
    const bw_result_t* b = &r[i];
    double kg = gbs(b->bytes, b->ms_kernel), cg = gbs(2 * b->copy_bytes, b->ms_copy);
    double mib = b->copy_bytes / 1048576.0, us = b->ms_kernel * 1e3;
    double gelem = b->elements / (b->ms_kernel * 1e-3) / 1e9;
    char ratio[16];
    if (b->compute)
      snprintf(ratio, sizeof ratio, "%s", markdown ? "-" : "compute");
    else
      snprintf(ratio, sizeof ratio, "%.3f", kg / cg);
    if (markdown)
      fprintf(f, "| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %s | %.2f | %s |\n", b->kernel,
              b->dtype, b->shape, mib, us, kg, cg, ratio, gelem, b->model);
    else
      fprintf(f, "%-22s %-4s %-20s %9.1f %7d %9.1f %9.1f %9.1f %7s %9.2f  %s\n", b->kernel,
              b->dtype, b->shape, mib, b->calls, us, kg, cg, ratio, gelem, b->model);
  }
}

static void print_bandwidth(const bw_result_t* r, int count) {
  printf("\n== Bandwidth: packed call vs cudaMemcpyAsync device-to-device of the input ==\n");
  printf(
      "CUDA events around N back-to-back calls on one stream (N: ~%.0f ms of work per sample),\n"
      "median of %d samples, copy and kernel alternating. GB/s = bytes of the byte model / time;\n"
      "copy GB/s = 2 x input bytes / time. ratio = kernel GB/s / copy GB/s (1.0: as fast as\n"
      "a copy moving the same bytes).\n",
      bc_cfg.sample_ms, bc_cfg.reps);
  printf("%-22s %-4s %-20s %9s %7s %9s %9s %9s %7s %9s  %s\n", "kernel", "type", "shape", "MiB in",
         "N", "us/call", "GB/s", "copy GB/s", "ratio", "Gelem/s", "byte model");
  print_bandwidth_rows(stdout, r, count, 0);
  printf("kepler is bound by arithmetic (a Halley iteration per element in double): its GB/s is\n"
         "not a bandwidth figure and its ratio is not given. The packed kepler also checks e on\n"
         "the device and waits for the result before each launch; the raw row is the kernel\n"
         "alone. rms_norm rows longer than its register path are read twice (the second time from\n"
         "L2); the model counts x once.\n");
  if (!bc_md)
    return;
  fprintf(bc_md, "## Bandwidth: packed call vs device-to-device cudaMemcpyAsync\n\n");
  fprintf(bc_md,
          "CUDA events around N back-to-back `pf_function_call`s on one stream, median of %d "
          "samples; copy of the kernel's input bytes in the same samples. GB/s counts the byte "
          "model; copy GB/s counts 2 x the input bytes (read + write); ratio = kernel / copy. "
          "Kepler is bound by arithmetic (no ratio).\n\n",
          bc_cfg.reps);
  fprintf(bc_md,
          "| kernel | dtype | shape | MiB in | us/call | GB/s | copy GB/s | ratio | Gelem/s | "
          "byte model |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  print_bandwidth_rows(bc_md, r, count, 1);
  fprintf(bc_md, "\n");
}

void bc_run_bandwidth(void) {
  int64_t big = bc_cfg.big;
  int64_t cols = 4096;
  const bw_case_t cases[] = {
      {OP_ADD_N, 0, 1, big, 0},
      {OP_VECTOR_ADD, 0, 1, big, 0},
      {OP_VECTOR_ADD, 0, 1, big, 4096},
      {OP_RMS_NORM, 0, big / cols, cols, 0},
      {OP_RMS_NORM_FWD, 0, big / cols, cols, 0},
      {OP_RMS_NORM_BWD, 0, big / cols, cols, 0},
      {OP_RMS_NORM, 0, 1, bc_cfg.one_row, 0},
      {OP_RMS_NORM, 1, big / 2 / cols, cols, 0},
      {OP_RMS_NORM_BWD, 1, big / 2 / cols, cols, 0},
      {OP_KEPLER, 0, 1, bc_cfg.kepler, 0},
      {OP_KEPLER_RAW, 0, 1, bc_cfg.kepler, 0},
      {OP_KEPLER, 1, 1, bc_cfg.kepler, 0},
      {OP_KEPLER_RAW, 1, 1, bc_cfg.kepler, 0},
  };
  enum { kCount = sizeof cases / sizeof cases[0] };
  bw_result_t results[kCount];
  for (int i = 0; i < kCount; ++i) {
    results[i] = bench_case(&cases[i]);
    fprintf(stderr, "bench_cuda: %s %s checked and timed\n", results[i].kernel, results[i].dtype);
  }
  print_bandwidth(results, kCount);
}
