/* Private helpers shared by the container sources (prefix pf__): the value-owning rules every
 * container applies (map.c; their one-pass common case inline here, for the writes that take it
 * without a call) and the map/dict cell (TVM-FFI's MapBaseObj layout). Not installed. */
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

/* The small string of C string c into *out when c holds at most 7 bytes (what pf_any_to_owned
 * makes of it, without a strlen of a long one): 1, else 0 with *out untouched. out may be the
 * value that points at c. */
static inline int pf__cstr_small(const char* c, pf_any_t* out) {
  size_t len = 0;
  while (len <= PF_SMALL_STR_MAX && c[len] != '\0')
    ++len;
  if (len > PF_SMALL_STR_MAX)
    return 0;
  pf__any_small(PF_TYPE_SMALL_STR, c, len, out);
  return 1;
}

/* The common values, owned as pf_any_to_owned makes them, in one pass: ints and floats, objects
 * (retained), bools, small strings and bytes, C strings of up to 7 bytes. Stops at the first other
 * value (views, rvalue references, other value types, NULL objects) and returns how many it owned,
 * out[0..done); *maps is set when a map was among them. Nothing raised. (A check pass and a
 * pf_any_to_owned call per value cost an array of 4 ints 540 instructions, TVM-FFI's 200; a
 * name formatted per value, 3500 before that.) */
static inline size_t pf__own_simple(const pf_any_t* views, size_t n, pf_any_t* out, int* maps) {
  for (size_t i = 0; i < n; ++i) {
    const pf_any_t* v = &views[i];
    int32_t t = v->type_index;
    if (t == PF_TYPE_INT || t == PF_TYPE_FLOAT) {
      out[i].v_int64 = v->v_int64;
    } else if (t >= PF_TYPE_STATIC_OBJECT_BEGIN && v->v_obj) {
      pf_object_retain(v->v_obj);
      out[i].v_obj = v->v_obj;
      *maps |= t == PF_TYPE_MAP;
    } else if (t == PF_TYPE_BOOL) {
      out[i].v_int64 = v->v_int64 != 0; /* 0 or 1, as pf_any_to_owned makes it */
    } else if ((t == PF_TYPE_SMALL_STR || t == PF_TYPE_SMALL_BYTES) &&
               v->small_str_len <= PF_SMALL_STR_MAX) {
      pf__any_small(t, v->v_bytes, v->small_str_len, &out[i]); /* its bytes made canonical */
      continue;
    } else if (t == PF_TYPE_RAW_STR && v->v_c_str) {
      /* a C string of up to 7 bytes becomes a small string (a map's usual key); longer ones
       * take the general path (a string object: an allocation that may fail) */
      if (!pf__cstr_small(v->v_c_str, &out[i]))
        return i;
      continue;
    } else {
      return i;
    }
    out[i].type_index = t;
    out[i].zero_padding = 0;
  }
  return n;
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
