/* bench/bench_cuda.c: packfn's CUDA kernels (libpackfn_kernels_cuda) on the GPU, called as a
 * user calls them: pf_function_call on the registered packfn.kernels.cuda.<name> with tensor
 * objects from pf_tensor_empty on cuda:0, on one stream made current with pf_stream_set.
 *
 *   Bandwidth: each memory-bound kernel on large inputs (256 MiB of input; --quick: 4 MiB),
 *     timed with CUDA events around N back-to-back packed calls, against cudaMemcpyAsync
 *     device to device of the kernel's input bytes on the same stream, alternating within each
 *     sample; both as GB/s of the bytes moved (a copy of B bytes moves 2B: B read, B written),
 *     and their ratio. Each kernel's byte model counts what it must move, not what it issues:
 *     rms_norm holds rows of up to 8192 f32 / 4096 f64 values in registers and reads x once
 *     (kernels/math_cuda_rows.cu); longer rows are read twice, the second time from L2, and the
 *     model counts x once. Kepler is bound by arithmetic: its GB/s and elements/s are
 *     reported, its ratio is not a bandwidth ratio; the packed call also checks the
 *     eccentricities on the device and waits for that check (a pass over e, 8 bytes copied
 *     back, a stream synchronisation) before it launches, so the same kernel launched raw is
 *     a second row.
 *   Launch cost: a 1024-element float32 vector_add and add_n, as a packed call and as the
 *     library's own launcher called directly (bench_cuda_raw.cu compiles the same kernels and
 *     launchers: the same `<<<>>>` launch and its cudaGetLastError, without packfn), plus
 *     packed calls of CPU no-op functions for the cost of the call alone:
 *     CPU time per launch (M launches in a row, no synchronisation between them), the same with
 *     one synchronisation after the M, and the time of one launch + cudaStreamSynchronize.
 *
 * Every kernel's output is checked once against a host reference before it is timed; a wrong
 * result or any failing CUDA or packfn call exits 1. The report starts with the GPU, the CUDA
 * versions and the run's conditions (timing.h: build, commit, CPU, date, load). Without a CUDA
 * device: prints "bench_cuda: skipped: no CUDA device" and the conditions, writes no --md file
 * and exits 0. Options: --quick (small sizes, few samples: the CTest smoke test), --md FILE (the
 * tables in Markdown). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, for timing.h */

#include "bench_cuda_raw.h"
#include "packfn/cuda.h"
#include "packfn/kernels.h"
#include "packfn/packfn.h"
#include "timing.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVICE 0
#define TWO_PI 6.283185307179586

/* ---- settings ---- */

typedef struct {
  int quick;
  const char* md_path;
  int64_t big;        /* float32 elements of a large input: 64 Mi (256 MiB); --quick 1 Mi */
  int64_t one_row;    /* columns of the one-row rms_norm: 1 Mi (4 MiB); --quick 64 Ki */
  int64_t kepler;     /* Kepler elements: 4 Mi; --quick 64 Ki */
  int reps;           /* bandwidth samples (median): 7; --quick 3 */
  double sample_ms;   /* GPU time one bandwidth sample aims at: 5 ms; --quick 1 ms */
  int rounds;         /* launch-cost samples (median): 31; --quick 3 */
  int async_launches; /* launches per unsynchronised sample: 200; --quick 20 */
  int sync_launches;  /* launch + synchronise pairs per sample: 100; --quick 10 */
} config_t;

static config_t cfg;
static void* stream; /* the one stream everything runs on (pf_cuda_stream_create) */
static cudaEvent_t ev_start, ev_stop;
static FILE* md;

/* ---- failures: every one exits 1 with a message ---- */

static void die(const char* what, const char* message) {
  fprintf(stderr, "bench_cuda: %s: %s\n", what, message);
  exit(1);
}

static void die_raised(const char* what) {
  char message[1024] = "(no error raised)";
  pf_object_t* err = pf_error_take();
  if (err)
    pf_error_format(err, message, sizeof message);
  pf_object_release(err);
  die(what, message);
}

/* A cudaError_t: pf_cuda_check raises "<what> failed: <text> (<name>)" for anything else. */
static void check_cuda(int rc, const char* what) {
  if (pf_cuda_check(rc, "bench_cuda", what) != 0)
    die_raised(what);
}

