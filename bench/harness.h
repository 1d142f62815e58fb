/* harness.h: the benchmark harness interface: what an operation is, the per-operation
   contract every implementation (direct, libffi, TVM-FFI, packfn) follows, and the tables. */
#ifndef PF_BENCH_HARNESS_H
#define PF_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Inputs shared by every implementation, so that all of them do the same work. */
#define PF_BENCH_GLOBAL_SHORT "pf.nop"                      /* 6 bytes */
#define PF_BENCH_GLOBAL_LONG  "packfn.benchmark.lookup_fn1" /* 27 bytes */
#define PF_BENCH_STR_ARG      "bench"                       /* string argument of call_3mixed */
#define PF_BENCH_FLOAT_ARG    2.0                           /* float argument of call_3mixed */
#define PF_BENCH_STRING_5     "hello"
#define PF_BENCH_STRING_100                                                                        \
  "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstu"  \
  "vwxyz!?"
#define PF_BENCH_ERROR_KIND    "RuntimeError"
#define PF_BENCH_ERROR_MESSAGE "bench error" /* 11 bytes */
#define PF_BENCH_TENSOR_NUMEL  1024          /* tensors are 1-d float32 on CPU */

/* One implementation of one operation. The harness calls setup once, then run several times
   (warm-up, timed repetitions, or one loop with callgrind collecting), then teardown. Only run
   is measured, so run holds the loop and nothing else.

   Checksum contract (the harness checks that every implementation of an operation returns the
   same checksum for the same iters; i counts 0 .. iters-1):
     call_0                 f() returns int 1                        sum = iters
     call_1int              f(i) returns i + 1                       sum of i + 1
     call_1int_closure      as call_1int, through a function with state (self and deleter)
     call_3mixed            f(i, PF_BENCH_FLOAT_ARG, PF_BENCH_STR_ARG) returns
                            i + (int64_t)float + first byte of the string
     call_6int              f(i, 1, 2, 3, 4, 5) returns the sum
     call_dltensor          f(DLTensor* view) returns shape[0]        sum = 1024 * iters
     call_tensor            f(tensor object) returns shape[0]        sum = 1024 * iters
     call_typed             typed add(i, 1) called as a packed function; sum of i + 1
     call_typed_dynamic     the same, the typed function built at run time from a declaration
     module_call            as call_1int, the function taken from a loaded library
     add_n_1                add_n(x, out, n) on one float32 element x = 0, n = (i mod 8) + 1
                            (each call's result differs from the last); + out[0], checked
                            against that sum at the end of the loop
     global_get_short/long  look up a registered name, release it    +1 per hit
     function_lifecycle     create (no state) + retain + release + release; + strong count seen
                            after the retain (2)
     closure_lifecycle      the same with a non-NULL self and deleter
     retain_release         retain + release of a live object; + strong count seen (2)
     weak_lock              promote a weak reference, release the strong one; + 1 when alive
     string_5 / string_100  create a string value from bytes, release it; + its size read back
                            (the value passes PF_BENCH_OPAQUE_MEM first, so it is built in memory
                            and read back each iteration)
     error_roundtrip_bt     raise (kind, message) in this thread with a full native backtrace
                            on both sides (packfn: PACKFN_BACKTRACE=1, the row in its own
                            process), take it, read its backtrace text, release it;
                            + size of the message read back (11)
     error_roundtrip_nobt   raise, take, release with no stack walk on either side (packfn:
                            PACKFN_BACKTRACE off, the raise site's line only; TVM-FFI: an empty
                            backtrace); + size of the message (11)
     tensor_empty           1-d float32 CPU tensor of 1024 elements, release; + shape[0]
     tensor_empty_env       the same through an allocator the host installs
     dlpack_legacy          tensor -> DLManagedTensor -> tensor, release; + shape[0]
     dlpack_versioned       the same with DLManagedTensorVersioned
     dlpack_neutral         a neutral producer (plain C in the benchmark, the same for every
                            column) exports its tensor (versioned); the runtime imports it,
                            exports it, releases its tensor and deletes its export, which calls
                            the producer's deleter; + shape[0] of the export (1024)
     dlpack_own             the same with the runtime's own tensor
   A packed callee checks its argument count and argument type indices before using them, as a
   real callee does, and raises an error when they are wrong. */
/* 1 when packfn has joined the TVM-FFI of this process (packfn_ops.c). */
int pf_bench_packfn_joined(void);

typedef struct pf_bench_op {
  const char* op;    /* operation name, one of the catalogue in harness.c */
  const char* impl;  /* "direct", "libffi", "tvmffi", "packfn" */
  const char* entry; /* the API entry points measured, for the report */
  /* Builds the state run needs (functions, tensors, registered names); may be NULL. Reports a
     failure with pf_bench_fail. */
  void* (*setup)(void);
  /* The measured loop: does the operation iters times and returns the checksum. */
  uint64_t (*run)(void* state, int64_t iters);
  /* Frees what setup built; may be NULL. */
  void (*teardown)(void* state);
} pf_bench_op_t;

/* Hides a value from the optimiser without emitting an instruction, so a loop whose input is a
   constant still does the work each iteration (at -O3 GCC would otherwise hoist a string built
   inline from a literal out of the loop). */
#if defined(__GNUC__) || defined(__clang__)
#define PF_BENCH_OPAQUE(x) __asm__ volatile("" : "+r"(x))
#else
#define PF_BENCH_OPAQUE(x) ((void)0)
#endif

/* The same for a value in memory (a pf_any_t, a TVMFFIAny): the optimiser must store all of it
   before this point and read back whatever it reads after, so a value built inline (a small
   string) is built every iteration even when what is read back is a constant. No instruction
   of its own. */
#if defined(__GNUC__) || defined(__clang__)
#define PF_BENCH_OPAQUE_MEM(x) __asm__ volatile("" : "+m"(x))
#else
#define PF_BENCH_OPAQUE_MEM(x) ((void)0)
#endif

/* Prints "packfn_bench: <impl> <what>: <detail>" to stderr and exits with status 2. A benchmark
   that cannot do its operation has no figure to report. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noreturn))
#endif
void pf_bench_fail(const char* impl, const char* what, const char* detail);

/* Tables of operations, one per implementation; each returns its table and sets *count. */
const pf_bench_op_t* pf_bench_direct_ops(size_t* count);
#ifdef PF_BENCH_HAVE_LIBFFI
const pf_bench_op_t* pf_bench_libffi_ops(size_t* count);
#endif
#ifdef PF_BENCH_HAVE_TVMFFI
const pf_bench_op_t* pf_bench_tvmffi_ops(size_t* count);
/* The version the loaded libtvm_ffi reports (TVMFFIGetVersion), "major.minor.patch". */
const char* pf_bench_tvmffi_version(void);
#endif
#ifdef PF_BENCH_HAVE_PACKFN
const pf_bench_op_t* pf_bench_packfn_ops(size_t* count);
#endif
#ifdef PF_BENCH_HAVE_DLPACK_FOREIGN
/* dlpack_foreign and dlpack_own, both runtimes (dlpack_foreign_ops.c: needs both). */
const pf_bench_op_t* pf_bench_dlpack_foreign_ops(size_t* count);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PF_BENCH_HARNESS_H */
