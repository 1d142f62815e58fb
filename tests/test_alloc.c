/* Unit tests of the small-block allocator (src/alloc.c) through the public API: objects of every
 * size, CPU buffers of every alignment, blocks freed by other threads and by exiting threads.
 * Each block is filled with a pattern of its own and checked before it is freed, so two blocks
 * that overlapped, or a block handed out twice, fail the test. With the slabs off (ASan,
 * valgrind runs) the same checks run over malloc. */
#include <check.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"

size_t pf__alloc_slab_bytes(void);                  /* libpackfn's private count (src/alloc.h) */
uint32_t pf__alloc_test_limit_spans(uint32_t more); /* and its test hooks */
void pf__alloc_test_pool(uint32_t keep, uint32_t decay_ms, uint32_t* kept);

static void raw_deleter(void* self, int flags) {
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

/* The pattern of `seed` over n bytes at p (8-byte aligned): a word per 8 bytes, then bytes. */
static uint64_t word_of(unsigned seed, size_t i) {
  return ((uint64_t)seed << 32 | (uint64_t)i) * 0x9E3779B97F4A7C15ULL;
}

static void fill(unsigned char* p, size_t n, unsigned seed) {
  size_t words = n / 8;
  for (size_t i = 0; i < words; ++i)
    ((uint64_t*)(void*)p)[i] = word_of(seed, i);
  for (size_t i = words * 8; i < n; ++i)
    p[i] = (unsigned char)(seed * 131u + i * 7u);
}

static int intact(const unsigned char* p, size_t n, unsigned seed) {
  size_t words = n / 8;
  for (size_t i = 0; i < words; ++i)
    if (((const uint64_t*)(const void*)p)[i] != word_of(seed, i))
      return 0;
  for (size_t i = words * 8; i < n; ++i)
    if (p[i] != (unsigned char)(seed * 131u + i * 7u))
      return 0;
  return 1;
}

/* An object of `size` bytes whose bytes past the header carry the pattern of `seed`. */
static pf_object_t* make(size_t size, unsigned seed) {
  pf_object_t* obj = NULL;
  ck_assert_int_eq(pf_object_alloc(size, PF_TYPE_OBJECT, raw_deleter, &obj), 0);
  ck_assert_ptr_nonnull(obj);
  ck_assert_uint_eq((uintptr_t)obj % 16, 0);
  fill((unsigned char*)(obj + 1), size - sizeof *obj, seed);
  return obj;
}

static void check_and_release(pf_object_t* obj, size_t size, unsigned seed) {
  ck_assert_msg(intact((const unsigned char*)(obj + 1), size - sizeof *obj, seed),
                "block of %zu bytes (seed %u) was overwritten", size, seed);
  pf_object_release(obj);
}

/* Whether packfn's slabs serve objects in this process (off under ASan and with
 * PACKFN_NO_ALLOC_CACHE): a live object holds a span then. */
static int slabs_on(void) {
  pf_object_t* obj = make(48, 1);
  int on = pf__alloc_slab_bytes() != 0;
  check_and_release(obj, 48, 1);
  return on;
}

#define NSIZES 5000

START_TEST(test_every_size) {
  /* every size from the header to past the largest class, all alive at once, twice (the
   * second round reuses the first round's blocks) */
  static pf_object_t* objs[NSIZES];
  for (int round = 0; round < 2; ++round) {
    for (size_t s = sizeof(pf_object_t); s < NSIZES; ++s)
      objs[s] = make(s, (unsigned)(s + round));
    for (size_t s = sizeof(pf_object_t); s < NSIZES; ++s)
      check_and_release(objs[s], s, (unsigned)(s + round));
  }
}
END_TEST

START_TEST(test_cpu_buffers_aligned) {
  pf_allocator_t a;
  ck_assert_int_eq(pf_allocator_get(kDLCPU, &a), 0);
  DLDevice cpu = {kDLCPU, 0};
  static const size_t sizes[] = {1,    15,   16,   17,   100,  255,  256,   257,  1000,
                                 1024, 1025, 3000, 4095, 4096, 4097, 10000, 70000};
  enum { NS = sizeof sizes / sizeof sizes[0], NA = 10 };
  void* bufs[NS][NA];
  for (size_t i = 0; i < NS; ++i) {
    for (int k = 0; k < NA; ++k) {
      size_t align = (size_t)8 << k; /* 8 .. 4096 */
      ck_assert_int_eq(a.alloc(a.ctx, cpu, sizes[i], align, &bufs[i][k]), 0);
      ck_assert_msg((uintptr_t)bufs[i][k] % align == 0, "%zu bytes at alignment %zu: %p", sizes[i],
                    align, bufs[i][k]);
      fill(bufs[i][k], sizes[i], (unsigned)(i * NA + (size_t)k));
    }
  }
  for (size_t i = 0; i < NS; ++i) {
    for (int k = 0; k < NA; ++k) {
      ck_assert(intact(bufs[i][k], sizes[i], (unsigned)(i * NA + (size_t)k)));
      a.free(a.ctx, cpu, bufs[i][k]);
    }
  }
  /* an alignment that is not a power of two is refused */
  void* p = (void*)1;
  ck_assert_int_eq(a.alloc(a.ctx, cpu, 64, 48, &p), -1);
  ck_assert_ptr_null(p);
  pf_object_release(pf_error_take());
}
END_TEST

/* ---- blocks crossing threads ---- */

#define NCROSS 6000

typedef struct {
  pf_object_t** objs;
  size_t n;
  size_t size;
} batch_t;

static void* make_batch(void* arg) {
  batch_t* b = arg;
  for (size_t i = 0; i < b->n; ++i)
    b->objs[i] = make(b->size + i % 64, (unsigned)i);
  return NULL;
}

static void* release_batch(void* arg) {
  batch_t* b = arg;
  for (size_t i = 0; i < b->n; ++i)
    check_and_release(b->objs[i], b->size + i % 64, (unsigned)i);
  return NULL;
}

START_TEST(test_freed_by_other_threads) {
  /* made in one thread, freed in another, made again in a third: every block handed out once */
  static pf_object_t* objs[NCROSS];
  batch_t b = {objs, NCROSS, 40};
  for (int round = 0; round < 3; ++round) {
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, make_batch, &b), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, release_batch, &b), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
  }
}
END_TEST

