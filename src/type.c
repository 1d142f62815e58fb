/* The type registry's table and its readers: static indices plus registered types, with O(1)
 * is-instance through per-type ancestor arrays, and, once packfn has joined TVM-FFI, TVM-FFI's
 * types mirrored on first sight. Raises nothing (errors name types through it); registration,
 * which raises, is in object.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/object.h"

#include "common.h"
#include "tvm_private.h"
#include "type_private.h"
#include "module_private.h"

/* where this file's state (type registry) lives, for pf_module_load (module_private.h) */
PF__MARKER const char pf__marker_type = 0;

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
    PF__STATIC_TYPE(PF_TYPE_VISIT_INTERRUPT, "ffi.VisitInterrupt", "VisitInterrupt"),
    PF__STATIC_TYPE(PF_TYPE_BIG_INT, "ffi.BigInt", "BigInt"),
};

/* index -> entry; static entries are set on first use, dynamic ones are published with a
 * release store after they are complete, so readers need no lock. */
pf__type_entry_t* pf__types[PF__MAX_TYPES];
pthread_mutex_t pf__types_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork (alloc.c's handlers), after the join's lock and before pf__tvm_table */
void pf__types_fork_lock(void) {
  pthread_mutex_lock(&pf__types_lock);
}

void pf__types_fork_unlock(void) {
  pthread_mutex_unlock(&pf__types_lock);
}

static pthread_once_t pf__types_once = PTHREAD_ONCE_INIT;
int32_t pf__next_own = PF__TYPE_OWN_BEGIN;
pf__type_entry_t* pf__keyed[PF__MAX_KEYED_TYPES];
int32_t pf__keyed_count;

static void pf__types_init(void) {
  for (size_t i = 0; i < PF__ARRAY_SIZE(pf__static_types); ++i)
    __atomic_store_n(&pf__types[pf__static_types[i].info.type_index], &pf__static_types[i],
                     __ATOMIC_RELEASE);
}

static int pf__key_is(const char* a, const char* key, size_t key_len) {
  return strncmp(a, key, key_len) == 0 && a[key_len] == '\0';
}

pf__type_entry_t* pf__type_find_key(const char* key, size_t key_len) {
  for (size_t i = 0; i < PF__ARRAY_SIZE(pf__static_types); ++i)
    if (pf__key_is(pf__static_types[i].info.key, key, key_len))
      return &pf__static_types[i];
  for (int32_t i = 0; i < pf__keyed_count; ++i)
    if (pf__key_is(pf__keyed[i]->info.key, key, key_len))
      return pf__keyed[i];
  return NULL;
}

pf__type_entry_t* pf__type_publish(int32_t index, const char* key, size_t key_len,
                                   const pf__type_entry_t* parent) {
  if (pf__keyed_count >= PF__MAX_KEYED_TYPES)
    return NULL;
  int32_t depth = parent->info.depth + 1;
  size_t size = sizeof(pf__type_entry_t) + sizeof(int32_t) * (size_t)depth + key_len + 1;
  pf__type_entry_t* e = malloc(size);
  if (!e)
    return NULL;
  int32_t* ancestors = (int32_t*)(e + 1);
  char* key_copy = (char*)(ancestors + depth);
  for (int32_t d = 0; d < parent->info.depth; ++d)
    ancestors[d] = parent->info.ancestors[d];
  ancestors[depth - 1] = parent->info.type_index;
  memcpy(key_copy, key, key_len);
  key_copy[key_len] = '\0';
  e->info.type_index = index;
  e->info.depth = depth;
  e->info.key = key_copy;
  e->info.ancestors = ancestors;
  e->info.parent_index = parent->info.type_index;
  e->short_name = key_copy;
  pf__keyed[pf__keyed_count++] = e;
  __atomic_store_n(&pf__types[index], e, __ATOMIC_RELEASE);
  return e;
}

/* Caller holds the lock: mirrors a type TVM-FFI handed out (and, first, its ancestors). */
static pf__type_entry_t* pf__type_mirror(const pf__tvm_type_info_t* info) {
  int32_t index = info->type_index;
  if (index < PF_TYPE_STATIC_OBJECT_BEGIN || index >= PF__MAX_TYPES || info->type_depth < 1)
    return NULL;
  if (pf__types[index])
    return pf__types[index];
  const pf__tvm_type_info_t* up = info->type_ancestors[info->type_depth - 1];
  const pf__type_entry_t* parent = pf__type_mirror(up);
  if (!parent && up->type_index == PF_TYPE_OBJECT)
    parent = pf__types[PF_TYPE_OBJECT];
  if (!parent)
    return NULL;
  return pf__type_publish(index, info->type_key.data, info->type_key.size, parent);
}

pf__type_entry_t* pf__type_from_tvm_key(const pf__tvm_t* tvm, const char* key, size_t key_len) {
  pf__type_entry_t* e = pf__type_find_key(key, key_len);
  if (e)
    return e;
  pf_byte_array_t k = {key, key_len};
  /* parent -2: a lookup that allocates nothing, -2 when the key is unknown */
  int32_t index = tvm->type_get_or_alloc_index(&k, -1, 0, 0, 0, -2);
  if (index < PF_TYPE_STATIC_OBJECT_BEGIN)
    return NULL;
  return pf__type_mirror(tvm->get_type_info(index)); /* a handed-out index: safe to ask */
}

/* The text of a string value (a string object or a small string), or {NULL, 0}. */
static pf_byte_array_t pf__any_text(const pf_any_t* a) {
  if (a->type_index == PF_TYPE_STR && a->v_obj)
    return *(const pf_byte_array_t*)(a->v_obj + 1);
  if (a->type_index == PF_TYPE_SMALL_STR && a->small_str_len <= PF_SMALL_STR_MAX)
    return (pf_byte_array_t){a->v_bytes, a->small_str_len};
  return (pf_byte_array_t){NULL, 0};
}

/* Whether TVM-FFI's type `key` is one packfn could mirror (an object index within packfn's
 * table): a key that is not (a value type's, an index past PF__MAX_TYPES) failing to mirror is
 * no failure to retry. */
static int pf__type_mirrorable(const pf__tvm_t* tvm, pf_byte_array_t key) {
  int32_t index = tvm->type_get_or_alloc_index(&key, -1, 0, 0, 0, -2); /* -2: unknown */
  return index >= PF_TYPE_STATIC_OBJECT_BEGIN && index < PF__MAX_TYPES;
}

/* Joined, an index packfn has no entry for: mirrors every type TVM-FFI has registered
 * (ffi.GetRegisteredTypeKeys, each key looked up by key: TVMFFIGetTypeInfo ends the process
 * for an index it does not know, so it is only asked about indices it handed out). TVM-FFI's
 * function and type tables take no lock: the whole pass holds pf__types_lock (packfn's
 * registrations write TVM-FFI's type table under it) and the function lookup pf__tvm_table
 * too. A pass that finds as many keys as the last one adds nothing (TVM-FFI never drops a
 * type), so an index nobody registered costs one call, not a lookup per type. A failure is
 * dropped: a type lookup raises nothing. */
__attribute__((noinline)) static void pf__type_mirror_all(const pf__tvm_t* tvm) {
  static const pf_byte_array_t name = {"ffi.GetRegisteredTypeKeys", 25};
  static int64_t mirrored = -1; /* keys seen by the last full pass; under pf__types_lock */
  void* fn = NULL;
  pf_any_t keys = {0};
  keys.type_index = PF_TYPE_NONE;
  pthread_mutex_lock(&pf__types_lock);
  pthread_mutex_lock(&pf__tvm_table);
  int rc = tvm->function_get_global(&name, &fn);
  pthread_mutex_unlock(&pf__tvm_table);
  if (rc == 0 && fn)
    rc = tvm->function_call(fn, NULL, 0, &keys);
  if (rc != 0)
    pf__tvm_discard(tvm);
  if (rc == 0 && keys.type_index == PF_TYPE_ARRAY && keys.v_obj) {
    /* TVMFFISeqCell after the header: the elements, then their number */
    const pf_any_t* items = *(const pf_any_t* const*)(keys.v_obj + 1);
    int64_t n = *(const int64_t*)((const char*)(keys.v_obj + 1) + sizeof(void*));
    int whole = 1; /* every key mirrored: a failure (no memory, the table full) is retried */
    for (int64_t i = 0; n != mirrored && i < n; ++i) {
      pf_byte_array_t key = pf__any_text(&items[i]);
      if (key.data && !pf__type_from_tvm_key(tvm, key.data, key.size) &&
          pf__type_mirrorable(tvm, key))
        whole = 0;
    }
    if (whole)
      mirrored = n;
  }
  pthread_mutex_unlock(&pf__types_lock);
  pf_object_release((pf_object_t*)fn);
  if (keys.type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    pf_object_release(keys.v_obj);
}

void pf__types_ensure(void) {
  pthread_once(&pf__types_once, pf__types_init);
}

const pf__type_entry_t* pf__type_entry(int32_t type_index) {
  if (type_index < PF_TYPE_STATIC_OBJECT_BEGIN || type_index >= PF__MAX_TYPES)
    return NULL;
  pf__types_ensure();
  const pf__type_entry_t* e = __atomic_load_n(&pf__types[type_index], __ATOMIC_ACQUIRE);
  if (PF_UNLIKELY(!e)) {
    const pf__tvm_t* tvm = pf__tvm();
    if (tvm) {
      pf__type_mirror_all(tvm);
      e = __atomic_load_n(&pf__types[type_index], __ATOMIC_ACQUIRE);
    }
  }
  return e;
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
  case PF_TYPE_UNCHANGED:
    return "Unchanged";
  default:
    break;
  }
  const pf__type_entry_t* e = pf__type_entry(type_index);
  return e ? e->short_name : "unknown";
}

/* Registered types live as long as the process and are never freed: freeing them at exit let a
 * thread still running then (a detached one, a Python daemon thread) read freed entries (found by
 * review). Leak checkers count them as still reachable. */

/* Joining, caller holds the lock: TVM-FFI registered the key of packfn's pre-join type `t`
 * itself before the join (a library built for both runtimes), at another index. Objects carry
 * packfn's index and packfn's code holds it, so TVM-FFI learns that index under an alias key,
 * "<key>@packfn" (a number appended while that key is taken elsewhere), with packfn's parent:
 * asked about such an object, or about a subtype registered under it (the join's own loop),
 * it ended the process. packfn mirrors TVM-FFI's index of the key, which it named "unknown".
 * Raises nothing; out of memory, the alias is left out. */
static void pf__type_tvm_alias(const pf__tvm_t* tvm, const pf_type_info_t* t, int32_t theirs) {
  size_t len = strlen(t->key), cap = len + 32;
  char* key = malloc(cap);
  for (int n = 0; key && n < 16; ++n) {
    int w =
        n ? snprintf(key, cap, "%s@packfn.%d", t->key, n) : snprintf(key, cap, "%s@packfn", t->key);
    pf_byte_array_t alias = {key, (size_t)w};
    if (tvm->type_get_or_alloc_index(&alias, t->type_index, t->depth, 0, 1, t->parent_index) ==
        t->type_index)
      break;
  }
  free(key);
  if (theirs >= PF_TYPE_STATIC_OBJECT_BEGIN && theirs < PF__MAX_TYPES)
    (void)pf__type_mirror(tvm->get_type_info(theirs)); /* a handed-out index: safe to ask */
}

/* Joining TVM-FFI (tvm.c): the types packfn registered before (indices from
 * PF__TYPE_OWN_BEGIN) enter TVM-FFI's registry at the same indices. TVM-FFI takes a fixed
 * index only inside its table, so a reserving type (packfn.TypesBeforeJoin) first claims, as its
 * child slots, every index from TVM-FFI's counter up to packfn's last own one; its counter then
 * continues above them. When TVM-FFI's counter is already past PF__TYPE_OWN_BEGIN those indices may
 * be taken: the types then stay packfn's only (docs/object.md). */
static void pf__type_tvm_joined(const pf__tvm_t* tvm) {
  static const pf_byte_array_t block = {"packfn.TypesBeforeJoin", 22};
  pthread_mutex_lock(&pf__types_lock);
  int32_t own_end = pf__next_own;
  if (own_end > PF__TYPE_OWN_BEGIN) {
    /* another copy of packfn in the process made it: its block is not ours to fill */
    if (tvm->type_get_or_alloc_index(&block, -1, 0, 0, 0, -2) != -2)
      own_end = PF__TYPE_OWN_BEGIN;
  }
  if (own_end > PF__TYPE_OWN_BEGIN) {
    int32_t first =
        tvm->type_get_or_alloc_index(&block, -1, 1, own_end - PF_TYPE_DYN_BEGIN, 0, PF_TYPE_OBJECT);
    for (int32_t i = 0; first >= 0 && first < PF__TYPE_OWN_BEGIN && i < pf__keyed_count; ++i) {
      const pf_type_info_t* t = &pf__keyed[i]->info;
      if (t->type_index < PF__TYPE_OWN_BEGIN)
        continue;
      pf_byte_array_t key = {t->key, strlen(t->key)};
      int32_t got =
          tvm->type_get_or_alloc_index(&key, t->type_index, t->depth, 0, 1, t->parent_index);
      if (got != t->type_index) /* the key is TVM-FFI's already, at index `got` */
        pf__type_tvm_alias(tvm, t, got);
    }
  }
  pthread_mutex_unlock(&pf__types_lock);
}

__attribute__((constructor)) static void pf__type_tvm_joined_hook(void) {
  pf__tvm_join_hooks[PF__TVM_HOOK_TYPES] = pf__type_tvm_joined;
}
