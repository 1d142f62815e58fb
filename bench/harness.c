/* harness.c: the benchmark driver: operation catalogue, options, selection, timing and
   callgrind bracketing, and checksum agreement between implementations (the reports are
   harness_report.c's, the direct floor direct_ops.c's). */
#define _GNU_SOURCE
#include "harness.h"
#include "harness_private.h"
#include "timing.h"

#include <errno.h>
#include <fnmatch.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "valgrind_compat.h"

/* Defaults follow the suite's rules: at least 7 repetitions of at least 1e6 iterations. Under
   callgrind the count is exact, so fewer iterations suffice and keep the run short. */
#define DEFAULT_ITERS           1000000
#define DEFAULT_CALLGRIND_ITERS 100000
#define DEFAULT_REPS            7
#define MAX_REPS                1000
#define MAX_ENTRIES             256
/* Warm-up under callgrind: enough to bind PLT slots and fill allocator caches. */
#define CALLGRIND_WARMUP_ITERS 1000

/* The operations, in report order. Every implementation's op must be one of these. */
const catalogue_entry_t pf_bench_catalogue[] = {
    {"call_0", "call", "packed call, no argument"},
    {"call_1int", "call", "packed call, 1 int"},
    {"call_0_plain", "call",
     "packed call, no argument, callee gets NULL as self (packfn: pf_function_create(NULL, f, "
     "NULL); TVM-FFI: TVMFFIFunctionCreate(NULL, f, deleter)); call_0's callees get the handle"},
    {"call_1int_plain", "call", "packed call, 1 int, callee gets NULL as self (as call_0_plain)"},
    {"call_1int_closure", "call", "packed call, 1 int, function with self + deleter"},
    {"call_3mixed", "call", "packed call, int + float + string"},
    {"call_6int", "call", "packed call, 6 ints"},
    {"call_dltensor", "call", "packed call, DLTensor* argument"},
    {"call_tensor", "call", "packed call, tensor object argument"},
    {"call_typed", "call", "typed add(int64, int64) through the C call entry"},
    {"call_typed_dynamic", "call", "typed add(int64, int64) built at run time from a declaration"},
    {"module_call", "call", "packed call, 1 int, function from a loaded module"},
    {"add_n_1", "call", "add_n kernel on one float32 element (2 tensors + float)"},
    {"global_get_short", "global", "global lookup, 6-byte name, + release"},
    {"global_get_long", "global", "global lookup, 27-byte name, + release"},
    {"function_lifecycle", "object", "function create + retain + release + release"},
    {"function_lifecycle_plain", "object", "same, the general constructor without self"},
    {"closure_lifecycle", "object", "same, function with self + deleter"},
    {"retain_release", "object", "retain + release of a live object"},
    {"weak_lock", "object", "weak reference promoted (lock) + release"},
    {"string_5", "string", "string create + release, 5 bytes"},
    {"string_100", "string", "string create + release, 100 bytes"},
    {"error_roundtrip_bt", "error",
     "error raise + take + backtrace text read + release; both sides walk the stack and name "
     "the frames (packfn: PACKFN_BACKTRACE=1; TVM-FFI: always)"},
    {"error_roundtrip_nobt", "error",
     "error raise + take + release; neither side walks the stack (packfn: raise site only, "
     "PACKFN_BACKTRACE off; TVM-FFI: empty backtrace)"},
    {"error_to_tvmffi", "error", "packfn raise, TVM-FFI take + release (joined, --joined)"},
    {"error_from_tvmffi", "error", "TVM-FFI raise, packfn take + release (joined, --joined)"},
    {"map_get_small", "map", "map lookup, 4 string keys (small form; TVM-FFI: C++ ffi::Map)"},
    {"map_get_1k_str", "map", "map lookup, 1024 string keys (dense form)"},
    {"map_get_1k_int", "map", "map lookup, 1024 int keys (dense form)"},
    {"map_build_64", "map", "map create + 64 string-key inserts + release"},
    {"tensor_empty", "tensor",
     "tensor empty + release, 1024 float32 CPU (packfn: a slab block aligned to 256; TVM-FFI: "
     "C++ FromNDAlloc with malloc)"},
    {"tensor_empty_env", "tensor",
     "tensor empty + release through an installed host allocator (packfn: pf_allocator_set's "
     "data hook, aligned_alloc, header from its slabs; TVM-FFI: a DLPack allocator making the "
     "whole tensor, calloc + malloc, then wrapped)"},
    {"dlpack_legacy", "dlpack",
     "to DLManagedTensor + from + release (re-imports its own export: packfn's import "
     "recognises it and returns the same tensor, a shortcut)"},
    {"dlpack_versioned", "dlpack",
     "to DLManagedTensorVersioned + from + release (its own export: packfn's shortcut, as above)"},
    {"dlpack_neutral", "dlpack",
     "versioned, a neutral producer (plain C, the benchmark's): its export + import + export + "
     "release + delete + its deleter"},
    {"dlpack_own", "dlpack",
     "versioned, its own tensor: export + import + export + release + delete"},
};
const size_t pf_bench_catalogue_size = ARRAY_SIZE(pf_bench_catalogue);

