/* The global function table: an open-addressing hash map from names to function objects.
 *
 * Lookups take no lock and write nothing shared. Writers serialise on a mutex and never move
 * a published slot: a slot is filled once (hash, tail, name and function first, then its
 * length with a release store that publishes it), its function may later be replaced or
 * cleared (a removed name keeps its slot, as a tombstone, until the next rebuild), and a
 * table that grows or fills with tombstones is rebuilt into a new array, which replaces the
 * old one with one pointer store.
 *
 * Reclamation (a grace period, as in RCU): each thread that looks names up has a record in
 * thread-local storage, linked into a list; its mark is 1 while a lookup runs and something
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
 * destructor) is done under the writers' mutex instead. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "packfn/typed.h"

#include "alloc.h"
#include "bytes.h"
#include "common.h"
#include "function_private.h"
#include "global_private.h"
#include "suggest.h"
#include "tvm_private.h"

typedef struct {
  uint64_t hash;   /* pf__name_hash */
  uint64_t tail;   /* pf__hash_absorb's last word: for names of up to 8 bytes, the name itself */
  size_t len;      /* 0 until the slot is published (names are never empty) */
  char* name;      /* owned, NUL-terminated; NULL marks an empty slot */
  pf_object_t* fn; /* owned; NULL in an empty slot, one being filled, or a removed name's */
} pf__entry_t;

/* A table is one array: cell 0 its header, then `mask + 1` slots, a power of two >= 2; the
 * table is named by a pointer to its first slot (cell 1). A name's home slot is hash >> shift, the
 * hash's top bits (the multiply that ends pf__hash_absorb mixes every input bit into those; its low
 * bits see only the low bytes). */
typedef union {
  pf__entry_t entry;
  struct {
    size_t mask;
    size_t shift; /* 64 - log2(capacity) */
    size_t used;  /* slots with a name, live or removed; writers only */
  } head;
} pf__cell_t;

/* An empty table still has two (empty) slots, so lookups need no test for a missing array. */
static pf__cell_t pf__empty[3] = {{.head = {1, 63, 0}}};
static pf__cell_t* pf__cells = pf__empty + 1; /* replaced (not written in place) by rebuilds */
static pf__cell_t* volatile pf__block =
    pf__empty;              /* pf__cells - 1: the allocation, for leak checkers */
static size_t pf__live;     /* names with a function */
static size_t pf__rebuilds; /* for pf__global_stats; under pf__writers */
static pthread_mutex_t pf__writers = PTHREAD_MUTEX_INITIALIZER;

/* Room for a name's copy (len + 1 bytes) on cache lines of its own: a lookup of a name longer
 * than 8 bytes reads its copy, and a copy sharing a line with something other threads write
 * (a function's reference count, say) would make every lookup of it miss the cache while they
 * run (lookups from two threads then ran at half the speed of one). */
#define PF__LINE 64
static char* pf__name_copy_alloc(size_t len) {
  void* p = NULL;
  size_t size = (len + 1 + PF__LINE - 1) & ~(size_t)(PF__LINE - 1);
  return len < SIZE_MAX - PF__LINE && posix_memalign(&p, PF__LINE, size) == 0 ? p : NULL;
}

/* ---- readers' records and grace periods ---- */

typedef struct pf__reader {
  unsigned mark; /* 1: in a lookup; 0 or PF__FENCED: outside; PF__UNREGISTERED: not listed */
  int gone;      /* the thread's exit hook has run */
  struct pf__reader* next;
} pf__reader_t;

#define PF__UNREGISTERED 2u
#define PF__FENCED       3u /* outside, and lookups mark with an exchange: no membarrier */
static PF__TLS pf__reader_t pf__me = {PF__UNREGISTERED, 0, NULL};
static pf__reader_t* pf__readers; /* under pf__readers_lock */
static pthread_mutex_t pf__readers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pf__key_once = PTHREAD_ONCE_INIT;
static pthread_key_t pf__key;
static int pf__key_ok;
static pthread_once_t pf__fork_once = PTHREAD_ONCE_INIT;
static int pf__fork_ok; /* the fork handlers are registered (see "fork" below) */
static void pf__fork_register(void);
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

