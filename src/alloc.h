/* Private: the small-block allocator every object and small CPU buffer comes from. */
#ifndef PACKFN_SRC_ALLOC_H_
#define PACKFN_SRC_ALLOC_H_

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

/* ---- size-class slabs with per-thread free lists (src/alloc.c) ----
 * Blocks carry no header. At first use the process reserves one range of address space
 * (PF__SLAB_RESERVE bytes, inaccessible until used) and cuts it into 64 KiB spans; each span in
 * use holds blocks of one size class, recorded in pf__span_class[span number]. A block's class
 * is therefore found from its address, and an address outside the range is a malloc block
 * (pf__free passes it to free()). Classes: 16..256 bytes in steps of 16, 320..1024 in steps of
 * 64, 1280..4096 in steps of 256; a block is aligned to its size's lowest set bit (16, 64 or
 * 256 at least). Larger sizes go to malloc.
 *
 * Each thread keeps a free list per class (at most PF__LIST_MAX blocks); a full list passes
 * its older half to the class's depot, where each block goes onto its span's free list, and an
 * empty one takes up to half a list from one span's depot list, or else cuts up to as many fresh
 * blocks from the class's newest span, which the thread hands out in address order once its list
 * is empty (both under the class's mutex). A span all of whose blocks are in the
 * depot is given back, to any class; beyond 256 MiB of such spans, those free for a second give
 * their pages to the system.
 * Any thread may free any block. When the slabs are off (AddressSanitizer, PF_NO_ALLOC_CACHE,
 * PACKFN_NO_ALLOC_CACHE set, or no address space could be reserved) every block is a plain
 * malloc of the exact size. */

#define PF__NCLASS      40
#define PF__NO_CLASS    255u
#define PF__SLAB_MAX    4096u      /* largest size served from slabs */
#define PF__SPAN_SHIFT  16         /* 64 KiB spans */
#define PF__SLAB_SPANS  (1u << 17) /* spans in the reserved range */
#define PF__LIST_MAX(c) ((c) < 28 ? 256u : 32u)

/* Largest size pf__alloc serves: beyond half the address space nothing can be allocated. */
#define PF__ALLOC_MAX (SIZE_MAX / 2)

/* Classes whose cut blocks a thread hands out in address order (pf__bump_t): those up to 256
 * bytes, every object header's (function, closure, string, view). */
#define PF__BUMP_CLASSES 16u

/* Blocks of one class never handed out, cut from a span for this thread: as offsets from
 * pf__slab_base in 16-byte units (the range is 2^33 bytes), next, next + the class's size, ...
 * up to end (next == end: none). Handed out in address order without being linked first: a
 * refill that linked fresh blocks wrote to every one of them before its first use, a pass over
 * memory no longer in the caches that nothing else overlapped (1 M views alive, each released
 * and made again: 23 ns per create, against 14 ns handed out in order). Offsets, not pointers,
 * keep the thread-local block small (see docs/object.md, "Thread-local storage"). */
typedef struct {
  uint32_t next;
  uint32_t end;
} pf__bump_t;

typedef struct {
  void* head[PF__NCLASS]; /* free blocks; each holds the next one in its first word */
  /* blocks each list may still take: 0 until the thread's first free registers its exit flush
   * (and forever when the slabs are off or the thread is exiting), then PF__LIST_MAX(c) minus
   * the blocks listed */
  uint16_t room[PF__NCLASS];
  /* 1: slabs on and the thread-exit flush registered; 0: not yet decided; -1: off */
  int state;
  pf__bump_t bump[PF__BUMP_CLASSES]; /* taken from once the list is empty */
  /* Not the allocator's: device.c's flag that this thread's current streams left TVM-FFI's
   * table (pf__env_retire), kept in this struct's tail padding so that the thread-local block
   * does not grow (a byte of its own took 8 more: docs/object.md, "Thread-local storage") */
  unsigned char streams_retired;
} pf__cache_t;

extern PF__TLS pf__cache_t pf__cache;
/* The reserved range: [pf__slab_base, pf__slab_base + PF__SLAB_BYTES), of which the first
 * spans are reserved (all of them, or fewer under an address-space limit: alloc.c); the others
 * never get a class, so addresses there read as no slab's. While the slabs are off
 * (or not yet set up) the base is PF__SLAB_NONE, 2^63, from which every user-space address lies
 * more than PF__SLAB_BYTES away. Written once, before the first slab block exists. */
