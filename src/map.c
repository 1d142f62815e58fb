/* Maps (72) and dicts (76) in TVM-FFI 0.1.x's MapBaseObj layout (a small form of up to 4 entries
 * searched linearly, a dense form of 16-slot blocks with Fibonacci hashing, chained slots and an
 * insertion-order list) with TVM-FFI's key hashing, and the value-owning rules of containers. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_private.h"

#include "common.h"
#include "bytes.h"
#include "tvm_private.h"

/* ---- owning values (every container stores owned values) ---- */

const char* pf__item_name(const char* const* names, size_t i, char* buf, size_t size) {
  if (names)
    return names[i];
  snprintf(buf, size, "items[%zu]", i);
  return buf;
}

int pf__check_ownable(const char* func, const char* item, const pf_any_t* v, int owned_only) {
  int32_t t = v->type_index;
  int is_view = t == PF_TYPE_DLTENSOR_PTR || t == PF_TYPE_RAW_STR || t == PF_TYPE_BYTE_ARRAY_PTR ||
                t == PF_TYPE_OBJECT_RVALUE_REF;
  if (t >= PF_TYPE_STATIC_OBJECT_BEGIN || (is_view && t != PF_TYPE_DLTENSOR_PTR && !owned_only)) {
    /* objects, and the views that have an owned form: the pointer must be usable */
    const void* p = t == PF_TYPE_OBJECT_RVALUE_REF && v->v_ptr ? *(void* const*)v->v_ptr : v->v_ptr;
    if (p)
      return 0;
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: %s value with a NULL pointer", func, item,
                 pf_type_name(t));
    return -1;
  }
  if (t >= PF_TYPE_NONE && t <= PF_TYPE_SMALL_BYTES && !is_view)
    return 0;
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %s: expected %s, got %s%s (type index %d)", func, item,
               owned_only ? "an owned value" : "a value with an owned form", pf_type_name(t),
               is_view ? " view" : "", (int)t);
  return -1;
}

const pf_object_t* pf__object_of(const pf_any_t* v) {
  if (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    return v->v_obj;
  if (v->type_index == PF_TYPE_OBJECT_RVALUE_REF && v->v_ptr)
    return *(pf_object_t* const*)v->v_ptr;
  return NULL;
}

static void pf__map_mark_frozen(pf_object_t* map);
static int pf__map_is_ours(const pf_object_t* obj);

void pf__freeze_maps(const pf_any_t* values, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (values[i].type_index == PF_TYPE_MAP && pf__map_is_ours(values[i].v_obj))
      pf__map_mark_frozen(values[i].v_obj);
}

static int pf__is_rvalue(const pf_any_t* v) {
  return v->type_index == PF_TYPE_OBJECT_RVALUE_REF;
}

void pf__own_abort(const pf_any_t* views, pf_any_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (pf__is_rvalue(&views[i]) && out[i].type_index != PF_TYPE_NONE)
      *(pf_object_t**)views[i].v_ptr = out[i].v_obj; /* the reference goes back */
    else
      pf_any_release(&out[i]);
    out[i] = pf_any_none();
  }
}

/* Raises ValueError when rvalue reference views[i] points at a handle an earlier item already
 * emptied (the same handle twice); 0 otherwise. */
static int pf__check_rvalue_twice(const char* func, const char* const* names, const pf_any_t* views,
                                  size_t i) {
  const pf_any_t* v = &views[i];
  if (!pf__is_rvalue(v) || !v->v_ptr || *(pf_object_t* const*)v->v_ptr)
    return 0;
  for (size_t j = 0; j < i; ++j)
    if (pf__is_rvalue(&views[j]) && views[j].v_ptr == v->v_ptr) {
      char bi[48], bj[48];
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument %s: expected an rvalue reference to its own handle, got the "
                   "handle of %s again (its reference can move once)",
                   func, pf__item_name(names, i, bi, sizeof bi),
                   pf__item_name(names, j, bj, sizeof bj));
      return -1;
    }
  return 0;
}

/* Everything is checked first, each rvalue reference's object taken from its handle as it is
 * checked (so a second reference to the same handle finds it empty and is refused), then every
 * other value is copied (the only step that can fail, on memory); a failure puts all back. */
int pf__own_begin(const char* func, const char* const* names, const pf_any_t* views, size_t n,
                  pf_any_t* out) {
  char buf[48];
  for (size_t i = 0; i < n; ++i) {
    out[i] = pf_any_none();
    if ((pf__is_rvalue(&views[i]) && pf__check_rvalue_twice(func, names, views, i) != 0) ||
        pf__check_ownable(func, pf__item_name(names, i, buf, sizeof buf), &views[i], 0) != 0) {
      pf__own_abort(views, out, i);
      return -1;
    }
    if (pf__is_rvalue(&views[i])) {
      pf_object_t** handle = (pf_object_t**)views[i].v_ptr;
      out[i] = pf_any_object(*handle);
      *handle = NULL;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (pf__is_rvalue(&views[i]))
      continue;
    if (pf_any_to_owned(&views[i], &out[i]) != 0) {
      pf__own_abort(views, out, n);
      return -1;
    }
  }
  return 0;
}

int pf__own_all(const char* func, const char* const* names, const pf_any_t* views, size_t n,
                pf_any_t* out) {
  if (pf__own_begin(func, names, views, n, out) != 0)
    return -1;
  pf__freeze_maps(out, n);
  return 0;
}

/* ---- the layout (TVM-FFI 0.1.x, tvm/ffi/container/map_base.h) ---- */

typedef struct {
  pf_any_t key;
  pf_any_t value;
} pf__kv_t;

/* MapBaseObj, then the fields DenseMapBaseObj adds. A small map's object is allocated large
 * enough for the dense fields, so either runtime may switch it to the dense form in place. */
typedef struct {
  pf_object_t header;
  void* data;                    /* small: pf__kv_t[slots]; dense: pf__block_t[slots / 16] */
  uint64_t size;                 /* number of entries */
  uint64_t slots;                /* slot count; bit 63 set in the small form */
  void (*data_deleter)(void*);   /* frees data, or NULL when data is inline in the object */
  uint32_t fib_shift;            /* dense: 64 - log2(slots) */
  uint32_t padding;              /* dense: unused */
  uint64_t iter_head, iter_tail; /* dense: slots of the first and last entry inserted */
} pf__mapcell_t;

/* A dense entry: the pair and its neighbours on the insertion-order list. */
typedef struct {
  pf__kv_t kv;
  uint64_t prev, next;
} pf__item_t;

#define PF__BLOCK_CAP 16
/* 16 metadata bytes, then 16 entries. Metadata: 0xFF empty, 0xFE protected (empty, not to be
 * written during a move), else bit 7 clear for the head of a chain, and the low 7 bits the
 * index of the distance to the next entry of the chain in pf__probe (0: last). */
typedef struct {
  uint8_t meta[PF__BLOCK_CAP];
  pf__item_t items[PF__BLOCK_CAP];
} pf__block_t;

#define PF__SMALL_TAG ((uint64_t)1 << 63)
#define PF__SMALL_MAX 4 /* TVM-FFI writes a small map only up to 4 slots, then goes dense */
#define PF__EMPTY     0xFF
#define PF__PROTECTED 0xFE
#define PF__NO_INDEX  UINT64_MAX
#define PF__BAD_INDEX (UINT64_MAX - 1) /* a chain walk met metadata no table can have */
#define PF__NUM_JUMPS 126

_Static_assert(sizeof(pf__mapcell_t) == 80, "dense map object is 80 bytes");
_Static_assert(offsetof(pf__mapcell_t, data_deleter) == 48, "MapBaseObj::data_deleter_ at 48");
_Static_assert(offsetof(pf__mapcell_t, fib_shift) == 56, "fib_shift_ at 56");
_Static_assert(sizeof(pf__item_t) == 48, "dense item is 48 bytes");
_Static_assert(sizeof(pf__block_t) == 16 * 49, "block is 16 metadata bytes and 16 items");

/* The distances a chain may jump (metadata low 7 bits index this): 0-15, then triangle
 * numbers, then sparser triangle numbers; the same table as TVM-FFI's, as readers of either
 * runtime follow the other's chains. */
/* clang-format off */
static const uint64_t pf__probe[PF__NUM_JUMPS] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 21, 28, 36, 45, 55, 66, 78, 91, 105, 120,
    136, 153, 171, 190, 210, 231, 253, 276, 300, 325, 351, 378, 406, 435, 465, 496, 528, 561, 595,
    630, 666, 703, 741, 780, 820, 861, 903, 946, 990, 1035, 1081, 1128, 1176, 1225, 1275, 1326,
    1378, 1431, 1485, 1540, 1596, 1653, 1711, 1770, 1830, 1891, 1953, 2016, 2080, 2145, 2211, 2278,
    2346, 2415, 2485, 2556, 2628, 8515, 19110, 42778, 96141, 216153, 486591, 1092981, 2458653,
    5532801, 12442566, 27993903, 62983476, 141717030, 318844378, 717352503, 1614057336, 3631522476,
    8170957530, 18384510628, 41364789378, 93070452520, 209408356380, 471168559170, 1060128894105,
    2385289465695, 5366898840628, 12075518705635, 27169915244790, 61132312065111, 137547689707000,
    309482283181501, 696335127828753, 1566753995631385, 3525196511162271, 7931691992677701,
    17846306936293605, 40154190677507445, 90346928918121501, 203280589587557251, 457381325854679626,
    1029107982097042876, 2315492959180353330, 5209859154120846435u};
