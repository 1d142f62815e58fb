/* kernels/kernels.c: packfn_kernels, the CPU library: the kernels of kmath.h as typed packed
 * functions registered at load and exported for module loading, and the C entries of kernels.h,
 * which run CUDA tensors through the CUDA versions libpackfn_kernels_cuda registers. Never links
 * the CUDA runtime. */
#include <stdio.h>

#include "kernels/kdefs.h"
#include "kernels/kmath.h"
#include "packfn/kernels.h"
#include "packfn/module.h"

static const char* const pf__kernel_names[PF__K_COUNT] = {PF__K_NAMES};

int32_t pf_kernels_count(void) {
  return PF__K_COUNT;
}
const char* pf_kernels_name(int32_t i) {
  return i >= 0 && i < pf_kernels_count() ? pf__kernel_names[i] : NULL;
}

/* The CUDA version of a kernel, registered by libpackfn_kernels_cuda under `full_name`
 * (PF_KERNELS_CUDA_PREFIX and the kernel's name, a literal at every call: no formatting per
 * call): new reference, or NULL (nothing raised) when that library is not loaded. */
static pf_object_t* cuda_version(const char* full_name) {
  pf_object_t* fn = NULL;
  if (pf_global_get(full_name, &fn) != 0)
    pf_error_clear();
  return fn;
}

int pf_kernels_set_threads(int n) {
  return pf__k_threads_set(n);
}
int pf_kernels_threads(void) {
  return pf__k_threads_get();
}
const char* pf_kernels_isa(void) {
  return pf__k_isa_name();
}

int pf_kernels_have_cuda(void) {
  char full[64];
  snprintf(full, sizeof full, PF_KERNELS_CUDA_PREFIX "%s", pf__kernel_names[0]);
  pf_object_t* fn = cuda_version(full);
  pf_object_release(fn);
  return fn != NULL;
}

/* Runs the CUDA version registered as `full_name` on args that `func` has checked. */
static int run_cuda(const char* func, const char* full_name, const pf_any_t* args,
                    int32_t num_args) {
  pf_object_t* fn = cuda_version(full_name);
  if (fn == NULL) {
    PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED,
                 "%s: the tensors are on a CUDA device, and the CUDA kernels are in "
                 "libpackfn_kernels_cuda, which is not loaded (link packfn::packfn_kernels_cuda, "
                 "or load it with pf_module_load)",
                 func);
    return -1;
  }
  pf_any_t result = pf_any_none();
  int rc = pf_function_call(fn, args, num_args, &result);
  pf_any_release(&result);
  pf_object_release(fn);
  return rc;
}

#define F64(t) ((t)->dtype.bits == 64)

/* ---- CPU versions, arguments checked ---- */

static void cpu_add_n(const DLTensor* x, DLTensor* out, double n) {
  int64_t count = pf_dltensor_numel(x);
  if (F64(x))
    pf__k_add_n_f64(pf_dltensor_data(x), pf_dltensor_data(out), count, n);
  else
    pf__k_add_n_f32(pf_dltensor_data(x), pf_dltensor_data(out), count, (float)n);
}

static void cpu_rms_norm(const DLTensor* x, DLTensor* out, DLTensor* inv_rms, double eps) {
  int64_t cols = x->shape[x->ndim - 1], rows = pf__k_rows(x);
  void* xd = pf_dltensor_data(x);
  void* od = pf_dltensor_data(out);
  if (inv_rms && F64(x))
    pf__k_rms_norm_fwd_f64(xd, od, pf_dltensor_data(inv_rms), rows, cols, eps);
  else if (inv_rms)
    pf__k_rms_norm_fwd_f32(xd, od, pf_dltensor_data(inv_rms), rows, cols, eps);
  else if (F64(x))
    pf__k_rms_norm_f64(xd, od, rows, cols, eps);
  else
    pf__k_rms_norm_f32(xd, od, rows, cols, eps);
}

