/* bench_scaling.c: scaling curves of packfn against TVM-FFI: call cost against argument count,
   global lookup against table size (one hot name, random names, suffix-numbered names) and
   lookups per second and calls per second from 1, 2, 4, ... threads (up to --threads, default
   2), tensor allocation. This file is the driver: the lookup names, timing from threads, the
   reports (CSV, JSON, ratios to stderr) and main; each implementation is a sc_impl_t (scaling.h),
   packfn's in bench_scaling_packfn.c, TVM-FFI's in tvmffi_scaling.cc. */
#define _GNU_SOURCE
#include "scaling.h"
#include "timing.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_REPS      101
#define MAX_THREADS   64 /* --threads: the most threads a series runs on */
#define MAX_POINTS    512

static volatile uint64_t sink;

void sc_fail(const char* impl, const char* what, const char* detail) {
  fprintf(stderr, "bench_scaling: %s %s: %s\n", impl, what, detail ? detail : "failed");
  exit(2);
}

/* ---- the lookup series' names ---- */

static char* names_text[2];  /* kind's names, NUL-terminated, back to back */
static size_t* names_off[2]; /* name i starts at names_text[kind] + names_off[kind][i] */
static int64_t names_made;   /* names of both kinds with i < names_made exist */

/* Makes names of both kinds for i < n (the driver calls it before any setup). */
static void make_names(int64_t n) {
  if (n <= names_made)
    return;
  size_t bytes = 0;
  for (int64_t i = 0; i < n; ++i)
    bytes += (size_t)snprintf(NULL, 0, SC_NAME_PREFIX "%lld", (long long)i) + 1;
  for (int kind = 0; kind < 2; ++kind) {
    free(names_text[kind]);
    free(names_off[kind]);
    names_text[kind] = malloc(bytes);
    names_off[kind] = malloc(sizeof(size_t) * (size_t)(n + 1));
    if (!names_text[kind] || !names_off[kind])
      sc_fail("driver", "names", "out of memory");
  }
  size_t at = 0;
  uint64_t x = 0x2545f4914f6cdd1dULL; /* fixed seed: the same names every run */
  for (int64_t i = 0; i < n; ++i) {
    int len = sprintf(names_text[SC_SUFFIX] + at, SC_NAME_PREFIX "%lld", (long long)i);
    for (int k = 0; k < len; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      names_text[SC_RANDOM][at + (size_t)k] = (char)('a' + (x >> 32) % 26);
    }
    names_text[SC_RANDOM][at + (size_t)len] = '\0';
    names_off[SC_SUFFIX][i] = names_off[SC_RANDOM][i] = at;
    at += (size_t)len + 1;
  }
  names_off[SC_SUFFIX][n] = names_off[SC_RANDOM][n] = at;
  names_made = n;
}

const char* sc_name(int kind, int64_t i) {
  if (i >= names_made)
    sc_fail("driver", "names", "name asked for before make_names");
  return names_text[kind] + names_off[kind][i];
}

size_t sc_name_len(int kind, int64_t i) {
  return names_off[kind][i + 1] - names_off[kind][i] - 1;
}

/* Lookup order for the list series: names of one kind with i < size, drawn at random (with
   repetition, fixed seed), min(size, 2^20) rounded up to a power of two of them: with a big
   table most lookups miss the cache, as in a program that looks up many different names. */
static sc_name_list_t make_list(int kind, int64_t size) {
  int64_t n = 1;
  while (n < size && n < ((int64_t)1 << 20))
    n *= 2;
  const char** names = malloc(sizeof(char*) * (size_t)n);
  size_t* lens = malloc(sizeof(size_t) * (size_t)n);
  if (!names || !lens)
    sc_fail("driver", "lookup list", "out of memory");
  uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)size;
  for (int64_t k = 0; k < n; ++k) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int64_t i = (int64_t)((x >> 11) % (uint64_t)size);
    names[k] = sc_name(kind, i);
    lens[k] = sc_name_len(kind, i);
  }
  return (sc_name_list_t){names, lens, n - 1};
}