#define CK(expr) check_cuda((int)(expr), #expr)
#define OK(expr)                                                                                   \
  do {                                                                                             \
    if ((expr) != 0)                                                                               \
      die_raised(#expr);                                                                           \
  } while (0)

static void sync_stream(void) {
  CK(cudaStreamSynchronize(stream));
}

static double median(double* v, int n) {
  double lo, mid, hi;
  pf_bench_summarise(v, n, &lo, &mid, &hi);
  return mid;
}

static void* xcalloc(size_t n, size_t size) {
  void* p = calloc(n, size);
  if (!p)
    die("host memory", "out of memory");
  return p;
}

/* ---- tensors ---- */

static pf_object_t* cuda_tensor(const int64_t* shape, int32_t ndim, int f64) {
  pf_object_t* t;
  OK(pf_tensor_empty(shape, ndim, f64 ? PF_DTYPE_FLOAT64 : PF_DTYPE_FLOAT32,
                     pf_device(PF_DEV_CUDA, DEVICE), &t));
  return t;
}

static pf_object_t* cuda_vector(int64_t n, int f64) {
  return cuda_tensor(&n, 1, f64);
}

static void* data_of(pf_object_t* t) {
  return pf_dltensor_data(pf_tensor_dltensor(t));
}

static int64_t numel_of(pf_object_t* t) {
  return pf_dltensor_numel(pf_tensor_dltensor(t));
}

static int is_f64(pf_object_t* t) {
  return pf_tensor_dltensor(t)->dtype.bits == 64;
}

static void fill(pf_object_t* t, int which) {
  CK(pf_bench_cuda_fill(data_of(t), is_f64(t), numel_of(t), which, stream));
}

/* Element i of a CUDA tensor, read back (after the stream was synchronised). */
static double read_back(pf_object_t* t, int64_t i) {
  if (is_f64(t)) {
    double v;
    CK(cudaMemcpy(&v, (const double*)data_of(t) + i, sizeof v, cudaMemcpyDeviceToHost));
    return v;
  }
  float v;
  CK(cudaMemcpy(&v, (const float*)data_of(t) + i, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

/* Element i of input `which` as the device holds it (rounded to float32 unless f64). */
static double pattern(int which, int64_t i, int f64) {
  double v = pf_bench_cuda_pattern(which, i);
  return f64 ? v : (double)(float)v;
}

static pf_object_t* global_function(const char* name) {
  pf_object_t* fn;
  OK(pf_global_get(name, &fn));
  if (!fn)
    die(name, "not registered (libpackfn_kernels_cuda not loaded?)");
  return fn;
}

/* ---- checks against the host ---- */

static void expect_close(const char* what, int64_t i, double got, double ref, double tol) {
  if (!(fabs(got - ref) <= tol * fmax(1.0, fabs(ref)))) {
    fprintf(stderr, "bench_cuda: %s: wrong result at index %lld: got %.17g, expected %.17g\n", what,
            (long long)i, got, ref);
    exit(1);
  }
}

/* Tolerances relative to max(1, |expected|): a few float32 ulps (the kernels sum in double and
 * round the scale once), or float64's. */
static double tolerance(int f64) {
  return f64 ? 1e-11 : 2e-5;
}

/* 1 / sqrt(mean(x^2) + eps) of row r of pattern x, in double. */
static double host_inv_rms(int64_t r, int64_t cols, int f64, double eps) {
  double acc = 0.0;
  for (int64_t c = 0; c < cols; ++c) {
    double v = pattern(PF_BENCH_X, r * cols + c, f64);
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
    CK(pf_bench_cuda_raw_kepler(data_of(o->t[0]), data_of(o->t[1]), data_of(o->t[2]),
                                data_of(o->t[3]), o->c.f64, numel_of(o->t[0]), stream));
    return;
  }
  pf_any_t result = pf_any_none();
  if (pf_function_call(o->fn, o->args, o->nargs, &result) != 0)
    die_raised(o->label);
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
    o->fn = global_function(name);
  switch (c->op) {
  case OP_ADD_N:
    o->t[0] = cuda_vector(n, f64);
    o->t[1] = cuda_vector(n, f64);
    fill(o->t[0], PF_BENCH_X);
    o->args[0] = pf_any_object(o->t[0]);
    o->args[1] = pf_any_object(o->t[1]);
    o->args[2] = pf_any_float(ADD_N_N);
    o->nargs = 3;
    o->copy_src = o->t[0];
    o->copy_dst = o->t[1];
    break;
  case OP_VECTOR_ADD:
    o->t[0] = cuda_vector(c->nb > 0 ? c->nb : n, f64);
    o->t[1] = cuda_vector(n, f64);
    o->t[2] = cuda_vector(n, f64);
    fill(o->t[0], PF_BENCH_COTANGENT);
    fill(o->t[1], PF_BENCH_X);
    o->nargs = 3;
    o->copy_src = o->t[1];
    o->copy_dst = o->t[2];
    break;
  case OP_RMS_NORM:
  case OP_RMS_NORM_FWD:
    o->t[0] = cuda_tensor(shape, 2, f64);
    o->t[1] = cuda_tensor(shape, 2, f64);
    fill(o->t[0], PF_BENCH_X);
    o->args[0] = pf_any_object(o->t[0]);
    o->args[1] = pf_any_object(o->t[1]);
    if (c->op == OP_RMS_NORM_FWD) {
      o->t[2] = cuda_vector(c->rows, f64);
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
    o->t[0] = cuda_tensor(shape, 2, f64);
    o->t[1] = cuda_vector(c->rows, f64);
    o->t[2] = cuda_tensor(shape, 2, f64);
    o->t[3] = cuda_tensor(shape, 2, f64);
    fill(o->t[0], PF_BENCH_X);
    fill(o->t[2], PF_BENCH_COTANGENT);
    /* inv_rms from the forward kernel (its output goes to dx, overwritten below). */
    pf_object_t* fwd = global_function(PF_KERNELS_CUDA_PREFIX "rms_norm_fwd");
    pf_any_t fargs[4] = {pf_any_object(o->t[0]), pf_any_object(o->t[3]), pf_any_object(o->t[1]),
                         pf_any_float(RMS_EPS)};
    pf_any_t result = pf_any_none();
    if (pf_function_call(fwd, fargs, 4, &result) != 0)
      die_raised("rms_norm_fwd (inv_rms for rms_norm_bwd)");
    pf_object_release(fwd);
    o->nargs = 4;
    o->copy_src = o->t[0];
    o->copy_dst = o->t[3];
    break;
  }
  case OP_KEPLER:
  case OP_KEPLER_RAW:
    for (int k = 0; k < 4; ++k)
      o->t[k] = cuda_vector(n, f64);
    fill(o->t[0], PF_BENCH_MEAN_ANOMALY);
    fill(o->t[1], PF_BENCH_ECC);
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
      double x = pattern(PF_BENCH_X, idx[k], f64);
      double ref = f64 ? x + ADD_N_N : (double)((float)x + (float)ADD_N_N);
      expect_close(o->label, idx[k], read_back(o->t[1], idx[k]), ref, tol);
    }
    break;
  case OP_VECTOR_ADD: {
    int64_t nb = numel_of(o->t[0]);
    for (int k = 0; k < 5; ++k) {
      double b = pattern(PF_BENCH_COTANGENT, idx[k] % nb, f64);
      double x = pattern(PF_BENCH_X, idx[k], f64);
      double ref = f64 ? b + x : (double)((float)b + (float)x);
      expect_close(o->label, idx[k], read_back(o->t[2], idx[k]), ref, tol);
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
          acc += pattern(PF_BENCH_COTANGENT, i, f64) * pattern(PF_BENCH_X, i, f64);
        }
        coef = inv * inv * inv * (acc / (double)c->cols);
      } else if (c->op == OP_RMS_NORM_FWD) {
        expect_close("rms_norm_fwd inv_rms", rows[r], read_back(o->t[2], rows[r]), inv, tol);
      }
      for (int k = 0; k < 4; ++k) {
        int64_t i = rows[r] * c->cols + cols[k];
        double x = pattern(PF_BENCH_X, i, f64);
        if (c->op == OP_RMS_NORM_BWD) {
          double ref = inv * pattern(PF_BENCH_COTANGENT, i, f64) - coef * x;
          expect_close(o->label, i, read_back(o->t[3], i), ref, 5 * tol);
        } else {
          expect_close(o->label, i, read_back(o->t[1], i), x * inv, tol);
        }
      }
    }
    break;
  }
  case OP_KEPLER:
  case OP_KEPLER_RAW:
    /* M = E - e sin E, with E = atan2(sin E, cos E), up to a whole number of turns. */
    for (int k = 0; k < 5; ++k) {
      double m = pattern(PF_BENCH_MEAN_ANOMALY, idx[k], f64);
      double e = pattern(PF_BENCH_ECC, idx[k], f64);
      double s = read_back(o->t[2], idx[k]);
      double co = read_back(o->t[3], idx[k]);
      double big_e = atan2(s, co);
      expect_close("kepler: M - (E - e sin E), turns removed", idx[k],
                   remainder(big_e - e * s - m, TWO_PI), 0.0, 5 * tol);
      expect_close("kepler: sin^2 E + cos^2 E", idx[k], s * s + co * co, 1.0, 5 * tol);
    }
    break;
  }
}

/* Per-call milliseconds of n runs of `op` (NULL: copies of bytes from src to dst), from events
 * recorded on the stream before the first and after the last. */
static double time_ms(const op_t* op, void* dst, const void* src, size_t bytes, int n) {
  CK(cudaEventRecord(ev_start, stream));
  if (op) {
    for (int i = 0; i < n; ++i)
      run_op(op);
  } else {
    for (int i = 0; i < n; ++i)
      CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  }
  CK(cudaEventRecord(ev_stop, stream));
  CK(cudaEventSynchronize(ev_stop));
  float ms = 0.0f;
  CK(cudaEventElapsedTime(&ms, ev_start, ev_stop));
  return (double)ms / n;
}

/* Enough runs for one sample to last cfg.sample_ms, from the time of one. */
static int runs_for(double ms_one) {
  double runs = ceil(cfg.sample_ms / fmax(ms_one, 1e-4));
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
  void* dst = data_of(o.copy_dst);
  const void* src = data_of(o.copy_src);
  size_t copy = (size_t)r.copy_bytes;

  /* Warm-up (loads the kernel's module), the check, then the run counts from one timed run. */
  run_op(&o);
  sync_stream();
  op_verify(&o);
  CK(cudaMemcpyAsync(dst, src, copy, cudaMemcpyDeviceToDevice, stream));
  r.calls = runs_for(time_ms(&o, NULL, NULL, 0, 1));
  r.copies = runs_for(time_ms(NULL, dst, src, copy, 1));

  double* tk = xcalloc((size_t)cfg.reps, sizeof(double));
  double* tc = xcalloc((size_t)cfg.reps, sizeof(double));
  for (int s = 0; s < cfg.reps; ++s) {
    tc[s] = time_ms(NULL, dst, src, copy, r.copies);
    tk[s] = time_ms(&o, NULL, NULL, 0, r.calls);
  }
  r.ms_kernel = median(tk, cfg.reps);
  r.ms_copy = median(tc, cfg.reps);
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
      cfg.sample_ms, cfg.reps);
  printf("%-22s %-4s %-20s %9s %7s %9s %9s %9s %7s %9s  %s\n", "kernel", "type", "shape", "MiB in",
         "N", "us/call", "GB/s", "copy GB/s", "ratio", "Gelem/s", "byte model");
  print_bandwidth_rows(stdout, r, count, 0);
  printf("kepler is bound by arithmetic (a Halley iteration per element in double): its GB/s is\n"
         "not a bandwidth figure and its ratio is not given. The packed kepler also checks e on\n"
         "the device and waits for the result before each launch; the raw row is the kernel\n"
         "alone. rms_norm rows longer than its register path are read twice (the second time from\n"
         "L2); the model counts x once.\n");
  if (!md)
    return;
  fprintf(md, "## Bandwidth: packed call vs device-to-device cudaMemcpyAsync\n\n");
  fprintf(md,
          "CUDA events around N back-to-back `pf_function_call`s on one stream, median of %d "
          "samples; copy of the kernel's input bytes in the same samples. GB/s counts the byte "
          "model; copy GB/s counts 2 x the input bytes (read + write); ratio = kernel / copy. "
          "Kepler is bound by arithmetic (no ratio).\n\n",
          cfg.reps);
  fprintf(md, "| kernel | dtype | shape | MiB in | us/call | GB/s | copy GB/s | ratio | Gelem/s | "
              "byte model |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  print_bandwidth_rows(md, r, count, 1);
  fprintf(md, "\n");
}

static void run_bandwidth(void) {
  int64_t big = cfg.big;
  int64_t cols = 4096;
  const bw_case_t cases[] = {
      {OP_ADD_N, 0, 1, big, 0},
      {OP_VECTOR_ADD, 0, 1, big, 0},
      {OP_VECTOR_ADD, 0, 1, big, 4096},
      {OP_RMS_NORM, 0, big / cols, cols, 0},
      {OP_RMS_NORM_FWD, 0, big / cols, cols, 0},
      {OP_RMS_NORM_BWD, 0, big / cols, cols, 0},
      {OP_RMS_NORM, 0, 1, cfg.one_row, 0},
      {OP_RMS_NORM, 1, big / 2 / cols, cols, 0},
      {OP_RMS_NORM_BWD, 1, big / 2 / cols, cols, 0},
      {OP_KEPLER, 0, 1, cfg.kepler, 0},
      {OP_KEPLER_RAW, 0, 1, cfg.kepler, 0},
      {OP_KEPLER, 1, 1, cfg.kepler, 0},
      {OP_KEPLER_RAW, 1, 1, cfg.kepler, 0},
  };
  enum { kCount = sizeof cases / sizeof cases[0] };
  bw_result_t results[kCount];
  for (int i = 0; i < kCount; ++i) {
    results[i] = bench_case(&cases[i]);
    fprintf(stderr, "bench_cuda: %s %s checked and timed\n", results[i].kernel, results[i].dtype);
  }
  print_bandwidth(results, kCount);
}

/* ---- launch cost ---- */

#define LAUNCH_N 1024

/* CPU no-op functions: the packed call alone. */
static int noop0(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  return 0;
}

/* vector_add's parameter list, typed entry and all, with nothing in the body. */
PF_TYPED_DEFINE(noop_vector_add, NONE, (TENSOR, b), (TENSOR, c), (TENSOR, a)) {
  (void)b;
  (void)c;
  (void)a;
  (void)result;
  return 0;
}

enum {
  L_NOOP0,
  L_NOOP3,
  L_RAW_VADD,
  L_PACKED_VADD,
  L_ENTRY_VADD,
  L_RAW_ADDN,
  L_PACKED_ADDN,
  L_COUNT
};

typedef struct {
  const char* name;
  int gpu; /* launches a kernel (0: a CPU no-op, nothing to synchronise) */
} launch_path_t;

static const launch_path_t kPaths[L_COUNT] = {
    {"packed no-op, 0 args (pf_function_create_direct)", 0},
    {"packed no-op, vector_add's 3 tensor params (typed)", 0},
    {"vector_add raw (the library's launcher, no packfn)", 1},
    {"vector_add packed (packfn.kernels.cuda.vector_add)", 1},
    {"vector_add C entry pf_kernel_vector_add", 1},
    {"add_n raw (the library's launcher, no packfn)", 1},
    {"add_n packed (packfn.kernels.cuda.add_n)", 1},
};

typedef struct {
  pf_object_t* noop0;
  pf_object_t* noop3;
  pf_object_t* vadd;
  pf_object_t* addn;
  pf_object_t *b, *c, *a, *x, *out;
  pf_any_t vargs[3];
  pf_any_t aargs[3];
} launch_state_t;

static void fail_call(const char* what) {
  die_raised(what);
}

/* n launches of path `kind`, with no synchronisation; each packed call's status is checked, as
 * a caller does, and the raw ones' status once after the loop. */
static void launch_loop(const launch_state_t* s, int kind, int n) {
  pf_any_t result = pf_any_none();
  const float* b = data_of(s->b);
  const float* c = data_of(s->c);
  float* a = data_of(s->a);
  switch (kind) {
  case L_NOOP0:
    for (int i = 0; i < n; ++i)
      if (pf_function_call(s->noop0, NULL, 0, &result) != 0)
        fail_call("no-op");
    break;
  case L_NOOP3:
    for (int i = 0; i < n; ++i)
      if (pf_function_call(s->noop3, s->vargs, 3, &result) != 0)
        fail_call("typed no-op");
    break;
  case L_RAW_VADD:
    for (int i = 0; i < n; ++i)
      CK(pf_bench_cuda_raw_vector_add_f32(b, LAUNCH_N, c, a, LAUNCH_N, stream));
    break;
  case L_PACKED_VADD:
    for (int i = 0; i < n; ++i)
      if (pf_function_call(s->vadd, s->vargs, 3, &result) != 0)
        fail_call("packfn.kernels.cuda.vector_add");
    break;
  case L_ENTRY_VADD: {
    const DLTensor* tb = pf_tensor_dltensor(s->b);
    const DLTensor* tc = pf_tensor_dltensor(s->c);
    DLTensor* ta = pf_tensor_dltensor(s->a);
    for (int i = 0; i < n; ++i)
      if (pf_kernel_vector_add(tb, tc, ta) != 0)
        fail_call("pf_kernel_vector_add");
    break;
  }
  case L_RAW_ADDN:
    for (int i = 0; i < n; ++i)
      CK(pf_bench_cuda_raw_add_n_f32(data_of(s->x), data_of(s->out), LAUNCH_N, 1.0f, stream));
    break;
  case L_PACKED_ADDN:
    for (int i = 0; i < n; ++i)
      if (pf_function_call(s->addn, s->aargs, 3, &result) != 0)
        fail_call("packfn.kernels.cuda.add_n");
    break;
  }
}

/* n launch + synchronise pairs. */
static void launch_sync_loop(const launch_state_t* s, int kind, int n) {
  for (int i = 0; i < n; ++i) {
    launch_loop(s, kind, 1);
    sync_stream();
  }
}

/* a == b + c and out == x + 1 at a few elements, after the launches of one path. */
static void launch_verify(const launch_state_t* s, int kind) {
  if (!kPaths[kind].gpu)
    return;
  sync_stream();
  const int64_t idx[3] = {0, LAUNCH_N / 2 + 1, LAUNCH_N - 1};
  for (int k = 0; k < 3; ++k) {
    int64_t i = idx[k];
    if (kind == L_RAW_ADDN || kind == L_PACKED_ADDN) {
      double ref = (double)((float)pattern(PF_BENCH_X, i, 0) + 1.0f);
      expect_close(kPaths[kind].name, i, read_back(s->out, i), ref, 0.0);
    } else {
      double ref =
          (double)((float)pattern(PF_BENCH_COTANGENT, i, 0) + (float)pattern(PF_BENCH_X, i, 0));
      expect_close(kPaths[kind].name, i, read_back(s->a, i), ref, 0.0);
    }
  }
  /* Clear the outputs so the next path's check sees its own writes. */
  CK(cudaMemsetAsync(data_of(s->a), 0, LAUNCH_N * sizeof(float), stream));
  CK(cudaMemsetAsync(data_of(s->out), 0, LAUNCH_N * sizeof(float), stream));
  sync_stream();
}

typedef struct {
  double cpu_ns;   /* per launch, M launches in a row */
  double drain_ns; /* per launch, the same M and one synchronisation */
  double sync_ns;  /* per launch + synchronise */
} launch_result_t;

/* The launch table's rows, as text columns or as Markdown; CPU no-ops have no GPU columns. */
static void print_launch_rows(FILE* f, const launch_result_t* r, int markdown) {
  for (int k = 0; k < L_COUNT; ++k) {
    if (kPaths[k].gpu)
      fprintf(f, markdown ? "| %s | %.0f | %.0f | %.0f |\n" : "%-54s %10.0f %10.0f %10.0f\n",
              kPaths[k].name, r[k].cpu_ns, r[k].drain_ns, r[k].sync_ns);
    else
      fprintf(f, markdown ? "| %s | %.1f | %s | %s |\n" : "%-54s %10.1f %10s %10s\n",
              kPaths[k].name, r[k].cpu_ns, "-", "-");
  }
}

static void print_launch(const launch_result_t* r) {
  printf("\n== Launch cost: %d-element float32 kernels, packed call vs the raw launcher ==\n",
         LAUNCH_N);
  printf("Wall clock, median of %d rounds. CPU ns: %d launches in a row without synchronising,\n"
         "divided by %d (what the calling thread spends per launch). +drain: the same %d launches\n"
         "and one cudaStreamSynchronize after them, / %d. synced: launch + cudaStreamSynchronize,\n"
         "%d times, / %d (round trip to the GPU and back).\n",
         cfg.rounds, cfg.async_launches, cfg.async_launches, cfg.async_launches, cfg.async_launches,
         cfg.sync_launches, cfg.sync_launches);
  printf("%-54s %10s %10s %10s\n", "path", "CPU ns", "+drain ns", "synced ns");
  print_launch_rows(stdout, r, 0);
  double v_extra = r[L_PACKED_VADD].cpu_ns - r[L_RAW_VADD].cpu_ns;
  double a_extra = r[L_PACKED_ADDN].cpu_ns - r[L_RAW_ADDN].cpu_ns;
  printf("vector_add: packed / raw CPU %.2fx (%+.0f ns per launch); synced %.3fx (%+.0f ns)\n",
         r[L_PACKED_VADD].cpu_ns / r[L_RAW_VADD].cpu_ns, v_extra,
         r[L_PACKED_VADD].sync_ns / r[L_RAW_VADD].sync_ns,
         r[L_PACKED_VADD].sync_ns - r[L_RAW_VADD].sync_ns);
  printf("add_n:      packed / raw CPU %.2fx (%+.0f ns per launch); synced %.3fx (%+.0f ns)\n",
         r[L_PACKED_ADDN].cpu_ns / r[L_RAW_ADDN].cpu_ns, a_extra,
         r[L_PACKED_ADDN].sync_ns / r[L_RAW_ADDN].sync_ns,
         r[L_PACKED_ADDN].sync_ns - r[L_RAW_ADDN].sync_ns);
  printf("vector_add's %+.0f ns, split (estimates, differences of medians): the packed call with\n"
         "typed conversion of 3 tensors (the typed no-op) %+.1f ns; the rest (argument checks,\n"
         "the device guard, the stream lookup) %+.0f ns.\n",
         v_extra, r[L_NOOP3].cpu_ns, v_extra - r[L_NOOP3].cpu_ns);
  if (!md)
    return;
  fprintf(md, "## Launch cost: %d-element float32 kernels\n\n", LAUNCH_N);
  fprintf(md,
          "Wall clock, median of %d rounds. CPU ns: %d launches without synchronising, / %d. "
          "+drain: the same and one `cudaStreamSynchronize`, / %d. synced: launch + "
          "`cudaStreamSynchronize`, / launch.\n\n",
          cfg.rounds, cfg.async_launches, cfg.async_launches, cfg.async_launches);
  fprintf(md, "| path | CPU ns | +drain ns | synced ns |\n|---|---:|---:|---:|\n");
  print_launch_rows(md, r, 1);
  fprintf(md,
          "\nvector_add packed / raw: CPU %.2fx (%+.0f ns), synced %.3fx; add_n: CPU %.2fx (%+.0f "
          "ns), synced %.3fx. Of vector_add's extra: the packed typed call %.1f ns, the rest "
          "(checks, device guard, stream lookup) %+.0f ns.\n\n",
          r[L_PACKED_VADD].cpu_ns / r[L_RAW_VADD].cpu_ns, v_extra,
          r[L_PACKED_VADD].sync_ns / r[L_RAW_VADD].sync_ns,
          r[L_PACKED_ADDN].cpu_ns / r[L_RAW_ADDN].cpu_ns, a_extra,
          r[L_PACKED_ADDN].sync_ns / r[L_RAW_ADDN].sync_ns, r[L_NOOP3].cpu_ns,
          v_extra - r[L_NOOP3].cpu_ns);
}

static void run_launch(void) {
  launch_state_t s;
  memset(&s, 0, sizeof s);
  OK(pf_function_create_direct(noop0, &s.noop0));
  OK(PF_TYPED_CREATE(noop_vector_add, &s.noop3));
  s.vadd = global_function(PF_KERNELS_CUDA_PREFIX "vector_add");
  s.addn = global_function(PF_KERNELS_CUDA_PREFIX "add_n");
  s.b = cuda_vector(LAUNCH_N, 0);
  s.c = cuda_vector(LAUNCH_N, 0);
  s.a = cuda_vector(LAUNCH_N, 0);
  s.x = cuda_vector(LAUNCH_N, 0);
  s.out = cuda_vector(LAUNCH_N, 0);
  fill(s.b, PF_BENCH_COTANGENT);
  fill(s.c, PF_BENCH_X);
  fill(s.x, PF_BENCH_X);
  s.vargs[0] = pf_any_object(s.b);
  s.vargs[1] = pf_any_object(s.c);
  s.vargs[2] = pf_any_object(s.a);
  s.aargs[0] = pf_any_object(s.x);
  s.aargs[1] = pf_any_object(s.out);
  s.aargs[2] = pf_any_float(1.0);
  sync_stream();

  /* Warm-up and check of every path. */
  for (int k = 0; k < L_COUNT; ++k) {
    launch_loop(&s, k, 10);
    launch_verify(&s, k);
  }

  int rounds = cfg.rounds, m = cfg.async_launches, q = cfg.sync_launches;
  double* cpu = xcalloc((size_t)(L_COUNT * rounds), sizeof(double));
  double* drain = xcalloc((size_t)(L_COUNT * rounds), sizeof(double));
  double* synced = xcalloc((size_t)(L_COUNT * rounds), sizeof(double));
  /* Paths alternate within each round, so drift hits all of them. */
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < L_COUNT; ++k) {
      double t0 = pf_bench_now_ns();
      launch_loop(&s, k, m);
      double t1 = pf_bench_now_ns();
      sync_stream();
      double t2 = pf_bench_now_ns();
      cpu[k * rounds + r] = (t1 - t0) / m;
      drain[k * rounds + r] = (t2 - t0) / m;
      if (kPaths[k].gpu) {
        t0 = pf_bench_now_ns();
        launch_sync_loop(&s, k, q);
        synced[k * rounds + r] = (pf_bench_now_ns() - t0) / q;
      }
    }
  }
  launch_result_t res[L_COUNT];
  for (int k = 0; k < L_COUNT; ++k) {
    res[k].cpu_ns = median(cpu + k * rounds, rounds);
    res[k].drain_ns = median(drain + k * rounds, rounds);
    res[k].sync_ns = median(synced + k * rounds, rounds);
  }
  /* The timed launches still computed the right thing. */
  launch_verify(&s, L_PACKED_VADD);
  free(cpu);
  free(drain);
  free(synced);
  print_launch(res);

  pf_object_release(s.noop0);
  pf_object_release(s.noop3);
  pf_object_release(s.vadd);
  pf_object_release(s.addn);
  pf_object_release(s.b);
  pf_object_release(s.c);
  pf_object_release(s.a);
  pf_object_release(s.x);
  pf_object_release(s.out);
}

