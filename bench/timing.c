/* timing.c: the sample summary of timing.h. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, used by timing.h */
#include "timing.h"

#include <stdlib.h>

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

void pf_bench_summarise(double* samples, int reps, double* min, double* median, double* max) {
  qsort(samples, (size_t)reps, sizeof(double), compare_doubles);
  *min = samples[0];
  *max = samples[reps - 1];
  *median = reps % 2 ? samples[reps / 2] : 0.5 * (samples[reps / 2 - 1] + samples[reps / 2]);
}