static void free_list(sc_name_list_t* list) {
  free((void*)list->names);
  free((void*)list->lens);
}

/* ---- driver ---- */

typedef struct point {
  const char* series;
  const char* impl;
  int64_t x;
  int threads;
  double median, min, max; /* ns per operation, or calls per second for "threads" */
  uint64_t checksum;
  int64_t iters;      /* per loop (per thread in a threads series) */
  int reps;           /* samples */
  double shortest_ns; /* wall time of the shortest sample (the whole loop, not per operation) */
  int resized;        /* threads series: times the loop was re-sized after a short sample */
  int disagrees;      /* its checksum differs from another implementation's: no figure shown */
} point_t;

static point_t points[MAX_POINTS];
static size_t num_points;

static point_t* add_point(const char* series, const char* impl, int64_t x) {
  if (num_points == MAX_POINTS)
    sc_fail("driver", "points", "too many");
  point_t* p = &points[num_points++];
  memset(p, 0, sizeof *p);
  p->series = series;
  p->impl = impl;
  p->x = x;
  return p;
}

static void summarise(point_t* p, double* samples, int reps) {
  pf_bench_summarise(samples, reps, &p->min, &p->median, &p->max);
}

/* Times reps loops (after a warm-up tenth); ns per operation; the checksum must not change. */
static void time_loop(point_t* p, uint64_t (*run)(void*, int64_t), void* state, int64_t iters,
                      int reps) {
  double samples[MAX_REPS];
  p->iters = iters;
  p->reps = reps;
  sink = run(state, iters / 10 > 0 ? iters / 10 : 1);
  for (int r = 0; r < reps; ++r) {
    double t0 = pf_bench_now_ns();
    uint64_t sum = run(state, iters);
    double t1 = pf_bench_now_ns();
    if (r == 0)
      p->checksum = sum;
    else if (sum != p->checksum)
      sc_fail(p->impl, p->series, "checksum changed between repetitions");
    sink = sum;
    samples[r] = (t1 - t0) / (double)iters;
    if (r == 0 || t1 - t0 < p->shortest_ns)
      p->shortest_ns = t1 - t0;
  }
  summarise(p, samples, reps);
}

/* A list series' run: impl's lookup_list_run over one list. */
typedef struct {
  const sc_impl_t* impl;
  void* state;
  const sc_name_list_t* list;
} list_run_t;

static uint64_t run_list(void* ctx, int64_t iters) {
  list_run_t* c = ctx;
  return c->impl->lookup_list_run(c->state, c->list, iters);
}

typedef uint64_t (*run_fn)(void* ctx, int64_t iters);

typedef struct {
  run_fn run;
  void* ctx; /* thread k's: ctx[k] */
  int64_t iters;
  pthread_barrier_t* barrier;
  uint64_t sum;
  double start, end; /* this thread's own clock reads around its loop (monotonic) */
} worker_t;

static void worker_run(worker_t* w) {
  pthread_barrier_wait(w->barrier);
  w->start = pf_bench_now_ns();
  w->sum = w->run(w->ctx, w->iters);
  w->end = pf_bench_now_ns();
}

static void* worker_main(void* arg) {
  worker_run(arg);
  return NULL;
}

/* Samples of the threads series: at least this many, each at least this long, whatever --quick,
 * --iters and --reps say: a sample of a few milliseconds measures thread start-up and the
 * scheduler more than the loop. The loop of one thread alone is sized to THREAD_SAMPLE_NS, above
 * the floor (threads running at once take no less), from the fastest of THREAD_PROBES timed
 * loops (a probe slowed by the machine would make the loop too short). When a sample still comes
 * out under THREAD_MIN_NS (the machine was busy during the probes and then quiet), the loop is
 * re-sized by the shortfall (to THREAD_SAMPLE_NS for the shortest sample) and every sample is
 * measured again, at most THREAD_RESIZES times; a series still short after that is reported. */
#define THREAD_MIN_REPS  7
#define THREAD_MIN_NS    20e6
#define THREAD_SAMPLE_NS 25e6
#define THREAD_PROBES    3
#define THREAD_RESIZES   3

