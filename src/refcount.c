/* The reference protocol's slow half: what runs when a release drops the last strong or weak
 * reference, and the bounded-stack release for deleters of objects that chain. Raises nothing,
 * so every layer, errors included, may release objects. */
#include <stdlib.h>

#include "packfn/any.h"
#include "packfn/object.h"

#include "common.h"

/* Calls the deleter of `obj` with `flags`. A NULL deleter means the object's memory is owned
 * elsewhere (an arena, static storage: TVM-FFI's protocol allows it and skips the call, so
 * packfn does too): nothing runs. */
static void pf__object_delete(pf_object_t* obj, int flags) {
  void (*deleter)(void* self, int flags) = obj->deleter;
  if (deleter)
    deleter(obj, flags);
}

/* The rest of a release that dropped the last strong reference while weak references other
 * than the strong ones' own were left: destroy, then drop the weak reference the strong ones
 * held. Out of line, so that the common case below needs no stack frame. */
__attribute__((noinline)) static void pf__object_destroy_weakly_held(pf_object_t* obj) {
  pf__object_delete(obj, PF_DELETER_STRONG);
  pf_object_weak_release(obj); /* the weak reference the strong ones held */
}

/* Runs when a release dropped the last strong reference (`before`: the count before that
 * drop). */
void pf__object_release_slow(pf_object_t* obj, uint64_t before) {
  /* an acquire load, not a fence: it orders the deleter after every other thread's release
   * (all of them precede this load in the count's modification order), and ThreadSanitizer
   * models it, where it does not model fences (issue 10, defect 10) */
  (void)__atomic_load_n(&obj->combined_ref_count, __ATOMIC_ACQUIRE);
  if (PF_LIKELY(before == PF_REF_INITIAL)) {
    /* no weak reference besides the strong references' own: destroy and free at once */
    pf__object_delete(obj, PF_DELETER_BOTH);
    return;
  }
  pf__object_destroy_weakly_held(obj);
}

void pf__object_weak_release_slow(pf_object_t* obj) {
  /* an acquire load, not a fence: same ordering as above, and ThreadSanitizer models it */
  (void)__atomic_load_n(&obj->combined_ref_count, __ATOMIC_ACQUIRE);
  pf__object_delete(obj, PF_DELETER_WEAK);
}

/* ---- releases from deleters that may nest without bound (issue 10, defect 8) ----
 * An array holding an array holding an array ... a million deep would recurse a million
 * times through their deleters. The deleters of objects that can form such chains (arrays,
 * maps, an error's cause) release what they hold through pf__release_nested: past
 * PF__RELEASE_NEST_MAX nested levels the release is queued on this thread instead, and the
 * outermost nested release runs the queue before it returns, so the stack stays bounded.
 * Ordinary releases (pf_object_release) pay nothing for this. */
#define PF__RELEASE_NEST_MAX 64

/* This thread's nesting depth and its queue of releases to run (a growing array). */
typedef struct {
  pf_object_t** items;
  size_t count;
  size_t capacity;
  uint32_t depth;
} pf__release_state_t;

static PF__TLS pf__release_state_t pf__release_state;

/* Queues a release; 0 when out of memory (the caller then releases at once). */
static int pf__release_defer(pf__release_state_t* st, pf_object_t* obj) {
  if (st->count == st->capacity) {
    size_t cap = st->capacity ? 2 * st->capacity : 64;
    pf_object_t** items = realloc(st->items, cap * sizeof *items);
    if (!items)
      return 0;
    st->items = items;
    st->capacity = cap;
  }
  st->items[st->count++] = obj;
  return 1;
}

void pf__release_nested(pf_object_t* obj) {
  if (!obj)
    return;
  pf__release_state_t* st = &pf__release_state;
  if (st->depth >= PF__RELEASE_NEST_MAX && pf__release_defer(st, obj))
    return;
  st->depth++;
  pf_object_release(obj);
  if (st->depth == 1 && st->items) {
    /* outermost: run what was queued; releases it causes queue more */
    while (st->count > 0)
      pf_object_release(st->items[--st->count]);
    free(st->items);
    st->items = NULL;
    st->capacity = 0;
  }
  st->depth--;
}

void pf__any_release_nested(pf_any_t* v) {
  if (v->type_index >= PF_TYPE_STATIC_OBJECT_BEGIN) {
    pf_object_t* obj = v->v_obj;
    *v = pf_any_none();
    pf__release_nested(obj);
  } else {
    pf_any_release(v);
  }
}
