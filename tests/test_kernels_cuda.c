/* Tests of libpackfn_kernels_cuda. Everywhere: its registration and export metadata, and the
 * CPU library's C entries reaching it for CUDA tensors. On a real device: each kernel's result
 * copied back and compared with the CPU version's, and refusals; without one those print
 * "skipped: no CUDA device". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "packfn/cuda.h"
#include "packfn/kernels.h"
#include "packfn/module.h"
#include "pf_test.h"

/* Number of CUDA devices, printing the skip notice when there is none. */
static int32_t gpus(const char* test) {
  int32_t n = 0;
  if (pf_cuda_device_count(&n) != 0)
    pf_error_clear();
  if (n == 0)
    printf("test_kernels_cuda: %s: skipped: no CUDA device\n", test);
  return n;
}

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
  if (gpus("test_cuda_matches_cpu") == 0)
    return;
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

/* ---- everywhere ---- */

START_TEST(test_cuda_registered_and_exported) {
  ck_assert_int_eq(pf_kernels_cuda_count(), pf_kernels_count());
  ck_assert_int_eq(pf_kernels_have_cuda(), 1);
  ck_assert_int_eq(pf_global_static_failures(), 0);
  pf_object_t* mod;
  ck_assert_int_eq(pf_module_load(PF_KERNELS_CUDA_LIBRARY, &mod), 0);
  pf_export_info_t* list;
  size_t n;
  ck_assert_int_eq(pf_module_list(mod, &list, &n), 0);
  ck_assert_uint_eq(n, (size_t)pf_kernels_count());
  for (size_t i = 0; i < n; ++i) {
    /* export cuda_<name>, registered as packfn.kernels.cuda.<name>, same signature text */
    ck_assert_int_eq(strncmp(list[i].name, "cuda_", 5), 0);
    char name[96];
    snprintf(name, sizeof name, PF_KERNELS_CUDA_PREFIX "%s", list[i].name + 5);
    pf_object_t* registered;
    ck_assert_int_eq(pf_global_get(name, &registered), 0);
    ck_assert_msg(registered != NULL, "%s is not registered", name);
    ck_assert_ptr_nonnull(list[i].signature);
    ck_assert_str_eq(list[i].signature, pf_function_signature(registered));
    ck_assert_ptr_nonnull(strstr(list[i].doc, "(CUDA, current stream)"));
    pf_object_release(registered);
    if (strcmp(list[i].name, "cuda_kepler") == 0)
      ck_assert_str_eq(list[i].signature, "kepler_cuda(mean_anomaly: Tensor, eccentricity: Tensor, "
                                          "sin_e: Tensor, cos_e: Tensor) -> None");
  }
  pf_module_list_free(list);
  pf_object_release(mod);
}
END_TEST

/* Without a device, a CUDA tensor given to a C entry of the CPU library reaches the CUDA version,
 * which says there is no CUDA device. */
