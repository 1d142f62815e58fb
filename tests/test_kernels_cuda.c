/* Tests of libpackfn_kernels_cuda. Everywhere: its registration and export metadata, and the
 * CPU library's C entries reaching it for CUDA tensors. On a real device: each kernel's result
 * copied back and compared with the CPU version's, refusals, launches on the thread's current
 * stream (seen by graph capture), launch errors, pinned and managed memory; without one those
 * print "skipped: no CUDA device". */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

/* When set, compare() leaves a CUDA error in the runtime's last-error slot right before each
 * GPU call, as a host's failed call that nobody checked does, and checks that the call neither
 * fails with it nor takes it away from the host. */
static int unchecked_error_before_gpu_call;

/* A CUDA call that fails on the host, before any work is queued (nothing sticky), and whose
 * error nobody reads: it stays in the thread's last-error slot. */
static void leave_unchecked_cuda_error(void) {
  char buf[4] = {0};
  ck_assert_int_eq(cudaMemcpy(buf, buf + 2, 2, (enum cudaMemcpyKind)42),
                   cudaErrorInvalidMemcpyDirection);
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
  if (unchecked_error_before_gpu_call)
    leave_unchecked_cuda_error();
  if (pf_global_call(gpu_name, gpu_args, n, &r) != 0) {
    pf_object_t* err = pf_error_take();
    ck_abort_msg("%s: %s", gpu_name, err ? pf_error_message(err) : "failed without an error");
  }
  if (unchecked_error_before_gpu_call) /* still the host's to read (and cleared here) */
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
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
      /* asserted only when it fails: each passing ck_assert costs a write (millions here) */
      if (!(fabs(x - y) <= tol * (1 + fabs(x))))
        ck_abort_msg("%s output %d [%lld]: cpu %g gpu %g", name, (int)i, (long long)k, x, y);
    }
    pf_object_release(back);
  }
  for (int32_t i = 0; i < n_tensors; ++i)
    pf_object_release(dev[i]);
}