/* clang-format on */

/* A packfn map or dict: the cell, the frozen flag (maps only), then room for a small form. */
typedef struct {
  pf__mapcell_t cell;
  int frozen; /* set once, never cleared */
  int padding;
  pf__kv_t inline_kv[PF__SMALL_MAX];
} pf__map_t;

/* ---- hashing and key equality (TVM-FFI's AnyHash / AnyEqual) ---- */

static inline uint64_t pf__hash_combine(uint64_t key, uint64_t value) {
  return key ^ (value + 0x9e3779b9u + (key << 6) + (key >> 2));
}

/* The 1..7 bytes at p as a little-endian word (the rest zero): overlapping loads, no loop. */
static inline uint64_t pf__load_le64(const char* p, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= (uint64_t)(unsigned char)p[i] << (8 * i);
  return v;
#else
  if (n >= 4) {
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + n - 4, 4);
    return lo | ((uint64_t)hi << (8 * (n - 4)));
  }
  return (uint64_t)(unsigned char)p[0] | (uint64_t)(unsigned char)p[n / 2] << (8 * (n / 2)) |
         (uint64_t)(unsigned char)p[n - 1] << (8 * (n - 1));
#endif
}

/* x mod (2^31 - 1) without a division: 2^31 is 1 modulo 2^31 - 1. */
static inline uint64_t pf__mod_m31(uint64_t x) {
  const uint64_t m = 2147483647ull;
  x = (x & m) + (x >> 31);
  x = (x & m) + (x >> 31);
  return x >= m ? x - m : x;
}

/* Bytes hashed 8 at a time (little-endian words) modulo 2^31 - 1, as TVM-FFI's stable hash. */
static uint64_t pf__hash_text(const char* data, size_t size) {
  const uint64_t mul = 1099511628211ull;
  uint64_t h = 0;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    memcpy(&w, data + i, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    h = pf__mod_m31(h * mul + w);
  }
  if (i < size)
    h = pf__mod_m31(h * mul + pf__load_le64(data + i, size - i));
  return h;
}

/* The text of a string or bytes key (1 string, 2 bytes), or 0 for other keys. */
static int pf__key_text(const pf_any_t* k, const char** data, size_t* size) {
  switch (k->type_index) {
  case PF_TYPE_SMALL_STR:
  case PF_TYPE_SMALL_BYTES:
    *data = (const char*)k->v_bytes;
    *size = k->small_str_len;
    return k->type_index == PF_TYPE_SMALL_STR ? 1 : 2;
  case PF_TYPE_STR:
  case PF_TYPE_BYTES: {
    const pf_byte_array_t* cell = (const pf_byte_array_t*)(k->v_obj + 1);
    *data = cell->data;
    *size = cell->size;
    return k->type_index == PF_TYPE_STR ? 1 : 2;
  }
  case PF_TYPE_RAW_STR:
    *data = k->v_c_str;
    *size = strlen(k->v_c_str);
    return 1;
  case PF_TYPE_BYTE_ARRAY_PTR:
    *data = ((const pf_byte_array_t*)k->v_ptr)->data;
    *size = ((const pf_byte_array_t*)k->v_ptr)->size;
    return 2;
  default:
    return 0;
  }
}

/* The key an rvalue reference stands for (its object), else the key itself. */
static pf_any_t pf__key_view(const pf_any_t* key) {
  if (key->type_index == PF_TYPE_OBJECT_RVALUE_REF)
    return pf_any_object(*(pf_object_t* const*)key->v_ptr);
  return *key;
}

static uint64_t pf__key_hash(const pf_any_t* k) {
  const char* data;
  size_t size;
  int text = pf__key_text(k, &data, &size);
  if (text)
    return pf__hash_combine(text == 1 ? PF_TYPE_STR : PF_TYPE_BYTES, pf__hash_text(data, size));
  return pf__hash_combine((uint64_t)(uint32_t)k->type_index, k->v_uint64);
}

