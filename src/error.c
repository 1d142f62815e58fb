/* Errors: error objects in one allocation (kind, message and raise site inline), the thread's
 * raised slot, cause chains, the out-of-memory fallback and the native stack a raise captures
 * (PACKFN_BACKTRACE); naming its frames is error_backtrace.c's. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <execinfo.h>
#endif

#include <pthread.h>

#include "packfn/any.h"
#include "packfn/error.h"
#include "packfn/export.h"
#include "packfn/interop.h"

#include "error_private.h"

#include "common.h"
#include "alloc.h"
#include "bytes.h"
#include "tvm_private.h"
#include "module_private.h"

/* where this file's state (error slot) lives, for pf_module_load (module_private.h) */
PF__MARKER const char pf__marker_error = 0;

/* The error raised in this thread (owned), or NULL. Once packfn has joined TVM-FFI the raised
 * slot is TVM-FFI's (TVMFFIErrorSetRaised / TVMFFIErrorMoveFromRaised) and this one stays
 * empty, except for an error a thread left here before the join: that one moves to TVM-FFI's
 * slot on the thread's next access (pf__slot_tvm_slow). */
static PF__TLS pf_object_t* pf__raised;

static void pf__error_update_backtrace(void* self, const pf_byte_array_t* bt, int32_t mode);

/* What an error owns besides its block: its cause, extra context and an updated backtrace. */
__attribute__((noinline)) static void pf__error_destroy_contents(pf__error_t* e) {
  /* cause chains can be long (every raise over a pending error adds one): bounded stack */
  pf__release_nested((pf_object_t*)e->cell.cause_chain);
  pf_object_release((pf_object_t*)e->cell.extra_context);
  free(e->heap_backtrace);
  if (e->frames) {
    free(e->frames->named);
    free(e->frames);
  }
}

static void pf__error_deleter(void* self, int flags) {
  pf__error_t* e = (pf__error_t*)self;
  /* most errors own nothing but their block: check that first, out of line otherwise */
  if ((flags & PF_DELETER_STRONG) &&
      (e->cell.cause_chain || e->cell.extra_context || e->heap_backtrace || e->frames))
    pf__error_destroy_contents(e);
  if (flags & PF_DELETER_WEAK)
    pf__free_nonnull(self);
}

/* The strong count of a statically allocated object: so far above any count real references
 * reach that releases never bring it to zero, so its (no-op) deleter never runs. */
#define PF__IMMORTAL_COUNT ((uint64_t)1 << 30)

/* Raised when even an error cannot be allocated. Immortal, see PF__IMMORTAL_COUNT. */
static void pf__static_error_deleter(void* self, int flags) {
  (void)self;
  (void)flags;
}
/* Its backtrace stays empty: it is shared by every thread, and other runtimes call this hook
 * without checking it for NULL (TVM-FFI's C++ and Python do when they re-raise an error). */
static void pf__static_error_update_backtrace(void* self, const pf_byte_array_t* bt, int32_t mode) {
  (void)self;
  (void)bt;
  (void)mode;
}
static pf__error_t pf__oom_error = {
    {PF__IMMORTAL_COUNT, PF_TYPE_ERROR, 0, {pf__static_error_deleter}},
    {{"MemoryError", 11},
     {"out of memory while raising an error", 36},
     {"", 0},
     pf__static_error_update_backtrace,
     NULL,
     NULL},
    NULL,
    NULL};

static int pf__is_ours(const pf_object_t* err) {
  return err->deleter == pf__error_deleter || err == &pf__oom_error.header;
}

static int pf__is_error(const pf_object_t* err) {
  return err != NULL && err->type_index == PF_TYPE_ERROR;
}

/* The bytes of an error with texts of these lengths (each followed by a NUL). */
static inline size_t pf__error_size(size_t kind_len, size_t msg_len, size_t bt_len) {
  return sizeof(pf__error_t) + kind_len + msg_len + bt_len + 3;
}

/* Allocates an error with room for its three texts (lengths given, NUL added) and fills all
 * but the texts' bytes; the caller writes them. NULL when out of memory. */
static inline __attribute__((always_inline)) pf__error_t*
pf__error_alloc(size_t kind_len, size_t msg_len, size_t bt_len) {
  pf__error_t* e = pf__alloc(pf__error_size(kind_len, msg_len, bt_len));
  if (!e)
    return NULL;
  pf__object_init(&e->header, PF_TYPE_ERROR, pf__error_deleter);
  char* text = (char*)(e + 1);
  e->cell.kind.data = text;
  e->cell.kind.size = kind_len;
  text[kind_len] = '\0';
  text += kind_len + 1;
  e->cell.message.data = text;
  e->cell.message.size = msg_len;
  text[msg_len] = '\0';
  text += msg_len + 1;
  e->cell.backtrace.data = text;
  e->cell.backtrace.size = bt_len;
  text[bt_len] = '\0';
  e->cell.update_backtrace = pf__error_update_backtrace;
  e->cell.cause_chain = NULL;
  e->cell.extra_context = NULL;
  e->heap_backtrace = NULL;
  e->frames = NULL;
  return e;
}

