/* cli_call.c: `packfn call`: options, argument parsing, the call itself (on --device when given),
 * which tensors count as outputs, and printing them or writing them with --out. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char call_usage[] =
    "usage: packfn call [--lib LIBRARY] [--device DEVICE] [--out FILE.npy]... NAME [ARG]...\n";

static const char call_help[] =
    "Calls the packed function NAME (a global function, or a function of LIBRARY with --lib)\n"
    "with the given arguments, then prints its result and the tensors it wrote.\n"
    "\n"
    "options (anywhere on the line; `--` ends them):\n"
    "  --lib LIBRARY      look NAME up in this shared library (pf_module_load)\n"
    "  --out FILE.npy     write a tensor output to FILE.npy instead of printing it; repeat for\n"
    "                     several outputs (a FILE.npy that is also an argument receives that\n"
    "                     argument; the others take the remaining outputs in order)\n"
    "  --device DEVICE    run on DEVICE (e.g. cuda:0): tensor arguments are copied there and\n"
    "                     back\n"
    "  -h, --help         show this help\n"
    "\n"
    "arguments (first rule that matches; docs/cli.md has the details):\n"
    "  str:TEXT int:N float:X bool:B dtype:T device:D npy:FILE   force a type\n"
    "  true false                 bool          none          None\n"
    "  3 -7 0x10                  int           1e-5 2.5 nan  float\n"
    "  float32[2,3]:1,2,3,4,5,6   tensor from values (or one value for all elements)\n"
    "  float32[2,3]               zero tensor, an output\n"
    "  x.npy                      tensor read from a .npy file; a missing one that is also\n"
    "                             an --out is created like the tensor argument before it\n"
    "  float32 int8x4             dtype         cpu cuda:0    device\n"
    "  anything else              string\n"
    "\n"
    "outputs: a tensor result, and the tensor arguments that are zero literals, files named by\n"
    "--out, or whose contents the call changed. With none of them, the result is printed.\n"
    ".npy inputs are mapped, not copied; a write into one lands in a private copy, never the\n"
    "file. --out files are checked before the call and replaced only when all are written.\n"
    "\n"
    "exit status: 0 success, 1 packfn raised (the error is printed), 2 usage error.\n"
    "example: packfn call packfn.kernels.rms_norm x.npy y.npy 1e-5 --out y.npy\n";

/* The most --out options one call takes: more than any kernel has outputs. */
#define CALL_MAX_OUTS 64

typedef struct call_opts_s {
  const char* lib;
  const char* device;
  const char* outs[CALL_MAX_OUTS];
  int num_outs;
  const char* name;
  char** args; /* num_args tokens */
  int num_args;
} call_opts_t;

/* One tensor the call produced, and where it goes. */
typedef struct call_output_s {
  pf_object_t* tensor;  /* borrowed */
  const char* npy_path; /* the argument's file, else NULL */
  int out;              /* index of the --out file it is written to, or -1: printed */
} call_output_t;

static int usage_error(const char* fmt, const char* what) {
  fputs("packfn call: ", stderr);
  fprintf(stderr, fmt, what);
  fputc('\n', stderr);
  fputs(call_usage, stderr);
  return PF_CLI_EXIT_USAGE;
}

/* Reads an option's value: "--opt VALUE" or "--opt=VALUE". 1 when argv[*i] is that option;
 * *missing then 1 when no value follows, 2 when it is empty ("--out=", "--lib ''"). */
static int option_value(int argc, char** argv, int* i, const char* opt, const char** value,
                        int* missing) {
  size_t n = strlen(opt);
  if (strncmp(argv[*i], opt, n) != 0)
    return 0;
  if (argv[*i][n] == '=') {
    *value = argv[*i] + n + 1;
  } else if (argv[*i][n] != '\0') {
    return 0;
  } else if (*i + 1 >= argc) {
    *missing = 1;
    return 1;
  } else {
    *value = argv[++*i];
  }
  if ((*value)[0] == '\0')
    *missing = 2;
  return 1;
}

