/* fuzz_util.h: what the libFuzzer harnesses of tests/fuzz share: a reader over the fuzz input
 * and the check that aborts (a finding) when a property fails. */
#ifndef PACKFN_FUZZ_UTIL_H_
#define PACKFN_FUZZ_UTIL_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Aborts with the failed property: libFuzzer saves the input as a crash. */
#define FUZZ_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond);                  \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* Consumes the fuzz input front to back; past the end every read gives zeros. */
typedef struct fuzz_input_s {
  const uint8_t* data;
  size_t size;
} fuzz_input_t;

static inline uint8_t fuzz_u8(fuzz_input_t* in) {
  if (in->size == 0)
    return 0;
  uint8_t v = in->data[0];
  ++in->data;
  --in->size;
  return v;
}

static inline uint64_t fuzz_u64(fuzz_input_t* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= (uint64_t)fuzz_u8(in) << (8 * i);
  return v;
}

/* An int64 that is often an edge value (0, 1, -1, extremes, powers of two), else raw bytes. */
static inline int64_t fuzz_i64(fuzz_input_t* in) {
  static const int64_t edges[] = {0,
                                  1,
                                  -1,
                                  2,
                                  3,
                                  4,
                                  16,
                                  INT64_MAX,
                                  INT64_MIN,
                                  INT64_MAX / 2,
                                  (int64_t)1 << 62,
                                  (int64_t)1 << 32,
                                  -((int64_t)1 << 62),
                                  255,
                                  256,
                                  65536};
  uint8_t sel = fuzz_u8(in);
  if (sel < 128)
    return edges[sel % (sizeof edges / sizeof edges[0])];
  return (int64_t)fuzz_u64(in, 8);
}

/* A NUL-terminated copy of the next string: a length byte then that many bytes (fewer at the
 * end). malloc'ed; the caller frees it. NULL when memory runs out. */
static inline char* fuzz_str(fuzz_input_t* in) {
  size_t n = fuzz_u8(in);
  if (n > in->size)
    n = in->size;
  char* s = malloc(n + 1);
  if (!s)
    return NULL;
  memcpy(s, in->data, n);
  s[n] = '\0';
  in->data += n;
  in->size -= n;
  return s;
}

/* The whole input as a NUL-terminated string (embedded NULs end it early). */
static inline char* fuzz_cstr(const uint8_t* data, size_t size) {
  char* s = malloc(size + 1);
  if (!s)
    return NULL;
  memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

#endif /* PACKFN_FUZZ_UTIL_H_ */