static void* make_and_keep_some(void* arg) {
  /* frees half of what it made (they stay in this thread's lists), keeps the other half alive
   * past its exit */
  batch_t* b = arg;
  make_batch(b);
  for (size_t i = 0; i < b->n; i += 2) {
    check_and_release(b->objs[i], b->size + i % 64, (unsigned)i);
    b->objs[i] = NULL;
  }
  return NULL;
}

START_TEST(test_thread_exit_keeps_blocks) {
  static pf_object_t* objs[NCROSS];
  batch_t b = {objs, NCROSS, 100};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, make_and_keep_some, &b), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  /* the exited thread's lists went to the depots: this thread reuses them while the kept
   * blocks stay intact */
  static pf_object_t* mine[NCROSS];
  for (size_t i = 0; i < NCROSS; ++i)
    mine[i] = make(100 + i % 64, (unsigned)(i + 7));
  for (size_t i = 1; i < NCROSS; i += 2)
    check_and_release(objs[i], 100 + i % 64, (unsigned)i);
  for (size_t i = 0; i < NCROSS; ++i)
    check_and_release(mine[i], 100 + i % 64, (unsigned)(i + 7));
}
END_TEST

#define NPAR 4

static void* churn(void* arg) {
  /* each thread makes and frees objects of every class in a pattern that overflows its lists,
   * and frees a neighbour's share */
  batch_t* b = arg;
  for (int round = 0; round < 2; ++round) {
    make_batch(b);
    release_batch(b);
  }
  return NULL;
}

