/* Containers: shapes (69) and arrays (71) in their ABI cells with the contents inline, and deep
 * equality across nested containers (maps and dicts live in map.c and map_read.c). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container_private.h"

#include "alloc.h"
#include "common.h"
#include "tvm_private.h"

/* ---- shared helpers ---- */

/* Plain objects whose contents need no destruction: free the block on the weak flag. */
static void pf__block_deleter(void* self, int flags) {
  if (flags & PF_DELETER_WEAK)
    pf__free_nonnull(self);
}

/* Allocates `size` bytes from the small-object allocator (alloc.h; its deleter frees them with
 * pf__free) and initialises the header (strong 1, weak 1); raises naming func. */
static void* pf__container_new(const char* func, size_t size, int32_t type_index,
                               void (*deleter)(void*, int)) {
  pf_object_t* obj = pf__alloc(size);
  if (!obj) {
    pf__raise_oom(func, size);
    return NULL;
  }
  pf__object_init(obj, type_index, deleter);
  return obj;
}

/* pf__expect's refusal, out of line: its message buffer gave every accessor a frame (a count
 * of an array took 25 instructions). -1. */
__attribute__((noinline, cold)) static int pf__expect_failed(const char* func, const char* arg,
                                                             const pf_object_t* obj, int32_t type) {
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %s: expected %s, got %s", func, arg, pf_type_name(type),
               obj ? pf_type_name(obj->type_index) : "NULL");
  return -1;
}

