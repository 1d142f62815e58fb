/* The global table and modules, failure paths and unusual inputs the layer suites leave out
 * (issue 10, coverage): the table in a child forked while it is read or written, names of every
 * length, the system module's refusals and suggestions. Part of the coverage suite
 * (test_coverage.c runs them). */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pf_test_coverage.h"

/* ---- the global table in a forked child: the fork handlers keep its reader list sane ---- */

START_TEST(test_global_after_fork) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, add_one, NULL, &fn), 0);
  ck_assert_int_eq(pf_global_set("coverage.fork.add_one", fn, 1), 0);
  pf_object_release(fn);
  pf_object_t* got = NULL;
  ck_assert_int_eq(pf_global_get("coverage.fork.add_one", &got), 0); /* this thread reads */
  pf_object_release(got);
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    /* the child: lookups, a registration and a removal must work (no lock left held) */
    pf_any_t arg = pf_any_int(41), r = pf_any_none();
    int ok = pf_global_call("coverage.fork.add_one", &arg, 1, &r) == 0 && r.v_int64 == 42;
    pf_object_t* f2 = NULL;
    ok = ok && pf_function_create(NULL, add_one, NULL, &f2) == 0 &&
         pf_global_set("coverage.fork.child", f2, 0) == 0 &&
         pf_global_remove("coverage.fork.child") == 0;
    pf_object_release(f2);
    /* the child's copy of the table holds the only reference to the function: under valgrind
     * the child's exit is checked for leaks too */
    ok = ok && pf_global_remove("coverage.fork.add_one") == 0;
    _exit(ok ? 0 : 3);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  ck_assert_int_eq(WEXITSTATUS(status), 0);
  ck_assert_int_eq(pf_global_remove("coverage.fork.add_one"), 0);
  ck_assert_int_eq(pf_global_get("coverage.fork.add_one", &got), 0);
  ck_assert_ptr_null(got);
  ck_assert_int_eq(pf_global_get_bytes(NULL, 3, &got), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_global_get_bytes");
  ck_assert_int_eq(pf_global_get_bytes("", 0, &got), 0); /* no name is empty */
  ck_assert_ptr_null(got);
}
END_TEST

/* A fork while another thread writes the table or a function's record, looks a type up or
 * installs a device allocator: every lock such a call holds is taken around fork(), so the child
 * finds them free (a child forked while the other thread held the writers' lock, the records'
 * lock, the type registry's (86 of 100 children) or the allocator table's (43 of 100; a child
 * only reading it spun on its odd sequence number) waited forever). */
static int fork_churn_stop;
static pf_object_t* fork_churn_fn;

static pf_allocator_t fork_allocator; /* packfn's CPU hooks, installed as an entry only */
#define FORK_DEVICE_TYPE 20           /* no device of packfn's */

/* A thread of its own for the type registry and the allocator table: in the loop below their
 * locks would be held too small a share of the time for a fork to land in them. */
static void* fork_churn_registries(void* arg) {
  (void)arg;
  for (unsigned k = 0; !__atomic_load_n(&fork_churn_stop, __ATOMIC_RELAXED); ++k) {
    int32_t type = -1;
    (void)pf_type_index_of("ffi.Function", &type);
    (void)pf_allocator_set(FORK_DEVICE_TYPE, (k & 1) ? &fork_allocator : NULL);
  }
  return NULL;
}

static void* fork_churn(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&fork_churn_stop, __ATOMIC_RELAXED)) {
    (void)pf_global_set("coverage.fork.churn", fork_churn_fn, 1);
    char** names = NULL;
    size_t n = 0;
    if (pf_global_list(&names, &n) == 0)
      pf_global_list_free(names);
    (void)pf_function_set_info(fork_churn_fn, "churn() -> None", "Churns.");
    (void)pf_global_remove("coverage.fork.churn");
  }
  return NULL;
}

