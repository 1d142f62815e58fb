/* The global function table: an open-addressing hash map from names to function objects,
 * guarded by a reader-counting lock (readers never wait for readers) plus static registration. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/typed.h"

#include "common.h"
#include "bytes.h"
#include "suggest.h"

typedef struct {
  uint64_t hash;
  uint64_t tail; /* pf__hash_absorb's last word: for names of up to 8 bytes, the name itself */
  size_t len;
  char* name;      /* owned, NUL-terminated; NULL marks an empty slot */
  pf_object_t* fn; /* owned; NULL exactly in empty slots */
} pf__entry_t;

typedef struct {
  pf__entry_t* slots; /* capacity entries, a power of two */
  size_t capacity;
  size_t count;
} pf__table_t;

/* An empty table still has one (empty) slot, so lookups need no test for a missing array;
 * the first insertion replaces it with an allocated one. */
static pf__entry_t pf__no_slots[1];
static pf__table_t pf__table = {pf__no_slots, 1, 0};

/* Lock word: number of active readers, plus PF__WRITER while a writer holds the table.
 * Writers first serialise on a mutex (readers never touch it), then set the bit and wait for
 * the readers in flight to leave; they hold the bit only to swap or shift a few entries. */
#define PF__WRITER 0x80000000u
static uint32_t pf__lock;
static pthread_mutex_t pf__writers = PTHREAD_MUTEX_INITIALIZER;

static inline void pf__read_lock(void) {
  for (;;) {
    uint32_t s = __atomic_fetch_add(&pf__lock, 1, __ATOMIC_ACQUIRE);
    if (PF_LIKELY(!(s & PF__WRITER)))
      return;
    __atomic_fetch_sub(&pf__lock, 1, __ATOMIC_RELAXED);
    while (__atomic_load_n(&pf__lock, __ATOMIC_RELAXED) & PF__WRITER)
      sched_yield();
  }
}

static inline void pf__read_unlock(void) {
  __atomic_fetch_sub(&pf__lock, 1, __ATOMIC_RELEASE);
}

/* Caller holds pf__writers. */
static void pf__write_lock(void) {
  __atomic_fetch_or(&pf__lock, PF__WRITER, __ATOMIC_ACQUIRE);
  while (__atomic_load_n(&pf__lock, __ATOMIC_ACQUIRE) != PF__WRITER)
    sched_yield();
}

static void pf__write_unlock(void) {
  __atomic_fetch_and(&pf__lock, ~PF__WRITER, __ATOMIC_RELEASE);
}

/* The table's hash of a name: the absorbed state folded once, so the low bits (the slot index)
 * depend on every byte; a bijection of the state, so pf__probe's exactness for short names
 * holds. *tail as pf__hash_absorb gives it. */
static inline uint64_t pf__name_hash(const char* name, size_t len, uint64_t* tail) {
  uint64_t h = pf__hash_absorb(name, len, tail);
  return h ^ (h >> 32);
}

/* Slot holding the name, or NULL. Caller holds a read or write lock (or the writer mutex). */
static pf__entry_t* pf__find(const pf__table_t* t, const char* name, size_t len, uint64_t h) {
  size_t mask = t->capacity - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    pf__entry_t* e = &t->slots[i];
    if (!e->name)
      return NULL;
    if (e->hash == h && e->len == len && memcmp(e->name, name, len) == 0)
      return e;
  }
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

/* Probes for (name, len, h, tail) and retains what it finds; caller holds the read lock. A
 * name of up to 8 bytes is identified by its hash, tail word and length (see pf__hash_absorb), so
 * only longer names compare bytes; with `short_names` set the caller guarantees len <= 32, so
 * the compare needs no call. An empty slot stops the probe: its fn is NULL. */
static inline __attribute__((always_inline)) pf_object_t*
pf__probe(const char* name, size_t len, uint64_t h, uint64_t tail, int short_names) {
  const pf__entry_t* slots = pf__table.slots;
  size_t mask = pf__table.capacity - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    const pf__entry_t* e = &slots[i];
    if (e->hash == h && e->tail == tail && e->len == len &&
        (len <= 8 || (short_names ? pf__bytes_equal_short(e->name, name, len)
                                  : pf__bytes_equal(e->name, name, len)))) {
      pf_object_retain(e->fn);
      return e->fn;
    }
    if (!e->name)
      return NULL;
  }
}