START_TEST(test_threads_in_parallel) {
  static pf_object_t* objs[NPAR][NCROSS / 4];
  batch_t b[NPAR];
  pthread_t t[NPAR];
  for (int i = 0; i < NPAR; ++i) {
    b[i] = (batch_t){objs[i], NCROSS / 4, 24 + (size_t)i * 300};
    ck_assert_int_eq(pthread_create(&t[i], NULL, churn, &b[i]), 0);
  }
  for (int i = 0; i < NPAR; ++i)
    ck_assert_int_eq(pthread_join(t[i], NULL), 0);
}
END_TEST

START_TEST(test_slab_bytes_follow_use) {
  /* with the slabs on, making many objects takes spans; with them off the count stays 0 */
  size_t before = pf__alloc_slab_bytes();
  static pf_object_t* objs[NCROSS];
  for (size_t i = 0; i < NCROSS; ++i)
    objs[i] = make(48, (unsigned)i);
  size_t after = pf__alloc_slab_bytes();
  const char* env = getenv("PACKFN_NO_ALLOC_CACHE");
  int off = env && *env && strcmp(env, "0") != 0;
  /* under an address-space limit the slabs reserve an eighth of it, none below 8 MiB */
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      lim.rlim_cur / 8 < ((rlim_t)8 << 20))
    off = 1;
#if defined(__SANITIZE_ADDRESS__)
  off = 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  off = 1;
#endif
#endif
  if (off)
    ck_assert_uint_eq(after, 0);
  else
    ck_assert_uint_ge(after - before, (size_t)NCROSS * 48 - 65536);
  for (size_t i = 0; i < NCROSS; ++i)
    check_and_release(objs[i], 48, (unsigned)i);
}
END_TEST

#define NBIG 200000

START_TEST(test_spans_given_back) {
  /* freeing most of many objects gives their spans back (the count falls), and the memory is
   * reused afterwards */
  if (!slabs_on()) /* malloc's business then; and slow under valgrind */
    return;
  static pf_object_t* objs[NBIG];
  for (size_t i = 0; i < NBIG; ++i)
    objs[i] = make(208, (unsigned)i);
  size_t peak = pf__alloc_slab_bytes();
  for (size_t i = 0; i < NBIG; ++i)
    check_and_release(objs[i], 208, (unsigned)i);
  size_t after = pf__alloc_slab_bytes();
  ck_assert_msg(after < peak / 2 + 65536, "slab bytes %zu after freeing, %zu at the peak", after,
                peak);
  for (size_t i = 0; i < NBIG; ++i)
    objs[i] = make(208, (unsigned)(i + 3));
  ck_assert_uint_le(pf__alloc_slab_bytes(), peak + 65536);
  for (size_t i = 0; i < NBIG; ++i)
    check_and_release(objs[i], 208, (unsigned)(i + 3));
}
END_TEST

#define NPOOL 20000 /* 208-byte objects: about 64 spans */

