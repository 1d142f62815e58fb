/* packfn_xla: XLA FFI handlers that call packfn functions (libpackfn_xla, C only).
 *
 * One handler serves every packfn function: the function is named by the string attribute
 * "packfn_name" of the custom call and bound once by pf_xla_bind, which returns a slot the
 * call passes as the int64 attribute "packfn_slot" (a slot that does not hold that name, say
 * from an executable compiled by another process, is rebound by name). In a call, XLA's
 * operands and then its results become the function's tensor parameters in their order
 * (destination passing: the function writes the results), as DLTensor views of XLA's buffers
 * (no copy; compact row-major, strides NULL); each scalar parameter (int, float, bool) takes
 * the attribute of its name. Every other attribute is refused. A failing function becomes an
 * XLA error: code INVALID_ARGUMENT for TypeError and ValueError, UNIMPLEMENTED for
 * NotImplementedError, RESOURCE_EXHAUSTED for MemoryError, NOT_FOUND for KeyError, INTERNAL for
 * the other kinds; message "<kind>: <message>". Both handlers answer XLA's metadata query (API
 * version of the header they were built with, no traits, no state).
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
 * the previous one restored after. */
XLA_FFI_Error* pf_xla_call_cuda(XLA_FFI_CallFrame* frame);

/* Binds the global function `name` for the handlers: checks that it has a signature whose
 * parameters are all tensors, ints, floats or bools, and returns its slot (>= 0; the same slot
 * for the same name every time; the function stays referenced until the process ends).
 * -1 on failure with the message in err (NUL-terminated, truncated to err_size - 1; err may be
 * NULL when err_size is 0): KeyError (no such function, with the nearest name), TypeError (no
 * signature, or a parameter of another kind), MemoryError. Thread-safe. */
int64_t pf_xla_bind(const char* name, char* err, size_t err_size);

/* Number of tensor parameters of the function in `slot`, or -1 for a slot not bound. */
int32_t pf_xla_num_tensors(int64_t slot);

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_XLA_H_ */
