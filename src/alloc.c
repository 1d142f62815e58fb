/* Small-block allocation: size-class slabs in one reserved range of address space, with a free
 * list per thread and class in front and, behind, a depot that keeps each span's free blocks on
 * the span's own list and gives a span back once all its blocks are free (see alloc.h). */
#include <link.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "packfn/error.h"

#include "alloc.h"
#include "module_private.h"

/* where this file's state (allocator) lives, for pf_module_load (module_private.h) */
PF__MARKER const char pf__marker_alloc = 0;

PF__TLS pf__cache_t pf__cache;
uintptr_t pf__slab_base = PF__SLAB_NONE;
uint8_t pf__span_class[PF__SLAB_SPANS];

#define PF__SPAN_BYTES   ((size_t)1 << PF__SPAN_SHIFT)
#define PF__COMMIT_SPANS 32u /* address space is made accessible 2 MiB at a time */

static size_t pf__class_size(unsigned c) {
  if (c < 16)
    return 16u * (c + 1); /* so in 16-byte units c + 1 (pf__bump_pop) */
  if (c < 28)
    return 64u * (c - 11);
  return 256u * (c - 23);
}

#define PF__NONE UINT32_MAX

/* Each span in use keeps the blocks of its class that are in the depot (freed, on no thread's
 * list) on a free list of its own; the spans with such blocks form the class's partial list. */
typedef struct {
  void* free;        /* depot blocks of this span, linked through their first word */
  uint32_t nfree;    /* how many */
  uint32_t prev;     /* in the class's partial list, or PF__NONE; once given back, in the list */
  uint32_t next;     /* of kept spans (next only: in the stack of bare ones) */
  uint32_t freed_ms; /* given back then (pf__now_ms), while kept */
} pf__span_t;

typedef struct {
  pthread_mutex_t lock;
  uint32_t partial; /* first span with depot blocks, or PF__NONE */
  char* cut;        /* next block never handed out, in the class's newest span */
  char* cut_end;    /* end of that span's last whole block */
} pf__class_t;

static pf__class_t pf__classes[PF__NCLASS];
static pf__span_t
    pf__spans[PF__SLAB_SPANS]; /* under its class's lock; given back, pf__spans_lock */
static pthread_mutex_t pf__spans_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t pf__spans_next;      /* spans handed out so far (bump index) */
static uint32_t pf__spans_committed; /* spans made accessible */
static size_t pf__spans_given;       /* spans given to a class (for pf__alloc_slab_bytes) */
static size_t pf__spans_limit = PF__SLAB_SPANS;      /* most spans held at once (tests lower it) */
static uint32_t pf__spans_reserved = PF__SLAB_SPANS; /* spans of the range reserved */
/* Spans given back, under pf__spans_lock: those that still hold their pages ("kept": a list
 * through pf__spans[].prev/next, newest first) and those whose pages went back to the system
 * ("bare": a stack through pf__spans[].next). A span given back is kept, so a program that frees
 * many objects and makes as many again soon after finds the pages still there (no madvise on the
 * way back, no page faults on the way out). Whenever a span is given back, the oldest kept spans
 * beyond pf__pool_keep that have been free for pf__pool_decay_ms give their pages back, and
 * beyond PF__POOL_CAP at once. A program that frees much and then frees nothing more keeps those
 * pages until it does, as glibc keeps the chunks given back to it. */
static uint32_t pf__kept_head = PF__NONE, pf__kept_tail = PF__NONE;
static uint32_t pf__kept_count;
static uint32_t pf__bare_head = PF__NONE;
static uint32_t pf__pool_keep = 4096u;     /* kept spans of any age (256 MiB); tests change it */
static uint32_t pf__pool_decay_ms = 1000u; /* beyond those, how long a span stays kept */
/* spans made bare per span given back, at most */
#define PF__PURGE_MAX 64u
/* kept spans at most, whatever their age (4 GiB) */
#define PF__POOL_CAP 65536u

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

