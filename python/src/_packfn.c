/* packfn._packfn: the CPython binding of packfn, on the public C API only.
 *
 * Calls go through tp_vectorcall: arguments become pf_any_t views on the C stack (ints,
 * floats, bools, None, short strings inline; longer strings and bytes borrowed from the Python
 * objects; buffer-protocol arrays such as NumPy's as a stack DLTensor), the call runs (without
 * the GIL when a tensor is passed), the result becomes a Python object. Errors become Python
 * exceptions by kind; Python exceptions raised in callbacks travel through C as error objects
 * of their own (type 67, the ABI's cell) that keep the original exception. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "packfn/container.h"
#include "packfn/kernels.h"
#include "packfn/module.h"
#include "packfn/packfn.h"
#include "packfn/tensor.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "Py_ssize_t is 64-bit");

#define PFPY_STACK_ARGS 8 /* arguments converted without a heap allocation */
#define PFPY_STACK_DIMS 8 /* tensor dimensions whose strides fit in the argument slot */

/* A rare path kept out of line, so that the call path around it keeps its registers; a helper
 * of the call path kept in it. */
#if defined(__GNUC__)
#define PFPY_COLD   __attribute__((cold, noinline))
#define PFPY_INLINE __attribute__((always_inline)) inline
#else
#define PFPY_COLD
#define PFPY_INLINE inline
#endif

/* ======================================================================================
 * Types and module state
 * ====================================================================================== */

/* Every packfn object seen from Python: one strong reference to the C object. */
typedef struct {
  PyObject_HEAD pf_object_t* obj;
  vectorcallfunc vectorcall; /* Function only */
  int owned_args;            /* Function only: a Python callback, given owned tensors */
  PyObject* weakrefs;
} PfObject;

static PyTypeObject Object_Type, Function_Type, Tensor_Type, Array_Type, Map_Type, Module_Type;
static PyObject* Error_Type;   /* packfn.Error */
static PyObject* kind_classes; /* dict: kind -> packfn.Error subclass */
static PyObject* callback_fns; /* set: addresses of the live Python-callback functions */
/* pf_cuda_stream_wait from libpackfn_cuda (a dependency of libpackfn_kernels_cuda), found when
 * load_kernels_cuda loaded it; NULL otherwise: packfn then has queued no CUDA work to order. */
typedef int (*stream_wait_fn)(int32_t device_id, void* waiter, void* producer);
static stream_wait_fn cuda_stream_wait;

static PyObject* fn_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                               PyObject* kwnames);

/* Where libpackfn's code lies: the loaded segment holding the deleters of the function
 * objects packfn's runtime makes (found at import by find_packfn_code; both 0 when it was not
 * found, and then every function is given owned tensors). */
static uintptr_t packfn_code_begin, packfn_code_end;

/* Whether a call of `fn` from Python passes tensor objects that own their buffers (1) rather
 * than DLTensor descriptions on the C stack, borrowed for the call (0). Functions made by
 * packfn's runtime (kernels, exports of load_module's libraries, C closures made with
 * pf_function_create*) borrow a DLTensor for the call only, as the C convention for views
 * says, and take the stack form. packfn's Python callbacks, and the functions of every other
 * runtime (TVM-FFI's Python callbacks among them), may keep their arguments: owned tensors. */
static int fn_may_keep_args(pf_object_t* fn) {
  uintptr_t d = (uintptr_t)__atomic_load_n(&fn->deleter, __ATOMIC_RELAXED);
  if (d - packfn_code_begin >= packfn_code_end - packfn_code_begin)
    return 1; /* not made by packfn's runtime */
  if (PySet_GET_SIZE(callback_fns) == 0)
    return 0;
  PyObject* key = PyLong_FromVoidPtr(fn);
  int r = key ? PySet_Contains(callback_fns, key) : -1;
  Py_XDECREF(key);
  if (r < 0) { /* cannot tell: the safe form */
    PyErr_Clear();
    return 1;
  }
  return r;
}

/* Wraps a new reference (stolen) in the Python type of its kind. NULL obj gives None. */
static PyObject* wrap_steal(pf_object_t* obj) {
  if (!obj)
    Py_RETURN_NONE;
  PyTypeObject* tp = &Object_Type;
  switch (obj->type_index) {
  case PF_TYPE_FUNCTION:
    tp = &Function_Type;
    break;
  case PF_TYPE_TENSOR:
    tp = &Tensor_Type;
    break;
  case PF_TYPE_ARRAY:
  case PF_TYPE_LIST:
    tp = &Array_Type;
    break;
  case PF_TYPE_MAP:
  case PF_TYPE_DICT:
    tp = &Map_Type;
    break;
  case PF_TYPE_MODULE:
    tp = &Module_Type;
    break;
  default:
    if (pf_object_is_instance(obj, PF_TYPE_TENSOR))
      tp = &Tensor_Type;
    else if (pf_module_path(obj)) /* packfn's modules are "packfn.Module", a dynamic type */
      tp = &Module_Type;
    break;
  }
  PfObject* self = PyObject_New(PfObject, tp);
  if (!self) {
    pf_object_release(obj);
    return NULL;
  }
  self->obj = obj;
  self->vectorcall = tp == &Function_Type ? fn_vectorcall : NULL;
  self->owned_args = tp == &Function_Type ? fn_may_keep_args(obj) : 0;
  self->weakrefs = NULL;
  return (PyObject*)self;
}

/* ======================================================================================
 * Errors: packfn -> Python
 * ====================================================================================== */

/* An error object carrying a Python exception (from a callback). The cell is the ABI's, so
 * every packfn function reads kind, message, backtrace and cause as usual. */
typedef struct {
  pf_object_t header;
  pf_error_cell_t cell;
  PyObject* exc; /* the original exception, owned */
  char* text;    /* kind NUL message NUL, owned */
  char* bt;      /* backtrace, owned, or NULL (then the cell points at "") */
} pyerr_t;

static void pyerr_deleter(void* self, int flags) {
  pyerr_t* e = (pyerr_t*)self;
  if (flags & PF_DELETER_STRONG) {
    pf_object_release((pf_object_t*)e->cell.cause_chain);
    pf_object_release((pf_object_t*)e->cell.extra_context);
    if (e->exc && Py_IsInitialized()) {
      PyGILState_STATE g = PyGILState_Ensure();
      Py_CLEAR(e->exc);
      PyGILState_Release(g);
    }
    free(e->text);
    free(e->bt);
  }
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

static void pyerr_update_backtrace(void* self, const pf_byte_array_t* bt, int32_t mode) {
  pyerr_t* e = (pyerr_t*)self;
  size_t old = mode == 1 && e->bt ? strlen(e->bt) : 0;
  char* s = malloc(old + bt->size + 1);
  if (!s)
    return; /* the backtrace is best effort */
  if (old)
    memcpy(s, e->bt, old);
  memcpy(s + old, bt->data, bt->size);
  s[old + bt->size] = '\0';
  free(e->bt);
  e->bt = s;
  e->cell.backtrace.data = s;
  e->cell.backtrace.size = old + bt->size;
}

/* Kind name of a Python exception class: its __name__ ("ValueError"). */
static const char* exc_kind(PyObject* exc) {
  const char* name = Py_TYPE(exc)->tp_name;
  const char* dot = strrchr(name, '.');
  return dot ? dot + 1 : name;
}

/* Raises the pending Python exception in packfn (inside a callback; the GIL is held). */
static int pyerr_to_pf(void) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value)
    PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  if (!value) {
    PF_ERROR_SET(PF_ERR_RUNTIME, "Python callback failed without an exception");
    return -1;
  }
  const char* kind = exc_kind(value);
  const char* msg = NULL;
  PyObject* str = PyObject_Str(value);
  if (str)
    msg = PyUnicode_AsUTF8(str);
  if (!msg) { /* str() or its conversion failed: clear that exception too */
    PyErr_Clear();
    msg = "<unprintable exception>";
  }
  size_t kl = strlen(kind), ml = strlen(msg);
  pf_object_t* obj = NULL;
  char* text = malloc(kl + ml + 2);
  if (!text || pf_object_alloc(sizeof(pyerr_t), PF_TYPE_ERROR, pyerr_deleter, &obj) != 0) {
    free(text);
    Py_XDECREF(str);
    Py_DECREF(value);
    if (text)
      return -1; /* pf_object_alloc raised MemoryError */
    PF_ERROR_SET(PF_ERR_MEMORY, "out of memory converting a Python exception");
    return -1;
  }
  memcpy(text, kind, kl + 1);
  memcpy(text + kl + 1, msg, ml + 1);
  Py_XDECREF(str);
  pyerr_t* e = (pyerr_t*)obj;
  e->text = text;
  e->exc = value; /* takes the reference */
  e->cell.kind = (pf_byte_array_t){text, kl};
  e->cell.message = (pf_byte_array_t){text + kl + 1, ml};
  e->cell.backtrace = (pf_byte_array_t){"", 0};
  e->cell.update_backtrace = pyerr_update_backtrace;
  pf_error_raise(obj);
  pf_object_release(obj);
  return -1;
}

/* The Python exception class for a packfn error kind. Borrowed. A kind naming a built-in
 * exception (TypeError, ValueError, KeyError, IndexError, AttributeError, MemoryError,
 * NotImplementedError, RuntimeError, OSError, ...) gives that class; any other kind a subclass
 * of packfn.Error named after it, made once. */
static PyObject* class_for_kind(const char* kind) {
  PyObject* builtins = PyEval_GetBuiltins();
  PyObject* b = builtins ? PyDict_GetItemString(builtins, kind) : NULL;
  if (b && PyType_Check(b) && PyType_IsSubtype((PyTypeObject*)b, (PyTypeObject*)PyExc_Exception))
    return b;
  PyObject* cls = PyDict_GetItemString(kind_classes, kind);
  if (cls)
    return cls;
  /* a new kind: packfn.<Kind>, derived from packfn.Error, when the kind is an identifier */
  int ok = kind[0] != '\0';
  for (const char* p = kind; *p && ok; ++p)
    ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
         (p != kind && *p >= '0' && *p <= '9');
  if (!ok)
    return Error_Type;
  PyObject* qual = PyUnicode_FromFormat("packfn.%s", kind);
  if (!qual)
    return NULL;
  cls = PyErr_NewException(PyUnicode_AsUTF8(qual), Error_Type, NULL);
  Py_DECREF(qual);
  if (!cls)
    return NULL;
  int rc = PyDict_SetItemString(kind_classes, kind, cls);
  Py_DECREF(cls); /* the dict holds it */
  return rc == 0 ? cls : NULL;
}

/* A Python exception (new reference) for a packfn error and its causes. */
static PyObject* exc_from_error(pf_object_t* err, int depth) {
  if (err->deleter == pyerr_deleter && ((pyerr_t*)err)->exc)
    return Py_NewRef(((pyerr_t*)err)->exc);
  const char* kind = pf_error_kind(err);
  const char* msg = pf_error_message(err);
  PyObject* cls = class_for_kind(kind ? kind : "RuntimeError");
  if (!cls)
    return NULL;
  PyObject* text =
      PyUnicode_DecodeUTF8(msg ? msg : "", msg ? (Py_ssize_t)strlen(msg) : 0, "surrogateescape");
  if (!text)
    return NULL;
  PyObject* exc = PyObject_CallOneArg(cls, text);
  if (!exc && cls != Error_Type) {
    /* a class that is not made from one message (UnicodeDecodeError takes five arguments,
     * ExceptionGroup two): packfn.Error, the message prefixed with the kind, rather than the
     * constructor's complaint in place of the error */
    PyErr_Clear();
    PyObject* full = PyUnicode_FromFormat("%s: %U", kind ? kind : "RuntimeError", text);
    exc = full ? PyObject_CallOneArg(Error_Type, full) : NULL;
    Py_XDECREF(full);
  }
  Py_DECREF(text);
  if (!exc)
    return NULL;
  const char* bt = pf_error_backtrace(err);
  PyObject* ks = PyUnicode_FromString(kind ? kind : "");
  if (!ks || PyObject_SetAttrString(exc, "kind", ks) < 0)
    PyErr_Clear(); /* exceptions without a __dict__ just lack the attribute */
  Py_XDECREF(ks);
  if (bt && bt[0]) {
    PyObject* bts = PyUnicode_FromFormat("packfn backtrace (newest last):\n%s", bt);
    if (bts) {
      PyObject* r = PyObject_CallMethod(exc, "add_note", "O", bts);
      Py_XDECREF(r);
      Py_DECREF(bts);
    }
    PyErr_Clear();
  }
  pf_object_t* cause = pf_error_cause(err);
  if (cause && depth < 64) {
    PyObject* c = exc_from_error(cause, depth + 1);
    if (c)
      PyException_SetCause(exc, c); /* steals */
    else
      PyErr_Clear();
  }
  return exc;
}

