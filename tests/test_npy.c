/* test_npy.c: unit tests of src/npy/: round trips for every dtype, hand-made Fortran-order,
 * big-endian and malformed files, and the NumPy-style printer against NumPy's own output. */
#define _DEFAULT_SOURCE /* mkdtemp, rmdir, mkfifo, setrlimit, opendir, symlink, fork */

#include "packfn/npy.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define ERR_SIZE 256
#define BUF_SIZE 4096

/* ---- helpers ------------------------------------------------------------------------------ */

static char g_dir[64];

static void make_temp_dir(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/test_npy_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static void remove_temp_dir(void) {
  rmdir(g_dir);
}

static void temp_path(char* buf, size_t size, const char* name) {
  snprintf(buf, size, "%s/%s", g_dir, name);
}

static DLDataType dtype(uint8_t code, uint8_t bits) {
  DLDataType dt = {code, bits, 1};
  return dt;
}

/* Builds a .npy image into buf: magic, version major.0, the header length (2 bytes for 1.0, 4
 * otherwise), `dict` padded with spaces to a multiple of 64 and ended with a newline, then
 * data_len bytes of data. Returns the length. */
static size_t make_npy(unsigned char* buf, int major, const char* dict, const void* data,
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

/* Reads `dict` followed by data_len bytes of data (0x01, 0x02, ...) and expects failure with a
 * message that starts with "<buffer>: " and contains `needle`. */
static void expect_bad_header(const char* dict, size_t data_len, const char* needle) {
  unsigned char buf[BUF_SIZE];
  unsigned char data[512];
  for (size_t i = 0; i < sizeof data; i++) {
    data[i] = (unsigned char)(i + 1);
  }
  ck_assert_uint_le(data_len, sizeof data);
  size_t len = make_npy(buf, 1, dict, data, data_len);
  pf_npy_array_t arr;
  char err[ERR_SIZE] = "";
  ck_assert_int_eq(pf_npy_read_buffer(buf, len, &arr, err, sizeof err), -1);
  ck_assert_msg(strncmp(err, "<buffer>: ", 10) == 0, "message '%s' does not name the source", err);
  ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
  ck_assert_ptr_null(arr.data);
  ck_assert_int_eq(arr.ndim, 0);
}

/* Reads a well-formed image and checks its dtype and shape. */
static void read_ok(const unsigned char* buf, size_t len, pf_npy_array_t* arr, DLDataType dt,
                    int32_t ndim, const int64_t* shape) {
  char err[ERR_SIZE] = "";
  ck_assert_msg(pf_npy_read_buffer(buf, len, arr, err, sizeof err) == 0, "read failed: %s", err);
  ck_assert_int_eq(arr->dtype.code, dt.code);
  ck_assert_int_eq(arr->dtype.bits, dt.bits);
  ck_assert_int_eq(arr->dtype.lanes, 1);
  ck_assert_int_eq(arr->ndim, ndim);
  for (int32_t k = 0; k < ndim; k++) {
    ck_assert_int_eq(arr->shape[k], shape[k]);
  }
  ck_assert_int_eq(arr->fortran_order, 0);
  ck_assert_ptr_nonnull(arr->data);
}

/* Prints through pf_npy_format_raw into a string (caller frees). */
static char* format_raw(DLDataType dt, int32_t ndim, const int64_t* shape, const int64_t* strides,
                        const void* data) {
  FILE* fp = tmpfile();
  ck_assert_ptr_nonnull(fp);
  ck_assert_int_eq(pf_npy_format_raw(dt, ndim, shape, strides, data, fp), 0);
  long len = ftell(fp);
  ck_assert_int_ge(len, 0);
  char* s = malloc((size_t)len + 1);
  rewind(fp);
  ck_assert_uint_eq(fread(s, 1, (size_t)len, fp), (size_t)len);
  s[len] = '\0';
  fclose(fp);
  return s;
}

static void expect_format(DLDataType dt, int32_t ndim, const int64_t* shape, const int64_t* strides,
                          const void* data, const char* expected) {
  char* got = format_raw(dt, ndim, shape, strides, data);
  ck_assert_str_eq(got, expected);
  free(got);
}

/* ---- round trips -------------------------------------------------------------------------- */

static const struct {
  uint8_t code;
  uint8_t bits;
  const char* descr;
} k_types[] = {
    {6, 8, "|b1"},           {kDLInt, 8, "|i1"},        {kDLInt, 16, "<i2"},
    {kDLInt, 32, "<i4"},     {kDLInt, 64, "<i8"},       {kDLUInt, 8, "|u1"},
    {kDLUInt, 16, "<u2"},    {kDLUInt, 32, "<u4"},      {kDLUInt, 64, "<u8"},
    {kDLFloat, 16, "<f2"},   {kDLFloat, 32, "<f4"},     {kDLFloat, 64, "<f8"},
    {kDLComplex, 64, "<c8"}, {kDLComplex, 128, "<c16"},
};
#define NUM_TYPES ((int)(sizeof k_types / sizeof k_types[0]))

START_TEST(test_descr_of_every_dtype) {
  char buf[8];
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(k_types[_i].code, k_types[_i].bits), buf, sizeof buf),
                   0);
  ck_assert_str_eq(buf, k_types[_i].descr);
}
END_TEST

START_TEST(test_descr_refuses_what_npy_lacks) {
  char buf[8] = "x";
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLBfloat, 16), buf, sizeof buf), -1);
  ck_assert_str_eq(buf, "");
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLFloat, 8), buf, sizeof buf), -1);
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLInt, 4), buf, sizeof buf), -1);
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLComplex, 32), buf, sizeof buf), -1);
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(6, 1), buf, sizeof buf), -1);
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLOpaqueHandle, 64), buf, sizeof buf), -1);
  DLDataType vec = {kDLFloat, 32, 4};
  ck_assert_int_eq(pf_npy_dtype_descr(vec, buf, sizeof buf), -1);
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLComplex, 128), buf, 4), -1); /* "<c16" needs 5 */
  ck_assert_str_eq(buf, "");
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLFloat, 32), NULL, 0), -1);
}
END_TEST

static void round_trip(DLDataType dt, int32_t ndim, const int64_t* shape, const char* name) {
  char path[128];
  char err[ERR_SIZE] = "";
  temp_path(path, sizeof path, name);
  pf_npy_array_t arr;
  memset(&arr, 0, sizeof arr);
  arr.dtype = dt;
  arr.ndim = ndim;
  size_t count = 1;
  for (int32_t k = 0; k < ndim; k++) {
    arr.shape[k] = shape[k];
    count *= (size_t)shape[k];
  }
  arr.nbytes = count * dt.bits / 8;
  unsigned char* data = malloc(arr.nbytes + 1);
  for (size_t i = 0; i < arr.nbytes; i++) {
    data[i] = dt.code == 6 ? (unsigned char)(i % 3 == 0) : (unsigned char)(i * 7 + 3);
  }
  arr.data = data;
  ck_assert_msg(pf_npy_write_file(path, &arr, err, sizeof err) == 0, "write failed: %s", err);

  pf_npy_array_t back;
  ck_assert_msg(pf_npy_read_file(path, &back, err, sizeof err) == 0, "read failed: %s", err);
  ck_assert_int_eq(back.dtype.code, dt.code);
  ck_assert_int_eq(back.dtype.bits, dt.bits);
  ck_assert_int_eq(back.dtype.lanes, 1);
  ck_assert_int_eq(back.ndim, ndim);
  for (int32_t k = 0; k < ndim; k++) {
    ck_assert_int_eq(back.shape[k], shape[k]);
  }
  ck_assert_int_eq(back.fortran_order, 0);
  ck_assert_uint_eq(back.nbytes, arr.nbytes);
  ck_assert_ptr_nonnull(back.data);
  if (arr.nbytes > 0) {
    ck_assert_mem_eq(back.data, data, arr.nbytes);
  }
  pf_npy_array_free(&back);
  pf_npy_array_free(&arr);
  remove(path);
}

START_TEST(test_round_trip_every_dtype) {
  const int64_t shape[3] = {2, 3, 5};
  round_trip(dtype(k_types[_i].code, k_types[_i].bits), 3, shape, "every.npy");
}
END_TEST

START_TEST(test_round_trip_scalar_and_empty) {
  const int64_t empty2[2] = {0, 3};
  const int64_t empty1[1] = {0};
  const int64_t vec[1] = {7};
  const int64_t big[2] = {300, 301};
  round_trip(dtype(kDLFloat, 64), 0, NULL, "scalar.npy");
  round_trip(dtype(kDLComplex, 64), 0, NULL, "scalar_c.npy");
  round_trip(dtype(kDLInt, 32), 2, empty2, "empty2.npy");
  round_trip(dtype(6, 8), 1, empty1, "empty1.npy");
  round_trip(dtype(kDLUInt, 16), 1, vec, "vec.npy");
  round_trip(dtype(kDLFloat, 32), 2, big, "big.npy");
}
END_TEST

START_TEST(test_round_trip_32_dimensions) {
  int64_t shape[PF_NPY_MAX_NDIM];
  for (int k = 0; k < PF_NPY_MAX_NDIM; k++) {
    shape[k] = k % 5 == 0 ? 2 : 1;
  }
  round_trip(dtype(kDLInt, 8), PF_NPY_MAX_NDIM, shape, "ndim32.npy");
}
END_TEST

