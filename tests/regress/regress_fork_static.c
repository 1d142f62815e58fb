/* Regression test (review of the allocator, finding 1): libpackfn.a linked into a program the
 * ordinary way (not the whole archive), by a program that uses functions, strings and tensors
 * but not the global table. The fork handlers that take the allocator's locks around fork()
 * were registered by a constructor in the global table's file, which such a link leaves out:
 * no handler, so a child forked while another thread held a size class's lock waited on it
 * for ever at its first allocation of that class (the reviewer: 7 of 200 children). Now the
 * allocator, which every program links, registers them.
 *
 * Two threads create and release functions, strings and small tensors of every small size
 * without pause; main forks 300 times (150 under ThreadSanitizer); each child, with an alarm
 * of 5 s, creates and releases a thousand such objects of every size class, then _exit(0)s.
 * Exit 0 when every child did; 1 when one hung (stopped after 3 hung children, to keep a
 * failing run short).
 * Skipped (77) under AddressSanitizer: the slabs are off there (every block is ASan's malloc),
 * and ASan's own allocator (clang 14's) takes no lock around fork(), so children hang in it.
 * Under ThreadSanitizer every object stays within the slabs' sizes (PF__SLAB_MAX, header
 * included): larger blocks come from malloc, which is TSan's allocator there, and clang 14's
 * does not lock its size classes around fork() either (a child hung in its
 * SizeClassAllocator64::GetFromAllocator about once in 40 loaded runs; none in 130 runs
 * with the cap). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "packfn/packfn.h"

/* ASAN, TSAN: 1 under AddressSanitizer, ThreadSanitizer */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(ASAN)
#define ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(TSAN)
#define TSAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif
#ifndef TSAN
#define TSAN 0
#endif

/* a fork of a ThreadSanitizer process costs ~4 times as much (its shadow's page tables) */
#define FORKS     (TSAN ? 150 : 300)
#define MAX_HUNG  3
#define CHURNERS  2
#define KEEP      300
#define MAX_BYTES (TSAN ? 3968 : 4096) /* under TSan: + the largest header <= 4096 */

static int stop; /* atomic */

static int call_zero(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(0);
  return 0;
}

static char text[4096];

/* One object of about `bytes` bytes, of a kind chosen by `kind`: a string object, a CPU
 * tensor (its buffer from the allocator too) or a function; NULL on failure. */
static pf_object_t* make(unsigned kind, size_t bytes) {
  pf_object_t* obj = NULL;
  int rc;
  if (kind % 3 == 0) {
    rc = pf_string_object_create(text, bytes, &obj);
  } else if (kind % 3 == 1) {
    int64_t shape[1] = {(int64_t)bytes};
    DLDataType u8 = {kDLUInt, 8, 1};
    DLDevice cpu = {kDLCPU, 0};
    rc = pf_tensor_empty(shape, 1, u8, cpu, &obj);
  } else {
    rc = pf_function_create(NULL, call_zero, NULL, &obj);
  }
  return rc == 0 ? obj : NULL;
}

/* A batch of objects one thread made, for the other thread to release. */
typedef struct {
  pf_object_t* obj[KEEP];
} batch_t;

static batch_t* passed; /* atomic: a batch left for the other thread, or NULL */

/* Makes a batch, swaps it for the one the other thread left, releases that: blocks freed by
 * the thread that did not allocate them keep both threads' lists running dry and overflowing,
 * so the threads are in the allocator's shared depots (under a class lock) much of the time. */
static void* churn(void* arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  batch_t* mine = malloc(sizeof *mine);
  while (mine && !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
    for (int i = 0; i < KEEP; ++i)
      mine->obj[i] = make(i % 16 == 15 ? (unsigned)i : 0, 1 + (size_t)rand_r(&seed) % MAX_BYTES);
    batch_t* theirs = __atomic_exchange_n(&passed, mine, __ATOMIC_ACQ_REL);
    if (!theirs)
      theirs = malloc(sizeof *theirs);
    else
      for (int i = 0; i < KEEP; ++i)
        pf_object_release(theirs->obj[i]);
    mine = theirs;
  }
  free(mine);
  return NULL;
}

/* The child: every size class, more blocks of each than a thread's list holds. */
static void child(void) {
  alarm(5);
  enum { N = 1000 };
  static pf_object_t* objs[N];
  for (int i = 0; i < N; ++i) {
    objs[i] = make((unsigned)(i / 8), 1 + (size_t)i * 37 % MAX_BYTES);
    if (!objs[i])
      _exit(2);
  }
  for (int i = 0; i < N; ++i)
    pf_object_release(objs[i]);
  _exit(0);
}

int main(void) {
  if (ASAN) {
    printf("SKIP: under AddressSanitizer the slabs are off and ASan's allocator is not "
           "fork-safe: a child can hang in ASan's malloc, not in packfn's locks\n");
    return 77;
  }
  memset(text, 'x', sizeof text);
  pthread_t threads[CHURNERS];
  for (int i = 0; i < CHURNERS; ++i)
    if (pthread_create(&threads[i], NULL, churn, (void*)(uintptr_t)(i + 1)) != 0) {
      fprintf(stderr, "FAIL: pthread_create\n");
      return 1;
    }
  usleep(20000); /* the threads are allocating */
  int forks = 0, hung = 0, failed = 0;
  for (; forks < FORKS && hung < MAX_HUNG; ++forks) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      failed++;
      break;
    }
    if (pid == 0)
      child();
    int status;
    if (waitpid(pid, &status, 0) != pid) {
      perror("waitpid");
      failed++;
      break;
    }
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
      hung++;
      fprintf(stderr, "child %d hung (killed by its alarm after 5 s)\n", forks);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed++;
      fprintf(stderr, "child %d failed (status 0x%x)\n", forks, (unsigned)status);
    }
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < CHURNERS; ++i)
    pthread_join(threads[i], NULL);
  batch_t* left = passed;
  for (int i = 0; left && i < KEEP; ++i)
    pf_object_release(left->obj[i]);
  free(left);
  if (hung || failed) {
    fprintf(stderr, "FAIL: %d forks: %d children hung, %d failed\n", forks, hung, failed);
    return 1;
  }
  printf("ok: %d forks while two threads allocated, every child allocated and exited\n", forks);
  return 0;
}
