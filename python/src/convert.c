/* Values between Python and packfn: a packfn value becomes a Python object (numbers and strings
 * copied, objects wrapped); a Python value becomes a view for a call (ints, floats, bools, None,
 * short strings inline; longer strings and bytes borrowed; buffer-protocol arrays as a stack
 * DLTensor; lists, tuples and dicts as Arrays and Maps; TVM-FFI's objects as the same C
 * object; callables as callbacks) or an owned value. */

#include "_packfn.h"

/* ======================================================================================
 * Values: packfn -> Python
 * ====================================================================================== */

/* A str of C text; bytes that are no UTF-8 become U+DC80..U+DCFF (surrogateescape), which
 * pfpy_str_utf8 and calls turn back into the same bytes. */
PyObject* pfpy_str_from(const char* data, size_t size) {
  return PyUnicode_DecodeUTF8(data, (Py_ssize_t)size, "surrogateescape");
}

/* A Python object for a value; `v` is not consumed (objects are retained). */
PyObject* pfpy_any_to_py(const pf_any_t* v) {
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
      return pfpy_raise_pf_error();
    return PyUnicode_FromString(buf);
  case PF_TYPE_DEVICE:
    if (pf_device_format(v->v_device, buf, sizeof buf) != 0)
      return pfpy_raise_pf_error();
    return PyUnicode_FromString(buf);
  case PF_TYPE_RAW_STR:
    if (!v->v_c_str)
      break; /* refused below: a view of nothing */
    return pfpy_str_from(v->v_c_str, strlen(v->v_c_str));
  case PF_TYPE_SMALL_STR:
  case PF_TYPE_SMALL_BYTES:
    if (v->small_str_len > PF_SMALL_STR_MAX) { /* a broken producer's: not read past its 8 */
      PyErr_Format(PyExc_ValueError, "packfn: a small %s of length %u, more than %d",
                   v->type_index == PF_TYPE_SMALL_STR ? "string" : "bytes",
                   (unsigned)v->small_str_len, PF_SMALL_STR_MAX);
      return NULL;
    }
    return v->type_index == PF_TYPE_SMALL_STR
               ? pfpy_str_from(v->v_bytes, v->small_str_len)
               : PyBytes_FromStringAndSize(v->v_bytes, v->small_str_len);
  case PF_TYPE_BYTE_ARRAY_PTR: {
    const pf_byte_array_t* b = (const pf_byte_array_t*)v->v_ptr;
    if (!b || (!b->data && b->size != 0))
      break; /* refused below (Python would have made bytes of uninitialised memory) */
    return PyBytes_FromStringAndSize(b->data, (Py_ssize_t)b->size);
  }
  case PF_TYPE_DLTENSOR_PTR: {
    /* a borrowed DLTensor (a C caller's view): wrapped without owning its memory, valid for
     * the duration of the call that handed it over */
    if (!v->v_ptr)
      break; /* refused below */
    pf_object_t* t;
    if (pf_tensor_from_dltensor((const DLTensor*)v->v_ptr, NULL, NULL, &t) != 0)
      return pfpy_raise_pf_error();
    return pfpy_wrap_steal(t);
  }
  case PF_TYPE_OBJECT_RVALUE_REF: {
    pf_object_t* o = v->v_ptr ? *(pf_object_t**)v->v_ptr : NULL;
    if (!o)
      break;
    pf_object_retain(o);
    return pfpy_wrap_steal(o);
  }
  default:
    break;
  }
  if (v->type_index == PF_TYPE_DLTENSOR_PTR || v->type_index == PF_TYPE_RAW_STR ||
      v->type_index == PF_TYPE_BYTE_ARRAY_PTR || v->type_index == PF_TYPE_OBJECT_RVALUE_REF ||
      (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN && !v->v_obj)) {
    /* hand-made values holding NULL where data must be (a C caller's): refused, not read */
    PyErr_Format(PyExc_ValueError, "packfn: a %s value (type index %d) with a NULL pointer",
                 pf_type_name(v->type_index), (int)v->type_index);
    return NULL;
  }
  if (v->type_index < PF_TYPE_STATIC_OBJECT_BEGIN) {
    PyErr_Format(PyExc_TypeError, "packfn: value of unknown type index %d", (int)v->type_index);
    return NULL;
  }
  pf_object_t* o = v->v_obj;
  if (o->type_index == PF_TYPE_STR || o->type_index == PF_TYPE_BYTES) {
    const pf_string_cell_t* c = (const pf_string_cell_t*)(o + 1);
    return o->type_index == PF_TYPE_STR ? pfpy_str_from(c->data, c->size)
                                        : PyBytes_FromStringAndSize(c->data, (Py_ssize_t)c->size);
  }
  if (o->type_index == PF_TYPE_SHAPE) {
    const int64_t* dims;
    size_t n;
    if (pf_shape_data(o, &dims, &n) != 0)
      return pfpy_raise_pf_error();
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
  return pfpy_wrap_steal(o);
}

