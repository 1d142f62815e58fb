/* test_npy_format.c: the "format" case of test_npy (src/npy/): the NumPy-style printer
 * (pf_npy_format, pf_npy_format_raw) against NumPy's own output. */
#define _DEFAULT_SOURCE /* mkdtemp, rmdir (pf_test_npy.h) */

#include "pf_test_npy.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

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

/* An array whose data is in Fortran order (fortran_order 1, what a .npy file may say) prints as
 * the array it describes: it printed its bytes as C order, the transpose's elements in the
 * wrong places (the writer refuses such an array; review). */
START_TEST(test_format_fortran_order) {
  const float data[6] = {1, 4, 2, 5, 3, 6}; /* [[1, 2, 3], [4, 5, 6]] in Fortran order */
  pf_npy_array_t arr = {dtype(kDLFloat, 32), 2, {2, 3}, 1, (void*)data, sizeof data};
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
  /* data shorter than its shape needs (it was read past; review), in either order */
  const float six[6] = {1, 2, 3, 4, 5, 6};
  pf_npy_array_t short_data = {dtype(kDLFloat, 32), 2, {2, 3}, 0, (void*)six, sizeof six - 1};
  ck_assert_int_eq(pf_npy_format(&short_data, fp), -1);
  short_data.fortran_order = 1;
  ck_assert_int_eq(pf_npy_format(&short_data, fp), -1);
  short_data.nbytes = sizeof six;
  short_data.shape[0] = -2;
  ck_assert_int_eq(pf_npy_format(&short_data, fp), -1);
  ck_assert_int_eq(ftell(fp), 0); /* nothing printed on failure */
  fclose(fp);
  FILE* ro = fopen("/dev/null", "r"); /* writing fails */
  ck_assert_ptr_nonnull(ro);
  ck_assert_int_eq(pf_npy_format_raw(dtype(kDLFloat, 32), 1, one, NULL, &x, ro), -1);
  fclose(ro);
}
END_TEST

START_TEST(test_format_rounding_to_an_integer_and_huge_broadcasts) {
  /* digits past the eighth decimal that round away entirely leave "1." (NumPy 2.4's repr) */
  const int64_t one[1] = {1};
  const int64_t two[1] = {2};
  const double near_one[1] = {1.000000001};
  expect_format(dtype(kDLFloat, 64), 1, one, NULL, near_one, "array([1.])");
  const double pair[2] = {-2.0000000004, 0.5};
  expect_format(dtype(kDLFloat, 64), 1, two, NULL, pair, "array([-2. ,  0.5])");
  /* a broadcast view larger than int64 elements: printed summarised through its zero strides */
  const int32_t seven = 7;
  const int64_t huge[2] = {(int64_t)1 << 62, 4};
  const int64_t zero[2] = {0, 0};
  char* got = format_raw(dtype(kDLInt, 32), 2, huge, zero, &seven);
  ck_assert_str_eq(got, "array([[7, 7, 7, 7],\n       [7, 7, 7, 7],\n       [7, 7, 7, 7],\n"
                        "       ...,\n       [7, 7, 7, 7],\n       [7, 7, 7, 7],\n"
                        "       [7, 7, 7, 7]], shape=(4611686018427387904, 4), dtype=int32)");
  free(got);
}
END_TEST

/* ---- test case ---------------------------------------------------------------------------- */

TCase* pf_test_npy_format_tcase(void) {
  TCase* tc = tcase_create("format");
  tcase_add_test(tc, test_format_float32_matrix);
  tcase_add_test(tc, test_format_fortran_order);
  tcase_add_test(tc, test_format_floats);
  tcase_add_test(tc, test_format_complex);
  tcase_add_test(tc, test_format_ints_and_bools);
  tcase_add_test(tc, test_format_scalars_and_empty);
  tcase_add_test(tc, test_format_summarised);
  tcase_add_test(tc, test_format_strided_views);
  tcase_add_test(tc, test_format_failures);
  tcase_add_test(tc, test_format_rounding_to_an_integer_and_huge_broadcasts);
  return tc;
}