static void pf__slab_init_once(void);
static pthread_once_t pf__cache_once = PTHREAD_ONCE_INIT;
static pthread_once_t pf__locks_once = PTHREAD_ONCE_INIT;

static void pf__locks_init(void) {
  for (unsigned c = 0; c < PF__NCLASS; ++c) {
    pthread_mutex_init(&pf__classes[c].lock, NULL);
    pf__classes[c].partial = PF__NONE;
  }
}

/* Sets the slabs up (or decides they stay off) once per process; waits for a set-up under way. */
static void pf__slab_setup(void) {
  pthread_once(&pf__cache_once, pf__slab_init_once);
}

int pf__alloc_slabs_off(void) {
  pf__slab_setup();
  return !pf__slab_on();
}

/* Lock order: a class's lock, then the spans' lock. */
static void pf__lock_all(void) {
  for (unsigned c = 0; c < PF__NCLASS; ++c)
    pthread_mutex_lock(&pf__classes[c].lock);
  pthread_mutex_lock(&pf__spans_lock);
}
static void pf__unlock_all(void) {
  pthread_mutex_unlock(&pf__spans_lock);
  for (unsigned c = PF__NCLASS; c-- > 0;)
    pthread_mutex_unlock(&pf__classes[c].lock);
}

static void pf__span_return(uint32_t i);

/* Every lock, whether the slabs are set up yet or not: deciding from pf__slab_base let a thread
 * that set them up after that read be inside a class's lock when fork() ran, and the child then
 * waited on it forever. pthread_once first: it waits for a set-up of the locks under way (not
 * the range's reservation, which a fork must not make for a process that allocated nothing). */
void pf__alloc_fork_lock(void) {
  pthread_once(&pf__locks_once, pf__locks_init);
  pf__lock_all();
}

void pf__alloc_fork_unlock(void) {
  pf__unlock_all();
}

/* ---- fork ----
 * One set of handlers for every lock a packfn call may hold, so that a child forked while
 * another thread held one finds it free. They live here, not with the global table, because a
 * static link of packfn (libpackfn.a) takes only the objects a program uses, and a program that
 * never touches the global table still allocates (found by review: without global.c no
 * handler was registered and children hung on a class lock). The locks are taken in the order
 * the code nests them: the join (tvm.c), the type registry (type.c), the lock around calls
 * into TVM-FFI's table (tvm.c), the table's writers and readers (global.c), the functions' side
 * table, the device allocator table, the backtrace frame-name cache (errors raised under the
 * locks above reach it), the allocator's classes. Each lock is taken by a handler in the file
 * that defines it (a review found the type registry's taken by global.c's: a program using the
 * registry without the global table forked children that hung in it). A layer the program
 * does not link has no locks to take: its weak reference is NULL.
 * glibc forgets a library's handlers when it is unloaded (they are tied to its DSO). */
void pf__tvm_fork_lock(void) __attribute__((weak));
void pf__tvm_fork_unlock(void) __attribute__((weak));
void pf__types_fork_lock(void) __attribute__((weak));
void pf__types_fork_unlock(void) __attribute__((weak));
void pf__tvm_table_fork_lock(void) __attribute__((weak));
void pf__tvm_table_fork_unlock(void) __attribute__((weak));
void pf__global_fork_lock(void) __attribute__((weak));
void pf__global_fork_unlock(void) __attribute__((weak));
void pf__global_fork_child(void) __attribute__((weak));
void pf__function_fork_lock(void) __attribute__((weak));
void pf__function_fork_unlock(void) __attribute__((weak));
void pf__device_fork_lock(void) __attribute__((weak));
void pf__device_fork_unlock(void) __attribute__((weak));
void pf__backtrace_fork_lock(void) __attribute__((weak));
void pf__backtrace_fork_unlock(void) __attribute__((weak));

/* Each part in lock order; `child`, where set, takes `unlock`'s place in the child. */
typedef struct {
  void (*lock)(void);
  void (*unlock)(void);
  void (*child)(void);
} pf__fork_part_t;