/* The writer's header is NumPy's, byte for byte (checked against NumPy itself by the interop
 * test): sorted keys, 21 - len("2") spare spaces, padding to 64, a newline. */
START_TEST(test_write_header_like_numpy) {
  char path[128];
  char err[ERR_SIZE];
  temp_path(path, sizeof path, "header.npy");
  float data[6] = {1, 2, 3, 4, 5, 6};
  pf_npy_array_t arr = {dtype(kDLFloat, 32), 2, {2, 3}, 0, data, sizeof data};
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), 0);
  unsigned char buf[256];
  FILE* fp = fopen(path, "rb");
  size_t len = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  remove(path);
  const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ck_assert_uint_eq(len, 128 + sizeof data);
  ck_assert_mem_eq(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
  ck_assert_mem_eq(buf + 10, dict, sizeof dict - 1);
  for (size_t i = 10 + sizeof dict - 1; i < 127; i++) {
    ck_assert_int_eq(buf[i], ' ');
  }
  ck_assert_int_eq(buf[127], '\n');
  ck_assert_mem_eq(buf + 128, data, sizeof data);
}
END_TEST

START_TEST(test_write_scalar_header) {
  char path[128];
  char err[ERR_SIZE];
  temp_path(path, sizeof path, "scalar_header.npy");
  double v = 2.5;
  pf_npy_array_t arr = {dtype(kDLFloat, 64), 0, {0}, 0, &v, sizeof v};
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), 0);
  unsigned char buf[256];
  FILE* fp = fopen(path, "rb");
  size_t len = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  remove(path);
  const char dict[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (), }";
  ck_assert_uint_eq(len, 128 + sizeof v); /* 67 bytes of header round up to 128 */
  ck_assert_mem_eq(buf + 10, dict, sizeof dict - 1);
  ck_assert_int_eq(buf[127], '\n');
}
END_TEST

/* ---- reading what NumPy may write ---------------------------------------------------------- */

START_TEST(test_read_fortran_order) {
  /* [[1, 2, 3], [4, 5, 6]] stored column by column */
  const int32_t f_data[6] = {1, 4, 2, 5, 3, 6};
  const int32_t c_data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[2] = {2, 3};
  unsigned char buf[BUF_SIZE];
  size_t len = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                        f_data, sizeof f_data);
  pf_npy_array_t arr;
  read_ok(buf, len, &arr, dtype(kDLInt, 32), 2, shape);
  ck_assert_mem_eq(arr.data, c_data, sizeof c_data);
  pf_npy_array_free(&arr);
}
END_TEST

START_TEST(test_read_fortran_order_3d_big_endian) {
  /* shape (2, 3, 4), value = 100 * i + 10 * j + k, Fortran order, big-endian int16 */
  unsigned char data[48];
  int16_t expected[24];
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < 3; j++) {
      for (int k = 0; k < 4; k++) {
        int v = 100 * i + 10 * j + k;
        int f = i + 2 * j + 6 * k;
        data[2 * f] = (unsigned char)(v >> 8);
        data[2 * f + 1] = (unsigned char)v;
        expected[12 * i + 4 * j + k] = (int16_t)v;
      }
    }
  }
  const int64_t shape[3] = {2, 3, 4};
  unsigned char buf[BUF_SIZE];
  size_t len = make_npy(buf, 1, "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3, 4), }",
                        data, sizeof data);
  pf_npy_array_t arr;
  read_ok(buf, len, &arr, dtype(kDLInt, 16), 3, shape);
  ck_assert_mem_eq(arr.data, expected, sizeof expected);
  pf_npy_array_free(&arr);
}
END_TEST

START_TEST(test_read_fortran_order_1d_and_scalar) {
  const uint8_t data[3] = {7, 8, 9};
  const int64_t shape[1] = {3};
  unsigned char buf[BUF_SIZE];
  pf_npy_array_t arr;
  size_t len = make_npy(buf, 1, "{'descr': '|u1', 'fortran_order': True, 'shape': (3,), }", data,
                        sizeof data);
  read_ok(buf, len, &arr, dtype(kDLUInt, 8), 1, shape);
  ck_assert_mem_eq(arr.data, data, sizeof data);
  pf_npy_array_free(&arr);
  len = make_npy(buf, 1, "{'descr': '|u1', 'fortran_order': True, 'shape': (), }", data, 1);
  read_ok(buf, len, &arr, dtype(kDLUInt, 8), 0, NULL);
  ck_assert_uint_eq(arr.nbytes, 1);
  pf_npy_array_free(&arr);
}
END_TEST

START_TEST(test_read_big_endian) {
  const unsigned char i4[8] = {0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xfe};
  const unsigned char f8[8] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0};    /* 1.5 */
  const unsigned char c8[8] = {0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0}; /* 1 - 2j */
  const unsigned char u2[4] = {0x12, 0x34, 0xab, 0xcd};
  const int64_t two[1] = {2};
  const int64_t one[1] = {1};
  unsigned char buf[BUF_SIZE];
  pf_npy_array_t arr;

  size_t len =
      make_npy(buf, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", i4, sizeof i4);
  read_ok(buf, len, &arr, dtype(kDLInt, 32), 1, two);
  ck_assert_int_eq(((int32_t*)arr.data)[0], 0x01020304);
  ck_assert_int_eq(((int32_t*)arr.data)[1], -2);
  pf_npy_array_free(&arr);

  len = make_npy(buf, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (), }", f8, sizeof f8);
  read_ok(buf, len, &arr, dtype(kDLFloat, 64), 0, NULL);
  ck_assert_double_eq(*(double*)arr.data, 1.5);
  pf_npy_array_free(&arr);

  /* complex: each part is swapped on its own */
  len =
      make_npy(buf, 1, "{'descr': '>c8', 'fortran_order': False, 'shape': (1,), }", c8, sizeof c8);
  read_ok(buf, len, &arr, dtype(kDLComplex, 64), 1, one);
  ck_assert_float_eq(((float*)arr.data)[0], 1.0f);
  ck_assert_float_eq(((float*)arr.data)[1], -2.0f);
  pf_npy_array_free(&arr);

  len =
      make_npy(buf, 1, "{'descr': '>u2', 'fortran_order': False, 'shape': (2,), }", u2, sizeof u2);
  read_ok(buf, len, &arr, dtype(kDLUInt, 16), 1, two);
  ck_assert_uint_eq(((uint16_t*)arr.data)[0], 0x1234);
  ck_assert_uint_eq(((uint16_t*)arr.data)[1], 0xabcd);
  pf_npy_array_free(&arr);
}
END_TEST

START_TEST(test_read_native_and_unordered_descr) {
  const float data[2] = {0.25f, -8.0f};
  const int64_t two[1] = {2};
  const char* const dicts[] = {
      "{'descr': '=f4', 'fortran_order': False, 'shape': (2,), }",
      "{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }",
      "{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }",
  };
  for (size_t d = 0; d < sizeof dicts / sizeof dicts[0]; d++) {
    unsigned char buf[BUF_SIZE];
    pf_npy_array_t arr;
    size_t len = make_npy(buf, 1, dicts[d], data, sizeof data);
    read_ok(buf, len, &arr, dtype(kDLFloat, 32), 1, two);
    ck_assert_mem_eq(arr.data, data, sizeof data);
    pf_npy_array_free(&arr);
  }
}
END_TEST

START_TEST(test_read_versions_2_and_3) {
  const int8_t data[3] = {-1, 0, 1};
  const int64_t shape[1] = {3};
  for (int major = 2; major <= 3; major++) {
    unsigned char buf[BUF_SIZE];
    pf_npy_array_t arr;
    size_t len = make_npy(buf, major, "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }",
                          data, sizeof data);
    read_ok(buf, len, &arr, dtype(kDLInt, 8), 1, shape);
    ck_assert_mem_eq(arr.data, data, sizeof data);
    pf_npy_array_free(&arr);
  }
}
END_TEST

START_TEST(test_read_header_spelling) {
  const uint8_t data[6] = {1, 0, 1, 1, 0, 0};
  const int64_t shape[2] = {2, 3};
  const char* const dicts[] = {
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '|b1'}",
      "{\"descr\": \"|b1\", \"fortran_order\": False, \"shape\": (2, 3)}",
      "  {\n\t'descr' :'|b1' ,'fortran_order':False,\n 'shape':( 2 ,3 , ) , }  \n\n",
      "{'descr': '|b1', 'fortran_order': False, 'shape': (2L, 3L), }",
  };
  for (size_t d = 0; d < sizeof dicts / sizeof dicts[0]; d++) {
    unsigned char buf[BUF_SIZE];
    pf_npy_array_t arr;
    size_t len = make_npy(buf, 1, dicts[d], data, sizeof data);
    read_ok(buf, len, &arr, dtype(6, 8), 2, shape);
    ck_assert_mem_eq(arr.data, data, sizeof data);
    pf_npy_array_free(&arr);
  }
}
END_TEST

