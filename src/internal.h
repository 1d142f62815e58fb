/* Private helpers shared by packfn's source files (prefix pf__). Not installed.
 * Holds the few layouts and macros that more than one layer needs. */
#ifndef PACKFN_INTERNAL_H_
#define PACKFN_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "packfn/packfn.h"

#define PF__ARRAY_SIZE(a)                   (sizeof(a) / sizeof((a)[0]))
#define PF__CONTAINER_OF(ptr, type, member) ((type*)((char*)(ptr)-offsetof(type, member)))

#if defined(__GNUC__)
#define PF__LIKELY(x) __builtin_expect(!!(x), 1)
#define PF__TLS       __thread __attribute__((tls_model("initial-exec")))
#else
#define PF__LIKELY(x) (x)
#define PF__TLS       _Thread_local
#endif

/* Raises MemoryError naming the function and the size asked for; returns -1. */
int pf__raise_oom(const char* func, size_t size);

/* A packfn function object: header, the ABI cell, then our private part. */
typedef struct pf__function_s {
  pf_object_t header;
  pf_function_cell_t cell;
  void* self;                  /* the creator's state */
  pf_safe_call_t call;         /* the creator's function (in the direct form also the cell's) */
  void (*deleter)(void* self); /* the creator's deleter, or NULL */
  pf_object_t* keepalive;      /* owned; released after the deleter (e.g. a module) */
  char* signature;             /* owned, or NULL */
  char* doc;                   /* owned, or NULL */
} pf__function_t;

/* 1 when obj is a function object made by packfn (whose private part we may read). */
int pf__function_is_ours(const pf_object_t* obj);

/* Makes `fn` (a packfn function) hold a reference to `owner` (retained) until it dies, after
 * its deleter ran: used so a module's code outlives its functions. -1 with TypeError. */
int pf__function_set_keepalive(pf_object_t* fn, pf_object_t* owner);

/* ---- the per-thread block cache (src/alloc.c) ----
 * Every block starts with a 16-byte header (so the payload keeps malloc's alignment) holding
 * its size class. Classes are powers of two from 64 B to 64 KiB of total block size: objects
 * (40..400 bytes) and small CPU tensor buffers; larger blocks go straight to malloc. A thread
 * keeps at most 64 blocks of each class up to 1 KiB and 4 of each larger class (under 600 KiB
 * in all). The fast paths are inline here; misses, the first free of a thread and full classes
 * go to alloc.c. */
typedef struct pf__block_s {
  union {
    struct pf__block_s* next; /* while cached */
    uint64_t size_class;      /* while in use: index of its class, or PF__NO_CLASS */
  };
  uint64_t reserved;
} pf__block_t;

#define PF__NCLASS         11
#define PF__NO_CLASS       255u
#define PF__SMALL_CLASSES  5
#define PF__CACHE_DEPTH(c) ((c) < PF__SMALL_CLASSES ? 64u : 4u)

typedef struct {
  pf__block_t* head[PF__NCLASS];
  /* blocks of each class this thread may still cache: 0 until the first free decides (and
   * forever when caching is off), then the depth minus the blocks cached */
  int32_t room[PF__NCLASS];
  /* 1: caching on and the thread-exit flush registered; 0: not yet decided; -1: off */
  int state;
} pf__cache_t;

extern PF__TLS pf__cache_t pf__cache;

/* Out-of-line halves of pf__alloc and pf__free. */
void* pf__alloc_slow(size_t size, unsigned size_class);
void pf__free_slow(pf__block_t* block, unsigned size_class);

/* Class of a block of `total` bytes: 64 -> 0, 128 -> 1, ... 65536 -> 10, larger -> none. */
static inline unsigned pf__class_of(size_t total) {
  if (total <= 64)
    return 0;
  unsigned c = (unsigned)(64 - __builtin_clzll((unsigned long long)(total - 1))) - 6;
  return c < PF__NCLASS ? c : PF__NO_CLASS;
}

/* A block of class c from this thread's cache, or NULL when that class is empty (or c is
 * PF__NO_CLASS). */
static inline void* pf__cache_pop(unsigned c) {
  if (PF__LIKELY(c < PF__NCLASS)) {
    pf__block_t* b = pf__cache.head[c];
    if (PF__LIKELY(b != NULL)) {
      pf__cache.head[c] = b->next;
      pf__cache.room[c]++;
      b->size_class = c;
      return b + 1;
    }
  }
  return NULL;
}

/* The cache half of pf__alloc: a block from this thread's cache, or NULL when the class is
 * empty (or the size has no class). Lets a hot constructor keep its miss path out of line. */
