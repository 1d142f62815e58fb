/* tests/test_kernels_math_settings.c: test_kernels_math_settings, the first use of the kernels'
 * process-wide settings (kernels/kmath.h) racing with a set from another thread. A setting is
 * chosen lazily, by its first read, once per process: this program never touches them itself,
 * so that each forked child starts with none chosen. */
#define _POSIX_C_SOURCE 200809L /* fork, waitpid */

#include "kernels/kmath.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Children per setting, the first read started 0 to 199 spins after the set (without the fix the
 * set was lost in 14 to 54% of them on a 2-core VM). */
#define TRIALS 400

enum { SET_ORDER, SET_ISA, SET_THREADS };

static atomic_int ready, go;
static int which, want;
static volatile int delay; /* spins of the first read after the start: the trials sweep it */

static int setting_set(int value) {
  return which == SET_ORDER ? pf__k_stream_order_set(value)
         : which == SET_ISA ? pf__k_isa_set(value)
                            : pf__k_threads_set(value);
}

static int setting_get(void) {
  return which == SET_ORDER ? pf__k_stream_order_get()
         : which == SET_ISA ? pf__k_isa_get()
                            : pf__k_threads_get();
}

static void* setter(void* arg) {
  (void)arg;
  atomic_store(&ready, 1);
  while (!atomic_load(&go)) {
  }
  return (void*)(intptr_t)(setting_set(want) == want);
}

/* In a fresh child: a thread sets the setting to want while this one reads it first (which
 * chooses the default); exits 0 when the set is what holds afterwards, 1 when it was lost, 2
 * when the set did not return want. */
static int race_child(void) {
  pthread_t th;
  if (pthread_create(&th, NULL, setter, NULL) != 0) {
    return 0; /* no thread, no race */
  }
  while (!atomic_load(&ready)) {
  }
  atomic_store(&go, 1);
  for (int k = 0; k < delay; ++k) {
  }
  (void)setting_get();
  void* set_ok;
  pthread_join(th, &set_ok);
  if (set_ok == NULL) {
    return 2;
  }
  return setting_get() == want ? 0 : 1;
}

/* Runs fn in a forked child (fresh settings) and returns its exit status. */
static int in_child(int (*fn)(void)) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    _exit(fn());
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static int default_child(void) {
  return setting_get();
}

/* A set that returned its value as the one in effect must not be replaced by the default that
 * a first read in another thread chose at the same time. */
static void check_setting(int setting, const char* name) {
  which = setting;
  int def = in_child(default_child);
  want = setting == SET_THREADS ? def + 2 : (def > 0 ? 0 : 1);
  if (setting == SET_ISA && def == PF__K_ISA_BASE) {
    return; /* one level only: nothing to set it to */
  }
  int lost = 0;
  for (int t = 0; t < TRIALS; ++t) {
    delay = t % 200;
    int rc = in_child(race_child);
    ck_assert_msg(rc != 2, "%s: the set did not return the value set", name);
    lost += rc;
  }
  ck_assert_msg(lost == 0, "%s: a set racing with the first read was lost in %d of %d", name, lost,
                TRIALS);
}

START_TEST(test_stream_order_set_races_first_get) {
  check_setting(SET_ORDER, "stream order");
}
END_TEST

START_TEST(test_isa_set_races_first_get) {
  check_setting(SET_ISA, "instruction set level");
}
END_TEST

START_TEST(test_threads_set_races_first_get) {
  check_setting(SET_THREADS, "thread count");
}
END_TEST

int main(void) {
  unsetenv("PACKFN_KERNEL_THREADS"); /* the default thread count: 1 */
  Suite* s = suite_create("kernels_math_settings");
  TCase* tc = tcase_create("first use");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_stream_order_set_races_first_get);
  tcase_add_test(tc, test_isa_set_races_first_get);
  tcase_add_test(tc, test_threads_set_races_first_get);
  suite_add_tcase(s, tc);
  SRunner* sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
