/* Objects: allocation (pf_object_alloc, pf_object_free) and type registration
 * (pf_type_register, pf_type_index_of). These raise errors; the parts every layer needs
 * without raising live below errors: the release slow path (refcount.c) and the registry's
 * table and readers (type.c). */
#include <pthread.h>
#include <stdio.h>
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

int pf_type_index_of(const char* key, int32_t* out) {
  if (!key || !out) {
    return PF__NULL_ARG("pf_type_index_of", key ? "out" : "key");
  }
  pf__types_ensure();
  (void)pf__tvm_first_use(); /* may join: before the lock */
  pthread_mutex_lock(&pf__types_lock);
  const pf__tvm_t* tvm = pf__tvm(); /* under the lock the join's type hook takes */
  size_t key_len = strlen(key);
  pf__type_entry_t* e =
      tvm ? pf__type_from_tvm_key(tvm, key, key_len) : pf__type_find_key(key, key_len);
  pthread_mutex_unlock(&pf__types_lock);
  *out = e ? e->info.type_index : -1; /* the lookup rule: absent is no error */
  return 0;
}

/* Indices a block of TVM-FFI's registry holds (a reserving type's child slots, below). */
#define PF__TYPE_BLOCK 16

/* Joined, caller holds the lock: an index above `above` from a block of TVM-FFI's indices that
 * packfn reserved (a type "packfn.TypeBlock.<this copy>.<n>" under Object, given
 * PF__TYPE_BLOCK - 1 child slots it never hands out itself), or -1. A type registered at such an
 * index (a fixed one) is not checked against its parent's room for subtypes: asked to
 * allocate one, TVM-FFI ends the process for a parent that has no room and may not overflow it
 * (its built-in types but Object: Tensor, Array, String, ..., their subtypes, and its final
 * ones), where packfn alone registers it (review). */
static int32_t pf__type_block_index(const pf__tvm_t* tvm, int32_t above) {
  static int32_t next, end, blocks; /* under pf__types_lock */
  if (next <= above) /* a block from before the parent was registered: indices must grow */
    next = end;
  if (next == end) {
    char key[96];
    pf_byte_array_t k = {key, 0};
    /* a key TVM-FFI does not know yet: a copy of packfn loaded again at the same address (a
     * library holding it statically, closed and reloaded) would name its first block as the
     * copy before did, and be handed that block's taken indices (review) */
    do {
      k.size = (size_t)snprintf(key, sizeof key, "packfn.TypeBlock.%p.%d", (void*)&next, blocks++);
    } while (tvm->type_get_or_alloc_index(&k, -1, 0, 0, 0, -2) != -2);
    int32_t first = tvm->type_get_or_alloc_index(&k, -1, 1, PF__TYPE_BLOCK - 1, 0, PF_TYPE_OBJECT);
    if (first < 0)
      return -1;
    next = first + 1;
    end = first + PF__TYPE_BLOCK;
  }
  return next++;
}

/* Caller holds the lock: the index of a new type, from TVM-FFI's registry once joined (so the
 * two never collide), else from packfn's own counter; -1 with the error raised. Joined, a type
 * under Object is allocated by TVM-FFI, any other at an index of packfn's block
 * (pf__type_block_index). */
static int32_t pf__type_new_index(const pf__tvm_t* tvm, const char* key, size_t key_len,
                                  const pf__type_entry_t* parent) {
  int32_t index;
  if (tvm) {
    pf_byte_array_t k = {key, key_len};
    /* a key TVM-FFI gives a value type ("int", "Device", "ffi.SmallStr", ...): asked to
     * allocate it, TVM-FFI hands back that index, which read as a full table (review) */
    int32_t theirs = tvm->type_get_or_alloc_index(&k, -1, 0, 0, 0, -2); /* -2: unknown */
    if (theirs >= 0 && theirs < PF_TYPE_STATIC_OBJECT_BEGIN) {
      PF_ERROR_SET(PF_ERR_KEY,
                   "pf_type_register: type '%s' is already registered as the value type %s "
                   "(type index %d), not an object type",
                   key, pf_type_name(theirs), (int)theirs);
      return -1;
    }
    int32_t fixed = -1;
    if (parent->info.type_index != PF_TYPE_OBJECT &&
        (fixed = pf__type_block_index(tvm, parent->info.type_index)) < 0) {
      index = fixed;
    } else {
      index = tvm->type_get_or_alloc_index(&k, fixed, parent->info.depth + 1, 0, 1,
                                           parent->info.type_index);
    }
  } else {
    index = pf__next_own;
  }
  if (index < PF_TYPE_DYN_BEGIN || index >= PF__MAX_TYPES) {
    PF_ERROR_SET(PF_ERR_RUNTIME,
                 "pf_type_register: the type table is full (type index %d, at most %d)", (int)index,
                 PF__MAX_TYPES - 1);
    return -1;
  }
  return index;
}

int pf_type_register(const char* key, int32_t parent_index, int32_t* out) {
  if (!key || !*key || !out) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_type_register: argument %s: expected %s, got %s",
                 !out ? "out" : "key", !out ? "a pointer" : "a non-empty string",
                 !out ? "NULL" : (key ? "\"\"" : "NULL"));
    return -1;
  }
  pf__types_ensure();
  const pf__tvm_t* tvm = pf__tvm_first_use();
  const pf__type_entry_t* parent = pf__type_entry(parent_index);
  if (!parent) {
    PF_ERROR_SET(PF_ERR_TYPE,
                 "pf_type_register: argument parent_index: expected a registered object type, "
                 "got %d (%s)",
                 (int)parent_index, pf_type_name(parent_index));
    return -1;
  }
  int rc = -1;
  size_t key_len = strlen(key);
  pthread_mutex_lock(&pf__types_lock);
  /* read again under the lock the join's type hook takes: a registration that saw packfn
   * unjoined must be in packfn's table before the hook hands that table to TVM-FFI, and one
   * that runs after the hook must take its index from TVM-FFI's registry */
  tvm = pf__tvm();
  pf__type_entry_t* existing =
      tvm ? pf__type_from_tvm_key(tvm, key, key_len) : pf__type_find_key(key, key_len);
  if (existing) {
    if (existing->info.parent_index == parent_index) {
      *out = existing->info.type_index;
      rc = 0;
    } else {
      /* the root (Object) has no parent: "with parent Any" named a type it does not have */
      PF_ERROR_SET(PF_ERR_KEY, "pf_type_register: type '%s' is already registered %s%s, not %s",
                   key, existing->info.parent_index < 0 ? "as the root type" : "with parent ",
                   existing->info.parent_index < 0 ? "" : pf_type_name(existing->info.parent_index),
                   pf_type_name(parent_index));
    }
    goto done;
  }
  int32_t index = pf__type_new_index(tvm, key, key_len, parent);
  if (index < 0)
    goto done;
  if (!pf__type_publish(index, key, key_len, parent)) {
    if (pf__keyed_count >= PF__MAX_KEYED_TYPES)
      PF_ERROR_SET(PF_ERR_RUNTIME, "pf_type_register: the type table is full (%d types)",
                   PF__MAX_KEYED_TYPES);
    else
      pf__raise_oom("pf_type_register", sizeof(pf__type_entry_t) + key_len);
    goto done;
  }
  if (!tvm)
    ++pf__next_own;
  *out = index;
  rc = 0;
done:
  pthread_mutex_unlock(&pf__types_lock);
  return rc;
}
