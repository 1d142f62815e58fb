/* Tests of the global function table: set/get/remove with their failure paths, override,
 * sorted listing, static registration, and concurrent readers and writers. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "pf_test.h"

static int return_one(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)n;
  *result = pf_any_int(1);
  return 0;
}
static int return_two(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)n;
  *result = pf_any_int(2);
  return 0;
}

static int static_square(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_int(args[0].i * args[0].i);
  return 0;
}
static const pf_param_t square_params[] = {{"x", PF_PARAM_INT}};
static const pf_signature_t square_sig = {"test.static.square", 1, square_params, PF_PARAM_INT,
                                          NULL};
PF_REGISTER_GLOBAL_TYPED(&square_sig, static_square);
PF_REGISTER_GLOBAL("test.static.one", return_one);

PF_TYPED_DEFINE(cube, INT, (INT, x)) {
  *result = pf_any_int(x * x * x);
  return 0;
}
PF_TYPED_REGISTER(cube, "test.static.cube");

static pf_object_t* make_fn(pf_safe_call_t call) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, call, NULL, &fn), 0);
  return fn;
}

START_TEST(test_set_get_remove) {
  pf_object_t* fn = make_fn(return_one);
  size_t before = pf_global_count();
  ck_assert_int_eq(pf_global_set("test.one", fn, 0), 0);
  ck_assert_uint_eq(pf_object_strong_count(fn), 2);
  ck_assert_uint_eq(pf_global_count(), before + 1);
  pf_object_t* got;
  ck_assert_int_eq(pf_global_get("test.one", &got), 0);
  ck_assert_ptr_eq(got, fn);
  ck_assert_uint_eq(pf_object_strong_count(fn), 3);
  pf_object_release(got);
  ck_assert_int_eq(pf_global_get_bytes("test.one.extra", 8, &got), 0);
  ck_assert_ptr_eq(got, fn);
  pf_object_release(got);
  ck_assert_int_eq(pf_global_get("test.absent", &got), 0);
  ck_assert_ptr_null(got);
  pf_any_t r;
  ck_assert_int_eq(pf_global_call("test.one", NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 1);
  ck_assert_int_eq(pf_global_remove("test.one"), 0);
  ck_assert_uint_eq(pf_object_strong_count(fn), 1);
  ck_assert_int_eq(pf_global_get("test.one", &got), 0);
  ck_assert_ptr_null(got);
  pf_object_release(fn);
}
END_TEST

START_TEST(test_override) {
  pf_object_t* one = make_fn(return_one);
  pf_object_t* two = make_fn(return_two);
  ck_assert_int_eq(pf_global_set("test.ovr", one, 0), 0);
  ck_assert_int_eq(pf_global_set("test.ovr", two, 0), -1);
  PF_ASSERT_RAISED("ValueError", "'test.ovr' is already registered");
  ck_assert_uint_eq(pf_object_strong_count(two), 1);
  ck_assert_int_eq(pf_global_set("test.ovr", two, 1), 0);
  ck_assert_uint_eq(pf_object_strong_count(one), 1);
  pf_any_t r;
  ck_assert_int_eq(pf_global_call("test.ovr", NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 2);
  ck_assert_int_eq(pf_global_remove("test.ovr"), 0);
  pf_object_release(one);
  pf_object_release(two);
}
END_TEST

START_TEST(test_bad_input) {
  pf_object_t* fn = make_fn(return_one);
  ck_assert_int_eq(pf_global_set(NULL, fn, 0), -1);
  PF_ASSERT_RAISED("ValueError", "argument name");
  ck_assert_int_eq(pf_global_set("", fn, 0), -1);
  PF_ASSERT_RAISED("ValueError", "non-empty");
  ck_assert_int_eq(pf_global_set("test.null", NULL, 0), -1);
  PF_ASSERT_RAISED("TypeError", "expected Function, got NULL");
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("a string, not fn", 16, &s), 0);
  ck_assert_int_eq(pf_global_set("test.str", s, 0), -1);
  PF_ASSERT_RAISED("TypeError", "expected Function, got str");
  pf_object_release(s);
  pf_object_t* got;
  ck_assert_int_eq(pf_global_get(NULL, &got), -1);
  PF_ASSERT_RAISED("ValueError", "name");
  ck_assert_int_eq(pf_global_get("x", NULL), -1);
  PF_ASSERT_RAISED("ValueError", "out");
  ck_assert_int_eq(pf_global_remove("test.never"), -1);
  PF_ASSERT_RAISED("KeyError", "'test.never'");
  ck_assert_int_eq(pf_global_remove(""), -1);
  PF_ASSERT_RAISED("ValueError", "name");
  pf_any_t res = pf_any_int(5);
  ck_assert_int_eq(pf_global_call(NULL, NULL, 0, &res), -1);
  PF_ASSERT_RAISED("ValueError", "name");
  ck_assert_int_eq(res.type_index, PF_TYPE_NONE);
  pf_any_t r;
  ck_assert_int_eq(pf_global_call("test.never", NULL, 0, &r), -1);
  PF_ASSERT_RAISED("KeyError", "'test.never'");
  ck_assert_int_eq(pf_global_list(NULL, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "out");
  pf_object_release(fn);
}
END_TEST

/* A missing function called by name is a KeyError, with the nearest registered name
 * suggested; pf_global_suggest is that choice. */
