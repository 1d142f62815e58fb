/* packfn.Function: calls from Python through tp_vectorcall (arguments converted to views on
 * the C stack, the call run without the GIL when a tensor is passed, the result converted, a
 * borrowed result kept alive by the argument it describes), and Python callables as packfn
 * functions (callbacks, which run under the GIL and raise Python exceptions into packfn). */

#include "_packfn.h"

#define PFPY_STACK_ARGS 8 /* arguments converted without a heap allocation */

/* A rare path kept out of line, so that the call path around it keeps its registers; a helper
 * of the call path kept in it. */
#if defined(__GNUC__)
#define PFPY_COLD   __attribute__((cold, noinline))
#define PFPY_INLINE __attribute__((always_inline)) inline
#else
#define PFPY_COLD
#define PFPY_INLINE inline
#endif

/* set: addresses of the live Python-callback functions */
PyObject* pfpy_callback_fns;

/* ======================================================================================
 * Callbacks: Python callables as packfn functions
 * ====================================================================================== */

/* What a callback function object holds: the callable and its own address (for
 * pfpy_callback_fns). */
typedef struct {
  PyObject* callable;
  pf_object_t* fn;
} callback_t;

/* Names what failed to convert in the pending exception. One that packfn's conversion raised
 * itself (a TypeError, OverflowError or ValueError without a traceback or a cause: no Python
 * code ran) is remade with describe(ctx, 0) and ": " before its message. Any other (raised by
 * Python code the conversion ran: __dlpack__, __dlpack_device__, a deleter) is kept as it is,
 * its traceback, cause and attributes included, with the note "packfn: while converting
 * <describe(ctx, 1)>" (found by review: remaking those lost them). describe runs with no
 * exception pending and returns a new str, or NULL (then nothing is added: best effort). */
PFPY_COLD static void name_failed_conversion(PyObject* (*describe)(void* ctx, int for_note),
                                             void* ctx) {
  PyObject *et, *ev, *etb;
  PyErr_Fetch(&et, &ev, &etb);
  PyErr_NormalizeException(&et, &ev, &etb);
  if (!ev) {
    PyErr_Restore(et, ev, etb);
    return;
  }
  PyObject* cause = PyException_GetCause(ev);
  Py_XDECREF(cause);
  int remake = !etb && !cause &&
               (et == PyExc_TypeError || et == PyExc_OverflowError || et == PyExc_ValueError);
  PyObject* what = describe(ctx, !remake);
  if (what && remake) {
    PyObject* msg = PyObject_Str(ev);
    if (msg) {
      PyErr_Format(et, "%U: %U", what, msg);
      Py_DECREF(msg);
      Py_DECREF(what);
      Py_DECREF(et);
      Py_DECREF(ev);
      return;
    }
  } else if (what) {
    PyObject* note = PyUnicode_FromFormat("packfn: while converting %U", what);
    PyObject* r = note ? PyObject_CallMethod(ev, "add_note", "O", note) : NULL;
    Py_XDECREF(note);
    Py_XDECREF(r);
  }
  Py_XDECREF(what);
  PyErr_Clear(); /* the naming is best effort: the original stands */
  PyErr_Restore(et, ev, etb);
}

/* name_failed_conversion's text for a callback's result: "result of <qualname>" (the type's
 * name for a callable without one: a functools.partial, a callable instance). */
static PyObject* describe_result(void* callable, int for_note) {
  (void)for_note;
  PyObject* name = PyObject_GetAttrString((PyObject*)callable, "__qualname__");
  if (!name || !PyUnicode_Check(name)) {
    Py_XDECREF(name);
    PyErr_Clear();
    name = PyUnicode_FromString(Py_TYPE((PyObject*)callable)->tp_name);
  }
  PyObject* what = name ? PyUnicode_FromFormat("result of %U", name) : NULL;
  Py_XDECREF(name);
  return what;
}

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
    if (!(pa[done] = pfpy_any_to_py(&args[done])))
      goto out;
  PyObject* r = PyObject_Vectorcall(((callback_t*)self)->callable, pa, (size_t)num_args, NULL);
  if (r) {
    rc = pfpy_py_to_owned(r, result);
    if (rc != 0)
      name_failed_conversion(describe_result, ((callback_t*)self)->callable);
    Py_DECREF(r);
  }
out:
  for (int32_t i = 0; i < done; ++i)
    Py_DECREF(pa[i]);
  if (pa != small)
    PyMem_Free(pa);
  if (rc != 0)
    pfpy_pyerr_to_pf();
  PyGILState_Release(g);
  return rc;
}