static void cpu_rms_norm_bwd(const DLTensor* x, const DLTensor* inv_rms, const DLTensor* ct,
                             DLTensor* dx) {
  int64_t cols = x->shape[x->ndim - 1], rows = pf__k_rows(x);
  if (F64(x))
    pf__k_rms_norm_bwd_f64(pf_dltensor_data(x), pf_dltensor_data(inv_rms), pf_dltensor_data(ct),
                           pf_dltensor_data(dx), rows, cols);
  else
    pf__k_rms_norm_bwd_f32(pf_dltensor_data(x), pf_dltensor_data(inv_rms), pf_dltensor_data(ct),
                           pf_dltensor_data(dx), rows, cols);
}

static void cpu_kepler(const DLTensor* m, const DLTensor* e, DLTensor* sin_e, DLTensor* cos_e) {
  int64_t count = pf_dltensor_numel(m);
  if (F64(m))
    pf__k_kepler_f64(pf_dltensor_data(m), pf_dltensor_data(e), pf_dltensor_data(sin_e),
                     pf_dltensor_data(cos_e), count);
  else
    pf__k_kepler_f32(pf_dltensor_data(m), pf_dltensor_data(e), pf_dltensor_data(sin_e),
                     pf_dltensor_data(cos_e), count);
}

static void cpu_vector_add(const DLTensor* b, const DLTensor* c, DLTensor* a) {
  int64_t count = pf_dltensor_numel(c), nb = b->shape[0];
  if (F64(c))
    pf__k_vector_add_f64(pf_dltensor_data(b), nb, pf_dltensor_data(c), pf_dltensor_data(a), count);
  else
    pf__k_vector_add_f32(pf_dltensor_data(b), nb, pf_dltensor_data(c), pf_dltensor_data(a), count);
}

/* ---- the runs behind both the C entries and the packed functions: checked for the device of
 * the first tensor, then the CPU version here or the CUDA version of libpackfn_kernels_cuda ---- */

static int add_n_run(const char* func, const DLTensor* x, DLTensor* out, double n) {
  int32_t dev;
  if (pf__k_device_of(func, x, "x", &dev) != 0 || pf__k_check_add_n(func, dev, x, out, n) != 0)
    return -1;
  if (dev == PF_DEV_CUDA) {
    pf_any_t args[] = {pf_any_dltensor((DLTensor*)x), pf_any_dltensor(out), pf_any_float(n)};
    return run_cuda(func, PF_KERNELS_CUDA_PREFIX "add_n", args, 3);
  }
  cpu_add_n(x, out, n);
  return 0;
}

static int rms_norm_run(const char* func, const char* cuda_name, const DLTensor* x, DLTensor* out,
                        DLTensor* inv_rms, double eps) {
  int32_t dev;
  if (pf__k_device_of(func, x, "x", &dev) != 0 ||
      pf__k_check_rms_norm(func, dev, x, out, inv_rms, eps) != 0)
    return -1;
  if (dev == PF_DEV_CUDA) {
    pf_any_t args[] = {pf_any_dltensor((DLTensor*)x), pf_any_dltensor(out),
                       inv_rms ? pf_any_dltensor(inv_rms) : pf_any_float(eps), pf_any_float(eps)};
    return run_cuda(func, cuda_name, args, inv_rms ? 4 : 3);
  }
  cpu_rms_norm(x, out, inv_rms, eps);
  return 0;
}

static int rms_norm_bwd_run(const char* func, const DLTensor* x, const DLTensor* inv_rms,
                            const DLTensor* cotangent, DLTensor* dx) {
  int32_t dev;
  if (pf__k_device_of(func, x, "x", &dev) != 0 ||
      pf__k_check_rms_norm_bwd(func, dev, x, inv_rms, cotangent, dx) != 0)
    return -1;
  if (dev == PF_DEV_CUDA) {
    pf_any_t args[] = {pf_any_dltensor((DLTensor*)x), pf_any_dltensor((DLTensor*)inv_rms),
                       pf_any_dltensor((DLTensor*)cotangent), pf_any_dltensor(dx)};
    return run_cuda(func, PF_KERNELS_CUDA_PREFIX "rms_norm_bwd", args, 4);
  }
  cpu_rms_norm_bwd(x, inv_rms, cotangent, dx);
  return 0;
}

