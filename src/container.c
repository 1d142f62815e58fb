/* Containers: shapes (69) and arrays (71) in their ABI cells with the contents inline, maps (72)
 * as insertion-ordered open-addressing hash tables, and deep equality across nested containers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/container.h"

#include "common.h"

/* ---- shared helpers ---- */

/* Plain objects whose contents need no destruction: free the block on the weak flag. */
static void pf__block_deleter(void* self, int flags) {
  if (flags & PF_DELETER_WEAK)
    free(self);
}

/* mallocs `size` bytes and initialises the header (strong 1, weak 1); raises naming func. */
static void* pf__container_new(const char* func, size_t size, int32_t type_index,
                               void (*deleter)(void*, int)) {
  pf_object_t* obj = malloc(size);
  if (!obj) {
    pf__raise_oom(func, size);
    return NULL;
  }
  pf__object_init(obj, type_index, deleter);
  return obj;
}

/* 0 when obj is an instance of `type`; else TypeError "func: argument arg: expected T, got U". */
static int pf__expect(const char* func, const char* arg, const pf_object_t* obj, int32_t type) {
  if (pf_object_is_instance(obj, type))
    return 0;
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %s: expected %s, got %s", func, arg, pf_type_name(type),
               obj ? pf_type_name(obj->type_index) : "NULL");
  return -1;
}

static int pf__index_error(const char* func, int64_t index, size_t size, const char* what) {
  PF_ERROR_SET(PF_ERR_INDEX, "%s: index %lld is out of range for %s %zu", func, (long long)index,
               what, size);
  return -1;
}

/* ---- shape ---- */

typedef struct {
  pf_object_t header;
  pf_shape_cell_t cell;
  /* then: int64_t dims[cell.size] */
} pf__shape_t;

int pf_shape_create(const int64_t* dims, size_t ndim, pf_object_t** out) {
  if (!out)
    return PF__NULL_ARG("pf_shape_create", "out");
  *out = NULL;
  if (!dims && ndim)
    return PF__NULL_ARG("pf_shape_create", "dims");
  size_t bytes, total;
  if (pf__mul_size(ndim, sizeof(int64_t), &bytes) != 0 ||
      pf__add_size(sizeof(pf__shape_t), bytes, &total) != 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_shape_create: argument ndim: %zu extents is too many", ndim);
    return -1;
  }
  pf__shape_t* s = pf__container_new("pf_shape_create", total, PF_TYPE_SHAPE, pf__block_deleter);
  if (!s)
    return -1;
  int64_t* data = (int64_t*)(s + 1);
  if (ndim)
    memcpy(data, dims, bytes);
  s->cell.data = data;
  s->cell.size = ndim;
  *out = &s->header;
  return 0;
}

int pf_shape_data(const pf_object_t* shape, const int64_t** dims, size_t* ndim) {
  if (!dims || !ndim) {
    if (dims)
      *dims = NULL;
    if (ndim)
      *ndim = 0;
    return PF__NULL_ARG("pf_shape_data", dims ? "ndim" : "dims");
  }
  *dims = NULL;
  *ndim = 0;
  if (pf__expect("pf_shape_data", "shape", shape, PF_TYPE_SHAPE) != 0)
    return -1;
  const pf_shape_cell_t* cell = (const pf_shape_cell_t*)(shape + 1);
  *dims = cell->data;
  *ndim = cell->size;
  return 0;
}

int pf_shape_get(const pf_object_t* shape, int64_t index, int64_t* out) {
  if (!out)
    return PF__NULL_ARG("pf_shape_get", "out");
  *out = 0;
  if (pf__expect("pf_shape_get", "shape", shape, PF_TYPE_SHAPE) != 0)
    return -1;
  const pf_shape_cell_t* cell = (const pf_shape_cell_t*)(shape + 1);
  if (index < 0 || (uint64_t)index >= cell->size)
    return pf__index_error("pf_shape_get", index, cell->size, "a shape of ndim");
  *out = cell->data[index];
  return 0;
}

/* ---- owning values ---- */

static int pf__map_is_ours(const pf_object_t* obj);
static void pf__map_mark_frozen(pf_object_t* map);