/* One sample: n threads run run(ctx[k], loop) at once; the operations and the wall time from the
 * earliest start to the latest end (*ns), and the threads' checksum (*total). */
static double sample_threads(const char* impl, run_fn run, void* const* ctx, int n, int64_t loop,
                             double* ns, uint64_t* total) {
  pthread_barrier_t barrier;
  pthread_t tid[MAX_THREADS];
  worker_t w[MAX_THREADS];
  pthread_barrier_init(&barrier, NULL, (unsigned)n);
  for (int k = 0; k < n; ++k) {
    w[k] = (worker_t){run, ctx[k], loop, &barrier, 0, 0, 0};
    if (k > 0 && pthread_create(&tid[k], NULL, worker_main, &w[k]) != 0)
      sc_fail(impl, "threads", strerror(errno));
  }
  worker_run(&w[0]);
  *total = 0;
  double start = w[0].start, end = w[0].end;
  for (int k = 0; k < n; ++k) {
    if (k > 0)
      pthread_join(tid[k], NULL);
    *total += w[k].sum;
    start = w[k].start < start ? w[k].start : start;
    end = w[k].end > end ? w[k].end : end;
  }
  pthread_barrier_destroy(&barrier);
  *ns = end - start;
  return (double)n * (double)loop;
}

/* Operations per second with `n` threads running run(ctx[k]) at once (the main thread is thread
 * 0). Each thread reads the clock itself around its own loop; a sample spans the earliest start
 * to the latest end, n * loop length operations. The checksum both implementations agree on is
 * that of one loop of `iters` per thread (run before the samples, also the warm-up); the samples
 * use loops sized to last THREAD_SAMPLE_NS (see above) and must agree with each other. */
static void time_threads(point_t* p, const char* impl, run_fn run, void* const* ctx, int n,
                         int64_t iters, int reps) {
  double samples[MAX_REPS];
  uint64_t check = 0;
  for (int k = 0; k < n; ++k)
    check += run(ctx[k], iters);
  p->checksum = check;
  /* the loop's speed from one thread: a loop of at least 2 ms, the fastest of THREAD_PROBES */
  int64_t probe = iters;
  double once;
  for (;;) {
    double t0 = pf_bench_now_ns();
    sink = run(ctx[0], probe);
    once = pf_bench_now_ns() - t0;
    if (once >= 2e6 || probe > ((int64_t)1 << 40))
      break;
    probe *= 4;
  }
  for (int k = 1; k < THREAD_PROBES; ++k) {
    double t0 = pf_bench_now_ns();
    sink = run(ctx[0], probe);
    double t = pf_bench_now_ns() - t0;
    once = t < once ? t : once;
  }
  int64_t loop = iters;
  if (once < THREAD_SAMPLE_NS)
    loop = (int64_t)((double)probe * THREAD_SAMPLE_NS / once) + 1;
  if (reps < THREAD_MIN_REPS)
    reps = THREAD_MIN_REPS;
  p->reps = reps;
  p->resized = 0;
  double shortest;
  for (;;) {
    shortest = 0;
    uint64_t first = 0;
    for (int r = 0; r < reps; ++r) {
      double ns;
      uint64_t total;
      double ops = sample_threads(impl, run, ctx, n, loop, &ns, &total);
      if (r == 0)
        first = total;
      else if (total != first)
        sc_fail(impl, p->series, "checksum changed between samples");
      sink = total;
      shortest = r == 0 || ns < shortest ? ns : shortest;
      samples[r] = ops / (ns * 1e-9);
    }
    if (shortest >= THREAD_MIN_NS || p->resized == THREAD_RESIZES)
      break;
    /* too short: longer loops by the shortfall (at least 10 % more, at most 8 times as many) */
    double scale = THREAD_SAMPLE_NS / (shortest > 0 ? shortest : 1.0);
    scale = scale < 1.1 ? 1.1 : scale > 8.0 ? 8.0 : scale;
    loop = (int64_t)((double)loop * scale) + 1;
    p->resized++;
  }
  p->iters = loop;
  p->shortest_ns = shortest;
  if (shortest < THREAD_MIN_NS)
    fprintf(stderr,
            "bench_scaling: %s %s %d threads: a sample lasted %.1f ms (< %.0f ms) after %d "
            "re-sizings\n",
            impl, p->series, n, shortest * 1e-6, THREAD_MIN_NS * 1e-6, p->resized);
  summarise(p, samples, reps);
}

