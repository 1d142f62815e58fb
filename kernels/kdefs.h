/* kernels/kdefs.h: what the CPU library (kernels.c) and the CUDA library (kernels_cuda.c) of
 * packfn_kernels share: each kernel's parameter list, written once, from which the typed packed
 * entry (PF_TYPED_DEFINE) and the signature text of its export are both generated; and the
 * argument checks (kcheck.c, compiled into each library). Private to the kernel libraries. */
#ifndef PACKFN_KERNELS_KDEFS_H_
#define PACKFN_KERNELS_KDEFS_H_

#include "packfn/function.h"
#include "packfn/tensor.h"

/* The kernels' short names, in the order of pf_kernels_name. */
#define PF__K_NAMES "add_n", "rms_norm", "rms_norm_fwd", "rms_norm_bwd", "kepler", "vector_add"
#define PF__K_COUNT 6

/* ---- parameter lists: (KIND, name) pairs in call order; every kernel returns none ---- */

#define PF__K_PARAMS_ADD_N        (TENSOR, x), (TENSOR, out), (FLOAT, n)
#define PF__K_PARAMS_RMS_NORM     (TENSOR, x), (TENSOR, out), (FLOAT, eps)
#define PF__K_PARAMS_RMS_NORM_FWD (TENSOR, x), (TENSOR, out), (TENSOR, inv_rms), (FLOAT, eps)
#define PF__K_PARAMS_RMS_NORM_BWD (TENSOR, x), (TENSOR, inv_rms), (TENSOR, cotangent), (TENSOR, dx)
#define PF__K_PARAMS_KEPLER                                                                        \
  (TENSOR, mean_anomaly), (TENSOR, eccentricity), (TENSOR, sin_e), (TENSOR, cos_e)
#define PF__K_PARAMS_VECTOR_ADD (TENSOR, b), (TENSOR, c), (TENSOR, a)

/* The signature text pf_function_signature gives a PF_TYPED_DEFINE'd function, as a string
 * literal: "add_n(x: Tensor, out: Tensor, n: float) -> None". The kind names are those of
 * pf_param_kind_name; test_kernels checks every export's text against the registered function. */
#define PF__K_KIND_TENSOR                    "Tensor"
#define PF__K_KIND_FLOAT                     "float"
#define PF__K_PARAM_TEXT(K, p)               #p ": " PF__K_KIND_##K
#define PF__K_TEXT_1(a)                      PF__K_PARAM_TEXT a
#define PF__K_TEXT_2(a, ...)                 PF__K_PARAM_TEXT a ", " PF__K_TEXT_1(__VA_ARGS__)
#define PF__K_TEXT_3(a, ...)                 PF__K_PARAM_TEXT a ", " PF__K_TEXT_2(__VA_ARGS__)
#define PF__K_TEXT_4(a, ...)                 PF__K_PARAM_TEXT a ", " PF__K_TEXT_3(__VA_ARGS__)
#define PF__K_NARGS(...)                     PF__K_NARGS_(__VA_ARGS__, 4, 3, 2, 1, 0)
#define PF__K_NARGS_(_1, _2, _3, _4, N, ...) N
#define PF__K_GLUE(a, b)                     PF__K_GLUE_(a, b)
#define PF__K_GLUE_(a, b)                    a##b
#define PF__K_SIGNATURE_TEXT(fname, ...)                                                           \
#fname "(" PF__K_GLUE(PF__K_TEXT_, PF__K_NARGS(__VA_ARGS__))(__VA_ARGS__) ") -> None"

/* PF__K_DEFINE(fname, PF__K_PARAMS_X) { body }: PF_TYPED_DEFINE(fname, NONE, params...) plus
 * fname##_text, its signature text, for the export metadata. */
#define PF__K_DEFINE(fname, ...) PF__K_DEFINE_(fname, __VA_ARGS__)
#define PF__K_DEFINE_(fname, ...)                                                                  \
  static const char fname##_text[] = PF__K_SIGNATURE_TEXT(fname, __VA_ARGS__);                     \
  PF_TYPED_DEFINE(fname, NONE, __VA_ARGS__)

/* The arguments each kernel writes (bit i: argument i); the others it only reads. */
#define PF__K_OUTS_ADD_N        (1u << 1)
#define PF__K_OUTS_RMS_NORM     (1u << 1)
#define PF__K_OUTS_RMS_NORM_FWD ((1u << 1) | (1u << 2))
#define PF__K_OUTS_RMS_NORM_BWD (1u << 3)
#define PF__K_OUTS_KEPLER       ((1u << 2) | (1u << 3))
#define PF__K_OUTS_VECTOR_ADD   (1u << 2)