START_TEST(test_missing_and_suggest) {
  pf_object_t* fn = make_fn(return_one);
  ck_assert_int_eq(pf_global_set("test.suggest.alpha", fn, 0), 0);
  ck_assert_int_eq(pf_global_set("test.suggest.alpine", fn, 0), 0);
  pf_any_t res = pf_any_int(5);
  ck_assert_int_eq(pf_global_call("test.suggest.alpa", NULL, 0, &res), -1);
  PF_ASSERT_RAISED("KeyError", "pf_global_call: no global function is named "
                               "'test.suggest.alpa' (did you mean 'test.suggest.alpha'?)");
  ck_assert_int_eq(res.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_global_call("zzz.nothing.near.at.all", NULL, 0, &res), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), "KeyError");
  ck_assert_str_eq(pf_error_message(err),
                   "pf_global_call: no global function is named 'zzz.nothing.near.at.all'");
  pf_object_release(err);

  char buf[64];
  ck_assert_int_eq(pf_global_suggest("test.suggest.alpin", buf, sizeof buf), 1);
  ck_assert_str_eq(buf, "test.suggest.alpine");
  ck_assert_int_eq(pf_global_suggest("test.suggest.alph", buf, sizeof buf), 1);
  ck_assert_str_eq(buf, "test.suggest.alpha");
  /* two edits from both: the tie goes to the first in strcmp order */
  ck_assert_int_eq(pf_global_suggest("test.suggest.alpi", buf, sizeof buf), 1);
  ck_assert_str_eq(buf, "test.suggest.alpha");
  /* the name itself is never its own suggestion */
  ck_assert_int_eq(pf_global_suggest("test.suggest.alpha", buf, sizeof buf), 1);
  ck_assert_str_eq(buf, "test.suggest.alpine");
  ck_assert_int_eq(pf_global_suggest("qqqqqqqqqqqqqqqqqqqqqq", buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "");
  /* a name without dots that is the last dotted part of a registered name */
  ck_assert_int_eq(pf_global_suggest("alpine", buf, sizeof buf), 1);
  ck_assert_str_eq(buf, "test.suggest.alpine");
  ck_assert_int_eq(pf_global_suggest("suggest.alpine.x", buf, sizeof buf), 0);
  /* truncated, NUL-terminated; size 0 writes nothing */
  ck_assert_int_eq(pf_global_suggest("test.suggest.alpx", buf, 5), 1);
  ck_assert_str_eq(buf, "test");
  ck_assert_int_eq(pf_global_suggest("test.suggest.alpx", NULL, 0), 1);
  ck_assert_int_eq(pf_global_suggest(NULL, buf, sizeof buf), -1);
  PF_ASSERT_RAISED("ValueError", "pf_global_suggest: argument name");
  ck_assert_int_eq(pf_global_suggest("x", NULL, 3), -1);
  PF_ASSERT_RAISED("ValueError", "pf_global_suggest: argument buf");
  ck_assert_int_eq(pf_global_remove("test.suggest.alpha"), 0);
  ck_assert_int_eq(pf_global_remove("test.suggest.alpine"), 0);
  pf_object_release(fn);
}
END_TEST

