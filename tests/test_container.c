/* Tests of containers: shapes and arrays built, read and iterated, their bad input, contents
 * released exactly once, foreign cells, nesting, deep equality and lists (maps and dicts are in
 * test_map.c and test_map_foreign.c; this file's make_suite runs them all in one TCase). */
#include <math.h>
#include <stdint.h>

#include "pf_test_container.h"

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

  /* TVM-FFI's ffi::Shape(std::vector<int64_t>{}) has no extents and a NULL data pointer (the
   * empty vector's data()): pf_shape_data still gives a non-NULL pointer, as it promises */
  foreign_shape_t empty = {{PF_REF_INITIAL, PF_TYPE_SHAPE, 0, {foreign_deleter}}, {NULL, 0}};
  const int64_t* dims = NULL;
  size_t ndim = 9;
  ck_assert_int_eq(pf_shape_data(&empty.header, &dims, &ndim), 0);
  ck_assert_ptr_nonnull(dims);
  ck_assert_uint_eq(ndim, 0);
  ck_assert_int_eq(pf_shape_get(&empty.header, 0, &x), -1);
  PF_ASSERT_RAISED("IndexError", "index 0 is out of range for a shape of ndim 0");
}
END_TEST

/* A shape without data counts no extents (pf_shape_data, pf_shape_get): so does equality, which
 * read the NULL data for the size the cell claims (SIGSEGV; review) */
START_TEST(test_shape_without_data_equal) {
  static const int64_t ext[] = {5, 6, 7};
  foreign_shape_t bare = {{PF_REF_INITIAL, PF_TYPE_SHAPE, 0, {foreign_deleter}}, {NULL, 3}};
  pf_object_t *three, *none;
  ck_assert_int_eq(pf_shape_create(ext, 3, &three), 0);
  ck_assert_int_eq(pf_shape_create(NULL, 0, &none), 0);
  pf_any_t a = pf_any_object(&bare.header), b = pf_any_object(three), c = pf_any_object(none);
  ck_assert_int_eq(pf_container_equal(&a, &b), 0);
  ck_assert_int_eq(pf_container_equal(&b, &a), 0);
  ck_assert_int_eq(pf_container_equal(&a, &c), 1);
  pf_object_release(three);
  pf_object_release(none);
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

/* TVM-FFI's Unchanged marker (13) is a value with an owned form (pf_any_to_owned copies it), so
 * every container stores it as it stores none (it was refused with "expected a value with an
 * owned form, got Unchanged"). */
START_TEST(test_containers_hold_unchanged) {
  pf_any_t marker = pf_any_none();
  marker.type_index = PF_TYPE_UNCHANGED;
  pf_object_t *arr, *taken, *list, *dict;
  const pf_any_t* got;
  ck_assert_int_eq(pf_array_create(&marker, 1, &arr), 0);
  ck_assert_int_eq(pf_array_get(arr, 0, &got), 0);
  ck_assert_int_eq(got->type_index, PF_TYPE_UNCHANGED);
  pf_any_t owned = marker;
  ck_assert_int_eq(pf_array_create_take(&owned, 1, &taken), 0);
  ck_assert_int_eq(pf_array_get(taken, 0, &got), 0);
  ck_assert_int_eq(got->type_index, PF_TYPE_UNCHANGED);
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_list_append(list, &marker), 0);
  ck_assert_int_eq(pf_array_get(list, 0, &got), 0);
  ck_assert_int_eq(got->type_index, PF_TYPE_UNCHANGED);
  ck_assert_int_eq(pf_dict_create(&dict), 0);
  pf_any_t key = pf_any_cstr("k");
  ck_assert_int_eq(pf_dict_set(dict, &key, &marker), 0);
  ck_assert_int_eq(pf_dict_get(dict, &key, &got), 0);
  ck_assert_ptr_nonnull(got);
  ck_assert_int_eq(got->type_index, PF_TYPE_UNCHANGED);
  PF_ASSERT_NO_ERROR();
  pf_object_release(arr);
  pf_object_release(taken);
  pf_object_release(list);
  pf_object_release(dict);
}
END_TEST

