/* kernels/math_cpu.c: the CPU kernels of kmath.h: the choice of inner loops for the CPU
 * (math_simd.h), the split of large arrays over threads, and the row logic of rms_norm. */
#include "kmath.h"
#include "math_simd.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A result this large cannot stay in a core's private caches until its consumer runs. It is
 * written with non-temporal stores where there are any, which skip the read-for-ownership of
 * each line that plain stores pay: that read is a third of rms_norm's memory traffic. */
#define PF__K_BIG_BYTES ((int64_t)4 << 20)
/* add_n's and vector_add's outputs of this size or more, apart from their inputs, are written with
 * non-temporal stores. Larger than rms_norm's PF__K_BIG_BYTES: an elementwise pass reads each
 * input once, so its output competes with nothing of its own for the cache, and called again
 * and again on 4 MiB (AMD EPYC, 32 MiB L3) add_n took 0.17 ms streamed against 0.08 ms with
 * stores that stay in L3 (8 MiB: 0.32 against 0.24; 16 MiB: 0.65-0.71 against 0.94-1.26; 64
 * MiB: 3.8-4.2 against 5.9-6.1). */
#define PF__K_EW_STREAM_BYTES ((int64_t)16 << 20)
/* While such a result is written one row at a time, the next input row is prefetched into L2,
 * so that reading row r + 1 overlaps writing row r as in a memcpy. Rows longer than this would
 * crowd each other out of L2 (and the hardware prefetcher streams them well by itself). */
#define PF__K_PREFETCH_MAX_ROW_BYTES ((int64_t)256 << 10)
/* A row is summed in segments of at least this many elements and at most PF__K_MAX_SEGS of
 * them; threads split a long row at segment bounds. */
#define PF__K_SEG_MIN  ((int64_t)16384)
#define PF__K_MAX_SEGS 64
/* Threads split element ranges at multiples of this many elements (256 bytes of float32), so
 * that each element takes the same (vector or scalar) path whatever the split. */
#define PF__K_SPLIT_ALIGN ((int64_t)64)
/* Rows of at most this many bytes are scaled in the pass that sums the next row. Longer rows are
 * summed, then scaled, one at a time: the fused pass keeps three rows in L1 (the one scaled, its
 * output, the next), the plain one two, and with 16 KiB rows three no longer fit a 32 KiB L1
 * (AMD Zen 4, rows of 4096 floats at 64 and 256 KiB: fused 0.69-0.72x memcpy, plain 0.9x; rows
 * of 2048 floats: fused 0.87-0.96x, plain 0.79-0.89x). The plain pass of row r + 1 still
 * overlaps the scaling of row r: nothing in it waits for row r's scale. */
#define PF__K_FUSE_MAX_ROW_BYTES ((int64_t)8 << 10)
/* Streamed spans (rows, or the part of a row one thread writes) of at least this many bytes
 * that prefetch no next row are written by scale_pages where that order is chosen (kmath.h:
 * pf__k_stream_order_set): eight runs of pages. */
#define PF__K_PAGES_MIN_BYTES ((int64_t)(8 * PF__K_PAGE_RUNS * PF__K_PAGE_BYTES))
/* Rows (or the part of a row one thread writes) longer than this, when not streamed, are scaled
 * from their last element to their first: the end of the row, which its sum read last, is
 * still in L1, where a forward pass would have pushed it out reading the start again (one row
 * of 16384 floats at 64 KiB: 0.66 -> 0.72x memcpy; rows of 8192: 0.66 -> 0.73). Rows that fit
 * L1 with their output stay forward (rows of 4096 floats: 0.87x forward, 0.80x backward). */
#define PF__K_BACK_MIN_ROW_BYTES ((int64_t)16 << 10)

/* ---- instruction set ---- */

static const pf__k_simd_t* level_table(int level) {
#if PF__K_HAVE_X86_LEVELS
  if (level == PF__K_ISA_AVX512) {
    return &pf__k_simd_avx512;
  }
  if (level == PF__K_ISA_AVX2) {
    return &pf__k_simd_avx2;
  }
#endif
  (void)level;
  return &pf__k_simd_base;
}

/* A setting's first read (0 in `slot`: nothing chosen yet) stores `value`, the default, only
 * where nothing is set still: a set made meanwhile by another thread is kept, where storing the
 * default over it lost it for the rest of the process although the set had returned it as the
 * one in effect (review). Returns what `slot` holds then. */
static int choose_default(atomic_int* slot, int value) {
  int none = 0;
  return atomic_compare_exchange_strong(slot, &none, value) ? value : none;
}

/* The best level this CPU (and its operating system, which must save the registers) has. */
static int best_level(void) {
#if PF__K_HAVE_X86_LEVELS
  __builtin_cpu_init();
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    return PF__K_ISA_AVX512;
  }
  return avx2 ? PF__K_ISA_AVX2 : PF__K_ISA_BASE;
#else
  return PF__K_ISA_BASE;
#endif
}

/* The level in effect, + 1 (0: not chosen yet). */
static atomic_int isa_level = 0;

int pf__k_isa_set(int level) {
  int best = best_level();
  int chosen = (level < 0 || level > best) ? best : level;
  atomic_store(&isa_level, chosen + 1);
  return chosen;
}

int pf__k_isa_get(void) {
  int level = atomic_load(&isa_level);
  return (level > 0 ? level : choose_default(&isa_level, best_level() + 1)) - 1;
}

const char* pf__k_isa_name(void) {
  return level_table(pf__k_isa_get())->name;
}