/* ---- the device and the run's conditions ---- */

static void print_conditions(void) {
  struct cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, DEVICE));
  int driver = 0, runtime = 0, mem_khz = 0, sm_khz = 0;
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, DEVICE));
  CK(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, DEVICE));
  /* Double data rate: two transfers per memory clock over the bus width. */
  double peak = 2.0 * mem_khz * 1e3 * (p.memoryBusWidth / 8.0) / 1e9;
  char line[512];
  snprintf(line, sizeof line,
           "GPU %d: %s, sm_%d%d, %d SMs at %.0f MHz, %.1f GiB, L2 %.0f MiB, %d-bit bus at %.0f "
           "MHz (%.0f GB/s theoretical)",
           DEVICE, p.name, p.major, p.minor, p.multiProcessorCount, sm_khz / 1e3,
           (double)p.totalGlobalMem / 1073741824.0, p.l2CacheSize / 1048576.0, p.memoryBusWidth,
           mem_khz / 1e3, peak);
  char versions[256];
  snprintf(versions, sizeof versions,
           "CUDA driver API %d.%d, runtime %d.%d; packfn %s; %s run (--quick: small sizes)",
           driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10,
           PF_VERSION_STRING, cfg.quick ? "quick" : "full");
  const char* conditions =
      "one non-default stream (pf_cuda_stream_create, made current with pf_stream_set) carries "
      "every call, copy and event; tensors from pf_tensor_empty on cuda:0 (cudaMalloc)";
  printf("bench_cuda: packfn CUDA kernels (libpackfn_kernels_cuda)\n%s\n%s\n%s\n", line, versions,
         conditions);
  pf_bench_conditions_print(stdout, "");
  if (md) {
    fprintf(md, "# bench_cuda\n\n- %s\n- %s\n- %s\n", line, versions, conditions);
    pf_bench_conditions_print(md, "- ");
    fprintf(md, "\n");
  }
}

