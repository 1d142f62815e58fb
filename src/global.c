/* The global function table: an open-addressing hash map from names to function objects.
 *
 * Lookups take no lock and write nothing shared. Writers serialise on a mutex and never move
 * a published slot: a slot is filled once (hash, tail, name and function first, then its
 * length with a release store that publishes it), its function may later be replaced or
 * cleared (a removed name keeps its slot, as a tombstone, until the next rebuild), and a
 * table that grows or fills with tombstones is rebuilt into a new array, which replaces the
 * old one with one pointer store.
 *
 * Reclamation (a grace period, as in RCU): each thread that looks names up has a record, a
 * cache line of its own on the heap, listed; its mark is 1 while a lookup runs and something
 * else otherwise, and only its own thread writes it. A writer that takes something out of
 * readers' reach (a replaced or removed function, an old array, the names of dropped
 * tombstones) first makes the change visible, then waits until it has seen every record's mark
 * other than 1 once (a lookup that began later sees the change), and only then releases or
 * frees it. The ordering between a
 * lookup's mark and its loads is the writer's cost where it can be: on Linux with
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), the mark is a plain store and the writer makes
 * every running thread execute a full barrier before it reads the marks (as liburcu's
 * membarrier flavour does); elsewhere the mark is an exchange (a full barrier) and the
 * writer's stores and loads are sequentially consistent. Either way, the writer sees the lookup
 * in flight or the lookup sees the change. A lookup never calls out while marked, so
 * the wait is short and cannot deadlock. A thread's record leaves the list at thread exit
 * (a pthread key destructor); a lookup that cannot register (out of memory, or run after that
 * destructor) is done under the writers' mutex instead.
 *
 * This file holds the lookups, the readers' records and the fork handlers; the writers, listing
 * and static registration are global_write.c's, the layout and shared state global_table.h's. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "global_table.h"

#include "alloc.h"
#include "common.h"
#include "device_private.h"
#include "error_private.h"
#include "function_private.h"
#include "type_private.h"
#include "module_private.h"

/* where this file's state (global table) lives, for pf_module_load (module_private.h) */
PF__MARKER const char pf__marker_global = 0;

/* ---- the table (global_table.h) ---- */

/* An empty table still has two (empty) slots, so lookups need no test for a missing array. */
pf__cell_t pf__empty[3] = {{.head = {1, 63, 0}}};
pf__cell_t* pf__cells = pf__empty + 1; /* replaced (not written in place) by rebuilds */
pthread_mutex_t pf__writers = PTHREAD_MUTEX_INITIALIZER;

/* ---- readers' records and grace periods ---- */

/* A thread's record: a 64-byte line of its own, so that threads marking their lookups never
 * write one line. On the heap, not in thread-local storage: a writer reads every listed
 * record, and a record whose thread exited without its exit hook (a first lookup in the last
 * round of thread-exit destructors, or after pf__key_fini deleted the key) stays listed; in
 * thread-local storage it went with the thread's stack, which glibc reuses for a new thread
 * (the list, threaded through the records then, looped and every later writer hung: review,
 * seventeenth session) or unmaps (the next writer read unmapped memory). Such a record is
 * left listed, outside a lookup, for the life of the process (64 bytes). */
typedef struct pf__reader {
  unsigned mark; /* 1: in a lookup; 0 or PF__FENCED: outside; PF__UNREGISTERED: not listed */
  char pad[64 - sizeof(unsigned)];
} pf__reader_t;

#define PF__UNREGISTERED 2u
#define PF__FENCED       3u /* outside, and lookups mark with an exchange: no membarrier */
/* The record of a thread not listed: its mark is PF__UNREGISTERED, never written (a lookup
 * writes its mark only when it reads 0 or PF__FENCED there, and registers on this one). */
static pf__reader_t pf__unlisted = {PF__UNREGISTERED, {0}};
static PF__TLS pf__reader_t* pf__me = &pf__unlisted;
static PF__TLS int pf__gone; /* this thread's exit hook has run: lookups take the mutex */
/* The registered threads' records, under pf__readers_lock. */
static pf__reader_t** pf__readers;
static size_t pf__reader_count, pf__reader_cap;
static pthread_mutex_t pf__readers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pf__key_once = PTHREAD_ONCE_INIT;
static pthread_key_t pf__key;
static int pf__key_ok;
static int pf__membarrier_ok; /* set once, before any thread registers */

/* Whether the kernel forces a barrier on this process's running threads for us. */
static int pf__membarrier_register(void) {
#if defined(__linux__) && defined(SYS_membarrier)
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
         syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
#else
  return 0;
#endif
}

