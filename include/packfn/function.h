/* packfn functions: function objects over the one safe-call signature, calls (inline) and the
 * global function table. Typed functions and the registration macros are in packfn/typed.h,
 * which this header includes at its end so that code written against it keeps compiling.
 *
 * Lookups, here and in every packfn header, follow one rule: a `_get` (or other lookup) of an
 * absent name returns 0 with *out = NULL and raises nothing; an operation that needs the name
 * to be present (a call by name, a removal) raises KeyError. */
#ifndef PACKFN_FUNCTION_H_
#define PACKFN_FUNCTION_H_

#include "packfn/any.h"
#include "packfn/error.h"

#include <string.h>

PF_EXTERN_C_BEGIN

/* ---- function objects ---- */

/* Creates a function object (type 68) that calls `call(self, args, num_args, result)`.
 * `deleter(self)`, when not NULL, runs exactly once, when the last strong reference goes.
 * New reference in *out (NULL on failure). -1 with ValueError (NULL call or out) or MemoryError;
 * on failure the deleter is not called (self stays the caller's). */
PF_API int pf_function_create(void* self, pf_safe_call_t call, void (*deleter)(void* self),
                              pf_object_t** out);

/* Creates a function object in the ABI's direct form: `call` sits in the cell itself and
 * receives the function object as `self` (it must ignore it). One jump cheaper per call than
 * pf_function_create; for stateless functions, such as those registered in the global table.
 * The object takes a 64-byte cache line of its own (pf_function_create's plain form takes 48
 * bytes), so that threads retaining and releasing different functions never write one line.
 * Failure as pf_function_create. */
PF_API int pf_function_create_direct(pf_safe_call_t call, pf_object_t** out);

/* Failure path of pf_function_call: raises the error describing the bad input, returns -1. */
PF_API int pf__function_call_invalid(const pf_object_t* fn, const pf_any_t* args, int32_t num_args,
                                     const pf_any_t* result);

/* Calls a function object (made by packfn or by any runtime following the ABI). `args` are
 * views borrowed for the call; *result is set to none first and holds an owned value on
 * success (release it with pf_any_release). Returns 0, or -1 with an error raised in this
 * thread (the callee's, or TypeError/ValueError for a NULL or non-function `fn`, a negative
 * `num_args`, NULL `args` with num_args > 0, or a NULL `result`). *result is then none, or,
 * after a callee's failure, what the callee left there: none from packfn's rules for callees
 * (docs/function.md), at worst a value that needs no releasing under the ABI's (an int, ...;
 * pf_global_call and pf_module_call turn it into none). Never release it. */
PF_INLINE int pf_function_call(pf_object_t* fn, const pf_any_t* args, int32_t num_args,
                               pf_any_t* result) {
  if (PF_UNLIKELY(fn == NULL || fn->type_index != PF_TYPE_FUNCTION || num_args < 0 ||
                  (args == NULL && num_args != 0) || result == NULL))
    return pf__function_call_invalid(fn, args, num_args, result);
  result->type_index = PF_TYPE_NONE;
  result->zero_padding = 0;
  result->v_int64 = 0;
  return PF__REINTERPRET_CAST(const pf_function_cell_t*, fn + 1)
      ->safe_call(fn, args, num_args, result);
}

/* Signature text the function carries ("add(a: int, b: int) -> int"), borrowed: valid while
 * the function lives and until pf_function_set_info replaces its texts (which frees the old
 * ones); NULL when it has none or `fn` is not a packfn function object. Never raises. */
PF_API const char* pf_function_signature(const pf_object_t* fn);
/* Documentation the function carries, borrowed as pf_function_signature's text; NULL when none
 * or `fn` is not a packfn function object. Never raises. */
PF_API const char* pf_function_doc(const pf_object_t* fn);
/* Sets the signature and doc texts (copied; either may be NULL to clear it) of a function
 * object made by packfn, freeing the texts it carried before (pointers read from
 * pf_function_signature and pf_function_doc dangle then). Not thread-safe against concurrent
 * readers of the same function: call it right after creation. -1 with TypeError (not a packfn
 * function) or MemoryError; the function then keeps its old texts. */
PF_API int pf_function_set_info(pf_object_t* fn, const char* signature, const char* doc);

/* ---- the global function table ----
 * A process-wide map from names to function objects. Thread-safe; lookups take no lock and
 * write nothing shared but the returned function's count; writers queue on a mutex and wait
 * for lookups in flight before releasing what they displaced.
 * Once packfn has joined TVM-FFI (packfn/interop.h) the two tables are one name space:
 * pf_global_set registers in both (a name either holds is taken), a lookup this table misses
 * returns TVM-FFI's function of that name (a new reference), pf_global_remove removes from
 * both; list, count and suggest cover packfn's own table. docs/function.md has the details. */