/* Creates an error from its three texts (lengths given); NULL when out of memory. */
static pf_object_t* pf__error_new(const char* kind, size_t kind_len, const char* msg,
                                  size_t msg_len, const char* bt, size_t bt_len) {
  pf__error_t* e = pf__error_alloc(kind_len, msg_len, bt_len);
  if (!e)
    return NULL;
  memcpy((char*)e->cell.kind.data, kind, kind_len);
  memcpy((char*)e->cell.message.data, msg, msg_len);
  memcpy((char*)e->cell.backtrace.data, bt, bt_len);
  return &e->header;
}

static char* pf__frames_settle(pf__error_t* e);

static void pf__error_update_backtrace(void* self, const pf_byte_array_t* bt, int32_t mode) {
  pf__error_t* e = (pf__error_t*)self;
  if (!bt || (!bt->data && bt->size))
    return;
  /* the text changes: name its frames first. The text they replace is freed only at the end:
   * bt may point into it (a runtime passing back part of the cell's own text read it freed:
   * review) */
  char* before = e->frames ? pf__frames_settle(e) : NULL;
  size_t keep = mode == 1 ? e->cell.backtrace.size : 0;
  size_t need = keep + bt->size + 1;
  char* buf = malloc(need);
  if (!buf) {
    free(before);
    return; /* the ABI gives this hook no way to fail: keep the old text */
  }
  if (keep)
    memcpy(buf, e->cell.backtrace.data, keep);
  if (bt->size)
    memcpy(buf + keep, bt->data, bt->size);
  buf[keep + bt->size] = '\0';
  free(e->heap_backtrace);
  free(before);
  e->heap_backtrace = buf;
  e->cell.backtrace.data = buf;
  e->cell.backtrace.size = keep + bt->size;
}

/* -1 unknown, 0 off, 1 on: whether PACKFN_BACKTRACE asks for full stacks. */
static int pf__full_backtrace = -1;

static int pf__want_full_backtrace(void) {
  int v = __atomic_load_n(&pf__full_backtrace, __ATOMIC_RELAXED);
  if (PF_LIKELY(v >= 0))
    return v;
  const char* env = getenv(PF_BACKTRACE_ENV);
  v = env && *env && strcmp(env, "0") != 0;
  __atomic_store_n(&pf__full_backtrace, v, __ATOMIC_RELAXED);
  return v;
}

/* The raise site as one frame line the way TVM-FFI writes its frames (and its Python parses
 * them): `  File "file", line N, in func\n`. Measured first, then written into the error. */
typedef struct {
  const char* file; /* "<unknown>" when not known; or the whole frame up to the function */
  size_t file_len;
  const char* line; /* the line number's digits ("0" when not known); NULL: file is the frame
                     * prefix `  File "f.c", line 12, in ` (PF_ERROR_SITE writes it whole) */
  size_t line_len;
  const char* func; /* "<unknown>" when not known */
  size_t func_len;
  char digits[12]; /* room for formatting a line number (no NUL counted) */
} pf__site_t;

static void pf__site_measure(pf__site_t* site, const char* file, int line, const char* func) {
  site->file = file ? file : PF__UNKNOWN;
  site->file_len = strlen(site->file);
  site->func = func ? func : PF__UNKNOWN;
  site->func_len = strlen(site->func);
  /* at most 10 digits and the NUL: always fits */
  site->line_len = (size_t)snprintf(site->digits, sizeof site->digits, "%u",
                                    file && line > 0 ? (unsigned)line : 0u);
  site->line = site->digits;
}

/* A compile-time site "file.c:123" (pf_error_set_site): the digits after the last ':' are the
 * line. */
static void pf__site_split(pf__site_t* site, const pf_error_site_t* where) {
  site->file = where->where;
  site->func = where->func ? where->func : PF__UNKNOWN;
  site->func_len = where->func ? where->func_len : PF__LIT_LEN(PF__UNKNOWN);
  size_t n = where->where_len, d = n;
  while (d > 0 && where->where[d - 1] >= '0' && where->where[d - 1] <= '9')
    --d;
  if (d > 0 && d < n && where->where[d - 1] == ':') {
    site->file_len = d - 1;
    site->line = where->where + d;
    site->line_len = n - d;
  } else {
    site->file_len = n;
    site->line = "0";
    site->line_len = 1;
  }
}

static size_t pf__site_length(const pf__site_t* site) {
  if (PF_LIKELY(!site->line))
    return site->file_len + site->func_len + 1;
  return PF__LIT_LEN(PF__FRAME_FILE PF__FRAME_LINE PF__FRAME_FUNC "\n") + site->file_len +
         site->line_len + site->func_len;
}

static void pf__site_write(const pf__site_t* site, char* out) {
  if (PF_LIKELY(!site->line)) {
    pf__copy(out, site->file, site->file_len);
    out += site->file_len;
  } else {
    memcpy(out, PF__FRAME_FILE, PF__LIT_LEN(PF__FRAME_FILE));
    out += PF__LIT_LEN(PF__FRAME_FILE);
    pf__copy(out, site->file, site->file_len);
    out += site->file_len;
    memcpy(out, PF__FRAME_LINE, PF__LIT_LEN(PF__FRAME_LINE));
    out += PF__LIT_LEN(PF__FRAME_LINE);
    pf__copy(out, site->line, site->line_len);
    out += site->line_len;
    memcpy(out, PF__FRAME_FUNC, PF__LIT_LEN(PF__FRAME_FUNC));
    out += PF__LIT_LEN(PF__FRAME_FUNC);
  }
  pf__copy(out, site->func, site->func_len);
  out[site->func_len] = '\n';
}

