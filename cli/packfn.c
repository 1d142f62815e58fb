/* packfn.c: the packfn command line: dispatch, help, and the commands list and info (call lives
 * in cli_call.c, bench in cli_bench.c). Linked with packfn_kernels (and packfn_cuda and
 * packfn_kernels_cuda when built). */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "packfn/kernels.h"
#ifdef PF_CLI_HAVE_CUDA
#include "packfn/cuda.h"
#endif

static const char main_usage[] =
    "usage: packfn [--version] [--help] COMMAND [ARGS...]\n"
    "\n"
    "commands:\n"
    "  list [LIBRARY]     the global functions (or a library's) with their signatures\n"
    "  call NAME ARG...   call a packed function and print what it returns or writes\n"
    "  info               version, ABI version, CUDA devices, allocators\n"
    "  bench [--quick]    run the benchmark suite\n"
    "  bench NAME ARG...  time calls of one function (also --lib LIBRARY)\n"
    "  help [COMMAND]     help on a command (also: packfn COMMAND --help)\n"
    "\n"
    "exit status: 0 success, 1 packfn raised an error, 2 usage error.\n";

static const char list_help[] =
    "usage: packfn list [LIBRARY]\n"
    "\n"
    "Without LIBRARY: every function of the global table, sorted by name, as\n"
    "NAME(PARAMS) -> RESULT when it carries a signature (the packfn.kernels.* kernels are\n"
    "linked in). With LIBRARY (a shared library path): the functions it exports, with their\n"
    "signatures and documentation when it declares them.\n"
    "Exits with 1 (after the listing) when a function could not be registered as its library\n"
    "loaded (a name taken twice, out of memory): it is missing from the list.\n";

static const char info_help[] =
    "usage: packfn info\n"
    "\n"
    "Prints the packfn version, the ABI version, the CUDA devices found, the device types\n"
    "with a registered allocator, and the number of global functions; exits with 1 when a\n"
    "function could not be registered as its library loaded.\n";

static int usage_error(const char* what, const char* arg) {
  fprintf(stderr, "packfn: %s%s%s\n", what, arg != NULL ? " " : "", arg != NULL ? arg : "");
  fputs(main_usage, stderr);
  return PF_CLI_EXIT_USAGE;
}

