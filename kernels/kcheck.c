/* kernels/kcheck.c: the argument checks of every kernel (kdefs.h), shared by packfn_kernels and
 * packfn_kernels_cuda, so a call is refused the same way whichever library runs it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kdefs.h"
#include "packfn/error.h"

int pf__k_device_of(const char* func, const DLTensor* first, const char* name, int32_t* dev) {
  if (!first) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument 0 (%s): expected a tensor, got NULL", func, name);
    return -1;
  }
  int32_t t = (int32_t)first->device.device_type;
  if (t == PF_DEV_CPU || t == PF_DEV_CUDA) {
    *dev = t;
    return 0;
  }
  char buf[32];
  pf_device_format(first->device, buf, sizeof buf);
  PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED, "%s: argument 0 (%s): no %s version for tensors on %s", func,
               name, func, buf);
  return -1;
}

__attribute__((cold, noinline)) static int
k_misaligned(const char* func, int32_t index, const char* name, size_t elem, uintptr_t at) {
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument %d (%s): expected data at a multiple of its element size (%zu "
               "bytes), got an address %zu bytes past one",
               func, (int)index, name, elem, (size_t)(at % elem));
  return -1;
}

/* Argument `index` (checked: float32 or float64) must lie at a multiple of its element size:
 * the kernels load and store whole elements (a float32 array at an odd address, which NumPy can
 * make from a buffer, would be stores C does not allow, and crashed the streaming ones). */
static inline __attribute__((always_inline)) int k_aligned(const char* func, int32_t index,
                                                           const char* name, const DLTensor* t) {
  size_t elem = t->dtype.bits / 8; /* 4 or 8 */
  uintptr_t at = (uintptr_t)pf_dltensor_data(t);
  if (PF_LIKELY((at & (elem - 1)) == 0) || pf_dltensor_numel(t) == 0)
    return 0;
  return k_misaligned(func, index, name, elem, at);
}

/* Argument `index` must be a compact float32/float64 tensor on device type `dev` with at least
 * `min_ndim` axes, aligned to its element size. */
static inline __attribute__((always_inline)) int k_input(const char* func, int32_t index,
                                                         const char* name, const DLTensor* t,
                                                         int32_t dev, int32_t min_ndim) {
  pf_tensor_spec_t spec = {PF_DTYPES(PF_DTYPE_FLOAT32, PF_DTYPE_FLOAT64), .device_type = dev,
                           .min_ndim = min_ndim, .contiguous = 1};
  if (pf_dltensor_check(t, &spec, func, index, name) != 0) /* extents >= 0 included */
    return -1;
  return k_aligned(func, index, name, t);
}

/* Argument `index` must match `ref` (checked before) in dtype, device and shape, be compact and
 * aligned. */
static inline __attribute__((always_inline)) int k_like(const char* func, int32_t index,
                                                        const char* name, const DLTensor* t,
                                                        const DLTensor* ref, const char* ref_name) {
  pf_tensor_spec_t spec = {.contiguous = 1};
  if (pf_dltensor_check_like(t, ref, func, index, name, ref_name) != 0 ||
      pf_dltensor_check(t, &spec, func, index, name) != 0)
    return -1;
  return k_aligned(func, index, name, t);
}

/* Raises TypeError "<func>: argument <index> (<name>): expected <want> like <ref_name>, got
 * <got>"; -1. */
__attribute__((cold, noinline)) static int k_unlike(const char* func, int32_t index,
                                                    const char* name, const char* want,
                                                    const char* ref_name, const char* got) {
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %d (%s): expected %s like %s, got %s", func, (int)index,
               name, want, ref_name, got);
  return -1;
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
  char want[48], got[32];
  if (t && (t->dtype.code != ref->dtype.code || t->dtype.bits != ref->dtype.bits ||
            t->dtype.lanes != ref->dtype.lanes)) {
    /* the dtype is the reference's, not one of a list: say so (it read as "float64 is not
     * supported": review) */
    pf_dtype_format(ref->dtype, got, sizeof got);
    snprintf(want, sizeof want, "a %s tensor", got);
    pf_dtype_format(t->dtype, got, sizeof got);
    return k_unlike(func, index, name, want, ref_name, got);
  }
  if (pf_dltensor_check(t, &spec, func, index, name) != 0 || k_aligned(func, index, name, t) != 0)
    return -1;
  if (t->device.device_id != ref->device.device_id) {
    pf_device_format(ref->device, got, sizeof got);
    snprintf(want, sizeof want, "a tensor on %s", got);
    pf_device_format(t->device, got, sizeof got);
    return k_unlike(func, index, name, want, ref_name, got);
  }
  return 0;
}

