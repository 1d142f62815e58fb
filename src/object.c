/* Objects: allocation, the slow half of release, and the type registry (static indices plus
 * registered types from 128 on, with O(1) is-instance through per-type ancestor arrays). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/object.h"

#include "common.h"
#include "alloc.h"

/* Runs the deleter of an object whose last strong reference was just dropped (`before`: the
 * count before that drop), then drops the weak reference the strong ones held. */
static void pf__object_destroy(pf_object_t* obj, uint64_t before) {
  if (before == PF_REF_INITIAL) {
    /* no weak reference besides the strong references' own: destroy and free at once */
    obj->deleter(obj, PF_DELETER_BOTH);
    return;
  }
  obj->deleter(obj, PF_DELETER_STRONG);
  uint64_t weak_before =
      __atomic_fetch_sub(&obj->combined_ref_count, PF_REF_WEAK_ONE, __ATOMIC_RELEASE);
  if (weak_before == PF_REF_WEAK_ONE) {
    (void)__atomic_load_n(&obj->combined_ref_count, __ATOMIC_ACQUIRE);
    obj->deleter(obj, PF_DELETER_WEAK);
  }
}

/* Destructions nested deeper than this inside deleters are deferred (issue 10, defect 8): a
 * chain of a million arrays would otherwise recurse a million times. Shallow nesting, the
 * common case, still runs at once, in the usual order. */
#define PF__RELEASE_NEST_MAX 64

typedef struct {
  pf_object_t* obj;
  uint64_t before;
} pf__deferred_t;

/* This thread's release state: how deep in deleters it is, and the deferred destructions,
 * which the outermost release runs before it returns. */
typedef struct {
  pf__deferred_t* items;
  size_t count;
  size_t capacity;
  uint32_t depth;
} pf__release_state_t;

static PF__TLS pf__release_state_t pf__release_state;

/* Queues a destruction; 0 when out of memory (the caller then runs it at once). */
static int pf__release_defer(pf__release_state_t* st, pf_object_t* obj, uint64_t before) {
  if (st->count == st->capacity) {
    size_t cap = st->capacity ? 2 * st->capacity : 64;
    pf__deferred_t* items = realloc(st->items, cap * sizeof *items);
    if (!items)
      return 0;
    st->items = items;
    st->capacity = cap;
  }
  st->items[st->count++] = (pf__deferred_t){obj, before};
  return 1;
}

void pf__object_release_slow(pf_object_t* obj, uint64_t before) {
  /* an acquire load, not a fence: it orders the deleter after every other thread's release
   * (all of them precede this load in the count's modification order), and ThreadSanitizer
   * models it, where it does not model fences (issue 10, defect 10) */
  (void)__atomic_load_n(&obj->combined_ref_count, __ATOMIC_ACQUIRE);
  pf__release_state_t* st = &pf__release_state;
  if (st->depth >= PF__RELEASE_NEST_MAX && pf__release_defer(st, obj, before))
    return;
  st->depth++;
  pf__object_destroy(obj, before);
  if (st->depth == 1 && st->items) {
    /* outermost: run what was deferred; its own deep releases queue more */
    while (st->count > 0) {
      pf__deferred_t d = st->items[--st->count];
      pf__object_destroy(d.obj, d.before);
    }
    free(st->items);
    st->items = NULL;
    st->capacity = 0;
  }
  st->depth--;
}

int pf_object_alloc(size_t size, int32_t type_index, void (*deleter)(void* self, int flags),
                    pf_object_t** out) {
  if (!out) {
    return PF__NULL_ARG("pf_object_alloc", "out");
  }
  *out = NULL;
  if (size < sizeof(pf_object_t)) {
    pf_error_set(PF_ERR_VALUE,
                 "pf_object_alloc: argument size: expected at least %zu bytes, got %zu",
                 sizeof(pf_object_t), size);
    return -1;
  }
  if (type_index < PF_TYPE_STATIC_OBJECT_BEGIN) {
    pf_error_set(PF_ERR_VALUE,
                 "pf_object_alloc: argument type_index: expected an object type index (>= 64), "
                 "got %d",
                 (int)type_index);
    return -1;
  }
  if (!deleter) {
    pf_error_set(PF_ERR_VALUE, "pf_object_alloc: argument deleter: expected a function, got NULL");
    return -1;
  }
  pf_object_t* obj = pf__alloc(size);
  if (!obj)
    return pf__raise_oom("pf_object_alloc", size);
  memset(obj, 0, size);
  pf__object_init(obj, type_index, deleter);
  *out = obj;
  return 0;
}

void pf_object_free(void* obj) {
  pf__free(obj);
}

/* ---- type registry ---- */

/* Most types a process may hold. Indices are never reused, so the table only grows; 4096
 * leaves room for thousands of registered types while keeping the table one 32 KiB array. */
#define PF__MAX_TYPES 4096