static const pf__k_simd_t* ops(void) {
  return level_table(pf__k_isa_get());
}

/* ---- the order of streamed writes ---- */

static int best_order(void) {
#if PF__K_HAVE_X86_LEVELS
  __builtin_cpu_init();
  return __builtin_cpu_is("intel") ? PF__K_STREAM_PAGES : PF__K_STREAM_LINEAR;
#else
  return PF__K_STREAM_LINEAR;
#endif
}

/* The order in effect, + 1 (0: not chosen yet). */
static atomic_int stream_order = 0;

int pf__k_stream_order_set(int order) {
  int chosen = (order == PF__K_STREAM_LINEAR || order == PF__K_STREAM_PAGES) ? order : best_order();
  atomic_store(&stream_order, chosen + 1);
  return chosen;
}

int pf__k_stream_order_get(void) {
  int order = atomic_load(&stream_order);
  return (order > 0 ? order : choose_default(&stream_order, best_order() + 1)) - 1;
}

/* ---- threads ---- */

/* The thread count in effect (0: not chosen yet). */
static atomic_int thread_count = 0;

/* PACKFN_KERNEL_THREADS: a decimal number >= 1, blanks around it allowed (strtol skips those in
 * front; " 4" and "4 " both mean 4), more than PF__K_MAX_THREADS meaning that many; anything else
 * (empty, 0, negative, "0x10", "2.5", "4 threads") means 1. */
static int default_threads(void) {
  const char* env = getenv("PACKFN_KERNEL_THREADS");
  if (env == NULL) {
    return 1;
  }
  char* end;
  long n = strtol(env, &end, 10);
  while (end != env && isspace((unsigned char)*end)) {
    ++end;
  }
  if (end == env || *end != '\0' || n < 1) {
    return 1;
  }
  return n > PF__K_MAX_THREADS ? PF__K_MAX_THREADS : (int)n;
}

int pf__k_threads_set(int n) {
  int chosen = n <= 0 ? default_threads() : (n > PF__K_MAX_THREADS ? PF__K_MAX_THREADS : n);
  atomic_store(&thread_count, chosen);
  return chosen;
}

int pf__k_threads_get(void) {
  int n = atomic_load(&thread_count);
  return n > 0 ? n : choose_default(&thread_count, default_threads());
}

/* Threads for work over bytes bytes: at most one per PF__K_PAR_MIN_BYTES, at least 1. */
static int parts_for(int64_t bytes) {
  int64_t by_size = bytes / PF__K_PAR_MIN_BYTES;
  int n = pf__k_threads_get();
  return by_size < 2 ? 1 : (by_size < n ? (int)by_size : n);
}

typedef void (*part_fn)(void* ctx, int part, int parts);

typedef struct {
  part_fn fn;
  void* ctx;
  int part;
  int parts;
} worker_t;

static void* worker_main(void* arg) {
  worker_t* w = arg;
  w->fn(w->ctx, w->part, w->parts);
  return NULL;
}

/* Runs fn(ctx, p, parts) for p < parts, part 0 on the calling thread, and returns when all
 * are done. A part whose thread cannot be started runs on the calling thread afterwards. */
static void run_parts(int parts, part_fn fn, void* ctx) {
  if (parts <= 1) {
    fn(ctx, 0, 1);
    return;
  }
  worker_t w[PF__K_MAX_THREADS];
  pthread_t th[PF__K_MAX_THREADS];
  int started[PF__K_MAX_THREADS];
  for (int p = 1; p < parts; ++p) {
    w[p] = (worker_t){fn, ctx, p, parts};
    started[p] = pthread_create(&th[p], NULL, worker_main, &w[p]) == 0;
  }
  fn(ctx, 0, parts);
  for (int p = 1; p < parts; ++p) {
    if (started[p]) {
      pthread_join(th[p], NULL);
    } else {
      fn(ctx, p, parts);
    }
  }
}

/* Part p's share [*lo, *hi) of n items, split at multiples of align. */
static void split(int64_t n, int p, int parts, int64_t align, int64_t* lo, int64_t* hi) {
  int64_t units = (n + align - 1) / align;
  int64_t a = units * p / parts * align;
  int64_t b = units * (p + 1) / parts * align;
  *lo = a < n ? a : n;
  *hi = b < n ? b : n;
}

/* Orders this thread's non-temporal stores, when it made any (stream), before what follows. */
static void stream_fence(int stream) {
#if defined(__x86_64__) && defined(__SSE2__)
  if (stream) {
    __builtin_ia32_sfence();
  }
#else
  (void)stream;
#endif
}

/* ---- elementwise kernels ---- */

/* One job for every elementwise kernel: kind picks the loop. */
typedef enum { EW_ADD_N, EW_VADD, EW_KEPLER } ew_kind_t;

typedef struct {
  const pf__k_simd_t* ops;
  ew_kind_t kind;
  int f64;
  const void* in0; /* x, b or mean_anomaly */
  const void* in1; /* c or ecc */
  void* out0;      /* out, a or sin_e */
  void* out1;      /* cos_e */
  int64_t count;
  int64_t nb;
  double scalar;
  int stream; /* add_n, vector_add: out0 written with non-temporal stores */
} ew_job_t;

/* Whether an elementwise output of count elements, apart from its inputs, is streamed: at
 * least PF__K_EW_STREAM_BYTES. */
static int ew_stream(int64_t count, size_t elem, int apart) {
  return apart && count >= PF__K_EW_STREAM_BYTES / (int64_t)elem;
}