START_TEST(test_c_entry_without_device) {
  int32_t n = 0;
  ck_assert_int_eq(pf_cuda_device_count(&n), 0);
  if (n > 0)
    return; /* the fake tensors below are for machines without a GPU */
  float data[4] = {0}, sin_data[4] = {0}, cos_data[4] = {0};
  int64_t shape[1] = {4};
  DLTensor fake = {data, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  ck_assert_int_eq(pf_kernel_add_n(&fake, &fake, 1), -1);
  PF_ASSERT_RAISED("RuntimeError", "no CUDA device");
  /* kepler fails copying the eccentricities to the host for their check */
  DLTensor fake_sin = fake, fake_cos = fake;
  fake_sin.data = sin_data;
  fake_cos.data = cos_data;
  ck_assert_int_eq(pf_kernel_kepler(&fake, &fake, &fake_sin, &fake_cos), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_msg(strstr(pf_error_message(err), "no CUDA device") != NULL, "message: %s",
                pf_error_message(err));
  pf_object_release(err);
}
END_TEST

/* ---- with a GPU ---- */

START_TEST(test_kepler_cuda_refuses_bad_eccentricity) {
  if (gpus("test_kepler_cuda_refuses_bad_eccentricity") == 0)
    return;
  int64_t n = 3;
  pf_object_t* m = host(&n, 1, (DLDataType){kDLFloat, 64, 1}, 1, 0);
  pf_object_t* e = host(&n, 1, (DLDataType){kDLFloat, 64, 1}, 0, 0);
  ((double*)pf_tensor_dltensor(e)->data)[1] = NAN;
  pf_object_t *dm = to(m, gpu), *de = to(e, gpu), *ds = to(m, gpu), *dc = to(m, gpu);
  pf_any_t args[4] = {pf_any_object(dm), pf_any_object(de), pf_any_object(ds), pf_any_object(dc)};
  pf_any_t r;
  ck_assert_int_eq(pf_global_call(PF_KERNELS_CUDA_PREFIX "kepler", args, 4, &r), -1);
  PF_ASSERT_RAISED("ValueError", "kepler_cuda: argument 1 (eccentricity): expected values in "
                                 "[0, 1), got nan at index 1");
  ck_assert_int_eq(pf_kernel_kepler(pf_tensor_dltensor(dm), pf_tensor_dltensor(de),
                                    pf_tensor_dltensor(ds), pf_tensor_dltensor(dc)),
                   -1);
  PF_ASSERT_RAISED("ValueError", "argument 1 (eccentricity)");
  pf_object_t* objs[6] = {m, e, dm, de, ds, dc};
  for (int i = 0; i < 6; ++i)
    pf_object_release(objs[i]);
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

/* The CUDA versions refuse a read-only tensor (a read-only DLPack producer's) as an output, as
 * the CPU ones do, before they look at its device: no GPU needed. */
static void free_versioned(pf_dl_managed_tensor_versioned_t* m) {
  free(m);
}

START_TEST(test_cuda_read_only_output_refused) {
  static float data[4] = {1, 2, 3, 4};
  static int64_t shape[1] = {4};
  pf_dl_managed_tensor_versioned_t* m = calloc(1, sizeof *m);
  ck_assert_ptr_nonnull(m);
  m->version.major = PF_DLPACK_VERSIONED_MAJOR;
  m->version.minor = PF_DLPACK_VERSIONED_MINOR;
  m->deleter = free_versioned;
  m->flags = PF_DLPACK_FLAG_READ_ONLY;
  m->dl_tensor.data = data;
  m->dl_tensor.device = cpu;
  m->dl_tensor.ndim = 1;
  m->dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
  m->dl_tensor.shape = shape;
  pf_object_t* ro;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(m, &ro), 0);
  pf_object_t* x = host(shape, 1, (DLDataType){kDLFloat, 32, 1}, 1, 0);
  pf_any_t args[3] = {pf_any_object(x), pf_any_object(ro), pf_any_float(1e-5)};
  pf_any_t r;
  ck_assert_int_eq(pf_global_call(PF_KERNELS_CUDA_PREFIX "rms_norm", args, 3, &r), -1);
  PF_ASSERT_RAISED("ValueError", "rms_norm_cuda: argument 1 (out): expected a writable tensor");
  ck_assert(data[0] == 1 && data[3] == 4);
  pf_object_release(x);
  pf_object_release(ro);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("kernels_cuda");
  TCase* tc = tcase_create("cuda");
  tcase_add_test(tc, test_cuda_registered_and_exported);
  tcase_add_test(tc, test_c_entry_without_device);
  tcase_add_test(tc, test_cpu_tensor_refused_by_cuda_version);
  tcase_add_test(tc, test_cuda_read_only_output_refused);
  tcase_add_test(tc, test_cuda_matches_cpu);
  tcase_add_test(tc, test_kepler_cuda_refuses_bad_eccentricity);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
