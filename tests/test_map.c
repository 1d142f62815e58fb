/* Tests of maps and dicts: set, get and iterate, bytes and object keys, growth in order, erase
 * across the small and dense forms, bad keys, copies, failed sets, release and freezing. Part of
 * the container suite (test_container.c runs them). */
#include <stdint.h>

#include "pf_test_container.h"

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

/* Small-string keys are compared by their texts' bytes alone (the bytes after the text may hold
 * anything in another producer's value), C strings of up to 7 bytes are looked up as the small
 * strings they are stored as, and a small string never equals small bytes of the same text: in
 * the small form and the dense one. */
START_TEST(test_map_small_text_keys) {
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  static const char* const keys[] = {"", "a", "ab", "abc", "seven77", "eight888"};
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 6; ++i) {
      pf_any_t k = pf_any_cstr(keys[i]), v = pf_any_int(i);
      ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
    }
    for (int i = 0; i < 6; ++i) {
      pf_any_t k = pf_any_cstr(keys[i]);
      const pf_any_t* got;
      ck_assert_int_eq(pf_dict_get(d, &k, &got), 0);
      ck_assert_ptr_nonnull(got);
      ck_assert_int_eq(got->v_int64, i);
      if (strlen(keys[i]) > PF_SMALL_STR_MAX)
        continue;
      pf_any_t small;
      ck_assert_int_eq(pf_string_create(keys[i], strlen(keys[i]), &small), 0);
      small.v_bytes[7] = 'z'; /* past the text: not part of the key */
      ck_assert_int_eq(pf_dict_get(d, &small, &got), 0);
      ck_assert_ptr_nonnull(got);
      ck_assert_int_eq(got->v_int64, i);
      pf_any_t bytes;
      ck_assert_int_eq(pf_bytes_create(keys[i], strlen(keys[i]), &bytes), 0);
      ck_assert_int_eq(bytes.type_index, PF_TYPE_SMALL_BYTES);
      ck_assert_int_eq(pf_dict_get(d, &bytes, &got), 0);
      ck_assert_ptr_null(got); /* bytes are not a str */
    }
    size_t n;
    ck_assert_int_eq(pf_dict_count(d, &n), 0);
    ck_assert_uint_eq(n, round ? 46u : 6u);
    /* a prefix, a longer text and another last byte are other keys */
    static const char* const absent[] = {"abcd", "abd", "seven7", "seven777"};
    for (int i = 0; i < 4; ++i) {
      pf_any_t k = pf_any_cstr(absent[i]);
      const pf_any_t* got;
      ck_assert_int_eq(pf_dict_get(d, &k, &got), 0);
      ck_assert_ptr_null(got);
    }
    /* the dense form for the second round */
    for (int i = 0; i < 40; ++i) {
      char name[16];
      snprintf(name, sizeof name, "filler%d", i);
      pf_any_t k = pf_any_cstr(name), v = pf_any_int(-1);
      ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
    }
  }
  pf_object_release(d);
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

/* A byte-array view of bytes at NULL (data NULL, size > 0) as a key: refused, not hashed or
 * compared (both crashed, review). */
