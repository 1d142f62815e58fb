/* packfn.Tensor and the tensors made from Python objects: over a buffer-protocol object (the
 * buffer kept alive by the tensor, read-only flag included) or a DLPack producer (its
 * __dlpack__, with the stream packfn's kernels use); the Tensor type's attributes and its own
 * __dlpack__, which orders the consumer's CUDA stream after packfn's. */

#include "_packfn.h"

/* CUDA's stream ordering, for __dlpack__; set by _packfn.c's load_kernels_cuda, or NULL. */
stream_wait_fn pfpy_cuda_stream_wait;

/* ======================================================================================
 * Tensors from buffer-protocol and DLPack objects
 * ====================================================================================== */

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
int pfpy_dl_from_buffer(const Py_buffer* b, DLTensor* dl, int64_t* strides) {
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
int pfpy_tensor_from_buffer(Py_buffer* b, pf_object_t** out) {
  int ndim = b->ndim;
  bufholder_t* h =
      malloc(sizeof(bufholder_t) + 2 * (size_t)(ndim > 0 ? ndim : 1) * sizeof(int64_t));
  if (!h) {
    PyBuffer_Release(b);
    PyErr_NoMemory();
    return -1;
  }
  memset(&h->m, 0, sizeof h->m);
  if (pfpy_dl_from_buffer(b, &h->m.dl_tensor, h->dims + ndim) < 0) {
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
    pfpy_raise_pf_error();
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
  /* a tuple of another size is no (type, id) tuple either (it raised PyArg_ParseTuple's
   * "function takes exactly 2 arguments (3 given)": review) */
  int ok =
      PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 && PyArg_ParseTuple(dev, "ii", &type, &id);
  Py_DECREF(dev);
  if (!ok) {
    /* items that are no ints ((1.0, 0)) raised PyArg_ParseTuple's own TypeError, which named
     * no __dlpack_device__ (review); an int out of range keeps its OverflowError */
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError))
      return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "packfn: %s.__dlpack_device__() returned no (type, id) tuple",
                 Py_TYPE(o)->tp_name);
    return -1;
  }
  *out = (DLDevice){(DLDeviceType)type, id};
  return 1;
}

/* Whether container `obj` was walked already with at least `depth` levels left (1), or is now
 * noted in *seen with `depth` (0, the dict made on the first container): a container reached
 * again through another path is walked again only with more levels left, at most once per
 * level (a container holding one sub-container eight times, twelve levels deep, was walked
 * once per path and took minutes; review). -1 with a Python exception. */
static int ro_seen_before(const pf_object_t* obj, int depth, PyObject** seen) {
  if (!*seen && !(*seen = PyDict_New()))
    return -1;
  PyObject* key = PyLong_FromVoidPtr((void*)obj);
  if (!key)
    return -1;
  PyObject* had = PyDict_GetItemWithError(*seen, key); /* borrowed */
  int r = had ? PyLong_AsLong(had) >= depth : PyErr_Occurred() ? -1 : 0;
  if (r == 0) {
    PyObject* d = PyLong_FromLong(depth);
    if (!d || PyDict_SetItem(*seen, key, d) != 0)
      r = -1;
    Py_XDECREF(d);
  }
  Py_DECREF(key);
  return r;
}