/* Drops the callable, under the GIL. The last release may come with an exception pending (a
 * failed pfpy_make_callback or pfpy_wrap_steal releasing the function): it is kept aside
 * meanwhile, since this clears its own failure and the callable's deallocation runs Python
 * code (found by review: a pending MemoryError was wiped, and the call returned NULL without
 * an exception). */
static void callback_delete(void* self) {
  callback_t* cb = (callback_t*)self;
  if (Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    PyObject* key = PyLong_FromVoidPtr(cb->fn);
    if (!key || PySet_Discard(pfpy_callback_fns, key) < 0)
      PyErr_Clear();
    Py_XDECREF(key);
    Py_DECREF(cb->callable);
    PyErr_Restore(et, ev, etb);
    PyGILState_Release(g);
  }
  free(cb);
}

int pfpy_make_callback(PyObject* callable, pf_object_t** out) {
  callback_t* cb = malloc(sizeof *cb);
  if (!cb) {
    PyErr_NoMemory();
    return -1;
  }
  cb->callable = callable;
  if (pf_function_create(cb, callback_call, callback_delete, out) != 0) {
    free(cb);
    pfpy_raise_pf_error();
    return -1;
  }
  Py_INCREF(callable); /* the function object's reference, dropped by callback_delete */
  cb->fn = *out;
  PyObject* key = PyLong_FromVoidPtr(*out);
  if (!key || PySet_Add(pfpy_callback_fns, key) < 0) {
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
  /* the signature text whole, however long the name (it was cut to 256 bytes, in the middle of
   * a character, which made .signature and __doc__ raise UnicodeDecodeError, or before its "(",
   * which made __name__ "function": review) */
  PyObject* sig =
      name && PyUnicode_Check(name) ? PyUnicode_FromFormat("%U(*args) -> any", name) : NULL;
  PyErr_Clear();
  PyObject *sig_hold = NULL, *doc_hold = NULL;
  Py_ssize_t size;
  const char* ss = sig ? pfpy_str_utf8(sig, &size, &sig_hold) : NULL;
  PyErr_Clear();
  const char* ds = doc && PyUnicode_Check(doc) ? pfpy_str_utf8(doc, &size, &doc_hold) : NULL;
  PyErr_Clear();
  if ((ss || ds) && pf_function_set_info(*out, ss, ds) != 0)
    pf_error_clear(); /* the texts are informative only */
  Py_XDECREF(sig_hold);
  Py_XDECREF(doc_hold);
  Py_XDECREF(sig);
  Py_XDECREF(name);
  Py_XDECREF(doc);
  return 0;
}

/* ======================================================================================
 * Function
 * ====================================================================================== */

/* As pfpy_any_to_py, consuming the owned value `v` (beside its one caller, the call path, so
 * that it stays inlined there). */
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
    if (PF_LIKELY(v->v_obj != NULL))
      return pfpy_wrap_steal(v->v_obj);
    break; /* NULL (a broken C function's): pfpy_any_to_py's ValueError, as for other objects
            * (pfpy_wrap_steal made it None: review) */
  default:
    break;
  }
  PyObject* r = pfpy_any_to_py(v);
  pf_any_release(v);
  return r;
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
      pfpy_argtmp_release(&tmp[j]);
  if (py_error)
    PyErr_Restore(et, ev, etb);
}

/* A DLTensor* result (not NULL) that one of the call's arguments describes: a tensor object
 * keeping that argument alive (a stack description's buffer moves into one, and
 * pfpy_argtmp_release then leaves it; a tensor object argument is retained, of any type
 * deriving from Tensor). `dl` not being NULL, only tensors match: pf_tensor_dltensor is NULL
 * for other objects (a NULL result returned the first list or function argument; review).
 * NULL with TypeError when none does. */
