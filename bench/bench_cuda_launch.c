/* bench/bench_cuda_launch.c: bench_cuda's launch-cost part: 1024-element vector_add and add_n
 * as packed calls, through the C entry and through the library's own launcher (no packfn), and
 * packed CPU no-ops, timed per launch with and without synchronisation (bench_cuda.c describes
 * the whole program). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, for timing.h */

#include "bench_cuda.h"
#include "packfn/kernels.h"
#include "timing.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  bc_die_raised(what);
}

/* n launches of path `kind`, with no synchronisation; each packed call's status is checked, as
 * a caller does, and the raw ones' status once after the loop. */
static void launch_loop(const launch_state_t* s, int kind, int n) {
  pf_any_t result = pf_any_none();
  const float* b = bc_data_of(s->b);
  const float* c = bc_data_of(s->c);
  float* a = bc_data_of(s->a);
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
      CK(pf_bench_cuda_raw_vector_add_f32(b, LAUNCH_N, c, a, LAUNCH_N, bc_stream));
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
      CK(pf_bench_cuda_raw_add_n_f32(bc_data_of(s->x), bc_data_of(s->out), LAUNCH_N, 1.0f,
                                     bc_stream));
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
    bc_sync_stream();
  }
}

/* a == b + c and out == x + 1 at a few elements, after the launches of one path. */
static void launch_verify(const launch_state_t* s, int kind) {
  if (!kPaths[kind].gpu)
    return;
  bc_sync_stream();
  const int64_t idx[3] = {0, LAUNCH_N / 2 + 1, LAUNCH_N - 1};
  for (int k = 0; k < 3; ++k) {
    int64_t i = idx[k];
    if (kind == L_RAW_ADDN || kind == L_PACKED_ADDN) {
      double ref = (double)((float)bc_pattern(PF_BENCH_X, i, 0) + 1.0f);
      bc_expect_close(kPaths[kind].name, i, bc_read_back(s->out, i), ref, 0.0);
    } else {
      double ref = (double)((float)bc_pattern(PF_BENCH_COTANGENT, i, 0) +
                            (float)bc_pattern(PF_BENCH_X, i, 0));
      bc_expect_close(kPaths[kind].name, i, bc_read_back(s->a, i), ref, 0.0);
    }
  }
  /* Clear the outputs so the next path's check sees its own writes. */
  CK(cudaMemsetAsync(bc_data_of(s->a), 0, LAUNCH_N * sizeof(float), bc_stream));
  CK(cudaMemsetAsync(bc_data_of(s->out), 0, LAUNCH_N * sizeof(float), bc_stream));
  bc_sync_stream();
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
         bc_cfg.rounds, bc_cfg.async_launches, bc_cfg.async_launches, bc_cfg.async_launches,
         bc_cfg.async_launches, bc_cfg.sync_launches, bc_cfg.sync_launches);
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
  if (!bc_md)
    return;
  fprintf(bc_md, "## Launch cost: %d-element float32 kernels\n\n", LAUNCH_N);
  fprintf(bc_md,
          "Wall clock, median of %d rounds. CPU ns: %d launches without synchronising, / %d. "
          "+drain: the same and one `cudaStreamSynchronize`, / %d. synced: launch + "
          "`cudaStreamSynchronize`, / launch.\n\n",
          bc_cfg.rounds, bc_cfg.async_launches, bc_cfg.async_launches, bc_cfg.async_launches);
  fprintf(bc_md, "| path | CPU ns | +drain ns | synced ns |\n|---|---:|---:|---:|\n");
  print_launch_rows(bc_md, r, 1);
  fprintf(bc_md,
          "\nvector_add packed / raw: CPU %.2fx (%+.0f ns), synced %.3fx; add_n: CPU %.2fx (%+.0f "
          "ns), synced %.3fx. Of vector_add's extra: the packed typed call %.1f ns, the rest "
          "(checks, device guard, stream lookup) %+.0f ns.\n\n",
          r[L_PACKED_VADD].cpu_ns / r[L_RAW_VADD].cpu_ns, v_extra,
          r[L_PACKED_VADD].sync_ns / r[L_RAW_VADD].sync_ns,
          r[L_PACKED_ADDN].cpu_ns / r[L_RAW_ADDN].cpu_ns, a_extra,
          r[L_PACKED_ADDN].sync_ns / r[L_RAW_ADDN].sync_ns, r[L_NOOP3].cpu_ns,
          v_extra - r[L_NOOP3].cpu_ns);
}

void bc_run_launch(void) {
  launch_state_t s;
  memset(&s, 0, sizeof s);
  OK(pf_function_create_direct(noop0, &s.noop0));
  OK(PF_TYPED_CREATE(noop_vector_add, &s.noop3));
  s.vadd = bc_global_function(PF_KERNELS_CUDA_PREFIX "vector_add");
  s.addn = bc_global_function(PF_KERNELS_CUDA_PREFIX "add_n");
  s.b = bc_cuda_vector(LAUNCH_N, 0);
  s.c = bc_cuda_vector(LAUNCH_N, 0);
  s.a = bc_cuda_vector(LAUNCH_N, 0);
  s.x = bc_cuda_vector(LAUNCH_N, 0);
  s.out = bc_cuda_vector(LAUNCH_N, 0);
  bc_fill(s.b, PF_BENCH_COTANGENT);
  bc_fill(s.c, PF_BENCH_X);
  bc_fill(s.x, PF_BENCH_X);
  s.vargs[0] = pf_any_object(s.b);
  s.vargs[1] = pf_any_object(s.c);
  s.vargs[2] = pf_any_object(s.a);
  s.aargs[0] = pf_any_object(s.x);
  s.aargs[1] = pf_any_object(s.out);
  s.aargs[2] = pf_any_float(1.0);
  bc_sync_stream();

  /* Warm-up and check of every path. */
  for (int k = 0; k < L_COUNT; ++k) {
    launch_loop(&s, k, 10);
    launch_verify(&s, k);
  }

  int rounds = bc_cfg.rounds, m = bc_cfg.async_launches, q = bc_cfg.sync_launches;
  double* cpu = bc_xcalloc((size_t)(L_COUNT * rounds), sizeof(double));
  double* drain = bc_xcalloc((size_t)(L_COUNT * rounds), sizeof(double));
  double* synced = bc_xcalloc((size_t)(L_COUNT * rounds), sizeof(double));
  /* Paths alternate within each round, so drift hits all of them. */
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < L_COUNT; ++k) {
      double t0 = pf_bench_now_ns();
      launch_loop(&s, k, m);
      double t1 = pf_bench_now_ns();
      bc_sync_stream();
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
    res[k].cpu_ns = bc_median(cpu + k * rounds, rounds);
    res[k].drain_ns = bc_median(drain + k * rounds, rounds);
    res[k].sync_ns = bc_median(synced + k * rounds, rounds);
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
