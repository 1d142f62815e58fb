/* npy_write.c: the .npy writer: version 1.0 files, byte for byte what np.save writes. */
#include "npy_private.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* NumPy pads the header so that the data starts on a multiple of 64 bytes (for mmap). */
#define NPY_ALIGN 64
/* NumPy leaves room after the dict for the first axis to grow in place to 21 digits, the length
 * of str(8 * 2**64 - 1); we write the same spaces so our files match NumPy's byte for byte. */
#define NPY_GROWTH_DIGITS 21

/* Checks that arr describes itself consistently; writes its descr. */
static int check_array(const pf_npy_array_t* arr, char* descr, size_t descr_size, const char* name,
                       char* err, size_t err_size) {
  if (pf_npy_dtype_descr(arr->dtype, descr, descr_size) != 0) {
    return pf__npy_fail(err, err_size, name,
                        "dtype (code %d, bits %d, lanes %d) has no .npy equivalent",
                        arr->dtype.code, arr->dtype.bits, arr->dtype.lanes);
  }
  if (arr->ndim < 0 || arr->ndim > PF_NPY_MAX_NDIM) {
    return pf__npy_fail(err, err_size, name, "ndim is %d: expected 0 to %d", (int)arr->ndim,
                        PF_NPY_MAX_NDIM);
  }
  size_t count = 0;
  size_t nbytes = 0;
  if (pf__npy_array_size(arr->shape, arr->ndim, arr->dtype.bits / 8u, &count, &nbytes) != 0) {
    char shape[PF_NPY_MAX_NDIM * 22 + 4];
    pf__npy_format_shape(shape, sizeof shape, arr->shape, arr->ndim);
    return pf__npy_fail(err, err_size, name, "shape %s is negative or too large", shape);
  }
  if (arr->nbytes != nbytes) {
    return pf__npy_fail(err, err_size, name, "nbytes is %zu, but the shape and dtype need %zu",
                        arr->nbytes, nbytes);
  }
  if (arr->data == NULL && nbytes > 0) {
    return pf__npy_fail(err, err_size, name, "data is NULL");
  }
  if (arr->fortran_order) {
    return pf__npy_fail(err, err_size, name, "fortran_order is set: the data must be in C order");
  }
  return 0;
}

/* Writes NumPy's own header for a C-order array into buf: magic, version 1.0, length, the dict
 * with its keys sorted, spare spaces for growth, padding to NPY_ALIGN and a newline. Returns
 * its length, or 0 if buf is too small. (With at most 32 dimensions the header stays under a
 * kilobyte, far below version 1.0's 65535-byte limit, so version 2.0 is never needed.) */
static size_t build_header(char* buf, size_t size, const char* descr, const int64_t* shape,
                           int32_t ndim) {
  char shape_repr[PF_NPY_MAX_NDIM * 22 + 4];
  pf__npy_format_shape(shape_repr, sizeof shape_repr, shape, ndim);
  const size_t prefix = NPY_MAGIC_LEN + 4;
  int n = snprintf(buf + prefix, size > prefix ? size - prefix : 0,
                   "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape_repr);
  if (n < 0 || size <= prefix || (size_t)n >= size - prefix) {
    return 0;
  }
  size_t dict_len = (size_t)n;
  if (ndim > 0) {
    char first[24];
    int digits = snprintf(first, sizeof first, "%" PRId64, shape[0]);
    dict_len += NPY_GROWTH_DIGITS > digits ? (size_t)(NPY_GROWTH_DIGITS - digits) : 0;
  }
  size_t text_len = dict_len + 1; /* the newline */
  /* NumPy's rule, which pads a whole NPY_ALIGN when already aligned. */
  size_t pad = NPY_ALIGN - (prefix + text_len) % NPY_ALIGN;
  size_t total = prefix + text_len + pad;
  if (total > size || text_len + pad > 65535) {
    return 0;
  }
  memset(buf + prefix + (size_t)n, ' ', total - prefix - (size_t)n);
  buf[total - 1] = '\n';
  memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (char)((text_len + pad) & 0xff);
  buf[9] = (char)((text_len + pad) >> 8);
  return total;
}

int pf_npy_write_file(const char* path, const pf_npy_array_t* arr, char* err, size_t err_size) {
  if (path == NULL) {
    return pf__npy_fail(err, err_size, "pf_npy_write_file", "path is NULL");
  }
  if (arr == NULL) {
    return pf__npy_fail(err, err_size, path, "array is NULL");
  }
  char descr[8];
  if (check_array(arr, descr, sizeof descr, path, err, err_size) != 0) {
    return -1;
  }
  char header[2048];
  size_t header_len = build_header(header, sizeof header, descr, arr->shape, arr->ndim);
  if (header_len == 0) {
    return pf__npy_fail(err, err_size, path,
                        "header does not fit"); /* unreachable: see build_header */
  }
  FILE* fp = fopen(path, "wb");
  if (fp == NULL) {
    return pf__npy_fail(err, err_size, path, "cannot open for writing: %s", strerror(errno));
  }
  int ok = fwrite(header, 1, header_len, fp) == header_len &&
           (arr->nbytes == 0 || fwrite(arr->data, 1, arr->nbytes, fp) == arr->nbytes);
  int saved_errno = errno;
  if (fclose(fp) != 0 && ok) {
    ok = 0;
    saved_errno = errno;
  }
  if (!ok) {
    remove(path);
    return pf__npy_fail(err, err_size, path, "write error: %s", strerror(saved_errno));
  }
  return 0;
}
