/* Small-object allocation: a per-thread cache of freed blocks in a few size classes in front of
 * malloc, so creating and releasing short-lived objects (strings, errors, functions) is cheap. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Every block starts with this header (16 bytes, so the payload keeps malloc's alignment). */
typedef struct pf__block_s {
  union {
    struct pf__block_s* next; /* while cached */
    uint64_t size_class;      /* while in use: index of its class, or PF__NO_CLASS */
  };
  uint64_t reserved;
} pf__block_t;

/* Classes by total block size, powers of two from 64 B to 64 KiB: objects (40..400 bytes) and
 * small CPU tensor buffers. Larger blocks go straight to malloc. A thread keeps at most 64
 * blocks of each class up to 1 KiB and 4 of each larger class: under 600 KiB in all. */
#define PF__NCLASS         11
#define PF__NO_CLASS       255u
#define PF__SMALL_CLASSES  5
#define PF__CACHE_DEPTH(c) ((c) < PF__SMALL_CLASSES ? 64u : 4u)
static const size_t pf__class_size[PF__NCLASS] = {64,   128,  256,   512,   1024, 2048,
                                                  4096, 8192, 16384, 32768, 65536};

typedef struct {
  pf__block_t* head[PF__NCLASS];
  uint32_t count[PF__NCLASS];
  /* 1: caching on and the thread-exit flush registered; 0: not yet decided; -1: off */
  int state;
} pf__cache_t;

static PF__TLS pf__cache_t pf__cache;

/* Whether caching is allowed in this process: off under AddressSanitizer, and when the
 * environment variable PACKFN_NO_ALLOC_CACHE is set (the valgrind test runs set it), so memory
 * checkers see every malloc/free and catch use-after-free of objects. */
static int pf__cache_allowed(void) {
#if defined(PF_NO_ALLOC_CACHE) || defined(__SANITIZE_ADDRESS__)
  return 0;
#else
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  return 0;
#endif
#endif
  const char* env = getenv("PACKFN_NO_ALLOC_CACHE");
  return !(env && *env && strcmp(env, "0") != 0);
#endif
}

static void pf__cache_flush(void) {
  for (int c = 0; c < PF__NCLASS; ++c) {
    pf__block_t* b = pf__cache.head[c];
    while (b) {
      pf__block_t* next = b->next;
      free(b);
      b = next;
    }
    pf__cache.head[c] = NULL;
    pf__cache.count[c] = 0;
  }
}

static pthread_key_t pf__cache_key;
static pthread_once_t pf__cache_once = PTHREAD_ONCE_INIT;
static int pf__cache_process_allowed;

static void pf__cache_thread_exit(void* unused) {
  (void)unused;
  pf__cache_flush();
  pf__cache.state = -1; /* late frees in this thread's remaining destructors go to free() */
}
static void pf__cache_init_once(void) {
  pf__cache_process_allowed = pf__cache_allowed();
  (void)pthread_key_create(&pf__cache_key, pf__cache_thread_exit);
}

/* The main thread's cache is flushed at exit so leak checkers see a clean heap. */
__attribute__((destructor)) static void pf__cache_fini(void) {
  pf__cache_flush();
  pf__cache.state = -1;
}

/* Class of a block of `total` bytes: 64 -> 0, 128 -> 1, ... 1024 -> 4, larger -> none. */
static inline unsigned pf__class_of(size_t total) {
  if (total <= 64)
    return 0;
  unsigned c = (unsigned)(64 - __builtin_clzll((unsigned long long)(total - 1))) - 6;
  return c < PF__NCLASS ? c : PF__NO_CLASS;
}

void* pf__alloc(size_t size) {
  size_t total = size + sizeof(pf__block_t);
  unsigned c = pf__class_of(total);
  pf__block_t* b;
  if (PF__LIKELY(c != PF__NO_CLASS)) {
    b = pf__cache.head[c];
    if (PF__LIKELY(b != NULL)) {
      pf__cache.head[c] = b->next;
      pf__cache.count[c]--;
    } else {
      b = malloc(pf__class_size[c]);
    }
  } else {
    b = total > size ? malloc(total) : NULL;
  }
  if (!b)
    return NULL;
  b->size_class = c;
  return b + 1;
}

/* First free of a thread, or caching off, or its class full: decide and register. */
__attribute__((noinline)) static void pf__free_slow(pf__block_t* b, unsigned c) {
  if (pf__cache.state == 0) {
    pthread_once(&pf__cache_once, pf__cache_init_once);
    if (pf__cache_process_allowed) {
      (void)pthread_setspecific(pf__cache_key, (void*)1);
      pf__cache.state = 1;
    } else {
      pf__cache.state = -1;
    }
  }
  if (pf__cache.state == 1 && c != PF__NO_CLASS && pf__cache.count[c] < PF__CACHE_DEPTH(c)) {
    b->next = pf__cache.head[c];
    pf__cache.head[c] = b;
    pf__cache.count[c]++;
    return;
  }
  free(b);
}

void pf__free(void* p) {
  if (!p)
    return;
  pf__block_t* b = (pf__block_t*)p - 1;
  unsigned c = (unsigned)b->size_class;
  if (PF__LIKELY(c < PF__NCLASS && pf__cache.state > 0 &&
                 pf__cache.count[c] < PF__CACHE_DEPTH(c))) {
    b->next = pf__cache.head[c];
    pf__cache.head[c] = b;
    pf__cache.count[c]++;
    return;
  }
  pf__free_slow(b, c);
}