/* Names item i in messages: names[i], or "items[i]". */
static const char* pf__item_name(const char* const* names, size_t i, char* buf, size_t size) {
  if (names)
    return names[i];
  snprintf(buf, size, "items[%zu]", i);
  return buf;
}

/* 0 when `v` has an owned form pf_any_to_owned can make without failing other than on
 * memory; otherwise raises naming func and the item. With `owned_only`, views (types 7-10) are
 * refused too: the item must already be owned (pf_array_create_take). */
static int pf__check_ownable(const char* func, const char* item, const pf_any_t* v,
                             int owned_only) {
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

/* The object a value holds or an rvalue reference points at, else NULL. */
static const pf_object_t* pf__object_of(const pf_any_t* v) {
  if (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    return v->v_obj;
  if (v->type_index == PF_TYPE_OBJECT_RVALUE_REF && v->v_ptr)
    return *(pf_object_t* const*)v->v_ptr;
  return NULL;
}

/* Freezes the packfn maps among owned values: a map stored in a container never changes. */
static void pf__freeze_maps(const pf_any_t* values, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (values[i].type_index == PF_TYPE_MAP && pf__map_is_ours(values[i].v_obj))
      pf__map_mark_frozen(values[i].v_obj);
}

/* Makes owned copies of views[0..n) in out[0..n). Everything is checked first, then every
 * value but the rvalue references is copied (the only step that can fail, on memory; the
 * copies made so far are released), then the rvalue references are moved (cannot fail), so a
 * failure retains and moves nothing. Maps among the values are frozen. */
static int pf__own_all(const char* func, const char* const* names, const pf_any_t* views, size_t n,
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

/* ---- array ---- */

typedef struct {
  pf_object_t header;
  pf_seq_cell_t cell;
  /* then: pf_any_t items[cell.size] */
} pf__array_t;

static void pf__array_deleter(void* self, int flags) {
  pf__array_t* a = (pf__array_t*)self;
  if (flags & PF_DELETER_STRONG) {
    pf_any_t* items = (pf_any_t*)a->cell.data;
    for (int64_t i = 0; i < a->cell.size; ++i)
      pf__any_release_nested(&items[i]); /* bounded stack for deep chains */
  }
  if (flags & PF_DELETER_WEAK)
    free(self);
}

/* Allocates an array of `count` slots (not yet filled); raises naming func. */
static pf__array_t* pf__array_alloc(const char* func, size_t count) {
  size_t bytes, total;
  if (pf__mul_size(count, sizeof(pf_any_t), &bytes) != 0 ||
      pf__add_size(sizeof(pf__array_t), bytes, &total) != 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument count: %zu items is too many", func, count);
    return NULL;
  }
  pf__array_t* a = pf__container_new(func, total, PF_TYPE_ARRAY, pf__array_deleter);
  if (!a)
    return NULL;
  a->cell.data = a + 1;
  a->cell.size = (int64_t)count;
  a->cell.capacity = (int64_t)count;
  a->cell.data_deleter = NULL;
  return a;
}

/* Checks the arguments common to both constructors. */
static int pf__array_args(const char* func, const pf_any_t* items, size_t count,
                          pf_object_t** out) {
  if (!out)
    return PF__NULL_ARG(func, "out");
  *out = NULL;
  if (!items && count)
    return PF__NULL_ARG(func, "items");
  return 0;
}

int pf_array_create(const pf_any_t* items, size_t count, pf_object_t** out) {
  if (pf__array_args("pf_array_create", items, count, out) != 0)
    return -1;
  pf__array_t* a = pf__array_alloc("pf_array_create", count);
  if (!a)
    return -1;
  if (pf__own_all("pf_array_create", NULL, items, count, (pf_any_t*)a->cell.data) != 0) {
    free(a);
    return -1;
  }
  *out = &a->header;
  return 0;
}

int pf_array_create_take(pf_any_t* items, size_t count, pf_object_t** out) {
  if (pf__array_args("pf_array_create_take", items, count, out) != 0)
    return -1;
  char buf[48];
  for (size_t i = 0; i < count; ++i)
    if (pf__check_ownable("pf_array_create_take", pf__item_name(NULL, i, buf, sizeof buf),
                          &items[i], 1) != 0)
      return -1;
  pf__array_t* a = pf__array_alloc("pf_array_create_take", count);
  if (!a)
    return -1;
  pf_any_t* slots = (pf_any_t*)a->cell.data;
  for (size_t i = 0; i < count; ++i)
    slots[i] = pf_any_move(&items[i]);
  pf__freeze_maps(slots, count);
  *out = &a->header;
  return 0;
}

/* The cell of an array argument, or NULL with TypeError raised. */
static const pf_seq_cell_t* pf__array_cell(const char* func, const pf_object_t* array) {
  if (pf__expect(func, "array", array, PF_TYPE_ARRAY) != 0)
    return NULL;
  return (const pf_seq_cell_t*)(array + 1);
}

int pf_array_count(const pf_object_t* array, size_t* out) {
  if (!out)
    return PF__NULL_ARG("pf_array_count", "out");
  *out = 0;
  const pf_seq_cell_t* cell = pf__array_cell("pf_array_count", array);
  if (!cell)
    return -1;
  *out = (size_t)cell->size;
  return 0;
}

int pf_array_get(const pf_object_t* array, int64_t index, const pf_any_t** out) {
  if (!out)
    return PF__NULL_ARG("pf_array_get", "out");
  *out = NULL;
  const pf_seq_cell_t* cell = pf__array_cell("pf_array_get", array);
  if (!cell)
    return -1;
  if (index < 0 || index >= cell->size)
    return pf__index_error("pf_array_get", index, (size_t)cell->size, "an array of size");
  *out = (const pf_any_t*)cell->data + index;
  return 0;
}

int pf_array_items(const pf_object_t* array, const pf_any_t** items, size_t* count) {
  if (!items || !count) {
    if (items)
      *items = NULL;
    if (count)
      *count = 0;
    return PF__NULL_ARG("pf_array_items", items ? "count" : "items");
  }
  *items = NULL;
  *count = 0;
  const pf_seq_cell_t* cell = pf__array_cell("pf_array_items", array);
  if (!cell)
    return -1;
  *items = (const pf_any_t*)cell->data;
  *count = (size_t)cell->size;
  return 0;
}

/* ---- map ---- */

/* An insertion-ordered hash map: entries live densely in `items` in insertion order; `slots`
 * is an open-addressing (linear probing) index into them, at most half full. The three arrays
 * share one block starting at `items`. */
typedef struct {
  pf_object_t header;
  pf_map_item_t* items; /* capacity entries, the first count used; owns the block */
  uint64_t* hashes;     /* hashes[i]: pf_any_hash of items[i].key */
  size_t* slots;        /* 2 * capacity slots: 0 empty, else an index into items plus 1 */
  size_t count;
  size_t capacity; /* 0 or a power of two */
  int frozen;      /* set once, never cleared */
} pf__map_t;

/* Capacity of a map's first table: small maps (kwargs, metadata) fit without growing. */
#define PF__MAP_MIN_CAPACITY 8

static void pf__map_deleter(void* self, int flags) {
  pf__map_t* m = (pf__map_t*)self;
  if (flags & PF_DELETER_STRONG) {
    for (size_t i = 0; i < m->count; ++i) {
      pf__any_release_nested(&m->items[i].key); /* bounded stack for deep chains */
      pf__any_release_nested(&m->items[i].value);
    }
    free(m->items);
  }
  if (flags & PF_DELETER_WEAK)
    free(self);
}

static int pf__map_is_ours(const pf_object_t* obj) {
  return obj && obj->type_index == PF_TYPE_MAP && obj->deleter == pf__map_deleter;
}

static void pf__map_mark_frozen(pf_object_t* map) {
  __atomic_store_n(&((pf__map_t*)map)->frozen, 1, __ATOMIC_RELEASE);
}

/* The map argument as ours, or NULL with TypeError raised. */
static pf__map_t* pf__map_arg(const char* func, const pf_object_t* map) {
  if (pf__map_is_ours(map))
    return (pf__map_t*)map;
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument map: expected a Map made by packfn, got %s", func,
               map ? pf_type_name(map->type_index) : "NULL");
  return NULL;
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
    if (key->v_ptr)
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

/* Index of the item whose key equals `key` (hash h), or -1. */
static ptrdiff_t pf__map_lookup(const pf__map_t* m, const pf_any_t* key, uint64_t h) {
  if (!m->count)
    return -1;
  size_t mask = 2 * m->capacity - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    size_t s = m->slots[i];
    if (!s)
      return -1;
    if (m->hashes[s - 1] == h && pf_any_equal(&m->items[s - 1].key, key))
      return (ptrdiff_t)(s - 1);
  }
}

/* Records item `index` (hash h) in a slot table of 2 * capacity entries with room. */
static void pf__map_index(size_t* slots, size_t capacity, uint64_t h, size_t index) {
  size_t mask = 2 * capacity - 1;
  size_t i = (size_t)h & mask;
  while (slots[i])
    i = (i + 1) & mask;
  slots[i] = index + 1;
}

/* Doubles the capacity (moving the items, rebuilding the index); raises on failure and leaves
 * the map as it was. */
static int pf__map_grow(pf__map_t* m) {
  size_t cap = m->capacity ? m->capacity * 2 : PF__MAP_MIN_CAPACITY;
  const size_t per_item = sizeof(pf_map_item_t) + sizeof(uint64_t) + 2 * sizeof(size_t);
  size_t total;
  if (cap < m->capacity || pf__mul_size(cap, per_item, &total) != 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_map_set: a map cannot grow beyond %zu entries", m->capacity);
    return -1;
  }
  pf_map_item_t* items = malloc(total);
  if (!items)
    return pf__raise_oom("pf_map_set", total);
  uint64_t* hashes = (uint64_t*)(items + cap);
  size_t* slots = (size_t*)(hashes + cap);
  memset(slots, 0, 2 * cap * sizeof(size_t));
  if (m->count) {
    memcpy(items, m->items, m->count * sizeof(pf_map_item_t));
    memcpy(hashes, m->hashes, m->count * sizeof(uint64_t));
  }
  for (size_t i = 0; i < m->count; ++i)
    pf__map_index(slots, cap, hashes[i], i);
  free(m->items);
  m->items = items;
  m->hashes = hashes;
  m->slots = slots;
  m->capacity = cap;
  return 0;
}

int pf_map_create(pf_object_t** out) {
  if (!out)
    return PF__NULL_ARG("pf_map_create", "out");
  *out = NULL;
  pf__map_t* m =
      pf__container_new("pf_map_create", sizeof(pf__map_t), PF_TYPE_MAP, pf__map_deleter);
  if (!m)
    return -1;
  m->items = NULL;
  m->hashes = NULL;
  m->slots = NULL;
  m->count = 0;
  m->capacity = 0;
  m->frozen = 0;
  *out = &m->header;
  return 0;
}

int pf_map_set(pf_object_t* map, const pf_any_t* key, const pf_any_t* value) {
  static const char* const names[2] = {"key", "value"};
  pf__map_t* m = pf__map_arg("pf_map_set", map);
  if (!m)
    return -1;
  if (__atomic_load_n(&m->frozen, __ATOMIC_ACQUIRE)) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_map_set: argument map: the map is frozen (maps are immutable "
                              "once frozen or stored in a container)");
    return -1;
  }
  if (!key || !value)
    return PF__NULL_ARG("pf_map_set", key ? "value" : "key");
  if (pf__check_key("pf_map_set", key) != 0)
    return -1;
  int key_is_map = pf__object_of(key) == map;
  if (key_is_map || pf__object_of(value) == map) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_map_set: argument %s: a map cannot contain itself",
                 key_is_map ? "key" : "value");
    return -1;
  }
  uint64_t h = pf_any_hash(key);
  ptrdiff_t found = pf__map_lookup(m, key, h);
  if (found >= 0) {
    pf_any_t owned;
    if (pf__own_all("pf_map_set", names + 1, value, 1, &owned) != 0)
      return -1;
    pf_any_t old = m->items[found].value;
    m->items[found].value = owned;
    pf_any_release(&old); /* last: its deleter may run arbitrary code */
    return 0;
  }
  if (m->count == m->capacity && pf__map_grow(m) != 0)
    return -1;
  pf_any_t views[2] = {*key, *value};
  pf_any_t owned[2];
  if (pf__own_all("pf_map_set", names, views, 2, owned) != 0)
    return -1;
  size_t i = m->count++;
  m->items[i].key = owned[0];
  m->items[i].value = owned[1];
  m->hashes[i] = h;
  pf__map_index(m->slots, m->capacity, h, i);
  return 0;
}

