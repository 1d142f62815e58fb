/* packfn objects: the reference protocol (inline), weak references, allocation and the type
 * registry. Objects made by any runtime following the ABI are handled alike. */
#ifndef PACKFN_OBJECT_H_
#define PACKFN_OBJECT_H_

#include "packfn/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A new object starts at strong 1, weak 1: the strong references together hold one weak one. */
#define PF_REF_STRONG_ONE PF__CAST(uint64_t, 1)
#define PF_REF_WEAK_ONE   (PF__CAST(uint64_t, 1) << 32)
#define PF_REF_INITIAL    (PF_REF_WEAK_ONE | PF_REF_STRONG_ONE)

/* Adds a strong reference. `obj` must be alive (strong count > 0); NULL is a no-op. */
PF_INLINE void pf_object_retain(pf_object_t* obj) {
  if (obj)
    __atomic_fetch_add(&obj->combined_ref_count, PF_REF_STRONG_ONE, __ATOMIC_RELAXED);
}

/* Out-of-line tail of pf_object_release: runs the deleter for the last strong reference. */
PF_API void pf__object_release_slow(pf_object_t* obj, uint64_t before);

/* Out-of-line tail of pf_object_weak_release: runs the deleter for the last weak reference
 * (none when it is NULL). Raises nothing. */
PF_API void pf__object_weak_release_slow(pf_object_t* obj);

/* Drops a strong reference; the last one destroys the contents (deleter flag 1) and, when no
 * weak reference remains, frees the memory (flag 2, or 3 at once). NULL is a no-op; so is the
 * deleter call of an object whose deleter is NULL (memory owned elsewhere: an arena, static
 * storage; TVM-FFI's protocol allows it), whose last release then runs nothing. The
 * deleters of packfn's arrays, maps and errors release what they hold with bounded stack, so
 * releasing an arbitrarily deep chain of them does not overflow it; a custom type whose
 * deleter releases children recurses as deep as its chains. */
PF_INLINE void pf_object_release(pf_object_t* obj) {
  if (obj) {
    uint64_t before =
        __atomic_fetch_sub(&obj->combined_ref_count, PF_REF_STRONG_ONE, __ATOMIC_RELEASE);
    if (PF__CAST(uint32_t, before) == 1)
      pf__object_release_slow(obj, before);
  }
}

/* Adds a weak reference: keeps the memory (not the contents) alive. NULL is a no-op. */
PF_INLINE void pf_object_weak_retain(pf_object_t* obj) {
  if (obj)
    __atomic_fetch_add(&obj->combined_ref_count, PF_REF_WEAK_ONE, __ATOMIC_RELAXED);
}

/* Drops a weak reference; the last one frees the memory (deleter flag 2; nothing when the
 * deleter is NULL, as for pf_object_release). NULL is a no-op. */
PF_INLINE void pf_object_weak_release(pf_object_t* obj) {
  if (obj) {
    uint64_t before =
        __atomic_fetch_sub(&obj->combined_ref_count, PF_REF_WEAK_ONE, __ATOMIC_RELEASE);
    if (before == PF_REF_WEAK_ONE)
      pf__object_weak_release_slow(obj);
  }
}

/* Promotes a weak reference: returns 1 having added a strong reference when the object is
 * still alive, 0 when its contents are already destroyed (or obj is NULL). The weak
 * reference the caller holds is untouched either way. Safe against a concurrent last release. */
