/* The private header of packfn._packfn: what the extension's files share. The Python object
 * every packfn type is (PfObject), the temporaries of a converted argument (argtmp_t), the six
 * type objects and the module state, and the helpers one file defines and others call: errors
 * (errors.c), values both ways (convert.c), tensors from buffers and DLPack (tensor.c), Arrays
 * and Maps from lists and dicts (containers.c), callbacks and calls (function.c), wrapping C
 * objects (object.c). Names shared across files start with pfpy_ (macros PFPY_); the rest of
 * each file is static. */
#ifndef PACKFN_PYTHON_SRC_PACKFN_H_
#define PACKFN_PYTHON_SRC_PACKFN_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "packfn/container.h"
#include "packfn/kernels.h"
#include "packfn/module.h"
#include "packfn/packfn.h"
#include "packfn/tensor.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "Py_ssize_t is 64-bit");

#define PFPY_STACK_DIMS 8 /* tensor dimensions whose strides fit in the argument slot */

/* ======================================================================================
 * Types and module state
 * ====================================================================================== */

/* Every packfn object seen from Python: one strong reference to the C object. */
typedef struct {
  PyObject_HEAD pf_object_t* obj;
  vectorcallfunc vectorcall; /* Function only */
  int owned_args;            /* Function only: a Python callback, given owned tensors */
  int foreign;               /* Function only: another runtime's, refusing read-only tensors */
  PyObject* weakrefs;
} PfObject;

/* The types, each defined beside its methods: Object (object.c), Function (function.c),
 * Tensor (tensor.c), Array and Map (containers.c), Module (module.c). */
extern PyTypeObject Object_Type, Function_Type, Tensor_Type, Array_Type, Map_Type, Module_Type;
extern PyObject* Error_Type;        /* packfn.Error (errors.c) */
extern PyObject* pfpy_kind_classes; /* dict: kind -> packfn.Error subclass (errors.c) */
extern PyObject* pfpy_callback_fns; /* set: addresses of the live Python-callback functions */
/* pf_cuda_stream_wait from libpackfn_cuda (a dependency of libpackfn_kernels_cuda), found when
 * load_kernels_cuda loaded it; NULL otherwise: packfn then has queued no CUDA work to order. */
typedef int (*stream_wait_fn)(int32_t device_id, void* waiter, void* producer);
extern stream_wait_fn pfpy_cuda_stream_wait;

/* The fields every packfn type shares; `cmp` is its rich comparison. */
#define PF_TYPE_HEAD(tname, doc, cmp)                                                              \
  PyVarObject_HEAD_INIT(NULL, 0).tp_name = "packfn." tname, .tp_basicsize = sizeof(PfObject),      \
                              .tp_dealloc = pfpy_obj_dealloc, .tp_doc = doc,                       \
                              .tp_weaklistoffset = offsetof(PfObject, weakrefs),                   \
                              .tp_hash = pfpy_obj_hash, .tp_richcompare = cmp

/* Storage one converted argument may need while the call runs. */
typedef struct {
  pf_byte_array_t bytes; /* bytes argument */
  pf_object_t* owned;    /* owned object to release after the call, or NULL */
  int has_buffer;        /* buf holds a buffer to release */
  Py_buffer buf;         /* buffer-protocol tensor */
  DLTensor dl;           /* its description */
  int64_t strides[PFPY_STACK_DIMS];
  int64_t* heap_strides; /* strides for more dimensions, or NULL */
} argtmp_t;

/* Releases what a converted argument holds (inline: the call path releases them). */
static inline void pfpy_argtmp_release(argtmp_t* t) {
  pf_object_release(t->owned);
  if (t->has_buffer)
    PyBuffer_Release(&t->buf);
  PyMem_Free(t->heap_strides);
}

/* ======================================================================================
 * object.c: the Object base type, C objects wrapped in the Python type of their kind
 * ====================================================================================== */