/* Registers `fn` (retained by the table; the caller keeps its reference) under `name`
 * (copied). Fails (-1) with ValueError for
 * a NULL or empty name, or when the name is taken and allow_override is 0 (the message names
 * the function); TypeError when fn is NULL or not a function; MemoryError; joined, TVM-FFI's
 * error when its table refuses the name (packfn's table then holds what it held before: a
 * failed call changes neither). When overriding, the table releases the function it held. */
PF_API int pf_global_set(const char* name, pf_object_t* fn, int allow_override);

/* Failure path of pf_global_get for a NULL name or out: sets *out (when out is not NULL) to
 * NULL, raises ValueError naming the bad argument, returns -1. */
PF_API int pf__global_get_invalid(const char* name, pf_object_t** out);
/* pf_global_get_bytes once its arguments are known valid (pf_global_get has checked them):
 * the lookup without a second check. Private. */
PF_API int pf__global_lookup(const char* name, size_t size, pf_object_t** out);

/* As pf_global_get, for a name given as (data, size) that need not be NUL-terminated (size 0
 * names nothing: 0 with *out = NULL). -1 with ValueError for a NULL out, or a NULL name with
 * size > 0 (*out is then NULL when out is not). */
PF_API int pf_global_get_bytes(const char* name, size_t size, pf_object_t** out);

/* Looks `name` up: 0 with a new reference in *out, or 0 with *out = NULL when absent.
 * -1 with ValueError for a NULL name or out (*out is then NULL when out is not); joined to
 * TVM-FFI, a name this table misses is looked up there, and its failure is raised as
 * pf_global_set says. Allocates nothing, except on a thread's first lookup: a small per-thread
 * record (freed at thread exit; when it cannot be had, that thread's lookups take the writers'
 * lock instead, and still succeed). Inline so the name is measured at the call site (at
 * compile time for a literal). */
PF_INLINE int pf_global_get(const char* name, pf_object_t** out) {
  if (PF_UNLIKELY(name == NULL || out == NULL))
    return pf__global_get_invalid(name, out);
  return pf__global_lookup(name, strlen(name), out);
}

/* Removes `name`, releasing the table's reference (joined: from TVM-FFI's table too). -1 with
 * KeyError naming it when absent (from both), ValueError for NULL or empty; joined, TVM-FFI's
 * error when its removal fails, after packfn's own entry was removed (the name is then gone
 * from packfn's table, and may still name TVM-FFI's function there). */
PF_API int pf_global_remove(const char* name);

/* Number of names registered in packfn's own table (a snapshot). Never fails. */
PF_API size_t pf_global_count(void);

/* The registered names sorted by strcmp, as a NULL-terminated array of strings allocated in
 * one block that the caller owns (copies: valid after the names are removed): free it with
 * pf_global_list_free. *count (may be NULL) receives the number. -1 with ValueError (NULL out)
 * or MemoryError; *out is then NULL (when out is not) and *count is left as it was. */
PF_API int pf_global_list(char*** out, size_t* count);
/* Frees what pf_global_list returned; NULL is a no-op. */
PF_API void pf_global_list_free(char** names);

/* Looks `name` up and calls it. -1 with ValueError for a NULL or empty name, KeyError naming
 * it when absent (with "did you mean 'x'?" when a registered name is near, see
 * pf_global_suggest); otherwise as pf_function_call (args borrowed, *result owned on success),
 * except that *result is none after every failure and a callee that fails without raising gets
 * pf_error_ensure's RuntimeError. Joined to TVM-FFI, a failed lookup in its table raises
 * TVM-FFI's error as it came, or, when it raised none, RuntimeError "pf_global_call: TVM-FFI's
 * global table failed" (pf_global_get and pf_global_get_bytes name themselves the same way). */
PF_API int pf_global_call(const char* name, const pf_any_t* args, int32_t num_args,
                          pf_any_t* result);

/* The registered name nearest to `name` (fewest single-character edits: at most a third of
 * the name's length, at least 1 and at most 3; a dotless name that is the last dotted part of a
 * registered one counts as one edit; ties go to the first in strcmp order), into buf
 * (NUL-terminated, truncated to size - 1). Returns 1 when one was found, 0 when none is near
 * (buf then holds ""; an exact match is not a suggestion), -1 with ValueError for a NULL name,
 * or a NULL buf with size > 0. For "did you mean" messages: packfn's own KeyErrors use it. */
PF_API int pf_global_suggest(const char* name, char* buf, size_t size);

/* Number of static registrations (PF_REGISTER_GLOBAL and the other macros of
 * packfn/typed.h) that failed in this process. Never fails. */
PF_API int pf_global_static_failures(void);

PF_EXTERN_C_END

/* Compatibility: code that included this header for the typed layer keeps compiling. */
#include "packfn/typed.h"

#endif /* PACKFN_FUNCTION_H_ */
