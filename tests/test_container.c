/* Tests of containers: shapes, arrays and maps built, read and iterated, their bad input,
 * contents released exactly once, freezing, nesting, foreign cells and deep equality. */
#include <stdint.h>

#include "pf_test.h"

/* ---- helpers: objects that count their destruction ---- */

static int g_destroyed;

static void counted_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    g_destroyed++;
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

static pf_object_t* counted_new(void) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(sizeof(pf_object_t), PF_TYPE_OBJECT, counted_deleter, &obj), 0);
  return obj;
}

/* A map's entries in iteration order, copied (borrowed values) into items[0..cap). */
typedef struct {
  pf_any_t key;
  pf_any_t value;
} pf_map_item_t;

static size_t map_entries(const pf_object_t* map, pf_map_item_t* items, size_t cap) {
  pf_map_iter_t it;
  const pf_any_t *k, *v;
  size_t n = 0;
  ck_assert_int_eq(pf_map_iter_init(map, &it), 0);
  while (pf_map_iter_next(&it, &k, &v) == 1) {
    ck_assert_uint_lt(n, cap);
    items[n].key = *k;
    items[n++].value = *v;
  }
  return n;
}

static pf_any_t str_object(const char* s) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_string_object_create(s, strlen(s), &obj), 0);
  pf_any_t v = pf_any_object(obj);
  return v; /* owned */
}

/* ---- shape ---- */

START_TEST(test_shape_create_and_read) {
  const int64_t dims[] = {2, 3, -1, 0};
  pf_object_t* s;
  ck_assert_int_eq(pf_shape_create(dims, 4, &s), 0);
  ck_assert_int_eq(s->type_index, PF_TYPE_SHAPE);
  const int64_t* data;
  size_t ndim;
  ck_assert_int_eq(pf_shape_data(s, &data, &ndim), 0);
  ck_assert_uint_eq(ndim, 4);
  ck_assert_ptr_ne(data, dims); /* a copy, inline */
  ck_assert(data == (const int64_t*)((const char*)s + 24 + 16));
  for (size_t i = 0; i < 4; ++i)
    ck_assert_int_eq(data[i], dims[i]);
  const pf_shape_cell_t* cell = (const pf_shape_cell_t*)(s + 1);
  ck_assert(cell->data == data && cell->size == 4);
  int64_t x;
  ck_assert_int_eq(pf_shape_get(s, 1, &x), 0);
  ck_assert_int_eq(x, 3);
  ck_assert_int_eq(pf_shape_get(s, 2, &x), 0);
  ck_assert_int_eq(x, -1);
  pf_object_release(s);

  ck_assert_int_eq(pf_shape_create(NULL, 0, &s), 0);
  ck_assert_int_eq(pf_shape_data(s, &data, &ndim), 0);
  ck_assert_ptr_nonnull(data);
  ck_assert_uint_eq(ndim, 0);
  pf_object_release(s);
}
END_TEST