static const pf__fork_part_t pf__fork_parts[] = {
    {pf__tvm_fork_lock, pf__tvm_fork_unlock, NULL},
    {pf__types_fork_lock, pf__types_fork_unlock, NULL},
    {pf__tvm_table_fork_lock, pf__tvm_table_fork_unlock, NULL},
    /* the child drops the other threads' reader records, then unlocks */
    {pf__global_fork_lock, pf__global_fork_unlock, pf__global_fork_child},
    {pf__function_fork_lock, pf__function_fork_unlock, NULL},
    {pf__device_fork_lock, pf__device_fork_unlock, NULL},
    {pf__backtrace_fork_lock, pf__backtrace_fork_unlock, NULL},
    {pf__alloc_fork_lock, pf__alloc_fork_unlock, NULL},
};

static void pf__fork_prepare(void) {
  for (size_t i = 0; i < sizeof pf__fork_parts / sizeof pf__fork_parts[0]; ++i)
    if (pf__fork_parts[i].lock)
      pf__fork_parts[i].lock();
}

/* Unlocks in the reverse order; in the child, a part's `child` instead where it has one. */
static void pf__fork_release(int child) {
  for (size_t i = sizeof pf__fork_parts / sizeof pf__fork_parts[0]; i-- > 0;) {
    const pf__fork_part_t* part = &pf__fork_parts[i];
    void (*release)(void) = child && part->child ? part->child : part->unlock;
    if (release)
      release();
  }
}

static void pf__fork_parent(void) {
  pf__fork_release(0);
}

static void pf__fork_child(void) {
  pf__fork_release(1);
}

static pthread_once_t pf__fork_once = PTHREAD_ONCE_INIT;
static int pf__fork_ok;

static void pf__fork_register(void) {
  pf__fork_ok = pthread_atfork(pf__fork_prepare, pf__fork_parent, pf__fork_child) == 0;
}

int pf__fork_handlers(void) {
  pthread_once(&pf__fork_once, pf__fork_register);
  return pf__fork_ok;
}

/* At load, so that a fork before any packfn call finds the locks handled too. */
__attribute__((constructor)) static void pf__fork_register_at_load(void) {
  (void)pf__fork_handlers();
}

/* ---- where packfn's code lives ---- */

#ifndef PF_PINNED
/* dl_iterate_phdr reports the main program first: 1 when `data` (an address of this file's
 * code) lies in one of its loaded segments, 2 when not; either ends the walk. */
static int pf__in_program(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  uintptr_t at = (uintptr_t)data;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && at - lo < ph->p_memsz)
      return 1;
  }
  return 2;
}
#endif

static int pf__loader_counts_of(struct dl_phdr_info* info, size_t size, void* out) {
  unsigned long long* c = out;
  int known = size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs;
  c[0] = known ? info->dlpi_adds : ~0ull;
  c[1] = known ? info->dlpi_subs : ~0ull;
  return 1; /* the counts are the same in every entry: the first will do */
}

void pf__loader_counts(unsigned long long* adds, unsigned long long* subs) {
  unsigned long long c[2] = {~0ull, ~0ull};
  dl_iterate_phdr(pf__loader_counts_of, c);
  if (adds)
    *adds = c[0];
  if (subs)
    *subs = c[1];
}

int pf__code_unmappable(void) {
#ifdef PF_PINNED
  return 0; /* the shared libpackfn: linked -z nodelete */
#else
  /* no packfn lock is held by the destructors that ask (the loader's own lock may be) */
  return dl_iterate_phdr(pf__in_program, (void*)(uintptr_t)pf__code_unmappable) != 1;
#endif
}

static size_t pf__span_index(const void* p) {
  return ((uintptr_t)p - pf__slab_base) >> PF__SPAN_SHIFT;
}

/* The address of span i (pf__span_index's inverse). */
static char* pf__span_at(uint32_t i) {
  return (char*)(pf__slab_base + ((size_t)i << PF__SPAN_SHIFT));
}