/* vector_add over [lo, hi): one pass per repetition of b avoids a division per element. */
static void vadd_range(const ew_job_t* j, int64_t lo, int64_t hi) {
  size_t elem = j->f64 ? sizeof(double) : sizeof(float);
  int64_t start = lo;
  while (start < hi) {
    int64_t off = j->nb == 1 ? 0 : start % j->nb;
    int64_t len = j->nb == 1 ? hi - start : j->nb - off;
    len = len < hi - start ? len : hi - start;
    const char* b = (const char*)j->in0 + (size_t)off * elem;
    const char* c = (const char*)j->in1 + (size_t)start * elem;
    char* a = (char*)j->out0 + (size_t)start * elem;
    if (j->nb == 1 && j->f64) {
      j->ops->add_scalar_f64((const double*)c, (double*)a, len, *(const double*)b, j->stream);
    } else if (j->nb == 1) {
      j->ops->add_scalar_f32((const float*)c, (float*)a, len, *(const float*)b, j->stream);
    } else if (j->f64) {
      j->ops->add_f64((const double*)b, (const double*)c, (double*)a, len, j->stream);
    } else {
      j->ops->add_f32((const float*)b, (const float*)c, (float*)a, len, j->stream);
    }
    start += len;
  }
}

static void ew_part(void* ctx, int part, int parts) {
  const ew_job_t* j = ctx;
  int64_t lo = 0, hi = j->count;
  if (parts > 1)
    split(j->count, part, parts, PF__K_SPLIT_ALIGN, &lo, &hi);
  int64_t n = hi - lo;
  if (n <= 0) {
    return;
  }
  if (j->kind == EW_VADD) {
    vadd_range(j, lo, hi);
  } else if (j->kind == EW_ADD_N && j->f64) {
    j->ops->add_scalar_f64((const double*)j->in0 + lo, (double*)j->out0 + lo, n, j->scalar,
                           j->stream);
  } else if (j->kind == EW_ADD_N) {
    j->ops->add_scalar_f32((const float*)j->in0 + lo, (float*)j->out0 + lo, n, (float)j->scalar,
                           j->stream);
  } else if (j->f64) {
    j->ops->kepler_f64((const double*)j->in0 + lo, (const double*)j->in1 + lo,
                       (double*)j->out0 + lo, (double*)j->out1 + lo, n);
  } else {
    j->ops->kepler_f32((const float*)j->in0 + lo, (const float*)j->in1 + lo, (float*)j->out0 + lo,
                       (float*)j->out1 + lo, n);
  }
  stream_fence(j->stream);
}

/* Runs j over its count, on threads when its arrays are large; bytes_per is the memory one
 * element moves (Kepler, bound by arithmetic, passes a larger figure: its work per byte). */
static void ew_run(ew_job_t* j, int64_t bytes_per) {
  if (j->count <= 0) {
    return;
  }
  j->ops = ops();
  int64_t bytes = j->count > INT64_MAX / bytes_per ? INT64_MAX : j->count * bytes_per;
  run_parts(parts_for(bytes), ew_part, j);
}

/* 1 when an elementwise job of count elements moving bytes_per bytes each is too small to
 * split over two threads whatever the setting: it then runs as one direct call. */
static int ew_small(int64_t count, int64_t bytes_per) {
  return count < 2 * PF__K_PAR_MIN_BYTES / bytes_per;
}

/* Below this many elements an elementwise loop runs as plain scalar code: the vector loops'
 * setup costs more than they save. One IEEE operation per element either way, so the results
 * are the same bits. */
#define PF__K_SCALAR_MAX 8

/* add_n of either element type, as a job (split over threads, streamed where large). */
static void addn_run(int f64, const void* x, void* out, int64_t count, double n) {
  size_t elem = f64 ? sizeof(double) : sizeof(float);
  ew_job_t j = {.kind = EW_ADD_N,
                .f64 = f64,
                .in0 = x,
                .out0 = out,
                .count = count,
                .scalar = n,
                .stream = ew_stream(count, elem, out != x)};
  ew_run(&j, 2 * (int64_t)elem);
}

void pf__k_add_n_f32(const float* x, float* out, int64_t count, float n) {
  if (count < PF__K_SCALAR_MAX) {
    for (int64_t i = 0; i < count; ++i)
      out[i] = x[i] + n;
    return;
  }
  if (ew_small(count, 2 * (int64_t)sizeof(float))) { /* no job, no split */
    ops()->add_scalar_f32(x, out, count, n, 0);
    return;
  }
  addn_run(0, x, out, count, n);
}

void pf__k_add_n_f64(const double* x, double* out, int64_t count, double n) {
  if (count < PF__K_SCALAR_MAX) {
    for (int64_t i = 0; i < count; ++i)
      out[i] = x[i] + n;
    return;
  }
  if (ew_small(count, 2 * (int64_t)sizeof(double))) {
    ops()->add_scalar_f64(x, out, count, n, 0);
    return;
  }
  addn_run(1, x, out, count, n);
}

/* vector_add of either element type. */
static void vadd_run(int f64, const void* b, int64_t nb, const void* c, void* a, int64_t count) {
  if (nb <= 0) {
    return;
  }
  size_t elem = f64 ? sizeof(double) : sizeof(float);
  ew_job_t j = {.kind = EW_VADD,
                .f64 = f64,
                .in0 = b,
                .in1 = c,
                .out0 = a,
                .count = count,
                .nb = nb,
                .stream = ew_stream(count, elem, a != c && a != b)};
  ew_run(&j, 3 * (int64_t)elem);
}

