/* Regression test (review of the global table, finding 5): libpackfn.a linked into a program
 * (not the whole archive). At exit, the archive's destructors deleted the thread key whose
 * destructor takes a reader's record off the table's list of readers; a thread that had looked
 * a name up and exited after that left its record listed, in its own (freed) static TLS, and the
 * next writer's grace period read it: a use after free (a fault, or, with the memory reused, a
 * writer that waits forever or skips live readers). Writers at exit are ordinary: every
 * PF_REGISTER_GLOBAL destructor is one. Now the key is deleted only where packfn's code can be
 * unmapped (a library holding it statically), not in a program.
 *
 * A worker thread, on a stack the program maps itself, looks a name up and waits. A program
 * destructor of priority 101, which runs after the library's (default priority), lets it exit,
 * joins it, unmaps its stack (and so its static TLS, where its record lives: a read of it then
 * faults, with or without a memory checker), and overrides the name with pf_global_set. Exit 0
 * when the override succeeds and lookups see it; before the fix, SIGSEGV in the grace period. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "packfn/packfn.h"

#define STACK_BYTES ((size_t)1 << 20)

static int call_id(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)args;
  (void)num_args;
  *result = pf_any_int((int64_t)(intptr_t)self);
  return 0;
}

static pf_object_t* make(int id) {
  pf_object_t* fn = NULL;
  if (pf_function_create((void*)(intptr_t)id, call_id, NULL, &fn) != 0)
    _exit(3);
  return fn;
}

/* The id of the function "regress.exit_static.f" names, 0 when absent, -1 on a failure. */
static int lookup(void) {
  pf_object_t* fn;
  pf_any_t r;
  if (pf_global_get("regress.exit_static.f", &fn) != 0)
    return -1;
  if (!fn)
    return 0;
  int rc = pf_function_call(fn, NULL, 0, &r);
  pf_object_release(fn);
  return rc == 0 && r.type_index == PF_TYPE_INT ? (int)r.v_int64 : -1;
}

static pthread_t worker_thread;
static void* stack;
static int looked_up, may_exit; /* atomic */

static void* worker(void* unused) {
  (void)unused;
  /* a lookup registers this thread as a reader (its record is in its static TLS) */
  __atomic_store_n(&looked_up, lookup() == 1 ? 1 : -1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&may_exit, __ATOMIC_ACQUIRE))
    usleep(1000);
  return NULL;
}

static void say(const char* msg) {
  (void)!write(2, msg, strlen(msg));
}

__attribute__((destructor(101))) static void after_packfn_destructors(void) {
  __atomic_store_n(&may_exit, 1, __ATOMIC_RELEASE);
  if (pthread_join(worker_thread, NULL) != 0) {
    say("FAIL: pthread_join\n");
    _exit(1);
  }
  if (munmap(stack, STACK_BYTES) != 0) {
    say("FAIL: munmap\n");
    _exit(1);
  }
  say("late destructor: the worker exited after packfn's destructors, its stack is unmapped; "
      "overriding the name...\n");
  pf_object_t* fn = make(2);
  int rc = pf_global_set("regress.exit_static.f", fn, 1);
  pf_object_release(fn);
  if (rc != 0) {
    say("FAIL: pf_global_set at exit failed\n");
    _exit(1);
  }
  if (lookup() != 2) {
    say("FAIL: a lookup after the override at exit does not see it\n");
    _exit(1);
  }
  say("ok: override at exit, after a reader thread exited late\n");
}

int main(void) {
  pf_object_t* fn = make(1);
  if (pf_global_set("regress.exit_static.f", fn, 0) != 0) {
    fprintf(stderr, "FAIL: pf_global_set: %s\n", pf_error_message(pf_error_peek()));
    return 1;
  }
  pf_object_release(fn);
  stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pthread_attr_t attr;
  if (stack == MAP_FAILED || pthread_attr_init(&attr) != 0 ||
      pthread_attr_setstack(&attr, stack, STACK_BYTES) != 0 ||
      pthread_create(&worker_thread, &attr, worker, NULL) != 0) {
    fprintf(stderr, "FAIL: cannot start the worker\n");
    return 1;
  }
  pthread_attr_destroy(&attr);
  int seen;
  while ((seen = __atomic_load_n(&looked_up, __ATOMIC_ACQUIRE)) == 0)
    usleep(1000);
  if (seen != 1) {
    fprintf(stderr, "FAIL: the worker's lookup did not find the function\n");
    return 1;
  }
  printf("the worker looked the name up; exiting with it still running\n");
  fflush(stdout);
  return 0; /* exit: packfn's destructors, then after_packfn_destructors */
}