/* Takes span i off the kept spans' list. Under pf__spans_lock. */
static void pf__kept_remove(uint32_t i) {
  pf__span_t* s = &pf__spans[i];
  if (s->prev != PF__NONE)
    pf__spans[s->prev].next = s->next;
  else
    pf__kept_head = s->next;
  if (s->next != PF__NONE)
    pf__spans[s->next].prev = s->prev;
  else
    pf__kept_tail = s->prev;
  pf__kept_count--;
}

/* Links span i into / out of class c's partial list. Under the class's lock. */
static void pf__partial_add(pf__class_t* k, uint32_t i) {
  pf__spans[i].prev = PF__NONE;
  pf__spans[i].next = k->partial;
  if (k->partial != PF__NONE)
    pf__spans[k->partial].prev = i;
  k->partial = i;
}
static void pf__partial_remove(pf__class_t* k, uint32_t i) {
  pf__span_t* s = &pf__spans[i];
  if (s->prev != PF__NONE)
    pf__spans[s->prev].next = s->next;
  else
    k->partial = s->next;
  if (s->next != PF__NONE)
    pf__spans[s->next].prev = s->prev;
}

/* Puts a chain of blocks of class c (linked through their first word, NULL-terminated) into the
 * depot: each block onto its span's list. A span all of whose blocks are then in the depot is
 * given back at once. */
static void pf__depot_push(unsigned c, void* head) {
  pf__class_t* k = &pf__classes[c];
  uint32_t per_span = (uint32_t)(PF__SPAN_BYTES / pf__class_size(c));
  pthread_mutex_lock(&k->lock);
  while (head) {
    void* next = *(void**)head;
    uint32_t i = (uint32_t)pf__span_index(head);
    pf__span_t* s = &pf__spans[i];
    *(void**)head = s->free;
    s->free = head;
    if (s->nfree++ == 0)
      pf__partial_add(k, i);
    if (s->nfree == per_span) { /* no block cut from it is in use (none is left to cut) */
      pf__partial_remove(k, i);
      s->free = NULL;
      s->nfree = 0;
      pf__span_return(i);
    }
    head = next;
  }
  pthread_mutex_unlock(&k->lock);
}

/* Every block of this thread's lists and cut blocks goes to the depots; frees after this take
 * the slow path (no room). */
static void pf__cache_flush(void) {
  for (unsigned c = 0; c < PF__NCLASS; ++c) {
    void* b;
    while (c < PF__BUMP_CLASSES && (b = pf__bump_pop(c)) != NULL) { /* onto the list first */
      *(void**)b = pf__cache.head[c];
      pf__cache.head[c] = b;
    }
    if (pf__cache.head[c])
      pf__depot_push(c, pf__cache.head[c]);
    pf__cache.head[c] = NULL;
    pf__cache.room[c] = 0;
  }
}

static pthread_key_t pf__cache_key;
static int pf__cache_key_made; /* 1 once pf__cache_key exists, until the library unloads */

static void pf__cache_thread_exit(void* unused) {
  (void)unused;
  pf__cache_flush();
  pf__cache.state = -1; /* late frees in this thread's remaining destructors go to the depots */
}

/* How much of the range to reserve: all of it, unless the process has an address-space limit
 * (ulimit -v, RLIMIT_AS), which counts reserved space as used: then an eighth of the limit, so
 * that the slabs do not take the budget of the program's own mappings (found by review: an
 * 8 GiB reservation under a 10 GiB limit left no room for a 3 GiB tensor). 0: slabs off. */
static size_t pf__slab_reserve_bytes(void) {
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY ||
      lim.rlim_cur / 8 >= PF__SLAB_BYTES)
    return PF__SLAB_BYTES;
  size_t spans = (size_t)(lim.rlim_cur / 8) >> PF__SPAN_SHIFT;
  spans -= spans % PF__COMMIT_SPANS;                                  /* whole commit steps */
  return spans >= 4 * PF__COMMIT_SPANS ? spans << PF__SPAN_SHIFT : 0; /* below 8 MiB: off */
}

