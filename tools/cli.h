/* cli.h: what the files of the packfn command line share: exit codes, parsed `call` arguments
 * (cli_args.c), value printing (cli_print.c) and the `call` command (cli_call.c). */
#ifndef PACKFN_TOOLS_CLI_H_
#define PACKFN_TOOLS_CLI_H_

#include <stddef.h>
#include <stdio.h>

#include "packfn/packfn.h"

/* Exit codes of every command (docs/cli.md). */
#define PF_CLI_EXIT_OK     0 /* success */
#define PF_CLI_EXIT_RAISED 1 /* packfn raised: the call, loading a library, finding a function */
#define PF_CLI_EXIT_USAGE  2 /* the command line is wrong: options, literals, input files */

/* Size of the buffers usage messages are written into: room for a path and a quoted token. */
#define PF_CLI_MSG_MAX 1024

/* One argument of `packfn call`, parsed from its command-line token. */
typedef struct pf_cli_arg_s {
  const char* text;     /* the token, borrowed from argv */
  pf_any_t value;       /* owned; a tensor is a CPU tensor object */
  const char* npy_path; /* the .npy file a tensor came from (or is created for), else NULL */
  int created;          /* 1: a tensor made for the call to write (zeros), an output by rule */
  int named_by_out;     /* 1: npy_path is also given as --out, so the tensor is an output */
  pf_object_t* device_tensor; /* owned copy on the --device, or NULL when the tensor is on cpu */
  void* before;               /* owned copy of the tensor's bytes before the call, or NULL */
} pf_cli_arg_t;

/* Parses one token into arg->value (grammar in docs/cli.md). `outs` (num_outs paths given
 * with --out) decides whether a missing .npy file is created for the call: it is when named by
 * an --out, then with the dtype and shape of `like` (the first tensor argument before it; NULL:
 * no such argument, an error). Returns 0, or -1 with a one-line message in msg (a usage error:
 * exit 2); arg then owns nothing. */
int pf_cli_arg_parse(const char* text, const char* const* outs, int num_outs, pf_object_t* like,
                     pf_cli_arg_t* arg, char* msg, size_t msg_size);

/* Releases what arg owns and zeroes it. */
void pf_cli_arg_clear(pf_cli_arg_t* arg);

/* Writes "Kind: message" (with its causes, one per line) of the raised error to stderr, takes
 * the error, and returns PF_CLI_EXIT_RAISED. With no error raised it writes `fallback`. */
int pf_cli_report_raised(const char* fallback);

/* Prints a value for people: none "None", bool "True"/"False", ints, floats as Python's repr,
 * strings raw at the top level (quoted inside containers), tensors as NumPy's repr (copied to
 * the host first when on a device), shapes "(2, 3)", arrays "[...]", maps "{k: v}". No
 * trailing newline. Returns 0, or -1 with an error raised (a device copy failed). */
int pf_cli_print_value(const pf_any_t* value, FILE* out);

/* Prints a tensor object as NumPy's repr (or "<Tensor int4 (2, 3) on cpu:0>" when its dtype has
 * no NumPy form), copying it to the host first when needed. 0, or -1 with an error raised. */
int pf_cli_print_tensor(pf_object_t* tensor, FILE* out);

/* Writes a tensor object to a .npy file (copied to the host first when needed). Returns 0, or
 * -1 with OSError (cannot write) or ValueError (no .npy form of its dtype) raised. */
int pf_cli_write_npy(pf_object_t* tensor, const char* path);

/* The `call` command: argv[0] is "call". Returns the exit code. */
int pf_cli_call_main(int argc, char** argv);

/* Loads a library for --lib and `list LIBRARY`: a bare file name that exists in the current
 * folder is loaded as "./name". New module reference in *out; -1 with an error raised. */
int pf_cli_module_load(const char* path, pf_object_t** out);

#endif /* PACKFN_TOOLS_CLI_H_ */