/* Splits the command line. Returns -1 to go on, else the exit code (help, usage error). */
static int parse_options(int argc, char** argv, call_opts_t* o, char** positional) {
  int n = 0, options_done = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char *value = NULL, *opt = NULL;
    int missing = 0;
    if (options_done || strncmp(a, "--", 2) != 0) {
      if (strcmp(a, "-h") == 0 && !options_done) {
        fputs(call_usage, stdout);
        fputs(call_help, stdout);
        return PF_CLI_EXIT_OK;
      }
      positional[n++] = argv[i];
      continue;
    }
    if (strcmp(a, "--") == 0) {
      options_done = 1;
    } else if (strcmp(a, "--help") == 0) {
      fputs(call_usage, stdout);
      fputs(call_help, stdout);
      return PF_CLI_EXIT_OK;
    } else if (option_value(argc, argv, &i, opt = "--lib", &value, &missing)) {
      o->lib = value;
    } else if (option_value(argc, argv, &i, opt = "--device", &value, &missing)) {
      o->device = value;
    } else if (option_value(argc, argv, &i, opt = "--out", &value, &missing)) {
      if (!missing && o->num_outs == CALL_MAX_OUTS)
        return usage_error("too many --out options (at most %s)", "64");
      if (!missing)
        o->outs[o->num_outs++] = value;
    } else {
      return usage_error("unknown option '%s'", a);
    }
    if (missing)
      return usage_error(missing == 1 ? "option %s needs a value"
                                      : "option %s needs a value, got an empty one",
                         opt);
  }
  if (n == 0)
    return usage_error("missing the function NAME%s", "");
  if (positional[0][0] == '\0') /* no name either (with --lib it was a ValueError; review) */
    return usage_error("missing the function NAME%s", " (got an empty one)");
  o->name = positional[0];
  o->args = positional + 1;
  o->num_args = n - 1;
  return -1;
}

static DLTensor* arg_tensor(const pf_cli_arg_t* a) {
  return a->value.type_index == PF_TYPE_TENSOR ? pf_tensor_dltensor(a->value.v_obj) : NULL;
}

/* 1 when nothing but a copy tells whether the call changed the tensor of `a`: inline values,
 * or a .npy file that was read rather than mapped (and not an output anyway). */
static int needs_copy(const pf_cli_arg_t* a) {
  return !a->created && !a->named_by_out && !a->filled && (a->map == NULL || a->map->base == NULL);
}

/* The first argument before args[i] that holds the same tensor object (arguments naming one
 * --out file share it), or NULL. */
static const pf_cli_arg_t* same_tensor_before(const pf_cli_arg_t* args, int i) {
  for (int j = 0; j < i; ++j)
    if (arg_tensor(&args[j]) != NULL && args[j].value.v_obj == args[i].value.v_obj)
      return &args[j];
  return NULL;
}

/* Before the call: keep a copy of the tensors that need one to see later whether the call
 * wrote them (needs_copy), and copy tensors to the --device (a tensor given twice once, so the
 * function sees one tensor there too). */
static int prepare_tensors(pf_cli_arg_t* args, int n, const DLDevice* device) {
  for (int i = 0; i < n; ++i) {
    DLTensor* t = arg_tensor(&args[i]);
    if (t == NULL)
      continue;
    const pf_cli_arg_t* first = same_tensor_before(args, i);
    if (first != NULL) {
      args[i].device_tensor = first->device_tensor;
      if (first->device_tensor != NULL)
        pf_object_retain(first->device_tensor);
      continue;
    }
    if (needs_copy(&args[i])) {
      size_t nbytes = pf_dltensor_nbytes(t);
      args[i].before = malloc(nbytes > 0 ? nbytes : 1);
      if (args[i].before == NULL) {
        PF_ERROR_SET(PF_ERR_MEMORY, "packfn: out of memory");
        return -1;
      }
      memcpy(args[i].before, pf_dltensor_data(t), nbytes);
    }
    if (device != NULL && (int32_t)device->device_type != PF_DEV_CPU &&
        pf_tensor_to_device(args[i].value.v_obj, *device, &args[i].device_tensor) != 0)
      return -1;
  }
  return 0;
}