/* A full barrier on every running thread of the process (pf__membarrier_ok only). */
static void pf__membarrier(void) {
#if defined(__linux__) && defined(SYS_membarrier)
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) != 0)
    abort(); /* registered above: the kernel cannot refuse it now */
#endif
}

static void pf__reader_exit(void* arg) {
  pf__reader_t* me = arg;
  pthread_mutex_lock(&pf__readers_lock);
  for (pf__reader_t** p = &pf__readers; *p; p = &(*p)->next)
    if (*p == me) {
      *p = me->next;
      break;
    }
  pthread_mutex_unlock(&pf__readers_lock);
  __atomic_store_n(&me->mark, PF__UNREGISTERED, __ATOMIC_RELAXED);
  me->gone = 1;
}

static int pf__key_made; /* 1 once pf__key exists, until the library unloads */

static void pf__key_create(void) {
  pf__key_made = pthread_key_create(&pf__key, pf__reader_exit) == 0;
  /* readers are listed only while a child's list can be rebuilt after fork */
  pthread_once(&pf__fork_once, pf__fork_register);
  pf__key_ok = pf__key_made && pf__fork_ok;
  /* PACKFN_NO_MEMBARRIER=1: the exchange everywhere (what kernels without it get; for tests) */
  const char* no = getenv("PACKFN_NO_MEMBARRIER");
  pf__membarrier_ok = !(no && *no && *no != '0') && pf__membarrier_register();
}

/* When a host dlclose()s libpackfn while threads that looked names up still run, their exit
 * must not call pf__reader_exit in unmapped code (issue 10, defect 3, as for the block cache
 * and the error slot): the key goes with the library. Those threads' records are left. */
__attribute__((destructor)) static void pf__key_fini(void) {
  if (pf__key_made) {
    pf__key_ok = 0;
    (void)pthread_key_delete(pf__key);
    pf__key_made = 0;
  }
}

/* Links this thread's record; 0 when it cannot (then lookups take the writers' mutex). */
static int pf__reader_register(void) {
  if (pf__me.gone)
    return 0;
  pthread_once(&pf__key_once, pf__key_create);
  if (!pf__key_ok || pthread_setspecific(pf__key, &pf__me) != 0)
    return 0;
  pthread_mutex_lock(&pf__readers_lock);
  pf__me.next = pf__readers;
  pf__readers = &pf__me;
  __atomic_store_n(&pf__me.mark, pf__membarrier_ok ? 0 : PF__FENCED, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&pf__readers_lock);
  return 1;
}

/* Returns once every lookup that could have seen what the caller just unpublished (with a
 * sequentially consistent store) has finished. Holds no table lock: call it after unlocking. */
static void pf__synchronize(void) {
  /* pf__membarrier_ok is settled once, by whichever thread first gets here or registers: a
   * writer that never looked a name up must not read it while a reader's first lookup sets it
   * (it could skip the barrier that reader's plain-store marks rely on). */
  pthread_once(&pf__key_once, pf__key_create);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (pf__membarrier_ok)
    pf__membarrier(); /* the plain-store marks' half of the barrier */
  pthread_mutex_lock(&pf__readers_lock);
  for (pf__reader_t* r = pf__readers; r; r = r->next) {
    if (r == &pf__me)
      continue; /* this thread is not in a lookup: it is here */
    if (__atomic_load_n(&r->mark, __ATOMIC_SEQ_CST) == 1)
      while (__atomic_load_n(&r->mark, __ATOMIC_ACQUIRE) == 1)
        sched_yield();
  }
  pthread_mutex_unlock(&pf__readers_lock);
}

/* ---- TVM-FFI's table, once joined (tvm_private.h) ----
 * TVM-FFI's table takes no lock (its writers are expected to serialise themselves), so every
 * call packfn makes into it holds pf__tvm_table. No function is released under that lock: a
 * replaced TVM-FFI entry is retained first and released after unlocking, so a deleter may use
 * either table. Lock order: pf__tvm_table, then pf__writers. */
static pthread_mutex_t pf__tvm_table = PTHREAD_MUTEX_INITIALIZER;