void pf__k_vector_add_f32(const float* b, int64_t nb, const float* c, float* a, int64_t count) {
  vadd_run(0, b, nb, c, a, count);
}

void pf__k_vector_add_f64(const double* b, int64_t nb, const double* c, double* a, int64_t count) {
  vadd_run(1, b, nb, c, a, count);
}

/* One Kepler solve costs about as much time as moving this many bytes (17-60 ns per element
 * in vector lanes, bench_kernels; the scalar solver took 180 ns, and 4096 was this figure). */
#define PF__K_KEPLER_BYTES_PER 512

void pf__k_kepler_f32(const float* mean_anomaly, const float* ecc, float* sin_e, float* cos_e,
                      int64_t count) {
  ew_job_t j = {NULL, EW_KEPLER, 0, mean_anomaly, ecc, sin_e, cos_e, count, 0, 0.0, 0};
  ew_run(&j, PF__K_KEPLER_BYTES_PER);
}

void pf__k_kepler_f64(const double* mean_anomaly, const double* ecc, double* sin_e, double* cos_e,
                      int64_t count) {
  ew_job_t j = {NULL, EW_KEPLER, 1, mean_anomaly, ecc, sin_e, cos_e, count, 0, 0.0, 0};
  ew_run(&j, PF__K_KEPLER_BYTES_PER);
}

/* ---- rms_norm, rms_norm_fwd, rms_norm_bwd ---- */

typedef struct {
  const pf__k_simd_t* ops;
  int f64;
  int bwd;
  const void* x;
  const void* ct;     /* bwd: the cotangent */
  void* out;          /* out, or dx */
  void* inv_store;    /* fwd: inv_rms to store, or NULL */
  const void* inv_in; /* bwd: inv_rms given */
  int64_t rows, cols;
  double eps;
  int stream;      /* non-temporal stores (large, not in place) */
  int pages;       /* stream: long spans read a few pages at a time (scale_pages) */
  int prefetch;    /* prefetch the next row while writing one */
  int64_t seg_len; /* elements per segment of a row */
  int64_t segs;    /* segments per row */
  /* 1 / cols: a forward row's mean is a multiply, not a division, on the path from its sum to
   * its scale (3% at 16 KiB). One rounding more, in double: far below float32's resolution;
   * float64 results may move in the last bit, within the documented error. */
  double inv_cols;
} rms_job_t;

/* A row split over threads (rows fewer than threads): its segments' sums, then its writes. Kept
 * out of rms_job_t, whose initializer would otherwise clear these 512 bytes on every call. */
typedef struct {
  rms_job_t* job;
  int64_t row;
  double seg_sum[PF__K_MAX_SEGS];
  double coef_a, coef_b; /* fwd: the scale in coef_a; bwd: dx = a ct - b x */
} rms_split_t;

static size_t elem_of(const rms_job_t* j) {
  return j->f64 ? sizeof(double) : sizeof(float);
}

static const void* row_in(const rms_job_t* j, const void* base, int64_t r) {
  return (const char*)base + (size_t)(r * j->cols) * elem_of(j);
}

/* Segment s of row r: sum x^2 (fwd) or ct x (bwd) over it. */
static double seg_dot(const rms_job_t* j, int64_t r, int64_t s) {
  int64_t lo = s * j->seg_len;
  int64_t len = (j->cols - lo < j->seg_len) ? j->cols - lo : j->seg_len;
  const void* x = row_in(j, j->x, r);
  const void* a = j->bwd ? row_in(j, j->ct, r) : x;
  if (j->f64) {
    return j->ops->dot_f64((const double*)a + lo, (const double*)x + lo, len);
  }
  return j->ops->dot_f32((const float*)a + lo, (const float*)x + lo, len);
}

/* sum a[i] * b[i] over n floats with every product in double: the fallback for a float-lane
 * sum that may have overflowed or underflowed. */
static double dot_f32_wide(const float* a, const float* b, int64_t n) {
  double lane[8] = {0};
  int64_t i = 0;
  for (; n - i >= 8; i += 8) {
    for (int k = 0; k < 8; ++k) {
      lane[k] += (double)a[i + k] * b[i + k];
    }
  }
  double total = 0.0;
  for (int k = 0; k < 8; ++k) {
    total += lane[k];
  }
  for (; i < n; ++i) {
    total += (double)a[i] * b[i];
  }
  return total;
}

/* The row's total from its segment sums (added in order, with Neumaier's compensation). Float
 * products overflow beyond 3e38 and lose bits below 1e-38; a float-lane total outside
 * [2^-60, DBL_MAX] may have done either (or met a NaN), and only then is the row summed again
 * with double products. Underflow cannot matter above 2^-60: it loses at most 2^-149 per
 * product. */
static double row_total(const rms_job_t* j, int64_t r, const double* seg_sum) {
  double total = 0.0;
  if (j->segs == 1) {
    /* What the loop gives for one term, without it: the sum, or NaN where it is not finite. */
    total = seg_sum[0] + (seg_sum[0] - seg_sum[0]);
  } else {
    double comp = 0.0;
    for (int64_t s = 0; s < j->segs; ++s) {
      double t = total + seg_sum[s];
      comp +=
          (fabs(total) >= fabs(seg_sum[s])) ? (total - t) + seg_sum[s] : (seg_sum[s] - t) + total;
      total = t;
    }
    total += comp;
  }
  if (j->f64 || (fabs(total) >= 0x1p-60 && fabs(total) <= DBL_MAX)) {
    return total;
  }
  const float* x = row_in(j, j->x, r);
  const float* a = j->bwd ? row_in(j, j->ct, r) : x;
  return dot_f32_wide(a, x, j->cols);
}

