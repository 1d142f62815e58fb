/* npy_interop.c: the C side of the .npy interoperability test: reads and prints the files NumPy
 * wrote, and writes files for NumPy to load.
 *
 * How the pieces fit (CTest runs the three steps in order, see tests/CMakeLists.npy.txt):
 *   1. python tests/npy_numpy_check.py DIR     NumPy writes DIR/np_*.npy (every supported
 *                                              dtype, C and Fortran order, little- and
 *                                              big-endian, scalar, empty, versions 2.0 and 3.0)
 *                                              and DIR/repr_NNN.npy with repr() in .txt files.
 *   2. npy_interop read DIR                    this program checks the values of every np_*.npy
 *                                              and that pf_npy_format prints every repr_NNN.npy
 *                                              exactly as NumPy did;
 *      npy_interop write DIR                   then writes DIR/ours_*.npy.
 *   3. python tests/npy_numpy_check.py DIR --verify
 *                                              NumPy loads every ours_*.npy and checks dtype,
 *                                              shape, values and bytes.
 * The values are a formula of each element's C-order index, in value_of here and in values()
 * in the script: the two must stay in step. Exits 1 on any failure. */
#include "packfn/npy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_SIZE 512

static const char* const k_codes[] = {"b1", "i1", "i2", "i4", "i8", "u1", "u2",
                                      "u4", "u8", "f2", "f4", "f8", "c8", "c16"};
static const int64_t k_shape[3] = {2, 3, 4};
static int g_passed;
static int g_failed;

static DLDataType dtype_of(const char* code) {
  DLDataType dt;
  int size = atoi(code + 1);
  dt.code = code[0] == 'b'   ? 6
            : code[0] == 'i' ? kDLInt
            : code[0] == 'u' ? kDLUInt
            : code[0] == 'f' ? kDLFloat
                             : kDLComplex;
  dt.bits = (uint8_t)(size * 8);
  dt.lanes = 1;
  return dt;
}

/* An exactly representable float as IEEE half bits (enough for the test values). */
static uint16_t half_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
  if ((b & 0x7fffffff) == 0) {
    return sign;
  }
  int exp = (int)((b >> 23) & 0xff) - 127 + 15;
  return (uint16_t)(sign | (uint16_t)(exp << 10) | (uint16_t)((b >> 13) & 0x3ff));
}

/* Element i of the test array of type `code`, in host (little-endian) bytes at out. Keep in
 * step with values() in npy_numpy_check.py. */
static void value_of(const char* code, int64_t i, unsigned char* out) {
  int size = atoi(code + 1);
  char kind = code[0];
  if (kind == 'b') {
    out[0] = i % 3 == 0;
  } else if (kind == 'i' || kind == 'u') {
    int64_t v = (i * 37) % 251 - (kind == 'i' ? 125 : 0);
    uint64_t scale = 0;
    for (int k = 0; k < size; k++) {
      scale = scale << 8 | 1;
    }
    uint64_t u = (uint64_t)v * scale; /* two's complement wraps to the right bits */
    for (int k = 0; k < size; k++) {
      out[k] = (unsigned char)(u >> (8 * k));
    }
  } else if (strcmp(code, "f2") == 0) {
    uint16_t h = half_bits((float)(i - 10) * 0.25f);
    memcpy(out, &h, 2);
  } else if (strcmp(code, "f4") == 0 || strcmp(code, "c8") == 0) {
    float f[2] = {(float)(i - 10) / 3.0f, -((float)i * 0.5f)};
    memcpy(out, f, (size_t)size);
  } else {
    double d[2] = {(double)(i - 10) / 3.0, (double)i * 1.5};
    memcpy(out, d, (size_t)size);
  }
}

static size_t fill_expected(const char* code, int64_t count, unsigned char* buf) {
  size_t itemsize = (size_t)atoi(code + 1);
  for (int64_t i = 0; i < count; i++) {
    value_of(code, i, buf + (size_t)i * itemsize);
  }
  return (size_t)count * itemsize;
}

static void report(int ok, const char* name, const char* why) {
  if (ok) {
    g_passed++;
  } else {
    g_failed++;
    printf("FAIL %s: %s\n", name, why);
  }
}

static void check_file(const char* dir, const char* file, const char* code, int32_t ndim,
                       const int64_t* shape) {
  char path[1024];
  char err[ERR_SIZE];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  pf_npy_array_t arr;
  if (pf_npy_read_file(path, &arr, err, sizeof err) != 0) {
    report(0, file, err);
    return;
  }
  DLDataType dt = dtype_of(code);
  int64_t count = 1;
  for (int32_t k = 0; k < ndim; k++) {
    count *= shape[k];
  }
  unsigned char* expected = malloc((size_t)count * 16 + 1);
  size_t nbytes = fill_expected(code, count, expected);
  char why[256] = "";
  if (arr.dtype.code != dt.code || arr.dtype.bits != dt.bits || arr.dtype.lanes != 1) {
    snprintf(why, sizeof why, "dtype code %d bits %d, expected %d and %d", arr.dtype.code,
             arr.dtype.bits, dt.code, dt.bits);
  } else if (arr.ndim != ndim ||
             (ndim > 0 && memcmp(arr.shape, shape, (size_t)ndim * sizeof *shape) != 0)) {
    snprintf(why, sizeof why, "ndim %d or shape differs", (int)arr.ndim);
  } else if (arr.fortran_order != 0) {
    snprintf(why, sizeof why, "fortran_order is %d after reading", arr.fortran_order);
  } else if (arr.nbytes != nbytes || memcmp(arr.data, expected, nbytes) != 0) {
    size_t at = 0;
    while (at < nbytes && at < arr.nbytes && ((unsigned char*)arr.data)[at] == expected[at]) {
      at++;
    }
    snprintf(why, sizeof why, "data differs from byte %zu (element %zu)", at,
             at / (size_t)atoi(code + 1));
  }
  report(why[0] == '\0', file, why);
  free(expected);
  pf_npy_array_free(&arr);
}

