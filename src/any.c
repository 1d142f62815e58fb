/* Values: the failure paths of the inline accessors, string and bytes objects, conversion of
 * views to owned values, equality and hashing. */
#include <stdlib.h>
#include <string.h>

#include "packfn/any.h"

#include "common.h"
#include "alloc.h"
#include "bytes.h"

int pf_any_type_error(const pf_any_t* v, const char* expected) {
  PF_ERROR_SET(PF_ERR_TYPE, "expected %s, got %s", expected ? expected : "a value",
               v ? pf_type_name(v->type_index) : "NULL");
  return -1;
}

int pf__any_expected(const char* expected, const pf_any_t* v) {
  return pf_any_type_error(v, expected);
}

int pf__any_null_view(const char* expected, const pf_any_t* v) {
  if (v->type_index == PF_TYPE_SMALL_STR || v->type_index == PF_TYPE_SMALL_BYTES)
    PF_ERROR_SET(PF_ERR_VALUE, "expected %s, got a small %s of length %u, more than %d",
                 expected ? expected : "a value",
                 v->type_index == PF_TYPE_SMALL_STR ? "string" : "bytes",
                 (unsigned)v->small_str_len, PF_SMALL_STR_MAX);
  else if (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    PF_ERROR_SET(PF_ERR_VALUE, "expected %s, got a NULL %s object", expected ? expected : "a value",
                 pf_type_name(v->type_index));
  else
    PF_ERROR_SET(PF_ERR_VALUE, "expected %s, got a %s view with a NULL pointer",
                 expected ? expected : "a value", pf_type_name(v->type_index));
  return -1;
}

int pf__any_null_arg(const char* func, const pf_any_t* v, void* out, size_t out_size, void* out2,
                     size_t out2_size) {
  if (out)
    memset(out, 0, out_size);
  if (out2)
    memset(out2, 0, out2_size);
  const char* arg = !v ? "v" : !out ? (out2_size ? "data" : "out") : "size";
  return PF__NULL_ARG(func, arg);
}

int pf_any_as_cstr(const pf_any_t* v, const char** out) {
  if (!v || !out) {
    if (out)
      *out = NULL;
    return PF__NULL_ARG("pf_any_as_cstr", v ? "out" : "v");
  }
  *out = NULL; /* as every accessor's output on failure (review: it was left as it was) */
  const char* data;
  size_t size;
  if (pf_any_as_str(v, &data, &size) != 0)
    return -1;
  if (memchr(data, '\0', size) != NULL) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_any_as_cstr: expected a string without NUL bytes, got one with a NUL at "
                 "offset %zu of %zu",
                 (size_t)((const char*)memchr(data, '\0', size) - data), size);
    return -1;
  }
  /* a small string's text is followed by a NUL (the ABI's rule); a producer that left another
   * byte there would hand the caller a text strlen reads past the value (the containers
   * review). Within its 8 bytes: size <= 7. */
  if (v->type_index == PF_TYPE_SMALL_STR && data[size] != '\0') {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_any_as_cstr: expected a small string followed by a NUL, got %zu bytes "
                 "followed by byte 0x%02x (its producer broke the ABI's rule)",
                 size, (unsigned)(unsigned char)data[size]);
    return -1;
  }
  *out = data;
  return 0;
}

/* String and bytes objects hold nothing to destroy; their text lives in the same block. */
static void pf__string_deleter(void* self, int flags) {
  if (flags & PF_DELETER_WEAK)
    pf__free_nonnull(self);
}

/* Failure path of pf__blob_create, out of line so the success path saves no registers. */
__attribute__((noinline, cold)) static int pf__blob_bad(const char* func, pf_object_t** out,
                                                        const char* data, size_t size) {
  if (out)
    *out = NULL; /* as every constructor's output on failure */
  if (!out || (!data && size != 0)) {
    return PF__NULL_ARG(func, out ? "data" : "out");
  }
  *out = NULL;
  PF_ERROR_SET(PF_ERR_VALUE, "%s: argument size: expected at most %zu bytes, got %zu", func,
               (size_t)(SIZE_MAX / 2), size);
  return -1;
}