START_TEST(test_global_fork_while_writing) {
  const char* nc = getenv("PACKFN_NO_ALLOC_CACHE");
  if (nc && *nc && strcmp(nc, "0") != 0) {
    /* the valgrind runs: a forked child of a threaded process reports the other thread's
     * blocks in flight as lost */
    printf("test_global_fork_while_writing: skipped (PACKFN_NO_ALLOC_CACHE: valgrind runs)\n");
    return;
  }
  ck_assert_int_eq(pf_function_create(NULL, add_one, NULL, &fork_churn_fn), 0);
  ck_assert_int_eq(pf_allocator_get(kDLCPU, &fork_allocator), 0);
  __atomic_store_n(&fork_churn_stop, 0, __ATOMIC_RELAXED);
  pthread_t t, t2;
  ck_assert_int_eq(pthread_create(&t, NULL, fork_churn, NULL), 0);
  ck_assert_int_eq(pthread_create(&t2, NULL, fork_churn_registries, NULL), 0);
  int hung = 0, failed = 0;
  for (int k = 0; k < 20; ++k) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* no Check calls here: the other thread may have held Check's lock */
      pf_object_t* f = NULL;
      int ok = pf_function_create(NULL, add_one, NULL, &f) == 0 &&
               pf_global_set("coverage.fork.child", f, 1) == 0 &&
               pf_function_set_info(f, "child() -> int", NULL) == 0 &&
               pf_function_signature(f) != NULL && pf_global_remove("coverage.fork.child") == 0;
      int32_t type = -1;
      pf_allocator_t installed;
      ok = ok && pf_type_index_of("ffi.Function", &type) == 0 && type == PF_TYPE_FUNCTION &&
           pf_allocator_get(FORK_DEVICE_TYPE, &installed) == 0 &&
           pf_allocator_set(FORK_DEVICE_TYPE, &fork_allocator) == 0;
      char** names = NULL;
      size_t n = 0;
      ok = ok && pf_global_list(&names, &n) == 0;
      pf_global_list_free(names);
      pf_object_release(f);
      _exit(ok ? 0 : 3);
    }
    ck_assert_int_gt(pid, 0);
    int status = 0;
    pid_t got = 0;
    for (int ms = 0; ms < 2000 && got == 0; ++ms) { /* a hung child: 2 s, then killed */
      got = waitpid(pid, &status, WNOHANG);
      if (got == 0)
        usleep(1000);
    }
    if (got == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      hung++;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed++;
    }
  }
  __atomic_store_n(&fork_churn_stop, 1, __ATOMIC_RELAXED);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(pthread_join(t2, NULL), 0);
  ck_assert_int_eq(pf_allocator_set(FORK_DEVICE_TYPE, NULL), 0);
  pf_object_release(fork_churn_fn);
  ck_assert_msg(hung == 0 && failed == 0, "of 20 children %d hung and %d failed", hung, failed);
}
END_TEST

/* ---- the global table: names of every length, probes past other entries ---- */

START_TEST(test_global_names_of_every_length) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, add_one, NULL, &fn), 0);
  char name[80], miss[80];
  /* lengths 1..70 (tail-word names, short compares, long compares), and 150 numbered names so
   * that probes run past entries of other lengths and hashes */
  for (int len = 1; len <= 70; ++len) {
    memset(name, 'a' + len % 26, (size_t)len);
    name[len] = '\0';
    ck_assert_int_eq(pf_global_set(name, fn, 0), 0);
  }
  for (int i = 0; i < 150; ++i) {
    snprintf(name, sizeof name, "coverage.numbered.%d", i);
    ck_assert_int_eq(pf_global_set(name, fn, 0), 0);
  }
  pf_object_t* got;
  for (int len = 1; len <= 70; ++len) {
    memset(name, 'a' + len % 26, (size_t)len);
    name[len] = '\0';
    ck_assert_int_eq(pf_global_get(name, &got), 0);
    ck_assert_ptr_eq(got, fn);
    pf_object_release(got);
    ck_assert_int_eq(pf_global_get_bytes(name, (size_t)len, &got), 0);
    ck_assert_ptr_eq(got, fn);
    pf_object_release(got);
    /* the same length with the first, then the last byte changed: not found */
    memcpy(miss, name, (size_t)len + 1);
    miss[0] = 'Z';
    ck_assert_int_eq(pf_global_get(miss, &got), 0);
    ck_assert_ptr_null(got);
    memcpy(miss, name, (size_t)len + 1);
    miss[len - 1] = 'Z';
    ck_assert_int_eq(pf_global_get_bytes(miss, (size_t)len, &got), 0);
    ck_assert_ptr_null(got);
  }
  for (int i = 0; i < 150; ++i) {
    snprintf(name, sizeof name, "coverage.numbered.%d", i);
    ck_assert_int_eq(pf_global_get(name, &got), 0);
    ck_assert_ptr_eq(got, fn);
    pf_object_release(got);
    snprintf(miss, sizeof miss, "coverage.numbered.%dx", i);
    ck_assert_int_eq(pf_global_get(miss, &got), 0);
    ck_assert_ptr_null(got);
  }
  /* a second registration without override is refused, naming the function */
  ck_assert_int_eq(pf_global_set("coverage.numbered.7", fn, 0), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "function 'coverage.numbered.7' is already registered");
  for (int len = 1; len <= 70; ++len) {
    memset(name, 'a' + len % 26, (size_t)len);
    name[len] = '\0';
    ck_assert_int_eq(pf_global_remove(name), 0);
  }
  for (int i = 0; i < 150; ++i) {
    snprintf(name, sizeof name, "coverage.numbered.%d", i);
    ck_assert_int_eq(pf_global_remove(name), 0);
    ck_assert_int_eq(pf_global_get(name, &got), 0); /* a removed name's slot gives none */
    ck_assert_ptr_null(got);
  }
  pf_object_release(fn);
}
END_TEST

