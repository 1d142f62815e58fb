/* Changing the global function table (global_table.h): registering, replacing and removing
 * names under the writers' mutex, and rebuilds, each waiting out the readers' grace period
 * (global.c) before it frees what it took out; TVM-FFI's table kept in step once joined;
 * listing, suggestions and calls by name; static registration. Lookups are global.c's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/typed.h"

#include "global_table.h"

#include "common.h"
#include "function_private.h"
#include "global_private.h"
#include "suggest.h"

/* ---- the writers' state ---- */

static pf__cell_t* volatile pf__block =
    pf__empty;              /* pf__cells - 1: the allocation, for leak checkers */
static size_t pf__live;     /* names with a function */
static size_t pf__rebuilds; /* for pf__global_stats; under pf__writers */

/* What left the table while a module load was in flight (function_private.h), under
 * pf__writers. */
static unsigned pf__watchers;
static const void* pf__displaced[PF__DISPLACED_MAX];
static size_t pf__displaced_n;
static int pf__displaced_overflow;

void pf__global_watch_begin(void) {
  pthread_mutex_lock(&pf__writers);
  pf__watchers++;
  pthread_mutex_unlock(&pf__writers);
}

void pf__global_watch_end(void) {
  pthread_mutex_lock(&pf__writers);
  if (--pf__watchers == 0) {
    pf__displaced_n = 0;
    pf__displaced_overflow = 0;
  }
  pthread_mutex_unlock(&pf__writers);
}

size_t pf__global_displaced(const void** out, int* overflow) {
  pthread_mutex_lock(&pf__writers);
  size_t n = pf__displaced_n;
  memcpy(out, pf__displaced, n * sizeof *out);
  *overflow = pf__displaced_overflow;
  pthread_mutex_unlock(&pf__writers);
  return n;
}

/* Records the addresses of fn, which leaves the table, while a load is in flight. Under
 * pf__writers; reads fn's fields only (calls nothing of it). */
static void pf__displace(const pf_object_t* fn) {
  if (!pf__watchers || !fn)
    return;
  const void* addrs[PF__FUNCTION_CODE_MAX];
  size_t n = pf__function_code(fn, addrs);
  for (size_t k = 0; k < n; ++k) {
    if (!addrs[k])
      continue;
    if (pf__displaced_n == PF__DISPLACED_MAX)
      pf__displaced_overflow = 1;
    else
      pf__displaced[pf__displaced_n++] = addrs[k];
  }
}

/* Room for a name's copy (len + 1 bytes) on cache lines of its own: a lookup of a name longer
 * than 8 bytes reads its copy, and a copy sharing a line with something other threads write
 * (a function's reference count, say) would make every lookup of it miss the cache while they
 * run (lookups from two threads then ran at half the speed of one). */
#define PF__LINE 64
static size_t pf__name_copy_size(size_t len) {
  return (len + 1 + PF__LINE - 1) & ~(size_t)(PF__LINE - 1);
}

static char* pf__name_copy_alloc(size_t len) {
  void* p = NULL;
  return len < SIZE_MAX - PF__LINE && posix_memalign(&p, PF__LINE, pf__name_copy_size(len)) == 0
             ? p
             : NULL;
}

/* ---- TVM-FFI's table, once joined (pf__tvm_table, pf__tvm_get: global_table.h) ---- */

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

static int pf__check_name(const char* func, const char* name) {
  if (!name || !*name) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument name: expected a non-empty string, got %s", func,
                 name ? "\"\"" : "NULL");
    return -1;
  }
  return 0;
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
 * that it is at most 3/8 full; not yet visible to readers. *bytes receives its size. */
static pf__cell_t* pf__rebuild(pf__cell_t* t, const pf__entry_t* entry, size_t* bytes) {
  size_t need = __atomic_load_n(&pf__live, __ATOMIC_RELAXED) + 1, cap = 64, shift = 58;
  while (need * 8 > cap * 3)
    cap *= 2, shift--;
  *bytes = (cap + 1) * sizeof(pf__cell_t);
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
    pf__displace(old);
    pthread_mutex_unlock(&pf__writers);
    if (old) {
      if (!pf__synchronize())
        pf__keep(old);
      *old_out = old; /* released outside every lock: its deleter may use the table */
    }
    return 0;
  }
  char* copy = pf__name_copy_alloc(len);
  if (!copy) {
    pthread_mutex_unlock(&pf__writers);
    return pf__raise_oom("pf_global_set", pf__name_copy_size(len));
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
  size_t want; /* the new array's size (it named the old one's: review) */
  pf__cell_t* grown = pf__rebuild(t, &entry, &want);
  if (!grown) {
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
  if (pf__synchronize())
    pf__free_table(t);
  else
    pf__keep_table(t);
  return 0;
}

static pf_object_t* pf__remove(const char* name, size_t len, uint64_t h, pf_object_t* expect,
                               int watched);

int pf_global_set(const char* name, pf_object_t* fn, int allow_override) {
  if (pf__check_name("pf_global_set", name) != 0)
    return -1;
  if (!fn || fn->type_index != PF_TYPE_FUNCTION) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_global_set: argument fn (for '%s'): expected Function, got %s",
                 name, fn ? pf_type_name(fn->type_index) : "NULL");
    return -1;
  }
  (void)pf__tvm_first_use(); /* may join: before any lock */
  pf_object_t *old = NULL, *theirs = NULL, *undone = NULL;
  int rc = 0;
  /* "joined?" is read under the lock the join's table hook takes: a write that finds packfn
   * unjoined is in packfn's table before the hook copies it into TVM-FFI's, and one that
   * finds it joined writes both tables */
  pthread_mutex_lock(&pf__tvm_table);
  const pf__tvm_t* tvm = pf__tvm();
  if (!tvm) {
    rc = pf__set(name, fn, allow_override, &old);
    pthread_mutex_unlock(&pf__tvm_table);
    pf_object_release(old);
    return rc;
  }
  /* joined: one name space, so a name TVM-FFI holds is taken too; both tables get fn */
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
        undone = pf__remove(name, len, pf__name_hash(name, len, &tail), fn, 1);
      rc = -2;
    }
  }
  pthread_mutex_unlock(&pf__tvm_table);
  pf_object_release(theirs); /* the replaced TVM-FFI entry dies here, outside the lock */
  pf_object_release(old);
  pf_object_release(undone);
  return rc == -2 ? pf__tvm_failed(tvm, "pf_global_set", "global table") : rc;
}

