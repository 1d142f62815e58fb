/* kernels/kernels_cuda.h: the CUDA halves of the packfn_kernels entry points (kernels_cuda.c),
 * called after kernels.c has checked every argument. Private to packfn_kernels. */
#ifndef PACKFN_KERNELS_CUDA_H_
#define PACKFN_KERNELS_CUDA_H_

#include "packfn/tensor.h"

/* Product of the leading extents (all but the last axis) of a tensor with ndim >= 1. */
static inline int64_t pf__k_rows(const DLTensor* t) {
  int64_t rows = 1;
  for (int32_t i = 0; i + 1 < t->ndim; ++i)
    rows *= t->shape[i];
  return rows;
}

/* Each launches on the current stream of the tensors' CUDA device, inside a device guard, and
 * returns 0, or -1 with RuntimeError carrying CUDA's message (named after `func`). */
int pf__kcuda_add_n(const char* func, const DLTensor* x, DLTensor* out, double n);
int pf__kcuda_rms_norm(const char* func, const DLTensor* x, DLTensor* out, DLTensor* inv_rms,
                       double eps);
int pf__kcuda_rms_norm_bwd(const char* func, const DLTensor* x, const DLTensor* inv_rms,
                           const DLTensor* ct, DLTensor* dx);
int pf__kcuda_kepler(const char* func, const DLTensor* m, const DLTensor* e, DLTensor* sin_e,
                     DLTensor* cos_e);
int pf__kcuda_vector_add(const char* func, const DLTensor* b, const DLTensor* c, DLTensor* a);

#endif /* PACKFN_KERNELS_CUDA_H_ */