/* Before the text changes: makes the named text the cell's own and forgets the frames (kept
 * as they are, by address, when naming runs out of memory). Returns the text it replaced, for
 * the caller to free (NULL when none). */
static char* pf__frames_settle(pf__error_t* e) {
  pf__frames_t* f = e->frames;
  size_t len = 0;
  char* text = __atomic_exchange_n(&f->named, NULL, __ATOMIC_ACQ_REL);
  if (text)
    len = strlen(text);
  else
    text = pf__frames_name(e, &len);
  e->frames = NULL;
  free(f);
  if (!text)
    return NULL;
  char* before = e->heap_backtrace;
  e->heap_backtrace = text;
  e->cell.backtrace.data = text;
  e->cell.backtrace.size = len;
  return before;
}

/* Appends the native stack to an error (PACKFN_BACKTRACE): named now when packfn has joined
 * TVM-FFI (whose readers take the cell's text as it is), else by address, named when packfn
 * first reads it. Joined includes a join this raise makes (the process's first error-slot
 * access, with libtvm_ffi loaded): asking pf__tvm() alone, the error that joined reached
 * TVM-FFI's slot with address lines (review). */
static void pf__attach_native_stack(pf_object_t* err) {
#if defined(__GLIBC__)
  pf__error_t* e = (pf__error_t*)err;
  void* pc[64];
  unsigned long long subs = pf__loader_subs(); /* before: an unload meanwhile leaves them unnamed */
  int n = backtrace(pc, 64) - 1;               /* without this helper */
  if (n <= 0)
    return;
  pf__frames_t* f = malloc(sizeof *f + (size_t)n * sizeof(void*));
  char* lines = malloc((size_t)n * (PF__LIT_LEN(PF__FRAME_NATIVE) + sizeof(void*) * 2 + 1));
  if (!f || !lines) {
    free(f);
    free(lines);
    return;
  }
  memcpy(f->pc, pc + 1, (size_t)n * sizeof(void*));
  f->n = n;
  f->subs = subs;
  f->named = NULL;
  f->site_len = e->cell.backtrace.size;
  size_t used = 0;
  for (int i = 0; i < n; ++i)
    used += pf__frame_unnamed(f->pc[i], lines + used);
  pf_byte_array_t bt = {lines, used};
  pf__error_update_backtrace(err, &bt, 1);
  free(lines);
  e->frames = f;
  if (pf__tvm_first_use())
    free(pf__frames_settle(e));
#else
  (void)err;
#endif
}

/* A thread that raised once gets a key destructor that drops its pending error at exit. Its
 * mode remembers that, and whether raises capture full stacks: 0 not yet raised, 1 raise
 * sites only, 2 full stacks too (PACKFN_BACKTRACE), so a raise reads one thread-local int. */
static pthread_key_t pf__exit_key;
static int pf__exit_key_made; /* 1 once pf__exit_key exists, until the library unloads */
static pthread_once_t pf__exit_once = PTHREAD_ONCE_INIT;
static PF__TLS int pf__thread_mode;

/* Only packfn's own slot: TVM-FFI's is a C++ thread_local that drops its error itself (and is
 * already destroyed when key destructors run: see pf__tvm_slot_retire). */
static void pf__local_clear(void) {
  pf_object_t* err = pf__raised;
  pf__raised = NULL;
  pf_object_release(err);
}

/* The mode goes back to 0, so that an error raised later in this thread's exit (by another key's
 * destructor) sets the key again and glibc calls this once more in its next round, instead of
 * the error being left in the slot (a leak found by review). */
static void pf__thread_exit(void* unused) {
  (void)unused;
  pf__thread_mode = 0;
  pf__local_clear();
}
static void pf__exit_key_init(void) {
  pf__exit_key_made = pthread_key_create(&pf__exit_key, pf__thread_exit) == 0;
}

__attribute__((noinline)) static int pf__thread_setup(void) {
  pthread_once(&pf__exit_once, pf__exit_key_init);
  /* not once the key is deleted (unload, exit): its number may be another library's by then */
  if (__atomic_load_n(&pf__exit_key_made, __ATOMIC_ACQUIRE))
    (void)pthread_setspecific(pf__exit_key, (void*)1);
  pf__thread_mode = pf__want_full_backtrace() ? 2 : 1;
  return pf__thread_mode;
}

/* This thread's mode, set up on its first raise. */
static inline int pf__mode(void) {
  int mode = pf__thread_mode;
  return PF_LIKELY(mode != 0) ? mode : pf__thread_setup();
}

/* Gives `pending` (owned) to `err` as its cause when err can take it, else releases it. err
 * takes a cause when it has none, is not the preallocated out-of-memory error, is not shared
 * (`fresh` < 0: another reference to it exists, so it is left unchanged: raising a shared error
 * in two threads at once raced on its cause, and the first raise fixed the cause every later one
 * reported; found by review) and (unless `fresh` > 0: err was just made, so it cannot be in
 * pending's chain) the chain would not loop. */
