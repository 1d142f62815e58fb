/* cli_bench.c: `packfn bench`: the benchmark suite, found relative to the packfn executable, or
 * the timing of one function (global, or of a --lib library) with the arguments `call` takes. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "timing.h" /* bench/: the clock and summary the benchmark programs use */

extern char** environ;

static const char bench_help[] =
    "usage: packfn bench [--quick] [--out DIR]\n"
    "       packfn bench [--lib LIBRARY] [--repeat N] NAME [ARG]...\n"
    "\n"
    "With no NAME: runs the benchmark suite, sh DIR/run_suite.sh --bench DIR/packfn_bench\n"
    "[--quick] [--out DIR], DIR being ../bench next to this packfn: the suite runs from a build\n"
    "tree configured with -DPF_BUILD_BENCH=ON only (it is not installed); exits with the\n"
    "suite's status, 2 when the suite is not there (an installed packfn).\n"
    "\n"
    "With NAME: times calls of that function (a global function, or a function of LIBRARY\n"
    "with --lib, or one LIBRARY registered globally), its arguments written as for\n"
    "`packfn call` and parsed once: after one call that must succeed, N repetitions (default\n"
    "7) of a number of calls chosen so each repetition lasts about 10 ms; prints the median,\n"
    "the fastest and the slowest repetition in nanoseconds per call.\n";

/* Time one repetition should take, and the most calls it may make. */
#define BENCH_TARGET_NS 10000000.0
#define BENCH_MAX_CALLS (1L << 26)

static int usage_error(const char* what, const char* arg) {
  fprintf(stderr, "packfn bench: %s%s%s\n", what, arg != NULL ? " " : "", arg != NULL ? arg : "");
  fputs(bench_help, stderr);
  return PF_CLI_EXIT_USAGE;
}

/* ---- the suite ---- */

/* The folder of the running executable into buf (no trailing slash). 0, or -1. */
static int exe_dir(char* buf, size_t size) {
  ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  if (n <= 0 || (size_t)n >= size - 1)
    return -1;
  buf[n] = '\0';
  char* slash = strrchr(buf, '/');
  if (slash == NULL)
    return -1;
  *slash = '\0';
  return 0;
}

/* 1 when folder `dir` holds run_suite.sh and an executable packfn_bench; their paths then in
 * script and bin. */
static int suite_in(const char* dir, char* script, char* bin, size_t size) {
  struct stat st;
  snprintf(script, size, "%s/run_suite.sh", dir);
  snprintf(bin, size, "%s/packfn_bench", dir);
  return stat(script, &st) == 0 && S_ISREG(st.st_mode) && access(bin, X_OK) == 0;
}

/* The suite's options, --quick and --out DIR (or --out=DIR), into child as run_suite.sh takes
 * them (--out DIR); *n the count. 0, or the exit code after a message: anything else is a usage
 * error of packfn bench, not an argument run_suite.sh would reject (review). */
static int suite_options(int argc, char** argv, char** child, int* n) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--quick") == 0) {
      child[(*n)++] = argv[i];
    } else if (strcmp(a, "--out") == 0 || strncmp(a, "--out=", 6) == 0) {
      const char* value = a[5] == '=' ? a + 6 : (i + 1 < argc ? argv[++i] : NULL);
      if (value == NULL || *value == '\0')
        return usage_error("option --out needs a value", NULL);
      child[(*n)++] = (char*)"--out";
      child[(*n)++] = (char*)value;
    } else if (a[0] == '-') {
      return usage_error("unknown option", a);
    } else {
      return usage_error("the suite (--quick, --out) takes no NAME or arguments, got", a);
    }
  }
  return 0;
}