/* Removes the function named (name, len, h) when `expect` is NULL or it is `expect`; the name
 * stays as a removed slot until a rebuild. Returns the function (owned) once no lookup can
 * still reach it, or NULL when nothing matched. `watched`: recorded for the loads in flight
 * (pf__displace); not for pf__global_remove_if, whose callers account for what they remove. */
static pf_object_t* pf__remove(const char* name, size_t len, uint64_t h, pf_object_t* expect,
                               int watched) {
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
  if (watched)
    pf__displace(fn);
  pthread_mutex_unlock(&pf__writers);
  if (!pf__synchronize())
    pf__keep(fn);
  return fn;
}

int pf_global_remove(const char* name) {
  if (pf__check_name("pf_global_remove", name) != 0)
    return -1;
  size_t len = strlen(name);
  uint64_t tail;
  (void)pf__tvm_first_use(); /* may join: before any lock */
  pf_object_t* held = NULL;
  int theirs = 0;                     /* 1: removed from TVM-FFI's table, -1: TVM-FFI failed */
  pthread_mutex_lock(&pf__tvm_table); /* "joined?" under the join hook's lock, as in set */
  const pf__tvm_t* tvm = pf__tvm();
  pf_object_t* fn = pf__remove(name, len, pf__name_hash(name, len, &tail), NULL, 1);
  if (tvm)
    theirs = pf__tvm_remove(tvm, name, NULL, &held);
  pthread_mutex_unlock(&pf__tvm_table);
  pf_object_release(held);
  pf_object_release(fn);
  if (theirs < 0)
    return pf__tvm_failed(tvm, "pf_global_remove", "global table");
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

int pf__suggest_in_globals(void* unused, const char* name, char* buf, size_t size) {
  (void)unused;
  return pf_global_suggest(name, buf, size);
}

int pf_global_call(const char* name, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  pf_object_t* fn;
  if (result)
    *result = pf_any_none();
  if (pf__check_name("pf_global_call", name) != 0 ||
      pf__global_lookup_as(name, strlen(name), &fn, "pf_global_call") != 0)
    return -1;
  if (!fn) {
    char* near = pf__suggest_whole(pf__suggest_in_globals, NULL, name); /* whole (review) */
    PF_ERROR_SET(PF_ERR_KEY, "pf_global_call: no global function is named '%s'%s%s%s", name,
                 near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    free(near);
    return -1;
  }
  return pf__call_found("pf_global_call", name, fn, args, num_args, result);
}

/* ---- static registration ---- */

static int pf__static_failures;

/* The slots of the static registrations of libraries still loaded, under pf__writers: the module
 * loader asks how many references a refused library's own slots hold (pf__global_static_holders),
 * which its destructors drop, so as not to count them as held elsewhere. A registration reserves
 * its place first, so that recording it cannot fail once the function is in the table. */
static pf_object_t*** pf__static_slots;
static size_t pf__static_count, pf__static_reserved, pf__static_cap;

/* Reserves a place; 0, or -1 (nothing raised) when memory runs out. Under pf__writers. */
static int pf__static_slot_reserve(void) {
  if (pf__static_count + pf__static_reserved == pf__static_cap) {
    size_t cap = pf__static_cap ? 2 * pf__static_cap : 16;
    pf_object_t*** grown = realloc(pf__static_slots, cap * sizeof *grown);
    if (!grown)
      return -1;
    pf__static_slots = grown;
    pf__static_cap = cap;
  }
  pf__static_reserved++;
  return 0;
}

/* Frees the array once no slot is recorded or reserved (a library unloaded leaves nothing).
 * Under pf__writers. */
static void pf__static_slots_trim(void) {
  if (pf__static_count == 0 && pf__static_reserved == 0) {
    free(pf__static_slots);
    pf__static_slots = NULL;
    pf__static_cap = 0;
  }
}

/* Under pf__writers. */
static void pf__static_slot_remove(pf_object_t** slot) {
  for (size_t i = 0; i < pf__static_count; ++i)
    if (pf__static_slots[i] == slot) {
      pf__static_slots[i] = pf__static_slots[--pf__static_count];
      break;
    }
  pf__static_slots_trim();
}

size_t pf__global_static_holders(const pf_object_t* fn) {
  size_t n = 0;
  pthread_mutex_lock(&pf__writers);
  for (size_t i = 0; i < pf__static_count; ++i)
    n += *pf__static_slots[i] == fn;
  pthread_mutex_unlock(&pf__writers);
  return n;
}

int pf_global_static_failures(void) {
  return __atomic_load_n(&pf__static_failures, __ATOMIC_RELAXED);
}

void pf__global_register_static(const char* name, pf_safe_call_t call, const pf_signature_t* sig,
                                pf_typed_call_t typed, pf_object_t** slot) {
  pf_object_t* fn = NULL;
  pthread_mutex_lock(&pf__writers);
  int reserved = pf__static_slot_reserve();
  pthread_mutex_unlock(&pf__writers);
  if (reserved != 0) {
    *slot = NULL;
    __atomic_fetch_add(&pf__static_failures, 1, __ATOMIC_RELAXED);
    pf__raise_oom("PF_REGISTER_GLOBAL", sizeof(pf_object_t**));
    return;
  }
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
  pthread_mutex_lock(&pf__writers);
  *slot = fn;
  pf__static_reserved--;
  if (fn)
    pf__static_slots[pf__static_count++] = slot;
  pf__static_slots_trim();
  pthread_mutex_unlock(&pf__writers);
}

/* pf_global_remove of `name` only while it still names `fn`, in this table and in TVM-FFI's: a
 * static registration's slot on its library's unloading, and the module loader's forgetting of
 * a refused library, which looked `fn` up by that name before (another thread's pf_global_set in
 * between stays: it was removed by name). Raises nothing; 1 when this table's entry was
 * removed. */
int pf__global_remove_if(const char* name, pf_object_t* fn) {
  size_t len = strlen(name);
  uint64_t tail;
  pf_object_t* held = NULL;
  pthread_mutex_lock(&pf__tvm_table); /* "joined?" under the join hook's lock, as in set */
  const pf__tvm_t* tvm = pf__tvm();
  pf_object_t* removed = pf__remove(name, len, pf__name_hash(name, len, &tail), fn, 0);
  if (tvm && pf__tvm_remove(tvm, name, fn, &held) < 0)
    pf__tvm_discard(tvm);
  pthread_mutex_unlock(&pf__tvm_table);
  pf_object_release(held);
  pf_object_release(removed);
  return removed != NULL;
}

void pf__global_unregister_static(const char* name, const pf_signature_t* sig, pf_object_t** slot) {
  pthread_mutex_lock(&pf__writers);
  pf_object_t* fn = *slot;
  *slot = NULL;
  if (fn)
    pf__static_slot_remove(slot);
  pthread_mutex_unlock(&pf__writers);
  if (!fn)
    return;
  name = name ? name : sig ? sig->name : NULL; /* as pf__global_register_static chose it */
  if (name)                                    /* else not registered: *slot was NULL already */
    (void)pf__global_remove_if(name, fn); /* the library is unloading: TVM-FFI's entry goes too */
  pf_object_release(fn);
}

/* Joining TVM-FFI (tvm.c): every function of this table is registered in TVM-FFI's, except
 * under a name TVM-FFI already holds (each table then keeps its own). Raises nothing: the error
 * raised in this thread (in TVM-FFI's slot, now errors' slot too) is kept aside while the
 * functions are registered, as a refused name raises over it, which replaced it and dropped it
 * with the refusal (review). */
static void pf__global_tvm_joined(const pf__tvm_t* tvm) {
  void* pending = NULL;
  int kept = 0;
  pthread_mutex_lock(&pf__tvm_table);
  pthread_mutex_lock(&pf__writers);
  pf__cell_t* t = pf__cells;
  for (size_t i = 0; i <= pf__mask(t); ++i) {
    const pf__entry_t* e = pf__slot(t, i);
    pf_byte_array_t key = {e->name, e->len};
    if (!e->fn)
      continue;
    if (!kept) {
      tvm->error_move_from_raised(&pending);
      kept = 1;
    }
    if (tvm->function_set_global(&key, e->fn, 0) != 0)
      pf__tvm_discard(tvm); /* the name is TVM-FFI's */
  }
  if (pending) { /* back where it was: the slot takes its own reference, ours is dropped */
    tvm->error_set_raised(pending);
    pf_object_release((pf_object_t*)pending);
  }
  pthread_mutex_unlock(&pf__writers);
  pthread_mutex_unlock(&pf__tvm_table);
}

__attribute__((constructor)) static void pf__global_tvm_joined_hook(void) {
  pf__tvm_join_hooks[PF__TVM_HOOK_GLOBALS] = pf__global_tvm_joined;
}