static inline __attribute__((always_inline)) void
pf__adopt_cause(pf_object_t* err, pf_object_t* pending, int fresh, int any_runtime) {
  if (fresh < 0) {
    pf_object_release(pending);
  } else if (pending && pending != err) {
    pf_error_cell_t* cell = (pf_error_cell_t*)(err + 1);
    /* chain only onto errors without a cause, and never into a loop (err may already be
     * somewhere in pending's chain when an old error is raised again) */
    int loops = 0;
    for (pf_object_t* c = fresh ? NULL : pending; c && !loops; c = pf_error_cause(c))
      loops = c == err;
    int ours = err->deleter == pf__error_deleter ||
               (any_runtime && pf__is_error(err) && err != &pf__oom_error.header);
    void* none = NULL; /* set once, atomically: two raises of it at once cannot both */
    if (!(ours && !loops &&
          __atomic_compare_exchange_n(&cell->cause_chain, &none, pending, 0, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED))) /* takes the slot's reference */
      pf_object_release(pending);
  } else if (pending == err) {
    pf_object_release(pending);
  }
}

/* tvm_private.h: a failed call into TVM-FFI's raised error, into packfn's slot */
int pf__tvm_failed(const pf__tvm_t* tvm, const char* func, const char* what) {
  void* err = NULL;
  tvm->error_move_from_raised(&err);
  if (err) {
    (void)pf_error_raise(err);
    pf_object_release(err);
  } else {
    PF_ERROR_SET(PF_ERR_RUNTIME, "%s: TVM-FFI's %s failed", func, what);
  }
  return -1;
}

/* ---- the end of TVM-FFI's slot in a thread ----
 * Once joined, the raised slot is TVM-FFI's, a C++ thread_local. glibc destroys C++
 * thread_locals before a thread's pthread key destructors run, and, in the thread that calls
 * exit(), before atexit handlers and library destructors; the destroyed slot still hands out
 * the error it released (review: error calls made later in the teardown released it again, or
 * chained it as a cause). So the first time a thread uses TVM-FFI's slot through packfn, packfn
 * registers a thread_local destructor of its own (__cxa_thread_atexit_impl, which C++ uses for
 * its thread_locals). Registered after TVM-FFI's slot exists, it runs before the slot's
 * destructor (glibc runs them last registered first): it moves the pending error into
 * pf__raised and retires the thread from TVM-FFI's slot, so every later error call of this
 * thread uses packfn's own slot, which pf__thread_exit and pf__error_fini drain. The
 * registration names this object's DSO, so glibc keeps it mapped (a static libpackfn inside a
 * library a host dlclose()s) until the destructor has run. Without __cxa_thread_atexit_impl
 * (not glibc) nothing is registered. Not covered: a thread whose first error call through
 * packfn comes after TVM-FFI's slot was destroyed while holding an error TVM-FFI raised. */
extern int __cxa_thread_atexit_impl(void (*dtor)(void*), void* obj, void* dso_symbol)
    __attribute__((weak));
extern void* __dso_handle __attribute__((visibility("hidden")));

/* 0: this thread has not used TVM-FFI's slot through packfn yet, 1: it has (the retiring
 * destructor is registered), 2: retired, pf__raised is its slot again */
enum { PF__TVM_SLOT_UNUSED, PF__TVM_SLOT_USED, PF__TVM_SLOT_RETIRED };
static PF__TLS int pf__tvm_slot;

static void pf__adopt_late(pf_object_t* err, int fresh, int any_runtime, const pf__tvm_t* tvm);

/* The retiring destructor: the error pending in TVM-FFI's slot moves to pf__raised (with the
 * one left there, if any, as its cause), whose thread-exit hook is put in place. */
static void pf__tvm_slot_retire(void* unused) {
  (void)unused;
  const pf__tvm_t* tvm = pf__tvm();
  void* err = NULL;
  if (tvm && pf__tvm_slot == PF__TVM_SLOT_USED)
    tvm->error_move_from_raised(&err);
  pf__tvm_slot = PF__TVM_SLOT_RETIRED;
  if (!err)
    return;
  pf_object_t* left = pf__raised;
  pf__raised = NULL;
  pf__adopt_cause((pf_object_t*)err, left, 0, 1);
  if (pf__raised)
    pf__adopt_late((pf_object_t*)err, 0, 1, NULL);
  (void)pf__mode(); /* pf__thread_exit drains pf__raised */
  pf__raised = (pf_object_t*)err;
}

/* This thread's first use of TVM-FFI's slot through packfn: the slot is made first (any call
 * does), so that the destructor registered next runs before the slot's own. */
__attribute__((noinline)) static void pf__tvm_slot_first_use(const pf__tvm_t* tvm) {
  void* err = NULL;
  tvm->error_move_from_raised(&err);
  if (err) {
    tvm->error_set_raised(err); /* back where it was: the slot takes its own reference */
    pf_object_release((pf_object_t*)err);
  }
  pf__tvm_slot = PF__TVM_SLOT_USED;
  if (__cxa_thread_atexit_impl)
    (void)__cxa_thread_atexit_impl(pf__tvm_slot_retire, NULL, &__dso_handle);
}

