/* libFuzzer harness: differential test of maps and arrays (include/packfn/container.h)
 * against a reference model (an insertion-ordered list of key ids and values). Each input is
 * a program of operations on one map: set, get, find, contains, count and ordered items,
 * freeze, a snapshot array of the values (checked item by item, with out-of-range indexes),
 * storing the map in an array (which freezes it), equality with a map rebuilt in reverse order
 * and with one value changed, keys of refused types, an open copy (pf_map_copy) that then
 * replaces the map; and a dict beside it (set, get, erase keeping the order of the rest,
 * ordered items) against a model of its own. Keys are ints and strings, strings in
 * three forms (raw C string, small string, string object) that must be the same key. */
#include "fuzz_util.h"
#include "packfn/packfn.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define NUM_KEYS 48 /* 0-15 ints, 16-31 short strings, 32-47 long strings (objects) */

typedef struct model_s {
  int order[NUM_KEYS]; /* key ids in insertion order */
  int64_t value[NUM_KEYS];
  int present[NUM_KEYS];
  int count;
  int frozen; /* 1 frozen, 0 open; -1: the model of a dict */
} model_t;

static char key_text[NUM_KEYS][48];

/* The key of id k in form `form` (0 raw, 1 owned small/object string): *obj receives a
 * string object to release when one was made. */
static pf_any_t make_key(int k, int form, pf_object_t** obj) {
  *obj = NULL;
  if (k < 16)
    return pf_any_int(k * 1000003 - 7);
  if (form == 0)
    return pf_any_cstr(key_text[k]);
  pf_any_t v;
  FUZZ_CHECK(pf_string_from_cstr(key_text[k], &v) == 0);
  if (v.type_index >= PF_TYPE_STATIC_OBJECT_BEGIN)
    *obj = v.v_obj;
  return v;
}

static void expect_kind(const char* kind) {
  pf_object_t* err = pf_error_take();
  FUZZ_CHECK(err != NULL && strcmp(pf_error_kind(err), kind) == 0);
  pf_object_release(err);
}

static void check_items(pf_object_t* map, const model_t* m) {
  size_t count;
  if (m->frozen < 0) /* a dict's model */
    FUZZ_CHECK(pf_dict_count(map, &count) == 0 && count == (size_t)m->count);
  else
    FUZZ_CHECK(pf_map_count(map, &count) == 0 && count == (size_t)m->count);
  pf_map_iter_t it;
  const pf_any_t *k, *v;
  FUZZ_CHECK(pf_map_iter_init(map, &it) == 0);
  for (int i = 0; i < m->count; ++i) {
    pf_object_t* ko;
    pf_any_t key = make_key(m->order[i], 0, &ko);
    FUZZ_CHECK(pf_map_iter_next(&it, &k, &v) == 1);
    FUZZ_CHECK(pf_any_equal(k, &key) == 1);
    FUZZ_CHECK(v->type_index == PF_TYPE_INT && v->v_int64 == m->value[m->order[i]]);
  }
  FUZZ_CHECK(pf_map_iter_next(&it, &k, &v) == 0);
}

/* A map with the model's entries, inserted in reverse order; frozen or not. */
static pf_object_t* rebuild(const model_t* m, int change_last) {
  pf_object_t* map;
  FUZZ_CHECK(pf_map_create(&map) == 0);
  for (int i = m->count - 1; i >= 0; --i) {
    int k = m->order[i];
    pf_object_t* ko;
    pf_any_t key = make_key(k, i & 1, &ko);
    pf_any_t val = pf_any_int(m->value[k] ^ (change_last && i == m->count - 1));
    FUZZ_CHECK(pf_map_set(map, &key, &val) == 0);
    pf_object_release(ko);
  }
  return map;
}

/* A dict beside the map (model frozen -1): set, get, erase, its entries in order. */
static void dict_step(pf_object_t* dict, model_t* d, int sub, int k, const pf_any_t* key,
                      fuzz_input_t* in) {
  const pf_any_t* got;
  switch (sub) {
  case 0: { /* set */
    int64_t v = fuzz_i64(in);
    pf_any_t val = pf_any_int(v);
    FUZZ_CHECK(pf_dict_set(dict, key, &val) == 0);
    if (!d->present[k]) {
      d->present[k] = 1;
      d->order[d->count++] = k;
    }
    d->value[k] = v;
    break;
  }
  case 1: /* get */
    FUZZ_CHECK(pf_dict_get(dict, key, &got) == 0);
    FUZZ_CHECK((got != NULL) == d->present[k]);
    if (got)
      FUZZ_CHECK(got->type_index == PF_TYPE_INT && got->v_int64 == d->value[k]);
    break;
  case 2: { /* erase: the order of the rest is kept */
    FUZZ_CHECK(pf_dict_erase(dict, key) == d->present[k]);
    if (d->present[k]) {
      int i = 0;
      while (d->order[i] != k)
        ++i;
      memmove(&d->order[i], &d->order[i + 1], (size_t)(d->count - i - 1) * sizeof d->order[0]);
      --d->count;
      d->present[k] = 0;
    }
    break;
  }
  default:
    check_items(dict, d);
    break;
  }
}