/* Rows that need packfn's backtrace mode one way (1: PACKFN_BACKTRACE=1, full native stacks; 0:
   off, the raise site only). packfn reads the variable once per process, so a row whose mode
   differs from this process's runs in a process of its own: the harness runs itself again for
   that row with the variable set (both columns, alike). Under valgrind, where a new process
   would go uncounted, such a row must be run alone with the variable set: run_callgrind.sh
   does, from --pairs. */
static const struct {
  const char* op;
  int backtrace;
} row_backtrace[] = {
    {"error_roundtrip_bt", 1},
    {"error_roundtrip_nobt", 0},
};

#define BACKTRACE_ENV "PACKFN_BACKTRACE"

/* The backtrace mode a row needs: 1, 0, or -1 when it does not matter. */
static int required_backtrace(const char* op) {
  for (size_t i = 0; i < ARRAY_SIZE(row_backtrace); ++i) {
    if (strcmp(row_backtrace[i].op, op) == 0)
      return row_backtrace[i].backtrace;
  }
  return -1;
}

/* This process's backtrace mode, read as packfn reads it (src/error.c). */
static int process_backtrace(void) {
  const char* v = getenv(BACKTRACE_ENV);
  return v && *v && strcmp(v, "0") != 0;
}

/* Column order of the report. */
const char* const pf_bench_impl_order[] = {"direct", "libffi", "tvmffi", "packfn"};
const size_t pf_bench_impl_order_size = ARRAY_SIZE(pf_bench_impl_order);

entry_t pf_bench_entries[MAX_ENTRIES];
size_t pf_bench_num_entries;

/* Checksums land here so that no loop result is dead. */
static volatile uint64_t sink;

void pf_bench_fail(const char* impl, const char* what, const char* detail) {
  fprintf(stderr, "packfn_bench: %s %s: %s\n", impl, what, detail ? detail : "failed");
  exit(2);
}

/* ---- selection ---- */

/* 1 when name matches one of the comma-separated fnmatch patterns (NULL matches all). */
static int matches_any(const char* patterns, const char* name) {
  if (patterns == NULL)
    return 1;
  char buf[512];
  if (strlen(patterns) >= sizeof(buf))
    pf_bench_fail("harness", "pattern list", "too long");
  strcpy(buf, patterns);
  for (char* tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
    if (fnmatch(tok, name, 0) == 0)
      return 1;
  }
  return 0;
}

static size_t catalogue_find(const char* op) {
  for (size_t i = 0; i < ARRAY_SIZE(pf_bench_catalogue); ++i) {
    if (strcmp(pf_bench_catalogue[i].op, op) == 0)
      return i;
  }
  return (size_t)-1;
}

static size_t impl_rank(const char* impl) {
  for (size_t i = 0; i < ARRAY_SIZE(pf_bench_impl_order); ++i) {
    if (strcmp(pf_bench_impl_order[i], impl) == 0)
      return i;
  }
  return ARRAY_SIZE(pf_bench_impl_order);
}

static void add_table(const pf_bench_op_t* ops, size_t count, const options_t* opt) {
  for (size_t i = 0; i < count; ++i) {
    size_t index = catalogue_find(ops[i].op);
    if (index == (size_t)-1)
      pf_bench_fail(ops[i].impl, ops[i].op, "operation is not in the catalogue");
    if (impl_rank(ops[i].impl) == ARRAY_SIZE(pf_bench_impl_order))
      pf_bench_fail(ops[i].impl, ops[i].op, "unknown implementation name");
    if (!matches_any(opt->op_patterns, ops[i].op) || !matches_any(opt->impl_patterns, ops[i].impl))
      continue;
    if (pf_bench_num_entries == MAX_ENTRIES)
      pf_bench_fail("harness", "registry", "more than MAX_ENTRIES operations");
    entry_t* e = &pf_bench_entries[pf_bench_num_entries++];
    memset(e, 0, sizeof(*e));
    e->op = &ops[i];
    e->catalogue_index = index;
    e->ns_median = e->ns_min = e->ns_max = -1.0;
    e->ir_per_op = -1.0;
  }
}

