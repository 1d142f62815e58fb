/* bench/bench_kernels.c: bandwidth of the CPU kernels (kernels/kmath.h) at every instruction set
 * level the CPU has, against memcpy of the same bytes in the same run.
 *
 *   rms_norm float32, in cache (16, 64, 256 KiB; rows of 1024, rows of 4096, one row; the
 *     median over 8 placements of the buffers, and their range): time of
 *     memcpy of the same bytes / time of rms_norm (both read the input once and write the
 *     output once; rms_norm also reads it a second time, from cache). For one row also two
 *     limits at that size (one row must be summed whole before any of it can be scaled, so no
 *     store can start before the last load): "bound", memcpy / (read-only pass + memset of the
 *     output), which counts the scaling pass as its stores only, and "two-pass", memcpy /
 *     (read-only pass + memcpy), which counts it as what it does, reading the row (from cache)
 *     and writing the output, as the 1-D DRAM line's reference does.
 *   rms_norm float32, 1-D, 256 MiB: against the two-pass limit, the time of one read-only pass
 *     over the input plus one memcpy of it, both of the same 256 MiB (rms_norm must read a row
 *     once to sum it before it can scale it; at 256 MiB, 8 times a 32 MiB L3, the row does
 *     not stay in cache between the passes; at 64 MiB a good part of it did, which the
 *     backward scale pass reused). Input, output and memcpy's destination: 512 MiB in all
 *     (the output is memcpy's destination).
 *   The same 1-D row with each order of its streamed writes (kmath.h: pf__k_stream_order_set),
 *     linear and pages, in pairs (order_ab), whichever this CPU defaults to.
 *   rms_norm float32, 4096 x 4096 (64 MiB): against memcpy of 64 MiB (each row stays in cache
 *     between its passes); rms_norm_bwd of that shape: GB/s counting x and the cotangent read
 *     and dx written once, against memcpy's GB/s.
 *   With --threads T (default: the CPUs online), the 1-D row, the 4096 x 4096 array and its
 *     rms_norm_bwd again with T kernel threads against T threads each copying a 1/T share.
 *   add_n and vector_add float32 (256 KiB, 64 MiB) against memcpy of the bytes they move.
 *   kepler float64 and float32: nanoseconds per element (20000 elements, M uniform in [-10, 10],
 *     e = (i mod 100) / 101 in [0, 0.99)), and in the same samples the scalar solver
 *     pf__k_kepler_solve called per element as the kernel did before it was vectorised
 *     (compiled here, for the baseline target).
 *   With --kepler, only the Kepler lines: at every level with one thread, then at the best
 *   level with --threads T threads.
 * Every figure is the median of --reps samples (default 15; 5 with --quick); memcpy and the
 * kernel alternate within each sample so that drift hits both. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sysconf */

#include "kernels/kmath.h"
#include "timing.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG_BYTES ((size_t)64 << 20)
/* The 1-D row of the two-pass limit: well above any L3 (32 MiB on the machines measured). */
#define ROW_BYTES ((size_t)256 << 20)
#define MAX_T     PF__K_MAX_THREADS

static int reps = 15;
static int quick = 0;

static double median(double* v, int n) {
  double lo, mid, hi;
  pf_bench_summarise(v, n, &lo, &mid, &hi);
  return mid;
}

static void* xalloc(size_t bytes) {
  void* p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == NULL) {
    fprintf(stderr, "bench_kernels: out of memory\n");
    exit(1);
  }
  memset(p, 0, bytes); /* faults every page in before timing */
  return p;
}

/* ---- what is timed ---- */

typedef struct {
  int op; /* OP_* below */
  float* x;
  float* y;
  float* z;
  double* m;
  double* e;
  double* s;
  double* c;
  float* mf; /* float32 copies of m and e, and the float32 outputs */
  float* ef;
  float* sf;
  float* cf;
  int64_t rows, cols;
  int threads; /* for OP_MEMCPY_T */
} job_t;

