/* Small-block allocation: size-class slabs in one reserved range of address space, with a free
 * list per thread and class in front and a depot of chains per class behind (see alloc.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "packfn/error.h"

#include "alloc.h"

PF__TLS pf__cache_t pf__cache;
uintptr_t pf__slab_base = PF__SLAB_NONE;
uint8_t pf__span_class[PF__SLAB_SPANS];

#define PF__SPAN_BYTES  ((size_t)1 << PF__SPAN_SHIFT)
#define PF__COMMIT_SPANS 32u /* address space is made accessible 2 MiB at a time */

static size_t pf__class_size(unsigned c) {
  if (c < 16)
    return 16u * (c + 1);
  if (c < 28)
    return 64u * (c - 11);
  return 256u * (c - 23);
}

/* A depot chain: blocks linked through their first word, the chain's first block holding the
 * next chain in its second word (every block has at least 16 bytes). */
typedef struct {
  pthread_mutex_t lock;
  void* chains;    /* stack of chains of freed blocks */
  char* cut;       /* next block never handed out, in the class's newest span */
  char* cut_end;   /* end of that span's last whole block */
} pf__class_t;

static pf__class_t pf__classes[PF__NCLASS];
static pthread_mutex_t pf__spans_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t pf__spans_next;      /* spans handed out so far (bump index) */
static uint32_t pf__spans_committed; /* spans made accessible */
static size_t pf__spans_given;       /* spans given to a class (for pf__alloc_slab_bytes) */

/* Whether the slabs are allowed in this process: off under AddressSanitizer, and when the
 * environment variable PACKFN_NO_ALLOC_CACHE is set (the valgrind test runs set it), so memory
 * checkers see every malloc/free and catch use-after-free of objects. */