START_TEST(test_spans_kept_then_bare) {
  /* Spans given back keep their pages while they are young, however many there are; once old,
   * those beyond the keep give their pages back (become bare) as later spans are given back,
   * and are reused afterwards like any other. */
  if (!slabs_on())
    return;
  static pf_object_t* objs[NPOOL];
  uint32_t kept0, kept1, kept2, kept3;
  pf__alloc_test_pool(0, 3600u * 1000u, NULL); /* no keep for the number, an hour's decay */
  for (size_t i = 0; i < NPOOL; ++i)
    objs[i] = make(208, (unsigned)i); /* from kept spans left by earlier tests, or fresh ones */
  pf__alloc_test_pool(UINT32_MAX, UINT32_MAX, &kept0);
  for (size_t i = 0; i < NPOOL; ++i)
    check_and_release(objs[i], 208, (unsigned)i);
  pf__alloc_test_pool(UINT32_MAX, UINT32_MAX, &kept1);
  ck_assert_msg(kept1 >= kept0 + 32, "%u spans kept after freeing ~64, %u before", kept1, kept0);
  pf__alloc_test_pool(0, 0, NULL); /* now every kept span is old enough */
  for (size_t i = 0; i < NPOOL; ++i)
    objs[i] = make(208, (unsigned)i + 5); /* from the newest kept spans */
  for (size_t i = 0; i < NPOOL; ++i)
    check_and_release(objs[i], 208, (unsigned)i + 5);
  pf__alloc_test_pool(UINT32_MAX, UINT32_MAX, &kept2);
  ck_assert_msg(kept2 + 32 <= kept1, "%u spans kept after giving ~64 back with no decay, %u before",
                kept2, kept1);
  /* bare spans serve again: their pages come back zeroed or as they were, and are written */
  for (size_t i = 0; i < NPOOL; ++i)
    objs[i] = make(208, (unsigned)i + 9);
  for (size_t i = 0; i < NPOOL; ++i)
    check_and_release(objs[i], 208, (unsigned)i + 9);
  pf__alloc_test_pool(4096, 1000, &kept3); /* the defaults again */
  ck_assert_uint_le(kept3, kept2 + 64);
}
END_TEST

START_TEST(test_range_used_up) {
  /* no fresh span may be taken: blocks come from malloc, mixed with slab blocks, and every one
   * is told apart when freed; CPU buffers keep their alignment */
  if (!slabs_on()) /* the hook changes nothing then */
    return;
  (void)pf__alloc_test_limit_spans(0);
  size_t before = pf__alloc_slab_bytes();
  static pf_object_t* objs[NCROSS];
  for (size_t i = 0; i < NCROSS; ++i) /* about 12 MB: more than the spans held have free */
    objs[i] = make(24 + (i * 37) % 4200, (unsigned)i);
  ck_assert_uint_le(pf__alloc_slab_bytes(), before); /* so malloc served the rest */
  pf_allocator_t a;
  ck_assert_int_eq(pf_allocator_get(kDLCPU, &a), 0);
  DLDevice cpu = {kDLCPU, 0};
  void* bufs[64];
  for (int k = 0; k < 64; ++k) {
    ck_assert_int_eq(a.alloc(a.ctx, cpu, (size_t)(k + 1) * 61, 256, &bufs[k]), 0);
    ck_assert_uint_eq((uintptr_t)bufs[k] % 256, 0);
    fill(bufs[k], (size_t)(k + 1) * 61, (unsigned)k);
  }
  (void)pf__alloc_test_limit_spans(UINT32_MAX);
  for (size_t i = 0; i < NCROSS; ++i)
    check_and_release(objs[i], 24 + (i * 37) % 4200, (unsigned)i);
  for (int k = 0; k < 64; ++k) {
    ck_assert(intact(bufs[k], (size_t)(k + 1) * 61, (unsigned)k));
    a.free(a.ctx, cpu, bufs[k]);
  }
}
END_TEST

static int stop_churn; /* atomic */

static int churn_bad; /* atomic: blocks the churning thread found overwritten */

static void* churn_until_stopped(void* arg) {
  /* no Check calls in this thread: the main thread's run forks and asserts meanwhile */
  (void)arg;
  pf_object_t* keep[64];
  for (unsigned n = 0; !__atomic_load_n(&stop_churn, __ATOMIC_RELAXED); ++n) {
    for (int i = 0; i < 64; ++i) {
      size_t size = 24 + (size_t)((n + (unsigned)i) % 300);
      if (pf_object_alloc(size, PF_TYPE_OBJECT, raw_deleter, &keep[i]) != 0)
        abort();
      fill((unsigned char*)(keep[i] + 1), size - sizeof(pf_object_t), n);
    }
    for (int i = 0; i < 64; ++i) {
      size_t size = 24 + (size_t)((n + (unsigned)i) % 300);
      if (!intact((const unsigned char*)(keep[i] + 1), size - sizeof(pf_object_t), n))
        __atomic_add_fetch(&churn_bad, 1, __ATOMIC_RELAXED);
      pf_object_release(keep[i]);
    }
  }
  return NULL;
}