/* ---- fork ----
 * One set of handlers, registered when the library loads, for every lock a packfn call may
 * hold, so that a child forked while another thread held one finds it free. They are taken in
 * the order the code nests them: the TVM-FFI table, the writers, the readers' list, then the
 * leaves (the functions' side table, the allocator's classes). glibc forgets a library's
 * handlers when it is unloaded (they are tied to its DSO). */
static void pf__fork_prepare(void) {
  pthread_mutex_lock(&pf__tvm_table);
  pthread_mutex_lock(&pf__writers);
  pthread_mutex_lock(&pf__readers_lock);
  pf__function_fork_lock();
  pf__alloc_fork_lock();
}

static void pf__fork_parent(void) {
  pf__alloc_fork_unlock();
  pf__function_fork_unlock();
  pthread_mutex_unlock(&pf__readers_lock);
  pthread_mutex_unlock(&pf__writers);
  pthread_mutex_unlock(&pf__tvm_table);
}

/* The child has one thread: the others' reader records would wait forever. */
static void pf__fork_child(void) {
  pf__me.next = NULL;
  pf__readers = pf__me.mark != PF__UNREGISTERED ? &pf__me : NULL;
  pf__fork_parent();
}

static void pf__fork_register(void) {
  pf__fork_ok = pthread_atfork(pf__fork_prepare, pf__fork_parent, pf__fork_child) == 0;
}

/* At load, so that a fork before any lookup finds the table's locks handled too. */
__attribute__((constructor)) static void pf__fork_register_at_load(void) {
  pthread_once(&pf__fork_once, pf__fork_register);
}

/* After a failed call into TVM-FFI: moves the error it raised into packfn's slot (the same slot
 * once errors are joined) and returns -1. */
static __attribute__((cold)) int pf__tvm_failed(const pf__tvm_t* tvm, const char* func) {
  void* err = NULL;
  tvm->error_move_from_raised(&err);
  if (err) {
    (void)pf_error_raise(err);
    pf_object_release(err);
  } else {
    PF_ERROR_SET(PF_ERR_RUNTIME, "%s: TVM-FFI's global table failed", func);
  }
  return -1;
}

/* Drops the error a failed call into TVM-FFI raised (where packfn must not raise). */
static void pf__tvm_discard(const pf__tvm_t* tvm) {
  void* err = NULL;
  tvm->error_move_from_raised(&err);
  pf_object_release(err);
}

/* TVM-FFI's function named (name, len): 0 with a new reference in *out, NULL when it has none;
 * -1 with TVM-FFI's error raised in TVM-FFI's slot. Caller holds pf__tvm_table. */
static int pf__tvm_get(const pf__tvm_t* tvm, const char* name, size_t len, pf_object_t** out) {
  pf_byte_array_t key = {name, len};
  void* f = NULL;
  int rc = tvm->function_get_global(&key, &f);
  *out = rc == 0 ? f : NULL;
  return rc;
}

/* Removes `name` from TVM-FFI's table through its global ffi.FunctionRemoveGlobal (its C API
 * has no removal) when it names a function and, with `expect`, that function is `expect`. 1
 * when removed, 0 when not, -1 with TVM-FFI's error raised in TVM-FFI's slot. Caller holds
 * pf__tvm_table; *held receives what to release after unlocking (the removed function). */
static int pf__tvm_remove(const pf__tvm_t* tvm, const char* name, pf_object_t* expect,
                          pf_object_t** held) {
  pf_object_t *fn = NULL, *remove = NULL;
  *held = NULL;
  if (pf__tvm_get(tvm, name, strlen(name), &fn) != 0)
    return -1;
  if (!fn || (expect && fn != expect)) {
    *held = fn;
    return 0;
  }
  static const char remover[] = "ffi.FunctionRemoveGlobal";
  int got = pf__tvm_get(tvm, remover, sizeof remover - 1, &remove);
  if (got != 0 || !remove) {
    *held = fn;
    return got != 0 ? -1 : 0; /* a TVM-FFI without it: the entry stays */
  }
  pf_any_t arg = pf_any_cstr(name), result = pf_any_none();
  int rc = tvm->function_call(remove, &arg, 1, &result);
  pf_object_release(remove); /* TVM-FFI's own function: its release calls nothing of ours */
  *held = fn;
  return rc == 0 ? result.v_int64 != 0 : -1;
}

/* ---- lookups ---- */