START_TEST(test_list_sorted) {
  pf_object_t* fn = make_fn(return_one);
  const char* names[] = {"test.list.c", "test.list.a", "test.list.b"};
  for (int i = 0; i < 3; ++i)
    ck_assert_int_eq(pf_global_set(names[i], fn, 0), 0);
  char** list;
  size_t n;
  ck_assert_int_eq(pf_global_list(&list, &n), 0);
  ck_assert_uint_eq(n, pf_global_count());
  ck_assert_ptr_null(list[n]);
  for (size_t i = 1; i < n; ++i)
    ck_assert_int_lt(strcmp(list[i - 1], list[i]), 0);
  int seen = 0;
  for (size_t i = 0; i < n; ++i)
    seen += strncmp(list[i], "test.list.", 10) == 0;
  ck_assert_int_eq(seen, 3);
  pf_global_list_free(list);
  for (int i = 0; i < 3; ++i)
    ck_assert_int_eq(pf_global_remove(names[i]), 0);
  pf_object_release(fn);
}
END_TEST

START_TEST(test_static_registration) {
  ck_assert_int_eq(pf_global_static_failures(), 0);
  pf_any_t a = pf_any_int(7), r;
  ck_assert_int_eq(pf_global_call("test.static.square", &a, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 49);
  ck_assert_int_eq(pf_global_call("test.static.one", NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 1);
  pf_object_t* fn;
  ck_assert_int_eq(pf_global_get("test.static.square", &fn), 0);
  ck_assert_str_eq(pf_function_signature(fn), "test.static.square(x: int) -> int");
  pf_object_release(fn);
  ck_assert_int_eq(pf_global_call("test.static.cube", &a, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 343);
  ck_assert_int_eq(pf_global_get("test.static.cube", &fn), 0);
  ck_assert_str_eq(pf_function_signature(fn), "cube(x: int) -> int");
  pf_object_release(fn);
}
END_TEST

START_TEST(test_growth_and_removal_keep_lookups) {
  pf_object_t* fn = make_fn(return_one);
  char name[64];
  for (int i = 0; i < 2000; ++i) {
    snprintf(name, sizeof name, "test.grow.%d", i);
    ck_assert_int_eq(pf_global_set(name, fn, 0), 0);
  }
  for (int i = 0; i < 2000; i += 2) {
    snprintf(name, sizeof name, "test.grow.%d", i);
    ck_assert_int_eq(pf_global_remove(name), 0);
  }
  for (int i = 0; i < 2000; ++i) {
    pf_object_t* got;
    snprintf(name, sizeof name, "test.grow.%d", i);
    ck_assert_int_eq(pf_global_get(name, &got), 0);
    ck_assert_msg((got != NULL) == (i % 2 == 1), "lookup of %s", name);
    pf_object_release(got);
  }
  for (int i = 1; i < 2000; i += 2) {
    snprintf(name, sizeof name, "test.grow.%d", i);
    ck_assert_int_eq(pf_global_remove(name), 0);
  }
  ck_assert_uint_eq(pf_object_strong_count(fn), 1);
  pf_object_release(fn);
}
END_TEST

/* Names of every length from 1 to 48 bytes (the short ones are matched by hash and tail word,
 * those up to 32 without a call, longer ones through the general path): each is found, and
 * each one-byte change, each prefix and each extension of it is not. */
START_TEST(test_name_lengths_and_near_misses) {
  pf_object_t* fn = make_fn(return_one);
  char name[64], probe[64];
  for (size_t len = 1; len <= 48; ++len) {
    for (size_t i = 0; i < len; ++i)
      name[i] = (char)('a' + (i * 7 + len) % 26);
    name[len] = '\0';
    ck_assert_int_eq(pf_global_set(name, fn, 0), 0);
  }
  for (size_t len = 1; len <= 48; ++len) {
    for (size_t i = 0; i < len; ++i)
      name[i] = (char)('a' + (i * 7 + len) % 26);
    name[len] = '\0';
    pf_object_t* got;
    ck_assert_int_eq(pf_global_get(name, &got), 0);
    ck_assert_msg(got == fn, "length %zu: not found", len);
    pf_object_release(got);
    ck_assert_int_eq(pf_global_get_bytes(name, len, &got), 0);
    ck_assert_ptr_eq(got, fn);
    pf_object_release(got);
    for (size_t i = 0; i < len; ++i) {
      memcpy(probe, name, len + 1);
      probe[i] = (char)(probe[i] == 'Z' ? 'Y' : 'Z');
      ck_assert_int_eq(pf_global_get(probe, &got), 0);
      ck_assert_msg(got == NULL, "length %zu: a change at byte %zu matched", len, i);
      probe[i] = '\0'; /* an embedded NUL where the name has a letter */
      ck_assert_int_eq(pf_global_get_bytes(probe, len, &got), 0);
      ck_assert_msg(got == NULL, "length %zu: a NUL at byte %zu matched", len, i);
    }
    memcpy(probe, name, len);
    probe[len] = 'x';
    ck_assert_int_eq(pf_global_get_bytes(probe, len + 1, &got), 0);
    ck_assert_msg(got == NULL, "length %zu: an extension matched", len);
  }
  for (size_t len = 1; len <= 48; ++len) {
    for (size_t i = 0; i < len; ++i)
      name[i] = (char)('a' + (i * 7 + len) % 26);
    name[len] = '\0';
    ck_assert_int_eq(pf_global_remove(name), 0);
  }
  ck_assert_uint_eq(pf_object_strong_count(fn), 1);
  pf_object_release(fn);
}
END_TEST

/* pf_global_get is also a real exported function of libpackfn (what dlsym and other
 * languages' FFIs find), with the same behaviour as the inline form calls compile to. */
START_TEST(test_global_get_symbol) {
  int (*get)(const char*, pf_object_t**);
  *(void**)&get = dlsym(RTLD_DEFAULT, "pf_global_get");
  ck_assert_ptr_nonnull(*(void**)&get);
  pf_object_t* fn = make_fn(return_one);
  ck_assert_int_eq(pf_global_set("test.symbol", fn, 0), 0);
  pf_object_t* got = NULL;
  ck_assert_int_eq(get("test.symbol", &got), 0);
  ck_assert_ptr_eq(got, fn);
  pf_object_release(got);
  ck_assert_int_eq(get("test.symbol.absent", &got), 0);
  ck_assert_ptr_null(got);
  ck_assert_int_eq(get(NULL, &got), -1);
  ck_assert_ptr_null(got);
  PF_ASSERT_RAISED("ValueError", "pf_global_get: argument name");
  ck_assert_int_eq(get("test.symbol", NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_global_get: argument out");
  ck_assert_int_eq(pf_global_remove("test.symbol"), 0);
  pf_object_release(fn);
}
END_TEST

typedef struct {
  int id;
  int failures;
} worker_t;

static void* churn(void* arg) {
  worker_t* w = arg;
  pf_object_t* fn;
  if (pf_function_create(NULL, return_one, NULL, &fn) != 0) {
    w->failures++;
    return NULL;
  }
  char name[64];
  for (int i = 0; i < 3000; ++i) {
    snprintf(name, sizeof name, "test.race.%d.%d", w->id, i % 50);
    pf_object_t* got;
    if (i % 3 == 0) {
      if (pf_global_set(name, fn, 1) != 0)
        w->failures++;
    } else if (i % 3 == 1) {
      if (pf_global_get(name, &got) != 0)
        w->failures++;
      pf_object_release(got);
      if (pf_global_get("test.race.shared", &got) != 0 || got == NULL)
        w->failures++;
      pf_object_release(got);
    } else {
      if (pf_global_remove(name) != 0)
        pf_error_clear(); /* may be absent: fine */
    }
  }
  for (int i = 0; i < 50; ++i) {
    snprintf(name, sizeof name, "test.race.%d.%d", w->id, i);
    if (pf_global_remove(name) != 0)
      pf_error_clear();
  }
  pf_object_release(fn);
  return NULL;
}

START_TEST(test_concurrent_set_get_remove) {
  pf_object_t* shared = make_fn(return_two);
  ck_assert_int_eq(pf_global_set("test.race.shared", shared, 0), 0);
  worker_t w[3] = {{0, 0}, {1, 0}, {2, 0}};
  pthread_t t[3];
  for (int i = 0; i < 3; ++i)
    pthread_create(&t[i], NULL, churn, &w[i]);
  for (int i = 0; i < 3; ++i)
    pthread_join(t[i], NULL);
  for (int i = 0; i < 3; ++i)
    ck_assert_int_eq(w[i].failures, 0);
  ck_assert_int_eq(pf_global_remove("test.race.shared"), 0);
  ck_assert_uint_eq(pf_object_strong_count(shared), 1);
  pf_object_release(shared);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("global");
  TCase* tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_set_get_remove);
  tcase_add_test(tc, test_override);
  tcase_add_test(tc, test_bad_input);
  tcase_add_test(tc, test_list_sorted);
  tcase_add_test(tc, test_static_registration);
  tcase_add_test(tc, test_growth_and_removal_keep_lookups);
  tcase_add_test(tc, test_name_lengths_and_near_misses);
  tcase_add_test(tc, test_global_get_symbol);
  tcase_add_test(tc, test_missing_and_suggest);
  tcase_add_test(tc, test_concurrent_set_get_remove);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