/* The state of the join (tvm.c): 1, looked for and absent, is the fast case, where errors
 * live in pf__raised. One load. */
static inline int pf__slot_is_local(void) {
  return PF_LIKELY(__atomic_load_n(&pf__tvm_state, __ATOMIC_RELAXED) == 1);
}

static pf_object_t* pf__tvm_move(const pf__tvm_t* tvm) {
  void* err = NULL;
  tvm->error_move_from_raised(&err);
  return (pf_object_t*)err;
}

/* TVM-FFI's slot takes its own reference (TVMFFIErrorSetRaised retains): hand it ours. */
static void pf__tvm_give(const pf__tvm_t* tvm, pf_object_t* err) {
  tvm->error_set_raised(err);
  pf_object_release(err);
}

/* Names the frames of packfn's error `err` (by address: raised with PACKFN_BACKTRACE before the
 * join) as it enters TVM-FFI's slot, which is read as the cell stands: an error left pending at
 * the join, or one raised before it and raised again after, reached TVM-FFI with address lines
 * (docs/error.md promises named frames once joined; review). Only while this thread holds the
 * only reference (`alone`): naming replaces the cell's text, which another holder may read. */
static void pf__frames_for_tvm(pf_object_t* err, int alone) {
  pf__error_t* e = (pf__error_t*)err;
  if (err->deleter == pf__error_deleter && e->frames && alone)
    free(pf__frames_settle(e));
}

/* Not the fast case: joins on the process's first error-slot access (pf__tvm_first_use) and,
 * once joined, moves an error this thread left in pf__raised before the join into TVM-FFI's
 * slot, as the cause of an error TVM-FFI raised here since (or dropped when that one already
 * has a cause). Returns the joined runtime, or NULL: then pf__raised is the slot (not joined,
 * or this thread's TVM-FFI slot is gone: pf__tvm_slot_retire). */
__attribute__((noinline)) static const pf__tvm_t* pf__slot_tvm_slow(void) {
  if (PF_UNLIKELY(pf__tvm_slot == PF__TVM_SLOT_RETIRED))
    return NULL;
  const pf__tvm_t* tvm = pf__tvm_first_use();
  if (!tvm)
    return NULL;
  if (PF_UNLIKELY(pf__tvm_slot == PF__TVM_SLOT_UNUSED))
    pf__tvm_slot_first_use(tvm);
  if (PF_UNLIKELY(pf__raised != NULL)) {
    pf_object_t* left = pf__raised;
    pf__raised = NULL;
    pf__frames_for_tvm(left, pf_object_strong_count(left) == 1);
    pf_object_t* newer = pf__tvm_move(tvm);
    if (newer) {
      pf__adopt_cause(newer, left, 0, 1);
      left = newer;
    }
    pf__tvm_give(tvm, left);
  }
  return tvm;
}

/* After pf__adopt_cause released what the slot held: errors that the release raised (a deleter
 * that raises, as another runtime's may) each join err's chain where err can take them, or are
 * released in turn, until none is left; overwriting them in the slot leaked them (found by
 * review). `tvm`: the slot is TVM-FFI's, else packfn's own. */
__attribute__((noinline)) static void pf__adopt_late(pf_object_t* err, int fresh, int any_runtime,
                                                     const pf__tvm_t* tvm) {
  for (;;) {
    pf_object_t* late;
    if (tvm) {
      late = pf__tvm_move(tvm);
    } else {
      late = pf__raised;
      pf__raised = NULL;
    }
    if (!late)
      return;
    pf__adopt_cause(err, late, fresh < 0 ? -1 : 0, any_runtime);
  }
}

/* Makes `err` (owned) the raised error, the pending one (if any) becoming its cause. The caller
 * has called pf__mode() in this thread (so the thread-exit hook is in place). `fresh`: err was
 * just made here, so it cannot be in the pending chain and the loop walk is skipped (raising
 * over a pending error stays O(1) however long the chain is). */
static inline __attribute__((always_inline)) void pf__install(pf_object_t* err, int fresh) {
  const pf__tvm_t* tvm = pf__slot_is_local() ? NULL : pf__slot_tvm_slow();
  if (PF_LIKELY(!tvm)) {
    pf_object_t* pending = pf__raised;
    pf__raised = NULL; /* empty while pending may be released (its deleter may read the slot) */
    pf__adopt_cause(err, pending, fresh, 0);
    if (PF_UNLIKELY(pf__raised != NULL))
      pf__adopt_late(err, fresh, 0, NULL);
    pf__raised = err;
  } else {
    if (fresh == 0) /* pf_error_raise of an error only its caller held: made before the join? */
      pf__frames_for_tvm(err, 1);
    pf_object_t* pending = pf__tvm_move(tvm);
    pf__adopt_cause(err, pending, fresh, 0);
    if (pending)
      pf__adopt_late(err, fresh, 0, tvm);
    pf__tvm_give(tvm, err);
  }
}