/* The table's hash of a name: the absorbed state itself; the home slot takes its top bits. A
 * bijection of the state, so pf__probe's exactness for short names holds. *tail as
 * pf__hash_absorb gives it. */
static inline uint64_t pf__name_hash(const char* name, size_t len, uint64_t* tail) {
  return pf__hash_absorb(name, len, tail);
}

static inline pf__entry_t* pf__slot(pf__cell_t* t, size_t i) {
  return &t[i].entry;
}

static inline size_t pf__mask(const pf__cell_t* t) {
  return t[-1].head.mask;
}

static inline size_t pf__home(const pf__cell_t* t, uint64_t h) {
  return (size_t)(h >> t[-1].head.shift);
}

static __attribute__((noinline, cold)) int pf__lookup_invalid(const char* func, pf_object_t** out) {
  if (out)
    *out = NULL;
  return PF__NULL_ARG(func, out ? "name" : "out");
}

static int pf__check_name(const char* func, const char* name) {
  if (!name || !*name) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument name: expected a non-empty string, got %s", func,
                 name ? "\"\"" : "NULL");
    return -1;
  }
  return 0;
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
 * it on the process's first table use), TVM-FFI's function of that name (a new reference). */
static __attribute__((noinline, cold)) int pf__global_miss(const char* name, size_t len,
                                                           pf_object_t** out) {
  *out = NULL;
  const pf__tvm_t* tvm = pf__tvm_first_use();
  if (PF_LIKELY(!tvm))
    return 0;
  pthread_mutex_lock(&pf__tvm_table);
  int rc = pf__tvm_get(tvm, name, len, out);
  pthread_mutex_unlock(&pf__tvm_table);
  return rc == 0 ? 0 : pf__tvm_failed(tvm, "pf_global_get");
}

/* The general lookup: any length, registers the thread on its first lookup, and marks with an
 * exchange where the writers have no membarrier. */