typedef struct options {
  int quick;
  int full;
  int reps;
  int64_t iters;
  const char* json_path;
  const char* csv_path;
  const char* only_impl;
  int max_threads; /* the thread series run on 1, 2, 4, ... up to this, and this (--threads) */
} options_t;

/* The next thread count after t (1, 2, 4, 8, ... then max itself), or 0 past max. */
static int next_threads(int t, int max) {
  if (t >= max)
    return 0;
  return t * 2 < max ? t * 2 : max;
}

static const int kArgsFull[] = {1, 2, 4, 8, 16, 32, 64};
static const int kArgsQuick[] = {1, 8, 64};
static const int64_t kLookupFull[] = {10, 100, 1000, 10000, 100000};
static const int64_t kLookupQuick[] = {10, 1000, 100000};
static const int64_t kLookupHuge[] = {10, 100, 1000, 10000, 100000, 1000000};
/* The lookup-threads series' names (its random names are drawn from the first THREADS_TABLE of
   each kind). Names stay registered, so its table is the one the size series left: 2 x 100 000
   names (2 x 1 000 000 with --full). */
#define THREADS_TABLE 1000
static const int64_t kAllocFull[] = {1,       64,      1024,     16384,   262144,
                                     1048576, 4194304, 16777216, 67108864};
static const int64_t kAllocQuick[] = {1, 1024, 1048576, 67108864};

/* Fewer iterations for big allocations: large blocks go to mmap, microseconds each. */
static int64_t alloc_iters(int64_t iters, int64_t nbytes) {
  if (nbytes >= 1048576)
    return iters / 100 > 100 ? iters / 100 : 100;
  if (nbytes >= 65536)
    return iters / 10 > 100 ? iters / 10 : 100;
  return iters;
}

static const int64_t* lookup_sizes(const options_t* opt, size_t* n) {
  if (opt->full) {
    *n = ARRAY_SIZE(kLookupHuge);
    return kLookupHuge;
  }
  *n = opt->quick ? ARRAY_SIZE(kLookupQuick) : ARRAY_SIZE(kLookupFull);
  return opt->quick ? kLookupQuick : kLookupFull;
}

/* The `threads` series at t threads: calls of one shared function, nothing written. */
static void time_calls_threads(const sc_impl_t* impl, int t, const options_t* opt) {
  point_t* p = add_point("threads", impl->name, t);
  void* st = impl->threads_setup();
  void* ctx[MAX_THREADS];
  for (int k = 0; k < t; ++k)
    ctx[k] = st;
  time_threads(p, impl->name, impl->threads_run, ctx, t, opt->iters, opt->reps);
  impl->teardown(st);
  fprintf(
      stderr,
      "%-7s threads %d: %8.3g calls/s (%d samples of %lld calls per thread, shortest %.1f ms%s)\n",
      impl->name, t, p->median, p->reps, (long long)p->iters, p->shortest_ns * 1e-6,
      p->resized ? ", loop re-sized after a short sample" : "");
}

