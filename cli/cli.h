/* cli.h: what the files of the packfn command line share: exit codes, parsed `call` arguments
 * (cli_args.c), value printing (cli_print.c), finding functions (cli_find.c), and the `call`
 * (cli_call.c) and `bench` (cli_bench.c) commands. */
#ifndef PACKFN_CLI_CLI_H_
#define PACKFN_CLI_CLI_H_

#include <stddef.h>
#include <stdio.h>

#include "packfn/npy.h"
#include "packfn/packfn.h"

/* Exit codes of every command (docs/cli.md). */
#define PF_CLI_EXIT_OK     0 /* success */
#define PF_CLI_EXIT_RAISED 1 /* packfn raised: the call, loading a library, finding a function */
#define PF_CLI_EXIT_USAGE  2 /* the command line is wrong: options, literals, input files */

/* Size of the buffers usage messages are written into: room for a path and a quoted token. */
#define PF_CLI_MSG_MAX 1024

/* One argument of `packfn call`, parsed from its command-line token. */
typedef struct pf_cli_arg_s {
  const char* text;        /* the token, borrowed from argv */
  pf_any_t value;          /* owned; a tensor is a CPU tensor object */
  const char* npy_path;    /* the .npy file a tensor came from (or is created for), else NULL */
  int created;             /* 1: a tensor made for the call to write (zeros), an output by rule */
  int named_by_out;        /* 1: npy_path is also given as --out, so the tensor is an output */
  const pf_npy_map_t* map; /* a .npy tensor's map (owned by the tensor), or NULL: whether the
                              call wrote it is asked of the map, no copy needed */
  int filled;              /* 1: an inline tensor of one repeated value, the bytes of `fill` */
  unsigned char fill[8];
  pf_object_t* device_tensor; /* owned copy on the --device, or NULL when the tensor is on cpu */
  void* before; /* owned copy of the bytes before the call, only when neither map nor fill
                   tells whether the call wrote the tensor (inline values, a .npy file read
                   rather than mapped), else NULL */
} pf_cli_arg_t;

/* What parsing one argument needs to know of the command line and the arguments before it. */
typedef struct pf_cli_parse_s {
  const char* const* outs; /* the num_outs paths given with --out (borrowed) */
  int num_outs;
  pf_npy_output_t* files; /* the --out files prepared, parallel to outs; may be NULL */
  pf_object_t** shared;   /* parallel to outs, may be NULL: the tensor an earlier argument
                             holds for that --out (borrowed), or NULL */
  pf_object_t* like;      /* the first tensor argument so far (borrowed), or NULL */
} pf_cli_parse_t;

/* Parses one token into arg->value (grammar in docs/cli.md). ctx->outs decides whether a
 * missing .npy file is created for the call: it is when named by an --out, then with the dtype
 * and shape of ctx->like (NULL: no tensor argument before it, an error). With ctx->files, a
 * .npy argument named by an --out is a tensor over the shared map of that output's temporary
 * file (pf_npy_output_map: zeros, or the existing file's data), so the function writes the file
 * directly. A .npy argument naming an --out that an earlier argument named (ctx->shared) is a
 * new reference to that argument's tensor: the function sees one tensor, and the file gets
 * what it wrote through either. Returns 0; -1 with a one-line message in msg (a usage error:
 * exit 2); or -2 with an error raised (the output's file could not be laid out, or memory ran
 * out: exit 1); arg
 * then owns nothing. */
int pf_cli_arg_parse(const char* text, const pf_cli_parse_t* ctx, pf_cli_arg_t* arg, char* msg,
                     size_t msg_size);

/* Parses tokens[0..n) into args[0..n) (zeroed by the caller) with pf_cli_arg_parse, each
 * tensor that is created being made like the first tensor argument before it, and the
 * arguments naming one --out file sharing the tensor of the first of them. Returns 0, or
 * pf_cli_arg_parse's -1 or -2; the args parsed so far still own their values (clear them
 * all). */
int pf_cli_args_parse(char** tokens, int n, const char* const* outs, int num_outs,
                      pf_npy_output_t* files, pf_cli_arg_t* args, char* msg, size_t msg_size);

/* Releases what arg owns and zeroes it. */
void pf_cli_arg_clear(pf_cli_arg_t* arg);