static __attribute__((noinline)) int pf__lookup_slow(const char* name, size_t len,
                                                     pf_object_t** out) {
  *out = NULL;
  if (len == 0)
    return 0; /* no name is empty */
  uint64_t tail;
  uint64_t h = pf__name_hash(name, len, &tail);
  if (pf__me.mark == 1) { /* a lookup inside a lookup (a signal handler): already marked */
    *out = pf__probe(name, len, h, tail, 0);
    return 0; /* no fallback: TVM-FFI's table takes a lock */
  }
  if (pf__me.mark == PF__UNREGISTERED && !pf__reader_register()) {
    pthread_mutex_lock(&pf__writers);
    *out = pf__probe(name, len, h, tail, 0);
    pthread_mutex_unlock(&pf__writers);
    return *out ? 0 : pf__global_miss(name, len, out);
  }
  unsigned outside = pf__me.mark;
  if (outside == PF__FENCED)
    __atomic_exchange_n(&pf__me.mark, 1, __ATOMIC_SEQ_CST);
  else
    __atomic_store_n(&pf__me.mark, 1, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  *out = pf__probe(name, len, h, tail, 0);
  __atomic_store_n(&pf__me.mark, outside, __ATOMIC_RELEASE);
  return *out ? 0 : pf__global_miss(name, len, out);
}

/* The common lookup, a leaf that makes no call: names of 1 to 32 bytes from a thread
 * registered with membarrier-backed writers; anything else goes to pf__lookup_slow as a tail
 * call. The mark is a plain store to this thread's own word (no shared write, no barrier: the
 * writer's membarrier orders it before the probe's loads; the signal fence keeps the compiler
 * from moving them). */
static inline __attribute__((always_inline)) int pf__lookup(const char* name, size_t len,
                                                            pf_object_t** out) {
  if (PF_UNLIKELY(len - 1 > 31 || pf__me.mark))
    return pf__lookup_slow(name, len, out);
  uint64_t tail;
  uint64_t h = pf__name_hash(name, len, &tail);
  __atomic_store_n(&pf__me.mark, 1, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  pf_object_t* fn = pf__probe(name, len, h, tail, 1);
  __atomic_store_n(&pf__me.mark, 0, __ATOMIC_RELEASE);
  if (PF_UNLIKELY(!fn))
    return pf__global_miss(name, len, out); /* a tail call, off the hit path */
  *out = fn;
  return 0;
}

int pf_global_get_bytes(const char* name, size_t size, pf_object_t** out) {
  if (PF_UNLIKELY(!out || (!name && size)))
    return pf__lookup_invalid("pf_global_get_bytes", out);
  return pf__lookup(name, size, out);
}

int pf__global_lookup(const char* name, size_t size, pf_object_t** out) {
  return pf__lookup(name, size, out);
}

int pf__global_get_invalid(const char* name, pf_object_t** out) {
  (void)name;
  return pf__lookup_invalid("pf_global_get", out);
}

/* ---- writers (all under pf__writers) ---- */

/* The slot naming (name, len, h), live or removed, or NULL with *hole the empty slot that
 * ends its probe. */
static pf__entry_t* pf__find(pf__cell_t* t, const char* name, size_t len, uint64_t h,
                             pf__entry_t** hole) {
  size_t mask = pf__mask(t);
  for (size_t i = pf__home(t, h);; i = (i + 1) & mask) {
    pf__entry_t* e = pf__slot(t, i);
    if (!e->name) {
      *hole = e;
      return NULL;
    }
    if (e->hash == h && e->len == len && memcmp(e->name, name, len) == 0)
      return e;
  }
}

/* Fills an empty slot; its length, stored last with release, publishes it. */
static void pf__fill(pf__cell_t* t, pf__entry_t* e, const pf__entry_t* from) {
  e->hash = from->hash;
  e->tail = from->tail;
  __atomic_store_n(&e->fn, from->fn, __ATOMIC_RELAXED);
  __atomic_store_n(&e->name, from->name, __ATOMIC_RELAXED);
  __atomic_store_n(&e->len, from->len, __ATOMIC_RELEASE);
  t[-1].head.used++;
}

/* A new array holding t's live entries plus `entry` (NULL on failure to allocate), sized so
 * that it is at most 3/8 full; not yet visible to readers. */
static pf__cell_t* pf__rebuild(pf__cell_t* t, const pf__entry_t* entry) {
  size_t need = __atomic_load_n(&pf__live, __ATOMIC_RELAXED) + 1, cap = 64, shift = 58;
  while (need * 8 > cap * 3)
    cap *= 2, shift--;
  pf__cell_t* grown = calloc(cap + 1, sizeof(pf__cell_t));
  if (!grown)
    return NULL;
  grown->head.mask = cap - 1;
  grown->head.shift = shift;
  grown++;
  pf__entry_t* hole;
  for (size_t i = 0; i <= pf__mask(t); ++i) {
    pf__entry_t* e = pf__slot(t, i);
    if (e->fn && !pf__find(grown, e->name, e->len, e->hash, &hole))
      pf__fill(grown, hole, e);
  }
  if (!pf__find(grown, entry->name, entry->len, entry->hash, &hole))
    pf__fill(grown, hole, entry);
  return grown;
}

/* Frees a table no reader can reach any more, with the names of its removed entries (those
 * a rebuild dropped); the live ones moved to the new table. The static empty table is not
 * freed, but a name registered into it and removed again is (it leaked). */
static void pf__free_table(pf__cell_t* t) {
  for (size_t i = 0; i <= pf__mask(t); ++i) {
    pf__entry_t* e = pf__slot(t, i);
    if (e->name && !e->fn)
      free(e->name);
  }
  if (t != pf__empty + 1)
    free(t - 1);
}

static int pf__already(const char* name) {
  PF_ERROR_SET(PF_ERR_VALUE,
               "pf_global_set: function '%s' is already registered (pass allow_override=1 "
               "to replace it)",
               name);
  return -1;
}

/* pf_global_set in this table: 0, with *old the replaced function (owned, no lookup can reach
 * it any more) or NULL; -1 with the error raised. */
static int pf__set(const char* name, pf_object_t* fn, int allow_override, pf_object_t** old_out) {
  *old_out = NULL;
  size_t len = strlen(name);
  uint64_t tail;
  uint64_t h = pf__name_hash(name, len, &tail);
  pthread_mutex_lock(&pf__writers);
  pf__cell_t* t = pf__cells;
  pf__entry_t* hole = NULL;
  pf__entry_t* e = pf__find(t, name, len, h, &hole);
  if (e && e->fn && !allow_override) {
    pthread_mutex_unlock(&pf__writers);
    return pf__already(name);
  }
  if (e) { /* replaces the function, or brings a removed name back */
    pf_object_retain(fn);
    pf_object_t* old = e->fn;
    __atomic_store_n(&e->fn, fn, __ATOMIC_SEQ_CST);
    if (!old)
      __atomic_fetch_add(&pf__live, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&pf__writers);
    if (old) {
      pf__synchronize();
      *old_out = old; /* released outside every lock: its deleter may use the table */
    }
    return 0;
  }
  char* copy = pf__name_copy_alloc(len);
  if (!copy) {
    pthread_mutex_unlock(&pf__writers);
    return pf__raise_oom("pf_global_set", len + 1);
  }
  memcpy(copy, name, len + 1);
  pf__entry_t entry = {h, tail, len, copy, fn};
  if ((t[-1].head.used + 1) * 2 <= pf__mask(t) + 1) {
    pf_object_retain(fn);
    pf__fill(t, hole, &entry);
    __atomic_fetch_add(&pf__live, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&pf__writers);
    return 0;
  }
  pf__cell_t* grown = pf__rebuild(t, &entry);
  if (!grown) {
    /* sized while t is still ours: once the lock is given back another writer may free it */
    size_t want = sizeof(pf__cell_t) * (pf__mask(t) + 2);
    pthread_mutex_unlock(&pf__writers);
    free(copy);
    return pf__raise_oom("pf_global_set", want);
  }
  pf_object_retain(fn);
  __atomic_store_n(&pf__cells, grown, __ATOMIC_SEQ_CST);
  pf__block = grown - 1;
  pf__rebuilds++;
  __atomic_fetch_add(&pf__live, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&pf__writers);
  pf__synchronize();
  pf__free_table(t);
  return 0;
}

static pf_object_t* pf__remove(const char* name, size_t len, uint64_t h, pf_object_t* expect);

int pf_global_set(const char* name, pf_object_t* fn, int allow_override) {
  if (pf__check_name("pf_global_set", name) != 0)
    return -1;
  if (!fn || fn->type_index != PF_TYPE_FUNCTION) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_global_set: argument fn (for '%s'): expected Function, got %s",
                 name, fn ? pf_type_name(fn->type_index) : "NULL");
    return -1;
  }
  const pf__tvm_t* tvm = pf__tvm_first_use();
  pf_object_t *old = NULL, *theirs = NULL, *undone = NULL;
  if (!tvm)
    return pf__set(name, fn, allow_override, &old) == 0 ? (pf_object_release(old), 0) : -1;
  /* joined: one name space, so a name TVM-FFI holds is taken too; both tables get fn */
  int rc = 0;
  pthread_mutex_lock(&pf__tvm_table);
  if (pf__tvm_get(tvm, name, strlen(name), &theirs) != 0)
    rc = -2;
  else if (theirs && !allow_override)
    rc = pf__already(name);
  else if (pf__set(name, fn, allow_override, &old) != 0)
    rc = -1;
  else {
    pf_byte_array_t key = {name, strlen(name)};
    if (tvm->function_set_global(&key, fn, 1) != 0) {
      /* TVM-FFI refused it: packfn's table gets back what it had, so that a failed call
       * changed nothing (putting back a name it holds allocates nothing) */
      size_t len = strlen(name);
      uint64_t tail;
      if (old)
        (void)pf__set(name, old, 1, &undone); /* undone: fn, the table's reference to it */
      else
        undone = pf__remove(name, len, pf__name_hash(name, len, &tail), fn);
      rc = -2;
    }
  }
  pthread_mutex_unlock(&pf__tvm_table);
  pf_object_release(theirs); /* the replaced TVM-FFI entry dies here, outside the lock */
  pf_object_release(old);
  pf_object_release(undone);
  return rc == -2 ? pf__tvm_failed(tvm, "pf_global_set") : rc;
}

