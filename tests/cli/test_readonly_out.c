/* test_readonly_out.c: the kernels refuse a read-only tensor (a DLPack producer's, as a
 * read-only NumPy array reaches them from Python) as an argument they write, through the shared
 * check of kernels/kcheck.c, and still accept it as an input. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/kernels.h"
#include "packfn/packfn.h"

static float g_x[4] = {1, 2, 3, 4};
static float g_y[4] = {9, 9, 9, 9};
static int64_t g_shape[1] = {4};

/* A tensor over `data` imported from a versioned DLPack producer, read-only when asked. */
static pf_object_t* import(float* data, int read_only) {
  pf_dl_managed_tensor_versioned_t* m = calloc(1, sizeof *m);
  ck_assert_ptr_nonnull(m);
  m->version.major = PF_DLPACK_VERSIONED_MAJOR;
  m->version.minor = PF_DLPACK_VERSIONED_MINOR;
  m->deleter = (void (*)(pf_dl_managed_tensor_versioned_t*))free;
  m->flags = read_only ? PF_DLPACK_FLAG_READ_ONLY : 0;
  m->dl_tensor.data = data;
  m->dl_tensor.device = PF_DEVICE_CPU;
  m->dl_tensor.ndim = 1;
  m->dl_tensor.dtype = PF_DTYPE_FLOAT32;
  m->dl_tensor.shape = g_shape;
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(m, &t), 0);
  ck_assert_int_eq(pf_tensor_is_read_only(t), read_only);
  return t;
}

/* Calls `name` with args; returns the error message ("" on success). */
static const char* call(const char* name, pf_any_t* args, int n, char* buf, size_t size) {
  pf_any_t r = pf_any_none();
  buf[0] = '\0';
  if (pf_global_call(name, args, n, &r) != 0) {
    pf_object_t* err = pf_error_take();
    snprintf(buf, size, "%s: %s", pf_error_kind(err), pf_error_message(err));
    pf_object_release(err);
  }
  pf_any_release(&r);
  return buf;
}

START_TEST(test_read_only_output_refused) {
  (void)pf_kernels_count(); /* keeps the kernel library linked */
  pf_object_t* x = import(g_x, 1);
  pf_object_t* y = import(g_y, 1);
  char msg[256];
  pf_any_t args[3] = {pf_any_object(x), pf_any_object(y), pf_any_float(1e-5)};
  ck_assert_str_eq(call("packfn.kernels.rms_norm", args, 3, msg, sizeof msg),
                   "ValueError: rms_norm: argument 1 (out): expected a writable tensor, got a "
                   "read-only one");
  ck_assert(g_y[0] == 9 && g_y[3] == 9); /* not written */
  args[2] = pf_any_float(2);
  ck_assert_str_eq(call("packfn.kernels.add_n", args, 3, msg, sizeof msg),
                   "ValueError: add_n: argument 1 (out): expected a writable tensor, got a "
                   "read-only one");
  /* a read-only input with a writable output is fine */
  pf_object_t* w = import(g_y, 0);
  args[1] = pf_any_object(w);
  ck_assert_str_eq(call("packfn.kernels.add_n", args, 3, msg, sizeof msg), "");
  ck_assert(g_y[0] == 3 && g_y[3] == 6);
  /* the second output of kepler, and the arity error still comes first */
  pf_any_t k[4] = {pf_any_object(w), pf_any_object(w), pf_any_object(w), pf_any_object(x)};
  ck_assert_str_eq(call("packfn.kernels.kepler", k, 4, msg, sizeof msg),
                   "ValueError: kepler: argument 3 (cos_e): expected a writable tensor, got a "
                   "read-only one");
  ck_assert_str_eq(call("packfn.kernels.kepler", k, 3, msg, sizeof msg),
                   "TypeError: kepler: expected 4 arguments, got 3");
  pf_object_release(w);
  pf_object_release(x);
  pf_object_release(y);
}
END_TEST

int main(void) {
  Suite* s = suite_create("readonly_out");
  TCase* tc = tcase_create("kernels");
  tcase_add_test(tc, test_read_only_output_refused);
  suite_add_tcase(s, tc);
  SRunner* sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