/* PF__K_ENTRY(fname, PF__K_OUTS_X): after PF__K_DEFINE(fname, ...), defines fname##_checked, the
 * packed entry to register and export: it refuses a read-only tensor object (an argument with
 * pf_tensor_is_read_only, e.g. a read-only NumPy array) as any argument of the mask, then runs
 * fname##_packed (arity, conversions, the body). */
#define PF__K_ENTRY(fname, outs)                                                                   \
  static int fname##_checked(void* self, const pf_any_t* args, int32_t num_args,                   \
                             pf_any_t* result) {                                                   \
    if (pf__k_check_writable(&fname##_signature, args, num_args, (outs)) != 0)                     \
      return -1;                                                                                   \
    return fname##_packed(self, args, num_args, result);                                           \
  }                                                                                                \
  PF__STATIC_ASSERT(1, "kernel entry")

/* ---- argument checks (kcheck.c) ----
 * Each checks every argument of one kernel for a run on device type `dev` (PF_DEV_CPU or
 * PF_DEV_CUDA) and returns 0, or -1 with TypeError or ValueError naming `func` and the argument.
 * None reads tensor contents except pf__k_check_eccentricity, which reads host memory. */

/* The device type a C entry runs on: that of `first` (argument 0, named `name`) when it is cpu
 * or cuda. -1 with ValueError (NULL) or NotImplementedError (another device). */
int pf__k_device_of(const char* func, const DLTensor* first, const char* name, int32_t* dev);

/* Raises the ValueError of pf__k_check_writable for argument i of sig; returns -1 (cold). */
int pf__k_read_only_error(const pf_signature_t* sig, int32_t i);

/* With num_args matching sig: each argument in the mask `outs` that is a read-only tensor
 * object is refused with ValueError "rms_norm: argument 1 (out): expected a writable tensor,
 * got a read-only one" (sig's name and parameter names). A wrong arity passes (the typed entry
 * reports it). 0 or -1. Inline: `outs` is a constant at every use, so the loop unrolls to one
 * test per output. */
static inline int pf__k_check_writable(const pf_signature_t* sig, const pf_any_t* args,
                                       int32_t num_args, uint32_t outs) {
  if (num_args != sig->num_params)
    return 0;
  for (uint32_t m = outs; m != 0; m &= m - 1) { /* the outputs only: one bit each */
    int32_t i = __builtin_ctz(m);
    if (i < num_args && args[i].type_index == PF_TYPE_TENSOR &&
        pf_tensor_is_read_only(args[i].v_obj))
      return pf__k_read_only_error(sig, i);
  }
  return 0;
}

int pf__k_check_add_n(const char* func, int32_t dev, const DLTensor* x, const DLTensor* out,
                      double n);
/* inv_rms NULL: rms_norm (eps is argument 2); else rms_norm_fwd (eps is argument 3). */
int pf__k_check_rms_norm(const char* func, int32_t dev, const DLTensor* x, const DLTensor* out,
                         const DLTensor* inv_rms, double eps);
int pf__k_check_rms_norm_bwd(const char* func, int32_t dev, const DLTensor* x,
                             const DLTensor* inv_rms, const DLTensor* ct, const DLTensor* dx);
/* Shapes, dtypes and devices only: the eccentricity values are checked by the next one. */
int pf__k_check_kepler(const char* func, int32_t dev, const DLTensor* m, const DLTensor* e,
                       const DLTensor* sin_e, const DLTensor* cos_e);
/* Every element of `e` (compact float32/float64, in host memory) in [0, 1): else ValueError
 * "func: argument 1 (eccentricity): expected values in [0, 1), got 1.5 at index 3". */
int pf__k_check_eccentricity(const char* func, const DLTensor* e);
/* Raises the ValueError of an eccentricity `value` outside [0, 1) at `index`, as
 * pf__k_check_eccentricity does (the CUDA check, which finds it on the device, too); -1. */
int pf__k_eccentricity_error(const char* func, double value, int64_t index);
int pf__k_check_vector_add(const char* func, int32_t dev, const DLTensor* b, const DLTensor* c,
                           const DLTensor* a);

/* Product of the leading extents (all but the last axis) of a tensor with ndim >= 1. */
static inline int64_t pf__k_rows(const DLTensor* t) {
  int64_t rows = 1;
  for (int32_t i = 0; i + 1 < t->ndim; ++i)
    rows *= t->shape[i];
  return rows;
}

#endif /* PACKFN_KERNELS_KDEFS_H_ */