/* Wraps a new reference (stolen) in the Python type of its kind. NULL obj gives None. */
PyObject* pfpy_wrap_steal(pf_object_t* obj);
/* Finds libpackfn's code from a function object it made, for whether functions keep args. */
void pfpy_find_packfn_code(const pf_object_t* fn);
/* Object's tp_dealloc, tp_hash, tp_richcompare and tp_new (refusing), shared by every type. */
void pfpy_obj_dealloc(PyObject* self);
Py_hash_t pfpy_obj_hash(PyObject* self);
PyObject* pfpy_obj_richcompare(PyObject* a, PyObject* b, int op);
PyObject* pfpy_obj_new_forbidden(PyTypeObject* tp, PyObject* a, PyObject* k);

/* The global __tvm_ffi_object__ hands objects to TVM-FFI through, and its function. */
#define TVM_HANDOFF_GLOBAL "packfn._tvm_ffi_handoff"
int pfpy_tvm_handoff_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result);

/* ======================================================================================
 * errors.c: packfn errors as Python exceptions, and back
 * ====================================================================================== */

/* An error pending in this thread's packfn slot when Python enters the extension is not the
 * entry point's: C code raised it and then ran Python (a hook, a callback) that uses packfn.
 * Every entry point that may raise into the slot, clear it or take from it (which
 * pfpy_raise_pf_error does) sets that error aside first and puts it back on the way out,
 * unchanged, whether the entry point succeeded or failed; in between the slot holds only the
 * entry point's own errors, which become its Python exception or are dropped. (Taking its own
 * error took the pending one along, as its cause, and the C code then failed "without raising
 * an error": review.) The error set aside (a new reference), or NULL when none is pending. */
static inline pf_object_t* pfpy_error_set_aside(void) {
  return pf_error_take();
}

/* Puts back what pfpy_error_set_aside set aside (consumed; NULL: nothing to do), dropping
 * anything the entry point left in the slot. */
static inline void pfpy_error_put_back(pf_object_t* aside) {
  if (PF_UNLIKELY(aside != NULL)) {
    pf_error_clear();            /* nothing is left by then; for certain */
    (void)pf_error_raise(aside); /* the slot is empty: it goes back unchanged */
    pf_object_release(aside);
  }
}

/* Defines the entry point impl##_entry, which runs `impl` between pfpy_error_set_aside and
 * pfpy_error_put_back: `ret` is their return type, `params` the parameter list, `args` the
 * arguments passed on. The method tables and type slots name the _entry function of every
 * function of theirs that may touch the slot; the others (reading a C object's fields, Python
 * code only) are named as they are. */
#define PFPY_ENTRY(ret, impl, params, args)                                                        \
  static ret impl##_entry params {                                                                 \
    pf_object_t* aside_ = pfpy_error_set_aside();                                                  \
    ret r_ = impl args;                                                                            \
    pfpy_error_put_back(aside_);                                                                   \
    return r_;                                                                                     \
  }

/* Raises the pending Python exception in packfn (inside a callback; the GIL is held). */
int pfpy_pyerr_to_pf(void);
/* Sets the Python exception for the error raised in this thread (taken from the slot: only
 * inside an entry point that set a pending error aside, PFPY_ENTRY); returns NULL. */
PyObject* pfpy_raise_pf_error(void);
/* The exception class a packfn error of `kind` raises (new reference; made now for a new kind,
 * within the cap), or NULL with a Python exception set. */
PyObject* pfpy_kind_class(const char* kind);

/* ======================================================================================
 * convert.c: values between Python and packfn
 * ====================================================================================== */

/* A Python object for a value; `v` is not consumed (objects are retained). */
PyObject* pfpy_any_to_py(const pf_any_t* v);
/* A str of C text (names, signatures, string values): bytes that are no UTF-8 become
 * U+DC80..U+DCFF (surrogateescape). New reference, or NULL with an exception. */
