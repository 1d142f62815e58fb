/* Devices at run time: the per-device-type allocator table (with packfn's CPU allocator built
 * in) and each thread's current stream per device. Knows nothing of tensor objects. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/device.h"

#include "common.h"
#include "alloc.h"
#include "device_private.h"
#include "tvm_private.h"

/* ---- the CPU allocator ---- */

/* CPU memory: a block from pf__alloc_aligned (a slab block of a class whose blocks have the
 * alignment, for buffers up to 4 KiB; posix_memalign beyond), with no header and no padding. */
static int pf__cpu_alloc(void* ctx, DLDevice device, size_t nbytes, size_t alignment, void** out) {
  (void)ctx;
  (void)device;
  *out = NULL;
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_allocator(cpu): argument alignment: expected a power of two >= %zu, got %zu",
                 sizeof(void*), alignment);
    return -1;
  }
  void* p = pf__alloc_aligned(nbytes, alignment);
  if (!p)
    return pf__raise_oom("pf_allocator(cpu)", nbytes);
  *out = p;
  return 0;
}

static void pf__cpu_free(void* ctx, DLDevice device, void* ptr) {
  (void)ctx;
  (void)device;
  pf__free(ptr);
}

static int pf__cpu_copy(void* ctx, void* dst, DLDevice dst_device, const void* src,
                        DLDevice src_device, size_t nbytes) {
  (void)ctx;
  (void)dst_device;
  (void)src_device;
  memmove(dst, src, nbytes);
  return 0;
}

/* pf__alloc_aligned's block for a tensor buffer: a slab block up to PF__SLAB_MAX, beyond it a
 * block of the exact size (posix_memalign); MemoryError raised when there is none. */
static inline void* pf__cpu_alloc_block(size_t nbytes, void** block) {
  void* p = pf__alloc_aligned(nbytes, PF_TENSOR_ALIGNMENT);
  *block = p;
  if (!p)
    pf__raise_oom("pf_allocator(cpu)", nbytes);
  return p;
}

/* pf__cpu_alloc_tensor beyond PF__SLAB_MAX (out of line, a tail call: the slab path keeps a
 * leaf's frame): one malloc with room to align the data inside. With the slabs off (memory
 * checkers: room around the data would hide overruns from AddressSanitizer and valgrind), or
 * where malloc fails or aligns less than it must, a block of the exact size instead. */
__attribute__((noinline)) static void* pf__cpu_alloc_large(size_t nbytes, void** block) {
  /* malloc's blocks are aligned to max_align_t: at most this many bytes before an aligned
   * address */
  const size_t room = PF_TENSOR_ALIGNMENT - _Alignof(max_align_t);
  if (nbytes <= PF__ALLOC_MAX - room && !pf__alloc_slabs_off()) {
    char* raw = malloc(nbytes + room);
    size_t pad = (size_t)(-(uintptr_t)raw & (PF_TENSOR_ALIGNMENT - 1));
    if (raw && pad <= room) {
      *block = raw;
      return raw + pad;
    }
    free(raw);
  }
  return pf__cpu_alloc_block(nbytes, block);
}

void* pf__cpu_alloc_tensor(size_t nbytes, void** block) {
  if (nbytes > PF__SLAB_MAX)
    return pf__cpu_alloc_large(nbytes, block);
  return pf__cpu_alloc_block(nbytes, block);
}

const pf_allocator_t pf__cpu_allocator = {NULL, pf__cpu_alloc, pf__cpu_free, pf__cpu_copy};
int pf__cpu_allocator_builtin = 1;

/* ---- the allocator table ---- */

/* Entries with alloc == NULL are empty. Writers serialise on the mutex and bump a sequence
 * number around their update (odd while writing); readers copy the entry field by field with
 * atomic loads and retry when the sequence moved, so allocating a tensor takes no lock and
 * never sees a half-written entry. */
static pf_allocator_t pf__allocators[PF_ALLOCATOR_MAX_DEVICE_TYPE] = {
    [PF_DEV_CPU] = {NULL, pf__cpu_alloc, pf__cpu_free, pf__cpu_copy},
};
static pthread_mutex_t pf__allocators_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t pf__allocators_seq;

/* fork(): a writer holds the lock for as long as the sequence number is odd, so with the lock
 * taken around fork() a child finds the table unlocked and its number even (readers in a child
 * forked mid-write spun forever on an odd one). */
void pf__device_fork_lock(void) {
  pthread_mutex_lock(&pf__allocators_lock);
}

