/* The type registry's table and its readers: static indices plus registered types from 128 on,
 * with O(1) is-instance through per-type ancestor arrays. Raises nothing (errors name types
 * through it); registration, which raises, is in object.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/object.h"

#include "common.h"
#include "tvm_private.h"
#include "type_private.h"

static const int32_t pf__root_ancestors[1] = {PF_TYPE_OBJECT};

#define PF__STATIC_TYPE(idx, key, name)                                                            \
  {                                                                                                \
    {(idx), (idx) == PF_TYPE_OBJECT ? 0 : 1, (key), pf__root_ancestors,                            \
     (idx) == PF_TYPE_OBJECT ? -1 : PF_TYPE_OBJECT},                                               \
        (name)                                                                                     \
  }

static pf__type_entry_t pf__static_types[] = {
    PF__STATIC_TYPE(PF_TYPE_OBJECT, "ffi.Object", "Object"),
    PF__STATIC_TYPE(PF_TYPE_STR, "ffi.String", "str"),
    PF__STATIC_TYPE(PF_TYPE_BYTES, "ffi.Bytes", "bytes"),
    PF__STATIC_TYPE(PF_TYPE_ERROR, "ffi.Error", "Error"),
    PF__STATIC_TYPE(PF_TYPE_FUNCTION, "ffi.Function", "Function"),
    PF__STATIC_TYPE(PF_TYPE_SHAPE, "ffi.Shape", "Shape"),
    PF__STATIC_TYPE(PF_TYPE_TENSOR, "ffi.Tensor", "Tensor"),
    PF__STATIC_TYPE(PF_TYPE_ARRAY, "ffi.Array", "Array"),
    PF__STATIC_TYPE(PF_TYPE_MAP, "ffi.Map", "Map"),
    PF__STATIC_TYPE(PF_TYPE_MODULE, "ffi.Module", "Module"),
    PF__STATIC_TYPE(PF_TYPE_OPAQUE_HOST_OBJECT, "ffi.OpaquePyObject", "OpaqueHostObject"),
    PF__STATIC_TYPE(PF_TYPE_LIST, "ffi.List", "List"),
    PF__STATIC_TYPE(PF_TYPE_DICT, "ffi.Dict", "Dict"),
};

/* index -> entry; static entries are set on first use, dynamic ones are published with a
 * release store after they are complete, so readers need no lock. */
pf__type_entry_t* pf__types[PF__MAX_TYPES];
pthread_mutex_t pf__types_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pf__types_once = PTHREAD_ONCE_INIT;
int32_t pf__next_type = PF_TYPE_DYN_BEGIN;

static void pf__types_init(void) {
  for (size_t i = 0; i < PF__ARRAY_SIZE(pf__static_types); ++i)
    __atomic_store_n(&pf__types[pf__static_types[i].info.type_index], &pf__static_types[i],
                     __ATOMIC_RELEASE);
}

void pf__types_ensure(void) {
  pthread_once(&pf__types_once, pf__types_init);
}

const pf__type_entry_t* pf__type_entry(int32_t type_index) {
  if (type_index < PF_TYPE_STATIC_OBJECT_BEGIN || type_index >= PF__MAX_TYPES)
    return NULL;
  pf__types_ensure();
  return __atomic_load_n(&pf__types[type_index], __ATOMIC_ACQUIRE);
}

const pf_type_info_t* pf_type_info(int32_t type_index) {
  const pf__type_entry_t* e = pf__type_entry(type_index);
  return e ? &e->info : NULL;
}

int pf_type_is_instance(int32_t type_index, int32_t target) {
  if (type_index == target)
    return 1;
  const pf__type_entry_t* t = pf__type_entry(type_index);
  const pf__type_entry_t* g = pf__type_entry(target);
  if (!t || !g || g->info.depth >= t->info.depth)
    return 0;
  return t->info.ancestors[g->info.depth] == target;
}

const char* pf_type_name(int32_t type_index) {
  switch (type_index) {
  case PF_TYPE_ANY:
    return "Any";
  case PF_TYPE_NONE:
    return "None";
  case PF_TYPE_INT:
    return "int";
  case PF_TYPE_BOOL:
    return "bool";
  case PF_TYPE_FLOAT:
    return "float";
  case PF_TYPE_OPAQUE_PTR:
    return "void*";
  case PF_TYPE_DTYPE:
    return "dtype";
  case PF_TYPE_DEVICE:
    return "Device";
  case PF_TYPE_DLTENSOR_PTR:
    return "DLTensor*";
  case PF_TYPE_RAW_STR:
  case PF_TYPE_SMALL_STR:
    return "str";
  case PF_TYPE_BYTE_ARRAY_PTR:
  case PF_TYPE_SMALL_BYTES:
    return "bytes";
  case PF_TYPE_OBJECT_RVALUE_REF:
    return "ObjectRValueRef";
  default:
    break;
  }
  const pf__type_entry_t* e = pf__type_entry(type_index);
  return e ? e->short_name : "unknown";
}

/* Registered types live as long as the process; free them at exit so leak checkers see a
 * clean heap. Nothing may use the registry after this. */
__attribute__((destructor)) static void pf__types_fini(void) {
  for (int32_t i = PF_TYPE_DYN_BEGIN; i < pf__next_type; ++i) {
    free(pf__types[i]);
    pf__types[i] = NULL;
  }
}

/* Joining TVM-FFI (tvm.c): registered types move to its registry (issue 11). */
static void pf__type_tvm_joined(const pf__tvm_t* tvm) {
  (void)tvm;
}

__attribute__((constructor)) static void pf__type_tvm_joined_hook(void) {
  pf__tvm_join_hooks[PF__TVM_HOOK_TYPES] = pf__type_tvm_joined;
}