/* Sets the Python exception for the error raised in this thread; returns NULL. */
static PyObject* raise_pf_error(void) {
  pf_object_t* err = pf_error_take();
  if (!err) {
    PyErr_SetString(PyExc_RuntimeError, "packfn call failed without raising an error");
    return NULL;
  }
  PyObject* exc = exc_from_error(err, 0);
  if (exc) {
    PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  } else if (!PyErr_Occurred()) {
    const char* kind = pf_error_kind(err);
    const char* msg = pf_error_message(err);
    PyErr_Format(PyExc_RuntimeError, "packfn: %s: %s (the exception could not be made)",
                 kind ? kind : "RuntimeError", msg ? msg : "");
  }
  pf_object_release(err);
  return NULL;
}

/* ======================================================================================
 * Values: packfn -> Python
 * ====================================================================================== */

static PyObject* str_from(const char* data, size_t size) {
  return PyUnicode_DecodeUTF8(data, (Py_ssize_t)size, "surrogateescape");
}

/* A Python object for a value; `v` is not consumed (objects are retained). */
static PyObject* any_to_py(const pf_any_t* v) {
  char buf[64];
  switch (v->type_index) {
  case PF_TYPE_NONE:
    Py_RETURN_NONE;
  case PF_TYPE_INT:
    return PyLong_FromLongLong(v->v_int64);
  case PF_TYPE_BOOL:
    return PyBool_FromLong(v->v_int64 != 0);
  case PF_TYPE_FLOAT:
    return PyFloat_FromDouble(v->v_float64);
  case PF_TYPE_OPAQUE_PTR:
    return PyLong_FromVoidPtr(v->v_ptr);
  case PF_TYPE_DTYPE:
    if (pf_dtype_format(v->v_dtype, buf, sizeof buf) != 0)
      return raise_pf_error();
    return PyUnicode_FromString(buf);
  case PF_TYPE_DEVICE:
    if (pf_device_format(v->v_device, buf, sizeof buf) != 0)
      return raise_pf_error();
    return PyUnicode_FromString(buf);
  case PF_TYPE_RAW_STR:
    return str_from(v->v_c_str, strlen(v->v_c_str));
  case PF_TYPE_SMALL_STR:
    return str_from(v->v_bytes, v->small_str_len);
  case PF_TYPE_SMALL_BYTES:
    return PyBytes_FromStringAndSize(v->v_bytes, v->small_str_len);
  case PF_TYPE_BYTE_ARRAY_PTR: {
    const pf_byte_array_t* b = (const pf_byte_array_t*)v->v_ptr;
    return PyBytes_FromStringAndSize(b->data, (Py_ssize_t)b->size);
  }
  case PF_TYPE_DLTENSOR_PTR: {
    /* a borrowed DLTensor (a C caller's view): wrapped without owning its memory, valid for
     * the duration of the call that handed it over */
    pf_object_t* t;
    if (pf_tensor_from_dltensor((const DLTensor*)v->v_ptr, NULL, NULL, &t) != 0)
      return raise_pf_error();
    return wrap_steal(t);
  }
  case PF_TYPE_OBJECT_RVALUE_REF: {
    pf_object_t* o = *(pf_object_t**)v->v_ptr;
    pf_object_retain(o);
    return wrap_steal(o);
  }
  default:
    break;
  }
  if (v->type_index < PF_TYPE_STATIC_OBJECT_BEGIN) {
    PyErr_Format(PyExc_TypeError, "packfn: value of unknown type index %d", (int)v->type_index);
    return NULL;
  }
  pf_object_t* o = v->v_obj;
  if (o->type_index == PF_TYPE_STR || o->type_index == PF_TYPE_BYTES) {
    const pf_string_cell_t* c = (const pf_string_cell_t*)(o + 1);
    return o->type_index == PF_TYPE_STR ? str_from(c->data, c->size)
                                        : PyBytes_FromStringAndSize(c->data, (Py_ssize_t)c->size);
  }
  if (o->type_index == PF_TYPE_SHAPE) {
    const int64_t* dims;
    size_t n;
    if (pf_shape_data(o, &dims, &n) != 0)
      return raise_pf_error();
    PyObject* t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; ++i) {
      PyObject* d = PyLong_FromLongLong(dims[i]);
      if (!d) {
        Py_CLEAR(t);
        break;
      }
      PyTuple_SET_ITEM(t, (Py_ssize_t)i, d);
    }
    return t;
  }
  pf_object_retain(o);
  return wrap_steal(o);
}

/* As any_to_py, consuming the owned value `v`. */
static PyObject* any_to_py_steal(pf_any_t* v) {
  switch (v->type_index) {
  case PF_TYPE_NONE:
    Py_RETURN_NONE;
  case PF_TYPE_INT:
    return PyLong_FromLongLong(v->v_int64);
  case PF_TYPE_FLOAT:
    return PyFloat_FromDouble(v->v_float64);
  case PF_TYPE_FUNCTION:
  case PF_TYPE_TENSOR:
  case PF_TYPE_ARRAY:
  case PF_TYPE_MAP:
  case PF_TYPE_MODULE:
    return wrap_steal(v->v_obj);
  default:
    break;
  }
  PyObject* r = any_to_py(v);
  pf_any_release(v);
  return r;
}

/* ======================================================================================
 * Values: Python -> packfn
 * ====================================================================================== */

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

static void argtmp_release(argtmp_t* t) {
  pf_object_release(t->owned);
  if (t->has_buffer)
    PyBuffer_Release(&t->buf);
  PyMem_Free(t->heap_strides);
}

/* DLPack data type of a buffer format, or -1 with TypeError. */
static int dtype_of_format(const char* fmt, Py_ssize_t itemsize, DLDataType* out) {
  if (!fmt)
    fmt = "B";
  if (*fmt == '@' || *fmt == '=' || *fmt == '<')
    ++fmt;
  else if ((*fmt == '>' || *fmt == '!') && itemsize != 1)
    goto bad;
  else if (*fmt == '>' || *fmt == '!')
    ++fmt;
  uint8_t code;
  int complex = 0;
  if (*fmt == 'Z') {
    complex = 1;
    ++fmt;
  }
  switch (*fmt) {
  case '?':
    code = PF_DL_BOOL;
    break;
  case 'b':
  case 'h':
  case 'i':
  case 'l':
  case 'q':
  case 'n':
    code = PF_DL_INT;
    break;
  case 'B':
  case 'H':
  case 'I':
  case 'L':
  case 'Q':
  case 'N':
    code = PF_DL_UINT;
    break;
  case 'e':
  case 'f':
  case 'd':
    code = complex ? PF_DL_COMPLEX : PF_DL_FLOAT;
    break;
  default:
    goto bad;
  }
  if (fmt[1] != '\0' || (complex && code != PF_DL_COMPLEX) || itemsize <= 0 || itemsize > 32)
    goto bad;
  *out = pf_dtype(code, (uint8_t)(itemsize * 8), 1);
  return 0;
bad:
  PyErr_Format(PyExc_TypeError, "packfn: buffer format '%s' has no tensor data type", fmt);
  return -1;
}

/* Fills `dl` from a buffer: shape borrowed from the buffer, strides converted to elements into
 * `strides` (ndim entries). -1 with ValueError when a stride is not a multiple of the item. */
static int dl_from_buffer(const Py_buffer* b, DLTensor* dl, int64_t* strides) {
  if (dtype_of_format(b->format, b->itemsize, &dl->dtype) < 0)
    return -1;
  dl->data = b->buf;
  dl->device = pf_device(PF_DEV_CPU, 0);
  dl->ndim = b->ndim;
  dl->shape = (int64_t*)b->shape;
  dl->byte_offset = 0;
  dl->strides = NULL;
  if (b->strides) {
    for (int i = 0; i < b->ndim; ++i) {
      if (b->strides[i] % b->itemsize != 0) {
        PyErr_Format(PyExc_ValueError,
                     "packfn: stride %zd of axis %d is not a multiple of the item size %zd",
                     b->strides[i], i, b->itemsize);
        return -1;
      }
      strides[i] = b->strides[i] / b->itemsize;
    }
    dl->strides = strides;
  }
  return 0;
}

/* A buffer kept alive by a tensor object: the versioned DLPack form carries the read-only
 * flag, and the deleter releases the buffer under the GIL from whatever thread drops it. */
typedef struct {
  pf_dl_managed_tensor_versioned_t m;
  Py_buffer buf;
  int64_t dims[]; /* shape then strides, ndim each */
} bufholder_t;

static void bufholder_delete(pf_dl_managed_tensor_versioned_t* m) {
  bufholder_t* h = (bufholder_t*)m->manager_ctx;
  if (Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyBuffer_Release(&h->buf);
    PyGILState_Release(g);
  }
  free(h);
}

/* A tensor object owning the buffer `b` (moved in: on success and failure it is released or
 * kept by the tensor; the caller must not release it). 0, or -1 with a Python exception. */
static int tensor_from_buffer(Py_buffer* b, pf_object_t** out) {
  int ndim = b->ndim;
  bufholder_t* h =
      malloc(sizeof(bufholder_t) + 2 * (size_t)(ndim > 0 ? ndim : 1) * sizeof(int64_t));
  if (!h) {
    PyBuffer_Release(b);
    PyErr_NoMemory();
    return -1;
  }
  memset(&h->m, 0, sizeof h->m);
  if (dl_from_buffer(b, &h->m.dl_tensor, h->dims + ndim) < 0) {
    PyBuffer_Release(b);
    free(h);
    return -1;
  }
  for (int i = 0; i < ndim; ++i)
    h->dims[i] = b->shape[i];
  h->m.dl_tensor.shape = h->dims; /* the buffer's shape may point into the Py_buffer itself */
  h->m.version = (pf_dlpack_version_t){PF_DLPACK_VERSIONED_MAJOR, PF_DLPACK_VERSIONED_MINOR};
  h->m.manager_ctx = h;
  h->m.deleter = bufholder_delete;
  h->m.flags = b->readonly ? PF_DLPACK_FLAG_READ_ONLY : 0;
  h->buf = *b;
  if (pf_tensor_from_dlpack_versioned(&h->m, out) != 0) {
    PyBuffer_Release(&h->buf);
    free(h);
    raise_pf_error();
    return -1;
  }
  return 0;
}

/* The stream packfn queues its work on for CUDA or ROCm device `d`, as DLPack's stream argument
 * names it: pf_stream_get's, or for the default stream 1 (the legacy one) on CUDA, 0 on ROCm. */
static unsigned long long own_stream_value(DLDevice d) {
  void* s = pf_stream_get(d);
  return s ? (unsigned long long)(uintptr_t)s : (d.device_type == kDLCUDA ? 1u : 0u);
}

/* The device `o` reports through __dlpack_device__, into *out: 1, or 0 when its type has no
 * __dlpack_device__ (*out is then the CPU), -1 with an exception. */
static int dlpack_device(PyObject* o, DLDevice* out) {
  static PyObject* name;
  *out = pf_device(PF_DEV_CPU, 0);
  if (!name && !(name = PyUnicode_InternFromString("__dlpack_device__")))
    return -1;
  if (!PyObject_HasAttr((PyObject*)Py_TYPE(o), name))
    return 0;
  PyObject* dev = PyObject_CallMethodNoArgs(o, name);
  if (!dev)
    return -1;
  int type = 0, id = 0;
  int ok = PyTuple_Check(dev) && PyArg_ParseTuple(dev, "ii", &type, &id);
  Py_DECREF(dev);
  if (!ok) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "packfn: %s.__dlpack_device__() returned no (type, id) tuple",
                   Py_TYPE(o)->tp_name);
    return -1;
  }
  *out = (DLDevice){(DLDeviceType)type, id};
  return 1;
}

/* A tensor object from an object's __dlpack__ (no copy), asked for DLPack 1.x and, for a tensor
 * on a CUDA or ROCm device `dev` (its __dlpack_device__), for the stream packfn's kernels use
 * there (pf_stream_get; 1, the legacy default stream, for NULL), so the producer orders its
 * pending writes before them. 0, or -1 with a Python exception. */
