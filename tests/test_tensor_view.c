/* Tests of tensor views: general views and their errors, negative strides, reshape, slice,
 * select and permute, and views of a tensor object made by another runtime. Part of the tensor
 * suite (test_tensor.c runs them). */
#include <stdint.h>

#include "pf_test_tensor.h"

/* ---- views ---- */

START_TEST(test_view_general) {
  pf_object_t* base = iota((int64_t[]){12}, 1);
  pf_object_t* v;
  /* a 3x2 window with row stride 4, starting at element 1 */
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){3, 2}, (int64_t[]){4, 1}, 1, &v), 0);
  ck_assert(at(v, (int64_t[]){0, 0}) == 1.0);
  ck_assert(at(v, (int64_t[]){2, 1}) == 10.0);
  ck_assert_uint_eq(pf_tensor_dltensor(v)->byte_offset, 8);
  ck_assert_ptr_eq(pf_tensor_dltensor(v)->data, pf_tensor_dltensor(base)->data);
  ck_assert_uint_eq(pf_object_strong_count(base), 2);
  /* a view of a view holds the original storage, not the intermediate view */
  pf_object_t* w;
  ck_assert_int_eq(pf_tensor_view(v, 1, (int64_t[]){2}, NULL, 8, &w), 0);
  ck_assert_uint_eq(pf_object_strong_count(base), 3);
  ck_assert_uint_eq(pf_object_strong_count(v), 1);
  ck_assert(at(w, (int64_t[]){1}) == 10.0);
  pf_object_release(v);
  pf_object_release(base);
  ck_assert(at(w, (int64_t[]){0}) == 9.0);
  pf_object_release(w);

  /* broadcasting with stride 0, empty views anywhere */
  base = iota((int64_t[]){3}, 1);
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){4, 3}, (int64_t[]){0, 1}, 0, &v), 0);
  ck_assert(at(v, (int64_t[]){3, 2}) == 2.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){0}, NULL, 1000, &v), 0);
  ck_assert_uint_eq(pf_tensor_dltensor(v)->byte_offset, 0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_view(base, 0, NULL, NULL, 2, &v), 0);
  ck_assert(at(v, NULL) == 2.0);
  pf_object_release(v);
  /* an empty view whose other axes reach far: valid (it reads nothing), and its reach is never
   * computed from the zero extent (found by fuzz_dlpack: an overflow under UBSan) */
  const int64_t far = (int64_t)1 << 62;
  ck_assert_int_eq(
      pf_tensor_view(base, 4, (int64_t[]){0, 0, 0, 3}, (int64_t[]){far, far, far, 1}, 0, &v), 0);
  ck_assert_int_eq(pf_dltensor_numel(pf_tensor_dltensor(v)), 0);
  pf_object_release(v);
  pf_object_release(base);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Views of packfn's tensors take a short way (pf__view_fast) unless it declines (an extent of
 * 0, ndim 0, sub-byte offsets, a view that starts before the data handle, a foreign tensor):
 * a compact view and the same view spelled with its strides agree, with the values, byte
 * offsets and owners the general way gives, for a base that owns its memory, a view of it (the
 * views hold the original owner), a base with negative strides, and at the edge of the base's
 * elements, where the general way's message is raised. */
static void assert_same_view(pf_object_t* a, pf_object_t* b) {
  DLTensor* x = pf_tensor_dltensor(a);
  DLTensor* y = pf_tensor_dltensor(b);
  ck_assert_ptr_eq(x->data, y->data);
  ck_assert(pf_device_equal(x->device, y->device));
  ck_assert(pf_dtype_equal(x->dtype, y->dtype));
  ck_assert_int_eq(x->ndim, y->ndim);
  for (int32_t i = 0; i < x->ndim; ++i) {
    ck_assert_int_eq(x->shape[i], y->shape[i]);
    ck_assert_int_eq(x->strides[i], y->strides[i]);
  }
  ck_assert_uint_eq(x->byte_offset, y->byte_offset);
  ck_assert_int_eq(pf_tensor_is_read_only(a), pf_tensor_is_read_only(b));
}

START_TEST(test_view_compact_ways_agree) {
  pf_object_t* base = iota((int64_t[]){4, 6}, 2);
  pf_object_t *fast, *general, *mid;
  ck_assert_int_eq(pf_tensor_view(base, 3, (int64_t[]){2, 3, 4}, NULL, 0, &fast), 0);
  ck_assert_int_eq(
      pf_tensor_view(base, 3, (int64_t[]){2, 3, 4}, (int64_t[]){12, 4, 1}, 0, &general), 0);
  assert_same_view(fast, general);
  ck_assert(at(fast, (int64_t[]){1, 2, 3}) == 23.0);
  ck_assert_uint_eq(pf_object_strong_count(base), 3);
  pf_object_release(general);

  /* a view of a view: both ways hold the base, not the view between */
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){12}, (int64_t[]){2}, 1, &mid), 0);
  ck_assert_int_eq(pf_tensor_view(mid, 1, (int64_t[]){1}, NULL, 0, &general), 0); /* fast */
  ck_assert_uint_eq(pf_object_strong_count(mid), 1);
  ck_assert_uint_eq(pf_object_strong_count(base), 4);
  ck_assert(at(general, (int64_t[]){0}) == 1.0);
  pf_object_release(general);
  /* mid (stride 2) reaches elements 0..22 from its first: a compact view of 12 lies inside */
  ck_assert_int_eq(pf_tensor_view(mid, 2, (int64_t[]){3, 4}, NULL, 0, &general), 0);
  ck_assert_uint_eq(pf_tensor_dltensor(general)->byte_offset, 8);
  ck_assert(at(general, (int64_t[]){2, 3}) == 12.0); /* element 11 past mid's first */
  pf_object_release(general);
  /* one element past the base's last: refused by the general way's message */
  pf_object_t* bad = (pf_object_t*)&bad;
  ck_assert_int_eq(pf_tensor_view(mid, 1, (int64_t[]){24}, NULL, 0, &bad), -1);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("IndexError", "the view reaches elements 0..23, outside the tensor's 0..22");
  ck_assert_int_eq(pf_tensor_view(mid, 1, (int64_t[]){23}, NULL, 0, &general), 0);
  ck_assert(at(general, (int64_t[]){22}) == 23.0);
  pf_object_release(general);
  pf_object_release(mid);

  /* negative strides: the base reaches elements -3..0 from its first, so a compact view of one
   * element fits and one of two does not */
  pf_object_t* rev;
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){4}, (int64_t[]){-1}, 3, &rev), 0);
  ck_assert_int_eq(pf_tensor_view(rev, 1, (int64_t[]){1}, NULL, 0, &general), 0);
  ck_assert(at(general, (int64_t[]){0}) == 3.0);
  pf_object_release(general);
  ck_assert_int_eq(pf_tensor_view(rev, 1, (int64_t[]){2}, NULL, 0, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "the view reaches elements 0..1, outside the tensor's -3..0");
  pf_object_release(rev);

  /* extents of 0 and ndim 0 take the general way and behave as before */
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){0, 99}, NULL, 0, &general), 0);
  ck_assert_int_eq(pf_dltensor_numel(pf_tensor_dltensor(general)), 0);
  pf_object_release(general);
  pf_object_release(fast);
  ck_assert_uint_eq(pf_object_strong_count(base), 1);
  pf_object_release(base);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A compact view from the first element of a strided tensor may cover as many elements as the
 * tensor's strides reach, but its size is checked as every layout's is: 2^58 float64 elements
 * are 2^64 bits, whose pf_dltensor_nbytes wraps to 0. The short way of pf_tensor_view (strides
 * NULL, offset 0) made that view, which pf_dltensor_check and pf_tensor_from_dltensor then
 * refused; spelled with its strides (the general way) it was refused. */
