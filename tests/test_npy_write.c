/* test_npy_write.c: the "write" case of test_npy (src/npy/): dtype descriptors, round trips
 * for every dtype, the writer's header byte for byte, and what the writer refuses. Its tests of
 * mapped reading and atomic outputs are in test_npy_output.c. */
#define _DEFAULT_SOURCE /* mkdtemp, rmdir (pf_test_npy.h) */

#include "pf_test_npy.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- test case ---------------------------------------------------------------------------- */

TCase* pf_test_npy_write_tcase(void) {
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
  pf_test_npy_add_output_tests(tc);
  return tc;
}
