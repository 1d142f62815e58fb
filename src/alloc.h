/* Private: the per-thread block cache every object and small CPU buffer comes from. */
#ifndef PACKFN_SRC_ALLOC_H_
#define PACKFN_SRC_ALLOC_H_

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* ---- the per-thread block cache (src/alloc.c) ----
 * Every block starts with a 16-byte header (so the payload keeps malloc's alignment) holding
 * its size class. Classes are powers of two from 64 B to 64 KiB of total block size: objects
 * (40..400 bytes) and small CPU tensor buffers; larger blocks go straight to malloc. A thread
 * keeps at most 64 blocks of each class up to 1 KiB and 4 of each larger class (under 600 KiB
 * in all). The fast paths are inline here; misses, the first free of a thread and full classes
 * go to alloc.c. */
typedef struct pf__block_s {
  union {
    struct pf__block_s* next; /* while cached */
    uint64_t size_class;      /* while in use: index of its class, or PF__NO_CLASS */
  };
  uint64_t reserved;
} pf__block_t;

#define PF__NCLASS         11
#define PF__NO_CLASS       255u
#define PF__SMALL_CLASSES  5
#define PF__CACHE_DEPTH(c) ((c) < PF__SMALL_CLASSES ? 64u : 4u)

typedef struct {
  pf__block_t* head[PF__NCLASS];
  /* blocks of each class this thread may still cache: 0 until the first free decides (and
   * forever when caching is off), then the depth minus the blocks cached */
  int32_t room[PF__NCLASS];
  /* 1: caching on and the thread-exit flush registered; 0: not yet decided; -1: off */
  int state;
} pf__cache_t;

extern PF__TLS pf__cache_t pf__cache;

/* Out-of-line halves of pf__alloc and pf__free. */
void* pf__alloc_slow(size_t size, unsigned size_class);
void pf__free_slow(pf__block_t* block, unsigned size_class);

/* Class of a block of `total` bytes: 64 -> 0, 128 -> 1, ... 65536 -> 10, larger -> none. */
static inline unsigned pf__class_of(size_t total) {
  if (total <= 64)
    return 0;
  unsigned c = (unsigned)(64 - __builtin_clzll((unsigned long long)(total - 1))) - 6;
  return c < PF__NCLASS ? c : PF__NO_CLASS;
}

/* A block of class c from this thread's cache, or NULL when that class is empty (or c is
 * PF__NO_CLASS). */
static inline void* pf__cache_pop(unsigned c) {
  if (PF_LIKELY(c < PF__NCLASS)) {
    pf__block_t* b = pf__cache.head[c];
    if (PF_LIKELY(b != NULL)) {
      pf__cache.head[c] = b->next;
      pf__cache.room[c]++;
      b->size_class = c;
      return b + 1;
    }
  }
  return NULL;
}

/* Largest size pf__alloc serves: beyond half the address space nothing can be allocated. The
 * fast paths refuse sizes whose header would wrap the sum (issue 10, defect 1: a wrapped sum
 * would pick a small class); pf__alloc_slow refuses the rest beyond this. */
#define PF__ALLOC_MAX (SIZE_MAX / 2)

/* The cache half of pf__alloc: a block from this thread's cache, or NULL when the class is
 * empty (or the size has no class). Lets a hot constructor keep its miss path out of line. */
static inline void* pf__alloc_cached(size_t size) {
  size_t total; /* a size whose header would wrap the sum has no class: the carry says so */
  if (PF_UNLIKELY(__builtin_add_overflow(size, sizeof(pf__block_t), &total)))
    return NULL;
  return pf__cache_pop(pf__class_of(total));
}

/* Allocates `size` bytes (16-byte aligned, uninitialised) from the per-thread cache or malloc;
 * NULL when out of memory or `size` exceeds PF__ALLOC_MAX (nothing raised). Free with pf__free
 * only. */
static inline void* pf__alloc(size_t size) {
  size_t total; /* sizes beyond PF__ALLOC_MAX that do not wrap the sum fail in the slow half */
  if (PF_UNLIKELY(__builtin_add_overflow(size, sizeof(pf__block_t), &total)))
    return NULL;
  unsigned c = pf__class_of(total);
  void* p = pf__cache_pop(c);
  if (PF_LIKELY(p != NULL))
    return p;
  return pf__alloc_slow(size, c);
}

/* pf__free for a pointer known not to be NULL (object deleters). */
static inline void pf__free_nonnull(void* p) {
  pf__block_t* b = (pf__block_t*)p - 1;
  unsigned c = (unsigned)b->size_class;
  if (PF_LIKELY(c < PF__NCLASS && pf__cache.room[c] > 0)) {
    b->next = pf__cache.head[c];
    pf__cache.head[c] = b;
    pf__cache.room[c]--;
    return;
  }
  pf__free_slow(b, c);
}

/* Frees a block from pf__alloc (any thread may free any block); NULL is a no-op. */
static inline void pf__free(void* p) {
  if (p)
    pf__free_nonnull(p);
}

#endif /* PACKFN_SRC_ALLOC_H_ */
