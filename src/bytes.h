/* Private: hashing, copying and comparing short runs of bytes (names, small strings), the
 * hot helpers of the global table, strings and error messages. */
#ifndef PACKFN_SRC_BYTES_H_
#define PACKFN_SRC_BYTES_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
      /* a multiply carries a difference only upward: the rotate brings the top bits down, so
       * the next multiply spreads a word's high bytes too (without it, names differing only
       * in bytes 7 and 15 took at most 256 slot indices: found by review) */
      h = (h << 29) | (h >> 35);
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

/* memcpy for runs that are usually short (names, messages, raise sites): up to 64 bytes with
 * a few overlapping moves and no call, longer ones through memcpy. */
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
  } else if (n > 32 && n <= 64) {
    char a[32], b[32];
    memcpy(a, src, 32);
    memcpy(b, src + n - 32, 32);
    memcpy(dst, a, 32);
    memcpy(dst + n - 32, b, 32);
  } else if (n > 64) {
    memcpy(dst, src, n);
  }
}

/* pf__bytes_equal for n <= 32: a few overlapping word compares, no call. Reads only within
 * [a, a + n) and [b, b + n). */
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

#endif /* PACKFN_SRC_BYTES_H_ */