static int tensor_from_dlpack_obj(PyObject* o, DLDevice dev, pf_object_t** out) {
  static PyObject *kwnames, *kwnames_old; /* ("stream", "max_version"), ("stream",) */
  static PyObject* name;
  if (!kwnames) {
    name = PyUnicode_InternFromString("__dlpack__");
    kwnames = Py_BuildValue("(ss)", "stream", "max_version");
    kwnames_old = Py_BuildValue("(s)", "stream");
    if (!name || !kwnames || !kwnames_old)
      return -1;
  }
  PyObject* stream = dev.device_type == kDLCUDA || dev.device_type == kDLROCM
                         ? PyLong_FromUnsignedLongLong(own_stream_value(dev))
                         : Py_NewRef(Py_None);
  if (!stream)
    return -1;
  PyObject* version = Py_BuildValue("(ii)", PF_DLPACK_VERSIONED_MAJOR, PF_DLPACK_VERSIONED_MINOR);
  if (!version) {
    Py_DECREF(stream);
    return -1;
  }
  PyObject* args[3] = {o, stream, version};
  PyObject* cap = PyObject_VectorcallMethod(name, args, 1, kwnames);
  Py_DECREF(version);
  if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) { /* a producer without max_version */
    PyErr_Clear();
    cap = PyObject_VectorcallMethod(name, args, 1, stream == Py_None ? NULL : kwnames_old);
  }
  Py_DECREF(stream);
  if (!cap)
    return -1;
  int rc = -1;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    void* p = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (pf_tensor_from_dlpack_versioned(p, out) == 0)
      rc = PyCapsule_SetName(cap, "used_dltensor_versioned");
    else
      raise_pf_error();
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    void* p = PyCapsule_GetPointer(cap, "dltensor");
    if (pf_tensor_from_dlpack(p, out) == 0)
      rc = PyCapsule_SetName(cap, "used_dltensor");
    else
      raise_pf_error();
  } else {
    PyErr_Format(PyExc_TypeError, "packfn: %s.__dlpack__() returned no DLPack capsule",
                 Py_TYPE(o)->tp_name);
  }
  /* a refused capsule's destructor runs the producer's deleter, which may run Python code that
   * clears the pending exception: kept aside meanwhile */
  PyObject *et = NULL, *ev = NULL, *etb = NULL;
  if (rc != 0)
    PyErr_Fetch(&et, &ev, &etb);
  Py_DECREF(cap);
  if (rc != 0)
    PyErr_Restore(et, ev, etb);
  return rc;
}

static int has_dlpack(PyObject* o) {
  static PyObject* name;
  if (!name && !(name = PyUnicode_InternFromString("__dlpack__")))
    return -1;
  return PyObject_HasAttr((PyObject*)Py_TYPE(o), name);
}

/* Types whose buffer request failed for an object on a device other than the CPU (CuPy's
 * arrays refuse it for GPU memory, JAX's for its GPU arrays): their objects say where they are
 * first, and those not on the CPU go to DLPack directly, instead of raising and discarding that
 * refusal on every call. A CPU object whose buffer request fails (a bfloat16 or datetime64
 * array) says nothing about the other objects of its type: it is not remembered, so NumPy's
 * and JAX's other CPU arrays keep the buffer protocol (its speed and read-only flag). At most 8
 * types, each kept (one reference) for the process; under the GIL (the module does not declare
 * itself free-threaded). */
static PyTypeObject* buffer_refusers[8];

static int refuses_buffer(PyTypeObject* tp) {
  for (size_t i = 0; i < sizeof buffer_refusers / sizeof buffer_refusers[0] && buffer_refusers[i];
       ++i)
    if (buffer_refusers[i] == tp)
      return 1;
  return 0;
}

static void note_buffer_refuser(PyTypeObject* tp) {
  for (size_t i = 0; i < sizeof buffer_refusers / sizeof buffer_refusers[0]; ++i) {
    if (buffer_refusers[i] == tp)
      return;
    if (!buffer_refusers[i]) {
      Py_INCREF(tp);
      buffer_refusers[i] = tp;
      return;
    }
  }
}

/* A tensor object over any buffer-protocol or DLPack object: 1 and a new reference in *out,
 * 0 when `o` is neither (no exception), -1 with a Python exception. */
static int tensor_from_object(PyObject* o, pf_object_t** out) {
  /* looked up first: a type lookup with an exception pending (a refused buffer request, as
   * CuPy's for GPU memory) may clear that exception and report "absent" (CPython's method
   * cache), which left a NULL without an exception */
  int dl = has_dlpack(o);
  if (dl < 0)
    return -1;
  PyTypeObject* tp = Py_TYPE(o);
  DLDevice dev = pf_device(PF_DEV_CPU, 0);
  int dev_known = 0;
  if (tp->tp_as_buffer && tp->tp_as_buffer->bf_getbuffer) {
    if (dl && refuses_buffer(tp)) { /* decided per object: a GPU array goes to DLPack */
      if (dlpack_device(o, &dev) < 0)
        return -1;
      dev_known = 1;
    }
    if (dev.device_type == kDLCPU) {
      Py_buffer b;
      if (PyObject_GetBuffer(o, &b, PyBUF_RECORDS_RO) == 0)
        return tensor_from_buffer(&b, out) < 0 ? -1 : 1;
      if (!dl) /* no other route: the buffer's error stands */
        return -1;
      PyErr_Clear();
      if (!dev_known && dlpack_device(o, &dev) < 0)
        return -1;
      dev_known = 1;
      if (dev.device_type != kDLCPU)
        note_buffer_refuser(tp);
    }
  }
  if (!dl)
    return 0;
  if (!dev_known && dlpack_device(o, &dev) < 0)
    return -1;
  return tensor_from_dlpack_obj(o, dev, out) < 0 ? -1 : 1;
}

/* Callback function object around a Python callable (made below). */
static int make_callback(PyObject* callable, pf_object_t** out);

static int py_to_view(PyObject* o, pf_any_t* out, argtmp_t* t, int owned, int* has_tensor);

/* An Array from a list or tuple: new reference in *out. Converting an item may run Python code
 * (__dlpack__, __index__) that changes a list, so the items come from a tuple snapshot that
 * holds them until the array owns its copies. */
static int array_from_seq(PyObject* list_or_tuple, pf_object_t** out) {
  PyObject* seq = PySequence_Tuple(list_or_tuple);
  if (!seq)
    return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(seq);
  PyObject** items = &PyTuple_GET_ITEM(seq, 0);
  pf_any_t* views = PyMem_Malloc(sizeof(pf_any_t) * (size_t)(n ? n : 1));
  argtmp_t* tmps = PyMem_Malloc(sizeof(argtmp_t) * (size_t)(n ? n : 1));
  unsigned char* used = PyMem_Calloc((size_t)(n ? n : 1), 1);
  int rc = -1, ht = 0;
  Py_ssize_t i = 0;
  if (!views || !tmps || !used) {
    PyErr_NoMemory();
    goto done;
  }
  for (; i < n; ++i) {
    int r = py_to_view(items[i], &views[i], &tmps[i], 1, &ht);
    if (r < 0)
      goto done;
    used[i] = (unsigned char)r;
  }
  rc = pf_array_create(views, (size_t)n, out) == 0 ? 0 : (raise_pf_error(), -1);
done:
  for (Py_ssize_t j = 0; j < i; ++j)
    if (used[j])
      argtmp_release(&tmps[j]);
  PyMem_Free(views);
  PyMem_Free(tmps);
  PyMem_Free(used);
  Py_DECREF(seq);
  return rc;
}

/* A frozen Map from a dict: new reference in *out. Converting a key or value may run Python
 * code that changes the dict, so the pairs come from a snapshot (a list of (key, value)
 * tuples) that holds them while they are converted. */
static int map_from_dict(PyObject* d, pf_object_t** out) {
  PyObject* pairs = PyDict_Items(d);
  if (!pairs)
    return -1;
  pf_object_t* map;
  if (pf_map_create(&map) != 0) {
    Py_DECREF(pairs);
    raise_pf_error();
    return -1;
  }
  int ht = 0;
  for (Py_ssize_t pos = 0; pos < PyList_GET_SIZE(pairs); ++pos) {
    PyObject* pair = PyList_GET_ITEM(pairs, pos);
    PyObject* k = PyTuple_GET_ITEM(pair, 0);
    PyObject* v = PyTuple_GET_ITEM(pair, 1);
    pf_any_t kv, vv;
    argtmp_t kt, vt;
    int rk = py_to_view(k, &kv, &kt, 1, &ht);
    if (rk < 0)
      goto fail;
    int rv = py_to_view(v, &vv, &vt, 1, &ht);
    if (rv < 0) {
      if (rk)
        argtmp_release(&kt);
      goto fail;
    }
    int rc = pf_map_set(map, &kv, &vv);
    if (rk)
      argtmp_release(&kt);
    if (rv)
      argtmp_release(&vt);
    if (rc != 0) {
      raise_pf_error();
      goto fail;
    }
  }
  Py_DECREF(pairs);
  pf_map_freeze(map);
  *out = map;
  return 0;
fail:
  Py_DECREF(pairs);
  pf_object_release(map);
  return -1;
}

/* OverflowError for an int beyond int64, sized by its bit length: the digits of a huge int
 * would fill the message (and past 4300 of them str() itself raises ValueError). */
static int int_overflow(PyObject* o, int overflow) {
  PyObject* bits = PyObject_CallMethod((PyObject*)&PyLong_Type, "bit_length", "O", o);
  if (!bits)
    return -1;
  PyErr_Format(PyExc_OverflowError,
               "packfn: %s int of %S bits does not fit in a 64-bit signed integer (packfn ints "
               "are int64)",
               overflow < 0 ? "a negative" : "a positive", bits);
  Py_DECREF(bits);
  return -1;
}

/* Converts a Python value into a view for a call. Returns 0 (nothing to release), 1 (release
 * `t` after the call) or -1 with a Python exception. `owned`: tensors become tensor objects
 * (for values that outlive the call: container items, callback results). *has_tensor is set
 * when a tensor is passed. */
/* ======================================================================================
 * TVM-FFI's Python objects (packfn and TVM-FFI share the object ABI, docs/interop.md)
 * ====================================================================================== */

/* A tvm_ffi.Object (any of its subclasses: Function, Tensor, Array, Map, ...) passed to packfn
 * is the same C object, borrowed for the call like a packfn.Object: its __chandle__() is the
 * object's address. 1 when `o` is one (a view in *out), 0 when not, -1 with an exception. Only
 * instances of tvm_ffi.core.Object are trusted to answer __chandle__ with an address. */
static int tvm_ffi_handle(PyObject* o, pf_any_t* out, int* has_tensor) {
  PyTypeObject* tp = Py_TYPE(o);
  /* tvm_ffi.core.Object: the base of every TVM-FFI object class, the ones it makes for types
   * it knows only by key included; looked up once tvm_ffi.core is imported */
  static PyObject* tvm_object;
  if (!tvm_object) {
    static PyObject* name; /* interned once: this runs for every such argument until then */
    if (!name && !(name = PyUnicode_InternFromString("tvm_ffi.core")))
      return -1;
    PyObject* core = PyImport_GetModule(name);
    if (!core)
      return PyErr_Occurred() ? -1 : 0;
    tvm_object = PyObject_GetAttrString(core, "Object");
    Py_DECREF(core);
    if (!tvm_object) {
      PyErr_Clear();
      return 0;
    }
  }
  int is = PyObject_IsInstance(o, tvm_object);
  if (is <= 0)
    return is;
  PyObject* meth = PyObject_GetAttrString(o, "__chandle__");
  if (!meth) {
    PyErr_Clear();
    return 0;
  }
  PyObject* addr = PyObject_CallNoArgs(meth);
  Py_DECREF(meth);
  if (!addr)
    return -1;
  void* p = PyLong_AsVoidPtr(addr);
  Py_DECREF(addr);
  if (!p) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError, "packfn: a '%s' holds no object (None handle)", tp->tp_name);
    return -1;
  }
  pf_object_t* obj = p;
  *out = pf_any_object(obj);
  if (obj->type_index == PF_TYPE_TENSOR)
    *has_tensor = 1;
  return 1;
}

