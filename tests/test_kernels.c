/* Tests of packfn_kernels: every kernel through the global table (as a program linked with the
 * library finds them) and through its C entry, against reference code, and every refusal. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "packfn/kernels.h"
#include "packfn/module.h"
#include "pf_test.h"

static const DLDevice cpu = {kDLCPU, 0};

static pf_object_t* tensor(const int64_t* shape, int32_t ndim, DLDataType dt) {
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_empty(shape, ndim, dt, cpu, &t), 0);
  return t;
}

/* Element i of a float32 or float64 tensor, as double. */
static double get(pf_object_t* t, int64_t i) {
  DLTensor* d = pf_tensor_dltensor(t);
  return d->dtype.bits == 64 ? ((double*)pf_dltensor_data(d))[i]
                             : (double)((float*)pf_dltensor_data(d))[i];
}
static void set(pf_object_t* t, int64_t i, double v) {
  DLTensor* d = pf_tensor_dltensor(t);
  if (d->dtype.bits == 64)
    ((double*)pf_dltensor_data(d))[i] = v;
  else
    ((float*)pf_dltensor_data(d))[i] = (float)v;
}
static void fill(pf_object_t* t, double scale, double shift) {
  int64_t n = pf_dltensor_numel(pf_tensor_dltensor(t));
  for (int64_t i = 0; i < n; ++i)
    set(t, i, scale * sin(0.7 * (double)i + shift));
}
static double tol(pf_object_t* t) {
  return pf_tensor_dltensor(t)->dtype.bits == 64 ? 1e-12 : 1e-5;
}

static int call(const char* name, pf_any_t* args, int32_t n) {
  pf_any_t r;
  int rc = pf_global_call(name, args, n, &r);
  if (rc == 0)
    ck_assert_int_eq(r.type_index, PF_TYPE_NONE);
  return rc;
}

static const DLDataType f32 = {kDLFloat, 32, 1}, f64 = {kDLFloat, 64, 1};

START_TEST(test_registered) {
  ck_assert_int_ge(pf_kernels_count(), 6);
  for (int32_t i = 0; i < pf_kernels_count(); ++i) {
    char name[96];
    snprintf(name, sizeof name, PF_KERNELS_PREFIX "%s", pf_kernels_name(i));
    pf_object_t* fn;
    ck_assert_int_eq(pf_global_get(name, &fn), 0);
    ck_assert_msg(fn != NULL, "%s is not registered", name);
    ck_assert_ptr_nonnull(strstr(pf_function_signature(fn), "-> None"));
    pf_object_release(fn);
    /* this program links the CPU library alone: no CUDA versions */
    snprintf(name, sizeof name, PF_KERNELS_CUDA_PREFIX "%s", pf_kernels_name(i));
    ck_assert_int_eq(pf_global_get(name, &fn), 0);
    ck_assert_ptr_null(fn);
  }
  ck_assert_int_eq(pf_kernels_have_cuda(), 0);
  ck_assert_ptr_null(pf_kernels_name(-1));
  ck_assert_ptr_null(pf_kernels_name(99));
  ck_assert_int_eq(pf_global_static_failures(), 0);
}
END_TEST

START_TEST(test_add_n) {
  const DLDataType dts[2] = {f32, f64};
  const int64_t shapes[3][2] = {{0, 3}, {1, 1}, {7, 13}};
  for (int d = 0; d < 2; ++d)
    for (int s = 0; s < 3; ++s) {
      pf_object_t* x = tensor(shapes[s], 2, dts[d]);
      pf_object_t* out = tensor(shapes[s], 2, dts[d]);
      fill(x, 3.0, 0.1);
      pf_any_t args[3] = {pf_any_object(x), pf_any_object(out), pf_any_float(2.5)};
      ck_assert_int_eq(call(PF_KERNELS_PREFIX "add_n", args, 3), 0);
      int64_t n = shapes[s][0] * shapes[s][1];
      for (int64_t i = 0; i < n; ++i)
        ck_assert_double_eq_tol(get(out, i), get(x, i) + 2.5, tol(x));
      /* in place through the C entry, with an int n */
      ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(x), pf_tensor_dltensor(x), -1), 0);
      for (int64_t i = 0; i < n; ++i)
        ck_assert_double_eq_tol(get(x, i) + 3.5, get(out, i), 4 * tol(x));
      pf_object_release(x);
      pf_object_release(out);
    }
}
END_TEST

static void rms_reference(pf_object_t* x, int64_t rows, int64_t cols, double eps, double* out,
                          double* inv) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c)
      ss += get(x, r * cols + c) * get(x, r * cols + c);
    double iv = 1.0 / sqrt(ss / (double)(cols ? cols : 1) + eps);
    if (cols == 0)
      iv = 1.0 / sqrt(eps);
    inv[r] = iv;
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = get(x, r * cols + c) * iv;
  }
}