int pf_map_freeze(pf_object_t* map) {
  pf__map_t* m = pf__map_arg("pf_map_freeze", map);
  if (!m)
    return -1;
  pf__map_mark_frozen(map);
  return 0;
}

int pf_map_is_frozen(const pf_object_t* map) {
  return pf__map_is_ours(map) &&
         __atomic_load_n(&((const pf__map_t*)map)->frozen, __ATOMIC_ACQUIRE);
}

/* Shared body of pf_map_get and pf_map_find: *out is the value or NULL when absent. */
static int pf__map_find(const char* func, const pf_object_t* map, const pf_any_t* key,
                        const pf_any_t** out) {
  if (!out)
    return PF__NULL_ARG(func, "out");
  *out = NULL;
  const pf__map_t* m = pf__map_arg(func, map);
  if (!m)
    return -1;
  if (!key)
    return PF__NULL_ARG(func, "key");
  if (pf__check_key(func, key) != 0)
    return -1;
  ptrdiff_t i = pf__map_lookup(m, key, pf_any_hash(key));
  if (i >= 0)
    *out = &m->items[i].value;
  return 0;
}

int pf_map_get(const pf_object_t* map, const pf_any_t* key, const pf_any_t** out) {
  return pf__map_find("pf_map_get", map, key, out);
}