/* The general lookup: any length, and waits while a writer holds the table. */
static __attribute__((noinline)) int pf__lookup_slow(const char* name, size_t len,
                                                     pf_object_t** out) {
  uint64_t tail;
  uint64_t h = pf__name_hash(name, len, &tail);
  pf__read_lock();
  *out = pf__probe(name, len, h, tail, 0);
  pf__read_unlock();
  return 0;
}

/* The common lookup, a leaf that makes no call: names of up to 32 bytes and no writer in the
 * table; anything else goes to pf__lookup_slow as a tail call. */
static inline __attribute__((always_inline)) int pf__lookup(const char* name, size_t len,
                                                            pf_object_t** out) {
  if (PF_UNLIKELY(len > 32))
    return pf__lookup_slow(name, len, out);
  uint64_t tail;
  uint64_t h = pf__name_hash(name, len, &tail);
  if (PF_UNLIKELY(__atomic_fetch_add(&pf__lock, 1, __ATOMIC_ACQUIRE) & PF__WRITER)) {
    __atomic_fetch_sub(&pf__lock, 1, __ATOMIC_RELAXED);
    return pf__lookup_slow(name, len, out);
  }
  pf_object_t* fn = pf__probe(name, len, h, tail, 1);
  pf__read_unlock();
  *out = fn;
  return 0;
}

int pf_global_get_bytes(const char* name, size_t size, pf_object_t** out) {
  if (PF_UNLIKELY(!out || (!name && size)))
    return pf__lookup_invalid("pf_global_get_bytes", out);
  return pf__lookup(name, size, out);
}

int pf__global_get_invalid(const char* name, pf_object_t** out) {
  (void)name;
  return pf__lookup_invalid("pf_global_get", out);
}

/* Inserts into a table with room (count < capacity / 2). Caller holds the write lock. */
static void pf__insert(pf__table_t* t, pf__entry_t entry) {
  size_t mask = t->capacity - 1;
  size_t i = (size_t)entry.hash & mask;
  while (t->slots[i].name)
    i = (i + 1) & mask;
  t->slots[i] = entry;
  t->count++;
}

int pf_global_set(const char* name, pf_object_t* fn, int allow_override) {
  if (pf__check_name("pf_global_set", name) != 0)
    return -1;
  if (!fn || fn->type_index != PF_TYPE_FUNCTION) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_global_set: argument fn (for '%s'): expected Function, got %s",
                 name, fn ? pf_type_name(fn->type_index) : "NULL");
    return -1;
  }
  size_t len = strlen(name);
  uint64_t tail;
  uint64_t h = pf__name_hash(name, len, &tail);
  pthread_mutex_lock(&pf__writers);
  pf__entry_t* e = pf__find(&pf__table, name, len, h);
  if (e) {
    if (!allow_override) {
      pthread_mutex_unlock(&pf__writers);
      PF_ERROR_SET(PF_ERR_VALUE,
                   "pf_global_set: function '%s' is already registered (pass allow_override=1 "
                   "to replace it)",
                   name);
      return -1;
    }
    pf_object_retain(fn);
    pf__write_lock();
    pf_object_t* old = e->fn;
    e->fn = fn;
    pf__write_unlock();
    pthread_mutex_unlock(&pf__writers);
    pf_object_release(old); /* outside every lock: its deleter may use the table */
    return 0;
  }
  /* allocate everything before taking the write lock */
  char* copy = malloc(len + 1);
  pf__table_t grown = {NULL, 0, 0};
  if (copy && (pf__table.count + 1) * 2 > pf__table.capacity) {
    grown.capacity = pf__table.capacity < 64 ? 64 : pf__table.capacity * 2;
    grown.slots = calloc(grown.capacity, sizeof(pf__entry_t));
    if (grown.slots)
      for (size_t i = 0; i < pf__table.capacity; ++i)
        if (pf__table.slots[i].name)
          pf__insert(&grown, pf__table.slots[i]);
  }
  if (!copy || (grown.capacity && !grown.slots)) {
    pthread_mutex_unlock(&pf__writers);
    free(copy);
    return pf__raise_oom("pf_global_set", len + 1);
  }
  memcpy(copy, name, len + 1);
  pf_object_retain(fn);
  pf__entry_t entry = {h, tail, len, copy, fn};
  pf__entry_t* old_slots = NULL;
  pf__write_lock();
  if (grown.slots) {
    old_slots = pf__table.slots;
    pf__table = grown;
  }
  pf__insert(&pf__table, entry);
  pf__write_unlock();
  pthread_mutex_unlock(&pf__writers);
  if (old_slots != pf__no_slots)
    free(old_slots);
  return 0;
}