#define PF__SLAB_BYTES ((size_t)PF__SLAB_SPANS << PF__SPAN_SHIFT)
#define PF__SLAB_NONE  ((uintptr_t)1 << 63)
/* hidden: read with one instruction, not through the GOT (the free path reads it) */
extern __attribute__((visibility("hidden"))) uintptr_t pf__slab_base;
/* The class of each span of the range (PF__NO_CLASS while free). */
extern __attribute__((visibility("hidden"))) uint8_t pf__span_class[PF__SLAB_SPANS];

/* Out-of-line halves of pf__alloc and pf__free. */
void* pf__alloc_slow(size_t size, unsigned size_class);
void pf__free_slow(void* block, unsigned size_class);
/* pf__free of a block outside the reserved range (a malloc block). */
void pf__free_outside(void* block);

/* Class of a block of `size` bytes, or PF__NO_CLASS above PF__SLAB_MAX. */
static inline unsigned pf__class_of(size_t size) {
  if (size <= 256)
    return size <= 16 ? 0u : (unsigned)((size - 1) >> 4);
  if (size <= 1024)
    return 12u + (unsigned)((size - 1) >> 6); /* 257..320 -> 16 */
  if (size <= PF__SLAB_MAX)
    return 24u + (unsigned)((size - 1) >> 8); /* 1025..1280 -> 28 */
  return PF__NO_CLASS;
}

/* The next of this thread's cut blocks of class c (< PF__BUMP_CLASSES), or NULL. */
static inline void* pf__bump_pop(unsigned c) {
  uint32_t at = pf__cache.bump[c].next;
  if (at == pf__cache.bump[c].end)
    return NULL;
  pf__cache.bump[c].next = at + c + 1; /* the class's size in 16-byte units */
  return (char*)pf__slab_base + ((size_t)at << 4);
}

/* A free block of class c from this thread's list, else from its cut blocks (pf__bump_t); NULL
 * when both are empty (or c is PF__NO_CLASS). */
static inline void* pf__cache_pop(unsigned c) {
  if (PF_LIKELY(c < PF__NCLASS)) {
    void* b = pf__cache.head[c];
    if (PF_LIKELY(b != NULL)) {
      void* next = *(void**)b;
      pf__cache.head[c] = next;
      pf__cache.room[c]++;
      /* the next allocation's block: its line is fetched while the caller fills this one (with
       * many objects alive freed blocks are rarely in the cache) */
      __builtin_prefetch(next, 1);
      return b;
    }
    if (c < PF__BUMP_CLASSES)
      return pf__bump_pop(c);
  }
  return NULL;
}

/* The list half of pf__alloc: a block from this thread's list, or NULL when it is empty (or
 * the size has no class). Lets a hot constructor keep its miss path out of line. */
static inline void* pf__alloc_cached(size_t size) {
  return pf__cache_pop(pf__class_of(size));
}

/* Allocates `size` bytes (16-byte aligned, uninitialised); NULL when out of memory or `size`
 * exceeds PF__ALLOC_MAX (nothing raised). Free with pf__free only. */
static inline void* pf__alloc(size_t size) {
  unsigned c = pf__class_of(size);
  void* p = pf__cache_pop(c);
  if (PF_LIKELY(p != NULL))
    return p;
  return pf__alloc_slow(size, c);
}

void* pf__alloc_malloc_edge(size_t size);
/* A malloc block of `size` bytes (at least 1), or NULL (also beyond PF__ALLOC_MAX). */
static inline void* pf__alloc_malloc(size_t size) {
  /* one compare on the way to malloc (1..PF__ALLOC_MAX): the memory-checker mode takes every
   * block here; 0 and the sizes too large out of line */
  if (PF_LIKELY(size - 1 < PF__ALLOC_MAX))
    return malloc(size);
  return pf__alloc_malloc_edge(size);
}

/* pf__alloc after pf__alloc_cached found this thread's list empty: malloc at once while the
 * slabs are off for this thread (the memory-checker mode), else pf__alloc_slow. */
static inline void* pf__alloc_uncached(size_t size) {
  if (pf__cache.state < 0)
    return pf__alloc_malloc(size);
  return pf__alloc_slow(size, pf__class_of(size));
}

