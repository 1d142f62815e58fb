/* Regression test (review of the allocator and objects, sixteenth session): libpackfn.a linked
 * the ordinary way by a program that uses the type registry but not the global table. The
 * registry's lock was taken around fork() by the global table's fork handler only, which such a
 * link leaves out (its weak reference is NULL), so a child forked while another thread held
 * the lock waited for ever at its first registry call (the reviewer: 194 of 200 children). Now
 * type.c takes its own lock, through the handlers every program links (alloc.c).
 *
 * One thread registers types and looks them up without pause; main forks FORKS times; each
 * child, with an alarm of 5 s, looks up a type registered before the fork and registers a new
 * one, then _exit(0)s. Exit 0 when every child did; 1 when one hung or answered wrongly
 * (stopped after 3 hung children, to keep a failing run short). Skipped (77) under
 * AddressSanitizer, whose allocator (clang 14's) takes no lock around fork(): a child may hang
 * in it (the registry allocates its entries). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "packfn/error.h"
#include "packfn/object.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(ASAN)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif

#define FORKS    200
#define MAX_HUNG 3
#define KEYS     500 /* distinct keys the churning thread cycles through */

static int stop; /* atomic */

static void* churn(void* arg) {
  (void)arg;
  char key[48];
  unsigned n = 0;
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
    int32_t index;
    snprintf(key, sizeof key, "regress.fork_types.k%u", n++ % KEYS);
    if (pf_type_register(key, PF_TYPE_OBJECT, &index) != 0 ||
        pf_type_index_of("regress.fork_types.k1", &index) != 0) {
      fprintf(stderr, "churn: %s\n", pf_error_message(pf_error_peek()));
      abort();
    }
  }
  return NULL;
}

int main(void) {
  if (ASAN) {
    printf("skipped: AddressSanitizer's allocator is not fork-safe\n");
    return 77;
  }
  int32_t before;
  if (pf_type_register("regress.fork_types.before", PF_TYPE_OBJECT, &before) != 0) {
    fprintf(stderr, "pf_type_register: %s\n", pf_error_message(pf_error_peek()));
    return 1;
  }
  pthread_t thread;
  if (pthread_create(&thread, NULL, churn, NULL) != 0)
    return 1;
  int hung = 0, bad = 0;
  for (int k = 0; k < FORKS && hung < MAX_HUNG; ++k) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      bad++;
      break;
    }
    if (pid == 0) {
      alarm(5);
      int32_t found, added;
      if (pf_type_index_of("regress.fork_types.before", &found) != 0 || found != before)
        _exit(2);
      if (pf_type_register("regress.fork_types.child", PF_TYPE_OBJECT, &added) != 0)
        _exit(3);
      _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
      perror("waitpid");
      bad++;
      break;
    }
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
      fprintf(stderr, "child %d hung in the type registry\n", k);
      hung++;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "child %d: status %d\n", k, status);
      bad++;
    }
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  pthread_join(thread, NULL);
  printf("%d hung, %d failed\n", hung, bad);
  return hung || bad ? 1 : 0;
}