enum {
  OP_MEMCPY,
  OP_MEMCPY_T,
  OP_READ,
  OP_MEMSET,
  OP_RMS,
  OP_ADD_N,
  OP_VADD,
  OP_RMS_BWD,
  OP_KEPLER,
  OP_KEPLER_F32,
  OP_KEPLER_SCALAR
};

static volatile double sink;

/* A read-only pass: the sum of the input in 64 independent lanes (vectorised at -O2/-O3: four
 * AVX-512 accumulators, so that the adds' latency does not bound it), built for the widest
 * vectors the CPU has, as glibc's memcpy is: a limit made from it is then not lowered by the
 * baseline's 16-byte loads or by one accumulator's chain (either halves it in cache). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static double
read_pass(const float* x, size_t n) {
  float lane[64] = {0};
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 64; ++k) {
      lane[k] += x[i + k];
    }
  }
  double t = 0.0;
  for (int k = 0; k < 64; ++k) {
    t += lane[k];
  }
  return t;
}

typedef struct {
  float* dst;
  const float* src;
  size_t n;
} copy_part_t;

static void* copy_main(void* arg) {
  copy_part_t* p = arg;
  memcpy(p->dst, p->src, p->n * sizeof(float));
  return NULL;
}

/* memcpy of n floats split over threads threads (thread creation included, as in the kernels). */
static void memcpy_threads(float* dst, const float* src, size_t n, int threads) {
  pthread_t th[MAX_T];
  copy_part_t part[MAX_T];
  for (int t = 0; t < threads; ++t) {
    size_t lo = n * (size_t)t / (size_t)threads;
    size_t hi = n * (size_t)(t + 1) / (size_t)threads;
    part[t] = (copy_part_t){dst + lo, src + lo, hi - lo};
  }
  for (int t = 1; t < threads; ++t) {
    if (pthread_create(&th[t], NULL, copy_main, &part[t]) != 0) {
      fprintf(stderr, "bench_kernels: pthread_create failed\n");
      exit(1);
    }
  }
  copy_main(&part[0]);
  for (int t = 1; t < threads; ++t) {
    pthread_join(th[t], NULL);
  }
}

static void run(const job_t* j) {
  size_t n = (size_t)(j->rows * j->cols);
  switch (j->op) {
  case OP_MEMCPY:
    memcpy(j->y, j->x, n * sizeof(float));
    break;
  case OP_MEMCPY_T:
    memcpy_threads(j->y, j->x, n, j->threads);
    break;
  case OP_READ:
    sink = read_pass(j->x, n);
    break;
  case OP_MEMSET:
    memset(j->y, 0x5a, n * sizeof(float)); /* not zero: some cores skip zeros over zeros */
    break;
  case OP_RMS:
    pf__k_rms_norm_f32(j->x, j->y, j->rows, j->cols, 1e-5f);
    break;
  case OP_ADD_N:
    pf__k_add_n_f32(j->x, j->y, (int64_t)n, 1.5f);
    break;
  case OP_RMS_BWD: /* x, inv_rms in z, the cotangent after x's rows, dx in y */
    pf__k_rms_norm_bwd_f32(j->x, j->z, j->x + j->rows * j->cols, j->y, j->rows, j->cols);
    break;
  case OP_VADD:
    pf__k_vector_add_f32(j->z, 1000, j->x, j->y, (int64_t)n);
    break;
  case OP_KEPLER:
    pf__k_kepler_f64(j->m, j->e, j->s, j->c, j->rows * j->cols);
    break;
  case OP_KEPLER_F32:
    pf__k_kepler_f32(j->mf, j->ef, j->sf, j->cf, j->rows * j->cols);
    break;
  default:
    for (int64_t i = 0; i < j->rows * j->cols; ++i) {
      pf__k_kepler_solve(j->m[i], j->e[i], &j->s[i], &j->c[i]);
    }
    break;
  }
}

/* Seconds per call of each of k jobs: median over reps samples, the jobs alternating within a
 * sample; each sample repeats a job iters times (enough to last about a millisecond). */