static void run_impl(const sc_impl_t* impl, const options_t* opt) {
  size_t n;
  const int* args = opt->quick ? kArgsQuick : kArgsFull;
  n = opt->quick ? ARRAY_SIZE(kArgsQuick) : ARRAY_SIZE(kArgsFull);
  for (size_t i = 0; impl->args_setup && i < n; ++i) {
    point_t* p = add_point("args", impl->name, args[i]);
    void* st = impl->args_setup(args[i]);
    time_loop(p, impl->args_run, st, opt->iters, opt->reps);
    impl->teardown(st);
    fprintf(stderr, "%-7s args %3d: %8.2f ns\n", impl->name, args[i], p->median);
  }
  const int64_t* sizes = lookup_sizes(opt, &n);
  for (size_t i = 0; impl->lookup_setup && i < n; ++i) {
    point_t* p = add_point("lookup", impl->name, sizes[i]);
    void* st = impl->lookup_setup(sizes[i]);
    time_loop(p, impl->lookup_run, st, opt->iters, opt->reps);
    fprintf(stderr, "%-7s lookup %7lld: hot %7.2f ns", impl->name, (long long)sizes[i], p->median);
    for (int kind = 0; kind < 2; ++kind) {
      sc_name_list_t list = make_list(kind, sizes[i]);
      list_run_t ctx = {impl, st, &list};
      p = add_point(kind == SC_SUFFIX ? "lookup_suffix" : "lookup_random", impl->name, sizes[i]);
      time_loop(p, run_list, &ctx, opt->iters, opt->reps);
      free_list(&list);
      fprintf(stderr, ", %s %7.2f ns", kind == SC_SUFFIX ? "suffix" : "random", p->median);
    }
    fprintf(stderr, "\n");
    impl->teardown(st);
  }
  for (int t = 1; t != 0; t = next_threads(t, opt->max_threads)) {
    /* calls first, so that what the machine gave t threads is measured next to the lookups */
    if (impl->threads_setup)
      time_calls_threads(impl, t, opt);
    if (!impl->lookup_setup)
      continue;
    void* st = impl->lookup_setup(THREADS_TABLE);
    void* same[MAX_THREADS];
    void* own[MAX_THREADS];
    for (int k = 0; k < t; ++k) {
      same[k] = st;
      own[k] = impl->lookup_own_setup(k);
    }
    point_t* p = add_point("lookup_threads", impl->name, t);
    time_threads(p, impl->name, impl->lookup_run, same, t, opt->iters, opt->reps);
    point_t* o = add_point("lookup_threads_own", impl->name, t);
    time_threads(o, impl->name, impl->lookup_run, own, t, opt->iters, opt->reps);
    sc_name_list_t list = make_list(SC_RANDOM, THREADS_TABLE);
    list_run_t ctx = {impl, st, &list};
    void* lists[MAX_THREADS];
    for (int k = 0; k < t; ++k)
      lists[k] = &ctx;
    point_t* q = add_point("lookup_threads_random", impl->name, t);
    time_threads(q, impl->name, run_list, lists, t, opt->iters, opt->reps);
    free_list(&list);
    for (int k = 0; k < t; ++k)
      impl->teardown(own[k]);
    impl->teardown(st);
    fprintf(stderr,
            "%-7s lookup threads %d: one name %8.3g, own name each %8.3g, random %8.3g "
            "lookups/s (shortest samples %.1f, %.1f, %.1f ms; loops re-sized %d, %d, %d times)\n",
            impl->name, t, p->median, o->median, q->median, p->shortest_ns * 1e-6,
            o->shortest_ns * 1e-6, q->shortest_ns * 1e-6, p->resized, o->resized, q->resized);
  }
  sizes = opt->quick ? kAllocQuick : kAllocFull;
  n = opt->quick ? ARRAY_SIZE(kAllocQuick) : ARRAY_SIZE(kAllocFull);
  for (size_t i = 0; impl->alloc_setup && i < n; ++i) {
    point_t* p = add_point("alloc", impl->name, sizes[i]);
    void* st = impl->alloc_setup(sizes[i]);
    time_loop(p, impl->alloc_run, st, alloc_iters(opt->iters, sizes[i]), opt->reps);
    impl->teardown(st);
    fprintf(stderr, "%-7s alloc %9lld B: %8.2f ns\n", impl->name, (long long)sizes[i], p->median);
  }
}

/* Both implementations must agree on each point's checksum; the points that do not are marked,
   and the ratios, the CSV and the JSON leave them out (a figure of different work is no
   result). 1 when any disagrees. */
