/* Private helpers every layer of libpackfn may use (prefix pf__). Not installed. */
#ifndef PACKFN_SRC_COMMON_H_
#define PACKFN_SRC_COMMON_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "packfn/error.h"
#include "packfn/object.h"

#define PF__ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Thread-local storage; initial-exec: libpackfn is linked, not dlopen'ed late, so its TLS
 * block is reachable at a fixed offset (no __tls_get_addr call). */
#if defined(__GNUC__)
#define PF__TLS __thread __attribute__((tls_model("initial-exec")))
#else
#define PF__TLS _Thread_local
#endif

/* Raises ValueError "<func>: argument <arg>: expected a pointer, got NULL" at the caller's
 * site (a macro, so the error records the caller's file and line) and yields -1:
 *   if (!out) return PF__NULL_ARG("pf_map_create", "out"); */
#define PF__NULL_ARG(func, arg)                                                                    \
  (PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a pointer, got NULL", (func), (arg)), -1)

/* The indefinite article for `word` in generated messages: "an" before a written vowel other
 * than u ("an int64 tensor", "an object"), "a" otherwise ("a float32 tensor", "a uint8 tensor",
 * whose u is said "you"). */
static inline const char* pf__article(const char* word) {
  switch (word[0]) {
  case 'a':
  case 'e':
  case 'i':
  case 'o':
  case 'A':
  case 'E':
  case 'I':
  case 'O':
    return "an";
  default:
    return "a";
  }
}

/* Releases from the deleter of an object that may form unbounded chains (arrays, maps, an
 * error's cause): like pf_object_release / pf_any_release, but past 64 nested levels the
 * release is queued and run by the outermost one, so a million-deep chain uses bounded stack
 * (refcount.c). NULL / none is a no-op; the Any is left none. */
void pf__release_nested(pf_object_t* obj);
void pf__any_release_nested(pf_any_t* v);

/* Raises MemoryError naming the function and the size asked for; returns -1. */
int pf__raise_oom(const char* func, size_t size);

/* Duplicates a NUL-terminated string with malloc; NULL on failure (nothing raised). */
char* pf__strdup(const char* s);

/* Initialises an object header per the ABI: strong 1 / weak 1, the type index, zero padding
 * and the deleter. For objects whose memory the caller has just allocated. */
static inline void pf__object_init(pf_object_t* obj, int32_t type_index,
                                   void (*deleter)(void* self, int flags)) {
  obj->combined_ref_count = PF_REF_INITIAL;
  obj->type_index = type_index;
  obj->padding = 0;
  obj->deleter = deleter;
}

/* Checked size arithmetic: 0 on success, -1 on overflow (nothing raised). */
static inline int pf__mul_size(size_t a, size_t b, size_t* out) {
  return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}
static inline int pf__add_size(size_t a, size_t b, size_t* out) {
  return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

#endif /* PACKFN_SRC_COMMON_H_ */