static void time_jobs(const job_t* jobs, int k, double* out) {
  double t0 = pf_bench_now_ns();
  run(&jobs[0]);
  double once = (pf_bench_now_ns() - t0) * 1e-9;
  int iters = once > 1e-3 ? 1 : (int)(1e-3 / (once > 1e-7 ? once : 1e-7)) + 1;
  double* samples = malloc((size_t)(reps * k) * sizeof(double));
  if (samples == NULL) {
    exit(1);
  }
  for (int q = 0; q < k; ++q) {
    run(&jobs[q]); /* warm up */
  }
  for (int r = 0; r < reps; ++r) {
    for (int q = 0; q < k; ++q) {
      double a = pf_bench_now_ns();
      for (int i = 0; i < iters; ++i) {
        run(&jobs[q]);
      }
      samples[q * reps + r] = (pf_bench_now_ns() - a) * 1e-9 / iters;
    }
  }
  for (int q = 0; q < k; ++q) {
    out[q] = median(samples + q * reps, reps);
  }
  free(samples);
}

/* ---- sections ---- */

static void fill(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    x[i] = (float)((int)(i % 251) - 125) * 0.01f;
  }
}

/* In cache: each size as rows of 1024 and of 4096 floats (a row's scaling shares its pass
 * with the next row's sum) and as one row (two passes over the data), at PLACES placements of
 * the two buffers. How fast the kernel runs depends on the buffers' virtual addresses beyond
 * their offsets in a page (AMD Zen 4: 0.63-0.84x memcpy for rows of 1024 at 64 KiB in
 * different processes of the same build, one figure again and again with ASLR off), so one
 * placement is one process's luck: each ratio is the median over the placements, with their
 * range. Placement p moves both buffers by p times 37 and 53 pages, so both keep the same
 * offset in their pages (64 bytes: what aligned_alloc gives for large sizes), as separate large
 * allocations do. */
#define PLACES 8
static void in_cache(float* x, float* y) {
  static const size_t KIB[] = {16, 64, 256};
  static const int64_t COLS[] = {1024, 4096, 0}; /* 0: one row */
  for (int s = 0; s < 3; ++s) {
    int64_t n = (int64_t)(KIB[s] * 1024 / sizeof(float));
    double ratio[5][PLACES], copy_gb[PLACES];
    for (int p = 0; p < PLACES; ++p) {
      float* xp = x + (size_t)p * 37 * 1024;
      float* yp = y + (size_t)p * 53 * 1024;
      job_t jobs[6] = {{.op = OP_MEMCPY, .x = xp, .y = yp, .rows = 1, .cols = n}};
      for (int k = 0; k < 3; ++k) {
        int64_t cols = COLS[k] == 0 ? n : COLS[k];
        jobs[k + 1] = (job_t){.op = OP_RMS, .x = xp, .y = yp, .rows = n / cols, .cols = cols};
      }
      jobs[4] = (job_t){.op = OP_READ, .x = xp, .rows = 1, .cols = n};
      jobs[5] = (job_t){.op = OP_MEMSET, .y = yp, .rows = 1, .cols = n};
      double t[6];
      time_jobs(jobs, 6, t);
      copy_gb[p] = 2.0 * (double)(n * 4) / 1e9 / t[0];
      for (int k = 0; k < 3; ++k) {
        ratio[k][p] = t[0] / t[k + 1];
      }
      ratio[3][p] = t[0] / (t[4] + t[5]); /* one row's bound: read all, then write all */
      ratio[4][p] = t[0] / (t[4] + t[0]); /* read all, then read all and write all */
    }
    double lo[5], mid[5], hi[5];
    for (int k = 0; k < 5; ++k) {
      pf_bench_summarise(ratio[k], PLACES, &lo[k], &mid[k], &hi[k]);
    }
    printf("  %3zu KiB: memcpy %6.1f GB/s; rms_norm x1024 %.2fx (%.2f-%.2f), x4096 %.2fx "
           "(%.2f-%.2f), one row %.2fx (%.2f-%.2f; bound %.2fx, two-pass %.2fx)\n",
           KIB[s], median(copy_gb, PLACES), mid[0], lo[0], hi[0], mid[1], lo[1], hi[1], mid[2],
           lo[2], hi[2], mid[3], mid[4]);
  }
}