static void usage(const char* argv0) {
  fprintf(stderr, "usage: %s [--quick] [--md FILE]\n", argv0);
}

int main(int argc, char** argv) {
  pf_bench_conditions(); /* the date and load average at start */
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--quick") == 0) {
      cfg.quick = 1;
    } else if (strcmp(argv[i], "--md") == 0 && i + 1 < argc) {
      cfg.md_path = argv[++i];
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  if (cfg.quick) {
    cfg.big = (int64_t)1 << 20;
    cfg.one_row = (int64_t)1 << 16;
    cfg.kepler = (int64_t)1 << 16;
    cfg.reps = 3;
    cfg.sample_ms = 1.0;
    cfg.rounds = 3;
    cfg.async_launches = 20;
    cfg.sync_launches = 10;
  } else {
    cfg.big = (int64_t)1 << 26;
    cfg.one_row = (int64_t)1 << 20;
    cfg.kepler = (int64_t)1 << 22;
    cfg.reps = 7;
    cfg.sample_ms = 5.0;
    cfg.rounds = 31;
    cfg.async_launches = 200;
    cfg.sync_launches = 100;
  }

  int32_t devices = 0;
  OK(pf_cuda_device_count(&devices));
  if (devices == 0) {
    printf("bench_cuda: skipped: no CUDA device\n");
    pf_bench_conditions_print(stdout, "bench_cuda: ");
    return 0;
  }
  /* Keeps libpackfn_kernels_cuda linked (its registrations are what this program calls). */
  if (pf_kernels_cuda_count() != pf_kernels_count() || !pf_kernels_have_cuda())
    die("libpackfn_kernels_cuda", "the CUDA kernels are not registered");
  if (cfg.md_path) {
    md = fopen(cfg.md_path, "w");
    if (!md) {
      perror(cfg.md_path);
      return 1;
    }
  }

  CK(cudaSetDevice(DEVICE));
  OK(pf_cuda_stream_create(DEVICE, &stream));
  OK(pf_stream_set(pf_device(PF_DEV_CUDA, DEVICE), stream, NULL));
  CK(cudaEventCreate(&ev_start));
  CK(cudaEventCreate(&ev_stop));
  print_conditions();
  fflush(stdout);

  double t0 = pf_bench_now_ns();
  run_bandwidth();
  fflush(stdout);
  run_launch();

  CK(cudaEventDestroy(ev_start));
  CK(cudaEventDestroy(ev_stop));
  OK(pf_stream_set(pf_device(PF_DEV_CUDA, DEVICE), NULL, NULL));
  OK(pf_cuda_stream_destroy(DEVICE, stream));
  printf("\nbench_cuda: every kernel's output checked; %.1f s\n", (pf_bench_now_ns() - t0) * 1e-9);
  if (md && fclose(md) != 0) {
    perror(cfg.md_path);
    return 1;
  }
  return 0;
}
