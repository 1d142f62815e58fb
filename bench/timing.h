/* timing.h: the clock and the sample summary both benchmark programs (packfn_bench's harness.c
   and bench_scaling.c) time their loops with. */
#ifndef PF_BENCH_TIMING_H
#define PF_BENCH_TIMING_H

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

#endif /* PF_BENCH_TIMING_H */