static void collect_entries(const options_t* opt) {
  size_t count;
  const pf_bench_op_t* ops = pf_bench_direct_ops(&count);
  add_table(ops, count, opt);
#ifdef PF_BENCH_HAVE_LIBFFI
  ops = pf_bench_libffi_ops(&count);
  add_table(ops, count, opt);
#endif
#ifdef PF_BENCH_HAVE_TVMFFI
  ops = pf_bench_tvmffi_ops(&count);
  add_table(ops, count, opt);
#endif
#ifdef PF_BENCH_HAVE_PACKFN
  ops = pf_bench_packfn_ops(&count);
  add_table(ops, count, opt);
#endif
#ifdef PF_BENCH_HAVE_DLPACK_FOREIGN
  ops = pf_bench_dlpack_foreign_ops(&count);
  add_table(ops, count, opt);
#endif
}

static int compare_entries(const void* a, const void* b) {
  const entry_t* x = a;
  const entry_t* y = b;
  if (x->catalogue_index != y->catalogue_index)
    return x->catalogue_index < y->catalogue_index ? -1 : 1;
  size_t rx = impl_rank(x->op->impl), ry = impl_rank(y->op->impl);
  return rx < ry ? -1 : rx > ry;
}

/* ---- measurement ---- */

static void check_rep_checksum(const entry_t* e, uint64_t got) {
  if (got != e->checksum) {
    char detail[128];
    snprintf(detail, sizeof(detail), "checksum changed between repetitions: %llu then %llu",
             (unsigned long long)e->checksum, (unsigned long long)got);
    pf_bench_fail(e->op->impl, e->op->op, detail);
  }
}

/* Times reps loops of iters operations; only the loop sits between the clock reads. */
static void measure_time(entry_t* e, void* state, int64_t iters, int reps) {
  double samples[MAX_REPS];
  int64_t warmup = iters / 10 > 0 ? iters / 10 : 1;
  sink = e->op->run(state, warmup);
  for (int r = 0; r < reps; ++r) {
    double t0 = pf_bench_now_ns();
    uint64_t sum = e->op->run(state, iters);
    double t1 = pf_bench_now_ns();
    sink = sum;
    if (r == 0)
      e->checksum = sum;
    check_rep_checksum(e, sum);
    samples[r] = (t1 - t0) / (double)iters;
  }
  pf_bench_summarise(samples, reps, &e->ns_min, &e->ns_median, &e->ns_max);
}

/* Under callgrind (--collect-atstart=no): collect only around one loop, then dump the counts
   under a label run_callgrind.sh reads back: "pfbench <impl> <op> <iters>". */
static void measure_callgrind(entry_t* e, void* state, int64_t iters) {
  char label[160];
  snprintf(label, sizeof(label), "pfbench %s %s %lld", e->op->impl, e->op->op, (long long)iters);
  sink = e->op->run(state, iters < CALLGRIND_WARMUP_ITERS ? iters : CALLGRIND_WARMUP_ITERS);
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
  uint64_t sum = e->op->run(state, iters);
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(label);
  sink = sum;
  e->checksum = sum;
}

/* Measures e in a new process of this program with PACKFN_BACKTRACE set to `backtrace`
   (--child: the same options, e's row only), and reads its result back. */