START_TEST(test_fork_while_allocating) {
  /* a child forked while another thread is inside the allocator can allocate and free (the
   * allocator's locks are taken around fork). Only with the slabs on: without them every block
   * is malloc's, and under valgrind a forked child of a threaded process reports the other
   * thread's blocks as lost. */
  if (!slabs_on()) {
    printf("test_fork_while_allocating: skipped (slabs off: PACKFN_NO_ALLOC_CACHE or ASan)\n");
    return;
  }
  pthread_t t;
  __atomic_store_n(&stop_churn, 0, __ATOMIC_RELAXED);
  ck_assert_int_eq(pthread_create(&t, NULL, churn_until_stopped, NULL), 0);
  for (int k = 0; k < 5; ++k) {
    pid_t pid = fork();
    if (pid == 0) { /* no Check calls here: the other thread may have held Check's lock */
      pf_object_t* objs[2000];
      for (int i = 0; i < 2000; ++i) {
        size_t size = 24 + (size_t)(i % 300);
        if (pf_object_alloc(size, PF_TYPE_OBJECT, raw_deleter, &objs[i]) != 0)
          _exit(3);
        fill((unsigned char*)(objs[i] + 1), size - sizeof(pf_object_t), (unsigned)i);
      }
      for (int i = 0; i < 2000; ++i) {
        size_t size = 24 + (size_t)(i % 300);
        if (!intact((const unsigned char*)(objs[i] + 1), size - sizeof(pf_object_t), (unsigned)i))
          _exit(2);
        pf_object_release(objs[i]);
      }
      _exit(0);
    }
    ck_assert_int_gt(pid, 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", k, status);
  }
  __atomic_store_n(&stop_churn, 1, __ATOMIC_RELAXED);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(__atomic_load_n(&churn_bad, __ATOMIC_RELAXED), 0);
}
END_TEST

static int noop_call(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)n;
  (void)result;
  return 0;
}

START_TEST(test_shared_functions_own_a_line) {
  /* functions made to be registered (direct form, static registrations) each take a cache line
   * of their own, so two threads retaining two of them never write one line (functions of
   * pf_function_create stay 48-byte blocks) */
  if (!slabs_on()) {
    printf("test_shared_functions_own_a_line: skipped (slabs off: PACKFN_NO_ALLOC_CACHE or "
           "ASan)\n");
    return;
  }
  enum { N = 8 };
  pf_object_t* fns[2 * N];
  pf_signature_t sig = {"line_fn", 0, NULL, PF_PARAM_NONE, NULL};
  for (int i = 0; i < N; ++i) {
    ck_assert_int_eq(pf_function_create_direct(noop_call, &fns[i]), 0);
    ck_assert_int_eq(pf_function_create_static(&sig, noop_call, &fns[N + i]), 0);
  }
  for (int i = 0; i < 2 * N; ++i) {
    ck_assert_msg((uintptr_t)fns[i] % 64 == 0, "function %d at %p", i, (void*)fns[i]);
    for (int k = 0; k < i; ++k)
      ck_assert_uint_ne((uintptr_t)fns[i] / 64, (uintptr_t)fns[k] / 64);
  }
  for (int i = 0; i < 2 * N; ++i)
    pf_object_release(fns[i]);
}
END_TEST