/* Equality of a looked-up key `a` (str, bytes, int or object) and a stored key `b`. */
static int pf__key_equal(const pf_any_t* a, const pf_any_t* b) {
  if (a->type_index == b->type_index && a->v_uint64 == b->v_uint64 &&
      a->type_index < PF_TYPE_SMALL_STR)
    return 1;
  if (a->type_index == PF_TYPE_STR && b->type_index == PF_TYPE_STR) { /* the common key */
    if (a->v_obj == b->v_obj)
      return 1;
    const pf_byte_array_t* ca = (const pf_byte_array_t*)(a->v_obj + 1);
    const pf_byte_array_t* cb = (const pf_byte_array_t*)(b->v_obj + 1);
    return ca->size == cb->size && pf__bytes_equal(ca->data, cb->data, ca->size);
  }
  const char *da, *db;
  size_t sa, sb;
  int ta = pf__key_text(a, &da, &sa);
  if (!ta)
    return a->type_index == b->type_index && a->v_uint64 == b->v_uint64;
  return ta == pf__key_text(b, &db, &sb) && sa == sb && (sa == 0 || memcmp(da, db, sa) == 0);
}

/* 0 when `key` can key a map (str, bytes, int or a non-NULL object); else raises. */
static int pf__check_key(const char* func, const pf_any_t* key) {
  switch (key->type_index) {
  case PF_TYPE_INT:
  case PF_TYPE_SMALL_STR:
  case PF_TYPE_SMALL_BYTES:
    return 0;
  case PF_TYPE_RAW_STR:
  case PF_TYPE_BYTE_ARRAY_PTR:
  case PF_TYPE_OBJECT_RVALUE_REF:
    if (key->v_ptr && (key->type_index != PF_TYPE_OBJECT_RVALUE_REF || *(void**)key->v_ptr))
      return 0;
    break;
  default:
    if (key->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN && key->v_obj)
      return 0;
    break;
  }
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument key: expected str, bytes, int or Object, got %s", func,
               key->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN ? "an object with a NULL pointer"
                                                              : pf_type_name(key->type_index));
  return -1;
}

/* ---- keys TVM-FFI hashes its own way ---- */

/* TVM-FFI's TVMFFITypeAttrColumn: the value of one type attribute for each type index in
 * [begin_index, begin_index + size). */
typedef struct {
  const pf_any_t* data;
  int32_t size;
  int32_t begin_index;
} pf__attr_column_t;

typedef const pf__attr_column_t* (*pf__get_column_t)(const pf_byte_array_t* name);

/* The column of TVM-FFI's "__any_hash__" attribute (the types AnyHash hashes through a function
 * of their own, such as BigInt), or NULL when TVM-FFI is not joined or no type registered one.
 * TVM-FFI keeps a column at one address once it exists (its AnyHash caches the pointer too), so
 * a column found is kept; an absent one is asked for again, as a type may register it later. */
static const pf__attr_column_t* pf__any_hash_column(void) {
  static const pf__attr_column_t* column;
  static pf__get_column_t get_column;
  const pf__attr_column_t* c = __atomic_load_n(&column, __ATOMIC_ACQUIRE);
  if (c)
    return c;
  const pf__tvm_t* tvm = pf__tvm_first_use();
  if (!tvm)
    return NULL;
  pf__get_column_t get = __atomic_load_n(&get_column, __ATOMIC_ACQUIRE);
  if (!get) {
    *(void**)&get = dlsym(tvm->library, "TVMFFIGetTypeAttrColumn");
    if (!get)
      return NULL; /* a 0.1.x without type attributes: no custom hashes either */
    __atomic_store_n(&get_column, get, __ATOMIC_RELEASE);
  }
  static const pf_byte_array_t name = {"__any_hash__", sizeof "__any_hash__" - 1};
  c = get(&name);
  if (c)
    __atomic_store_n(&column, c, __ATOMIC_RELEASE);
  return c;
}

/* pf__hash_known for an object type other than string and bytes. */
static int pf__object_hash_known(int32_t t) {
  if (t == PF_TYPE_BIG_INT)
    return 0;
  const pf__attr_column_t* c = pf__any_hash_column();
  if (!c || t < c->begin_index || t - c->begin_index >= c->size)
    return 1;
  return c->data[t - c->begin_index].type_index == PF_TYPE_NONE;
}

/* 1 when pf__key_hash(k) is what TVM-FFI's AnyHash gives for k, so packfn may place k in a
 * table or find where TVM-FFI placed it; 0 for the keys TVM-FFI hashes through a registered
 * __any_hash__ (BigInt always; any type the joined TVM-FFI lists), and for DLTensor pointers
 * and rvalue references, which no table holds. Values below 64 and strings and bytes hash
 * alike in both runtimes; other objects by address unless TVM-FFI says otherwise. */
static inline int pf__hash_known(const pf_any_t* k) {
  int32_t t = k->type_index;
  if (t < PF_TYPE_STATIC_OBJECT_BEGIN)
    return t >= 0 && t != PF_TYPE_DLTENSOR_PTR && t != PF_TYPE_OBJECT_RVALUE_REF;
  return t == PF_TYPE_STR || t == PF_TYPE_BYTES || pf__object_hash_known(t);
}

/* Raises TypeError for a new key of a type pf__hash_known refuses. */
static int pf__unhashable_key(const char* func, const pf_any_t* key) {
  PF_ERROR_SET(PF_ERR_TYPE,
               "%s: argument key: expected str, bytes, int or Object, got %s, which TVM-FFI "
               "hashes with a registered __any_hash__ that packfn cannot compute",
               func, pf_type_name(key->type_index));
  return -1;
}

/* Raises TypeError for a write that would place again the keys of a map holding `key`, which
 * pf__hash_known refuses; the map is left unchanged. */
static int pf__unhashable_stored(const char* func, const pf__mapcell_t* m, const pf_any_t* key) {
  const char* arg = m->header.type_index == PF_TYPE_DICT ? "dict" : "map";
  PF_ERROR_SET(PF_ERR_TYPE,
               "%s: argument %s: expected a %s whose keys packfn can hash, got one holding a %s "
               "key, which TVM-FFI hashes with a registered __any_hash__ that packfn cannot "
               "compute, and this write would move it (the %s is unchanged)",
               func, arg, arg, pf_type_name(key->type_index), arg);
  return -1;
}

/* Raises ValueError for a dense table whose metadata no TVM-FFI 0.1.x map can have (a jump
 * index past the 126 distances, a link to a slot that is no chain's body, a chain without its
 * head); the map is left unchanged. */
static int pf__corrupt(const char* func, const pf__mapcell_t* m, uint64_t slot) {
  const char* arg = m->header.type_index == PF_TYPE_DICT ? "dict" : "map";
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument %s: expected a valid %s table, got inconsistent metadata at slot "
               "%llu of %llu (the %s is unchanged)",
               func, arg, arg, (unsigned long long)slot, (unsigned long long)m->slots, arg);
  return -1;
}

/* pf__corrupt for the chain a lookup of `key` walked; out of line, off the lookups' path. */
__attribute__((noinline, cold)) static int pf__corrupt_at(const char* func, const pf__mapcell_t* m,
                                                          const pf_any_t* key);

/* ---- reading either form ---- */

static inline int pf__is_small(const pf__mapcell_t* m) {
  return (m->slots & PF__SMALL_TAG) != 0;
}

static inline uint8_t* pf__meta(const pf__mapcell_t* m, uint64_t i) {
  return &((pf__block_t*)m->data)[i / PF__BLOCK_CAP].meta[i % PF__BLOCK_CAP];
}