/* After the call: bring tensors back from the --device (each once). */
static int fetch_tensors(pf_cli_arg_t* args, int n) {
  for (int i = 0; i < n; ++i)
    if (args[i].device_tensor != NULL && same_tensor_before(args, i) == NULL &&
        pf_dltensor_copy(arg_tensor(&args[i]), pf_tensor_dltensor(args[i].device_tensor)) != 0)
      return -1;
  return 0;
}

/* The output among outs[0..count) that is the tensor object t, or NULL. */
static call_output_t* find_output(call_output_t* outs, int count, const pf_object_t* t) {
  for (int j = 0; j < count; ++j)
    if (outs[j].tensor == t)
      return &outs[j];
  return NULL;
}

/* The argument's tensor on the host when t is its copy on the --device (a function that
 * returned its argument returned that copy: fetch_tensors brought its values back into the
 * argument), else t. */
static pf_object_t* host_of(pf_object_t* t, const pf_cli_arg_t* args, int n) {
  for (int i = 0; i < n; ++i)
    if (args[i].device_tensor == t && arg_tensor(&args[i]) != NULL)
      return args[i].value.v_obj;
  return t;
}

/* The tensors the call produced: a tensor result, then the output arguments in order, each
 * tensor once (a result that is an argument, or its copy on the --device, and arguments naming
 * one --out file: the first place it comes, with the argument's file; review: under --device
 * the copy was an output of its own beside its argument). Their number, or -1 with an error
 * raised. */
static int collect_outputs(const pf_any_t* result, const pf_cli_arg_t* args, int n,
                           call_output_t* outs) {
  int count = 0;
  if (result->type_index == PF_TYPE_TENSOR)
    outs[count++] = (call_output_t){host_of(result->v_obj, args, n), NULL, -1};
  for (int i = 0; i < n; ++i) {
    if (arg_tensor(&args[i]) == NULL)
      continue;
    call_output_t* seen = find_output(outs, count, args[i].value.v_obj);
    if (seen != NULL) {
      if (seen->npy_path == NULL && args[i].named_by_out)
        seen->npy_path = args[i].npy_path;
      continue;
    }
    int changed = args[i].created || args[i].named_by_out ? 1 : pf_cli_arg_changed(&args[i]);
    if (changed < 0)
      return -1;
    if (changed)
      outs[count++] = (call_output_t){args[i].value.v_obj, args[i].npy_path, -1};
  }
  return count;
}

/* Gives every --out file an output: its own argument first, then the rest in order. Returns 0,
 * or an exit code after a usage message. */
static int assign_outs(const call_opts_t* o, call_output_t* outs, int count) {
  int taken[CALL_MAX_OUTS] = {0};
  for (int k = 0; k < o->num_outs; ++k)
    for (int j = 0; j < count; ++j)
      if (outs[j].out < 0 && outs[j].npy_path != NULL &&
          pf_cli_same_file(outs[j].npy_path, o->outs[k])) {
        outs[j].out = k;
        taken[k] = 1;
        break;
      }
  for (int k = 0, j = 0; k < o->num_outs; ++k) {
    if (taken[k])
      continue;
    while (j < count && outs[j].out >= 0)
      ++j;
    if (j == count) {
      fprintf(stderr,
              "packfn call: --out %s: no tensor output left to write (the call produced %d)\n%s",
              o->outs[k], count, call_usage);
      return PF_CLI_EXIT_USAGE;
    }
    outs[j].out = k;
  }
  return 0;
}

/* Writes every output that has an --out file into its temporary file (not yet renamed over
 * its target). 0, or -1 with an error raised. */