static int check_agreement(void) {
  int bad = 0;
  for (size_t i = 0; i < num_points; ++i) {
    for (size_t j = i + 1; j < num_points; ++j) {
      const point_t* a = &points[i];
      const point_t* b = &points[j];
      if (strcmp(a->series, b->series) == 0 && a->x == b->x && a->checksum != b->checksum) {
        fprintf(stderr, "bench_scaling: %s %lld: checksum %llu (%s) != %llu (%s)\n", a->series,
                (long long)a->x, (unsigned long long)a->checksum, a->impl,
                (unsigned long long)b->checksum, b->impl);
        points[i].disagrees = points[j].disagrees = 1;
        bad = 1;
      }
    }
  }
  return bad;
}

static FILE* open_out(const char* path) {
  FILE* f = fopen(path, "w");
  if (f == NULL)
    sc_fail("driver", path, strerror(errno));
  return f;
}

static const char* unit_of(const char* series) {
  if (strcmp(series, "threads") == 0)
    return "calls_per_s";
  return strncmp(series, "lookup_threads", 14) == 0 ? "lookups_per_s" : "ns_per_op";
}

/* The point of series, impl and x; NULL when there is none or its implementations disagree. */
static const point_t* find_point(const char* series, const char* impl, int64_t x) {
  for (size_t i = 0; i < num_points; ++i)
    if (strcmp(points[i].series, series) == 0 && strcmp(points[i].impl, impl) == 0 &&
        points[i].x == x)
      return points[i].disagrees ? NULL : &points[i];
  return NULL;
}

/* The lookup ratios the docs quote, to stderr: packfn / TVM-FFI time per size and kind,
   suffix-numbered / random names, and 2-thread / 1-thread throughput. */
static void print_lookup_ratios(const options_t* opt) {
  static const char* const kinds[] = {"lookup", "lookup_random", "lookup_suffix"};
  static const char* const impls[] = {"packfn", "tvmffi"};
  size_t n;
  const int64_t* sizes = lookup_sizes(opt, &n);
  for (size_t i = 0; i < n; ++i) {
    fprintf(stderr, "ratios %7lld names:", (long long)sizes[i]);
    for (size_t k = 0; k < 3; ++k) {
      const point_t* a = find_point(kinds[k], "packfn", sizes[i]);
      const point_t* b = find_point(kinds[k], "tvmffi", sizes[i]);
      if (a && b)
        fprintf(stderr, " %s packfn/tvmffi %.2f;", k == 0 ? "hot" : kinds[k] + 7,
                a->median / b->median);
    }
    for (size_t m = 0; m < 2; ++m) {
      const point_t* a = find_point("lookup_suffix", impls[m], sizes[i]);
      const point_t* b = find_point("lookup_random", impls[m], sizes[i]);
      if (a && b)
        fprintf(stderr, " %s suffix/random %.2f;", impls[m], a->median / b->median);
    }
    fprintf(stderr, "\n");
  }
  for (size_t m = 0; m < 2; ++m) {
    static const char* const tseries[] = {"lookup_threads", "lookup_threads_own",
                                          "lookup_threads_random"};
    /* What the machine gave t threads in this run: calls of one function, nothing written
     * (the `threads` series). On a 2-core VM two threads get 1.2 to 2.0 between runs; a lookup
     * series that scales as well as work that shares nothing has the same ratio. */
    const point_t* c1 = find_point("threads", impls[m], 1);
    for (int t = next_threads(1, opt->max_threads); t != 0; t = next_threads(t, opt->max_threads)) {
      const point_t* ct = find_point("threads", impls[m], t);
      double calls = c1 && ct ? ct->median / c1->median : 0;
      for (size_t k = 0; k < 3; ++k) {
        const char* series = tseries[k];
        const point_t* one = find_point(series, impls[m], 1);
        const point_t* many = find_point(series, impls[m], t);
        if (!one || !many)
          continue;
        double r = many->median / one->median;
        if (calls > 0)
          fprintf(stderr,
                  "ratios %s %s: %d threads / 1 thread %.2f (calls sharing nothing: %.2f; "
                  "lookups / calls %.2f)\n",
                  impls[m], series, t, r, calls, r / calls);
        else
          fprintf(stderr, "ratios %s %s: %d threads / 1 thread %.2f\n", impls[m], series, t, r);
      }
    }
  }
}