/* 2^k as two factors, each a normal double for |k| <= 2044 (2^k alone is not one beyond
 * 2^1023): v * f.a * f.b is v scaled by 2^k exactly wherever neither product is subnormal. */
typedef struct {
  double a, b;
} pow2_t;

static pow2_t pow2_of(int k) {
  pow2_t f = {ldexp(1.0, k / 2), ldexp(1.0, k - k / 2)};
  return f;
}

/* The exponent k of 2^k, the power of two just above v > 0 (frexp's): v 2^-k lies in [0.5, 1). */
static int exponent_of(double v) {
  int k;
  frexp(v, &k);
  return k;
}

/* 1 for a float64 row whose total (sum of squares) the plain inv = 1 / sqrt(total / cols + eps)
 * turns into a result exact to rounding: the total is finite, and either its squares lost
 * nothing that matters to underflow (each loses at most 2^-1075, cols < 2^62 of them at most
 * 2^-1013, below 2^-113 of a total of 2^-900) or eps outweighs all they can have lost. A NaN total
 * fails: the row is then summed again (inv_rms_scaled_f64), which tells an overflow from a NaN in
 * the row. */
static int f64_total_in_range(double total, double eps) {
  return total <= DBL_MAX && (total >= 0x1p-900 || eps >= 0x1p-1000);
}

/* 1 / rms of a float64 row whose total is out of f64_total_in_range: with a NaN in the row, NaN;
 * with an infinity, 0 (1 / sqrt(inf), as the plain formula gives); a row of zeros 1 / sqrt(eps).
 * Else its squares overflowed (|x| > 1e154) or may have underflowed (a total below 2^-900, |x|
 * below about 1e-136, with eps below 2^-1000), and the row is summed again scaled by 2^-k, 2^k
 * the power of two just above its largest |x| (exact scaling, Neumaier's compensation), with eps
 * on the same scale:
 *   inv = 2^-k / sqrt(mean((x 2^-k)^2) + eps 2^-2k),
 * where eps 2^-2k beyond DBL_MAX means that eps outweighs the rest: inv = 1 / sqrt(eps). When
 * that inv is no normal double (an rms above 2^1022, or a row of subnormals with eps ~ 0, whose
 * inv_rms exceeds DBL_MAX although its outputs are ordinary numbers), the row is written here,
 * as (x 2^-k) * (inv 2^k), and *written is set. Cold: rows of such values only. */
__attribute__((noinline, cold)) static double inv_rms_scaled_f64(const rms_job_t* j, int64_t r,
                                                                 int* written) {
  const double* x = row_in(j, j->x, r);
  int64_t cols = j->cols;
  double m = 0.0;
  for (int64_t c = 0; c < cols; ++c) {
    double v = fabs(x[c]);
    if (v != v)
      return v;
    m = v > m ? v : m;
  }
  if (isinf(m))
    return 0.0;
  if (m == 0.0)
    return 1.0 / sqrt(j->eps);
  int k = exponent_of(m);
  pow2_t down = pow2_of(-k);
  double s = 0.0, comp = 0.0;
  for (int64_t c = 0; c < cols; ++c) {
    double q = x[c] * down.a * down.b;
    double sq = q * q;
    double t = s + sq;
    comp += (s >= sq) ? (s - t) + sq : (sq - t) + s;
    s = t;
  }
  double es = ldexp(j->eps, -2 * k);
  if (isinf(es))
    return 1.0 / sqrt(j->eps);
  double scaled_inv = 1.0 / sqrt((s + comp) * j->inv_cols + es); /* inv 2^k */
  double inv = ldexp(scaled_inv, -k);
  if (inv >= DBL_MIN && inv <= DBL_MAX)
    return inv;
  double* y = (double*)j->out + r * cols;
  for (int64_t c = 0; c < cols; ++c) {
    y[c] = (x[c] * down.a * down.b) * scaled_inv;
  }
  *written = 1;
  return inv;
}

/* 1 when the n doubles at p are all zeros (of either sign). */
static int all_zero_f64(const double* p, int64_t n) {
  uint64_t bits = 0;
  for (int64_t c = 0; c < n; ++c) {
    uint64_t u;
    memcpy(&u, p + c, sizeof u);
    bits |= u << 1; /* the sign bit left out */
  }
  return bits == 0;
}

/* 1 when rms_norm_bwd's row coefficients, a = inv and b = inv^3 * mean (total = cols * mean),
 * carry the row's dx to rounding in the vector loop (dx = a ct - b x in the element type): b, as
 * that type, neither overflows nor lost bits to underflow (0 only where mean is), and for
 * float64 inv^3 did neither and the total (ct x summed in double) is finite and did not lose bits
 * to underflow either. A float64 total of 0 is also what products that all underflowed give (x
 * 1e-100, ct 1e-250, where b x is of the order of a ct: dx was taken as inv ct, wrong in sign
 * and size: review), so it is in range only where row r's ct or x is all zeros (a masked row
 * costs one more read of its ct); other rows of total 0 are summed again, scaled. float32 values
 * and their inv^3 always fit a double, and so do their products. */
