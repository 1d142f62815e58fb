/* A process that has used up its pthread keys (PTHREAD_KEYS_MAX) before packfn's first raise and
 * first global lookup: packfn makes neither thread-exit key, and errors and lookups still work
 * (a thread's lookups take the writers' mutex instead of a reader record). Its own process: the
 * keys are made once. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "pf_test.h"

#ifdef PTHREAD_KEYS_MAX
#define KEYS_MAX PTHREAD_KEYS_MAX
#else
#define KEYS_MAX 1024 /* glibc's */
#endif

static int return_seven(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self, (void)args, (void)n;
  *result = pf_any_int(7);
  return 0;
}

/* In another thread: a raise taken back and a lookup. 1 when both worked. */
static void* raise_and_look_up(void* unused) {
  (void)unused;
  PF_ERROR_SET(PF_ERR_KEY, "from a thread %d", 2);
  pf_object_t* err = pf_error_take();
  int ok = err && strcmp(pf_error_message(err), "from a thread 2") == 0;
  pf_object_release(err);
  pf_any_t res = pf_any_none();
  ok = ok && pf_global_call("test.keys.seven", NULL, 0, &res) == 0 && res.v_int64 == 7;
  return (void*)(intptr_t)ok;
}

START_TEST(test_no_keys_left) {
  static pthread_key_t keys[KEYS_MAX];
  int made = 0;
  while (made < KEYS_MAX && pthread_key_create(&keys[made], NULL) == 0)
    ++made;
  pthread_key_t extra;
  ck_assert_int_eq(pthread_key_create(&extra, NULL), EAGAIN); /* none left */
  PF_ERROR_SET(PF_ERR_VALUE, "raised with no key %d", 1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_message(err), "raised with no key 1");
  pf_object_release(err);
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, return_seven, NULL, &fn), 0);
  ck_assert_int_eq(pf_global_set("test.keys.seven", fn, 0), 0);
  pf_any_t res = pf_any_none();
  ck_assert_int_eq(pf_global_call("test.keys.seven", NULL, 0, &res), 0);
  ck_assert_int_eq(res.v_int64, 7);
  pthread_t t;
  void* ok = NULL;
  ck_assert_int_eq(pthread_create(&t, NULL, raise_and_look_up, NULL), 0);
  ck_assert_int_eq(pthread_join(t, &ok), 0);
  ck_assert_msg(ok != NULL, "a raise or a lookup failed in a thread");
  ck_assert_int_eq(pf_global_set("test.keys.seven", fn, 1), 0); /* a grace period */
  ck_assert_int_eq(pf_global_remove("test.keys.seven"), 0);
  ck_assert_uint_eq(pf_object_strong_count(fn), 1);
  pf_object_release(fn);
  for (int i = 0; i < made; ++i)
    ck_assert_int_eq(pthread_key_delete(keys[i]), 0);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("keys_exhausted");
  TCase* tc = tcase_create("keys");
  tcase_add_test(tc, test_no_keys_left);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