static int is_help(const char* a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* Reports the functions whose registration at load failed since `before` (a count of
 * pf_global_static_failures): "packfn: 2 functions could not be registered when their library
 * loaded (KeyError: ...); they are missing" on stderr, with the last failure's error when it is
 * still raised. Returns PF_CLI_EXIT_RAISED when there were any, else `rc`. */
static pf_object_t* startup_error; /* raised by a registration before main, or NULL */

static int check_static_failures(int before, int rc) {
  int n = pf_global_static_failures() - before;
  if (n <= 0)
    return rc;
  pf_object_t* err = before == 0 && startup_error != NULL ? startup_error : pf_error_take();
  startup_error = NULL;
  fprintf(stderr, "packfn: %d function%s could not be registered when %s library loaded", n,
          n == 1 ? "" : "s", n == 1 ? "its" : "their");
  if (err != NULL)
    fprintf(stderr, " (%s: %s)", pf_error_kind(err), pf_error_message(err));
  fprintf(stderr, "; %s missing from the global table\n", n == 1 ? "it is" : "they are");
  pf_object_release(err);
  return PF_CLI_EXIT_RAISED;
}

/* ---- list ---- */

/* "name(params) -> result": the signature with its own (short) name replaced by `name`. */
static void print_entry(const char* name, const char* signature, const char* doc) {
  const char* paren = signature != NULL ? strchr(signature, '(') : NULL;
  printf("%s%s\n", name, paren != NULL ? paren : "");
  if (doc != NULL && doc[0] != '\0')
    printf("    %s\n", doc);
}

/* Prints the global function `name` as one entry of a listing. */
static void print_global(const char* name) {
  pf_object_t* fn = NULL;
  if (pf_global_get(name, &fn) != 0)
    pf_error_clear();
  print_entry(name, fn != NULL ? pf_function_signature(fn) : NULL,
              fn != NULL ? pf_function_doc(fn) : NULL);
  pf_object_release(fn);
}

static int list_globals(void) {
  char** names;
  size_t count;
  if (pf_global_list(&names, &count) != 0)
    return pf_cli_report_raised("cannot list the global functions");
  for (size_t i = 0; i < count; ++i)
    print_global(names[i]);
  pf_global_list_free(names);
  return check_static_failures(0, PF_CLI_EXIT_OK);
}

static int list_library(const char* path) {
  pf_object_t* module;
  char** registered;
  size_t count;
  int failures = pf_global_static_failures();
  if (pf_cli_library_load(path, &module, &registered, &count) != 0)
    return pf_cli_report_raised("cannot load the library");
  pf_export_info_t* list;
  if (pf_module_list(module, &list, NULL) != 0) {
    pf_cli_names_free(registered);
    pf_object_release(module);
    return pf_cli_report_raised("cannot list the library");
  }
  for (pf_export_info_t* e = list; e->name != NULL; ++e)
    print_entry(e->name, e->signature, e->doc);
  if (count > 0)
    puts("registered in the global table:");
  for (size_t i = 0; i < count; ++i)
    print_global(registered[i]);
  pf_module_list_free(list);
  pf_cli_names_free(registered);
  pf_object_release(module);
  return check_static_failures(failures, PF_CLI_EXIT_OK);
}

static int cmd_list(int argc, char** argv) {
  /* --help or -h anywhere: after LIBRARY it was an unknown option, or a second LIBRARY (review) */
  for (int i = 1; i < argc; ++i) {
    if (is_help(argv[i])) {
      fputs(list_help, stdout);
      return PF_CLI_EXIT_OK;
    }
  }
  /* options first: 'list --lib x.so' read --lib as the LIBRARY and x.so as a second one */
  for (int i = 1; i < argc; ++i)
    if (strncmp(argv[i], "--", 2) == 0)
      return usage_error("unknown option for list:", argv[i]);
  if (argc > 2)
    return usage_error("list takes at most one LIBRARY, got also", argv[2]);
  /* as `call --lib ''`: a usage error (it was pf_module_load's ValueError, exit 1: review) */
  if (argc == 2 && argv[1][0] == '\0')
    return usage_error("list needs a LIBRARY path, got an empty one", NULL);
  return argc == 2 ? list_library(argv[1]) : list_globals();
}

/* ---- info ---- */

static void print_cuda_devices(void) {
#ifdef PF_CLI_HAVE_CUDA
  int32_t n = 0;
  if (pf_cuda_device_count(&n) != 0) {
    pf_object_t* err = pf_error_take();
    printf("CUDA devices: unknown (%s)\n", err != NULL ? pf_error_message(err) : "error");
    pf_object_release(err);
  } else if (n == 0) {
    puts("CUDA devices: 0 (no CUDA device)");
  } else {
    printf("CUDA devices: %d\n", (int)n);
  }
#else
  puts("CUDA devices: CUDA support not built");
#endif
}

static int cmd_info(int argc, char** argv) {
  if (argc > 1 && is_help(argv[1])) {
    fputs(info_help, stdout);
    return PF_CLI_EXIT_OK;
  }
  if (argc > 1)
    return usage_error("info takes no arguments, got", argv[1]);
  printf("packfn %s\n", PF_VERSION_STRING);
  printf("ABI version: %d.%d\n", PF_ABI_VERSION_MAJOR, PF_ABI_VERSION_MINOR);
  print_cuda_devices();
  fputs("allocators:", stdout);
  for (int32_t type = 1; type < PF_ALLOCATOR_MAX_DEVICE_TYPE; ++type) {
    pf_allocator_t alloc;
    if (pf_allocator_get(type, &alloc) != 0 || alloc.alloc == NULL) {
      pf_error_clear();
      continue;
    }
    const char* name = pf_device_type_name(type);
    if (name != NULL)
      printf(" %s", name);
    else
      printf(" device(%d)", (int)type);
  }
  fputc('\n', stdout);
  printf("kernels: %d%s; CPU loops: %s, threads per call: %d\n", (int)pf_kernels_count(),
         pf_kernels_have_cuda() ? " (CPU and CUDA versions)" : " (CPU versions)", pf_kernels_isa(),
         pf_kernels_threads());
  printf("global functions: %zu\n", pf_global_count());
  return check_static_failures(0, PF_CLI_EXIT_OK);
}

/* ---- dispatch ---- */

typedef struct command_s {
  const char* name;
  int (*run)(int argc, char** argv);
} command_t;

static const command_t commands[] = {
    {"list", cmd_list},
    {"call", pf_cli_call_main},
    {"info", cmd_info},
    {"bench", pf_cli_bench_main},
};

static const command_t* find_command(const char* name) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
  return NULL;
}

