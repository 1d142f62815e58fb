/* Writing maps (72) and dicts (76) in TVM-FFI 0.1.x's MapBaseObj layout (map_private.h): the
 * value-owning rules of containers, inserting into and erasing from either form (the dense
 * form's chains, moves and growth), and packfn's map and dict objects with the API that makes
 * and changes them. Hashing, lookups and iteration are map_read.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_private.h"

#include "alloc.h"
#include "common.h"
#include "map_private.h"

/* ---- owning values (every container stores owned values) ---- */

const char* pf__item_name(const char* const* names, size_t i, char* buf, size_t size) {
  if (names)
    return names[i];
  snprintf(buf, size, "items[%zu]", i);
  return buf;
}

int pf__check_ownable(const char* func, const char* const* names, size_t i, const pf_any_t* v,
                      int owned_only) {
  int32_t t = v->type_index;
  char buf[48]; /* the item's name, written only for a message (a snprintf per item cost an
                 * array of 4 ints 3500 instructions against TVM-FFI's 200) */
  int is_view = t == PF_TYPE_DLTENSOR_PTR || t == PF_TYPE_RAW_STR || t == PF_TYPE_BYTE_ARRAY_PTR ||
                t == PF_TYPE_OBJECT_RVALUE_REF;
  if (t >= PF_TYPE_STATIC_OBJECT_BEGIN || (is_view && t != PF_TYPE_DLTENSOR_PTR && !owned_only)) {
    /* objects, and the views that have an owned form: the pointer must be usable */
    const void* p = t == PF_TYPE_OBJECT_RVALUE_REF && v->v_ptr ? *(void* const*)v->v_ptr : v->v_ptr;
    if (!p) {
      PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: %s value with a NULL pointer", func,
                   pf__item_name(names, i, buf, sizeof buf), pf_type_name(t));
      return -1;
    }
    /* a bytes view pf_any_to_owned refuses (NULL data with a size, more than a bytes value
     * holds): it said "pf_any_to_owned: ...", naming no item (review); refused here */
    const pf_byte_array_t* b = p;
    if (t != PF_TYPE_BYTE_ARRAY_PTR || (b->data && b->size <= SIZE_MAX / 2))
      return 0;
    if (!b->data && b->size != 0)
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument %s: a bytes view of %zu bytes with a NULL data pointer", func,
                   pf__item_name(names, i, buf, sizeof buf), b->size);
    else if (b->size > SIZE_MAX / 2)
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument %s: a bytes view of %zu bytes, more than the %zu a bytes "
                   "value may hold",
                   func, pf__item_name(names, i, buf, sizeof buf), b->size, (size_t)(SIZE_MAX / 2));
    else
      return 0; /* NULL data, no bytes: an empty value */
    return -1;
  }
  /* a small text whose length says more than 7 bytes: pf_any_to_owned refuses it naming itself,
   * and pf_array_create_take stored it (review): refused here, naming the caller's item */
  if ((t == PF_TYPE_SMALL_STR || t == PF_TYPE_SMALL_BYTES) && v->small_str_len > PF_SMALL_STR_MAX)
    return pf__overlong_small_text(func, pf__item_name(names, i, buf, sizeof buf), v);
  /* TVM-FFI's Unchanged marker (13) is a value pf_any_to_owned copies, as the rest below 13
   * (it was refused: "expected a value with an owned form, got Unchanged"; review) */
  if (((t >= PF_TYPE_NONE && t <= PF_TYPE_SMALL_BYTES) || t == PF_TYPE_UNCHANGED) && !is_view)
    return 0;
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %s: expected %s, got %s%s (type index %d)", func,
               pf__item_name(names, i, buf, sizeof buf),
               owned_only ? "an owned value" : "a value with an owned form", pf_type_name(t),
               is_view ? " view" : "", (int)t);
  return -1;
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

/* Raises ValueError for item i, an rvalue reference to the handle item j's is to as well;
 * returns -1. */
static int pf__rvalue_twice_error(const char* func, const char* const* names, size_t i, size_t j) {
  char bi[48], bj[48];
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument %s: expected an rvalue reference to its own handle, got the handle "
               "of %s again (its reference can move once)",
               func, pf__item_name(names, i, bi, sizeof bi),
               pf__item_name(names, j, bj, sizeof bj));
  return -1;
}

/* Raises ValueError when rvalue reference views[i] points at a handle an earlier item already
 * emptied (the same handle twice); 0 otherwise. */