/* ======================================================================================
 * TVM-FFI's Python objects (packfn and TVM-FFI share the object ABI, docs/interop.md)
 * ====================================================================================== */

int pfpy_imported_attr(const char* module, PyObject** name, const char* attr, PyObject** out) {
  *out = NULL;
  if (!*name && !(*name = PyUnicode_InternFromString(module)))
    return -1;
  PyObject* mod = PyImport_GetModule(*name);
  if (!mod)
    return PyErr_Occurred() ? -1 : 0;
  *out = PyObject_GetAttrString(mod, attr);
  Py_DECREF(mod);
  if (*out)
    return 1;
  if (!PyErr_ExceptionMatches(PyExc_AttributeError))
    return -1;
  PyErr_Clear(); /* still importing, or another version: not there */
  return 0;
}

/* A TVM-FFI Python object passed to packfn is the same C object, borrowed for the call like a
 * packfn.Object: tvm_ffi.Object and its subclasses (Array, Map, custom types), and
 * tvm_ffi.Function and tvm_ffi.Tensor, which derive from tvm_ffi.core.CObject and not from
 * Object (apache-tvm-ffi 0.1.15; they were not recognised: review). Only instances of the real
 * type are trusted with an address: PyObject_TypeCheck reads the object's type, where
 * isinstance() takes a __class__ attribute (a test double) for it (found by review: a fake's
 * bogus address was used); and the address comes from the base type's own __chandle__, which a
 * Python subclass cannot override. 1 and the object (borrowed) in *out; 0 when `o` is no
 * TVM-FFI object, or a tensor without a handle (one TVM-FFI lends a callback: it goes through
 * DLPack); -1 with an exception (ValueError for another object without a handle). */
int pfpy_tvm_ffi_object(PyObject* o, pf_object_t** out) {
  /* tvm_ffi.core.CObject, the C base of every TVM-FFI class (tvm_ffi.core.Object in versions
   * without CObject), and its __chandle__; looked up once tvm_ffi.core is imported */
  static PyTypeObject* base;
  static PyObject* chandle;
  if (!base) {
    static PyObject* name; /* interned once: this runs for every such argument until then */
    PyObject* b;
    int r = pfpy_imported_attr("tvm_ffi.core", &name, "CObject", &b);
    if (r == 0)
      r = pfpy_imported_attr("tvm_ffi.core", &name, "Object", &b);
    if (r <= 0)
      return r;
    PyObject* m = PyType_Check(b) ? PyObject_GetAttrString(b, "__chandle__") : NULL;
    if (!m) {
      Py_XDECREF(b);
      if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
      PyErr_Clear(); /* a tvm_ffi without these: none of its objects is taken as one */
      return 0;
    }
    base = (PyTypeObject*)b;
    chandle = m;
  }
  if (!PyObject_TypeCheck(o, base))
    return 0;
  PyObject* addr = PyObject_CallOneArg(chandle, o);
  if (!addr)
    return -1;
  void* p = PyLong_AsVoidPtr(addr);
  Py_DECREF(addr);
  if (!p && PyErr_Occurred())
    return -1;
  if (!p) {
    if (PyObject_HasAttrString(o, "__dlpack__"))
      return 0;
    PyErr_Format(PyExc_ValueError, "packfn: a '%s' holds no object (None handle)",
                 Py_TYPE(o)->tp_name);
    return -1;
  }
  *out = p;
  return 1;
}