PyObject* pfpy_str_from(const char* data, size_t size);
/* The text a str stands for in C: its UTF-8, or for a str holding U+DC80..U+DCFF
 * (pfpy_str_from's) the bytes they stand for, NUL-terminated; *size is its length. *hold gets
 * a new reference to keep while the text is used, or NULL. NULL with an exception
 * (UnicodeEncodeError for another lone surrogate, U+D800). */
const char* pfpy_str_utf8(PyObject* str, Py_ssize_t* size, PyObject** hold);
/* Converts a Python value into a view for a call: 0, 1 (release `t` after) or -1; sets
 * *release_gil when the call must run without the GIL (a tensor, or a function the callee may
 * call from another thread, or what may hold one). */
int pfpy_py_to_view(PyObject* o, pf_any_t* out, argtmp_t* t, int owned, int* release_gil);
/* An owned value from a Python value. 0, or -1 with a Python exception. */
int pfpy_py_to_owned(PyObject* o, pf_any_t* out);
/* The C object a TVM-FFI Python object is (borrowed): 1, 0 when `o` is no such object, -1. */
int pfpy_tvm_ffi_object(PyObject* o, pf_object_t** out);
/* Attribute `attr` of module `module` when that module is imported already (it is never
 * imported here; *name caches its interned name): 1 with a new reference in *out; 0, *out
 * NULL, when the module is not imported or lacks the attribute; -1 with an exception. */
int pfpy_imported_attr(const char* module, PyObject** name, const char* attr, PyObject** out);

/* ======================================================================================
 * tensor.c: tensors over buffer-protocol and DLPack objects
 * ====================================================================================== */

/* Fills `dl` from a buffer, strides converted to elements into `strides`. 0, or -1. */
int pfpy_dl_from_buffer(const Py_buffer* b, DLTensor* dl, int64_t* strides);
/* A tensor object owning the buffer `b` (moved in). 0, or -1 with a Python exception. */
int pfpy_tensor_from_buffer(Py_buffer* b, pf_object_t** out);
/* Whether objects of `tp` refused a buffer request for device memory before. */
int pfpy_refuses_buffer(PyTypeObject* tp);
/* A tensor object over any buffer-protocol or DLPack object: 1, 0 when neither, or -1. */
int pfpy_tensor_from_object(PyObject* o, pf_object_t** out);
/* How deep pfpy_holds_read_only looks into nested containers. */
#define PFPY_READ_ONLY_DEPTH 32
/* 1 when `v` is a read-only tensor or an array, list, map or dict holding one (as an item, key
 * or value) at any depth up to `depth` levels of containers (deeper ones are not looked into;
 * a container reached by several paths is walked at most once per level it is reached with),
 * else 0; -1 with a Python exception (MemoryError). What TVM-FFI must not get: its tensors
 * carry no read-only flag. */
int pfpy_holds_read_only(const pf_any_t* v, int depth);

/* ======================================================================================
 * containers.c: Array and Map
 * ====================================================================================== */

/* An Array from a list or tuple: new reference in *out. 0, or -1 with an exception. Sets
 * *release_gil as pfpy_py_to_view does for any item. */
int pfpy_array_from_seq(PyObject* list_or_tuple, pf_object_t** out, int* release_gil);
/* A frozen Map from a dict: new reference in *out. 0, or -1 with an exception. Sets
 * *release_gil as pfpy_py_to_view does for any key or value. */
int pfpy_map_from_dict(PyObject* d, pf_object_t** out, int* release_gil);

/* ======================================================================================
 * function.c: Function, calls from Python, Python callables as packfn functions
 * ====================================================================================== */

/* Function's tp_vectorcall: a call of the packfn function from Python. */
PyObject* pfpy_fn_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames);
/* Callback function object around a Python callable. 0, or -1 with an exception. */
int pfpy_make_callback(PyObject* callable, pf_object_t** out);

#endif /* PACKFN_PYTHON_SRC_PACKFN_H_ */