static int pf__slab_allowed(void) {
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

static int pf__slab_on(void) {
  return __atomic_load_n(&pf__slab_base, __ATOMIC_ACQUIRE) != PF__SLAB_NONE;
}

static void pf__lock_all(void) {
  pthread_mutex_lock(&pf__spans_lock);
  for (unsigned c = 0; c < PF__NCLASS; ++c)
    pthread_mutex_lock(&pf__classes[c].lock);
}
static void pf__unlock_all(void) {
  for (unsigned c = PF__NCLASS; c-- > 0;)
    pthread_mutex_unlock(&pf__classes[c].lock);
  pthread_mutex_unlock(&pf__spans_lock);
}

/* Pushes a chain of blocks of class c (first block `head`) onto the class's depot. */
static void pf__depot_push(unsigned c, void* head) {
  pf__class_t* k = &pf__classes[c];
  pthread_mutex_lock(&k->lock);
  ((void**)head)[1] = k->chains;
  k->chains = head;
  pthread_mutex_unlock(&k->lock);
}

/* Every block of this thread's lists goes to the depots; frees after this take the slow path
 * (no room). */
static void pf__cache_flush(void) {
  for (unsigned c = 0; c < PF__NCLASS; ++c) {
    if (pf__cache.head[c])
      pf__depot_push(c, pf__cache.head[c]);
    pf__cache.head[c] = NULL;
    pf__cache.room[c] = 0;
  }
}

static pthread_key_t pf__cache_key;
static int pf__cache_key_made; /* 1 once pf__cache_key exists, until the library unloads */
static pthread_once_t pf__cache_once = PTHREAD_ONCE_INIT;

static void pf__cache_thread_exit(void* unused) {
  (void)unused;
  pf__cache_flush();
  pf__cache.state = -1; /* late frees in this thread's remaining destructors go to the depots */
}

static void pf__slab_init_once(void) {
  for (unsigned c = 0; c < PF__NCLASS; ++c)
    pthread_mutex_init(&pf__classes[c].lock, NULL);
  if (!pf__slab_allowed())
    return;
  /* Inaccessible, unaccounted address space; spans become accessible as they are needed. */
  size_t want = PF__SLAB_BYTES;
  void* raw = mmap(NULL, want + PF__SPAN_BYTES, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED)
    return; /* slabs off: every block is a malloc block */
  uintptr_t base = ((uintptr_t)raw + PF__SPAN_BYTES - 1) & ~(uintptr_t)(PF__SPAN_BYTES - 1);
  memset(pf__span_class, PF__NO_CLASS, sizeof pf__span_class);
  pf__cache_key_made = pthread_key_create(&pf__cache_key, pf__cache_thread_exit) == 0;
  if (!pf__cache_key_made) {
    munmap(raw, want + PF__SPAN_BYTES);
    return;
  }
  (void)pthread_atfork(pf__lock_all, pf__unlock_all, pf__unlock_all);
  __atomic_store_n(&pf__slab_base, base, __ATOMIC_RELEASE);
}

/* Decides this thread's state: 1 when the slabs are on (and registers the thread-exit flush),
 * else -1. */
static void pf__thread_init(void) {
  pthread_once(&pf__cache_once, pf__slab_init_once);
  if (pf__slab_on() &&
      pthread_setspecific(pf__cache_key, (void*)1) == 0) {
    pf__cache.state = 1;
    for (unsigned c = 0; c < PF__NCLASS; ++c) /* the lists are empty */
      pf__cache.room[c] = PF__LIST_MAX(c);
    return;
  }
  pf__cache.state = -1;
}

/* The main thread's lists are flushed at unload, and the key deleted so that, when a host
 * dlclose()s libpackfn while other threads that used it still run, their thread-exit flush (code
 * of this library) is not called after the unmapping (issue 10, defect 3). The range stays
 * reserved: objects still alive in other threads (or in the host) keep pointing into it. */
__attribute__((destructor)) static void pf__cache_fini(void) {
  if (pf__cache.state == 1)
    pf__cache_flush();
  pf__cache.state = -1;
  if (pf__cache_key_made) {
    (void)pthread_key_delete(pf__cache_key);
    pf__cache_key_made = 0;
  }
}

/* A fresh span for class c: its first byte, or NULL when the range is used up or cannot be made
 * accessible. */
static char* pf__span_new(unsigned c) {
  char* span = NULL;
  pthread_mutex_lock(&pf__spans_lock);
  uint32_t i = pf__spans_next;
  if (i < PF__SLAB_SPANS) {
    if (i == pf__spans_committed) {
      uint32_t n = PF__COMMIT_SPANS;
      if (mprotect((void*)(pf__slab_base + ((size_t)i << PF__SPAN_SHIFT)),
                   (size_t)n << PF__SPAN_SHIFT, PROT_READ | PROT_WRITE) == 0)
        pf__spans_committed += n;
    }
    if (i < pf__spans_committed) {
      pf__spans_next = i + 1;
      pf__spans_given++;
      pf__span_class[i] = (uint8_t)c;
      span = (char*)(pf__slab_base + ((size_t)i << PF__SPAN_SHIFT));
    }
  }
  pthread_mutex_unlock(&pf__spans_lock);
  return span;
}

/* A chain of free blocks of class c (from the depot, or cut from the class's span), its length in
 * *n; NULL when no slab memory is left. */
static void* pf__refill(unsigned c, uint32_t* n) {
  pf__class_t* k = &pf__classes[c];
  size_t size = pf__class_size(c);
  void* chain = NULL;
  pthread_mutex_lock(&k->lock);
  if (k->chains) {
    chain = k->chains;
    k->chains = ((void**)chain)[1];
    pthread_mutex_unlock(&k->lock);
    uint32_t len = 0;
    for (void* b = chain; b; b = *(void**)b)
      len++;
    *n = len;
    return chain;
  }
  if (k->cut == k->cut_end) {
    char* span = pf__span_new(c);
    if (!span) {
      pthread_mutex_unlock(&k->lock);
      *n = 0;
      return NULL;
    }
    k->cut = span;
    k->cut_end = span + (PF__SPAN_BYTES / size) * size;
  }
  /* at most half a list, so that the thread's next frees have room */
  uint32_t want = PF__LIST_MAX(c) / 2, len = 0;
  char* first = k->cut;
  void** link = NULL;
  while (len < want && k->cut != k->cut_end) {
    if (link)
      *link = k->cut;
    link = (void**)k->cut;
    k->cut += size;
    len++;
  }
  *link = NULL;
  pthread_mutex_unlock(&k->lock);
  *n = len;
  return first;
}

void* pf__alloc_slow(size_t size, unsigned c) {
  if (size > PF__ALLOC_MAX) /* nothing that large can be allocated */
    return NULL;
  if (pf__cache.state == 0)
    pf__thread_init();
  if (c < PF__NCLASS && pf__slab_on()) {
    uint32_t n;
    void* b = pf__refill(c, &n);
    if (b) {
      void* rest = *(void**)b;
      if (pf__cache.state == 1) { /* this thread's list of class c is empty: the rest is it */
        pf__cache.head[c] = rest;
        pf__cache.room[c] = PF__LIST_MAX(c) - (n - 1);
      } else if (rest) {
        pf__depot_push(c, rest);
      }
      return b;
    }
    /* the range is used up: malloc serves, and pf__free tells its blocks apart */
  }
  return malloc(size ? size : 1);
}

void pf__free_slow(void* p, unsigned c) {
  if (c >= PF__NCLASS) {
    free(p);
    return;
  }
  if (pf__cache.state == 0)
    pf__thread_init();
  if (pf__cache.state == 1) {
    if (pf__cache.room[c] == 0) { /* the list is full: its older half goes to the depot */
      uint32_t keep = PF__LIST_MAX(c) / 2;
      void* b = pf__cache.head[c];
      for (uint32_t i = 1; i < keep && b; ++i)
        b = *(void**)b;
      if (b && *(void**)b) {
        pf__depot_push(c, *(void**)b);
        *(void**)b = NULL;
      }
      pf__cache.room[c] = PF__LIST_MAX(c) - keep;
    }
    *(void**)p = pf__cache.head[c];
    pf__cache.head[c] = p;
    pf__cache.room[c]--;
    return;
  }
  *(void**)p = NULL; /* thread exiting: a chain of one block */
  pf__depot_push(c, p);
}

void* pf__alloc_aligned_slow(size_t size, size_t alignment) {
  if (size == 0)
    size = 1;
  if (alignment <= 16)
    return pf__alloc(size);
  if (alignment <= 256 && size <= PF__SLAB_MAX) {
    if (pf__cache.state == 0)
      pf__thread_init();
    if (pf__slab_on()) {
      size_t rounded = (size + alignment - 1) & ~(alignment - 1);
      void* p = pf__alloc_slow(rounded, pf__class_of(rounded));
      if (p && ((uintptr_t)p & (alignment - 1)) == 0)
        return p;
      pf__free(p); /* a malloc block after the range ran out: aligned below */
    }
  }
  if (size > PF__ALLOC_MAX)
    return NULL;
  void* p = NULL;
  if (posix_memalign(&p, alignment, size) != 0)
    return NULL;
  return p;
}

size_t pf__alloc_slab_bytes(void) {
  pthread_mutex_lock(&pf__spans_lock);
  size_t n = pf__spans_given << PF__SPAN_SHIFT;
  pthread_mutex_unlock(&pf__spans_lock);
  return n;
}