__attribute__((cold, noinline)) static int k_overlap_error(const char* func, int32_t oi,
                                                           const char* on, int32_t ii,
                                                           const char* in_name, int same_ok,
                                                           int same_start, size_t ob, size_t ib) {
  if (same_ok && same_start) { /* the same first byte, but the output is the longer one */
    PF_ERROR_SET(PF_ERR_VALUE,
                 "%s: argument %d (%s): expected memory apart from argument %d (%s) or the very "
                 "same array at most as long, got the same first byte with %zu bytes against "
                 "its %zu",
                 func, (int)oi, on, (int)ii, in_name, ob, ib);
    return -1;
  }
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument %d (%s): expected memory apart from argument %d (%s)%s, got an "
               "overlap",
               func, (int)oi, on, (int)ii, in_name, same_ok ? " or the very same array" : "");
  return -1;
}

/* Output `o` (argument oi, `ob` bytes) must share no byte with argument ii (`in`, `ib` bytes),
 * both compact (checked before): their bytes are compared from their first elements. With
 * `same_ok` the very same array is allowed too (same first byte, `o` no larger than `in`), where
 * the kernel supports working in place; a partial overlap never is (the kernel would read what
 * it wrote). */
static inline int k_apart(const char* func, int32_t oi, const char* on, const DLTensor* o,
                          size_t ob, int32_t ii, const char* in_name, const DLTensor* in, size_t ib,
                          int same_ok) {
  uintptr_t a = (uintptr_t)pf_dltensor_data(o), b = (uintptr_t)pf_dltensor_data(in);
  if (PF_LIKELY(a >= b + ib || b >= a + ob) || ob == 0 || ib == 0 ||
      (same_ok && a == b && ob <= ib))
    return 0;
  return k_overlap_error(func, oi, on, ii, in_name, same_ok, a == b, ob, ib);
}

static int k_scalar(const char* func, int32_t index, const char* name, double v, int nonneg) {
  if (!isfinite(v) || (nonneg && v < 0)) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %d (%s): expected a finite%s number, got %g", func,
                 (int)index, name, nonneg ? " non-negative" : "", v);
    return -1;
  }
  return 0;
}

__attribute__((cold)) int pf__k_read_only_error(const pf_signature_t* sig, int32_t i) {
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument %d (%s): expected a writable tensor, got a read-only one", sig->name,
               (int)i, sig->params[i].name);
  return -1;
}

/* v with the fewest significant digits (6 to 17) that read back as v: "1e+300", and
 * "3.4028236e+38" where %g's "3.40282e+38" would name a value float32 holds (review). */
static const char* k_digits(double v, char* buf, size_t size) {
  for (int p = 6; p < 17; ++p) {
    snprintf(buf, size, "%.*g", p, v);
    if (strtod(buf, NULL) == v)
      return buf;
  }
  snprintf(buf, size, "%.17g", v);
  return buf;
}

int pf__k_check_add_n(const char* func, int32_t dev, const DLTensor* x, const DLTensor* out,
                      double n) {
  if (k_input(func, 0, "x", x, dev, 0) != 0 || k_like(func, 1, "out", out, x, "x") != 0)
    return -1;
  size_t nb = pf_dltensor_nbytes(x); /* out alike */
  if (k_apart(func, 1, "out", out, nb, 0, "x", x, nb, 1) != 0 || k_scalar(func, 2, "n", n, 0) != 0)
    return -1;
  /* float32 adds n rounded to float32: an n that rounds to infinity is refused as inf is */
  if (x->dtype.bits == 32 && isinf((float)n)) {
    char shown[32];
    PF_ERROR_SET(PF_ERR_VALUE,
                 "%s: argument 2 (n): expected a finite number float32 can hold for a float32 x, "
                 "got %s",
                 func, k_digits(n, shown, sizeof shown));
    return -1;
  }
  return 0;
}

int pf__k_check_rms_norm(const char* func, int32_t dev, const DLTensor* x, const DLTensor* out,
                         const DLTensor* inv_rms, double eps) {
  if (k_input(func, 0, "x", x, dev, 1) != 0 || k_like(func, 1, "out", out, x, "x") != 0)
    return -1;
  size_t nb = pf_dltensor_nbytes(x); /* out alike */
  if (k_apart(func, 1, "out", out, nb, 0, "x", x, nb, 1) != 0)
    return -1;
  if (inv_rms) {
    if (k_shaped(func, 2, "inv_rms", inv_rms, x, "x", x->ndim - 1, x->shape) != 0)
      return -1;
    size_t ni = pf_dltensor_nbytes(inv_rms);
    if (k_apart(func, 2, "inv_rms", inv_rms, ni, 0, "x", x, nb, 0) != 0 ||
        k_apart(func, 2, "inv_rms", inv_rms, ni, 1, "out", out, nb, 0) != 0)
      return -1;
  }
  return k_scalar(func, inv_rms ? 3 : 2, "eps", eps, 1);
}