static int py_to_view(PyObject* o, pf_any_t* out, argtmp_t* t, int owned, int* has_tensor) {
  PyTypeObject* tp = Py_TYPE(o);
  out->zero_padding = 0;
  if (tp == &PyLong_Type) {
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow)
      return int_overflow(o, overflow);
    out->type_index = PF_TYPE_INT;
    out->v_int64 = x;
    return 0;
  }
  if (tp == &PyFloat_Type) {
    out->type_index = PF_TYPE_FLOAT;
    out->v_float64 = PyFloat_AS_DOUBLE(o);
    return 0;
  }
  if (tp == &PyUnicode_Type) {
    Py_ssize_t n;
    const char* s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s)
      return -1;
    if (n <= PF_SMALL_STR_MAX) {
      out->type_index = PF_TYPE_SMALL_STR;
      out->small_str_len = (uint32_t)n;
      out->v_int64 = 0;
      memcpy(out->v_bytes, s, (size_t)n);
      return 0;
    }
    if (!memchr(s, 0, (size_t)n)) { /* borrowed: the caller's reference keeps it alive */
      out->type_index = PF_TYPE_RAW_STR;
      out->v_c_str = s;
      return 0;
    }
    if (pf_string_object_create(s, (size_t)n, &t->owned) != 0) {
      raise_pf_error();
      return -1;
    }
    t->has_buffer = 0;
    t->heap_strides = NULL;
    *out = pf_any_object(t->owned);
    return 1;
  }
  if (o == Py_None) {
    out->type_index = PF_TYPE_NONE;
    out->v_int64 = 0;
    return 0;
  }
  if (tp == &PyBool_Type) {
    out->type_index = PF_TYPE_BOOL;
    out->v_int64 = o == Py_True;
    return 0;
  }
  if (tp == &PyBytes_Type) {
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    if (n <= PF_SMALL_STR_MAX) {
      out->type_index = PF_TYPE_SMALL_BYTES;
      out->small_str_len = (uint32_t)n;
      out->v_int64 = 0;
      memcpy(out->v_bytes, PyBytes_AS_STRING(o), (size_t)n);
      return 0;
    }
    t->bytes.data = PyBytes_AS_STRING(o);
    t->bytes.size = (size_t)n;
    out->type_index = PF_TYPE_BYTE_ARRAY_PTR;
    out->v_ptr = &t->bytes;
    return 0;
  }
  if (PyObject_TypeCheck(o, &Object_Type)) {
    pf_object_t* obj = ((PfObject*)o)->obj;
    *out = pf_any_object(obj);
    if (tp == &Tensor_Type)
      *has_tensor = 1;
    return 0;
  }
  t->owned = NULL;
  t->has_buffer = 0;
  t->heap_strides = NULL;
  if (PyLong_Check(o)) { /* int subclasses (IntEnum, ...), before buffers: NumPy's float64 scalar */
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow)
      return int_overflow(o, overflow);
    if (x == -1 && PyErr_Occurred())
      return -1;
    out->type_index = PF_TYPE_INT;
    out->v_int64 = x;
    return 0;
  }
  if (PyFloat_Check(o)) {
    out->type_index = PF_TYPE_FLOAT;
    out->v_float64 = PyFloat_AS_DOUBLE(o);
    return 0;
  }
  /* a buffer-protocol object (NumPy arrays, memoryview, array.array, bytearray) is a tensor:
   * for a call, a writable one is described on the stack (no allocation) */
  if (!owned && tp->tp_as_buffer && tp->tp_as_buffer->bf_getbuffer && !refuses_buffer(tp) &&
      PyObject_GetBuffer(o, &t->buf, PyBUF_RECORDS_RO) == 0) {
    *has_tensor = 1;
    if (t->buf.readonly) { /* a tensor object carries the read-only flag */
      if (tensor_from_buffer(&t->buf, &t->owned) < 0)
        return -1;
      *out = pf_any_object(t->owned);
      return 1;
    }
    t->has_buffer = 1;
    int64_t* strides = t->strides;
    if (t->buf.ndim > PFPY_STACK_DIMS &&
        !(strides = t->heap_strides = PyMem_Malloc(sizeof(int64_t) * (size_t)t->buf.ndim))) {
      PyErr_NoMemory();
      argtmp_release(t);
      return -1;
    }
    if (dl_from_buffer(&t->buf, &t->dl, strides) < 0) {
      argtmp_release(t);
      return -1;
    }
    out->type_index = PF_TYPE_DLTENSOR_PTR;
    out->v_ptr = &t->dl;
    return 1;
  }
  PyErr_Clear(); /* a failed buffer request may still have a DLPack route, tried below */
  if (PyList_Check(o) || PyTuple_Check(o)) {
    if (Py_EnterRecursiveCall(" while converting a sequence to a packfn Array"))
      return -1;
    int r = array_from_seq(o, &t->owned);
    Py_LeaveRecursiveCall();
    if (r < 0)
      return -1;
    *out = pf_any_object(t->owned);
    return 1;
  }
  if (PyDict_Check(o)) {
    if (Py_EnterRecursiveCall(" while converting a dict to a packfn Map"))
      return -1;
    int r = map_from_dict(o, &t->owned);
    Py_LeaveRecursiveCall();
    if (r < 0)
      return -1;
    *out = pf_any_object(t->owned);
    return 1;
  }
  int h = tvm_ffi_handle(o, out, has_tensor);
  if (h != 0)
    return h < 0 ? -1 : 0;
  int r = tensor_from_object(o, &t->owned);
  if (r < 0)
    return -1;
  if (r) {
    *has_tensor = 1;
    *out = pf_any_object(t->owned);
    return 1;
  }
  if (PyCallable_Check(o)) {
    if (make_callback(o, &t->owned) < 0)
      return -1;
    *out = pf_any_object(t->owned);
    return 1;
  }
  PyErr_Format(PyExc_TypeError, "packfn: cannot pass a value of type '%s'", tp->tp_name);
  return -1;
}

/* An owned value from a Python value. 0, or -1 with a Python exception. */
static int py_to_owned(PyObject* o, pf_any_t* out) {
  argtmp_t t;
  pf_any_t view;
  int ht = 0;
  int r = py_to_view(o, &view, &t, 1, &ht);
  if (r < 0)
    return -1;
  int rc = pf_any_to_owned(&view, out);
  if (r)
    argtmp_release(&t);
  if (rc != 0) {
    raise_pf_error();
    return -1;
  }
  return 0;
}

/* ======================================================================================
 * Callbacks: Python callables as packfn functions
 * ====================================================================================== */

/* What a callback function object holds: the callable and its own address (for callback_fns). */
typedef struct {
  PyObject* callable;
  pf_object_t* fn;
} callback_t;

static int callback_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  if (!Py_IsInitialized()) {
    PF_ERROR_SET(PF_ERR_RUNTIME, "packfn: Python callback called after Python finalized");
    return -1;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = -1;
  PyObject* small[PFPY_STACK_ARGS];
  PyObject** pa = small;
  int32_t done = 0;
  if (num_args > PFPY_STACK_ARGS && !(pa = PyMem_Malloc(sizeof(PyObject*) * (size_t)num_args))) {
    PyErr_NoMemory();
    goto out;
  }
  for (; done < num_args; ++done)
    if (!(pa[done] = any_to_py(&args[done])))
      goto out;
  PyObject* r = PyObject_Vectorcall(((callback_t*)self)->callable, pa, (size_t)num_args, NULL);
  if (r) {
    rc = py_to_owned(r, result);
    Py_DECREF(r);
  }
out:
  for (int32_t i = 0; i < done; ++i)
    Py_DECREF(pa[i]);
  if (pa != small)
    PyMem_Free(pa);
  if (rc != 0)
    pyerr_to_pf();
  PyGILState_Release(g);
  return rc;
}

static void callback_delete(void* self) {
  callback_t* cb = (callback_t*)self;
  if (Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* key = PyLong_FromVoidPtr(cb->fn);
    if (!key || PySet_Discard(callback_fns, key) < 0)
      PyErr_Clear();
    Py_XDECREF(key);
    Py_DECREF(cb->callable);
    PyGILState_Release(g);
  }
  free(cb);
}

static int make_callback(PyObject* callable, pf_object_t** out) {
  callback_t* cb = malloc(sizeof *cb);
  if (!cb) {
    PyErr_NoMemory();
    return -1;
  }
  cb->callable = callable;
  if (pf_function_create(cb, callback_call, callback_delete, out) != 0) {
    free(cb);
    raise_pf_error();
    return -1;
  }
  Py_INCREF(callable); /* the function object's reference, dropped by callback_delete */
  cb->fn = *out;
  PyObject* key = PyLong_FromVoidPtr(*out);
  if (!key || PySet_Add(callback_fns, key) < 0) {
    Py_XDECREF(key);
    pf_object_release(*out);
    return -1;
  }
  Py_DECREF(key);
  /* each lookup may fail (no __qualname__ on a functools.partial): clear before the next call */
  PyObject* name = PyObject_GetAttrString(callable, "__qualname__");
  PyErr_Clear();
  PyObject* doc = PyObject_GetAttrString(callable, "__doc__");
  PyErr_Clear();
  const char* ns = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
  PyErr_Clear();
  const char* ds = doc && PyUnicode_Check(doc) ? PyUnicode_AsUTF8(doc) : NULL;
  PyErr_Clear();
  if (ns || ds) {
    char sig[256];
    if (ns)
      snprintf(sig, sizeof sig, "%s(*args) -> any", ns);
    if (pf_function_set_info(*out, ns ? sig : NULL, ds) != 0)
      pf_error_clear(); /* the texts are informative only */
  }
  Py_XDECREF(name);
  Py_XDECREF(doc);
  return 0;
}

/* ======================================================================================
 * Object (base), Function
 * ====================================================================================== */

static void obj_dealloc(PyObject* self) {
  PfObject* s = (PfObject*)self;
  if (s->weakrefs)
    PyObject_ClearWeakRefs(self);
  pf_object_t* o = s->obj;
  s->obj = NULL;
  pf_object_release(o);
  Py_TYPE(self)->tp_free(self);
}

static PyObject* obj_repr(PyObject* self) {
  pf_object_t* o = ((PfObject*)self)->obj;
  return PyUnicode_FromFormat("<packfn.%s %s at %p>", Py_TYPE(self)->tp_name + 7,
                              pf_type_name(o->type_index), (void*)o);
}

static Py_hash_t obj_hash(PyObject* self) {
  Py_hash_t h = (Py_hash_t)((uintptr_t)((PfObject*)self)->obj >> 4);
  return h == -1 ? -2 : h;
}

static PyObject* obj_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, &Object_Type))
    Py_RETURN_NOTIMPLEMENTED;
  int same = ((PfObject*)a)->obj == ((PfObject*)b)->obj;
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static PyObject* obj_type_index(PyObject* self, void* c) {
  (void)c;
  return PyLong_FromLong(((PfObject*)self)->obj->type_index);
}
static PyObject* obj_type_key(PyObject* self, void* c) {
  (void)c;
  return PyUnicode_FromString(pf_type_name(((PfObject*)self)->obj->type_index));
}
static PyObject* obj_refcount(PyObject* self, void* c) {
  (void)c;
  return PyLong_FromUnsignedLong(pf_object_strong_count(((PfObject*)self)->obj));
}

static PyObject* obj_address(PyObject* self, void* c) {
  (void)c;
  return PyLong_FromVoidPtr(((PfObject*)self)->obj);
}