void* pf__alloc_aligned_slow(size_t size, size_t alignment);

/* Allocates `size` bytes aligned to `alignment` (a power of two); NULL when out of memory
 * (nothing raised). Free with pf__free. Up to 4 KiB and an alignment of 256 a slab block of a
 * class whose size is a multiple of the alignment: its blocks, at multiples of their size from a
 * 64 KiB boundary, are all aligned. */
static inline void* pf__alloc_aligned(size_t size, size_t alignment) {
  if (PF_LIKELY(size - 1 < PF__SLAB_MAX && alignment <= 256)) {
    void* p = pf__cache_pop(pf__class_of((size + alignment - 1) & ~(alignment - 1)));
    if (PF_LIKELY(p != NULL))
      return p;
  }
  return pf__alloc_aligned_slow(size, alignment);
}

/* pf__free for a pointer known not to be NULL (object deleters). */
static inline void pf__free_nonnull(void* p) {
  uintptr_t off = (uintptr_t)p - __atomic_load_n(&pf__slab_base, __ATOMIC_ACQUIRE);
  if (PF_UNLIKELY(off >= PF__SLAB_BYTES)) {
    pf__free_outside(p); /* a malloc block: its own call, which takes no class */
    return;
  }
  unsigned c = pf__span_class[off >> PF__SPAN_SHIFT]; /* PF__NO_CLASS in unused spans */
  if (PF_LIKELY(c < PF__NCLASS && pf__cache.room[c] > 0)) {
    *(void**)p = pf__cache.head[c];
    pf__cache.head[c] = p;
    pf__cache.room[c]--;
    return;
  }
  pf__free_slow(p, c);
}

/* Frees a block from pf__alloc or pf__alloc_aligned (any thread may free any block); NULL is a
 * no-op. */
static inline void pf__free(void* p) {
  if (p)
    pf__free_nonnull(p);
}

/* 1 when blocks are plain malloc blocks of their size (slabs off: under AddressSanitizer, with
 * PACKFN_NO_ALLOC_CACHE set, or when the address range could not be reserved), so that memory
 * checkers see each one with its exact bounds; 0 with the slabs on. Sets the slabs up if no
 * thread has yet. */
int pf__alloc_slabs_off(void);

/* fork(): the allocator's locks, taken last before a fork and given back after it in parent
 * and child (from the one set of handlers in global.c, which takes the other locks first). */
void pf__alloc_fork_lock(void);
void pf__alloc_fork_unlock(void);
/* Registers the process's fork handlers once (alloc.c holds them: every program using packfn
 * links alloc.c, while a static link may leave out the layers it does not use; each layer's
 * locks are reached through weak references). 1 when they are registered. */
int pf__fork_handlers(void);
/* 1 when packfn's code lies in a shared object a host may unmap with dlclose (packfn linked
 * statically into a library), 0 when it is part of the main program or of the shared
 * libpackfn (never unmapped): the unload destructors delete their thread keys only then. */
int pf__code_unmappable(void);
/* The dynamic loader's counts of objects loaded and unloaded since the process started
 * (dl_iterate_phdr's dlpi_adds and dlpi_subs), each ~0 where they cannot be read. Takes no
 * packfn lock: dl_iterate_phdr takes the loader's list lock, which a library constructor
 * running inside another thread's dlopen may take too, so call it holding none. */
void pf__loader_counts(unsigned long long* adds, unsigned long long* subs);

/* Bytes of address space the slabs hold now (spans given to a class, whether their blocks are
 * in use or free), for benchmarks. */
PF_API size_t pf__alloc_slab_bytes(void);

/* For tests: sets how many spans given back keep their pages whatever their age (`keep`) and,
 * beyond those, for how long (`decay_ms`); UINT32_MAX leaves a setting as it is. The kept spans'
 * count goes to *kept (when not NULL). The defaults: 4096 spans (256 MiB), 1000 ms. */
PF_API void pf__alloc_test_pool(uint32_t keep, uint32_t decay_ms, uint32_t* kept);

/* For tests: lets the size classes hold at most `more` spans beyond those they hold now
 * (UINT32_MAX: the whole range again), so that the range running out, and malloc serving
 * instead, can be tested. Returns the spans held now. */
PF_API uint32_t pf__alloc_test_limit_spans(uint32_t more);

#endif /* PACKFN_SRC_ALLOC_H_ */