static inline void* pf__alloc_cached(size_t size) {
  return pf__cache_pop(pf__class_of(size + sizeof(pf__block_t)));
}

/* Allocates `size` bytes (16-byte aligned, uninitialised) from the per-thread cache or malloc;
 * NULL when out of memory (nothing raised). Free with pf__free only. */
static inline void* pf__alloc(size_t size) {
  unsigned c = pf__class_of(size + sizeof(pf__block_t));
  void* p = pf__cache_pop(c);
  if (PF__LIKELY(p != NULL))
    return p;
  return pf__alloc_slow(size, c);
}

/* pf__free for a pointer known not to be NULL (object deleters). */
static inline void pf__free_nonnull(void* p) {
  pf__block_t* b = (pf__block_t*)p - 1;
  unsigned c = (unsigned)b->size_class;
  if (PF__LIKELY(c < PF__NCLASS && pf__cache.room[c] > 0)) {
    b->next = pf__cache.head[c];
    pf__cache.head[c] = b;
    pf__cache.room[c]--;
    return;
  }
  pf__free_slow(b, c);
}

/* Frees a block from pf__alloc (any thread may free any block); NULL is a no-op. */
static inline void pf__free(void* p) {
  if (p)
    pf__free_nonnull(p);
}

/* Initialises an object header per the ABI: strong 1 / weak 1, the type index, zero padding
 * and the deleter. For objects whose memory the caller has just allocated. */
static inline void pf__object_init(pf_object_t* obj, int32_t type_index,
                                   void (*deleter)(void* self, int flags)) {
  obj->combined_ref_count = PF_REF_INITIAL;
  obj->type_index = type_index;
  obj->padding = 0;
  obj->deleter = deleter;
}

/* Duplicates a NUL-terminated string with malloc; NULL on failure (nothing raised). */
char* pf__strdup(const char* s);

/* Word-at-a-time multiplicative hashing, not for adversarial input. pf__hash_absorb takes in
 * the bytes, a few instructions per 8 bytes, and returns the state before the final mix; *tail
 * receives the last word taken in: for size <= 8 it holds every byte of the input, and the
 * state is a bijection of size ^ tail, so two runs of at most 8 bytes with equal states (or
 * equal bijective mixes of them) and equal tails are equal. */
static inline uint64_t pf__hash_absorb(const char* data, size_t size, uint64_t* tail) {
  const unsigned char* p = (const unsigned char*)data;
  const uint64_t k = 0x9fb21c651e98df25ULL;
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ size;
  uint64_t w;
  if (size >= 8) {
    const unsigned char* last = p + size - 8;
    while (p < last) {
      memcpy(&w, p, 8);
      h = (h ^ w) * k;
      p += 8;
    }
    memcpy(&w, last, 8); /* the final 8 bytes, overlapping the previous word if needed */
  } else if (size >= 4) {
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + size - 4, 4);
    w = ((uint64_t)hi << 32) | lo;
  } else {
    w = size ? ((uint64_t)p[0] << 16) | ((uint64_t)p[size >> 1] << 8) | p[size - 1] : 0;
  }
  *tail = w;
  return (h ^ w) * k;
}

/* pf_hash_bytes: the absorbed state with a full mix (every output bit depends on every byte). */
static inline uint64_t pf__hash_bytes(const char* data, size_t size) {
  uint64_t tail;
  uint64_t h = pf__hash_absorb(data, size, &tail);
  h ^= h >> 29;
  h *= 0x9fb21c651e98df25ULL;
  return h ^ (h >> 32);
}

/* memcpy for runs that are usually short (names, messages): up to 32 bytes with a few
 * overlapping moves and no call, longer ones through memcpy. */
