/* Reading maps (72) and dicts (76) in TVM-FFI 0.1.x's MapBaseObj layout (map_private.h):
 * TVM-FFI's key hashing and equality, lookups in either form, iteration, and packfn's map/dict
 * API that only reads. Writing is map.c's. */
#include <dlfcn.h>
#include <string.h>

#include "map_private.h"

#include "common.h"
#include "bytes.h"
#include "tvm_private.h"

/* ---- the layout: the jump distances (map_private.h has the rest) ---- */

/* The distances a chain may jump (metadata low 7 bits index this): 0-15, then triangle
 * numbers, then sparser triangle numbers; the same table as TVM-FFI's, as readers of either
 * runtime follow the other's chains. */
/* clang-format off */
const uint64_t pf__probe[PF__NUM_JUMPS] = {
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

int pf__overlong_small_text(const char* func, const char* item, const pf_any_t* v) {
  PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: a small %s of length %u, more than %d", func, item,
               v->type_index == PF_TYPE_SMALL_STR ? "string" : "bytes", (unsigned)v->small_str_len,
               PF_SMALL_STR_MAX);
  return -1;
}

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

uint64_t pf__key_hash(const pf_any_t* k) {
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

int pf__check_key(const char* func, const pf_any_t* key) {
  switch (key->type_index) {
  case PF_TYPE_INT:
    return 0;
  case PF_TYPE_SMALL_STR:
  case PF_TYPE_SMALL_BYTES:
    if (key->small_str_len <= PF_SMALL_STR_MAX)
      return 0;
    /* another producer's broken value: hashing it read past its 8 bytes (review) */
    return pf__overlong_small_text(func, "key", key);
  case PF_TYPE_BYTE_ARRAY_PTR: {
    const pf_byte_array_t* b = (const pf_byte_array_t*)key->v_ptr;
    if (b && !b->data && b->size != 0) { /* bytes at NULL: hashing them crashed (review) */
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument key: a bytes view of %zu bytes with a NULL data "
                   "pointer",
                   func, b->size);
      return -1;
    }
  }
    /* fall through */
  case PF_TYPE_RAW_STR:
  case PF_TYPE_OBJECT_RVALUE_REF:
    if (key->v_ptr && (key->type_index != PF_TYPE_OBJECT_RVALUE_REF || *(void**)key->v_ptr))
      return 0;
    /* a view of a kind keys take, with nothing behind it: a NULL pointer, as for values (it
     * said "expected str, ..., got str"; review) */
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument key: %s with a NULL pointer", func,
                 key->type_index == PF_TYPE_RAW_STR          ? "a str view"
                 : key->type_index == PF_TYPE_BYTE_ARRAY_PTR ? "a bytes view"
                                                             : "an object rvalue reference");
    return -1;
  default:
    if (key->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN) {
      if (key->v_obj)
        return 0;
      const char* type = pf_type_name(key->type_index);
      PF_ERROR_SET(PF_ERR_VALUE, "%s: argument key: %s %s object with a NULL pointer", func,
                   pf__article(type), type);
      return -1;
    }
    break;
  }
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument key: expected str, bytes, int or Object, got %s", func,
               pf_type_name(key->type_index));
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

int pf__object_hash_known(int32_t t) {
  if (t == PF_TYPE_BIG_INT)
    return 0;
  const pf__attr_column_t* c = pf__any_hash_column();
  if (!c || t < c->begin_index || t - c->begin_index >= c->size)
    return 1;
  return c->data[t - c->begin_index].type_index == PF_TYPE_NONE;
}

/* Raises ValueError for a dense table whose metadata no TVM-FFI 0.1.x map can have (a jump
 * index past the 126 distances, a link to a slot that is no chain's body, a chain without its
 * head); the map is left unchanged. */
int pf__corrupt(const char* func, const pf__mapcell_t* m, uint64_t slot) {
  const char* arg = m->header.type_index == PF_TYPE_DICT ? "dict" : "map";
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument %s: expected a valid %s table, got inconsistent metadata at slot "
               "%llu of %llu (the %s is unchanged)",
               func, arg, arg, (unsigned long long)slot, (unsigned long long)m->slots, arg);
  return -1;
}

/* ---- reading either form ---- */

/* What pf__find gives for a chain no table can have (see pf__corrupt); never read or written. */
pf__kv_t pf__broken_chain;

/* The entry whose key equals `key` (hash h, computed by the caller for dense maps), NULL when
 * absent, or PF__BROKEN (nothing raised) when the chain walked is not a table's: a head whose
 * jump index has no distance (126, 127), a jump to a slot that is no chain's body (whose
 * metadata, 0x80-0xFD, always holds a valid jump index), a walk longer than the map. */
pf__kv_t* pf__find(const pf__mapcell_t* m, const pf_any_t* key, uint64_t h) {
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

int pf__corrupt_at(const char* func, const pf__mapcell_t* m, const pf_any_t* key) {
  return pf__corrupt(func, m, pf__fib_hash(pf__key_hash(key), m->fib_shift));
}

size_t pf__mapbase_size(const pf_object_t* map) {
  return (size_t)((const pf__mapcell_t*)map)->size;
}

const pf_any_t* pf__mapbase_find(const pf_object_t* map, const pf_any_t* key) {
  pf__kv_t* kv = pf__lookup((const pf__mapcell_t*)map, key);
  return kv && kv != PF__BROKEN ? &kv->value : NULL; /* a broken table: nothing found */
}

/* ---- packfn's maps and dicts: reading ---- */

pf__mapcell_t* pf__cell_arg(const char* func, const char* arg, const pf_object_t* obj,
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
    /* Below 2^32 slots the position's high half counts the entries walked, so that a damaged
     * insertion list (a foreign writer's) ends after size entries instead of looping; a link to
     * a slot that holds no entry ends the walk too, instead of handing out its uninitialised
     * key (found by review). */
    int counted = m->slots <= UINT32_MAX;
    uint64_t pos = pf__iter_slot(m, it);
    uint64_t walked = counted ? it->position >> 32 : 0;    /* meaningful while pos < slots */
    if (pos >= m->slots || (counted && walked >= m->size)) /* the end, or a link no table has */
      return 0;
    uint8_t meta = *pf__meta(m, pos);
    if (meta == PF__EMPTY || meta == PF__PROTECTED)
      return 0;
    const pf__item_t* item = pf__item(m, pos);
    uint64_t next = item->next;
    /* a link past the table is kept as the end (PF__NO_INDEX) or as bad (PF__BAD_INDEX): stored
     * as it is, its high half would read as a count and its low half as a slot (review) */
    it->position = !counted               ? next
                   : next == PF__NO_INDEX ? PF__NO_INDEX
                   : next >= m->slots     ? PF__BAD_INDEX
                                          : next | (walked + 1) << 32;
    kv = &item->kv;
  }
  *key = &kv->key;
  *value = &kv->value;
  return 1;
}

int pf_dict_get(const pf_object_t* dict, const pf_any_t* key, const pf_any_t** out) {
  return pf__get("pf_dict_get", dict, PF_TYPE_DICT, key, out);
}

int pf_dict_count(const pf_object_t* dict, size_t* out) {
  return pf__count("pf_dict_count", dict, PF_TYPE_DICT, out);
}