/* A full barrier on every running thread of the process (pf__membarrier_ok only); 0 when the
 * kernel refuses it after all: a seccomp filter installed after the first lookup (EPERM,
 * ENOSYS), or no memory for its CPU mask (ENOMEM). */
static int pf__membarrier(void) {
#if defined(__linux__) && defined(SYS_membarrier)
  return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0;
#else
  return 0;
#endif
}

/* The thread-exit hook (pf__key's destructor): unlists this thread's record and frees it (no
 * writer reads it once it is unlisted: writers read records under pf__readers_lock). */
static void pf__reader_exit(void* arg) {
  pf__reader_t* me = arg;
  pthread_mutex_lock(&pf__readers_lock);
  for (size_t i = 0; i < pf__reader_count; ++i)
    if (pf__readers[i] == me) {
      pf__readers[i] = pf__readers[--pf__reader_count];
      break;
    }
  pthread_mutex_unlock(&pf__readers_lock);
  pf__me = &pf__unlisted;
  pf__gone = 1;
  free(me);
}

static int pf__key_made; /* 1 once pf__key exists, until the library unloads */

static void pf__key_create(void) {
  pf__key_made = pthread_key_create(&pf__key, pf__reader_exit) == 0;
  /* readers are listed only while a child's list can be rebuilt after fork */
  pf__key_ok = pf__key_made && pf__fork_handlers();
  /* PACKFN_NO_MEMBARRIER=1: the exchange everywhere (what kernels without it get; for tests) */
  const char* no = getenv("PACKFN_NO_MEMBARRIER");
  pf__membarrier_ok = !(no && *no && *no != '0') && pf__membarrier_register();
}

/* When a host dlclose()s a library holding packfn (linked statically) while threads that looked
 * names up still run, their exit must not call pf__reader_exit in unmapped code (issue 10,
 * defect 3, as for the block cache and the error slot): the key goes with the library. Those
 * threads' records are left. The shared library is never unmapped (PF_PINNED), nor a program
 * packfn is linked into (pf__code_unmappable): there the key stays, so threads exiting after
 * the destructors still unlink their records (a record left behind was read after its thread's
 * exit by the next writer, a PF_REGISTER_GLOBAL destructor say: found by review). */
#ifndef PF_PINNED
__attribute__((destructor)) static void pf__key_fini(void) {
  if (pf__key_made && pf__code_unmappable()) {
    pf__key_ok = 0;
    (void)pthread_key_delete(pf__key);
    pf__key_made = 0;
  }
}
#endif

/* Lists a record for this thread; 0 when it cannot (then lookups take the writers' mutex).
 * A thread whose first lookup runs in the last round of its thread-exit destructors (POSIX runs
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds) registers after its exit hook's turn: its record stays
 * listed after the thread, outside a lookup (see pf__reader_t). */
static int pf__reader_register(void) {
  if (pf__gone)
    return 0;
  pthread_once(&pf__key_once, pf__key_create);
  if (!pf__key_ok)
    return 0;
  pf__reader_t* me = aligned_alloc(sizeof *me, sizeof *me);
  if (!me)
    return 0;
  me->mark = PF__UNREGISTERED;
  if (pthread_setspecific(pf__key, me) != 0) {
    free(me);
    return 0;
  }
  pthread_mutex_lock(&pf__readers_lock);
  if (pf__reader_count == pf__reader_cap) {
    size_t cap = pf__reader_cap ? 2 * pf__reader_cap : 16;
    pf__reader_t** grown =
        cap < SIZE_MAX / sizeof *grown ? realloc(pf__readers, cap * sizeof *grown) : NULL;
    if (!grown) {
      pthread_mutex_unlock(&pf__readers_lock);
      (void)pthread_setspecific(pf__key, NULL); /* the exit hook has nothing to unlist */
      free(me);
      return 0;
    }
    pf__readers = grown;
    pf__reader_cap = cap;
  }
  pf__readers[pf__reader_count++] = me;
  __atomic_store_n(&me->mark, pf__membarrier_ok ? 0 : PF__FENCED, __ATOMIC_SEQ_CST);
  pf__me = me;
  pthread_mutex_unlock(&pf__readers_lock);
  return 1;
}

/* Returns 1 once every lookup that could have seen what the caller just unpublished (with a
 * sequentially consistent store) has finished; 0, at once, when that cannot be known: the
 * kernel refused the barrier the plain-store marks rely on (pf__membarrier), and a lookup
 * may still read what was unpublished for as long as the process runs. The caller then keeps
 * it (pf__keep). Holds no table lock: call it after unlocking. */