START_TEST(test_view_compact_size_checked) {
  const int64_t far = (int64_t)1 << 57, n = (int64_t)1 << 58;
  DLTensor desc = {(void*)(uintptr_t)0x10000,
                   PF_DEVICE_CPU,
                   1,
                   PF_DTYPE_FLOAT64,
                   (int64_t[]){3},
                   (int64_t[]){far},
                   0};
  pf_object_t* base;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &base), 0);
  static const char want[] = "pf_tensor_view: argument shape: expected a size that fits in memory "
                             "(a zero extent counted as 1), got shape (288230376151711744,)";
  pf_object_t* v = (pf_object_t*)&v;
  ck_assert_int_eq(pf_tensor_view(base, 1, &n, (int64_t[]){1}, 0, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("ValueError", want);
  v = (pf_object_t*)&v;
  ck_assert_int_eq(pf_tensor_view(base, 1, &n, NULL, 0, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("ValueError", want);
  /* two axes, and a vector type whose lanes make the bits overflow */
  v = (pf_object_t*)&v;
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){n / 4, 4}, NULL, 0, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("ValueError", "got shape (72057594037927936, 4)");
  ck_assert_uint_eq(pf_object_strong_count(base), 1);
  pf_object_release(base);
  desc.dtype = pf_dtype(PF_DL_FLOAT, 32, 4);
  desc.strides = (int64_t[]){far / 2};
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &base), 0);
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){n / 2}, NULL, 0, &v), -1);
  PF_ASSERT_RAISED("ValueError", "expected a size that fits in memory");
  /* one element fewer in bits fits: made, and valid */
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){n / 4}, NULL, 0, &v), 0);
  pf_tensor_spec_t any = {0};
  ck_assert_int_eq(pf_dltensor_check(pf_tensor_dltensor(v), &any, "k", 0, "v"), 0);
  ck_assert_uint_eq(pf_dltensor_nbytes(pf_tensor_dltensor(v)), (uint64_t)1 << 60);
  pf_object_release(v);
  pf_object_release(base);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A compact int4 tensor of 3.5 * 2^60 elements (its bytes, 2^60.6, fit in int64; its bits do
 * not) is valid, and so is a selection of it: the strided description's byte reach was
 * computed in bits first, which overflowed, so pf_dltensor_check refused the view packfn had
 * made (found by fuzz_dlpack). */
START_TEST(test_subbyte_strided_view_of_a_huge_tensor) {
  const int64_t n = INT64_C(144397579306664191);
  int64_t shape[4] = {3, 2, 4, n};
  DLTensor desc = {
      (void*)(uintptr_t)0x10000, PF_DEVICE_CPU, 4, pf_dtype(PF_DL_INT, 4, 1), shape, NULL, 0};
  pf_object_t *base, *v, *again;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &base), 0);
  ck_assert_int_eq(pf_tensor_select(base, 3, 0, &v), 0);
  DLTensor* w = pf_tensor_dltensor(v);
  ck_assert_int_eq(w->ndim, 3);
  ck_assert_int_eq(w->strides[0], 24 * n / 3);
  pf_tensor_spec_t any = {0};
  ck_assert_int_eq(pf_dltensor_check(w, &any, "k", 0, "v"), 0);
  ck_assert_int_eq(pf_tensor_from_dltensor(w, NULL, NULL, &again), 0);
  pf_object_release(again);
  /* 12-bit elements (int4 x 3): a reach of 5 * 2^60 elements is 8.6 * 10^18 bytes, which fit
   * (the bits did not); 7 * 2^60 elements, 1.2 * 10^19 bytes, do not */
  DLTensor wide = {(void*)(uintptr_t)0x10000,
                   PF_DEVICE_CPU,
                   1,
                   pf_dtype(PF_DL_INT, 4, 3),
                   (int64_t[]){2},
                   (int64_t[]){INT64_C(5) << 60},
                   0};
  ck_assert_int_eq(pf_dltensor_check(&wide, &any, "k", 0, "v"), 0);
  wide.strides = (int64_t[]){INT64_C(7) << 60};
  ck_assert_int_eq(pf_dltensor_check(&wide, &any, "k", 0, "v"), -1);
  PF_ASSERT_RAISED("ValueError", "expected strides whose offsets in bytes fit in int64");
  pf_object_release(v);
  pf_object_release(base);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A view whose elements lie within its tensor's but whose bytes, counted from its own first
 * element, pass INT64_MIN (a negative stride far from that element) is refused as its
 * description is: both ways made it, and pf_dltensor_check refused it (found by fuzz_dlpack).
 * The tensor is on a device whose data is a handle, so only int64 limits apply. */