/* Writes n bytes to stdout; when they cannot all be written, keeps the reason (errno) for the
 * message at exit (pf_cli_stdout_error), which a later flush no longer knows (review: a large
 * output to a full disk said "write error"). */
void pf_cli_stdout_write(const void* data, size_t n);
/* The reason the first failed pf_cli_stdout_write gave, or 0. */
int pf_cli_stdout_error(void);

/* Writes "Kind: message" (with its causes, one per line) of the raised error to stderr, takes
 * the error, and returns PF_CLI_EXIT_RAISED. With no error raised it writes `fallback`. */
int pf_cli_report_raised(const char* fallback);

/* Prints a value for people: none "None", bool "True"/"False", ints, floats as Python's repr,
 * strings raw at the top level (quoted inside containers), tensors as NumPy's repr (copied to
 * the host first when on a device), shapes "(2, 3)", arrays "[...]", maps "{k: v}",
 * functions with their signature "<function twice(x: int) -> int>". No trailing newline. Returns 0,
 * or -1 with an error raised (a device copy failed). */
int pf_cli_print_value(const pf_any_t* value, FILE* out);

/* Prints a tensor object as NumPy's repr (or "<Tensor int4 (2, 3) on cpu:0>" when its dtype has
 * no NumPy form or it has more than 32 dimensions), copying it to the host first when needed.
 * 0, or -1 with an error raised. */
int pf_cli_print_tensor(pf_object_t* tensor, FILE* out);

/* Prepares the --out file `path` (pf_npy_output_open: the target checked, a temporary file
 * created beside it). 0, or -1 with OSError raised. */
int pf_cli_output_open(const char* path, pf_npy_output_t* out);

/* 1 when the paths a and b name one file (an --out and another --out, or a .npy argument): the
 * same text, the same folder and name in it (so "w.npy" and "./w.npy" match also before w.npy
 * exists), or one existing file (a hard link); a symbolic link is followed. */
int pf_cli_same_file(const char* a, const char* b);

/* Writes a tensor object (copied to the host first when needed, and into C order when it is a
 * strided view) into the prepared output's temporary file (flushed to disk when it replaces a
 * file, pf_npy_output_write); the target is replaced only by pf_npy_output_commit. 0, or -1
 * with ValueError (a dtype with no .npy form, more than 32 dimensions) or OSError (cannot
 * write) raised. */
int pf_cli_output_write(pf_npy_output_t* out, pf_object_t* tensor);

/* 1 when the call changed the tensor of `arg` (from its map, its fill value or its copy), 0
 * when not, -1 with OSError raised (a map could not be compared with its file). */
int pf_cli_arg_changed(const pf_cli_arg_t* arg);

/* The `call` command: argv[0] is "call". Returns the exit code. */
int pf_cli_call_main(int argc, char** argv);

/* The `bench` command (cli_bench.c): argv[0] is "bench". Returns the exit code. */
int pf_cli_bench_main(int argc, char** argv);

/* ---- finding functions (cli_find.c) ---- */

/* Loads a library for --lib and `list LIBRARY`: a bare file name that exists in the current
 * folder is loaded as "./name". New module reference in *out; -1 with an error raised. */
int pf_cli_module_load(const char* path, pf_object_t** out);

/* pf_cli_module_load, and the names the library's constructors added to the global table
 * (PF_REGISTER_GLOBAL and the like; none when it was loaded already), sorted, in *registered
 * (NULL-terminated; free with pf_cli_names_free) and their number in *count. 0, or -1 with an
 * error raised (*module and *registered NULL). */
int pf_cli_library_load(const char* path, pf_object_t** module, char*** registered, size_t* count);

/* Frees what pf_cli_library_load returned; NULL is a no-op. */
void pf_cli_names_free(char** names);

/* The function `name`: with `lib` (not NULL), an export of that library (new module reference
 * in *module), else a function of the global table, which includes what the library
 * registered; without `lib`, a global function (*module NULL). New reference in *fn. -1 with
 * an error raised, KeyError when the name is found nowhere: "no global function named 'x'; did
 * you mean 'y'? (`packfn list` shows them)" (suggestions: names close to it, or whose last
 * dotted part it is). *module may hold a reference on failure too: release it. */
int pf_cli_find_function(const char* lib, const char* name, pf_object_t** module, pf_object_t** fn);

#endif /* PACKFN_CLI_CLI_H_ */