START_TEST(test_rms_norm_family) {
  const DLDataType dts[2] = {f32, f64};
  const int64_t shapes[4][3] = {{2, 3, 5}, {1, 1, 64}, {4, 1, 1}, {0, 2, 3}};
  for (int d = 0; d < 2; ++d)
    for (int s = 0; s < 4; ++s) {
      const int64_t* shape = shapes[s];
      int64_t rows = shape[0] * shape[1], cols = shape[2];
      pf_object_t* x = tensor(shape, 3, dts[d]);
      pf_object_t* out = tensor(shape, 3, dts[d]);
      pf_object_t* out2 = tensor(shape, 3, dts[d]);
      pf_object_t* inv = tensor(shape, 2, dts[d]);
      pf_object_t* ct = tensor(shape, 3, dts[d]);
      pf_object_t* dx = tensor(shape, 3, dts[d]);
      fill(x, 2.0, 0.3);
      fill(ct, 1.0, 1.1);
      double eps = 1e-5;
      pf_any_t a[4] = {pf_any_object(x), pf_any_object(out), pf_any_float(eps)};
      ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), 0);
      pf_any_t b[4] = {pf_any_object(x), pf_any_object(out2), pf_any_object(inv),
                       pf_any_float(eps)};
      ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm_fwd", b, 4), 0);
      double* ref = malloc(sizeof(double) * (size_t)(rows * cols + 1));
      double* refinv = malloc(sizeof(double) * (size_t)(rows + 1));
      rms_reference(x, rows, cols, eps, ref, refinv);
      for (int64_t i = 0; i < rows * cols; ++i) {
        ck_assert_double_eq_tol(get(out, i), ref[i], tol(x) * 10);
        ck_assert_double_eq_tol(get(out2, i), ref[i], tol(x) * 10);
      }
      for (int64_t r = 0; r < rows; ++r)
        ck_assert_double_eq_tol(get(inv, r) / refinv[r], 1.0, tol(x) * 10);
      /* backward against the closed form */
      pf_any_t c[4] = {pf_any_object(x), pf_any_object(inv), pf_any_object(ct), pf_any_object(dx)};
      ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm_bwd", c, 4), 0);
      for (int64_t r = 0; r < rows; ++r) {
        double m = 0, iv = get(inv, r);
        for (int64_t k = 0; k < cols; ++k)
          m += get(ct, r * cols + k) * get(x, r * cols + k);
        m /= (double)cols;
        for (int64_t k = 0; k < cols; ++k) {
          double want = iv * get(ct, r * cols + k) - get(x, r * cols + k) * iv * iv * iv * m;
          ck_assert_double_eq_tol(get(dx, r * cols + k), want, tol(x) * 50);
        }
      }
      free(ref);
      free(refinv);
      pf_object_release(x);
      pf_object_release(out);
      pf_object_release(out2);
      pf_object_release(inv);
      pf_object_release(ct);
      pf_object_release(dx);
    }
}
END_TEST

START_TEST(test_kepler) {
  const DLDataType dts[2] = {f32, f64};
  for (int d = 0; d < 2; ++d) {
    int64_t shape[2] = {11, 21};
    pf_object_t* m = tensor(shape, 2, dts[d]);
    pf_object_t* e = tensor(shape, 2, dts[d]);
    pf_object_t* s = tensor(shape, 2, dts[d]);
    pf_object_t* c = tensor(shape, 2, dts[d]);
    for (int64_t i = 0; i < 11; ++i)
      for (int64_t j = 0; j < 21; ++j) {
        set(e, i * 21 + j, 0.099 * (double)i); /* 0 .. 0.99 */
        set(m, i * 21 + j, -10.0 + (double)j); /* -10 .. 10 */
      }
    pf_any_t a[4] = {pf_any_object(m), pf_any_object(e), pf_any_object(s), pf_any_object(c)};
    ck_assert_int_eq(call(PF_KERNELS_PREFIX "kepler", a, 4), 0);
    for (int64_t i = 0; i < 11 * 21; ++i) {
      double sv = get(s, i), cv = get(c, i), ecc = get(e, i), mv = get(m, i);
      double big_e = atan2(sv, cv);
      double resid = remainder(big_e - ecc * sv - mv, 2 * M_PI);
      ck_assert_double_eq_tol(resid, 0.0, dts[d].bits == 64 ? 1e-12 : 1e-5);
      ck_assert_double_eq_tol(sv * sv + cv * cv, 1.0, tol(m) * 4);
    }
    pf_object_release(m);
    pf_object_release(e);
    pf_object_release(s);
    pf_object_release(c);
  }
}
END_TEST

/* Eccentricities outside [0, 1), and NaN, are refused naming the argument, the value and its
 * index, through the packed version and the C entry, before an output is written. */
START_TEST(test_kepler_refuses_bad_eccentricity) {
  const double bad[4] = {1.5, -0.2, NAN, 1.0};
  const char* const shown[4] = {"1.5", "-0.2", "nan", "1"};
  const DLDataType dts[2] = {f32, f64};
  for (int d = 0; d < 2; ++d)
    for (int b = 0; b < 4; ++b) {
      int64_t n = 3;
      pf_object_t* m = tensor(&n, 1, dts[d]);
      pf_object_t* e = tensor(&n, 1, dts[d]);
      pf_object_t* s = tensor(&n, 1, dts[d]);
      pf_object_t* c = tensor(&n, 1, dts[d]);
      for (int64_t i = 0; i < n; ++i) {
        set(m, i, 1.0);
        set(e, i, 0.5);
        set(s, i, 42.0);
        set(c, i, 42.0);
      }
      set(e, 2, bad[b]);
      char want[128];
      snprintf(want, sizeof want,
               "kepler: argument 1 (eccentricity): expected values in [0, 1), got %s at index 2",
               shown[b]);
      pf_any_t a[4] = {pf_any_object(m), pf_any_object(e), pf_any_object(s), pf_any_object(c)};
      ck_assert_int_eq(call(PF_KERNELS_PREFIX "kepler", a, 4), -1);
      PF_ASSERT_RAISED("ValueError", want);
      ck_assert_int_eq(pf_kernel_kepler(pf_tensor_dltensor(m), pf_tensor_dltensor(e),
                                        pf_tensor_dltensor(s), pf_tensor_dltensor(c)),
                       -1);
      PF_ASSERT_RAISED("ValueError", "pf_kernel_kepler: argument 1 (eccentricity)");
      for (int64_t i = 0; i < n; ++i) {
        ck_assert_double_eq(get(s, i), 42.0);
        ck_assert_double_eq(get(c, i), 42.0);
      }
      /* just below 1 is accepted */
      set(e, 2, dts[d].bits == 64 ? 0.999999 : 0.99f);
      ck_assert_int_eq(call(PF_KERNELS_PREFIX "kepler", a, 4), 0);
      pf_object_release(m);
      pf_object_release(e);
      pf_object_release(s);
      pf_object_release(c);
    }
}
END_TEST