int pf__synchronize(void) {
  /* pf__membarrier_ok is settled once, by whichever thread first gets here or registers: a
   * writer that never looked a name up must not read it while a reader's first lookup sets it
   * (it could skip the barrier that reader's plain-store marks rely on). */
  pthread_once(&pf__key_once, pf__key_create);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (pf__membarrier_ok && !pf__membarrier()) /* the plain-store marks' half of the barrier */
    return 0;
  pthread_mutex_lock(&pf__readers_lock);
  for (size_t i = 0; i < pf__reader_count; ++i) {
    const pf__reader_t* r = pf__readers[i];
    if (r == pf__me)
      continue; /* this thread is not in a lookup: it is here */
    if (__atomic_load_n(&r->mark, __ATOMIC_SEQ_CST) == 1)
      while (__atomic_load_n(&r->mark, __ATOMIC_ACQUIRE) == 1)
        sched_yield();
  }
  pthread_mutex_unlock(&pf__readers_lock);
  return 1;
}

/* What writers could not free after a refused barrier (pf__synchronize returned 0): kept
 * for the life of the process, and listed so that leak checkers see it as reachable. */
static void** pf__kept;
static size_t pf__kept_count, pf__kept_cap;

static void pf__keep_pointer(void* p) {
  pthread_mutex_lock(&pf__readers_lock);
  if (pf__kept_count == pf__kept_cap) {
    size_t cap = pf__kept_cap ? pf__kept_cap * 2 : 16;
    void** grown = cap < SIZE_MAX / sizeof(void*) ? realloc(pf__kept, cap * sizeof(void*)) : NULL;
    if (grown) {
      pf__kept = grown;
      pf__kept_cap = cap;
    }
  }
  if (pf__kept_count < pf__kept_cap) /* else it stays unreachable: still never freed */
    pf__kept[pf__kept_count++] = p;
  pthread_mutex_unlock(&pf__readers_lock);
}

void pf__keep(pf_object_t* fn) {
  if (!fn)
    return;
  pf_object_retain(fn); /* the kept reference: the caller still releases its own */
  pf__keep_pointer(fn);
}

void pf__keep_table(pf__cell_t* t) {
  if (t != pf__empty + 1)
    pf__keep_pointer(t - 1); /* its tombstones' names stay reachable through it */
}

/* ---- fork (the handlers are alloc.c's: pf__fork_handlers) ----
 * The global table's part, taken after the join's, the type registry's and the TVM-FFI table's
 * locks (each taken by its own file) and before the leaves: the writers (global_write.c), the
 * readers' list. */
void pf__global_fork_lock(void) {
  pthread_mutex_lock(&pf__writers);
  pthread_mutex_lock(&pf__readers_lock);
}

void pf__global_fork_unlock(void) {
  pthread_mutex_unlock(&pf__readers_lock);
  pthread_mutex_unlock(&pf__writers);
}

/* The child has one thread: the others' reader records would wait forever (they are freed:
 * no thread of the child has them). */
void pf__global_fork_child(void) {
  for (size_t i = 0; i < pf__reader_count; ++i)
    if (pf__readers[i] != pf__me)
      free(pf__readers[i]);
  pf__reader_count = 0;
  if (pf__me != &pf__unlisted) /* listed: the array has room for it */
    pf__readers[pf__reader_count++] = pf__me;
  pf__global_fork_unlock();
}

/* ---- lookups ---- */

static __attribute__((noinline, cold)) int pf__lookup_invalid(const char* func, pf_object_t** out) {
  if (out)
    *out = NULL;
  return PF__NULL_ARG(func, out ? "name" : "out");
}

/* Probes the current table for (name, len, h, tail), len >= 1, and retains what it finds.
 * Caller is marked in a lookup (or holds the writers' mutex). A slot's length is loaded first,
 * with acquire: a published one (equal to len, so not 0) shows the rest of the slot. A name of
 * up to 8 bytes is identified by its tail word and length (see pf__hash_absorb), so only longer
 * names compare bytes; with `short_names` set the caller guarantees len <= 32, so the compare
 * needs no call. An empty slot stops the probe; a removed name's slot gives NULL. */
static inline __attribute__((always_inline)) pf_object_t*
pf__probe(const char* name, size_t len, uint64_t h, uint64_t tail, int short_names) {
  pf__cell_t* t = __atomic_load_n(&pf__cells, __ATOMIC_SEQ_CST);
  size_t mask = pf__mask(t);
  for (size_t i = pf__home(t, h);; i = (i + 1) & mask) {
    pf__entry_t* e = pf__slot(t, i);
    if (__atomic_load_n(&e->len, __ATOMIC_ACQUIRE) == len && e->hash == h && e->tail == tail &&
        (len <= 8 || (short_names ? pf__bytes_equal_short(e->name, name, len)
                                  : pf__bytes_equal(e->name, name, len)))) {
      pf_object_t* fn = __atomic_load_n(&e->fn, __ATOMIC_SEQ_CST);
      pf_object_retain(fn);
      return fn;
    }
    if (!__atomic_load_n(&e->name, __ATOMIC_RELAXED))
      return NULL;
  }
}

