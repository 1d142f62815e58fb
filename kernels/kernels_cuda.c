/* kernels/kernels_cuda.c: launches the CUDA kernels of math_cuda.cu for packfn_kernels, on the
 * current stream of the tensors' device, inside a device guard, with CUDA errors raised. */
#include "kernels/kernels_cuda.h"

#include "kernels/math_cuda.h"
#include "packfn/cuda.h"

/* Runs `launch` (a cudaError_t expression) with device `dev` current and `stream` its current
 * stream, then restores the previous device. */
#define PF__KCUDA_RUN(func, what, dev, launch)                                                     \
  do {                                                                                             \
    int32_t prev_;                                                                                 \
    if (pf_cuda_device_enter((dev), &prev_) != 0)                                                  \
      return -1;                                                                                   \
    void* stream = pf_cuda_stream_get(dev);                                                        \
    int rc_ = pf_cuda_check((launch), (func), (what));                                             \
    if (pf_cuda_device_exit(prev_) != 0)                                                           \
      rc_ = -1;                                                                                    \
    return rc_;                                                                                    \
  } while (0)

static int is_f64(const DLTensor* t) {
  return t->dtype.bits == 64;
}

int pf__kcuda_add_n(const char* func, const DLTensor* x, DLTensor* out, double n) {
  int64_t count = pf_dltensor_numel(x);
  PF__KCUDA_RUN(
      func, "add_n kernel launch", x->device.device_id,
      is_f64(x)
          ? pf__kc_add_n_f64(pf_dltensor_data(x), pf_dltensor_data(out), count, n, stream)
          : pf__kc_add_n_f32(pf_dltensor_data(x), pf_dltensor_data(out), count, (float)n, stream));
}

int pf__kcuda_rms_norm(const char* func, const DLTensor* x, DLTensor* out, DLTensor* inv_rms,
                       double eps) {
  int64_t cols = x->shape[x->ndim - 1];
  int64_t rows = pf__k_rows(x);
  void* xd = pf_dltensor_data(x);
  void* od = pf_dltensor_data(out);
  if (inv_rms) {
    void* id = pf_dltensor_data(inv_rms);
    PF__KCUDA_RUN(func, "rms_norm_fwd kernel launch", x->device.device_id,
                  is_f64(x) ? pf__kc_rms_norm_fwd_f64(xd, od, id, rows, cols, eps, stream)
                            : pf__kc_rms_norm_fwd_f32(xd, od, id, rows, cols, (float)eps, stream));
  }
  PF__KCUDA_RUN(func, "rms_norm kernel launch", x->device.device_id,
                is_f64(x) ? pf__kc_rms_norm_f64(xd, od, rows, cols, eps, stream)
                          : pf__kc_rms_norm_f32(xd, od, rows, cols, (float)eps, stream));
}

int pf__kcuda_rms_norm_bwd(const char* func, const DLTensor* x, const DLTensor* inv_rms,
                           const DLTensor* ct, DLTensor* dx) {
  int64_t cols = x->shape[x->ndim - 1];
  int64_t rows = pf__k_rows(x);
  void* xd = pf_dltensor_data(x);
  void* id = pf_dltensor_data(inv_rms);
  void* cd = pf_dltensor_data(ct);
  void* dd = pf_dltensor_data(dx);
  PF__KCUDA_RUN(func, "rms_norm_bwd kernel launch", x->device.device_id,
                is_f64(x) ? pf__kc_rms_norm_bwd_f64(xd, id, cd, dd, rows, cols, stream)
                          : pf__kc_rms_norm_bwd_f32(xd, id, cd, dd, rows, cols, stream));
}

int pf__kcuda_kepler(const char* func, const DLTensor* m, const DLTensor* e, DLTensor* sin_e,
                     DLTensor* cos_e) {
  int64_t count = pf_dltensor_numel(m);
  void* md = pf_dltensor_data(m);
  void* ed = pf_dltensor_data(e);
  void* sd = pf_dltensor_data(sin_e);
  void* cd = pf_dltensor_data(cos_e);
  PF__KCUDA_RUN(func, "kepler kernel launch", m->device.device_id,
                is_f64(m) ? pf__kc_kepler_f64(md, ed, sd, cd, count, stream)
                          : pf__kc_kepler_f32(md, ed, sd, cd, count, stream));
}

int pf__kcuda_vector_add(const char* func, const DLTensor* b, const DLTensor* c, DLTensor* a) {
  int64_t count = pf_dltensor_numel(c);
  int64_t nb = b->shape[0];
  void* bd = pf_dltensor_data(b);
  void* cd = pf_dltensor_data(c);
  void* ad = pf_dltensor_data(a);
  PF__KCUDA_RUN(func, "vector_add kernel launch", c->device.device_id,
                is_f64(c) ? pf__kc_vector_add_f64(bd, nb, cd, ad, count, stream)
                          : pf__kc_vector_add_f32(bd, nb, cd, ad, count, stream));
}