static int write_outputs(pf_npy_output_t* files, const call_output_t* outs, int count) {
  for (int j = 0; j < count; ++j)
    if (outs[j].out >= 0 && pf_cli_output_write(&files[outs[j].out], outs[j].tensor) != 0)
      return -1;
  return 0;
}

/* Prints the result and the outputs into `text` (see report). 0, or -1 with an error raised. */
static int print_outputs(const call_opts_t* o, const pf_any_t* result, const call_output_t* outs,
                         int count, FILE* text) {
  int printed = 0;
  if (result->type_index != PF_TYPE_NONE && result->type_index != PF_TYPE_TENSOR) {
    if (pf_cli_print_value(result, text) != 0)
      return -1;
    fputc('\n', text);
    printed = 1;
  }
  for (int j = 0; j < count; ++j) {
    if (outs[j].out >= 0) {
      fprintf(text, "wrote %s\n", o->outs[outs[j].out]);
    } else {
      if (pf_cli_print_tensor(outs[j].tensor, text) != 0)
        return -1;
      fputc('\n', text);
    }
    printed = 1;
  }
  if (!printed)
    fputs("None\n", text);
  return 0;
}

/* Prints the result and the outputs, writes those with an --out file (files[k] prepared for
 * o->outs[k]; committed or aborted here). The text is composed in memory while the outputs'
 * shared maps are still there (a tensor over one, or a result that holds one, is read when it
 * prints; the commit unmaps them), and shown once every file is in place: nothing on stdout
 * when a write fails. Returns the exit code. */
static int report(const call_opts_t* o, const pf_any_t* result, const pf_cli_arg_t* args, int n,
                  pf_npy_output_t* files) {
  call_output_t* outs = malloc(sizeof(call_output_t) * (size_t)(n + 1));
  char* text = NULL;
  size_t text_size = 0;
  FILE* memory = outs != NULL ? open_memstream(&text, &text_size) : NULL;
  if (memory == NULL) {
    pf_npy_output_abort(files, (size_t)o->num_outs); /* no temporary file left behind */
    free(outs);
    return pf_cli_report_raised("out of memory");
  }
  int count = collect_outputs(result, args, n, outs);
  int rc = count < 0 ? pf_cli_report_raised("cannot compare an argument with its file")
                     : assign_outs(o, outs, count);
  if (rc == 0 && write_outputs(files, outs, count) != 0)
    rc = pf_cli_report_raised("cannot write an output");
  if (rc == 0 && print_outputs(o, result, outs, count, memory) != 0)
    rc = pf_cli_report_raised("cannot print the result");
  if (fclose(memory) != 0 && rc == 0) {
    PF_ERROR_SET(PF_ERR_MEMORY, "packfn: out of memory");
    rc = pf_cli_report_raised("out of memory");
  }
  char err[PF_CLI_MSG_MAX];
  if (rc == 0 && pf_npy_output_commit(files, (size_t)o->num_outs, err, sizeof err) != 0) {
    PF_ERROR_SET(PF_ERR_OS, "%s", err);
    rc = pf_cli_report_raised("cannot write an output");
  }
  pf_npy_output_abort(files, (size_t)o->num_outs); /* after a commit: nothing left to do */
  if (rc == 0)
    pf_cli_stdout_write(text, text_size); /* a failure shows at exit (main checks stdout) */
  free(text);
  free(outs);
  return rc;
}

/* Before the call: no --out file named twice, and each prepared (pf_cli_output_open: the
 * target a regular file or missing, its folder writable). 0, or the exit code after a message
 * (the outputs prepared so far aborted). */
static int prepare_outputs(const call_opts_t* o, pf_npy_output_t* files) {
  for (int k = 0; k < o->num_outs; ++k) {
    for (int m = 0; m < k; ++m) {
      if (pf_cli_same_file(o->outs[k], o->outs[m])) {
        pf_npy_output_abort(files, (size_t)k);
        fprintf(stderr, "packfn call: --out %s: the same file as --out %s\n%s", o->outs[k],
                o->outs[m], call_usage);
        return PF_CLI_EXIT_USAGE;
      }
    }
    if (pf_cli_output_open(o->outs[k], &files[k]) != 0) {
      pf_npy_output_abort(files, (size_t)k);
      return pf_cli_report_raised("cannot prepare an output");
    }
  }
  return 0;
}

