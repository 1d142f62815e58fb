/* kernels/kernels.c: packfn_kernels: argument checking and dispatch of the kernels of kmath.h
 * (CPU) and math_cuda.cu (CUDA), as typed packed functions registered at load and as C calls. */
#include <math.h>

#include "kernels/kernels_cuda.h"
#include "kernels/kmath.h"
#include "packfn/function.h"
#include "packfn/kernels.h"
#include "packfn/module.h"

#ifdef PF_KERNELS_HAVE_CUDA
#define PF__K_HAVE_CUDA 1
#else
#define PF__K_HAVE_CUDA 0
#endif

static const char* const pf__kernel_names[] = {"add_n",        "rms_norm", "rms_norm_fwd",
                                               "rms_norm_bwd", "kepler",   "vector_add"};

int pf_kernels_have_cuda(void) {
  return PF__K_HAVE_CUDA;
}
int32_t pf_kernels_count(void) {
  return (int32_t)(sizeof pf__kernel_names / sizeof pf__kernel_names[0]);
}
const char* pf_kernels_name(int32_t i) {
  return i >= 0 && i < pf_kernels_count() ? pf__kernel_names[i] : NULL;
}

/* ---- argument checks, shared by every version ---- */

/* The device a call runs on: `want` for the packed versions (cpu or cuda), else the device of
 * the first tensor when this build can run there. */
static int k_device(const char* func, const DLTensor* first, const char* name, int32_t want,
                    int32_t* dev) {
  if (!first) {
    pf_error_set(PF_ERR_VALUE, "%s: argument 0 (%s): expected a tensor, got NULL", func, name);
    return -1;
  }
  if (want) {
    *dev = want;
    return 0;
  }
  int32_t t = (int32_t)first->device.device_type;
  if (t == PF_DEV_CPU || (t == PF_DEV_CUDA && PF__K_HAVE_CUDA)) {
    *dev = t;
    return 0;
  }
  char buf[32];
  pf_device_format(first->device, buf, sizeof buf);
  pf_error_set(PF_ERR_NOT_IMPLEMENTED, "%s: argument 0 (%s): no %s version for tensors on %s", func,
               name, func, buf);
  return -1;
}

/* Argument `index` must be a compact float32/float64 tensor on device type `dev` with at least
 * `min_ndim` axes. */
static int k_input(const char* func, int32_t index, const char* name, const DLTensor* t,
                   int32_t dev, int32_t min_ndim) {
  pf_tensor_spec_t spec = {PF_DTYPES(PF_DTYPE_FLOAT32, PF_DTYPE_FLOAT64), .device_type = dev,
                           .min_ndim = min_ndim, .contiguous = 1};
  return pf_dltensor_check(t, &spec, func, index, name);
}

/* Argument `index` must match `ref` (dtype, device, shape) and be compact. */
static int k_like(const char* func, int32_t index, const char* name, const DLTensor* t,
                  const DLTensor* ref, const char* ref_name) {
  pf_tensor_spec_t spec = {.contiguous = 1};
  if (pf_dltensor_check_like(t, ref, func, index, name, ref_name) != 0)
    return -1;
  return pf_dltensor_check(t, &spec, func, index, name);
}

/* Argument `index` must have ref's dtype and device, `ndim` axes with the given extents. */
static int k_shaped(const char* func, int32_t index, const char* name, const DLTensor* t,
                    const DLTensor* ref, const char* ref_name, int32_t ndim, const int64_t* shape) {
  pf_tensor_spec_t spec = {.dtypes = &ref->dtype,
                           .num_dtypes = 1,
                           .device_type = (int32_t)ref->device.device_type,
                           .ndim = ndim,
                           .shape = shape,
                           .contiguous = 1};
  if (pf_dltensor_check(t, &spec, func, index, name) != 0)
    return -1;
  if (t->device.device_id != ref->device.device_id) {
    char a[32], b[32];
    pf_device_format(t->device, a, sizeof a);
    pf_device_format(ref->device, b, sizeof b);
    pf_error_set(PF_ERR_TYPE, "%s: argument %d (%s): expected a tensor on %s like %s, got %s", func,
                 (int)index, name, b, ref_name, a);
    return -1;
  }
  return 0;
}

