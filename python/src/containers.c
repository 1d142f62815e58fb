/* packfn.Array and packfn.Map, immutable: a list or tuple passed to packfn becomes an Array, a
 * dict a frozen Map (each item converted as an argument is); from Python they read as a
 * sequence and as an insertion-ordered mapping. */

#include <math.h>

#include "_packfn.h"

/* ======================================================================================
 * Arrays and Maps from lists, tuples and dicts
 * ====================================================================================== */

/* An Array from a list or tuple: new reference in *out. Converting an item may run Python code
 * (__dlpack__, __index__) that changes a list, so the items come from a tuple snapshot that
 * holds them until the array owns its copies. */
int pfpy_array_from_seq(PyObject* list_or_tuple, pf_object_t** out, int* release_gil) {
  PyObject* seq = PySequence_Tuple(list_or_tuple);
  if (!seq)
    return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(seq);
  PyObject** items = &PyTuple_GET_ITEM(seq, 0);
  pf_any_t* views = PyMem_Malloc(sizeof(pf_any_t) * (size_t)(n ? n : 1));
  argtmp_t* tmps = PyMem_Malloc(sizeof(argtmp_t) * (size_t)(n ? n : 1));
  unsigned char* used = PyMem_Calloc((size_t)(n ? n : 1), 1);
  int rc = -1;
  Py_ssize_t i = 0;
  if (!views || !tmps || !used) {
    PyErr_NoMemory();
    goto done;
  }
  for (; i < n; ++i) {
    int r = pfpy_py_to_view(items[i], &views[i], &tmps[i], 1, release_gil);
    if (r < 0)
      goto done;
    used[i] = (unsigned char)r;
  }
  rc = pf_array_create(views, (size_t)n, out) == 0 ? 0 : (pfpy_raise_pf_error(), -1);
done:
  for (Py_ssize_t j = 0; j < i; ++j)
    if (used[j])
      pfpy_argtmp_release(&tmps[j]);
  PyMem_Free(views);
  PyMem_Free(tmps);
  PyMem_Free(used);
  Py_DECREF(seq);
  return rc;
}

/* The int a Map key is as Python compares it: a bool, or an object with __index__ that is no
 * int, str, bytes or tensor (numpy.int64, an IntEnum member), is the int it equals. 1 and a new
 * reference in *out, 0 (*out NULL) for any other key, -1 with an exception. The same for keys
 * of a Map made from a dict and for keys looked up (a numpy.int64 key became a 0-d tensor
 * key, which its lookup as an int never found, and True was refused: review). An object with
 * __dlpack__ stays a tensor key whether or not it has __index__ (a hashable tensor type's
 * __index__ refuses most of its values). */
static int key_as_int(PyObject* key, PyObject** out) {
  *out = NULL;
  if (PyLong_CheckExact(key) || PyUnicode_Check(key) || PyBytes_Check(key) || !PyIndex_Check(key))
    return 0; /* bool is no exact int: it has __index__ */
  if (!PyBool_Check(key) && PyObject_HasAttrString(key, "__dlpack__"))
    return 0; /* a tensor key */
  return (*out = PyNumber_Index(key)) ? 1 : -1;
}

static int number_as_int64(PyObject* key, long long* x);

/* A dict key that is a number of another kind than int, float and complex, without __index__
 * and __dlpack__ (numpy.bool_, numpy.float32, fractions.Fraction): as lookups take it
 * (map_lookup), the int it equals: 1 and a new reference in *out. It went on to the buffer
 * protocol and became a 0-d tensor key (NumPy's scalars), equal to nothing, which not even the
 * key it came from found (review). One that equals no int64 is refused, as float keys are:
 * -1 with TypeError (or another exception). 0 (*out NULL) for any other key. */
static int number_key_as_int(PyObject* key, PyObject** out) {
  *out = NULL;
  if (!PyNumber_Check(key) || PyLong_Check(key) || PyFloat_Check(key) || PyComplex_Check(key) ||
      PyObject_TypeCheck(key, &Object_Type) || PyObject_HasAttrString(key, "__dlpack__"))
    return 0;
  long long x;
  int r = number_as_int64(key, &x);
  if (r == 0)
    PyErr_Format(PyExc_TypeError,
                 "packfn: a dict key of type '%s' that equals no int64 cannot be a Map key (Map "
                 "keys are str, bytes, int or objects)",
                 Py_TYPE(key)->tp_name);
  if (r <= 0)
    return -1;
  return (*out = PyLong_FromLongLong(x)) ? 1 : -1;
}