static int holds_read_only(const pf_any_t* v, int depth, PyObject** seen) {
  if (v->type_index < PF_TYPE_STATIC_OBJECT_BEGIN || v->v_obj == NULL)
    return 0;
  int32_t t = v->type_index;
  if (t == PF_TYPE_TENSOR)
    return pf_tensor_is_read_only(v->v_obj) == 1;
  if (t != PF_TYPE_ARRAY && t != PF_TYPE_LIST && t != PF_TYPE_MAP && t != PF_TYPE_DICT)
    return 0;
  if (depth <= 0)
    return 0;
  int r = ro_seen_before(v->v_obj, depth, seen);
  if (r != 0)
    return r < 0 ? -1 : 0; /* walked: had it held one, the walk would have ended there */
  if (t == PF_TYPE_ARRAY || t == PF_TYPE_LIST) {
    const pf_any_t* items;
    size_t n;
    if (pf_array_items(v->v_obj, &items, &n) != 0) {
      pf_error_clear(); /* another runtime's odd container: not looked into */
      return 0;
    }
    for (size_t i = 0; i < n; ++i)
      if ((r = holds_read_only(&items[i], depth - 1, seen)) != 0)
        return r;
    return 0;
  }
  pf_map_iter_t it;
  const pf_any_t *key, *value;
  if (pf_map_iter_init(v->v_obj, &it) != 0) {
    pf_error_clear();
    return 0;
  }
  while (pf_map_iter_next(&it, &key, &value) == 1)
    if ((r = holds_read_only(key, depth - 1, seen)) != 0 ||
        (r = holds_read_only(value, depth - 1, seen)) != 0)
      return r;
  return 0;
}

int pfpy_holds_read_only(const pf_any_t* v, int depth) {
  PyObject* seen = NULL; /* made for the first container only */
  int r = holds_read_only(v, depth, &seen);
  Py_XDECREF(seen);
  return r;
}

/* A legacy DLManagedTensor imported as read-only: the versioned form carries the flag, and its
 * deleter calls the legacy one. */
typedef struct {
  pf_dl_managed_tensor_versioned_t m;
  DLManagedTensor* legacy;
} legacy_ro_t;

static void legacy_ro_delete(pf_dl_managed_tensor_versioned_t* m) {
  legacy_ro_t* w = (legacy_ro_t*)m->manager_ctx;
  if (w->legacy->deleter)
    w->legacy->deleter(w->legacy);
  free(w);
}

/* A tensor object flagged read-only over a legacy managed tensor `src`, with the ownership of
 * pf_tensor_from_dlpack: on success the tensor takes src, on failure src stays the caller's
 * (the wrapper is freed, src's deleter not called). 0, or -1 with a Python exception. */
static int tensor_from_legacy_read_only(DLManagedTensor* src, pf_object_t** out) {
  legacy_ro_t* w = malloc(sizeof *w);
  if (!w) {
    PyErr_NoMemory();
    return -1;
  }
  memset(&w->m, 0, sizeof w->m);
  w->m.version = (pf_dlpack_version_t){PF_DLPACK_VERSIONED_MAJOR, PF_DLPACK_VERSIONED_MINOR};
  w->m.manager_ctx = w;
  w->m.deleter = legacy_ro_delete;
  w->m.flags = PF_DLPACK_FLAG_READ_ONLY;
  w->m.dl_tensor = src->dl_tensor; /* shape and strides stay src's, which lives as long */
  w->legacy = src;
  if (pf_tensor_from_dlpack_versioned(&w->m, out) != 0) {
    free(w);
    pfpy_raise_pf_error();
    return -1;
  }
  return 0;
}

/* Whether `o` is a JAX array (jax.Array), whose memory is immutable: 1, 0, or -1 with an
 * exception. Only once jax is in sys.modules (no JAX array exists before; jax is never
 * imported here); jax.Array is then kept for the process. */
static int is_jax_array(PyObject* o) {
  static PyObject* jax_array; /* jax.Array, once found */
  if (!jax_array) {
    static PyObject* name;
    PyObject* a;
    int r = pfpy_imported_attr("jax", &name, "Array", &a);
    if (r <= 0)
      return r;
    if (!PyType_Check(a)) { /* not the real one: no JAX array yet */
      Py_DECREF(a);
      return 0;
    }
    jax_array = a;
  }
  return PyObject_IsInstance(o, jax_array);
}