/* ======================================================================================
 * Values: Python -> packfn
 * ====================================================================================== */

/* The bytes a str stands for, after its strict UTF-8 encoding failed (the exception pending):
 * a str decoded from C text holds the bytes that were no UTF-8 as U+DC80..U+DCFF
 * (pfpy_str_from), and they go back as those bytes (a callback returning the string it was
 * given failed, and a Map key read with keys() could not be looked up: review). A new bytes
 * object, or NULL with the exception: a lone surrogate outside that range (U+D800) stands for
 * no byte and stays a UnicodeEncodeError (as does MemoryError). */
static PyObject* str_escaped(PyObject* str) {
  if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
    return NULL;
  PyErr_Clear(); /* the second encoding names the first character it cannot take */
  return PyUnicode_AsEncodedString(str, "utf-8", "surrogateescape");
}

/* The text a str stands for in C: its UTF-8, or the bytes of its escapes (str_escaped). */
const char* pfpy_str_utf8(PyObject* str, Py_ssize_t* size, PyObject** hold) {
  *hold = NULL;
  const char* s = PyUnicode_AsUTF8AndSize(str, size);
  if (s || !(*hold = str_escaped(str)))
    return s;
  *size = PyBytes_GET_SIZE(*hold);
  return PyBytes_AS_STRING(*hold);
}

/* A small string view: the text inline. */
static inline void small_str_view(const char* s, Py_ssize_t n, pf_any_t* out) {
  out->type_index = PF_TYPE_SMALL_STR;
  out->small_str_len = (uint32_t)n;
  out->v_int64 = 0;
  memcpy(out->v_bytes, s, (size_t)n);
}

/* A string object holding a copy of s[0..n), in t->owned: 1, or -1 with a Python exception. */
static int owned_str_view(const char* s, Py_ssize_t n, pf_any_t* out, argtmp_t* t) {
  if (pf_string_object_create(s, (size_t)n, &t->owned) != 0) {
    pfpy_raise_pf_error();
    return -1;
  }
  t->has_buffer = 0;
  t->heap_strides = NULL;
  *out = pf_any_object(t->owned);
  return 1;
}

/* The view of a str that strict UTF-8 refused (the exception pending): its bytes
 * (str_escaped) inline, or copied into a string object (the bytes object is gone after the
 * conversion); -1 with the exception. */
