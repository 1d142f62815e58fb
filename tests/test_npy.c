/* test_npy.c: unit tests of src/npy/: hand-made Fortran-order, big-endian and malformed files
 * read, and the suite. The rest of the suite, in one executable: round trips and the writer in
 * test_npy_write.c, mapped reading and atomic outputs in test_npy_output.c, the NumPy-style
 * printer against NumPy's own output in test_npy_format.c; pf_test_npy.h holds what they share. */
#define _DEFAULT_SOURCE /* mkdtemp, rmdir (pf_test_npy.h) */

#include "pf_test_npy.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* The test folder of the "write" and "read" cases (see pf_test_npy.h). */
char pf_test_npy_dir[64];

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

  ck_assert_int_eq(pf_npy_read_file(pf_test_npy_dir, &arr, err, sizeof err), -1); /* a directory */
  ck_assert_ptr_nonnull(strstr(err, pf_test_npy_dir));
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
  /* every whitespace Python allows, Python 2 long extents */
  size_t len = make_npy(buf, 1, "{'descr':\t'<f4',\f'fortran_order':\vFalse,\r'shape': (2L, 1l), }",
                        data, sizeof data);
  const int64_t shape[2] = {2, 1};
  read_ok(buf, len, &arr, dtype(kDLFloat, 32), 2, shape);
  ck_assert(((float*)arr.data)[1] == 2.0f);
  pf_npy_array_free(&arr);
  /* signed extents, as Python reads them: +2, and -0, which is 0 (NumPy loads (-0,) as (0,);
   * it was called a negative dimension) */
  len =
      make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (+2, -0, 1), }", data, 0);
  const int64_t signed_shape[3] = {2, 0, 1};
  read_ok(buf, len, &arr, dtype(kDLFloat, 32), 3, signed_shape);
  pf_npy_array_free(&arr);
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-,)}", 0,
                    "'shape' is not a tuple of integers: got '-'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -01)}", 0,
                    "shape has a negative dimension: '-01)'");
  /* an escape is refused, as numpy refuses it ('<\f4' is '<', a form feed and '4' to Python;
   * this parser read '<f4'), and so is a NUL, which cut the descr short ('<f4\0' read as
   * float32; review) */
  expect_bad_header("{'descr': '<\\f4', 'fortran_order': False, 'shape': (2,)}", 0,
                    "'descr' is not a string");
  len = make_npy(buf, 1, "{'descr': '<f4#', 'fortran_order': False, 'shape': (2,)}", data,
                 sizeof data);
  *(unsigned char*)memchr(buf, '#', len) = '\0';
  char err[ERR_SIZE] = "";
  ck_assert_int_eq(pf_npy_read_buffer(buf, len, &arr, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "'descr' is not a string") != NULL, "%s", err);
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
  /* the header's control characters never reach the message (a terminal would take an escape
   * sequence in it for a command; review) */
  expect_bad_header("{'descr': '<f4\x1b]0;t\x07\x1b[2J', 'fortran_order': False, 'shape': (2,)}", 8,
                    "unsupported dtype '<f4?]0;t??[2J'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'k\x1b[2J': 1}", 8,
                    "header has an unexpected key 'k?[2J'");
  /* and the C1 controls, CSI (U+009B) and OSC (U+009D) among them, which a terminal takes as
   * ESC [ and ESC ]: in UTF-8 (C2 9B), or as one byte, as an 8-bit terminal reads them (both
   * reached the message; review); other UTF-8 characters (e9, c3 80) stay as they are */
  expect_bad_header("{'descr': '<f4\xc2\x9b"
                    "2J\xc2\x9d"
                    "0;t\x9b"
                    "2J', 'fortran_order': False, 'shape': (2,)}",
                    8, "unsupported dtype '<f4?2J?0;t?2J'");
  expect_bad_header("{'descr': '<f4\xc3\xa9\xc3\x80', 'fortran_order': False, 'shape': (2,)}", 8,
                    "unsupported dtype '<f4\xc3\xa9\xc3\x80'");
  /* characters of three and four bytes stay; a byte of no well-formed character (an overlong
   * form, a surrogate, a code point past U+10FFFF, a bad continuation byte, a lead byte that
   * starts none) stays where it is no C1 control (0xa0 and above), else shows as '?' */
  expect_bad_header("{'descr': '<f4\xe2\x82\xac\xf0\x9f\x98\x80\xc2\xa0', 'fortran_order': False, "
                    "'shape': (2,)}",
                    8, "unsupported dtype '<f4\xe2\x82\xac\xf0\x9f\x98\x80\xc2\xa0'");
  expect_bad_header("{'descr': '\xe0\x80\x80|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82(|', "
                    "'fortran_order': False, 'shape': (2,)}",
                    8, "unsupported dtype '\xe0??|\xed\xa0?|\xf4???|\xe2?(|'");
  expect_bad_header("{'descr': '\xf0\x9f\x98.|\xe2\x82\xc0|\xf5\x80|\x7f', 'fortran_order': False, "
                    "'shape': (2,)}",
                    8, "unsupported dtype '\xf0??.|\xe2?\xc0|\xf5?|?'");
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

