/* packfn_xla: XLA FFI handlers that call packfn functions (libpackfn_xla, C only).
 *
 * One handler serves every packfn function: the function is named by the string attribute
 * "packfn_name" of the custom call and bound by pf_xla_bind, which returns a slot; the call
 * passes the slot's generation (pf_xla_generation: 0 for the first function pf_xla_bind bound
 * under the name in the process, 1 for the next, ...) as the int64 attribute "packfn_slot". A
 * number that any process registering the name's functions in the same order gives the same,
 * so that the compiled program's text, and JAX's persistent compilation cache key with it, is
 * the same in every run (a per-process number missed that cache every time: review). A call
 * runs the function of that generation of the name, even after the global was replaced or
 * removed (a compiled executable keeps its function); a generation pf_xla_bind never gave here,
 * say from an executable another process compiled after more rebinds, is resolved by name at
 * each call to the global's current function (a lookup without a lock, a new bind when the
 * global changed, which gives no generation; NOT_FOUND once the global is gone). In a call, XLA's
 * operands and then its results become the function's tensor parameters in their order
 * (destination passing: the function writes the results), as DLTensor views of XLA's buffers
 * (no copy; compact row-major, strides NULL); each scalar parameter (int, float, bool) takes
 * the attribute of its name (an integer of any width for an int or a float, a float32 or float64
 * for a float, a bool for a bool). Every other attribute is refused. A failing function, or a
 * failing bind by name, becomes an XLA error: code INVALID_ARGUMENT for TypeError and
 * ValueError, UNIMPLEMENTED for NotImplementedError, RESOURCE_EXHAUSTED for MemoryError,
 * NOT_FOUND for KeyError, INTERNAL for the other kinds; message "<kind>: <message>", whole,
 * each byte of it that is not UTF-8 written as "\xNN" (Python decodes it strictly). A function
 * that fails without raising is a RuntimeError naming it (pf_error_ensure); an error pending on
 * the thread when a call starts is set aside during the call and put back after (neither taken
 * for the call's nor lost), and one the call leaves raised though it succeeded is dropped.
 * Both handlers answer XLA's metadata query (API version of the header they were built with,
 * no traits, no state).
 *
 * Python registers them with jax.ffi.register_ffi_target (packfn.jax does it for you). */
#ifndef PACKFN_XLA_H_
#define PACKFN_XLA_H_

#include <stddef.h>
#include <stdint.h>

#include "xla/ffi/api/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The handler for the CPU platform: tensors on cpu:0. Never raises a packfn error; failures
 * come back as an XLA_FFI_Error owned by XLA. */
XLA_FFI_Error* pf_xla_call_cpu(XLA_FFI_CallFrame* frame);

/* The handler for the CUDA platform: tensors on cuda:<XLA's device ordinal>; XLA's stream is
 * the calling thread's current packfn stream for that device during the call (pf_stream_set),
 * the previous one restored after (should that fail, the call fails with its error, and none
 * is left raised in the thread). */
XLA_FFI_Error* pf_xla_call_cuda(XLA_FFI_CallFrame* frame);

/* Binds the function the global table holds under `name` now for the handlers: checks that it
 * has a signature whose parameters are all tensors, ints, floats or bools, none named
 * packfn_name or packfn_slot, and returns its slot (>= 0). One slot per pair of name and
 * function object: the same slot while the name holds the same function object, and again
 * when the name is switched back to a function bound under it before; a new slot once the
 * global holds a function never bound under that name (the old slot keeps the old function for
 * the executables compiled with it). Every slot keeps its function referenced until the process
 * ends, so the slots a name costs are the distinct functions ever bound under it. -1 on failure
 * with "<kind>: <message>" in err (NUL-terminated; cut to err_size - 1 bytes ending in "..." when
 * longer and err_size is at least 4, else just cut; err may be NULL when err_size is 0): ValueError
 * (NULL or empty name), KeyError (no such function, with the nearest name), TypeError (no
 * signature, a parameter of another kind, a reserved name), MemoryError. Raises no packfn error,
 * and an error already pending on the thread stays pending, untouched. Thread-safe; takes a lock
 * only when it makes a slot. */
int64_t pf_xla_bind(const char* name, char* err, size_t err_size);

/* The generation pf_xla_bind gave `slot`: how many of its name's slots it gave one before (0
 * for the first), what a call passes as packfn_slot; -1 for a slot not bound, or one only the
 * handlers bound (to follow a global by name). */
int64_t pf_xla_generation(int64_t slot);

/* Number of tensor parameters of the function in `slot`, or -1 for a slot not bound. */
int32_t pf_xla_num_tensors(int64_t slot);

/* Signature text of the function in `slot` as it was when the slot was bound (the slot's own
 * copy, valid until the process ends, unchanged if pf_function_set_info later replaces the
 * function's), or NULL for a slot not bound. What a caller describes the call with, so that it
 * matches what the slot runs. */
const char* pf_xla_signature(int64_t slot);

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_XLA_H_ */
