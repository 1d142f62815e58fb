/* Private: maps (72) and dicts (76) in TVM-FFI 0.1.x's MapBaseObj layout (a small form of up to
 * 4 entries searched linearly, a dense form of 16-slot blocks with Fibonacci hashing, chained
 * slots and an insertion-order list), as map_read.c (hashing, lookups, iteration) and map.c
 * (owning values, writing, packfn's map objects) share them: the layout, the inline accessors
 * of either form, and what map_read.c defines for map.c. Not installed. */
#ifndef PACKFN_SRC_MAP_PRIVATE_H_
#define PACKFN_SRC_MAP_PRIVATE_H_

#include <stddef.h>
#include <stdint.h>

#include "container_private.h"

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

/* The distances a chain may jump, indexed by a metadata byte's low 7 bits (map_read.c). */
extern const uint64_t pf__probe[PF__NUM_JUMPS];

/* ---- hashing and key equality (map_read.c) ---- */

/* The key an rvalue reference stands for (its object), else the key itself. */
static inline pf_any_t pf__key_view(const pf_any_t* key) {
  if (key->type_index == PF_TYPE_OBJECT_RVALUE_REF)
    return pf_any_object(*(pf_object_t* const*)key->v_ptr);
  return *key;
}

/* A C-string key of up to 7 bytes made the small string it is stored as, in place (a write
 * hashes and compares it without a strlen each time); other keys are left as they are. Not in
 * pf__key_view: there it cost every lookup 25-40 instructions (review of the session's
 * figures). */
static inline void pf__key_short(pf_any_t* key) {
  if (key->type_index == PF_TYPE_RAW_STR && key->v_c_str)
    (void)pf__cstr_small(key->v_c_str, key);
}

/* TVM-FFI's AnyHash of a key (str, bytes, int or object; see pf__hash_known). */
uint64_t pf__key_hash(const pf_any_t* k);

/* 0 when `key` can key a map (str, bytes, int or a non-NULL object); else raises TypeError. */
int pf__check_key(const char* func, const pf_any_t* key);

/* ---- keys TVM-FFI hashes its own way (map_read.c) ---- */

/* pf__hash_known for an object type other than string and bytes. */
int pf__object_hash_known(int32_t t);

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

/* Raises ValueError for a dense table whose metadata no TVM-FFI map can have; returns -1. */
int pf__corrupt(const char* func, const pf__mapcell_t* m, uint64_t slot);

/* pf__corrupt for the chain a lookup of `key` walked; out of line, off the lookups' path. */
__attribute__((noinline, cold)) int pf__corrupt_at(const char* func, const pf__mapcell_t* m,
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

/* The slot a cursor over m names next, or PF__NO_INDEX at the end: below 2^32 dense slots its
 * position's high half counts the entries walked (pf_map_iter_next, map_read.c). */
static inline uint64_t pf__iter_slot(const pf__mapcell_t* m, const pf_map_iter_t* it) {
  return m->slots <= UINT32_MAX && it->position < PF__BAD_INDEX ? it->position & UINT32_MAX
                                                                : it->position;
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

/* What pf__find gives for a chain no table can have (map_read.c). */
extern pf__kv_t pf__broken_chain;
#define PF__BROKEN (&pf__broken_chain)

/* The entry whose key equals `key` (hash h; any for a small map), NULL when absent, or
 * PF__BROKEN (nothing raised) when the chain walked is not a table's. */
pf__kv_t* pf__find(const pf__mapcell_t* m, const pf_any_t* key, uint64_t h);

/* pf__find of `key`, hashed here when the map is dense. */
static inline pf__kv_t* pf__lookup(const pf__mapcell_t* m, const pf_any_t* key) {
  return pf__find(m, key, pf__is_small(m) ? 0 : pf__key_hash(key));
}

/* ---- packfn's maps and dicts (map_read.c) ---- */

/* The argument as a map or dict cell of type `type` (any maker), or NULL with TypeError. */
pf__mapcell_t* pf__cell_arg(const char* func, const char* arg, const pf_object_t* obj,
                            int32_t type);

/* Raises ValueError "func: argument item: a small string (or bytes) of length N, more than 7"
 * for v, another producer's small text whose length says more than it holds; returns -1. */
int pf__overlong_small_text(const char* func, const char* item, const pf_any_t* v);

#endif /* PACKFN_SRC_MAP_PRIVATE_H_ */