static void measure_in_child(entry_t* e, const options_t* opt, int backtrace) {
  char iters[32], reps[32], cpu[32];
  snprintf(iters, sizeof iters, "%lld", (long long)opt->iters);
  snprintf(reps, sizeof reps, "%d", opt->reps);
  snprintf(cpu, sizeof cpu, "%d", opt->cpu);
  const char* args[16];
  int n = 0;
  args[n++] = "packfn_bench";
  args[n++] = "--child";
  args[n++] = "--op";
  args[n++] = e->op->op;
  args[n++] = "--impl";
  args[n++] = e->op->impl;
  args[n++] = "--iters";
  args[n++] = iters;
  args[n++] = "--reps";
  args[n++] = reps;
  if (opt->no_time)
    args[n++] = "--no-time";
  if (opt->joined)
    args[n++] = "--joined";
  if (opt->cpu >= 0) {
    args[n++] = "--cpu";
    args[n++] = cpu;
  }
  args[n] = NULL;
  int fd[2];
  if (pipe(fd) != 0)
    pf_bench_fail("harness", e->op->op, strerror(errno));
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0)
    pf_bench_fail("harness", e->op->op, strerror(errno));
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    setenv(BACKTRACE_ENV, backtrace ? "1" : "0", 1);
    execv("/proc/self/exe", (char* const*)args);
    _exit(127);
  }
  close(fd[1]);
  FILE* f = fdopen(fd[0], "r");
  char line[256];
  unsigned long long sum = 0;
  double med = -1, lo = -1, hi = -1;
  int got = f != NULL && fgets(line, sizeof line, f) != NULL &&
            sscanf(line, "pfbench-child %llu %lf %lf %lf", &sum, &med, &lo, &hi) == 4;
  if (f != NULL)
    fclose(f);
  else
    close(fd[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !got)
    pf_bench_fail(e->op->impl, e->op->op, "its own process (" BACKTRACE_ENV " set) failed");
  e->iters = opt->iters;
  e->reps = opt->no_time ? 1 : opt->reps;
  e->checksum = sum;
  e->ns_median = med;
  e->ns_min = lo;
  e->ns_max = hi;
  e->measured = 1;
}

static void measure(entry_t* e, const options_t* opt) {
  int want = required_backtrace(e->op->op);
  if (want >= 0 && want != process_backtrace()) {
    if (opt->callgrind || opt->child) {
      char detail[160];
      snprintf(detail, sizeof detail,
               "this row needs " BACKTRACE_ENV "=%d: run it alone with that set "
               "(run_callgrind.sh does)",
               want);
      pf_bench_fail(e->op->impl, e->op->op, detail);
    }
    measure_in_child(e, opt, want);
    return;
  }
  void* state = e->op->setup ? e->op->setup() : NULL;
  e->iters = opt->iters;
  if (opt->callgrind) {
    e->reps = 1;
    measure_callgrind(e, state, opt->iters);
  } else if (opt->no_time) {
    e->reps = 1;
    e->checksum = e->op->run(state, opt->iters);
    sink = e->checksum;
  } else {
    e->reps = opt->reps;
    measure_time(e, state, opt->iters, opt->reps);
    fprintf(stderr, "%-8s %-20s %10.2f ns/op  [%.2f - %.2f]\n", e->op->impl, e->op->op,
            e->ns_median, e->ns_min, e->ns_max);
  }
  e->measured = 1;
  if (e->op->teardown)
    e->op->teardown(state);
}

/* Every implementation of one operation must agree on the checksum; 0 when they do. The
   entries of an operation whose implementations disagree are marked: they did not all do the
   same work, so the reports give none of their figures. */
static int check_agreement(void) {
  int bad = 0;
  for (size_t i = 1; i < pf_bench_num_entries; ++i) {
    const entry_t* a = &pf_bench_entries[i - 1];
    const entry_t* b = &pf_bench_entries[i];
    if (a->catalogue_index == b->catalogue_index && a->checksum != b->checksum) {
      fprintf(stderr, "packfn_bench: %s: checksum %llu (%s) differs from %llu (%s)\n", b->op->op,
              (unsigned long long)b->checksum, b->op->impl, (unsigned long long)a->checksum,
              a->op->impl);
      for (size_t k = 0; k < pf_bench_num_entries; ++k)
        pf_bench_entries[k].disagrees |= pf_bench_entries[k].catalogue_index == a->catalogue_index;
      bad = 1;
    }
  }
  return bad;
}

/* Takes the figures of the marked entries out (the checksums stay, to show the disagreement). */
static void drop_disagreeing_figures(void) {
  for (size_t i = 0; i < pf_bench_num_entries; ++i) {
    entry_t* e = &pf_bench_entries[i];
    if (e->disagrees)
      e->ns_median = e->ns_min = e->ns_max = e->ir_per_op = -1.0;
  }
}

/* ---- command line ---- */

