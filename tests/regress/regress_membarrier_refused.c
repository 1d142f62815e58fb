/* Regression test (review of the global table, finding 4): membarrier refused after the first
 * lookup. A lookup registers its thread as a reader and, on Linux, the process for
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which writers then issue before their grace
 * period. A seccomp filter installed after that (initialise, then sandbox) makes the kernel
 * refuse it, and every writer abort()ed ("registered above: the kernel cannot refuse it now").
 * Now a writer that is refused the barrier keeps what it unpublished for the life of the
 * process: a replaced or removed function's deleter does not run, old tables are kept.
 *
 * A worker thread and main look names up (both registered as readers); then a filter makes
 * membarrier fail with EPERM for main; main overrides a name, removes one, and sets 300 new
 * names (several table rebuilds, the old tables kept), checking every lookup, in main and in
 * the worker, and that the replaced and removed functions' deleters did not run.
 * Where the library found no membarrier (valgrind may not support it; PACKFN_NO_MEMBARRIER=1)
 * the table marks with an exchange and never asks for it: the writes are checked all the same,
 * and a line says so. Exit 0; before the fix, SIGABRT at the override. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "packfn/packfn.h"

#include "global_private.h"

#define NEW_NAMES 300
#define MAX_ID    (1000 + NEW_NAMES)

static int deleted[MAX_ID + 1]; /* atomic: deleted[id] once function id's deleter ran */

static int call_id(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)args;
  (void)num_args;
  *result = pf_any_int((int64_t)(intptr_t)self);
  return 0;
}

static void on_delete(void* self) {
  __atomic_store_n(&deleted[(intptr_t)self], 1, __ATOMIC_RELAXED);
}

static void fail(const char* what) {
  pf_object_t* e = pf_error_peek();
  fprintf(stderr, "FAIL: %s%s%s\n", what, e ? ": " : "", e ? pf_error_message(e) : "");
  exit(1);
}

/* A function whose calls return `id` and whose deleter marks deleted[id]. */
static pf_object_t* make(int id) {
  pf_object_t* fn;
  if (pf_function_create((void*)(intptr_t)id, call_id, on_delete, &fn) != 0)
    fail("pf_function_create");
  return fn;
}

/* Sets `name` to a new function `id` (the table keeps the only reference). */
static void set(const char* name, int id, int allow_override) {
  pf_object_t* fn = make(id);
  if (pf_global_set(name, fn, allow_override) != 0)
    fail("pf_global_set");
  pf_object_release(fn);
}

/* The id of the function `name` names now, 0 when absent. */
static int lookup(const char* name) {
  pf_object_t* fn;
  if (pf_global_get(name, &fn) != 0)
    fail("pf_global_get");
  if (!fn)
    return 0;
  pf_any_t r;
  if (pf_function_call(fn, NULL, 0, &r) != 0 || r.type_index != PF_TYPE_INT)
    fail("calling a looked-up function");
  pf_object_release(fn);
  return (int)r.v_int64;
}

static void expect(const char* name, int id, const char* who) {
  int got = lookup(name);
  if (got != id) {
    fprintf(stderr, "FAIL (%s): pf_global_get(%s) gave function %d, expected %d\n", who, name, got,
            id);
    exit(1);
  }
}

static void name_of(int i, char* buf, size_t size) {
  snprintf(buf, size, "regress.membarrier.new.%d", i);
}