static int escaped_str_view(PyObject* o, pf_any_t* out, argtmp_t* t) {
  PyObject* b = str_escaped(o);
  if (!b)
    return -1;
  Py_ssize_t n = PyBytes_GET_SIZE(b);
  int r = 0;
  if (n <= PF_SMALL_STR_MAX)
    small_str_view(PyBytes_AS_STRING(b), n, out);
  else
    r = owned_str_view(PyBytes_AS_STRING(b), n, out, t);
  Py_DECREF(b);
  return r;
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

/* Whether an object passed to a call may be or hold a function (a container, a module, a custom
 * type with fields) or is a tensor: all objects but the leaves that hold no other object. */
static int may_call_back(const pf_object_t* obj) {
  int32_t i = obj->type_index;
  return i != PF_TYPE_STR && i != PF_TYPE_BYTES && i != PF_TYPE_SHAPE && i != PF_TYPE_BIG_INT;
}

/* Converts a Python value into a view for a call. Returns 0 (nothing to release), 1 (release
 * `t` after the call) or -1 with a Python exception. `owned`: tensors become tensor objects
 * (for values that outlive the call: container items, callback results). *release_gil is set
 * when the call should run without the GIL: a tensor is passed (a kernel may run long), or a
 * function (a Python callable, a packfn.Function) or something that may hold one (a list or
 * dict holding one, an Array, a Map, any object but a string, bytes or a shape), which the
 * callee may call back from another thread: that thread takes the GIL, and the caller holding
 * it would wait for it forever (found by review: a C function calling its callback on a thread
 * it joins hung, also with the callback in a list). */
int pfpy_py_to_view(PyObject* o, pf_any_t* out, argtmp_t* t, int owned, int* release_gil) {
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
  if (PyUnicode_Check(o)) { /* str and its subclasses (StrEnum, numpy.str_): one test of a flag */
    Py_ssize_t n;
    const char* s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s)
      return escaped_str_view(o, out, t);
    if (n <= PF_SMALL_STR_MAX) {
      small_str_view(s, n, out);
      return 0;
    }
    if (!memchr(s, 0, (size_t)n)) { /* borrowed: the caller's reference keeps it alive */
      out->type_index = PF_TYPE_RAW_STR;
      out->v_c_str = s;
      return 0;
    }
    return owned_str_view(s, n, out, t);
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
  if (PyBytes_Check(o)) { /* bytes and its subclasses (numpy.bytes_), not their buffers */
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
    if (may_call_back(obj))
      *release_gil = 1;
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
  if (!owned && tp->tp_as_buffer && tp->tp_as_buffer->bf_getbuffer && !pfpy_refuses_buffer(tp) &&
      PyObject_GetBuffer(o, &t->buf, PyBUF_RECORDS_RO) == 0) {
    *release_gil = 1;
    if (t->buf.readonly) { /* a tensor object carries the read-only flag */
      if (pfpy_tensor_from_buffer(&t->buf, &t->owned) < 0)
        return -1;
      *out = pf_any_object(t->owned);
      return 1;
    }
    t->has_buffer = 1;
    int64_t* strides = t->strides;
    if (t->buf.ndim > PFPY_STACK_DIMS &&
        !(strides = t->heap_strides = PyMem_Malloc(sizeof(int64_t) * (size_t)t->buf.ndim))) {
      PyErr_NoMemory();
      pfpy_argtmp_release(t);
      return -1;
    }
    if (pfpy_dl_from_buffer(&t->buf, &t->dl, strides) < 0) {
      pfpy_argtmp_release(t);
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
    int r = pfpy_array_from_seq(o, &t->owned, release_gil);
    Py_LeaveRecursiveCall();
    if (r < 0)
      return -1;
    *out = pf_any_object(t->owned);
    return 1;
  }
  if (PyDict_Check(o)) {
    if (Py_EnterRecursiveCall(" while converting a dict to a packfn Map"))
      return -1;
    int r = pfpy_map_from_dict(o, &t->owned, release_gil);
    Py_LeaveRecursiveCall();
    if (r < 0)
      return -1;
    *out = pf_any_object(t->owned);
    return 1;
  }
  pf_object_t* obj;
  int h = pfpy_tvm_ffi_object(o, &obj);
  if (h < 0)
    return -1;
  if (h) {
    *out = pf_any_object(obj);
    if (may_call_back(obj))
      *release_gil = 1;
    return 0;
  }
  int r = pfpy_tensor_from_object(o, &t->owned);
  if (r < 0)
    return -1;
  if (r) {
    *release_gil = 1;
    *out = pf_any_object(t->owned);
    return 1;
  }
  if (PyCallable_Check(o)) {
    if (pfpy_make_callback(o, &t->owned) < 0)
      return -1;
    *out = pf_any_object(t->owned);
    *release_gil = 1; /* the callee may call it from another thread: see above */
    return 1;
  }
  PyErr_Format(PyExc_TypeError, "packfn: cannot pass a value of type '%s'", tp->tp_name);
  return -1;
}

/* An owned value from a Python value. 0, or -1 with a Python exception. */
int pfpy_py_to_owned(PyObject* o, pf_any_t* out) {
  argtmp_t t;
  pf_any_t view;
  int ht = 0;
  int r = pfpy_py_to_view(o, &view, &t, 1, &ht);
  if (r < 0)
    return -1;
  int rc = pf_any_to_owned(&view, out);
  if (r)
    pfpy_argtmp_release(&t);
  if (rc != 0) {
    pfpy_raise_pf_error();
    return -1;
  }
  return 0;
}
