/* kernels/kernels_cuda.c: packfn_kernels_cuda, the CUDA library: the kernels of math_cuda.cu and
 * math_cuda_rows.cu as typed packed functions registered at load under packfn.kernels.cuda.<name>
 * and exported as cuda_<name>. Each checks its arguments as the CPU version does (kcheck.c), then
 * launches on the current stream of the tensors' device, inside a device guard, with CUDA errors
 * raised. libpackfn_kernels's C entries find these through the global table for CUDA tensors. */
#include "kernels/kdefs.h"
#include "kernels/math_cuda.h"
#include "packfn/cuda.h"
#include "packfn/kernels.h"
#include "packfn/module.h"

/* Leaves device `dev`, entered by pf_cuda_device_enter with *prev = prev: `rc`, or -1 when
 * restoring prev failed. No call when nothing switched. */
static int leave_device(int32_t prev, int32_t dev, int rc) {
  return prev != dev && pf_cuda_device_exit(prev) != 0 ? -1 : rc;
}

/* pf_cuda_device_enter for kernel `func`: its error, of the same kind, names the kernel and the
 * device ("kepler_cuda: cannot run on cuda:0: pf_cuda_device_enter: cudaGetDevice failed: no
 * CUDA device ..."), where it named only pf_cuda_device_enter, which the caller never called
 * (review); the original error is its cause. */
static int enter_device(const char* func, int32_t dev, int32_t* prev) {
  if (PF_LIKELY(pf_cuda_device_enter(dev, prev) == 0))
    return 0;
  pf_object_t* cause = pf_error_take();
  const char* kind = cause ? pf_error_kind(cause) : PF_ERR_RUNTIME;
  const char* text = cause ? pf_error_message(cause) : "failed without raising an error";
  PF_ERROR_SET(kind, "%s: cannot run on cuda:%d: %s", func, (int)dev, text);
  if (cause) {
    pf_object_t* err = pf_error_peek();
    if (err)
      (void)pf_error_set_cause(err, cause);
    pf_object_release(cause);
  }
  return -1;
}

/* Runs `launch` (a cudaError_t expression) with device `dev` current and `stream` its current
 * stream, then restores the previous device. */
#define PF__KCUDA_RUN(func, what, dev, launch)                                                     \
  do {                                                                                             \
    int32_t prev_;                                                                                 \
    if (enter_device((func), (dev), &prev_) != 0)                                                  \
      return -1;                                                                                   \
    void* stream = pf_cuda_stream_get(dev);                                                        \
    return leave_device(prev_, (dev), pf_cuda_check((launch), (func), (what)));                    \
  } while (0)

static int is_f64(const DLTensor* t) {
  return t->dtype.bits == 64;
}

int32_t pf_kernels_cuda_count(void) {
  return PF__K_COUNT;
}

PF__K_DEFINE(add_n_cuda, PF__K_PARAMS_ADD_N) {
  (void)result;
  if (pf__k_check_add_n("add_n_cuda", PF_DEV_CUDA, x, out, n) != 0)
    return -1;
  int64_t count = pf_dltensor_numel(x);
  PF__KCUDA_RUN(
      "add_n_cuda", "add_n kernel launch", x->device.device_id,
      is_f64(x)
          ? pf__kc_add_n_f64(pf_dltensor_data(x), pf_dltensor_data(out), count, n, stream)
          : pf__kc_add_n_f32(pf_dltensor_data(x), pf_dltensor_data(out), count, (float)n, stream));
}

static int launch_rms_norm(const char* func, const DLTensor* x, DLTensor* out, DLTensor* inv_rms,
                           double eps) {
  if (pf__k_check_rms_norm(func, PF_DEV_CUDA, x, out, inv_rms, eps) != 0)
    return -1;
  int64_t cols = x->shape[x->ndim - 1];
  int64_t rows = pf__k_rows(x);
  void* xd = pf_dltensor_data(x);
  void* od = pf_dltensor_data(out);
  if (inv_rms) {
    void* id = pf_dltensor_data(inv_rms);
    PF__KCUDA_RUN(func, "rms_norm_fwd kernel launch", x->device.device_id,
                  is_f64(x) ? pf__kc_rms_norm_fwd_f64(xd, od, id, rows, cols, eps, stream)
                            : pf__kc_rms_norm_fwd_f32(xd, od, id, rows, cols, eps, stream));
  }
  PF__KCUDA_RUN(func, "rms_norm kernel launch", x->device.device_id,
                is_f64(x) ? pf__kc_rms_norm_f64(xd, od, rows, cols, eps, stream)
                          : pf__kc_rms_norm_f32(xd, od, rows, cols, eps, stream));
}