void pf__device_fork_unlock(void) {
  pthread_mutex_unlock(&pf__allocators_lock);
}

/* Device type as text for messages: "cuda (2)", or "device(99)". */
const char* pf__device_type_label(int32_t type, char* buf, size_t size) {
  const char* name = pf_device_type_name(type);
  if (name)
    snprintf(buf, size, "%s (%d)", name, (int)type);
  else
    snprintf(buf, size, "device(%d)", (int)type);
  return buf;
}

static int pf__device_type_in_range(int32_t type) {
  return type > 0 && type < PF_ALLOCATOR_MAX_DEVICE_TYPE;
}

int pf_allocator_set(int32_t device_type, const pf_allocator_t* allocator) {
  if (!pf__device_type_in_range(device_type)) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_allocator_set: argument device_type: expected 1..%d, got %d",
                 PF_ALLOCATOR_MAX_DEVICE_TYPE - 1, (int)device_type);
    return -1;
  }
  if (allocator && (!allocator->alloc || !allocator->free)) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_allocator_set: argument allocator: expected alloc and free hooks, got NULL "
                 "%s",
                 allocator->alloc ? "free" : "alloc");
    return -1;
  }
  pf_allocator_t entry;
  if (allocator)
    entry = *allocator;
  else if (device_type == PF_DEV_CPU)
    entry = pf__cpu_allocator;
  else
    memset(&entry, 0, sizeof entry);
  pthread_mutex_lock(&pf__allocators_lock);
  pf_allocator_t* slot = &pf__allocators[device_type];
  __atomic_fetch_add(&pf__allocators_seq, 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&slot->ctx, entry.ctx, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->alloc, entry.alloc, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->free, entry.free, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->copy, entry.copy, __ATOMIC_RELAXED);
  __atomic_fetch_add(&pf__allocators_seq, 1, __ATOMIC_RELEASE);
  if (device_type == PF_DEV_CPU)
    /* pf_tensor_empty's shortcut allocates with the built-in hooks: only when all three are */
    __atomic_store_n(&pf__cpu_allocator_builtin,
                     entry.alloc == pf__cpu_alloc && entry.free == pf__cpu_free &&
                         entry.ctx == NULL,
                     __ATOMIC_RELEASE);
  pthread_mutex_unlock(&pf__allocators_lock);
  return 0;
}

/* Copies the entry for an in-range device type; 1 when one is installed. */
static int pf__allocator_load(int32_t device_type, pf_allocator_t* out) {
  pf_allocator_t* slot = &pf__allocators[device_type];
  for (;;) {
    uint32_t before = __atomic_load_n(&pf__allocators_seq, __ATOMIC_ACQUIRE);
    if (before & 1u) {
      sched_yield(); /* a writer is in the middle of an update */
      continue;
    }
    out->ctx = __atomic_load_n(&slot->ctx, __ATOMIC_RELAXED);
    out->alloc = __atomic_load_n(&slot->alloc, __ATOMIC_RELAXED);
    out->free = __atomic_load_n(&slot->free, __ATOMIC_RELAXED);
    out->copy = __atomic_load_n(&slot->copy, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&pf__allocators_seq, __ATOMIC_RELAXED) == before)
      return out->alloc != NULL;
  }
}

int pf__allocator_find(int32_t device_type, const char* func, pf_allocator_t* out) {
  if (pf__device_type_in_range(device_type) && pf__allocator_load(device_type, out))
    return 0;
  memset(out, 0, sizeof *out);
  char label[48];
  int cuda = device_type == PF_DEV_CUDA || device_type == PF_DEV_CUDA_HOST ||
             device_type == PF_DEV_CUDA_MANAGED;
  if (!pf__device_type_in_range(device_type)) { /* no advice to install what cannot be */
    PF_ERROR_SET(
        PF_ERR_KEY, "%s: no allocator for device type %s (allocators exist for types 1..%d)", func,
        pf__device_type_label(device_type, label, sizeof label), PF_ALLOCATOR_MAX_DEVICE_TYPE - 1);
    return -1;
  }
  PF_ERROR_SET(PF_ERR_KEY, "%s: no allocator for device type %s%s", func,
               pf__device_type_label(device_type, label, sizeof label),
               cuda ? "; link libpackfn_cuda (or install one with pf_allocator_set)"
                    : "; install one with pf_allocator_set");
  return -1;
}