/* The header and cell of a blob of `size` bytes in the block obj; its text, NUL-terminated. */
static inline __attribute__((always_inline)) char* pf__blob_init(pf_object_t* obj,
                                                                 int32_t type_index, size_t size) {
  pf__object_init(obj, type_index, pf__string_deleter);
  pf_string_cell_t* cell = (pf_string_cell_t*)(obj + 1);
  char* text = (char*)(cell + 1);
  cell->data = text;
  cell->size = size;
  text[size] = '\0';
  return text;
}

/* 1 when the text data[0..size) and the `dsize` bytes at dst share a byte (also, harmlessly,
 * when the text starts right after them, or is empty inside them): one compare, where two made
 * every string's create 14 instructions dearer (size + dsize cannot overflow: size <=
 * SIZE_MAX / 2). */
static inline int pf__text_in(const char* data, size_t size, const void* dst, size_t dsize) {
  return (uintptr_t)dst - (uintptr_t)data + dsize < size + dsize;
}

/* The copy of a text that lies in the output the caller writes next (pf__text_in), made before
 * that write; out of line: no usual caller takes this branch. */
__attribute__((noinline, cold)) static void pf__blob_copy_first(char* text, const char* data,
                                                                size_t size) {
  if (size)
    memcpy(text, data, size);
}

/* The rest of pf__blob_create once the block is there. */
static inline __attribute__((always_inline)) void pf__blob_fill(pf_object_t* obj,
                                                                int32_t type_index,
                                                                const char* data, size_t size,
                                                                pf_object_t** out) {
  char* text = pf__blob_init(obj, type_index, size);
  int first = pf__text_in(data, size, out, sizeof *out);
  if (PF_UNLIKELY(first))
    pf__blob_copy_first(text, data, size);
  *out = obj;
  if (!first && size) /* last, so nothing needs keeping across the call; data may be NULL when 0 */
    memcpy(text, data, size);
}

/* pf__blob_alloc_slow's MemoryError, naming the block's size: out of line, and given `size`
 * rather than the total, so that the callers keep no total across their malloc call (a register
 * saved and restored on each create without the slabs). */
__attribute__((noinline, cold)) static void pf__blob_oom(const char* func, size_t size) {
  (void)pf__raise_oom(func, sizeof(pf_object_t) + sizeof(pf_string_cell_t) + 1 + size);
}

/* The block of a blob of `size` bytes when this thread's list of its class is empty (the
 * caller's pf__alloc_cached found it so): straight to the allocator's slow half (a refill from
 * the depot, or malloc), which a second look at the list would only delay. NULL with
 * MemoryError raised as `func`. */
static inline pf_object_t* pf__blob_alloc_slow(const char* func, size_t size) {
  pf_object_t* obj = pf__alloc_uncached(sizeof(pf_object_t) + sizeof(pf_string_cell_t) + 1 + size);
  if (!obj)
    pf__blob_oom(func, size);
  return obj;
}

/* pf__blob_create when this thread's list of the size's class is empty, out of line. */
__attribute__((noinline)) static int pf__blob_create_uncached(const char* func, int32_t type_index,
                                                              const char* data, size_t size,
                                                              pf_object_t** out) {
  pf_object_t* obj = pf__blob_alloc_slow(func, size);
  if (!obj) {
    *out = NULL; /* as every constructor's output on failure (review: it was left) */
    return -1;
  }
  pf__blob_fill(obj, type_index, data, size, out);
  return 0;
}

static inline __attribute__((always_inline)) int pf__blob_create(const char* func,
                                                                 int32_t type_index,
                                                                 const char* data, size_t size,
                                                                 pf_object_t** out) {
  /* sizes beyond half the address space cannot be allocated anyway; one compare rules out
   * the overflow of the total below */
  if (PF_UNLIKELY(!out || (!data && size != 0) || size > SIZE_MAX / 2))
    return pf__blob_bad(func, out, data, size);
  size_t total = sizeof(pf_object_t) + sizeof(pf_string_cell_t) + 1 + size;
  pf_object_t* obj = pf__alloc_cached(total);
  if (PF_UNLIKELY(!obj))
    return pf__blob_create_uncached(func, type_index, data, size, out);
  pf__blob_fill(obj, type_index, data, size, out);
  return 0;
}

