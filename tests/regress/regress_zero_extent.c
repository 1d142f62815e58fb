/* Regression test, issue 10 defect 5: a tensor with a zero extent and huge other extents,
 * int8[0, 2^62, 4], passes validation because tensor.c skips the stride checks when there
 * are no elements; its compact strides (2^64, 4, 1) overflow int64 (UB, wrong strides in
 * release builds). Expected after the fix: every way in refuses it with ValueError.
 * Today: pf_tensor_empty, pf_tensor_from_dltensor and pf_tensor_from_dlpack accept it (and
 * UBSan reports the signed overflow in the stride computation). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

static int bad;

static void expect_refused(const char* what, int rc, pf_object_t* t) {
  pf_object_t* err = pf_error_take();
  if (rc == 0) {
    const int64_t* st = pf_tensor_dltensor(t)->strides;
    if (st)
      fprintf(stderr, "FAIL: %s accepted int8[0, 2^62, 4] with strides (%lld, %lld, %lld)\n", what,
              (long long)st[0], (long long)st[1], (long long)st[2]);
    else
      fprintf(stderr, "FAIL: %s accepted int8[0, 2^62, 4]\n", what);
    bad = 1;
    pf_object_release(t);
  } else if (!err || strcmp(pf_error_kind(err), PF_ERR_VALUE) != 0) {
    fprintf(stderr, "FAIL: %s: expected ValueError, got %s\n", what,
            err ? pf_error_kind(err) : "none");
    bad = 1;
  }
  pf_object_release(err);
}

static int deleted;
static void managed_deleter(DLManagedTensor* self) {
  (void)self;
  ++deleted;
}

int main(void) {
  int64_t shape[3] = {0, INT64_C(4611686018427387904), 4};
  DLDataType i8 = {kDLInt, 8, 1};
  DLDevice cpu = {kDLCPU, 0};
  pf_object_t* t = NULL;
  int rc = pf_tensor_empty(shape, 3, i8, cpu, &t);
  expect_refused("pf_tensor_empty", rc, t);

  static char byte;
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  desc.data = &byte;
  desc.device = cpu;
  desc.ndim = 3;
  desc.dtype = i8;
  desc.shape = shape;
  t = NULL;
  rc = pf_tensor_from_dltensor(&desc, NULL, NULL, &t);
  expect_refused("pf_tensor_from_dltensor", rc, t);

  DLManagedTensor managed;
  memset(&managed, 0, sizeof managed);
  managed.dl_tensor = desc;
  managed.deleter = managed_deleter;
  t = NULL;
  rc = pf_tensor_from_dlpack(&managed, &t);
  expect_refused("pf_tensor_from_dlpack", rc, t);
  if (!bad)
    printf("ok: int8[0, 2^62, 4] refused everywhere\n");
  return bad;
}