int pf_allocator_get(int32_t device_type, pf_allocator_t* out) {
  if (!out)
    return PF__NULL_ARG("pf_allocator_get", "out");
  if (!pf__device_type_in_range(device_type)) {
    memset(out, 0, sizeof *out);
    PF_ERROR_SET(PF_ERR_VALUE, "pf_allocator_get: argument device_type: expected 1..%d, got %d",
                 PF_ALLOCATOR_MAX_DEVICE_TYPE - 1, (int)device_type);
    return -1;
  }
  if (!pf__allocator_load(device_type, out))
    memset(out, 0, sizeof *out); /* the lookup rule: absent is no error */
  return 0;
}

int pf__allocator_call(const pf_allocator_t* a, DLDevice device, size_t nbytes, const char* func,
                       void** out) {
  *out = NULL;
  void* ptr = NULL;
  pf_object_t* pending = pf__hook_begin();
  if (a->alloc(a->ctx, device, nbytes, PF_TENSOR_ALIGNMENT, &ptr) != 0) {
    /* The hook should have raised; make sure the caller sees an error either way */
    if (pf__hook_failed(pending))
      pf__raise_oom(func, nbytes);
    pf__hook_end(pending);
    return -1;
  }
  pf__hook_end(pending);
  if (!ptr) {
    PF_ERROR_SET(PF_ERR_RUNTIME, "%s: the allocator returned no memory for %zu bytes", func,
                 nbytes);
    return -1;
  }
  /* the alignment every tensor's data has (DLPack's, and kernels rely on it), where the data
   * is an address: a hook's misaligned buffer went through (review) */
  if (pf__is_address_device((int32_t)device.device_type) &&
      (uintptr_t)ptr % PF_TENSOR_ALIGNMENT != 0) {
    a->free(a->ctx, device, ptr);
    char label[48];
    PF_ERROR_SET(PF_ERR_RUNTIME,
                 "%s: the allocator of device type %s returned memory %zu bytes past a multiple "
                 "of %d, the alignment it was asked for",
                 func, pf__device_type_label((int32_t)device.device_type, label, sizeof label),
                 (size_t)((uintptr_t)ptr % PF_TENSOR_ALIGNMENT), PF_TENSOR_ALIGNMENT);
    return -1;
  }
  *out = ptr;
  return 0;
}

/* ---- current streams ---- */

typedef struct {
  DLDevice device;
  void* stream;
} pf__stream_slot_t;

/* This thread's non-default streams: a table on the heap, found through a thread key whose
 * destructor is the C library's free. Not thread-local storage: every byte of libpackfn's
 * thread-local block is claimed from the static TLS space glibc keeps for libraries loaded late
 * (the block holds initial-exec variables), and a 512-byte table there made loading
 * libpackfn with dlopen fail ("cannot allocate memory in static TLS block") beside other such
 * libraries (found by review). free, not packfn code, runs at thread exit, so the key needs no
 * deleting when a library holding packfn statically is unloaded. */
typedef struct {
  int32_t count;
  int32_t env; /* joined with TVM-FFI: pf__env_state */
  pf__stream_slot_t slot[PF_STREAM_MAX_DEVICES];
} pf__streams_t;

static pthread_once_t pf__streams_once = PTHREAD_ONCE_INIT;
static pthread_key_t pf__streams_key;
static int pf__streams_key_ok;

static void pf__streams_key_make(void) {
  pf__streams_key_ok = pthread_key_create(&pf__streams_key, free) == 0;
}

/* A library holding packfn statically that a host unloads gives its key back (each load and
 * unload took one: found by review, the process ran out of keys after 1024 cycles); the tables
 * of threads still running then stay allocated. Not where packfn cannot be unmapped. */
#ifndef PF_PINNED
__attribute__((destructor)) static void pf__streams_fini(void) {
  if (pf__streams_key_ok && pf__code_unmappable()) {
    pf__streams_key_ok = 0;
    (void)pthread_key_delete(pf__streams_key);
  }
}
#endif

/* This thread's table, or NULL when it has set no stream. */
static pf__streams_t* pf__streams_of_thread(void) {
  pthread_once(&pf__streams_once, pf__streams_key_make);
  return pf__streams_key_ok ? pthread_getspecific(pf__streams_key) : NULL;
}

static int32_t pf__stream_find(const pf__streams_t* t, DLDevice device) {
  for (int32_t i = 0; t && i < t->count; ++i)
    if (pf_device_equal(t->slot[i].device, device))
      return i;
  return -1;
}