static int cmp_double(const void* a, const void* b) {
  double u = *(const double*)a, v = *(const double*)b;
  return u < v ? -1 : u > v;
}

/* rms_norm over the 1-D row with each order of its streamed writes (kmath.h:
 * pf__k_stream_order_set), in pairs of one run of each, which runs first swapped from pair to
 * pair: a difference of a few percent between two such runs is below what separate medians
 * resolve on a shared machine, while the ratio within a pair cancels the drift. */
static void order_ab(float* x, float* y) {
  enum { MAX_PAIRS = 64 };
  int pairs = reps < 15 ? 15 : (reps > MAX_PAIRS ? MAX_PAIRS : reps);
  int64_t row = (int64_t)(ROW_BYTES / sizeof(float));
  double lin[MAX_PAIRS], pag[MAX_PAIRS], ratio[MAX_PAIRS];
  int wins = 0;
  for (int k = 0; k < pairs; ++k) {
    for (int h = 0; h < 2; ++h) {
      int pages = h ^ (k & 1);
      pf__k_stream_order_set(pages ? PF__K_STREAM_PAGES : PF__K_STREAM_LINEAR);
      double a = pf_bench_now_ns();
      pf__k_rms_norm_f32(x, y, 1, row, 1e-5f);
      *(pages ? &pag[k] : &lin[k]) = (pf_bench_now_ns() - a) * 1e-6;
    }
    ratio[k] = lin[k] / pag[k];
    wins += pag[k] < lin[k];
  }
  int order = pf__k_stream_order_set(PF__K_STREAM_AUTO);
  qsort(lin, (size_t)pairs, sizeof lin[0], cmp_double);
  qsort(pag, (size_t)pairs, sizeof pag[0], cmp_double);
  qsort(ratio, (size_t)pairs, sizeof ratio[0], cmp_double);
  printf("  rms_norm 1-D %d MiB, %d thread(s), %d pairs of the orders of its streamed writes: "
         "linear %.2f ms, "
         "pages %.2f ms; linear / pages within a pair %.3f (quartiles %.3f-%.3f), pages faster "
         "in %d (the default here: %s)\n",
         (int)(ROW_BYTES >> 20), pf__k_threads_get(), pairs, lin[pairs / 2], pag[pairs / 2],
         ratio[pairs / 2], ratio[pairs / 4], ratio[3 * pairs / 4], wins,
         order == PF__K_STREAM_PAGES ? "pages" : "linear");
}

/* rms_norm_bwd over 4096 x 4096: x and the cotangent read, dx written, 64 MiB each, counted
 * once (3/2 of memcpy's bytes) against memcpy of 64 MiB (gb: its bytes counted twice). */
static void bwd_line(double gb, double t_memcpy, double t_bwd) {
  printf("  rms_norm_bwd 4096x4096 (x, cotangent, dx: 64 MiB each) %6.1f GB/s: %.2fx memcpy's "
         "GB/s\n",
         1.5 * gb / t_bwd, (1.5 * gb / t_bwd) / (gb / t_memcpy));
}