static void usage(FILE* out) {
  fprintf(out,
          "usage: packfn_bench [options]\n"
          "  --iters N      iterations per loop (default %d; %d under callgrind)\n"
          "  --reps R       timed repetitions, median and min-max reported (default %d)\n"
          "  --op PATS      operations, comma-separated fnmatch patterns (e.g. 'call_*')\n"
          "  --impl PATS    implementations: direct, libffi, tvmffi, packfn\n"
          "  --md FILE      write the markdown table to FILE (default: stdout)\n"
          "  --json FILE    write the results as JSON\n"
          "  --ir FILE      merge instruction counts (impl op ir_per_op [loop length]) from\n"
          "                 run_callgrind.sh's ir.tsv\n"
          "  --no-time      run each loop once and check checksums, no timing\n"
          "  --cpu N        pin the process to CPU N\n"
          "  --list         list the selected operations and their entry points\n"
          "  --pairs        list the selected (impl, op) pairs, tab-separated, with the\n"
          "                 environment each needs (e.g. " BACKTRACE_ENV "=1) as a third field\n"
          "  --joined       let packfn join the TVM-FFI runtime this process links (one error\n"
          "                 slot, registry and global table); by default packfn runs alone\n"
          "                 (PACKFN_NO_TVM_FFI=1), as in a program without TVM-FFI\n"
          "Under valgrind --tool=callgrind --collect-atstart=no each loop runs once with\n"
          "collection on around it only, dumped as 'pfbench <impl> <op> <iters>'.\n"
          "A row that needs packfn's backtrace mode set one way (" BACKTRACE_ENV "=1 for\n"
          "error_roundtrip_bt, off for error_roundtrip_nobt; read once per process) and this\n"
          "process's differs runs in a process of its own with it set; under valgrind it must\n"
          "be run alone with it set (--pairs gives it; run_callgrind.sh does).\n",
          DEFAULT_ITERS, DEFAULT_CALLGRIND_ITERS, DEFAULT_REPS);
}

static const char* next_arg(int argc, char** argv, int* i) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "packfn_bench: %s needs a value\n", argv[*i]);
    exit(2);
  }
  return argv[++*i];
}

static long long parse_count(const char* flag, const char* s, long long lo, long long hi) {
  char* end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) {
    fprintf(stderr, "packfn_bench: %s: expected an integer in [%lld, %lld], got '%s'\n", flag, lo,
            hi, s);
    exit(2);
  }
  return v;
}

static void parse_options(int argc, char** argv, options_t* opt) {
  memset(opt, 0, sizeof(*opt));
  opt->iters = -1;
  opt->reps = DEFAULT_REPS;
  opt->cpu = -1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--iters") == 0)
      opt->iters = parse_count(a, next_arg(argc, argv, &i), 1, (long long)1 << 40);
    else if (strcmp(a, "--reps") == 0)
      opt->reps = (int)parse_count(a, next_arg(argc, argv, &i), 1, MAX_REPS);
    else if (strcmp(a, "--op") == 0)
      opt->op_patterns = next_arg(argc, argv, &i);
    else if (strcmp(a, "--impl") == 0)
      opt->impl_patterns = next_arg(argc, argv, &i);
    else if (strcmp(a, "--md") == 0)
      opt->md_path = next_arg(argc, argv, &i);
    else if (strcmp(a, "--json") == 0)
      opt->json_path = next_arg(argc, argv, &i);
    else if (strcmp(a, "--ir") == 0)
      opt->ir_path = next_arg(argc, argv, &i);
    else if (strcmp(a, "--cpu") == 0)
      opt->cpu = (int)parse_count(a, next_arg(argc, argv, &i), 0, CPU_SETSIZE - 1);
    else if (strcmp(a, "--no-time") == 0)
      opt->no_time = 1;
    else if (strcmp(a, "--list") == 0)
      opt->list = 1;
    else if (strcmp(a, "--pairs") == 0)
      opt->pairs = 1;
    else if (strcmp(a, "--child") == 0)
      opt->child = 1;
    else if (strcmp(a, "--joined") == 0)
      opt->joined = 1;
    else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else {
      fprintf(stderr, "packfn_bench: unknown option '%s'\n", a);
      usage(stderr);
      exit(2);
    }
  }
  opt->callgrind = RUNNING_ON_VALGRIND ? 1 : 0;
  if (opt->iters < 0)
    opt->iters = opt->callgrind ? DEFAULT_CALLGRIND_ITERS : DEFAULT_ITERS;
}

static void pin_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    pf_bench_fail("harness", "--cpu", strerror(errno));
}