int pf_string_object_create(const char* data, size_t size, pf_object_t** out) {
  return pf__blob_create("pf_string_object_create", PF_TYPE_STR, data, size, out);
}

int pf_bytes_object_create(const char* data, size_t size, pf_object_t** out) {
  return pf__blob_create("pf_bytes_object_create", PF_TYPE_BYTES, data, size, out);
}

/* A string object holding data[0..size) as the value in *out; errors name `func`. */
static inline __attribute__((always_inline)) int
pf__string_object_value(const char* func, const char* data, size_t size, pf_any_t* out) {
  pf_object_t* obj; /* a NULL out reaches pf__blob_create's one check of its arguments */
  if (pf__blob_create(func, PF_TYPE_STR, data, size, out ? &obj : NULL) != 0) {
    if (out)
      *out = pf_any_none();
    return -1;
  }
  out->type_index = PF_TYPE_STR;
  out->zero_padding = 0;
  out->v_obj = obj;
  return 0;
}

/* The out-of-line part of the inline pf_string_create: the object path, and every failure
 * (NULL data with a small size fails here too). It exists so that errors name
 * pf_string_create, the function the caller wrote, at no cost to the inline's success path;
 * code compiled against older headers calls pf_string_object_create, which is unchanged. */
/* pf__string_create_object's failures: NULL out, NULL data with a size, a size too large. */
__attribute__((noinline, cold)) static int pf__string_create_bad(const char* data, size_t size,
                                                                 pf_any_t* out) {
  pf_object_t* unused;
  if (out)
    *out = pf_any_none(); /* as every constructor's output on failure */
  return pf__blob_bad("pf_string_create", out ? &unused : NULL, data, size);
}

/* The string or bytes object (type_index) in the block obj holding data[0..size), as the value
 * in *out: the value first and the copy last, so that nothing needs keeping across the call;
 * the copy first when the text lies in *out itself (its own payload: the value overwrote it;
 * review). */
static inline __attribute__((always_inline)) void pf__blob_value_fill(pf_object_t* obj,
                                                                      int32_t type_index,
                                                                      const char* data, size_t size,
                                                                      pf_any_t* out) {
  char* text = pf__blob_init(obj, type_index, size);
  int first = pf__text_in(data, size, out, sizeof *out);
  if (PF_UNLIKELY(first))
    pf__blob_copy_first(text, data, size);
  out->type_index = type_index;
  out->zero_padding = 0;
  out->v_obj = obj;
  if (!first && size) /* last, so nothing needs keeping across the call */
    memcpy(text, data, size);
}

/* A string or bytes object (type_index) as the value in *out when this thread's list of the
 * size's class is empty (every time with the slabs off): the allocator's slow half, and the
 * value written here (the arguments in the callers' order), out of line, so that the cached paths
 * need no stack frame and their callers keep nothing across the call (through pf__blob_create the
 * object came back through memory: 101 instructions of packfn's own per bytes create without the
 * slabs, now 82). 0, or -1 with MemoryError raised as `func` and *out none. */
__attribute__((noinline)) static int pf__blob_value_uncached(const char* data, size_t size,
                                                             pf_any_t* out, const char* func,
                                                             int32_t type_index) {
  pf_object_t* obj = pf__blob_alloc_slow(func, size);
  if (!obj) {
    *out = pf_any_none(); /* as every constructor's output on failure */
    return -1;
  }
  pf__blob_value_fill(obj, type_index, data, size, out);
  return 0;
}

int pf__string_create_object(const char* data, size_t size, pf_any_t* out) {
  if (PF_UNLIKELY(!out || (!data && size != 0) || size > SIZE_MAX / 2))
    return pf__string_create_bad(data, size, out);
  size_t total = sizeof(pf_object_t) + sizeof(pf_string_cell_t) + 1 + size;
  pf_object_t* obj = pf__alloc_cached(total);
  if (PF_UNLIKELY(!obj))
    return pf__blob_value_uncached(data, size, out, "pf_string_create", PF_TYPE_STR);
  pf__blob_value_fill(obj, PF_TYPE_STR, data, size, out);
  return 0;
}