/* A tensor object from an object's __dlpack__ (no copy), asked for DLPack 1.x and, for a tensor
 * on a CUDA or ROCm device `dev` (its __dlpack_device__), for the stream packfn's kernels use
 * there (pf_stream_get; 1, the legacy default stream, for NULL), so the producer orders its
 * pending writes before them. A JAX array's tensor is read-only whatever the capsule (JAX
 * answers a max_version request with a legacy capsule, which has no read-only flag, for the
 * dtypes the buffer protocol cannot carry, bfloat16 and float8_*, and for GPU arrays; they
 * arrived writable: review). 0, or -1 with a Python exception. */
static int tensor_from_dlpack_obj(PyObject* o, DLDevice dev, pf_object_t** out) {
  static PyObject *kwnames, *kwnames_old; /* ("stream", "max_version"), ("stream",) */
  static PyObject* name;
  /* each made until it is made: one failed allocation left the others half made (found by
   * review: a NULL name crashed the next import, a NULL kwnames_old dropped the stream) */
  if ((!name && !(name = PyUnicode_InternFromString("__dlpack__"))) ||
      (!kwnames && !(kwnames = Py_BuildValue("(ss)", "stream", "max_version"))) ||
      (!kwnames_old && !(kwnames_old = Py_BuildValue("(s)", "stream"))))
    return -1;
  int read_only = is_jax_array(o);
  if (read_only < 0)
    return -1;
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
    pf_dl_managed_tensor_versioned_t* p = PyCapsule_GetPointer(cap, "dltensor_versioned");
    /* consumed here: the flags tell only us; another major version's layout is unknown (only
     * its deleter may be used): the import refuses it, untouched (it was written: review) */
    if (read_only && p->version.major == PF_DLPACK_VERSIONED_MAJOR)
      p->flags |= PF_DLPACK_FLAG_READ_ONLY;
    if (pf_tensor_from_dlpack_versioned(p, out) == 0)
      rc = PyCapsule_SetName(cap, "used_dltensor_versioned");
    else
      pfpy_raise_pf_error();
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor* p = PyCapsule_GetPointer(cap, "dltensor");
    if (read_only ? tensor_from_legacy_read_only(p, out) == 0 : pf_tensor_from_dlpack(p, out) == 0)
      rc = PyCapsule_SetName(cap, "used_dltensor");
    else if (!read_only)
      pfpy_raise_pf_error();
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

int pfpy_refuses_buffer(PyTypeObject* tp) {
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
int pfpy_tensor_from_object(PyObject* o, pf_object_t** out) {
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
    if (dl && pfpy_refuses_buffer(tp)) { /* decided per object: a GPU array goes to DLPack */
      if (dlpack_device(o, &dev) < 0)
        return -1;
      dev_known = 1;
    }
    if (dev.device_type == kDLCPU) {
      Py_buffer b;
      if (PyObject_GetBuffer(o, &b, PyBUF_RECORDS_RO) == 0)
        return pfpy_tensor_from_buffer(&b, out) < 0 ? -1 : 1;
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
    return pfpy_raise_pf_error();
  return PyUnicode_FromString(buf);
}
PFPY_ENTRY(PyObject*, tensor_dtype, (PyObject * self, void* c), (self, c))
static PyObject* tensor_device(PyObject* self, void* c) {
  (void)c;
  char buf[64];
  if (pf_device_format(tensor_dl(self)->device, buf, sizeof buf) != 0)
    return pfpy_raise_pf_error();
  return PyUnicode_FromString(buf);
}
PFPY_ENTRY(PyObject*, tensor_device, (PyObject * self, void* c), (self, c))
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
  if (consumer == producer || !pfpy_cuda_stream_wait)
    return 0;
  if (pfpy_cuda_stream_wait(d.device_id, (void*)consumer, (void*)producer) != 0) {
    pfpy_raise_pf_error();
    return -1;
  }
  return 0;
}

/* The capsule of `obj` (a new reference): versioned when the consumer asked for DLPack major
 * version >= 1 (`major`), with PF_DLPACK_FLAG_IS_COPIED added for a copy (`copied`), else
 * legacy. NULL with an exception. */
static PyObject* dlpack_capsule(pf_object_t* obj, long major, int copied) {
  if (major >= PF_DLPACK_VERSIONED_MAJOR) {
    pf_dl_managed_tensor_versioned_t* m;
    if (pf_tensor_to_dlpack_versioned(obj, &m) != 0)
      return pfpy_raise_pf_error();
    if (copied)
      m->flags |= PF_DLPACK_FLAG_IS_COPIED;
    PyObject* cap = PyCapsule_New(m, "dltensor_versioned", capsule_versioned_destructor);
    if (!cap)
      m->deleter(m);
    return cap;
  }
  DLManagedTensor* m;
  if (pf_tensor_to_dlpack(obj, &m) != 0)
    return pfpy_raise_pf_error();
  PyObject* cap = PyCapsule_New(m, "dltensor", capsule_legacy_destructor);
  if (!cap)
    m->deleter(m);
  return cap;
}

/* __dlpack__(stream=None, max_version=None, dl_device=None, copy=None), as the array API says:
 * copy None or false (by truth value) shares the tensor's memory, on its own device only
 * (another dl_device is a BufferError); copy true exports a fresh copy (pf_tensor_to_device)
 * on dl_device, or the tensor's own device, which is writable and the consumer's alone
 * (PF_DLPACK_FLAG_IS_COPIED in a versioned capsule; a legacy one also for a read-only tensor,
 * since the copy is not). The stream is ordered for the device of what is exported. */
static PyObject* tensor_dlpack(PyObject* self, PyObject* args, PyObject* kw) {
  static char* kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream, &max_version,
                                   &dl_device, &copy))
    return NULL;
  /* truth value, not identity: copy=1 and copy=np.True_ ask for a copy (review) */
  int want_copy = copy == Py_None ? 0 : PyObject_IsTrue(copy);
  if (want_copy < 0)
    return NULL;
  pf_object_t* obj = ((PfObject*)self)->obj;
  DLDevice own = tensor_dl(self)->device, target = own;
  if (dl_device != Py_None) {
    int type, id;
    if (!PyTuple_Check(dl_device) || PyTuple_GET_SIZE(dl_device) != 2) {
      PyErr_Format(PyExc_TypeError,
                   "packfn.Tensor.__dlpack__: dl_device: expected a tuple (device_type, "
                   "device_id), got %s",
                   PyTuple_Check(dl_device) ? "a tuple of another length"
                                            : Py_TYPE(dl_device)->tp_name);
      return NULL;
    }
    if (!PyArg_ParseTuple(dl_device, "ii", &type, &id)) {
      /* items that are no ints raised PyArg_ParseTuple's bare TypeError, which named neither
       * __dlpack__ nor dl_device (review); an int out of range keeps its OverflowError */
      if (!PyErr_ExceptionMatches(PyExc_TypeError))
        return NULL;
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "packfn.Tensor.__dlpack__: dl_device: expected a tuple (device_type, "
                   "device_id) of two ints, got %s and %s",
                   Py_TYPE(PyTuple_GET_ITEM(dl_device, 0))->tp_name,
                   Py_TYPE(PyTuple_GET_ITEM(dl_device, 1))->tp_name);
      return NULL;
    }
    target = (DLDevice){(DLDeviceType)type, id};
    if (!want_copy && (type != (int)own.device_type || id != (int)own.device_id)) {
      PyErr_SetString(PyExc_BufferError, "packfn.Tensor.__dlpack__: cannot export to another "
                                         "device without a copy");
      return NULL;
    }
  }
  long major = 0;
  if (max_version != Py_None) {
    /* both refusals named no function, the second not max_version either (review); a major
     * too large for a long keeps its OverflowError */
    static const char expected[] =
        "packfn.Tensor.__dlpack__: max_version: expected a tuple (major, minor) of ints, got";
    if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1) {
      PyErr_Format(PyExc_TypeError, "%s %s", expected,
                   PyTuple_Check(max_version) ? "an empty tuple" : Py_TYPE(max_version)->tp_name);
      return NULL;
    }
    PyObject* item = PyTuple_GET_ITEM(max_version, 0);
    major = PyLong_AsLong(item);
    if (major == -1 && PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError))
        return NULL;
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s a major of type %s", expected, Py_TYPE(item)->tp_name);
      return NULL;
    }
  }
  if (want_copy) {
    pf_object_t* c;
    if (pf_tensor_to_device(obj, target, &c) != 0)
      return pfpy_raise_pf_error();
    PyObject* cap = dlpack_order_stream(stream, pf_tensor_dltensor(c)->device) == 0
                        ? dlpack_capsule(c, major, 1)
                        : NULL;
    pf_object_release(c); /* the capsule's export holds its own reference */
    return cap;
  }
  if (dlpack_order_stream(stream, own) != 0)
    return NULL;
  if (major < PF_DLPACK_VERSIONED_MAJOR && pf_tensor_is_read_only(obj) == 1) {
    /* a legacy capsule cannot say read-only, and its consumers write through it (review);
     * NumPy refuses the same */
    PyErr_SetString(PyExc_BufferError,
                    "packfn.Tensor.__dlpack__: a read-only tensor is exported only as a versioned "
                    "capsule (DLPack 1.0, max_version=(1, 0) or later), which marks it read-only, "
                    "or as a copy (copy=True)");
    return NULL;
  }
  return dlpack_capsule(obj, major, 0);
}
PFPY_ENTRY(PyObject*, tensor_dlpack, (PyObject * self, PyObject* args, PyObject* kw),
           (self, args, kw))

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
PFPY_ENTRY(PyObject*, tensor_repr, (PyObject * self), (self))

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
  int r = pfpy_tensor_from_object(src, &t);
  if (r == 0)
    PyErr_Format(PyExc_TypeError,
                 "packfn.Tensor: expected an object with __dlpack__ or the buffer protocol, "
                 "got '%s'",
                 Py_TYPE(src)->tp_name);
  return r > 0 ? pfpy_wrap_steal(t) : NULL;
}
PFPY_ENTRY(PyObject*, tensor_new, (PyTypeObject * tp, PyObject* args, PyObject* kw), (tp, args, kw))