/* Parses the arguments into args[0..n), those named by an --out in their prepared files. 0, or
 * the exit code after a message. */
static int parse_args(const call_opts_t* o, pf_cli_arg_t* args, pf_npy_output_t* files) {
  char msg[PF_CLI_MSG_MAX];
  int rc =
      pf_cli_args_parse(o->args, o->num_args, o->outs, o->num_outs, files, args, msg, sizeof msg);
  if (rc == -2)
    return pf_cli_report_raised("cannot prepare an output");
  return rc != 0 ? usage_error("%s", msg) : 0;
}

static int run_call(const call_opts_t* o, pf_cli_arg_t* args, pf_any_t* packed) {
  DLDevice device;
  if (o->device != NULL && pf_device_parse(o->device, &device) != 0) {
    pf_error_clear();
    return usage_error("bad --device '%s' (expected cpu, cuda, cuda:1, ...)", o->device);
  }
  /* the function first: a name or library that is wrong is said before the outputs are laid
   * out, which copies each argument that is also an output into its new file (a typo took
   * seconds on a large file, or reported the disk full; review) */
  pf_object_t *module = NULL, *fn = NULL;
  pf_any_t result = pf_any_none();
  pf_npy_output_t files[CALL_MAX_OUTS];
  int rc;
  if (pf_cli_find_function(o->lib, o->name, &module, &fn) != 0) {
    rc = pf_cli_report_raised("cannot find the function");
    goto done;
  }
  if ((rc = prepare_outputs(o, files)) != 0)
    goto done;
  if ((rc = parse_args(o, args, files)) != 0) {
    pf_npy_output_abort(files, (size_t)o->num_outs);
    goto done;
  }
  if (prepare_tensors(args, o->num_args, o->device != NULL ? &device : NULL) != 0) {
    pf_npy_output_abort(files, (size_t)o->num_outs);
    rc = pf_cli_report_raised("cannot prepare the arguments");
    goto done;
  }
  for (int i = 0; i < o->num_args; ++i)
    packed[i] =
        args[i].device_tensor != NULL ? pf_any_object(args[i].device_tensor) : args[i].value;
  int call_rc = pf_function_call(fn, packed, o->num_args, &result);
  if (call_rc != 0)
    pf_error_ensure(o->name, call_rc); /* a function that failed without raising: say so */
  if (call_rc != 0 || fetch_tensors(args, o->num_args) != 0) {
    pf_npy_output_abort(files, (size_t)o->num_outs);
    rc = pf_cli_report_raised("the call failed");
    goto done;
  }
  rc = report(o, &result, args, o->num_args, files);
done:
  pf_any_release(&result);
  pf_object_release(fn);
  pf_object_release(module);
  return rc;
}

int pf_cli_call_main(int argc, char** argv) {
  call_opts_t o;
  memset(&o, 0, sizeof o);
  char** positional = malloc(sizeof(char*) * (size_t)argc);
  if (positional == NULL)
    return pf_cli_report_raised("out of memory");
  int rc = parse_options(argc, argv, &o, positional);
  if (rc >= 0) {
    free(positional);
    return rc;
  }
  size_t n = (size_t)o.num_args + 1;
  pf_cli_arg_t* args = calloc(n, sizeof(pf_cli_arg_t));
  pf_any_t* packed = calloc(n, sizeof(pf_any_t));
  if (args == NULL || packed == NULL)
    rc = pf_cli_report_raised("out of memory");
  else
    rc = run_call(&o, args, packed);
  for (int i = 0; args != NULL && i < o.num_args; ++i)
    pf_cli_arg_clear(&args[i]);
  free(packed);
  free(args);
  free(positional);
  return rc;
}