START_TEST(test_vector_add) {
  const DLDataType dts[2] = {f32, f64};
  for (int d = 0; d < 2; ++d) {
    int64_t nb = 3, shape[2] = {2, 5};
    pf_object_t* b = tensor(&nb, 1, dts[d]);
    pf_object_t* c = tensor(shape, 2, dts[d]);
    pf_object_t* a = tensor(shape, 2, dts[d]);
    fill(b, 1.0, 0.0);
    fill(c, 5.0, 2.0);
    pf_any_t args[3] = {pf_any_object(b), pf_any_object(c), pf_any_object(a)};
    ck_assert_int_eq(call(PF_KERNELS_PREFIX "vector_add", args, 3), 0);
    for (int64_t i = 0; i < 10; ++i)
      ck_assert_double_eq_tol(get(a, i), get(b, i % 3) + get(c, i), tol(a));
    /* DLTensor views work too */
    args[0] = pf_any_dltensor(pf_tensor_dltensor(b));
    ck_assert_int_eq(call(PF_KERNELS_PREFIX "vector_add", args, 3), 0);
    pf_object_release(a);
    pf_object_release(b);
    pf_object_release(c);
  }
}
END_TEST

START_TEST(test_refusals_touch_no_output) {
  int64_t shape[2] = {2, 3}, other[2] = {3, 2};
  pf_object_t* x = tensor(shape, 2, f32);
  pf_object_t* out = tensor(shape, 2, f32);
  pf_object_t* wrong_shape = tensor(other, 2, f32);
  pf_object_t* wrong_dtype = tensor(shape, 2, f64);
  pf_object_t* ints = tensor(shape, 2, (DLDataType){kDLInt, 64, 1});
  fill(x, 1.0, 0.0);
  for (int64_t i = 0; i < 6; ++i)
    set(out, i, 42.0);
  pf_any_t a[4] = {pf_any_object(ints), pf_any_object(out), pf_any_float(1e-5)};
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("TypeError",
                   "rms_norm: argument 0 (x): expected a float32 or float64 tensor, got int64");
  a[0] = pf_any_object(x);
  a[1] = pf_any_object(wrong_shape);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("ValueError", "argument 1 (out)");
  a[1] = pf_any_object(wrong_dtype);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("TypeError", "argument 1 (out)");
  a[1] = pf_any_object(out);
  a[2] = pf_any_float(-1.0);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("ValueError", "argument 2 (eps): expected a finite non-negative number");
  a[2] = pf_any_float(1e-5);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 2), -1);
  PF_ASSERT_RAISED("TypeError", "rms_norm: expected 3 arguments, got 2");
  a[2] = pf_any_cstr("eps");
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("TypeError", "rms_norm: argument 2 (eps): expected float, got str");
  a[0] = pf_any_int(3);
  a[2] = pf_any_float(1e-5);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("TypeError", "rms_norm: argument 0 (x): expected Tensor, got int");
  /* a scalar has no last axis */
  pf_object_t* scalar = tensor(NULL, 0, f32);
  a[0] = pf_any_object(scalar);
  a[1] = pf_any_object(scalar);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("ValueError", "argument 0 (x)");
  /* CUDA tensors (described by DLTensor views) to the packed version: the output must be on the
   * same device; then they go to the CUDA version, here not loaded */
  DLTensor fake = *pf_tensor_dltensor(x);
  fake.device = (DLDevice){kDLCUDA, 0};
  a[0] = pf_any_dltensor(&fake);
  a[1] = pf_any_object(out);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("TypeError", "rms_norm: argument 1 (out): expected a tensor on cuda");
  a[1] = pf_any_dltensor(&fake);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("NotImplementedError",
                   "rms_norm: the tensors are on a CUDA device, and the CUDA kernels are in "
                   "libpackfn_kernels_cuda, which is not loaded");
  /* a device neither version has */
  fake.device = (DLDevice){kDLROCM, 0};
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", a, 3), -1);
  PF_ASSERT_RAISED("NotImplementedError",
                   "rms_norm: argument 0 (x): no rms_norm version for tensors on rocm");
  /* inv_rms of the wrong shape, vector_add with a 2-d b, kepler with one buffer twice */
  pf_any_t f[4] = {pf_any_object(x), pf_any_object(out), pf_any_object(x), pf_any_float(0)};
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm_fwd", f, 4), -1);
  PF_ASSERT_RAISED("ValueError", "argument 2 (inv_rms)");
  pf_any_t v[3] = {pf_any_object(x), pf_any_object(x), pf_any_object(out)};
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "vector_add", v, 3), -1);
  PF_ASSERT_RAISED("ValueError", "argument 0 (b): expected 1 dimension");
  pf_any_t k[4] = {pf_any_object(x), pf_any_object(x), pf_any_object(out), pf_any_object(out)};
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "kepler", k, 4), -1);
  PF_ASSERT_RAISED("ValueError", "argument 3 (cos_e)");
  for (int64_t i = 0; i < 6; ++i)
    ck_assert_double_eq(get(out, i), 42.0); /* nothing written by any refused call */
  /* a CUDA tensor to a C entry, with libpackfn_kernels_cuda not loaded: checked, then refused
   * naming the library */
  fake.device = (DLDevice){kDLCUDA, 0};
  ck_assert_int_eq(pf_kernel_rms_norm(&fake, &fake, 1e-5), -1);
  PF_ASSERT_RAISED("NotImplementedError",
                   "pf_kernel_rms_norm: the tensors are on a CUDA device, and the CUDA kernels are "
                   "in libpackfn_kernels_cuda, which is not loaded");
  ck_assert_int_eq(pf_kernel_rms_norm(&fake, pf_tensor_dltensor(out), 1e-5), -1);
  PF_ASSERT_RAISED("TypeError", "pf_kernel_rms_norm: argument 1 (out)");
  ck_assert_int_eq(pf_kernel_rms_norm(NULL, pf_tensor_dltensor(out), 0), -1);
  PF_ASSERT_RAISED("ValueError", "argument 0 (x): expected a tensor, got NULL");
  ck_assert_int_eq(pf_kernel_rms_norm_fwd(pf_tensor_dltensor(x), pf_tensor_dltensor(out), NULL, 0),
                   -1);
  PF_ASSERT_RAISED("ValueError", "inv_rms");
  fake.device = (DLDevice){kDLOpenCL, 0};
  ck_assert_int_eq(pf_kernel_add_n(&fake, pf_tensor_dltensor(out), 1), -1);
  PF_ASSERT_RAISED("NotImplementedError", "opencl");
  pf_object_release(x);
  pf_object_release(out);
  pf_object_release(wrong_shape);
  pf_object_release(wrong_dtype);
  pf_object_release(ints);
  pf_object_release(scalar);
}
END_TEST