static PyGetSetDef tensor_getset[] = {
    {"shape", tensor_shape, NULL, "extents, a tuple of ints", NULL},
    {"strides", tensor_strides, NULL, "strides in elements, a tuple of ints", NULL},
    {"ndim", tensor_ndim, NULL, "number of dimensions", NULL},
    {"dtype", tensor_dtype_entry, NULL, "data type name, e.g. 'float32'", NULL},
    {"device", tensor_device_entry, NULL, "device, e.g. 'cpu:0'", NULL},
    {"read_only", tensor_read_only, NULL, "True when the memory may not be written", NULL},
    {"data_ptr", tensor_data_ptr, NULL, "address of the first element", NULL},
    {"is_contiguous", tensor_contiguous, NULL, "True when compact row-major", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack_entry, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): DLPack capsule "
     "of the tensor, sharing its memory (a fresh copy on dl_device when copy is true)."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS, "(device_type, device_id)"},
    {NULL, NULL, 0, NULL}};

PyTypeObject Tensor_Type = {
    PF_TYPE_HEAD("Tensor",
                 "Tensor(obj): a packfn tensor over the memory of a DLPack or "
                 "buffer-protocol object, without a copy.",
                 pfpy_obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_base = &Object_Type,
    .tp_repr = tensor_repr_entry,
    .tp_getset = tensor_getset,
    .tp_methods = tensor_methods,
    .tp_new = tensor_new_entry,
};