int pf_map_find(const pf_object_t* map, const pf_any_t* key, const pf_any_t** out) {
  return pf__map_find("pf_map_find", map, key, out);
}

int pf_map_contains(const pf_object_t* map, const pf_any_t* key) {
  const pf_any_t* v;
  if (pf__map_find("pf_map_contains", map, key, &v) != 0)
    return -1;
  return v != NULL;
}

int pf_map_count(const pf_object_t* map, size_t* out) {
  if (!out)
    return PF__NULL_ARG("pf_map_count", "out");
  *out = 0;
  const pf__map_t* m = pf__map_arg("pf_map_count", map);
  if (!m)
    return -1;
  *out = m->count;
  return 0;
}

int pf_map_items(const pf_object_t* map, const pf_map_item_t** items, size_t* count) {
  static const pf_map_item_t empty[1];
  if (!items || !count) {
    if (items)
      *items = NULL;
    if (count)
      *count = 0;
    return PF__NULL_ARG("pf_map_items", items ? "count" : "items");
  }
  *items = NULL;
  *count = 0;
  const pf__map_t* m = pf__map_arg("pf_map_items", map);
  if (!m)
    return -1;
  *items = m->count ? m->items : empty;
  *count = m->count;
  return 0;
}

/* ---- equality ---- */

