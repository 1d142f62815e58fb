/* Errors between packfn and Python: a packfn error becomes a Python exception (a built-in
 * class when its kind names one, else a packfn.Error subclass made once per kind, up to
 * KIND_CLASSES_MAX kinds, with its backtrace as a note and its cause chain), and a Python
 * exception raised in a callback travels through C as an error object of its own (type 67,
 * the ABI's cell) that keeps the original. */

#include "_packfn.h"

PyObject* Error_Type;        /* packfn.Error */
PyObject* pfpy_kind_classes; /* dict: kind -> packfn.Error subclass */

/* The most kinds given a class of their own: a program raises a few dozen kinds, so this only
 * stops a producer of ever new kinds (a kind with a number in it) from making a class per
 * error, kept for good (found by review). Past it, a kind without a class yet gets
 * packfn.Error itself, every time, so that an except clause matches the same errors
 * throughout a run. */
enum { KIND_CLASSES_MAX = 1024 };

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

/* Kind name of a Python exception: a packfn.Error's own kind (its .kind, a str, as
 * pfpy_str_utf8 gives it: a kind that came from C as no UTF-8 goes back as it came), which its
 * class may not name (kinds past KIND_CLASSES_MAX, kinds that are no identifiers: their errors
 * came back as "Error", found by review), else its class's __name__ ("ValueError"). *hold gets
 * a reference to keep while the name is in use, or NULL. */
static const char* exc_kind(PyObject* exc, PyObject** hold) {
  *hold = NULL;
  if (Error_Type && PyObject_IsInstance(exc, Error_Type) == 1) {
    PyObject* k = PyObject_GetAttrString(exc, "kind");
    Py_ssize_t n;
    PyObject* bytes = NULL;
    const char* s = k && PyUnicode_Check(k) ? pfpy_str_utf8(k, &n, &bytes) : NULL;
    if (s && *s) {
      *hold = bytes ? bytes : Py_NewRef(k);
      Py_DECREF(k);
      return s;
    }
    Py_XDECREF(bytes);
    Py_XDECREF(k);
  }
  PyErr_Clear(); /* a failed isinstance or attribute read: the class name will do */
  const char* name = Py_TYPE(exc)->tp_name;
  const char* dot = strrchr(name, '.');
  return dot ? dot + 1 : name;
}