/* The shortest sample of the thread series (the usage text promises at least
   THREAD_MIN_NS), to stderr, with the number of re-sized series. */
static void print_thread_samples(void) {
  const point_t* low = NULL;
  int series = 0, resized = 0;
  for (size_t i = 0; i < num_points; ++i) {
    const point_t* p = &points[i];
    if (strcmp(unit_of(p->series), "ns_per_op") == 0 || p->disagrees)
      continue;
    series++;
    resized += p->resized > 0;
    if (low == NULL || p->shortest_ns < low->shortest_ns)
      low = p;
  }
  if (low == NULL)
    return;
  fprintf(stderr,
          "bench_scaling: threads series: shortest sample %.1f ms (%s %s, %d thread%s; at least "
          "%.0f ms promised), %d of %d series re-sized after a short sample\n",
          low->shortest_ns * 1e-6, low->impl, low->series, (int)low->x, low->x == 1 ? "" : "s",
          THREAD_MIN_NS * 1e-6, resized, series);
}

static void write_csv(FILE* f) {
  /* shortest_ms last: plot_scaling.gp.sh reads columns 1-7 */
  fprintf(f, "series,impl,x,unit,median,min,max,shortest_ms\n");
  for (size_t i = 0; i < num_points; ++i) {
    const point_t* p = &points[i];
    if (p->disagrees)
      continue;
    fprintf(f, "%s,%s,%lld,%s,%.4f,%.4f,%.4f,%.3f\n", p->series, p->impl, (long long)p->x,
            unit_of(p->series), p->median, p->min, p->max, p->shortest_ns * 1e-6);
  }
}

static void write_json(FILE* f, const options_t* opt) {
  fprintf(f, "{\n  \"meta\": {\"iters\": %lld, \"reps\": %d, \"quick\": %s, \"tvmffi\": %s, ",
          (long long)opt->iters, opt->reps, opt->quick ? "true" : "false",
#ifdef PF_BENCH_HAVE_TVMFFI
          "true"
#else
          "false"
#endif
  );
  pf_bench_conditions_json(f);
  fprintf(f, "},\n");
  fprintf(f, "  \"x\": {\"args\": \"number of int arguments\", \"lookup\": \"registered names\", "
             "\"lookup_random\": \"registered names per kind\", \"lookup_suffix\": "
             "\"registered names per kind\", \"lookup_threads\": \"threads\", "
             "\"lookup_threads_random\": \"threads\", \"lookup_threads_own\": \"threads\", "
             "\"alloc\": \"tensor bytes\", \"threads\": \"threads\"},\n  \"points\": [");
  int first = 1;
  for (size_t i = 0; i < num_points; ++i) {
    const point_t* p = &points[i];
    if (p->disagrees)
      continue;
    fprintf(f,
            "%s\n    {\"series\": \"%s\", \"impl\": \"%s\", \"x\": %lld, \"unit\": \"%s\", "
            "\"median\": %.4f, \"min\": %.4f, \"max\": %.4f, \"checksum\": %llu, "
            "\"iters\": %lld, \"samples\": %d, \"shortest_ms\": %.3f, \"resized\": %d}",
            first ? "" : ",", p->series, p->impl, (long long)p->x, unit_of(p->series), p->median,
            p->min, p->max, (unsigned long long)p->checksum, (long long)p->iters, p->reps,
            p->shortest_ns * 1e-6, p->resized);
    first = 0;
  }
  fprintf(f, "\n  ]\n}\n");
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: bench_scaling [--quick | --full] [--iters N] [--reps R] [--impl packfn|tvmffi]\n"
          "                     [--threads N]\n"
          "                     [--json FILE] [--csv FILE]\n"
          "Series: args (1..64 int arguments); lookup, lookup_random, lookup_suffix (one hot\n"
          "name, random names, suffix-numbered names; tables of 10..100000 names of each kind,\n"
          "to 1000000 with --full); lookup_threads, lookup_threads_own, lookup_threads_random\n"
          "(lookups/s from 1, 2, 4, ... threads up to --threads N, default 2 (1..64): one\n"
          "shared name, a name and function per thread,\n"
          "random names from the first 1000 of each kind, in the table the size series left);\n"
          "alloc (1 B..64 MiB); threads (calls/s, the same thread counts, one shared function).\n"
          "The thread series take at least 7\n"
          "samples of at least 20 ms each (loops sized from the fastest of 3 timed runs, and\n"
          "sized again and measured again, up to 3 times, when a sample comes out shorter),\n"
          "whatever --quick, --iters and --reps ask; each thread reads the clock around its own\n"
          "loop, a sample spans the first start to the last end; the report gives each series'\n"
          "shortest sample. CSV to stdout unless --csv (columns series,impl,x,unit,median,min,\n"
          "max,shortest_ms: the wall time of the point's shortest sample, its whole loop).\n");
}

