/* packfn errors: error objects (type 67), the calling thread's raised slot, printf-style
 * raising with the raise site recorded, optional full backtraces, and cause chains. */
#ifndef PACKFN_ERROR_H_
#define PACKFN_ERROR_H_

#include <stdarg.h>

#include "packfn/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error kinds (Python's names, so hosts map them to their exceptions). Any string works. */
#define PF_ERR_TYPE            "TypeError"
#define PF_ERR_VALUE           "ValueError"
#define PF_ERR_INDEX           "IndexError"
#define PF_ERR_KEY             "KeyError"
#define PF_ERR_ATTRIBUTE       "AttributeError"
#define PF_ERR_RUNTIME         "RuntimeError"
#define PF_ERR_MEMORY          "MemoryError"
#define PF_ERR_NOT_IMPLEMENTED "NotImplementedError"
#define PF_ERR_OS              "OSError"

/* Environment variable: when set to a non-empty value other than "0", every raised error
 * carries the full native stack (backtrace(3)) after its raise site. Read once per process. */
#define PF_BACKTRACE_ENV "PACKFN_BACKTRACE"

/* Raises an error of `kind` ("ValueError", ...) with a printf-style message in the calling
 * thread. An error already pending in this thread becomes the new error's cause. Never fails:
 * when memory runs out, a preallocated MemoryError is raised instead. A NULL or empty kind gives
 * "RuntimeError"; NULL fmt an empty message. The message ends at its first NUL byte (a `%c`
 * of 0): its stored size is always its C string's length, whoever reads it.
 * A plain function: its backtrace entry reads "<unknown>". PF_ERROR_SET (below) raises the
 * same way and also records the caller's file:line and function. Once packfn has joined
 * TVM-FFI (interop.h) the calling thread's raised slot is TVM-FFI's, for this and every call
 * below (docs/error.md). */
