/* packfn._packfn: the CPython binding of packfn, on the public C API only.
 *
 * Calls go through tp_vectorcall: arguments become pf_any_t views on the C stack (ints,
 * floats, bools, None, short strings inline; longer strings and bytes borrowed from the Python
 * objects; buffer-protocol arrays such as NumPy's as a stack DLTensor), the call runs (without
 * the GIL when a tensor is passed), the result becomes a Python object. Errors become Python
 * exceptions by kind; Python exceptions raised in callbacks travel through C as error objects
 * of their own (type 67, the ABI's cell) that keep the original exception.
 *
 * This file holds the module's functions and its init; the types and conversions it registers
 * are in the files _packfn.h names: object.c, function.c, tensor.c, containers.c, module.c,
 * convert.c and errors.c. */

#include "_packfn.h"

#include <dlfcn.h>
#include <unistd.h>

/* "MAJOR.MINOR" of the ABI these headers describe (packfn.abi_version), from its macros */
#define PF__PY_STR(x)      PF__PY_STR_(x)
#define PF__PY_STR_(x)     #x
#define PF__PY_ABI_VERSION PF__PY_STR(PF_ABI_VERSION_MAJOR) "." PF__PY_STR(PF_ABI_VERSION_MINOR)

/* ======================================================================================
 * Module functions
 * ====================================================================================== */

/* The text of a global's name (`what` names the function in the TypeError for a non-str), as
 * pfpy_str_utf8 gives it: a name list_globals() gave, decoded from bytes that are no UTF-8,
 * names that global again. */
static const char* global_name(PyObject* name, const char* what, Py_ssize_t* n, PyObject** hold) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "%s: name must be a str", what);
    return NULL;
  }
  return pfpy_str_utf8(name, n, hold);
}

/* pf_global_suggest's answer whole, however long (a 256-byte buffer cut a long dotted name
 * ending in the asked one into a name no global has: review); NULL when none is near or memory
 * runs out (the suggestion is then left out). The caller frees it. */
static char* suggest_whole(const char* name) {
  for (size_t size = 256; size <= ((size_t)1 << 20); size *= 2) {
    char* buf = malloc(size);
    if (!buf || pf_global_suggest(name, buf, size) != 1) {
      free(buf);
      return NULL;
    }
    if (strlen(buf) + 1 < size)
      return buf;
    free(buf);
  }
  return NULL;
}

static PyObject* m_get_global(PyObject* m, PyObject* name) {
  (void)m;
  Py_ssize_t n;
  PyObject* hold;
  const char* s = global_name(name, "get_global", &n, &hold);
  if (!s)
    return NULL;
  pf_object_t* fn;
  int rc = pf_global_get_bytes(s, (size_t)n, &fn);
  char* near = rc == 0 && !fn ? suggest_whole(s) : NULL;
  Py_XDECREF(hold);
  if (rc != 0)
    return pfpy_raise_pf_error();
  if (!fn) {
    /* the runtime's wording and suggestion, as pf_global_call says it; a failed search only
     * costs the suggestion */
    pf_error_clear();
    PyObject* alt = near ? pfpy_str_from(near, strlen(near)) : NULL;
    free(near);
    if (near && !alt)
      return NULL;
    PyObject* msg = alt ? PyUnicode_FromFormat("no global function is named '%U' (did you mean "
                                               "'%U'?)",
                                               name, alt)
                        : PyUnicode_FromFormat("no global function is named '%U'", name);
    Py_XDECREF(alt);
    if (msg) {
      PyErr_SetObject(PyExc_KeyError, msg);
      Py_DECREF(msg);
    }
    return NULL;
  }
  return pfpy_wrap_steal(fn);
}
PFPY_ENTRY(PyObject*, m_get_global, (PyObject * m, PyObject* name), (m, name))