/* An output checked against its input (dtype, device, shape, then as a tensor of its own):
 * each way it can differ gets its own message, naming the input it is compared with. */
START_TEST(test_outputs_unlike_input_refused) {
  int64_t shape[2] = {2, 3}, other[2] = {3, 2}, flat = 6, strides[2] = {1, 2},
          huge[2] = {INT64_MAX, 1};
  pf_object_t* x = tensor(shape, 2, f32);
  pf_object_t* out = tensor(shape, 2, f32);
  fill(x, 1.0, 0.0);
  DLTensor* dx = pf_tensor_dltensor(x);
  DLTensor o = *pf_tensor_dltensor(out);
  o.shape = other;
  ck_assert_int_eq(pf_kernel_add_n(dx, &o, 1), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_kernel_add_n: argument 1 (out): expected shape (2, 3) like x, got (3, 2)");
  o.shape = &flat;
  o.ndim = 1;
  ck_assert_int_eq(pf_kernel_add_n(dx, &o, 1), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_kernel_add_n: argument 1 (out): expected shape (2, 3) like x, got (6,)");
  o = *pf_tensor_dltensor(out);
  o.dtype = f64;
  ck_assert_int_eq(pf_kernel_add_n(dx, &o, 1), -1);
  PF_ASSERT_RAISED("TypeError",
                   "pf_kernel_add_n: argument 1 (out): expected a float32 tensor like x, got "
                   "float64");
  o.dtype = f32;
  o.device.device_id = 1;
  ck_assert_int_eq(pf_kernel_add_n(dx, &o, 1), -1);
  PF_ASSERT_RAISED(
      "TypeError",
      "pf_kernel_add_n: argument 1 (out): expected a tensor on cpu:0 like x, got cpu:1");
  o.device.device_id = 0;
  o.shape = NULL;
  ck_assert_int_eq(pf_kernel_add_n(dx, &o, 1), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 1 (out): expected ndim in 0..");
  ck_assert_int_eq(pf_kernel_add_n(dx, NULL, 1), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 1 (out): expected a tensor, got NULL");
  /* like x, but not compact, or not a description any tensor has */
  o = *pf_tensor_dltensor(out);
  o.strides = strides;
  ck_assert_int_eq(pf_kernel_add_n(dx, &o, 1), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 1 (out): expected a contiguous");
  o.strides = huge;
  ck_assert_int_eq(pf_kernel_add_n(dx, &o, 1), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 1 (out): ");
  o.strides = NULL;
  o.data = NULL;
  ck_assert_int_eq(pf_kernel_add_n(dx, &o, 1), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 1 (out): ");
  /* a 0-d input and output: alike; a 1-d output of one element is not */
  pf_object_t* s0 = tensor(NULL, 0, f64);
  pf_object_t* s1 = tensor(NULL, 0, f64);
  int64_t one = 1;
  pf_object_t* v1 = tensor(&one, 1, f64);
  ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(s0), pf_tensor_dltensor(s1), 1), 0);
  ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(s0), pf_tensor_dltensor(v1), 1), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_kernel_add_n: argument 1 (out): expected shape () like x, got (1,)");
  /* kepler compares three outputs and inputs with its first argument, by name */
  pf_object_t* e = tensor(shape, 2, f64);
  ck_assert_int_eq(
      pf_kernel_kepler(dx, pf_tensor_dltensor(e), pf_tensor_dltensor(out), pf_tensor_dltensor(out)),
      -1);
  PF_ASSERT_RAISED("TypeError", "pf_kernel_kepler: argument 1 (eccentricity): expected a float32 "
                                "tensor like mean_anomaly, got float64");
  pf_object_release(x);
  pf_object_release(out);
  pf_object_release(s0);
  pf_object_release(s1);
  pf_object_release(v1);
  pf_object_release(e);
}
END_TEST

/* Outputs that partly overlap an input are refused (the kernel would read what it wrote);
 * the very same array is allowed where the kernel works in place. */
START_TEST(test_overlaps_refused) {
  int64_t n8 = 8;
  pf_object_t* buf = tensor(&n8, 1, f64);
  fill(buf, 1.0, 0.0);
  DLTensor whole = *pf_tensor_dltensor(buf);
  int64_t n4 = 4, n2 = 2;
  DLTensor lo = whole, hi = whole, mid = whole, two = whole;
  lo.shape = &n4;
  hi.shape = &n4;
  hi.byte_offset = 4 * sizeof(double);
  mid.shape = &n4;
  mid.byte_offset = 1 * sizeof(double);
  two.shape = &n2;
  /* add_n, rms_norm: in place yes, shifted by one element no */
  ck_assert_int_eq(pf_kernel_add_n(&lo, &lo, 1.0), 0);
  ck_assert_int_eq(pf_kernel_add_n(&lo, &mid, 1.0), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 1 (out): expected memory apart from "
                                 "argument 0 (x) or the very same array, got an overlap");
  ck_assert_int_eq(pf_kernel_add_n(&lo, &hi, 1.0), 0); /* adjacent: apart */
  ck_assert_int_eq(pf_kernel_rms_norm(&lo, &mid, 1e-5), -1);
  PF_ASSERT_RAISED("ValueError", "argument 1 (out): expected memory apart");
  /* rms_norm_fwd: inv_rms may overlap neither x nor out */
  DLTensor inv = whole;
  int64_t one = 1;
  inv.shape = &one;
  inv.ndim = 0;
  ck_assert_int_eq(pf_kernel_rms_norm_fwd(&hi, &hi, &inv, 1e-5), 0);
  DLTensor inv_in = inv;
  inv_in.byte_offset = 5 * sizeof(double);
  ck_assert_int_eq(pf_kernel_rms_norm_fwd(&hi, &hi, &inv_in, 1e-5), -1);
  PF_ASSERT_RAISED("ValueError", "argument 2 (inv_rms): expected memory apart from argument 0 "
                                 "(x), got an overlap");
  /* kepler: its outputs overlap no input and not each other (a shift by one was accepted) */
  pf_object_t* m = tensor(&n2, 1, f64);
  pf_object_t* e = tensor(&n2, 1, f64);
  fill(m, 1.0, 0.0);
  set(e, 0, 0.1);
  set(e, 1, 0.2);
  DLTensor s1 = two, c1 = two;
  s1.byte_offset = 0;
  c1.byte_offset = 1 * sizeof(double);
  ck_assert_int_eq(pf_kernel_kepler(pf_tensor_dltensor(m), pf_tensor_dltensor(e), &s1, &c1), -1);
  PF_ASSERT_RAISED("ValueError", "argument 3 (cos_e): expected memory apart from argument 2 "
                                 "(sin_e), got an overlap");
  ck_assert_int_eq(
      pf_kernel_kepler(pf_tensor_dltensor(m), pf_tensor_dltensor(e), pf_tensor_dltensor(m), &c1),
      -1);
  PF_ASSERT_RAISED("ValueError", "argument 2 (sin_e): expected memory apart from argument 0 "
                                 "(mean_anomaly)");
  c1.byte_offset = 2 * sizeof(double);
  ck_assert_int_eq(pf_kernel_kepler(pf_tensor_dltensor(m), pf_tensor_dltensor(e), &s1, &c1), 0);
  /* vector_add: a may be c, or b when b is at least as long; not a shifted b */
  DLTensor b2 = two, a4 = lo, c4 = hi;
  ck_assert_int_eq(pf_kernel_vector_add(&b2, &c4, &c4), 0);
  ck_assert_int_eq(pf_kernel_vector_add(&b2, &c4, &a4), -1); /* a (4) over b (2) */
  PF_ASSERT_RAISED("ValueError", "argument 2 (a): expected memory apart from argument 0 (b) or "
                                 "the very same array at most as long, got the same first byte "
                                 "with 32 bytes against its 16");
  DLTensor b4 = lo;
  ck_assert_int_eq(pf_kernel_vector_add(&b4, &c4, &a4), 0); /* a is b, as long */
  /* b's dtype is c's: the message names c (it read as "float64 is not supported": review) */
  DLTensor bd = two;
  bd.dtype = (DLDataType){kDLFloat, 32, 1};
  ck_assert_int_eq(pf_kernel_vector_add(&bd, &c4, &a4), -1);
  PF_ASSERT_RAISED("TypeError", "argument 0 (b): expected a float64 tensor like c, got float32");
  pf_object_release(m);
  pf_object_release(e);
  pf_object_release(buf);
}
END_TEST

/* A tensor not at a multiple of its element size (a float32 array at an odd address, which
 * NumPy makes from a buffer at an odd offset) is refused: the kernels store whole elements (and
 * rms_norm streamed such a 4 MiB output with vector stores that crashed). */
START_TEST(test_misaligned_tensors_refused) {
  enum { ROWS = 8, COLS = 200003 };
  int64_t shape[2] = {ROWS, COLS};
  pf_object_t* x = tensor(shape, 2, f32);
  fill(x, 2.0, 0.3);
  size_t nbytes = (size_t)ROWS * COLS * sizeof(float);
  char* raw = malloc(nbytes + 64);
  ck_assert_ptr_nonnull(raw);
  memset(raw, 0x5a, nbytes + 64);
  DLTensor out = {raw, cpu, 2, f32, shape, NULL, 2}; /* 2 bytes past a malloc'd block */
  ck_assert_int_eq(pf_kernel_rms_norm(pf_tensor_dltensor(x), &out, 1e-5), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_rms_norm: argument 1 (out): expected data at a "
                                 "multiple of its element size (4 bytes), got an address 2 "
                                 "bytes past one");
  ck_assert_int_eq(pf_kernel_add_n(&out, pf_tensor_dltensor(x), 1.0), -1);
  PF_ASSERT_RAISED("ValueError", "argument 0 (x): expected data at a multiple");
  for (size_t i = 0; i < nbytes + 64; ++i) /* nothing written */
    ck_assert_int_eq((unsigned char)raw[i], 0x5a);
  free(raw);
  pf_object_release(x);
}
END_TEST

/* eps reaches the float32 kernel as a double (it was rounded to float32: 1e39 became inf, and
 * rows of zeros with eps = 1e-300 gave NaN); float64 rows whose squares overflow get finite
 * results, rows with an infinity the plain formula's (0, and NaN at the infinity). */
START_TEST(test_rms_norm_extreme_eps_and_rows) {
  int64_t shape[2] = {1, 3};
  pf_object_t* x = tensor(shape, 2, f32);
  pf_object_t* out = tensor(shape, 2, f32);
  set(x, 0, 1.0);
  set(x, 1, 2.0);
  set(x, 2, 3.0);
  ck_assert_int_eq(pf_kernel_rms_norm(pf_tensor_dltensor(x), pf_tensor_dltensor(out), 1e39), 0);
  double inv = 1.0 / sqrt(14.0 / 3.0 + 1e39);
  for (int i = 0; i < 3; ++i)
    ck_assert_double_eq_tol(get(out, i), (i + 1) * inv, 1e-6 * (i + 1) * inv);
  for (int i = 0; i < 3; ++i)
    set(x, i, 0.0);
  ck_assert_int_eq(pf_kernel_rms_norm(pf_tensor_dltensor(x), pf_tensor_dltensor(out), 1e-300), 0);
  for (int i = 0; i < 3; ++i)
    ck_assert_double_eq(get(out, i), 0.0);
  pf_object_release(x);
  pf_object_release(out);

  int64_t two[2] = {1, 2}, three[2] = {1, 3};
  pf_object_t* big = tensor(two, 2, f64);
  pf_object_t* bo = tensor(two, 2, f64);
  set(big, 0, 1e160);
  set(big, 1, 1.0);
  ck_assert_int_eq(pf_kernel_rms_norm(pf_tensor_dltensor(big), pf_tensor_dltensor(bo), 1e-6), 0);
  ck_assert_double_eq_tol(get(bo, 0), sqrt(2.0), 4e-16);
  ck_assert_double_eq_tol(get(bo, 1), sqrt(2.0) * 1e-160, 4e-176);
  pf_object_t* inf = tensor(three, 2, f64);
  pf_object_t* io = tensor(three, 2, f64);
  set(inf, 0, 1.0);
  set(inf, 1, INFINITY);
  set(inf, 2, 2.0);
  ck_assert_int_eq(pf_kernel_rms_norm(pf_tensor_dltensor(inf), pf_tensor_dltensor(io), 1e-6), 0);
  ck_assert_double_eq(get(io, 0), 0.0);
  ck_assert(isnan(get(io, 1)));
  ck_assert_double_eq(get(io, 2), 0.0);
  pf_object_release(big);
  pf_object_release(bo);
  pf_object_release(inf);
  pf_object_release(io);
}
END_TEST

/* add_n's n past what float32 holds is refused for a float32 x, as inf is (1e300 became inf and
 * every output inf); it is a number like any other for float64, and FLT_MAX itself passes. */
START_TEST(test_add_n_refuses_n_beyond_float32) {
  int64_t two = 2;
  pf_object_t* x = tensor(&two, 1, f32);
  pf_object_t* out = tensor(&two, 1, f32);
  pf_object_t* x64 = tensor(&two, 1, f64);
  fill(x, 1.0, 0.0);
  set(out, 0, 42.0);
  set(out, 1, 42.0);
  fill(x64, 1.0, 0.0);
  const double bad[] = {1e300, -1e39, INFINITY};
  for (int i = 0; i < 3; ++i) {
    ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(x), pf_tensor_dltensor(out), bad[i]), -1);
    PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 2 (n): expected a finite number");
    pf_any_t args[3] = {pf_any_object(x), pf_any_object(out), pf_any_float(bad[i])};
    ck_assert_int_eq(call(PF_KERNELS_PREFIX "add_n", args, 3), -1);
    PF_ASSERT_RAISED("ValueError", "add_n: argument 2 (n): expected a finite number");
  }
  ck_assert_double_eq(get(out, 0), 42.0); /* nothing written */
  ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(x), pf_tensor_dltensor(out), 1e300), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 2 (n): expected a finite number "
                                 "float32 can hold for a float32 x, got 1e+300");
  /* the value is named with the digits that tell it apart: just past the largest float32 (it
   * rounds to infinity) read "got 3.40282e+38", a value float32 holds (review) */
  ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(x), pf_tensor_dltensor(out), 3.4028236e38),
                   -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 2 (n): expected a finite number "
                                 "float32 can hold for a float32 x, got 3.4028236e+38");
  ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(x), pf_tensor_dltensor(out), 3.40282e38), 0);
  ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(x), pf_tensor_dltensor(out), 3.4028234e38),
                   0);
  ck_assert(isfinite(get(out, 0)));
  ck_assert_int_eq(pf_kernel_add_n(pf_tensor_dltensor(x64), pf_tensor_dltensor(x64), 1e300), 0);
  ck_assert_double_eq(get(x64, 0), 1e300);
  pf_object_release(x);
  pf_object_release(out);
  pf_object_release(x64);
}
END_TEST

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A DLTensor made by hand with a negative extent is refused saying so (it read as an overlap:
 * "argument 1 (out): expected memory apart from argument 0 (x) ..."). */