static int bwd_coefs_in_range(const rms_job_t* j, int64_t r, double total, double inv3, double b,
                              double inv) {
  /* and b x cannot overflow: |b x_i| <= |b| ||x|| = |b| sqrt(cols) / inv, kept below 2^-10 of
   * the type's largest value, so that an overflow of a ct (not of b x) means a dx within 2^-10
   * of overflowing itself. Where both overflowed, dx, their finite difference, came out NaN or
   * infinite (review) */
  double bx = fabs(b) / inv * sqrt((double)j->cols); /* NaN or inf for inv 0: out of range */
  if (!j->f64) {
    return fabs(b) <= FLT_MAX && (fabs(b) >= FLT_MIN || b == 0.0) && bx <= FLT_MAX * 0x1p-10;
  }
  return inv3 >= DBL_MIN && inv3 <= DBL_MAX && fabs(total) <= DBL_MAX && bx <= DBL_MAX * 0x1p-10 &&
         (total == 0.0 ? all_zero_f64(row_in(j, j->ct, r), j->cols) ||
                             all_zero_f64(row_in(j, j->x, r), j->cols)
                       : fabs(total) >= 0x1p-900 && fabs(b) >= DBL_MIN && fabs(b) <= DBL_MAX);
}

/* dx of a row whose coefficients are out of bwd_coefs_in_range; returns 0 (nothing written) where
 * the plain formula is what it gives anyway (an inv_rms or a value that is not finite). float32:
 * every term in double, each dx rounded once. float64: x and ct scaled by 2^-kx and 2^-kc, the
 * powers of two just above their largest magnitudes (exact), then with u = inv 2^kx (of the order
 * of 1 / rms(x 2^-kx)) and the scaled mean m' = mean((ct 2^-kc)(x 2^-kx)):
 *   dx = 2^kc inv ((ct 2^-kc) - (x 2^-kx) u^2 m'),
 * whose every intermediate is an ordinary number. Cold: rows of extreme values only. */
__attribute__((noinline, cold)) static int bwd_row_scaled(const rms_job_t* j, int64_t r, double inv,
                                                          double b) {
  int64_t cols = j->cols;
  if (!j->f64) {
    const float* x = row_in(j, j->x, r);
    const float* ct = row_in(j, j->ct, r);
    float* dx = (float*)j->out + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      dx[c] = (float)(inv * ct[c] - b * x[c]);
    }
    return 1;
  }
  const double* x = row_in(j, j->x, r);
  const double* ct = row_in(j, j->ct, r);
  double* dx = (double*)j->out + r * cols;
  if (!(inv > 0.0 && inv <= DBL_MAX))
    return 0;
  double mx = 0.0, mc = 0.0;
  for (int64_t c = 0; c < cols; ++c) {
    double vx = fabs(x[c]), vc = fabs(ct[c]);
    if (!(vx <= DBL_MAX && vc <= DBL_MAX))
      return 0;
    mx = vx > mx ? vx : mx;
    mc = vc > mc ? vc : mc;
  }
  if (mx == 0.0 || mc == 0.0) { /* mean 0: dx = inv ct */
    for (int64_t c = 0; c < cols; ++c) {
      dx[c] = inv * ct[c];
    }
    return 1;
  }
  int kx = exponent_of(mx), kc = exponent_of(mc);
  pow2_t sx = pow2_of(-kx), sc = pow2_of(-kc);
  double s = 0.0, comp = 0.0;
  for (int64_t c = 0; c < cols; ++c) {
    double p = (ct[c] * sc.a * sc.b) * (x[c] * sx.a * sx.b);
    double t = s + p;
    comp += (fabs(s) >= fabs(p)) ? (s - t) + p : (p - t) + s;
    s = t;
  }
  double u = ldexp(inv, kx);
  double g = u * u * ((s + comp) / (double)cols);
  int ki = exponent_of(inv);
  double fi = ldexp(inv, -ki); /* inv = fi 2^ki, fi in [0.5, 1) */
  pow2_t up = pow2_of(ki + kc);
  for (int64_t c = 0; c < cols; ++c) {
    double v = (ct[c] * sc.a * sc.b) - (x[c] * sx.a * sx.b) * g;
    dx[c] = (v * fi) * up.a * up.b;
  }
  return 1;
}

/* Sets the row's coefficients from its total; returns 0 when the row was written here (a
 * float32 scale that is no normal float: beyond FLT_MAX, a row of subnormals with eps ~ 0, or
 * below FLT_MIN, a row near FLT_MAX or a large eps, whose results fit float; or a row of extreme
 * values, see inv_rms_scaled_f64 and bwd_row_scaled). */
static int row_coefs(rms_job_t* j, int64_t r, double total, double* a, double* b) {
  if (j->bwd) {
    double inv = j->f64 ? ((const double*)j->inv_in)[r] : ((const float*)j->inv_in)[r];
    double mean = total / (double)j->cols;
    double inv3 = inv * inv * inv;
    double coef = inv3 * mean;
    if (__builtin_expect(!bwd_coefs_in_range(j, r, total, inv3, coef, inv), 0) &&
        bwd_row_scaled(j, r, inv, coef)) {
      return 0;
    }
    *a = inv;
    *b = j->f64 ? coef : (double)(float)coef;
    return 1;
  }
  double inv;
  int written = 0;
  double mean_sq = j->cols > 0 ? total * j->inv_cols : 0.0;
  double denom = mean_sq + j->eps;
  /* float64: mean + eps beyond DBL_MAX (a huge eps) gave inv 0 and a row of zeros: scaled
   * (review) */
  if (__builtin_expect(!j->f64 || (f64_total_in_range(total, j->eps) && denom <= DBL_MAX), 1)) {
    inv = 1.0 / sqrt(denom);
  } else {
    inv = inv_rms_scaled_f64(j, r, &written);
  }
  if (j->inv_store != NULL) {
    if (j->f64) {
      ((double*)j->inv_store)[r] = inv;
    } else {
      ((float*)j->inv_store)[r] = (float)inv;
    }
  }
  *a = inv;
  *b = 0.0;
  if (written) {
    return 0;
  }
  /* below FLT_MIN the scale as a float lost bits, or all of them: eps 1e84 on rows of 1e38 was
   * 5e-4 off, eps 1e92 wrote zeros (review) */
  if (!j->f64 && (inv > FLT_MAX || (inv < FLT_MIN && inv > 0.0))) {
    const float* x = row_in(j, j->x, r);
    float* y = (float*)j->out + r * j->cols;
    for (int64_t c = 0; c < j->cols; ++c) {
      y[c] = (float)(x[c] * inv);
    }
    return 0;
  }
  return 1;
}