/* Removes the function named (name, len, h) when `expect` is NULL or it is `expect`; the name
 * stays as a removed slot until a rebuild. Returns the function (owned) once no lookup can
 * still reach it, or NULL when nothing matched. */
static pf_object_t* pf__remove(const char* name, size_t len, uint64_t h, pf_object_t* expect) {
  pthread_mutex_lock(&pf__writers);
  pf__entry_t* hole;
  pf__entry_t* e = pf__find(pf__cells, name, len, h, &hole);
  pf_object_t* fn = e ? e->fn : NULL;
  if (!fn || (expect && fn != expect)) {
    pthread_mutex_unlock(&pf__writers);
    return NULL;
  }
  __atomic_store_n(&e->fn, NULL, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&pf__live, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&pf__writers);
  pf__synchronize();
  return fn;
}

int pf_global_remove(const char* name) {
  if (pf__check_name("pf_global_remove", name) != 0)
    return -1;
  size_t len = strlen(name);
  uint64_t tail;
  const pf__tvm_t* tvm = pf__tvm_first_use();
  pf_object_t* held = NULL;
  int theirs = 0; /* 1: removed from TVM-FFI's table, -1: TVM-FFI failed */
  if (tvm)
    pthread_mutex_lock(&pf__tvm_table);
  pf_object_t* fn = pf__remove(name, len, pf__name_hash(name, len, &tail), NULL);
  if (tvm) {
    theirs = pf__tvm_remove(tvm, name, NULL, &held);
    pthread_mutex_unlock(&pf__tvm_table);
  }
  pf_object_release(held);
  pf_object_release(fn);
  if (theirs < 0)
    return pf__tvm_failed(tvm, "pf_global_remove");
  if (!fn && !theirs) {
    PF_ERROR_SET(PF_ERR_KEY, "pf_global_remove: no global function is named '%s'", name);
    return -1;
  }
  return 0;
}

