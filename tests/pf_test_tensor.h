/* Helpers shared by the tensor suite's files: test_tensor.c (data types, devices, creating
 * tensors, DLTensor helpers and checks; the suite's main) and test_tensor_view.c (views). */
#ifndef PF_TEST_TENSOR_H_
#define PF_TEST_TENSOR_H_

#include <stdint.h>

#include "pf_test.h"

/* A CPU float64 tensor of `shape` holding 0, 1, 2, ... in row-major order. */
static inline pf_object_t* iota(const int64_t* shape, int32_t ndim) {
  pf_object_t* t = NULL;
  ck_assert_int_eq(pf_tensor_empty(shape, ndim, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &t), 0);
  DLTensor* dl = pf_tensor_dltensor(t);
  double* p = pf_dltensor_data(dl);
  for (int64_t i = 0; i < pf_dltensor_numel(dl); ++i)
    p[i] = (double)i;
  return t;
}

/* The float64 element of `t` at `idx` (ndim entries), read through shape and strides. */
static inline double at(pf_object_t* t, const int64_t* idx) {
  DLTensor* dl = pf_tensor_dltensor(t);
  int64_t off = 0;
  for (int32_t i = 0; i < dl->ndim; ++i) {
    ck_assert(idx[i] >= 0 && idx[i] < dl->shape[i]);
    off += idx[i] * dl->strides[i];
  }
  return ((const double*)pf_dltensor_data(dl))[off];
}

/* test_tensor_view.c's TCase "views" (the third of the suite's four). */
TCase* pf_test_tensor_views_tcase(void);

#endif