/* ---- edges of the header parser and the reader (coverage of their refusals) -------------- */

/* A version 1.0 image whose header is `text` exactly: no padding, no final newline (the parser
 * needs neither), followed by data_len bytes of data. Returns the length. */
static size_t make_bare_npy(unsigned char* buf, const char* text, const void* data,
                            size_t data_len) {
  size_t hlen = strlen(text);
  ck_assert_uint_le(10 + hlen + data_len, BUF_SIZE);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)hlen;
  buf[9] = (unsigned char)(hlen >> 8);
  memcpy(buf + 10, text, hlen);
  if (data_len > 0) {
    memcpy(buf + 10 + hlen, data, data_len);
  }
  return 10 + hlen + data_len;
}

static void expect_bad_bare_header(const char* text, const char* needle) {
  unsigned char buf[BUF_SIZE];
  size_t len = make_bare_npy(buf, text, NULL, 0);
  pf_npy_array_t arr;
  char err[ERR_SIZE] = "";
  ck_assert_int_eq(pf_npy_read_buffer(buf, len, &arr, err, sizeof err), -1);
  ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
  ck_assert_ptr_null(arr.data);
}

START_TEST(test_header_that_ends_inside_a_value) {
  /* a string, a word and a value running to the end of the header */
  expect_bad_bare_header("{'descr': '<f4", "'descr' is not a string: got ''<f4'");
  expect_bad_bare_header("{'descr': '<f4', 'shape': (), 'fortran_order': Tr",
                         "'fortran_order' is not True or False: got 'Tr'");
  expect_bad_bare_header("{'descr': '<f4', 'shape': (), 'fortran_order': True",
                         "expected ',' or '}' after the value of 'fortran_order', got 'end of "
                         "header'");
  expect_bad_bare_header("{'descr': '<f4', 'shape': (2,", "'shape' is not a tuple of integers: "
                                                          "got 'end of header'");
  /* and a well-formed one without padding or newline is read */
  unsigned char buf[BUF_SIZE];
  const float data[1] = {3.5f};
  size_t len =
      make_bare_npy(buf, "{'descr':'<f4','shape':(1,),'fortran_order':False}", data, sizeof data);
  pf_npy_array_t arr;
  const int64_t shape[1] = {1};
  read_ok(buf, len, &arr, dtype(kDLFloat, 32), 1, shape);
  ck_assert(((float*)arr.data)[0] == 3.5f);
  pf_npy_array_free(&arr);
}
END_TEST

START_TEST(test_header_words_and_previews) {
  /* True or False followed by any identifier character is another word */
  expect_bad_header("{'descr': '<f4', 'fortran_order': TrueX, 'shape': ()}", 0,
                    "'fortran_order' is not True or False: got 'TrueX'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False5, 'shape': ()}", 0,
                    "'fortran_order' is not True or False: got 'False5'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': Truez, 'shape': ()}", 0,
                    "'fortran_order' is not True or False: got 'Truez'");
  /* ... but not by punctuation: the word ends there, and what follows is refused */
  expect_bad_header("{'descr': '<f4', 'fortran_order': True`, 'shape': ()}", 0,
                    "expected ',' or '}' after the value of 'fortran_order', got '`'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False{, 'shape': ()}", 0,
                    "expected ',' or '}' after the value of 'fortran_order', got '{'");
  /* an extent that is a letter */
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (a,)}", 0,
                    "'shape' is not a tuple of integers: got 'a'");
  /* a preview is cut at 23 characters; DEL and bytes past ASCII show as '?' */
  expect_bad_header("{'descr': '<f4', 'fortran_order': Falseeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee, "
                    "'shape': ()}",
                    0, "got 'Falseeeeeeeeeeeeeeeeeee'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': \x7f\x80, 'shape': ()}", 0,
                    "'fortran_order' is not True or False: got '?"
                    "?'");
  /* a size of more than four digits (numpy refuses these too) */
  expect_bad_header("{'descr': '<i10000', 'fortran_order': False, 'shape': (2,)}", 8,
                    "unsupported dtype '<i10000' (no DLPack equivalent)");
  expect_bad_header("{'descr': '<f12345', 'fortran_order': False, 'shape': (2,)}", 8,
                    "unsupported dtype '<f12345' (no DLPack equivalent)");
}
END_TEST