static inline pf__item_t* pf__item(const pf__mapcell_t* m, uint64_t i) {
  return &((pf__block_t*)m->data)[i / PF__BLOCK_CAP].items[i % PF__BLOCK_CAP];
}

static inline uint64_t pf__fib_hash(uint64_t h, uint32_t shift) {
  return (11400714819323198485ull * h) >> shift;
}

/* 1 when metadata byte `meta` holds an entry that is not the head of its chain. */
static inline int pf__is_body(uint8_t meta) {
  return (meta & 0x80) && meta != PF__EMPTY && meta != PF__PROTECTED;
}

/* The slot after i on its chain: PF__NO_INDEX at the chain's end, PF__BAD_INDEX when the
 * metadata is not a table's (a jump index >= 126, whose distance pf__probe does not have, or a
 * jump to a slot that is not a chain's body). */
static inline uint64_t pf__chain_next(const pf__mapcell_t* m, uint64_t i) {
  uint8_t jump = *pf__meta(m, i) & 0x7F;
  if (jump == 0)
    return PF__NO_INDEX;
  if (PF_UNLIKELY(jump >= PF__NUM_JUMPS))
    return PF__BAD_INDEX;
  uint64_t n = (i + pf__probe[jump]) & (m->slots - 1);
  return PF_LIKELY(pf__is_body(*pf__meta(m, n))) ? n : PF__BAD_INDEX;
}

/* What pf__find gives for a chain no table can have (see pf__corrupt); never read or written. */
static pf__kv_t pf__broken_chain;
#define PF__BROKEN (&pf__broken_chain)

/* The last slot of the chain whose head is slot i, or PF__BAD_INDEX when the chain is not a
 * table's (as in pf__find). */
static inline uint64_t pf__chain_tail(const pf__mapcell_t* m, uint64_t i) {
  for (uint64_t left = m->size;;) {
    uint64_t n = pf__chain_next(m, i);
    if (n == PF__NO_INDEX)
      return i;
    if (PF_UNLIKELY(n == PF__BAD_INDEX || --left == 0))
      return PF__BAD_INDEX;
    i = n;
  }
}

/* The entry whose key equals `key` (hash h, computed by the caller for dense maps), NULL when
 * absent, or PF__BROKEN (nothing raised) when the chain walked is not a table's: a head whose
 * jump index has no distance (126, 127), a jump to a slot that is no chain's body (whose
 * metadata, 0x80-0xFD, always holds a valid jump index), a walk longer than the map. */
static pf__kv_t* pf__find(const pf__mapcell_t* m, const pf_any_t* key, uint64_t h) {
  if (m->size == 0)
    return NULL;
  if (pf__is_small(m)) {
    pf__kv_t* kv = (pf__kv_t*)m->data;
    for (uint64_t i = 0; i < m->size; ++i)
      if (pf__key_equal(key, &kv[i].key))
        return &kv[i];
    return NULL;
  }
  uint64_t i = pf__fib_hash(h, m->fib_shift);
  uint8_t meta = *pf__meta(m, i);
  if (PF_UNLIKELY(meta >= 0x7E)) /* empty, protected, another chain's body: no chain here */
    return meta & 0x80 ? NULL : PF__BROKEN;
  for (uint64_t left = m->size;;) {
    pf__item_t* it = pf__item(m, i);
    if (pf__key_equal(key, &it->kv.key))
      return &it->kv;
    uint64_t n = pf__chain_next(m, i);
    if (n == PF__NO_INDEX)
      return NULL;
    if (PF_UNLIKELY(n == PF__BAD_INDEX || --left == 0))
      return PF__BROKEN;
    i = n;
  }
}

static pf__kv_t* pf__lookup(const pf__mapcell_t* m, const pf_any_t* key) {
  return pf__find(m, key, pf__is_small(m) ? 0 : pf__key_hash(key));
}

static int pf__corrupt_at(const char* func, const pf__mapcell_t* m, const pf_any_t* key) {
  return pf__corrupt(func, m, pf__fib_hash(pf__key_hash(key), m->fib_shift));
}

size_t pf__mapbase_size(const pf_object_t* map) {
  return (size_t)((const pf__mapcell_t*)map)->size;
}

const pf_any_t* pf__mapbase_find(const pf_object_t* map, const pf_any_t* key) {
  pf__kv_t* kv = pf__lookup((const pf__mapcell_t*)map, key);
  return kv && kv != PF__BROKEN ? &kv->value : NULL; /* a broken table: nothing found */
}

/* ---- writing: the dense form ---- */

static void pf__free_data(void* data) {
  free(data);
}

/* Slot count and Fibonacci shift of a table for `cap` entries: the power of two above cap,
 * doubled when it is less than twice cap (TVM-FFI's CalcTableSize). */
static void pf__table_size(uint64_t cap, uint32_t* shift, uint64_t* slots) {
  uint32_t s = 64;
  uint64_t n = 1;
  for (uint64_t c = cap; c; c >>= 1) {
    --s;
    n <<= 1;
  }
  if (n < cap * 2) {
    --s;
    n <<= 1;
  }
  *shift = s;
  *slots = n;
}

/* The most slots a table may have: 2^58 (blocks of 784 bytes for them would not fit in 64-bit
 * sizes anyway). Growing past it fails with ValueError, so growth always ends. */
#define PF__MAX_SLOTS ((uint64_t)1 << 58)

/* Blocks for `slots` slots, all empty; NULL with MemoryError raised naming func. */
static pf__block_t* pf__blocks_new(const char* func, uint64_t slots) {
  uint64_t n = (slots + PF__BLOCK_CAP - 1) / PF__BLOCK_CAP;
  size_t bytes;
  if (slots > PF__MAX_SLOTS || pf__mul_size((size_t)n, sizeof(pf__block_t), &bytes) != 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: a map cannot grow to %llu slots", func,
                 (unsigned long long)slots);
    return NULL;
  }
  pf__block_t* b = malloc(bytes);
  if (!b) {
    pf__raise_oom(func, bytes);
    return NULL;
  }
  for (uint64_t i = 0; i < n; ++i)
    memset(b[i].meta, PF__EMPTY, PF__BLOCK_CAP);
  return b;
}

static int pf__is_full(const pf__mapcell_t* m) {
  return (double)(m->size + 1) > (double)m->slots * 0.99;
}

/* First empty slot reachable from slot i by one jump (its jump index in *jump), or NO_INDEX.
 * Slots listed in taken[0..ntaken) count as occupied. */
static uint64_t pf__next_empty(const pf__mapcell_t* m, uint64_t i, uint8_t* jump,
                               const uint64_t* taken, size_t ntaken) {
  for (uint8_t j = 1; j < PF__NUM_JUMPS; ++j) {
    uint64_t c = (i + pf__probe[j]) & (m->slots - 1);
    if (*pf__meta(m, c) != PF__EMPTY)
      continue;
    int used = 0;
    for (size_t t = 0; t < ntaken && !used; ++t)
      used = taken[t] == c;
    if (!used) {
      *jump = j;
      return c;
    }
  }
  return PF__NO_INDEX;
}