/* Formats the message, builds the error with its raise site and raises it. */
static void pf__raise(const pf__site_t* site, const char* kind, const char* fmt, va_list ap) {
  char stack_msg[512];
  const char* msg = fmt ? fmt : "";
  size_t msg_len;
  char* heap_msg = NULL;
  const char* pct = strchrnul(msg, '%');
  if (*pct == '\0') {
    msg_len = (size_t)(pct - msg); /* no conversions: the text is the message */
  } else {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(stack_msg, sizeof stack_msg, fmt, ap);
    if (n < 0) {
      /* formatting failed (a message past INT_MAX bytes, a bad wide character): the text made
       * before the failure, at most the buffer's, formatted again into a cleared buffer (what a
       * failed call leaves in it is unspecified) */
      va_list ap3;
      va_copy(ap3, ap2);
      memset(stack_msg, 0, sizeof stack_msg);
      (void)vsnprintf(stack_msg, sizeof stack_msg, fmt, ap3);
      va_end(ap3);
      stack_msg[sizeof stack_msg - 1] = '\0';
      n = (int)strlen(stack_msg);
    }
    msg = stack_msg;
    msg_len = (size_t)n;
    if ((size_t)n >= sizeof stack_msg) {
      heap_msg = malloc((size_t)n + 1);
      if (heap_msg) {
        vsnprintf(heap_msg, (size_t)n + 1, fmt, ap2);
        msg = heap_msg;
      } else {
        msg_len = sizeof stack_msg - 1;
      }
    }
    va_end(ap2);
    /* the message ends at its first NUL (a %c of 0): the cell's size is its C string's length,
     * so TVM-FFI, which reads the size, and packfn's readers, which read the C string, see one
     * text (review) */
    msg_len = strnlen(msg, msg_len);
  }
  if (!kind || !*kind)
    kind = PF_ERR_RUNTIME; /* an error kind is a name: none given, the generic one */
  size_t kind_len = strlen(kind);
  pf__error_t* e = pf__error_alloc(kind_len, msg_len, pf__site_length(site));
  if (e) {
    pf__copy((char*)e->cell.kind.data, kind, kind_len);
    pf__copy((char*)e->cell.message.data, msg, msg_len);
    pf__site_write(site, (char*)e->cell.backtrace.data);
  }
  if (heap_msg)
    free(heap_msg);
  if (!e) {
    /* the pending error released (the out-of-memory error takes no cause), and what its
     * release may raise too */
    (void)pf__mode();
    pf_object_retain(&pf__oom_error.header); /* the slot's reference, as for any error */
    pf__install(&pf__oom_error.header, -1);
    return;
  }
  if (pf__mode() == 2)
    pf__attach_native_stack(&e->header);
  pf__install(&e->header, 1);
}

void pf_error_vset_at(const char* file, int line, const char* func, const char* kind,
                      const char* fmt, va_list ap) {
  pf__site_t site;
  pf__site_measure(&site, file, line, func);
  pf__raise(&site, kind, fmt, ap);
}

void pf_error_set_site(const pf_error_site_t* where, const char* kind, const char* fmt, ...) {
  pf__site_t site;
  pf__site_split(&site, where);
  va_list ap;
  va_start(ap, fmt);
  pf__raise(&site, kind, fmt, ap);
  va_end(ap);
}

void pf_error_set_frame(const pf_error_site_t* where, const char* kind, const char* fmt, ...) {
  pf__site_t site;
  site.file = where->where;
  site.file_len = where->where_len;
  site.line = NULL; /* the frame is whole */
  site.line_len = 0;
  site.func = where->func ? where->func : PF__UNKNOWN;
  site.func_len = where->func ? where->func_len : PF__LIT_LEN(PF__UNKNOWN);
  va_list ap;
  va_start(ap, fmt);
  pf__raise(&site, kind, fmt, ap);
  va_end(ap);
}

void pf_error_set_at(const char* file, int line, const char* func, const char* kind,
                     const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pf_error_vset_at(file, line, func, kind, fmt, ap);
  va_end(ap);
}

void pf_error_set(const char* kind, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pf_error_vset_at(NULL, 0, NULL, kind, fmt, ap);
  va_end(ap);
}

int pf_error_raise(pf_object_t* err) {
  if (!pf__is_error(err)) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_error_raise: argument err: expected Error, got %s",
                 err ? pf_type_name(err->type_index) : "NULL");
    return -1;
  }
  /* shared: another reference than the caller's exists (a cached error, one handed to another
   * thread too), so the raise leaves the object as it is */
  int shared = pf_object_strong_count(err) > 1;
  pf_object_retain(err);
  (void)pf__mode();
  pf__install(err, shared ? -1 : 0);
  return 0;
}

__attribute__((noinline)) static pf_object_t* pf__take_slow(void) {
  const pf__tvm_t* tvm = pf__slot_tvm_slow();
  if (tvm)
    return pf__tvm_move(tvm);
  pf_object_t* err = pf__raised;
  pf__raised = NULL;
  return err;
}

pf_object_t* pf_error_take(void) {
  if (!pf__slot_is_local())
    return pf__take_slow();
  pf_object_t* err = pf__raised;
  pf__raised = NULL;
  return err;
}

/* Joined: take the error and raise it again, so the slot keeps a reference and the caller
 * borrows. */