START_TEST(test_view_bytes_from_its_own_first_element) {
  const int64_t s1 = INT64_C(45777191664877567), far = INT64_C(1) << 62;
  DLTensor desc = {
      (void*)(uintptr_t)0x10000, pf_device(PF_DEV_OPENCL, 0), 2, pf_dtype(PF_DL_FLOAT, 16, 1),
      (int64_t[]){2, 2},         (int64_t[]){-far, s1},       0};
  pf_object_t *base, *v = (pf_object_t*)&v;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &base), 0);
  static const char want[] = "argument strides: expected strides whose offsets in bytes fit in "
                             "int64, got strides (-4611686018427387904, -45777191664877567)";
  ck_assert_int_eq(pf_tensor_slice(base, 1, INT64_MAX, INT64_MIN, -1, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("ValueError", want);
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){2, 2}, (int64_t[]){-far, -s1}, s1, &v), -1);
  PF_ASSERT_RAISED("ValueError", want);
  ck_assert_uint_eq(pf_object_strong_count(base), 1);
  /* forward along the axis it is fine, and a valid description */
  ck_assert_int_eq(pf_tensor_slice(base, 1, 0, 2, 1, &v), 0);
  pf_tensor_spec_t any = {0};
  ck_assert_int_eq(pf_dltensor_check(pf_tensor_dltensor(v), &any, "k", 0, "v"), 0);
  pf_object_release(v);
  pf_object_release(base);
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_view_errors) {
  pf_object_t* base = iota((int64_t[]){2, 3}, 2);
  pf_object_t* v = (pf_object_t*)&v;
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){7}, NULL, 0, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("IndexError",
                   "pf_tensor_view: the view reaches elements 0..6, outside the tensor's 0..5");
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){2}, NULL, -1, &v), -1);
  PF_ASSERT_RAISED("IndexError", "reaches elements -1..0");
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){2}, (int64_t[]){INT64_MAX / 2}, 0, &v), -1);
  PF_ASSERT_RAISED("IndexError", "outside the tensor's 0..5");
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){1}, NULL, INT64_MAX, &v), -1);
  PF_ASSERT_RAISED("IndexError", "outside");
  /* the reach of mixed strides, from the validator's one pass: rows down, columns backwards
   * from element 2 reach 0..5 exactly; one element further either way is outside */
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){2, 3}, (int64_t[]){3, -1}, 2, &v), 0);
  ck_assert(at(v, (int64_t[]){1, 2}) == 3.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){2, 3}, (int64_t[]){3, -1}, 1, &v), -1);
  PF_ASSERT_RAISED("IndexError", "the view reaches elements -1..4, outside the tensor's 0..5");
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){2, 3}, (int64_t[]){-3, 1}, 2, &v), -1);
  PF_ASSERT_RAISED("IndexError", "the view reaches elements -1..4, outside the tensor's 0..5");
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){2, 3}, (int64_t[]){-3, 1}, 4, &v), -1);
  PF_ASSERT_RAISED("IndexError", "the view reaches elements 1..6, outside the tensor's 0..5");
  /* strides whose offsets overflow name the axis where the sum first does (axis 1's term
   * fits beside axis 0's; axis 2's alone fits, added to them it does not) */
  ck_assert_int_eq(pf_tensor_view(base, 3, (int64_t[]){2, 3, 3},
                                  (int64_t[]){1, INT64_MAX / 4, INT64_MAX / 2}, 0, &v),
                   -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_view: argument strides: expected strides whose "
                                 "offsets fit in int64, got 4611686018427387903 at axis 2");
  /* an empty view's strides must fit as well (checked on their own way: no element to reach) */
  ck_assert_int_eq(pf_tensor_view(base, 3, (int64_t[]){0, 3, 3},
                                  (int64_t[]){1, INT64_MAX / 4, INT64_MAX / 2}, 0, &v),
                   -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_view: argument strides: expected strides whose "
                                 "offsets fit in int64, got 4611686018427387903 at axis 2");
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){-1}, NULL, 0, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_view: argument shape: expected extents >= 0");
  /* an element count that overflows, and one whose bytes do not fit */
  ck_assert_int_eq(pf_tensor_view(base, 2, (int64_t[]){INT64_MAX / 2, 3}, NULL, 0, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_view: argument shape:");
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){INT64_MAX / 4}, NULL, 0, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_view: argument shape:");
  ck_assert_int_eq(pf_tensor_view(base, 2, NULL, NULL, 0, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_view: argument shape: expected a shape of 2 extents, "
                                 "got NULL");
  ck_assert_int_eq(pf_tensor_view(base, -1, NULL, NULL, 0, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_view: argument ndim: expected ndim in 0..64, got -1");
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){1}, NULL, 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  pf_object_release(base);
  /* nothing inside an empty tensor */
  base = iota((int64_t[]){0}, 1);
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){1}, NULL, 0, &v), -1);
  PF_ASSERT_RAISED("IndexError", "outside the tensor's 0..-1");
  pf_object_release(base);
  /* a view with elements of an empty tensor that has no data: the tensor is at fault */
  DLTensor nodata = {NULL, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, (int64_t[]){0}, NULL, 0};
  ck_assert_int_eq(pf_tensor_from_dltensor(&nodata, NULL, NULL, &base), 0);
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){1}, NULL, 0, &v), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_view: argument tensor: expected data for 1 elements, got NULL");
  pf_object_release(base);
  /* sub-byte elements cannot be offset, by any view function */
  ck_assert_int_eq(
      pf_tensor_empty((int64_t[]){4}, 1, pf_dtype(PF_DL_INT, 4, 1), PF_DEVICE_CPU, &base), 0);
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){2}, NULL, 1, &v), -1);
  PF_ASSERT_RAISED("NotImplementedError", "sub-byte type int4");
  ck_assert_int_eq(pf_tensor_slice(base, 0, 1, 3, 1, &v), -1);
  PF_ASSERT_RAISED("NotImplementedError",
                   "pf_tensor_slice: cannot offset a view by 1 elements of the sub-byte type int4");
  ck_assert_int_eq(pf_tensor_select(base, 0, 2, &v), -1);
  PF_ASSERT_RAISED("NotImplementedError", "pf_tensor_select: cannot offset a view by 2 elements");
  ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){2}, NULL, 0, &v), 0);
  pf_object_release(v);
  pf_object_release(base);
  /* nor can elements of whole bytes and a part (int12, float6_e2m3fnx3: 12 and 18 bits), which
   * are no sub-byte types: the message says what is wrong with them */
  const DLDataType odd[2] = {pf_dtype(PF_DL_INT, 12, 1), pf_dtype(PF_DL_FLOAT6_E2M3FN, 6, 3)};
  const char* const odd_msg[2] = {
      "pf_tensor_slice: cannot offset a view by 1 elements of int12, whose elements are not "
      "whole bytes",
      "pf_tensor_slice: cannot offset a view by 1 elements of float6_e2m3fnx3, whose elements are "
      "not whole bytes"};
  for (int i = 0; i < 2; ++i) {
    ck_assert_int_eq(pf_tensor_empty((int64_t[]){4}, 1, odd[i], PF_DEVICE_CPU, &base), 0);
    ck_assert_int_eq(pf_tensor_slice(base, 0, 1, 3, 1, &v), -1);
    PF_ASSERT_RAISED("NotImplementedError", odd_msg[i]);
    ck_assert_int_eq(pf_tensor_select(base, 0, 2, &v), -1);
    PF_ASSERT_RAISED("NotImplementedError", "whose elements are not whole bytes");
    ck_assert_int_eq(pf_tensor_view(base, 1, (int64_t[]){2}, NULL, 0, &v), 0);
    pf_object_release(v);
    pf_object_release(base);
  }
}
END_TEST

START_TEST(test_view_negative_strides) {
  /* data points at the last element, as NumPy exports a reversed array */
  double buf[4] = {0, 1, 2, 3};
  int64_t shape[1] = {4}, strides[1] = {-1};
  DLTensor desc = {&buf[3], PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, shape, strides, 0};
  pf_object_t *t, *v;
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), 0);
  ck_assert(at(t, (int64_t[]){0}) == 3.0);
  /* forward view from three elements before the first: moves the data pointer */
  ck_assert_int_eq(pf_tensor_view(t, 1, (int64_t[]){4}, NULL, -3, &v), 0);
  ck_assert_ptr_eq(pf_tensor_dltensor(v)->data, &buf[0]);
  ck_assert_uint_eq(pf_tensor_dltensor(v)->byte_offset, 0);
  ck_assert(at(v, (int64_t[]){1}) == 1.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_slice(t, 0, INT64_MAX, INT64_MIN, -1, &v), 0);
  ck_assert(at(v, (int64_t[]){0}) == 0.0);
  ck_assert(at(v, (int64_t[]){3}) == 3.0);
  pf_object_release(v);
  pf_object_release(t);
  /* on a device whose data is a handle, the pointer cannot move */
  desc.device = pf_device(PF_DEV_OPENCL, 0);
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, NULL, NULL, &t), 0);
  ck_assert_int_eq(pf_tensor_view(t, 1, (int64_t[]){4}, NULL, -3, &v), -1);
  PF_ASSERT_RAISED("NotImplementedError", "would start 24 bytes before the data handle");
  pf_object_release(t);
  /* 2^63 bytes before it (2^45 elements of 2^18 bytes): the count in the message is not
   * negated as int64, which cannot hold it (found by fuzz_dlpack under UBSan) */
  DLDataType wide = {kDLFloat, 64, 32768};
  int64_t far_shape[1] = {2}, far_strides[1] = {-(INT64_C(1) << 45)};
  DLTensor far = {&buf[3], pf_device(PF_DEV_OPENCL, 0), 1, wide, far_shape, far_strides, 0};
  ck_assert_int_eq(pf_tensor_from_dltensor(&far, NULL, NULL, &t), 0);
  ck_assert_int_eq(pf_tensor_view(t, 1, (int64_t[]){1}, NULL, -(INT64_C(1) << 45), &v), -1);
  PF_ASSERT_RAISED("NotImplementedError", "would start 9223372036854775808 bytes before");
  pf_object_release(t);
}
END_TEST