START_TEST(test_read_file_names_path) {
  char path[128];
  char err[ERR_SIZE];
  temp_path(path, sizeof path, "missing.npy");
  pf_npy_array_t arr;
  ck_assert_int_eq(pf_npy_read_file(path, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, path));
  ck_assert_ptr_nonnull(strstr(err, "cannot open"));
  ck_assert_ptr_null(arr.data);

  /* a truncated file on disk: the message names the file and the sizes */
  temp_path(path, sizeof path, "short.npy");
  unsigned char buf[BUF_SIZE];
  unsigned char data[40] = {0};
  size_t len = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }", data,
                        sizeof data);
  FILE* fp = fopen(path, "wb");
  fwrite(buf, 1, len, fp);
  fclose(fp);
  ck_assert_int_eq(pf_npy_read_file(path, &arr, err, sizeof err), -1);
  char expected[ERR_SIZE];
  snprintf(expected, sizeof expected, "%s: file is truncated: expected 96 bytes of data, got 40",
           path);
  ck_assert_str_eq(err, expected);
  remove(path);

  ck_assert_int_eq(pf_npy_read_file(g_dir, &arr, err, sizeof err), -1); /* a directory */
  ck_assert_ptr_nonnull(strstr(err, g_dir));
}
END_TEST

START_TEST(test_read_null_arguments) {
  char err[ERR_SIZE];
  pf_npy_array_t arr;
  ck_assert_int_eq(pf_npy_read_file(NULL, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "path is NULL"));
  ck_assert_int_eq(pf_npy_read_file("x.npy", NULL, err, sizeof err), -1);
  ck_assert_int_eq(pf_npy_read_buffer(NULL, 10, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "buffer is NULL"));
  ck_assert_int_eq(pf_npy_read_buffer("x", 1, NULL, err, sizeof err), -1);
  ck_assert_int_eq(pf_npy_read_buffer(NULL, 0, &arr, NULL, 0), -1); /* no room for a message */
  char tiny[4];
  ck_assert_int_eq(pf_npy_read_buffer(NULL, 0, &arr, tiny, sizeof tiny), -1);
  ck_assert_uint_lt(strlen(tiny), sizeof tiny);
}
END_TEST

/* ---- malformed files ---------------------------------------------------------------------- */

START_TEST(test_bad_magic_and_preamble) {
  char err[ERR_SIZE];
  pf_npy_array_t arr;
  ck_assert_int_eq(pf_npy_read_buffer("", 0, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err, "<buffer>: file is empty: not a .npy file");
  ck_assert_int_eq(pf_npy_read_buffer("PK\x03\x04zipfile", 11, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err, "<buffer>: not a .npy file: bad magic string");
  ck_assert_int_eq(pf_npy_read_buffer("\x93NUM", 4, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "truncated"));
  ck_assert_int_eq(pf_npy_read_buffer("\x93NUMPY\x01\x00\x10", 9, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err, "<buffer>: file is truncated: expected 10 bytes of preamble, got 9");
  ck_assert_int_eq(pf_npy_read_buffer("\x93NUMPY\x02\x00\x10\x00\x00", 11, &arr, err, sizeof err),
                   -1);
  ck_assert_str_eq(err, "<buffer>: file is truncated: expected 12 bytes of preamble, got 11");
}
END_TEST

START_TEST(test_bad_version) {
  char err[ERR_SIZE];
  pf_npy_array_t arr;
  ck_assert_int_eq(pf_npy_read_buffer("\x93NUMPY\x04\x00\x10\x00", 10, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err,
                   "<buffer>: unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are known)");
  ck_assert_int_eq(pf_npy_read_buffer("\x93NUMPY\x01\x01\x10\x00", 10, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "version 1.1"));
  ck_assert_int_eq(pf_npy_read_buffer("\x93NUMPY\x00\x00\x10\x00", 10, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "version 0.0"));
}
END_TEST

START_TEST(test_bad_header_length) {
  char err[ERR_SIZE];
  pf_npy_array_t arr;
  /* version 2.0 with a 4 GB header */
  ck_assert_int_eq(
      pf_npy_read_buffer("\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err, "<buffer>: header length 4294967295 is over the limit of 100000 bytes");
  /* the header is shorter than its length says */
  unsigned char buf[BUF_SIZE];
  size_t len =
      make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }", NULL, 0);
  ck_assert_int_eq(pf_npy_read_buffer(buf, len - 20, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err, "<buffer>: file is truncated: expected 118 bytes of header, got 98");
}
END_TEST

START_TEST(test_truncated_and_oversized_data) {
  unsigned char buf[BUF_SIZE];
  unsigned char data[100] = {0};
  char err[ERR_SIZE];
  pf_npy_array_t arr;
  const char* dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }";
  size_t len = make_npy(buf, 1, dict, data, 40);
  ck_assert_int_eq(pf_npy_read_buffer(buf, len, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err, "<buffer>: file is truncated: expected 96 bytes of data, got 40");
  len = make_npy(buf, 1, dict, data, 0);
  ck_assert_int_eq(pf_npy_read_buffer(buf, len, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err, "<buffer>: file is truncated: expected 96 bytes of data, got 0");
  len = make_npy(buf, 1, dict, data, 100);
  ck_assert_int_eq(pf_npy_read_buffer(buf, len, &arr, err, sizeof err), -1);
  ck_assert_str_eq(err, "<buffer>: expected 96 bytes of data, got 100 (one array per file)");
  ck_assert_ptr_null(arr.data);
}
END_TEST

START_TEST(test_header_not_a_dict) {
  expect_bad_header("['descr', '<f4']", 0, "header is not a dict");
  expect_bad_header("", 0, "header is not a dict");
  expect_bad_header("{descr: '<f4'}", 0, "expected a quoted key");
  expect_bad_header("{'descr' '<f4'}", 0, "expected ':' after 'descr'");
  expect_bad_header("{'descr': '<f4' 'shape': ()}", 0,
                    "expected ',' or '}' after the value of 'descr'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': ()", 4, "expected ','");
  expect_bad_header("{'descr': '<f4", 0, "'descr' is not a string: got ''<f4'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x", 4,
                    "header has text after the dict: 'x'");
}
END_TEST

START_TEST(test_header_keys) {
  expect_bad_header("{'descr': '<f4', 'fortran_order': False}", 0, "header has no 'shape' key");
  expect_bad_header("{'fortran_order': False, 'shape': ()}", 0, "header has no 'descr' key");
  expect_bad_header("{'descr': '<f4', 'shape': ()}", 0, "header has no 'fortran_order' key");
  expect_bad_header("{}", 0, "header has no 'descr' key");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", 4,
                    "header has an unexpected key 'extra'");
  expect_bad_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4,
                    "header has the key 'descr' twice");
}
END_TEST

START_TEST(test_header_values) {
  expect_bad_header("{'descr': 4, 'fortran_order': False, 'shape': ()}", 0,
                    "'descr' is not a string: got '4'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", 0,
                    "'fortran_order' is not True or False: got '0'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': Falsey, 'shape': ()}", 0,
                    "'fortran_order' is not True or False: got 'Falsey'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", 0,
                    "'shape' is not a tuple of integers: got '[2'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 0,
                    "'shape' (3) is not a tuple: a 1-d shape is written (3,)");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3.5)}", 0,
                    "'shape' is not a tuple of integers: got '.5)'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", 0,
                    "'shape' is not a tuple of integers: got ','");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", 0,
                    "shape has a negative dimension");
}
END_TEST

START_TEST(test_header_unusual_spellings) {
  unsigned char buf[BUF_SIZE];
  const float data[2] = {1.0f, 2.0f};
  pf_npy_array_t arr;
  /* every whitespace Python allows, an escaped character, Python 2 long extents */
  size_t len =
      make_npy(buf, 1, "{'descr':\t'<\\f4',\f'fortran_order':\vFalse,\r'shape': (2L, 1l), }", data,
               sizeof data);
  const int64_t shape[2] = {2, 1};
  read_ok(buf, len, &arr, dtype(kDLFloat, 32), 2, shape);
  ck_assert(((float*)arr.data)[1] == 2.0f);
  pf_npy_array_free(&arr);
  /* a string longer than the token buffer is cut with "..." in the message */
  expect_bad_header(
      "{'descr': '<fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
      "ffffffffffffffffffffffffff4', 'fortran_order': False, 'shape': ()}",
      0, "...");
  /* a byte that cannot be shown is shown as '?' */
  expect_bad_header("{'descr': '<f4', 'fortran_order': \x01, 'shape': ()}", 0,
                    "'fortran_order' is not True or False: got '?'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': True_, 'shape': ()}", 0,
                    "'fortran_order' is not True or False: got 'True_'");
  /* a quote missing: the string runs to the next quote */
  expect_bad_header("{'descr': '<f4, 'fortran_order': False, 'shape': ()}", 0,
                    "unsupported dtype '<f4, ' (no DLPack equivalent)");
}
END_TEST

START_TEST(test_unsupported_dtypes) {
  expect_bad_header("{'descr': '<U10', 'fortran_order': False, 'shape': (2,)}", 80,
                    "<buffer>: unsupported dtype '<U10' (unicode strings have no DLPack");
  expect_bad_header("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}", 16,
                    "unsupported dtype '|O' (object arrays");
  expect_bad_header("{'descr': '|S5', 'fortran_order': False, 'shape': (2,)}", 10,
                    "unsupported dtype '|S5' (byte strings");
  expect_bad_header("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2,)}", 16,
                    "unsupported dtype '<M8[ns]' (datetime");
  expect_bad_header("{'descr': '<m8[s]', 'fortran_order': False, 'shape': (2,)}", 16,
                    "unsupported dtype '<m8[s]' (datetime");
  expect_bad_header("{'descr': '|V8', 'fortran_order': False, 'shape': (2,)}", 16,
                    "unsupported dtype '|V8' (void and structured");
  expect_bad_header("{'descr': [('x', '<f4'), ('y', '<i4')], 'fortran_order': False, "
                    "'shape': (2,)}",
                    16, "unsupported dtype: structured (record) arrays");
  expect_bad_header("{'descr': '<f16', 'fortran_order': False, 'shape': (2,)}", 32,
                    "unsupported dtype '<f16' (no DLPack equivalent)");
  expect_bad_header("{'descr': '<c32', 'fortran_order': False, 'shape': (2,)}", 64,
                    "unsupported dtype '<c32'");
  expect_bad_header("{'descr': '<i3', 'fortran_order': False, 'shape': (2,)}", 6,
                    "unsupported dtype '<i3'");
  expect_bad_header("{'descr': '|b2', 'fortran_order': False, 'shape': (2,)}", 4,
                    "unsupported dtype '|b2'");
  expect_bad_header("{'descr': 'float32', 'fortran_order': False, 'shape': (2,)}", 8,
                    "unsupported dtype 'float32'");
  expect_bad_header("{'descr': '', 'fortran_order': False, 'shape': (2,)}", 8,
                    "unsupported dtype ''");
}
END_TEST

START_TEST(test_overflowing_shapes) {
  expect_bad_header("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}", 0,
                    "shape dimension 0 is too large");
  expect_bad_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4, 9223372036854775808)}",
                    0, "shape dimension 1 is too large");
  /* each dimension fits, their product does not */
  expect_bad_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, "
                    "1099511627776)}",
                    0, "shape (1099511627776, 1099511627776) is too large");
  /* the element count fits in int64, times 8 bytes it does not */
  expect_bad_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,)}", 0,
                    "is too large: its size in bytes overflows");
  /* a zero dimension makes the array empty, but the rest must still fit */
  expect_bad_header("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4294967296, "
                    "4294967296)}",
                    0, "is too large");
  /* more dimensions than we hold */
  char dict[512];
  size_t n = (size_t)snprintf(dict, sizeof dict,
                              "{'descr': '<f8', 'fortran_order': False, "
                              "'shape': (");
  for (int k = 0; k < PF_NPY_MAX_NDIM + 1; k++) {
    n += (size_t)snprintf(dict + n, sizeof dict - n, "1, ");
  }
  snprintf(dict + n, sizeof dict - n, ")}");
  expect_bad_header(dict, 8, "shape has more than 32 dimensions");
}
END_TEST

