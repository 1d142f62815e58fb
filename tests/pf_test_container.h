/* Helpers shared by the container suite's files: test_container.c (shapes, arrays, nesting,
 * equality, lists; the suite's main), test_map.c (maps and dicts) and test_map_foreign.c (map
 * tables as TVM-FFI may leave them). Each of them includes this header once. */
#ifndef PF_TEST_CONTAINER_H_
#define PF_TEST_CONTAINER_H_

#include <stdint.h>

#include "pf_test.h"

/* ---- helpers: objects that count their destruction ---- */

/* One counter in each file that includes this header: a test sets it to 0, then counts the
 * objects it made with counted_new (whose deleter is its own file's). */
static int g_destroyed;

static inline void counted_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    g_destroyed++;
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

static inline pf_object_t* counted_new(void) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(sizeof(pf_object_t), PF_TYPE_OBJECT, counted_deleter, &obj), 0);
  return obj;
}

/* A map's entries in iteration order, copied (borrowed values) into items[0..cap). */
typedef struct {
  pf_any_t key;
  pf_any_t value;
} pf_map_item_t;

static inline size_t map_entries(const pf_object_t* map, pf_map_item_t* items, size_t cap) {
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

static inline pf_any_t str_object(const char* s) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_string_object_create(s, strlen(s), &obj), 0);
  pf_any_t v = pf_any_object(obj);
  return v; /* owned */
}

/* ---- the suite's one TCase, "core", made by test_container.c's make_suite ----
 * Each function below adds its file's tests to it, at the place named, so the suite runs its
 * tests in the same order whichever file holds them. */

/* test_map.c: after the array tests, before nesting and equality. */
void pf_test_map_add_tests(TCase* tc);
/* test_map_foreign.c: after the list tests, before lists and cycles. */
void pf_test_map_foreign_add_tests(TCase* tc);

#endif