START_TEST(test_reshape) {
  pf_object_t* base = iota((int64_t[]){2, 3, 4}, 3);
  pf_object_t* v;
  ck_assert_int_eq(pf_tensor_reshape(base, 2, (int64_t[]){6, -1}, &v), 0);
  DLTensor* dl = pf_tensor_dltensor(v);
  ck_assert_int_eq(dl->shape[1], 4);
  ck_assert(at(v, (int64_t[]){5, 3}) == 23.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_reshape(base, 1, (int64_t[]){-1}, &v), 0);
  ck_assert_int_eq(pf_tensor_dltensor(v)->shape[0], 24);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_reshape(base, 4, (int64_t[]){1, 24, 1, 1}, &v), 0);
  pf_object_release(v);

  pf_object_t* bad = (pf_object_t*)&bad;
  ck_assert_int_eq(pf_tensor_reshape(base, 2, (int64_t[]){5, 5}, &bad), -1);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_reshape: argument shape: cannot view 24 elements of shape "
                   "(2, 3, 4) as (5, 5)");
  ck_assert_int_eq(pf_tensor_reshape(base, 2, (int64_t[]){5, -1}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "as (5, *)");
  ck_assert_int_eq(pf_tensor_reshape(base, 2, (int64_t[]){-1, -1}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "at most one -1, got -1 at axis 1");
  ck_assert_int_eq(pf_tensor_reshape(base, 2, (int64_t[]){-2, 4}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "got -2 at axis 0");
  ck_assert_int_eq(pf_tensor_reshape(base, 2, (int64_t[]){INT64_MAX, 4}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "cannot view 24 elements");
  /* a bad extent after a product that overflowed is named as such (the check stopped at the
   * overflow: -5 was reported as a count mismatch and printed as "*", a second -1 likewise) */
  ck_assert_int_eq(pf_tensor_reshape(base, 3, (int64_t[]){INT64_MAX, 4, -5}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_reshape: argument shape: expected extents >= 0 and "
                                 "at most one -1, got -5 at axis 2");
  ck_assert_int_eq(pf_tensor_reshape(base, 4, (int64_t[]){-1, INT64_MAX, 4, -1}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "at most one -1, got -1 at axis 3");
  ck_assert_int_eq(pf_tensor_reshape(base, 2, NULL, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "got NULL");
  ck_assert_int_eq(pf_tensor_reshape(base, 70, NULL, &bad), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_reshape: argument ndim: expected ndim in 0..64, got 70");
  /* a transposed tensor is not contiguous */
  pf_object_t* tr;
  ck_assert_int_eq(pf_tensor_permute(base, (int32_t[]){2, 1, 0}, &tr), 0);
  ck_assert_int_eq(pf_tensor_reshape(tr, 1, (int64_t[]){24}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "expected a contiguous tensor, got strides (1, 4, 12)");
  pf_object_release(tr);
  pf_object_release(base);
  /* 0 elements: -1 cannot be inferred, but an explicit shape works */
  base = iota((int64_t[]){0, 3}, 2);
  ck_assert_int_eq(pf_tensor_reshape(base, 2, (int64_t[]){0, -1}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "cannot view 0 elements");
  ck_assert_int_eq(pf_tensor_reshape(base, 3, (int64_t[]){3, 0, 7}, &v), 0);
  pf_object_release(v);
  pf_object_release(base);
}
END_TEST

/* A strided tensor that reshape refuses is told to be copied with pf_tensor_to_device only
 * where that copy can be made: host memory of whole-byte elements. A strided int4 tensor (a
 * strided copy of sub-byte elements is NotImplementedError) or device tensor (copies to or
 * from a device need both sides contiguous) got the advice, and following it failed (review). */
START_TEST(test_reshape_advice_only_where_the_copy_works) {
  int64_t shape[2] = {2, 3}, six = 6;
  pf_object_t *t, *tr, *bad = NULL, *c = NULL;
  ck_assert_int_eq(pf_tensor_empty(shape, 2, pf_dtype(PF_DL_INT, 4, 1), PF_DEVICE_CPU, &t), 0);
  ck_assert_int_eq(pf_tensor_permute(t, (int32_t[]){1, 0}, &tr), 0);
  ck_assert_int_eq(pf_tensor_to_device(tr, PF_DEVICE_CPU, &c), -1);
  PF_ASSERT_RAISED("NotImplementedError", "strided copies of int4");
  ck_assert_int_eq(pf_tensor_reshape(tr, 1, &six, &bad), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "pf_tensor_reshape: argument tensor: expected a "
                                          "contiguous tensor, got strides (1, 3)");
  pf_object_release(err);
  pf_object_release(tr);
  pf_object_release(t);
  /* a strided tensor on a device (vulkan: described, never read) */
  float buf[6];
  int64_t st[2] = {1, 2};
  DLTensor d = {buf, pf_device(PF_DEV_VULKAN, 0), 2, PF_DTYPE_FLOAT32, shape, st, 0};
  ck_assert_int_eq(pf_tensor_from_dltensor(&d, NULL, NULL, &t), 0);
  ck_assert_int_eq(pf_tensor_reshape(t, 1, &six, &bad), -1);
  err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "pf_tensor_reshape: argument tensor: expected a "
                                          "contiguous tensor, got strides (1, 2)");
  pf_object_release(err);
  pf_object_release(t);
  /* host memory of whole-byte elements keeps the advice, which works */
  d.device = pf_device(PF_DEV_CUDA_HOST, 0);
  ck_assert_int_eq(pf_tensor_from_dltensor(&d, NULL, NULL, &t), 0);
  ck_assert_int_eq(pf_tensor_reshape(t, 1, &six, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "got strides (1, 2); copy it first with pf_tensor_to_device");
  ck_assert_int_eq(pf_tensor_to_device(t, PF_DEVICE_CPU, &c), 0);
  ck_assert_int_eq(pf_tensor_reshape(c, 1, &six, &bad), 0);
  pf_object_release(bad);
  pf_object_release(c);
  pf_object_release(t);
}
END_TEST

START_TEST(test_slice) {
  pf_object_t* base = iota((int64_t[]){10}, 1);
  pf_object_t* v;
  ck_assert_int_eq(pf_tensor_slice(base, 0, 2, 8, 3, &v), 0); /* 2, 5 */
  ck_assert_int_eq(pf_tensor_dltensor(v)->shape[0], 2);
  ck_assert_int_eq(pf_tensor_dltensor(v)->strides[0], 3);
  ck_assert(at(v, (int64_t[]){1}) == 5.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_slice(base, -1, -3, INT64_MAX, 1, &v), 0); /* 7, 8, 9 */
  ck_assert_int_eq(pf_tensor_dltensor(v)->shape[0], 3);
  ck_assert(at(v, (int64_t[]){0}) == 7.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_slice(base, 0, INT64_MAX, INT64_MIN, -4, &v), 0); /* 9, 5, 1 */
  ck_assert_int_eq(pf_tensor_dltensor(v)->shape[0], 3);
  ck_assert(at(v, (int64_t[]){2}) == 1.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_slice(base, 0, 5, 100, INT64_MAX, &v), 0); /* 5 */
  ck_assert_int_eq(pf_tensor_dltensor(v)->shape[0], 1);
  ck_assert(at(v, (int64_t[]){0}) == 5.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_slice(base, 0, 9, -100, INT64_MIN, &v), 0); /* 9 */
  ck_assert_int_eq(pf_tensor_dltensor(v)->shape[0], 1);
  ck_assert(at(v, (int64_t[]){0}) == 9.0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_slice(base, 0, 8, 2, 1, &v), 0); /* empty */
  ck_assert_int_eq(pf_tensor_dltensor(v)->shape[0], 0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_slice(base, 0, -100, 100, 1, &v), 0); /* clamped: all */
  ck_assert_int_eq(pf_tensor_dltensor(v)->shape[0], 10);
  pf_object_release(v);

  pf_object_t* bad = (pf_object_t*)&bad;
  ck_assert_int_eq(pf_tensor_slice(base, 0, 0, 1, 0, &bad), -1);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_slice: argument step: expected a non-zero step, got 0");
  ck_assert_int_eq(pf_tensor_slice(base, 1, 0, 1, 1, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "pf_tensor_slice: argument axis: expected -1..0, got 1");
  ck_assert_int_eq(pf_tensor_slice(base, -2, 0, 1, 1, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "got -2");
  pf_object_release(base);

  /* 2-d: every other column */
  base = iota((int64_t[]){3, 4}, 2);
  ck_assert_int_eq(pf_tensor_slice(base, 1, 1, 4, 2, &v), 0);
  ck_assert(at(v, (int64_t[]){2, 1}) == 11.0);
  ck_assert(!pf_dltensor_is_contiguous(pf_tensor_dltensor(v)));
  pf_object_release(v);
  pf_object_release(base);
}
END_TEST

START_TEST(test_select_permute) {
  pf_object_t* base = iota((int64_t[]){2, 3, 4}, 3);
  pf_object_t *v, *w;
  ck_assert_int_eq(pf_tensor_select(base, 1, -1, &v), 0); /* [:, 2, :] */
  ck_assert_int_eq(pf_tensor_dltensor(v)->ndim, 2);
  ck_assert(at(v, (int64_t[]){1, 3}) == 23.0);
  ck_assert_int_eq(pf_tensor_select(v, 0, 0, &w), 0);
  ck_assert(at(w, (int64_t[]){1}) == 9.0);
  pf_object_release(w);
  ck_assert_int_eq(pf_tensor_select(v, 0, 1, &w), 0);
  pf_object_t* s;
  ck_assert_int_eq(pf_tensor_select(w, 0, 2, &s), 0); /* a 0-d view */
  ck_assert_int_eq(pf_tensor_dltensor(s)->ndim, 0);
  ck_assert(at(s, NULL) == 22.0);
  pf_object_release(s);
  pf_object_release(w);
  pf_object_release(v);

  ck_assert_int_eq(pf_tensor_permute(base, (int32_t[]){2, 0, -2}, &v), 0);
  DLTensor* dl = pf_tensor_dltensor(v);
  ck_assert_int_eq(dl->shape[0], 4);
  ck_assert_int_eq(dl->shape[1], 2);
  ck_assert_int_eq(dl->shape[2], 3);
  ck_assert(at(v, (int64_t[]){3, 1, 2}) == 23.0);
  ck_assert(at(v, (int64_t[]){1, 0, 2}) == 9.0);
  pf_object_release(v);

  pf_object_t* bad = (pf_object_t*)&bad;
  ck_assert_int_eq(pf_tensor_select(base, 0, 2, &bad), -1);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("IndexError",
                   "pf_tensor_select: argument index: expected -2..1 along axis 0, got 2");
  ck_assert_int_eq(pf_tensor_select(base, 0, -3, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "got -3");
  ck_assert_int_eq(pf_tensor_select(base, 3, 0, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "argument axis: expected -3..2, got 3");
  ck_assert_int_eq(pf_tensor_permute(base, (int32_t[]){0, 0, 1}, &bad), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_permute: argument axes: expected a permutation of 0..2, got 0 at "
                   "position 1");
  ck_assert_int_eq(pf_tensor_permute(base, (int32_t[]){0, 1, 3}, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "got 3 at position 2");
  ck_assert_int_eq(pf_tensor_permute(base, NULL, &bad), -1);
  PF_ASSERT_RAISED("ValueError", "expected 3 axes, got NULL");
  ck_assert_int_eq(pf_tensor_permute(base, (int32_t[]){0, 1, 2}, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  pf_object_release(base);
  /* a 0-d tensor permutes with no axes */
  base = iota(NULL, 0);
  ck_assert_int_eq(pf_tensor_permute(base, NULL, &v), 0);
  pf_object_release(v);
  ck_assert_int_eq(pf_tensor_select(base, 0, 0, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "argument axis");
  pf_object_release(base);
}
END_TEST

/* An axis of a 0-d tensor, or an index along an axis of extent 0, has no valid value: the
 * messages say so instead of printing the empty range "-0..-1" as the one expected (review). */
START_TEST(test_axis_and_index_of_empty_ranges) {
  pf_object_t* base = iota(NULL, 0);
  pf_object_t* bad = (pf_object_t*)&bad;
  ck_assert_int_eq(pf_tensor_select(base, 0, 0, &bad), -1);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("IndexError", "pf_tensor_select: argument axis: expected no axis of a 0-d "
                                 "tensor, got 0");
  ck_assert_int_eq(pf_tensor_slice(base, -1, 0, 1, 1, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "pf_tensor_slice: argument axis: expected no axis of a 0-d "
                                 "tensor, got -1");
  pf_object_release(base);
  base = iota((int64_t[]){2, 0}, 2);
  ck_assert_int_eq(pf_tensor_select(base, 1, -2, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "pf_tensor_select: argument index: expected no index along axis "
                                 "1 of extent 0, got -2");
  ck_assert_int_eq(pf_tensor_select(base, -1, 0, &bad), -1);
  PF_ASSERT_RAISED("IndexError", "expected no index along axis 1 of extent 0, got 0");
  ck_assert_int_eq(pf_tensor_select(base, 0, 2, &bad), -1); /* a non-empty axis: as before */
  PF_ASSERT_RAISED("IndexError", "pf_tensor_select: argument index: expected -2..1 along axis 0, "
                                 "got 2");
  pf_object_release(base);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A tensor object made by hand the way another ABI runtime would: DLTensor at offset 24, no
 * strides. packfn's views and exports must work on it through the ABI alone. */
typedef struct {
  pf_object_t header;
  DLTensor dl;
  int64_t shape[2];
  double data[6];
} foreign_tensor_t;

static int g_foreign_deleted;
static void foreign_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    g_foreign_deleted++;
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

static pf_object_t* make_foreign(void) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(sizeof(foreign_tensor_t), PF_TYPE_TENSOR, foreign_deleter, &obj),
                   0);
  foreign_tensor_t* f = (foreign_tensor_t*)obj;
  f->shape[0] = 2;
  f->shape[1] = 3;
  for (int i = 0; i < 6; ++i)
    f->data[i] = i;
  DLTensor dl = {f->data, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, f->shape, NULL, 0};
  f->dl = dl;
  return obj;
}

START_TEST(test_foreign_tensor_views) {
  g_foreign_deleted = 0;
  pf_object_t* f = make_foreign();
  pf_object_t *v, *w;
  ck_assert_int_eq(pf_tensor_permute(f, (int32_t[]){1, 0}, &v), 0);
  ck_assert(at(v, (int64_t[]){2, 1}) == 5.0);
  ck_assert_int_eq(pf_tensor_slice(v, 0, 1, 3, 1, &w), 0);
  pf_object_release(v);
  pf_object_release(f);
  ck_assert_int_eq(g_foreign_deleted, 0);
  ck_assert(at(w, (int64_t[]){0, 1}) == 4.0);
  pf_object_release(w);
  ck_assert_int_eq(g_foreign_deleted, 1);
}
END_TEST

START_TEST(test_foreign_tensor_checked) {
  /* another runtime's tensor whose description packfn would not have made: its views are
   * refused with the validator's message, before any offset is computed from it */
  g_foreign_deleted = 0;
  pf_object_t* f = make_foreign();
  foreign_tensor_t* ft = (foreign_tensor_t*)f;
  int64_t strides[2] = {INT64_MAX / 2 + 1, 1};
  ft->shape[0] = 3;
  ft->dl.strides = strides;
  pf_object_t* v = (pf_object_t*)&v;
  ck_assert_int_eq(pf_tensor_view(f, 1, (int64_t[]){1}, NULL, 0, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_view: argument tensor: expected strides whose "
                                 "offsets fit in int64, got 4611686018427387904 at axis 0");
  ck_assert_int_eq(pf_tensor_slice(f, 1, 0, 1, 1, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_slice: argument tensor: expected strides");
  ck_assert_int_eq(pf_tensor_select(f, 0, 2, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_select: argument tensor: expected strides");
  ft->dl.strides = NULL;
  ft->shape[0] = -2;
  ck_assert_int_eq(pf_tensor_permute(f, (int32_t[]){1, 0}, &v), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_permute: argument tensor: expected extents >= 0, got -2 at axis 0");
  ck_assert_int_eq(pf_tensor_reshape(f, 1, (int64_t[]){6}, &v), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_reshape: argument tensor: expected extents >= 0");
  /* so is its copy: the message names the tensor, not pf_tensor_empty's shape */
  ck_assert_int_eq(pf_tensor_to_device(f, PF_DEVICE_CPU, &v), -1);
  ck_assert_ptr_null(v);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_to_device: argument tensor: expected extents >= 0, "
                                 "got -2 at axis 0");
  /* made valid again, it views as before */
  ft->shape[0] = 2;
  ck_assert_int_eq(pf_tensor_view(f, 1, (int64_t[]){2}, (int64_t[]){3}, 2, &v), 0);
  ck_assert(at(v, (int64_t[]){1}) == 5.0);
  pf_object_release(v);
  pf_object_release(f);
  ck_assert_int_eq(g_foreign_deleted, 1);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* ---- differential: the short way against the general way ----
 * Every view function on a packfn tensor (which may take the short way) and on a tensor made
 * by hand over the same description (another runtime's: always the general way) must give the
 * same view or the same error, for bases of every kind (negative strides, byte offsets,
 * sub-byte and vector dtypes, empty, 0-d and 64-d tensors, a device whose data is a handle,
 * strides near the int64 limits) and arguments drawn from edge values. A view made is checked
 * against an independent model too: its elements lie within the base's. */
__extension__ typedef __int128 i128;

typedef struct {
  pf_object_t header;
  DLTensor dl;
  int64_t shape[PF_TENSOR_MAX_NDIM];
  int64_t strides[PF_TENSOR_MAX_NDIM];
} hand_tensor_t;

static void hand_deleter(void* self, int flags) {
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

static pf_object_t* make_hand(const DLTensor* d) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(sizeof(hand_tensor_t), PF_TYPE_TENSOR, hand_deleter, &obj), 0);
  hand_tensor_t* h = (hand_tensor_t*)obj;
  h->dl = *d;
  for (int32_t i = 0; i < d->ndim; ++i) {
    h->shape[i] = d->shape[i];
    if (d->strides)
      h->strides[i] = d->strides[i];
  }
  h->dl.shape = h->shape;
  h->dl.strides = d->strides ? h->strides : NULL;
  return obj;
}

static uint64_t g_rng;
static uint64_t rnd(void) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return g_rng >> 33;
}
static int64_t pick(const int64_t* v, size_t n) {
  return v[rnd() % n];
}
#define PICK(...) pick((const int64_t[]){__VA_ARGS__}, sizeof((int64_t[]){__VA_ARGS__}) / 8)

/* Extents, strides and offsets: mostly small (views that succeed), some at the limits. */
static int64_t edge(int64_t small_max) {
  if (rnd() % 4 != 0)
    return (int64_t)(rnd() % (uint64_t)(small_max + 1)) * (rnd() % 3 == 0 ? -1 : 1);
  return PICK(0, 1, -1, 2, -2, INT64_MAX, INT64_MIN, INT64_MAX / 2, INT64_MIN / 2, (int64_t)1 << 62,
              -((int64_t)1 << 62), (int64_t)1 << 31, (int64_t)1 << 59, -((int64_t)1 << 60));
}

/* The lowest and highest element offsets (signed, from the first element) of d; 0 when empty. */
static int reach_of(const DLTensor* d, i128* lo, i128* hi) {
  i128 l = 0, h = 0, step = 1;
  for (int32_t i = d->ndim; i-- > 0;) {
    if (d->shape[i] == 0)
      return 0;
    i128 s = d->strides ? d->strides[i] : step;
    step *= d->shape[i];
    i128 far = s * (d->shape[i] - 1);
    if (far < 0)
      l += far;
    else
      h += far;
  }
  *lo = l;
  *hi = h;
  return 1;
}

/* The view v of base b: its elements (bits, as sub-byte views are never offset) lie within
 * b's, and it shares b's dtype and device. */
static const char* dims_str(const int64_t* d, int32_t n, char* buf, size_t size) {
  size_t at = (size_t)snprintf(buf, size, "(");
  for (int32_t i = 0; d && i < n && at < size; ++i)
    at += (size_t)snprintf(buf + at, size - at, i ? ", %lld" : "%lld", (long long)d[i]);
  if (at < size)
    snprintf(buf + at, size - at, ")");
  return buf;
}

static void check_within(const char* what, pf_object_t* b, pf_object_t* v) {
  DLTensor* x = pf_tensor_dltensor(b);
  DLTensor* y = pf_tensor_dltensor(v);
  pf_object_t* again; /* a description packfn accepts */
  char xs[256], ys[256];
  ck_assert_msg(pf_tensor_from_dltensor(y, NULL, NULL, &again) == 0,
                "%s of data %p shape %s strides %s: %s (view data %p shape %s)", what, x->data,
                dims_str(x->shape, x->ndim, xs, sizeof xs),
                dims_str(x->strides, x->ndim, ys, sizeof ys), pf_error_message(pf_error_peek()),
                y->data, dims_str(y->shape, y->ndim, ys, sizeof ys));
  pf_object_release(again);
  ck_assert(pf_dtype_equal(x->dtype, y->dtype));
  ck_assert(pf_device_equal(x->device, y->device));
  ck_assert_ptr_nonnull(y->strides);
  i128 vlo, vhi, blo, bhi;
  if (!reach_of(y, &vlo, &vhi))
    return; /* empty: reads nothing */
  ck_assert(reach_of(x, &blo, &bhi));
  i128 bits = (i128)x->dtype.bits * x->dtype.lanes;
  i128 start =
      ((i128)(intptr_t)y->data - (intptr_t)x->data + (i128)y->byte_offset - (i128)x->byte_offset) *
      8;
  ck_assert_msg(start % bits == 0, "the view starts inside an element");
  ck_assert(start / bits + vlo >= blo);
  ck_assert(start / bits + vhi <= bhi);
}

/* Both ways' outcomes of one call agree: the same view, or the same error and out NULL. */
static void same_outcome(const char* what, int ra, pf_object_t* va, pf_object_t* ea, int rb,
                         pf_object_t* vb, pf_object_t* eb) {
  ck_assert_msg(ra == rb, "%s: %d (%s) but %d (%s) by hand", what, ra,
                ea ? pf_error_message(ea) : "", rb, eb ? pf_error_message(eb) : "");
  if (ra != 0) {
    ck_assert_int_eq(ra, -1);
    ck_assert_ptr_null(va);
    ck_assert_ptr_null(vb);
    ck_assert_ptr_nonnull(ea);
    ck_assert_ptr_nonnull(eb);
    ck_assert_msg(strcmp(pf_error_kind(ea), pf_error_kind(eb)) == 0 &&
                      strcmp(pf_error_message(ea), pf_error_message(eb)) == 0,
                  "%s: %s: %s but by hand %s: %s", what, pf_error_kind(ea), pf_error_message(ea),
                  pf_error_kind(eb), pf_error_message(eb));
    return;
  }
  ck_assert_ptr_null(ea);
  ck_assert_ptr_null(eb);
  assert_same_view(va, vb);
}

/* One random call of a random view function on `a` (packfn's) and `b` (by hand). */
static pf_object_t* diff_one(pf_object_t* a, pf_object_t* b) {
  DLTensor* d = pf_tensor_dltensor(a);
  int32_t nd = d->ndim;
  int64_t shape[PF_TENSOR_MAX_NDIM + 1], strides[PF_TENSOR_MAX_NDIM + 1];
  int32_t axes[PF_TENSOR_MAX_NDIM];
  pf_object_t *va = (pf_object_t*)&va, *vb = (pf_object_t*)&vb;
  int ra, rb;
  pf_object_t *ea, *eb;
  int op = (int)(rnd() % 5);
  char what[160];
#define BOTH(call_a, call_b)                                                                       \
  do {                                                                                             \
    ra = (call_a);                                                                                 \
    ea = pf_error_take();                                                                          \
    rb = (call_b);                                                                                 \
    eb = pf_error_take();                                                                          \
  } while (0)
  if (op == 0 || op == 1) { /* view, reshape */
    int32_t n = (int32_t)(rnd() % 4 == 0 ? PICK(-1, 0, PF_TENSOR_MAX_NDIM, PF_TENSOR_MAX_NDIM + 1)
                                         : (int64_t)(rnd() % 4));
    int32_t fill = n < 0 ? 0 : n > PF_TENSOR_MAX_NDIM ? PF_TENSOR_MAX_NDIM + 1 : n;
    for (int32_t i = 0; i < fill; ++i) {
      shape[i] = n > 4 ? 1 : edge(4);
      strides[i] = rnd() % 3 == 0 && i < nd ? d->strides[i] : edge(6);
    }
    int nulls = rnd() % 8 == 0;
    const int64_t* sh = nulls ? NULL : shape;
    if (op == 0) {
      const int64_t* st = rnd() % 2 ? strides : NULL;
      int64_t off = edge(8);
      snprintf(what, sizeof what, "view ndim %d off %lld", (int)n, (long long)off);
      BOTH(pf_tensor_view(a, n, sh, st, off, &va), pf_tensor_view(b, n, sh, st, off, &vb));
    } else {
      if (n > 0 && rnd() % 2)
        shape[rnd() % (uint64_t)n] = -1;
      snprintf(what, sizeof what, "reshape ndim %d", (int)n);
      BOTH(pf_tensor_reshape(a, n, sh, &va), pf_tensor_reshape(b, n, sh, &vb));
    }
  } else if (op == 2) {
    int32_t ax = (int32_t)((int64_t)(rnd() % (uint64_t)(2 * nd + 3)) - nd - 1);
    int64_t start = edge(5), stop = edge(5), step = edge(3);
    snprintf(what, sizeof what, "slice axis %d %lld:%lld:%lld", (int)ax, (long long)start,
             (long long)stop, (long long)step);
    BOTH(pf_tensor_slice(a, ax, start, stop, step, &va),
         pf_tensor_slice(b, ax, start, stop, step, &vb));
    if (ra == 0 && nd > 0) { /* Python's slice: len(range(*slice(...).indices(n))) */
      int32_t x = ax < 0 ? ax + nd : ax;
      int64_t n = d->shape[x];
      i128 lo = start, hi = stop;
      if (lo < 0)
        lo += n;
      if (hi < 0)
        hi += n;
      i128 lower = step < 0 ? -1 : 0, upper = step < 0 ? n - 1 : n;
      lo = lo < lower ? lower : lo > upper ? upper : lo;
      hi = hi < lower ? lower : hi > upper ? upper : hi;
      i128 len = step > 0 ? (hi > lo ? (hi - lo + step - 1) / step : 0)
                          : (lo > hi ? (lo - hi + (-(i128)step) - 1) / -(i128)step : 0);
      ck_assert_msg(pf_tensor_dltensor(va)->shape[x] == (int64_t)len, "%s: length %lld", what,
                    (long long)pf_tensor_dltensor(va)->shape[x]);
    }
  } else if (op == 3) {
    int32_t ax = (int32_t)((int64_t)(rnd() % (uint64_t)(2 * nd + 3)) - nd - 1);
    int64_t index = edge(4);
    snprintf(what, sizeof what, "select axis %d index %lld", (int)ax, (long long)index);
    BOTH(pf_tensor_select(a, ax, index, &va), pf_tensor_select(b, ax, index, &vb));
    if (ra == 0)
      ck_assert_int_eq(pf_tensor_dltensor(va)->ndim, nd - 1);
  } else {
    for (int32_t i = 0; i < nd; ++i)
      axes[i] = nd - 1 - i;
    for (int32_t i = nd; i > 1; --i) { /* a random permutation, sometimes spoilt */
      int32_t j = (int32_t)(rnd() % (uint64_t)i), tmp = axes[i - 1];
      axes[i - 1] = axes[j];
      axes[j] = tmp;
    }
    if (nd > 0 && rnd() % 3 == 0)
      axes[rnd() % (uint64_t)nd] = (int32_t)PICK(-1, -nd, -nd - 1, nd, 0, INT32_MIN);
    const int32_t* ax = rnd() % 10 == 0 ? NULL : axes;
    snprintf(what, sizeof what, "permute");
    BOTH(pf_tensor_permute(a, ax, &va), pf_tensor_permute(b, ax, &vb));
  }
#undef BOTH
  same_outcome(what, ra, va, ea, rb, vb, eb);
  pf_object_release(ea);
  pf_object_release(eb);
  if (ra == 0) {
    check_within(what, a, va);
    check_within(what, b, vb);
  }
  pf_object_release(vb);
  return ra == 0 ? va : NULL;
}

/* Base k: 0 and 4 own their memory (pf_tensor_empty), the others are over desc. */
static pf_object_t* make_base(const DLTensor* desc, size_t k) {
  pf_object_t* a;
  if (k == 0 || k == 4) /* owning their memory, one with elements and one without */
    return iota(desc->shape, desc->ndim);
  ck_assert_msg(pf_tensor_from_dltensor(desc, NULL, NULL, &a) == 0, "base %d", (int)k);
  return a;
}

START_TEST(test_view_ways_agree_differential) {
  static double buf[64];
  static int64_t ones[PF_TENSOR_MAX_NDIM];
  for (int i = 0; i < PF_TENSOR_MAX_NDIM; ++i)
    ones[i] = 1;
  void* fake = (void*)(uintptr_t)((uintptr_t)1 << 40);
  void* high = (void*)(uintptr_t)(((uint64_t)1 << 62) + 1); /* lowest byte at 1 */
  const DLDevice vulkan = pf_device(PF_DEV_VULKAN, 0);
  const DLTensor bases[] = {
      {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, (int64_t[]){3, 4}, NULL, 0},
      {&buf[11], PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, (int64_t[]){3, 4}, (int64_t[]){-4, -1}, 0},
      {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, (int64_t[]){3, 4}, (int64_t[]){1, 3}, 8},
      {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, (int64_t[]){3, 4}, (int64_t[]){0, 1}, 0},
      {NULL, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, (int64_t[]){0, 3}, NULL, 0},
      {NULL, PF_DEVICE_CPU, 3, PF_DTYPE_FLOAT32, (int64_t[]){2, 0, 3}, (int64_t[]){-9, 1, 3}, 0},
      {buf, PF_DEVICE_CPU, 0, PF_DTYPE_FLOAT64, NULL, NULL, 0},
      {buf, PF_DEVICE_CPU, 2, {PF_DL_INT, 4, 1}, (int64_t[]){4, 6}, NULL, 0},
      {buf, PF_DEVICE_CPU, 2, {PF_DL_UINT, 1, 8}, (int64_t[]){2, 3}, (int64_t[]){1, 2}, 0},
      {buf, PF_DEVICE_CPU, 2, {PF_DL_FLOAT, 32, 4}, (int64_t[]){3, 2}, NULL, 0},
      {buf, PF_DEVICE_CPU, 1, PF_DTYPE_BOOL, (int64_t[]){5}, NULL, 3},
      {buf, PF_DEVICE_CPU, PF_TENSOR_MAX_NDIM, PF_DTYPE_INT8, ones, NULL, 0},
      {(void*)0x40, vulkan, 2, PF_DTYPE_INT16, (int64_t[]){3, 4}, (int64_t[]){-4, -1}, 0},
      {(void*)0x40, vulkan, 1, PF_DTYPE_INT8, (int64_t[]){3}, (int64_t[]){-((int64_t)1 << 61)}, 0},
      {high, PF_DEVICE_CPU, 1, PF_DTYPE_INT8, (int64_t[]){3}, (int64_t[]){-((int64_t)1 << 61)}, 0},
      {fake, PF_DEVICE_CPU, 2, PF_DTYPE_INT8, (int64_t[]){2, 3}, (int64_t[]){(int64_t)1 << 61, 1},
       (uint64_t)1 << 40},
      {fake, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, (int64_t[]){(int64_t)1 << 40}, NULL, 0},
      {fake, vulkan, 1, PF_DTYPE_INT8, (int64_t[]){4}, (int64_t[]){-1}, 0},
  };
  g_rng = 12345;
  for (size_t k = 0; k < sizeof bases / sizeof bases[0]; ++k) {
    pf_object_t* a = make_base(&bases[k], k);
    for (int round = 0; round < 1500; ++round) {
      pf_object_t* b = make_hand(pf_tensor_dltensor(a));
      pf_object_t* v = diff_one(a, b);
      pf_object_release(b);
      if (v && rnd() % 16 == 0) { /* go on with the view: a view of a packfn view */
        pf_object_release(a);
        a = v;
      } else {
        pf_object_release(v);
      }
      if (round % 100 == 99) { /* back to the base now and then */
        pf_object_release(a);
        a = make_base(&bases[k], k);
      }
    }
    pf_object_release(a);
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

TCase* pf_test_tensor_views_tcase(void) {
  TCase* tc = tcase_create("views");
  tcase_add_test(tc, test_view_general);
  tcase_add_test(tc, test_view_errors);
  tcase_add_test(tc, test_view_bytes_from_its_own_first_element);
  tcase_add_test(tc, test_subbyte_strided_view_of_a_huge_tensor);
  tcase_add_test(tc, test_view_compact_ways_agree);
  tcase_add_test(tc, test_view_compact_size_checked);
  tcase_add_test(tc, test_view_negative_strides);
  tcase_add_test(tc, test_reshape);
  tcase_add_test(tc, test_reshape_advice_only_where_the_copy_works);
  tcase_add_test(tc, test_slice);
  tcase_add_test(tc, test_select_permute);
  tcase_add_test(tc, test_axis_and_index_of_empty_ranges);
  tcase_add_test(tc, test_foreign_tensor_views);
  tcase_add_test(tc, test_foreign_tensor_checked);
  tcase_add_test(tc, test_view_ways_agree_differential);
  return tc;
}