PF__K_DEFINE(rms_norm_cuda, PF__K_PARAMS_RMS_NORM) {
  (void)result;
  return launch_rms_norm("rms_norm_cuda", x, out, NULL, eps);
}

PF__K_DEFINE(rms_norm_fwd_cuda, PF__K_PARAMS_RMS_NORM_FWD) {
  (void)result;
  return launch_rms_norm("rms_norm_fwd_cuda", x, out, inv_rms, eps);
}

PF__K_DEFINE(rms_norm_bwd_cuda, PF__K_PARAMS_RMS_NORM_BWD) {
  (void)result;
  static const char func[] = "rms_norm_bwd_cuda";
  if (pf__k_check_rms_norm_bwd(func, PF_DEV_CUDA, x, inv_rms, cotangent, dx) != 0)
    return -1;
  int64_t cols = x->shape[x->ndim - 1];
  int64_t rows = pf__k_rows(x);
  void* xd = pf_dltensor_data(x);
  void* id = pf_dltensor_data(inv_rms);
  void* cd = pf_dltensor_data(cotangent);
  void* dd = pf_dltensor_data(dx);
  PF__KCUDA_RUN(func, "rms_norm_bwd kernel launch", x->device.device_id,
                is_f64(x) ? pf__kc_rms_norm_bwd_f64(xd, id, cd, dd, rows, cols, stream)
                          : pf__kc_rms_norm_bwd_f32(xd, id, cd, dd, rows, cols, stream));
}

/* The eccentricities are checked on the device (pf__kc_kepler_check_*: one pass over them and
 * a wait for the stream) before the launch, so a bad one raises rather than giving NaN. The
 * message is the CPU check's (kcheck.c, pf__k_check_eccentricity), with the first bad index. */
static int check_eccentricity(const char* func, const DLTensor* e, void* stream) {
  int64_t count = pf_dltensor_numel(e), index = -1;
  double value = 0;
  const void* data = pf_dltensor_data(e);
  int rc = is_f64(e) ? pf__kc_kepler_check_f64(data, count, &index, &value, stream)
                     : pf__kc_kepler_check_f32(data, count, &index, &value, stream);
  if (pf_cuda_check(rc, func, "eccentricity check") != 0)
    return -1;
  return index < 0 ? 0 : pf__k_eccentricity_error(func, value, index);
}

PF__K_DEFINE(kepler_cuda, PF__K_PARAMS_KEPLER) {
  (void)result;
  static const char func[] = "kepler_cuda";
  if (pf__k_check_kepler(func, PF_DEV_CUDA, mean_anomaly, eccentricity, sin_e, cos_e) != 0)
    return -1;
  int64_t count = pf_dltensor_numel(mean_anomaly);
  void* md = pf_dltensor_data(mean_anomaly);
  void* ed = pf_dltensor_data(eccentricity);
  void* sd = pf_dltensor_data(sin_e);
  void* cd = pf_dltensor_data(cos_e);
  int32_t prev;
  if (enter_device(func, mean_anomaly->device.device_id, &prev) != 0)
    return -1;
  void* stream = pf_cuda_stream_get(mean_anomaly->device.device_id);
  int rc = check_eccentricity(func, eccentricity, stream);
  if (rc == 0)
    rc = pf_cuda_check(is_f64(mean_anomaly) ? pf__kc_kepler_f64(md, ed, sd, cd, count, stream)
                                            : pf__kc_kepler_f32(md, ed, sd, cd, count, stream),
                       func, "kepler kernel launch");
  return leave_device(prev, mean_anomaly->device.device_id, rc);
}