/* A name this table does not hold: *out NULL, or, once packfn has joined TVM-FFI (looking for
 * it on the process's first table use), TVM-FFI's function of that name (a new reference).
 * `func`, the public function looked up for, is the one a failure names (review: a failed
 * lookup in pf_global_call named pf_global_get). */
static __attribute__((noinline, cold)) int pf__global_miss(const char* name, size_t len,
                                                           pf_object_t** out, const char* func) {
  *out = NULL;
  const pf__tvm_t* tvm = pf__tvm_first_use();
  if (PF_LIKELY(!tvm))
    return 0;
  pthread_mutex_lock(&pf__tvm_table);
  int rc = pf__tvm_get(tvm, name, len, out);
  pthread_mutex_unlock(&pf__tvm_table);
  return rc == 0 ? 0 : pf__tvm_failed(tvm, func, "global table");
}

/* The general lookup: any length, registers the thread on its first lookup, and marks with an
 * exchange where the writers have no membarrier. */
static __attribute__((noinline)) int pf__lookup_slow(const char* name, size_t len,
                                                     pf_object_t** out, const char* func) {
  *out = NULL;
  if (len == 0)
    return 0; /* no name is empty */
  uint64_t tail;
  uint64_t h = pf__name_hash(name, len, &tail);
  if (pf__me->mark == 1) { /* a lookup inside a lookup (a signal handler): already marked */
    *out = pf__probe(name, len, h, tail, 0);
    return 0; /* no fallback: TVM-FFI's table takes a lock */
  }
  if (pf__me->mark == PF__UNREGISTERED && !pf__reader_register()) {
    pthread_mutex_lock(&pf__writers);
    *out = pf__probe(name, len, h, tail, 0);
    pthread_mutex_unlock(&pf__writers);
    return *out ? 0 : pf__global_miss(name, len, out, func);
  }
  pf__reader_t* me = pf__me;
  unsigned outside = me->mark;
  if (outside == PF__FENCED)
    __atomic_exchange_n(&me->mark, 1, __ATOMIC_SEQ_CST);
  else
    __atomic_store_n(&me->mark, 1, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  *out = pf__probe(name, len, h, tail, 0);
  __atomic_store_n(&me->mark, outside, __ATOMIC_RELEASE);
  return *out ? 0 : pf__global_miss(name, len, out, func);
}

/* The common lookup, a leaf that makes no call: names of 1 to 32 bytes from a thread
 * registered with membarrier-backed writers; anything else goes to pf__lookup_slow as a tail
 * call. The mark is a plain store to this thread's own word (no shared write, no barrier: the
 * writer's membarrier orders it before the probe's loads; the signal fence keeps the compiler
 * from moving them). */
static inline __attribute__((always_inline)) int pf__lookup(const char* name, size_t len,
                                                            pf_object_t** out, const char* func) {
  pf__reader_t* me = pf__me;
  if (PF_UNLIKELY(len - 1 > 31 || me->mark))
    return pf__lookup_slow(name, len, out, func);
  uint64_t tail;
  uint64_t h = pf__name_hash(name, len, &tail);
  __atomic_store_n(&me->mark, 1, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  pf_object_t* fn = pf__probe(name, len, h, tail, 1);
  __atomic_store_n(&me->mark, 0, __ATOMIC_RELEASE);
  if (PF_UNLIKELY(!fn))
    return pf__global_miss(name, len, out, func); /* a tail call, off the hit path */
  *out = fn;
  return 0;
}

int pf_global_get_bytes(const char* name, size_t size, pf_object_t** out) {
  if (PF_UNLIKELY(!out || (!name && size)))
    return pf__lookup_invalid("pf_global_get_bytes", out);
  return pf__lookup(name, size, out, "pf_global_get_bytes");
}

int pf__global_lookup(const char* name, size_t size, pf_object_t** out) {
  return pf__lookup(name, size, out, "pf_global_get");
}

int pf__global_lookup_as(const char* name, size_t size, pf_object_t** out, const char* func) {
  return pf__lookup(name, size, out, func);
}

int pf__global_get_invalid(const char* name, pf_object_t** out) {
  (void)name;
  return pf__lookup_invalid("pf_global_get", out);
}