static PyGetSetDef obj_getset[] = {
    {"_address", obj_address, NULL, "address of the C object (pf_object_t*)", NULL},
    {"type_index", obj_type_index, NULL, "type index of the packfn object", NULL},
    {"type_key", obj_type_key, NULL, "type name of the packfn object", NULL},
    {"_pf_refcount", obj_refcount, NULL, "strong reference count of the C object", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* packfn.Object.__tvm_ffi_object__(): the same C object as a tvm_ffi.Object (of the class
 * tvm_ffi gives its type index), so TVM-FFI's Python passes packfn objects to its functions.
 * tvm_ffi has no Python constructor from an address, so a packfn global function returns the
 * object to it: TVM_HANDOFF_GLOBAL, which only hands out the object this thread is handing
 * off right now (any other address is refused). Needs packfn joined to TVM-FFI (the global is
 * then in its table): ImportError/RuntimeError otherwise. */
#define TVM_HANDOFF_GLOBAL "packfn._tvm_ffi_handoff"
static _Thread_local pf_object_t* tvm_handoff; /* the object being handed off, or NULL */

static int tvm_handoff_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  if (num_args != 1 || args[0].type_index != PF_TYPE_INT || !tvm_handoff ||
      (uintptr_t)args[0].v_int64 != (uintptr_t)tvm_handoff) {
    pf_error_set(PF_ERR_VALUE, TVM_HANDOFF_GLOBAL ": private to packfn.Object.__tvm_ffi_object__");
    return -1;
  }
  pf_object_retain(tvm_handoff);
  *result = pf_any_object(tvm_handoff);
  return 0;
}

static PyObject* obj_tvm_ffi_object(PyObject* self, PyObject* unused) {
  (void)unused;
  static PyObject* handoff; /* tvm_ffi.Function for TVM_HANDOFF_GLOBAL, once found */
  if (!handoff) {
    if (!pf_tvm_ffi_join()) {
      PyErr_SetString(PyExc_RuntimeError,
                      "packfn: __tvm_ffi_object__: packfn has not joined TVM-FFI (import tvm_ffi "
                      "first, and leave PACKFN_NO_TVM_FFI unset)");
      return NULL;
    }
    PyObject* mod = PyImport_ImportModule("tvm_ffi");
    if (!mod)
      return NULL;
    PyObject* f = PyObject_CallMethod(mod, "get_global_func", "s", TVM_HANDOFF_GLOBAL);
    Py_DECREF(mod);
    if (!f)
      return NULL;
    handoff = f;
  }
  PyObject* addr = PyLong_FromVoidPtr(((PfObject*)self)->obj);
  if (!addr)
    return NULL;
  pf_object_t* before = tvm_handoff;
  tvm_handoff = ((PfObject*)self)->obj;
  PyObject* r = PyObject_CallOneArg(handoff, addr);
  tvm_handoff = before;
  Py_DECREF(addr);
  return r;
}

static PyMethodDef obj_methods[] = {
    {"__tvm_ffi_object__", obj_tvm_ffi_object, METH_NOARGS,
     "__tvm_ffi_object__() -> tvm_ffi.Object: the same C object seen from TVM-FFI's Python"},
    {NULL, NULL, 0, NULL}};

static PyObject* obj_new_forbidden(PyTypeObject* tp, PyObject* a, PyObject* k) {
  (void)a;
  (void)k;
  PyErr_Format(PyExc_TypeError, "cannot create '%s' instances directly", tp->tp_name);
  return NULL;
}

static PyObject* fn_get_name(PyObject* self, void* c);

/* Releases the temporaries of `count` converted arguments. Releasing one may run a producer's
 * deleter (Python code): a pending exception (`py_error`) is kept aside meanwhile. */
static PFPY_INLINE void release_temporaries(argtmp_t* tmp, const unsigned char* used,
                                            Py_ssize_t count, int py_error) {
  PyObject *et = NULL, *ev = NULL, *etb = NULL;
  if (py_error)
    PyErr_Fetch(&et, &ev, &etb);
  for (Py_ssize_t j = 0; j < count; ++j)
    if (used[j])
      argtmp_release(&tmp[j]);
  if (py_error)
    PyErr_Restore(et, ev, etb);
}

/* A DLTensor* result that one of the call's arguments describes: a tensor object keeping that
 * argument alive (a stack description's buffer moves into one, and argtmp_release then leaves
 * it; a tensor object argument is retained). NULL with TypeError when none does. */
static PyObject* tensor_of_argument(PyObject* self, const DLTensor* dl, const pf_any_t* av,
                                    argtmp_t* tmp, const unsigned char* used, Py_ssize_t n) {
  for (Py_ssize_t j = 0; j < n; ++j) {
    pf_object_t* t;
    if (av[j].type_index == PF_TYPE_DLTENSOR_PTR && av[j].v_ptr == dl && used[j] &&
        tmp[j].has_buffer) {
      tmp[j].has_buffer = 0; /* tensor_from_buffer keeps or releases it */
      return tensor_from_buffer(&tmp[j].buf, &t) < 0 ? NULL : wrap_steal(t);
    }
    if (av[j].type_index >= PF_TYPE_STATIC_OBJECT_BEGIN && pf_tensor_dltensor(av[j].v_obj) == dl) {
      pf_object_retain(av[j].v_obj);
      return wrap_steal(av[j].v_obj);
    }
  }
  PyObject* name = fn_get_name(self, NULL);
  if (name) {
    PyErr_Format(PyExc_TypeError,
                 "%U: result: expected a tensor object, got a borrowed DLTensor* that is none "
                 "of its arguments (a view cannot outlive the call that lent it)",
                 name);
    Py_DECREF(name);
  }
  return NULL;
}

/* The end of a call that returned a view (type indexes 7-10: a DLTensor*, a string, a byte
 * array, an object reference), which can point into the arguments' temporaries: the result is
 * converted while they live, then they are released and the argument arrays freed (`heap`:
 * they were allocated). A DLTensor* is valid only as long as what it describes: it becomes a
 * tensor keeping its argument alive (tensor_of_argument), or a TypeError when no argument
 * describes it, since nothing then says how long its memory lives; other views are copied.
 * Out of line: the common call path keeps its registers. New reference, or NULL with an
 * exception. */
PFPY_COLD static PyObject* view_result(PyObject* self, const pf_any_t* result, pf_any_t* av,
                                       argtmp_t* tmp, unsigned char* used, Py_ssize_t n,
                                       int any_used, int heap) {
  PyObject* r = result->type_index == PF_TYPE_DLTENSOR_PTR
                    ? tensor_of_argument(self, result->v_ptr, av, tmp, used, n)
                    : any_to_py(result); /* a view: nothing to release */
  if (any_used)
    release_temporaries(tmp, used, n, r == NULL);
  if (heap) {
    PyMem_Free(av);
    PyMem_Free(tmp);
    PyMem_Free(used);
  }
  return r;
}

static PyObject* fn_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                               PyObject* kwnames) {
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (kwnames && PyTuple_GET_SIZE(kwnames)) {
    PyErr_SetString(PyExc_TypeError, "packfn functions take positional arguments only");
    return NULL;
  }
  if (n > INT32_MAX) {
    PyErr_SetString(PyExc_ValueError, "packfn: too many arguments");
    return NULL;
  }
  pf_any_t stack_any[PFPY_STACK_ARGS];
  argtmp_t stack_tmp[PFPY_STACK_ARGS];
  unsigned char stack_used[PFPY_STACK_ARGS];
  pf_any_t* av = stack_any;
  argtmp_t* tmp = stack_tmp;
  unsigned char* used = stack_used;
  int has_tensor = 0, any_used = 0, called = 0, rc = -1;
  pf_any_t result;
  Py_ssize_t i = 0;
  if (n > PFPY_STACK_ARGS) {
    av = PyMem_Malloc(sizeof(pf_any_t) * (size_t)n);
    tmp = PyMem_Malloc(sizeof(argtmp_t) * (size_t)n);
    used = PyMem_Malloc((size_t)n);
    if (!av || !tmp || !used) {
      PyErr_NoMemory();
      goto done;
    }
  }
  for (; i < n; ++i) {
    int r = py_to_view(args[i], &av[i], &tmp[i], ((PfObject*)self)->owned_args, &has_tensor);
    if (r < 0) {
      /* name the argument in the message */
      PyObject *et, *ev, *etb;
      PyErr_Fetch(&et, &ev, &etb);
      PyErr_NormalizeException(&et, &ev, &etb);
      PyObject* msg = ev ? PyObject_Str(ev) : NULL;
      if (msg && (et == PyExc_TypeError || et == PyExc_OverflowError || et == PyExc_ValueError)) {
        PyErr_Format(et, "argument %zd: %U", i, msg);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(etb);
      } else {
        PyErr_Restore(et, ev, etb);
      }
      Py_XDECREF(msg);
      goto done;
    }
    used[i] = (unsigned char)r;
    any_used |= r;
  }
  pf_object_t* fn = ((PfObject*)self)->obj;
  if (has_tensor) { /* a kernel may run long: other Python threads go on meanwhile */
    Py_BEGIN_ALLOW_THREADS rc = pf_function_call(fn, av, (int32_t)n, &result);
    Py_END_ALLOW_THREADS
  } else {
    rc = pf_function_call(fn, av, (int32_t)n, &result);
  }
  if (PF_UNLIKELY((uint32_t)result.type_index - PF_TYPE_DLTENSOR_PTR <=
                  PF_TYPE_OBJECT_RVALUE_REF - PF_TYPE_DLTENSOR_PTR) &&
      rc == 0) /* a view, which may point into the temporaries */
    return view_result(self, &result, av, tmp, used, n, any_used, av != stack_any);
  called = 1;
done:
  if (any_used)
    release_temporaries(tmp, used, i, !called);
  if (av != stack_any) {
    PyMem_Free(av);
    PyMem_Free(tmp);
    PyMem_Free(used);
  }
  if (!called) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_SystemError,
                   "packfn: argument %zd of a call failed to convert without "
                   "an exception",
                   i);
    return NULL;
  }
  if (rc != 0)
    return raise_pf_error();
  return any_to_py_steal(&result);
}

static PyObject* fn_new(PyTypeObject* tp, PyObject* args, PyObject* kw) {
  (void)tp;
  PyObject* callable;
  static char* kwlist[] = {"callable", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O:Function", kwlist, &callable))
    return NULL;
  if (Py_IS_TYPE(callable, &Function_Type))
    return Py_NewRef(callable);
  if (!PyCallable_Check(callable)) {
    PyErr_Format(PyExc_TypeError, "packfn.Function: expected a callable, got '%s'",
                 Py_TYPE(callable)->tp_name);
    return NULL;
  }
  pf_object_t* fn;
  if (make_callback(callable, &fn) < 0)
    return NULL;
  return wrap_steal(fn);
}

static PyObject* fn_get_signature_text(PyObject* self, void* c) {
  (void)c;
  const char* s = pf_function_signature(((PfObject*)self)->obj);
  if (!s)
    Py_RETURN_NONE;
  return PyUnicode_FromString(s);
}

static PyObject* fn_get_doc(PyObject* self, void* c) {
  (void)c;
  const char* sig = pf_function_signature(((PfObject*)self)->obj);
  const char* doc = pf_function_doc(((PfObject*)self)->obj);
  if (sig && doc)
    return PyUnicode_FromFormat("%s\n\n%s", sig, doc);
  if (sig || doc)
    return PyUnicode_FromString(sig ? sig : doc);
  Py_RETURN_NONE;
}

static PyObject* fn_get_name(PyObject* self, void* c) {
  (void)c;
  const char* s = pf_function_signature(((PfObject*)self)->obj);
  const char* p = s ? strchr(s, '(') : NULL;
  if (!p)
    return PyUnicode_FromString("function");
  return PyUnicode_FromStringAndSize(s, p - s);
}

/* __signature__: inspect.Signature built by packfn._signature_from_text (Python side). */
static PyObject* fn_get_py_signature(PyObject* self, void* c) {
  (void)c;
  const char* s = pf_function_signature(((PfObject*)self)->obj);
  if (!s)
    Py_RETURN_NONE;
  PyObject* mod = PyImport_ImportModule("packfn._signature");
  if (!mod)
    return NULL;
  PyObject* r = PyObject_CallMethod(mod, "signature_from_text", "s", s);
  Py_DECREF(mod);
  return r;
}

static PyObject* fn_repr(PyObject* self) {
  const char* s = pf_function_signature(((PfObject*)self)->obj);
  if (s)
    return PyUnicode_FromFormat("<packfn.Function %s>", s);
  return PyUnicode_FromFormat("<packfn.Function at %p>", (void*)((PfObject*)self)->obj);
}

static PyObject* fn_get_owned_args(PyObject* self, void* c) {
  (void)c;
  return PyBool_FromLong(((PfObject*)self)->owned_args);
}

static PyGetSetDef fn_getset[] = {
    {"signature", fn_get_signature_text, NULL, "signature text, or None", NULL},
    {"_owned_args", fn_get_owned_args, NULL,
     "True when calls pass tensors owning their buffers (the callee may keep them), False "
     "when they pass DLTensor views borrowed for the call",
     NULL},
    {"__doc__", fn_get_doc, NULL, NULL, NULL},
    {"__name__", fn_get_name, NULL, NULL, NULL},
    {"__qualname__", fn_get_name, NULL, NULL, NULL},
    {"__signature__", fn_get_py_signature, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ======================================================================================
 * Tensor
 * ====================================================================================== */

static DLTensor* tensor_dl(PyObject* self) {
  return pf_tensor_dltensor(((PfObject*)self)->obj);
}

static PyObject* int64_tuple(const int64_t* v, int32_t n) {
  PyObject* t = PyTuple_New(n);
  for (int32_t i = 0; t && i < n; ++i) {
    PyObject* x = PyLong_FromLongLong(v[i]);
    if (!x) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, x);
  }
  return t;
}

static PyObject* tensor_shape(PyObject* self, void* c) {
  (void)c;
  DLTensor* t = tensor_dl(self);
  return int64_tuple(t->shape, t->ndim);
}
static PyObject* tensor_strides(PyObject* self, void* c) {
  (void)c;
  DLTensor* t = tensor_dl(self);
  if (t->strides)
    return int64_tuple(t->strides, t->ndim);
  int64_t st[PF_TENSOR_MAX_NDIM];
  int64_t acc = 1;
  for (int32_t i = t->ndim - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= t->shape[i];
  }
  return int64_tuple(st, t->ndim);
}
static PyObject* tensor_ndim(PyObject* self, void* c) {
  (void)c;
  return PyLong_FromLong(tensor_dl(self)->ndim);
}
static PyObject* tensor_dtype(PyObject* self, void* c) {
  (void)c;
  char buf[64];
  if (pf_dtype_format(tensor_dl(self)->dtype, buf, sizeof buf) != 0)
    return raise_pf_error();
  return PyUnicode_FromString(buf);
}
static PyObject* tensor_device(PyObject* self, void* c) {
  (void)c;
  char buf[64];
  if (pf_device_format(tensor_dl(self)->device, buf, sizeof buf) != 0)
    return raise_pf_error();
  return PyUnicode_FromString(buf);
}
static PyObject* tensor_read_only(PyObject* self, void* c) {
  (void)c;
  return PyBool_FromLong(pf_tensor_is_read_only(((PfObject*)self)->obj));
}
static PyObject* tensor_data_ptr(PyObject* self, void* c) {
  (void)c;
  return PyLong_FromVoidPtr(pf_dltensor_data(tensor_dl(self)));
}
static PyObject* tensor_contiguous(PyObject* self, void* c) {
  (void)c;
  return PyBool_FromLong(pf_dltensor_is_contiguous(tensor_dl(self)));
}

static void capsule_versioned_destructor(PyObject* cap) {
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) { /* never consumed */
    pf_dl_managed_tensor_versioned_t* m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m->deleter)
      m->deleter(m);
  }
}
static void capsule_legacy_destructor(PyObject* cap) {
  if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor* m = PyCapsule_GetPointer(cap, "dltensor");
    if (m->deleter)
      m->deleter(m);
  }
}