size_t pf_global_count(void) {
  return __atomic_load_n(&pf__live, __ATOMIC_RELAXED);
}

static int pf__cmp_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

int pf_global_list(char*** out, size_t* count) {
  if (!out) {
    return PF__NULL_ARG("pf_global_list", "out");
  }
  *out = NULL;
  pthread_mutex_lock(&pf__writers);
  pf__cell_t* t = pf__cells;
  size_t n = 0, bytes = 0;
  for (size_t i = 0; i <= pf__mask(t); ++i)
    if (pf__slot(t, i)->fn)
      n++, bytes += pf__slot(t, i)->len + 1;
  size_t total = sizeof(char*) * (n + 1) + bytes;
  char** names = malloc(total);
  if (names) {
    char* text = (char*)(names + n + 1);
    size_t k = 0;
    for (size_t i = 0; i <= pf__mask(t); ++i) {
      const pf__entry_t* e = pf__slot(t, i);
      if (!e->fn)
        continue;
      memcpy(text, e->name, e->len + 1);
      names[k++] = text;
      text += e->len + 1;
    }
    names[k] = NULL;
  }
  pthread_mutex_unlock(&pf__writers);
  if (!names)
    return pf__raise_oom("pf_global_list", total);
  qsort(names, n, sizeof(char*), pf__cmp_names);
  *out = names;
  if (count)
    *count = n;
  return 0;
}

void pf_global_list_free(char** names) {
  free(names);
}

int pf_global_suggest(const char* name, char* buf, size_t size) {
  if (!name || (!buf && size > 0))
    return PF__NULL_ARG("pf_global_suggest", name ? "buf" : "name");
  pf__suggest_t s;
  pf__suggest_init(&s, name);
  pthread_mutex_lock(&pf__writers);
  pf__cell_t* t = pf__cells;
  for (size_t i = 0; i <= pf__mask(t); ++i)
    if (pf__slot(t, i)->fn)
      pf__suggest_offer(&s, pf__slot(t, i)->name);
  int found = pf__suggest_result(&s, buf, size); /* copied before the entry may go */
  pthread_mutex_unlock(&pf__writers);
  return found;
}

void pf__global_stats(pf__global_stats_t* out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&pf__writers);
  pf__cell_t* t = pf__cells;
  out->capacity = pf__mask(t) + 1;
  out->used = t[-1].head.used;
  out->rebuilds = pf__rebuilds;
  for (size_t i = 0; i <= pf__mask(t); ++i) {
    const pf__entry_t* e = pf__slot(t, i);
    if (!e->fn)
      continue;
    size_t probes = ((i - pf__home(t, e->hash)) & pf__mask(t)) + 1;
    out->live++;
    out->total_probes += probes;
    if (probes > out->max_probes)
      out->max_probes = probes;
  }
  pthread_mutex_unlock(&pf__writers);
}