static inline void pf__set_jump(const pf__mapcell_t* m, uint64_t i, uint8_t jump) {
  uint8_t* meta = pf__meta(m, i);
  *meta = (uint8_t)((*meta & 0x80) | jump);
}

/* Appends slot i to the insertion-order list. */
static void pf__order_push(pf__mapcell_t* m, uint64_t i) {
  pf__item_t* it = pf__item(m, i);
  it->prev = m->iter_tail;
  it->next = PF__NO_INDEX;
  if (m->iter_tail != PF__NO_INDEX)
    pf__item(m, m->iter_tail)->next = i;
  else
    m->iter_head = i;
  m->iter_tail = i;
}

static void pf__order_unlink(pf__mapcell_t* m, uint64_t i) {
  pf__item_t* it = pf__item(m, i);
  if (it->prev == PF__NO_INDEX)
    m->iter_head = it->next;
  else
    pf__item(m, it->prev)->next = it->next;
  if (it->next == PF__NO_INDEX)
    m->iter_tail = it->prev;
  else
    pf__item(m, it->next)->prev = it->prev;
}

/* Puts slot dst where slot src was on the insertion-order list (dst's data set by the caller). */
static void pf__order_replace(pf__mapcell_t* m, uint64_t src, uint64_t dst) {
  pf__item_t* s = pf__item(m, src);
  pf__item_t* d = pf__item(m, dst);
  d->prev = s->prev;
  d->next = s->next;
  if (d->prev == PF__NO_INDEX)
    m->iter_head = dst;
  else
    pf__item(m, d->prev)->next = dst;
  if (d->next == PF__NO_INDEX)
    m->iter_tail = dst;
  else
    pf__item(m, d->next)->prev = dst;
}

/* The slot before i on its chain (i is not a chain head), found from the head its key hashes
 * to; PF__NO_INDEX when that chain does not lead to i within `size` steps (a key placed by a
 * hash packfn does not compute, or broken metadata). */
static uint64_t pf__chain_prev(const pf__mapcell_t* m, uint64_t i) {
  uint64_t p = pf__fib_hash(pf__key_hash(&pf__item(m, i)->kv.key), m->fib_shift);
  if (*pf__meta(m, p) & 0x80)
    return PF__NO_INDEX; /* no chain starts there */
  for (uint64_t steps = 0; steps < m->size; ++steps) {
    uint64_t n = pf__chain_next(m, p);
    if (n == i)
      return p;
    if (n == PF__NO_INDEX || n == PF__BAD_INDEX)
      return PF__NO_INDEX;
    p = n;
  }
  return PF__NO_INDEX;
}

/* Chains longer than this are not moved aside: the table grows instead. */
#define PF__MAX_MOVE 64

/* What a write into a dense table needs (pf__spare_head, pf__dense_insert): done, a larger
 * table first (nothing changed), or an error raised (nothing changed). */
enum { PF__DONE = 0, PF__GROW = 1, PF__FAILED = -1 };

/* Frees slot `target` (the body of another key's chain) for a new chain head by moving the
 * rest of that chain after its predecessor. Plans every move first, so PF__GROW (no empty slot
 * in reach, a chain too long) and PF__FAILED (the chain's key hashes through TVM-FFI's
 * __any_hash__, or the chain is broken) change nothing. */
static int pf__spare_head(const char* func, pf__mapcell_t* m, uint64_t target) {
  const pf_any_t* key = &pf__item(m, target)->kv.key;
  if (!pf__hash_known(key))
    return pf__unhashable_stored(func, m, key);
  uint64_t prev = pf__chain_prev(m, target);
  if (prev == PF__NO_INDEX)
    return pf__corrupt(func, m, target);
  uint64_t from[PF__MAX_MOVE], to[PF__MAX_MOVE];
  uint8_t jumps[PF__MAX_MOVE];
  size_t n = 0;
  uint64_t w = prev;
  for (uint64_t r = target; r != PF__NO_INDEX; r = pf__chain_next(m, r)) {
    if (r == PF__BAD_INDEX)
      return pf__corrupt(func, m, from[n - 1]);
    if (n == PF__MAX_MOVE)
      return PF__GROW;
    uint64_t e = pf__next_empty(m, w, &jumps[n], to, n);
    if (e == PF__NO_INDEX)
      return PF__GROW;
    from[n] = r;
    to[n++] = e;
    w = e;
  }
  for (size_t k = 0; k < n; ++k) {
    pf__item(m, to[k])->kv = pf__item(m, from[k])->kv;
    *pf__meta(m, to[k]) = 0x80;
    pf__order_replace(m, from[k], to[k]);
    *pf__meta(m, from[k]) = k == 0 ? PF__PROTECTED : PF__EMPTY;
    pf__set_jump(m, prev, jumps[k]);
    prev = to[k];
  }
  return PF__DONE;
}

/* Inserts a key known to be absent (hash h) into a dense table in place: PF__DONE with its
 * entry in *out (value none, set by the caller), PF__GROW when the table must be rebuilt larger
 * first, PF__FAILED with the error raised; the last two change nothing. */
static int pf__dense_insert(const char* func, pf__mapcell_t* m, const pf_any_t* key, uint64_t h,
                            pf__kv_t** out) {
  *out = NULL;
  if (m->slots == 0 || pf__is_full(m))
    return PF__GROW;
  uint64_t i = pf__fib_hash(h, m->fib_shift);
  uint8_t meta = *pf__meta(m, i);
  if (meta == PF__EMPTY) {
    *pf__meta(m, i) = 0x00;
  } else if (meta == PF__PROTECTED) {
    return pf__corrupt(func, m, i); /* only ever there during a move */
  } else if (meta & 0x80) {
    int r = pf__spare_head(func, m, i);
    if (r != PF__DONE)
      return r;
    *pf__meta(m, i) = 0x00;
  } else {
    uint64_t tail = pf__chain_tail(m, i);
    if (tail == PF__BAD_INDEX)
      return pf__corrupt(func, m, i);
    uint8_t jump;
    uint64_t e = pf__next_empty(m, tail, &jump, NULL, 0);
    if (e == PF__NO_INDEX)
      return PF__GROW;
    *pf__meta(m, e) = 0x80;
    pf__set_jump(m, tail, jump);
    i = e;
  }
  pf__item_t* it = pf__item(m, i);
  it->kv.key = *key;
  it->kv.value = pf_any_none();
  pf__order_push(m, i);
  m->size += 1;
  *out = &it->kv;
  return PF__DONE;
}

/* Rebuilds m as a dense table of at least `slots` slots holding its entries, moved in iteration
 * order (an in-place switch when m was small: m's object has room for the dense fields),
 * doubling the slots until every entry has a place. Every key is placed again by packfn's hash,
 * so a map holding a key TVM-FFI hashes otherwise (pf__hash_known) is refused, and so is one
 * whose insertion-order list does not hold its `size` entries. On failure m is unchanged. */