static int kepler_run(const char* func, const DLTensor* mean_anomaly, const DLTensor* eccentricity,
                      DLTensor* sin_e, DLTensor* cos_e) {
  int32_t dev;
  if (pf__k_device_of(func, mean_anomaly, "mean_anomaly", &dev) != 0 ||
      pf__k_check_kepler(func, dev, mean_anomaly, eccentricity, sin_e, cos_e) != 0)
    return -1;
  if (dev == PF_DEV_CUDA) {
    pf_any_t args[] = {pf_any_dltensor((DLTensor*)mean_anomaly),
                       pf_any_dltensor((DLTensor*)eccentricity), pf_any_dltensor(sin_e),
                       pf_any_dltensor(cos_e)};
    return run_cuda(func, PF_KERNELS_CUDA_PREFIX "kepler", args, 4);
  }
  if (pf__k_check_eccentricity(func, eccentricity) != 0)
    return -1;
  cpu_kepler(mean_anomaly, eccentricity, sin_e, cos_e);
  return 0;
}

static int vector_add_run(const char* func, const DLTensor* b, const DLTensor* c, DLTensor* a) {
  int32_t dev;
  if (pf__k_device_of(func, b, "b", &dev) != 0 || pf__k_check_vector_add(func, dev, b, c, a) != 0)
    return -1;
  if (dev == PF_DEV_CUDA) {
    pf_any_t args[] = {pf_any_dltensor((DLTensor*)b), pf_any_dltensor((DLTensor*)c),
                       pf_any_dltensor(a)};
    return run_cuda(func, PF_KERNELS_CUDA_PREFIX "vector_add", args, 3);
  }
  cpu_vector_add(b, c, a);
  return 0;
}

/* ---- direct C entry points ---- */

int pf_kernel_add_n(const DLTensor* x, DLTensor* out, double n) {
  return add_n_run("pf_kernel_add_n", x, out, n);
}

int pf_kernel_rms_norm(const DLTensor* x, DLTensor* out, double eps) {
  return rms_norm_run("pf_kernel_rms_norm", PF_KERNELS_CUDA_PREFIX "rms_norm", x, out, NULL, eps);
}

int pf_kernel_rms_norm_fwd(const DLTensor* x, DLTensor* out, DLTensor* inv_rms, double eps) {
  if (!inv_rms) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_kernel_rms_norm_fwd: argument 2 (inv_rms): expected a tensor, got NULL");
    return -1;
  }
  return rms_norm_run("pf_kernel_rms_norm_fwd", PF_KERNELS_CUDA_PREFIX "rms_norm_fwd", x, out,
                      inv_rms, eps);
}

int pf_kernel_rms_norm_bwd(const DLTensor* x, const DLTensor* inv_rms, const DLTensor* cotangent,
                           DLTensor* dx) {
  return rms_norm_bwd_run("pf_kernel_rms_norm_bwd", x, inv_rms, cotangent, dx);
}

int pf_kernel_kepler(const DLTensor* mean_anomaly, const DLTensor* eccentricity, DLTensor* sin_e,
                     DLTensor* cos_e) {
  return kepler_run("pf_kernel_kepler", mean_anomaly, eccentricity, sin_e, cos_e);
}

int pf_kernel_vector_add(const DLTensor* b, const DLTensor* c, DLTensor* a) {
  return vector_add_run("pf_kernel_vector_add", b, c, a);
}

/* ---- packed versions, registered when the library loads: CPU tensors here, CUDA tensors
 * through libpackfn_kernels_cuda's versions (NotImplementedError when it is not loaded) ---- */