static int run_suite(int argc, char** argv) {
  char here[PATH_MAX], built[PATH_MAX + 32];
  char script[PATH_MAX + 64], bin[PATH_MAX + 64];
  for (int i = 1; i < argc; ++i) /* --help after the suite's options too, as after NAME */
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(bench_help, stdout);
      return PF_CLI_EXIT_OK;
    }
  /* sh SCRIPT --bench BIN OPTIONS... NULL (--out=DIR becomes two: up to 2 per argument); the
   * options are checked before the suite is looked for */
  char** child = malloc(sizeof(char*) * (size_t)(2 * argc + 4));
  if (child == NULL) {
    fputs("packfn bench: out of memory\n", stderr);
    return PF_CLI_EXIT_RAISED;
  }
  int n = 0;
  child[n++] = (char*)"sh";
  child[n++] = script;
  child[n++] = (char*)"--bench";
  child[n++] = bin;
  int rc = suite_options(argc, argv, child, &n);
  if (rc != 0) {
    free(child);
    return rc;
  }
  child[n] = NULL;
  if (exe_dir(here, sizeof here) != 0) {
    free(child);
    fputs("packfn bench: cannot tell where this packfn executable is (/proc/self/exe)\n", stderr);
    return PF_CLI_EXIT_USAGE;
  }
  snprintf(built, sizeof built, "%s/../bench", here);
  if (!suite_in(built, script, bin, sizeof script)) {
    free(child);
    fprintf(stderr,
            "packfn bench: the benchmark suite runs from a build tree only (configured with "
            "-DPF_BUILD_BENCH=ON: run BUILD/cli/packfn bench); it needs run_suite.sh and "
            "packfn_bench in %s. Timing one function, `packfn bench NAME ARG...`, works "
            "anywhere.\n",
            built);
    return PF_CLI_EXIT_USAGE;
  }
  fflush(NULL);
  pid_t pid;
  /* the suite gets the default SIGXFSZ back (main ignores it for packfn's own writes) */
  posix_spawnattr_t attr;
  sigset_t defaults;
  int err = posix_spawnattr_init(&attr);
  if (err == 0) {
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGXFSZ);
    err = posix_spawnattr_setsigdefault(&attr, &defaults);
    if (err == 0)
      err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    if (err == 0)
      err = posix_spawnp(&pid, "sh", NULL, &attr, child, environ);
    posix_spawnattr_destroy(&attr);
  }
  free(child);
  if (err != 0) {
    fprintf(stderr, "packfn bench: cannot run sh: %s\n", strerror(err));
    return PF_CLI_EXIT_RAISED;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      fprintf(stderr, "packfn bench: waitpid: %s\n", strerror(errno));
      return PF_CLI_EXIT_RAISED;
    }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* ---- one function ---- */

/* Times `calls` calls of fn (named `name`); -1 with the call's error (or RuntimeError when it
 * failed without raising) on the first failure. */
static int time_calls(const char* name, pf_object_t* fn, const pf_any_t* args, int32_t n,
                      long calls, double* ns) {
  double start = pf_bench_now_ns();
  for (long i = 0; i < calls; ++i) {
    pf_any_t result = pf_any_none();
    int rc = pf_function_call(fn, args, n, &result);
    pf_any_release(&result);
    if (rc != 0)
      return pf_error_ensure(name, rc);
  }
  *ns = pf_bench_now_ns() - start;
  return 0;
}

/* Times fn on the parsed args and prints what it measured. Returns the exit code. */
static int measure(const char* name, const char* lib, pf_object_t* fn, pf_cli_arg_t* args,
                   int32_t n, long repeat) {
  pf_any_t* packed = calloc((size_t)n + 1, sizeof(pf_any_t));
  double* per_call = calloc((size_t)repeat, sizeof(double));
  int rc = PF_CLI_EXIT_OK;
  if (packed == NULL || per_call == NULL) {
    PF_ERROR_SET(PF_ERR_MEMORY, "packfn: out of memory");
    rc = pf_cli_report_raised("out of memory");
    goto done;
  }
  for (int32_t i = 0; i < n; ++i)
    packed[i] = args[i].value;
  double ns;
  long calls = 1;
  if (time_calls(name, fn, packed, n, 1, &ns) != 0) { /* the first call: it must work */
    rc = pf_cli_report_raised("the call failed");
    goto done;
  }
  while (calls < BENCH_MAX_CALLS) { /* calls per repetition, so one lasts BENCH_TARGET_NS */
    if (time_calls(name, fn, packed, n, calls, &ns) != 0) {
      rc = pf_cli_report_raised("the call failed");
      goto done;
    }
    if (ns >= BENCH_TARGET_NS / 2)
      break;
    calls *= 2;
  }
  if (ns > 0 && ns < BENCH_TARGET_NS && calls < BENCH_MAX_CALLS)
    calls = (long)((double)calls * (BENCH_TARGET_NS / ns)) + 1;
  for (long r = 0; r < repeat; ++r) {
    if (time_calls(name, fn, packed, n, calls, &ns) != 0) {
      rc = pf_cli_report_raised("the call failed");
      goto done;
    }
    per_call[r] = ns / (double)calls;
  }
  double fastest, median, slowest;
  pf_bench_summarise(per_call, (int)repeat, &fastest, &median, &slowest);
  const char* sig = pf_function_signature(fn);
  printf("function: %s%s%s%s\n", name, sig != NULL && strchr(sig, '(') ? strchr(sig, '(') : "",
         lib != NULL ? " from " : "", lib != NULL ? lib : "");
  printf("measured: pf_function_call with %d argument%s parsed once (on the host), the result "
         "released after each call; %ld repetition%s of %ld call%s, after one call not timed\n",
         (int)n, n == 1 ? "" : "s", repeat, repeat == 1 ? "" : "s", calls, calls == 1 ? "" : "s");
  printf("median: %.1f ns per call (min %.1f, max %.1f)\n", median, fastest, slowest);
done:
  free(per_call);
  free(packed);
  return rc;
}

