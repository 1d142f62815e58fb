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
  pf_safe_call_t call;         /* the creator's function, NULL in the direct form */
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

/* Allocates `size` bytes (16-byte aligned, uninitialised) from the per-thread small-object
 * cache or malloc; NULL when out of memory (nothing raised). Free with pf__free only. */
void* pf__alloc(size_t size);
/* Frees a block from pf__alloc (any thread may free any block); NULL is a no-op. */
void pf__free(void* p);

/* Duplicates a NUL-terminated string with malloc; NULL on failure (nothing raised). */
char* pf__strdup(const char* s);

/* Word-at-a-time multiplicative hash (pf_hash_bytes): a few instructions per 8 bytes, with a
 * final mix so the low bits (a table index) depend on every byte. Not for adversarial input. */
static inline uint64_t pf__hash_bytes(const char* data, size_t size) {
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
  h = (h ^ w) * k;
  h ^= h >> 29;
  h *= k;
  return h ^ (h >> 32);
}

/* Checked size arithmetic: 0 on success, -1 on overflow (nothing raised). */
static inline int pf__mul_size(size_t a, size_t b, size_t* out) {
  return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}
static inline int pf__add_size(size_t a, size_t b, size_t* out) {
  return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

#endif /* PACKFN_INTERNAL_H_ */