/* A frozen Map from a dict: new reference in *out. Converting a key or value may run Python
 * code that changes the dict, so the pairs come from a snapshot (a list of (key, value)
 * tuples) that holds them while they are converted. Keys are converted as lookups compare
 * them (key_as_int, number_key_as_int). */
int pfpy_map_from_dict(PyObject* d, pf_object_t** out, int* release_gil) {
  PyObject* pairs = PyDict_Items(d);
  if (!pairs)
    return -1;
  pf_object_t* map;
  if (pf_map_create(&map) != 0) {
    Py_DECREF(pairs);
    pfpy_raise_pf_error();
    return -1;
  }
  for (Py_ssize_t pos = 0; pos < PyList_GET_SIZE(pairs); ++pos) {
    PyObject* pair = PyList_GET_ITEM(pairs, pos);
    PyObject* k = PyTuple_GET_ITEM(pair, 0);
    PyObject* v = PyTuple_GET_ITEM(pair, 1);
    pf_any_t kv, vv;
    argtmp_t kt, vt;
    PyObject* as_int;
    if (key_as_int(k, &as_int) < 0 || (!as_int && number_key_as_int(k, &as_int) < 0))
      goto fail;
    int rk = pfpy_py_to_view(as_int ? as_int : k, &kv, &kt, 1, release_gil);
    Py_XDECREF(as_int); /* the view of an int holds its value */
    if (rk < 0)
      goto fail;
    int rv = pfpy_py_to_view(v, &vv, &vt, 1, release_gil);
    if (rv < 0) {
      if (rk)
        pfpy_argtmp_release(&kt);
      goto fail;
    }
    int rc = pf_map_set(map, &kv, &vv);
    if (rk)
      pfpy_argtmp_release(&kt);
    if (rv)
      pfpy_argtmp_release(&vt);
    if (rc != 0) {
      pfpy_raise_pf_error();
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

/* ======================================================================================
 * Array and Map
 * ====================================================================================== */

static Py_ssize_t array_len(PyObject* self) {
  size_t n;
  if (pf_array_count(((PfObject*)self)->obj, &n) != 0) {
    pfpy_raise_pf_error();
    return -1;
  }
  return (Py_ssize_t)n;
}
PFPY_ENTRY(Py_ssize_t, array_len, (PyObject * self), (self))

static PyObject* array_item(PyObject* self, Py_ssize_t i) {
  const pf_any_t* v;
  if (pf_array_get(((PfObject*)self)->obj, i, &v) != 0)
    return pfpy_raise_pf_error();
  return pfpy_any_to_py(v);
}
PFPY_ENTRY(PyObject*, array_item, (PyObject * self, Py_ssize_t i), (self, i))

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
    if (i + n < 0) { /* the index the caller gave (pf_array_get would name i + n: review) */
      PyErr_Format(PyExc_IndexError,
                   "packfn.Array: index %zd is out of range for an array of size %zd", i, n);
      return NULL;
    }
    i += n;
  }
  return array_item(self, i);
}
PFPY_ENTRY(PyObject*, array_subscript, (PyObject * self, PyObject* key), (self, key))

static int map_repr_enter(const pf_object_t* obj, PyObject** key);
static void map_repr_leave(PyObject* key);

/* An array or list can hold itself (a TVM-FFI List, l.append(l)): map_repr_enter keeps the C
 * object here too, or each level wrapped it in a new packfn.Array and repr() recursed until
 * RecursionError (review); a list's own repr writes [...]. */
static PyObject* array_repr(PyObject* self) {
  PyObject* key;
  int in = map_repr_enter(((PfObject*)self)->obj, &key);
  if (in != 0)
    return in < 0 ? NULL : PyUnicode_FromString("packfn.Array([...])");
  PyObject* lst = PySequence_List(self);
  PyObject* r = lst ? PyUnicode_FromFormat("packfn.Array(%R)", lst) : NULL;
  Py_XDECREF(lst);
  map_repr_leave(key);
  return r;
}
PFPY_ENTRY(PyObject*, array_repr, (PyObject * self), (self))

static PyObject* array_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op == Py_EQ || op == Py_NE) && (PyList_Check(b) || PyTuple_Check(b))) {
    PyObject* la = PySequence_List(a);
    PyObject* lb = la ? PySequence_List(b) : NULL;
    PyObject* r = lb ? PyObject_RichCompare(la, lb, op) : NULL;
    Py_XDECREF(la);
    Py_XDECREF(lb);
    return r;
  }
  return pfpy_obj_richcompare(a, b, op);
}
PFPY_ENTRY(PyObject*, array_richcompare, (PyObject * a, PyObject* b, int op), (a, b, op))