/* Equality walks nested containers with an explicit stack of frames, not recursion, so
 * arbitrarily deep nesting uses bounded C stack (issue 10, defect 8). A frame compares the
 * items of two arrays, or the entries of two maps, of the same size, from item `i` on. */
typedef struct {
  const pf_object_t* x;
  const pf_object_t* y;
  size_t i;
  size_t size;
  int is_map;
} pf__eq_frame_t;

/* Frames kept on the C stack before the walk asks malloc for more. */
#define PF__EQ_LOCAL_FRAMES 32

static int pf__shape_equal(const pf_shape_cell_t* a, const pf_shape_cell_t* b) {
  return a->size == b->size &&
         (a->size == 0 || memcmp(a->data, b->data, a->size * sizeof(int64_t)) == 0);
}

/* Compares a and b as far as it can without descending: 1 or 0 when decided, 2 when both are
 * arrays (or both maps) of the same non-zero size, with *f set up to compare their items. */
static int pf__equal_enter(const pf_any_t* a, const pf_any_t* b, pf__eq_frame_t* f) {
  if (a->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN &&
      b->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN && a->v_obj && b->v_obj &&
      a->v_obj != b->v_obj) {
    const pf_object_t* x = a->v_obj;
    const pf_object_t* y = b->v_obj;
    size_t nx, ny;
    int is_map;
    if (pf_object_is_instance(x, PF_TYPE_ARRAY) && pf_object_is_instance(y, PF_TYPE_ARRAY)) {
      nx = (size_t)((const pf_seq_cell_t*)(x + 1))->size;
      ny = (size_t)((const pf_seq_cell_t*)(y + 1))->size;
      is_map = 0;
    } else if (pf_object_is_instance(x, PF_TYPE_SHAPE) && pf_object_is_instance(y, PF_TYPE_SHAPE)) {
      return pf__shape_equal((const pf_shape_cell_t*)(x + 1), (const pf_shape_cell_t*)(y + 1));
    } else if (pf__map_is_ours(x) && pf__map_is_ours(y)) {
      nx = ((const pf__map_t*)x)->count;
      ny = ((const pf__map_t*)y)->count;
      is_map = 1;
    } else {
      return pf_any_equal(a, b);
    }
    if (nx != ny)
      return 0;
    if (nx == 0)
      return 1;
    *f = (pf__eq_frame_t){x, y, 0, nx, is_map};
    return 2;
  }
  return pf_any_equal(a, b);
}