static int k_scalar(const char* func, int32_t index, const char* name, double v, int nonneg) {
  if (!isfinite(v) || (nonneg && v < 0)) {
    pf_error_set(PF_ERR_VALUE, "%s: argument %d (%s): expected a finite%s number, got %g", func,
                 (int)index, name, nonneg ? " non-negative" : "", v);
    return -1;
  }
  return 0;
}

#ifndef PF_KERNELS_HAVE_CUDA
static int k_no_cuda(const char* func) {
  pf_error_set(PF_ERR_NOT_IMPLEMENTED, "%s: this build of packfn_kernels has no CUDA support",
               func);
  return -1;
}
#endif

#define F64(t) ((t)->dtype.bits == 64)

/* ---- the kernels ---- */

static int k_add_n(const char* func, int32_t want, const DLTensor* x, DLTensor* out, double n) {
  int32_t dev;
  if (k_device(func, x, "x", want, &dev) != 0 || k_input(func, 0, "x", x, dev, 0) != 0 ||
      k_like(func, 1, "out", out, x, "x") != 0 || k_scalar(func, 2, "n", n, 0) != 0)
    return -1;
  if (dev == PF_DEV_CUDA)
#ifdef PF_KERNELS_HAVE_CUDA
    return pf__kcuda_add_n(func, x, out, n);
#else
    return k_no_cuda(func);
#endif
  int64_t count = pf_dltensor_numel(x);
  if (F64(x))
    pf__k_add_n_f64(pf_dltensor_data(x), pf_dltensor_data(out), count, n);
  else
    pf__k_add_n_f32(pf_dltensor_data(x), pf_dltensor_data(out), count, (float)n);
  return 0;
}

static int k_rms_norm(const char* func, int32_t want, const DLTensor* x, DLTensor* out,
                      DLTensor* inv_rms, double eps) {
  int32_t dev;
  int32_t eps_index = inv_rms ? 3 : 2;
  if (k_device(func, x, "x", want, &dev) != 0 || k_input(func, 0, "x", x, dev, 1) != 0 ||
      k_like(func, 1, "out", out, x, "x") != 0 ||
      (inv_rms && k_shaped(func, 2, "inv_rms", inv_rms, x, "x", x->ndim - 1, x->shape) != 0) ||
      k_scalar(func, eps_index, "eps", eps, 1) != 0)
    return -1;
  if (dev == PF_DEV_CUDA)
#ifdef PF_KERNELS_HAVE_CUDA
    return pf__kcuda_rms_norm(func, x, out, inv_rms, eps);
#else
    return k_no_cuda(func);
#endif
  int64_t cols = x->shape[x->ndim - 1], rows = pf__k_rows(x);
  void* xd = pf_dltensor_data(x);
  void* od = pf_dltensor_data(out);
  if (inv_rms && F64(x))
    pf__k_rms_norm_fwd_f64(xd, od, pf_dltensor_data(inv_rms), rows, cols, eps);
  else if (inv_rms)
    pf__k_rms_norm_fwd_f32(xd, od, pf_dltensor_data(inv_rms), rows, cols, (float)eps);
  else if (F64(x))
    pf__k_rms_norm_f64(xd, od, rows, cols, eps);
  else
    pf__k_rms_norm_f32(xd, od, rows, cols, (float)eps);
  return 0;
}

static int k_rms_norm_bwd(const char* func, int32_t want, const DLTensor* x,
                          const DLTensor* inv_rms, const DLTensor* ct, DLTensor* dx) {
  int32_t dev;
  if (k_device(func, x, "x", want, &dev) != 0 || k_input(func, 0, "x", x, dev, 1) != 0 ||
      k_shaped(func, 1, "inv_rms", inv_rms, x, "x", x->ndim - 1, x->shape) != 0 ||
      k_like(func, 2, "cotangent", ct, x, "x") != 0 || k_like(func, 3, "dx", dx, x, "x") != 0)
    return -1;
  if (dev == PF_DEV_CUDA)
#ifdef PF_KERNELS_HAVE_CUDA
    return pf__kcuda_rms_norm_bwd(func, x, inv_rms, ct, dx);
#else
    return k_no_cuda(func);
#endif
  int64_t cols = x->shape[x->ndim - 1], rows = pf__k_rows(x);
  if (F64(x))
    pf__k_rms_norm_bwd_f64(pf_dltensor_data(x), pf_dltensor_data(inv_rms), pf_dltensor_data(ct),
                           pf_dltensor_data(dx), rows, cols);
  else
    pf__k_rms_norm_bwd_f32(pf_dltensor_data(x), pf_dltensor_data(inv_rms), pf_dltensor_data(ct),
                           pf_dltensor_data(dx), rows, cols);
  return 0;
}