/* Every kernel in both precisions against the CPU version, on small shapes. */
static void compare_every_kernel(void) {
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

START_TEST(test_cuda_matches_cpu) {
  if (gpus("test_cuda_matches_cpu") == 0)
    return;
  compare_every_kernel();
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
  /* the kernel and the device are named, pf_cuda_device_enter's error is the cause (its message
   * named only pf_cuda_device_enter before, review) */
  pf_object_t* e0 = pf_error_take();
  ck_assert_ptr_nonnull(e0);
  ck_assert_str_eq(pf_error_kind(e0), "RuntimeError");
  ck_assert_msg(strncmp(pf_error_message(e0), "add_n_cuda: cannot run on cuda:0: ", 34) == 0 &&
                    strstr(pf_error_message(e0), "no CUDA device") != NULL,
                "message: %s", pf_error_message(e0));
  pf_object_t* cause = pf_error_cause(e0);
  ck_assert_ptr_nonnull(cause);
  ck_assert_msg(strncmp(pf_error_message(cause), "pf_cuda_device_enter: ", 22) == 0, "cause: %s",
                pf_error_message(cause));
  pf_object_release(e0);
  /* kepler fails at the check of its eccentricities, which runs on the device */
  DLTensor fake_sin = fake, fake_cos = fake;
  fake_sin.data = sin_data;
  fake_cos.data = cos_data;
  ck_assert_int_eq(pf_kernel_kepler(&fake, &fake, &fake_sin, &fake_cos), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_msg(strncmp(pf_error_message(err), "kepler_cuda: cannot run on cuda:0: ", 35) == 0 &&
                    strstr(pf_error_message(err), "no CUDA device") != NULL,
                "message: %s", pf_error_message(err));
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

/* Calls kepler_cuda with the eccentricities `e` (host, copied to the device) and expects the
 * exact ValueError `want`. */
static void expect_kepler_refusal(pf_object_t* m_dev, pf_object_t* e, const char* want) {
  pf_object_t* de = to(e, gpu);
  pf_object_t *ds = to(e, gpu), *dc = to(e, gpu);
  pf_any_t args[4] = {pf_any_object(m_dev), pf_any_object(de), pf_any_object(ds),
                      pf_any_object(dc)};
  pf_any_t r;
  ck_assert_int_eq(pf_global_call(PF_KERNELS_CUDA_PREFIX "kepler", args, 4, &r), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_kind(err), "ValueError");
  ck_assert_str_eq(pf_error_message(err), want);
  pf_object_release(err);
  pf_object_release(dc);
  pf_object_release(ds);
  pf_object_release(de);
}

static void set_value(pf_object_t* t, int64_t i, double v) {
  DLTensor* d = pf_tensor_dltensor(t);
  if (d->dtype.bits == 64)
    ((double*)d->data)[i] = v;
  else
    ((float*)d->data)[i] = (float)v;
}

/* The eccentricities are checked on the device: among several bad values (below 0, NaN, above
 * 1, exactly 1) spread over many blocks, the first index is reported, as the CPU check does,
 * with its value printed as the CPU prints it; then the next once that one is fixed. */
START_TEST(test_kepler_cuda_reports_first_bad_eccentricity) {
  if (gpus("test_kepler_cuda_reports_first_bad_eccentricity") == 0)
    return;
  const DLDataType dts[2] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}};
  for (int d = 0; d < 2; ++d) {
    int64_t small = 4;
    pf_object_t* m = host(&small, 1, dts[d], 0, 0);
    pf_object_t* e = host(&small, 1, dts[d], 0, 0);
    const double values[4] = {0.1, 0.2, 1.5, 0.3};
    for (int64_t i = 0; i < small; ++i)
      set_value(e, i, values[i]);
    pf_object_t* dm = to(m, gpu);
    expect_kepler_refusal(
        dm, e,
        "kepler_cuda: argument 1 (eccentricity): expected values in [0, 1), got 1.5 at index 2");
    pf_object_release(dm);
    pf_object_release(e);
    pf_object_release(m);

    int64_t n = 1000003; /* several grid strides of blocks */
    m = host(&n, 1, dts[d], 1, 0);
    e = host(&n, 1, dts[d], 0.25, 0); /* in [-0.25, 0.25]: made good below */
    for (int64_t i = 0; i < n; ++i)
      set_value(e, i, 0.5 + 0.4 * sin((double)i));
    set_value(e, 999999, 1.0);
    set_value(e, 900000, 1.5);
    set_value(e, 600001, NAN);
    set_value(e, 300002, -0.25);
    dm = to(m, gpu);
    expect_kepler_refusal(dm, e,
                          "kepler_cuda: argument 1 (eccentricity): expected values in [0, 1), got "
                          "-0.25 at index 300002");
    set_value(e, 300002, 0.5);
    expect_kepler_refusal(dm, e,
                          "kepler_cuda: argument 1 (eccentricity): expected values in [0, 1), got "
                          "nan at index 600001");
    set_value(e, 600001, 0.5);
    expect_kepler_refusal(dm, e,
                          "kepler_cuda: argument 1 (eccentricity): expected values in [0, 1), got "
                          "1.5 at index 900000");
    set_value(e, 900000, 0.5);
    expect_kepler_refusal(dm, e,
                          "kepler_cuda: argument 1 (eccentricity): expected values in [0, 1), got "
                          "1 at index 999999");
    pf_object_release(dm);
    pf_object_release(e);
    pf_object_release(m);
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* rms_norm, rms_norm_fwd and rms_norm_bwd against the CPU on the shapes that take each CUDA
 * path: few long rows split over several blocks (aligned rows in packs, odd lengths one value at
 * a time, one row of a million values), rows held in registers (1, 2, 4 and 8 packs a thread)
 * and rows too long for them. */
static void compare_rms_norm(DLDataType dt, int64_t rows, int64_t cols) {
  double tol = dt.bits == 64 ? 1e-12 : 2e-5;
  int64_t shape[2] = {rows, cols};
  pf_object_t* t[4] = {host(shape, 2, dt, 2, 0), host(shape, 2, dt, 0, 0), host(&rows, 1, dt, 0, 0),
                       host(shape, 2, dt, 0, 0)};
  pf_any_t s = pf_any_float(1e-6);
  compare("rms_norm", t, 2, 1, &s, tol);
  compare("rms_norm_fwd", t, 3, 1, &s, tol);
  pf_object_t* bwd[4] = {t[0], t[2], t[1], t[3]};
  compare("rms_norm_bwd", bwd, 4, 3, NULL, tol * 10);
  for (int i = 0; i < 4; ++i)
    pf_object_release(t[i]);
}

START_TEST(test_cuda_rms_norm_row_paths_match_cpu) {
  if (gpus("test_cuda_rms_norm_row_paths_match_cpu") == 0)
    return;
  const DLDataType dts[2] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}};
  const int64_t shapes[][2] = {{2, 65536}, {3, 50001}, {1, 1048573}, {300, 8192},
                               {5, 4096},  {6, 1000},  {37, 132}};
  for (int d = 0; d < 2; ++d)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
      compare_rms_norm(dts[d], shapes[i][0], shapes[i][1]);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A CUDA error that the host left unchecked in the runtime's last-error slot (a failed
 * cudaMemcpy here; a host's cudaMalloc that ran out of memory, as a caching allocator retries
 * after) is not a kernel's: every kernel (rms_norm also split over blocks, kepler with its
 * check on the device) succeeds, writes what the CPU writes, and leaves the error to the host.
 * The launchers read cudaGetLastError after their <<<>>> launch, and failed with the host's error
 * as their own ("add_n_cuda: add_n kernel launch failed: invalid copy direction for memcpy")
 * although the kernel had been queued and ran (review). */