static void pf__slab_init_once(void) {
  pthread_once(&pf__locks_once, pf__locks_init);
  if (!pf__slab_allowed())
    return;
  /* Inaccessible, unaccounted address space; spans become accessible as they are needed. */
  size_t want = pf__slab_reserve_bytes();
  if (want == 0)
    return; /* slabs off: every block is a malloc block */
  pf__spans_reserved = (uint32_t)(want >> PF__SPAN_SHIFT);
  pf__spans_limit = pf__spans_reserved;
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
  __atomic_store_n(&pf__slab_base, base, __ATOMIC_RELEASE);
}

/* Decides this thread's state: 1 when the slabs are on (and registers the thread-exit flush),
 * else -1. */
static void pf__thread_init(void) {
  pf__slab_setup();
  /* not once the key is deleted at unload or exit: its number may be another library's then */
  if (pf__slab_on() && __atomic_load_n(&pf__cache_key_made, __ATOMIC_ACQUIRE) &&
      pthread_setspecific(pf__cache_key, (void*)1) == 0) {
    pf__cache.state = 1;
    for (unsigned c = 0; c < PF__NCLASS; ++c) /* the lists are empty */
      pf__cache.room[c] = (uint16_t)PF__LIST_MAX(c);
    return;
  }
  pf__cache.state = -1;
}

/* The main thread's lists are flushed at unload, and the key deleted so that, when a host
 * dlclose()s a library holding packfn while other threads that used it still run, their
 * thread-exit flush (code of this library) is not called after the unmapping (issue 10, defect
 * 3). The range stays reserved: objects still alive in other threads (or in the host) keep
 * pointing into it. Not in the shared library, which is never unmapped (PF_PINNED), nor in a
 * program packfn is linked into (pf__code_unmappable): their destructors run only at exit, and
 * threads exiting after them still flush their lists. */
#ifndef PF_PINNED
__attribute__((destructor)) static void pf__cache_fini(void) {
  if (!pf__code_unmappable())
    return; /* part of the program: the destructors run at exit, threads exiting later flush */
  if (pf__cache.state == 1)
    pf__cache_flush();
  pf__cache.state = -1;
  if (pf__cache_key_made) {
    __atomic_store_n(&pf__cache_key_made, 0, __ATOMIC_RELEASE);
    (void)pthread_key_delete(pf__cache_key);
  }
}
#endif

/* A span for class c (one given back earlier, or a fresh one): its first byte, or NULL when the
 * range is used up or cannot be made accessible. Under the class's lock. */
static char* pf__span_new(unsigned c) {
  char* span = NULL;
  int fresh = 0; /* a span never used before */
  pthread_mutex_lock(&pf__spans_lock);
  uint32_t i;
  if (pf__spans_given >= pf__spans_limit) {
    /* the range is used up (or a test says so) */
  } else if ((i = pf__kept_head) != PF__NONE) { /* the newest kept span: its pages are there */
    pf__kept_remove(i);
    span = pf__span_at(i);
  } else if ((i = pf__bare_head) != PF__NONE) {
    pf__bare_head = pf__spans[i].next;
    span = pf__span_at(i);
  } else if ((i = pf__spans_next) < pf__spans_reserved) {
    if (i == pf__spans_committed) {
      uint32_t n = PF__COMMIT_SPANS;
      if (mprotect(pf__span_at(i), (size_t)n << PF__SPAN_SHIFT, PROT_READ | PROT_WRITE) == 0)
        pf__spans_committed += n;
    }
    if (i < pf__spans_committed) {
      pf__spans_next = i + 1;
      span = pf__span_at(i);
      fresh = 1;
    }
  }
  if (span) {
    pf__spans_given++;
    pf__span_class[i] = (uint8_t)c;
  }
  pthread_mutex_unlock(&pf__spans_lock);
#ifdef MADV_POPULATE_WRITE
  /* A span never used before: its 16 pages are made present in one call (Linux 5.14) instead of
   * one page fault each as its blocks are first written. Best effort: where the call fails the
   * pages fault in as before. (Not for spans given back: pages the system has not yet taken
   * from a MADV_FREE span come back on their first write without a fault, and populating them
   * measured slower.) */
  if (fresh)
    (void)madvise(span, PF__SPAN_BYTES, MADV_POPULATE_WRITE);
#endif
  return span;
}