static int k_kepler(const char* func, int32_t want, const DLTensor* m, const DLTensor* e,
                    DLTensor* sin_e, DLTensor* cos_e) {
  int32_t dev;
  if (k_device(func, m, "mean_anomaly", want, &dev) != 0 ||
      k_input(func, 0, "mean_anomaly", m, dev, 0) != 0 ||
      k_like(func, 1, "eccentricity", e, m, "mean_anomaly") != 0 ||
      k_like(func, 2, "sin_e", sin_e, m, "mean_anomaly") != 0 ||
      k_like(func, 3, "cos_e", cos_e, m, "mean_anomaly") != 0)
    return -1;
  if (sin_e->data == cos_e->data && sin_e->byte_offset == cos_e->byte_offset &&
      pf_dltensor_numel(m) > 0) {
    pf_error_set(PF_ERR_VALUE, "%s: argument 3 (cos_e): expected a different buffer than sin_e",
                 func);
    return -1;
  }
  if (dev == PF_DEV_CUDA)
#ifdef PF_KERNELS_HAVE_CUDA
    return pf__kcuda_kepler(func, m, e, sin_e, cos_e);
#else
    return k_no_cuda(func);
#endif
  int64_t count = pf_dltensor_numel(m);
  if (F64(m))
    pf__k_kepler_f64(pf_dltensor_data(m), pf_dltensor_data(e), pf_dltensor_data(sin_e),
                     pf_dltensor_data(cos_e), count);
  else
    pf__k_kepler_f32(pf_dltensor_data(m), pf_dltensor_data(e), pf_dltensor_data(sin_e),
                     pf_dltensor_data(cos_e), count);
  return 0;
}

static int k_vector_add(const char* func, int32_t want, const DLTensor* b, const DLTensor* c,
                        DLTensor* a) {
  int32_t dev;
  if (k_device(func, b, "b", want, &dev) != 0 || k_input(func, 0, "b", b, dev, 1) != 0 ||
      k_input(func, 1, "c", c, dev, 0) != 0 || k_like(func, 2, "a", a, c, "c") != 0)
    return -1;
  if (b->ndim != 1) {
    pf_error_set(PF_ERR_VALUE, "%s: argument 0 (b): expected 1 dimension, got %d", func,
                 (int)b->ndim);
    return -1;
  }
  int64_t one = -1;
  if (k_shaped(func, 0, "b", b, c, "c", 1, &one) != 0)
    return -1;
  int64_t count = pf_dltensor_numel(c), nb = b->shape[0];
  if (nb == 0 && count > 0) {
    pf_error_set(PF_ERR_VALUE, "%s: argument 0 (b): expected at least 1 element, got 0", func);
    return -1;
  }
  if (dev == PF_DEV_CUDA)
#ifdef PF_KERNELS_HAVE_CUDA
    return pf__kcuda_vector_add(func, b, c, a);
#else
    return k_no_cuda(func);
#endif
  if (F64(c))
    pf__k_vector_add_f64(pf_dltensor_data(b), nb, pf_dltensor_data(c), pf_dltensor_data(a), count);
  else
    pf__k_vector_add_f32(pf_dltensor_data(b), nb, pf_dltensor_data(c), pf_dltensor_data(a), count);
  return 0;
}

/* ---- direct C entry points ---- */