static inline void pf__copy(char* dst, const char* src, size_t n) {
  if (n > 16 && n <= 32) {
    char a[16], b[16];
    memcpy(a, src, 16);
    memcpy(b, src + n - 16, 16);
    memcpy(dst, a, 16);
    memcpy(dst + n - 16, b, 16);
  } else if (n >= 8 && n <= 16) {
    uint64_t a, b;
    memcpy(&a, src, 8);
    memcpy(&b, src + n - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    memcpy(&a, src, 4);
    memcpy(&b, src + n - 4, 4);
    memcpy(dst, &a, 4);
    memcpy(dst + n - 4, &b, 4);
  } else if (n > 0 && n < 4) {
    dst[0] = src[0];
    dst[n / 2] = src[n / 2];
    dst[n - 1] = src[n - 1];
  } else if (n > 32) {
    memcpy(dst, src, n);
  }
}

/* memcmp(a, b, n) == 0 for runs that are usually short (names): up to 32 bytes with a few
 * overlapping loads and no call. Reads only within [a, a + n) and [b, b + n). */
/* pf__bytes_equal for n <= 32: a few overlapping word compares, no call. */
static inline int pf__bytes_equal_short(const char* a, const char* b, size_t n) {
  if (n > 16) {
    uint64_t x[4], y[4];
    memcpy(x, a, 16);
    memcpy(x + 2, a + n - 16, 16);
    memcpy(y, b, 16);
    memcpy(y + 2, b + n - 16, 16);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
  }
  if (n >= 8 && n <= 16) {
    uint64_t a0, a1, b0, b1;
    memcpy(&a0, a, 8);
    memcpy(&b0, b, 8);
    memcpy(&a1, a + n - 8, 8);
    memcpy(&b1, b + n - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  if (n >= 4 && n < 8) {
    uint32_t a0, a1, b0, b1;
    memcpy(&a0, a, 4);
    memcpy(&b0, b, 4);
    memcpy(&a1, a + n - 4, 4);
    memcpy(&b1, b + n - 4, 4);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

/* Byte equality of two runs of n bytes: short runs inline, longer ones through memcmp. */
static inline int pf__bytes_equal(const char* a, const char* b, size_t n) {
  return n <= 32 ? pf__bytes_equal_short(a, b, n) : memcmp(a, b, n) == 0;
}

/* Checked size arithmetic: 0 on success, -1 on overflow (nothing raised). */
static inline int pf__mul_size(size_t a, size_t b, size_t* out) {
  return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}
static inline int pf__add_size(size_t a, size_t b, size_t* out) {
  return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* ---- tensor layer (src/tensor.c, src/tensor_view.c, src/dlpack.c, src/device.c) ---- */

/* A packfn tensor object: header, the ABI's DLTensor, then our private part. */
typedef struct pf__tensor_s {
  pf_object_t header;
  DLTensor dl;                        /* at offset 24 (ABI); shape/strides point into dims */
  uint64_t flags;                     /* PF_DLPACK_FLAG_READ_ONLY when the memory is read-only */
  void* owner;                        /* keeps the memory alive, released by owner_release */
  void (*owner_release)(void* owner); /* NULL when there is nothing to release */
  pf_allocator_t allocator;           /* the hooks that allocated alloc_ptr */
  void* alloc_ptr;                    /* memory from allocator.alloc to free, or NULL */
  int64_t dims[];                     /* shape[ndim], then strides[ndim] */
} pf__tensor_t;

/* packfn's own CPU allocator, and whether it is the one installed for device type cpu (0 once
 * pf_allocator_set replaced it): pf_tensor_empty then allocates CPU memory without the table. */
extern const pf_allocator_t pf__cpu_allocator;
extern int pf__cpu_allocator_builtin;

/* Validates the description `desc` as argument `arg` of `func` (ndim, shape, dtype, data, size
 * overflow). 0, or -1 with ValueError. */
int pf__dltensor_validate(const DLTensor* desc, const char* func, const char* arg);

/* Allocates a tensor object copying `desc` (already validated): shape and strides inline
 * (compact strides when desc->strides is NULL), no owner. 0, or -1 with MemoryError. */
int pf__tensor_new(const DLTensor* desc, uint64_t flags, const char* func, pf__tensor_t** out);

/* The DLTensor of `tensor` (argument `arg` of `func`): 0, or -1 with TypeError for NULL or a
 * non-tensor. */
int pf__tensor_arg(pf_object_t* tensor, const char* func, const char* arg, DLTensor** out);

/* 1 when obj is a tensor made by packfn (whose private part we may read). */
int pf__tensor_is_ours(const pf_object_t* obj);

/* Releases an object reference held as an owner (owner_release of views and exports). */
void pf__owner_release_object(void* obj);

/* Writes "(2, 3)" for n extents into buf (truncated with "..." when it does not fit); -1
 * entries print as "*". Returns buf. */
const char* pf__format_dims(const int64_t* dims, int32_t n, char* buf, size_t size);

/* Copies the allocator installed for `device_type` into *out: 0, or -1 with KeyError naming
 * `func` and the device type when none is installed. */
int pf__allocator_find(int32_t device_type, const char* func, pf_allocator_t* out);

/* Calls a->alloc for nbytes (> 0) at PF_TENSOR_ALIGNMENT: 0 with the buffer in *out, or -1
 * with the hook's error (MemoryError naming func when the hook raised none). */
int pf__allocator_call(const pf_allocator_t* a, DLDevice device, size_t nbytes, const char* func,
                       void** out);

#endif /* PACKFN_INTERNAL_H_ */