/* Every lookup as main left the table: the override, the removal, the new names. */
static void expect_all(const char* who) {
  expect("regress.membarrier.over", 3, who);
  expect("regress.membarrier.gone", 0, who);
  for (int i = 0; i < NEW_NAMES; ++i) {
    char name[64];
    name_of(i, name, sizeof name);
    expect(name, 1000 + i, who);
  }
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage; /* 1: the worker looked up (registered); 2: main's writes are done */

static void* worker(void* unused) {
  (void)unused;
  expect("regress.membarrier.over", 1, "worker, before");
  pthread_mutex_lock(&lock);
  stage = 1;
  pthread_cond_broadcast(&cond);
  while (stage != 2)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  expect_all("worker, after");
  return NULL;
}

/* From now on membarrier fails with `err` in this thread (and threads it creates). 0 when the
 * filter is in place. */
static int deny_membarrier(int err) {
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    return -1;
  return 0;
}

int main(void) {
  set("regress.membarrier.over", 1, 0);
  set("regress.membarrier.gone", 2, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0)
    fail("pthread_create");
  pthread_mutex_lock(&lock);
  while (stage != 1)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  expect("regress.membarrier.gone", 2, "main, before");

  /* The lookups registered the process for the expedited barrier if the library uses it:
   * the command succeeds only for a registered process. */
  int membarrier_mode = syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0;
  if (deny_membarrier(EPERM) != 0) {
    printf("SKIP: cannot install a seccomp filter here (%s)\n", strerror(errno));
    return 77;
  }
  if (membarrier_mode) {
    errno = 0;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) != -1 || errno != EPERM) {
      fprintf(stderr, "FAIL: the seccomp filter did not make membarrier fail with EPERM\n");
      return 1;
    }
    printf("membarrier mode: the library registered for membarrier, now refused (EPERM)\n");
  } else {
    printf("exchange mode: the library does not use membarrier here (not supported, as under "
           "valgrind, or PACKFN_NO_MEMBARRIER set); checking that the writes work\n");
  }
  fflush(stdout);

  /* an override: lookups get the new function; the old one is kept, not deleted */
  set("regress.membarrier.over", 3, 1);
  expect("regress.membarrier.over", 3, "main");
  /* a removal: lookups get nothing; the function is kept */
  if (pf_global_remove("regress.membarrier.gone") != 0)
    fail("pf_global_remove");
  expect("regress.membarrier.gone", 0, "main");

  /* new names: the table is rebuilt several times; each old table is kept */
  pf__global_stats_t before, after;
  pf__global_stats(&before);
  for (int i = 0; i < NEW_NAMES; ++i) {
    char name[64];
    name_of(i, name, sizeof name);
    set(name, 1000 + i, 0);
    for (int j = 0; j <= i; j += 17) { /* the names set so far, as the table grows */
      name_of(j, name, sizeof name);
      expect(name, 1000 + j, "main, while setting");
    }
  }
  pf__global_stats(&after);
  if (after.rebuilds < before.rebuilds + 2) {
    fprintf(stderr, "FAIL: %zu table rebuilds while setting %d names, expected at least 2\n",
            after.rebuilds - before.rebuilds, NEW_NAMES);
    return 1;
  }
  expect_all("main, after");

  pthread_mutex_lock(&lock);
  stage = 2;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  if (pthread_join(t, NULL) != 0)
    fail("pthread_join");

  if (membarrier_mode && (__atomic_load_n(&deleted[1], __ATOMIC_RELAXED) ||
                          __atomic_load_n(&deleted[2], __ATOMIC_RELAXED))) {
    fprintf(stderr,
            "FAIL: a function unpublished without a grace period was deleted (replaced: "
            "%d, removed: %d); a lookup may still hold it\n",
            deleted[1], deleted[2]);
    return 1;
  }
  for (int i = 0; i < NEW_NAMES; ++i) /* live functions: never deleted */
    if (__atomic_load_n(&deleted[1000 + i], __ATOMIC_RELAXED)) {
      fprintf(stderr, "FAIL: function %d, still registered, was deleted\n", 1000 + i);
      return 1;
    }
  printf("ok: override, removal and %zu rebuilds after the barrier was refused; lookups right "
         "in both threads%s\n",
         after.rebuilds - before.rebuilds,
         membarrier_mode ? "; the replaced and removed functions kept, not deleted" : "");

  /* leave nothing but what the table keeps */
  pf_global_remove("regress.membarrier.over");
  for (int i = 0; i < NEW_NAMES; ++i) {
    char name[64];
    name_of(i, name, sizeof name);
    if (pf_global_remove(name) != 0)
      fail("pf_global_remove");
  }
  return 0;
}