/* The CPUs this process may run on (its affinity mask: taskset, cpusets), else those online. */
static int cpus_usable(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 && online < 1024 ? (int)online : 1;
}

static int run_main(int argc, char** argv) {
  /* keeps the kernel libraries linked under --as-needed, so their kernels register at load */
  (void)pf_kernels_count();
#ifdef PF_CLI_HAVE_CUDA
  (void)pf_kernels_cuda_count();
#endif
  /* A command is the whole process: its kernel calls may use every CPU it may run on (a
   * library's default is one thread, as a host shares its CPUs). PACKFN_KERNEL_THREADS decides
   * when set. */
  if (getenv("PACKFN_KERNEL_THREADS") == NULL) {
    int cpus = cpus_usable();
    if (cpus > 1)
      pf_kernels_set_threads(cpus < 64 ? cpus : 64);
  }
  if (pf_global_static_failures() > 0)
    startup_error = pf_error_take(); /* kept for list and info to report */
  if (argc < 2)
    return usage_error("missing COMMAND", NULL);
  const char* cmd = argv[1];
  if (is_help(cmd)) {
    fputs(main_usage, stdout);
    return PF_CLI_EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    if (argc > 2 && !is_help(argv[2])) /* as `info extra` (it was ignored; review) */
      return usage_error("--version takes no arguments, got", argv[2]);
    printf("packfn %s (ABI %d.%d)\n", PF_VERSION_STRING, PF_ABI_VERSION_MAJOR,
           PF_ABI_VERSION_MINOR);
    return PF_CLI_EXIT_OK;
  }
  if (strcmp(cmd, "help") == 0) {
    /* help is a command too: `help --help` and `help help` are its own help (both were
     * "unknown command", exit 2; review) */
    if (argc < 3 || is_help(argv[2]) || strcmp(argv[2], "help") == 0) {
      fputs(main_usage, stdout);
      return PF_CLI_EXIT_OK;
    }
    const command_t* c = find_command(argv[2]);
    if (c == NULL)
      return usage_error("unknown command", argv[2]);
    if (argc > 3 && !is_help(argv[3])) /* `help call x`: x was ignored (review) */
      return usage_error("help takes at most one COMMAND, got", argv[3]);
    char* help_argv[] = {argv[2], (char*)"--help", NULL};
    return c->run(2, help_argv);
  }
  const command_t* c = find_command(cmd);
  if (c == NULL)
    return usage_error(cmd[0] == '-' ? "unknown option" : "unknown command", cmd);
  return c->run(argc - 1, argv + 1);
}

/* Flushes stdout and says on stderr when what a command printed could not be written (a full
 * disk, /dev/full): the exit code is then 1 (or the command's own failure), never 0 for output
 * that was lost. */
static int check_stdout(int rc) {
  int error = fflush(stdout) != 0 ? errno : 0;
  if (error == 0 && !ferror(stdout))
    return rc;
  if (pf_cli_stdout_error() != 0) /* the first failure's reason, where a write kept it */
    error = pf_cli_stdout_error();
  fprintf(stderr, "packfn: cannot write to standard output: %s\n",
          error != 0 ? strerror(error) : "write error");
  return rc != PF_CLI_EXIT_OK ? rc : PF_CLI_EXIT_RAISED;
}

int main(int argc, char** argv) {
  /* A file size limit (ulimit -f) makes a write past it fail with EFBIG, which the --out
   * writers report and clean up after (docs/cli.md), rather than kill the process with SIGXFSZ
   * and leave a temporary file behind. */
  signal(SIGXFSZ, SIG_IGN);
  return check_stdout(run_main(argc, argv));
}
