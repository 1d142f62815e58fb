/* packfn values: Any constructors (inline), checked accessors, views versus owned values,
 * strings and bytes in their small and object forms, equality and hashing. */
#ifndef PACKFN_ANY_H_
#define PACKFN_ANY_H_

#include <string.h>

#include "packfn/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest string or bytes value stored inside the Any (the 8th byte holds the NUL). */
#define PF_SMALL_STR_MAX 7

/* ---- ownership ----
 * A *view* borrows: raw strings (8), byte-array pointers (9), DLTensor pointers (7), and any
 * object Any made with pf_any_object(). Arguments of a call are views.
 * An *owned* Any holds one strong reference when its type index is >= 64 and must be given
 * to pf_any_release() (or moved on). Results of calls and of *_create are owned.
 * Values below 64 other than 7-10 own nothing and may be copied freely. */

/* ---- constructors: never fail, never allocate ---- */

/* none */
PF_INLINE pf_any_t pf_any_none(void) {
  pf_any_t v;
  v.type_index = PF_TYPE_NONE;
  v.zero_padding = 0;
  v.v_int64 = 0;
  return v;
}
/* int */
PF_INLINE pf_any_t pf_any_int(int64_t x) {
  pf_any_t v;
  v.type_index = PF_TYPE_INT;
  v.zero_padding = 0;
  v.v_int64 = x;
  return v;
}
/* bool: any non-zero `x` is true (stored as 1) */
PF_INLINE pf_any_t pf_any_bool(int x) {
  pf_any_t v;
  v.type_index = PF_TYPE_BOOL;
  v.zero_padding = 0;
  v.v_int64 = x != 0;
  return v;
}
/* float */
PF_INLINE pf_any_t pf_any_float(double x) {
  pf_any_t v;
  v.type_index = PF_TYPE_FLOAT;
  v.zero_padding = 0;
  v.v_float64 = x;
  return v;
}
/* opaque pointer; NULL gives none (TVM-FFI's C++ makes an opaque pointer holding NULL of a
 * null void*: pf_any_as_ptr reads either as NULL, pf_any_equal tells them apart) */
PF_INLINE pf_any_t pf_any_ptr(void* p) {
  pf_any_t v;
  v.type_index = p ? PF_TYPE_OPAQUE_PTR : PF_TYPE_NONE;
  v.zero_padding = 0;
  v.v_int64 = 0;
  v.v_ptr = p;
  return v;
}
/* data type; the unused payload bytes are zero */
PF_INLINE pf_any_t pf_any_dtype(DLDataType t) {
  pf_any_t v;
  v.type_index = PF_TYPE_DTYPE;
  v.zero_padding = 0;
  v.v_int64 = 0;
  v.v_dtype = t;
  return v;
}
/* device */
PF_INLINE pf_any_t pf_any_device(DLDevice d) {
  pf_any_t v;
  v.type_index = PF_TYPE_DEVICE;
  v.zero_padding = 0;
  v.v_int64 = 0;
  v.v_device = d;
  return v;
}
/* view of a NUL-terminated string, borrowed; NULL gives none */
PF_INLINE pf_any_t pf_any_cstr(const char* s) {
  pf_any_t v;
  v.type_index = s ? PF_TYPE_RAW_STR : PF_TYPE_NONE;
  v.zero_padding = 0;
  v.v_int64 = 0;
  v.v_c_str = s;
  return v;
}
/* view of a byte array, borrowed (both the struct and its data); NULL gives none */
PF_INLINE pf_any_t pf_any_byte_array(const pf_byte_array_t* b) {
  pf_any_t v;
  v.type_index = b ? PF_TYPE_BYTE_ARRAY_PTR : PF_TYPE_NONE;
  v.zero_padding = 0;
  v.v_int64 = 0;
  /* through uintptr_t: no -Wcast-qual warning for includers */
  v.v_ptr = PF__REINTERPRET_CAST(void*, PF__REINTERPRET_CAST(uintptr_t, b));
  return v;
}
/* view of an object: no retain; NULL gives none */
PF_INLINE pf_any_t pf_any_object(pf_object_t* obj) {
  pf_any_t v;
  v.type_index = obj ? obj->type_index : PF_TYPE_NONE;
  v.zero_padding = 0;
  v.v_int64 = 0;
  v.v_obj = obj;
  return v;
}
/* view of a DLTensor, borrowed; NULL gives none */
PF_INLINE pf_any_t pf_any_dltensor(DLTensor* t) {
  pf_any_t v;
  v.type_index = t ? PF_TYPE_DLTENSOR_PTR : PF_TYPE_NONE;
  v.zero_padding = 0;
  v.v_int64 = 0;
  v.v_ptr = t;
  return v;
}