START_TEST(test_cuda_kernels_ignore_earlier_unchecked_error) {
  if (gpus("test_cuda_kernels_ignore_earlier_unchecked_error") == 0)
    return;
  unchecked_error_before_gpu_call = 1;
  compare_every_kernel();
  compare_rms_norm((DLDataType){kDLFloat, 32, 1}, 2, 65536);
  compare_rms_norm((DLDataType){kDLFloat, 64, 1}, 3, 50001);
  unchecked_error_before_gpu_call = 0;
  ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
  PF_ASSERT_NO_ERROR();
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

/* ---- the current stream (pf_stream_set) ---- */

/* A non-blocking stream: the legacy default stream, where the setup copies run, neither waits
 * for it nor makes it wait. */
static cudaStream_t user_stream(void) {
  cudaStream_t s = NULL;
  ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  return s;
}

/* Makes s the calling thread's current stream for cuda:0; returns the one it replaces. */
static void* set_stream(void* s) {
  void* prev = &prev;
  ck_assert_int_eq(pf_stream_set(gpu, s, &prev), 0);
  return prev;
}

/* A host function queued on a stream holds it for `ms` milliseconds, then marks itself done. */
typedef struct {
  long ms;
  atomic_int done;
} blocker_t;

static void CUDART_CB block_stream(void* arg) {
  blocker_t* b = arg;
  struct timespec t = {b->ms / 1000, (b->ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
  atomic_store(&b->done, 1);
}

static void copy_out(void* dst, pf_object_t* dev) {
  DLTensor* d = pf_tensor_dltensor(dev);
  ck_assert_int_eq(cudaMemcpy(dst, pf_dltensor_data(d), pf_dltensor_nbytes(d), cudaMemcpyDefault),
                   cudaSuccess);
}

/* One kernel's arguments: each a 37x129 matrix (M), a vector of its 37 rows (R) or of 5 (B);
 * `outs` has bit i set when argument i is written; `scalar` (when not NAN) comes last. */
typedef struct {
  const char* name;
  const char* kinds;
  unsigned outs;
  double scalar;
} kcase_t;

static const kcase_t stream_cases[] = {
    {"add_n", "MM", 1u << 1, 1.5},
    {"rms_norm", "MM", 1u << 1, 1e-6},
    {"rms_norm_fwd", "MMR", (1u << 1) | (1u << 2), 1e-6},
    {"rms_norm_bwd", "MRMM", 1u << 3, NAN},
    {"vector_add", "BMM", 1u << 2, NAN},
};

/* The graph has at least one node, and a kernel among them. */
static void check_has_kernel(cudaGraph_t graph, const char* name) {
  cudaGraphNode_t nodes[16];
  size_t count = 0;
  ck_assert_int_eq(cudaGraphGetNodes(graph, NULL, &count), cudaSuccess);
  ck_assert_msg(count >= 1 && count <= 16, "%s: %zu nodes captured", name, count);
  ck_assert_int_eq(cudaGraphGetNodes(graph, nodes, &count), cudaSuccess);
  int kernels = 0;
  for (size_t i = 0; i < count; ++i) {
    enum cudaGraphNodeType type;
    ck_assert_int_eq(cudaGraphNodeGetType(nodes[i], &type), cudaSuccess);
    kernels += type == cudaGraphNodeTypeKernel;
  }
  ck_assert_msg(kernels >= 1, "%s: no kernel node among %zu", name, count);
}

/* Runs case c once on the default stream for the expected outputs, then again with s current,
 * captured from s into a graph: the launch must land in the graph (a launch on any other stream
 * would run at once and escape the capture), leaving the outputs unwritten until the graph runs
 * on s. */
static void run_captured(const kcase_t* c, cudaStream_t s) {
  int64_t shape[2] = {37, 129}, rows = 37, nb = 5;
  const DLDataType f32 = {kDLFloat, 32, 1};
  int32_t n = (int32_t)strlen(c->kinds);
  pf_object_t* dev[4];
  void* expected[4] = {NULL};
  void* seen[4] = {NULL};
  size_t nbytes[4];
  pf_any_t args[5], r;
  for (int32_t i = 0; i < n; ++i) {
    char k = c->kinds[i];
    pf_object_t* h = k == 'M'   ? host(shape, 2, f32, 1.0 + i, 0.3 * i)
                     : k == 'R' ? host(&rows, 1, f32, 0.5, 2.0)
                                : host(&nb, 1, f32, 1.0, 1.0);
    dev[i] = to(h, gpu);
    pf_object_release(h);
    args[i] = pf_any_object(dev[i]);
    nbytes[i] = pf_dltensor_nbytes(pf_tensor_dltensor(dev[i]));
  }
  int32_t nargs = n;
  if (!isnan(c->scalar))
    args[nargs++] = pf_any_float(c->scalar);
  char name[96];
  snprintf(name, sizeof name, PF_KERNELS_CUDA_PREFIX "%s", c->name);

  /* the expected outputs, from a run on the default stream (which also loads the kernel) */
  ck_assert_int_eq(pf_global_call(name, args, nargs, &r), 0);
  ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
  for (int32_t i = 0; i < n; ++i) {
    if (!(c->outs & (1u << i)))
      continue;
    expected[i] = malloc(nbytes[i]);
    seen[i] = malloc(nbytes[i]);
    ck_assert(expected[i] && seen[i]);
    copy_out(expected[i], dev[i]);
    ck_assert_int_eq(cudaMemset(pf_dltensor_data(pf_tensor_dltensor(dev[i])), 0xff, nbytes[i]),
                     cudaSuccess);
  }
  ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);

  /* captured: the call must enqueue its kernel on s and nothing else */
  void* prev = set_stream(s);
  ck_assert_ptr_null(prev);
  ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  int rc = pf_global_call(name, args, nargs, &r);
  cudaGraph_t graph = NULL;
  cudaError_t ended = cudaStreamEndCapture(s, &graph);
  set_stream(prev);
  if (rc != 0) {
    pf_object_t* err = pf_error_take();
    ck_abort_msg("%s under capture: %s", c->name, pf_error_message(err));
  }
  ck_assert_int_eq(ended, cudaSuccess);
  ck_assert_ptr_nonnull(graph);
  check_has_kernel(graph, c->name);
  for (int32_t i = 0; i < n; ++i) {
    if (!(c->outs & (1u << i)))
      continue;
    copy_out(seen[i], dev[i]);
    for (size_t b = 0; b < nbytes[i]; ++b)
      ck_assert_msg(((unsigned char*)seen[i])[b] == 0xff,
                    "%s: output %d written before the graph ran (byte %zu)", c->name, (int)i, b);
  }

  /* replayed on s: now the outputs are those of the plain run */
  cudaGraphExec_t exec = NULL;
  ck_assert_int_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ck_assert_int_eq(cudaGraphLaunch(exec, s), cudaSuccess);
  ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
  for (int32_t i = 0; i < n; ++i) {
    if (!(c->outs & (1u << i)))
      continue;
    copy_out(seen[i], dev[i]);
    ck_assert_msg(memcmp(seen[i], expected[i], nbytes[i]) == 0,
                  "%s: output %d of the graph differs from the plain run", c->name, (int)i);
    free(seen[i]);
    free(expected[i]);
  }
  ck_assert_int_eq(cudaGraphExecDestroy(exec), cudaSuccess);
  ck_assert_int_eq(cudaGraphDestroy(graph), cudaSuccess);
  for (int32_t i = 0; i < n; ++i)
    pf_object_release(dev[i]);
  PF_ASSERT_NO_ERROR();
}

START_TEST(test_cuda_kernels_launch_on_current_stream) {
  if (gpus("test_cuda_kernels_launch_on_current_stream") == 0)
    return;
  cudaStream_t s = user_stream();
  for (size_t i = 0; i < sizeof stream_cases / sizeof stream_cases[0]; ++i)
    run_captured(&stream_cases[i], s);
  ck_assert_ptr_null(pf_cuda_stream_get(0));
  ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

/* kepler cannot be captured: it first checks the eccentricities on the device and waits for
 * the current stream to copy the answer to the host. So the call waits for the work queued before
 * it on that stream (its input may come from there): with the stream held 200 ms by a host
 * function, the call returns only after that function has finished, and its output is right. */
START_TEST(test_cuda_kepler_waits_for_current_stream) {
  if (gpus("test_cuda_kepler_waits_for_current_stream") == 0)
    return;
  const DLDataType f64 = {kDLFloat, 64, 1};
  int64_t n = 1000;
  pf_object_t* h[4] = {host(&n, 1, f64, 3, 0), host(&n, 1, f64, 0.45, 1.0), host(&n, 1, f64, 0, 0),
                       host(&n, 1, f64, 0, 0)};
  double* e = pf_dltensor_data(pf_tensor_dltensor(h[1]));
  for (int64_t i = 0; i < n; ++i)
    e[i] += 0.45; /* in [0, 0.9] */
  pf_object_t* d[4];
  pf_any_t hargs[4], dargs[4], r;
  for (int i = 0; i < 4; ++i) {
    d[i] = to(h[i], gpu);
    hargs[i] = pf_any_object(h[i]);
    dargs[i] = pf_any_object(d[i]);
  }
  ck_assert_int_eq(pf_global_call(PF_KERNELS_PREFIX "kepler", hargs, 4, &r), 0);

  cudaStream_t s = user_stream();
  blocker_t blocker = {200, 0};
  void* prev = set_stream(s);
  ck_assert_int_eq(cudaLaunchHostFunc(s, block_stream, &blocker), cudaSuccess);
  int rc = pf_global_call(PF_KERNELS_CUDA_PREFIX "kepler", dargs, 4, &r);
  int done_at_return = atomic_load(&blocker.done);
  ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
  set_stream(prev);
  ck_assert_msg(rc == 0, "kepler_cuda: %s", pf_error_message(pf_error_peek()));
  ck_assert_msg(done_at_return, "kepler_cuda returned before the work queued on its stream ran");

  double* got = malloc((size_t)n * sizeof *got);
  ck_assert_ptr_nonnull(got);
  for (int k = 2; k < 4; ++k) {
    copy_out(got, d[k]);
    const double* want = pf_dltensor_data(pf_tensor_dltensor(h[k]));
    for (int64_t i = 0; i < n; ++i)
      ck_assert_msg(fabs(got[i] - want[i]) <= 1e-10, "kepler output %d [%lld]: cpu %g gpu %g", k,
                    (long long)i, want[i], got[i]);
  }
  free(got);
  ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
  for (int i = 0; i < 4; ++i) {
    pf_object_release(d[i]);
    pf_object_release(h[i]);
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Work on another stream does not hold a kernel back: with stream A held 300 ms by a host
 * function, add_n launched with stream B current finishes while A is still busy. */
START_TEST(test_cuda_kernel_overlaps_other_stream) {
  if (gpus("test_cuda_kernel_overlaps_other_stream") == 0)
    return;
  if (getenv("PF_TEST_NO_TIMING")) { /* set by tools/gpu_check.sh under compute-sanitizer */
    printf("test_kernels_cuda: test_cuda_kernel_overlaps_other_stream: skipped: "
           "PF_TEST_NO_TIMING (streams are serialised under compute-sanitizer)\n");
    return;
  }
  int64_t shape[2] = {37, 129};
  const DLDataType f32 = {kDLFloat, 32, 1};
  pf_object_t* hx = host(shape, 2, f32, 2, 0);
  pf_object_t *x = to(hx, gpu), *out = to(hx, gpu);
  pf_any_t args[3] = {pf_any_object(x), pf_any_object(out), pf_any_float(1.5)}, r;
  /* loaded before A is held: loading a kernel lazily may wait for the whole device */
  ck_assert_int_eq(pf_global_call(PF_KERNELS_CUDA_PREFIX "add_n", args, 3, &r), 0);
  ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
  ck_assert_int_eq(cudaMemset(pf_dltensor_data(pf_tensor_dltensor(out)), 0, 37 * 129 * 4),
                   cudaSuccess);
  ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);

  cudaStream_t a = user_stream(), b = user_stream();
  blocker_t blocker = {300, 0};
  ck_assert_int_eq(cudaLaunchHostFunc(a, block_stream, &blocker), cudaSuccess);
  void* prev = set_stream(b);
  int rc = pf_global_call(PF_KERNELS_CUDA_PREFIX "add_n", args, 3, &r);
  set_stream(prev);
  cudaError_t synced = cudaStreamSynchronize(b);
  cudaError_t a_state = cudaStreamQuery(a);
  int a_done = atomic_load(&blocker.done);
  ck_assert_int_eq(cudaStreamSynchronize(a), cudaSuccess);
  (void)cudaGetLastError(); /* cudaErrorNotReady is no error to keep */
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(synced, cudaSuccess);
  ck_assert_int_eq(a_state, cudaErrorNotReady);
  ck_assert_int_eq(a_done, 0);

  float got[37 * 129];
  copy_out(got, out);
  const float* xs = pf_dltensor_data(pf_tensor_dltensor(hx));
  for (int i = 0; i < 37 * 129; ++i)
    ck_assert_msg(got[i] == xs[i] + 1.5f, "add_n [%d]: %g, expected %g", i, got[i], xs[i] + 1.5f);
  ck_assert_int_eq(cudaStreamDestroy(a), cudaSuccess);
  ck_assert_int_eq(cudaStreamDestroy(b), cudaSuccess);
  pf_object_release(out);
  pf_object_release(x);
  pf_object_release(hx);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A launch CUDA refuses surfaces as a packfn error naming CUDA's error, and leaves the device
 * usable. The refusal: launching on the legacy default stream (current: none set) while a
 * blocking stream is being captured would make the capture depend on the legacy stream, which
 * CUDA rejects at the launch (cudaErrorStreamCaptureImplicit; not a sticky error). */
START_TEST(test_cuda_launch_error_names_cuda_error) {
  if (gpus("test_cuda_launch_error_names_cuda_error") == 0)
    return;
  int64_t count = 1000;
  const DLDataType f32 = {kDLFloat, 32, 1};
  pf_object_t* hx = host(&count, 1, f32, 1, 0);
  pf_object_t *x = to(hx, gpu), *out = to(hx, gpu);
  pf_any_t args[3] = {pf_any_object(x), pf_any_object(out), pf_any_float(2)}, r;
  void* blocking;
  ck_assert_int_eq(pf_cuda_stream_create(0, &blocking), 0); /* cudaStreamCreate: blocking */
  ck_assert_ptr_null(pf_cuda_stream_get(0));

  ck_assert_int_eq(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  int rc = pf_global_call(PF_KERNELS_CUDA_PREFIX "add_n", args, 3, &r);
  cudaGraph_t graph = NULL;
  cudaError_t ended = cudaStreamEndCapture(blocking, &graph);
  if (graph)
    cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  ck_assert_int_eq(rc, -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_kind(err), "RuntimeError");
  const char* msg = pf_error_message(err);
  ck_assert_msg(strncmp(msg, "add_n_cuda: add_n kernel launch failed: ", 40) == 0 &&
                    strstr(msg, "(cudaErrorStreamCaptureImplicit)") != NULL,
                "message: %s", msg);
  pf_object_release(err);
  ck_assert_int_eq(ended, cudaErrorStreamCaptureInvalidated);

  /* the device still works: the same call succeeds once the capture is over */
  ck_assert_int_eq(pf_global_call(PF_KERNELS_CUDA_PREFIX "add_n", args, 3, &r), 0);
  ck_assert_int_eq(pf_cuda_stream_synchronize(0, NULL), 0);
  float got[1000];
  copy_out(got, out);
  const float* xs = pf_dltensor_data(pf_tensor_dltensor(hx));
  ck_assert(got[0] == xs[0] + 2 && got[999] == xs[999] + 2);
  ck_assert_int_eq(pf_cuda_stream_destroy(0, blocking), 0);
  pf_object_release(out);
  pf_object_release(x);
  pf_object_release(hx);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Host-pinned and managed memory around a kernel: written by the host into a cuda_host tensor,
 * copied to cuda, add_n into managed memory (handed to the kernel as a cuda:0 tensor over it:
 * the kernels take cuda tensors, and managed memory is device memory too), read by the host
 * after synchronising; then back through a kernel into pinned memory. */
static void release_object(void* obj) {
  pf_object_release(obj);
}

START_TEST(test_cuda_pinned_and_managed_around_kernel) {
  if (gpus("test_cuda_pinned_and_managed_around_kernel") == 0)
    return;
  int64_t shape[2] = {64, 33};
  const DLDataType f32 = {kDLFloat, 32, 1};
  const int count = 64 * 33;
  pf_object_t *pinned, *dev, *managed, *managed_as_cuda, *dev2, *pinned2;
  ck_assert_int_eq(pf_tensor_empty(shape, 2, f32, pf_device(PF_DEV_CUDA_HOST, 0), &pinned), 0);
  float* p = pf_dltensor_data(pf_tensor_dltensor(pinned));
  for (int i = 0; i < count; ++i)
    p[i] = (float)i * 0.25f;
  dev = to(pinned, gpu);
  ck_assert_int_eq(pf_tensor_empty(shape, 2, f32, pf_device(PF_DEV_CUDA_MANAGED, 0), &managed), 0);
  DLTensor desc = *pf_tensor_dltensor(managed);
  desc.device = gpu;
  desc.strides = NULL;
  pf_object_retain(managed);
  ck_assert_int_eq(pf_tensor_from_dltensor(&desc, managed, release_object, &managed_as_cuda), 0);

  pf_any_t args[3] = {pf_any_object(dev), pf_any_object(managed_as_cuda), pf_any_float(2)}, r;
  ck_assert_int_eq(pf_global_call(PF_KERNELS_CUDA_PREFIX "add_n", args, 3, &r), 0);
  ck_assert_int_eq(pf_cuda_stream_synchronize(0, pf_cuda_stream_get(0)), 0);
  const float* m = pf_dltensor_data(pf_tensor_dltensor(managed));
  for (int i = 0; i < count; ++i)
    ck_assert_msg(m[i] == p[i] + 2, "managed [%d]: %g, expected %g", i, m[i], p[i] + 2);

  /* managed in, cuda out, copied back to pinned memory */
  ck_assert_int_eq(pf_tensor_empty(shape, 2, f32, gpu, &dev2), 0);
  args[0] = pf_any_object(managed_as_cuda);
  args[1] = pf_any_object(dev2);
  ck_assert_int_eq(pf_global_call(PF_KERNELS_CUDA_PREFIX "add_n", args, 3, &r), 0);
  pinned2 = to(dev2, pf_device(PF_DEV_CUDA_HOST, 0));
  const float* q = pf_dltensor_data(pf_tensor_dltensor(pinned2));
  for (int i = 0; i < count; ++i)
    ck_assert_msg(q[i] == p[i] + 4, "pinned [%d]: %g, expected %g", i, q[i], p[i] + 4);

  pf_object_t* objs[6] = {pinned2, dev2, managed_as_cuda, managed, dev, pinned};
  for (int i = 0; i < 6; ++i)
    pf_object_release(objs[i]);
  PF_ASSERT_NO_ERROR();
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
  tcase_add_test(tc, test_kepler_cuda_reports_first_bad_eccentricity);
  tcase_add_test(tc, test_cuda_rms_norm_row_paths_match_cpu);
  tcase_add_test(tc, test_cuda_kernels_ignore_earlier_unchecked_error);
  tcase_add_test(tc, test_cuda_kernels_launch_on_current_stream);
  tcase_add_test(tc, test_cuda_kepler_waits_for_current_stream);
  tcase_add_test(tc, test_cuda_kernel_overlaps_other_stream);
  tcase_add_test(tc, test_cuda_launch_error_names_cuda_error);
  tcase_add_test(tc, test_cuda_pinned_and_managed_around_kernel);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