/* Raises the pending Python exception in packfn (inside a callback; the GIL is held). */
int pfpy_pyerr_to_pf(void) {
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
  PyObject* kind_hold;
  const char* kind = exc_kind(value, &kind_hold);
  const char* msg = NULL;
  Py_ssize_t size;
  PyObject *bytes = NULL, *str = PyObject_Str(value);
  if (str) /* text that came from C as no UTF-8 goes back as it came (it was unprintable) */
    msg = pfpy_str_utf8(str, &size, &bytes);
  if (!msg) { /* str() or its conversion failed: clear that exception too */
    PyErr_Clear();
    msg = "<unprintable exception>";
  }
  size_t kl = strlen(kind), ml = strlen(msg);
  pf_object_t* obj = NULL;
  char* text = malloc(kl + ml + 2);
  if (!text || pf_object_alloc(sizeof(pyerr_t), PF_TYPE_ERROR, pyerr_deleter, &obj) != 0) {
    free(text);
    Py_XDECREF(bytes);
    Py_XDECREF(str);
    Py_XDECREF(kind_hold);
    Py_DECREF(value);
    if (text)
      return -1; /* pf_object_alloc raised MemoryError */
    PF_ERROR_SET(PF_ERR_MEMORY, "out of memory converting a Python exception");
    return -1;
  }
  memcpy(text, kind, kl + 1);
  memcpy(text + kl + 1, msg, ml + 1);
  Py_XDECREF(bytes);
  Py_XDECREF(str);
  Py_XDECREF(kind_hold);
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
 * of packfn.Error named after it, made once, for the first KIND_CLASSES_MAX such kinds; the
 * other kinds (and those that are no identifiers) packfn.Error, as the kind "Error" (it made a
 * second class named packfn.Error: review). */
static PyObject* class_for_kind(const char* kind) {
  if (strcmp(kind, "Error") == 0) /* packfn.Error itself, not a second class of its name */
    return Error_Type;
  /* the lookups tell a failure (MemoryError) from an absent name, which PyDict_GetItemString
   * does not: a failed lookup of "ValueError" made a class packfn.ValueError, kept for the
   * process (found by review) */
  PyObject* key = PyUnicode_DecodeUTF8(kind, (Py_ssize_t)strlen(kind), "surrogateescape");
  if (!key)
    return NULL;
  /* the builtins module's names, not the calling frame's __builtins__ (PyEval_GetBuiltins),
   * which code run by exec() with its own __builtins__ replaces: there the kind ValueError
   * made a class packfn.ValueError, a RuntimeError, kept for the process (review) */
  PyObject* builtins = PyImport_AddModule("builtins"); /* borrowed, from sys.modules */
  builtins = builtins ? PyModule_GetDict(builtins) : NULL;
  PyObject* cls = builtins ? PyDict_GetItemWithError(builtins, key) : NULL;
  if (cls &&
      !(PyType_Check(cls) && PyType_IsSubtype((PyTypeObject*)cls, (PyTypeObject*)PyExc_Exception)))
    cls = NULL; /* a built-in that is no exception class ("print") */
  if (!cls && !PyErr_Occurred())
    cls = PyDict_GetItemWithError(pfpy_kind_classes, key);
  Py_DECREF(key);
  if (cls || PyErr_Occurred())
    return cls;
  /* a new kind: packfn.<Kind>, derived from packfn.Error, when the kind is an identifier */
  int ok = kind[0] != '\0';
  for (const char* p = kind; *p && ok; ++p)
    ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
         (p != kind && *p >= '0' && *p <= '9');
  if (!ok || PyDict_Size(pfpy_kind_classes) >= KIND_CLASSES_MAX)
    return Error_Type;
  PyObject* qual = PyUnicode_FromFormat("packfn.%s", kind);
  if (!qual)
    return NULL;
  cls = PyErr_NewException(PyUnicode_AsUTF8(qual), Error_Type, NULL);
  Py_DECREF(qual);
  if (!cls)
    return NULL;
  int rc = PyDict_SetItemString(pfpy_kind_classes, kind, cls);
  Py_DECREF(cls); /* the dict holds it */
  return rc == 0 ? cls : NULL;
}

PyObject* pfpy_kind_class(const char* kind) {
  PyObject* cls = class_for_kind(kind);
  return cls ? Py_NewRef(cls) : NULL;
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
  if (!exc && cls != Error_Type && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
    /* a class that is not made from one message (UnicodeDecodeError takes five arguments,
     * ExceptionGroup two): packfn.Error, the message prefixed with the kind, rather than the
     * constructor's complaint in place of the error (a MemoryError stands: the class was
     * fine) */
    PyErr_Clear();
    PyObject* full = PyUnicode_FromFormat("%s: %U", kind ? kind : "RuntimeError", text);
    exc = full ? PyObject_CallOneArg(Error_Type, full) : NULL;
    Py_XDECREF(full);
  }
  Py_DECREF(text);
  if (!exc)
    return NULL;
  const char* bt = pf_error_backtrace(err);
  PyObject* ks = kind ? pfpy_str_from(kind, strlen(kind)) : PyUnicode_FromString("");
  if (!ks || PyObject_SetAttrString(exc, "kind", ks) < 0)
    PyErr_Clear(); /* exceptions without a __dict__ just lack the attribute */
  Py_XDECREF(ks);
  if (bt && bt[0]) {
    PyObject* bts = PyUnicode_FromFormat("packfn backtrace (most recent call first):\n%s", bt);
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
PyObject* pfpy_raise_pf_error(void) {
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