/* An index for index(): any integer-like object, clamped to Py_ssize_t as list.index takes
 * it (a PyArg_ParseTuple converter: 1, or 0 with an exception). */
static int clamped_index(PyObject* o, void* out) {
  Py_ssize_t i = PyNumber_AsSsize_t(o, NULL);
  if (i == -1 && PyErr_Occurred())
    return 0;
  *(Py_ssize_t*)out = i;
  return 1;
}

/* Compares items [start, stop) with `value`, as collections.abc.Sequence's mixins do (identity
 * first, then ==): the index of the first equal one (`count` NULL), or in *count how many are
 * equal; -1 when none is (or with `count`, 0), -2 with an exception. */
static Py_ssize_t array_find(PyObject* self, PyObject* value, Py_ssize_t start, Py_ssize_t stop,
                             Py_ssize_t* count) {
  for (Py_ssize_t i = start; i < stop; ++i) {
    PyObject* item = array_item(self, i);
    int eq = item ? PyObject_RichCompareBool(item, value, Py_EQ) : -1;
    Py_XDECREF(item);
    if (eq < 0)
      return -2;
    if (eq && !count)
      return i;
    if (eq)
      ++*count;
  }
  return -1;
}

/* index(value, start=0, stop=len): Sequence.index, which the Array is registered as (it had no
 * index() and count(): review). ValueError when no item in [start, stop) equals value;
 * negative bounds count from the end, as list.index takes them. */
static PyObject* array_index(PyObject* self, PyObject* args) {
  PyObject* value;
  Py_ssize_t n = array_len(self), start = 0, stop = n; /* stop's default: the length */
  if (n < 0 ||
      !PyArg_ParseTuple(args, "O|O&O&:index", &value, clamped_index, &start, clamped_index, &stop))
    return NULL;
  if (start < 0 && (start += n) < 0)
    start = 0;
  if (stop < 0 && (stop += n) < 0)
    stop = 0;
  Py_ssize_t i = array_find(self, value, start, stop < n ? stop : n, NULL);
  if (i >= 0)
    return PyLong_FromSsize_t(i);
  if (i == -1)
    PyErr_Format(PyExc_ValueError, "%R is not in packfn.Array", value);
  return NULL;
}
PFPY_ENTRY(PyObject*, array_index, (PyObject * self, PyObject* args), (self, args))

/* count(value): how many items equal value (Sequence.count). */
static PyObject* array_count(PyObject* self, PyObject* value) {
  Py_ssize_t count = 0, n = array_len(self);
  if (n < 0 || array_find(self, value, 0, n, &count) == -2)
    return NULL;
  return PyLong_FromSsize_t(count);
}
PFPY_ENTRY(PyObject*, array_count, (PyObject * self, PyObject* value), (self, value))

static PySequenceMethods array_as_seq = {.sq_length = array_len_entry, .sq_item = array_item_entry};
static PyMethodDef array_methods[] = {
    {"index", array_index_entry, METH_VARARGS,
     "index(value, start=0, stop=len) -> int: the first index of value in [start, stop); "
     "ValueError when it is absent"},
    {"count", array_count_entry, METH_O, "count(value) -> int: how many items equal value"},
    {NULL, NULL, 0, NULL}};
static PyMappingMethods array_as_map = {.mp_length = array_len_entry,
                                        .mp_subscript = array_subscript_entry};

/* Maps (72) and dicts (76) share the Python type: their C readers differ by name only. */
static int mapbase_count(pf_object_t* m, size_t* n) {
  return m->type_index == PF_TYPE_DICT ? pf_dict_count(m, n) : pf_map_count(m, n);
}

static Py_ssize_t map_len(PyObject* self) {
  size_t n;
  if (mapbase_count(((PfObject*)self)->obj, &n) != 0) {
    pfpy_raise_pf_error();
    return -1;
  }
  return (Py_ssize_t)n;
}
PFPY_ENTRY(Py_ssize_t, map_len, (PyObject * self), (self))