int pf__k_check_rms_norm_bwd(const char* func, int32_t dev, const DLTensor* x,
                             const DLTensor* inv_rms, const DLTensor* ct, const DLTensor* dx) {
  if (k_input(func, 0, "x", x, dev, 1) != 0 ||
      k_shaped(func, 1, "inv_rms", inv_rms, x, "x", x->ndim - 1, x->shape) != 0 ||
      k_like(func, 2, "cotangent", ct, x, "x") != 0 || k_like(func, 3, "dx", dx, x, "x") != 0)
    return -1;
  size_t nb = pf_dltensor_nbytes(x); /* ct and dx alike */
  return k_apart(func, 3, "dx", dx, nb, 0, "x", x, nb, 1) != 0 ||
                 k_apart(func, 3, "dx", dx, nb, 1, "inv_rms", inv_rms, pf_dltensor_nbytes(inv_rms),
                         0) != 0 ||
                 k_apart(func, 3, "dx", dx, nb, 2, "cotangent", ct, nb, 1) != 0
             ? -1
             : 0;
}

int pf__k_check_kepler(const char* func, int32_t dev, const DLTensor* m, const DLTensor* e,
                       const DLTensor* sin_e, const DLTensor* cos_e) {
  if (k_input(func, 0, "mean_anomaly", m, dev, 0) != 0 ||
      k_like(func, 1, "eccentricity", e, m, "mean_anomaly") != 0 ||
      k_like(func, 2, "sin_e", sin_e, m, "mean_anomaly") != 0 ||
      k_like(func, 3, "cos_e", cos_e, m, "mean_anomaly") != 0)
    return -1;
  size_t nb = pf_dltensor_nbytes(m); /* all four alike (checked above) */
  return k_apart(func, 2, "sin_e", sin_e, nb, 0, "mean_anomaly", m, nb, 0) != 0 ||
                 k_apart(func, 2, "sin_e", sin_e, nb, 1, "eccentricity", e, nb, 0) != 0 ||
                 k_apart(func, 3, "cos_e", cos_e, nb, 0, "mean_anomaly", m, nb, 0) != 0 ||
                 k_apart(func, 3, "cos_e", cos_e, nb, 1, "eccentricity", e, nb, 0) != 0 ||
                 k_apart(func, 3, "cos_e", cos_e, nb, 2, "sin_e", sin_e, nb, 0) != 0
             ? -1
             : 0;
}

int pf__k_eccentricity_error(const char* func, double value, int64_t index) {
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument 1 (eccentricity): expected values in [0, 1), got %g at index %lld",
               func, value, (long long)index);
  return -1;
}

int pf__k_check_eccentricity(const char* func, const DLTensor* e) {
  int64_t count = pf_dltensor_numel(e);
  const void* data = pf_dltensor_data(e);
  for (int64_t i = 0; i < count; ++i) {
    double v = e->dtype.bits == 64 ? ((const double*)data)[i] : (double)((const float*)data)[i];
    if (!(v >= 0.0 && v < 1.0)) /* NaN fails both comparisons */
      return pf__k_eccentricity_error(func, v, i);
  }
  return 0;
}

int pf__k_check_vector_add(const char* func, int32_t dev, const DLTensor* b, const DLTensor* c,
                           const DLTensor* a) {
  if (k_input(func, 0, "b", b, dev, 1) != 0 || k_input(func, 1, "c", c, dev, 0) != 0 ||
      k_like(func, 2, "a", a, c, "c") != 0)
    return -1;
  if (b->ndim != 1) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument 0 (b): expected 1 dimension, got %d", func,
                 (int)b->ndim);
    return -1;
  }
  int64_t one = -1;
  if (k_shaped(func, 0, "b", b, c, "c", 1, &one) != 0)
    return -1;
  if (b->shape[0] == 0 && pf_dltensor_numel(c) > 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument 0 (b): expected at least 1 element, got 0", func);
    return -1;
  }
  /* a may be c, or b when b is at least as long (then a[i] reads b[i] before writing it) */
  size_t nc = pf_dltensor_nbytes(c); /* a alike */
  return k_apart(func, 2, "a", a, nc, 1, "c", c, nc, 1) != 0 ||
                 k_apart(func, 2, "a", a, nc, 0, "b", b, pf_dltensor_nbytes(b), 1) != 0
             ? -1
             : 0;
}