START_TEST(test_read_fortran_order_of_one_element_or_none) {
  /* Fortran order with at most one element: nothing to transpose */
  const int16_t one[1] = {-7};
  unsigned char buf[BUF_SIZE];
  pf_npy_array_t arr;
  size_t len = make_npy(buf, 1, "{'descr': '<i2', 'fortran_order': True, 'shape': (1, 1, 1), }",
                        one, sizeof one);
  const int64_t shape1[3] = {1, 1, 1};
  read_ok(buf, len, &arr, dtype(kDLInt, 16), 3, shape1);
  ck_assert_int_eq(((int16_t*)arr.data)[0], -7);
  ck_assert_uint_eq(arr.nbytes, 2);
  pf_npy_array_free(&arr);
  len = make_npy(buf, 1, "{'descr': '<i2', 'fortran_order': True, 'shape': (3, 0), }", NULL, 0);
  const int64_t shape0[2] = {3, 0};
  read_ok(buf, len, &arr, dtype(kDLInt, 16), 2, shape0);
  ck_assert_uint_eq(arr.nbytes, 0);
  pf_npy_array_free(&arr);
}
END_TEST

START_TEST(test_read_a_directory_or_an_empty_file) {
  pf_npy_array_t arr;
  char err[ERR_SIZE] = "";
  ck_assert_int_eq(pf_npy_read_file(pf_test_npy_dir, &arr, err, sizeof err), -1);
  ck_assert_msg(strstr(err, pf_test_npy_dir) == err, "%s", err);
  ck_assert_msg(strstr(err, "read error: Is a directory") != NULL, "%s", err);
  ck_assert_ptr_null(arr.data);
  /* an empty file is no read error */
  char path[128];
  temp_path(path, sizeof path, "empty.npy");
  FILE* fp = fopen(path, "wb");
  ck_assert_ptr_nonnull(fp);
  fclose(fp);
  ck_assert_int_eq(pf_npy_read_file(path, &arr, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "empty.npy: file is empty: not a .npy file") != NULL, "%s", err);
  ck_assert_ptr_null(arr.data);
  unlink(path);
}
END_TEST

/* Reads `len` bytes of buf through a pipe (/proc/self/fd/N: its size cannot be known ahead). */
static int read_through_pipe(const unsigned char* buf, size_t len, pf_npy_array_t* arr, char* err,
                             size_t err_size) {
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  ck_assert_int_eq(write(fds[1], buf, len), (ssize_t)len);
  close(fds[1]);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
  int rc = pf_npy_read_file(path, arr, err, err_size);
  close(fds[0]);
  return rc;
}

START_TEST(test_read_through_a_pipe) {
  const float data[3] = {1.0f, 2.0f, 3.0f};
  unsigned char buf[BUF_SIZE];
  size_t len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data,
                        sizeof data);
  pf_npy_array_t arr;
  char err[ERR_SIZE] = "";
  ck_assert_msg(read_through_pipe(buf, len, &arr, err, sizeof err) == 0, "%s", err);
  ck_assert_mem_eq(arr.data, data, sizeof data);
  pf_npy_array_free(&arr);
  /* a byte short: found only when the read comes up short */
  ck_assert_int_eq(read_through_pipe(buf, len - 1, &arr, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "file is truncated: expected 12 bytes of data, got 11") != NULL, "%s",
                err);
  ck_assert_ptr_null(arr.data);
  /* a byte more: found by reading past the data */
  buf[len] = 0;
  ck_assert_int_eq(read_through_pipe(buf, len + 1, &arr, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "expected 12 bytes of data, got more (one array per file)") != NULL,
                "%s", err);
  ck_assert_ptr_null(arr.data);
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------- */

static Suite* npy_suite(void) {
  Suite* s = suite_create("npy");
  suite_add_tcase(s, pf_test_npy_write_tcase());

  TCase* tc = tcase_create("read");
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
  tcase_add_test(tc, test_read_fortran_order_of_one_element_or_none);
  tcase_add_test(tc, test_read_a_directory_or_an_empty_file);
  tcase_add_test(tc, test_read_through_a_pipe);
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
  tcase_add_test(tc, test_header_that_ends_inside_a_value);
  tcase_add_test(tc, test_header_words_and_previews);
  suite_add_tcase(s, tc);

  suite_add_tcase(s, pf_test_npy_format_tcase());
  return s;
}

int main(void) {
  SRunner* sr = srunner_create(npy_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