START_TEST(test_largest_shape_is_checked_against_data) {
  /* 2**60 one-byte elements: the size fits, so the file is only too short */
  expect_bad_header("{'descr': '|u1', 'fortran_order': False, 'shape': (1152921504606846976,)}", 0,
                    "file is truncated: expected 1152921504606846976 bytes of data, got 0");
}
END_TEST

/* ---- writing failures --------------------------------------------------------------------- */

START_TEST(test_write_refuses_bad_arrays) {
  char path[128];
  char err[ERR_SIZE];
  temp_path(path, sizeof path, "bad.npy");
  uint16_t data[6] = {0};
  pf_npy_array_t arr = {dtype(kDLBfloat, 16), 1, {6}, 0, data, sizeof data};
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "dtype (code 4, bits 16, lanes 1) has no .npy equivalent"));

  arr.dtype = dtype(kDLUInt, 16);
  arr.nbytes = 10;
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "nbytes is 10, but the shape and dtype need 12"));

  arr.nbytes = sizeof data;
  arr.fortran_order = 1;
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "fortran_order is set"));

  arr.fortran_order = 0;
  arr.data = NULL;
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "data is NULL"));

  arr.data = data;
  arr.ndim = 33;
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "ndim is 33"));

  arr.ndim = 2;
  arr.shape[1] = -1;
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "shape (6, -1) is negative or too large"));

  ck_assert_int_eq(pf_npy_write_file(NULL, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "path is NULL"));
  ck_assert_int_eq(pf_npy_write_file(path, NULL, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "array is NULL"));

  FILE* fp = fopen(path, "rb");
  ck_assert_ptr_null(fp); /* nothing was written */
}
END_TEST

START_TEST(test_write_unwritable_path) {
  char path[128];
  char err[ERR_SIZE];
  temp_path(path, sizeof path, "no/such/dir.npy");
  uint8_t data[2] = {1, 2};
  pf_npy_array_t arr = {dtype(kDLUInt, 8), 1, {2}, 0, data, sizeof data};
  ck_assert_int_eq(pf_npy_write_file(path, &arr, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, path));
  ck_assert_ptr_nonnull(strstr(err, "cannot create a file in"));
}
END_TEST

START_TEST(test_free_is_idempotent) {
  pf_npy_array_free(NULL);
  pf_npy_array_t arr;
  memset(&arr, 0, sizeof arr);
  pf_npy_array_free(&arr);
  arr.data = malloc(4);
  arr.nbytes = 4;
  pf_npy_array_free(&arr);
  ck_assert_ptr_null(arr.data);
  ck_assert_uint_eq(arr.nbytes, 0);
  pf_npy_array_free(&arr);
}
END_TEST

/* ---- printing (expected strings are NumPy 2.4's repr) ---------------------------------------- */

START_TEST(test_format_float32_matrix) {
  const float data[6] = {1, 2, 3, 4, 5, 6};
  pf_npy_array_t arr = {dtype(kDLFloat, 32), 2, {2, 3}, 0, (void*)data, sizeof data};
  FILE* fp = tmpfile();
  ck_assert_int_eq(pf_npy_format(&arr, fp), 0);
  char buf[256] = "";
  rewind(fp);
  ck_assert_uint_gt(fread(buf, 1, sizeof buf - 1, fp), 0);
  fclose(fp);
  ck_assert_str_eq(buf, "array([[1., 2., 3.],\n       [4., 5., 6.]], dtype=float32)");
}
END_TEST

START_TEST(test_format_floats) {
  const int64_t three[1] = {3};
  const int64_t four[1] = {4};
  const int64_t two[1] = {2};
  const double pad[3] = {1.5, 2.25, -3.0};
  expect_format(dtype(kDLFloat, 64), 1, three, NULL, pad, "array([ 1.5 ,  2.25, -3.  ])");
  const double sci[3] = {1e-5, 1.0, 1e5};
  expect_format(dtype(kDLFloat, 64), 1, three, NULL, sci, "array([1.e-05, 1.e+00, 1.e+05])");
  double special[4] = {0, 0, 0, 1.5};
  special[0] = strtod("nan", NULL);
  special[1] = strtod("inf", NULL);
  special[2] = -special[1];
  expect_format(dtype(kDLFloat, 64), 1, four, NULL, special, "array([ nan,  inf, -inf,  1.5])");
  const double zeros[2] = {0.0, -0.0};
  expect_format(dtype(kDLFloat, 64), 1, two, NULL, zeros, "array([ 0., -0.])");
  const float big[2] = {1e6f, 1.0f};
  expect_format(dtype(kDLFloat, 32), 1, two, NULL, big, "array([1.e+06, 1.e+00], dtype=float32)");
  const uint16_t half[3] = {11878, 12902, 13653}; /* float16 0.1, 0.2, 1/3 */
  expect_format(dtype(kDLFloat, 16), 1, three, NULL, half,
                "array([0.1   , 0.2   , 0.3333], dtype=float16)");
  const uint16_t bf16[2] = {0x3f80, 0x4020}; /* 1.0, 2.5: printed like any float */
  expect_format(dtype(kDLBfloat, 16), 1, two, NULL, bf16, "array([1. , 2.5], dtype=bfloat16)");
  double wrap[30];
  for (int i = 0; i < 30; i++) {
    wrap[i] = i * 1.1;
  }
  const int64_t thirty[1] = {30};
  expect_format(dtype(kDLFloat, 64), 1, thirty, NULL, wrap,
                "array([ 0. ,  1.1,  2.2,  3.3,  4.4,  5.5,  6.6,  7.7,  8.8,  9.9, 11. ,\n"
                "       12.1, 13.2, 14.3, 15.4, 16.5, 17.6, 18.7, 19.8, 20.9, 22. , 23.1,\n"
                "       24.2, 25.3, 26.4, 27.5, 28.6, 29.7, 30.8, 31.9])");
}
END_TEST