static int packfn_joined(void) {
#ifdef PF_BENCH_HAVE_PACKFN
  return pf_bench_packfn_joined();
#else
  return 0;
#endif
}

int main(int argc, char** argv) {
  options_t opt;
  pf_bench_conditions(); /* the date and load average at start */
  parse_options(argc, argv, &opt);
  /* packfn alone unless --joined: PACKFN_NO_TVM_FFI=1 before packfn looks for TVM-FFI. A
   * library built with packfn's export macros (libpackfn_kernels) looks when it loads, before
   * main: then the program runs itself again with the variable set (run_callgrind.sh sets it
   * beforehand, since a new process would leave valgrind). */
  if (!opt.joined) {
    const char* apart = getenv("PACKFN_NO_TVM_FFI");
    int set = apart && *apart && strcmp(apart, "0") != 0;
    if (setenv("PACKFN_NO_TVM_FFI", "1", 1) != 0)
      pf_bench_fail("harness", "--joined", strerror(errno));
    if (packfn_joined()) {
      if (set || RUNNING_ON_VALGRIND)
        pf_bench_fail("harness", "--joined",
                      "packfn joined TVM-FFI before main: set PACKFN_NO_TVM_FFI=1 beforehand");
      execv("/proc/self/exe", argv);
      pf_bench_fail("harness", "--joined", strerror(errno));
    }
  }
  collect_entries(&opt);
  qsort(pf_bench_entries, pf_bench_num_entries, sizeof(entry_t), compare_entries);
  if (pf_bench_num_entries == 0)
    pf_bench_fail("harness", "selection", "no operation matches --op / --impl");

  if (opt.list) {
    for (size_t i = 0; i < pf_bench_num_entries; ++i)
      printf("%-8s %-20s %s\n", pf_bench_entries[i].op->impl, pf_bench_entries[i].op->op,
             pf_bench_entries[i].op->entry);
    return 0;
  }
  if (opt.pairs) {
    for (size_t i = 0; i < pf_bench_num_entries; ++i) {
      int want = required_backtrace(pf_bench_entries[i].op->op);
      printf("%s\t%s\t", pf_bench_entries[i].op->impl, pf_bench_entries[i].op->op);
      if (want >= 0)
        printf(BACKTRACE_ENV "=%d", want);
      printf("\n");
    }
    return 0;
  }
  if (opt.child && pf_bench_num_entries != 1)
    pf_bench_fail("harness", "--child", "needs exactly one (impl, op) pair");
  if (opt.cpu >= 0)
    pin_cpu(opt.cpu);
  if (opt.callgrind)
    fprintf(stderr, "packfn_bench: under valgrind: one loop of %lld per op, collected alone\n",
            (long long)opt.iters);

  for (size_t i = 0; i < pf_bench_num_entries; ++i)
    measure(&pf_bench_entries[i], &opt);
  if (opt.child && !opt.callgrind) {
    const entry_t* e = &pf_bench_entries[0];
    printf("pfbench-child %llu %.6f %.6f %.6f\n", (unsigned long long)e->checksum, e->ns_median,
           e->ns_min, e->ns_max);
    return 0;
  }
  int bad = check_agreement();
  if (opt.callgrind) {
    /* The counts are in the dumps; run_callgrind.sh turns them into a table. */
    for (size_t i = 0; i < pf_bench_num_entries; ++i)
      printf("dumped: pfbench %s %s %lld checksum %llu\n", pf_bench_entries[i].op->impl,
             pf_bench_entries[i].op->op, (long long)pf_bench_entries[i].iters,
             (unsigned long long)pf_bench_entries[i].checksum);
    return bad;
  }
  if (opt.ir_path != NULL)
    pf_bench_read_ir_file(opt.ir_path);
  drop_disagreeing_figures();

  result_file_t files[2];
  void (*writers[2])(FILE*, const options_t*);
  size_t num_files = 0;
  if (opt.md_path != NULL) {
    files[num_files] = (result_file_t){opt.md_path, NULL, 0};
    writers[num_files++] = pf_bench_write_markdown;
  } else {
    pf_bench_write_markdown(stdout, &opt);
  }
  if (opt.json_path != NULL) {
    files[num_files] = (result_file_t){opt.json_path, NULL, 0};
    writers[num_files++] = pf_bench_write_json;
  }
  pf_bench_write_results(files, writers, num_files, &opt);
  return bad;
}