START_TEST(test_negative_extents_refused) {
  float data[4] = {1, 2, 3, 4}, out[4] = {42, 42, 42, 42};
  int64_t neg[1] = {-4}, neg2[2] = {2, -2};
  DLTensor x = {data, cpu, 1, f32, neg, NULL, 0}, o = {out, cpu, 1, f32, neg, NULL, 0};
  ck_assert_int_eq(pf_kernel_add_n(&x, &o, 1.0), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 0 (x): expected extents >= 0, got -4 "
                                 "at axis 0");
  x.ndim = o.ndim = 2;
  x.shape = o.shape = neg2;
  ck_assert_int_eq(pf_kernel_rms_norm(&x, &o, 1e-5), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_rms_norm: argument 0 (x): expected extents >= 0, got "
                                 "-2 at axis 1");
  pf_any_t args[3] = {pf_any_dltensor(&x), pf_any_dltensor(&o), pf_any_float(1e-5)};
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", args, 3), -1);
  PF_ASSERT_RAISED("ValueError", "rms_norm: argument 0 (x): expected extents >= 0");
  for (int i = 0; i < 4; ++i)
    ck_assert(out[i] == 42.0f);
}
END_TEST

/* Descriptions made by hand whose sizes overflow, or with NULL data, are refused before any
 * kernel runs (their element count wrapped to 0 or 4: the overlap and alignment checks were
 * skipped and the kernels crashed, or add_n returned 0 on a nonsense size; review). */