/* __dlpack__'s stream, for a tensor on `d`: on CUDA, the consumer's stream (None: the legacy
 * default stream, 1; 2: the per-thread default stream; -1: no ordering asked for) is ordered
 * after the stream packfn queues its work on there (pf_stream_get; NULL, the default stream, is
 * the legacy one), so that what packfn's kernels and copies write is there when the consumer's
 * work reads it. Other devices: ignored, whatever the value (CPU work is done when a call
 * returns; the array API asks CPU producers to accept only None, packfn is lenient). Without
 * libpackfn_cuda packfn queued no CUDA work, and nothing needs ordering. 0, or -1 with
 * BufferError (stream 0, a negative stream, not an int) or packfn's error from CUDA. */
static int dlpack_order_stream(PyObject* stream, DLDevice d) {
  if (d.device_type != kDLCUDA)
    return 0;
  uintptr_t consumer = 1; /* None */
  if (stream != Py_None) {
    int ok = 0;
    if (PyLong_Check(stream) && !PyBool_Check(stream)) {
      int overflow;
      long long v = PyLong_AsLongLongAndOverflow(stream, &overflow);
      if (v == -1 && PyErr_Occurred())
        return -1;
      if (overflow == 0 && v == -1)
        return 0; /* the consumer asks for no ordering */
      if (overflow == 0 && v > 0) {
        consumer = (uintptr_t)v;
        ok = 1;
      } else if (overflow > 0) { /* a pointer above INT64_MAX, or none (2^64 and beyond) */
        unsigned long long u = PyLong_AsUnsignedLongLong(stream);
        if (u == (unsigned long long)-1 && PyErr_Occurred())
          PyErr_Clear();
        else {
          consumer = (uintptr_t)u;
          ok = 1;
        }
      }
    }
    if (!ok) {
      PyObject* bits = PyLong_Check(stream) && !PyBool_Check(stream)
                           ? PyObject_CallMethod((PyObject*)&PyLong_Type, "bit_length", "O", stream)
                           : NULL;
      if (bits) /* %R of an int fails past 4300 digits */
        PyErr_Format(PyExc_BufferError,
                     "packfn.Tensor.__dlpack__: stream for a CUDA tensor: expected None, -1, 1, "
                     "2 or a stream pointer, got an int of %S bits",
                     bits);
      else if (PyErr_Occurred())
        return -1;
      else
        PyErr_Format(PyExc_BufferError,
                     "packfn.Tensor.__dlpack__: stream for a CUDA tensor: expected None, -1, 1, "
                     "2 or a stream pointer, got %R",
                     stream);
      Py_XDECREF(bits);
      return -1;
    }
  }
  uintptr_t producer = (uintptr_t)own_stream_value(d);
  if (consumer == producer || !cuda_stream_wait)
    return 0;
  if (cuda_stream_wait(d.device_id, (void*)consumer, (void*)producer) != 0) {
    raise_pf_error();
    return -1;
  }
  return 0;
}

static PyObject* tensor_dlpack(PyObject* self, PyObject* args, PyObject* kw) {
  static char* kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream, &max_version,
                                   &dl_device, &copy))
    return NULL;
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError, "packfn.Tensor.__dlpack__: copy=True is not supported");
    return NULL;
  }
  if (dl_device != Py_None) {
    DLDevice d = tensor_dl(self)->device;
    int type, id;
    if (!PyTuple_Check(dl_device) || PyTuple_GET_SIZE(dl_device) != 2) {
      PyErr_Format(PyExc_TypeError,
                   "packfn.Tensor.__dlpack__: dl_device: expected a tuple (device_type, "
                   "device_id), got %s",
                   PyTuple_Check(dl_device) ? "a tuple of another length"
                                            : Py_TYPE(dl_device)->tp_name);
      return NULL;
    }
    if (!PyArg_ParseTuple(dl_device, "ii", &type, &id))
      return NULL;
    if (type != (int)d.device_type || id != (int)d.device_id) {
      PyErr_SetString(PyExc_BufferError, "packfn.Tensor.__dlpack__: cannot export to another "
                                         "device without a copy");
      return NULL;
    }
  }
  long major = 0;
  if (max_version != Py_None) {
    if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1) {
      PyErr_SetString(PyExc_TypeError, "max_version must be a tuple (major, minor)");
      return NULL;
    }
    major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
    if (major == -1 && PyErr_Occurred())
      return NULL;
  }
  if (dlpack_order_stream(stream, tensor_dl(self)->device) != 0)
    return NULL;
  pf_object_t* obj = ((PfObject*)self)->obj;
  if (major >= PF_DLPACK_VERSIONED_MAJOR) {
    pf_dl_managed_tensor_versioned_t* m;
    if (pf_tensor_to_dlpack_versioned(obj, &m) != 0)
      return raise_pf_error();
    PyObject* cap = PyCapsule_New(m, "dltensor_versioned", capsule_versioned_destructor);
    if (!cap)
      m->deleter(m);
    return cap;
  }
  DLManagedTensor* m;
  if (pf_tensor_to_dlpack(obj, &m) != 0)
    return raise_pf_error();
  PyObject* cap = PyCapsule_New(m, "dltensor", capsule_legacy_destructor);
  if (!cap)
    m->deleter(m);
  return cap;
}

static PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused) {
  (void)unused;
  DLDevice d = tensor_dl(self)->device;
  return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

static PyObject* tensor_repr(PyObject* self) {
  PyObject* shape = tensor_shape(self, NULL);
  PyObject* dtype = tensor_dtype(self, NULL);
  PyObject* dev = tensor_device(self, NULL);
  PyObject* r = NULL;
  if (shape && dtype && dev)
    r = PyUnicode_FromFormat("<packfn.Tensor shape=%R dtype=%U device=%U>", shape, dtype, dev);
  Py_XDECREF(shape);
  Py_XDECREF(dtype);
  Py_XDECREF(dev);
  return r;
}

/* packfn.Tensor(obj): a tensor over the memory of any DLPack or buffer-protocol object. */
static PyObject* tensor_new(PyTypeObject* tp, PyObject* args, PyObject* kw) {
  (void)tp;
  PyObject* src;
  static char* kwlist[] = {"obj", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O:Tensor", kwlist, &src))
    return NULL;
  if (Py_IS_TYPE(src, &Tensor_Type))
    return Py_NewRef(src);
  pf_object_t* t = NULL;
  int r = tensor_from_object(src, &t);
  if (r == 0)
    PyErr_Format(PyExc_TypeError,
                 "packfn.Tensor: expected an object with __dlpack__ or the buffer protocol, "
                 "got '%s'",
                 Py_TYPE(src)->tp_name);
  return r > 0 ? wrap_steal(t) : NULL;
}

static PyGetSetDef tensor_getset[] = {
    {"shape", tensor_shape, NULL, "extents, a tuple of ints", NULL},
    {"strides", tensor_strides, NULL, "strides in elements, a tuple of ints", NULL},
    {"ndim", tensor_ndim, NULL, "number of dimensions", NULL},
    {"dtype", tensor_dtype, NULL, "data type name, e.g. 'float32'", NULL},
    {"device", tensor_device, NULL, "device, e.g. 'cpu:0'", NULL},
    {"read_only", tensor_read_only, NULL, "True when the memory may not be written", NULL},
    {"data_ptr", tensor_data_ptr, NULL, "address of the first element", NULL},
    {"is_contiguous", tensor_contiguous, NULL, "True when compact row-major", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "DLPack capsule of the tensor (no copy)."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS, "(device_type, device_id)"},
    {NULL, NULL, 0, NULL}};

/* ======================================================================================
 * Array and Map
 * ====================================================================================== */

static Py_ssize_t array_len(PyObject* self) {
  size_t n;
  if (pf_array_count(((PfObject*)self)->obj, &n) != 0) {
    raise_pf_error();
    return -1;
  }
  return (Py_ssize_t)n;
}

static PyObject* array_item(PyObject* self, Py_ssize_t i) {
  const pf_any_t* v;
  if (pf_array_get(((PfObject*)self)->obj, i, &v) != 0)
    return raise_pf_error();
  return any_to_py(v);
}

static PyObject* array_subscript(PyObject* self, PyObject* key) {
  if (PySlice_Check(key)) {
    PyObject* lst = PySequence_List(self);
    if (!lst)
      return NULL;
    PyObject* r = PyObject_GetItem(lst, key);
    Py_DECREF(lst);
    return r;
  }
  Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
  if (i == -1 && PyErr_Occurred())
    return NULL;
  if (i < 0) {
    Py_ssize_t n = array_len(self);
    if (n < 0)
      return NULL;
    i += n;
  }
  return array_item(self, i);
}

static PyObject* array_repr(PyObject* self) {
  PyObject* lst = PySequence_List(self);
  if (!lst)
    return NULL;
  PyObject* r = PyUnicode_FromFormat("packfn.Array(%R)", lst);
  Py_DECREF(lst);
  return r;
}

static PyObject* array_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op == Py_EQ || op == Py_NE) && (PyList_Check(b) || PyTuple_Check(b))) {
    PyObject* la = PySequence_List(a);
    PyObject* lb = la ? PySequence_List(b) : NULL;
    PyObject* r = lb ? PyObject_RichCompare(la, lb, op) : NULL;
    Py_XDECREF(la);
    Py_XDECREF(lb);
    return r;
  }
  return obj_richcompare(a, b, op);
}

static PySequenceMethods array_as_seq = {.sq_length = array_len, .sq_item = array_item};
static PyMappingMethods array_as_map = {.mp_length = array_len, .mp_subscript = array_subscript};

/* Maps (72) and dicts (76) share the Python type: their C readers differ by name only. */
static int mapbase_count(pf_object_t* m, size_t* n) {
  return m->type_index == PF_TYPE_DICT ? pf_dict_count(m, n) : pf_map_count(m, n);
}

static Py_ssize_t map_len(PyObject* self) {
  size_t n;
  if (mapbase_count(((PfObject*)self)->obj, &n) != 0) {
    raise_pf_error();
    return -1;
  }
  return (Py_ssize_t)n;
}

/* Looks key up: 1 and *out (borrowed), 0 when absent, -1 with an exception. */
static int map_lookup(PyObject* self, PyObject* key, const pf_any_t** out) {
  pf_any_t kv;
  argtmp_t t;
  int ht = 0;
  int r = py_to_view(key, &kv, &t, 1, &ht);
  if (r < 0)
    return -1;
  pf_object_t* m = ((PfObject*)self)->obj;
  int rc = m->type_index == PF_TYPE_DICT ? pf_dict_get(m, &kv, out) : pf_map_find(m, &kv, out);
  if (r)
    argtmp_release(&t);
  if (rc != 0) {
    raise_pf_error();
    return -1;
  }
  return *out != NULL;
}