PF_API void pf_error_set(const char* kind, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* pf_error_set with an explicit raise site (file, line, function may be NULL). */
PF_API void pf_error_set_at(const char* file, int line, const char* func, const char* kind,
                            const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* pf_error_set_at with a va_list. */
PF_API void pf_error_vset_at(const char* file, int line, const char* func, const char* kind,
                             const char* fmt, va_list ap);

/* A raise site known at compile time, with the lengths of its texts: where in the source
 * (`where`) and the function (`func`, may be NULL). */
typedef struct pf_error_site_s {
  const char* where; /* pf_error_set_frame: "  File \"file.c\", line 123, in ";
                      * pf_error_set_site: "file.c:123" */
  size_t where_len;
  const char* func; /* may be NULL */
  size_t func_len;
} pf_error_site_t;

/* pf_error_set with a compile-time site whose `where` is "file.c:123" (no strlen, no number
 * formatting at raise time). `site` must not be NULL. Kept for code built against packfn
 * before pf_error_set_frame; the recorded frame is the same. */
PF_API void pf_error_set_site(const pf_error_site_t* site, const char* kind, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* pf_error_set with a compile-time site whose `where` is already the frame up to the function
 * in TVM-FFI's frame format, `  File "file.c", line 123, in ` (what PF_ERROR_SET uses: the
 * frame is copied as it is). `site` must not be NULL. */
PF_API void pf_error_set_frame(const pf_error_site_t* site, const char* kind, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#define PF__STR2(x) #x
#define PF__STR(x)  PF__STR2(x)
/* PF_ERROR_SET(kind, fmt, ...): pf_error_set that records the raise site (this file:line and
 * function) in the error's backtrace, the way packfn's own errors are raised. */
#if defined(__cplusplus)
#define PF_ERROR_SET(...) pf_error_set_at(__FILE__, __LINE__, __func__, __VA_ARGS__)
#else
/* The site of the expansion, as a compound literal. */
#define PF_ERROR_SITE                                                                              \
  ((const pf_error_site_t){PF__SITE_FRAME, sizeof(PF__SITE_FRAME) - 1, __func__,                   \
                           sizeof(__func__) - 1})
#define PF__SITE_FRAME    "  File \"" __FILE__ "\", line " PF__STR(__LINE__) ", in "
#define PF_ERROR_SET(...) pf_error_set_frame(&PF_ERROR_SITE, __VA_ARGS__)
#endif

/* Raises an existing error object in this thread; the slot takes its own reference (the
 * caller keeps theirs). A pending error becomes its cause only when `err` is a packfn error
 * without a cause and the caller's reference is its only one; otherwise (it has a cause,
 * another runtime made it, it is packfn's shared MemoryError, or it is shared: a reference other
 * than the caller's exists) the object is left unchanged and the pending error released.
 * -1 with TypeError (and the given error untouched) when `err` is NULL or not an error;
 * 0 otherwise. */
PF_API int pf_error_raise(pf_object_t* err);

/* Moves the raised error out of this thread's slot: a new reference the caller releases, or
 * NULL when none is raised. The slot is empty afterwards. */
PF_API pf_object_t* pf_error_take(void);

/* The raised error, borrowed (valid until it is taken, cleared or replaced), or NULL. Never
 * raises. */
PF_API pf_object_t* pf_error_peek(void);

/* Drops (releases) the raised error, if any. Never fails. */
PF_API void pf_error_clear(void);

/* Enforces the calling convention after a call of `callee` returned `rc` != 0: a function that
 * fails must raise an error first. When none is raised on this thread, raises RuntimeError
 * "<callee> returned <rc> without raising an error" (callee NULL: "a function"). Returns -1
 * either way, so a caller writes
 *   if (rc != 0) return pf_error_ensure("my.fn", rc);
 * pf_global_call and pf_module_call do this for you; pf_function_call does not (its cost is
 * kept to the call itself). An error left raised from before the call hides the violation. */
PF_API int pf_error_ensure(const char* callee, int rc);

/* Creates an error object without raising it: copies `kind` and `message`; `backtrace` may be
 * NULL. New reference in *out (NULL on failure). -1 with ValueError (NULL kind, message or out,
 * empty kind) or MemoryError. */
PF_API int pf_error_create(const char* kind, const char* message, const char* backtrace,
                           pf_object_t** out);

/* Kind of an error object ("ValueError"), borrowed (valid while err lives); NULL when err is
 * NULL or not an error. Never raises. */
PF_API const char* pf_error_kind(const pf_object_t* err);
/* Message, borrowed (valid while err lives); NULL when err is NULL or not an error. Never
 * raises. */
PF_API const char* pf_error_message(const pf_object_t* err);
/* Backtrace text: one `  File "f.c", line N, in func` line per frame, most recent call first
 * (TVM-FFI's order; full stacks with PACKFN_BACKTRACE), borrowed: valid while err lives and
 * its backtrace is not changed (pf_error_append_backtrace, its cell's update_backtrace free the
 * text they replace); NULL when err is NULL or not an error. Never raises. */
PF_API const char* pf_error_backtrace(const pf_object_t* err);
/* The cause of `err` (by default the error that was pending when it was raised), borrowed:
 * valid while err lives and keeps that cause. NULL when it has none, or err is NULL or not an
 * error. Never raises. */
PF_API pf_object_t* pf_error_cause(const pf_object_t* err);

/* Sets the cause of `err` (retained: the caller keeps its reference; a previous cause is
 * released). NULL clears it. -1, err unchanged, with TypeError when err is not an error made by
 * packfn (NULL, another type, another runtime's error, or packfn's shared MemoryError, which
 * takes no cause) or a non-NULL cause is not an error, or ValueError when the cause chain would
 * loop back to err. */
PF_API int pf_error_set_cause(pf_object_t* err, pf_object_t* cause);

/* Appends `text` (copied, as it is: end it with '\n' to keep one frame per line) to the
 * backtrace of `err` (through its cell's update_backtrace, so errors from other runtimes work
 * too; one whose cell has no update_backtrace hook cannot be changed and is left as it is,
 * returning 0; so is packfn's shared MemoryError). The text pf_error_backtrace returned before
 * may be freed. -1 with TypeError for a NULL or non-error err, ValueError for NULL text. */
PF_API int pf_error_append_backtrace(pf_object_t* err, const char* text);

/* Writes "Kind: message" for the error, then "\ncaused by Kind: message" for each cause (at
 * most 66 errors in all), into buf (always NUL-terminated when size > 0). Returns the length the
 * full text needs, like snprintf (so a result >= size means it was cut); a NULL buf only
 * measures, whatever size. A NULL or non-error err gives "" and 0. Borrows err; never raises. */
PF_API size_t pf_error_format(const pf_object_t* err, char* buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_ERROR_H_ */