/* pf_string_from_cstr and pf_bytes_create, raising as `func` (pf_any_to_owned's copies of views
 * raise as pf_any_to_owned; they named these functions, which its caller never called). */
static int pf__cstr_value(const char* func, const char* s, pf_any_t* out) {
  if (!s || !out) {
    if (out)
      *out = pf_any_none();
    return PF__NULL_ARG(func, s ? "out" : "s");
  }
  size_t size = strlen(s);
  if (size <= PF_SMALL_STR_MAX) {
    pf__any_small(PF_TYPE_SMALL_STR, s, size, out);
    return 0;
  }
  return pf__string_object_value(func, s, size, out);
}

static int pf__bytes_value(const char* func, const char* data, size_t size, pf_any_t* out) {
  if (!out || (!data && size != 0)) {
    if (out)
      *out = pf_any_none();
    return PF__NULL_ARG(func, out ? "data" : "out");
  }
  if (size <= PF_SMALL_STR_MAX) {
    pf__any_small(PF_TYPE_SMALL_BYTES, data, size, out);
    return 0;
  }
  /* the object from this thread's list, written into *out directly; an empty list (with the
   * slabs off, every time) out of line as a tail call, the size too large below */
  if (PF_LIKELY(size <= SIZE_MAX / 2)) {
    pf_object_t* obj = pf__alloc_cached(sizeof(pf_object_t) + sizeof(pf_string_cell_t) + 1 + size);
    if (PF_UNLIKELY(!obj))
      return pf__blob_value_uncached(data, size, out, func, PF_TYPE_BYTES);
    pf__blob_value_fill(obj, PF_TYPE_BYTES, data, size, out);
    return 0;
  }
  pf_object_t* obj;
  if (pf__blob_create(func, PF_TYPE_BYTES, data, size, &obj) != 0) {
    *out = pf_any_none();
    return -1;
  }
  *out = pf_any_none();
  out->type_index = PF_TYPE_BYTES;
  out->v_obj = obj;
  return 0;
}

int pf_string_from_cstr(const char* s, pf_any_t* out) {
  return pf__cstr_value("pf_string_from_cstr", s, out);
}

int pf_bytes_create(const char* data, size_t size, pf_any_t* out) {
  return pf__bytes_value("pf_bytes_create", data, size, out);
}

