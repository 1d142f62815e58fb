/* Private helpers shared by the container sources (prefix pf__): the value-owning rules every
 * container applies (map.c) and the map/dict cell (TVM-FFI's MapBaseObj layout). Not installed. */
#ifndef PACKFN_SRC_CONTAINER_PRIVATE_H_
#define PACKFN_SRC_CONTAINER_PRIVATE_H_

#include "packfn/container.h"

/* 0 when `v` has an owned form pf_any_to_owned can make without failing other than on memory;
 * else raises naming func and item i (pf__item_name(names, i), formatted only then). With
 * owned_only, views (types 7-10) are refused too. */
int pf__check_ownable(const char* func, const char* const* names, size_t i, const pf_any_t* v,
                      int owned_only);

/* Names item i in messages: names[i], or "items[i]" written into buf. */
const char* pf__item_name(const char* const* names, size_t i, char* buf, size_t size);

/* Makes owned copies of views[0..n) in out[0..n); on failure nothing is retained or moved
 * (rvalue references keep their objects) and -1 is returned with the error raised. The packfn
 * maps among the values are frozen. Two rvalue references to the same handle are refused
 * (ValueError): its reference can move once. pf__own_begin + pf__freeze_maps. */
int pf__own_all(const char* func, const char* const* names, const pf_any_t* views, size_t n,
                pf_any_t* out);

/* The first half of pf__own_all, for a caller with a step that can still fail after the values
 * are owned: copies the values (retains, string objects) and takes the objects of the rvalue
 * references out of their handles. The caller then either keeps out[0..n) (and calls
 * pf__freeze_maps) or calls pf__own_abort, which puts everything back. On failure it has
 * already put everything back: -1 with the error raised. */
int pf__own_begin(const char* func, const char* const* names, const pf_any_t* views, size_t n,
                  pf_any_t* out);

/* Undoes pf__own_begin: releases the copies and gives each rvalue reference's handle its object
 * back; out[0..n) is left none. */
void pf__own_abort(const pf_any_t* views, pf_any_t* out, size_t n);

/* Freezes the packfn maps among owned values (a map stored in a container never changes). */
void pf__freeze_maps(const pf_any_t* values, size_t n);

/* The object a value holds or an rvalue reference points at, else NULL. Inline: every list and
 * map write asks it (a call each before). */
static inline const pf_object_t* pf__object_of(const pf_any_t* v) {
  if (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    return v->v_obj;
  if (v->type_index == PF_TYPE_OBJECT_RVALUE_REF && v->v_ptr)
    return *(pf_object_t* const*)v->v_ptr;
  return PF__NULL;
}

/* 1 when obj is a map (72) or dict (76), made by any runtime following TVM-FFI's layout. */
static inline int pf__is_mapbase(const pf_object_t* obj) {
  return obj && (obj->type_index == PF_TYPE_MAP || obj->type_index == PF_TYPE_DICT);
}

/* Number of entries of a map or dict (pf__is_mapbase checked by the caller). */
size_t pf__mapbase_size(const pf_object_t* map);

/* The value stored under an owned key in a map or dict, borrowed, or NULL when absent. */
const pf_any_t* pf__mapbase_find(const pf_object_t* map, const pf_any_t* key);

#endif /* PACKFN_SRC_CONTAINER_PRIVATE_H_ */