static PyObject* tensor_of_argument(PyObject* self, const DLTensor* dl, const pf_any_t* av,
                                    argtmp_t* tmp, const unsigned char* used, Py_ssize_t n) {
  for (Py_ssize_t j = 0; j < n; ++j) {
    pf_object_t* t;
    if (av[j].type_index == PF_TYPE_DLTENSOR_PTR && av[j].v_ptr == dl && used[j] &&
        tmp[j].has_buffer) {
      tmp[j].has_buffer = 0; /* pfpy_tensor_from_buffer keeps or releases it */
      return pfpy_tensor_from_buffer(&tmp[j].buf, &t) < 0 ? NULL : pfpy_wrap_steal(t);
    }
    if (av[j].type_index >= PF_TYPE_STATIC_OBJECT_BEGIN && pf_tensor_dltensor(av[j].v_obj) == dl) {
      pf_object_retain(av[j].v_obj);
      return pfpy_wrap_steal(av[j].v_obj);
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
  PyObject* r = result->type_index == PF_TYPE_DLTENSOR_PTR && result->v_ptr
                    ? tensor_of_argument(self, result->v_ptr, av, tmp, used, n)
                    : pfpy_any_to_py(result); /* a view: nothing to release (NULL refused) */
  if (any_used)
    release_temporaries(tmp, used, n, r == NULL);
  if (heap) {
    PyMem_Free(av);
    PyMem_Free(tmp);
    PyMem_Free(used);
  }
  return r;
}

/* name_failed_conversion's text for argument i of the function self: "argument i", in a note
 * "argument i of <name>". */
typedef struct {
  PyObject* self;
  Py_ssize_t i;
} failed_argument_t;

static PyObject* describe_argument(void* ctx, int for_note) {
  const failed_argument_t* a = ctx;
  if (!for_note)
    return PyUnicode_FromFormat("argument %zd", a->i);
  PyObject* name = fn_get_name(a->self, NULL);
  PyObject* what = name ? PyUnicode_FromFormat("argument %zd of %U", a->i, name) : NULL;
  Py_XDECREF(name);
  return what;
}

/* A call of a function of another runtime (PfObject.foreign) with converted arguments `av`:
 * -1 with BufferError naming the first that is a read-only tensor or a container holding one
 * (pfpy_holds_read_only), else 0. TVM-FFI's tensors carry no read-only flag, so the callee
 * would see it writable and could write into it (into a read-only mapping: SIGSEGV; found by
 * review); TVM-FFI's own Python call refuses such an array alike. Out of line: packfn's own
 * functions never come here. */
PFPY_COLD static int refuse_read_only(const pf_any_t* av, Py_ssize_t n) {
  for (Py_ssize_t j = 0; j < n; ++j) {
    int r = pfpy_holds_read_only(&av[j], PFPY_READ_ONLY_DEPTH);
    if (r < 0)
      return -1;
    if (r) {
      PyErr_Format(PyExc_BufferError,
                   "argument %zd: packfn: a read-only tensor%s is not passed to a function of "
                   "another runtime (TVM-FFI's tensors carry no read-only flag, so the callee "
                   "could write into it); pass a writable copy",
                   j, av[j].type_index == PF_TYPE_TENSOR ? "" : " (in a container)");
      return -1;
    }
  }
  return 0;
}

static PyObject* fn_call_args(PyObject* self, PyObject* const* args, size_t nargsf,
                              PyObject* kwnames);

/* The call with the thread's packfn error slot empty: an error pending before it (C code that
 * raised and then ran the Python making this call) is set aside and put back after
 * (PFPY_ENTRY), so that the call neither takes it for its own failure nor drops it (review:
 * dropping what a successful call left, below, dropped it too, and chaining onto it replaced
 * it). */
PyObject* pfpy_fn_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames) {
  pf_object_t* aside = pfpy_error_set_aside();
  PyObject* r = fn_call_args(self, args, nargsf, kwnames);
  pfpy_error_put_back(aside);
  return r;
}

static PyObject* fn_call_args(PyObject* self, PyObject* const* args, size_t nargsf,
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
  int release_gil = 0, any_used = 0, called = 0, rc = -1;
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
    int r = pfpy_py_to_view(args[i], &av[i], &tmp[i], ((PfObject*)self)->owned_args, &release_gil);
    if (r < 0) {
      failed_argument_t failed = {self, i};
      name_failed_conversion(describe_argument, &failed);
      goto done;
    }
    used[i] = (unsigned char)r;
    any_used |= r;
  }
  if (PF_UNLIKELY(((PfObject*)self)->foreign) && refuse_read_only(av, n) != 0)
    goto done; /* i == n: every temporary is released */
  pf_object_t* fn = ((PfObject*)self)->obj;
  if (release_gil) { /* a kernel may run long, a callback may come from another thread */
    Py_BEGIN_ALLOW_THREADS rc = pf_function_call(fn, av, (int32_t)n, &result);
    Py_END_ALLOW_THREADS
  } else {
    rc = pf_function_call(fn, av, (int32_t)n, &result);
  }
  /* an error the function left raised though it succeeded is nobody's: left, a later call
   * failing without raising would report it as its own (review) */
  if (rc == 0 && PF_UNLIKELY(pf_error_peek() != NULL))
    pf_error_clear();
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
    return pfpy_raise_pf_error();
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
  /* joined to TVM-FFI, a tvm_ffi.Function is the same C function, as when it is passed to a
   * packfn function (it became a callback calling it through Python: calls from C took the
   * GIL; review); apart (PACKFN_NO_TVM_FFI), its errors would be raised in TVM-FFI's slot,
   * which packfn does not read: it stays a callback, whose Python call takes them */
  pf_object_t* same;
  int h = pf_tvm_ffi_joined() ? pfpy_tvm_ffi_object(callable, &same) : 0;
  if (h < 0)
    return NULL;
  if (h && same->type_index == PF_TYPE_FUNCTION) {
    pf_object_retain(same);
    return pfpy_wrap_steal(same);
  }
  if (!PyCallable_Check(callable)) {
    PyErr_Format(PyExc_TypeError, "packfn.Function: expected a callable, got '%s'",
                 Py_TYPE(callable)->tp_name);
    return NULL;
  }
  pf_object_t* fn;
  if (pfpy_make_callback(callable, &fn) < 0)
    return NULL;
  return pfpy_wrap_steal(fn);
}
PFPY_ENTRY(PyObject*, fn_new, (PyTypeObject * tp, PyObject* args, PyObject* kw), (tp, args, kw))