START_TEST(test_wrapping_sizes_and_null_data_refused) {
  float data[64] = {0}, out[64];
  for (int i = 0; i < 64; ++i)
    out[i] = 42;
  int64_t wrap0[2] = {(int64_t)1 << 32, (int64_t)1 << 32}; /* 2^64 elements: 0 wrapped */
  int64_t wrap4[2] = {((int64_t)1 << 62) + 1, 4};          /* 2^64 + 4: 4 wrapped */
  int64_t bytes0[1] = {(int64_t)1 << 62};                  /* 2^64 bytes of float32 */
  int64_t rows0[2] = {(int64_t)1 << 62, 0}, inv_shape[1] = {(int64_t)1 << 62};
  DLTensor x = {data, cpu, 2, f32, wrap0, NULL, 0}, o = {out, cpu, 2, f32, wrap0, NULL, 0};
  ck_assert_int_eq(pf_kernel_rms_norm(&x, &o, 1e-5), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_rms_norm: argument 0 (x): expected a size that fits");
  x.shape = o.shape = wrap4;
  ck_assert_int_eq(pf_kernel_add_n(&x, &o, 1.0), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 0 (x): expected a size that fits");
  x.ndim = o.ndim = 1;
  x.shape = o.shape = bytes0;
  o.data = data + 1; /* a partial overlap the wrapped byte count hid */
  ck_assert_int_eq(pf_kernel_add_n(&x, &o, 1.0), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 0 (x): expected a size that fits");
  o.data = out;
  DLTensor iv = {data + 32, cpu, 1, f32, inv_shape, NULL, 0};
  x.ndim = o.ndim = 2;
  x.shape = o.shape = rows0;
  ck_assert_int_eq(pf_kernel_rms_norm_fwd(&x, &o, &iv, 1e-5), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_rms_norm_fwd: argument 0 (x): expected a size that");
  int64_t six[1] = {6};
  x.ndim = o.ndim = 1;
  x.shape = o.shape = six;
  x.data = NULL;
  ck_assert_int_eq(pf_kernel_add_n(&x, &o, 1.0), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_kernel_add_n: argument 0 (x): expected data for 6 elements, got NULL");
  pf_any_t args[3] = {pf_any_dltensor(&x), pf_any_dltensor(&o), pf_any_float(1.0)};
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "add_n", args, 3), -1);
  PF_ASSERT_RAISED("ValueError", "add_n: argument 0 (x): expected data for 6 elements, got NULL");
  x.data = data;
  o.data = NULL;
  ck_assert_int_eq(pf_kernel_add_n(&x, &o, 1.0), -1);
  PF_ASSERT_RAISED("ValueError", "pf_kernel_add_n: argument 1 (out): expected data for 6");
  for (int i = 0; i < 64; ++i)
    ck_assert(out[i] == 42.0f);
}
END_TEST

/* rms_norm of a valid empty (2^30, 0) array returns at once: it visited the rows one by one for
 * nothing, 17 ns each (18 s here, hours for (2^40, 0)). */
START_TEST(test_rms_norm_empty_rows_return) {
  float data[1] = {42};
  int64_t empty[2] = {(int64_t)1 << 30, 0};
  DLTensor x = {data, cpu, 2, f32, empty, NULL, 0};
  pf_any_t args[3] = {pf_any_dltensor(&x), pf_any_dltensor(&x), pf_any_float(1e-5)};
  double start = seconds_now();
  ck_assert_int_eq(pf_kernel_rms_norm(&x, &x, 1e-5), 0);
  ck_assert_int_eq(call(PF_KERNELS_PREFIX "rms_norm", args, 3), 0);
  double took = seconds_now() - start;
  ck_assert_msg(took < 5.0, "rms_norm of (2^30, 0) took %.1f s", took); /* a hang check */
  ck_assert(data[0] == 42.0f);
}
END_TEST

START_TEST(test_module_exports) {
  pf_object_t* mod;
  ck_assert_int_eq(pf_module_load(PF_KERNELS_LIBRARY, &mod), 0);
  pf_export_info_t* list;
  size_t n;
  ck_assert_int_eq(pf_module_list(mod, &list, &n), 0);
  ck_assert_uint_eq(n, (size_t)pf_kernels_count());
  /* the export metadata is generated from the typed definitions: each export's signature text
   * is the one the registered function derives from its pf_signature_t */
  for (size_t i = 0; i < n; ++i) {
    char name[96];
    snprintf(name, sizeof name, PF_KERNELS_PREFIX "%s", list[i].name);
    pf_object_t* registered;
    ck_assert_int_eq(pf_global_get(name, &registered), 0);
    ck_assert_msg(registered != NULL, "export %s is not registered as %s", list[i].name, name);
    ck_assert_ptr_nonnull(list[i].signature);
    ck_assert_str_eq(list[i].signature, pf_function_signature(registered));
    ck_assert_ptr_nonnull(list[i].doc);
    ck_assert_ptr_nonnull(strstr(list[i].doc, "(CPU, or CUDA with libpackfn_kernels_cuda)"));
    pf_object_release(registered);
    if (strcmp(list[i].name, "rms_norm") == 0)
      ck_assert_str_eq(list[i].signature, "rms_norm(x: Tensor, out: Tensor, eps: float) -> None");
  }
  pf_module_list_free(list);
  pf_object_t* fn;
  ck_assert_int_eq(pf_module_get_function(mod, "add_n", &fn), 0);
  pf_object_release(mod); /* the function keeps the library */
  int64_t shape[1] = {3};
  pf_object_t* x = tensor(shape, 1, f64);
  fill(x, 1.0, 0.0);
  pf_any_t args[3] = {pf_any_object(x), pf_any_object(x), pf_any_int(1)};
  double before = get(x, 2);
  pf_any_t r;
  ck_assert_int_eq(pf_function_call(fn, args, 3, &r), 0);
  ck_assert_double_eq_tol(get(x, 2), before + 1, 1e-12);
  pf_object_release(fn);
  pf_object_release(x);
}
END_TEST

/* The public thread knob: set, read back, clamped, restored; results do not depend on it. */
START_TEST(test_threads_and_isa) {
  const char* isa = pf_kernels_isa();
  ck_assert_ptr_nonnull(isa);
  ck_assert(strcmp(isa, "avx512") == 0 || strcmp(isa, "avx2") == 0 || strcmp(isa, "sse2") == 0 ||
            strcmp(isa, "base") == 0);
  int before = pf_kernels_threads();
  ck_assert_int_ge(before, 1);
  ck_assert_int_eq(pf_kernels_set_threads(2), 2);
  ck_assert_int_eq(pf_kernels_threads(), 2);
  ck_assert_int_eq(pf_kernels_set_threads(1000), 64);
  /* 4 MiB: several threads' worth, so the split is exercised; same bits as one thread */
  int64_t shape[2] = {256, 4096};
  pf_object_t* x = tensor(shape, 2, (DLDataType){kDLFloat, 32, 1});
  pf_object_t* y1 = tensor(shape, 2, (DLDataType){kDLFloat, 32, 1});
  pf_object_t* y4 = tensor(shape, 2, (DLDataType){kDLFloat, 32, 1});
  float* xd = pf_tensor_dltensor(x)->data;
  for (int64_t i = 0; i < shape[0] * shape[1]; ++i)
    xd[i] = (float)((i * 7919) % 1000) / 250.0f - 2.0f;
  ck_assert_int_eq(pf_kernels_set_threads(1), 1);
  ck_assert_int_eq(pf_kernel_rms_norm(pf_tensor_dltensor(x), pf_tensor_dltensor(y1), 1e-5), 0);
  ck_assert_int_eq(pf_kernels_set_threads(4), 4);
  ck_assert_int_eq(pf_kernel_rms_norm(pf_tensor_dltensor(x), pf_tensor_dltensor(y4), 1e-5), 0);
  ck_assert(memcmp(pf_tensor_dltensor(y1)->data, pf_tensor_dltensor(y4)->data,
                   (size_t)(shape[0] * shape[1]) * sizeof(float)) == 0);
  ck_assert_int_ge(pf_kernels_set_threads(0), 1); /* the default again */
  pf_kernels_set_threads(before);
  pf_object_release(x);
  pf_object_release(y1);
  pf_object_release(y4);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("kernels");
  TCase* tc = tcase_create("cpu");
  tcase_add_test(tc, test_registered);
  tcase_add_test(tc, test_add_n);
  tcase_add_test(tc, test_rms_norm_family);
  tcase_add_test(tc, test_kepler);
  tcase_add_test(tc, test_kepler_refuses_bad_eccentricity);
  tcase_add_test(tc, test_vector_add);
  tcase_add_test(tc, test_refusals_touch_no_output);
  tcase_add_test(tc, test_outputs_unlike_input_refused);
  tcase_add_test(tc, test_overlaps_refused);
  tcase_add_test(tc, test_misaligned_tensors_refused);
  tcase_add_test(tc, test_rms_norm_extreme_eps_and_rows);
  tcase_add_test(tc, test_add_n_refuses_n_beyond_float32);
  tcase_add_test(tc, test_negative_extents_refused);
  tcase_add_test(tc, test_wrapping_sizes_and_null_data_refused);
  tcase_add_test(tc, test_rms_norm_empty_rows_return);
  tcase_add_test(tc, test_module_exports);
  tcase_add_test(tc, test_threads_and_isa);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