/* Removes the entry for (name, len, h) when `expect` is NULL or the entry holds `expect`;
 * returns the removed function (owned) and frees the name, or NULL when nothing matched. */
static pf_object_t* pf__remove(const char* name, size_t len, uint64_t h, pf_object_t* expect) {
  pthread_mutex_lock(&pf__writers);
  pf__entry_t* e = pf__find(&pf__table, name, len, h);
  if (!e || (expect && e->fn != expect)) {
    pthread_mutex_unlock(&pf__writers);
    return NULL;
  }
  pf_object_t* fn = e->fn;
  char* old_name = e->name;
  size_t mask = pf__table.capacity - 1;
  size_t hole = (size_t)(e - pf__table.slots);
  pf__write_lock();
  /* backward-shift deletion keeps every probe sequence unbroken without tombstones */
  for (size_t j = (hole + 1) & mask; pf__table.slots[j].name; j = (j + 1) & mask) {
    size_t home = (size_t)pf__table.slots[j].hash & mask;
    int movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      pf__table.slots[hole] = pf__table.slots[j];
      hole = j;
    }
  }
  pf__table.slots[hole] = (pf__entry_t){0, 0, 0, NULL, NULL};
  pf__table.count--;
  pf__write_unlock();
  pthread_mutex_unlock(&pf__writers);
  free(old_name);
  return fn;
}

int pf_global_remove(const char* name) {
  if (pf__check_name("pf_global_remove", name) != 0)
    return -1;
  size_t len = strlen(name);
  uint64_t tail;
  pf_object_t* fn = pf__remove(name, len, pf__name_hash(name, len, &tail), NULL);
  if (!fn) {
    PF_ERROR_SET(PF_ERR_KEY, "pf_global_remove: no global function is named '%s'", name);
    return -1;
  }
  pf_object_release(fn);
  return 0;
}

size_t pf_global_count(void) {
  pf__read_lock();
  size_t n = pf__table.count;
  pf__read_unlock();
  return n;
}

static int pf__cmp_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

int pf_global_list(char*** out, size_t* count) {
  if (!out) {
    return PF__NULL_ARG("pf_global_list", "out");
  }
  *out = NULL;
  pf__read_lock();
  size_t n = pf__table.count, bytes = 0;
  for (size_t i = 0; i < pf__table.capacity; ++i)
    if (pf__table.slots[i].name)
      bytes += pf__table.slots[i].len + 1;
  size_t total = sizeof(char*) * (n + 1) + bytes;
  char** names = malloc(total);
  if (names) {
    char* text = (char*)(names + n + 1);
    size_t k = 0;
    for (size_t i = 0; i < pf__table.capacity; ++i) {
      const pf__entry_t* e = &pf__table.slots[i];
      if (!e->name)
        continue;
      memcpy(text, e->name, e->len + 1);
      names[k++] = text;
      text += e->len + 1;
    }
    names[k] = NULL;
  }
  pf__read_unlock();
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
  pf__read_lock();
  for (size_t i = 0; i < pf__table.capacity; ++i)
    if (pf__table.slots[i].name)
      pf__suggest_offer(&s, pf__table.slots[i].name);
  int found = pf__suggest_result(&s, buf, size); /* copied before the entry may go */
  pf__read_unlock();
  return found;
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
  if (rc == 0)
    rc = pf_global_set(name ? name : sig->name, fn, 0);
  if (rc != 0) {
    __atomic_fetch_add(&pf__static_failures, 1, __ATOMIC_RELAXED);
    pf_object_release(fn);
    fn = NULL;
  }
  *slot = fn;
}

void pf__global_unregister_static(const char* name, pf_object_t** slot) {
  pf_object_t* fn = *slot;
  *slot = NULL;
  if (!fn || !name)
    return;
  size_t len = strlen(name);
  uint64_t tail;
  pf_object_release(pf__remove(name, len, pf__name_hash(name, len, &tail), fn));
  pf_object_release(fn);
}