static int pf__rebuild(const char* func, pf__mapcell_t* m, uint32_t shift, uint64_t slots) {
  pf_map_iter_t it;
  const pf_any_t *k, *v;
  for (;;) {
    pf__block_t* blocks = pf__blocks_new(func, slots);
    if (!blocks)
      return -1;
    pf__mapcell_t t = *m;
    t.data = blocks;
    t.size = 0;
    t.slots = slots;
    t.data_deleter = pf__free_data;
    t.fib_shift = shift;
    t.iter_head = t.iter_tail = PF__NO_INDEX;
    int r = PF__DONE, listed = 1;
    pf_map_iter_init(&m->header, &it);
    while (r == PF__DONE && t.size < m->size) {
      if (!pf__is_small(m) &&
          (it.position >= m->slots || *pf__meta(m, it.position) >= PF__PROTECTED))
        listed = 0; /* the list leads to no entry */
      if (!listed || pf_map_iter_next(&it, &k, &v) != 1) {
        listed = 0;
        break;
      }
      pf__kv_t* kv;
      if (PF_UNLIKELY(!pf__hash_known(k))) {
        r = pf__unhashable_stored(func, m, k);
        break;
      }
      r = pf__dense_insert(func, &t, k, pf__key_hash(k), &kv);
      if (r == PF__DONE)
        kv->value = *v;
    }
    /* an insertion-order list that is not `size` entries, then its end, would lose or repeat
     * entries (a list that meets an entry twice loops: it never ends) */
    if (r == PF__DONE && (!listed || pf_map_iter_next(&it, &k, &v) != 0))
      r = pf__corrupt(func, m, it.position < m->slots ? it.position : m->iter_tail);
    if (r != PF__DONE) {
      free(blocks);
      if (r == PF__FAILED)
        return -1;
      --shift; /* too crowded for the jump table: try twice the slots */
      slots *= 2;
      continue;
    }
    if (m->data && m->data_deleter)
      m->data_deleter(m->data); /* the entries were moved, not copied */
    m->data = t.data;
    m->size = t.size;
    m->slots = t.slots;
    m->data_deleter = t.data_deleter;
    m->fib_shift = t.fib_shift;
    m->padding = 0;
    m->iter_head = t.iter_head;
    m->iter_tail = t.iter_tail;
    return 0;
  }
}

/* Makes room for one more absent key (hash h) and inserts it, in place, growing the table until
 * it fits (TVM-FFI's InsertMaybeReHash); returns its entry (value none) or NULL with the error
 * raised and m unchanged. The key is owned already (or about to be: the caller's to undo). */
static pf__kv_t* pf__insert(const char* func, pf__mapcell_t* m, const pf_any_t* key, uint64_t h) {
  if (pf__is_small(m)) {
    uint64_t n = m->slots & ~PF__SMALL_TAG;
    if (m->size < n) {
      pf__kv_t* kv = (pf__kv_t*)m->data + m->size++;
      kv->key = *key;
      kv->value = pf_any_none();
      return kv;
    }
    if (n < PF__SMALL_MAX) { /* a small form with fewer slots (made by TVM-FFI): 4 slots */
      pf__kv_t* kv = malloc(PF__SMALL_MAX * sizeof *kv);
      if (!kv) {
        pf__raise_oom(func, PF__SMALL_MAX * sizeof *kv);
        return NULL;
      }
      memcpy(kv, m->data, m->size * sizeof *kv);
      if (m->data_deleter)
        m->data_deleter(m->data);
      m->data = kv;
      m->data_deleter = pf__free_data;
      m->slots = PF__SMALL_MAX | PF__SMALL_TAG;
      return pf__insert(func, m, key, h);
    }
    uint32_t shift;
    uint64_t slots;
    pf__table_size(m->size, &shift, &slots);
    if (pf__rebuild(func, m, shift, slots) != 0)
      return NULL;
  }
  for (;;) {
    pf__kv_t* kv;
    int r = pf__dense_insert(func, m, key, h, &kv);
    if (r == PF__DONE)
      return kv;
    if (r == PF__FAILED)
      return NULL;
    /* a table of fewer than 64 slots grows 4 times (a map being built passes fewer rebuilds,
     * each of which hashes every key again; TVM-FFI's table keeps no hashes), larger ones
     * twice */
    uint32_t steps = m->slots && m->slots < 64 ? 2 : 1;
    if (pf__rebuild(func, m, m->slots ? m->fib_shift - steps : 61,
                    m->slots ? m->slots << steps : 8) != 0)
      return NULL;
  }
}

/* Sets m[key] = value (views). Failure leaves m unchanged and retains and moves nothing: the
 * values are owned first (rvalue references taken from their handles), then placed, and all is
 * put back if the placing fails. */
static int pf__set(const char* func, pf__mapcell_t* m, const pf_any_t* key, const pf_any_t* value) {
  static const char* const names[2] = {"key", "value"};
  if (!key || !value)
    return PF__NULL_ARG(func, key ? "value" : "key");
  if (pf__check_key(func, key) != 0)
    return -1;
  int key_is_map = pf__object_of(key) == &m->header;
  if (key_is_map || pf__object_of(value) == &m->header) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: a map cannot contain itself", func,
                 key_is_map ? "key" : "value");
    return -1;
  }
  pf_any_t kview = pf__key_view(key);
  uint64_t h = pf__key_hash(&kview);
  pf__kv_t* kv = pf__find(m, &kview, h);
  if (kv == PF__BROKEN)
    return pf__corrupt_at(func, m, &kview);
  if (kv) {
    pf_any_t owned;
    if (pf__own_all(func, names + 1, value, 1, &owned) != 0)
      return -1;
    pf_any_t old = kv->value;
    kv->value = owned;
    pf_any_release(&old); /* last: its deleter may run arbitrary code */
    return 0;
  }
  if (!pf__hash_known(&kview))
    return pf__unhashable_key(func, &kview);
  pf_any_t views[2] = {*key, *value};
  pf_any_t owned[2];
  if (pf__own_begin(func, names, views, 2, owned) != 0)
    return -1;
  kv = pf__insert(func, m, &owned[0], h);
  if (!kv) {
    pf__own_abort(views, owned, 2);
    return -1;
  }
  kv->value = owned[1];
  pf__freeze_maps(owned, 2);
  return 0;
}

/* Removes the entry at dense slot i (TVM-FFI's rule: a chain's last entry moves into the gap).
 * Every walk comes before the first change, so a broken chain (-1, ValueError) changes nothing. */