int pf_kernel_add_n(const DLTensor* x, DLTensor* out, double n) {
  return k_add_n("pf_kernel_add_n", 0, x, out, n);
}
int pf_kernel_rms_norm(const DLTensor* x, DLTensor* out, double eps) {
  return k_rms_norm("pf_kernel_rms_norm", 0, x, out, NULL, eps);
}
int pf_kernel_rms_norm_fwd(const DLTensor* x, DLTensor* out, DLTensor* inv_rms, double eps) {
  if (!inv_rms) {
    pf_error_set(PF_ERR_VALUE,
                 "pf_kernel_rms_norm_fwd: argument 2 (inv_rms): expected a tensor, got NULL");
    return -1;
  }
  return k_rms_norm("pf_kernel_rms_norm_fwd", 0, x, out, inv_rms, eps);
}
int pf_kernel_rms_norm_bwd(const DLTensor* x, const DLTensor* inv_rms, const DLTensor* cotangent,
                           DLTensor* dx) {
  return k_rms_norm_bwd("pf_kernel_rms_norm_bwd", 0, x, inv_rms, cotangent, dx);
}
int pf_kernel_kepler(const DLTensor* mean_anomaly, const DLTensor* eccentricity, DLTensor* sin_e,
                     DLTensor* cos_e) {
  return k_kepler("pf_kernel_kepler", 0, mean_anomaly, eccentricity, sin_e, cos_e);
}
int pf_kernel_vector_add(const DLTensor* b, const DLTensor* c, DLTensor* a) {
  return k_vector_add("pf_kernel_vector_add", 0, b, c, a);
}

/* ---- packed versions, registered when the library loads ---- */