static void step(pf_object_t** mapp, model_t* m, pf_object_t* dict, model_t* d, fuzz_input_t* in) {
  pf_object_t* map = *mapp;
  uint8_t op = fuzz_u8(in);
  int k = fuzz_u8(in) % NUM_KEYS;
  pf_object_t* ko;
  pf_any_t key = make_key(k, op >> 7, &ko);
  const pf_any_t* got;
  switch (op % 12) {
  case 0:
  case 1: { /* set */
    int64_t v = fuzz_i64(in);
    pf_any_t val = pf_any_int(v);
    int rc = pf_map_set(map, &key, &val);
    if (m->frozen) {
      FUZZ_CHECK(rc == -1);
      expect_kind(PF_ERR_TYPE);
      break;
    }
    FUZZ_CHECK(rc == 0);
    if (!m->present[k]) {
      m->present[k] = 1;
      m->order[m->count++] = k;
    }
    m->value[k] = v;
    break;
  }
  case 2: /* get */
    if (m->present[k]) {
      FUZZ_CHECK(pf_map_get(map, &key, &got) == 0);
      FUZZ_CHECK(got->type_index == PF_TYPE_INT && got->v_int64 == m->value[k]);
    } else {
      /* the lookup rule: an absent key is no error */
      FUZZ_CHECK(pf_map_get(map, &key, &got) == 0 && got == NULL && pf_error_peek() == NULL);
    }
    break;
  case 3: /* find and contains */
    FUZZ_CHECK(pf_map_find(map, &key, &got) == 0);
    FUZZ_CHECK((got != NULL) == m->present[k]);
    FUZZ_CHECK(pf_map_contains(map, &key) == m->present[k]);
    break;
  case 4:
    check_items(map, m);
    break;
  case 5:
    FUZZ_CHECK(pf_map_freeze(map) == 0 && pf_map_is_frozen(map) == 1);
    m->frozen = 1;
    break;
  case 6: { /* the values as an array; optionally the map itself stored in one */
    pf_any_t vals[NUM_KEYS + 1];
    for (int i = 0; i < m->count; ++i)
      vals[i] = pf_any_int(m->value[m->order[i]]);
    int with_map = (op >> 6) & 1;
    if (with_map)
      vals[m->count] = pf_any_object(map);
    size_t n = (size_t)m->count + (size_t)with_map;
    pf_object_t* arr;
    FUZZ_CHECK(pf_array_create(vals, n, &arr) == 0);
    size_t count;
    FUZZ_CHECK(pf_array_count(arr, &count) == 0 && count == n);
    for (size_t i = 0; i < n; ++i) {
      FUZZ_CHECK(pf_array_get(arr, (int64_t)i, &got) == 0);
      FUZZ_CHECK(pf_any_equal(got, &vals[i]) == 1);
    }
    int64_t bad = fuzz_i64(in);
    if (bad < -(int64_t)n || bad >= (int64_t)n) {
      FUZZ_CHECK(pf_array_get(arr, bad, &got) == -1 && got == NULL);
      expect_kind(PF_ERR_INDEX);
    }
    if (with_map) {
      m->frozen = 1;
      FUZZ_CHECK(pf_map_is_frozen(map) == 1);
    }
    pf_object_release(arr);
    break;
  }
  case 7: { /* equality with rebuilt maps */
    pf_object_t* same = rebuild(m, 0);
    pf_any_t a = pf_any_object(map);
    pf_any_t b = pf_any_object(same);
    FUZZ_CHECK(pf_container_equal(&a, &b) == 1);
    pf_object_release(same);
    if (m->count > 0) {
      pf_object_t* other = rebuild(m, 1);
      b = pf_any_object(other);
      FUZZ_CHECK(pf_container_equal(&a, &b) == 0);
      pf_object_release(other);
    }
    break;
  }
  case 9: { /* an open copy (copy on write): same entries in order, equal; it replaces map */
    pf_object_t* copy;
    FUZZ_CHECK(pf_map_copy(map, &copy) == 0 && pf_map_is_frozen(copy) == 0);
    pf_any_t a = pf_any_object(map);
    pf_any_t b = pf_any_object(copy);
    FUZZ_CHECK(pf_container_equal(&a, &b) == 1);
    m->frozen = 0;
    check_items(copy, m);
    pf_object_release(map);
    *mapp = copy;
    break;
  }
  case 10:
  case 11:
    dict_step(dict, d, (op >> 4) & 3, k, &key, in);
    break;
  default: { /* refused key types leave the map unchanged */
    pf_any_t bad_key = (op & 2) ? pf_any_float(1.5) : pf_any_bool(1);
    pf_any_t val = pf_any_int(1);
    FUZZ_CHECK(pf_map_set(map, &bad_key, &val) == -1);
    expect_kind(PF_ERR_TYPE);
    FUZZ_CHECK(pf_map_find(map, &bad_key, &got) == -1);
    expect_kind(PF_ERR_TYPE);
    break;
  }
  }
  pf_object_release(ko);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (key_text[16][0] == '\0')
    for (int k = 16; k < NUM_KEYS; ++k)
      snprintf(key_text[k], sizeof key_text[k], k < 32 ? "k%d" : "a long key, an object %d", k);
  fuzz_input_t in = {data, size};
  model_t m, d;
  memset(&m, 0, sizeof m);
  memset(&d, 0, sizeof d);
  d.frozen = -1;
  pf_object_t *map, *dict;
  FUZZ_CHECK(pf_map_create(&map) == 0 && pf_dict_create(&dict) == 0);
  for (int ops = 0; in.size > 0 && ops < 256; ++ops)
    step(&map, &m, dict, &d, &in);
  check_items(map, &m);
  check_items(dict, &d);
  pf_object_release(map);
  pf_object_release(dict);
  FUZZ_CHECK(pf_error_peek() == NULL);
  return 0;
}
