/* Small-object allocation: a per-thread cache of freed blocks in a few size classes in front of
 * malloc, so creating and releasing short-lived objects (strings, errors, functions) is cheap. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/error.h"

#include "alloc.h"

static const size_t pf__class_size[PF__NCLASS] = {64,   128,  256,   512,   1024, 2048,
                                                  4096, 8192, 16384, 32768, 65536};

PF__TLS pf__cache_t pf__cache;

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
    pf__cache.room[c] = 0; /* callers that keep caching on refill it */
  }
}

static pthread_key_t pf__cache_key;
static int pf__cache_key_made; /* 1 once pf__cache_key exists, until the library unloads */
static pthread_once_t pf__cache_once = PTHREAD_ONCE_INIT;
static int pf__cache_process_allowed;

static void pf__cache_thread_exit(void* unused) {
  (void)unused;
  pf__cache_flush();
  pf__cache.state = -1; /* late frees in this thread's remaining destructors go to free() */
}
static void pf__cache_init_once(void) {
  pf__cache_process_allowed = pf__cache_allowed();
  pf__cache_key_made = pthread_key_create(&pf__cache_key, pf__cache_thread_exit) == 0;
}

/* The main thread's cache is flushed at exit so leak checkers see a clean heap. The key is
 * deleted so that, when a host dlclose()s libpackfn while other threads that used it still
 * run, their thread-exit flush (code of this library) is not called after the unmapping
 * (issue 10, defect 3); those threads' cached blocks are then never freed. */
__attribute__((destructor)) static void pf__cache_fini(void) {
  pf__cache_flush();
  pf__cache.state = -1;
  if (pf__cache_key_made) {
    (void)pthread_key_delete(pf__cache_key);
    pf__cache_key_made = 0;
  }
}

void* pf__alloc_slow(size_t size, unsigned c) {
  pf__block_t* b;
  if (size > PF__ALLOC_MAX) /* nothing that large can be allocated; the sum below cannot wrap */
    return NULL;
  if (c != PF__NO_CLASS)
    b = malloc(pf__class_size[c]); /* the class's cache is empty */
  else
    b = malloc(size + sizeof(pf__block_t));
  if (!b)
    return NULL;
  b->size_class = c;
  return b + 1;
}

/* First free of a thread, or caching off, or its class full: decide and register. */
void pf__free_slow(pf__block_t* b, unsigned c) {
  if (pf__cache.state == 0) {
    pthread_once(&pf__cache_once, pf__cache_init_once);
    if (pf__cache_process_allowed) {
      (void)pthread_setspecific(pf__cache_key, (void*)1);
      pf__cache.state = 1;
      for (unsigned k = 0; k < PF__NCLASS; ++k)
        pf__cache.room[k] = (int32_t)PF__CACHE_DEPTH(k);
    } else {
      pf__cache.state = -1;
    }
  }
  if (c < PF__NCLASS && pf__cache.room[c] > 0) {
    b->next = pf__cache.head[c];
    pf__cache.head[c] = b;
    pf__cache.room[c]--;
    return;
  }
  free(b);
}