static PyObject* m_list_globals(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  char** names;
  size_t n;
  if (pf_global_list(&names, &n) != 0)
    return pfpy_raise_pf_error();
  PyObject* lst = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; lst && i < n; ++i) {
    PyObject* s = pfpy_str_from(names[i], strlen(names[i]));
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
PFPY_ENTRY(PyObject*, m_list_globals, (PyObject * m, PyObject* u), (m, u))

static PyObject* m_register_global(PyObject* m, PyObject* args, PyObject* kw) {
  (void)m;
  static char* kwlist[] = {"name", "fn", "override", NULL};
  PyObject *name, *fn, *hold;
  int override = 0;
  Py_ssize_t n;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "UO|p:register_global", kwlist, &name, &fn, &override))
    return NULL;
  const char* s = pfpy_str_utf8(name, &n, &hold);
  if (!s)
    return NULL;
  if (memchr(s, 0, (size_t)n)) {
    Py_XDECREF(hold);
    PyErr_SetString(PyExc_ValueError, "register_global: embedded null character in the name");
    return NULL;
  }
  PyObject* f = Py_IS_TYPE(fn, &Function_Type) ? Py_NewRef(fn)
                                               : PyObject_CallOneArg((PyObject*)&Function_Type, fn);
  int rc = f ? pf_global_set(s, ((PfObject*)f)->obj, override) : 0;
  Py_XDECREF(hold);
  if (!f)
    return NULL;
  if (rc != 0) {
    Py_DECREF(f);
    pf_object_t* e = pf_error_peek();
    if (e && strstr(pf_error_message(e), "is already registered") != NULL) {
      /* the C message names the C parameter (allow_override=1); say the Python one (review) */
      pf_error_clear();
      PyErr_Format(PyExc_ValueError,
                   "register_global: function '%U' is already registered (pass override=True "
                   "to replace it)",
                   name);
      return NULL;
    }
    return pfpy_raise_pf_error();
  }
  return f;
}
PFPY_ENTRY(PyObject*, m_register_global, (PyObject * m, PyObject* args, PyObject* kw),
           (m, args, kw))

static PyObject* m_remove_global(PyObject* m, PyObject* name) {
  (void)m;
  Py_ssize_t n;
  PyObject* hold;
  const char* s = global_name(name, "remove_global", &n, &hold);
  if (!s)
    return NULL;
  if (memchr(s, 0, (size_t)n)) { /* no global is named so (get_global's answer too); the C
                                  * string would name its prefix up to the NUL */
    Py_XDECREF(hold);
    PyObject* msg = PyUnicode_FromFormat("remove_global: no global function is named '%U'", name);
    if (msg) {
      PyErr_SetObject(PyExc_KeyError, msg);
      Py_DECREF(msg);
    }
    return NULL;
  }
  int rc = pf_global_remove(s);
  Py_XDECREF(hold);
  if (rc != 0)
    return pfpy_raise_pf_error();
  Py_RETURN_NONE;
}
PFPY_ENTRY(PyObject*, m_remove_global, (PyObject * m, PyObject* name), (m, name))

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
    return pfpy_raise_pf_error();
  return pfpy_wrap_steal(mod);
}
PFPY_ENTRY(PyObject*, m_load_module, (PyObject * m, PyObject* path), (m, path))

static PyObject* m_system_module(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  pf_object_t* mod;
  if (pf_module_system(&mod) != 0)
    return pfpy_raise_pf_error();
  return pfpy_wrap_steal(mod);
}
PFPY_ENTRY(PyObject*, m_system_module, (PyObject * m, PyObject* u), (m, u))

/* _kind_class(kind): the exception class a packfn error of that kind raises (errors.c). The
 * kind's text as pfpy_str_utf8 gives it: an error's .kind that came from C as no UTF-8
 * ("Caf\udce9") names the same kind, packfn.Error (it raised UnicodeEncodeError); and a kind
 * holding a NUL is no identifier, packfn.Error (it was cut at the NUL: "ValueError\0x" gave
 * ValueError, "Cuda\0Error" made packfn.Cuda: review). */
static PyObject* m_kind_class(PyObject* m, PyObject* arg) {
  (void)m;
  if (!PyUnicode_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "_kind_class: expected a str");
    return NULL;
  }
  Py_ssize_t n;
  PyObject* hold;
  const char* kind = pfpy_str_utf8(arg, &n, &hold);
  if (!kind)
    return NULL;
  PyObject* r = memchr(kind, 0, (size_t)n) ? Py_NewRef(Error_Type) : pfpy_kind_class(kind);
  Py_XDECREF(hold);
  return r;
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
  return pfpy_raise_pf_error();
}
PFPY_ENTRY(PyObject*, m_raise, (PyObject * m, PyObject* args), (m, args))

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
    return pfpy_raise_pf_error();
  return pfpy_wrap_steal(obj);
}
PFPY_ENTRY(PyObject*, m_custom_object, (PyObject * m, PyObject* key), (m, key))

static PyObject* m_raiser(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  pf_object_t* fn;
  if (pf_function_create(NULL, raiser_call, NULL, &fn) != 0)
    return pfpy_raise_pf_error();
  return pfpy_wrap_steal(fn);
}
PFPY_ENTRY(PyObject*, m_raiser, (PyObject * m, PyObject* u), (m, u))

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
    return pfpy_raise_pf_error();
  if (pf_function_set_info(fn, signature, doc) != 0) {
    pf_object_release(fn);
    return pfpy_raise_pf_error();
  }
  return pfpy_wrap_steal(fn);
}

