/* pf_test_npy.h: what the files of test_npy's Check suite share: the temporary folder of the
 * "write" and "read" cases and its fixture, a hand-made .npy image builder, and the TCases
 * each file adds to the suite built in test_npy.c. Each file defines _DEFAULT_SOURCE before
 * its first #include: the fixture uses mkdtemp and rmdir. */
#ifndef PF_TEST_NPY_H_
#define PF_TEST_NPY_H_

#ifndef _DEFAULT_SOURCE
#error "define _DEFAULT_SOURCE before the first #include (mkdtemp, rmdir)"
#endif

#include "packfn/npy.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ERR_SIZE 256
#define BUF_SIZE 4096

/* The test folder, made and removed around each test of the "write" and "read" cases by the
 * fixture below; defined in test_npy.c. */
extern char pf_test_npy_dir[64];

static inline void make_temp_dir(void) {
  snprintf(pf_test_npy_dir, sizeof pf_test_npy_dir, "/tmp/test_npy_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(pf_test_npy_dir));
}

static inline void remove_temp_dir(void) {
  rmdir(pf_test_npy_dir);
}

static inline void temp_path(char* buf, size_t size, const char* name) {
  snprintf(buf, size, "%s/%s", pf_test_npy_dir, name);
}

static inline DLDataType dtype(uint8_t code, uint8_t bits) {
  DLDataType dt = {code, bits, 1};
  return dt;
}

/* Builds a .npy image into buf: magic, version major.0, the header length (2 bytes for 1.0, 4
 * otherwise), `dict` padded with spaces to a multiple of 64 and ended with a newline, then
 * data_len bytes of data. Returns the length. */
static inline size_t make_npy(unsigned char* buf, int major, const char* dict, const void* data,
                              size_t data_len) {
  size_t prefix = major == 1 ? 10 : 12;
  size_t text = strlen(dict) + 1;
  size_t hlen = text + (64 - (prefix + text) % 64) % 64;
  ck_assert_uint_le(prefix + hlen + data_len, BUF_SIZE);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  for (size_t k = 0; k < prefix - 8; k++) {
    buf[8 + k] = (unsigned char)(hlen >> (8 * k));
  }
  memset(buf + prefix, ' ', hlen);
  memcpy(buf + prefix, dict, strlen(dict));
  buf[prefix + hlen - 1] = '\n';
  if (data_len > 0) {
    memcpy(buf + prefix + hlen, data, data_len);
  }
  return prefix + hlen + data_len;
}

/* The "write" case: round trips, the writer's header and refusals (test_npy_write.c), then the
 * tests pf_test_npy_add_output_tests adds. */
TCase* pf_test_npy_write_tcase(void);

/* Adds the tests of mapped reading and atomic outputs (test_npy_output.c) to tc. */
void pf_test_npy_add_output_tests(TCase* tc);

/* The "format" case: the NumPy-style printer (test_npy_format.c). */
TCase* pf_test_npy_format_tcase(void);

#endif
