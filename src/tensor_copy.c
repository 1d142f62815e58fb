/* Copies between tensors, on one device or between the host and a device, through the copy
 * hook of the device type's allocator. */
#include <string.h>

#include "common.h"
#include "device_private.h"
#include "tensor_private.h"

/* ---- copies ---- */

/* Memory the host can read and write directly. */
static int pf__is_host(DLDevice d) {
  int32_t type = (int32_t)d.device_type;
  return type == PF_DEV_CPU || type == PF_DEV_CUDA_HOST || type == PF_DEV_ROCM_HOST;
}

/* The runtime whose memories may copy to each other: cuda_managed belongs to CUDA's (the
 * hooks libpackfn_cuda installs copy between any of its memories). Between two device memories
 * the destination's hook runs, as for any device-to-device copy. */
static int32_t pf__copy_family(int32_t type) {
  return type == PF_DEV_CUDA_MANAGED ? PF_DEV_CUDA : type;
}

int pf_dltensor_copy(DLTensor* dst, const DLTensor* src) {
  static const char func[] = "pf_dltensor_copy";
  if (!dst || !src) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a DLTensor, got NULL", func,
                 dst ? "src" : "dst");
    return -1;
  }
  char a[PF_DTYPE_STR_MAX], b[128];
  if (!pf_dtype_equal(dst->dtype, src->dtype)) {
    pf_dtype_format(dst->dtype, a, sizeof a);
    pf_dtype_format(src->dtype, b, sizeof b);
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument src: expected dtype %s like dst, got %s", func, a, b);
    return -1;
  }
  int same = dst->ndim == src->ndim;
  for (int32_t i = 0; same && i < dst->ndim; ++i)
    same = dst->shape[i] == src->shape[i];
  if (!same) {
    char c[128];
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument src: expected shape %s like dst, got %s", func,
                 pf__format_dims(dst->shape, dst->ndim, b, sizeof b),
                 pf__format_dims(src->shape, src->ndim, c, sizeof c));
    return -1;
  }
  if (!pf_dltensor_is_contiguous(dst) || !pf_dltensor_is_contiguous(src)) {
    const DLTensor* bad = pf_dltensor_is_contiguous(dst) ? src : dst;
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a contiguous tensor, got strides %s",
                 func, bad == dst ? "dst" : "src",
                 pf__format_dims(bad->strides, bad->ndim, b, sizeof b));
    return -1;
  }
  size_t nbytes = pf_dltensor_nbytes(src);
  if (nbytes == 0)
    return 0;
  void* to = pf_dltensor_data(dst);
  const void* from = pf_dltensor_data(src);
  if (pf__is_host(dst->device) && pf__is_host(src->device)) {
    memmove(to, from, nbytes);
    return 0;
  }
  /* The non-host side decides whose copy hook runs. */
  DLDevice side = pf__is_host(dst->device) ? src->device : dst->device;
  if (!pf__is_host(dst->device) && !pf__is_host(src->device) &&
      pf__copy_family((int32_t)dst->device.device_type) !=
          pf__copy_family((int32_t)src->device.device_type)) {
    char d1[PF_DEVICE_STR_MAX], d2[PF_DEVICE_STR_MAX];
    pf_device_format(dst->device, d1, sizeof d1);
    pf_device_format(src->device, d2, sizeof d2);
    PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED, "%s: cannot copy from %s to %s (different device types)",
                 func, d2, d1);
    return -1;
  }
  pf_allocator_t hooks;
  if (pf__allocator_find((int32_t)side.device_type, func, &hooks) != 0)
    return -1;
  if (!hooks.copy) {
    char label[48];
    PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED, "%s: the allocator of device type %s has no copy hook",
                 func, pf__device_type_label((int32_t)side.device_type, label, sizeof label));
    return -1;
  }
  pf_object_t* pending = pf_error_peek();
  if (hooks.copy(hooks.ctx, to, dst->device, from, src->device, nbytes) != 0) {
    if (pf_error_peek() == pending)
      PF_ERROR_SET(PF_ERR_RUNTIME, "%s: the copy hook failed without an error", func);
    return -1;
  }
  return 0;
}

int pf_tensor_to_device(pf_object_t* tensor, DLDevice device, pf_object_t** out) {
  static const char func[] = "pf_tensor_to_device";
  if (!out) {
    return PF__NULL_ARG(func, "out");
  }
  *out = NULL;
  DLTensor* src;
  if (pf__tensor_arg(tensor, func, "tensor", &src) != 0)
    return -1;
  pf_object_t* copy;
  if (pf_tensor_empty(src->shape, src->ndim, src->dtype, device, &copy) != 0)
    return -1;
  if (pf_dltensor_copy(pf_tensor_dltensor(copy), src) != 0) {
    pf_object_release(copy);
    return -1;
  }
  *out = copy;
  return 0;
}