/* The next pair of items frame f compares (and advances it); 0 when b has no entry for a's
 * key (the maps differ). */
static int pf__equal_next(pf__eq_frame_t* f, const pf_any_t** a, const pf_any_t** b) {
  size_t i = f->i++;
  if (!f->is_map) {
    *a = (const pf_any_t*)((const pf_seq_cell_t*)(f->x + 1))->data + i;
    *b = (const pf_any_t*)((const pf_seq_cell_t*)(f->y + 1))->data + i;
    return 1;
  }
  const pf__map_t* mx = (const pf__map_t*)f->x;
  const pf__map_t* my = (const pf__map_t*)f->y;
  ptrdiff_t j = pf__map_lookup(my, &mx->items[i].key, mx->hashes[i]);
  if (j < 0)
    return 0;
  *a = &mx->items[i].value;
  *b = &my->items[j].value;
  return 1;
}

int pf_container_equal(const pf_any_t* a, const pf_any_t* b) {
  if (!a || !b)
    return a == b;
  pf__eq_frame_t local[PF__EQ_LOCAL_FRAMES];
  pf__eq_frame_t* stack = local;
  size_t depth = 0, capacity = PF__EQ_LOCAL_FRAMES;
  int eq = pf__equal_enter(a, b, &stack[0]);
  if (eq == 2) {
    depth = 1;
    eq = 1;
  }
  while (depth > 0 && eq) {
    pf__eq_frame_t* top = &stack[depth - 1];
    if (top->i == top->size) {
      --depth; /* these two are equal; back to their parents */
      continue;
    }
    const pf_any_t *x, *y;
    if (!pf__equal_next(top, &x, &y)) {
      eq = 0;
      break;
    }
    pf__eq_frame_t f;
    int r = pf__equal_enter(x, y, &f);
    if (r != 2) {
      eq = r;
      continue;
    }
    if (depth == capacity) {
      size_t cap = 2 * capacity;
      pf__eq_frame_t* grown =
          stack == local ? malloc(cap * sizeof *grown) : realloc(stack, cap * sizeof *grown);
      if (!grown) {
        /* out of memory: compare this pair with a nested walk (recursion, one level per
         * PF__EQ_LOCAL_FRAMES of nesting) rather than fail, since equality never raises */
        eq = pf_container_equal(x, y);
        continue;
      }
      if (stack == local)
        memcpy(grown, local, sizeof local);
      stack = grown;
      capacity = cap;
    }
    stack[depth++] = f;
  }
  if (stack != local)
    free(stack);
  return eq;
}
