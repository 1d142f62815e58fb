/* pf_test_coverage.h: what the files of test_coverage's Check suite share: add_one, the packed
 * function several tests register, and the tests test_coverage_global.c adds to the suite built
 * in test_coverage.c. Each of them includes this header once. */
#ifndef PF_TEST_COVERAGE_H_
#define PF_TEST_COVERAGE_H_

#include <stdint.h>

#include "pf_test.h"

/* A packed function returning its one int argument plus one (-1 for any other count). */
static inline int add_one(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  *result = pf_any_int(num_args == 1 ? args[0].v_int64 + 1 : -1);
  return 0;
}

/* ---- the suite's one TCase, "core", made by test_coverage.c's make_suite ---- */

/* test_coverage_global.c: the global table across fork() and with names of every length, and
 * the system module's refusals; added after the list tests, before container equality, so the
 * suite runs its tests in the same order as when one file held them. */
void pf_test_coverage_add_global_tests(TCase* tc);

#endif