START_TEST(test_zero_bytes_keep_the_list) {
  /* A zero-byte aligned request from a thread whose list of that class holds blocks: it must
   * take one of them, not refill the list over them (which lost the list's blocks for good:
   * 256 per call). */
  pf_allocator_t a;
  ck_assert_int_eq(pf_allocator_get(kDLCPU, &a), 0);
  DLDevice cpu = {kDLCPU, 0};
  enum { NFILL = 200, NCALLS = 400 };
  void* blocks[NFILL];
  for (int i = 0; i < NFILL; ++i)
    ck_assert_int_eq(a.alloc(a.ctx, cpu, 256, 256, &blocks[i]), 0);
  for (int i = 0; i < NFILL; ++i)
    a.free(a.ctx, cpu, blocks[i]);
  size_t before = pf__alloc_slab_bytes();
  for (int k = 0; k < NCALLS; ++k) {
    void* p = NULL;
    ck_assert_int_eq(a.alloc(a.ctx, cpu, 0, 256, &p), 0);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 256, 0);
    a.free(a.ctx, cpu, p);
  }
  ck_assert_uint_le(pf__alloc_slab_bytes(), before + 65536);
}
END_TEST

/* Refills from spans holding both live and free blocks (a random half of many objects freed,
 * then made again, a few times): a span with at most a list of free blocks gives the thread all
 * of them at once, a fuller one half a list cut from its chain (48-byte blocks: ~680 of a span's
 * 1365 free, over the 256-block list; 144: ~230 of 455, under it; 1280: ~25 of 51, around the
 * 32-block list of the larger classes). Every block keeps its pattern: none handed out twice,
 * none lost into another's bytes. */
#define NCHURN 40000
START_TEST(test_refills_from_half_free_spans) {
  static pf_object_t* objs[NCHURN];
  static unsigned seeds[NCHURN];
  static const size_t sizes[] = {48, 144, 1280};
  uint32_t x = 2463534242u;
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; ++z) {
    size_t size = sizes[z];
    for (unsigned i = 0; i < NCHURN; ++i)
      objs[i] = make(size, seeds[i] = i + 1);
    for (unsigned round = 0; round < 4; ++round) {
      unsigned picked[NCHURN / 2];
      for (unsigned j = 0; j < NCHURN / 2; ++j) { /* random slots, repeats allowed */
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        unsigned i = picked[j] = x % NCHURN;
        if (objs[i]) {
          check_and_release(objs[i], size, seeds[i]);
          objs[i] = NULL;
        }
      }
      for (unsigned j = 0; j < NCHURN / 2; ++j) {
        unsigned i = picked[j];
        if (!objs[i])
          objs[i] = make(size, seeds[i] = (round + 2) * NCHURN + i);
      }
    }
    for (unsigned i = 0; i < NCHURN; ++i)
      check_and_release(objs[i], size, seeds[i]);
  }
}
END_TEST

/* A thread hands out the blocks it cuts from a span in address order, unlinked; those it has not
 * handed out when it exits go to the depot with its lists (else they were lost: their span never
 * came back). A thread makes objects and exits keeping them; a second thread's objects of the
 * same class then include the block right after the first thread's last one, which the first
 * had cut and not handed out. */
#define NEXIT     3001
#define EXIT_SIZE 240 /* a class up to 256 bytes: its cut blocks are handed out in order */
static void* make_exit_batch(void* arg) {
  pf_object_t** objs = arg;
  for (unsigned i = 0; i < NEXIT; ++i)
    objs[i] = make(EXIT_SIZE, i);
  return NULL;
}
START_TEST(test_exiting_thread_gives_back_cut_blocks) {
  if (!slabs_on())
    return;
  static pf_object_t* first[NEXIT];
  static pf_object_t* second[NEXIT];
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, make_exit_batch, first), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(pthread_create(&t, NULL, make_exit_batch, second), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  uintptr_t after_last = (uintptr_t)first[NEXIT - 1] + EXIT_SIZE;
  int found = 0;
  for (unsigned i = 0; i < NEXIT; ++i)
    found |= (uintptr_t)second[i] == after_last;
  ck_assert_msg(found, "the block after the exited thread's last one was not handed out again");
  for (unsigned i = 0; i < NEXIT; ++i) {
    check_and_release(first[i], EXIT_SIZE, i);
    check_and_release(second[i], EXIT_SIZE, i);
  }
}
END_TEST