static void dram(float* x, float* y, int threads) {
  int64_t n = (int64_t)(BIG_BYTES / sizeof(float));
  int64_t row = (int64_t)(ROW_BYTES / sizeof(float));
  double gb = 2.0 * (double)BIG_BYTES / 1e9;
  double row_gb = 2.0 * (double)ROW_BYTES / 1e9;
  int row_mib = (int)(ROW_BYTES >> 20);
  job_t cp = {.op = threads > 1 ? OP_MEMCPY_T : OP_MEMCPY,
              .x = x,
              .y = y,
              .rows = 1,
              .cols = n,
              .threads = threads};
  job_t cp_row = cp;
  cp_row.cols = row;
  job_t rd = {.op = OP_READ, .x = x, .rows = 1, .cols = row};
  job_t r1 = {.op = OP_RMS, .x = x, .y = y, .rows = 1, .cols = row};
  job_t r2 = {.op = OP_RMS, .x = x, .y = y, .rows = 4096, .cols = n / 4096};
  static float inv_rms[4096];
  for (int r = 0; r < 4096; ++r) {
    inv_rms[r] = 1.0f + (float)(r % 7) * 0.125f;
  }
  job_t rb = r2;
  rb.op = OP_RMS_BWD;
  rb.z = inv_rms;
  if (threads > 1) {
    /* The two-pass limit with threads: T threads read and copy. Reading is not split here,
     * so the 1-D row is compared with memcpy (of the same bytes) alone below. */
    job_t jobs[5] = {cp_row, r1, cp, r2, rb};
    double t[5];
    time_jobs(jobs, 5, t);
    printf("  %d threads: memcpy %d MiB %6.1f GB/s  rms_norm 1-D %d MiB %6.1f GB/s (%.2fx "
           "memcpy)  4096x4096 (64 MiB) %6.1f GB/s (%.2fx memcpy of 64 MiB)\n",
           threads, row_mib, row_gb / t[0], row_mib, row_gb / t[1], t[0] / t[1], gb / t[3],
           t[2] / t[3]);
    bwd_line(gb, t[2], t[4]);
    order_ab(x, y);
    return;
  }
  job_t jobs[6] = {cp_row, rd, r1, cp, r2, rb};
  double t[6];
  time_jobs(jobs, 6, t);
  double limit = t[0] + t[1];
  printf("  memcpy %d MiB %6.1f GB/s, read pass %d MiB %6.1f GB/s, memcpy 64 MiB %6.1f GB/s\n",
         row_mib, row_gb / t[0], row_mib, row_gb / 2 / t[1], gb / t[3]);
  printf("  rms_norm 1-D %d MiB %6.2f ms: %.2fx the two-pass limit (read + memcpy of %d MiB, "
         "%.2f ms)\n",
         row_mib, t[2] * 1e3, limit / t[2], row_mib, limit * 1e3);
  printf("  rms_norm 4096x4096 (64 MiB) %6.1f GB/s: %.2fx memcpy of 64 MiB\n", gb / t[4],
         t[3] / t[4]);
  bwd_line(gb, t[3], t[5]);
  order_ab(x, y);
}

#define KEPLER_N 20000

/* Kepler: the kernel in float64 and float32, and the scalar solver, in the same samples. */
static void kepler(const job_t* kp) {
  job_t jobs[3] = {*kp, *kp, *kp};
  jobs[0].op = OP_KEPLER;
  jobs[1].op = OP_KEPLER_F32;
  jobs[2].op = OP_KEPLER_SCALAR;
  double t[3];
  time_jobs(jobs, 3, t);
  printf("  kepler ns per element: float64 %.1f, float32 %.1f; scalar solver float64 %.1f (%.1fx "
         "the kernel's time)\n",
         t[0] / KEPLER_N * 1e9, t[1] / KEPLER_N * 1e9, t[2] / KEPLER_N * 1e9, t[2] / t[0]);
}

/* The threads an elementwise kernel splits bytes of traffic over with threads set (kernels/
 * math_cpu.c's parts_for): one per PF__K_PAR_MIN_BYTES, at least 1, at most threads. */
static int kernel_parts(int64_t bytes, int threads) {
  int64_t by_size = bytes / PF__K_PAR_MIN_BYTES;
  return by_size < 2 ? 1 : (by_size < threads ? (int)by_size : threads);
}

/* add_n and vector_add against memcpy of the same bytes, split over as many threads as add_n
 * splits them (with threads > 1 the 64 MiB kernels run on threads threads, so memcpy does too;
 * 256 KiB runs on one). */
