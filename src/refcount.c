/* The reference protocol's slow half: what runs when a release drops the last strong or weak
 * reference (deleters, deferred for deep chains). Raises nothing, so every layer, errors
 * included, may release objects. */
#include <stdlib.h>

#include "packfn/object.h"

#include "common.h"

/* Runs the deleter of an object whose last strong reference was just dropped (`before`: the
 * count before that drop), then drops the weak reference the strong ones held. */
static void pf__object_destroy(pf_object_t* obj, uint64_t before) {
  if (before == PF_REF_INITIAL) {
    /* no weak reference besides the strong references' own: destroy and free at once */
    obj->deleter(obj, PF_DELETER_BOTH);
    return;
  }
  obj->deleter(obj, PF_DELETER_STRONG);
  uint64_t weak_before =
      __atomic_fetch_sub(&obj->combined_ref_count, PF_REF_WEAK_ONE, __ATOMIC_RELEASE);
  if (weak_before == PF_REF_WEAK_ONE) {
    (void)__atomic_load_n(&obj->combined_ref_count, __ATOMIC_ACQUIRE);
    obj->deleter(obj, PF_DELETER_WEAK);
  }
}

/* Destructions nested deeper than this inside deleters are deferred (issue 10, defect 8): a
 * chain of a million arrays would otherwise recurse a million times. Shallow nesting, the
 * common case, still runs at once, in the usual order. */
#define PF__RELEASE_NEST_MAX 64

typedef struct {
  pf_object_t* obj;
  uint64_t before;
} pf__deferred_t;

/* This thread's release state: how deep in deleters it is, and the deferred destructions,
 * which the outermost release runs before it returns. */
typedef struct {
  pf__deferred_t* items;
  size_t count;
  size_t capacity;
  uint32_t depth;
} pf__release_state_t;

static PF__TLS pf__release_state_t pf__release_state;

/* Queues a destruction; 0 when out of memory (the caller then runs it at once). */
static int pf__release_defer(pf__release_state_t* st, pf_object_t* obj, uint64_t before) {
  if (st->count == st->capacity) {
    size_t cap = st->capacity ? 2 * st->capacity : 64;
    pf__deferred_t* items = realloc(st->items, cap * sizeof *items);
    if (!items)
      return 0;
    st->items = items;
    st->capacity = cap;
  }
  st->items[st->count++] = (pf__deferred_t){obj, before};
  return 1;
}

void pf__object_release_slow(pf_object_t* obj, uint64_t before) {
  /* an acquire load, not a fence: it orders the deleter after every other thread's release
   * (all of them precede this load in the count's modification order), and ThreadSanitizer
   * models it, where it does not model fences (issue 10, defect 10) */
  (void)__atomic_load_n(&obj->combined_ref_count, __ATOMIC_ACQUIRE);
  pf__release_state_t* st = &pf__release_state;
  if (st->depth >= PF__RELEASE_NEST_MAX && pf__release_defer(st, obj, before))
    return;
  st->depth++;
  pf__object_destroy(obj, before);
  if (st->depth == 1 && st->items) {
    /* outermost: run what was deferred; its own deep releases queue more */
    while (st->count > 0) {
      pf__deferred_t d = st->items[--st->count];
      pf__object_destroy(d.obj, d.before);
    }
    free(st->items);
    st->items = NULL;
    st->capacity = 0;
  }
  st->depth--;
}