/* This thread's table, allocated (and made its key's value) when it has none: 0, or -1 with
 * MemoryError or RuntimeError raised as `func` (raising nothing when `quiet`). */
static int pf__streams_make(pf__streams_t** out, const char* func, int quiet) {
  pf__streams_t* t = calloc(1, sizeof *t);
  if (!t)
    return quiet ? -1 : pf__raise_oom(func, sizeof *t);
  if (!pf__streams_key_ok || pthread_setspecific(pf__streams_key, t) != 0) {
    free(t);
    if (!quiet)
      PF_ERROR_SET(PF_ERR_RUNTIME,
                   "%s: cannot keep a current stream for this thread (no thread key)", func);
    return -1;
  }
  *out = t;
  return 0;
}

/* ---- joined with TVM-FFI: its environment's streams are the current streams ----
 * Once packfn has joined a TVM-FFI that has TVMFFIEnvSetStream / TVMFFIEnvGetStream (its
 * per-thread current stream of each device, which hosts such as its PyTorch integration set
 * around a call), pf_stream_get and pf_stream_set read and write those, so that a stream made
 * current on either side is the other's too. Streams this thread made current before the join
 * move there at its first stream call after it. Devices TVM-FFI's table cannot index (a negative
 * type or index, or beyond PF__ENV_MAX_*) stay in packfn's table.
 *
 * TVM-FFI's table is a C++ thread_local, which glibc destroys before the thread's pthread key
 * destructors run (and, in the thread calling exit(), before atexit handlers). As the error layer
 * does for its slot (error.c), the first stream call of a thread after the join registers a
 * thread_local destructor of packfn's (__cxa_thread_atexit_impl, after TVM-FFI's table exists,
 * so it runs first): it retires the thread from TVM-FFI's table, and later calls of that thread
 * see packfn's empty one, every device on its default stream, as the header promises for a
 * thread's teardown. Without __cxa_thread_atexit_impl (not glibc) streams are not shared. */
extern int __cxa_thread_atexit_impl(void (*dtor)(void*), void* obj, void* dso_symbol)
    __attribute__((weak));
extern void* __dso_handle __attribute__((visibility("hidden")));

enum { PF__ENV_UNUSED, PF__ENV_USED, PF__ENV_RETIRED }; /* pf__streams_t.env */

/* pf__cache.streams_retired (alloc.h): 1 once this thread's retiring destructor has run. Its
 * table may be freed since (the key's destructor, free, may run before other keys' destructors
 * that still call in), and TVM-FFI's table is gone: such calls must not reach either. */
#define pf__env_gone     (pf__cache.streams_retired)
#define PF__ENV_MAX_TYPE 64
#define PF__ENV_MAX_ID   1024

/* Whether TVM-FFI's table holds the device's stream (one it can index without growing far). */
static int pf__env_indexes(DLDevice d) {
  return d.device_type >= 0 && d.device_type < PF__ENV_MAX_TYPE && d.device_id >= 0 &&
         d.device_id < PF__ENV_MAX_ID;
}

static void pf__env_retire(void* table) {
  pf__streams_t* t = table;
  t->env = PF__ENV_RETIRED;
  t->count = 0;
  pf__env_gone = 1;
}

/* Moves the streams this thread made current before the join into TVM-FFI's table (those it
 * refuses stay, found by pf__stream_find as before). Where TVM-FFI's table already holds a
 * stream for the device, made current through TVM-FFI since (a host around the call that makes
 * this first stream call), that one stays and packfn's is dropped: moved over it, the host's call
 * launched on the pre-join stream and the host's was gone from TVM-FFI's table (review). */
static void pf__env_migrate(const pf__tvm_t* tvm, pf__streams_t* t) {
  /* The error raised in this thread (TVM-FFI's slot, once errors are joined), kept aside: a
   * failed TVMFFIEnvSetStream raises over it, which replaced it, and dropping that left the
   * caller of pf_stream_get, which never raises, without its pending error (review) */
  void* pending = NULL;
  int kept = 0;
  for (int32_t i = t->count; i-- > 0;) {
    DLDevice d = t->slot[i].device;
    if (!pf__env_indexes(d))
      continue;
    if (!tvm->env_get_stream((int32_t)d.device_type, d.device_id)) {
      if (!kept) {
        tvm->error_move_from_raised(&pending);
        kept = 1;
      }
      if (tvm->env_set_stream((int32_t)d.device_type, d.device_id, t->slot[i].stream, NULL) != 0) {
        pf__tvm_discard(tvm);
        continue;
      }
    }
    t->slot[i] = t->slot[--t->count];
  }
  if (pending) { /* back where it was: the slot takes its own reference */
    tvm->error_set_raised(pending);
    pf_object_release((pf_object_t*)pending);
  }
}