/* ---- the first blocks of a thread (its lists empty), and the memory-checker mode ---- */

/* Shapes and 1 KiB tensors made where this thread's lists are empty, the paths that skip the
 * lists (and, with the slabs off, every create): the right contents, the tensor's buffer aligned
 * to 256; with the slabs off each one a malloc block of its own, at least its size (the
 * registration below runs this case with PACKFN_NO_ALLOC_CACHE=1). */
static void* first_blocks(void* arg) {
  int off = *(const int*)arg;
  for (size_t ndim = 1; ndim <= 9; ++ndim) {
    int64_t dims[9];
    for (size_t i = 0; i < ndim; ++i)
      dims[i] = (int64_t)(i * 7 + ndim);
    pf_object_t* shape = NULL;
    ck_assert_int_eq(pf_shape_create(dims, ndim, &shape), 0);
    const int64_t* got;
    size_t n;
    ck_assert_int_eq(pf_shape_data(shape, &got, &n), 0);
    ck_assert_uint_eq(n, ndim);
    ck_assert_int_eq(memcmp(got, dims, ndim * sizeof *dims), 0);
    if (off) /* header (24), cell (16), extents */
      ck_assert_uint_ge(malloc_usable_size(shape), 40 + ndim * sizeof(int64_t));
    pf_object_release(shape);
  }
  for (int k = 0; k < 3; ++k) {
    int64_t shape[1] = {256};
    pf_object_t* t = NULL;
    ck_assert_int_eq(pf_tensor_empty(shape, 1, (DLDataType){kDLFloat, 32, 1}, PF_DEVICE_CPU, &t),
                     0);
    const DLTensor* dl = pf_tensor_dltensor(t);
    ck_assert_uint_eq((uintptr_t)dl->data % PF_TENSOR_ALIGNMENT, 0);
    fill(dl->data, 1024, (unsigned)k);
    ck_assert(intact(dl->data, 1024, (unsigned)k));
    if (off)
      ck_assert_uint_ge(malloc_usable_size(dl->data), 1024);
    pf_object_release(t);
  }
  return NULL;
}

START_TEST(test_first_blocks_of_a_thread) {
  int off = !slabs_on();
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, first_blocks, &off), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
}
END_TEST

#define ADD_CASE(s, fn)                                                                            \
  do {                                                                                             \
    TCase* tc_ = tcase_create(#fn);                                                                \
    tcase_set_timeout(tc_, 600);                                                                   \
    tcase_add_test(tc_, fn);                                                                       \
    suite_add_tcase(s, tc_);                                                                       \
  } while (0)

int main(void) {
  Suite* s = suite_create("alloc");
  ADD_CASE(s, test_slab_bytes_follow_use); /* first: no freed 48-byte block to reuse */
  ADD_CASE(s, test_every_size);
  ADD_CASE(s, test_cpu_buffers_aligned);
  ADD_CASE(s, test_zero_bytes_keep_the_list);
  ADD_CASE(s, test_first_blocks_of_a_thread);
  ADD_CASE(s, test_freed_by_other_threads);
  ADD_CASE(s, test_refills_from_half_free_spans);
  ADD_CASE(s, test_thread_exit_keeps_blocks);
  ADD_CASE(s, test_exiting_thread_gives_back_cut_blocks);
  ADD_CASE(s, test_threads_in_parallel);
  ADD_CASE(s, test_spans_given_back);
  ADD_CASE(s, test_spans_kept_then_bare);
  ADD_CASE(s, test_range_used_up);
  ADD_CASE(s, test_fork_while_allocating);
  ADD_CASE(s, test_shared_functions_own_a_line);
  SRunner* sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