typedef struct {
  pf_type_info_t info;
  const char* short_name; /* for messages */
} pf__type_entry_t;

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
static pf__type_entry_t* pf__types[PF__MAX_TYPES];
static pthread_mutex_t pf__types_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pf__types_once = PTHREAD_ONCE_INIT;
static int32_t pf__next_type = PF_TYPE_DYN_BEGIN;

static void pf__types_init(void) {
  for (size_t i = 0; i < PF__ARRAY_SIZE(pf__static_types); ++i)
    __atomic_store_n(&pf__types[pf__static_types[i].info.type_index], &pf__static_types[i],
                     __ATOMIC_RELEASE);
}

static const pf__type_entry_t* pf__type_entry(int32_t type_index) {
  if (type_index < PF_TYPE_STATIC_OBJECT_BEGIN || type_index >= PF__MAX_TYPES)
    return NULL;
  pthread_once(&pf__types_once, pf__types_init);
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

/* Caller holds the lock. */
static pf__type_entry_t* pf__type_find_key(const char* key) {
  for (int32_t i = PF_TYPE_STATIC_OBJECT_BEGIN; i < pf__next_type; ++i) {
    pf__type_entry_t* e = pf__types[i];
    if (e && strcmp(e->info.key, key) == 0)
      return e;
  }
  return NULL;
}

int pf_type_index_of(const char* key, int32_t* out) {
  if (!key || !out) {
    return PF__NULL_ARG("pf_type_index_of", key ? "out" : "key");
  }
  pthread_once(&pf__types_once, pf__types_init);
  pthread_mutex_lock(&pf__types_lock);
  pf__type_entry_t* e = pf__type_find_key(key);
  pthread_mutex_unlock(&pf__types_lock);
  *out = e ? e->info.type_index : -1; /* the lookup rule: absent is no error */
  return 0;
}

int pf_type_register(const char* key, int32_t parent_index, int32_t* out) {
  if (!key || !*key || !out) {
    pf_error_set(PF_ERR_VALUE, "pf_type_register: argument %s: expected %s, got %s",
                 !out ? "out" : "key", !out ? "a pointer" : "a non-empty string",
                 !out ? "NULL" : (key ? "\"\"" : "NULL"));
    return -1;
  }
  pthread_once(&pf__types_once, pf__types_init);
  const pf__type_entry_t* parent = pf__type_entry(parent_index);
  if (!parent) {
    pf_error_set(PF_ERR_TYPE,
                 "pf_type_register: argument parent_index: expected a registered object type, "
                 "got %d (%s)",
                 (int)parent_index, pf_type_name(parent_index));
    return -1;
  }
  int rc = -1;
  pthread_mutex_lock(&pf__types_lock);
  pf__type_entry_t* existing = pf__type_find_key(key);
  if (existing) {
    if (existing->info.parent_index == parent_index) {
      *out = existing->info.type_index;
      rc = 0;
    } else {
      pf_error_set(PF_ERR_KEY,
                   "pf_type_register: type '%s' is already registered with parent %s, not %s", key,
                   pf_type_name(existing->info.parent_index), pf_type_name(parent_index));
    }
    goto done;
  }
  if (pf__next_type >= PF__MAX_TYPES) {
    pf_error_set(PF_ERR_RUNTIME, "pf_type_register: the type table is full (%d types)",
                 PF__MAX_TYPES);
    goto done;
  }
  int32_t depth = parent->info.depth + 1;
  size_t key_len = strlen(key);
  size_t size = sizeof(pf__type_entry_t) + sizeof(int32_t) * (size_t)depth + key_len + 1;
  pf__type_entry_t* e = malloc(size);
  if (!e) {
    pf__raise_oom("pf_type_register", size);
    goto done;
  }
  int32_t* ancestors = (int32_t*)(e + 1);
  char* key_copy = (char*)(ancestors + depth);
  for (int32_t d = 0; d < parent->info.depth; ++d)
    ancestors[d] = parent->info.ancestors[d];
  ancestors[depth - 1] = parent_index;
  memcpy(key_copy, key, key_len + 1);
  e->info.type_index = pf__next_type;
  e->info.depth = depth;
  e->info.key = key_copy;
  e->info.ancestors = ancestors;
  e->info.parent_index = parent_index;
  e->short_name = key_copy;
  __atomic_store_n(&pf__types[pf__next_type], e, __ATOMIC_RELEASE);
  *out = pf__next_type++;
  rc = 0;
done:
  pthread_mutex_unlock(&pf__types_lock);
  return rc;
}

/* Registered types live as long as the process; free them at exit so leak checkers see a
 * clean heap. Nothing may use the registry after this. */
__attribute__((destructor)) static void pf__types_fini(void) {
  for (int32_t i = PF_TYPE_DYN_BEGIN; i < pf__next_type; ++i) {
    free(pf__types[i]);
    pf__types[i] = NULL;
  }
}