static int pf__dense_erase(const char* func, pf__mapcell_t* m, uint64_t i) {
  uint8_t meta = *pf__meta(m, i);
  uint64_t next = pf__chain_next(m, i);
  if (next == PF__BAD_INDEX)
    return pf__corrupt(func, m, i);
  pf__kv_t gone = pf__item(m, i)->kv;
  if (next == PF__NO_INDEX) {
    uint64_t prev = meta & 0x80 ? pf__chain_prev(m, i) : PF__NO_INDEX;
    if ((meta & 0x80) && prev == PF__NO_INDEX)
      return pf__corrupt(func, m, i);
    if (prev != PF__NO_INDEX)
      pf__set_jump(m, prev, 0);
    pf__order_unlink(m, i);
    *pf__meta(m, i) = PF__EMPTY;
  } else {
    uint64_t prev = i, last = next, n, steps = 0;
    while ((n = pf__chain_next(m, last)) != PF__NO_INDEX) {
      if (n == PF__BAD_INDEX || ++steps > m->size)
        return pf__corrupt(func, m, last);
      prev = last;
      last = n;
    }
    pf__order_unlink(m, i);
    pf__item(m, i)->kv = pf__item(m, last)->kv;
    pf__order_replace(m, last, i);
    *pf__meta(m, last) = PF__EMPTY;
    pf__set_jump(m, prev, 0);
  }
  m->size -= 1;
  pf_any_release(&gone.value); /* last: deleters may run arbitrary code */
  pf_any_release(&gone.key);
  return 0;
}

/* ---- packfn's maps and dicts ---- */

static void pf__release_entries(pf__mapcell_t* m) {
  if (pf__is_small(m)) {
    pf__kv_t* kv = (pf__kv_t*)m->data;
    for (uint64_t i = 0; i < m->size; ++i) {
      pf__any_release_nested(&kv[i].key); /* bounded stack for deep chains */
      pf__any_release_nested(&kv[i].value);
    }
  } else {
    for (uint64_t i = 0; i < m->slots && m->size; ++i) {
      uint8_t meta = *pf__meta(m, i);
      if (meta == PF__EMPTY || meta == PF__PROTECTED)
        continue;
      pf__any_release_nested(&pf__item(m, i)->kv.key);
      pf__any_release_nested(&pf__item(m, i)->kv.value);
    }
  }
  m->size = 0;
  if (m->data && m->data_deleter)
    m->data_deleter(m->data);
  m->data = NULL;
  m->data_deleter = NULL;
}

/* One deleter for packfn's maps and dicts: the storage may have been replaced by TVM-FFI (its
 * data_deleter then frees it). */
static void pf__map_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    pf__release_entries((pf__mapcell_t*)self);
  if (flags & PF_DELETER_WEAK)
    free(self);
}

static int pf__map_is_ours(const pf_object_t* obj) {
  return obj && obj->type_index == PF_TYPE_MAP && obj->deleter == pf__map_deleter;
}

static void pf__map_mark_frozen(pf_object_t* map) {
  __atomic_store_n(&((pf__map_t*)map)->frozen, 1, __ATOMIC_RELEASE);
}

static int pf__mapbase_new(const char* func, int32_t type_index, pf_object_t** out) {
  if (!out)
    return PF__NULL_ARG(func, "out");
  *out = NULL;
  pf__map_t* m = malloc(sizeof *m);
  if (!m)
    return pf__raise_oom(func, sizeof *m);
  pf__object_init(&m->cell.header, type_index, pf__map_deleter);
  m->cell.data = m->inline_kv;
  m->cell.size = 0;
  m->cell.slots = PF__SMALL_MAX | PF__SMALL_TAG;
  m->cell.data_deleter = NULL;
  m->cell.fib_shift = 0;
  m->cell.padding = 0;
  m->cell.iter_head = m->cell.iter_tail = PF__NO_INDEX;
  m->frozen = 0;
  m->padding = 0;
  *out = &m->cell.header;
  return 0;
}

/* The argument as a map or dict cell of type `type` (any maker), or NULL with TypeError. */
static pf__mapcell_t* pf__cell_arg(const char* func, const char* arg, const pf_object_t* obj,
                                   int32_t type) {
  if (obj && obj->type_index == type)
    return (pf__mapcell_t*)obj;
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %s: expected %s, got %s", func, arg, pf_type_name(type),
               obj ? pf_type_name(obj->type_index) : "NULL");
  return NULL;
}

/* Shared lookup: *out is the value or NULL when absent. */
static int pf__get(const char* func, const pf_object_t* map, int32_t type, const pf_any_t* key,
                   const pf_any_t** out) {
  if (!out)
    return PF__NULL_ARG(func, "out");
  *out = NULL;
  const pf__mapcell_t* m = pf__cell_arg(func, type == PF_TYPE_MAP ? "map" : "dict", map, type);
  if (!m)
    return -1;
  if (!key)
    return PF__NULL_ARG(func, "key");
  if (pf__check_key(func, key) != 0)
    return -1;
  pf_any_t k = pf__key_view(key);
  pf__kv_t* kv = pf__lookup(m, &k);
  if (PF_UNLIKELY(kv == PF__BROKEN))
    return pf__corrupt_at(func, m, &k);
  if (kv)
    *out = &kv->value;
  return 0;
}

static int pf__count(const char* func, const pf_object_t* map, int32_t type, size_t* out) {
  if (!out)
    return PF__NULL_ARG(func, "out");
  *out = 0;
  const pf__mapcell_t* m = pf__cell_arg(func, type == PF_TYPE_MAP ? "map" : "dict", map, type);
  if (!m)
    return -1;
  *out = (size_t)m->size;
  return 0;
}

int pf_map_create(pf_object_t** out) {
  return pf__mapbase_new("pf_map_create", PF_TYPE_MAP, out);
}

int pf_map_set(pf_object_t* map, const pf_any_t* key, const pf_any_t* value) {
  if (!pf__map_is_ours(map)) {
    PF_ERROR_SET(PF_ERR_TYPE,
                 "pf_map_set: argument map: expected an open Map made by packfn, got %s",
                 map ? pf_type_name(map->type_index) : "NULL");
    return -1;
  }
  if (__atomic_load_n(&((pf__map_t*)map)->frozen, __ATOMIC_ACQUIRE)) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_map_set: argument map: the map is frozen (maps are immutable "
                              "once frozen or stored in a container; pf_map_copy makes an open "
                              "copy)");
    return -1;
  }
  return pf__set("pf_map_set", (pf__mapcell_t*)map, key, value);
}

int pf_map_freeze(pf_object_t* map) {
  if (!pf__map_is_ours(map)) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_map_freeze: argument map: expected a Map made by packfn, got %s",
                 map ? pf_type_name(map->type_index) : "NULL");
    return -1;
  }
  pf__map_mark_frozen(map);
  return 0;
}

int pf_map_is_frozen(const pf_object_t* map) {
  return pf__map_is_ours(map) &&
         __atomic_load_n(&((const pf__map_t*)map)->frozen, __ATOMIC_ACQUIRE);
}

int pf_map_get(const pf_object_t* map, const pf_any_t* key, const pf_any_t** out) {
  return pf__get("pf_map_get", map, PF_TYPE_MAP, key, out);
}

int pf_map_find(const pf_object_t* map, const pf_any_t* key, const pf_any_t** out) {
  return pf__get("pf_map_find", map, PF_TYPE_MAP, key, out);
}

int pf_map_contains(const pf_object_t* map, const pf_any_t* key) {
  const pf_any_t* v;
  if (pf__get("pf_map_contains", map, PF_TYPE_MAP, key, &v) != 0)
    return -1;
  return v != NULL;
}