int pf_global_call(const char* name, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  pf_object_t* fn;
  if (result)
    *result = pf_any_none();
  if (pf__check_name("pf_global_call", name) != 0 || pf_global_get(name, &fn) != 0)
    return -1;
  if (!fn) {
    char near[128];
    int found = pf_global_suggest(name, near, sizeof near) == 1;
    PF_ERROR_SET(PF_ERR_KEY, "pf_global_call: no global function is named '%s'%s%s%s", name,
                 found ? " (did you mean '" : "", near, found ? "'?)" : "");
    return -1;
  }
  int rc = pf_function_call(fn, args, num_args, result);
  pf_object_release(fn);
  return rc == 0 ? 0 : pf_error_ensure(name, rc);
}

/* ---- static registration ---- */

static int pf__static_failures;

int pf_global_static_failures(void) {
  return __atomic_load_n(&pf__static_failures, __ATOMIC_RELAXED);
}

void pf__global_register_static(const char* name, pf_safe_call_t call, const pf_signature_t* sig,
                                pf_typed_call_t typed, pf_object_t** slot) {
  pf_object_t* fn = NULL;
  int rc = sig && call ? pf_function_create_static(sig, call, &fn)
           : sig       ? pf_function_create_typed(sig, typed, NULL, NULL, &fn)
                       : pf_function_create_direct(call, &fn);
  if (rc == 0) /* neither name: pf_global_set raises for the NULL name */
    rc = pf_global_set(name ? name : sig ? sig->name : NULL, fn, 0);
  if (rc != 0) {
    __atomic_fetch_add(&pf__static_failures, 1, __ATOMIC_RELAXED);
    pf_object_release(fn);
    fn = NULL;
  }
  *slot = fn;
}

void pf__global_unregister_static(const char* name, const pf_signature_t* sig, pf_object_t** slot) {
  pf_object_t* fn = *slot;
  *slot = NULL;
  if (!fn)
    return;
  name = name ? name : sig ? sig->name : NULL; /* as pf__global_register_static chose it */
  if (!name)                                   /* not registered: *slot was NULL already */
    return;
  size_t len = strlen(name);
  uint64_t tail;
  const pf__tvm_t* tvm = pf__tvm(); /* the library is unloading: TVM-FFI's entry goes too */
  pf_object_t* held = NULL;
  if (tvm)
    pthread_mutex_lock(&pf__tvm_table);
  pf_object_t* removed = pf__remove(name, len, pf__name_hash(name, len, &tail), fn);
  if (tvm) {
    if (pf__tvm_remove(tvm, name, fn, &held) < 0)
      pf__tvm_discard(tvm);
    pthread_mutex_unlock(&pf__tvm_table);
  }
  pf_object_release(held);
  pf_object_release(removed);
  pf_object_release(fn);
}

/* Joining TVM-FFI (tvm.c): every function of this table is registered in TVM-FFI's, except
 * under a name TVM-FFI already holds (each table then keeps its own). Raises nothing. */
static void pf__global_tvm_joined(const pf__tvm_t* tvm) {
  pthread_mutex_lock(&pf__tvm_table);
  pthread_mutex_lock(&pf__writers);
  pf__cell_t* t = pf__cells;
  for (size_t i = 0; i <= pf__mask(t); ++i) {
    const pf__entry_t* e = pf__slot(t, i);
    pf_byte_array_t key = {e->name, e->len};
    if (e->fn && tvm->function_set_global(&key, e->fn, 0) != 0)
      pf__tvm_discard(tvm); /* the name is TVM-FFI's */
  }
  pthread_mutex_unlock(&pf__writers);
  pthread_mutex_unlock(&pf__tvm_table);
}

__attribute__((constructor)) static void pf__global_tvm_joined_hook(void) {
  pf__tvm_join_hooks[PF__TVM_HOOK_GLOBALS] = pf__global_tvm_joined;
}