/* --lib X or --lib=X, --repeat N or --repeat=N (as `call` takes them, review) at argv[*i]: 0,
 * or the exit code after a message. */
static int bench_option(int argc, char** argv, int* i, const char** lib, long* repeat) {
  const char* a = argv[*i];
  const char* eq = strchr(a, '=');
  size_t opt_len = eq ? (size_t)(eq - a) : strlen(a);
  int is_lib = opt_len == 5 && strncmp(a, "--lib", 5) == 0;
  int is_repeat = opt_len == 8 && strncmp(a, "--repeat", 8) == 0;
  if (!is_lib && !is_repeat)
    return usage_error("unknown option", a);
  if (!eq && *i + 1 >= argc)
    return usage_error(is_lib ? "option --lib needs a value" : "option --repeat needs a value",
                       NULL);
  const char* value = eq ? eq + 1 : argv[++*i];
  if (is_lib) {
    if (*value == '\0')
      return usage_error("option --lib needs a value", NULL);
    *lib = value;
    return 0;
  }
  char* end;
  errno = 0;
  *repeat = strtol(value, &end, 10);
  /* strtol skips leading blanks: ' 3' was a count (review; ' 5' is no number for call) */
  if (errno != 0 || *end != '\0' || end == value || isspace((unsigned char)value[0]) ||
      *repeat < 1 || *repeat > 1000)
    return usage_error("--repeat expects a count from 1 to 1000, got", value);
  return 0;
}

static int bench_function(int argc, char** argv) {
  const char* lib = NULL;
  long repeat = 7;
  /* options anywhere before `--`, as `call` takes them: one after NAME was passed to the
   * function as an argument (review); NAME and the arguments gathered in order */
  char** positional = malloc(sizeof(char*) * (size_t)argc);
  if (positional == NULL)
    return pf_cli_report_raised("out of memory");
  int count = 0, options_done = 0;
  for (int i = 1; i < argc; ++i) {
    if (!options_done && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
      /* anywhere before `--`, as `call` takes it (it was an unknown option; review) */
      free(positional);
      fputs(bench_help, stdout);
      return PF_CLI_EXIT_OK;
    }
    if (options_done || strncmp(argv[i], "--", 2) != 0) {
      positional[count++] = argv[i];
    } else if (strcmp(argv[i], "--") == 0) {
      options_done = 1;
    } else {
      int rc = bench_option(argc, argv, &i, &lib, &repeat);
      if (rc != 0) {
        free(positional);
        return rc;
      }
    }
  }
  if (count == 0 || positional[0][0] == '\0') { /* '' names nothing either (review) */
    int empty = count > 0;
    free(positional);
    return usage_error(
        empty ? "missing the function NAME (got an empty one)" : "missing the function NAME", NULL);
  }
  const char* name = positional[0];
  int n = count - 1;
  pf_cli_arg_t* args = calloc((size_t)n + 1, sizeof(pf_cli_arg_t));
  if (args == NULL) {
    free(positional);
    return pf_cli_report_raised("out of memory");
  }
  char msg[PF_CLI_MSG_MAX];
  int rc;
  pf_object_t *module = NULL, *fn = NULL;
  int parsed = pf_cli_args_parse(positional + 1, n, NULL, 0, NULL, args, msg, sizeof msg);
  if (parsed == -2)
    rc = pf_cli_report_raised("cannot make an argument");
  else if (parsed != 0)
    rc = usage_error(msg, NULL);
  else if (pf_cli_find_function(lib, name, &module, &fn) != 0)
    rc = pf_cli_report_raised("cannot find the function");
  else
    rc = measure(name, lib, fn, args, (int32_t)n, repeat);
  for (int k = 0; k < n; ++k)
    pf_cli_arg_clear(&args[k]);
  free(args);
  free(positional);
  pf_object_release(fn);
  pf_object_release(module);
  return rc;
}

int pf_cli_bench_main(int argc, char** argv) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(bench_help, stdout);
    return PF_CLI_EXIT_OK;
  }
  /* a NAME, --lib or --repeat first: one function; else (nothing, --quick, --out) the suite */
  if (argc > 1 && (argv[1][0] != '-' || strncmp(argv[1], "--lib", 5) == 0 ||
                   strncmp(argv[1], "--repeat", 8) == 0 || strcmp(argv[1], "--") == 0))
    return bench_function(argc, argv);
  return run_suite(argc, argv);
}
