/* Maps (72) and dicts (76) in TVM-FFI 0.1.x's MapBaseObj layout (a small form of up to 4 entries
 * searched linearly, a dense form of 16-slot blocks with Fibonacci hashing, chained slots and an
 * insertion-order list) with TVM-FFI's key hashing, and the value-owning rules of containers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_private.h"

#include "common.h"
#include "bytes.h"

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

/* Everything is checked first, then every value but the rvalue references is copied (the only
 * step that can fail, on memory; the copies made so far are released), then the rvalue
 * references are moved (cannot fail), so a failure retains and moves nothing. */
int pf__own_all(const char* func, const char* const* names, const pf_any_t* views, size_t n,
                pf_any_t* out) {
  char buf[48];
  for (size_t i = 0; i < n; ++i)
    if (pf__check_ownable(func, pf__item_name(names, i, buf, sizeof buf), &views[i], 0) != 0)
      return -1;
  for (size_t i = 0; i < n; ++i) {
    out[i] = pf_any_none();
    if (views[i].type_index == PF_TYPE_OBJECT_RVALUE_REF)
      continue;
    if (pf_any_to_owned(&views[i], &out[i]) != 0) {
      for (size_t j = 0; j < i; ++j)
        pf_any_release(&out[j]);
      return -1;
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (views[i].type_index == PF_TYPE_OBJECT_RVALUE_REF)
      (void)pf_any_to_owned(&views[i], &out[i]); /* checked above: cannot fail */
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
#define PF__NUM_JUMPS 126

_Static_assert(sizeof(pf__mapcell_t) == 80, "dense map object is 80 bytes");
_Static_assert(offsetof(pf__mapcell_t, data_deleter) == 48, "MapBaseObj::data_deleter_ at 48");
_Static_assert(offsetof(pf__mapcell_t, fib_shift) == 56, "fib_shift_ at 56");
_Static_assert(sizeof(pf__item_t) == 48, "dense item is 48 bytes");
_Static_assert(sizeof(pf__block_t) == 16 * 49, "block is 16 metadata bytes and 16 items");

/* The distances a chain may jump (metadata low 7 bits index this): 0-15, then triangle
 * numbers, then sparser triangle numbers; the same table as TVM-FFI's, as readers of either
 * runtime follow the other's chains. */
static const uint64_t pf__probe[PF__NUM_JUMPS] = {0,
                                                  1,
                                                  2,
                                                  3,
                                                  4,
                                                  5,
                                                  6,
                                                  7,
                                                  8,
                                                  9,
                                                  10,
                                                  11,
                                                  12,
                                                  13,
                                                  14,
                                                  15,
                                                  21,
                                                  28,
                                                  36,
                                                  45,
                                                  55,
                                                  66,
                                                  78,
                                                  91,
                                                  105,
                                                  120,
                                                  136,
                                                  153,
                                                  171,
                                                  190,
                                                  210,
                                                  231,
                                                  253,
                                                  276,
                                                  300,
                                                  325,
                                                  351,
                                                  378,
                                                  406,
                                                  435,
                                                  465,
                                                  496,
                                                  528,
                                                  561,
                                                  595,
                                                  630,
                                                  666,
                                                  703,
                                                  741,
                                                  780,
                                                  820,
                                                  861,
                                                  903,
                                                  946,
                                                  990,
                                                  1035,
                                                  1081,
                                                  1128,
                                                  1176,
                                                  1225,
                                                  1275,
                                                  1326,
                                                  1378,
                                                  1431,
                                                  1485,
                                                  1540,
                                                  1596,
                                                  1653,
                                                  1711,
                                                  1770,
                                                  1830,
                                                  1891,
                                                  1953,
                                                  2016,
                                                  2080,
                                                  2145,
                                                  2211,
                                                  2278,
                                                  2346,
                                                  2415,
                                                  2485,
                                                  2556,
                                                  2628,
                                                  8515,
                                                  19110,
                                                  42778,
                                                  96141,
                                                  216153,
                                                  486591,
                                                  1092981,
                                                  2458653,
                                                  5532801,
                                                  12442566,
                                                  27993903,
                                                  62983476,
                                                  141717030,
                                                  318844378,
                                                  717352503,
                                                  1614057336,
                                                  3631522476,
                                                  8170957530,
                                                  18384510628,
                                                  41364789378,
                                                  93070452520,
                                                  209408356380,
                                                  471168559170,
                                                  1060128894105,
                                                  2385289465695,
                                                  5366898840628,
                                                  12075518705635,
                                                  27169915244790,
                                                  61132312065111,
                                                  137547689707000,
                                                  309482283181501,
                                                  696335127828753,
                                                  1566753995631385,
                                                  3525196511162271,
                                                  7931691992677701,
                                                  17846306936293605,
                                                  40154190677507445,
                                                  90346928918121501,
                                                  203280589587557251,
                                                  457381325854679626,
                                                  1029107982097042876,
                                                  2315492959180353330,
                                                  5209859154120846435u};

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

/* The slot after i on its chain (meta its metadata), or PF__NO_INDEX at the chain's end. */
static inline uint64_t pf__next_slot(const pf__mapcell_t* m, uint64_t i, uint8_t meta) {
  uint64_t jump = pf__probe[meta & 0x7F];
  return jump ? (i + jump) & (m->slots - 1) : PF__NO_INDEX;
}

/* The entry whose key equals `key` (hash h, computed by the caller for dense maps), or NULL. */
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
  if (meta & 0x80) /* empty, protected, or another chain's body: no chain starts here */
    return NULL;
  for (;;) {
    pf__item_t* it = pf__item(m, i);
    if (pf__key_equal(key, &it->kv.key))
      return &it->kv;
    if ((i = pf__next_slot(m, i, meta)) == PF__NO_INDEX)
      return NULL;
    meta = *pf__meta(m, i);
  }
}

static pf__kv_t* pf__lookup(const pf__mapcell_t* m, const pf_any_t* key) {
  return pf__find(m, key, pf__is_small(m) ? 0 : pf__key_hash(key));
}

size_t pf__mapbase_size(const pf_object_t* map) {
  return (size_t)((const pf__mapcell_t*)map)->size;
}

const pf_any_t* pf__mapbase_find(const pf_object_t* map, const pf_any_t* key) {
  pf__kv_t* kv = pf__lookup((const pf__mapcell_t*)map, key);
  return kv ? &kv->value : NULL;
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

/* Blocks for `slots` slots, all empty; NULL with MemoryError raised naming func. */
static pf__block_t* pf__blocks_new(const char* func, uint64_t slots) {
  uint64_t n = (slots + PF__BLOCK_CAP - 1) / PF__BLOCK_CAP;
  size_t bytes;
  if (pf__mul_size((size_t)n, sizeof(pf__block_t), &bytes) != 0) {
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

/* The slot before i on its chain (i is not a chain head). */
static uint64_t pf__chain_prev(const pf__mapcell_t* m, uint64_t i) {
  uint64_t p = pf__fib_hash(pf__key_hash(&pf__item(m, i)->kv.key), m->fib_shift);
  for (;;) {
    uint64_t n = pf__next_slot(m, p, *pf__meta(m, p));
    if (n == i)
      return p;
    p = n;
  }
}

/* Chains longer than this are not moved aside: the table is rebuilt instead. */
#define PF__MAX_MOVE 64

/* Frees slot `target` (the body of another key's chain) for a new chain head by moving the
 * rest of that chain after its predecessor. Plans every move first, so a failure (no empty
 * slot in reach: the caller rebuilds the table) changes nothing. */
static int pf__spare_head(pf__mapcell_t* m, uint64_t target) {
  uint64_t from[PF__MAX_MOVE], to[PF__MAX_MOVE];
  uint8_t jumps[PF__MAX_MOVE];
  size_t n = 0;
  uint64_t w = pf__chain_prev(m, target);
  for (uint64_t r = target; r != PF__NO_INDEX; r = pf__next_slot(m, r, *pf__meta(m, r))) {
    if (n == PF__MAX_MOVE)
      return -1;
    uint64_t e = pf__next_empty(m, w, &jumps[n], to, n);
    if (e == PF__NO_INDEX)
      return -1;
    from[n] = r;
    to[n++] = e;
    w = e;
  }
  uint64_t prev = pf__chain_prev(m, target);
  for (size_t k = 0; k < n; ++k) {
    pf__item(m, to[k])->kv = pf__item(m, from[k])->kv;
    *pf__meta(m, to[k]) = 0x80;
    pf__order_replace(m, from[k], to[k]);
    *pf__meta(m, from[k]) = k == 0 ? PF__PROTECTED : PF__EMPTY;
    pf__set_jump(m, prev, jumps[k]);
    prev = to[k];
  }
  return 0;
}

/* Inserts a key known to be absent (hash h) into a dense table in place; -1 when the table
 * must be rebuilt larger first (nothing changed then). The value is set by the caller. */
static pf__kv_t* pf__dense_insert(pf__mapcell_t* m, const pf_any_t* key, uint64_t h) {
  if (m->slots == 0 || pf__is_full(m))
    return NULL;
  uint64_t i = pf__fib_hash(h, m->fib_shift);
  uint8_t* meta = pf__meta(m, i);
  if (*meta == PF__EMPTY) {
    *meta = 0x00;
  } else if (*meta & 0x80) {
    if (pf__spare_head(m, i) != 0)
      return NULL;
    *pf__meta(m, i) = 0x00;
  } else {
    uint64_t tail = i, n;
    while ((n = pf__next_slot(m, tail, *pf__meta(m, tail))) != PF__NO_INDEX)
      tail = n;
    uint8_t jump;
    uint64_t e = pf__next_empty(m, tail, &jump, NULL, 0);
    if (e == PF__NO_INDEX)
      return NULL;
    *pf__meta(m, e) = 0x80;
    pf__set_jump(m, tail, jump);
    i = e;
  }
  pf__item_t* it = pf__item(m, i);
  it->kv.key = *key;
  it->kv.value = pf_any_none();
  pf__order_push(m, i);
  m->size += 1;
  return &it->kv;
}

/* Rebuilds m as a dense table of `slots` slots holding its entries, moved in iteration order
 * (an in-place switch when m was small: m's object has room for the dense fields). On failure
 * m is unchanged. */
static int pf__rebuild(const char* func, pf__mapcell_t* m, uint32_t shift, uint64_t slots) {
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
    int ok = 1;
    pf_map_iter_t it;
    const pf_any_t *k, *v;
    pf_map_iter_init(&m->header, &it);
    while (ok && pf_map_iter_next(&it, &k, &v) == 1) {
      pf__kv_t* kv = pf__dense_insert(&t, k, pf__key_hash(k));
      if (kv)
        kv->value = *v;
      else
        ok = 0;
    }
    if (!ok) { /* too crowded for the jump table: try twice the slots */
      free(blocks);
      --shift;
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

/* Makes room for one more absent key (hash h) and inserts it, in place; returns its entry
 * (value none) or NULL with the error raised and m unchanged. The key is owned already. */
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
  pf__kv_t* kv = pf__dense_insert(m, key, h);
  if (kv)
    return kv;
  /* a table of fewer than 64 slots grows 4 times (a map being built passes fewer rebuilds,
   * each of which hashes every key again; TVM-FFI's table keeps no hashes), larger ones twice */
  uint32_t steps = m->slots && m->slots < 64 ? 2 : 1;
  if (pf__rebuild(func, m, m->slots ? m->fib_shift - steps : 61,
                  m->slots ? m->slots << steps : 8) != 0)
    return NULL;
  kv = pf__dense_insert(m, key, h);
  return kv;
}

/* Sets m[key] = value (views). Failure leaves m unchanged and retains nothing. */
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
  if (kv) {
    pf_any_t owned;
    if (pf__own_all(func, names + 1, value, 1, &owned) != 0)
      return -1;
    pf_any_t old = kv->value;
    kv->value = owned;
    pf_any_release(&old); /* last: its deleter may run arbitrary code */
    return 0;
  }
  pf_any_t views[2] = {*key, *value};
  pf_any_t owned[2];
  if (pf__own_all(func, names, views, 2, owned) != 0)
    return -1;
  kv = pf__insert(func, m, &owned[0], h);
  if (!kv) {
    pf_any_release(&owned[0]);
    pf_any_release(&owned[1]);
    return -1;
  }
  kv->value = owned[1];
  return 0;
}

/* Removes the entry at dense slot i (TVM-FFI's rule: a chain's last entry moves into the gap). */
static void pf__dense_erase(pf__mapcell_t* m, uint64_t i) {
  uint8_t meta = *pf__meta(m, i);
  pf__kv_t gone = pf__item(m, i)->kv;
  m->size -= 1;
  if (pf__next_slot(m, i, meta) == PF__NO_INDEX) {
    if (meta & 0x80)
      pf__set_jump(m, pf__chain_prev(m, i), 0);
    pf__order_unlink(m, i);
    *pf__meta(m, i) = PF__EMPTY;
  } else {
    uint64_t prev = i, last = pf__next_slot(m, i, meta), n;
    while ((n = pf__next_slot(m, last, *pf__meta(m, last))) != PF__NO_INDEX) {
      prev = last;
      last = n;
    }
    pf__order_unlink(m, i);
    pf__item(m, i)->kv = pf__item(m, last)->kv;
    pf__order_replace(m, last, i);
    *pf__meta(m, last) = PF__EMPTY;
    pf__set_jump(m, prev, 0);
  }
  pf_any_release(&gone.value); /* last: deleters may run arbitrary code */
  pf_any_release(&gone.key);
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
  pf_map_iter_t it;
  const pf_any_t *k, *v;
  pf_map_iter_init(map, &it);
  while (pf_map_iter_next(&it, &k, &v) == 1)
    if (pf__set("pf_map_copy", (pf__mapcell_t*)copy, k, v) != 0) {
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
    if (it->position == PF__NO_INDEX)
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
    pf__dense_erase(
        m, (uint64_t)(off / sizeof(pf__block_t) * PF__BLOCK_CAP + in_block / sizeof(pf__item_t)));
  }
  return 1;
}
