/* Objects: allocation (pf_object_alloc, pf_object_free) and type registration
 * (pf_type_register, pf_type_index_of). These raise errors; the parts every layer needs
 * without raising live below errors: the release slow path (refcount.c) and the registry's
 * table and readers (type.c). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/object.h"

#include "alloc.h"
#include "common.h"
#include "type_private.h"

int pf_object_alloc(size_t size, int32_t type_index, void (*deleter)(void* self, int flags),
                    pf_object_t** out) {
  if (!out) {
    return PF__NULL_ARG("pf_object_alloc", "out");
  }
  *out = NULL;
  if (size < sizeof(pf_object_t)) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_object_alloc: argument size: expected at least %zu bytes, got %zu",
                 sizeof(pf_object_t), size);
    return -1;
  }
  if (type_index < PF_TYPE_STATIC_OBJECT_BEGIN) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_object_alloc: argument type_index: expected an object type index (>= 64), "
                 "got %d",
                 (int)type_index);
    return -1;
  }
  if (!deleter) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_object_alloc: argument deleter: expected a function, got NULL");
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
  pf__types_ensure();
  pthread_mutex_lock(&pf__types_lock);
  pf__type_entry_t* e = pf__type_find_key(key);
  pthread_mutex_unlock(&pf__types_lock);
  *out = e ? e->info.type_index : -1; /* the lookup rule: absent is no error */
  return 0;
}

int pf_type_register(const char* key, int32_t parent_index, int32_t* out) {
  if (!key || !*key || !out) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_type_register: argument %s: expected %s, got %s",
                 !out ? "out" : "key", !out ? "a pointer" : "a non-empty string",
                 !out ? "NULL" : (key ? "\"\"" : "NULL"));
    return -1;
  }
  pf__types_ensure();
  const pf__type_entry_t* parent = pf__type_entry(parent_index);
  if (!parent) {
    PF_ERROR_SET(PF_ERR_TYPE,
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
      PF_ERROR_SET(PF_ERR_KEY,
                   "pf_type_register: type '%s' is already registered with parent %s, not %s", key,
                   pf_type_name(existing->info.parent_index), pf_type_name(parent_index));
    }
    goto done;
  }
  if (pf__next_type >= PF__MAX_TYPES) {
    PF_ERROR_SET(PF_ERR_RUNTIME, "pf_type_register: the type table is full (%d types)",
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
