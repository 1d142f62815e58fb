/* packfn.Module: a loaded kernel library (or the system module, or TVM-FFI's ffi.Module), whose
 * exported functions are its attributes, with a suggestion when a name is absent. */

#include "_packfn.h"

/* The export `name` of module `self`, whose text in C is s[0..len) (pfpy_str_utf8). */
static PyObject* module_export(PyObject* self, PyObject* name, const char* s, Py_ssize_t len) {
  pf_object_t* module = ((PfObject*)self)->obj;
  const char* where = pf_module_path(module); /* NULL for TVM-FFI's ffi.Module */
  if (!where)
    where = "the module";
  if (memchr(s, 0, (size_t)len)) /* no export is named so, whatever its prefix up to the NUL */
    return PyErr_Format(PyExc_AttributeError, "%s has no function %R", where, name);
  pf_object_t* fn;
  if (pf_module_get_function(module, s, &fn) != 0)
    return pfpy_raise_pf_error();
  if (fn == NULL) { /* Python's attribute protocol: absent is AttributeError */
    char near[256];
    int found = pf_module_suggest(module, s, near, sizeof near) == 1;
    pf_error_clear(); /* a failed search only costs the suggestion */
    PyObject* alt = NULL;
    if (found && !(alt = pfpy_str_from(near, strlen(near))))
      return NULL;
    if (alt)
      PyErr_Format(PyExc_AttributeError, "%s has no function '%U' (did you mean '%U'?)", where,
                   name, alt);
    else
      PyErr_Format(PyExc_AttributeError, "%s has no function '%U'", where, name);
    Py_XDECREF(alt);
    return NULL;
  }
  return pfpy_wrap_steal(fn);
}

static PyObject* module_getattro(PyObject* self, PyObject* name) {
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
    return r;
  /* the AttributeError is set aside while the name is encoded (encoding with it set raised
   * SystemError for a name with a lone surrogate: review), and is the answer for a name that
   * cannot be encoded (it names no export) and for dunder lookups */
  PyObject *et, *ev, *etb, *hold;
  PyErr_Fetch(&et, &ev, &etb);
  Py_ssize_t len;
  const char* s = pfpy_str_utf8(name, &len, &hold);
  if (!s && !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
    Py_XDECREF(et); /* MemoryError: it stands */
    Py_XDECREF(ev);
    Py_XDECREF(etb);
    return NULL;
  }
  if (!s || (s[0] == '_' && s[1] == '_')) {
    Py_XDECREF(hold);
    PyErr_Clear();
    PyErr_Restore(et, ev, etb);
    return NULL;
  }
  Py_XDECREF(et);
  Py_XDECREF(ev);
  Py_XDECREF(etb);
  r = module_export(self, name, s, len);
  Py_XDECREF(hold);
  return r;
}
PFPY_ENTRY(PyObject*, module_getattro, (PyObject * self, PyObject* name), (self, name))

static PyObject* module_list(PyObject* self, int with_info) {
  pf_export_info_t* list;
  size_t n;
  /* TVM-FFI's ffi.Module (handed over by a call once joined): its functions are reached as
   * attributes, but packfn cannot list them; dir() must not fail on it (it raised TypeError
   * "expected a Module made by packfn, got Module": review) */
  if (!pf_module_path(((PfObject*)self)->obj)) {
    if (!with_info)
      return PyList_New(0);
    PyErr_SetString(PyExc_TypeError,
                    "packfn.Module.exports: lists the functions of packfn's own modules only; "
                    "this is TVM-FFI's ffi.Module (its functions are still attributes)");
    return NULL;
  }
  if (pf_module_list(((PfObject*)self)->obj, &list, &n) != 0)
    return pfpy_raise_pf_error();
  PyObject* r = with_info ? PyDict_New() : PyList_New(0);
  for (size_t i = 0; r && i < n; ++i) {
    PyObject* name = pfpy_str_from(list[i].name, strlen(list[i].name));
    int rc = -1;
    if (name && with_info) {
      const char* text = list[i].signature;
      PyObject* sig = text ? pfpy_str_from(text, strlen(text)) : Py_NewRef(Py_None);
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
PFPY_ENTRY(PyObject*, module_dir, (PyObject * self, PyObject* u), (self, u))

static PyObject* module_exports(PyObject* self, PyObject* u) {
  (void)u;
  return module_list(self, 1);
}
PFPY_ENTRY(PyObject*, module_exports, (PyObject * self, PyObject* u), (self, u))

static PyObject* module_path(PyObject* self, void* c) {
  (void)c;
  const char* p = pf_module_path(((PfObject*)self)->obj);
  return p ? PyUnicode_DecodeFSDefault(p) : Py_NewRef(Py_None);
}

static PyObject* module_repr(PyObject* self) {
  const char* p = pf_module_path(((PfObject*)self)->obj);
  return PyUnicode_FromFormat("<packfn.Module '%s'>", p ? p : "?");
}

static PyMethodDef module_methods[] = {{"__dir__", module_dir_entry, METH_NOARGS, NULL},
                                       {"exports", module_exports_entry, METH_NOARGS,
                                        "dict: function name -> signature text (or None)"},
                                       {NULL, NULL, 0, NULL}};
static PyGetSetDef module_getset[] = {
    {"path", module_path, NULL, "the path the module was loaded from", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject Module_Type = {
    PF_TYPE_HEAD("Module", "A loaded packfn kernel library; its functions are attributes.",
                 pfpy_obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_base = &Object_Type,
    .tp_repr = module_repr,
    .tp_getattro = module_getattro_entry,
    .tp_methods = module_methods,
    .tp_getset = module_getset,
    .tp_new = pfpy_obj_new_forbidden,
};