int pf_map_count(const pf_object_t* map, size_t* out) {
  return pf__count("pf_map_count", map, PF_TYPE_MAP, out);
}

/* The entries of src copied into the empty packfn map dst as they lie, retained: the same
 * slots, metadata and insertion order, so no key is hashed or placed again and keys of every
 * type (float, bool, none, keys TVM-FFI hashes through __any_hash__) are copied. */
static int pf__copy_table(pf__mapcell_t* dst, const pf__mapcell_t* src) {
  if (src->size == 0)
    return 0;
  if (pf__is_small(src)) {
    if (src->size > PF__SMALL_MAX) { /* more than TVM-FFI's small form holds: a table of ours */
      pf__kv_t* kv = malloc(src->size * sizeof *kv);
      if (!kv)
        return pf__raise_oom("pf_map_copy", src->size * sizeof *kv);
      dst->data = kv;
      dst->data_deleter = pf__free_data;
      dst->slots = src->size | PF__SMALL_TAG;
    }
    memcpy(dst->data, src->data, src->size * sizeof(pf__kv_t));
    dst->size = src->size;
  } else {
    pf__block_t* blocks = pf__blocks_new("pf_map_copy", src->slots);
    if (!blocks)
      return -1;
    memcpy(blocks, src->data, (src->slots + PF__BLOCK_CAP - 1) / PF__BLOCK_CAP * sizeof *blocks);
    dst->data = blocks;
    dst->data_deleter = pf__free_data;
    dst->size = src->size;
    dst->slots = src->slots;
    dst->fib_shift = src->fib_shift;
    dst->iter_head = src->iter_head;
    dst->iter_tail = src->iter_tail;
  }
  /* the references: one per entry, found as the deleter finds them */
  for (uint64_t i = 0; i < (pf__is_small(dst) ? dst->size : dst->slots); ++i) {
    pf__kv_t* kv;
    if (pf__is_small(dst)) {
      kv = (pf__kv_t*)dst->data + i;
    } else {
      uint8_t meta = *pf__meta(dst, i);
      if (meta == PF__EMPTY || meta == PF__PROTECTED)
        continue;
      kv = &pf__item(dst, i)->kv;
    }
    pf_any_retain(&kv->key);
    pf_any_retain(&kv->value);
    pf__freeze_maps(&kv->key, 1); /* stored in a container, as pf_map_set would */
    pf__freeze_maps(&kv->value, 1);
  }
  return 0;
}

int pf_map_copy(const pf_object_t* map, pf_object_t** out) {
  if (!out)
    return PF__NULL_ARG("pf_map_copy", "out");
  *out = NULL;
  if (!pf__is_mapbase(map)) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_map_copy: argument map: expected Map or Dict, got %s",
                 map ? pf_type_name(map->type_index) : "NULL");
    return -1;
  }
  pf_object_t* copy;
  if (pf_map_create(&copy) != 0)
    return -1;
  if (pf__copy_table((pf__mapcell_t*)copy, (const pf__mapcell_t*)map) != 0) {
    pf_object_release(copy);
    return -1;
  }
  *out = copy;
  return 0;
}

int pf_map_iter_init(const pf_object_t* map, pf_map_iter_t* it) {
  if (!it)
    return PF__NULL_ARG("pf_map_iter_init", "it");
  it->map = NULL;
  it->position = PF__NO_INDEX;
  if (!pf__is_mapbase(map)) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_map_iter_init: argument map: expected Map or Dict, got %s",
                 map ? pf_type_name(map->type_index) : "NULL");
    return -1;
  }
  const pf__mapcell_t* m = (const pf__mapcell_t*)map;
  it->map = map;
  it->position = pf__is_small(m) ? 0 : (m->size ? m->iter_head : PF__NO_INDEX);
  return 0;
}

int pf_map_iter_next(pf_map_iter_t* it, const pf_any_t** key, const pf_any_t** value) {
  if (key)
    *key = NULL;
  if (value)
    *value = NULL;
  if (!it || !key || !value)
    return PF__NULL_ARG("pf_map_iter_next", !it ? "it" : !key ? "key" : "value");
  if (!it->map)
    return 0;
  const pf__mapcell_t* m = (const pf__mapcell_t*)it->map;
  const pf__kv_t* kv;
  if (pf__is_small(m)) {
    if (it->position >= m->size)
      return 0;
    kv = (const pf__kv_t*)m->data + it->position++;
  } else {
    if (it->position >= m->slots) /* the end, or a link no table has */
      return 0;
    const pf__item_t* item = pf__item(m, it->position);
    it->position = item->next;
    kv = &item->kv;
  }
  *key = &kv->key;
  *value = &kv->value;
  return 1;
}

int pf_dict_create(pf_object_t** out) {
  return pf__mapbase_new("pf_dict_create", PF_TYPE_DICT, out);
}

int pf_dict_set(pf_object_t* dict, const pf_any_t* key, const pf_any_t* value) {
  pf__mapcell_t* m = pf__cell_arg("pf_dict_set", "dict", dict, PF_TYPE_DICT);
  return m ? pf__set("pf_dict_set", m, key, value) : -1;
}

int pf_dict_get(const pf_object_t* dict, const pf_any_t* key, const pf_any_t** out) {
  return pf__get("pf_dict_get", dict, PF_TYPE_DICT, key, out);
}

int pf_dict_count(const pf_object_t* dict, size_t* out) {
  return pf__count("pf_dict_count", dict, PF_TYPE_DICT, out);
}

int pf_dict_erase(pf_object_t* dict, const pf_any_t* key) {
  pf__mapcell_t* m = pf__cell_arg("pf_dict_erase", "dict", dict, PF_TYPE_DICT);
  if (!m)
    return -1;
  if (!key)
    return PF__NULL_ARG("pf_dict_erase", "key");
  if (pf__check_key("pf_dict_erase", key) != 0)
    return -1;
  pf_any_t k = pf__key_view(key);
  pf__kv_t* kv = pf__lookup(m, &k);
  if (kv == PF__BROKEN)
    return pf__corrupt_at("pf_dict_erase", m, &k);
  if (!kv)
    return 0;
  if (pf__is_small(m)) {
    pf__kv_t* base = (pf__kv_t*)m->data;
    uint64_t i = (uint64_t)(kv - base);
    pf__kv_t gone = *kv;
    memmove(kv, kv + 1, (m->size - i - 1) * sizeof *kv);
    m->size -= 1;
    pf_any_release(&gone.value);
    pf_any_release(&gone.key);
  } else {
    size_t off = (size_t)((const char*)kv - (const char*)m->data);
    size_t in_block = off % sizeof(pf__block_t) - offsetof(pf__block_t, items);
    uint64_t i = off / sizeof(pf__block_t) * PF__BLOCK_CAP + in_block / sizeof(pf__item_t);
    if (pf__dense_erase("pf_dict_erase", m, i) != 0)
      return -1;
  }
  return 1;
}