#define PF__K_PACKED(suffix, dev)                                                                  \
  PF_TYPED_DEFINE(add_n##suffix, NONE, (TENSOR, x), (TENSOR, out), (FLOAT, n)) {                   \
    (void)result;                                                                                  \
    return k_add_n("add_n" #suffix, dev, x, out, n);                                               \
  }                                                                                                \
  PF_TYPED_DEFINE(rms_norm##suffix, NONE, (TENSOR, x), (TENSOR, out), (FLOAT, eps)) {              \
    (void)result;                                                                                  \
    return k_rms_norm("rms_norm" #suffix, dev, x, out, NULL, eps);                                 \
  }                                                                                                \
  PF_TYPED_DEFINE(rms_norm_fwd##suffix, NONE, (TENSOR, x), (TENSOR, out), (TENSOR, inv_rms),       \
                  (FLOAT, eps)) {                                                                  \
    (void)result;                                                                                  \
    return k_rms_norm("rms_norm_fwd" #suffix, dev, x, out, inv_rms, eps);                          \
  }                                                                                                \
  PF_TYPED_DEFINE(rms_norm_bwd##suffix, NONE, (TENSOR, x), (TENSOR, inv_rms), (TENSOR, cotangent), \
                  (TENSOR, dx)) {                                                                  \
    (void)result;                                                                                  \
    return k_rms_norm_bwd("rms_norm_bwd" #suffix, dev, x, inv_rms, cotangent, dx);                 \
  }                                                                                                \
  PF_TYPED_DEFINE(kepler##suffix, NONE, (TENSOR, mean_anomaly), (TENSOR, eccentricity),            \
                  (TENSOR, sin_e), (TENSOR, cos_e)) {                                              \
    (void)result;                                                                                  \
    return k_kepler("kepler" #suffix, dev, mean_anomaly, eccentricity, sin_e, cos_e);              \
  }                                                                                                \
  PF_TYPED_DEFINE(vector_add##suffix, NONE, (TENSOR, b), (TENSOR, c), (TENSOR, a)) {               \
    (void)result;                                                                                  \
    return k_vector_add("vector_add" #suffix, dev, b, c, a);                                       \
  }                                                                                                \
  _Static_assert(1, "PF__K_PACKED")

PF__K_PACKED(, PF_DEV_CPU);
PF_TYPED_REGISTER(add_n, PF_KERNELS_PREFIX "add_n");
PF_TYPED_REGISTER(rms_norm, PF_KERNELS_PREFIX "rms_norm");
PF_TYPED_REGISTER(rms_norm_fwd, PF_KERNELS_PREFIX "rms_norm_fwd");
PF_TYPED_REGISTER(rms_norm_bwd, PF_KERNELS_PREFIX "rms_norm_bwd");
PF_TYPED_REGISTER(kepler, PF_KERNELS_PREFIX "kepler");
PF_TYPED_REGISTER(vector_add, PF_KERNELS_PREFIX "vector_add");

#ifdef PF_KERNELS_HAVE_CUDA
PF__K_PACKED(_cuda, PF_DEV_CUDA);
PF_TYPED_REGISTER(add_n_cuda, PF_KERNELS_CUDA_PREFIX "add_n");
PF_TYPED_REGISTER(rms_norm_cuda, PF_KERNELS_CUDA_PREFIX "rms_norm");
PF_TYPED_REGISTER(rms_norm_fwd_cuda, PF_KERNELS_CUDA_PREFIX "rms_norm_fwd");
PF_TYPED_REGISTER(rms_norm_bwd_cuda, PF_KERNELS_CUDA_PREFIX "rms_norm_bwd");
PF_TYPED_REGISTER(kepler_cuda, PF_KERNELS_CUDA_PREFIX "kepler");
PF_TYPED_REGISTER(vector_add_cuda, PF_KERNELS_CUDA_PREFIX "vector_add");
#endif

/* ---- exports for module loading (pf_module_load on libpackfn_kernels.so) ---- */

PF_EXPORT_DOC(add_n, add_n_packed, "add_n(x: Tensor, out: Tensor, n: float) -> None",
              "out = x + n, elementwise (CPU)");
PF_EXPORT_DOC(rms_norm, rms_norm_packed, "rms_norm(x: Tensor, out: Tensor, eps: float) -> None",
              "out = x / sqrt(mean(x^2, last axis) + eps) (CPU)");
PF_EXPORT_DOC(rms_norm_fwd, rms_norm_fwd_packed,
              "rms_norm_fwd(x: Tensor, out: Tensor, inv_rms: Tensor, eps: float) -> None",
              "rms_norm that also writes inv_rms for the backward pass (CPU)");
PF_EXPORT_DOC(rms_norm_bwd, rms_norm_bwd_packed,
              "rms_norm_bwd(x: Tensor, inv_rms: Tensor, cotangent: Tensor, dx: Tensor) -> None",
              "gradient of rms_norm (CPU)");
PF_EXPORT_DOC(kepler, kepler_packed,
              "kepler(mean_anomaly: Tensor, eccentricity: Tensor, sin_e: Tensor, cos_e: Tensor) "
              "-> None",
              "solves M = E - e sin E; writes sin E and cos E (CPU)");
PF_EXPORT_DOC(vector_add, vector_add_packed, "vector_add(b: Tensor, c: Tensor, a: Tensor) -> None",
              "a[i] = b[i mod len(b)] + c[i] (CPU)");
#ifdef PF_KERNELS_HAVE_CUDA
PF_EXPORT_DOC(cuda_add_n, add_n_cuda_packed, "add_n(x: Tensor, out: Tensor, n: float) -> None",
              "out = x + n, elementwise (CUDA, current stream)");
PF_EXPORT_DOC(cuda_rms_norm, rms_norm_cuda_packed,
              "rms_norm(x: Tensor, out: Tensor, eps: float) -> None",
              "rms_norm over the last axis (CUDA, current stream)");
PF_EXPORT_DOC(cuda_rms_norm_fwd, rms_norm_fwd_cuda_packed,
              "rms_norm_fwd(x: Tensor, out: Tensor, inv_rms: Tensor, eps: float) -> None",
              "rms_norm with inv_rms (CUDA, current stream)");
PF_EXPORT_DOC(cuda_rms_norm_bwd, rms_norm_bwd_cuda_packed,
              "rms_norm_bwd(x: Tensor, inv_rms: Tensor, cotangent: Tensor, dx: Tensor) -> None",
              "gradient of rms_norm (CUDA, current stream)");
PF_EXPORT_DOC(cuda_kepler, kepler_cuda_packed,
              "kepler(mean_anomaly: Tensor, eccentricity: Tensor, sin_e: Tensor, cos_e: Tensor) "
              "-> None",
              "solves M = E - e sin E (CUDA, current stream)");
PF_EXPORT_DOC(cuda_vector_add, vector_add_cuda_packed,
              "vector_add(b: Tensor, c: Tensor, a: Tensor) -> None",
              "a[i] = b[i mod len(b)] + c[i] (CUDA, current stream)");
#endif