int pf_any_to_owned(const pf_any_t* view, pf_any_t* out) {
  if (!view || !out) {
    if (out)
      *out = pf_any_none();
    return PF__NULL_ARG("pf_any_to_owned", view ? "out" : "view");
  }
  /* v first: out may be view itself. *out is written only below, each case's own way: a view
   * may point at *out's own small string, which a clearing first wiped (review) */
  const pf_any_t v = *view;
  switch (v.type_index) {
  case PF_TYPE_SMALL_STR:
  case PF_TYPE_SMALL_BYTES:
    if (v.small_str_len > PF_SMALL_STR_MAX) {
      *out = pf_any_none();
      PF_ERROR_SET(PF_ERR_VALUE, "pf_any_to_owned: a small %s of length %u, more than %d",
                   v.type_index == PF_TYPE_SMALL_STR ? "string" : "bytes",
                   (unsigned)v.small_str_len, PF_SMALL_STR_MAX);
      return -1;
    }
    /* The value types' copies are canonical: the bytes the ABI keeps zero (padding, none's
     * payload, the bytes after a small text, a dtype's last four) are zero whatever another
     * producer left there; TVM-FFI compares and hashes all 8 payload bytes (review: copied) */
    pf__any_small(v.type_index, v.v_bytes, v.small_str_len, out);
    return 0;
  case PF_TYPE_NONE:
  case PF_TYPE_UNCHANGED: /* TVM-FFI's marker, a value like none (it was refused; review) */
    *out = pf_any_none();
    out->type_index = v.type_index;
    return 0;
  case PF_TYPE_DTYPE:
    *out = pf_any_dtype(v.v_dtype);
    return 0;
  case PF_TYPE_DEVICE:
    *out = pf_any_device(v.v_device);
    return 0;
  case PF_TYPE_INT:
  case PF_TYPE_BOOL:
  case PF_TYPE_FLOAT:
  case PF_TYPE_OPAQUE_PTR:
    *out = v;
    out->zero_padding = 0;
    if (v.type_index == PF_TYPE_BOOL)
      out->v_int64 = v.v_int64 != 0; /* 0 or 1, whatever another producer stored */
    return 0;
  case PF_TYPE_RAW_STR:
    if (!v.v_c_str)
      break;
    return pf__cstr_value("pf_any_to_owned", v.v_c_str, out);
  case PF_TYPE_BYTE_ARRAY_PTR: {
    const pf_byte_array_t* b = (const pf_byte_array_t*)v.v_ptr;
    if (!b)
      break;
    if (!b->data && b->size != 0) {
      *out = pf_any_none();
      PF_ERROR_SET(PF_ERR_VALUE,
                   "pf_any_to_owned: bytes view (type index 9) of %zu bytes with a NULL data "
                   "pointer",
                   b->size);
      return -1;
    }
    if (b->size > SIZE_MAX / 2) { /* pf__bytes_value's own refusal said "argument size", an
                                   * argument pf_any_to_owned does not have (review) */
      *out = pf_any_none();
      PF_ERROR_SET(PF_ERR_VALUE,
                   "pf_any_to_owned: bytes view (type index 9) of %zu bytes, more than the %zu "
                   "a bytes value may hold",
                   b->size, (size_t)(SIZE_MAX / 2));
      return -1;
    }
    return pf__bytes_value("pf_any_to_owned", b->data, b->size, out);
  }
  case PF_TYPE_OBJECT_RVALUE_REF: {
    pf_object_t** handle = (pf_object_t**)v.v_ptr;
    if (!handle || !*handle) {
      *out = pf_any_none();
      PF_ERROR_SET(PF_ERR_VALUE, "pf_any_to_owned: object rvalue reference to a NULL handle");
      return -1;
    }
    pf_object_t* obj = *handle;
    *handle = NULL;
    *out = pf_any_object(obj);
    return 0;
  }
  case PF_TYPE_DLTENSOR_PTR:
    *out = pf_any_none();
    PF_ERROR_SET(PF_ERR_TYPE, "pf_any_to_owned: a DLTensor* view has no owned form; wrap it "
                              "in a tensor object first");
    return -1;
  default:
    if (v.type_index >= PF_TYPE_STATIC_OBJECT_BEGIN) {
      if (!v.v_obj) {
        *out = pf_any_none();
        PF_ERROR_SET(PF_ERR_VALUE, "pf_any_to_owned: object value (%s) with a NULL pointer",
                     pf_type_name(v.type_index));
        return -1;
      }
      pf_object_retain(v.v_obj);
      *out = v;
      out->zero_padding = 0;
      return 0;
    }
    *out = pf_any_none();
    PF_ERROR_SET(PF_ERR_TYPE,
                 "pf_any_to_owned: a value of type %s (type index %d) has no owned "
                 "form in packfn",
                 pf_type_name(v.type_index), (int)v.type_index);
    return -1;
  }
  /* a raw string or byte-array pointer view with a NULL pointer */
  *out = pf_any_none();
  PF_ERROR_SET(PF_ERR_VALUE, "pf_any_to_owned: %s view (type index %d) with a NULL pointer",
               pf_type_name(v.type_index), (int)v.type_index);
  return -1;
}

/* Which family a value's bytes belong to for equality: 1 string, 2 bytes, 0 neither. A raw
 * string or byte-array view, or a string or bytes object, with a NULL pointer (hand-made) has
 * no bytes: it compares and hashes by its bits, as other values do. */