/* Spans written in pages order so far (pf__k_stream_pages_spans). */
static atomic_llong pages_spans = 0;

long long pf__k_stream_pages_spans(void) {
  return atomic_load_explicit(&pages_spans, memory_order_relaxed);
}

/* Writes elements [lo, hi) of row r from its coefficients. */
static void row_write(const rms_job_t* j, int64_t r, int64_t lo, int64_t hi, double a, double b) {
  int64_t n = hi - lo;
  size_t off = (size_t)(r * j->cols + lo);
  const void* next = (j->prefetch && r + 1 < j->rows) ? row_in(j, j->x, r + 1) : NULL;
  /* a row too long for L1 with its output, not streamed (nor prefetched: big rows in place
   * are neither, and go backward too): scaled from its end, which its sum read last and L1
   * still holds */
  int back = !j->stream && !j->prefetch && n > PF__K_BACK_MIN_ROW_BYTES / (int64_t)elem_of(j);
  /* a span that prefetches nothing, long enough for whole runs of pages */
  int pages = j->pages && next == NULL && n >= PF__K_PAGES_MIN_BYTES / (int64_t)elem_of(j);
  if (pages) {
    atomic_fetch_add_explicit(&pages_spans, 1, memory_order_relaxed);
  }
  if (j->f64) {
    const double* x = (const double*)j->x + off;
    double* y = (double*)j->out + off;
    if (j->bwd) {
      j->ops->axpby_f64((const double*)j->ct + off, x, y, n, a, b, j->stream);
    } else if (pages) {
      j->ops->scale_pages_f64(x, y, n, a);
    } else if (back) {
      j->ops->scale_back_f64(x, y, n, a);
    } else {
      j->ops->scale_f64(x, y, n, a, next ? (const double*)next + lo : NULL, j->stream);
    }
  } else {
    const float* x = (const float*)j->x + off;
    float* y = (float*)j->out + off;
    if (j->bwd) {
      j->ops->axpby_f32((const float*)j->ct + off, x, y, n, (float)a, (float)b, j->stream);
    } else if (pages) {
      j->ops->scale_pages_f32(x, y, n, (float)a);
    } else if (back) {
      j->ops->scale_back_f32(x, y, n, (float)a);
    } else {
      j->ops->scale_f32(x, y, n, (float)a, next ? (const float*)next + lo : NULL, j->stream);
    }
  }
}

/* Rows [r0, r1) on one thread. A row of up to PF__K_FUSE_MAX_ROW_BYTES is scaled in the same
 * pass that sums the next row (scale_dot) unless its output is streamed (then the prefetch does
 * that overlap). */
static void rows_serial(rms_job_t* j, int64_t r0, int64_t r1) {
  double seg_sum[PF__K_MAX_SEGS];
  int fuse = j->segs == 1 && !j->bwd && !j->stream &&
             j->cols <= PF__K_FUSE_MAX_ROW_BYTES / (int64_t)elem_of(j);
  int have_next = 0; /* seg_sum[0] already holds row r's sum */
  for (int64_t r = r0; r < r1; ++r) {
    if (!have_next) {
      for (int64_t s = 0; s < j->segs; ++s) {
        seg_sum[s] = seg_dot(j, r, s);
      }
    }
    have_next = 0;
    double a, b;
    if (!row_coefs(j, r, row_total(j, r, seg_sum), &a, &b)) {
      continue;
    }
    if (fuse && r + 1 < r1) {
      size_t off = (size_t)(r * j->cols);
      size_t next = off + (size_t)j->cols;
      if (j->f64) {
        const double* x = j->x;
        seg_sum[0] = j->ops->scale_dot_f64(x + off, (double*)j->out + off, j->cols, a, x + next);
      } else {
        const float* x = j->x;
        seg_sum[0] =
            j->ops->scale_dot_f32(x + off, (float*)j->out + off, j->cols, (float)a, x + next);
      }
      have_next = 1;
    } else {
      row_write(j, r, 0, j->cols, a, b);
    }
  }
}

static void rows_part(void* ctx, int part, int parts) {
  rms_job_t* j = ctx;
  int64_t r0, r1;
  split(j->rows, part, parts, 1, &r0, &r1);
  rows_serial(j, r0, r1);
  stream_fence(j->stream);
}

/* Within the split row: this part's segment sums (segs_part), then its share of the writes. */
static void segs_part(void* ctx, int part, int parts) {
  rms_split_t* sp = ctx;
  int64_t s0, s1;
  split(sp->job->segs, part, parts, 1, &s0, &s1);
  for (int64_t s = s0; s < s1; ++s) {
    sp->seg_sum[s] = seg_dot(sp->job, sp->row, s);
  }
}