__attribute__((noinline)) static pf_object_t* pf__peek_slow(void) {
  const pf__tvm_t* tvm = pf__slot_tvm_slow();
  if (!tvm)
    return pf__raised;
  pf_object_t* err = pf__tvm_move(tvm);
  if (err)
    pf__tvm_give(tvm, err); /* the slot's reference keeps err alive for the borrower */
  return err;
}

pf_object_t* pf_error_peek(void) {
  return pf__slot_is_local() ? pf__raised : pf__peek_slow();
}

int pf_error_ensure(const char* callee, int rc) {
  if (!pf_error_peek())
    PF_ERROR_SET(PF_ERR_RUNTIME, "%s returned %d without raising an error",
                 callee ? callee : "a function", rc);
  return -1;
}

/* ---- a failed __tvm_ffi_<name> call (TVM-FFI is the caller) ----
 * Here, beside the raised slot, not with the export helpers (module_export.c): the exports reach
 * it through a weak reference, which pulls no member out of libpackfn.a, so a library linked
 * with the archive was left without it (its failed calls left TVM-FFI's slot empty); every
 * library that raises links this file. */

typedef void (*pf__tvm_set_raised_t)(void* error);

/* TVMFFIErrorSetRaised of a loaded libtvm_ffi 0.1.x (the version packfn shares layouts with),
 * or NULL; looked up while packfn has not joined TVM-FFI, so tvm.c's table is empty. Never
 * loads the library; once found, the handle is kept for the life of the process (as the
 * join's), and looked for again while absent. */
static pf__tvm_set_raised_t pf__export_tvm_set_raised(void) {
  static pf__tvm_set_raised_t found;
  pf__tvm_set_raised_t set_raised = __atomic_load_n(&found, __ATOMIC_ACQUIRE);
  if (set_raised)
    return set_raised;
  void* lib = pf__tvm_open_loaded(); /* by its path: no search (valgrind misreads the search's
                                      * $ORIGIN expansion in glibc 2.36's ld.so) */
  if (!lib)
    return NULL;
  struct {
    int32_t major, minor, patch;
  } version = {-1, -1, -1};
  void (*get_version)(void*);
  *(void**)&get_version = dlsym(lib, "TVMFFIGetVersion");
  *(void**)&set_raised = dlsym(lib, "TVMFFIErrorSetRaised");
  if (get_version)
    get_version(&version);
  pf__tvm_set_raised_t none = NULL;
  if (!set_raised || version.major != 0 || version.minor != 1) {
    set_raised = NULL;
    dlclose(lib);
  } else if (!__atomic_compare_exchange_n(&found, &none, set_raised, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE)) {
    dlclose(lib); /* another thread found it first and keeps its handle */
  }
  return set_raised;
}

int pf__export_tvm_failed(int rc, const char* name) {
  if (rc != -1)
    return rc; /* -2 and others: the caller's own protocol (the error kept in its front end) */
  (void)pf_error_ensure(name, rc); /* a failure that raised nothing: RuntimeError */
  if (pf_tvm_ffi_joined())
    return rc; /* one slot: the error is in TVM-FFI's already */
  pf__tvm_set_raised_t set_raised = pf__export_tvm_set_raised();
  if (!set_raised)
    return rc; /* no TVM-FFI slot to fill: the error stays in packfn's */
  pf_object_t* err = pf_error_take();
  set_raised(err); /* TVM-FFI's slot takes its own reference */
  pf_object_release(err);
  return rc;
}

void pf_error_clear(void) {
  pf_object_release(pf_error_take());
}

int pf_error_create(const char* kind, const char* message, const char* backtrace,
                    pf_object_t** out) {
  if (out)
    *out = NULL; /* as every constructor's output on failure */
  if (!kind || !message || !out) {
    return PF__NULL_ARG("pf_error_create", !kind ? "kind" : !message ? "message" : "out");
  }
  if (!*kind) {
    PF_ERROR_SET(
        PF_ERR_VALUE,
        "pf_error_create: argument kind: expected an error kind name, got an empty string");
    return -1;
  }
  const char* bt = backtrace ? backtrace : "";
  size_t kind_len = strlen(kind), msg_len = strlen(message), bt_len = strlen(bt);
  pf_object_t* err = pf__error_new(kind, kind_len, message, msg_len, bt, bt_len);
  if (!err) /* the size of the block that failed (it said the message's length: review) */
    return pf__raise_oom("pf_error_create", pf__error_size(kind_len, msg_len, bt_len));
  *out = err;
  return 0;
}

static const pf_error_cell_t* pf__cell(const pf_object_t* err) {
  return pf__is_error(err) ? (const pf_error_cell_t*)(err + 1) : NULL;
}

const char* pf_error_kind(const pf_object_t* err) {
  const pf_error_cell_t* c = pf__cell(err);
  return c ? c->kind.data : NULL;
}

const char* pf_error_message(const pf_object_t* err) {
  const pf_error_cell_t* c = pf__cell(err);
  return c ? c->message.data : NULL;
}

/* The named text of an error with unnamed frames, built once (the first reader publishes it;
 * a reader that loses the race frees its copy). The address text when naming fails. */