/* Milliseconds of a coarse monotonic clock (wrapping: only differences are used); 0 if no clock
 * answers (every span then looks as old as the first one given back). */
static uint32_t pf__now_ms(void) {
  struct timespec ts = {0, 0};
#ifdef CLOCK_MONOTONIC_COARSE
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
#endif
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
      return 0;
  return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

/* Gives span i back to any class: it joins the kept spans, newest. Then the oldest kept spans
 * beyond pf__pool_keep that have been free for pf__pool_decay_ms, or beyond PF__POOL_CAP (at
 * most PF__PURGE_MAX) give their pages back to the system (MADV_FREE, or MADV_DONTNEED where
 * the kernel lacks it), off every list while that runs, and become bare. Under the lock of span
 * i's class; none of its blocks is in use or listed anywhere. */
static void pf__span_return(uint32_t i) {
  uint32_t purge[PF__PURGE_MAX];
  uint32_t n = 0;
  pthread_mutex_lock(&pf__spans_lock);
  /* Read under the lock, so that the kept list's times only grow from its tail to its head: read
   * before it, another thread's span given back in between would be newer than `now`, and
   * now - freed_ms would wrap to an age of 49 days and purge it at once. */
  uint32_t now = pf__now_ms();
  pf__span_class[i] = PF__NO_CLASS;
  pf__spans_given--;
  pf__span_t* s = &pf__spans[i];
  s->freed_ms = now;
  s->prev = PF__NONE;
  s->next = pf__kept_head;
  if (pf__kept_head != PF__NONE)
    pf__spans[pf__kept_head].prev = i;
  else
    pf__kept_tail = i;
  pf__kept_head = i;
  pf__kept_count++;
  while (n < PF__PURGE_MAX && pf__kept_count > pf__pool_keep &&
         (now - pf__spans[pf__kept_tail].freed_ms >= pf__pool_decay_ms ||
          pf__kept_count > PF__POOL_CAP)) {
    uint32_t t = pf__kept_tail;
    pf__kept_remove(t);
    purge[n++] = t;
  }
  pthread_mutex_unlock(&pf__spans_lock);
  if (n == 0)
    return;
  for (uint32_t k = 0; k < n; ++k) {
    char* span = pf__span_at(purge[k]);
#ifdef MADV_FREE
    if (madvise(span, PF__SPAN_BYTES, MADV_FREE) != 0)
#endif
      (void)madvise(span, PF__SPAN_BYTES, MADV_DONTNEED);
  }
  pthread_mutex_lock(&pf__spans_lock);
  for (uint32_t k = 0; k < n; ++k) {
    pf__spans[purge[k]].next = pf__bare_head;
    pf__bare_head = purge[k];
  }
  pthread_mutex_unlock(&pf__spans_lock);
}

/* A chain of free blocks of class c (from the depot, or cut from the class's span), its length in
 * *n; for a class below PF__BUMP_CLASSES a cut gives one block (*n = 1, its first word not
 * written) and makes the blocks cut after it this thread's (pf__cache.bump[c], empty until
 * then). NULL when no slab memory is left. */
static void* pf__refill(unsigned c, uint32_t* n) {
  pf__class_t* k = &pf__classes[c];
  size_t size = pf__class_size(c);
  void* chain = NULL;
  pthread_mutex_lock(&k->lock);
  if (k->partial != PF__NONE) { /* blocks of one span */
    uint32_t i = k->partial;
    pf__span_t* s = &pf__spans[i];
    uint32_t len;
    chain = s->free;
    if (s->nfree <= PF__LIST_MAX(c)) {
      /* all of them, without walking the chain: its blocks were freed in any order, each link
       * a load from memory that may have left the caches, one after the other; the thread's
       * pops prefetch each next block instead */
      len = s->nfree;
      s->free = NULL;
    } else { /* half a list, so that the thread's next frees have room */
      uint32_t want = PF__LIST_MAX(c) / 2;
      void* last = chain;
      for (len = 1; len < want && *(void**)last; ++len)
        last = *(void**)last;
      s->free = *(void**)last;
      *(void**)last = NULL;
    }
    s->nfree -= len;
    if (s->nfree == 0)
      pf__partial_remove(k, i);
    pthread_mutex_unlock(&k->lock);
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
  /* at most half a list, so that the thread's next frees have room; at least one block (the
   * span's uncut part is a whole number of blocks) */
  uint32_t want = PF__LIST_MAX(c) / 2;
  char* first = k->cut;
  size_t left = (size_t)(k->cut_end - first) / size;
  uint32_t len = left < want ? (uint32_t)left : want;
  k->cut = first + (size_t)len * size;
  pthread_mutex_unlock(&k->lock);
  if (c < PF__BUMP_CLASSES) { /* not linked: handed out in order (pf__bump_t) */
    uint32_t at = (uint32_t)(((uintptr_t)first - pf__slab_base) >> 4);
    pf__cache.bump[c].next = at + (uint32_t)(size >> 4);
    pf__cache.bump[c].end = at + (uint32_t)((len * size) >> 4);
    *n = 1;
    return first;
  }
  /* linked outside the lock, the blocks this thread's alone, in a loop that keeps its pointers
   * in registers (the loop that advanced k->cut block by block reloaded it after every link it
   * wrote: 12 instructions a block, now 4) */
  char* p = first;
  for (uint32_t i = 1; i < len; ++i, p += size)
    *(void**)p = p + size;
  *(void**)p = NULL;
  *n = len;
  return first;
}

/* pf__alloc_slow's depot half, for a class while this thread's state is 0 (undecided) or 1
 * (slabs on, the list empty): a block, with the rest of the refill made the thread's list; NULL
 * when the slabs are off for this thread or the range is used up (malloc serves then, and
 * pf__free tells its blocks apart). */
__attribute__((noinline)) static void* pf__alloc_from_depot(unsigned c) {
  if (pf__cache.state == 0)
    pf__thread_init();
  if (pf__cache.state != 1)
    return NULL;
  /* The cut blocks first: pf__cache_pop looked at them, but callers of pf__alloc_uncached and
   * pf__alloc_slow need not have (a refill would drop them). */
  void* b = pf__cache_pop(c);
  if (b)
    return b;
  uint32_t n;
  b = pf__refill(c, &n);
  if (b) {
    pf__cache.head[c] = n > 1 ? *(void**)b : NULL;
    pf__cache.room[c] = (uint16_t)(PF__LIST_MAX(c) - (n - 1));
  }
  return b;
}

/* pf__alloc_slow for a class while the slabs may be on for this thread: the depot, else malloc
 * (the slabs off after all, or the range used up). */
__attribute__((noinline)) static void* pf__alloc_depot_or_malloc(size_t size, unsigned c) {
  void* b = pf__alloc_from_depot(c);
  return b ? b : pf__alloc_malloc(size);
}

/* pf__alloc_malloc's sizes outside 1..PF__ALLOC_MAX: a byte for 0, NULL beyond. */
void* pf__alloc_malloc_edge(size_t size) {
  return size == 0 ? malloc(1) : NULL;
}

void* pf__alloc_slow(size_t size, unsigned c) {
  /* The depot only for a class while the slabs may be on for this thread; otherwise (slabs
   * off, the thread exiting, beyond 4 KiB) straight to malloc as a tail call, without a frame.
   * The thread's state first: with the slabs off every allocation comes here, and the class
   * cannot change the answer. */
  if (pf__cache.state >= 0 && c < PF__NCLASS)
    return pf__alloc_depot_or_malloc(size, c);
  return pf__alloc_malloc(size);
}

/* pf__free_slow for a slab block: onto this thread's full list (half of it going to the depot
 * first), or straight to the depot once the thread is exiting. */
__attribute__((noinline)) static void pf__free_to_depot(void* p, unsigned c) {
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
      pf__cache.room[c] = (uint16_t)(PF__LIST_MAX(c) - keep);
    }
    *(void**)p = pf__cache.head[c];
    pf__cache.head[c] = p;
    pf__cache.room[c]--;
    return;
  }
  *(void**)p = NULL; /* thread exiting: a chain of one block */
  pf__depot_push(c, p);
}