/* ---- ownership helpers (inline; no allocation) ----
 * `v` must point to a value (pf_any_release alone accepts NULL). */

/* 1 when the Any holds an object pointer (type index >= 64). */
PF_INLINE int pf_any_is_object(const pf_any_t* v) {
  return v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN;
}
/* Adds a reference for the caller when `v` holds an object (turning a view into an owned
 * value for object types); no-op otherwise. See pf_any_to_owned for views of other kinds. */
PF_INLINE void pf_any_retain(const pf_any_t* v) {
  if (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    pf_object_retain(v->v_obj);
}
/* Releases an owned value and leaves none in *v. NULL is a no-op. */
PF_INLINE void pf_any_release(pf_any_t* v) {
  if (!v)
    return;
  if (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    pf_object_release(v->v_obj);
  *v = pf_any_none();
}
/* Moves the value out of *v (leaving none) and returns it; ownership goes with it. */
PF_INLINE pf_any_t pf_any_move(pf_any_t* v) {
  pf_any_t out = *v;
  *v = pf_any_none();
  return out;
}

/* Raises TypeError "expected <expected>, got <type of v>" and returns -1 (always): the failure
 * path of the accessors below, available for callers that check types themselves. Borrows both;
 * a NULL v reads "got NULL", a NULL expected "expected a value". */
PF_API int pf_any_type_error(const pf_any_t* v, const char* expected);
/* pf_any_type_error with its arguments swapped, for the inline accessors below: `v` stays in
 * the register it arrived in, so a successful access pays no move for the failure path. */
PF_API int pf__any_expected(const char* expected, const pf_any_t* v);
/* Raises ValueError "expected <expected>, got a <type of v> view with a NULL pointer" (for an
 * object: "got a NULL <type of v> object"; for a small string or bytes: "got a small ... of
 * length N, more than 7") and returns -1: the failure path of the accessors below for a raw
 * string (8), byte-array (9) or DLTensor pointer (7), or an object, whose pointer is NULL, and
 * for a small string or bytes longer than its 7 bytes (packfn's constructors never make any
 * of these; another producer may). */
PF_API int pf__any_null_view(const char* expected, const pf_any_t* v);

/* Raises ValueError "<func>: argument v|out|data|size: expected a pointer, got NULL", zeroes
 * the outputs that are not NULL (out_size and out2_size bytes) and returns -1: the failure path
 * of the accessors below for a NULL value or output pointer. */
PF_API int pf__any_null_arg(const char* func, const pf_any_t* v, void* out, size_t out_size,
                            void* out2, size_t out2_size);

/* ---- checked accessors: 0 on success, -1 with TypeError naming both types ----
 * `v` must point to a value (they are the inline fast path: a NULL `v` is not checked).
 * ValueError instead for a NULL output pointer, and for a value whose pointer is NULL
 * where one is needed: a raw string or byte-array pointer view, a DLTensor pointer, or an
 * object (string, bytes, tensor, any object) holding NULL, which packfn never makes but a
 * hand-built or foreign value may. On failure the outputs (those not NULL) are zeroed.
 * Conversions: int and bool convert to each other (bool as 0/1; int to bool is x != 0); int
 * and bool convert to float; nothing converts to int from float or str. */

/* int or bool */
PF_INLINE int pf_any_as_int(const pf_any_t* v, int64_t* out) {
  if (PF_UNLIKELY(!out))
    return pf__any_null_arg("pf_any_as_int", v, out, sizeof *out, PF__NULL, 0);
  if (v->type_index == PF_TYPE_INT) {
    *out = v->v_int64;
    return 0;
  }
  if (v->type_index == PF_TYPE_BOOL) { /* 0 or 1, whatever another producer stored */
    *out = v->v_int64 != 0;
    return 0;
  }
  *out = 0;
  return pf__any_expected("int", v);
}
/* bool or int (non-zero is true) */
PF_INLINE int pf_any_as_bool(const pf_any_t* v, int* out) {
  if (PF_UNLIKELY(!out))
    return pf__any_null_arg("pf_any_as_bool", v, out, sizeof *out, PF__NULL, 0);
  if (v->type_index == PF_TYPE_BOOL || v->type_index == PF_TYPE_INT) {
    *out = v->v_int64 != 0;
    return 0;
  }
  *out = 0;
  return pf__any_expected("bool", v);
}
/* float, int or bool */
PF_INLINE int pf_any_as_float(const pf_any_t* v, double* out) {
  if (PF_UNLIKELY(!out))
    return pf__any_null_arg("pf_any_as_float", v, out, sizeof *out, PF__NULL, 0);
  if (v->type_index == PF_TYPE_FLOAT) {
    *out = v->v_float64;
    return 0;
  }
  if (v->type_index == PF_TYPE_INT) {
    *out = PF__CAST(double, v->v_int64);
    return 0;
  }
  if (v->type_index == PF_TYPE_BOOL) {
    *out = v->v_int64 != 0;
    return 0;
  }
  *out = 0.0;
  return pf__any_expected("float", v);
}
/* opaque pointer, or none (NULL) */
PF_INLINE int pf_any_as_ptr(const pf_any_t* v, void** out) {
  if (PF_UNLIKELY(!out))
    return pf__any_null_arg("pf_any_as_ptr", v, out, sizeof *out, PF__NULL, 0);
  if (v->type_index == PF_TYPE_OPAQUE_PTR || v->type_index == PF_TYPE_NONE) {
    *out = v->type_index == PF_TYPE_NONE ? PF__NULL : v->v_ptr;
    return 0;
  }
  *out = PF__NULL;
  return pf__any_expected("void*", v);
}
/* data type */
PF_INLINE int pf_any_as_dtype(const pf_any_t* v, DLDataType* out) {
  if (PF_UNLIKELY(!out))
    return pf__any_null_arg("pf_any_as_dtype", v, out, sizeof *out, PF__NULL, 0);
  if (v->type_index == PF_TYPE_DTYPE) {
    *out = v->v_dtype;
    return 0;
  }
  memset(out, 0, sizeof *out);
  return pf__any_expected("dtype", v);
}
/* device */
PF_INLINE int pf_any_as_device(const pf_any_t* v, DLDevice* out) {
  if (PF_UNLIKELY(!out))
    return pf__any_null_arg("pf_any_as_device", v, out, sizeof *out, PF__NULL, 0);
  if (v->type_index == PF_TYPE_DEVICE) {
    *out = v->v_device;
    return 0;
  }
  memset(out, 0, sizeof *out);
  return pf__any_expected("Device", v);
}
/* any object (borrowed, no retain) */
PF_INLINE int pf_any_as_object(const pf_any_t* v, pf_object_t** out) {
  if (PF_UNLIKELY(!out))
    return pf__any_null_arg("pf_any_as_object", v, out, sizeof *out, PF__NULL, 0);
  if (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN && v->v_obj) {
    *out = v->v_obj;
    return 0;
  }
  *out = PF__NULL;
  return v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN ? pf__any_null_view("Object", v)
                                                      : pf__any_expected("Object", v);
}
/* The DLTensor of a DLTensor pointer (7) or of a tensor object (70, at object + 24), borrowed. */
PF_INLINE int pf_any_as_dltensor(const pf_any_t* v, DLTensor** out) {
  if (PF_UNLIKELY(!out))
    return pf__any_null_arg("pf_any_as_dltensor", v, out, sizeof *out, PF__NULL, 0);
  if (v->type_index == PF_TYPE_DLTENSOR_PTR && v->v_ptr) {
    *out = PF__CAST(DLTensor*, v->v_ptr);
    return 0;
  }
  if (v->type_index == PF_TYPE_TENSOR && v->v_obj) {
    *out = PF__CAST(DLTensor*,
                    PF__CAST(void*, PF__REINTERPRET_CAST(char*, v->v_obj) + sizeof(pf_object_t)));
    return 0;
  }
  *out = PF__NULL;
  return v->type_index == PF_TYPE_DLTENSOR_PTR || v->type_index == PF_TYPE_TENSOR
             ? pf__any_null_view("Tensor", v)
             : pf__any_expected("Tensor", v);
}
/* String contents of a raw string, small string or string object, borrowed: valid while the
 * value lives and, for a small string, while *v stays where it is (data points into it).
 * data is NUL-terminated; size excludes the NUL. */
PF_INLINE int pf_any_as_str(const pf_any_t* v, const char** data, size_t* size) {
  if (PF_UNLIKELY(!data || !size))
    return pf__any_null_arg("pf_any_as_str", v, PF__CAST(void*, data), sizeof *data, size,
                            sizeof *size);
  switch (v->type_index) {
  case PF_TYPE_SMALL_STR:
    if (v->small_str_len > PF_SMALL_STR_MAX) /* a broken producer's: beyond its 8 bytes */
      break;
    *data = v->v_bytes;
    *size = v->small_str_len;
    return 0;
  case PF_TYPE_STR: {
    if (!v->v_obj)
      break;
    const pf_string_cell_t* c = PF__REINTERPRET_CAST(const pf_string_cell_t*, v->v_obj + 1);
    *data = c->data;
    *size = c->size;
    return 0;
  }
  case PF_TYPE_RAW_STR:
    if (!v->v_c_str)
      break;
    *data = v->v_c_str;
    *size = strlen(v->v_c_str);
    return 0;
  default:
    *data = PF__NULL;
    *size = 0;
    return pf__any_expected("str", v);
  }
  *data = PF__NULL;
  *size = 0;
  return pf__any_null_view("str", v);
}
/* Bytes contents of a byte-array pointer, small bytes or bytes object, borrowed as above. */
PF_INLINE int pf_any_as_bytes(const pf_any_t* v, const char** data, size_t* size) {
  if (PF_UNLIKELY(!data || !size))
    return pf__any_null_arg("pf_any_as_bytes", v, PF__CAST(void*, data), sizeof *data, size,
                            sizeof *size);
  switch (v->type_index) {
  case PF_TYPE_SMALL_BYTES:
    if (v->small_str_len > PF_SMALL_STR_MAX)
      break;
    *data = v->v_bytes;
    *size = v->small_str_len;
    return 0;
  case PF_TYPE_BYTES: {
    if (!v->v_obj)
      break;
    const pf_string_cell_t* c = PF__REINTERPRET_CAST(const pf_string_cell_t*, v->v_obj + 1);
    *data = c->data;
    *size = c->size;
    return 0;
  }
  case PF_TYPE_BYTE_ARRAY_PTR: {
    const pf_byte_array_t* b = PF__CAST(const pf_byte_array_t*, v->v_ptr);
    if (!b || (!b->data && b->size != 0)) /* no view, or bytes at NULL */
      break;
    *data = b->data;
    *size = b->size;
    return 0;
  }
  default:
    *data = PF__NULL;
    *size = 0;
    return pf__any_expected("bytes", v);
  }
  *data = PF__NULL;
  *size = 0;
  return pf__any_null_view("bytes", v);
}
/* A string as a C string, borrowed as pf_any_as_str's data is: as pf_any_as_str, but fails
 * with ValueError when the contents hold an embedded NUL (they would be cut short) or, for a
 * small string, are not followed by the NUL the ABI puts there (a broken producer's). -1 also
 * with ValueError for a NULL v or out (this one checks v), else as pf_any_as_str; *out is
 * then NULL (when out is not). */
PF_API int pf_any_as_cstr(const pf_any_t* v, const char** out);

/* ---- strings and bytes ---- */

/* Heap string object (65) holding a copy of data[0..size) plus a NUL, in one allocation.
 * New reference in *out (NULL on failure). -1 with ValueError (NULL out, NULL data with
 * size > 0, size > SIZE_MAX / 2) or MemoryError. */
PF_API int pf_string_object_create(const char* data, size_t size, pf_object_t** out);
/* Heap bytes object (66), as above. */
PF_API int pf_bytes_object_create(const char* data, size_t size, pf_object_t** out);

/* Fills a small string or small bytes Any; size <= PF_SMALL_STR_MAX. */
static inline void pf__any_small(int32_t type_index, const char* data, size_t size, pf_any_t* out) {
  pf_any_t v; /* built apart, so data may be *out's own small string (it was cleared first) */
  v.type_index = type_index;
  v.small_str_len = PF__CAST(uint32_t, size);
  v.v_uint64 = 0;
  for (size_t i = 0; i < size; ++i)
    v.v_bytes[i] = data[i];
  *out = v;
}

/* The out-of-line part of pf_string_create: a string object for more than 7 bytes, and every
 * failure, raised under the name pf_string_create. For pf_string_create only. */
PF_API int pf__string_create_object(const char* data, size_t size, pf_any_t* out);

/* Owned string value with a copy of data[0..size): a small string when size <= 7, else a
 * string object. -1 with ValueError (NULL out, NULL data with size > 0, size > SIZE_MAX / 2)
 * or MemoryError; *out is none on failure. */
PF_INLINE int pf_string_create(const char* data, size_t size, pf_any_t* out) {
  if (size <= PF_SMALL_STR_MAX && out && (data || size == 0)) {
    pf__any_small(PF_TYPE_SMALL_STR, data, size, out);
    return 0;
  }
  return pf__string_create_object(data, size, out);
}
/* Owned string value from a NUL-terminated string (copied; s stays the caller's), as
 * pf_string_create makes one. -1 with ValueError (NULL s or out) or MemoryError; *out is none on
 * failure (when out is not NULL). */
PF_API int pf_string_from_cstr(const char* s, pf_any_t* out);
/* Owned bytes value with a copy of data[0..size) (small bytes when size <= 7, else a bytes
 * object). Failure as pf_string_create: ValueError or MemoryError, *out none. */
PF_API int pf_bytes_create(const char* data, size_t size, pf_any_t* out);

/* ---- views to owned values, comparison ---- */

/* Makes an owned copy of any value in *out: objects are retained; a raw string becomes a
 * small string or string object; a byte-array pointer becomes small bytes or a bytes object;
 * an object rvalue reference moves the object out of its handle (the handle becomes NULL);
 * other value types are copied. out may be view itself (converts in place).
 * -1 with TypeError (a DLTensor pointer has no owned form here; an unknown type index below
 * 64), ValueError (NULL view or out; an object, raw string or byte-array pointer with a NULL
 * pointer; a byte array whose data is NULL with a size above 0, or of more than SIZE_MAX / 2
 * bytes; a small string or bytes claiming more than its 7 bytes; an rvalue reference to a NULL
 * handle) or MemoryError. On failure *out is none (so
 * is *view when out is view) and no handle is changed. */
PF_API int pf_any_to_owned(const pf_any_t* view, pf_any_t* out);

/* Value equality: ints, bools, floats (==), pointers, dtypes and devices by value, strings by
 * contents whatever their forms (raw, small, object), bytes likewise, other objects by
 * identity. Values of different types are unequal (int 1 != bool true != float 1.0).
 * Returns 1 or 0; borrows both, never raises. A NULL a or b equals only another NULL. */
PF_API int pf_any_equal(const pf_any_t* a, const pf_any_t* b);

/* Hash consistent with pf_any_equal (equal values hash alike). Borrows v, never raises; 0 for
 * NULL. */
PF_API uint64_t pf_any_hash(const pf_any_t* v);

/* Hash of a run of bytes, as used for strings by pf_any_hash and by the global table. `data`
 * may be NULL only when size is 0. Never raises. */
PF_API uint64_t pf_hash_bytes(const char* data, size_t size);

/* Type name of the value, for messages ("int", "str", "Tensor", a registered key), as
 * pf_type_name: borrowed, never NULL, never raises. `v` must point to a value. */
PF_INLINE const char* pf_any_type_name(const pf_any_t* v) {
  return pf_type_name(v->type_index);
}

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_ANY_H_ */