/* TVM-FFI, when this thread's current stream of `device` is in its table (joined, the entry
 * points there, the device one it can index, the thread not retired), with this thread's table
 * in *t (allocated, its retiring destructor registered, its earlier streams moved, on the first
 * such call); else NULL. On a failure to allocate or register: NULL with nothing raised, or,
 * unless `quiet`, 1 in *failed with the error raised. */
static const pf__tvm_t* pf__env_for(DLDevice device, pf__streams_t** t, int quiet, const char* func,
                                    int* failed) {
  *failed = 0;
  if (!pf__env_indexes(device))
    return NULL;
  const pf__tvm_t* tvm = pf__tvm_first_use();
  if (!tvm || !tvm->env_get_stream || !__cxa_thread_atexit_impl || pf__env_gone)
    return NULL;
  if (*t && (*t)->env == PF__ENV_USED)
    return tvm;
  if (*t && (*t)->env == PF__ENV_RETIRED)
    return NULL;
  if (!*t && pf__streams_make(t, func, quiet) != 0) {
    *failed = !quiet;
    return NULL;
  }
  (void)tvm->env_get_stream(0, 0); /* TVM-FFI's thread_local exists before ours is registered */
  if (__cxa_thread_atexit_impl(pf__env_retire, *t, &__dso_handle) != 0) {
    if (!quiet) {
      PF_ERROR_SET(PF_ERR_MEMORY, "%s: cannot register this thread's stream teardown", func);
      *failed = 1;
    }
    return NULL;
  }
  (*t)->env = PF__ENV_USED;
  pf__env_migrate(tvm, *t);
  return tvm;
}

void* pf_stream_get(DLDevice device) {
  pf__streams_t* t = pf__streams_of_thread();
  int failed;
  const pf__tvm_t* tvm = pf__env_for(device, &t, 1, "pf_stream_get", &failed);
  int32_t i = pf__stream_find(t, device); /* with TVM-FFI: one the migration could not move */
  if (i >= 0)
    return t->slot[i].stream;
  return tvm ? tvm->env_get_stream((int32_t)device.device_type, device.device_id) : NULL;
}

int pf_stream_set(DLDevice device, void* stream, void** prev) {
  static const char func[] = "pf_stream_set";
  pf__streams_t* t = pf__streams_of_thread();
  int failed;
  const pf__tvm_t* tvm = pf__env_for(device, &t, 0, func, &failed);
  if (failed) {
    if (prev)
      *prev = NULL;
    return -1;
  }
  int32_t i = pf__stream_find(t, device);
  if (tvm) {
    void* theirs = NULL;
    if (tvm->env_set_stream((int32_t)device.device_type, device.device_id, stream, &theirs) != 0) {
      if (prev)
        *prev = NULL;
      return pf__tvm_failed(tvm, func, "TVMFFIEnvSetStream");
    }
    if (prev) /* the one left from before the join, which the migration could not move, first */
      *prev = i >= 0 ? t->slot[i].stream : theirs;
    if (i >= 0) /* TVM-FFI's table has the device now */
      t->slot[i] = t->slot[--t->count];
    return 0;
  }
  if (prev)
    *prev = i >= 0 ? t->slot[i].stream : NULL;
  if (i >= 0) {
    if (stream)
      t->slot[i].stream = stream;
    else
      t->slot[i] = t->slot[--t->count]; /* back to the default: drop the slot */
    return 0;
  }
  if (!stream)
    return 0;
  if (!t && pf__streams_make(&t, func, 0) != 0) {
    if (prev)
      *prev = NULL;
    return -1;
  }
  if (t->count == PF_STREAM_MAX_DEVICES) {
    char dev[PF_DEVICE_STR_MAX];
    pf_device_format(device, dev, sizeof dev);
    PF_ERROR_SET(PF_ERR_RUNTIME,
                 "pf_stream_set: cannot make a stream current on %s: this thread already holds "
                 "non-default streams for %d devices",
                 dev, PF_STREAM_MAX_DEVICES);
    return -1;
  }
  t->slot[t->count].device = device;
  t->slot[t->count].stream = stream;
  ++t->count;
  return 0;
}
