/* bench/bench_rms_norm.c: float32 rms_norm bandwidth on a 64 MiB input against single-thread
 * memcpy bandwidth in the same run; with --check, fails when the ratio is below 0.70. The report
 * starts with the run's conditions (timing.h). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include "kernels/kmath.h"
#include "timing.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 4096 x 4096 float32 = 64 MiB: far beyond the private caches of any core, so both loops run
 * at memory (or last-level cache) speed, and each row of 16 KiB fits L1 between the passes. */
#define ROWS 4096
#define COLS 4096
/* Medians of this many runs; memcpy and rms_norm alternate so that drift hits both. */
#define DEFAULT_REPS 11
#define MIN_REPS     7
/* rms_norm must reach this fraction of memcpy's bandwidth under --check. */
#define REQUIRED_RATIO 0.70

/* The median of v[0..n), sorting v. */
static double median(double* v, int n) {
  double lo, mid, hi;
  pf_bench_summarise(v, n, &lo, &mid, &hi);
  return mid;
}

static void usage(const char* argv0) {
  fprintf(stderr, "usage: %s [--check] [--reps N]  (N >= %d, default %d)\n", argv0, MIN_REPS,
          DEFAULT_REPS);
}

int main(int argc, char** argv) {
  pf_bench_conditions(); /* the date and load average at start */
  int check = 0;
  int reps = DEFAULT_REPS;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--check") == 0) {
      check = 1;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < MIN_REPS) {
        usage(argv[0]);
        return 2;
      }
    } else {
      usage(argv[0]);
      return 2;
    }
  }

  const size_t count = (size_t)ROWS * COLS;
  const size_t bytes = count * sizeof(float);
  /* 64-byte alignment, as any tensor allocator gives. */
  float* x = aligned_alloc(64, bytes);
  float* out = aligned_alloc(64, bytes);
  float* copy = aligned_alloc(64, bytes);
  double* t_memcpy = malloc((size_t)reps * sizeof(double));
  double* t_rms = malloc((size_t)reps * sizeof(double));
  if (!x || !out || !copy || !t_memcpy || !t_rms) {
    fprintf(stderr, "bench_rms_norm: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < count; ++i) {
    x[i] = (float)((int)(i % 251) - 125) * 0.01f;
  }
  /* Fault every page in before timing; one untimed run of each warms up the rest. */
  memset(out, 0, bytes);
  memset(copy, 0, bytes);
  memcpy(copy, x, bytes);
  pf__k_rms_norm_f32(x, out, ROWS, COLS, 1e-5f);

  for (int r = 0; r < reps; ++r) {
    double t0 = 1e-9 * pf_bench_now_ns();
    memcpy(copy, x, bytes);
    double t1 = 1e-9 * pf_bench_now_ns();
    pf__k_rms_norm_f32(x, out, ROWS, COLS, 1e-5f);
    double t2 = 1e-9 * pf_bench_now_ns();
    t_memcpy[r] = t1 - t0;
    t_rms[r] = t2 - t1;
  }

  /* Both move the same bytes: the input read once and the output written once. */
  double moved = 2.0 * (double)bytes;
  double gbs_memcpy = moved / median(t_memcpy, reps) / 1e9;
  double gbs_rms = moved / median(t_rms, reps) / 1e9;
  double ratio = gbs_rms / gbs_memcpy;
  pf_bench_conditions_print(stdout, "");
  printf("shape %dx%d float32 (%zu MiB), median of %d runs\n", ROWS, COLS, bytes >> 20, reps);
  printf("memcpy:       %7.2f GB/s\n", gbs_memcpy);
  printf("rms_norm_f32: %7.2f GB/s\n", gbs_rms);
  printf("ratio:        %7.3f (required %.2f with --check)\n", ratio, REQUIRED_RATIO);
  /* Reading the results keeps either loop from being optimised away. */
  volatile float sink = out[count / 3] + copy[count / 5];
  (void)sink;

  free(x);
  free(out);
  free(copy);
  free(t_memcpy);
  free(t_rms);
  if (check && !(ratio >= REQUIRED_RATIO)) {
    fprintf(stderr, "bench_rms_norm: ratio %.3f is below %.2f\n", ratio, REQUIRED_RATIO);
    return 1;
  }
  return 0;
}
