/* bench_tensor_churn.c: what CPU tensors of 8 KiB to 16 MiB cost to make and release, alone and
 * among others: `loop`, pf_tensor_empty + pf_object_release of one size over and over; `churn`,
 * 256 live tensors of three sizes (n, 2n, 3n), one at random released and made again each step
 * (the allocator then serves requests among blocks in use, as a program holding tensors does).
 * ns per make + release, the median (and range) of 7 samples. packfn alone: to compare two
 * builds, run it against each one's library (LD_LIBRARY_PATH); bench_scaling's `alloc` series has
 * the loop against TVM-FFI.
 *   bench_tensor_churn [--quick]      (--quick: 3 sizes, shorter samples) */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"

#include "timing.h"

#define LIVE 256
#define REPS 7

static void fail(const char* what) {
  pf_object_t* err = pf_error_take();
  fprintf(stderr, "bench_tensor_churn: %s: %s\n", what,
          err ? pf_error_message(err) : "(no error raised)");
  pf_object_release(err);
  exit(1);
}

static pf_object_t* make(int64_t n) {
  pf_object_t* t;
  if (pf_tensor_empty(&n, 1, PF_DTYPE_UINT8, PF_DEVICE_CPU, &t) != 0)
    fail("pf_tensor_empty");
  return t;
}

/* xorshift: the same sequence in every build and run */
static uint32_t next_random(uint32_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static double time_loop(int64_t n, int iters) {
  double t0 = pf_bench_now_ns();
  for (int i = 0; i < iters; ++i)
    pf_object_release(make(n));
  return (pf_bench_now_ns() - t0) / iters;
}

static double time_churn(int64_t n, int iters) {
  pf_object_t* live[LIVE];
  for (int k = 0; k < LIVE; ++k)
    live[k] = make(n * (1 + k % 3));
  uint32_t seed = 12345;
  double t0 = pf_bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    uint32_t k = next_random(&seed) % LIVE;
    pf_object_release(live[k]);
    live[k] = make(n * (1 + i % 3));
  }
  double ns = (pf_bench_now_ns() - t0) / iters;
  for (int k = 0; k < LIVE; ++k)
    pf_object_release(live[k]);
  return ns;
}

int main(int argc, char** argv) {
  int quick = argc == 2 && strcmp(argv[1], "--quick") == 0;
  if (argc > 2 || (argc == 2 && !quick)) {
    fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
    return 2;
  }
  pf_bench_conditions_print(stdout, "");
  static const int64_t all[] = {8192, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
  static const int64_t few[] = {16384, 1 << 20, 16 << 20};
  const int64_t* sizes = quick ? few : all;
  size_t count = quick ? 3 : sizeof all / sizeof all[0];
  int loop_iters = quick ? 20000 : 100000, churn_iters = quick ? 10000 : 50000;
  printf("ns per make + release, median (min-max) of %d samples; churn: %d live tensors of n, 2n, "
         "3n bytes\n%10s %26s %26s\n",
         REPS, LIVE, "n bytes", "loop", "churn");
  for (size_t i = 0; i < count; ++i) {
    double loop[REPS], churn[REPS], lmin, lmed, lmax, cmin, cmed, cmax;
    for (int r = 0; r < REPS; ++r) {
      loop[r] = time_loop(sizes[i], loop_iters);
      churn[r] = time_churn(sizes[i], churn_iters);
    }
    pf_bench_summarise(loop, REPS, &lmin, &lmed, &lmax);
    pf_bench_summarise(churn, REPS, &cmin, &cmed, &cmax);
    printf("%10lld %9.1f (%7.1f-%7.1f) %9.1f (%7.1f-%7.1f)\n", (long long)sizes[i], lmed, lmin,
           lmax, cmed, cmin, cmax);
  }
  return 0;
}