static void write_part(void* ctx, int part, int parts) {
  rms_split_t* sp = ctx;
  int64_t lo, hi;
  split(sp->job->cols, part, parts, PF__K_SPLIT_ALIGN, &lo, &hi);
  if (hi > lo) {
    row_write(sp->job, sp->row, lo, hi, sp->coef_a, sp->coef_b);
  }
  stream_fence(sp->job->stream);
}

static void rms_run(rms_job_t* j) {
  /* No columns: nothing to write but rms_norm_fwd's inv_rms (a (huge, 0) array is valid, and
   * visiting its rows one by one would take hours for nothing); a negative count: nothing, as
   * kmath.h says (it wrote inv_rms and formed pointers out of range: review). */
  if (j->rows <= 0 || j->cols < 0 || (j->cols == 0 && (j->bwd || j->inv_store == NULL))) {
    return;
  }
  j->ops = ops();
  int64_t cols = j->cols > 0 ? j->cols : 0;
  j->seg_len = PF__K_SEG_MIN;
  if (cols > PF__K_SEG_MIN * PF__K_MAX_SEGS) {
    int64_t per = (cols + PF__K_MAX_SEGS - 1) / PF__K_MAX_SEGS;
    j->seg_len = (per + PF__K_SPLIT_ALIGN - 1) / PF__K_SPLIT_ALIGN * PF__K_SPLIT_ALIGN;
  }
  j->segs = (cols + j->seg_len - 1) / j->seg_len;
  j->inv_cols = cols > 0 ? 1.0 / (double)cols : 0.0;
  /* rows * cols * elem could overflow for absurd shapes; dividing keeps the test exact. */
  int64_t elem = (int64_t)elem_of(j);
  int64_t limit = PF__K_BIG_BYTES / elem;
  int big = cols >= limit || (cols > 0 && j->rows >= (limit + cols - 1) / cols);
  /* bwd's dx may equal x or the cotangent (then written in place, not streamed) */
  j->stream = big && j->x != j->out && (!j->bwd || j->ct != j->out);
  j->pages = j->stream && !j->bwd && pf__k_stream_order_get() == PF__K_STREAM_PAGES;
  j->prefetch = big && !j->bwd && j->rows > 1 && cols <= PF__K_PREFETCH_MAX_ROW_BYTES / elem;
  int64_t bytes =
      (cols > 0 && j->rows > INT64_MAX / cols / elem) ? INT64_MAX : j->rows * cols * elem;
  int parts = parts_for(bytes);
  if (parts <= 1 || (int64_t)parts <= j->rows) {
    run_parts(parts, rows_part, j);
  } else {
    rms_split_t sp;
    sp.job = j;
    for (int64_t r = 0; r < j->rows; ++r) {
      sp.row = r;
      run_parts(parts < j->segs ? parts : (int)j->segs, segs_part, &sp);
      if (row_coefs(j, r, row_total(j, r, sp.seg_sum), &sp.coef_a, &sp.coef_b)) {
        run_parts(parts, write_part, &sp);
      }
    }
  }
}

/* rms_norm, rms_norm_fwd (inv_store not NULL) and rms_norm_bwd (bwd) of either element type.
 * The job's fields are assigned one by one (rms_run sets the others): an initializer would
 * clear the whole struct first, a `rep stos` that costs small calls about 10%. */
static void rms_start(int f64, int bwd, const void* x, const void* ct, void* out, void* inv_store,
                      const void* inv_in, int64_t rows, int64_t cols, double eps) {
  rms_job_t j;
  j.f64 = f64;
  j.bwd = bwd;
  j.x = x;
  j.ct = ct;
  j.out = out;
  j.inv_store = inv_store;
  j.inv_in = inv_in;
  j.rows = rows;
  j.cols = cols;
  j.eps = eps;
  rms_run(&j);
}

static void fwd_run(int f64, const void* x, void* out, void* inv_rms, int64_t rows, int64_t cols,
                    double eps) {
  rms_start(f64, 0, x, NULL, out, inv_rms, NULL, rows, cols, eps);
}

static void bwd_run(int f64, const void* x, const void* inv_rms, const void* ct, void* dx,
                    int64_t rows, int64_t cols) {
  rms_start(f64, 1, x, ct, dx, NULL, inv_rms, rows, cols, 0.0);
}

void pf__k_rms_norm_f32(const float* x, float* out, int64_t rows, int64_t cols, double eps) {
  fwd_run(0, x, out, NULL, rows, cols, eps);
}

void pf__k_rms_norm_f64(const double* x, double* out, int64_t rows, int64_t cols, double eps) {
  fwd_run(1, x, out, NULL, rows, cols, eps);
}

void pf__k_rms_norm_fwd_f32(const float* x, float* out, float* inv_rms, int64_t rows, int64_t cols,
                            double eps) {
  fwd_run(0, x, out, inv_rms, rows, cols, eps);
}

void pf__k_rms_norm_fwd_f64(const double* x, double* out, double* inv_rms, int64_t rows,
                            int64_t cols, double eps) {
  fwd_run(1, x, out, inv_rms, rows, cols, eps);
}

void pf__k_rms_norm_bwd_f32(const float* x, const float* inv_rms, const float* cotangent, float* dx,
                            int64_t rows, int64_t cols) {
  bwd_run(0, x, inv_rms, cotangent, dx, rows, cols);
}

void pf__k_rms_norm_bwd_f64(const double* x, const double* inv_rms, const double* cotangent,
                            double* dx, int64_t rows, int64_t cols) {
  bwd_run(1, x, inv_rms, cotangent, dx, rows, cols);
}