START_TEST(test_format_complex) {
  const int64_t two[1] = {2};
  const float c8[4] = {1, 2, 3, -4.5f};
  expect_format(dtype(kDLComplex, 64), 1, two, NULL, c8,
                "array([1.+2.j , 3.-4.5j], dtype=complex64)");
  double c16[4] = {0, 0, 1, 1};
  c16[0] = strtod("nan", NULL);
  c16[1] = strtod("inf", NULL);
  expect_format(dtype(kDLComplex, 128), 1, two, NULL, c16, "array([nan+infj,  1. +1.j])");
}
END_TEST

START_TEST(test_format_ints_and_bools) {
  int8_t i8[24];
  for (int i = 0; i < 24; i++) {
    i8[i] = (int8_t)i;
  }
  const int64_t shape3[3] = {2, 3, 4};
  expect_format(dtype(kDLInt, 8), 3, shape3, NULL, i8,
                "array([[[ 0,  1,  2,  3],\n"
                "        [ 4,  5,  6,  7],\n"
                "        [ 8,  9, 10, 11]],\n"
                "\n"
                "       [[12, 13, 14, 15],\n"
                "        [16, 17, 18, 19],\n"
                "        [20, 21, 22, 23]]], dtype=int8)");
  const int64_t two[1] = {2};
  const uint64_t u8[2] = {UINT64_MAX, 0};
  expect_format(dtype(kDLUInt, 64), 1, two, NULL, u8,
                "array([18446744073709551615,                    0], dtype=uint64)");
  const int64_t i64[2] = {INT64_MAX, INT64_MIN};
  expect_format(dtype(kDLInt, 64), 1, two, NULL, i64,
                "array([ 9223372036854775807, -9223372036854775808])");
  const uint8_t b[2] = {1, 0};
  expect_format(dtype(6, 8), 1, two, NULL, b, "array([ True, False])");
  expect_format(dtype(6, 8), 0, NULL, NULL, b, "array(True)");
}
END_TEST

START_TEST(test_format_scalars_and_empty) {
  const double f = 1.5;
  expect_format(dtype(kDLFloat, 64), 0, NULL, NULL, &f, "array(1.5)");
  const int32_t i = -7;
  expect_format(dtype(kDLInt, 32), 0, NULL, NULL, &i, "array(-7, dtype=int32)");
  const int64_t zero[1] = {0};
  const int64_t zero_by_3[2] = {0, 3};
  expect_format(dtype(kDLFloat, 32), 1, zero, NULL, NULL, "array([], dtype=float32)");
  expect_format(dtype(kDLInt, 64), 2, zero_by_3, NULL, NULL,
                "array([], shape=(0, 3), dtype=int64)");
  expect_format(dtype(kDLFloat, 64), 1, zero, NULL, NULL, "array([], dtype=float64)");
}
END_TEST

START_TEST(test_format_summarised) {
  int64_t* a = malloc(2000 * sizeof *a);
  double* d = malloc(2000 * sizeof *d);
  for (int i = 0; i < 2000; i++) {
    a[i] = i;
    d[i] = i;
  }
  const int64_t n[1] = {2000};
  expect_format(dtype(kDLInt, 64), 1, n, NULL, a,
                "array([   0,    1,    2, ..., 1997, 1998, 1999], shape=(2000,))");
  const int64_t two_by[2] = {2, 1000};
  expect_format(dtype(kDLFloat, 64), 2, two_by, NULL, d,
                "array([[0.000e+00, 1.000e+00, 2.000e+00, ..., 9.970e+02, 9.980e+02,\n"
                "        9.990e+02],\n"
                "       [1.000e+03, 1.001e+03, 1.002e+03, ..., 1.997e+03, 1.998e+03,\n"
                "        1.999e+03]], shape=(2, 1000))");
  free(a);
  free(d);
}
END_TEST

START_TEST(test_format_strided_views) {
  const int16_t m[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape_t[2] = {3, 2};
  const int64_t strides_t[2] = {1, 3}; /* the transpose of the 2 x 3 matrix m */
  expect_format(dtype(kDLInt, 16), 2, shape_t, strides_t, m,
                "array([[1, 4],\n       [2, 5],\n       [3, 6]], dtype=int16)");
  const uint8_t v[4] = {1, 2, 3, 4};
  const int64_t four[1] = {4};
  const int64_t back[1] = {-1};
  expect_format(dtype(kDLUInt, 8), 1, four, back, v + 3, "array([4, 3, 2, 1], dtype=uint8)");
  /* a broadcast scalar: 6000 elements over one float, never copied */
  const float half = 0.5f;
  const int64_t shape_b[2] = {3, 2000};
  const int64_t strides_b[2] = {0, 0};
  expect_format(dtype(kDLFloat, 32), 2, shape_b, strides_b, &half,
                "array([[0.5, 0.5, 0.5, ..., 0.5, 0.5, 0.5],\n"
                "       [0.5, 0.5, 0.5, ..., 0.5, 0.5, 0.5],\n"
                "       [0.5, 0.5, 0.5, ..., 0.5, 0.5, 0.5]],\n"
                "      shape=(3, 2000), dtype=float32)");
  /* far more elements than memory could hold, through zero strides */
  const int64_t shape_h[2] = {INT64_MAX, 4};
  char* s = format_raw(dtype(kDLFloat, 32), 2, shape_h, strides_b, &half);
  ck_assert_ptr_nonnull(strstr(s, "shape=(9223372036854775807, 4)"));
  free(s);
}
END_TEST

START_TEST(test_format_failures) {
  const float x = 1;
  const int64_t one[1] = {1};
  const int64_t negative[1] = {-1};
  FILE* fp = tmpfile();
  DLDataType vec = {kDLFloat, 32, 4};
  ck_assert_int_eq(pf_npy_format_raw(vec, 1, one, NULL, &x, fp), -1);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLOpaqueHandle, 64), 1, one, NULL, &x, fp), -1);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 8), 1, one, NULL, &x, fp), -1);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), 1, negative, NULL, &x, fp), -1);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), 1, one, NULL, NULL, fp), -1);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), 1, NULL, NULL, &x, fp), -1);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), 33, one, NULL, &x, fp), -1);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), -1, one, NULL, &x, fp), -1);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), 1, one, NULL, &x, NULL), -1);
  const int64_t huge[2] = {INT64_MAX, 4}; /* C order cannot be that large */
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), 2, huge, NULL, &x, fp), -1);
  ck_assert_int_eq(pf_npy_format(NULL, fp), -1);
  ck_assert_int_eq(ftell(fp), 0); /* nothing printed on failure */
  fclose(fp);
  FILE* ro = fopen("/dev/null", "r"); /* writing fails */
  ck_assert_ptr_nonnull(ro);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), 1, one, NULL, &x, ro), -1);
  fclose(ro);
}
END_TEST

/* ---- mapped reading and atomic writes ------------------------------------------------------ */

/* Number of entries in the test folder (temporary files left behind show up here). */
/* Writes len bytes of buf to path (replacing it). */
static void write_bytes(const char* path, const void* buf, size_t len) {
  FILE* fp = fopen(path, "wb");
  ck_assert_ptr_nonnull(fp);
  ck_assert_uint_eq(fwrite(buf, 1, len, fp), len);
  fclose(fp);
}

