/* bench/bench_cuda.h: what bench_cuda's C files share: the settings, the one stream and the
 * report file, the failure helpers, CUDA tensors and host checks (bench_cuda.c, which also holds
 * main), and the two parts of the run, bench_cuda_bandwidth.c and bench_cuda_launch.c. Names
 * start with bc_. The helpers the timed loops call are inline here, so that those loops do what
 * they did when everything was one file. */
#ifndef PF_BENCH_CUDA_H
#define PF_BENCH_CUDA_H

#include "bench_cuda_raw.h"
#include "packfn/cuda.h"
#include "packfn/packfn.h"

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
} bc_config_t;

extern bc_config_t bc_cfg;
extern void* bc_stream; /* the one stream everything runs on (pf_cuda_stream_create) */
extern cudaEvent_t bc_ev_start, bc_ev_stop;
extern FILE* bc_md; /* the --md file, or NULL */

/* ---- failures: every one exits 1 with a message ---- */

/* Exits 1 with the text of the error raised in this thread. */
void bc_die_raised(const char* what);

/* A cudaError_t: pf_cuda_check raises "<what> failed: <text> (<name>)" for anything else. */
static inline void bc_check_cuda(int rc, const char* what) {
  if (pf_cuda_check(rc, "bench_cuda", what) != 0)
    bc_die_raised(what);
}

#define CK(expr) bc_check_cuda((int)(expr), #expr)
#define OK(expr)                                                                                   \
  do {                                                                                             \
    if ((expr) != 0)                                                                               \
      bc_die_raised(#expr);                                                                        \
  } while (0)

static inline void bc_sync_stream(void) {
  CK(cudaStreamSynchronize(bc_stream));
}

/* The median of v[0..n) (sorts v). */
double bc_median(double* v, int n);
/* calloc, or exit 1. */
void* bc_xcalloc(size_t n, size_t size);

/* ---- tensors ---- */

/* A float32 (float64 when f64) tensor on the benchmark's CUDA device. */
pf_object_t* bc_cuda_tensor(const int64_t* shape, int32_t ndim, int f64);
pf_object_t* bc_cuda_vector(int64_t n, int f64);

static inline void* bc_data_of(pf_object_t* t) {
  return pf_dltensor_data(pf_tensor_dltensor(t));
}

static inline int64_t bc_numel_of(pf_object_t* t) {
  return pf_dltensor_numel(pf_tensor_dltensor(t));
}

/* Fills t with input `which` (PF_BENCH_X, ...) on the stream. */
void bc_fill(pf_object_t* t, int which);
/* Element i of a CUDA tensor, read back (after the stream was synchronised). */
double bc_read_back(pf_object_t* t, int64_t i);
/* Element i of input `which` as the device holds it (rounded to float32 unless f64). */
double bc_pattern(int which, int64_t i, int f64);
/* The registered function `name`, or exit 1. */
pf_object_t* bc_global_function(const char* name);

/* ---- checks against the host ---- */

/* Exits 1 unless |got - ref| <= tol * max(1, |ref|). */
void bc_expect_close(const char* what, int64_t i, double got, double ref, double tol);

/* ---- the two parts of the run ---- */

/* Bandwidth of each kernel against cudaMemcpyAsync; prints its table (bench_cuda_bandwidth.c). */
void bc_run_bandwidth(void);
/* Launch cost of packed calls against the raw launchers; prints its table (bench_cuda_launch.c). */
void bc_run_launch(void);

#endif /* PF_BENCH_CUDA_H */