static const char* pf__frames_text(const pf__error_t* e) {
  pf__frames_t* f = e->frames;
  const char* named = __atomic_load_n(&f->named, __ATOMIC_ACQUIRE);
  if (named)
    return named;
  size_t len = 0;
  char* text = pf__frames_name(e, &len);
  if (!text)
    return e->cell.backtrace.data;
  char* expected = NULL;
  if (!__atomic_compare_exchange_n(&f->named, &expected, text, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    free(text);
    return expected;
  }
  return text;
}

const char* pf_error_backtrace(const pf_object_t* err) {
  const pf_error_cell_t* c = pf__cell(err);
  if (!c)
    return NULL;
  if (err->deleter == pf__error_deleter && ((const pf__error_t*)err)->frames)
    return pf__frames_text((const pf__error_t*)err);
  return c->backtrace.data;
}

pf_object_t* pf_error_cause(const pf_object_t* err) {
  const pf_error_cell_t* c = pf__cell(err);
  return c ? (pf_object_t*)c->cause_chain : NULL;
}

int pf_error_set_cause(pf_object_t* err, pf_object_t* cause) {
  if (!pf__is_error(err) || !pf__is_ours(err) || err == &pf__oom_error.header) {
    /* every error object's type is Error: what came is said by who made it (review) */
    const char* got = !err                 ? "NULL"
                      : !pf__is_error(err) ? pf_type_name(err->type_index)
                      : err == &pf__oom_error.header
                          ? "packfn's shared MemoryError, which takes no cause"
                          : "an Error made by another runtime";
    PF_ERROR_SET(PF_ERR_TYPE,
                 "pf_error_set_cause: argument err: expected an Error made by packfn, got %s", got);
    return -1;
  }
  if (cause && !pf__is_error(cause)) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_error_set_cause: argument cause: expected Error, got %s",
                 pf_type_name(cause->type_index));
    return -1;
  }
  for (pf_object_t* c = cause; c; c = pf_error_cause(c)) {
    if (c == err) {
      PF_ERROR_SET(PF_ERR_VALUE, "pf_error_set_cause: the cause chain would loop back to err");
      return -1;
    }
  }
  pf_error_cell_t* cell = (pf_error_cell_t*)(err + 1);
  pf_object_retain(cause);
  pf_object_t* old = (pf_object_t*)cell->cause_chain;
  cell->cause_chain = cause;
  /* released last: a deleter in the old chain that reads err's cause saw the old one while it
   * was being destroyed (review) */
  pf_object_release(old);
  return 0;
}

int pf_error_append_backtrace(pf_object_t* err, const char* text) {
  if (!pf__is_error(err)) {
    PF_ERROR_SET(PF_ERR_TYPE, "pf_error_append_backtrace: argument err: expected Error, got %s",
                 err ? pf_type_name(err->type_index) : "NULL");
    return -1;
  }
  if (!text) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_error_append_backtrace: argument text: expected a string, got NULL");
    return -1;
  }
  pf_error_cell_t* cell = (pf_error_cell_t*)(err + 1);
  if (!cell->update_backtrace)
    return 0;
  pf_byte_array_t bt = {text, strlen(text)};
  cell->update_backtrace(err, &bt, 1);
  return 0;
}

size_t pf_error_format(const pf_object_t* err, char* buf, size_t size) {
  if (!buf)
    size = 0; /* measure only, as snprintf(NULL, 0): a NULL buf with a size crashed (review) */
  size_t total = 0;
  int depth = 0;
  for (const pf_object_t* e = err; pf__is_error(e); e = pf_error_cause(e), ++depth) {
    const pf_error_cell_t* c = (const pf_error_cell_t*)(e + 1);
    int n = snprintf(size > total ? buf + total : NULL, size > total ? size - total : 0, "%s%s: %s",
                     depth ? "\ncaused by " : "", c->kind.data, c->message.data);
    if (n > 0)
      total += (size_t)n;
    if (depth > 64)
      break;
  }
  if (size && total == 0)
    buf[0] = '\0';
  return total;
}

int pf__raise_oom(const char* func, size_t size) {
  PF_ERROR_SET(PF_ERR_MEMORY, "%s: out of memory allocating %zu bytes", func, size);
  return -1;
}

char* pf__strdup(const char* s) {
  size_t n = strlen(s) + 1;
  char* d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

/* Free this thread's pending error when the library unloads (or the process exits), so
 * nothing leaks, and, where the library can be unmapped (packfn linked statically into a library
 * a host dlclose()s), delete the thread-exit key: a thread still running then must not call
 * pf__thread_exit in unmapped code (issue 10, defect 3); its pending error, if any, is leaked. */
__attribute__((destructor)) static void pf__error_fini(void) {
  pf__local_clear(); /* TVM-FFI's slot is its own: it may already be gone */
  /* the shared library (PF_PINNED) is never unmapped, nor a program packfn is linked into
   * (pf__code_unmappable): the hook stays for threads exiting later */
#ifndef PF_PINNED
  if (pf__exit_key_made && pf__code_unmappable()) {
    __atomic_store_n(&pf__exit_key_made, 0, __ATOMIC_RELEASE);
    (void)pthread_key_delete(pf__exit_key);
  }
#endif
}