static int dir_entries(void) {
  DIR* d = opendir(g_dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* Writes n float32 values v, v+1, ... to path with pf_npy_write_file. */
static void write_floats(const char* path, size_t n, float v) {
  float* data = malloc(n * sizeof(float));
  ck_assert_ptr_nonnull(data);
  for (size_t i = 0; i < n; i++)
    data[i] = v + (float)i;
  pf_npy_array_t arr = {dtype(kDLFloat, 32), 1, {(int64_t)n}, 0, data, n * sizeof(float)};
  char err[ERR_SIZE];
  ck_assert_msg(pf_npy_write_file(path, &arr, err, sizeof err) == 0, "%s", err);
  free(data);
}

/* 1 when path holds n float32 values v, v+1, ... */
static int holds_floats(const char* path, size_t n, float v) {
  pf_npy_array_t arr;
  char err[ERR_SIZE];
  if (pf_npy_read_file(path, &arr, err, sizeof err) != 0)
    return 0;
  int ok = arr.nbytes == n * sizeof(float);
  for (size_t i = 0; ok && i < n; i++)
    ok = ((float*)arr.data)[i] == v + (float)i;
  pf_npy_array_free(&arr);
  return ok;
}

START_TEST(test_map_without_copy_and_changes) {
  char path[128], err[ERR_SIZE];
  temp_path(path, sizeof path, "map.npy");
  write_floats(path, 5000, 1.0f); /* several pages */
  pf_npy_map_t m;
  ck_assert_msg(pf_npy_map_file(path, &m, err, sizeof err) == 0, "%s", err);
  ck_assert_ptr_nonnull(m.base);
  ck_assert_uint_eq(m.offset, 128);
  ck_assert_ptr_eq(m.array.data, (char*)m.base + 128);
  ck_assert_int_eq(m.array.ndim, 1);
  ck_assert_int_eq(m.array.shape[0], 5000);
  float* x = m.array.data;
  ck_assert(x[0] == 1.0f && x[4999] == 5000.0f);
  int changed = -1;
  ck_assert_int_eq(pf_npy_map_changed(&m, &changed, err, sizeof err), 0);
  ck_assert_int_eq(changed, 0);
  x[3000] = x[3000]; /* a page copied, the same bytes: not a change */
  ck_assert_int_eq(pf_npy_map_changed(&m, &changed, err, sizeof err), 0);
  ck_assert_int_eq(changed, 0);
  x[4000] = -1.0f;
  ck_assert_int_eq(pf_npy_map_changed(&m, &changed, err, sizeof err), 0);
  ck_assert_int_eq(changed, 1);
  pf_npy_map_release(&m);
  ck_assert_int_eq(m.fd, -1);
  ck_assert(holds_floats(path, 5000, 1.0f)); /* the write stayed private */
  pf_npy_map_release(&m);                    /* released twice: a no-op */
  unlink(path);
}
END_TEST

START_TEST(test_map_falls_back_to_reading) {
  char path[128], err[ERR_SIZE];
  unsigned char buf[BUF_SIZE];
  const unsigned char be[8] = {0x3f, 0x80, 0, 0, 0x40, 0, 0, 0}; /* 1.0f, 2.0f big-endian */
  size_t len =
      make_npy(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", be, sizeof be);
  temp_path(path, sizeof path, "big.npy");
  write_bytes(path, buf, len);
  pf_npy_map_t m;
  ck_assert_msg(pf_npy_map_file(path, &m, err, sizeof err) == 0, "%s", err);
  ck_assert_ptr_null(m.base);
  ck_assert(((float*)m.array.data)[0] == 1.0f && ((float*)m.array.data)[1] == 2.0f);
  int changed;
  ck_assert_int_eq(pf_npy_map_changed(&m, &changed, err, sizeof err), -1);
  pf_npy_map_release(&m);
  temp_path(path, sizeof path, "missing.npy");
  ck_assert_int_eq(pf_npy_map_file(path, &m, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "cannot open"));
  ck_assert_int_eq(m.fd, -1);
  temp_path(path, sizeof path, "big.npy");
  unlink(path);
}
END_TEST

/* A FIFO (or a pipe, /dev/stdin) gives its bytes once: what follows the header is read from
 * the stream already open, not by opening the path again, which would wait for another writer
 * (a FIFO) or find the header gone (a pipe). A child writes the file into the FIFO once. */
START_TEST(test_map_reads_a_fifo_once) {
  char path[128], err[ERR_SIZE];
  unsigned char buf[BUF_SIZE];
  const float values[3] = {1.5f, -2.0f, 4.0f};
  size_t len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", values,
                        sizeof values);
  temp_path(path, sizeof path, "fifo.npy");
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    int fd = open(path, O_WRONLY);
    _exit(fd >= 0 && write(fd, buf, len) == (ssize_t)len && close(fd) == 0 ? 0 : 1);
  }
  pf_npy_map_t m;
  int rc = pf_npy_map_file(path, &m, err, sizeof err);
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ck_assert_msg(rc == 0, "%s", err);
  ck_assert_ptr_null(m.base); /* read, not mapped */
  ck_assert_int_eq(m.array.ndim, 1);
  ck_assert_int_eq(m.array.shape[0], 3);
  ck_assert_uint_eq(m.array.nbytes, sizeof values);
  ck_assert_mem_eq(m.array.data, values, sizeof values);
  pf_npy_map_release(&m);
  unlink(path);
}
END_TEST

/* pf_npy_output_map refuses more than PF_NPY_MAX_NDIM dimensions before it reads the shape:
 * desc.shape has 32 entries, and what follows it here (negative numbers) must not be read as
 * dimensions 32 to 39. */
START_TEST(test_output_map_checks_ndim_first) {
  char path[128], err[ERR_SIZE];
  temp_path(path, sizeof path, "deep.npy");
  struct {
    pf_npy_array_t desc;
    int64_t after[16];
  } in;
  memset(&in, 0xff, sizeof in); /* -1 everywhere past the fields set below */
  in.desc.dtype = dtype(kDLFloat, 32);
  in.desc.ndim = 40;
  for (int k = 0; k < PF_NPY_MAX_NDIM; k++)
    in.desc.shape[k] = 1;
  pf_npy_output_t out;
  void* data = NULL;
  ck_assert_int_eq(pf_npy_output_open(path, &out, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_map(&out, &in.desc, NULL, &data, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "deep.npy: ndim is 40: expected 0 to 32") != NULL, "%s", err);
  in.desc.ndim = -1;
  ck_assert_int_eq(pf_npy_output_map(&out, &in.desc, NULL, &data, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "ndim is -1: expected 0 to 32") != NULL, "%s", err);
  ck_assert_ptr_null(data);
  pf_npy_output_abort(&out, 1);
  ck_assert_int_eq(dir_entries(), 0);
}
END_TEST

/* A mapped output gets its disk blocks before the call: an output larger than the space left is
 * an error there ("No space left on device", nothing allocated), not a SIGBUS in the function
 * writing the map. The size: the free space of the test folder's file system plus 1 GiB. */
START_TEST(test_mapped_output_larger_than_the_disk) {
  char path[128], probe[128], err[ERR_SIZE];
  temp_path(path, sizeof path, "huge.npy");
  temp_path(probe, sizeof probe, "probe");
  struct statvfs fs;
  ck_assert_int_eq(statvfs(g_dir, &fs), 0);
  uint64_t rows = (uint64_t)fs.f_bavail * fs.f_frsize / (1u << 20) + 1024; /* rows of 1 MiB */
  /* the file must be sizable (sparse) first: a file size limit or maximum stops that */
  int fd = open(probe, O_RDWR | O_CREAT | O_EXCL, 0600);
  ck_assert_int_ge(fd, 0);
  signal(SIGXFSZ, SIG_IGN);
  int sizable = fs.f_blocks > 0 && ftruncate(fd, (off_t)(rows << 20) + 4096) == 0;
  signal(SIGXFSZ, SIG_DFL);
  close(fd);
  unlink(probe);
  if (!sizable) {
    printf("test_mapped_output_larger_than_the_disk: SKIPPED: a file of %llu MiB cannot be "
           "made in %s (file size limit, or no free-space figure)\n",
           (unsigned long long)rows, g_dir);
    return;
  }
  write_floats(path, 4, 1.0f);
  pf_npy_output_t out;
  pf_npy_array_t desc = {dtype(kDLFloat, 32), 2, {(int64_t)rows, 1 << 18}, 0, NULL, 0};
  void* data = NULL;
  ck_assert_int_eq(pf_npy_output_open(path, &out, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_map(&out, &desc, NULL, &data, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "huge.npy: write error: No space left on device") != NULL, "%s", err);
  ck_assert_ptr_null(data);
  pf_npy_output_abort(&out, 1);
  ck_assert(holds_floats(path, 4, 1.0f)); /* the old file stays */
  ck_assert_int_eq(dir_entries(), 1);     /* no temporary left */
  unlink(path);
}
END_TEST

START_TEST(test_failed_write_keeps_the_old_file) {
  char a[128], b[128], err[ERR_SIZE];
  temp_path(a, sizeof a, "a.npy");
  temp_path(b, sizeof b, "b.npy");
  write_floats(a, 4, 1.0f);
  write_floats(b, 4, 1.0f);
  /* a file size limit of 4 KiB: the second output (64 KiB) cannot be written */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old_lim, lim;
  ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
  lim = old_lim; /* the soft limit only: restored at the end (coverage data is written at exit) */
  lim.rlim_cur = 4096;
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
  pf_npy_output_t outs[2];
  ck_assert_int_eq(pf_npy_output_open(a, &outs[0], err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_open(b, &outs[1], err, sizeof err), 0);
  ck_assert_int_eq(dir_entries(), 4);
  float small[8] = {7, 8, 9, 10, 11, 12, 13, 14};
  pf_npy_array_t s = {dtype(kDLFloat, 32), 1, {8}, 0, small, sizeof small};
  ck_assert_int_eq(pf_npy_output_write(&outs[0], &s, err, sizeof err), 0);
  float* big = calloc(16384, sizeof(float));
  pf_npy_array_t l = {dtype(kDLFloat, 32), 1, {16384}, 0, big, 16384 * sizeof(float)};
  ck_assert_int_eq(pf_npy_output_write(&outs[1], &l, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "write error: File too large") != NULL, "%s", err);
  pf_npy_output_abort(outs, 2);
  ck_assert(holds_floats(a, 4, 1.0f) && holds_floats(b, 4, 1.0f)); /* neither changed */
  ck_assert_int_eq(dir_entries(), 2);                              /* no temporary left */
  /* the one-file writer the same way: the old file stays */
  ck_assert_int_eq(pf_npy_write_file(b, &l, err, sizeof err), -1);
  ck_assert(holds_floats(b, 4, 1.0f));
  ck_assert_int_eq(dir_entries(), 2);
  /* and both outputs committed together when both fit */
  ck_assert_int_eq(pf_npy_output_open(a, &outs[0], err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_open(b, &outs[1], err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_write(&outs[0], &s, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_write(&outs[1], &s, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_commit(outs, 2, err, sizeof err), 0);
  ck_assert(holds_floats(a, 8, 7.0f) && holds_floats(b, 8, 7.0f));
  ck_assert_int_eq(dir_entries(), 2);
  /* a mapped output larger than the limit: the file cannot be sized */
  pf_npy_array_t desc = {dtype(kDLFloat, 32), 1, {16384}, 0, NULL, 0};
  void* data = NULL;
  ck_assert_int_eq(pf_npy_output_open(b, &outs[0], err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_map(&outs[0], &desc, NULL, &data, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "write error: File too large") != NULL, "%s", err);
  ck_assert_ptr_null(data);
  pf_npy_output_abort(outs, 1);
  ck_assert(holds_floats(b, 8, 7.0f));
  ck_assert_int_eq(dir_entries(), 2);
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
  signal(SIGXFSZ, SIG_DFL);
  free(big);
  unlink(a);
  unlink(b);
}
END_TEST

START_TEST(test_output_map_writes_the_file_in_place) {
  char a[128], b[128], err[ERR_SIZE];
  temp_path(a, sizeof a, "src.npy");
  temp_path(b, sizeof b, "dst.npy");
  write_floats(a, 3000, 1.0f);
  pf_npy_array_t desc = {dtype(kDLFloat, 32), 1, {3000}, 0, NULL, 0};
  /* zeros: a new file like src */
  pf_npy_output_t out;
  void* data = NULL;
  ck_assert_int_eq(pf_npy_output_open(b, &out, err, sizeof err), 0);
  ck_assert_msg(pf_npy_output_map(&out, &desc, NULL, &data, err, sizeof err) == 0, "%s", err);
  float* y = data;
  ck_assert(y[0] == 0.0f && y[2999] == 0.0f);
  for (int i = 0; i < 3000; i++)
    y[i] = 5.0f + (float)i;
  pf_npy_array_t arr = {dtype(kDLFloat, 32), 1, {3000}, 0, data, 3000 * sizeof(float)};
  ck_assert_int_eq(pf_npy_output_write(&out, &arr, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_commit(&out, 1, err, sizeof err), 0);
  ck_assert(holds_floats(b, 3000, 5.0f));
  /* initial data from an existing file, aborted: the target keeps its contents */
  ck_assert_int_eq(pf_npy_output_open(b, &out, err, sizeof err), 0);
  ck_assert_msg(pf_npy_output_map(&out, &desc, a, &data, err, sizeof err) == 0, "%s", err);
  ck_assert(((float*)data)[0] == 1.0f && ((float*)data)[2999] == 3000.0f);
  ((float*)data)[7] = -1.0f;
  pf_npy_output_abort(&out, 1);
  ck_assert(holds_floats(b, 3000, 5.0f));
  /* an initial file of another shape is refused */
  pf_npy_array_t other = {dtype(kDLFloat, 32), 1, {10}, 0, NULL, 0};
  ck_assert_int_eq(pf_npy_output_open(b, &out, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_map(&out, &other, a, &data, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "cannot be mapped as the output's initial data"));
  pf_npy_output_abort(&out, 1);
  ck_assert_int_eq(dir_entries(), 2);
  unlink(a);
  unlink(b);
}
END_TEST

START_TEST(test_output_refuses_non_regular_targets) {
  char fifo[128], err[ERR_SIZE];
  temp_path(fifo, sizeof fifo, "fifo.npy");
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  pf_npy_output_t out;
  ck_assert_int_eq(pf_npy_output_open(fifo, &out, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "not a regular file (a FIFO): refusing to replace it") != NULL, "%s",
                err);
  ck_assert_int_eq(pf_npy_output_open(g_dir, &out, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "(a directory)"));
  float v = 1;
  pf_npy_array_t arr = {dtype(kDLFloat, 32), 1, {1}, 0, &v, sizeof v};
  ck_assert_int_eq(pf_npy_write_file(fifo, &arr, err, sizeof err), -1);
  struct stat st;
  ck_assert_int_eq(stat(fifo, &st), 0);
  ck_assert(S_ISFIFO(st.st_mode)); /* still there, still a FIFO */
  ck_assert_int_eq(dir_entries(), 1);
  unlink(fifo);
}
END_TEST

START_TEST(test_output_refusals_and_failed_commits) {
  char a[128], b[128], err[ERR_SIZE];
  temp_path(a, sizeof a, "a.npy");
  temp_path(b, sizeof b, "b.npy");
  write_floats(a, 4, 1.0f);
  write_floats(b, 4, 1.0f);
  pf_npy_output_t outs[2];
  float v[8] = {7, 8, 9, 10, 11, 12, 13, 14};
  pf_npy_array_t s = {dtype(kDLFloat, 32), 1, {8}, 0, v, sizeof v};
  /* NULL and empty arguments */
  ck_assert_int_eq(pf_npy_output_open(NULL, &outs[0], err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "path or output is NULL or empty"));
  ck_assert_int_eq(pf_npy_output_open("", &outs[0], err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "path or output is NULL or empty"));
  ck_assert_int_eq(pf_npy_output_open(a, NULL, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "path or output is NULL or empty"));
  pf_npy_output_t closed = {NULL, NULL, -1, NULL, 0, 0};
  ck_assert_int_eq(pf_npy_output_write(&closed, &s, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "output not open, or array is NULL"));
  void* data = NULL;
  ck_assert_int_eq(pf_npy_output_map(&closed, &s, NULL, &data, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "output not open or already mapped, or NULL argument"));
  /* a path naming a folder (trailing slash) and a dangling symbolic link */
  char folder[160], link_path[128], missing[128];
  snprintf(folder, sizeof folder, "%s/not-yet/", g_dir);
  ck_assert_int_eq(pf_npy_output_open(folder, &outs[0], err, sizeof err), -1);
  ck_assert_msg(strstr(err, "names a folder, not a file") != NULL, "%s", err);
  temp_path(link_path, sizeof link_path, "dangling.npy");
  temp_path(missing, sizeof missing, "missing-target.npy");
  ck_assert_int_eq(symlink(missing, link_path), 0);
  ck_assert_int_eq(pf_npy_output_open(link_path, &outs[0], err, sizeof err), -1);
  ck_assert_msg(strstr(err, "a symbolic link to a missing file: refusing it") != NULL, "%s", err);
  unlink(link_path);
  /* a symbolic link to a file: the file is replaced, the link stays */
  ck_assert_int_eq(symlink(a, link_path), 0);
  ck_assert_int_eq(pf_npy_write_file(link_path, &s, err, sizeof err), 0);
  ck_assert(holds_floats(a, 8, 7.0f));
  struct stat st;
  ck_assert_int_eq(lstat(link_path, &st), 0);
  ck_assert(S_ISLNK(st.st_mode));
  unlink(link_path);
  /* bad arrays refused at the write and at the map, the target untouched */
  ck_assert_int_eq(pf_npy_output_open(b, &outs[0], err, sizeof err), 0);
  pf_npy_array_t bad = s;
  bad.dtype = dtype(kDLBfloat, 16);
  bad.nbytes = 16;
  ck_assert_int_eq(pf_npy_output_write(&outs[0], &bad, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "bfloat16") != NULL || strstr(err, "no .npy") != NULL, "%s", err);
  ck_assert_int_eq(pf_npy_output_map(&outs[0], &bad, NULL, &data, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "bfloat16") != NULL || strstr(err, "no .npy") != NULL, "%s", err);
  pf_npy_array_t huge = {dtype(kDLFloat, 32), 2, {INT64_MAX / 2, 4}, 0, NULL, 0};
  ck_assert_int_eq(pf_npy_output_map(&outs[0], &huge, NULL, &data, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "shape is negative or too large") != NULL, "%s", err);
  /* mapped for 8 floats, then handed 4 other floats to write */
  pf_npy_array_t desc = {dtype(kDLFloat, 32), 1, {8}, 0, NULL, 0};
  ck_assert_int_eq(pf_npy_output_map(&outs[0], &desc, NULL, &data, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_map(&outs[0], &desc, NULL, &data, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "already mapped"));
  pf_npy_array_t four = {dtype(kDLFloat, 32), 1, {4}, 0, v, 4 * sizeof(float)};
  ck_assert_int_eq(pf_npy_output_write(&outs[0], &four, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "16 bytes of data for a file mapped for 32") != NULL, "%s", err);
  /* data of the right size from elsewhere is copied into the map */
  ck_assert_int_eq(pf_npy_output_write(&outs[0], &s, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_commit(outs, 1, err, sizeof err), 0);
  ck_assert(holds_floats(b, 8, 7.0f));
  /* a commit before every output was written: nothing replaced, temporaries removed */
  write_floats(a, 4, 1.0f);
  write_floats(b, 4, 1.0f);
  ck_assert_int_eq(pf_npy_output_open(a, &outs[0], err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_open(b, &outs[1], err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_write(&outs[0], &s, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_commit(outs, 2, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "not written before commit") != NULL, "%s", err);
  ck_assert(holds_floats(a, 4, 1.0f) && holds_floats(b, 4, 1.0f));
  ck_assert_int_eq(dir_entries(), 2);
  /* a rename that fails (the target became a folder that is not empty): earlier outputs are in
   * place, that one and the later ones are removed */
  ck_assert_int_eq(pf_npy_output_open(a, &outs[0], err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_open(b, &outs[1], err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_write(&outs[0], &s, err, sizeof err), 0);
  ck_assert_int_eq(pf_npy_output_write(&outs[1], &s, err, sizeof err), 0);
  char inside[160];
  snprintf(inside, sizeof inside, "%s/keep", b);
  ck_assert_int_eq(unlink(b), 0);
  ck_assert_int_eq(mkdir(b, 0700), 0);
  write_floats(inside, 1, 1.0f);
  ck_assert_int_eq(pf_npy_output_commit(outs, 2, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "cannot replace") != NULL, "%s", err);
  ck_assert(holds_floats(a, 8, 7.0f));
  ck_assert(holds_floats(inside, 1, 1.0f));
  ck_assert_int_eq(dir_entries(), 2); /* a.npy and the folder b.npy */
  unlink(inside);
  rmdir(b);
  unlink(a);
}
END_TEST

START_TEST(test_output_refuses_a_socket) {
  char path[128], err[ERR_SIZE];
  temp_path(path, sizeof path, "sock.npy");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  ck_assert_uint_lt(strlen(path), sizeof addr.sun_path);
  memcpy(addr.sun_path, path, strlen(path) + 1);
  ck_assert_int_eq(bind(fd, (struct sockaddr*)&addr, sizeof addr), 0);
  pf_npy_output_t out;
  ck_assert_int_eq(pf_npy_output_open(path, &out, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "not a regular file (a socket): refusing to replace it") != NULL, "%s",
                err);
  close(fd);
  unlink(path);
  ck_assert_int_eq(dir_entries(), 0);
}
END_TEST

START_TEST(test_map_refusals_and_empty_arrays) {
  char path[128], err[ERR_SIZE];
  pf_npy_map_t m;
  int changed = -1;
  ck_assert_int_eq(pf_npy_map_file(NULL, &m, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "path or output is NULL"));
  ck_assert_int_eq(pf_npy_map_changed(NULL, &changed, err, sizeof err), -1);
  ck_assert_int_eq(changed, -1);
  pf_npy_map_release(NULL); /* a no-op */
  /* an empty array maps (no data to compare) and never changes */
  temp_path(path, sizeof path, "empty.npy");
  pf_npy_array_t e = {dtype(kDLFloat, 32), 2, {0, 5}, 0, &changed, 0};
  ck_assert_int_eq(pf_npy_write_file(path, &e, err, sizeof err), 0);
  ck_assert_msg(pf_npy_map_file(path, &m, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(m.array.shape[1], 5);
  ck_assert_int_eq(pf_npy_map_changed(&m, &changed, err, sizeof err), 0);
  ck_assert_int_eq(changed, 0);
  pf_npy_map_release(&m);
  unlink(path);
}
END_TEST

START_TEST(test_small_error_buffers_and_map_fallbacks) {
  unsigned char buf[BUF_SIZE];
  pf_npy_array_t arr;
  const unsigned char junk[16] = "not an npy file";
  /* no room for a message, a message cut to the buffer, a name longer than the buffer */
  ck_assert_int_eq(pf_npy_read_buffer(junk, sizeof junk, &arr, NULL, 0), -1);
  char err[ERR_SIZE];
  memset(err, 'x', sizeof err);
  ck_assert_int_eq(pf_npy_read_buffer(junk, sizeof junk, &arr, err, 1), -1);
  ck_assert_int_eq(err[0], '\0');
  ck_assert_int_eq(pf_npy_read_buffer(junk, sizeof junk, &arr, err, 14), -1);
  ck_assert_str_eq(err, "<buffer>: not");
  ck_assert_int_eq(pf_npy_read_buffer(junk, sizeof junk, &arr, err, 5), -1);
  ck_assert_str_eq(err, "<buf");
  char descr[8] = "zz";
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLFloat, 32), descr, 3), -1);
  ck_assert_str_eq(descr, "");
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLFloat, 32), descr, 0), -1);
  ck_assert_int_eq(pf_npy_dtype_descr(dtype(kDLFloat, 32), descr, 4), 0);
  ck_assert_str_eq(descr, "<f4");
  /* a Fortran-order file with two long axes cannot be used in place: it is read instead */
  const int32_t data[6] = {1, 4, 2, 5, 3, 6}; /* column-major [[1, 2, 3], [4, 5, 6]] */
  size_t len = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", data,
                        sizeof data);
  char path[128];
  temp_path(path, sizeof path, "fortran.npy");
  write_bytes(path, buf, len);
  pf_npy_map_t m;
  ck_assert_msg(pf_npy_map_file(path, &m, err, sizeof err) == 0, "%s", err);
  ck_assert_ptr_null(m.base);
  const int32_t* got = m.array.data;
  ck_assert(got[0] == 1 && got[1] == 2 && got[2] == 3 && got[3] == 4 && got[5] == 6);
  ck_assert_int_eq(pf_npy_map_changed(&m, NULL, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "pf_npy_map_changed"));
  pf_npy_map_release(&m);
  ck_assert_int_eq(pf_npy_map_file(path, NULL, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "path or output is NULL"));
  /* a file whose size does not match its header is read, and refused as the reader does */
  FILE* fp = fopen(path, "ab");
  ck_assert_ptr_nonnull(fp);
  ck_assert_uint_eq(fwrite("xyz", 1, 3, fp), 3);
  fclose(fp);
  ck_assert_int_eq(pf_npy_map_file(path, &m, err, sizeof err), -1);
  ck_assert_msg(strstr(err, path) != NULL, "%s", err);
  unlink(path);
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------- */

static Suite* npy_suite(void) {
  Suite* s = suite_create("npy");
  TCase* tc = tcase_create("write");
  tcase_add_checked_fixture(tc, make_temp_dir, remove_temp_dir);
  tcase_add_loop_test(tc, test_descr_of_every_dtype, 0, NUM_TYPES);
  tcase_add_test(tc, test_descr_refuses_what_npy_lacks);
  tcase_add_loop_test(tc, test_round_trip_every_dtype, 0, NUM_TYPES);
  tcase_add_test(tc, test_round_trip_scalar_and_empty);
  tcase_add_test(tc, test_round_trip_32_dimensions);
  tcase_add_test(tc, test_write_header_like_numpy);
  tcase_add_test(tc, test_write_scalar_header);
  tcase_add_test(tc, test_write_refuses_bad_arrays);
  tcase_add_test(tc, test_write_unwritable_path);
  tcase_add_test(tc, test_free_is_idempotent);
  tcase_add_test(tc, test_map_without_copy_and_changes);
  tcase_add_test(tc, test_map_falls_back_to_reading);
  tcase_add_test(tc, test_map_reads_a_fifo_once);
  tcase_add_test(tc, test_output_map_checks_ndim_first);
  tcase_add_test(tc, test_failed_write_keeps_the_old_file);
  tcase_add_test(tc, test_mapped_output_larger_than_the_disk);
  tcase_add_test(tc, test_output_refuses_non_regular_targets);
  tcase_add_test(tc, test_output_map_writes_the_file_in_place);
  tcase_add_test(tc, test_output_refusals_and_failed_commits);
  tcase_add_test(tc, test_output_refuses_a_socket);
  tcase_add_test(tc, test_map_refusals_and_empty_arrays);
  tcase_add_test(tc, test_small_error_buffers_and_map_fallbacks);
  suite_add_tcase(s, tc);

  tc = tcase_create("read");
  tcase_add_checked_fixture(tc, make_temp_dir, remove_temp_dir);
  tcase_add_test(tc, test_read_fortran_order);
  tcase_add_test(tc, test_read_fortran_order_3d_big_endian);
  tcase_add_test(tc, test_read_fortran_order_1d_and_scalar);
  tcase_add_test(tc, test_read_big_endian);
  tcase_add_test(tc, test_read_native_and_unordered_descr);
  tcase_add_test(tc, test_read_versions_2_and_3);
  tcase_add_test(tc, test_read_header_spelling);
  tcase_add_test(tc, test_read_file_names_path);
  tcase_add_test(tc, test_read_null_arguments);
  suite_add_tcase(s, tc);

  tc = tcase_create("malformed");
  tcase_add_test(tc, test_bad_magic_and_preamble);
  tcase_add_test(tc, test_bad_version);
  tcase_add_test(tc, test_bad_header_length);
  tcase_add_test(tc, test_truncated_and_oversized_data);
  tcase_add_test(tc, test_header_not_a_dict);
  tcase_add_test(tc, test_header_keys);
  tcase_add_test(tc, test_header_values);
  tcase_add_test(tc, test_header_unusual_spellings);
  tcase_add_test(tc, test_unsupported_dtypes);
  tcase_add_test(tc, test_overflowing_shapes);
  tcase_add_test(tc, test_largest_shape_is_checked_against_data);
  suite_add_tcase(s, tc);

  tc = tcase_create("format");
  tcase_add_test(tc, test_format_float32_matrix);
  tcase_add_test(tc, test_format_floats);
  tcase_add_test(tc, test_format_complex);
  tcase_add_test(tc, test_format_ints_and_bools);
  tcase_add_test(tc, test_format_scalars_and_empty);
  tcase_add_test(tc, test_format_summarised);
  tcase_add_test(tc, test_format_strided_views);
  tcase_add_test(tc, test_format_failures);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner* sr = srunner_create(npy_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