/* ---- modules: the system module's refusals and suggestions ---- */

START_TEST(test_module_refusals) {
  pf_object_t* sys;
  ck_assert_int_eq(pf_module_system(&sys), 0);
  char buf[64];
  ck_assert_int_eq(pf_module_suggest(sys, NULL, buf, sizeof buf), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_module_suggest: argument name");
  ck_assert_int_eq(pf_module_suggest(sys, "x", NULL, 4), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_module_suggest: argument buf");
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, add_one, NULL, &fn), 0);
  ck_assert_int_eq(pf_global_set("coverage.module.add_one", fn, 0), 0);
  pf_object_release(fn);
  /* a near miss in the global table is suggested; the call without a result pointer works */
  pf_any_t arg = pf_any_int(1);
  ck_assert_int_eq(pf_module_call(sys, "coverage.module.add_on", &arg, 1, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_KEY, "did you mean 'coverage.module.add_one'?");
  ck_assert_int_eq(pf_module_suggest(sys, "coverage.module.add_onf", buf, sizeof buf), 1);
  ck_assert_str_eq(buf, "coverage.module.add_one");
  pf_any_t r = pf_any_none();
  ck_assert_int_eq(pf_module_call(sys, "coverage.module.add_one", &arg, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 2);
  ck_assert_int_eq(pf_module_call(sys, "zzzzzzzzzzzzzzzzzzzzzz", &arg, 1, &r), -1);
  PF_ASSERT_RAISED(PF_ERR_KEY, "has no function 'zzzzzzzzzzzzzzzzzzzzzz'");
  ck_assert_int_eq(r.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_global_remove("coverage.module.add_one"), 0);
  uint32_t major = 99;
  ck_assert_int_eq(pf_module_abi_version(sys, NULL, NULL), 0);
  ck_assert_int_eq(pf_module_abi_version(sys, &major, NULL), 0);
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_module_abi_version(list, &major, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_module_abi_version");
  ck_assert_ptr_null(pf_module_path(list));
  pf_object_release(list);
  pf_object_release(sys);
  /* a typed export's raw symbol needs its slot */
  static const pf_param_t params[] = {{"x", PF_PARAM_INT}};
  static const pf_signature_t sig = {"raw", 1, params, PF_PARAM_INT, NULL};
  ck_assert_int_eq(pf__export_typed_call(NULL, &sig, NULL, &arg, 1, &r), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf__export_typed_call: argument slot");
  ck_assert_int_eq(r.type_index, PF_TYPE_NONE);
}
END_TEST

void pf_test_coverage_add_global_tests(TCase* tc) {
  tcase_add_test(tc, test_global_after_fork);
  tcase_add_test(tc, test_global_fork_while_writing);
  tcase_add_test(tc, test_global_names_of_every_length);
  tcase_add_test(tc, test_module_refusals);
}