void pf__free_outside(void* p) {
  free(p);
}

void pf__free_slow(void* p, unsigned c) {
  if (c >= PF__NCLASS) /* a malloc block: kept apart from the depot path's frame */
    free(p);
  else
    pf__free_to_depot(p, c);
}

/* A block of its exact size from posix_memalign (the allocator's malloc block for an alignment
 * beyond malloc's), or NULL. */
__attribute__((noinline)) static void* pf__alloc_memalign(size_t size, size_t alignment) {
  void* p = NULL;
  if (size > PF__ALLOC_MAX || posix_memalign(&p, alignment, size) != 0)
    return NULL;
  return p;
}

/* pf__alloc_aligned_slow but for its short way (slabs off, 1 byte or more aligned beyond 16:
 * what the memory-checker mode asks); `state` is this thread's. */
__attribute__((noinline)) static void* pf__alloc_aligned_slab(size_t size, size_t alignment,
                                                              int state) {
  /* Zero bytes skip pf__alloc_aligned's list: take a byte through it, since the refill below
   * replaces the thread's list and would drop the blocks on it. */
  if (size == 0)
    return pf__alloc_aligned(1, alignment);
  if (alignment <= 16)
    return pf__alloc(size);
  if (alignment <= 256 && size <= PF__SLAB_MAX) {
    if (state == 0) {
      pf__thread_init();
      state = pf__cache.state;
    }
    if (state > 0) { /* the slabs are on (pf__thread_init), the class one of theirs */
      size_t rounded = (size + alignment - 1) & ~(alignment - 1);
      void* p = pf__alloc_depot_or_malloc(rounded, pf__class_of(rounded));
      if (p && ((uintptr_t)p & (alignment - 1)) == 0)
        return p;
      pf__free(p); /* a malloc block after the range ran out: aligned below */
    }
  }
  return pf__alloc_memalign(size, alignment);
}

