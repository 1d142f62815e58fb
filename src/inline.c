/* The exported copies of the public API's inline functions (PF_INLINE in the headers):
 * compiled with PF_INLINE_EXPORT, each header definition becomes an ordinary exported one, so
 * languages that bind C by symbol (ctypes, cffi, ...) reach pf_function_call,
 * pf_object_release, pf_any_int and the rest. Every other file keeps them static inline. */
#define PF_INLINE_EXPORT 1

#include "packfn/any.h"
#include "packfn/device.h"
#include "packfn/function.h"
#include "packfn/object.h"
#include "packfn/tensor.h"