PF__K_DEFINE(add_n, PF__K_PARAMS_ADD_N) {
  (void)result;
  return add_n_run("add_n", x, out, n);
}
PF__K_DEFINE(rms_norm, PF__K_PARAMS_RMS_NORM) {
  (void)result;
  return rms_norm_run("rms_norm", PF_KERNELS_CUDA_PREFIX "rms_norm", x, out, NULL, eps);
}
PF__K_DEFINE(rms_norm_fwd, PF__K_PARAMS_RMS_NORM_FWD) {
  (void)result;
  return rms_norm_run("rms_norm_fwd", PF_KERNELS_CUDA_PREFIX "rms_norm_fwd", x, out, inv_rms, eps);
}
PF__K_DEFINE(rms_norm_bwd, PF__K_PARAMS_RMS_NORM_BWD) {
  (void)result;
  return rms_norm_bwd_run("rms_norm_bwd", x, inv_rms, cotangent, dx);
}
PF__K_DEFINE(kepler, PF__K_PARAMS_KEPLER) {
  (void)result;
  return kepler_run("kepler", mean_anomaly, eccentricity, sin_e, cos_e);
}
PF__K_DEFINE(vector_add, PF__K_PARAMS_VECTOR_ADD) {
  (void)result;
  return vector_add_run("vector_add", b, c, a);
}

PF__K_ENTRY(add_n, PF__K_OUTS_ADD_N);
PF__K_ENTRY(rms_norm, PF__K_OUTS_RMS_NORM);
PF__K_ENTRY(rms_norm_fwd, PF__K_OUTS_RMS_NORM_FWD);
PF__K_ENTRY(rms_norm_bwd, PF__K_OUTS_RMS_NORM_BWD);
PF__K_ENTRY(kepler, PF__K_OUTS_KEPLER);
PF__K_ENTRY(vector_add, PF__K_OUTS_VECTOR_ADD);

PF__REGISTER_STATIC(PF_KERNELS_PREFIX "add_n", add_n_checked, &add_n_signature, NULL);
PF__REGISTER_STATIC(PF_KERNELS_PREFIX "rms_norm", rms_norm_checked, &rms_norm_signature, NULL);
PF__REGISTER_STATIC(PF_KERNELS_PREFIX "rms_norm_fwd", rms_norm_fwd_checked, &rms_norm_fwd_signature,
                    NULL);
PF__REGISTER_STATIC(PF_KERNELS_PREFIX "rms_norm_bwd", rms_norm_bwd_checked, &rms_norm_bwd_signature,
                    NULL);
PF__REGISTER_STATIC(PF_KERNELS_PREFIX "kepler", kepler_checked, &kepler_signature, NULL);
PF__REGISTER_STATIC(PF_KERNELS_PREFIX "vector_add", vector_add_checked, &vector_add_signature,
                    NULL);

/* ---- exports for module loading (pf_module_load on libpackfn_kernels.so) ---- */

PF_EXPORT_DOC(add_n, add_n_checked, add_n_text,
              "out = x + n, elementwise (CPU, or CUDA with libpackfn_kernels_cuda)");
PF_EXPORT_DOC(
    rms_norm, rms_norm_checked, rms_norm_text,
    "out = x / sqrt(mean(x^2, last axis) + eps) (CPU, or CUDA with libpackfn_kernels_cuda)");
PF_EXPORT_DOC(rms_norm_fwd, rms_norm_fwd_checked, rms_norm_fwd_text,
              "rms_norm that also writes inv_rms for the backward pass (CPU, or CUDA with "
              "libpackfn_kernels_cuda)");
PF_EXPORT_DOC(rms_norm_bwd, rms_norm_bwd_checked, rms_norm_bwd_text,
              "gradient of rms_norm (CPU, or CUDA with libpackfn_kernels_cuda)");
PF_EXPORT_DOC(kepler, kepler_checked, kepler_text,
              "solves M = E - e sin E for 0 <= e < 1; writes sin E and cos E (CPU, or CUDA with "
              "libpackfn_kernels_cuda)");
PF_EXPORT_DOC(vector_add, vector_add_checked, vector_add_text,
              "a[i] = b[i mod len(b)] + c[i] (CPU, or CUDA with libpackfn_kernels_cuda)");