/* 0 when obj is an instance of `type`; else TypeError "func: argument arg: expected T, got U". */
static inline int pf__expect(const char* func, const char* arg, const pf_object_t* obj,
                             int32_t type) {
  if (PF_LIKELY(pf_object_is_instance(obj, type)))
    return 0;
  return pf__expect_failed(func, arg, obj, type);
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

/* Fills a shape block of `ndim` extents and hands it out. */
static inline int pf__shape_fill(pf__shape_t* s, const int64_t* dims, size_t ndim,
                                 pf_object_t** out) {
  pf__object_init(&s->header, PF_TYPE_SHAPE, pf__block_deleter);
  int64_t* data = (int64_t*)(s + 1);
  for (size_t i = 0; i < ndim; ++i) /* a loop: memcpy's call cost more than a few extents */
    data[i] = dims[i];
  s->cell.data = data;
  s->cell.size = (int64_t)ndim;
  *out = &s->header;
  return 0;
}

__attribute__((noinline)) static int pf__shape_create_general(const int64_t* dims, size_t ndim,
                                                              pf_object_t** out) {
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
  return pf__shape_fill(s, dims, ndim, out);
}

/* pf__shape_create_uncached's MemoryError: out of line and given the count of extents, so that
 * the caller keeps no block size across its malloc call (a register saved and restored). */
__attribute__((noinline, cold)) static int pf__shape_oom(size_t ndim, pf_object_t** out) {
  *out = NULL;
  return pf__raise_oom("pf_shape_create", sizeof(pf__shape_t) + ndim * sizeof(int64_t));
}

/* pf_shape_create's block of up to 8 extents when this thread's list is empty (with the slabs
 * off, every time): straight to the allocator's slow half, without pf__shape_create_general's
 * checks, which pf_shape_create has made (they were 78 instructions of a 2-extent shape's 229
 * without the slabs). */
__attribute__((noinline)) static int pf__shape_create_uncached(const int64_t* dims, size_t ndim,
                                                               pf_object_t** out) {
  pf__shape_t* s = pf__alloc_uncached(sizeof(pf__shape_t) + ndim * sizeof(int64_t));
  if (!s)
    return pf__shape_oom(ndim, out);
  return pf__shape_fill(s, dims, ndim, out);
}

int pf_shape_create(const int64_t* dims, size_t ndim, pf_object_t** out) {
  /* a shape of up to 8 extents from this thread's list, without a frame; the rest (the
   * refusals, an empty list, more extents) out of line */
  if (PF_LIKELY(out && dims && ndim <= 8)) {
    pf__shape_t* s = pf__alloc_cached(sizeof(pf__shape_t) + ndim * sizeof(int64_t));
    if (PF_LIKELY(s != NULL))
      return pf__shape_fill(s, dims, ndim, out);
    return pf__shape_create_uncached(dims, ndim, out);
  }
  return pf__shape_create_general(dims, ndim, out);
}

__attribute__((noinline)) static int pf__shape_data_general(const pf_object_t* shape,
                                                            const int64_t** dims, size_t* ndim) {
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
  /* TVM-FFI's ffi::Shape(std::vector<int64_t>{}) keeps the empty vector's data(), NULL: dims
   * then points at a static extent, as the promise of a non-NULL pointer asks (it was NULL;
   * review, as pf_array_items for a list without a buffer) */
  static const int64_t no_dims;
  *dims = cell->data ? cell->data : &no_dims;
  *ndim = cell->data ? cell->size : 0;
  return 0;
}

int pf_shape_data(const pf_object_t* shape, const int64_t** dims, size_t* ndim) {
  /* a shape with its extents, without a frame; the rest (subtypes, NULL data, refusals) above */
  if (PF_LIKELY(shape && shape->type_index == PF_TYPE_SHAPE && dims && ndim)) {
    const pf_shape_cell_t* cell = (const pf_shape_cell_t*)(shape + 1);
    if (PF_LIKELY(cell->data != NULL)) {
      *dims = cell->data;
      *ndim = cell->size;
      return 0;
    }
  }
  return pf__shape_data_general(shape, dims, ndim);
}

int pf_shape_get(const pf_object_t* shape, int64_t index, int64_t* out) {
  if (!out)
    return PF__NULL_ARG("pf_shape_get", "out");
  *out = 0;
  if (pf__expect("pf_shape_get", "shape", shape, PF_TYPE_SHAPE) != 0)
    return -1;
  const pf_shape_cell_t* cell = (const pf_shape_cell_t*)(shape + 1);
  size_t ndim = cell->data ? cell->size : 0; /* no extents without data, as pf_shape_data */
  if (index < 0 || (uint64_t)index >= ndim)
    return pf__index_error("pf_shape_get", index, ndim, "a shape of ndim");
  *out = cell->data[index];
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
    pf__free_nonnull(self);
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
  if (count > (SIZE_MAX - sizeof(pf__array_t)) / sizeof(pf_any_t)) {
    /* before any item is read: a count past the caller's array read beyond it (review) */
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument count: %zu items is too many", func, count);
    return -1;
  }
  return 0;
}

int pf_array_create(const pf_any_t* items, size_t count, pf_object_t** out) {
  if (pf__array_args("pf_array_create", items, count, out) != 0)
    return -1;
  pf__array_t* a = pf__array_alloc("pf_array_create", count);
  if (!a)
    return -1;
  if (pf__own_all("pf_array_create", NULL, items, count, (pf_any_t*)a->cell.data) != 0) {
    pf__free_nonnull(a);
    return -1;
  }
  *out = &a->header;
  return 0;
}

int pf_array_create_take(pf_any_t* items, size_t count, pf_object_t** out) {
  if (pf__array_args("pf_array_create_take", items, count, out) != 0)
    return -1;
  for (size_t i = 0; i < count; ++i)
    if (pf__check_ownable("pf_array_create_take", NULL, i, &items[i], 1) != 0)
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

/* Values of a sequence cell: none without data, whatever size the cell claims (an empty list,
 * packfn's or TVM-FFI's, has no buffer; pf_array_items read it so, pf_array_count, pf_array_get
 * and equality read the size: a pointer near NULL handed out, SIGSEGV comparing; review). */
static size_t pf__seq_size(const pf_seq_cell_t* cell) {
  return cell->data ? (size_t)cell->size : 0;
}

/* The cell of an array argument, or NULL with TypeError raised. */
static const pf_seq_cell_t* pf__array_cell(const char* func, const pf_object_t* array) {
  if (array && array->type_index == PF_TYPE_LIST)
    return (const pf_seq_cell_t*)(array + 1); /* a list reads as an array */
  if (pf__expect(func, "array", array, PF_TYPE_ARRAY) != 0)
    return NULL;
  return (const pf_seq_cell_t*)(array + 1);
}

/* The cell of an array or list whose type index says so exactly, else NULL (then the general
 * path decides: subtypes, refusals). The readers' fast paths take it without a frame. */
static inline const pf_seq_cell_t* pf__seq_exact(const pf_object_t* array) {
  return array && (array->type_index == PF_TYPE_ARRAY || array->type_index == PF_TYPE_LIST)
             ? (const pf_seq_cell_t*)(array + 1)
             : NULL;
}

__attribute__((noinline)) static int pf__array_count_general(const pf_object_t* array,
                                                             size_t* out) {
  if (!out)
    return PF__NULL_ARG("pf_array_count", "out");
  *out = 0;
  const pf_seq_cell_t* cell = pf__array_cell("pf_array_count", array);
  if (!cell)
    return -1;
  *out = pf__seq_size(cell);
  return 0;
}

int pf_array_count(const pf_object_t* array, size_t* out) {
  const pf_seq_cell_t* cell = pf__seq_exact(array);
  if (PF_LIKELY(cell && out)) {
    *out = pf__seq_size(cell);
    return 0;
  }
  return pf__array_count_general(array, out);
}

__attribute__((noinline)) static int pf__array_get_general(const pf_object_t* array, int64_t index,
                                                           const pf_any_t** out) {
  if (!out)
    return PF__NULL_ARG("pf_array_get", "out");
  *out = NULL;
  const pf_seq_cell_t* cell = pf__array_cell("pf_array_get", array);
  if (!cell)
    return -1;
  size_t size = pf__seq_size(cell);
  if (index < 0 || (uint64_t)index >= size)
    return pf__index_error("pf_array_get", index, size, "an array of size");
  *out = (const pf_any_t*)cell->data + index;
  return 0;
}

int pf_array_get(const pf_object_t* array, int64_t index, const pf_any_t** out) {
  const pf_seq_cell_t* cell = pf__seq_exact(array);
  if (PF_LIKELY(cell && out && index >= 0 && (uint64_t)index < pf__seq_size(cell))) {
    *out = (const pf_any_t*)cell->data + index;
    return 0;
  }
  return pf__array_get_general(array, index, out);
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
  /* an empty list (packfn's or TVM-FFI's) has no buffer yet: items then points at a static
   * value, as the promise of a non-NULL pointer asks (it was NULL; review) */
  static const pf_any_t no_items;
  *items = cell->data ? (const pf_any_t*)cell->data : &no_items;
  *count = pf__seq_size(cell);
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
  pf_map_iter_t it; /* maps: the walk over x's entries */
} pf__eq_frame_t;

/* Frames kept on the C stack before the walk asks malloc for more. */
#define PF__EQ_LOCAL_FRAMES 32

/* The pairs of maps (and dicts) the walk has entered. Dicts change in place, so they can hold
 * themselves through other containers (d["a"] = [d]): a walk that meets a pair it entered before
 * does not enter it again, and counts it equal (if it differs, the first entry of the pair finds
 * that out). So the walk ends on cycles, and compares shared sub-maps once. Arrays are immutable
 * and lists compare by identity, so every cycle the walk can follow passes through a map or
 * dict: only those are recorded, and a deep chain of arrays pays nothing. */
#define PF__EQ_LOCAL_PAIRS 32 /* a power of two; on the C stack before malloc */
typedef struct {
  const pf_object_t *x, *y;
} pf__eq_pair_t;
typedef struct {
  pf__eq_pair_t* slots; /* open addressing, linear probing; x == NULL: empty */
  size_t capacity;      /* a power of two, at least twice count */
  size_t count;
  pf__eq_pair_t local[PF__EQ_LOCAL_PAIRS];
} pf__eq_seen_t;

static size_t pf__eq_pair_hash(const pf_object_t* x, const pf_object_t* y) {
  uint64_t h = (uint64_t)(uintptr_t)x * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)y;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return (size_t)(h ^ (h >> 32));
}

/* Records (x, y): 1 when it was recorded before, 0 when new, -1 when out of memory. */
static int pf__eq_seen_add(pf__eq_seen_t* s, const pf_object_t* x, const pf_object_t* y) {
  if (2 * (s->count + 1) > s->capacity) {
    size_t cap = 2 * s->capacity;
    pf__eq_pair_t* grown = cap <= SIZE_MAX / sizeof *grown ? calloc(cap, sizeof *grown) : NULL;
    if (!grown)
      return -1;
    for (size_t i = 0; i < s->capacity; ++i) {
      if (!s->slots[i].x)
        continue;
      size_t j = pf__eq_pair_hash(s->slots[i].x, s->slots[i].y) & (cap - 1);
      while (grown[j].x)
        j = (j + 1) & (cap - 1);
      grown[j] = s->slots[i];
    }
    if (s->slots != s->local)
      free(s->slots);
    s->slots = grown;
    s->capacity = cap;
  }
  size_t j = pf__eq_pair_hash(x, y) & (s->capacity - 1);
  for (; s->slots[j].x; j = (j + 1) & (s->capacity - 1))
    if (s->slots[j].x == x && s->slots[j].y == y)
      return 1;
  s->slots[j].x = x;
  s->slots[j].y = y;
  s->count++;
  return 0;
}

/* No extents without data, as pf_shape_data and pf_shape_get read a cell (it read the NULL data
 * of a cell claiming extents: SIGSEGV; review). */
static int pf__shape_equal(const pf_shape_cell_t* a, const pf_shape_cell_t* b) {
  size_t na = a->data ? a->size : 0, nb = b->data ? b->size : 0;
  return na == nb && (na == 0 || memcmp(a->data, b->data, na * sizeof(int64_t)) == 0);
}

/* Compares a and b as far as it can without descending: 1 or 0 when decided, 2 when both are
 * arrays (or both maps, a pair not met before) of the same non-zero size, with *f set up to
 * compare their items; -1 when out of memory for the pairs. */
static int pf__equal_enter(const pf_any_t* a, const pf_any_t* b, pf__eq_frame_t* f,
                           pf__eq_seen_t* seen) {
  if (a->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN &&
      b->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN && a->v_obj && b->v_obj &&
      a->v_obj != b->v_obj) {
    const pf_object_t* x = a->v_obj;
    const pf_object_t* y = b->v_obj;
    size_t nx, ny;
    int is_map;
    if (pf_object_is_instance(x, PF_TYPE_ARRAY) && pf_object_is_instance(y, PF_TYPE_ARRAY)) {
      nx = pf__seq_size((const pf_seq_cell_t*)(x + 1));
      ny = pf__seq_size((const pf_seq_cell_t*)(y + 1));
      is_map = 0;
    } else if (pf_object_is_instance(x, PF_TYPE_SHAPE) && pf_object_is_instance(y, PF_TYPE_SHAPE)) {
      return pf__shape_equal((const pf_shape_cell_t*)(x + 1), (const pf_shape_cell_t*)(y + 1));
    } else if (pf__is_mapbase(x) && x->type_index == y->type_index) {
      nx = pf__mapbase_size(x);
      ny = pf__mapbase_size(y);
      is_map = 1;
    } else {
      return pf_any_equal(a, b);
    }
    if (nx != ny)
      return 0;
    if (nx == 0)
      return 1;
    if (is_map) {
      int met = pf__eq_seen_add(seen, x, y);
      if (met != 0)
        return met; /* 1: entered before (on the way, or found equal); -1: no memory */
    }
    *f = (pf__eq_frame_t){x, y, 0, nx, is_map, {NULL, 0}};
    if (is_map)
      (void)pf_map_iter_init(x, &f->it); /* a map: cannot fail */
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
  const pf_any_t* key;
  if (pf_map_iter_next(&f->it, &key, a) != 1)
    return 0; /* fewer entries than its size says: not a map to call equal */
  *b = pf__mapbase_find(f->y, key);
  return *b != NULL;
}

/* Compares the items of frame `first`, descending: 1, 0, or -1 when out of memory. */
static int pf__equal_frames(const pf__eq_frame_t* first, pf__eq_seen_t* seen) {
  pf__eq_frame_t local[PF__EQ_LOCAL_FRAMES];
  pf__eq_frame_t* stack = local;
  size_t depth = 1, capacity = PF__EQ_LOCAL_FRAMES;
  stack[0] = *first;
  int eq = 1;
  while (depth > 0 && eq == 1) {
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
    int r = pf__equal_enter(x, y, &f, seen);
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
         * PF__EQ_LOCAL_FRAMES of nesting) rather than fail, since equality never raises; the
         * nested walk shares the pairs met, so it too ends on cycles */
        eq = pf__equal_frames(&f, seen);
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

int pf_container_equal(const pf_any_t* a, const pf_any_t* b) {
  if (!a || !b)
    return a == b;
  pf__eq_seen_t seen;
  memset(seen.local, 0, sizeof seen.local);
  seen.slots = seen.local;
  seen.capacity = PF__EQ_LOCAL_PAIRS;
  seen.count = 0;
  pf__eq_frame_t first;
  int eq = pf__equal_enter(a, b, &first, &seen);
  if (eq == 2)
    eq = pf__equal_frames(&first, &seen);
  if (seen.slots != seen.local)
    free(seen.slots);
  return eq == 1; /* -1, out of memory for the pairs: not shown equal */
}

/* ---- list (75): a mutable sequence in TVM-FFI's ListObj layout ----
 * The values live in a separate buffer (cell.data, cell.capacity slots) freed through
 * cell.data_deleter, which either runtime may swap for a larger one. TVM-FFI 0.1.x grows a list
 * with C++ operator new but keeps the old data_deleter, so once packfn has joined TVM-FFI a
 * packfn list allocates with operator new and frees with operator delete (found through
 * libtvm_ffi's own dependencies) and both runtimes' buffers pair up; alone, malloc and free. */

typedef struct {
  pf_object_t header;
  pf_seq_cell_t cell;
} pf__list_t;

typedef struct {
  void* (*alloc)(size_t size, const void* nothrow_tag); /* operator new(size_t, nothrow_t&) */
  void (*release)(void* data);                          /* operator delete(void*) */
  const void* nothrow_tag;                              /* &std::nothrow */
} pf__cxx_heap_t;

static pf__cxx_heap_t pf__cxx_heap;
static int pf__cxx_heap_state; /* 0 not looked up, 1 found, -1 absent, 2 being published */

/* The three symbols from one scope, so new and delete pair up: the global scope first (where
 * an interposing allocator, e.g. a sanitizer's, lives), else libtvm_ffi and its dependencies. */
static int pf__cxx_heap_from(void* scope, pf__cxx_heap_t* h) {
  *(void**)&h->alloc = dlsym(scope, "_ZnwmRKSt9nothrow_t");
  *(void**)&h->release = dlsym(scope, "_ZdlPv");
  h->nothrow_tag = dlsym(scope, "_ZSt7nothrow");
  return h->alloc && h->release && h->nothrow_tag;
}

/* C++'s heap once joined (looked up at the first list growth after the join), else NULL: the
 * published one, or, while another thread publishes it, the caller's own copy in *mine. The
 * dlsym calls run under no lock and no pthread_once: they take the loader's lock, and a library
 * constructor (running under it) that grows a list would otherwise wait on a thread waiting for
 * that lock (a deadlock, found by review). Every thread finds the same symbols. */
static const pf__cxx_heap_t* pf__list_heap(pf__cxx_heap_t* mine) {
  const pf__tvm_t* tvm = pf__tvm_first_use();
  if (!tvm)
    return NULL;
  int state = __atomic_load_n(&pf__cxx_heap_state, __ATOMIC_ACQUIRE);
  if (PF_LIKELY(state == 1 || state == -1))
    return state == 1 ? &pf__cxx_heap : NULL;
  int found = pf__cxx_heap_from(RTLD_DEFAULT, mine) || pf__cxx_heap_from(tvm->library, mine);
  int expected = 0;
  if (__atomic_compare_exchange_n(&pf__cxx_heap_state, &expected, 2, 0, __ATOMIC_ACQUIRE,
                                  __ATOMIC_RELAXED)) {
    pf__cxx_heap = *mine;
    __atomic_store_n(&pf__cxx_heap_state, found ? 1 : -1, __ATOMIC_RELEASE);
  }
  return found ? mine : NULL;
}

/* A list buffer of packfn's (slab block or, beyond 4 KiB, malloc block: pf__alloc), or one
 * another runtime's code put in its place keeping this deleter (a malloc block). */
static void pf__list_free_data(void* data) {
  pf__free(data);
}

static void pf__list_deleter(void* self, int flags) {
  pf__list_t* l = (pf__list_t*)self;
  if (flags & PF_DELETER_STRONG) {
    pf_any_t* items = (pf_any_t*)l->cell.data;
    for (int64_t i = 0; i < l->cell.size; ++i)
      pf__any_release_nested(&items[i]);
    l->cell.size = 0;
    if (l->cell.data_deleter)
      l->cell.data_deleter(l->cell.data);
    l->cell.data = NULL;
  }
  if (flags & PF_DELETER_WEAK)
    pf__free_nonnull(self);
}

int pf_list_create(pf_object_t** out) {
  if (!out)
    return PF__NULL_ARG("pf_list_create", "out");
  *out = NULL;
  pf__list_t* l =
      pf__container_new("pf_list_create", sizeof(pf__list_t), PF_TYPE_LIST, pf__list_deleter);
  if (!l)
    return -1;
  pf__cxx_heap_t mine;
  const pf__cxx_heap_t* heap = pf__list_heap(&mine);
  l->cell.data = NULL;
  l->cell.size = 0;
  l->cell.capacity = 0;
  /* never NULL: TVM-FFI calls it unconditionally when it grows the list */
  l->cell.data_deleter = heap ? heap->release : pf__list_free_data;
  *out = &l->header;
  return 0;
}

/* The cell of a list argument, or NULL with TypeError raised. */
static pf_seq_cell_t* pf__list_cell(const char* func, pf_object_t* list) {
  if (pf__expect(func, "list", list, PF_TYPE_LIST) != 0)
    return NULL;
  return (pf_seq_cell_t*)(list + 1);
}

/* Room for one more value: grows the buffer (doubling, at least 4 slots) into a new one of
 * this runtime's heap, moving the values and freeing the old buffer with its own deleter. */
static int pf__list_reserve_one(const char* func, pf_seq_cell_t* c) {
  if (c->size < c->capacity)
    return 0;
  /* bounded before doubling (it was doubled first: a signed overflow past INT64_MAX / 2, and
   * so was the count in the message at INT64_MAX; review) */
  int64_t cap = c->capacity < 2 ? 4 : c->capacity <= INT64_MAX / 4 ? c->capacity * 2 : -1;
  size_t bytes;
  if (cap < 0 || pf__mul_size((size_t)cap, sizeof(pf_any_t), &bytes) != 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument list: %llu values is too many", func,
                 (unsigned long long)c->size + 1);
    return -1;
  }
  pf__cxx_heap_t mine;
  const pf__cxx_heap_t* heap = pf__list_heap(&mine);
  /* packfn's buffers from the slabs: a list of 4 values spent 120 of its 685 instructions in
   * malloc and free (issue 14's creation figures) */
  void* data = heap ? heap->alloc(bytes, heap->nothrow_tag) : pf__alloc(bytes);
  if (!data)
    return pf__raise_oom(func, bytes);
  if (c->size)
    memcpy(data, c->data, (size_t)c->size * sizeof(pf_any_t));
  if (c->data_deleter)
    c->data_deleter(c->data);
  c->data = data;
  c->capacity = cap;
  c->data_deleter = heap ? heap->release : pf__list_free_data;
  return 0;
}

/* ValueError when value is the list itself (or an rvalue reference to it): a list holding
 * itself would keep itself alive forever, as a map holding itself would. */
static int pf__list_self(const char* func, const pf_object_t* list, const pf_any_t* value) {
  if (pf__object_of(value) != list)
    return 0;
  PF_ERROR_SET(PF_ERR_VALUE, "%s: argument value: a list cannot contain itself", func);
  return -1;
}

/* Inserts before `index`, or at the end when `at_end`; raises naming func. */
static int pf__list_insert(const char* func, pf_object_t* list, int64_t index, int at_end,
                           const pf_any_t* value) {
  pf_seq_cell_t* c = pf__list_cell(func, list);
  if (!c)
    return -1;
  if (!value)
    return PF__NULL_ARG(func, "value");
  if (at_end)
    index = c->size;
  if (index < 0 || index > c->size)
    return pf__index_error(func, index, (size_t)c->size, "an insert into a list of size");
  if (pf__list_self(func, list, value) != 0)
    return -1;
  /* The value owned first, while it may still point into this list's buffer (an item of it,
   * or an rvalue reference's handle there), which growing frees; and refused (a DLTensor* view,
   * NULL) before the buffer changes, so a failed call leaves the list as it was (found by
   * review: both read or left freed memory). Growing can then only fail for memory, with the
   * old buffer still there for pf__own_abort to give an rvalue reference its object back. */
  static const char* const names[] = {"value"};
  pf_any_t owned;
  if (pf__own_begin(func, names, value, 1, &owned) != 0)
    return -1;
  if (pf__list_reserve_one(func, c) != 0) {
    pf__own_abort(value, &owned, 1);
    return -1;
  }
  if (owned.type_index == PF_TYPE_MAP)
    pf__freeze_maps(&owned, 1);
  pf_any_t* items = (pf_any_t*)c->data;
  if (index < c->size) /* an append moves nothing: no call */
    memmove(items + index + 1, items + index, (size_t)(c->size - index) * sizeof(pf_any_t));
  items[index] = owned;
  c->size++;
  return 0;
}

int pf_list_insert(pf_object_t* list, int64_t index, const pf_any_t* value) {
  return pf__list_insert("pf_list_insert", list, index, 0, value);
}

int pf_list_append(pf_object_t* list, const pf_any_t* value) {
  /* The common append in place: a packfn-layout list with room, a value pf__own_simple owns
   * (not the list itself). Everything else, and every refusal, the general way. (Through
   * pf__list_insert and pf__own_begin an int's append took 120 instructions; issue 14.) */
  if (PF_LIKELY(list && list->type_index == PF_TYPE_LIST && value)) {
    pf_seq_cell_t* c = (pf_seq_cell_t*)(list + 1);
    pf_any_t owned;
    int maps = 0;
    if (c->size < c->capacity && pf__object_of(value) != list &&
        pf__own_simple(value, 1, &owned, &maps) == 1) {
      if (maps)
        pf__freeze_maps(&owned, 1);
      ((pf_any_t*)c->data)[c->size++] = owned;
      return 0;
    }
  }
  return pf__list_insert("pf_list_append", list, 0, 1, value);
}

int pf_list_set(pf_object_t* list, int64_t index, const pf_any_t* value) {
  static const char func[] = "pf_list_set";
  pf_seq_cell_t* c = pf__list_cell(func, list);
  if (!c)
    return -1;
  if (!value)
    return PF__NULL_ARG(func, "value");
  if (index < 0 || index >= c->size)
    return pf__index_error(func, index, (size_t)c->size, "a list of size");
  if (pf__list_self(func, list, value) != 0)
    return -1;
  static const char* const names[] = {"value"};
  pf_any_t owned;
  if (pf__own_all(func, names, value, 1, &owned) != 0)
    return -1;
  pf_any_t* slot = (pf_any_t*)c->data + index;
  pf_any_t old = *slot;
  *slot = owned;
  pf_any_release(&old); /* last: its deleter may run arbitrary code */
  return 0;
}

int pf_list_pop(pf_object_t* list, int64_t index, pf_any_t* out) {
  static const char func[] = "pf_list_pop";
  if (!out)
    return PF__NULL_ARG(func, "out");
  *out = pf_any_none();
  pf_seq_cell_t* c = pf__list_cell(func, list);
  if (!c)
    return -1;
  /* the message names the index the caller gave, not the one counted from the end */
  int64_t at = index < 0 ? index + c->size : index;
  if (at < 0 || at >= c->size)
    return pf__index_error(func, index, (size_t)c->size, "a list of size");
  index = at;
  pf_any_t* items = (pf_any_t*)c->data;
  *out = items[index];
  memmove(items + index, items + index + 1, (size_t)(c->size - index - 1) * sizeof(pf_any_t));
  c->size--;
  return 0;
}

int pf_list_clear(pf_object_t* list) {
  pf_seq_cell_t* c = pf__list_cell("pf_list_clear", list);
  if (!c)
    return -1;
  /* values are released from the end, each after it left the list (a deleter that reads the
   * list sees only live values) */
  while (c->size > 0) {
    pf_any_t v = ((pf_any_t*)c->data)[c->size - 1];
    c->size--;
    pf_any_release(&v);
  }
  return 0;
}