PF__K_DEFINE(vector_add_cuda, PF__K_PARAMS_VECTOR_ADD) {
  (void)result;
  static const char func[] = "vector_add_cuda";
  if (pf__k_check_vector_add(func, PF_DEV_CUDA, b, c, a) != 0)
    return -1;
  int64_t count = pf_dltensor_numel(c);
  int64_t nb = b->shape[0];
  void* bd = pf_dltensor_data(b);
  void* cd = pf_dltensor_data(c);
  void* ad = pf_dltensor_data(a);
  PF__KCUDA_RUN(func, "vector_add kernel launch", c->device.device_id,
                is_f64(c) ? pf__kc_vector_add_f64(bd, nb, cd, ad, count, stream)
                          : pf__kc_vector_add_f32(bd, nb, cd, ad, count, stream));
}

/* Each kernel's packed entry refuses read-only outputs, as the CPU ones do (kdefs.h). */
PF__K_ENTRY(add_n_cuda, PF__K_OUTS_ADD_N);
PF__K_ENTRY(rms_norm_cuda, PF__K_OUTS_RMS_NORM);
PF__K_ENTRY(rms_norm_fwd_cuda, PF__K_OUTS_RMS_NORM_FWD);
PF__K_ENTRY(rms_norm_bwd_cuda, PF__K_OUTS_RMS_NORM_BWD);
PF__K_ENTRY(kepler_cuda, PF__K_OUTS_KEPLER);
PF__K_ENTRY(vector_add_cuda, PF__K_OUTS_VECTOR_ADD);

PF__REGISTER_STATIC(PF_KERNELS_CUDA_PREFIX "add_n", add_n_cuda_checked, &add_n_cuda_signature,
                    NULL);
PF__REGISTER_STATIC(PF_KERNELS_CUDA_PREFIX "rms_norm", rms_norm_cuda_checked,
                    &rms_norm_cuda_signature, NULL);
PF__REGISTER_STATIC(PF_KERNELS_CUDA_PREFIX "rms_norm_fwd", rms_norm_fwd_cuda_checked,
                    &rms_norm_fwd_cuda_signature, NULL);
PF__REGISTER_STATIC(PF_KERNELS_CUDA_PREFIX "rms_norm_bwd", rms_norm_bwd_cuda_checked,
                    &rms_norm_bwd_cuda_signature, NULL);
PF__REGISTER_STATIC(PF_KERNELS_CUDA_PREFIX "kepler", kepler_cuda_checked, &kepler_cuda_signature,
                    NULL);
PF__REGISTER_STATIC(PF_KERNELS_CUDA_PREFIX "vector_add", vector_add_cuda_checked,
                    &vector_add_cuda_signature, NULL);

/* ---- exports for module loading (pf_module_load on libpackfn_kernels_cuda.so) ---- */

PF_EXPORT_DOC(cuda_add_n, add_n_cuda_checked, add_n_cuda_text,
              "out = x + n, elementwise (CUDA, current stream)");
PF_EXPORT_DOC(cuda_rms_norm, rms_norm_cuda_checked, rms_norm_cuda_text,
              "rms_norm over the last axis (CUDA, current stream)");
PF_EXPORT_DOC(cuda_rms_norm_fwd, rms_norm_fwd_cuda_checked, rms_norm_fwd_cuda_text,
              "rms_norm with inv_rms (CUDA, current stream)");
PF_EXPORT_DOC(cuda_rms_norm_bwd, rms_norm_bwd_cuda_checked, rms_norm_bwd_cuda_text,
              "gradient of rms_norm (CUDA, current stream)");
PF_EXPORT_DOC(cuda_kepler, kepler_cuda_checked, kepler_cuda_text,
              "solves M = E - e sin E for 0 <= e < 1 (CUDA, current stream); e is checked on the "
              "device first, and the call waits for the stream");
PF_EXPORT_DOC(cuda_vector_add, vector_add_cuda_checked, vector_add_cuda_text,
              "a[i] = b[i mod len(b)] + c[i] (CUDA, current stream)");
