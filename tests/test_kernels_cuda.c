/* Tests of the CUDA versions of packfn_kernels on a real device: each kernel's result copied
 * back and compared with the CPU version's. Exits 77 (CTest: skipped) when there is no device. */
#include <math.h>

#include "packfn/cuda.h"
#include "packfn/kernels.h"
#include "pf_test.h"

static const DLDevice cpu = {kDLCPU, 0}, gpu = {kDLCUDA, 0};

static pf_object_t* host(const int64_t* shape, int32_t ndim, DLDataType dt, double scale,
                         double shift) {
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_empty(shape, ndim, dt, cpu, &t), 0);
  DLTensor* d = pf_tensor_dltensor(t);
  int64_t n = pf_dltensor_numel(d);
  for (int64_t i = 0; i < n; ++i) {
    double v = scale * sin(0.37 * (double)i + shift);
    if (dt.bits == 64)
      ((double*)pf_dltensor_data(d))[i] = v;
    else
      ((float*)pf_dltensor_data(d))[i] = (float)v;
  }
  return t;
}

static pf_object_t* to(pf_object_t* t, DLDevice dev) {
  pf_object_t* out;
  if (pf_tensor_to_device(t, dev, &out) != 0) {
    pf_object_t* err = pf_error_take();
    ck_abort_msg("copy failed: %s", pf_error_message(err));
  }
  return out;
}

/* Runs `name` on the CPU with host tensors and on the GPU with copies, then compares the
 * outputs (argument indices out_first..n_tensors-1). */
static void compare(const char* name, pf_object_t** hosts, int32_t n_tensors, int32_t out_first,
                    const pf_any_t* scalar, double tol) {
  pf_any_t cpu_args[6], gpu_args[6], r;
  pf_object_t* dev[6];
  for (int32_t i = 0; i < n_tensors; ++i) {
    dev[i] = to(hosts[i], gpu);
    cpu_args[i] = pf_any_object(hosts[i]);
    gpu_args[i] = pf_any_object(dev[i]);
  }
  int32_t n = n_tensors;
  if (scalar) {
    cpu_args[n] = *scalar;
    gpu_args[n] = *scalar;
    n++;
  }
  char cpu_name[96], gpu_name[96];
  snprintf(cpu_name, sizeof cpu_name, PF_KERNELS_PREFIX "%s", name);
  snprintf(gpu_name, sizeof gpu_name, PF_KERNELS_CUDA_PREFIX "%s", name);
  ck_assert_int_eq(pf_global_call(cpu_name, cpu_args, n, &r), 0);
  ck_assert_int_eq(pf_global_call(gpu_name, gpu_args, n, &r), 0);
  ck_assert_int_eq(pf_cuda_stream_synchronize(0, pf_cuda_stream_get(0)), 0);
  for (int32_t i = out_first; i < n_tensors; ++i) {
    pf_object_t* back = to(dev[i], cpu);
    DLTensor* a = pf_tensor_dltensor(hosts[i]);
    DLTensor* b = pf_tensor_dltensor(back);
    int64_t cnt = pf_dltensor_numel(a);
    for (int64_t k = 0; k < cnt; ++k) {
      double x = a->dtype.bits == 64 ? ((double*)pf_dltensor_data(a))[k]
                                     : ((float*)pf_dltensor_data(a))[k];
      double y = b->dtype.bits == 64 ? ((double*)pf_dltensor_data(b))[k]
                                     : ((float*)pf_dltensor_data(b))[k];
      ck_assert_msg(fabs(x - y) <= tol * (1 + fabs(x)), "%s output %d [%lld]: cpu %g gpu %g", name,
                    (int)i, (long long)k, x, y);
    }
    pf_object_release(back);
  }
  for (int32_t i = 0; i < n_tensors; ++i)
    pf_object_release(dev[i]);
}

START_TEST(test_cuda_matches_cpu) {
  const DLDataType dts[2] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}};
  for (int d = 0; d < 2; ++d) {
    DLDataType dt = dts[d];
    double tol = dt.bits == 64 ? 1e-12 : 2e-5;
    int64_t shape[2] = {37, 129}, rows = 37, nb = 5;
    pf_object_t* t[4];
    pf_any_t s;

    t[0] = host(shape, 2, dt, 2, 0);
    t[1] = host(shape, 2, dt, 0, 0);
    s = pf_any_float(1.5);
    compare("add_n", t, 2, 1, &s, tol);
    s = pf_any_float(1e-6);
    compare("rms_norm", t, 2, 1, &s, tol);
    t[2] = host(&rows, 1, dt, 0, 0);
    compare("rms_norm_fwd", t, 3, 1, &s, tol);
    t[3] = host(shape, 2, dt, 0, 0);
    pf_object_t* bwd[4] = {t[0], t[2], t[1], t[3]};
    compare("rms_norm_bwd", bwd, 4, 3, NULL, tol * 10);
    for (int i = 0; i < 4; ++i)
      pf_object_release(t[i]);

    int64_t n = 4096;
    t[0] = host(&n, 1, dt, 10, 0);
    t[1] = host(&n, 1, dt, 0.49, 1.0); /* e = 0.49 * (1 + sin) in [0, 0.98] */
    DLTensor* e = pf_tensor_dltensor(t[1]);
    for (int64_t i = 0; i < n; ++i) {
      if (dt.bits == 64)
        ((double*)e->data)[i] += 0.49;
      else
        ((float*)e->data)[i] += 0.49f;
    }
    t[2] = host(&n, 1, dt, 0, 0);
    t[3] = host(&n, 1, dt, 0, 0);
    compare("kepler", t, 4, 2, NULL, tol * 10);
    for (int i = 0; i < 4; ++i)
      pf_object_release(t[i]);

    t[0] = host(&nb, 1, dt, 1, 0);
    t[1] = host(shape, 2, dt, 3, 1);
    t[2] = host(shape, 2, dt, 0, 0);
    compare("vector_add", t, 3, 2, NULL, tol);
    for (int i = 0; i < 3; ++i)
      pf_object_release(t[i]);
  }
}
END_TEST

START_TEST(test_cpu_tensor_refused_by_cuda_version) {
  int64_t shape[1] = {4};
  pf_object_t* x = host(shape, 1, (DLDataType){kDLFloat, 32, 1}, 1, 0);
  pf_any_t args[3] = {pf_any_object(x), pf_any_object(x), pf_any_float(1)};
  pf_any_t r;
  ck_assert_int_eq(pf_global_call(PF_KERNELS_CUDA_PREFIX "add_n", args, 3, &r), -1);
  PF_ASSERT_RAISED("TypeError", "expected a tensor on cuda");
  pf_object_release(x);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("kernels_cuda");
  TCase* tc = tcase_create("cuda");
  tcase_add_test(tc, test_cuda_matches_cpu);
  tcase_add_test(tc, test_cpu_tensor_refused_by_cuda_version);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  int32_t n = 0;
  if (pf_cuda_device_count(&n) != 0 || n == 0) {
    pf_error_clear();
    printf("test_kernels_cuda: skipped: no CUDA device\n");
    return 77;
  }
  SRunner* sr = srunner_create(make_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