static int pf__text_family(const pf_any_t* v) {
  switch (v->type_index) {
  case PF_TYPE_RAW_STR:
  case PF_TYPE_STR:
    return v->v_ptr ? 1 : 0;
  case PF_TYPE_SMALL_STR: /* a broken producer's longer one is no text: compared by its bits */
    return v->small_str_len <= PF_SMALL_STR_MAX ? 1 : 0;
  case PF_TYPE_BYTE_ARRAY_PTR: /* a view of bytes at NULL has none either */
    return v->v_ptr && (((const pf_byte_array_t*)v->v_ptr)->data ||
                        ((const pf_byte_array_t*)v->v_ptr)->size == 0)
               ? 2
               : 0;
  case PF_TYPE_BYTES:
    return v->v_ptr ? 2 : 0;
  case PF_TYPE_SMALL_BYTES:
    return v->small_str_len <= PF_SMALL_STR_MAX ? 2 : 0;
  default:
    return 0;
  }
}

static void pf__text_of(const pf_any_t* v, int family, const char** data, size_t* size) {
  /* type already checked by pf__text_family: the accessors cannot fail here */
  if (family == 1)
    (void)pf_any_as_str(v, data, size);
  else
    (void)pf_any_as_bytes(v, data, size);
}

int pf_any_equal(const pf_any_t* a, const pf_any_t* b) {
  if (!a || !b)
    return a == b;
  int fa = pf__text_family(a);
  if (fa != 0) {
    if (fa != pf__text_family(b))
      return 0;
    const char *da, *db;
    size_t sa, sb;
    pf__text_of(a, fa, &da, &sa);
    pf__text_of(b, fa, &db, &sb);
    return sa == sb && (sa == 0 || memcmp(da, db, sa) == 0);
  }
  if (a->type_index != b->type_index)
    return 0;
  switch (a->type_index) {
  case PF_TYPE_NONE:
  case PF_TYPE_UNCHANGED: /* no payload either: its bytes were compared (review) */
    return 1;
  case PF_TYPE_SMALL_STR:   /* a broken producer's, longer than 7 (a valid one is text, above): */
  case PF_TYPE_SMALL_BYTES: /* by its bits, the length among them, so never equal to a valid one
                             * (the payload alone made a broken one equal to a valid one with the
                             * same payload, but not the other way round; review) */
    return a->small_str_len == b->small_str_len && a->v_uint64 == b->v_uint64;
  case PF_TYPE_BOOL: /* 0 or 1, whatever another producer stored (as the accessors read it) */
    return (a->v_int64 != 0) == (b->v_int64 != 0);
  case PF_TYPE_FLOAT:
    return a->v_float64 == b->v_float64;
  case PF_TYPE_DTYPE:
    return a->v_dtype.code == b->v_dtype.code && a->v_dtype.bits == b->v_dtype.bits &&
           a->v_dtype.lanes == b->v_dtype.lanes;
  case PF_TYPE_DEVICE:
    return a->v_device.device_type == b->v_device.device_type &&
           a->v_device.device_id == b->v_device.device_id;
  default:
    return a->v_uint64 == b->v_uint64;
  }
}

static inline uint64_t pf__mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

uint64_t pf_hash_bytes(const char* data, size_t size) {
  return pf__hash_bytes(data, size);
}

uint64_t pf_any_hash(const pf_any_t* v) {
  if (!v)
    return 0;
  int family = pf__text_family(v);
  if (family != 0) {
    const char* data;
    size_t size;
    pf__text_of(v, family, &data, &size);
    return pf_hash_bytes(data, size) + (uint64_t)family;
  }
  uint64_t bits = v->v_uint64;
  switch (v->type_index) {
  case PF_TYPE_NONE:
  case PF_TYPE_UNCHANGED:
    bits = 0;
    break;
  case PF_TYPE_BOOL:
    bits = v->v_int64 != 0;
    break;
  case PF_TYPE_FLOAT:
    if (v->v_float64 == 0.0)
      bits = 0; /* +0.0 == -0.0 */
    break;
  case PF_TYPE_DTYPE:
    bits = (uint64_t)v->v_dtype.code | ((uint64_t)v->v_dtype.bits << 8) |
           ((uint64_t)v->v_dtype.lanes << 16);
    break;
  case PF_TYPE_DEVICE:
    bits = (uint64_t)(uint32_t)v->v_device.device_type |
           ((uint64_t)(uint32_t)v->v_device.device_id << 32);
    break;
  default:
    break;
  }
  return pf__mix(bits ^ ((uint64_t)(uint32_t)v->type_index << 56));
}