/* pf_array_create copies the common values (ints, floats, bools, small texts, objects) in one
 * pass and sends every value down the general path when it meets any other: both ways must own
 * the same values as pf_any_to_owned makes them, and a failure in either must leave every count
 * and every map as it was (a pass that retains, then falls back, then fails). */
START_TEST(test_array_values_copied_as_owned) {
  pf_any_t odd[6];
  odd[3] = pf_any_cstr("seven77"); /* raw strings: up to 7 bytes small, 8 an object */
  odd[4] = pf_any_cstr("eight888");
  odd[5] = pf_any_cstr("");
  odd[0] = pf_any_int(-3);
  odd[0].zero_padding = 77; /* another producer's padding */
  odd[1] = pf_any_bool(1);
  odd[1].v_int64 = 5; /* a bool stored as 5 */
  odd[2] = pf_any_cstr("abc");
  ck_assert_int_eq(pf_any_to_owned(&odd[2], &odd[2]), 0);
  ck_assert_int_eq(odd[2].type_index, PF_TYPE_SMALL_STR);
  odd[2].v_bytes[5] = 'x'; /* bytes after the text's NUL, not zero */
  pf_object_t* arr;
  const pf_any_t* all;
  size_t n;
  static const size_t counts[] = {3, 4, 6}; /* the one-pass copies alone; then an object */
  for (size_t c = 0; c < 3; ++c) {
    ck_assert_int_eq(pf_array_create(odd, counts[c], &arr), 0);
    ck_assert_int_eq(pf_array_items(arr, &all, &n), 0);
    ck_assert_uint_eq(n, counts[c]);
    for (size_t i = 0; i < n; ++i) {
      pf_any_t want;
      ck_assert_int_eq(pf_any_to_owned(&odd[i], &want), 0);
      if (want.type_index == PF_TYPE_STR)
        ck_assert(pf_any_equal(&all[i], &want));
      else
        ck_assert_mem_eq(&all[i], &want, sizeof want); /* the same bits, padding included */
      pf_any_release(&want);
    }
    ck_assert_int_eq(all[counts[c] > 3 ? 3 : 0].type_index,
                     counts[c] > 3 ? PF_TYPE_SMALL_STR : PF_TYPE_INT);
    pf_object_release(arr);
  }

  g_destroyed = 0;
  pf_object_t* a = counted_new();
  pf_object_t* b = counted_new();
  /* objects first (the pass retains them), then a raw string: the general path for all */
  pf_any_t mixed[4] = {pf_any_object(a), pf_any_int(1), pf_any_cstr("a raw string, general"),
                       pf_any_object(b)};
  ck_assert_int_eq(pf_array_create(mixed, 4, &arr), 0);
  ck_assert_uint_eq(pf_object_strong_count(a), 2);
  ck_assert_uint_eq(pf_object_strong_count(b), 2);
  ck_assert_int_eq(pf_array_items(arr, &all, &n), 0);
  ck_assert_int_eq(all[2].type_index, PF_TYPE_STR);
  pf_object_release(arr);
  ck_assert_uint_eq(pf_object_strong_count(a), 1);
  ck_assert_uint_eq(pf_object_strong_count(b), 1);

  /* a NULL object after retained ones: refused, nothing kept */
  pf_any_t broken[3] = {pf_any_object(a), pf_any_object(b), pf_any_object(b)};
  broken[2].v_obj = NULL;
  arr = (pf_object_t*)0x1;
  ck_assert_int_eq(pf_array_create(broken, 3, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_create: argument items[2]: ");
  ck_assert_ptr_null(arr);
  ck_assert_uint_eq(pf_object_strong_count(a), 1);
  ck_assert_uint_eq(pf_object_strong_count(b), 1);

  /* a map is frozen once it is stored, on either path, and not when the create fails */
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_any_t with_map[2] = {pf_any_object(map), pf_any_object(a)};
  with_map[1].v_obj = NULL;
  ck_assert_int_eq(pf_array_create(with_map, 2, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "argument items[1]");
  ck_assert_int_eq(pf_map_is_frozen(map), 0);
  ck_assert_uint_eq(pf_object_strong_count(map), 1);
  with_map[1] = pf_any_cstr("raw: the general path");
  ck_assert_int_eq(pf_array_create(with_map, 2, &arr), 0);
  ck_assert_int_eq(pf_map_is_frozen(map), 1);
  pf_object_release(arr);
  pf_object_release(map);
  ck_assert_int_eq(pf_map_create(&map), 0);
  with_map[0] = pf_any_object(map);
  with_map[1] = pf_any_int(2);
  ck_assert_int_eq(pf_array_create(with_map, 2, &arr), 0);
  ck_assert_int_eq(pf_map_is_frozen(map), 1);
  pf_object_release(arr);
  pf_object_release(map);

  pf_object_release(a);
  pf_object_release(b);
  ck_assert_int_eq(g_destroyed, 2);
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
  /* a count past any array is refused before an item is read (it read past the caller's) */
  ck_assert_int_eq(pf_array_create_take(items, SIZE_MAX / 16 + 1, &arr), -1);
  PF_ASSERT_RAISED("ValueError", "pf_array_create_take: argument count:");
  ck_assert_int_eq(items[0].type_index, PF_TYPE_OBJECT);
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

/* An array or list without data holds no values, as pf_array_items reads it: pf_array_count,
 * pf_array_get and equality read the size its cell claims (a pointer near NULL handed out,
 * SIGSEGV comparing; review) */
START_TEST(test_array_without_data_holds_nothing) {
  foreign_array_t bare = {{PF_REF_INITIAL, PF_TYPE_ARRAY, 0, {foreign_deleter}},
                          {NULL, 2, 0, NULL}};
  size_t n = 9;
  ck_assert_int_eq(pf_array_count(&bare.header, &n), 0);
  ck_assert_uint_eq(n, 0);
  pf_any_t probe = pf_any_none();
  const pf_any_t* v = &probe;
  ck_assert_int_eq(pf_array_get(&bare.header, 1, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("IndexError", "index 1 is out of range for an array of size 0");
  pf_any_t data[2] = {pf_any_int(1), pf_any_int(2)};
  pf_object_t *two, *none;
  ck_assert_int_eq(pf_array_create(data, 2, &two), 0);
  ck_assert_int_eq(pf_array_create(NULL, 0, &none), 0);
  pf_any_t a = pf_any_object(&bare.header), b = pf_any_object(two), c = pf_any_object(none);
  ck_assert_int_eq(pf_container_equal(&a, &b), 0);
  ck_assert_int_eq(pf_container_equal(&b, &a), 0);
  ck_assert_int_eq(pf_container_equal(&a, &c), 1);
  pf_object_release(two);
  pf_object_release(none);
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
  /* with no buffer yet, its items are still a pointer, as promised (was NULL; review) */
  const pf_any_t* none_yet = NULL;
  n = 99;
  ck_assert_int_eq(pf_array_items(list, &none_yet, &n), 0);
  ck_assert_ptr_nonnull(none_yet);
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

/* An IndexError from pf_list_pop names the index the caller gave, not the one counted from the
 * end (it said "index -1" for -7 on a list of 6: found by review). */
START_TEST(test_list_pop_error_names_given_index) {
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  for (int64_t i = 0; i < 6; ++i) {
    pf_any_t v = pf_any_int(i);
    ck_assert_int_eq(pf_list_append(list, &v), 0);
  }
  pf_any_t out = pf_any_int(9);
  ck_assert_int_eq(pf_list_pop(list, -7, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "pf_list_pop: index -7 is out of range for a list of size 6");
  ck_assert_int_eq(out.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_list_pop(list, 6, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "pf_list_pop: index 6 is out of range for a list of size 6");
  ck_assert_int_eq(pf_list_pop(list, INT64_MIN, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "pf_list_pop: index -9223372036854775808 is out of range");
  ck_assert_int_eq(pf_list_pop(list, -6, &out), 0); /* -size is the first */
  ck_assert_int_eq(out.v_int64, 0);
  size_t n;
  ck_assert_int_eq(pf_array_count(list, &n), 0);
  ck_assert_uint_eq(n, 5);
  pf_object_release(list);
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

/* A list holding the int 1, its cell (whose size and capacity the growth tests set by hand) and
 * its real size and capacity in *size and *capacity (to be put back before its release). */
static pf_object_t* list_of_one(pf_seq_cell_t** cell, int64_t* size, int64_t* capacity) {
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  pf_any_t one = pf_any_int(1);
  ck_assert_int_eq(pf_list_append(list, &one), 0);
  *cell = (pf_seq_cell_t*)(list + 1);
  *size = (*cell)->size;
  *capacity = (*cell)->capacity;
  return list;
}

/* A failed insert moves nothing: room is made before the value is owned (an rvalue
 * reference's object used to be moved in, then released when the buffer could not grow). */
START_TEST(test_list_failed_insert_moves_nothing) {
  g_destroyed = 0;
  pf_seq_cell_t* c;
  int64_t size, capacity;
  pf_object_t* list = list_of_one(&c, &size, &capacity);
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

/* A value borrowed from the list itself (an item, as in l.append(l[0])) can be appended when the
 * list must grow, and a refused value leaves the buffer (and pointers into it) as it was: the
 * buffer grew, freeing the old one, before the value was read and checked (review; ASan:
 * heap-use-after-free in both). A string object makes the first read count. */
START_TEST(test_list_append_own_item_while_growing) {
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  pf_any_t s;
  ck_assert_int_eq(pf_string_create("a string object, not a small one", 32, &s), 0);
  for (int i = 0; i < 4; ++i)
    ck_assert_int_eq(pf_list_append(list, &s), 0);
  pf_any_release(&s);
  pf_seq_cell_t* c = (pf_seq_cell_t*)(list + 1);
  ck_assert_int_eq(c->size, c->capacity); /* full: the next append grows */
  const pf_any_t* first;
  ck_assert_int_eq(pf_array_get(list, 0, &first), 0);
  ck_assert_int_eq(pf_list_append(list, first), 0);
  ck_assert_int_eq(c->size, 5);
  const pf_any_t* items = (const pf_any_t*)c->data;
  ck_assert_ptr_eq(items[4].v_obj, items[0].v_obj);
  ck_assert_uint_eq(pf_object_strong_count(items[0].v_obj), 5);
  /* full again (8), then a refused value: the buffer and its items stay */
  for (int i = 0; i < 3; ++i) {
    ck_assert_int_eq(pf_array_get(list, 0, &first), 0);
    ck_assert_int_eq(pf_list_append(list, first), 0);
  }
  ck_assert_int_eq(c->size, c->capacity);
  const void* data = c->data;
  DLTensor view = {0};
  pf_any_t bad = pf_any_dltensor(&view);
  ck_assert_int_eq(pf_list_append(list, &bad), -1);
  PF_ASSERT_RAISED("TypeError", "pf_list_append");
  ck_assert_ptr_eq(c->data, data);
  ck_assert_int_eq(c->size, 8);
  ck_assert_uint_eq(pf_object_strong_count(((const pf_any_t*)data)[0].v_obj), 8);
  pf_object_release(list);
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

/* A small string or bytes value whose length says more than its 7 bytes hold is refused by
 * every container write with an error naming the call and the item: pf_array_create_take
 * stored it (a later read of it ran 200 bytes past the Any), and the others raised
 * "pf_any_to_owned: ..." naming a function the caller never called (review). */
START_TEST(test_containers_refuse_overlong_small_text) {
  pf_any_t bad[2] = {pf_any_int(1), pf_any_none()};
  bad[1].type_index = PF_TYPE_SMALL_STR;
  bad[1].small_str_len = 200;
  pf_object_t* arr = (pf_object_t*)&arr;
  ck_assert_int_eq(pf_array_create_take(bad, 2, &arr), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_array_create_take: argument items[1]: a small string of "
                                 "length 200, more than 7");
  ck_assert_ptr_null(arr);
  ck_assert_int_eq(bad[1].type_index, PF_TYPE_SMALL_STR); /* untouched: still the caller's */
  ck_assert_int_eq(pf_array_create(bad, 2, &arr), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_array_create: argument items[1]: a small string of length "
                                 "200, more than 7");
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  bad[1].type_index = PF_TYPE_SMALL_BYTES;
  bad[1].small_str_len = 8;
  ck_assert_int_eq(pf_list_append(list, &bad[1]), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE,
                   "pf_list_append: argument value: a small bytes of length 8, more than 7");
  ck_assert_int_eq(pf_list_append(list, &bad[0]), 0);
  ck_assert_int_eq(pf_list_set(list, 0, &bad[1]), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_list_set: argument value: a small bytes of length 8");
  pf_object_release(list);
}
END_TEST

/* A bytes view pf_any_to_owned refuses (NULL data with a size, or more bytes than a bytes value
 * holds) is refused naming the caller and its item, as an overlong small text is: the writes
 * said "pf_any_to_owned: bytes view ...", a function the caller never called, and no item
 * (review); an rvalue reference before it keeps its object. */
START_TEST(test_containers_refuse_broken_bytes_view) {
  pf_byte_array_t null_data = {NULL, 3}, huge = {"x", SIZE_MAX / 2 + 1};
  pf_object_t* obj;
  ck_assert_int_eq(pf_list_create(&obj), 0);
  pf_object_t* handle = obj;
  pf_any_t items[2] = {pf_any_none(), pf_any_none()};
  items[0].type_index = PF_TYPE_OBJECT_RVALUE_REF;
  items[0].v_ptr = &handle;
  items[1].type_index = PF_TYPE_BYTE_ARRAY_PTR;
  items[1].v_ptr = &null_data;
  pf_object_t* arr = (pf_object_t*)&arr;
  ck_assert_int_eq(pf_array_create(items, 2, &arr), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_array_create: argument items[1]: a bytes view of 3 bytes "
                                 "with a NULL data pointer");
  ck_assert_ptr_null(arr);
  ck_assert_ptr_eq(handle, obj); /* the reference stays the caller's */
  ck_assert_int_eq(pf_list_append(obj, &items[1]), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_list_append: argument value: a bytes view of 3 bytes with "
                                 "a NULL data pointer");
  items[1].v_ptr = &huge;
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_any_t key = pf_any_int(1);
  ck_assert_int_eq(pf_map_set(map, &key, &items[1]), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_map_set: argument value: a bytes view of "
                                 "9223372036854775808 bytes, more than the");
  size_t n;
  ck_assert_int_eq(pf_map_count(map, &n), 0);
  ck_assert_uint_eq(n, 0);
  pf_object_release(map);
  pf_object_release(obj);
}
END_TEST

/* A full list whose capacity is past INT64_MAX / 2 (a foreign cell, as far as a guard can
 * tell) is refused before the doubling: the guard doubled first, a signed overflow (UBSan:
 * "signed integer overflow" in pf__list_reserve_one; review). */
START_TEST(test_list_growth_guard_does_not_overflow) {
  pf_seq_cell_t* c;
  int64_t size, capacity;
  pf_object_t* list = list_of_one(&c, &size, &capacity);
  pf_any_t one = pf_any_int(1);
  /* the first: a doubled capacity whose bytes overflow size_t (2^61 values of 16 bytes) */
  const int64_t huge[] = {(int64_t)1 << 60, INT64_MAX / 2 + 1, INT64_MAX - 1, INT64_MAX};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; ++i) {
    c->size = c->capacity = huge[i];
    ck_assert_int_eq(pf_list_append(list, &one), -1);
    PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_list_append: argument list");
    ck_assert_int_eq(c->capacity, huge[i]);
  }
  c->size = size;
  c->capacity = capacity;
  pf_object_release(list);
}
END_TEST

/* ---- refusals, weak references and foreign buffers (issue 10, coverage) ---- */

START_TEST(test_container_sizes_and_indexes_refused) {
  int64_t dims[1] = {3};
  pf_object_t* out = (pf_object_t*)dims;
  /* too many extents for the byte count, and for the block's size */
  ck_assert_int_eq(pf_shape_create(dims, SIZE_MAX / 4, &out), -1);
  PF_ASSERT_RAISED("ValueError", "pf_shape_create: argument ndim:");
  ck_assert_ptr_null(out);
  ck_assert_int_eq(pf_shape_create(dims, SIZE_MAX / 8, &out), -1);
  PF_ASSERT_RAISED("ValueError", "extents is too many");
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  pf_any_t v = pf_any_int(1);
  ck_assert_int_eq(pf_list_append(list, &v), 0);
  ck_assert_int_eq(pf_list_set(list, 1, &v), -1);
  PF_ASSERT_RAISED("IndexError", "pf_list_set");
  ck_assert_int_eq(pf_list_set(list, -1, &v), -1);
  PF_ASSERT_RAISED("IndexError", "pf_list_set");
  pf_any_t two = pf_any_int(2);
  ck_assert_int_eq(pf_list_set(list, 0, &two), 0);
  pf_any_t got = pf_any_none();
  ck_assert_int_eq(pf_list_pop(list, 0, &got), 0);
  ck_assert_int_eq(got.v_int64, 2);
  pf_object_release(list);
}
END_TEST

/* Shapes, arrays and lists outlived by a weak reference: contents released with the last strong
 * reference, the block with the last weak one. */
START_TEST(test_containers_outlived_by_weak_references) {
  g_destroyed = 0;
  int64_t dims[2] = {2, 3};
  pf_object_t *shape, *arr, *list;
  ck_assert_int_eq(pf_shape_create(dims, 2, &shape), 0);
  pf_object_t* obj = counted_new();
  pf_any_t v = pf_any_object(obj);
  ck_assert_int_eq(pf_array_create(&v, 1, &arr), 0);
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_list_append(list, &v), 0);
  pf_object_release(obj);
  pf_object_t* all[3] = {shape, arr, list};
  for (int i = 0; i < 3; ++i) {
    pf_object_weak_retain(all[i]);
    pf_object_release(all[i]);
    ck_assert_int_eq(pf_object_weak_lock(all[i]), 0);
  }
  ck_assert_int_eq(g_destroyed, 1); /* released by the array's and the list's last references */
  for (int i = 0; i < 3; ++i)
    pf_object_weak_release(all[i]);
}
END_TEST

/* A list whose buffer deleter another runtime left NULL (an empty list's, say): growing it frees
 * nothing of the old buffer, and releasing it when still empty frees nothing either. */
START_TEST(test_list_without_data_deleter) {
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  pf_seq_cell_t* c = (pf_seq_cell_t*)(list + 1);
  c->data_deleter = NULL;
  pf_object_weak_retain(list);
  pf_object_release(list); /* strong part of the deleter: nothing to free */
  ck_assert_int_eq(pf_object_weak_lock(list), 0);
  pf_object_weak_release(list);
  ck_assert_int_eq(pf_list_create(&list), 0);
  c = (pf_seq_cell_t*)(list + 1);
  c->data_deleter = NULL;
  pf_any_t v = pf_any_int(5);
  ck_assert_int_eq(pf_list_append(list, &v), 0);
  ck_assert_int_eq(c->data_deleter != NULL, 1); /* the new buffer is this runtime's */
  ck_assert_int_eq(c->size, 1);
  ck_assert_int_eq(((const pf_any_t*)c->data)[0].v_int64, 5);
  pf_object_release(list);
}
END_TEST

/* Equality of many pairs of equal maps (more pairs than the first table of pairs holds) and of
 * objects with a NULL pointer (hand-made: compared by their bits). */
START_TEST(test_equality_many_map_pairs_and_null_objects) {
  enum { N = 40 };
  pf_any_t xs[N], ys[N];
  for (int i = 0; i < N; ++i) {
    pf_object_t *mx, *my;
    ck_assert_int_eq(pf_map_create(&mx), 0);
    ck_assert_int_eq(pf_map_create(&my), 0);
    pf_any_t k = pf_any_int(i), v = pf_any_int(-i);
    ck_assert_int_eq(pf_map_set(mx, &k, &v), 0);
    ck_assert_int_eq(pf_map_set(my, &k, &v), 0);
    xs[i] = pf_any_object(mx);
    ys[i] = pf_any_object(my);
  }
  pf_object_t *ax, *ay;
  ck_assert_int_eq(pf_array_create(xs, N, &ax), 0);
  ck_assert_int_eq(pf_array_create(ys, N, &ay), 0);
  pf_any_t a = pf_any_object(ax), b = pf_any_object(ay);
  ck_assert_int_eq(pf_container_equal(&a, &b), 1);
  for (int i = 0; i < N; ++i) {
    pf_any_release(&xs[i]);
    pf_any_release(&ys[i]);
  }
  pf_object_release(ax);
  pf_object_release(ay);
  pf_any_t null_arr = {PF_TYPE_ARRAY, {0}, {.v_obj = NULL}}, null_arr2 = null_arr;
  pf_object_t* real;
  ck_assert_int_eq(pf_array_create(NULL, 0, &real), 0);
  pf_any_t r = pf_any_object(real);
  ck_assert_int_eq(pf_container_equal(&null_arr, &r), 0);
  ck_assert_int_eq(pf_container_equal(&r, &null_arr), 0);
  ck_assert_int_eq(pf_container_equal(&null_arr, &null_arr2), 1);
  pf_object_release(real);
}
END_TEST

/* docs/container.md: one object is equal to itself without being walked, so a container holding
 * a NaN equals itself (at the top and nested), while distinct ones holding NaNs do not, and a
 * NaN value itself equals nothing (the twenty-fifth session's review of the docs). */
START_TEST(test_equality_nan_and_identity) {
  pf_any_t nan_item[1] = {pf_any_float(NAN)};
  pf_object_t *a, *b, *outer1, *outer2;
  ck_assert_int_eq(pf_array_create(nan_item, 1, &a), 0);
  ck_assert_int_eq(pf_array_create(nan_item, 1, &b), 0);
  pf_any_t va = pf_any_object(a), vb = pf_any_object(b), f = pf_any_float(NAN);
  ck_assert_int_eq(pf_container_equal(&va, &va), 1);
  ck_assert_int_eq(pf_container_equal(&va, &vb), 0);
  ck_assert_int_eq(pf_container_equal(&f, &f), 0);
  ck_assert_int_eq(pf_array_create(&va, 1, &outer1), 0);
  ck_assert_int_eq(pf_array_create(&va, 1, &outer2), 0);
  pf_any_t o1 = pf_any_object(outer1), o2 = pf_any_object(outer2);
  ck_assert_int_eq(pf_container_equal(&o1, &o2), 1); /* the same inner array in both */
  pf_object_release(outer1);
  pf_object_release(outer2);
  pf_object_release(a);
  pf_object_release(b);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("container");
  TCase* tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_shape_create_and_read);
  tcase_add_test(tc, test_shape_bad_input);
  tcase_add_test(tc, test_shape_foreign);
  tcase_add_test(tc, test_shape_without_data_equal);
  tcase_add_test(tc, test_array_create_get_items);
  tcase_add_test(tc, test_array_releases_contents_once);
  tcase_add_test(tc, test_array_bad_input);
  tcase_add_test(tc, test_array_values_copied_as_owned);
  tcase_add_test(tc, test_containers_hold_unchanged);
  tcase_add_test(tc, test_array_rvalue_reference);
  tcase_add_test(tc, test_array_create_take);
  tcase_add_test(tc, test_array_foreign);
  tcase_add_test(tc, test_array_without_data_holds_nothing);
  pf_test_map_add_tests(tc);
  tcase_add_test(tc, test_nesting_and_release);
  tcase_add_test(tc, test_equality);
  tcase_add_test(tc, test_list_append_insert_set_pop);
  tcase_add_test(tc, test_list_holds_references);
  tcase_add_test(tc, test_list_errors);
  tcase_add_test(tc, test_list_pop_error_names_given_index);
  pf_test_map_foreign_add_tests(tc);
  tcase_add_test(tc, test_list_cannot_contain_itself);
  tcase_add_test(tc, test_list_failed_insert_moves_nothing);
  tcase_add_test(tc, test_list_append_own_item_while_growing);
  tcase_add_test(tc, test_equality_on_cycles);
  tcase_add_test(tc, test_containers_refuse_overlong_small_text);
  tcase_add_test(tc, test_containers_refuse_broken_bytes_view);
  tcase_add_test(tc, test_list_growth_guard_does_not_overflow);
  tcase_add_test(tc, test_container_sizes_and_indexes_refused);
  tcase_add_test(tc, test_containers_outlived_by_weak_references);
  tcase_add_test(tc, test_list_without_data_deleter);
  tcase_add_test(tc, test_equality_many_map_pairs_and_null_objects);
  tcase_add_test(tc, test_equality_nan_and_identity);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