START_TEST(test_shape_bad_input) {
  const int64_t dims[] = {1, 2};
  pf_object_t* s = (pf_object_t*)0x1;
  ck_assert_int_eq(pf_shape_create(dims, 2, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_shape_create: argument out");
  ck_assert_int_eq(pf_shape_create(NULL, 2, &s), -1);
  PF_ASSERT_RAISED("ValueError", "argument dims");
  ck_assert_ptr_null(s);
  ck_assert_int_eq(pf_shape_create(dims, SIZE_MAX / 4, &s), -1);
  PF_ASSERT_RAISED("ValueError", "is too many");

  ck_assert_int_eq(pf_shape_create(dims, 2, &s), 0);
  int64_t x = 7;
  ck_assert_int_eq(pf_shape_get(s, 2, &x), -1);
  PF_ASSERT_RAISED("IndexError", "pf_shape_get: index 2 is out of range for a shape of ndim 2");
  ck_assert_int_eq(x, 0);
  ck_assert_int_eq(pf_shape_get(s, -1, &x), -1);
  PF_ASSERT_RAISED("IndexError", "index -1");
  ck_assert_int_eq(pf_shape_get(s, 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  const int64_t* data = dims;
  size_t ndim = 9;
  ck_assert_int_eq(pf_shape_data(s, NULL, &ndim), -1);
  PF_ASSERT_RAISED("ValueError", "argument dims");
  ck_assert_uint_eq(ndim, 0);
  ck_assert_int_eq(pf_shape_data(s, &data, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument ndim");
  ck_assert_ptr_null(data);

  pf_any_t str = str_object("not a shape at all");
  ck_assert_int_eq(pf_shape_data(str.v_obj, &data, &ndim), -1);
  PF_ASSERT_RAISED("TypeError", "pf_shape_data: argument shape: expected Shape, got str");
  ck_assert_int_eq(pf_shape_get(NULL, 0, &x), -1);
  PF_ASSERT_RAISED("TypeError", "expected Shape, got NULL");
  pf_any_release(&str);
  pf_object_release(s);
}
END_TEST

/* A shape laid out by another runtime: extents outside the object. */
typedef struct {
  pf_object_t header;
  pf_shape_cell_t cell;
} foreign_shape_t;

static void foreign_deleter(void* self, int flags) {
  (void)self;
  (void)flags;
}

START_TEST(test_shape_foreign) {
  static const int64_t ext[] = {5, 6};
  foreign_shape_t f = {{PF_REF_INITIAL, PF_TYPE_SHAPE, 0, {foreign_deleter}}, {ext, 2}};
  int64_t x;
  ck_assert_int_eq(pf_shape_get(&f.header, 1, &x), 0);
  ck_assert_int_eq(x, 6);
  pf_object_t* ours;
  ck_assert_int_eq(pf_shape_create(ext, 2, &ours), 0);
  pf_any_t a = pf_any_object(&f.header), b = pf_any_object(ours);
  ck_assert_int_eq(pf_container_equal(&a, &b), 1);
  ck_assert_int_eq(pf_any_equal(&a, &b), 0); /* identity only */
  pf_object_release(ours);
}
END_TEST

/* ---- array ---- */

START_TEST(test_array_create_get_items) {
  pf_any_t obj = str_object("an object string, long enough");
  pf_any_t items[6] = {pf_any_int(7),       pf_any_cstr("hello world, a raw string"),
                       pf_any_cstr("tiny"), pf_any_float(2.5),
                       pf_any_none(),       obj};
  pf_object_t* arr;
  ck_assert_int_eq(pf_array_create(items, 6, &arr), 0);
  ck_assert_int_eq(arr->type_index, PF_TYPE_ARRAY);
  ck_assert_uint_eq(pf_object_strong_count(obj.v_obj), 2);
  size_t n;
  ck_assert_int_eq(pf_array_count(arr, &n), 0);
  ck_assert_uint_eq(n, 6);
  const pf_any_t* v;
  ck_assert_int_eq(pf_array_get(arr, 0, &v), 0);
  ck_assert_int_eq(v->type_index, PF_TYPE_INT);
  ck_assert_int_eq(v->v_int64, 7);
  ck_assert_int_eq(pf_array_get(arr, 1, &v), 0);
  ck_assert_int_eq(v->type_index, PF_TYPE_STR); /* raw string made owned */
  ck_assert(pf_any_equal(v, &items[1]));
  ck_assert_int_eq(pf_array_get(arr, 2, &v), 0);
  ck_assert_int_eq(v->type_index, PF_TYPE_SMALL_STR);
  ck_assert_int_eq(pf_array_get(arr, 5, &v), 0);
  ck_assert_ptr_eq(v->v_obj, obj.v_obj);
  /* the ABI's sequence cell */
  const pf_seq_cell_t* cell = (const pf_seq_cell_t*)(arr + 1);
  ck_assert_int_eq(cell->size, 6);
  ck_assert_int_eq(cell->capacity, 6);
  ck_assert(cell->data_deleter == NULL);
  const pf_any_t* all;
  ck_assert_int_eq(pf_array_items(arr, &all, &n), 0);
  ck_assert_ptr_eq(all, cell->data);
  int strings = 0;
  for (size_t i = 0; i < n; ++i) {
    const char* s;
    size_t len;
    if (pf_any_as_str(&all[i], &s, &len) == 0)
      strings++;
    else
      pf_error_clear();
  }
  ck_assert_int_eq(strings, 3);
  pf_object_release(arr);
  ck_assert_uint_eq(pf_object_strong_count(obj.v_obj), 1);
  pf_any_release(&obj);

  ck_assert_int_eq(pf_array_create(NULL, 0, &arr), 0);
  ck_assert_int_eq(pf_array_items(arr, &all, &n), 0);
  ck_assert_ptr_nonnull(all);
  ck_assert_uint_eq(n, 0);
  ck_assert_int_eq(pf_array_get(arr, 0, &v), -1);
  PF_ASSERT_RAISED("IndexError", "index 0 is out of range for an array of size 0");
  pf_object_release(arr);
}
END_TEST

START_TEST(test_array_releases_contents_once) {
  g_destroyed = 0;
  pf_object_t* objs[3] = {counted_new(), counted_new(), counted_new()};
  pf_any_t items[4] = {pf_any_object(objs[0]), pf_any_object(objs[1]), pf_any_object(objs[0]),
                       pf_any_object(objs[2])};
  pf_object_t* arr;
  ck_assert_int_eq(pf_array_create(items, 4, &arr), 0);
  ck_assert_uint_eq(pf_object_strong_count(objs[0]), 3);
  for (int i = 0; i < 3; ++i)
    pf_object_release(objs[i]);
  ck_assert_int_eq(g_destroyed, 0);
  pf_object_retain(arr);
  pf_object_weak_retain(arr);
  pf_object_release(arr);
  ck_assert_int_eq(g_destroyed, 0);
  pf_object_release(arr);
  ck_assert_int_eq(g_destroyed, 3);
  pf_object_weak_release(arr);
  ck_assert_int_eq(g_destroyed, 3);
}
END_TEST

START_TEST(test_array_bad_input) {
  pf_object_t* arr = (pf_object_t*)0x1;
  pf_any_t one = pf_any_int(1);
  ck_assert_int_eq(pf_array_create(&one, 1, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_create: argument out");
  ck_assert_int_eq(pf_array_create(NULL, 2, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "argument items");
  ck_assert_ptr_null(arr);
  ck_assert_int_eq(pf_array_create(&one, SIZE_MAX / 8, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "items is too many");

  /* a DLTensor view has no owned form: nothing is retained */
  g_destroyed = 0;
  pf_object_t* o = counted_new();
  DLTensor t;
  memset(&t, 0, sizeof t);
  pf_any_t items[3] = {pf_any_object(o), pf_any_dltensor(&t), pf_any_int(3)};
  ck_assert_int_eq(pf_array_create(items, 3, &arr), -1);
  PF_ASSERT_RAISED("TypeError",
                   "pf_array_create: argument items[1]: expected a value with an owned form, got "
                   "DLTensor* view");
  ck_assert_uint_eq(pf_object_strong_count(o), 1);
  /* every item is checked before anything is copied */
  items[0] = pf_any_cstr("a raw string long enough to need an object");
  items[1] = pf_any_object(o);
  items[2].type_index = 50; /* no such value type */
  ck_assert_int_eq(pf_array_create(items, 3, &arr), -1);
  PF_ASSERT_RAISED("TypeError", "argument items[2]: expected a value with an owned form, got "
                                "unknown (type index 50)");
  ck_assert_uint_eq(pf_object_strong_count(o), 1);
  items[2].type_index = PF_TYPE_STR;
  items[2].v_obj = NULL;
  ck_assert_int_eq(pf_array_create(items, 3, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "argument items[2]: str value with a NULL pointer");
  pf_object_release(o);
  ck_assert_int_eq(g_destroyed, 1);

  ck_assert_int_eq(pf_array_create(&one, 1, &arr), 0);
  const pf_any_t* v = &one;
  ck_assert_int_eq(pf_array_get(arr, 1, &v), -1);
  PF_ASSERT_RAISED("IndexError", "pf_array_get: index 1 is out of range for an array of size 1");
  ck_assert_ptr_null(v);
  ck_assert_int_eq(pf_array_get(arr, -3, &v), -1);
  PF_ASSERT_RAISED("IndexError", "index -3");
  ck_assert_int_eq(pf_array_get(arr, 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_get: argument out");
  size_t n = 5;
  ck_assert_int_eq(pf_array_count(arr, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_count: argument out");
  const pf_any_t* all = &one;
  ck_assert_int_eq(pf_array_items(arr, &all, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument count");
  ck_assert_ptr_null(all);
  ck_assert_int_eq(pf_array_items(arr, NULL, &n), -1);
  PF_ASSERT_RAISED("ValueError", "argument items");
  ck_assert_uint_eq(n, 0);

  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  ck_assert_int_eq(pf_array_count(map, &n), -1);
  PF_ASSERT_RAISED("TypeError", "pf_array_count: argument array: expected Array, got Map");
  ck_assert_int_eq(pf_array_get(NULL, 0, &v), -1);
  PF_ASSERT_RAISED("TypeError", "expected Array, got NULL");
  ck_assert_int_eq(pf_array_items(map, &all, &n), -1);
  PF_ASSERT_RAISED("TypeError", "expected Array, got Map");
  pf_object_release(map);
  pf_object_release(arr);
}
END_TEST

START_TEST(test_array_rvalue_reference) {
  g_destroyed = 0;
  pf_object_t* o = counted_new();
  pf_object_t* handle = o;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  DLTensor t;
  memset(&t, 0, sizeof t);
  pf_any_t items[2] = {ref, pf_any_dltensor(&t)};
  pf_object_t* arr;
  ck_assert_int_eq(pf_array_create(items, 2, &arr), -1); /* fails: the object stays put */
  PF_ASSERT_RAISED("TypeError", "items[1]");
  ck_assert_ptr_eq(handle, o);
  ck_assert_int_eq(pf_array_create(&ref, 1, &arr), 0); /* moved in */
  ck_assert_ptr_null(handle);
  ck_assert_uint_eq(pf_object_strong_count(o), 1);
  pf_object_t* null_handle = NULL;
  ref.v_ptr = &null_handle;
  pf_object_t* bad;
  ck_assert_int_eq(pf_array_create(&ref, 1, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "items[0]");
  pf_object_release(arr);
  ck_assert_int_eq(g_destroyed, 1);
}
END_TEST

START_TEST(test_array_create_take) {
  g_destroyed = 0;
  pf_any_t items[3];
  items[0] = pf_any_object(counted_new());
  ck_assert_int_eq(pf_string_from_cstr("an owned string object, moved", &items[1]), 0);
  items[2] = pf_any_float(1.5);
  pf_object_t* arr;
  ck_assert_int_eq(pf_array_create_take(items, 3, &arr), 0);
  for (int i = 0; i < 3; ++i)
    ck_assert_int_eq(items[i].type_index, PF_TYPE_NONE);
  const pf_any_t* v;
  ck_assert_int_eq(pf_array_get(arr, 0, &v), 0);
  ck_assert_uint_eq(pf_object_strong_count(v->v_obj), 1); /* taken, not retained */
  pf_object_release(arr);
  ck_assert_int_eq(g_destroyed, 1);

  /* views are refused and nothing is taken */
  items[0] = pf_any_object(counted_new());
  items[1] = pf_any_cstr("a view");
  ck_assert_int_eq(pf_array_create_take(items, 2, &arr), -1);
  PF_ASSERT_RAISED(
      "TypeError",
      "pf_array_create_take: argument items[1]: expected an owned value, got str view");
  ck_assert_int_eq(items[0].type_index, PF_TYPE_OBJECT);
  ck_assert_int_eq(pf_array_create_take(NULL, 1, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "argument items");
  ck_assert_int_eq(pf_array_create_take(items, 1, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  pf_any_release(&items[0]);
  ck_assert_int_eq(g_destroyed, 2);
}
END_TEST

/* An array laid out by another runtime, its data in a separate block with a data deleter. */
typedef struct {
  pf_object_t header;
  pf_seq_cell_t cell;
} foreign_array_t;

START_TEST(test_array_foreign) {
  pf_any_t data[2] = {pf_any_int(1), pf_any_int(2)};
  foreign_array_t f = {{PF_REF_INITIAL, PF_TYPE_ARRAY, 0, {foreign_deleter}}, {data, 2, 4, free}};
  size_t n;
  ck_assert_int_eq(pf_array_count(&f.header, &n), 0);
  ck_assert_uint_eq(n, 2);
  const pf_any_t* v;
  ck_assert_int_eq(pf_array_get(&f.header, 1, &v), 0);
  ck_assert_int_eq(v->v_int64, 2);
  pf_object_t* ours;
  ck_assert_int_eq(pf_array_create(data, 2, &ours), 0);
  pf_any_t a = pf_any_object(&f.header), b = pf_any_object(ours);
  ck_assert_int_eq(pf_container_equal(&a, &b), 1);
  pf_object_release(ours);
}
END_TEST

/* ---- map ---- */

START_TEST(test_map_set_get_iterate) {
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  ck_assert_int_eq(map->type_index, PF_TYPE_MAP);
  pf_any_t long_key = str_object("a key long enough to be an object");
  pf_object_t* obj_key = counted_new();
  pf_any_t k1 = pf_any_cstr("name"), v1 = pf_any_cstr("packfn");
  pf_any_t k2 = pf_any_int(42), v2 = pf_any_float(0.5);
  pf_any_t k3 = pf_any_object(obj_key), v3 = pf_any_int(3);
  pf_any_t v4 = pf_any_bool(1);
  ck_assert_int_eq(pf_map_set(map, &k1, &v1), 0);
  ck_assert_int_eq(pf_map_set(map, &k2, &v2), 0);
  ck_assert_int_eq(pf_map_set(map, &k3, &v3), 0);
  ck_assert_int_eq(pf_map_set(map, &long_key, &v4), 0);
  size_t n;
  ck_assert_int_eq(pf_map_count(map, &n), 0);
  ck_assert_uint_eq(n, 4);

  /* a string key matches whatever its form */
  pf_any_t small;
  ck_assert_int_eq(pf_string_from_cstr("name", &small), 0);
  ck_assert_int_eq(small.type_index, PF_TYPE_SMALL_STR);
  const pf_any_t* got;
  ck_assert_int_eq(pf_map_get(map, &small, &got), 0);
  ck_assert_int_eq(got->type_index, PF_TYPE_SMALL_STR);
  ck_assert(pf_any_equal(got, &v1));
  pf_any_t raw_long = pf_any_cstr("a key long enough to be an object");
  ck_assert_int_eq(pf_map_get(map, &raw_long, &got), 0);
  ck_assert_int_eq(got->type_index, PF_TYPE_BOOL);
  ck_assert_int_eq(pf_map_get(map, &k2, &got), 0);
  ck_assert(got->v_float64 == 0.5);
  ck_assert_int_eq(pf_map_get(map, &k3, &got), 0);
  ck_assert_int_eq(got->v_int64, 3);
  /* another object is another key, even of the same type */
  pf_object_t* other = counted_new();
  pf_any_t k_other = pf_any_object(other);
  ck_assert_int_eq(pf_map_contains(map, &k_other), 0);
  ck_assert_int_eq(pf_map_contains(map, &k3), 1);
  ck_assert_int_eq(pf_map_find(map, &k_other, &got), 0);
  ck_assert_ptr_null(got);
  pf_any_t k_int = pf_any_int(43);
  ck_assert_int_eq(pf_map_contains(map, &k_int), 0);

  /* replacing keeps the position (and the stored key) */
  pf_any_t v5 = pf_any_cstr("replaced");
  ck_assert_int_eq(pf_map_set(map, &small, &v5), 0);
  ck_assert_int_eq(pf_map_count(map, &n), 0);
  ck_assert_uint_eq(n, 4);
  pf_map_item_t items[4];
  ck_assert_uint_eq(map_entries(map, items, 4), 4);
  ck_assert_int_eq(items[0].key.type_index, PF_TYPE_SMALL_STR);
  ck_assert(pf_any_equal(&items[0].value, &v5));
  ck_assert_int_eq(items[1].key.v_int64, 42);
  ck_assert_ptr_eq(items[2].key.v_obj, obj_key);
  ck_assert_ptr_eq(items[3].key.v_obj, long_key.v_obj);

  pf_object_release(map);
  pf_any_release(&long_key);
  pf_object_release(obj_key);
  pf_object_release(other);
}
END_TEST

START_TEST(test_map_bytes_keys) {
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_byte_array_t raw = {"bytes\0key, long", 15};
  pf_any_t k = pf_any_byte_array(&raw), v = pf_any_int(1);
  ck_assert_int_eq(pf_map_set(map, &k, &v), 0);
  pf_any_t as_object;
  ck_assert_int_eq(pf_bytes_create(raw.data, raw.size, &as_object), 0);
  ck_assert_int_eq(as_object.type_index, PF_TYPE_BYTES);
  ck_assert_int_eq(pf_map_contains(map, &as_object), 1);
  pf_any_t as_str = pf_any_cstr("bytes"); /* a string is never a bytes key */
  ck_assert_int_eq(pf_map_contains(map, &as_str), 0);
  pf_any_t small_bytes;
  ck_assert_int_eq(pf_bytes_create("ab", 2, &small_bytes), 0);
  ck_assert_int_eq(pf_map_set(map, &small_bytes, &v), 0);
  pf_byte_array_t ab = {"ab", 2};
  pf_any_t ab_view = pf_any_byte_array(&ab);
  ck_assert_int_eq(pf_map_contains(map, &ab_view), 1);
  pf_any_release(&as_object);
  pf_object_release(map);
}
END_TEST

START_TEST(test_map_growth_keeps_order) {
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  char name[32];
  for (int i = 0; i < 600; ++i) {
    pf_any_t k = pf_any_int(i * 7919), v = pf_any_int(i);
    ck_assert_int_eq(pf_map_set(map, &k, &v), 0);
    snprintf(name, sizeof name, "key number %d", i);
    pf_any_t ks = pf_any_cstr(name);
    ck_assert_int_eq(pf_map_set(map, &ks, &v), 0);
  }
  static pf_map_item_t items[1200];
  ck_assert_uint_eq(map_entries(map, items, 1200), 1200);
  for (int i = 0; i < 600; ++i) {
    ck_assert_int_eq(items[2 * i].key.v_int64, (int64_t)i * 7919);
    ck_assert_int_eq(items[2 * i + 1].value.v_int64, i);
    const pf_any_t* got;
    snprintf(name, sizeof name, "key number %d", i);
    pf_any_t ks = pf_any_cstr(name);
    ck_assert_int_eq(pf_map_get(map, &ks, &got), 0);
    ck_assert_int_eq(got->v_int64, i);
    pf_any_t k = pf_any_int(i * 7919 + 1);
    ck_assert_int_eq(pf_map_contains(map, &k), i * 7919 + 1 == 0);
  }
  pf_object_release(map);
}
END_TEST

START_TEST(test_dict_set_get_erase_across_forms) {
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  char name[32];
  for (int i = 0; i < 300; ++i) { /* small form, the switch at the 5th key, then dense */
    snprintf(name, sizeof name, "k%d", i);
    pf_any_t k = pf_any_cstr(name), v = pf_any_int(i);
    ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  }
  size_t n;
  ck_assert_int_eq(pf_dict_count(d, &n), 0);
  ck_assert_uint_eq(n, 300);
  for (int i = 0; i < 300; i += 3) {
    snprintf(name, sizeof name, "k%d", i);
    pf_any_t k = pf_any_cstr(name);
    ck_assert_int_eq(pf_dict_erase(d, &k), 1);
    ck_assert_int_eq(pf_dict_erase(d, &k), 0); /* absent: nothing raised */
  }
  ck_assert_int_eq(pf_dict_count(d, &n), 0);
  ck_assert_uint_eq(n, 200);
  static pf_map_item_t items[300];
  ck_assert_uint_eq(map_entries(d, items, 300), 200);
  int expect = 1; /* the survivors keep their insertion order */
  for (size_t j = 0; j < 200; ++j) {
    ck_assert_int_eq(items[j].value.v_int64, expect);
    expect += expect % 3 == 1 ? 1 : 2;
  }
  for (int i = 0; i < 300; ++i) {
    snprintf(name, sizeof name, "k%d", i);
    pf_any_t k = pf_any_cstr(name);
    const pf_any_t* got;
    ck_assert_int_eq(pf_dict_get(d, &k, &got), 0);
    if (i % 3 == 0)
      ck_assert_ptr_null(got);
    else
      ck_assert_int_eq(got->v_int64, i);
  }
  /* small-form erase closes the gap */
  pf_object_t* s;
  ck_assert_int_eq(pf_dict_create(&s), 0);
  for (int i = 0; i < 3; ++i) {
    pf_any_t k = pf_any_int(i), v = pf_any_int(10 * i);
    ck_assert_int_eq(pf_dict_set(s, &k, &v), 0);
  }
  pf_any_t k1 = pf_any_int(1);
  ck_assert_int_eq(pf_dict_erase(s, &k1), 1);
  ck_assert_uint_eq(map_entries(s, items, 3), 2);
  ck_assert_int_eq(items[1].value.v_int64, 20);
  pf_object_release(s);
  pf_object_release(d);
}
END_TEST

START_TEST(test_dict_errors) {
  pf_object_t *d, *map;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_any_t k = pf_any_int(1), v = pf_any_int(2), bad = pf_any_float(1.0);
  const pf_any_t* got = &v;
  size_t n = 9;
  ck_assert_int_eq(pf_dict_create(NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_create: argument out");
  ck_assert_int_eq(pf_dict_set(map, &k, &v), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_set: argument dict: expected Dict, got Map");
  ck_assert_int_eq(pf_dict_set(d, NULL, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument key");
  ck_assert_int_eq(pf_dict_set(d, &bad, &v), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_set: argument key: expected str, bytes, int or Object");
  pf_any_t self = pf_any_object(d);
  ck_assert_int_eq(pf_dict_set(d, &k, &self), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument value: a map cannot contain itself");
  ck_assert_int_eq(pf_dict_get(map, &k, &got), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_get: argument dict: expected Dict, got Map");
  ck_assert_ptr_null(got);
  ck_assert_int_eq(pf_dict_get(d, &k, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_get: argument out");
  ck_assert_int_eq(pf_dict_get(d, &k, &got), 0); /* absent */
  ck_assert_ptr_null(got);
  ck_assert_int_eq(pf_dict_erase(NULL, &k), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_erase: argument dict: expected Dict, got NULL");
  ck_assert_int_eq(pf_dict_erase(d, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_erase: argument key");
  ck_assert_int_eq(pf_dict_erase(d, &bad), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_erase: argument key");
  ck_assert_int_eq(pf_dict_count(map, &n), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_count: argument dict: expected Dict, got Map");
  ck_assert_uint_eq(n, 0);
  ck_assert_int_eq(pf_dict_count(d, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_count: argument out");
  /* a map's functions refuse a dict */
  ck_assert_int_eq(pf_map_get(d, &k, &got), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_get: argument map: expected Map, got Dict");
  pf_object_release(map);
  pf_object_release(d);
}
END_TEST

START_TEST(test_map_copy_is_open_and_independent) {
  pf_object_t *map, *copy;
  ck_assert_int_eq(pf_map_create(&map), 0);
  for (int i = 0; i < 20; ++i) {
    pf_any_t k = pf_any_int(i), v = pf_any_int(-i);
    ck_assert_int_eq(pf_map_set(map, &k, &v), 0);
  }
  ck_assert_int_eq(pf_map_freeze(map), 0);
  ck_assert_int_eq(pf_map_copy(map, &copy), 0);
  ck_assert_int_eq(pf_map_is_frozen(copy), 0);
  pf_any_t k = pf_any_int(99), v = pf_any_int(1);
  ck_assert_int_eq(pf_map_set(copy, &k, &v), 0);
  ck_assert_int_eq(pf_map_contains(map, &k), 0);
  ck_assert_int_eq(pf_map_contains(copy, &k), 1);
  pf_any_t a = pf_any_object(map), b = pf_any_object(copy);
  ck_assert_int_eq(pf_container_equal(&a, &b), 0);
  pf_object_t* copy2;
  ck_assert_int_eq(pf_map_copy(map, &copy2), 0);
  b = pf_any_object(copy2);
  ck_assert_int_eq(pf_container_equal(&a, &b), 1);
  ck_assert_int_eq(pf_map_copy(map, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_copy: argument out");
  pf_object_t* out = map;
  ck_assert_int_eq(pf_map_copy(NULL, &out), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_copy: argument map: expected Map or Dict, got NULL");
  ck_assert_ptr_null(out);
  pf_object_release(copy2);
  pf_object_release(copy);
  pf_object_release(map);
}
END_TEST

START_TEST(test_map_key_errors) {
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_any_t v = pf_any_int(1), bad = pf_any_float(1.0);
  ck_assert_int_eq(pf_map_set(map, &bad, &v), -1);
  PF_ASSERT_RAISED("TypeError",
                   "pf_map_set: argument key: expected str, bytes, int or Object, got float");
  bad = pf_any_bool(1);
  ck_assert_int_eq(pf_map_set(map, &bad, &v), -1);
  PF_ASSERT_RAISED("TypeError", "got bool");
  bad = pf_any_none();
  const pf_any_t* got = &v;
  ck_assert_int_eq(pf_map_get(map, &bad, &got), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_get: argument key: expected str, bytes, int or Object, "
                                "got None");
  ck_assert_ptr_null(got);
  bad.type_index = PF_TYPE_STR; /* an object key with a NULL pointer */
  ck_assert_int_eq(pf_map_contains(map, &bad), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_contains");

  /* the lookup rule: an absent key is 0 with NULL and no error, whatever the key */
  char long_key[200];
  memset(long_key, 'z', sizeof long_key - 1);
  long_key[sizeof long_key - 1] = '\0';
  pf_byte_array_t b = {"a\x01'", 3};
  pf_any_t absent[] = {pf_any_cstr("missing"), pf_any_int(-42), pf_any_byte_array(&b),
                       pf_any_cstr(long_key), pf_any_object(map)};
  for (size_t i = 0; i < sizeof absent / sizeof absent[0]; ++i) {
    got = &v;
    ck_assert_int_eq(pf_map_get(map, &absent[i], &got), 0);
    ck_assert_ptr_null(got);
    PF_ASSERT_NO_ERROR();
    got = &v;
    ck_assert_int_eq(pf_map_find(map, &absent[i], &got), 0);
    ck_assert_ptr_null(got);
    ck_assert_int_eq(pf_map_contains(map, &absent[i]), 0);
    PF_ASSERT_NO_ERROR();
  }
  pf_any_t k = pf_any_object(map);

  ck_assert_int_eq(pf_map_get(map, NULL, &got), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_get: argument key");
  ck_assert_int_eq(pf_map_get(map, &k, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_get: argument out");
  ck_assert_int_eq(pf_map_find(NULL, &k, &got), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_find: argument map: expected Map, got NULL");
  ck_assert_int_eq(pf_map_set(map, NULL, &v), -1);
  PF_ASSERT_RAISED("ValueError", "argument key");
  k = pf_any_int(1);
  ck_assert_int_eq(pf_map_set(map, &k, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument value");
  size_t n = 3;
  ck_assert_int_eq(pf_map_count(map, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_count: argument out");
  pf_map_iter_t it;
  const pf_any_t *ik, *iv;
  ck_assert_int_eq(pf_map_iter_init(map, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_iter_init: argument it");
  ck_assert_int_eq(pf_map_iter_init(map, &it), 0);
  ck_assert_int_eq(pf_map_iter_next(&it, NULL, &iv), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_iter_next: argument key");
  ck_assert_int_eq(pf_map_iter_next(&it, &ik, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_iter_next: argument value");
  ck_assert_int_eq(pf_map_iter_next(NULL, &ik, &iv), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_iter_next: argument it");
  ck_assert_ptr_null(ik);
  ck_assert_int_eq(pf_map_create(NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_create: argument out");

  /* not a map */
  pf_object_t* arr;
  ck_assert_int_eq(pf_array_create(NULL, 0, &arr), 0);
  ck_assert_int_eq(pf_map_set(arr, &k, &v), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_set: argument map: expected an open Map made by "
                                "packfn, got Array");
  ck_assert_int_eq(pf_map_count(arr, &n), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_count");
  ck_assert_uint_eq(n, 0);
  ck_assert_int_eq(pf_map_iter_init(arr, &it), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_iter_init: argument map: expected Map or Dict, got Array");
  ck_assert_int_eq(pf_map_iter_next(&it, &ik, &iv), 0); /* a failed init yields nothing */
  ck_assert_int_eq(pf_map_freeze(arr), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_freeze");
  ck_assert_int_eq(pf_map_is_frozen(arr), 0);
  pf_object_release(arr);
  pf_object_release(map);
}
END_TEST

START_TEST(test_map_failed_set_changes_nothing) {
  g_destroyed = 0;
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_object_t* key_obj = counted_new();
  pf_any_t k = pf_any_object(key_obj);
  DLTensor t;
  memset(&t, 0, sizeof t);
  pf_any_t bad_value = pf_any_dltensor(&t);
  ck_assert_int_eq(pf_map_set(map, &k, &bad_value), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_set: argument value: expected a value with an owned form");
  ck_assert_uint_eq(pf_object_strong_count(key_obj), 1);
  size_t n;
  ck_assert_int_eq(pf_map_count(map, &n), 0);
  ck_assert_uint_eq(n, 0);
  /* replacing with a bad value keeps the old one */
  pf_any_t good = pf_any_int(5);
  ck_assert_int_eq(pf_map_set(map, &k, &good), 0);
  ck_assert_int_eq(pf_map_set(map, &k, &bad_value), -1);
  PF_ASSERT_RAISED("TypeError", "argument value");
  const pf_any_t* got;
  ck_assert_int_eq(pf_map_get(map, &k, &got), 0);
  ck_assert_int_eq(got->v_int64, 5);
  pf_object_release(key_obj);
  pf_object_release(map);
  ck_assert_int_eq(g_destroyed, 1);
}
END_TEST

START_TEST(test_map_releases_contents_once) {
  g_destroyed = 0;
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_object_t* objs[4] = {counted_new(), counted_new(), counted_new(), counted_new()};
  pf_any_t k0 = pf_any_object(objs[0]), v1 = pf_any_object(objs[1]);
  pf_any_t k2 = pf_any_cstr("k2"), v3 = pf_any_object(objs[3]);
  pf_any_t v2 = pf_any_object(objs[2]);
  ck_assert_int_eq(pf_map_set(map, &k0, &v1), 0);
  ck_assert_int_eq(pf_map_set(map, &k2, &v2), 0);
  for (int i = 0; i < 3; ++i)
    pf_object_release(objs[i]);
  ck_assert_int_eq(g_destroyed, 0);
  ck_assert_int_eq(pf_map_set(map, &k2, &v3), 0); /* the old value goes, exactly once */
  ck_assert_int_eq(g_destroyed, 1);
  ck_assert_int_eq(pf_map_set(map, &k0, &v3), 0);
  ck_assert_int_eq(g_destroyed, 2);
  pf_object_release(objs[3]);
  pf_object_release(map);
  ck_assert_int_eq(g_destroyed, 4);
}
END_TEST

START_TEST(test_map_freeze) {
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  ck_assert_int_eq(pf_map_is_frozen(map), 0);
  pf_any_t k = pf_any_int(1), v = pf_any_int(2);
  ck_assert_int_eq(pf_map_set(map, &k, &v), 0);
  ck_assert_int_eq(pf_map_freeze(map), 0);
  ck_assert_int_eq(pf_map_freeze(map), 0);
  ck_assert_int_eq(pf_map_is_frozen(map), 1);
  ck_assert_int_eq(pf_map_set(map, &k, &v), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_set: argument map: the map is frozen");
  pf_object_release(map);

  /* storing a map in a container freezes it */
  pf_object_t *inner, *outer, *arr;
  ck_assert_int_eq(pf_map_create(&inner), 0);
  ck_assert_int_eq(pf_map_create(&outer), 0);
  pf_any_t vi = pf_any_object(inner);
  ck_assert_int_eq(pf_map_set(outer, &k, &vi), 0);
  ck_assert_int_eq(pf_map_is_frozen(inner), 1);
  ck_assert_int_eq(pf_map_is_frozen(outer), 0);
  pf_any_t vo = pf_any_object(outer);
  ck_assert_int_eq(pf_array_create(&vo, 1, &arr), 0);
  ck_assert_int_eq(pf_map_is_frozen(outer), 1);
  pf_object_release(arr);
  pf_object_release(outer);
  pf_object_release(inner);

  /* a map cannot hold itself */
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_any_t self = pf_any_object(map);
  ck_assert_int_eq(pf_map_set(map, &k, &self), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_set: argument value: a map cannot contain itself");
  ck_assert_int_eq(pf_map_set(map, &self, &v), -1);
  PF_ASSERT_RAISED("ValueError", "argument key: a map cannot contain itself");
  pf_object_t* handle = map;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  ck_assert_int_eq(pf_map_set(map, &k, &ref), -1);
  PF_ASSERT_RAISED("ValueError", "cannot contain itself");
  ck_assert_int_eq(pf_map_is_frozen(map), 0);
  ck_assert_uint_eq(pf_object_strong_count(map), 1);
  pf_object_release(map);
}
END_TEST

/* ---- nesting and equality ---- */

/* [ {"dims": shape(2, 3), "tags": ["a", counted]}, 7 ] */
static pf_object_t* make_nested(pf_object_t* leaf) {
  const int64_t dims[] = {2, 3};
  pf_object_t *shape, *tags, *map, *top;
  ck_assert_int_eq(pf_shape_create(dims, 2, &shape), 0);
  pf_any_t tag_items[2] = {pf_any_cstr("a"), pf_any_object(leaf)};
  ck_assert_int_eq(pf_array_create(tag_items, 2, &tags), 0);
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_any_t k1 = pf_any_cstr("dims"), k2 = pf_any_cstr("tags");
  pf_any_t v1 = pf_any_object(shape), v2 = pf_any_object(tags);
  ck_assert_int_eq(pf_map_set(map, &k1, &v1), 0);
  ck_assert_int_eq(pf_map_set(map, &k2, &v2), 0);
  pf_any_t top_items[2] = {pf_any_object(map), pf_any_int(7)};
  ck_assert_int_eq(pf_array_create(top_items, 2, &top), 0);
  pf_object_release(shape);
  pf_object_release(tags);
  pf_object_release(map);
  return top;
}

START_TEST(test_nesting_and_release) {
  g_destroyed = 0;
  pf_object_t* leaf = counted_new();
  pf_object_t* top = make_nested(leaf);
  pf_object_release(leaf);
  const pf_any_t *m, *tags, *tag;
  ck_assert_int_eq(pf_array_get(top, 0, &m), 0);
  ck_assert_int_eq(pf_map_is_frozen(m->v_obj), 1);
  pf_any_t k = pf_any_cstr("tags");
  ck_assert_int_eq(pf_map_get(m->v_obj, &k, &tags), 0);
  ck_assert_int_eq(pf_array_get(tags->v_obj, 1, &tag), 0);
  ck_assert_ptr_eq(tag->v_obj, leaf);
  k = pf_any_cstr("dims");
  const pf_any_t* dims;
  ck_assert_int_eq(pf_map_get(m->v_obj, &k, &dims), 0);
  int64_t x;
  ck_assert_int_eq(pf_shape_get(dims->v_obj, 1, &x), 0);
  ck_assert_int_eq(x, 3);
  ck_assert_int_eq(g_destroyed, 0);
  pf_object_release(top);
  ck_assert_int_eq(g_destroyed, 1);
}
END_TEST

START_TEST(test_equality) {
  pf_object_t* leaf = counted_new();
  pf_object_t* a = make_nested(leaf);
  pf_object_t* b = make_nested(leaf);
  pf_any_t va = pf_any_object(a), vb = pf_any_object(b);
  ck_assert_int_eq(pf_container_equal(&va, &vb), 1);
  ck_assert_int_eq(pf_container_equal(&va, &va), 1);
  ck_assert_int_eq(pf_any_equal(&va, &vb), 0);

  /* maps compare regardless of order; strings whatever their form */
  pf_object_t *m1, *m2;
  ck_assert_int_eq(pf_map_create(&m1), 0);
  ck_assert_int_eq(pf_map_create(&m2), 0);
  pf_any_t k1 = pf_any_int(1), k2 = pf_any_cstr("two, as a long string key");
  pf_any_t v1 = pf_any_cstr("one, as a long string value"), v2 = pf_any_int(2);
  ck_assert_int_eq(pf_map_set(m1, &k1, &v1), 0);
  ck_assert_int_eq(pf_map_set(m1, &k2, &v2), 0);
  ck_assert_int_eq(pf_map_set(m2, &k2, &v2), 0);
  pf_any_t x1 = pf_any_object(m1), x2 = pf_any_object(m2);
  ck_assert_int_eq(pf_container_equal(&x1, &x2), 0); /* counts differ */
  ck_assert_int_eq(pf_map_set(m2, &k1, &v1), 0);
  ck_assert_int_eq(pf_container_equal(&x1, &x2), 1);
  pf_any_t other = pf_any_cstr("another value");
  ck_assert_int_eq(pf_map_set(m2, &k1, &other), 0);
  ck_assert_int_eq(pf_container_equal(&x1, &x2), 0); /* a value differs */
  pf_any_t k3 = pf_any_int(3), k4 = pf_any_int(4);
  ck_assert_int_eq(pf_map_set(m2, &k1, &v1), 0);
  ck_assert_int_eq(pf_map_set(m1, &k3, &v1), 0);
  ck_assert_int_eq(pf_map_set(m2, &k4, &v1), 0);
  ck_assert_int_eq(pf_container_equal(&x1, &x2), 0); /* a key differs */

  /* arrays: lengths, element types, shapes */
  pf_object_t *s1, *s2, *s3, *arr;
  const int64_t d1[] = {1, 2}, d2[] = {1, 3};
  ck_assert_int_eq(pf_shape_create(d1, 2, &s1), 0);
  ck_assert_int_eq(pf_shape_create(d1, 2, &s2), 0);
  ck_assert_int_eq(pf_shape_create(d2, 2, &s3), 0);
  pf_any_t y1 = pf_any_object(s1), y2 = pf_any_object(s2), y3 = pf_any_object(s3);
  ck_assert_int_eq(pf_container_equal(&y1, &y2), 1);
  ck_assert_int_eq(pf_container_equal(&y1, &y3), 0);
  pf_any_t items[2] = {pf_any_int(1), pf_any_int(2)};
  ck_assert_int_eq(pf_array_create(items, 2, &arr), 0);
  pf_any_t z = pf_any_object(arr);
  ck_assert_int_eq(pf_container_equal(&y1, &z), 0); /* a shape is not an array */
  pf_object_t* arr2;
  items[1] = pf_any_float(2.0);
  ck_assert_int_eq(pf_array_create(items, 2, &arr2), 0);
  pf_any_t z2 = pf_any_object(arr2);
  ck_assert_int_eq(pf_container_equal(&z, &z2), 0); /* int 2 != float 2.0 */
  pf_object_t* arr3;
  ck_assert_int_eq(pf_array_create(items, 1, &arr3), 0);
  pf_any_t z3 = pf_any_object(arr3);
  ck_assert_int_eq(pf_container_equal(&z, &z3), 0); /* lengths differ */

  /* everything else as pf_any_equal */
  pf_any_t i1 = pf_any_int(5), i2 = pf_any_int(5), s = pf_any_cstr("5");
  ck_assert_int_eq(pf_container_equal(&i1, &i2), 1);
  ck_assert_int_eq(pf_container_equal(&i1, &s), 0);
  ck_assert_int_eq(pf_container_equal(NULL, NULL), 1);
  ck_assert_int_eq(pf_container_equal(&i1, NULL), 0);

  pf_object_t* objs[] = {a, b, m1, m2, s1, s2, s3, arr, arr2, arr3, leaf};
  for (size_t i = 0; i < sizeof objs / sizeof objs[0]; ++i)
    pf_object_release(objs[i]);
}
END_TEST

/* ---- list ---- */

START_TEST(test_list_append_insert_set_pop) {
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(list->type_index, PF_TYPE_LIST);
  size_t n = 99;
  ck_assert_int_eq(pf_array_count(list, &n), 0); /* a list reads as an array */
  ck_assert_uint_eq(n, 0);
  for (int64_t i = 0; i < 100; ++i) { /* grows across several buffers */
    pf_any_t v = pf_any_int(i);
    ck_assert_int_eq(pf_list_append(list, &v), 0);
  }
  pf_any_t s = pf_any_cstr("a string longer than the small form");
  ck_assert_int_eq(pf_list_insert(list, 0, &s), 0);
  pf_any_t end = pf_any_float(0.5);
  ck_assert_int_eq(pf_list_insert(list, 101, &end), 0);
  ck_assert_int_eq(pf_array_count(list, &n), 0);
  ck_assert_uint_eq(n, 102);
  const pf_any_t* got;
  ck_assert_int_eq(pf_array_get(list, 0, &got), 0);
  ck_assert_int_eq(got->type_index, PF_TYPE_STR); /* owned: the view became a string object */
  ck_assert_int_eq(pf_array_get(list, 1, &got), 0);
  ck_assert_int_eq(got->v_int64, 0);
  ck_assert_int_eq(pf_array_get(list, 100, &got), 0);
  ck_assert_int_eq(got->v_int64, 99);
  pf_any_t seven = pf_any_int(7);
  ck_assert_int_eq(pf_list_set(list, 1, &seven), 0);
  ck_assert_int_eq(pf_array_get(list, 1, &got), 0);
  ck_assert_int_eq(got->v_int64, 7);

  pf_any_t out;
  ck_assert_int_eq(pf_list_pop(list, -1, &out), 0);
  ck_assert_int_eq(out.type_index, PF_TYPE_FLOAT);
  ck_assert_int_eq(pf_list_pop(list, 0, &out), 0);
  ck_assert_int_eq(out.type_index, PF_TYPE_STR);
  pf_any_release(&out);
  ck_assert_int_eq(pf_array_count(list, &n), 0);
  ck_assert_uint_eq(n, 100);
  ck_assert_int_eq(pf_array_get(list, 0, &got), 0);
  ck_assert_int_eq(got->v_int64, 7);

  ck_assert_int_eq(pf_list_clear(list), 0);
  ck_assert_int_eq(pf_array_count(list, &n), 0);
  ck_assert_uint_eq(n, 0);
  pf_object_release(list);
}
END_TEST

START_TEST(test_list_holds_references) {
  pf_object_t *list, *inner;
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_array_create(NULL, 0, &inner), 0);
  pf_any_t v = pf_any_object(inner);
  ck_assert_int_eq(pf_list_append(list, &v), 0);
  ck_assert_int_eq(pf_list_append(list, &v), 0);
  ck_assert_uint_eq(pf_object_strong_count(inner), 3);
  pf_any_t none = pf_any_none();
  ck_assert_int_eq(pf_list_set(list, 0, &none), 0);
  ck_assert_uint_eq(pf_object_strong_count(inner), 2);
  pf_object_release(list); /* releases the remaining one */
  ck_assert_uint_eq(pf_object_strong_count(inner), 1);
  pf_object_release(inner);
}
END_TEST

START_TEST(test_list_errors) {
  pf_object_t *list, *arr;
  ck_assert_int_eq(pf_list_create(NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_list_create");
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_array_create(NULL, 0, &arr), 0);
  pf_any_t v = pf_any_int(1), out;
  ck_assert_int_eq(pf_list_append(arr, &v), -1); /* an array is not a list */
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_list_append: argument list: expected List, got Array");
  ck_assert_int_eq(pf_list_append(NULL, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_list_append");
  ck_assert_int_eq(pf_list_append(list, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_list_append");
  ck_assert_int_eq(pf_list_insert(list, 1, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "pf_list_insert: index 1");
  ck_assert_int_eq(pf_list_set(list, 0, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "pf_list_set");
  ck_assert_int_eq(pf_list_pop(list, -1, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "pf_list_pop");
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_list_pop(list, 0, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_list_pop");
  ck_assert_int_eq(pf_list_clear(arr), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_list_clear");
  DLTensor t;
  memset(&t, 0, sizeof t);
  pf_any_t view = pf_any_dltensor(&t); /* no owned form */
  ck_assert_int_eq(pf_list_append(list, &view), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_list_append");
  size_t n = 9;
  ck_assert_int_eq(pf_array_count(list, &n), 0);
  ck_assert_uint_eq(n, 0); /* every failure left it unchanged */
  pf_object_release(arr);
  pf_object_release(list);
}
END_TEST

/* ---- maps: the table as TVM-FFI (or a broken runtime) may leave it ----
 * The tests below write into a map's cell directly, as TVM-FFI's C++ does
 * (tvm/ffi/container/map_base.h), to make the tables packfn itself never makes. */

typedef struct {
  pf_object_t header;
  void* data;
  uint64_t size;
  uint64_t slots; /* bit 63: the small form */
  void (*data_deleter)(void*);
  uint32_t fib_shift;
  uint32_t padding;
  uint64_t iter_head, iter_tail;
} test_mapcell_t;

typedef struct {
  pf_any_t key, value;
} test_kv_t;

typedef struct {
  pf_any_t key, value;
  uint64_t prev, next;
} test_item_t;

typedef struct {
  uint8_t meta[16];
  test_item_t items[16];
} test_block_t;

static test_mapcell_t* cell_of(pf_object_t* map) {
  return (test_mapcell_t*)map;
}

static uint8_t* meta_at(pf_object_t* map, uint64_t i) {
  return &((test_block_t*)cell_of(map)->data)[i / 16].meta[i % 16];
}

static test_item_t* item_at(pf_object_t* map, uint64_t i) {
  return &((test_block_t*)cell_of(map)->data)[i / 16].items[i % 16];
}

/* TVM-FFI's AnyHash of int v (packfn's too), and the slot its chain starts at. */
static uint64_t int_hash(int64_t v) {
  uint64_t key = PF_TYPE_INT;
  return key ^ ((uint64_t)v + 0x9e3779b9u + (key << 6) + (key >> 2));
}

static uint64_t home_of(pf_object_t* map, int64_t v) {
  return (11400714819323198485ull * int_hash(v)) >> cell_of(map)->fib_shift;
}

/* An int absent from 0..n whose chain would start at slot `slot`. */
static int64_t int_with_home(pf_object_t* map, uint64_t slot) {
  for (int64_t v = 1000000;; ++v)
    if (home_of(map, v) == slot)
      return v;
}

/* A dense dict of the ints 0..n-1 (values -i). */
static pf_object_t* int_dict(int n) {
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  for (int i = 0; i < n; ++i) {
    pf_any_t k = pf_any_int(i), v = pf_any_int(-i);
    ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  }
  ck_assert_uint_eq(cell_of(d)->slots >> 63, 0);
  return d;
}

/* Every key 0..n-1 (but `skip`) is found with its value, and the count is n. */
static void assert_int_dict(pf_object_t* d, int n, int skip) {
  size_t count;
  ck_assert_int_eq(pf_dict_count(d, &count), 0);
  ck_assert_uint_eq(count, (size_t)n);
  for (int i = 0; i < n; ++i) {
    if (i == skip)
      continue;
    pf_any_t k = pf_any_int(i);
    const pf_any_t* got;
    ck_assert_int_eq(pf_dict_get(d, &k, &got), 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->v_int64, -i);
  }
}

/* A slot holding the body (not the head) of a chain. */
static uint64_t a_body_slot(pf_object_t* d) {
  for (uint64_t i = 0; i < cell_of(d)->slots; ++i) {
    uint8_t m = *meta_at(d, i);
    if ((m & 0x80) && m != 0xFF && m != 0xFE)
      return i;
  }
  ck_abort_msg("no chain body in the table");
  return 0;
}

/* A type 78 object standing for TVM-FFI's BigInt, which TVM-FFI hashes by its value through a
 * registered __any_hash__: packfn cannot know where TVM-FFI places it. */
static pf_object_t* fake_bigint(void) {
  pf_object_t* obj;
  ck_assert_int_eq(
      pf_object_alloc(sizeof(pf_object_t) + 16, PF_TYPE_BIG_INT, counted_deleter, &obj), 0);
  return obj;
}

/* A key placed by another hash: pf_dict_set needs the slot of a chain body whose key does not
 * hash to its chain's head; packfn must refuse, not loop or read past its jump table. */
START_TEST(test_dict_foreign_chain_refused) {
  pf_object_t* d = int_dict(100);
  uint64_t body = a_body_slot(d);
  test_item_t* it = item_at(d, body);
  pf_any_t kept = it->key;
  int64_t k_new = int_with_home(d, body);
  pf_any_t k = pf_any_int(k_new), v = pf_any_int(7);

  /* 1. a key whose home slot holds no chain: TVM-FFI placed it by a hash packfn does not know */
  uint64_t i = 0;
  int64_t stray = 2000000;
  for (;; ++stray) {
    i = home_of(d, stray);
    if (*meta_at(d, i) == 0xFF)
      break;
  }
  it->key = pf_any_int(stray);
  ck_assert_int_eq(pf_dict_set(d, &k, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument dict: expected a valid dict table, got "
                                 "inconsistent metadata at slot");
  it->key = kept;
  assert_int_dict(d, 100, -1);

  /* 2. a BigInt there: TypeError naming it, nothing moved; the rvalue value keeps its object */
  g_destroyed = 0;
  pf_object_t* big = fake_bigint();
  it->key = pf_any_object(big);
  pf_object_t* obj = counted_new();
  pf_object_t* handle = obj;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  ck_assert_int_eq(pf_dict_set(d, &k, &ref), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_set: argument dict: expected a dict whose keys packfn "
                                "can hash, got one holding a BigInt key");
  ck_assert_ptr_eq(handle, obj);
  ck_assert_uint_eq(pf_object_strong_count(obj), 1);
  ck_assert_uint_eq(pf_object_strong_count(big), 1);
  it->key = kept;
  assert_int_dict(d, 100, -1);

  /* the same insert goes through once the chain is sound */
  ck_assert_int_eq(pf_dict_set(d, &k, &ref), 0);
  ck_assert_ptr_null(handle);
  const pf_any_t* got;
  ck_assert_int_eq(pf_dict_get(d, &k, &got), 0);
  ck_assert_ptr_eq(got->v_obj, obj);
  ck_assert_int_eq(pf_dict_erase(d, &k), 1);
  ck_assert_int_eq(g_destroyed, 1);
  pf_object_release(big);
  ck_assert_int_eq(g_destroyed, 2);
  assert_int_dict(d, 100, -1);
  pf_object_release(d);
}
END_TEST

/* A metadata byte whose jump index has no distance (126 or 127): an error, not a read past
 * the 126-entry table; reads and writes both. */
START_TEST(test_map_bad_jump_index_refused) {
  pf_object_t* d = int_dict(100);
  uint64_t head = home_of(d, 5); /* the head of key 5's chain */
  uint8_t saved = *meta_at(d, head);
  ck_assert_uint_eq(saved & 0x80, 0);
  pf_any_t absent = pf_any_int(int_with_home(d, head)), v = pf_any_int(1);
  for (uint8_t bad = 126; bad <= 127; ++bad) {
    *meta_at(d, head) = bad;
    const pf_any_t* got = &v;
    ck_assert_int_eq(pf_dict_get(d, &absent, &got), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dict_get: argument dict: expected a valid dict table");
    ck_assert_ptr_null(got);
    ck_assert_int_eq(pf_dict_set(d, &absent, &v), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument dict");
    ck_assert_int_eq(pf_dict_erase(d, &absent), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dict_erase: argument dict");
  }
  *meta_at(d, head) = saved;
  assert_int_dict(d, 100, -1);
  /* links that loop (a head to a body to a body back to the first body): the walk is
   * bounded by the size; a link to a slot that is no chain body is refused at once */
  pf_object_t* m;
  ck_assert_int_eq(pf_map_create(&m), 0);
  for (int i = 0; i < 5; ++i) {
    pf_any_t k = pf_any_int(i), x = pf_any_int(-i);
    ck_assert_int_eq(pf_map_set(m, &k, &x), 0);
  }
  ck_assert_uint_eq(cell_of(m)->slots, 8);
  uint64_t h = home_of(m, 0), b = 8, c = 8;
  for (uint64_t i = 0; i < 8; ++i)
    if (*meta_at(m, i) == 0xFF)
      b == 8 ? (void)(b = i) : c == 8 ? (void)(c = i) : (void)0;
  ck_assert_uint_lt(c, 8);
  uint8_t saved_h = *meta_at(m, h);
  item_at(m, b)->key = pf_any_int(-1);
  item_at(m, c)->key = pf_any_int(-2);
  *meta_at(m, h) = (uint8_t)((b - h) & 7);
  *meta_at(m, b) = (uint8_t)(0x80 | ((c - b) & 7));
  *meta_at(m, c) = (uint8_t)(0x80 | ((b - c) & 7));
  pf_any_t miss = pf_any_int(int_with_home(m, h));
  const pf_any_t* got;
  ck_assert_int_eq(pf_map_get(m, &miss, &got), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_get: argument map: expected a valid map table");
  *meta_at(m, b) = 0xFF;
  ck_assert_int_eq(pf_map_get(m, &miss, &got), -1); /* h links to an empty slot */
  PF_ASSERT_RAISED("ValueError", "pf_map_get: argument map: expected a valid map table");
  *meta_at(m, c) = 0xFF;
  *meta_at(m, h) = saved_h;
  ck_assert_int_eq(pf_map_get(m, &miss, &got), 0);
  ck_assert_ptr_null(got);
  /* an insertion-order list that loops: a rebuild would repeat entries and lose others */
  test_item_t* first = item_at(m, cell_of(m)->iter_head);
  uint64_t saved_next = first->next;
  first->next = cell_of(m)->iter_head;
  size_t n, before = 0;
  int rc = 0;
  for (int64_t i = 100; i < 110 && rc == 0; ++i) {
    ck_assert_int_eq(pf_map_count(m, &before), 0);
    pf_any_t k = pf_any_int(i), x = pf_any_int(i);
    rc = pf_map_set(m, &k, &x); /* until the table has to grow */
  }
  ck_assert_int_eq(rc, -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_set: argument map: expected a valid map table");
  ck_assert_int_eq(pf_map_count(m, &n), 0);
  ck_assert_uint_eq(n, before);
  first->next = saved_next;
  pf_any_t k = pf_any_int(200), x = pf_any_int(200);
  ck_assert_int_eq(pf_map_set(m, &k, &x), 0);
  ck_assert_int_eq(pf_map_count(m, &n), 0);
  ck_assert_uint_eq(n, before + 1);
  pf_object_release(m);
  pf_object_release(d);
}
END_TEST

/* A small map holding a BigInt (as TVM-FFI's Dict::Set leaves it): packfn appends while the
 * small form has room, refuses the switch to the dense form (which places every key again),
 * refuses BigInt keys of its own, and moves nothing on refusal. */
START_TEST(test_dict_bigint_key_refused) {
  g_destroyed = 0;
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  pf_object_t* big = fake_bigint();
  pf_any_t kb = pf_any_object(big), v = pf_any_int(1);
  ck_assert_int_eq(pf_dict_set(d, &kb, &v), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_set: argument key: expected str, bytes, int or Object, "
                                "got BigInt, which TVM-FFI hashes with a registered __any_hash__");
  /* put it there as TVM-FFI would: the small form is searched in order, no hash */
  test_mapcell_t* c = cell_of(d);
  test_kv_t* kv = (test_kv_t*)c->data;
  pf_object_retain(big);
  kv[0].key = kb;
  kv[0].value = pf_any_int(0);
  c->size = 1;
  for (int i = 1; i < 4; ++i) {
    pf_any_t k = pf_any_int(i), x = pf_any_int(i);
    ck_assert_int_eq(pf_dict_set(d, &k, &x), 0);
  }
  const pf_any_t* got;
  ck_assert_int_eq(pf_dict_get(d, &kb, &got), 0); /* found by identity in the small form */
  ck_assert_int_eq(got->v_int64, 0);
  ck_assert_int_eq(pf_dict_set(d, &kb, &v), 0); /* a present key: only its value changes */
  pf_object_t* obj = counted_new();
  pf_object_t* handle = obj;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  pf_any_t k5 = pf_any_int(5);
  ck_assert_int_eq(pf_dict_set(d, &k5, &ref), -1); /* the 5th key: the dense switch */
  PF_ASSERT_RAISED("TypeError", "got one holding a BigInt key");
  ck_assert_ptr_eq(handle, obj);
  ck_assert_uint_eq(pf_object_strong_count(obj), 1);
  ck_assert_int_eq(pf_dict_set(d, &ref, &v), -1); /* as the key: the same */
  PF_ASSERT_RAISED("TypeError", "got one holding a BigInt key");
  ck_assert_ptr_eq(handle, obj);
  size_t n;
  ck_assert_int_eq(pf_dict_count(d, &n), 0);
  ck_assert_uint_eq(n, 4);
  ck_assert_uint_ne(c->slots >> 63, 0);       /* still small */
  ck_assert_int_eq(pf_dict_erase(d, &kb), 1); /* erasing moves no other key */
  ck_assert_int_eq(pf_dict_set(d, &k5, &ref), 0);
  ck_assert_ptr_null(handle);
  pf_object_release(d);
  ck_assert_int_eq(g_destroyed, 1); /* obj; big still has our reference */
  pf_object_release(big);
  ck_assert_int_eq(g_destroyed, 2);
}
END_TEST

/* pf_map_set / pf_dict_set grow the table until the key has a place (TVM-FFI's
 * InsertMaybeReHash), however crowded its chain: never -1 with nothing raised. */
START_TEST(test_map_set_grows_until_placed) {
  /* 200 keys whose hashes differ only in their low bits share one chain at every table size
   * up to 2^56 slots; a new key whose home lies inside that chain needs the chain moved (more
   * than any one move does), so the table has to grow (several times) */
  const uint64_t c = 11400714819323198485ull;
  uint64_t inv = c; /* c's inverse modulo 2^64 (Newton's iteration) */
  for (int i = 0; i < 6; ++i)
    inv *= 2 - c * inv;
  const uint64_t x = 0x5000000000000000ull;
  for (int as_map = 0; as_map < 2; ++as_map) {
    pf_object_t* m;
    ck_assert_int_eq(as_map ? pf_map_create(&m) : pf_dict_create(&m), 0);
    for (uint64_t j = 0; j < 200; ++j) {
      pf_any_t k = pf_any_int((int64_t)((inv * (x + j) ^ 1) - 0x9e3779b9u - 64)), v = pf_any_int(1);
      ck_assert_int_eq((as_map ? pf_map_set(m, &k, &v) : pf_dict_set(m, &k, &v)), 0);
    }
    ck_assert_uint_eq(int_hash(item_at(m, cell_of(m)->iter_head)->key.v_int64), inv * x);
    unsigned bits = 64 - cell_of(m)->fib_shift;
    uint64_t h = inv * (x + (30ull << (64 - bits)));
    pf_object_t* obj = counted_new();
    pf_object_t* handle = obj;
    pf_any_t k = pf_any_int((int64_t)((h ^ 1) - 0x9e3779b9u - 64));
    pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
    uint64_t slots = cell_of(m)->slots;
    ck_assert_int_eq((as_map ? pf_map_set(m, &k, &ref) : pf_dict_set(m, &k, &ref)), 0);
    PF_ASSERT_NO_ERROR();
    ck_assert_ptr_null(handle);
    ck_assert_uint_gt(cell_of(m)->slots, 2 * slots);
    const pf_any_t* got;
    ck_assert_int_eq((as_map ? pf_map_get(m, &k, &got) : pf_dict_get(m, &k, &got)), 0);
    ck_assert_ptr_eq(got->v_obj, obj);
    size_t n;
    ck_assert_int_eq((as_map ? pf_map_count(m, &n) : pf_dict_count(m, &n)), 0);
    ck_assert_uint_eq(n, 201);
    for (uint64_t j = 0; j < 200; ++j) {
      pf_any_t kj = pf_any_int((int64_t)((inv * (x + j) ^ 1) - 0x9e3779b9u - 64));
      ck_assert_int_eq((as_map ? pf_map_contains(m, &kj) : pf_dict_get(m, &kj, &got)), as_map);
      if (!as_map)
        ck_assert_ptr_nonnull(got);
    }
    pf_object_release(m); /* and obj, whose reference moved in */
  }
}
END_TEST

/* Two rvalue references to one handle: its reference can move once, so the call is refused
 * before anything moves (it used to succeed with an error left raised and a none stored). */
START_TEST(test_rvalue_reference_twice_refused) {
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("a string object", 15, &s), 0);
  pf_object_t* handle = s;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  pf_any_t items[3] = {ref, pf_any_int(1), ref};
  pf_object_t* arr = s;
  ck_assert_int_eq(pf_array_create(items, 3, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_create: argument items[2]: expected an rvalue "
                                 "reference to its own handle, got the handle of items[0] again");
  ck_assert_ptr_null(arr);
  ck_assert_ptr_eq(handle, s);
  ck_assert_uint_eq(pf_object_strong_count(s), 1);
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  ck_assert_int_eq(pf_dict_set(d, &ref, &ref), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument value: expected an rvalue reference to "
                                 "its own handle, got the handle of key again");
  ck_assert_ptr_eq(handle, s);
  /* two handles of the same object are two references: both move */
  pf_object_retain(s);
  pf_object_t* handle2 = s;
  pf_any_t ref2 = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle2}};
  pf_any_t two[2] = {ref, ref2};
  ck_assert_int_eq(pf_array_create(two, 2, &arr), 0);
  PF_ASSERT_NO_ERROR();
  ck_assert_ptr_null(handle);
  ck_assert_ptr_null(handle2);
  ck_assert_uint_eq(pf_object_strong_count(s), 2);
  pf_object_release(arr);
  pf_object_release(d);
}
END_TEST

/* pf_map_copy copies any map: keys packfn refuses to set (float, bool, none; a BigInt) are
 * copied as they lie, and the copy takes new keys. */
START_TEST(test_map_copy_any_keys) {
  g_destroyed = 0;
  pf_object_t* big = fake_bigint();
  pf_any_t foreign[4] = {pf_any_float(1.5), pf_any_bool(1), pf_any_none(), pf_any_object(big)};
  for (int dense = 0; dense < 2; ++dense) {
    pf_object_t* d;
    ck_assert_int_eq(pf_dict_create(&d), 0);
    test_mapcell_t* c = cell_of(d);
    test_kv_t* kv = (test_kv_t*)c->data; /* the small form, written as TVM-FFI does */
    for (int i = 0; i < 4; ++i) {
      pf_any_retain(&foreign[i]);
      kv[i].key = foreign[i];
      kv[i].value = pf_any_int(i);
    }
    c->size = 4;
    if (dense) { /* packfn cannot place a BigInt: make the table by hand, slot i for key i */
      test_block_t* b = calloc(1, sizeof *b);
      ck_assert_ptr_nonnull(b);
      memset(b->meta, 0xFF, 16);
      for (int i = 0; i < 4; ++i) {
        b->meta[i] = 0x00;
        b->items[i].key = kv[i].key;
        b->items[i].value = kv[i].value;
        b->items[i].prev = i ? (uint64_t)i - 1 : UINT64_MAX;
        b->items[i].next = i < 3 ? (uint64_t)i + 1 : UINT64_MAX;
      }
      c->data = b;
      c->data_deleter = free;
      c->slots = 8;
      c->fib_shift = 61;
      c->iter_head = 0;
      c->iter_tail = 3;
    }
    pf_object_t* copy;
    ck_assert_int_eq(pf_map_copy(d, &copy), 0);
    size_t n;
    ck_assert_int_eq(pf_map_count(copy, &n), 0);
    ck_assert_uint_eq(n, 4);
    pf_map_item_t items[8];
    ck_assert_uint_eq(map_entries(copy, items, 8), 4);
    for (int i = 0; i < 4; ++i) {
      ck_assert_int_eq(items[i].key.type_index, foreign[i].type_index);
      ck_assert_int_eq(items[i].value.v_int64, i);
    }
    ck_assert_uint_eq(pf_object_strong_count(big), 3); /* ours, the dict's, the copy's */
    pf_object_release(d);
    ck_assert_uint_eq(pf_object_strong_count(big), 2);
    /* new keys go in while no stored key has to move: a BigInt among them stops a rebuild */
    pf_any_t k = pf_any_cstr("x"), v = pf_any_int(9);
    int rc = pf_map_set(copy, &k, &v);
    ck_assert_int_eq(rc, dense ? 0 : -1); /* small and full: the dense switch moves them all */
    if (rc != 0)
      PF_ASSERT_RAISED("TypeError", "pf_map_set: argument map: expected a map whose keys packfn "
                                    "can hash, got one holding a BigInt key");
    ck_assert_int_eq(pf_map_count(copy, &n), 0);
    ck_assert_uint_eq(n, 4 + (rc == 0));
    pf_object_release(copy);
    ck_assert_uint_eq(pf_object_strong_count(big), 1);
  }
  /* without the BigInt, the copy of float, bool and none keys grows like any map */
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  test_kv_t* kv = (test_kv_t*)cell_of(d)->data;
  for (int i = 0; i < 3; ++i) {
    kv[i].key = foreign[i];
    kv[i].value = pf_any_int(i);
  }
  cell_of(d)->size = 3;
  pf_object_t* copy;
  ck_assert_int_eq(pf_map_copy(d, &copy), 0);
  for (int i = 0; i < 50; ++i) {
    pf_any_t k = pf_any_int(i), v = pf_any_int(i);
    ck_assert_int_eq(pf_map_set(copy, &k, &v), 0);
  }
  pf_map_item_t items[60];
  ck_assert_uint_eq(map_entries(copy, items, 60), 53);
  ck_assert_int_eq(items[0].key.type_index, PF_TYPE_FLOAT);
  ck_assert_int_eq(items[1].key.type_index, PF_TYPE_BOOL);
  ck_assert_int_eq(items[2].key.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(items[52].key.v_int64, 49);
  pf_object_release(copy);
  pf_object_release(d);
  pf_object_release(big);
  ck_assert_int_eq(g_destroyed, 1);
}
END_TEST

/* ---- lists and cycles ---- */

START_TEST(test_list_cannot_contain_itself) {
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  pf_any_t one = pf_any_int(1), self = pf_any_object(list);
  ck_assert_int_eq(pf_list_append(list, &one), 0);
  ck_assert_int_eq(pf_list_append(list, &self), -1);
  PF_ASSERT_RAISED("ValueError", "pf_list_append: argument value: a list cannot contain itself");
  ck_assert_int_eq(pf_list_insert(list, 0, &self), -1);
  PF_ASSERT_RAISED("ValueError", "pf_list_insert: argument value: a list cannot contain itself");
  ck_assert_int_eq(pf_list_set(list, 0, &self), -1);
  PF_ASSERT_RAISED("ValueError", "pf_list_set: argument value: a list cannot contain itself");
  pf_object_t* handle = list;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  ck_assert_int_eq(pf_list_append(list, &ref), -1);
  PF_ASSERT_RAISED("ValueError", "a list cannot contain itself");
  ck_assert_ptr_eq(handle, list);
  size_t n;
  ck_assert_int_eq(pf_array_count(list, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(pf_object_strong_count(list), 1);
  pf_object_release(list);
}
END_TEST

/* A failed insert moves nothing: room is made before the value is owned (an rvalue
 * reference's object used to be moved in, then released when the buffer could not grow). */
START_TEST(test_list_failed_insert_moves_nothing) {
  g_destroyed = 0;
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  pf_any_t one = pf_any_int(1);
  ck_assert_int_eq(pf_list_append(list, &one), 0);
  pf_seq_cell_t* c = (pf_seq_cell_t*)(list + 1);
  int64_t size = c->size, capacity = c->capacity;
  c->size = c->capacity = (int64_t)1 << 61; /* full, and too large to double */
  pf_object_t* obj = counted_new();
  pf_object_t* handle = obj;
  pf_any_t ref = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &handle}};
  ck_assert_int_eq(pf_list_append(list, &ref), -1);
  PF_ASSERT_RAISED("ValueError", "pf_list_append: argument list");
  ck_assert_ptr_eq(handle, obj);
  ck_assert_int_eq(g_destroyed, 0);
  ck_assert_uint_eq(pf_object_strong_count(obj), 1);
  c->size = size;
  c->capacity = capacity;
  ck_assert_int_eq(pf_list_insert(list, 0, &ref), 0);
  ck_assert_ptr_null(handle);
  pf_object_release(list);
  ck_assert_int_eq(g_destroyed, 1);
}
END_TEST

/* Dicts change in place, so they can hold themselves through other containers: equality ends
 * on such cycles (a pair met again counts equal) and finds the differences in them. */
START_TEST(test_equality_on_cycles) {
  pf_object_t *d1, *d2;
  ck_assert_int_eq(pf_dict_create(&d1), 0);
  ck_assert_int_eq(pf_dict_create(&d2), 0);
  pf_any_t ka = pf_any_cstr("a"), kb = pf_any_cstr("b");
  pf_any_t v1 = pf_any_object(d1), v2 = pf_any_object(d2);
  /* d1 = {"a": d2}, d2 = {"a": d1} */
  ck_assert_int_eq(pf_dict_set(d1, &ka, &v2), 0);
  ck_assert_int_eq(pf_dict_set(d2, &ka, &v1), 0);
  ck_assert_int_eq(pf_container_equal(&v1, &v2), 1);
  pf_any_t one = pf_any_int(1), two = pf_any_int(2);
  ck_assert_int_eq(pf_dict_set(d1, &kb, &one), 0);
  ck_assert_int_eq(pf_dict_set(d2, &kb, &two), 0);
  ck_assert_int_eq(pf_container_equal(&v1, &v2), 0);
  ck_assert_int_eq(pf_dict_set(d2, &kb, &one), 0);
  ck_assert_int_eq(pf_container_equal(&v1, &v2), 1);

  /* x = {"a": [x]} and y = {"a": [y]}: through arrays, compared element by element */
  pf_object_t *x, *y, *ax, *ay;
  ck_assert_int_eq(pf_dict_create(&x), 0);
  ck_assert_int_eq(pf_dict_create(&y), 0);
  pf_any_t vx = pf_any_object(x), vy = pf_any_object(y);
  ck_assert_int_eq(pf_array_create(&vx, 1, &ax), 0);
  ck_assert_int_eq(pf_array_create(&vy, 1, &ay), 0);
  pf_any_t vax = pf_any_object(ax), vay = pf_any_object(ay);
  ck_assert_int_eq(pf_dict_set(x, &ka, &vax), 0);
  ck_assert_int_eq(pf_dict_set(y, &ka, &vay), 0);
  ck_assert_int_eq(pf_container_equal(&vx, &vy), 1);
  ck_assert_int_eq(pf_container_equal(&vax, &vay), 1);
  ck_assert_int_eq(pf_container_equal(&vx, &v1), 0); /* one key against two */
  /* a long cycle: 100 dicts in a ring against a ring of 100 others, differing in one place */
  enum { RING = 100 };
  pf_object_t *r1[RING], *r2[RING];
  for (int i = 0; i < RING; ++i) {
    ck_assert_int_eq(pf_dict_create(&r1[i]), 0);
    ck_assert_int_eq(pf_dict_create(&r2[i]), 0);
  }
  for (int i = 0; i < RING; ++i) {
    pf_any_t n1 = pf_any_object(r1[(i + 1) % RING]), n2 = pf_any_object(r2[(i + 1) % RING]);
    pf_any_t mark = pf_any_int(i == 57 ? -1 : i);
    ck_assert_int_eq(pf_dict_set(r1[i], &ka, &n1), 0);
    ck_assert_int_eq(pf_dict_set(r2[i], &ka, &n2), 0);
    pf_any_t plain = pf_any_int(i);
    ck_assert_int_eq(pf_dict_set(r1[i], &kb, &plain), 0);
    ck_assert_int_eq(pf_dict_set(r2[i], &kb, &mark), 0);
  }
  pf_any_t h1 = pf_any_object(r1[0]), h2 = pf_any_object(r2[0]);
  ck_assert_int_eq(pf_container_equal(&h1, &h2), 0);
  pf_any_t fixed = pf_any_int(57);
  ck_assert_int_eq(pf_dict_set(r2[57], &kb, &fixed), 0);
  ck_assert_int_eq(pf_container_equal(&h1, &h2), 1);

  /* cycles leak like any reference cycle: break them before letting go */
  ck_assert_int_eq(pf_dict_erase(d1, &ka), 1);
  ck_assert_int_eq(pf_dict_erase(x, &ka), 1);
  ck_assert_int_eq(pf_dict_erase(y, &ka), 1);
  for (int i = 0; i < RING; ++i) {
    ck_assert_int_eq(pf_dict_erase(r1[i], &ka), 1);
    ck_assert_int_eq(pf_dict_erase(r2[i], &ka), 1);
    pf_object_release(r1[i]);
    pf_object_release(r2[i]);
  }
  pf_object_t* objs[] = {d1, d2, x, y, ax, ay};
  for (size_t i = 0; i < sizeof objs / sizeof objs[0]; ++i)
    pf_object_release(objs[i]);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("container");
  TCase* tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_shape_create_and_read);
  tcase_add_test(tc, test_shape_bad_input);
  tcase_add_test(tc, test_shape_foreign);
  tcase_add_test(tc, test_array_create_get_items);
  tcase_add_test(tc, test_array_releases_contents_once);
  tcase_add_test(tc, test_array_bad_input);
  tcase_add_test(tc, test_array_rvalue_reference);
  tcase_add_test(tc, test_array_create_take);
  tcase_add_test(tc, test_array_foreign);
  tcase_add_test(tc, test_map_set_get_iterate);
  tcase_add_test(tc, test_map_bytes_keys);
  tcase_add_test(tc, test_map_growth_keeps_order);
  tcase_add_test(tc, test_map_key_errors);
  tcase_add_test(tc, test_dict_set_get_erase_across_forms);
  tcase_add_test(tc, test_dict_errors);
  tcase_add_test(tc, test_map_copy_is_open_and_independent);
  tcase_add_test(tc, test_map_failed_set_changes_nothing);
  tcase_add_test(tc, test_map_releases_contents_once);
  tcase_add_test(tc, test_map_freeze);
  tcase_add_test(tc, test_nesting_and_release);
  tcase_add_test(tc, test_equality);
  tcase_add_test(tc, test_list_append_insert_set_pop);
  tcase_add_test(tc, test_list_holds_references);
  tcase_add_test(tc, test_list_errors);
  tcase_add_test(tc, test_dict_foreign_chain_refused);
  tcase_add_test(tc, test_map_bad_jump_index_refused);
  tcase_add_test(tc, test_dict_bigint_key_refused);
  tcase_add_test(tc, test_map_set_grows_until_placed);
  tcase_add_test(tc, test_rvalue_reference_twice_refused);
  tcase_add_test(tc, test_map_copy_any_keys);
  tcase_add_test(tc, test_list_cannot_contain_itself);
  tcase_add_test(tc, test_list_failed_insert_moves_nothing);
  tcase_add_test(tc, test_equality_on_cycles);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