/* Whether `key` is a complex number of another type than complex (NumPy's complex64 and
 * clongdouble, numbers.Complex and not numbers.Real), which int() converts with a
 * ComplexWarning, discarding the imaginary part: 1, 0, or -1 with an exception. */
static int is_other_complex(PyObject* key) {
  static PyObject *complex_abc, *real_abc; /* numbers.Complex and numbers.Real, once imported */
  if (!complex_abc) {
    PyObject* numbers = PyImport_ImportModule("numbers");
    PyObject* c = numbers ? PyObject_GetAttrString(numbers, "Complex") : NULL;
    PyObject* r = c ? PyObject_GetAttrString(numbers, "Real") : NULL;
    Py_XDECREF(numbers);
    if (!r) {
      Py_XDECREF(c);
      return -1;
    }
    complex_abc = c;
    real_abc = r;
  }
  int c = PyObject_IsInstance(key, complex_abc);
  if (c <= 0)
    return c;
  int r = PyObject_IsInstance(key, real_abc);
  return r < 0 ? -1 : !r;
}

/* Looks key up: 1 and *out (borrowed), 0 when absent, -1 with an exception. Keys are looked up
 * as Python compares them: a bool, an integer-like object (numpy.int64, anything with
 * __index__) and a whole float as the int they equal; a str, bytes, a packfn object and a
 * TVM-FFI object as themselves. What equals no Map key is absent, as a dict answers (found by
 * review: they raised): another float (packfn refuses floats as keys), an int beyond int64,
 * any other object (converted, it would be a new object, equal to no key). */
/* For a key of another numeric type (a complex, Fraction, Decimal, numpy's float32 or bool_):
 * 1 and *x when it equals an int64, as a dict compares it (2+0j, Fraction(2), Decimal(2) and
 * numpy.float32(2) find 2), 0 when it equals none or cannot become an int (TypeError,
 * ValueError, OverflowError: NaN, inf, 5/2 truncated is not 5/2), -1 with another exception. */
static int number_as_int64(PyObject* key, long long* x) {
  /* a complex of another type than complex is read as a complex too: int() of NumPy's
   * complex64 warned (an error under -W error, which a dict lookup never raises; review) */
  int other = PyComplex_Check(key) ? 1 : is_other_complex(key);
  if (other < 0)
    return -1;
  if (other) {
    Py_complex c = PyComplex_AsCComplex(key);
    if (c.real == -1.0 && PyErr_Occurred())
      return -1;
    if (!(c.imag == 0.0 && c.real == floor(c.real) && c.real >= -0x1p63 && c.real < 0x1p63))
      return 0;
    *x = (long long)c.real;
    return 1;
  }
  PyObject* n = PyNumber_Long(key);
  if (!n) {
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
        PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      return 0;
    }
    return -1;
  }
  int eq = PyObject_RichCompareBool(key, n, Py_EQ);
  if (eq <= 0) {
    Py_DECREF(n);
    return eq;
  }
  int overflow;
  *x = PyLong_AsLongLongAndOverflow(n, &overflow);
  Py_DECREF(n);
  if (*x == -1 && PyErr_Occurred())
    return -1;
  return !overflow;
}

