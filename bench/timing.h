/* timing.h: the clock and the sample summary the benchmark programs (packfn_bench's harness.c,
   bench_scaling.c, bench_objects.c, bench_kernels.c, bench_rms_norm.c, bench_tensor_churn.c,
   bench_cuda*.c) time their loops with, and the conditions of a run their reports record (the
   scripts, bench_cli.sh and the Python ones, print the same line through
   bench/python/bench_conditions.py). */
#ifndef PF_BENCH_TIMING_H
#define PF_BENCH_TIMING_H

#include <stdio.h>
#include <time.h>

/* Monotonic time in nanoseconds. Inline so that a clock read around a timed loop costs the same
   as it did when each program had its own copy. Needs _POSIX_C_SOURCE >= 199309L (or
   _GNU_SOURCE) defined before the first system header. */
static inline double pf_bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Sorts samples[0..reps) in place (reps >= 1) and sets *min, *median (the mean of the middle two
   when reps is even) and *max. */
void pf_bench_summarise(double* samples, int reps, double* min, double* median, double* max);

/* The conditions of a run: how the benchmark was built (build type and C flags from CMake's
   configuration; `git describe --always --dirty` of the sources as of the program's build,
   cmake/pf_bench_git.cmake; "unknown" when not known) and
   where and when it ran (CPU model from /proc/cpuinfo, logical CPUs online, UTC date and
   1/5/15-minute load average, all taken by the first call: call it when the run starts). */
typedef struct pf_bench_conditions {
  const char* build_type;
  const char* c_flags;
  const char* git;
  char cpu_model[128];
  long cpus;        /* logical CPUs online (sysconf), 0 when not known */
  char date[32];    /* ISO 8601, UTC */
  char loadavg[48]; /* "0.12 0.34 0.56", or "unknown" */
} pf_bench_conditions_t;

const pf_bench_conditions_t* pf_bench_conditions(void);
/* One line, "conditions: ...\n", each line starting with `prefix` (e.g. "" or "# "). */
void pf_bench_conditions_print(FILE* out, const char* prefix);
/* The conditions as JSON members: "build_type": "...", "c_flags": ..., "git", "cpu_model",
   "logical_cpus" (a number), "date", "loadavg" (no braces, no trailing comma). */
void pf_bench_conditions_json(FILE* out);

#endif /* PF_BENCH_TIMING_H */