/* The texts a function carries are decoded as other text from C (pfpy_str_from). */
static PyObject* fn_get_signature_text(PyObject* self, void* c) {
  (void)c;
  const char* s = pf_function_signature(((PfObject*)self)->obj);
  if (!s)
    Py_RETURN_NONE;
  return pfpy_str_from(s, strlen(s));
}

static PyObject* fn_get_doc(PyObject* self, void* c) {
  (void)c;
  const char* sig = pf_function_signature(((PfObject*)self)->obj);
  const char* doc = pf_function_doc(((PfObject*)self)->obj);
  if (!sig && !doc)
    Py_RETURN_NONE;
  if (!sig || !doc)
    return pfpy_str_from(sig ? sig : doc, strlen(sig ? sig : doc));
  PyObject* s = pfpy_str_from(sig, strlen(sig));
  PyObject* d = s ? pfpy_str_from(doc, strlen(doc)) : NULL;
  PyObject* r = d ? PyUnicode_FromFormat("%U\n\n%U", s, d) : NULL;
  Py_XDECREF(s);
  Py_XDECREF(d);
  return r;
}

static PyObject* fn_get_name(PyObject* self, void* c) {
  (void)c;
  const char* s = pf_function_signature(((PfObject*)self)->obj);
  const char* p = s ? strchr(s, '(') : NULL;
  if (!p)
    return PyUnicode_FromString("function");
  return pfpy_str_from(s, (size_t)(p - s));
}

/* __signature__: inspect.Signature built by packfn._signature_from_text (Python side). */
static PyObject* fn_get_py_signature(PyObject* self, void* c) {
  (void)c;
  PyObject* text = fn_get_signature_text(self, NULL);
  if (!text || text == Py_None)
    return text;
  PyObject* mod = PyImport_ImportModule("packfn._signature");
  PyObject* r = mod ? PyObject_CallMethod(mod, "signature_from_text", "O", text) : NULL;
  Py_XDECREF(mod);
  Py_DECREF(text);
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

static PyObject* fn_get_foreign(PyObject* self, void* c) {
  (void)c;
  return PyBool_FromLong(((PfObject*)self)->foreign);
}

static PyGetSetDef fn_getset[] = {
    {"signature", fn_get_signature_text, NULL, "signature text, or None", NULL},
    {"_owned_args", fn_get_owned_args, NULL,
     "True when calls pass tensors owning their buffers (the callee may keep them), False "
     "when they pass DLTensor views borrowed for the call",
     NULL},
    {"_foreign", fn_get_foreign, NULL,
     "True for a function of another runtime (TVM-FFI's): calls refuse read-only tensor "
     "arguments, which it would see writable",
     NULL},
    {"__doc__", fn_get_doc, NULL, NULL, NULL},
    {"__name__", fn_get_name, NULL, NULL, NULL},
    {"__qualname__", fn_get_name, NULL, NULL, NULL},
    {"__signature__", fn_get_py_signature, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject Function_Type = {
    PF_TYPE_HEAD("Function", NULL, pfpy_obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_base = &Object_Type,
    .tp_vectorcall_offset = offsetof(PfObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = fn_repr,
    .tp_getset = fn_getset,
    .tp_new = fn_new_entry,
};