static int map_lookup(PyObject* self, PyObject* key, const pf_any_t** out) {
  PyObject* as_int = NULL;
  *out = NULL;
  if (PyFloat_Check(key)) {
    double d = PyFloat_AS_DOUBLE(key);
    if (!(d == floor(d) && d >= -0x1p63 && d < 0x1p63)) /* not an int64's value */
      return 0;
    if (!(key = as_int = PyLong_FromDouble(d)))
      return -1;
  } else if (key_as_int(key, &as_int) < 0) {
    return -1;
  } else if (as_int) {
    key = as_int;
  }
  pf_any_t kv;
  argtmp_t t;
  int r = 0;
  if (PyLong_Check(key)) { /* the view of an int holds its value, not the object */
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(key, &overflow);
    Py_XDECREF(as_int);
    if (x == -1 && PyErr_Occurred())
      return -1;
    if (overflow)
      return 0;
    kv = pf_any_int(x);
  } else if (PyUnicode_Check(key) || PyBytes_Check(key) || PyObject_TypeCheck(key, &Object_Type)) {
    int ignored = 0;
    if ((r = pfpy_py_to_view(key, &kv, &t, 1, &ignored)) < 0) {
      /* a str holding a lone surrogate outside U+DC80..U+DCFF stands for no bytes: no key
       * (text from C) equals it, so it is absent, as in a dict (it raised
       * UnicodeEncodeError: review) */
      if (!PyUnicode_Check(key) || !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
      PyErr_Clear();
      return 0;
    }
  } else {
    /* an unhashable key, or one whose __hash__ raises, raises as a dict lookup would */
    if (PyObject_Hash(key) == -1)
      return -1;
    pf_object_t* obj;
    int h = pfpy_tvm_ffi_object(key, &obj);
    if (h < 0)
      return -1;
    if (h > 0) {
      kv = pf_any_object(obj);
    } else if (PyNumber_Check(key)) { /* a number equal to an int key finds it */
      long long x;
      int found = number_as_int64(key, &x);
      if (found <= 0)
        return found;
      kv = pf_any_int(x);
    } else {
      return 0; /* converted, it would be a new object, equal to no key */
    }
  }
  pf_object_t* m = ((PfObject*)self)->obj;
  int rc = m->type_index == PF_TYPE_DICT ? pf_dict_get(m, &kv, out) : pf_map_find(m, &kv, out);
  if (r)
    pfpy_argtmp_release(&t);
  if (rc != 0) {
    pfpy_raise_pf_error();
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
  return pfpy_any_to_py(v);
}
PFPY_ENTRY(PyObject*, map_subscript, (PyObject * self, PyObject* key), (self, key))

static int map_contains(PyObject* self, PyObject* key) {
  const pf_any_t* v;
  return map_lookup(self, key, &v);
}
PFPY_ENTRY(int, map_contains, (PyObject * self, PyObject* key), (self, key))

/* which: 0 keys, 1 values, 2 items; a list. */
static PyObject* map_list(PyObject* self, int which) {
  pf_object_t* map = ((PfObject*)self)->obj;
  pf_map_iter_t it;
  const pf_any_t *key, *value;
  size_t n;
  if (mapbase_count(map, &n) != 0 || pf_map_iter_init(map, &it) != 0)
    return pfpy_raise_pf_error();
  PyObject* lst = PyList_New((Py_ssize_t)n);
  size_t i = 0;
  for (; lst && i < n && pf_map_iter_next(&it, &key, &value) == 1; ++i) {
    PyObject* x;
    if (which == 2) {
      PyObject* k = pfpy_any_to_py(key);
      PyObject* v = k ? pfpy_any_to_py(value) : NULL;
      x = v ? PyTuple_Pack(2, k, v) : NULL;
      Py_XDECREF(k);
      Py_XDECREF(v);
    } else {
      x = pfpy_any_to_py(which == 0 ? key : value);
    }
    if (!x) {
      Py_CLEAR(lst);
      break;
    }
    PyList_SET_ITEM(lst, (Py_ssize_t)i, x);
  }
  if (lst && i < n) {
    /* the walk ended before the count: a damaged insertion-order list (pf_map_iter_next ends
     * it rather than loop), or a dict changed while its values were converted. The slots left
     * NULL crashed whatever read the list next (found by review). */
    Py_CLEAR(lst);
    PyErr_Format(PyExc_ValueError,
                 "packfn.Map: expected %zu entries, as the %s's size says, got %zu from its "
                 "insertion-order list (a damaged table, or a dict changed while read)",
                 n, map->type_index == PF_TYPE_DICT ? "dict" : "map", i);
  }
  return lst;
}

static PyObject* map_keys(PyObject* self, PyObject* u) {
  (void)u;
  return map_list(self, 0);
}
PFPY_ENTRY(PyObject*, map_keys, (PyObject * self, PyObject* u), (self, u))
static PyObject* map_values(PyObject* self, PyObject* u) {
  (void)u;
  return map_list(self, 1);
}
PFPY_ENTRY(PyObject*, map_values, (PyObject * self, PyObject* u), (self, u))
static PyObject* map_items(PyObject* self, PyObject* u) {
  (void)u;
  return map_list(self, 2);
}
PFPY_ENTRY(PyObject*, map_items, (PyObject * self, PyObject* u), (self, u))
static PyObject* map_iter(PyObject* self) {
  PyObject* keys = map_list(self, 0);
  if (!keys)
    return NULL;
  PyObject* it = PyObject_GetIter(keys);
  Py_DECREF(keys);
  return it;
}
PFPY_ENTRY(PyObject*, map_iter, (PyObject * self), (self))
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
  return pfpy_any_to_py(v);
}
PFPY_ENTRY(PyObject*, map_get, (PyObject * self, PyObject* const* args, Py_ssize_t n),
           (self, args, n))
static PyObject* map_repr_body(PyObject* self) {
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

/* The C maps and dicts (and arrays and lists, array_repr) whose repr this thread is writing,
 * as Py_ReprEnter keeps Python's own containers: a dict can hold itself through other containers
 * (d["a"] = [d]), and each level of the walk wraps the same C object in a new Python object, which
 * Py_ReprEnter (by Python object) never recognises, so repr() of such a dict recursed until
 * RecursionError (found by review; a dict's own repr writes {...}). 1 when obj is in the set
 * already, 0 when added (a new reference to its key in *key), -1 with an exception. */
static int map_repr_enter(const pf_object_t* obj, PyObject** key) {
  static PyObject* name;
  *key = NULL;
  if (!name && !(name = PyUnicode_InternFromString("packfn.Map.repr")))
    return -1;
  PyObject* ts = PyThreadState_GetDict(); /* borrowed; NULL only without a thread state */
  if (!ts) {
    PyErr_SetString(PyExc_RuntimeError, "packfn.Map: repr without a thread state");
    return -1;
  }
  PyObject* seen = PyDict_GetItemWithError(ts, name); /* borrowed */
  if (!seen) {
    if (PyErr_Occurred() || !(seen = PySet_New(NULL)))
      return -1;
    int r = PyDict_SetItem(ts, name, seen);
    Py_DECREF(seen); /* the thread state's dict holds it */
    if (r < 0)
      return -1;
  }
  if (!(*key = PyLong_FromVoidPtr((void*)(uintptr_t)obj)))
    return -1;
  int in = PySet_Contains(seen, *key);
  if (in == 0 && PySet_Add(seen, *key) < 0)
    in = -1;
  if (in != 0)
    Py_CLEAR(*key);
  return in;
}

/* Takes back what map_repr_enter added and releases key; a pending exception is kept. */
static void map_repr_leave(PyObject* key) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* ts = PyThreadState_GetDict();
  PyObject* seen = ts ? PyDict_GetItemString(ts, "packfn.Map.repr") : NULL;
  if (seen && PySet_Discard(seen, key) < 0)
    PyErr_Clear();
  Py_DECREF(key);
  PyErr_Restore(type, value, tb);
}

static PyObject* map_repr(PyObject* self) {
  PyObject* key;
  int in = map_repr_enter(((PfObject*)self)->obj, &key);
  if (in != 0)
    return in < 0 ? NULL : PyUnicode_FromString("packfn.Map({...})");
  PyObject* r = map_repr_body(self);
  map_repr_leave(key);
  return r;
}
PFPY_ENTRY(PyObject*, map_repr, (PyObject * self), (self))

static PyMappingMethods map_as_map = {.mp_length = map_len_entry,
                                      .mp_subscript = map_subscript_entry};
static PySequenceMethods map_as_seq = {.sq_contains = map_contains_entry};
static PyMethodDef map_methods[] = {
    {"keys", map_keys_entry, METH_NOARGS, "keys, in insertion order"},
    {"values", map_values_entry, METH_NOARGS, "values, in insertion order"},
    {"items", map_items_entry, METH_NOARGS, "(key, value) pairs, in insertion order"},
    {"get", (PyCFunction)(void (*)(void))map_get_entry, METH_FASTCALL, "get(key, default=None)"},
    {NULL, NULL, 0, NULL}};

PyTypeObject Array_Type = {
    PF_TYPE_HEAD("Array", "An immutable packfn sequence.", array_richcompare_entry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE,
    .tp_base = &Object_Type,
    .tp_repr = array_repr_entry,
    .tp_as_sequence = &array_as_seq,
    .tp_as_mapping = &array_as_map,
    .tp_methods = array_methods,
    .tp_new = pfpy_obj_new_forbidden,
};

PyTypeObject Map_Type = {
    PF_TYPE_HEAD("Map", "An immutable packfn mapping (insertion ordered).", pfpy_obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_MAPPING,
    .tp_base = &Object_Type,
    .tp_repr = map_repr_entry,
    .tp_as_mapping = &map_as_map,
    .tp_as_sequence = &map_as_seq,
    .tp_iter = map_iter_entry,
    .tp_methods = map_methods,
    .tp_new = pfpy_obj_new_forbidden,
};