void* pf__alloc_aligned_slow(size_t size, size_t alignment) {
  int state = pf__cache.state;
  /* Slabs off for this thread (the memory-checker mode: every aligned block comes here): the
   * exact block at once, a tail call without the frame of the slab path, which would end there
   * after a malloc rarely aligned enough (then freed): 38 instructions of a 1 KiB tensor's
   * create, now 22 (9 here, 13 in pf__alloc_memalign). */
  if (PF_UNLIKELY(state < 0) && alignment > 16 && size != 0)
    return pf__alloc_memalign(size, alignment);
  return pf__alloc_aligned_slab(size, alignment, state);
}

uint32_t pf__alloc_test_limit_spans(uint32_t more) {
  pf__slab_setup(); /* the set-up sets the limit: it must not undo this one */
  pthread_mutex_lock(&pf__spans_lock);
  uint32_t now = (uint32_t)pf__spans_given;
  pf__spans_limit = more == UINT32_MAX || (size_t)now + more > pf__spans_reserved
                        ? pf__spans_reserved
                        : (size_t)now + more;
  pthread_mutex_unlock(&pf__spans_lock);
  return now;
}

void pf__alloc_test_pool(uint32_t keep, uint32_t decay_ms, uint32_t* kept) {
  pthread_mutex_lock(&pf__spans_lock);
  if (keep != UINT32_MAX)
    pf__pool_keep = keep;
  if (decay_ms != UINT32_MAX)
    pf__pool_decay_ms = decay_ms;
  if (kept)
    *kept = pf__kept_count;
  pthread_mutex_unlock(&pf__spans_lock);
}

size_t pf__alloc_slab_bytes(void) {
  pthread_mutex_lock(&pf__spans_lock);
  size_t n = pf__spans_given << PF__SPAN_SHIFT;
  pthread_mutex_unlock(&pf__spans_lock);
  return n;
}