/* _echo(): a C function made by packfn returning its last argument as it came (a view stays a
 * view, as TVM-FFI's testing.echo does), or with no argument a DLTensor* of its own; for tests
 * of borrowed results. */
static PyObject* m_echo(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  return direct_function(echo_call, "echo(*args) -> any", NULL);
}
PFPY_ENTRY(PyObject*, m_echo, (PyObject * m, PyObject* u), (m, u))

/* _noop(): a C function that does nothing, for call-overhead measurements. */
static PyObject* m_noop(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  return direct_function(noop_call, "noop(*args) -> None", "Does nothing (call overhead).");
}
PFPY_ENTRY(PyObject*, m_noop, (PyObject * m, PyObject* u), (m, u))

static PyObject* m_tvm_ffi_join(PyObject* m, PyObject* u) {
  (void)m;
  (void)u;
  return PyBool_FromLong(pf_tvm_ffi_join());
}

static PyMethodDef module_functions[] = {
    {"_tvm_ffi_join", m_tvm_ffi_join, METH_NOARGS,
     "_tvm_ffi_join() -> bool: joins the TVM-FFI runtime when it is loaded (pf_tvm_ffi_join)"},
    {"_noop", m_noop_entry, METH_NOARGS, "_noop() -> Function: a C function that does nothing"},
    {"_echo", m_echo_entry, METH_NOARGS,
     "_echo() -> Function: a C function returning its last argument as it came"},
    {"_get_global", m_get_global_entry, METH_O,
     "the global function `name` (KeyError when absent)"},
    {"list_globals", m_list_globals_entry, METH_NOARGS,
     "list_globals() -> sorted list of global names"},
    {"register_global", (PyCFunction)(void (*)(void))m_register_global_entry,
     METH_VARARGS | METH_KEYWORDS,
     "register_global(name, fn, override=False) -> Function\n\nRegisters a packfn.Function or a "
     "Python callable under `name` in the global table."},
    {"remove_global", m_remove_global_entry, METH_O,
     "remove_global(name): removes a global function"},
    {"load_module", m_load_module_entry, METH_O,
     "load_module(path) -> Module\n\nLoads a packfn kernel library; its exports are attributes."},
    {"system_module", m_system_module_entry, METH_NOARGS,
     "system_module() -> Module: the running program's exports and the global table"},
    {"_raise", m_raise_entry, METH_VARARGS, NULL},
    {"_kind_class", m_kind_class, METH_O, NULL},
    {"_raiser", m_raiser_entry, METH_NOARGS, NULL},
    {"_custom_object", m_custom_object_entry, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

/* ======================================================================================
 * Module init
 * ====================================================================================== */

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
      memcpy(&pfpy_cuda_stream_wait, &sym, sizeof sym); /* ISO C has no object-to-function cast */
    }
  } else {
    const char* text = dlerror();
    why = PyUnicode_FromFormat("%s: %s", path, text ? text : "dlopen failed");
  }
  PyMem_Free(path);
  return why;
}

static PyObject* init_module(void) {
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
  if (pf_function_create(NULL, pfpy_tvm_handoff_call, NULL, &handoff_fn) != 0)
    return pfpy_raise_pf_error();
  pfpy_find_packfn_code(handoff_fn);
  int rc = pf_global_set(TVM_HANDOFF_GLOBAL, handoff_fn, 1);
  pf_object_release(handoff_fn);
  if (rc != 0)
    return pfpy_raise_pf_error();
  PyObject* m = PyModule_Create(&packfn_module);
  if (!m)
    return NULL;
  Error_Type = PyErr_NewExceptionWithDoc(
      "packfn.Error", "Base of packfn errors whose kind has no Python built-in exception.",
      PyExc_RuntimeError, NULL);
  pfpy_kind_classes = PyDict_New();
  pfpy_callback_fns = PySet_New(NULL);
  if (!Error_Type || !pfpy_kind_classes || !pfpy_callback_fns ||
      PyModule_AddObjectRef(m, "Error", Error_Type) < 0 ||
      PyModule_AddObjectRef(m, "_kind_classes", pfpy_kind_classes) < 0)
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
      PyModule_AddStringConstant(m, "abi_version", PF__PY_ABI_VERSION) < 0 ||
      PyModule_AddIntConstant(m, "kernels_have_cuda", pf_kernels_have_cuda()) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}

/* The import, an entry point too (PFPY_ENTRY): it may run in a hook of C code with an error
 * pending, as when a callback of another runtime imports packfn first. */
PyMODINIT_FUNC PyInit__packfn(void) {
  pf_object_t* aside = pfpy_error_set_aside();
  PyObject* m = init_module();
  pfpy_error_put_back(aside);
  return m;
}