static PyObject* map_subscript(PyObject* self, PyObject* key) {
  const pf_any_t* v;
  int r = map_lookup(self, key, &v);
  if (r < 0)
    return NULL;
  if (!r) {
    PyErr_SetObject(PyExc_KeyError, key);
    return NULL;
  }
  return any_to_py(v);
}

static int map_contains(PyObject* self, PyObject* key) {
  const pf_any_t* v;
  return map_lookup(self, key, &v);
}

/* which: 0 keys, 1 values, 2 items; a list. */
static PyObject* map_list(PyObject* self, int which) {
  pf_object_t* map = ((PfObject*)self)->obj;
  pf_map_iter_t it;
  const pf_any_t *key, *value;
  size_t n;
  if (mapbase_count(map, &n) != 0 || pf_map_iter_init(map, &it) != 0)
    return raise_pf_error();
  PyObject* lst = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; lst && i < n && pf_map_iter_next(&it, &key, &value) == 1; ++i) {
    PyObject* x;
    if (which == 2) {
      PyObject* k = any_to_py(key);
      PyObject* v = k ? any_to_py(value) : NULL;
      x = v ? PyTuple_Pack(2, k, v) : NULL;
      Py_XDECREF(k);
      Py_XDECREF(v);
    } else {
      x = any_to_py(which == 0 ? key : value);
    }
    if (!x) {
      Py_CLEAR(lst);
      break;
    }
    PyList_SET_ITEM(lst, (Py_ssize_t)i, x);
  }
  return lst;
}

static PyObject* map_keys(PyObject* self, PyObject* u) {
  (void)u;
  return map_list(self, 0);
}
static PyObject* map_values(PyObject* self, PyObject* u) {
  (void)u;
  return map_list(self, 1);
}
static PyObject* map_items(PyObject* self, PyObject* u) {
  (void)u;
  return map_list(self, 2);
}
static PyObject* map_iter(PyObject* self) {
  PyObject* keys = map_list(self, 0);
  if (!keys)
    return NULL;
  PyObject* it = PyObject_GetIter(keys);
  Py_DECREF(keys);
  return it;
}
static PyObject* map_get(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  if (n < 1 || n > 2) {
    PyErr_SetString(PyExc_TypeError, "get expected 1 or 2 arguments");
    return NULL;
  }
  const pf_any_t* v;
  int r = map_lookup(self, args[0], &v);
  if (r < 0)
    return NULL;
  if (!r)
    return Py_NewRef(n == 2 ? args[1] : Py_None);
  return any_to_py(v);
}
static PyObject* map_repr(PyObject* self) {
  PyObject* items = map_list(self, 2);
  if (!items)
    return NULL;
  PyObject* d = PyDict_New();
  for (Py_ssize_t i = 0; d && i < PyList_GET_SIZE(items); ++i) {
    PyObject* kv = PyList_GET_ITEM(items, i);
    if (PyDict_SetItem(d, PyTuple_GET_ITEM(kv, 0), PyTuple_GET_ITEM(kv, 1)) < 0)
      Py_CLEAR(d);
  }
  Py_DECREF(items);
  if (!d)
    return NULL;
  PyObject* r = PyUnicode_FromFormat("packfn.Map(%R)", d);
  Py_DECREF(d);
  return r;
}

static PyMappingMethods map_as_map = {.mp_length = map_len, .mp_subscript = map_subscript};
static PySequenceMethods map_as_seq = {.sq_contains = map_contains};
static PyMethodDef map_methods[] = {
    {"keys", map_keys, METH_NOARGS, "keys, in insertion order"},
    {"values", map_values, METH_NOARGS, "values, in insertion order"},
    {"items", map_items, METH_NOARGS, "(key, value) pairs, in insertion order"},
    {"get", (PyCFunction)(void (*)(void))map_get, METH_FASTCALL, "get(key, default=None)"},
    {NULL, NULL, 0, NULL}};

/* ======================================================================================
 * Module
 * ====================================================================================== */

static PyObject* module_getattro(PyObject* self, PyObject* name) {
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
    return r;
  Py_ssize_t len;
  const char* s = PyUnicode_AsUTF8AndSize(name, &len);
  if (!s)
    return NULL;
  if (s[0] == '_' && s[1] == '_')
    return NULL; /* dunder lookups keep Python's AttributeError */
  PyErr_Clear();
  pf_object_t* module = ((PfObject*)self)->obj;
  const char* where = pf_module_path(module); /* NULL for TVM-FFI's ffi.Module */
  if (!where)
    where = "the module";
  if (memchr(s, 0, (size_t)len)) /* no export is named so, whatever its prefix up to the NUL */
    return PyErr_Format(PyExc_AttributeError, "%s has no function %R", where, name);
  pf_object_t* fn;
  if (pf_module_get_function(module, s, &fn) != 0)
    return raise_pf_error();
  if (fn == NULL) { /* Python's attribute protocol: absent is AttributeError */
    char near[256];
    int found = pf_module_suggest(module, s, near, sizeof near) == 1;
    pf_error_clear(); /* a failed search only costs the suggestion */
    if (found)
      return PyErr_Format(PyExc_AttributeError, "%s has no function '%s' (did you mean '%s'?)",
                          where, s, near);
    return PyErr_Format(PyExc_AttributeError, "%s has no function '%s'", where, s);
  }
  return wrap_steal(fn);
}

static PyObject* module_list(PyObject* self, int with_info) {
  pf_export_info_t* list;
  size_t n;
  if (pf_module_list(((PfObject*)self)->obj, &list, &n) != 0)
    return raise_pf_error();
  PyObject* r = with_info ? PyDict_New() : PyList_New(0);
  for (size_t i = 0; r && i < n; ++i) {
    PyObject* name = PyUnicode_FromString(list[i].name);
    int rc = -1;
    if (name && with_info) {
      PyObject* sig =
          list[i].signature ? PyUnicode_FromString(list[i].signature) : Py_NewRef(Py_None);
      rc = sig ? PyDict_SetItem(r, name, sig) : -1;
      Py_XDECREF(sig);
    } else if (name) {
      rc = PyList_Append(r, name);
    }
    Py_XDECREF(name);
    if (rc < 0)
      Py_CLEAR(r);
  }
  pf_module_list_free(list);
  return r;
}

static PyObject* module_dir(PyObject* self, PyObject* u) {
  (void)u;
  PyObject* names = module_list(self, 0);
  if (!names)
    return NULL;
  static const char* extra[] = {"path", "exports"};
  for (size_t i = 0; i < 2; ++i) {
    PyObject* s = PyUnicode_FromString(extra[i]);
    if (!s || PyList_Append(names, s) < 0) {
      Py_XDECREF(s);
      Py_DECREF(names);
      return NULL;
    }
    Py_DECREF(s);
  }
  return names;
}

static PyObject* module_exports(PyObject* self, PyObject* u) {
  (void)u;
  return module_list(self, 1);
}

static PyObject* module_path(PyObject* self, void* c) {
  (void)c;
  const char* p = pf_module_path(((PfObject*)self)->obj);
  return p ? PyUnicode_DecodeFSDefault(p) : Py_NewRef(Py_None);
}

static PyObject* module_repr(PyObject* self) {
  const char* p = pf_module_path(((PfObject*)self)->obj);
  return PyUnicode_FromFormat("<packfn.Module '%s'>", p ? p : "?");
}

static PyMethodDef module_methods[] = {
    {"__dir__", module_dir, METH_NOARGS, NULL},
    {"exports", module_exports, METH_NOARGS, "dict: function name -> signature text (or None)"},
    {NULL, NULL, 0, NULL}};
static PyGetSetDef module_getset[] = {
    {"path", module_path, NULL, "the path the module was loaded from", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ======================================================================================
 * Module functions
 * ====================================================================================== */

static PyObject* m_get_global(PyObject* m, PyObject* name) {
  (void)m;
  Py_ssize_t n;
  const char* s = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &n) : NULL;
  if (!s) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "get_global: name must be a str");
    return NULL;
  }
  pf_object_t* fn;
  if (pf_global_get_bytes(s, (size_t)n, &fn) != 0)
    return raise_pf_error();
  if (!fn) { /* the runtime's wording and suggestion, as pf_global_call says it */
    char near[256];
    int found = pf_global_suggest(s, near, sizeof near) == 1;
    pf_error_clear(); /* a failed search only costs the suggestion */
    PyObject* msg = found ? PyUnicode_FromFormat("no global function is named '%U' (did you mean "
                                                 "'%s'?)",
                                                 name, near)
                          : PyUnicode_FromFormat("no global function is named '%U'", name);
    if (msg) {
      PyErr_SetObject(PyExc_KeyError, msg);
      Py_DECREF(msg);
    }
    return NULL;
  }
  return wrap_steal(fn);
}

static PyObject* m_list_globals(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  char** names;
  size_t n;
  if (pf_global_list(&names, &n) != 0)
    return raise_pf_error();
  PyObject* lst = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; lst && i < n; ++i) {
    PyObject* s = PyUnicode_FromString(names[i]);
    if (!s) {
      Py_CLEAR(lst);
      break;
    }
    PyList_SET_ITEM(lst, (Py_ssize_t)i, s);
  }
  pf_global_list_free(names);
  if (lst && PyList_Sort(lst) < 0)
    Py_CLEAR(lst);
  return lst;
}

static PyObject* m_register_global(PyObject* m, PyObject* args, PyObject* kw) {
  (void)m;
  static char* kwlist[] = {"name", "fn", "override", NULL};
  const char* name;
  PyObject* fn;
  int override = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|p:register_global", kwlist, &name, &fn, &override))
    return NULL;
  PyObject* f = Py_IS_TYPE(fn, &Function_Type) ? Py_NewRef(fn)
                                               : PyObject_CallOneArg((PyObject*)&Function_Type, fn);
  if (!f)
    return NULL;
  if (pf_global_set(name, ((PfObject*)f)->obj, override) != 0) {
    Py_DECREF(f);
    return raise_pf_error();
  }
  return f;
}

static PyObject* m_remove_global(PyObject* m, PyObject* name) {
  (void)m;
  Py_ssize_t n;
  const char* s = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &n) : NULL;
  if (!s) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "remove_global: name must be a str");
    return NULL;
  }
  if (memchr(s, 0, (size_t)n)) { /* no global is named so (get_global's answer too); the C
                                  * string would name its prefix up to the NUL */
    PyObject* msg = PyUnicode_FromFormat("remove_global: no global function is named '%U'", name);
    if (msg) {
      PyErr_SetObject(PyExc_KeyError, msg);
      Py_DECREF(msg);
    }
    return NULL;
  }
  if (pf_global_remove(s) != 0)
    return raise_pf_error();
  Py_RETURN_NONE;
}

static PyObject* m_load_module(PyObject* m, PyObject* path) {
  (void)m;
  PyObject* b;
  if (!PyUnicode_FSConverter(path, &b))
    return NULL;
  pf_object_t* mod;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = pf_module_load(PyBytes_AS_STRING(b), &mod);
  Py_END_ALLOW_THREADS Py_DECREF(b);
  if (rc != 0)
    return raise_pf_error();
  return wrap_steal(mod);
}

static PyObject* m_system_module(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  pf_object_t* mod;
  if (pf_module_system(&mod) != 0)
    return raise_pf_error();
  return wrap_steal(mod);
}

/* _raise(kind, message[, cause_kind, cause_message]): raises a packfn error and converts it,
 * as a failing C function would (for tests of the error mapping). */
static PyObject* m_raise(PyObject* m, PyObject* args) {
  (void)m;
  const char *kind, *msg, *ckind = NULL, *cmsg = NULL;
  if (!PyArg_ParseTuple(args, "ss|ss:_raise", &kind, &msg, &ckind, &cmsg))
    return NULL;
  if (ckind)
    PF_ERROR_SET(ckind, "%s", cmsg ? cmsg : "");
  PF_ERROR_SET(kind, "%s", msg);
  return raise_pf_error();
}

/* _raiser(): a C function f(kind, message[, cause_kind, cause_message]) that raises, for
 * tests of errors crossing runtimes (TVM-FFI's Python calling packfn). */