/* Reads a whole text file; NULL if it does not exist. */
static char* slurp(FILE* fp, size_t* len) {
  size_t cap = 4096;
  size_t n = 0;
  char* buf = malloc(cap);
  size_t got;
  while (buf != NULL && (got = fread(buf + n, 1, cap - n - 1, fp)) > 0) {
    n += got;
    if (cap - n - 1 == 0) {
      char* bigger = realloc(buf, cap * 2);
      if (bigger == NULL) {
        free(buf);
        return NULL;
      }
      buf = bigger;
      cap *= 2;
    }
  }
  if (buf != NULL) {
    buf[n] = '\0';
  }
  *len = n;
  return buf;
}

/* Checks that pf_npy_format prints repr_NNN.npy as NumPy printed it into repr_NNN.txt. */
static int check_repr(const char* dir, int k) {
  char path[1024];
  char name[32];
  char err[ERR_SIZE];
  snprintf(name, sizeof name, "repr_%03d", k);
  snprintf(path, sizeof path, "%s/%s.txt", dir, name);
  FILE* txt = fopen(path, "rb");
  if (txt == NULL) {
    return 0;
  }
  size_t want_len = 0;
  char* want = slurp(txt, &want_len);
  fclose(txt);
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  pf_npy_array_t arr;
  if (pf_npy_read_file(path, &arr, err, sizeof err) != 0) {
    report(0, name, err);
    free(want);
    return 1;
  }
  FILE* out = tmpfile();
  size_t got_len = 0;
  char* got = NULL;
  if (out != NULL && pf_npy_format(&arr, out) == 0) {
    rewind(out);
    got = slurp(out, &got_len);
  }
  if (out != NULL) {
    fclose(out);
  }
  int ok = got != NULL && want != NULL && got_len == want_len && memcmp(got, want, got_len) == 0;
  if (!ok) {
    printf("FAIL %s: printed\n%s\nNumPy printed\n%s\n", name, got ? got : "(nothing)",
           want ? want : "(nothing)");
    g_failed++;
  } else {
    g_passed++;
  }
  free(got);
  free(want);
  pf_npy_array_free(&arr);
  return 1;
}

static void read_numpy_files(const char* dir) {
  static const char* const orders[] = {"C", "F"};
  static const char* const endians[] = {"le", "be"};
  char file[64];
  for (size_t c = 0; c < sizeof k_codes / sizeof k_codes[0]; c++) {
    for (int o = 0; o < 2; o++) {
      for (int e = 0; e < 2; e++) {
        if (e == 1 && atoi(k_codes[c] + 1) == 1) {
          continue; /* one-byte types have no byte order */
        }
        snprintf(file, sizeof file, "np_%s_%s_%s.npy", k_codes[c], orders[o], endians[e]);
        check_file(dir, file, k_codes[c], 3, k_shape);
      }
    }
  }
  const int64_t empty[2] = {0, 3};
  const int64_t vec[1] = {5};
  check_file(dir, "np_scalar_f8.npy", "f8", 0, NULL);
  check_file(dir, "np_empty_i4.npy", "i4", 2, empty);
  check_file(dir, "np_vec_u2.npy", "u2", 1, vec);
  check_file(dir, "np_v2_f4.npy", "f4", 3, k_shape);
  check_file(dir, "np_v3_c8.npy", "c8", 3, k_shape);
  int k = 0;
  while (check_repr(dir, k)) {
    k++;
  }
  printf("printed %d arrays as NumPy does\n", k);
}

static void write_file(const char* dir, const char* file, const char* code, int32_t ndim,
                       const int64_t* shape) {
  char path[1024];
  char err[ERR_SIZE];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  pf_npy_array_t arr;
  memset(&arr, 0, sizeof arr);
  arr.dtype = dtype_of(code);
  arr.ndim = ndim;
  int64_t count = 1;
  for (int32_t k = 0; k < ndim; k++) {
    arr.shape[k] = shape[k];
    count *= shape[k];
  }
  arr.data = malloc((size_t)count * 16 + 1);
  arr.nbytes = fill_expected(code, count, arr.data);
  int rc = pf_npy_write_file(path, &arr, err, sizeof err);
  report(rc == 0, file, err);
  pf_npy_array_free(&arr);
}

static void write_our_files(const char* dir) {
  char file[64];
  for (size_t c = 0; c < sizeof k_codes / sizeof k_codes[0]; c++) {
    snprintf(file, sizeof file, "ours_%s.npy", k_codes[c]);
    write_file(dir, file, k_codes[c], 3, k_shape);
  }
  const int64_t empty[2] = {0, 3};
  const int64_t vec[1] = {5};
  write_file(dir, "ours_scalar_f8.npy", "f8", 0, NULL);
  write_file(dir, "ours_empty_i4.npy", "i4", 2, empty);
  write_file(dir, "ours_vec_u2.npy", "u2", 1, vec);
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "read") != 0 && strcmp(argv[1], "write") != 0)) {
    fprintf(stderr, "usage: %s read|write DIR\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "read") == 0) {
    read_numpy_files(argv[2]);
  } else {
    write_our_files(argv[2]);
  }
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
