/* Shared helpers for packfn's Check suites: error assertions and a main() per suite file.
 * Each test file defines `Suite* make_suite(void)` and includes this header once. */
#ifndef PF_TEST_H_
#define PF_TEST_H_

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"
/* packfn.h leaves out the CUDA helpers; the CUDA suites use them (declarations only). */
#include "packfn/cuda.h"

/* Asserts that an error of `kind` is raised whose message contains `needle`, then clears it. */
/* A callee that fails the way the ABI allows: an int (a value that needs no releasing) left in
 * *result, ValueError raised. */
static inline int pf_test_fail_leaving_int(void* self, const pf_any_t* args, int32_t num_args,
                                           pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(7);
  PF_ERROR_SET(PF_ERR_VALUE, "fail_leaving_int: always fails");
  return -1;
}

#define PF_ASSERT_RAISED(kind, needle)                                                             \
  do {                                                                                             \
    pf_object_t* err_ = pf_error_take();                                                           \
    ck_assert_msg(err_ != NULL, "expected %s to be raised", (kind));                               \
    ck_assert_str_eq(pf_error_kind(err_), (kind));                                                 \
    ck_assert_msg(strstr(pf_error_message(err_), (needle)) != NULL, "message '%s' lacks '%s'",     \
                  pf_error_message(err_), (needle));                                               \
    pf_object_release(err_);                                                                       \
  } while (0)

/* Asserts nothing is raised. */
#define PF_ASSERT_NO_ERROR()                                                                       \
  do {                                                                                             \
    pf_object_t* err_ = pf_error_peek();                                                           \
    ck_assert_msg(err_ == NULL, "unexpected error: %s: %s", pf_error_kind(err_),                   \
                  pf_error_message(err_));                                                         \
  } while (0)

Suite* make_suite(void);

#define PF_TEST_MAIN()                                                                             \
  int main(void) {                                                                                 \
    SRunner* sr = srunner_create(make_suite());                                                    \
    srunner_run_all(sr, CK_NORMAL);                                                                \
    int failed = srunner_ntests_failed(sr);                                                        \
    srunner_free(sr);                                                                              \
    pf_error_clear();                                                                              \
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                                              \
  }

#endif