static int raiser_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)result;
  const char* s[4] = {NULL, NULL, NULL, NULL};
  size_t n[4] = {0, 0, 0, 0};
  if (num_args != 2 && num_args != 4) {
    PF_ERROR_SET(PF_ERR_TYPE, "_raiser: expected 2 or 4 arguments, got %d", (int)num_args);
    return -1;
  }
  for (int32_t i = 0; i < num_args; ++i)
    if (pf_any_as_str(&args[i], &s[i], &n[i]) != 0)
      return -1;
  if (num_args == 4)
    PF_ERROR_SET(s[2], "%.*s", (int)n[3], s[3]);
  PF_ERROR_SET(s[0], "%.*s", (int)n[1], s[1]);
  return -1;
}

/* _custom_object(type_key): an object of the registered type `type_key` (registered on first
 * use, deriving from Object; no fields), for tests of custom types crossing runtimes. */
static void custom_object_deleter(void* self, int flags) {
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

static PyObject* m_custom_object(PyObject* m, PyObject* key) {
  (void)m;
  const char* k = PyUnicode_AsUTF8(key);
  if (!k)
    return NULL;
  int32_t index;
  pf_object_t* obj;
  if (pf_type_register(k, PF_TYPE_OBJECT, &index) != 0 ||
      pf_object_alloc(sizeof(pf_object_t), index, custom_object_deleter, &obj) != 0)
    return raise_pf_error();
  return wrap_steal(obj);
}

static PyObject* m_raiser(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  pf_object_t* fn;
  if (pf_function_create(NULL, raiser_call, NULL, &fn) != 0)
    return raise_pf_error();
  return wrap_steal(fn);
}

static int noop_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  return 0;
}

/* A static 0-d float32 tensor, which no argument of a call owns: what _echo() returns. */
static float echo_scalar = 1.5f;
static DLTensor echo_tensor = {
    .data = &echo_scalar, .device = {kDLCPU, 0}, .ndim = 0, .dtype = {kDLFloat, 32, 1}};

static int echo_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  if (num_args == 0) {
    result->type_index = PF_TYPE_DLTENSOR_PTR;
    result->v_ptr = &echo_tensor;
    return 0;
  }
  *result = args[num_args - 1]; /* owned: an object is retained, a view stays a view */
  if (result->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    pf_object_retain(result->v_obj);
  return 0;
}

/* A packfn function calling `call` directly, with its signature and doc, as a Python object. */
static PyObject* direct_function(pf_safe_call_t call, const char* signature, const char* doc) {
  pf_object_t* fn;
  if (pf_function_create_direct(call, &fn) != 0)
    return raise_pf_error();
  if (pf_function_set_info(fn, signature, doc) != 0) {
    pf_object_release(fn);
    return raise_pf_error();
  }
  return wrap_steal(fn);
}

/* _echo(): a C function made by packfn returning its last argument as it came (a view stays a
 * view, as TVM-FFI's testing.echo does), or with no argument a DLTensor* of its own; for tests
 * of borrowed results. */
static PyObject* m_echo(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  return direct_function(echo_call, "echo(*args) -> any", NULL);
}

/* _noop(): a C function that does nothing, for call-overhead measurements. */
static PyObject* m_noop(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  return direct_function(noop_call, "noop(*args) -> None", "Does nothing (call overhead).");
}

static PyObject* m_tvm_ffi_join(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  return PyBool_FromLong(pf_tvm_ffi_join());
}

static PyMethodDef module_functions[] = {
    {"_tvm_ffi_join", m_tvm_ffi_join, METH_NOARGS,
     "_tvm_ffi_join() -> bool: joins the TVM-FFI runtime when it is loaded (pf_tvm_ffi_join)"},
    {"_noop", m_noop, METH_NOARGS, "_noop() -> Function: a C function that does nothing"},
    {"_echo", m_echo, METH_NOARGS,
     "_echo() -> Function: a C function returning its last argument as it came"},
    {"_get_global", m_get_global, METH_O, "the global function `name` (KeyError when absent)"},
    {"list_globals", m_list_globals, METH_NOARGS, "list_globals() -> sorted list of global names"},
    {"register_global", (PyCFunction)(void (*)(void))m_register_global,
     METH_VARARGS | METH_KEYWORDS,
     "register_global(name, fn, override=False) -> Function\n\nRegisters a packfn.Function or a "
     "Python callable under `name` in the global table."},
    {"remove_global", m_remove_global, METH_O, "remove_global(name): removes a global function"},
    {"load_module", m_load_module, METH_O,
     "load_module(path) -> Module\n\nLoads a packfn kernel library; its exports are attributes."},
    {"system_module", m_system_module, METH_NOARGS,
     "system_module() -> Module: the running program's exports and the global table"},
    {"_raise", m_raise, METH_VARARGS, NULL},
    {"_raiser", m_raiser, METH_NOARGS, NULL},
    {"_custom_object", m_custom_object, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

/* ======================================================================================
 * Type objects and module init
 * ====================================================================================== */

/* The fields every packfn type shares; `cmp` is its rich comparison. */
#define PF_TYPE_HEAD(tname, doc, cmp)                                                              \
  PyVarObject_HEAD_INIT(NULL, 0).tp_name = "packfn." tname, .tp_basicsize = sizeof(PfObject),      \
                              .tp_dealloc = obj_dealloc, .tp_doc = doc,                            \
                              .tp_weaklistoffset = offsetof(PfObject, weakrefs),                   \
                              .tp_hash = obj_hash, .tp_richcompare = cmp

static PyTypeObject Object_Type = {
    PF_TYPE_HEAD("Object", "A packfn object (reference-counted C object).", obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_repr = obj_repr,
    .tp_getset = obj_getset,
    .tp_methods = obj_methods,
    .tp_new = obj_new_forbidden,
};

static PyTypeObject Function_Type = {
    PF_TYPE_HEAD("Function", NULL, obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_base = &Object_Type,
    .tp_vectorcall_offset = offsetof(PfObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = fn_repr,
    .tp_getset = fn_getset,
    .tp_new = fn_new,
};

static PyTypeObject Tensor_Type = {
    PF_TYPE_HEAD("Tensor",
                 "Tensor(obj): a packfn tensor over the memory of a DLPack or "
                 "buffer-protocol object, without a copy.",
                 obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_base = &Object_Type,
    .tp_repr = tensor_repr,
    .tp_getset = tensor_getset,
    .tp_methods = tensor_methods,
    .tp_new = tensor_new,
};

static PyTypeObject Array_Type = {
    PF_TYPE_HEAD("Array", "An immutable packfn sequence.", array_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE,
    .tp_base = &Object_Type,
    .tp_repr = array_repr,
    .tp_as_sequence = &array_as_seq,
    .tp_as_mapping = &array_as_map,
    .tp_new = obj_new_forbidden,
};

static PyTypeObject Map_Type = {
    PF_TYPE_HEAD("Map", "An immutable packfn mapping (insertion ordered).", obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_MAPPING,
    .tp_base = &Object_Type,
    .tp_repr = map_repr,
    .tp_as_mapping = &map_as_map,
    .tp_as_sequence = &map_as_seq,
    .tp_iter = map_iter,
    .tp_methods = map_methods,
    .tp_new = obj_new_forbidden,
};

static PyTypeObject Module_Type = {
    PF_TYPE_HEAD("Module", "A loaded packfn kernel library; its functions are attributes.",
                 obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_base = &Object_Type,
    .tp_repr = module_repr,
    .tp_getattro = module_getattro,
    .tp_methods = module_methods,
    .tp_getset = module_getset,
    .tp_new = obj_new_forbidden,
};

static struct PyModuleDef packfn_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "packfn._packfn",
    .m_doc = "C extension of packfn (see the packfn package).",
    .m_size = -1,
    .m_methods = module_functions,
};

/* libpackfn_kernels_cuda, which a package built with CUDA installs next to this extension, is
 * loaded for the life of the process so that packfn.kernels.* also run CUDA tensors. Returns
 * None when it loaded or is absent (a package built without CUDA), else a new string: the
 * loader's reason (such as no CUDA runtime library on this machine), or NULL with an exception
 * set. */
static PyObject* load_kernels_cuda(void) {
  static const char lib[] = "libpackfn_kernels_cuda.so";
  Dl_info info;
  if (!dladdr(lib, &info) || !info.dli_fname) /* the object file holding this extension */
    Py_RETURN_NONE;
  const char* slash = strrchr(info.dli_fname, '/');
  size_t dir = slash ? (size_t)(slash - info.dli_fname) + 1 : 0;
  char* path = PyMem_Malloc(dir + sizeof lib);
  if (!path)
    return PyErr_NoMemory();
  memcpy(path, info.dli_fname, dir);
  memcpy(path + dir, lib, sizeof lib);
  PyObject* why = NULL;
  void* handle = NULL;
  if (access(path, F_OK) != 0 || (handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != NULL) {
    why = Py_NewRef(Py_None); /* absent, or loaded (and never closed) */
    if (handle) {             /* dlsym searches the library's dependencies too */
      void* sym = dlsym(handle, "pf_cuda_stream_wait");
      memcpy(&cuda_stream_wait, &sym, sizeof sym); /* ISO C has no object-to-function cast */
    }
  } else {
    const char* text = dlerror();
    why = PyUnicode_FromFormat("%s: %s", path, text ? text : "dlopen failed");
  }
  PyMem_Free(path);
  return why;
}

/* dl_iterate_phdr's callback for find_packfn_code: the loaded segment holding the address
 * *data goes into packfn_code_begin and packfn_code_end (1 stops the walk). */
static int note_code_segment(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  uintptr_t mark = *(const uintptr_t*)data;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t begin = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
    if (ph->p_type == PT_LOAD && mark - begin < (uintptr_t)ph->p_memsz) {
      packfn_code_begin = begin;
      packfn_code_end = begin + (uintptr_t)ph->p_memsz;
      return 1;
    }
  }
  return 0;
}

/* Finds libpackfn's code from a function object it made (its deleter is libpackfn's), for
 * fn_may_keep_args. */
static void find_packfn_code(const pf_object_t* fn) {
  uintptr_t mark = (uintptr_t)fn->deleter;
  dl_iterate_phdr(note_code_segment, &mark);
}

PyMODINIT_FUNC PyInit__packfn(void) {
  /* the kernels library is a dependency of this extension: referencing it keeps the link, and
   * loading it registers packfn.kernels.* */
  if (pf_kernels_count() <= 0) {
    PyErr_SetString(PyExc_ImportError, "packfn: libpackfn_kernels registered no kernels");
    return NULL;
  }
  PyTypeObject* types[] = {&Object_Type, &Function_Type, &Tensor_Type,
                           &Array_Type,  &Map_Type,      &Module_Type};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i)
    if (PyType_Ready(types[i]) < 0)
      return NULL;
  /* the private function __tvm_ffi_object__ hands objects to TVM-FFI through */
  pf_object_t* handoff_fn;
  if (pf_function_create(NULL, tvm_handoff_call, NULL, &handoff_fn) != 0)
    return raise_pf_error();
  find_packfn_code(handoff_fn);
  int rc = pf_global_set(TVM_HANDOFF_GLOBAL, handoff_fn, 1);
  pf_object_release(handoff_fn);
  if (rc != 0)
    return raise_pf_error();
  PyObject* m = PyModule_Create(&packfn_module);
  if (!m)
    return NULL;
  Error_Type = PyErr_NewExceptionWithDoc(
      "packfn.Error", "Base of packfn errors whose kind has no Python built-in exception.",
      PyExc_RuntimeError, NULL);
  kind_classes = PyDict_New();
  callback_fns = PySet_New(NULL);
  if (!Error_Type || !kind_classes || !callback_fns ||
      PyModule_AddObjectRef(m, "Error", Error_Type) < 0 ||
      PyModule_AddObjectRef(m, "_kind_classes", kind_classes) < 0)
    goto fail;
  PyObject* cuda_error = load_kernels_cuda(); /* before kernels_have_cuda is read */
  rc = cuda_error ? PyModule_AddObjectRef(m, "kernels_cuda_error", cuda_error) : -1;
  Py_XDECREF(cuda_error);
  if (rc < 0)
    goto fail;
  static const char* names[] = {"Object", "Function", "Tensor", "Array", "Map", "Module"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i)
    if (PyModule_AddObjectRef(m, names[i], (PyObject*)types[i]) < 0)
      goto fail;
  if (PyModule_AddStringConstant(m, "__version__", PF_VERSION_STRING) < 0 ||
      PyModule_AddStringConstant(m, "abi_version", "0.1") < 0 ||
      PyModule_AddIntConstant(m, "kernels_have_cuda", pf_kernels_have_cuda()) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