static void others(float* x, float* y, float* z, const job_t* kp, int threads) {
  static const size_t BYTES[] = {(size_t)256 << 10, BIG_BYTES};
  for (int q = 0; q < (quick ? 1 : 2); ++q) {
    int64_t n = (int64_t)(BYTES[q] / sizeof(float));
    int parts = kernel_parts(2 * (int64_t)BYTES[q], threads);
    job_t cp = {.op = parts > 1 ? OP_MEMCPY_T : OP_MEMCPY,
                .x = x,
                .y = y,
                .z = z,
                .rows = 1,
                .cols = n,
                .threads = parts};
    job_t ad = cp;
    ad.op = OP_ADD_N;
    job_t va = cp;
    va.op = OP_VADD;
    job_t jobs[3] = {cp, ad, va};
    double t[3];
    time_jobs(jobs, 3, t);
    printf("  %6zu KiB: add_n %.2fx memcpy, vector_add (b of 1000) %.2fx memcpy\n", BYTES[q] >> 10,
           t[0] / t[1], t[0] / t[2]);
  }
  kepler(kp);
}

int main(int argc, char** argv) {
  pf_bench_conditions(); /* the date and load average at start */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus > 1 ? (int)(cpus < MAX_T ? cpus : MAX_T) : 1;
  int only_kepler = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
      reps = 5;
    } else if (strcmp(argv[i], "--kepler") == 0) {
      only_kepler = 1;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--quick] [--kepler] [--reps N] [--threads T]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || threads < 1 || threads > MAX_T) {
    fprintf(stderr, "bench_kernels: bad --reps or --threads\n");
    return 2;
  }
  size_t n = ROW_BYTES / sizeof(float);
  float* x = xalloc(ROW_BYTES); /* the other sections use the first BIG_BYTES */
  float* y = xalloc(ROW_BYTES);
  float* z = xalloc(1000 * sizeof(float));
  job_t kp = {.m = xalloc(KEPLER_N * sizeof(double)),
              .e = xalloc(KEPLER_N * sizeof(double)),
              .s = xalloc(KEPLER_N * sizeof(double)),
              .c = xalloc(KEPLER_N * sizeof(double)),
              .mf = xalloc(KEPLER_N * sizeof(float)),
              .ef = xalloc(KEPLER_N * sizeof(float)),
              .sf = xalloc(KEPLER_N * sizeof(float)),
              .cf = xalloc(KEPLER_N * sizeof(float)),
              .rows = 1,
              .cols = KEPLER_N};
  fill(x, n);
  fill(z, 1000);
  for (int i = 0; i < KEPLER_N; ++i) {
    kp.m[i] = -10.0 + 20.0 * i / KEPLER_N;
    kp.e[i] = (i % 100) / 101.0;
    kp.mf[i] = (float)kp.m[i];
    kp.ef[i] = (float)kp.e[i];
  }
  int best = pf__k_isa_set(PF__K_ISA_AUTO);
  pf_bench_conditions_print(stdout, "");
  printf("float32, median of %d samples; ratios > 1 are faster than what they compare with\n",
         reps);
  for (int level = quick && !only_kepler ? best : 0; level <= best; ++level) {
    pf__k_isa_set(level);
    pf__k_threads_set(1);
    printf("[%s, 1 thread]\n", pf__k_isa_name());
    if (only_kepler) {
      kepler(&kp);
      continue;
    }
    in_cache(x, y);
    dram(x, y, 1);
    others(x, y, z, &kp, 1);
  }
  pf__k_isa_set(PF__K_ISA_AUTO);
  if (threads > 1) {
    pf__k_threads_set(threads);
    printf("[%s, %d threads]\n", pf__k_isa_name(), threads);
    if (only_kepler) {
      kepler(&kp); /* the scalar solver's line stays one thread */
    } else {
      dram(x, y, threads);
      others(x, y, z, &kp, threads);
    }
  }
  free(x);
  free(y);
  free(z);
  free(kp.m);
  free(kp.e);
  free(kp.s);
  free(kp.c);
  free(kp.mf);
  free(kp.ef);
  free(kp.sf);
  free(kp.cf);
  return 0;
}
