/* packfn.Object, the base of every packfn type: a C object seen from Python (identity, hash,
 * type index), handed to TVM-FFI's Python by __tvm_ffi_object__; and C objects wrapped in the
 * Python type of their kind, a Function told whether its calls give it owned tensors. */

#include "_packfn.h"

#include <link.h>

/* Where libpackfn's code lies: the loaded segment holding the deleters of the function
 * objects packfn's runtime makes (found at import by pfpy_find_packfn_code; both 0 when it was not
 * found, and then every function is given owned tensors). */
static uintptr_t packfn_code_begin, packfn_code_end;

/* dl_iterate_phdr's callback for pfpy_find_packfn_code: the loaded segment holding the address
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
 * fn_origin. */
void pfpy_find_packfn_code(const pf_object_t* fn) {
  uintptr_t mark = (uintptr_t)fn->deleter;
  dl_iterate_phdr(note_code_segment, &mark);
}

/* Who made function `fn`, which decides how a call from Python passes it tensors: 0, packfn's
 * runtime (kernels, exports of load_module's libraries, C closures made with
 * pf_function_create*), which borrows a DLTensor for the call only, as the C convention for
 * views says, and takes the stack form; 1, packfn's Python callbacks, and 2, every other
 * runtime (TVM-FFI's functions, its Python callbacks among them), which may keep their
 * arguments: owned tensors. A function of another runtime also gets no read-only tensor
 * (TVM-FFI's tensors carry no read-only flag: it could write into it; review). When
 * libpackfn's code was not found, every function is 2: all get owned tensors, and
 * pfpy_wrap_steal marks none foreign (that would refuse read-only tensors to every kernel). */
static int fn_origin(pf_object_t* fn) {
  uintptr_t d = (uintptr_t)__atomic_load_n(&fn->deleter, __ATOMIC_RELAXED);
  if (d - packfn_code_begin >= packfn_code_end - packfn_code_begin)
    return 2; /* not made by packfn's runtime */
  if (PySet_GET_SIZE(pfpy_callback_fns) == 0)
    return 0;
  PyObject* key = PyLong_FromVoidPtr(fn);
  int r = key ? PySet_Contains(pfpy_callback_fns, key) : -1;
  Py_XDECREF(key);
  if (r < 0) { /* cannot tell: the safe form, owned tensors and read-only ones accepted */
    PyErr_Clear();
    return 1;
  }
  return r;
}

/* Wraps a new reference (stolen) in the Python type of its kind. NULL obj gives None. */
PyObject* pfpy_wrap_steal(pf_object_t* obj) {
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
  self->vectorcall = tp == &Function_Type ? pfpy_fn_vectorcall : NULL;
  int origin = tp == &Function_Type ? fn_origin(obj) : 0;
  self->owned_args = origin != 0;
  self->foreign = origin == 2 && packfn_code_end != packfn_code_begin;
  self->weakrefs = NULL;
  return (PyObject*)self;
}

void pfpy_obj_dealloc(PyObject* self) {
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

Py_hash_t pfpy_obj_hash(PyObject* self) {
  Py_hash_t h = (Py_hash_t)((uintptr_t)((PfObject*)self)->obj >> 4);
  return h == -1 ? -2 : h;
}

PyObject* pfpy_obj_richcompare(PyObject* a, PyObject* b, int op) {
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
 * then in its table): ImportError/RuntimeError otherwise. A read-only tensor is refused with
 * BufferError: TVM-FFI's tensors carry no read-only flag, so it would become writable there
 * (its __dlpack__ exports flags 0; review), as a legacy DLPack capsule would make it. */
static _Thread_local pf_object_t* tvm_handoff; /* the object being handed off, or NULL */

int pfpy_tvm_handoff_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
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
  pf_any_t self_any = pf_any_object(((PfObject*)self)->obj);
  int read_only = pfpy_holds_read_only(&self_any, PFPY_READ_ONLY_DEPTH);
  if (read_only < 0)
    return NULL;
  if (read_only) {
    PyErr_Format(PyExc_BufferError,
                 "%s.__tvm_ffi_object__: a read-only tensor%s is not handed to TVM-FFI, whose "
                 "tensors carry no read-only flag (it would become writable there); hand it a "
                 "writable copy",
                 Py_TYPE(self)->tp_name,
                 self_any.type_index == PF_TYPE_TENSOR ? "" : " (in this container)");
    return NULL;
  }
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
PFPY_ENTRY(PyObject*, obj_tvm_ffi_object, (PyObject * self, PyObject* unused), (self, unused))

static PyMethodDef obj_methods[] = {
    {"__tvm_ffi_object__", obj_tvm_ffi_object_entry, METH_NOARGS,
     "__tvm_ffi_object__() -> tvm_ffi.Object: the same C object seen from TVM-FFI's Python"},
    {NULL, NULL, 0, NULL}};

PyObject* pfpy_obj_new_forbidden(PyTypeObject* tp, PyObject* a, PyObject* k) {
  (void)a;
  (void)k;
  PyErr_Format(PyExc_TypeError, "cannot create '%s' instances directly", tp->tp_name);
  return NULL;
}

PyTypeObject Object_Type = {
    PF_TYPE_HEAD("Object", "A packfn object (reference-counted C object).", pfpy_obj_richcompare),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_repr = obj_repr,
    .tp_getset = obj_getset,
    .tp_methods = obj_methods,
    .tp_new = pfpy_obj_new_forbidden,
};