int main(int argc, char** argv) {
  pf_bench_conditions(); /* the date and load average at start */
  options_t opt = {0, 0, 7, 200000, NULL, NULL, NULL, 2};
  int reps_set = 0, iters_set = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      opt.quick = 1;
    } else if (strcmp(a, "--full") == 0) {
      opt.full = 1;
    } else if (strcmp(a, "--iters") == 0 && v) {
      opt.iters = strtoll(v, NULL, 10), ++i, iters_set = 1;
    } else if (strcmp(a, "--reps") == 0 && v) {
      opt.reps = atoi(v), ++i, reps_set = 1;
    } else if (strcmp(a, "--json") == 0 && v) {
      opt.json_path = v, ++i;
    } else if (strcmp(a, "--csv") == 0 && v) {
      opt.csv_path = v, ++i;
    } else if (strcmp(a, "--impl") == 0 && v) {
      opt.only_impl = v, ++i;
    } else if (strcmp(a, "--threads") == 0 && v) {
      char* end;
      long t = strtol(v, &end, 10);
      if (*v < '0' || *v > '9' || *end || t < 1 || t > MAX_THREADS)
        sc_fail("driver", "options", "--threads must be 1..64");
      opt.max_threads = (int)t, ++i;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (opt.quick && !reps_set)
    opt.reps = 3;
  if (opt.quick && !iters_set)
    opt.iters = 50000;
  if (opt.reps < 1 || opt.reps > MAX_REPS || opt.iters < 1)
    sc_fail("driver", "options", "--reps must be 1..101 and --iters positive");

  pf_bench_conditions_print(stderr, "bench_scaling: ");
  size_t nsizes;
  const int64_t* sizes = lookup_sizes(&opt, &nsizes);
  make_names(sizes[nsizes - 1] > THREADS_TABLE ? sizes[nsizes - 1] : THREADS_TABLE);
  const sc_impl_t* impls[2];
  size_t n = 0;
  impls[n++] = sc_packfn_impl();
#ifdef PF_BENCH_HAVE_TVMFFI
  impls[n++] = sc_tvmffi_impl();
#endif
  for (size_t i = 0; i < n; ++i) {
    if (opt.only_impl == NULL || strcmp(opt.only_impl, impls[i]->name) == 0)
      run_impl(impls[i], &opt);
  }
  int bad = check_agreement(); /* first: the ratios leave out what disagrees */
  if (bad)
    fprintf(stderr, "bench_scaling: the points whose implementations disagree are left out of "
                    "the ratios, the CSV and the JSON\n");
  print_lookup_ratios(&opt);
  print_thread_samples();
  FILE* f = opt.csv_path ? open_out(opt.csv_path) : stdout;
  write_csv(f);
  if (f != stdout)
    fclose(f);
  if (opt.json_path) {
    f = open_out(opt.json_path);
    write_json(f, &opt);
    fclose(f);
  }
  return bad;
}