static int pf__check_rvalue_twice(const char* func, const char* const* names, const pf_any_t* views,
                                  size_t i) {
  const pf_any_t* v = &views[i];
  if (!pf__is_rvalue(v) || !v->v_ptr || *(pf_object_t* const*)v->v_ptr)
    return 0;
  for (size_t j = 0; j < i; ++j)
    if (pf__is_rvalue(&views[j]) && views[j].v_ptr == v->v_ptr)
      return pf__rvalue_twice_error(func, names, i, j);
  return 0;
}

/* The general pf__own_begin. Everything is checked first, each rvalue reference's object taken
 * from its handle as it is checked (so a second reference to the same handle finds it empty and
 * is refused), then every other value is copied (the only step that can fail, on memory); a
 * failure puts all back. */
__attribute__((noinline)) static int pf__own_begin_general(const char* func,
                                                           const char* const* names,
                                                           const pf_any_t* views, size_t n,
                                                           pf_any_t* out) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = pf_any_none();
    if ((pf__is_rvalue(&views[i]) && pf__check_rvalue_twice(func, names, views, i) != 0) ||
        pf__check_ownable(func, names, i, &views[i], 0) != 0) {
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

/* pf__own_simple's owned values out[0..done) released, then the general path for all n. */
__attribute__((noinline)) static int pf__own_redo(const char* func, const char* const* names,
                                                  const pf_any_t* views, size_t n, pf_any_t* out,
                                                  size_t done) {
  for (size_t k = 0; k < done; ++k)
    pf_any_release(&out[k]);
  return pf__own_begin_general(func, names, views, n, out);
}

int pf__own_begin(const char* func, const char* const* names, const pf_any_t* views, size_t n,
                  pf_any_t* out) {
  int maps = 0; /* frozen by the caller, once it keeps the values */
  size_t done = pf__own_simple(views, n, out, &maps);
  return PF_LIKELY(done == n) ? 0 : pf__own_redo(func, names, views, n, out, done);
}

int pf__own_all(const char* func, const char* const* names, const pf_any_t* views, size_t n,
                pf_any_t* out) {
  int maps = 0;
  size_t done = pf__own_simple(views, n, out, &maps);
  if (PF_UNLIKELY(done != n)) {
    if (pf__own_redo(func, names, views, n, out, done) != 0)
      return -1;
    maps = 1; /* the general path's values: look for maps among them */
  }
  if (maps) /* only once every value is owned: a failed create leaves the maps as they were */
    pf__freeze_maps(out, n);
  return 0;
}

/* ---- refusing keys TVM-FFI hashes its own way ---- */

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

/* ---- writing: the dense form ---- */

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

/* Moves of a chain planned on the stack; a longer chain plans them in heap arrays, with a hash
 * set of the slots planned (pf__plan_taken). */
#define PF__MOVE_STACK 64

/* The plan of pf__spare_head: slot from[k] moves to to[k], reached from the slot before it by
 * jump jumps[k]; on the stack up to PF__MOVE_STACK moves, then in heap arrays, with `set`, an
 * open-addressing set of the to[] slots (set_mask + 1 entries, PF__NO_INDEX empty), so that
 * asking whether a slot is taken costs the same for any length (a scan of to[] made a move of
 * n slots take n^2 steps: 0.6 s for 64 000; review). */
typedef struct {
  uint64_t *from, *to;
  uint8_t* jumps;
  size_t cap;
  uint64_t* set;
  size_t set_mask;
  uint64_t from_s[PF__MOVE_STACK], to_s[PF__MOVE_STACK];
  uint8_t jumps_s[PF__MOVE_STACK];
} pf__move_plan_t;

static size_t pf__plan_slot(const pf__move_plan_t* p, uint64_t slot) {
  size_t h = (size_t)((slot * 0x9e3779b97f4a7c15ull) >> 17) & p->set_mask;
  while (p->set[h] != PF__NO_INDEX && p->set[h] != slot)
    h = (h + 1) & p->set_mask;
  return h;
}

/* Whether slot c is a destination among the first n of plan p (NULL: none). */
static int pf__plan_taken(const pf__move_plan_t* p, size_t n, uint64_t c) {
  if (!p)
    return 0;
  if (p->set)
    return p->set[pf__plan_slot(p, c)] == c;
  for (size_t t = 0; t < n; ++t)
    if (p->to[t] == c)
      return 1;
  return 0;
}

/* First empty slot reachable from slot i by one jump (its jump index in *jump), or NO_INDEX.
 * Slots the first n moves of `plan` (NULL: none) go to count as occupied. */
static uint64_t pf__next_empty(const pf__mapcell_t* m, uint64_t i, uint8_t* jump,
                               const pf__move_plan_t* plan, size_t n) {
  for (uint8_t j = 1; j < PF__NUM_JUMPS; ++j) {
    uint64_t c = (i + pf__probe[j]) & (m->slots - 1);
    if (*pf__meta(m, c) != PF__EMPTY || pf__plan_taken(plan, n, c))
      continue;
    *jump = j;
    return c;
  }
  return PF__NO_INDEX;
}

static inline void pf__set_jump(const pf__mapcell_t* m, uint64_t i, uint8_t jump) {
  uint8_t* meta = pf__meta(m, i);
  *meta = (uint8_t)((*meta & 0x80) | jump);
}

/* 1 when an insertion-order link is the list's end or a slot of m's table, so that the list's
 * writes (pf__order_push, pf__order_unlink, pf__order_replace) through it stay in the table: a
 * foreign writer's damaged link made them write past it (review). */
static inline int pf__link_ok(const pf__mapcell_t* m, uint64_t link) {
  return link == PF__NO_INDEX || link < m->slots;
}

/* pf__link_ok for both links of the entry at slot i. */
static inline int pf__links_ok(const pf__mapcell_t* m, uint64_t i) {
  return pf__link_ok(m, pf__item(m, i)->prev) && pf__link_ok(m, pf__item(m, i)->next);
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

/* What a write into a dense table needs (pf__spare_head, pf__dense_insert): done, a larger
 * table first (nothing changed), or an error raised (nothing changed). */
enum { PF__DONE = 0, PF__GROW = 1, PF__FAILED = -1 };

/* Frees what a plan took from the heap. */
static void pf__move_plan_free(pf__move_plan_t* p) {
  if (p->from == p->from_s) /* on the stack, and no set: nothing to give back (no free calls) */
    return;
  free(p->from);
  free(p->to);
  free(p->jumps);
  free(p->set);
}

/* Room for twice as many moves, and a set of the n slots planned twice as large: 0, or -1
 * with MemoryError (the plan unchanged). */
static int pf__move_plan_grow(const char* func, pf__move_plan_t* p, size_t n) {
  size_t cap = p->cap * 2, set_size = cap * 4; /* the set at most a quarter full */
  uint64_t* from = malloc(cap * sizeof *from);
  uint64_t* to = malloc(cap * sizeof *to);
  uint8_t* jumps = malloc(cap);
  uint64_t* set = malloc(set_size * sizeof *set);
  if (!from || !to || !jumps || !set) {
    free(from);
    free(to);
    free(jumps);
    free(set);
    pf__raise_oom(func, cap * (2 * sizeof *from + 1) + set_size * sizeof *set);
    return -1;
  }
  memcpy(from, p->from, n * sizeof *from);
  memcpy(to, p->to, n * sizeof *to);
  memcpy(jumps, p->jumps, n);
  pf__move_plan_free(p);
  p->from = from;
  p->to = to;
  p->jumps = jumps;
  p->cap = cap;
  p->set = set;
  p->set_mask = set_size - 1;
  memset(set, 0xff, set_size * sizeof *set); /* PF__NO_INDEX everywhere */
  for (size_t k = 0; k < n; ++k)
    set[pf__plan_slot(p, to[k])] = to[k];
  return 0;
}

/* Frees slot `target` (the body of another key's chain) for a new chain head by moving the
 * rest of that chain after its predecessor, however long: a chain cut at 64 moves grew the
 * table instead, and keys of one hash, which stay one chain in any table, doubled it at every
 * later key landing on it, until memory ran out (TVM-FFI moves a chain of any length; review).
 * Plans every move first, so PF__GROW (no empty slot in reach) and PF__FAILED (the chain's key
 * hashes through TVM-FFI's __any_hash__, the chain is broken, no memory for the plan) change
 * nothing. */
static int pf__spare_head(const char* func, pf__mapcell_t* m, uint64_t target) {
  const pf_any_t* key = &pf__item(m, target)->kv.key;
  if (!pf__hash_known(key))
    return pf__unhashable_stored(func, m, key);
  uint64_t prev = pf__chain_prev(m, target);
  if (prev == PF__NO_INDEX)
    return pf__corrupt(func, m, target);
  pf__move_plan_t p;
  p.from = p.from_s;
  p.to = p.to_s;
  p.jumps = p.jumps_s;
  p.cap = PF__MOVE_STACK;
  p.set = NULL;
  p.set_mask = 0;
  size_t n = 0;
  int rc = PF__DONE;
  uint64_t w = prev;
  for (uint64_t r = target; r != PF__NO_INDEX; r = pf__chain_next(m, r)) {
    if (r == PF__BAD_INDEX || n >= m->size || !pf__links_ok(m, r)) { /* broken, or a cycle */
      rc = pf__corrupt(func, m, n > 0 ? p.from[n - 1] : target);
      goto done;
    }
    if (n == p.cap && pf__move_plan_grow(func, &p, n) != 0) {
      rc = PF__FAILED;
      goto done;
    }
    uint64_t e = pf__next_empty(m, w, &p.jumps[n], &p, n);
    if (e == PF__NO_INDEX) {
      rc = PF__GROW;
      goto done;
    }
    p.from[n] = r;
    p.to[n++] = e;
    if (p.set)
      p.set[pf__plan_slot(&p, e)] = e;
    w = e;
  }
  for (size_t k = 0; k < n; ++k) {
    pf__item(m, p.to[k])->kv = pf__item(m, p.from[k])->kv;
    *pf__meta(m, p.to[k]) = 0x80;
    pf__order_replace(m, p.from[k], p.to[k]);
    *pf__meta(m, p.from[k]) = k == 0 ? PF__PROTECTED : PF__EMPTY;
    pf__set_jump(m, prev, p.jumps[k]);
    prev = p.to[k];
  }
done:
  pf__move_plan_free(&p);
  return rc;
}

/* Inserts a key known to be absent (hash h) into a dense table in place: PF__DONE with its
 * entry in *out (value none, set by the caller), PF__GROW when the table must be rebuilt larger
 * first, PF__FAILED with the error raised; the last two change nothing. */
static int pf__dense_insert(const char* func, pf__mapcell_t* m, const pf_any_t* key, uint64_t h,
                            pf__kv_t** out) {
  *out = NULL;
  if (m->slots == 0 || pf__is_full(m))
    return PF__GROW;
  if (!pf__link_ok(m, m->iter_tail)) /* where pf__order_push writes */
    return pf__corrupt(func, m, m->iter_tail);
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
      uint64_t at = pf__iter_slot(m, &it);
      if (!pf__is_small(m) && (at >= m->slots || *pf__meta(m, at) >= PF__PROTECTED))
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
     * entries (a list that meets an entry twice loops: the cursor stops after `size` entries,
     * with the loop's next link still in its position) */
    uint64_t after = pf__iter_slot(m, &it);
    if (r == PF__DONE && (!listed || (!pf__is_small(m) && after != PF__NO_INDEX)))
      r = pf__corrupt(func, m, pf__is_small(m) || after < m->slots ? after : m->iter_tail);
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

/* Makes room for one more absent key and inserts it, in place, growing the table until it fits
 * (TVM-FFI's InsertMaybeReHash); returns its entry (value none) or NULL with the error raised
 * and m unchanged. The key is owned already (or about to be: the caller's to undo). *h is its
 * hash when hashed is set; else it is hashed here, only if the map is or becomes dense (a small
 * map with room never needs it). */
static pf__kv_t* pf__insert(const char* func, pf__mapcell_t* m, const pf_any_t* key, int hashed,
                            uint64_t h) {
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
      return pf__insert(func, m, key, hashed, h);
    }
    uint32_t shift;
    uint64_t slots;
    pf__table_size(m->size, &shift, &slots);
    if (pf__rebuild(func, m, shift, slots) != 0)
      return NULL;
  }
  if (!hashed)
    h = pf__key_hash(key);
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

/* pf__find in a small map (the writes' search: a map being built is small up to 4 keys): an
 * int or small-string key compared in place against keys of its own type (a small string's
 * bytes as one masked word), the general comparison only where a stored key is a string object
 * (which equals a small string of its text). Kept out of pf__find: there it cost every lookup
 * 15-70 instructions (twenty-third session). */
static inline pf__kv_t* pf__small_find(const pf__mapcell_t* m, const pf_any_t* key) {
  pf__kv_t* kv = (pf__kv_t*)m->data;
  uint64_t n = m->size;
  int32_t t = key->type_index;
  if (t == PF_TYPE_INT) {
    for (uint64_t i = 0; i < n; ++i)
      if (kv[i].key.type_index == PF_TYPE_INT && kv[i].key.v_int64 == key->v_int64)
        return &kv[i];
    return NULL;
  }
  if (t != PF_TYPE_SMALL_STR)
    return pf__find(m, key, 0);
  uint32_t len = key->small_str_len; /* at most 7: pf__check_key */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  uint64_t mask = len ? ~0ull << (64 - 8 * len) : 0;
#else
  uint64_t mask = len ? ~0ull >> (64 - 8 * len) : 0;
#endif
  uint64_t word = key->v_uint64;
  for (uint64_t i = 0; i < n; ++i) {
    const pf_any_t* b = &kv[i].key;
    if (b->type_index == PF_TYPE_SMALL_STR) {
      if (b->small_str_len == len && ((b->v_uint64 ^ word) & mask) == 0)
        return &kv[i];
    } else if (b->type_index == PF_TYPE_STR) {
      return pf__find(m, key, 0); /* another maker's string object: compared by its text */
    }
  }
  return NULL;
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
  /* refused whether or not the key is there: an existing key's view is not moved, so the value
   * alone took the reference and the call succeeded where a new key's was refused (review) */
  if (pf__is_rvalue(key) && pf__is_rvalue(value) && key->v_ptr == value->v_ptr)
    return pf__rvalue_twice_error(func, names, 1, 0);
  int key_is_self = pf__object_of(key) == &m->header;
  if (key_is_self || pf__object_of(value) == &m->header) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: a %s cannot contain itself", func,
                 key_is_self ? "key" : "value",
                 m->header.type_index == PF_TYPE_DICT ? "dict" : "map");
    return -1;
  }
  pf_any_t kview = pf__key_view(key);
  pf__key_short(&kview);
  /* a small map is searched without the hash, and hashed only if it becomes dense */
  int hashed = !pf__is_small(m);
  uint64_t h = hashed ? pf__key_hash(&kview) : 0;
  pf__kv_t* kv = hashed ? pf__find(m, &kview, h) : pf__small_find(m, &kview);
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
  /* the key as found (a short C string already the small string it is stored as); an rvalue
   * reference itself, whose handle is emptied */
  pf_any_t views[2] = {pf__is_rvalue(key) ? *key : kview, *value};
  pf_any_t owned[2];
  if (pf__own_begin(func, names, views, 2, owned) != 0)
    return -1;
  kv = pf__insert(func, m, &owned[0], hashed, h);
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
  if (next == PF__BAD_INDEX || !pf__links_ok(m, i))
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
    if (!pf__links_ok(m, last))
      return pf__corrupt(func, m, last);
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

/* A packfn map or dict, laid out as TVM-FFI lays out its own small maps: MapBaseObj's 56 bytes,
 * then the 4 entries of the small form, whose place the dense form's fields (fib_shift,
 * iter_head, iter_tail: 56..80) take once the entries moved to their blocks (pf__rebuild; the
 * same in-place switch TVM-FFI makes of its small dicts), then the frozen flag (maps only).
 * 192 bytes, TVM-FFI's small map's size; with the dense fields apart it was 224 (review of
 * issue 14's memory figures). While small, nothing reads or writes the dense fields. */
typedef struct {
  union {
    pf__mapcell_t cell;
    struct {
      char base[offsetof(pf__mapcell_t, fib_shift)];
      pf__kv_t kv[PF__SMALL_MAX];
    } small;
  } u;
  int frozen; /* set once, never cleared */
  int padding;
} pf__map_t;

_Static_assert(offsetof(pf__mapcell_t, fib_shift) == 56, "MapBaseObj is 56 bytes");
_Static_assert(offsetof(pf__map_t, u.small.kv) == 56, "small entries right after MapBaseObj");
_Static_assert(sizeof(pf__map_t) == 192, "a map is TVM-FFI's small map's 192 bytes");

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
    pf__free_nonnull(self); /* a block of the small-object allocator (pf__mapbase_new) */
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
  pf__map_t* m = pf__alloc(sizeof *m); /* with its 4 inline entries: the 192-byte class */
  if (!m)
    return pf__raise_oom(func, sizeof *m);
  pf__object_init(&m->u.cell.header, type_index, pf__map_deleter);
  m->u.cell.data = m->u.small.kv;
  m->u.cell.size = 0;
  m->u.cell.slots = PF__SMALL_MAX | PF__SMALL_TAG;
  m->u.cell.data_deleter = NULL; /* the dense fields: the entries' place until pf__rebuild */
  m->frozen = 0;
  m->padding = 0;
  *out = &m->u.cell.header;
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

int pf_dict_create(pf_object_t** out) {
  return pf__mapbase_new("pf_dict_create", PF_TYPE_DICT, out);
}

int pf_dict_set(pf_object_t* dict, const pf_any_t* key, const pf_any_t* value) {
  pf__mapcell_t* m = pf__cell_arg("pf_dict_set", "dict", dict, PF_TYPE_DICT);
  return m ? pf__set("pf_dict_set", m, key, value) : -1;
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