START_TEST(test_map_key_bytes_at_null) {
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  pf_byte_array_t real = {"abcde", 5}, at_null = {NULL, 5};
  pf_any_t k_real = pf_any_byte_array(&real), k_null = pf_any_byte_array(&at_null);
  pf_any_t v = pf_any_int(1);
  ck_assert_int_eq(pf_map_set(map, &k_real, &v), 0);
  ck_assert_int_eq(pf_map_set(map, &k_null, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_set: argument key: a bytes view of 5 bytes with a NULL");
  ck_assert_int_eq(pf_map_contains(map, &k_null), -1);
  PF_ASSERT_RAISED("ValueError", "argument key: a bytes view of 5 bytes with a NULL data pointer");
  pf_object_t* dict;
  ck_assert_int_eq(pf_dict_create(&dict), 0);
  ck_assert_int_eq(pf_dict_set(dict, &k_null, &v), -1);
  PF_ASSERT_RAISED("ValueError", "a bytes view of 5 bytes with a NULL data pointer");
  pf_object_release(dict);
  pf_object_release(map);
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
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument value: a dict cannot contain itself");
  ck_assert_int_eq(pf_dict_set(d, &self, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument key: a dict cannot contain itself");
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
  ck_assert_int_eq(pf_map_count(d, &n), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_count: argument map: expected Map, got Dict");
  ck_assert_int_eq(pf_map_set(d, &k, &v), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_set: argument map: expected an open Map made by packfn");
  /* a map and a dict with the same entries are not equal */
  ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  ck_assert_int_eq(pf_map_set(map, &k, &v), 0);
  pf_any_t am = pf_any_object(map), ad = pf_any_object(d);
  ck_assert_int_eq(pf_container_equal(&am, &ad), 0);
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
  bad.type_index = PF_TYPE_STR; /* an object key with a NULL pointer: ValueError, as a value */
  ck_assert_int_eq(pf_map_contains(map, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_contains: argument key: a str object with a NULL pointer");
  /* views of key kinds with nothing behind them: a NULL pointer, ValueError as for values */
  bad.type_index = PF_TYPE_RAW_STR;
  bad.v_ptr = NULL;
  ck_assert_int_eq(pf_map_contains(map, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_contains: argument key: a str view with a NULL pointer");
  bad.type_index = PF_TYPE_BYTE_ARRAY_PTR;
  ck_assert_int_eq(pf_map_get(map, &bad, &got), -1);
  PF_ASSERT_RAISED("ValueError", "pf_map_get: argument key: a bytes view with a NULL pointer");
  pf_object_t* no_handle = NULL;
  bad.type_index = PF_TYPE_OBJECT_RVALUE_REF;
  bad.v_ptr = &no_handle;
  ck_assert_int_eq(pf_map_set(map, &bad, &v), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_map_set: argument key: an object rvalue reference with a NULL pointer");

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

  /* so does appending it to a list or storing it in a dict (as docs/container.md says) */
  pf_object_t *m1, *m2, *list, *dict;
  ck_assert_int_eq(pf_map_create(&m1), 0);
  ck_assert_int_eq(pf_map_create(&m2), 0);
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_dict_create(&dict), 0);
  pf_any_t v1 = pf_any_object(m1), v2 = pf_any_object(m2);
  ck_assert_int_eq(pf_list_append(list, &v1), 0);
  ck_assert_int_eq(pf_map_is_frozen(m1), 1);
  ck_assert_int_eq(pf_dict_set(dict, &k, &v2), 0);
  ck_assert_int_eq(pf_map_is_frozen(m2), 1);
  /* pf_map_is_frozen gives 0, raising nothing, for what is not a packfn Map */
  ck_assert_int_eq(pf_map_is_frozen(dict), 0);
  ck_assert_int_eq(pf_map_is_frozen(list), 0);
  ck_assert_int_eq(pf_map_is_frozen(NULL), 0);
  ck_assert_ptr_null(pf_error_take());
  pf_object_release(dict);
  pf_object_release(list);
  pf_object_release(m2);
  pf_object_release(m1);

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

/* ---- refusals, weak references and emptied tables (issue 10, coverage) ---- */

START_TEST(test_map_refusals_name_null) {
  pf_any_t k = pf_any_int(1), v = pf_any_int(2);
  ck_assert_int_eq(pf_map_set(NULL, &k, &v), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_set: argument map: expected an open Map made by packfn, "
                                "got NULL");
  ck_assert_int_eq(pf_map_freeze(NULL), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_freeze: argument map: expected a Map made by packfn, got "
                                "NULL");
  pf_object_t* dict;
  ck_assert_int_eq(pf_dict_create(&dict), 0);
  ck_assert_int_eq(pf_map_freeze(dict), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_freeze: argument map: expected a Map made by packfn, got "
                                "Dict");
  pf_object_t* copy = dict;
  ck_assert_int_eq(pf_map_copy(NULL, &copy), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_copy: argument map: expected Map or Dict, got NULL");
  ck_assert_ptr_null(copy);
  pf_map_iter_t it;
  ck_assert_int_eq(pf_map_iter_init(NULL, &it), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_iter_init: argument map: expected Map or Dict, got NULL");
  const pf_any_t *key, *value;
  ck_assert_int_eq(pf_map_iter_next(&it, &key, &value), 0); /* a refused iterator ends at once */
  /* a byte-array key Any without its array: refused as a view at NULL */
  pf_any_t noarr = pf_any_none();
  noarr.type_index = PF_TYPE_BYTE_ARRAY_PTR;
  ck_assert_int_eq(pf_dict_set(dict, &noarr, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument key: a bytes view with a NULL pointer");
  /* a value rvalue reference without a handle, a value of a negative type index */
  pf_any_t ref_none = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = NULL}};
  ck_assert_int_eq(pf_dict_set(dict, &v, &ref_none), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dict_set: argument value: ObjectRValueRef value with a NULL "
                                 "pointer");
  pf_any_t negative = pf_any_none();
  negative.type_index = -3;
  ck_assert_int_eq(pf_dict_set(dict, &v, &negative), -1);
  PF_ASSERT_RAISED("TypeError", "pf_dict_set: argument value: expected a value with an owned "
                                "form");
  size_t count = 9;
  ck_assert_int_eq(pf_dict_count(dict, &count), 0);
  ck_assert_uint_eq(count, 0);
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  copy = dict;
  ck_assert_int_eq(pf_map_copy(list, &copy), -1);
  PF_ASSERT_RAISED("TypeError", "pf_map_copy: argument map: expected Map or Dict, got List");
  ck_assert_ptr_null(copy);
  pf_object_release(list);
  /* a key and a value that are two rvalue references (two handles): both move */
  pf_object_t *ks, *vs;
  ck_assert_int_eq(pf_string_object_create("a key object", 12, &ks), 0);
  ck_assert_int_eq(pf_string_object_create("a value object", 14, &vs), 0);
  pf_object_t *hk = ks, *hv = vs;
  pf_any_t rk = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &hk}};
  pf_any_t rv = {PF_TYPE_OBJECT_RVALUE_REF, {0}, {.v_ptr = &hv}};
  ck_assert_int_eq(pf_dict_set(dict, &rk, &rv), 0);
  ck_assert_ptr_null(hk);
  ck_assert_ptr_null(hv);
  ck_assert_uint_eq(pf_object_strong_count(ks), 1);
  pf_any_t q = pf_any_cstr("a key object");
  const pf_any_t* got;
  ck_assert_int_eq(pf_dict_get(dict, &q, &got), 0);
  ck_assert_ptr_eq(got->v_obj, vs);
  pf_object_release(dict);
}
END_TEST

/* An empty map copies to an empty open map; a map whose last weak reference outlives its
 * last strong one releases its entries at the first and its block at the second. */
START_TEST(test_map_empty_copy_and_weak_reference) {
  pf_object_t *map, *copy;
  ck_assert_int_eq(pf_map_create(&map), 0);
  ck_assert_int_eq(pf_map_freeze(map), 0);
  ck_assert_int_eq(pf_map_copy(map, &copy), 0);
  size_t count = 9;
  ck_assert_int_eq(pf_map_count(copy, &count), 0);
  ck_assert_uint_eq(count, 0);
  ck_assert_int_eq(pf_map_is_frozen(copy), 0);
  pf_object_release(copy);
  g_destroyed = 0;
  pf_object_t* obj = counted_new();
  pf_any_t k = pf_any_int(1), v = pf_any_object(obj);
  pf_object_t* open;
  ck_assert_int_eq(pf_map_create(&open), 0);
  ck_assert_int_eq(pf_map_set(open, &k, &v), 0);
  pf_object_release(obj);
  pf_object_weak_retain(open);
  pf_object_release(open);
  ck_assert_int_eq(g_destroyed, 1); /* the entries went with the last strong reference */
  ck_assert_int_eq(pf_object_weak_lock(open), 0);
  pf_object_weak_release(open);
  pf_object_release(map);
}
END_TEST

/* A dense dict whose every key was erased: iterates over nothing, counts 0, takes keys again. */
START_TEST(test_dict_emptied_dense_iterates_nothing) {
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  for (int i = 0; i < 20; ++i) {
    pf_any_t k = pf_any_int(i), v = pf_any_int(i);
    ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  }
  for (int i = 19; i >= 0; --i) {
    pf_any_t k = pf_any_int(i);
    ck_assert_int_eq(pf_dict_erase(d, &k), 1);
  }
  pf_map_iter_t it;
  const pf_any_t *key, *value;
  ck_assert_int_eq(pf_map_iter_init(d, &it), 0);
  ck_assert_int_eq(pf_map_iter_next(&it, &key, &value), 0);
  ck_assert_ptr_null(key);
  size_t count = 9;
  ck_assert_int_eq(pf_dict_count(d, &count), 0);
  ck_assert_uint_eq(count, 0);
  pf_object_t* copy;
  ck_assert_int_eq(pf_map_copy(d, &copy), 0);
  ck_assert_int_eq(pf_map_count(copy, &count), 0);
  ck_assert_uint_eq(count, 0);
  pf_object_release(copy);
  pf_any_t k = pf_any_int(7), v = pf_any_int(70);
  ck_assert_int_eq(pf_dict_set(d, &k, &v), 0);
  const pf_any_t* got;
  ck_assert_int_eq(pf_dict_get(d, &k, &got), 0);
  ck_assert_int_eq(got->v_int64, 70);
  pf_object_release(d);
}
END_TEST

/* A write to a small map finds the key already there in each form it may take: a string object
 * of the same text, a C string, a small string with bytes past its text, an int with a nonzero
 * padding word (another producer's value); bytes of the same text and a last byte changed are
 * other keys. */
START_TEST(test_small_map_set_finds_key_in_every_form) {
  /* run 0: the C string stored first (a small string); run 1: the string object; runs 2-3 the
   * same for a dict, which goes dense at its fifth key */
  for (int run = 0; run < 4; ++run) {
    int dict = run >= 2;
    pf_object_t* m;
    ck_assert_int_eq(dict ? pf_dict_create(&m) : pf_map_create(&m), 0);
    int (*set)(pf_object_t*, const pf_any_t*, const pf_any_t*) = dict ? pf_dict_set : pf_map_set;
    pf_object_t* so;
    ck_assert_int_eq(pf_string_object_create("ab", 2, &so), 0);
    pf_any_t k_obj = pf_any_object(so), k_c = pf_any_cstr("ab"), k_small, k_empty;
    ck_assert_int_eq(pf_string_create("ab", 2, &k_small), 0);
    k_small.v_bytes[6] = 'q'; /* past the text */
    ck_assert_int_eq(pf_string_create("", 0, &k_empty), 0);
    k_empty.v_bytes[0] = 'x';
    pf_any_t k_int = pf_any_int(5), k_int_pad = pf_any_int(5), k_bytes, k_other = pf_any_cstr("ax");
    k_int_pad.zero_padding = 0xdeadbeef;
    ck_assert_int_eq(pf_bytes_create("ab", 2, &k_bytes), 0);
    const pf_any_t* first = run % 2 ? &k_obj : &k_c;
    const pf_any_t* second = run % 2 ? &k_c : &k_obj;
    struct {
      const pf_any_t* key;
      int64_t value;
      size_t count;
    } steps[] = {{first, 1, 1},      {second, 2, 1},   {&k_small, 3, 1}, {&k_int, 4, 2},
                 {&k_int_pad, 5, 2}, {&k_bytes, 6, 3}, {&k_other, 7, 4}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; ++i) {
      pf_any_t v = pf_any_int(steps[i].value);
      ck_assert_int_eq(set(m, steps[i].key, &v), 0);
      size_t n;
      ck_assert_int_eq(dict ? pf_dict_count(m, &n) : pf_map_count(m, &n), 0);
      ck_assert_uint_eq(n, steps[i].count);
    }
    const pf_any_t* got;
    static const int64_t want[] = {3, 3, 3, 5, 5, 6, 7};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; ++i) {
      got = NULL;
      ck_assert_int_eq(
          dict ? pf_dict_get(m, steps[i].key, &got) : pf_map_get(m, steps[i].key, &got), 0);
      ck_assert_ptr_nonnull(got);
      ck_assert_int_eq(got->v_int64, want[i]);
    }
    pf_any_t v = pf_any_int(8), k_empty_c = pf_any_cstr("");
    if (dict) { /* the empty string in both forms, the dense form (5 keys) from here */
      ck_assert_int_eq(set(m, &k_empty, &v), 0);
      v = pf_any_int(9);
      ck_assert_int_eq(set(m, &k_empty_c, &v), 0);
      ck_assert_int_eq(pf_dict_get(m, &k_empty, &got), 0);
      ck_assert_ptr_nonnull(got);
      ck_assert_int_eq(got->v_int64, 9);
      size_t n;
      ck_assert_int_eq(pf_dict_count(m, &n), 0);
      ck_assert_uint_eq(n, 5);
    }
    pf_object_release(so);
    pf_object_release(m);
  }
}
END_TEST

/* Keys compared in the small form, where no hash sorts them first: string objects of the same
 * length that differ, and an empty bytes view at NULL (an empty bytes key). */
START_TEST(test_small_map_keys_of_equal_length) {
  pf_object_t* d;
  ck_assert_int_eq(pf_dict_create(&d), 0);
  pf_any_t k1, k2, v = pf_any_int(1);
  ck_assert_int_eq(pf_string_create("key object number 1", 19, &k1), 0);
  ck_assert_int_eq(pf_string_create("key object number 2", 19, &k2), 0);
  ck_assert_int_eq(pf_dict_set(d, &k1, &v), 0);
  const pf_any_t* got = &v;
  ck_assert_int_eq(pf_dict_get(d, &k2, &got), 0);
  ck_assert_ptr_null(got);
  pf_any_t v2 = pf_any_int(2);
  ck_assert_int_eq(pf_dict_set(d, &k2, &v2), 0);
  ck_assert_int_eq(pf_dict_get(d, &k2, &got), 0);
  ck_assert_int_eq(got->v_int64, 2);
  ck_assert_int_eq(pf_dict_get(d, &k1, &got), 0);
  ck_assert_int_eq(got->v_int64, 1);
  pf_byte_array_t none_at_all = {NULL, 0};
  pf_any_t eb = pf_any_byte_array(&none_at_all), v3 = pf_any_int(3);
  ck_assert_int_eq(pf_dict_set(d, &eb, &v3), 0);
  pf_any_t empty_bytes;
  ck_assert_int_eq(pf_bytes_create(NULL, 0, &empty_bytes), 0);
  ck_assert_int_eq(pf_dict_get(d, &empty_bytes, &got), 0);
  ck_assert_ptr_nonnull(got);
  ck_assert_int_eq(got->v_int64, 3);
  size_t count;
  ck_assert_int_eq(pf_dict_count(d, &count), 0);
  ck_assert_uint_eq(count, 3);
  pf_any_release(&k1);
  pf_any_release(&k2);
  pf_object_release(d);
  /* string objects of 0 to 5 bytes (pf_string_create makes small strings of them; another
   * runtime may not), each told from the others of its length by a first, middle or last byte */
  static const char* const texts[] = {"", "ab", "xb", "ax", "abc", "axc", "abcde", "abcdf"};
  enum { T = sizeof texts / sizeof texts[0] };
  for (size_t i = 0; i < T; ++i) {
    ck_assert_int_eq(pf_dict_create(&d), 0);
    pf_object_t* o;
    ck_assert_int_eq(pf_string_object_create(texts[i], strlen(texts[i]), &o), 0);
    pf_any_t key = pf_any_object(o), val = pf_any_int((int64_t)i);
    ck_assert_int_eq(pf_dict_set(d, &key, &val), 0);
    for (size_t j = 0; j < T; ++j) {
      pf_object_t* q;
      ck_assert_int_eq(pf_string_object_create(texts[j], strlen(texts[j]), &q), 0);
      pf_any_t qk = pf_any_object(q);
      ck_assert_int_eq(pf_dict_get(d, &qk, &got), 0);
      if (i == j) {
        ck_assert_ptr_nonnull(got);
        ck_assert_int_eq(got->v_int64, (int64_t)i);
      } else {
        ck_assert_ptr_null(got);
      }
      pf_object_release(q);
    }
    pf_object_release(o);
    pf_object_release(d);
  }
}
END_TEST

/* Adds this file's tests to the container suite's TCase, in their order. */
void pf_test_map_add_tests(TCase* tc) {
  tcase_add_test(tc, test_map_set_get_iterate);
  tcase_add_test(tc, test_map_bytes_keys);
  tcase_add_test(tc, test_map_small_text_keys);
  tcase_add_test(tc, test_map_growth_keeps_order);
  tcase_add_test(tc, test_map_key_errors);
  tcase_add_test(tc, test_dict_set_get_erase_across_forms);
  tcase_add_test(tc, test_dict_errors);
  tcase_add_test(tc, test_map_key_bytes_at_null);
  tcase_add_test(tc, test_map_copy_is_open_and_independent);
  tcase_add_test(tc, test_map_failed_set_changes_nothing);
  tcase_add_test(tc, test_map_releases_contents_once);
  tcase_add_test(tc, test_map_freeze);
  tcase_add_test(tc, test_map_refusals_name_null);
  tcase_add_test(tc, test_map_empty_copy_and_weak_reference);
  tcase_add_test(tc, test_dict_emptied_dense_iterates_nothing);
  tcase_add_test(tc, test_small_map_keys_of_equal_length);
  tcase_add_test(tc, test_small_map_set_finds_key_in_every_form);
}