PF_INLINE int pf_object_weak_lock(pf_object_t* obj) {
  if (!obj)
    return 0;
  uint64_t cur = __atomic_load_n(&obj->combined_ref_count, __ATOMIC_RELAXED);
  while (PF__CAST(uint32_t, cur) != 0) {
    if (__atomic_compare_exchange_n(&obj->combined_ref_count, &cur, cur + PF_REF_STRONG_ONE, 1,
                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return 1;
  }
  return 0;
}

/* Strong count of `obj` (a snapshot; for tests and diagnostics). 0 for NULL. */
PF_INLINE uint32_t pf_object_strong_count(const pf_object_t* obj) {
  return obj ? PF__CAST(uint32_t, __atomic_load_n(&obj->combined_ref_count, __ATOMIC_ACQUIRE)) : 0;
}

/* Weak count of `obj` (a snapshot, including the one the strong references hold). */
PF_INLINE uint32_t pf_object_weak_count(const pf_object_t* obj) {
  return obj ? PF__CAST(uint32_t, __atomic_load_n(&obj->combined_ref_count, __ATOMIC_ACQUIRE) >> 32)
             : 0;
}

/* Allocates `size` bytes (>= sizeof(pf_object_t)), zeroed, aligned to 16 bytes, with the
 * header initialised: counts strong 1 / weak 1, `type_index`, `deleter`. The deleter receives
 * PF_DELETER_* flags; on flag 2 it must call pf_object_free(self).
 * Returns 0 and a new reference in *out, or -1 (MemoryError, or ValueError for a size below
 * the header, a NULL deleter or out, or a type index below 64); *out is then NULL (when out is
 * not). */
PF_API int pf_object_alloc(size_t size, int32_t type_index, void (*deleter)(void* self, int flags),
                           pf_object_t** out);

/* Frees the memory of an object made by pf_object_alloc; for deleters on flag 2 (no reference
 * of any kind may remain). NULL is a no-op. Never fails. */
PF_API void pf_object_free(void* obj);

/* ---- type registry ---- */

/* What the registry knows of a type. Entries live as long as the process. */
typedef struct pf_type_info_s {
  int32_t type_index;       /* the index */
  int32_t depth;            /* 0 for the root object type, parent's depth + 1 otherwise */
  const char* key;          /* unique name, e.g. "packfn.Tensor" or "my.Point" */
  const int32_t* ancestors; /* ancestors[d] for d < depth: index of the ancestor at depth d */
  int32_t parent_index;     /* ancestors[depth - 1], or -1 for the root */
} pf_type_info_t;

/* Registers a new object type `key` deriving from `parent_index` (PF_TYPE_OBJECT for a plain
 * object) and stores its new index (>= PF_TYPE_DYN_BEGIN) in *out: from TVM-FFI's registry once
 * packfn has joined it (interop.h), from 8192 up before (docs/object.md). Registering an existing
 * key with the same parent returns its index again. Thread-safe. Fails (-1) with ValueError for a
 * NULL/empty key or NULL out, KeyError for a key registered with another parent (or, joined,
 * taken by one of TVM-FFI's value types: "int", "Device", ...), TypeError for
 * an unknown or value-type parent, MemoryError, or RuntimeError when the table is full; *out is
 * then left as it was. */
PF_API int pf_type_register(const char* key, int32_t parent_index, int32_t* out);

/* Looks up a type key: 0 with its index in *out. Follows the lookup rule (see
 * packfn/function.h): an unregistered key gives 0 with *out = -1 and raises nothing. -1 with
 * ValueError for NULL arguments (*out, when out is not NULL, is then left as it was). */
PF_API int pf_type_index_of(const char* key, int32_t* out);

/* Borrowed info of an object type index (valid for the rest of the process), or NULL when no
 * such type is registered (value types below 64 have no info). Never raises. Lock-free for an
 * index packfn knows; once joined with TVM-FFI, an index it has not seen takes the registry's
 * lock and one pass over TVM-FFI's type keys (docs/object.md). */
PF_API const pf_type_info_t* pf_type_info(int32_t type_index);

/* Human name of any type index, for messages: "int", "str", "Tensor", a registered key, or
 * "unknown" for an index nothing knows; borrowed, valid for the rest of the process. Never
 * NULL, never raises. */
PF_API const char* pf_type_name(int32_t type_index);

/* 1 when `type_index` is `target` or derives from it, else 0 (an index nothing knows derives
 * from nothing). Never raises. O(1) and lock-free for indices packfn knows; joined with
 * TVM-FFI, an index it has not seen costs a locked pass over TVM-FFI's type keys, as
 * pf_type_info. */
PF_API int pf_type_is_instance(int32_t type_index, int32_t target);

/* 1 when `obj` is non-NULL and an instance of `target`, else 0. Borrows obj; never raises. */
PF_INLINE int pf_object_is_instance(const pf_object_t* obj, int32_t target) {
  return obj != PF__NULL &&
         (obj->type_index == target || pf_type_is_instance(obj->type_index, target));
}

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_OBJECT_H_ */
