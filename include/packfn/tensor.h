/* packfn tensors: tensor objects (type 70) over per-device allocators, views, DLPack exchange
 * and argument checks for kernels. Data types, devices, allocators and streams are in
 * packfn/device.h, included here. */
#ifndef PACKFN_TENSOR_H_
#define PACKFN_TENSOR_H_

#include "packfn/any.h"
#include "packfn/device.h"
#include "packfn/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * Tensor objects
 * ====================================================================================== */

/* Most dimensions a tensor may have (NumPy 2's limit). */
#define PF_TENSOR_MAX_NDIM 64

/* The DLTensor of a tensor object (at object + 24, per the ABI), borrowed for the object's
 * lifetime; NULL when `tensor` is NULL or not a tensor (never raises). Works on tensor objects
 * of any runtime that follows the ABI. */
PF_INLINE DLTensor* pf_tensor_dltensor(pf_object_t* tensor) {
  return pf_object_is_instance(tensor, PF_TYPE_TENSOR)
             ? PF__CAST(DLTensor*, PF__CAST(void*, PF__REINTERPRET_CAST(char*, tensor) + 24))
             : PF__NULL;
}

/* Creates a tensor of `shape` (ndim extents, each >= 0; NULL allowed when ndim is 0) and
 * `dtype` on `device`, uninitialised, compact row-major (strides filled in), its memory from
 * the device type's allocator, aligned to PF_TENSOR_ALIGNMENT. New reference in *out. -1 with
 * ValueError naming the argument at fault (NULL out; ndim outside 0..PF_TENSOR_MAX_NDIM; NULL
 * shape, a negative extent or a size overflowing; an invalid dtype; a negative device index,
 * "expected a device index >= 0"), KeyError (no allocator for the device type) or the
 * allocator's error (MemoryError, RuntimeError from the driver); *out is then NULL. */
PF_API int pf_tensor_empty(const int64_t* shape, int32_t ndim, DLDataType dtype, DLDevice device,
                           pf_object_t** out);

/* Creates a tensor over memory someone else owns: copies the description `desc` (data,
 * device, ndim, dtype, shape, strides or NULL for compact, byte_offset; shape and strides are
 * copied, so desc may be temporary). `deleter(ctx)`, when not NULL, runs exactly once when the
 * tensor and all its views and exports are gone; with a NULL deleter the caller keeps the
 * memory alive as long as the tensor. New reference in *out. -1 with ValueError, the messages
 * naming argument desc (NULL desc or out, ndim out of range, NULL shape, negative extents, NULL
 * data for a non-empty tensor, an invalid dtype, a negative device index, a size overflowing,
 * strides whose element or byte offsets do not fit in int64, a byte_offset above INT64_MAX or
 * whose elements' bytes do not fit in int64 counted from it, or, on a device whose data is an
 * address (cpu, cuda, cuda_host, cuda_managed, rocm, rocm_host), bytes reaching outside the
 * address space from data) or MemoryError; on failure the deleter is not called. */
PF_API int pf_tensor_from_dltensor(const DLTensor* desc, void* ctx, void (*deleter)(void* ctx),
                                   pf_object_t** out);

/* 1 when the tensor's memory may not be written (it came from a DLPack producer that said
 * so, or is a view of such a tensor), else 0 (also for NULL, non-tensors and other runtimes'
 * tensors). Never raises. */
PF_API int pf_tensor_is_read_only(pf_object_t* tensor);

/* ---- views: new tensors sharing the memory of `tensor` (which they keep alive) ----
 * Each returns a new reference in *out, or -1 with an error and *out = NULL. `tensor` may be
 * a tensor object of any ABI runtime (another runtime's description is first checked as
 * pf_tensor_from_dltensor checks one: ValueError when it fails); a NULL or non-tensor `tensor`
 * is a TypeError. Views inherit read-only-ness. Views of views refer to the original storage
 * directly. A view that starts elsewhere than at the first element of a tensor whose elements
 * are smaller than a byte or not a whole number of bytes (int4, float4_e2m1fn, int12,
 * float6_e2m3fnx3: pf_tensor_view with an offset, pf_tensor_slice from a later start,
 * pf_tensor_select of a later index) is NotImplementedError. */

/* The general view: `ndim` extents `shape` and element `strides` (NULL: compact row-major),
 * starting `offset` elements from the first element of `tensor`. Every element the view can
 * reach must lie within the span of elements `tensor` reaches (IndexError otherwise).
 * ValueError for a bad ndim, shape or extents, or strides whose offsets overflow, naming
 * argument ndim, shape or strides. */
PF_API int pf_tensor_view(pf_object_t* tensor, int32_t ndim, const int64_t* shape,
                          const int64_t* strides, int64_t offset, pf_object_t** out);

/* Same elements, new shape: `ndim` extents, one of which may be -1 (inferred). `tensor` must be
 * contiguous (ValueError otherwise, naming its strides), and the element counts must agree
 * (ValueError naming both shapes). */
PF_API int pf_tensor_reshape(pf_object_t* tensor, int32_t ndim, const int64_t* shape,
                             pf_object_t** out);

/* Python's tensor[..., start:stop:step, ...] along `axis` (negative counts from the end):
 * negative start/stop count from the end and both are clamped to the extent, as Python does.
 * IndexError for an axis out of range, ValueError for step 0. */
PF_API int pf_tensor_slice(pf_object_t* tensor, int32_t axis, int64_t start, int64_t stop,
                           int64_t step, pf_object_t** out);

/* tensor[..., index, ...] along `axis`: one dimension fewer. Negative axis and index count from
 * the end; IndexError when either is out of range. */
PF_API int pf_tensor_select(pf_object_t* tensor, int32_t axis, int64_t index, pf_object_t** out);

/* Dimensions reordered: dimension i of the view is dimension axes[i] of `tensor`; `axes` holds
 * ndim entries forming a permutation (negatives count from the end). ValueError otherwise. */
PF_API int pf_tensor_permute(pf_object_t* tensor, const int32_t* axes, pf_object_t** out);

/* ---- copies ---- */

/* Copies the elements of `src` into `dst`: same dtype and shape. Between host memories (cpu,
 * cuda_host, rocm_host) it copies directly; otherwise the copy hook of the device side's
 * allocator runs (the destination's when both sides are devices), ordered on the device's
 * current stream and complete on return. Two device sides must be of one device type, any
 * indices (vulkan:0 to vulkan:1 goes through vulkan's hook), or of one runtime (cuda and
 * cuda_managed). Between host tensors any strides work (element by element where not
 * contiguous; strided sides must not overlap, and dst must not be a broadcast: a stride of 0
 * along an axis of more than one element, nor have other strides under which two of its
 * elements share a place); a device side needs both tensors contiguous.
 * Elements smaller than a byte that end inside one: a host copy leaves the rest of dst's last
 * byte as it was; a copy hook moves whole bytes.
 * Two sides in CUDA's or ROCm's memory (their pinned host memory, cuda_host and rocm_host,
 * included) must not partly overlap (the very same bytes copy nothing); the hook of any other
 * device type gets any two buffers, overlapping or equal ones included (they may be handles). An
 * empty tensor's copy checks the devices alike. Both descriptions are validated as
 * pf_tensor_from_dltensor validates one. Returns 0, or -1 with ValueError (NULL, an invalid
 * description, dtype/shape mismatch, not contiguous across a device, overlapping strided host
 * sides, a broadcast dst or one whose elements share places, partly overlapping sides in CUDA or
 * ROCm memory), MemoryError (a dst whose elements interleave has its element offsets listed to
 * tell), NotImplementedError (devices of different types, no copy hook, a strided copy of elements
 * smaller than a byte), KeyError (no allocator for the device type whose hook would run) or the
 * hook's error (RuntimeError when it fails without raising one). */
PF_API int pf_dltensor_copy(DLTensor* dst, const DLTensor* src);

/* A contiguous copy of `tensor` on `device` (pf_tensor_empty then pf_dltensor_copy), whatever
 * the strides of a host tensor (one bound for a device is gathered on the host first); a
 * device tensor must be contiguous. New reference in *out; -1 with their errors, all raised as
 * pf_tensor_to_device (ValueError for a negative device index or another runtime's invalid
 * description, KeyError for a device type without an allocator, the allocator's and the
 * copy's errors, whose messages call the tensor src and the copy dst), or TypeError for a
 * non-tensor; *out = NULL. */
PF_API int pf_tensor_to_device(pf_object_t* tensor, DLDevice device, pf_object_t** out);

/* ======================================================================================
 * DLPack exchange
 * ====================================================================================== */

/* Wraps a legacy DLManagedTensor without copying. On success the tensor takes `src`: it calls
 * src->deleter(src) (when not NULL) once the tensor and its views are gone; the caller must not
 * touch src again. The tensor's shape (and strides, unless NULL: then compact ones are filled
 * in) point into src->dl_tensor's, which must stay valid until the deleter runs (DLPack's
 * rule). On failure src is untouched and still the caller's. A managed tensor that
 * packfn exported gives back the very tensor it came from. New reference in *out. -1 with
 * ValueError (NULL src or out, a description pf_tensor_from_dltensor would refuse) or
 * MemoryError. */
PF_API int pf_tensor_from_dlpack(DLManagedTensor* src, pf_object_t** out);

/* As pf_tensor_from_dlpack for DLPack 1.x's versioned form; keeps the read-only flag. -1 also
 * with ValueError for a major version other than PF_DLPACK_VERSIONED_MAJOR, or
 * NotImplementedError for a sub-byte type (fewer than 8 bits per lane, any lane count) padded
 * with PF_DLPACK_FLAG_SUBBYTE_TYPE_PADDED. */
PF_API int pf_tensor_from_dlpack_versioned(pf_dl_managed_tensor_versioned_t* src,
                                           pf_object_t** out);

/* Exports `tensor` (of any ABI runtime) as a legacy DLManagedTensor that holds a reference to
 * it: the consumer calls (*out)->deleter(*out) exactly once when done. Shape and strides point
 * into the tensor and stay valid until then. -1 with TypeError (not a tensor), ValueError (NULL
 * out) or MemoryError; *out = NULL. The legacy form cannot say "read-only": prefer the
 * versioned form for read-only tensors. */
PF_API int pf_tensor_to_dlpack(pf_object_t* tensor, DLManagedTensor** out);

/* As pf_tensor_to_dlpack, in the versioned form (version 1.1; flags carry read-only). */
PF_API int pf_tensor_to_dlpack_versioned(pf_object_t* tensor,
                                         pf_dl_managed_tensor_versioned_t** out);

/* ======================================================================================
 * Helpers on any DLTensor (for kernels: they receive DLTensor* arguments)
 * The inline helpers below check nothing: `t` must be a valid description (non-NULL, a shape
 * of ndim extents, strides NULL or ndim of them), as every tensor packfn makes or accepts is
 * and as pf_dltensor_check ensures for any other; a NULL or malformed one is read as it is.
 * ====================================================================================== */

/* Number of elements: the product of the extents (1 for ndim 0). The description must be
 * valid (as every tensor packfn makes or accepts is). */
PF_INLINE int64_t pf_dltensor_numel(const DLTensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i)
    n *= t->shape[i];
  return n;
}

/* Bytes the elements occupy when packed: ceil(numel * bits * lanes / 8), as DLPack counts. */
PF_INLINE size_t pf_dltensor_nbytes(const DLTensor* t) {
  return (PF__CAST(size_t, pf_dltensor_numel(t)) * t->dtype.bits * t->dtype.lanes + 7) / 8;
}

/* Address of the first element: data + byte_offset (meaningful on devices whose data is an
 * address: cpu, cuda, cuda_host, cuda_managed, rocm...). */
PF_INLINE void* pf_dltensor_data(const DLTensor* t) {
  return PF__CAST(char*, t->data) + t->byte_offset;
}

/* 1 when the elements lie in compact row-major order (strides NULL, or equal to the compact
 * strides wherever the extent exceeds 1; an empty tensor is contiguous), else 0. */
PF_INLINE int pf_dltensor_is_contiguous(const DLTensor* t) {
  if (t->strides == PF__NULL)
    return 1;
  /* unsigned: the running product cannot overflow into undefined behaviour whatever the
   * description; for a valid one (packfn's validation bounds it) it never wraps. A mismatch
   * does not end the loop: a zero extent further left still makes the tensor contiguous. */
  uint64_t expected = 1;
  int compact = 1;
  for (int32_t i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] == 0)
      return 1;
    if (t->shape[i] != 1 && PF__CAST(uint64_t, t->strides[i]) != expected)
      compact = 0;
    expected *= PF__CAST(uint64_t, t->shape[i]);
  }
  return compact;
}

/* What a kernel requires of a tensor argument. Zero-initialised fields require nothing, so
 * name only what matters. The spec is the kernel author's and is not validated: dtypes must
 * hold num_dtypes entries and shape ndim of them (the description checked against it is):
 *   pf_tensor_spec_t spec = {PF_DTYPES(PF_DTYPE_FLOAT32, PF_DTYPE_FLOAT64),
 *                            .device_type = PF_DEV_CPU, .min_ndim = 1, .contiguous = 1}; */
typedef struct pf_tensor_spec_s {
  const DLDataType* dtypes; /* accepted data types, num_dtypes of them */
  int32_t num_dtypes;       /* 0: any data type */
  int32_t device_type;      /* required device type (PF_DEV_*); 0: any */
  int32_t ndim;             /* exact number of dimensions when > 0 or when shape is set */
  int32_t min_ndim;         /* at least this many dimensions; 0: no minimum */
  const int64_t* shape;     /* ndim required extents, -1 for "any"; NULL: any shape */
  int contiguous;           /* non-zero: must be compact row-major */
  const DLDevice* device;   /* exact device (type and index), e.g. &other->device; NULL: any */
} pf_tensor_spec_t;

/* Fills the dtypes and num_dtypes fields of a pf_tensor_spec_t initialiser (function scope). */
#if defined(__cplusplus)
/* C++17 has neither compound literals nor designated initialisers: the list lives in a static
 * array (so its entries must be constants) and the two members come positionally, first in
 * the initialiser: pf_tensor_spec_t spec = {PF_DTYPES(PF_DTYPE_FLOAT32), PF_DEV_CPU}; */
#define PF_DTYPES(...)                                                                             \
  []() -> const DLDataType* {                                                                      \
    static const DLDataType pf__dtypes[] = {__VA_ARGS__};                                          \
    return pf__dtypes;                                                                             \
  }(),                                                                                             \
      []() -> int32_t {                                                                            \
        static const DLDataType pf__dtypes[] = {__VA_ARGS__};                                      \
        return PF__CAST(int32_t, sizeof(pf__dtypes) / sizeof(DLDataType));                         \
      }()
#else
#define PF_DTYPES(...)                                                                             \
  .dtypes = (const DLDataType[]){__VA_ARGS__},                                                     \
  .num_dtypes = (int32_t)(sizeof((const DLDataType[]){__VA_ARGS__}) / sizeof(DLDataType))
#endif

/* Checks tensor argument `index` (named `name`) of function `func` against `spec`. Returns 0,
 * or -1 with an error whose message follows the project's form, e.g.
 *   "rms_norm: argument 0 (x): expected a float32 or float64 tensor, got int64"
 *   "rms_norm: argument 0 (x): expected a tensor on cuda, got cpu:0"
 *   "rms_norm: argument 2 (out): expected a tensor on cuda:0, got cuda:1"
 *   "rms_norm: argument 0 (x): expected 2 dimensions, got 3"
 *   "rms_norm: argument 0 (x): expected shape (*, 4), got (2, 3)"
 *   "rms_norm: argument 0 (x): expected a contiguous tensor, got strides (1, 2)"
 *   "rms_norm: argument 0 (x): expected extents >= 0, got -4 at axis 0"
 * Whatever the spec, t must be a description packfn would accept as a tensor (as
 * pf_tensor_from_dltensor checks one): ndim in 0..PF_TENSOR_MAX_NDIM ("expected ndim in 0..64,
 * got 100"), a shape when it is > 0, of extents >= 0, a valid dtype, a size whose bytes fit in
 * memory ("expected a size that fits in memory ..."), a device index >= 0, data for its elements
 * ("expected data for 6 elements, got NULL"), strides whose offsets fit in int64 and bytes within
 * the address space from data + byte_offset; so the inline helpers below (pf_dltensor_numel,
 * pf_dltensor_nbytes, ...) cannot overflow on a tensor it accepted. TypeError for a dtype or
 * device mismatch, ValueError for the rest (and for NULL t or spec).
 * `name` may be NULL (the parenthesis is left out); NULL func reads "?". */
PF_API int pf_dltensor_check(const DLTensor* t, const pf_tensor_spec_t* spec, const char* func,
                             int32_t index, const char* name);

/* The refusal of pf_dltensor_check_like below (raises its error, returns -1); for it only. */
PF_API int pf__dltensor_check_like_refused(const DLTensor* t, const DLTensor* ref, const char* func,
                                           int32_t index, const char* name, const char* ref_name);

/* Checks that tensor argument `index` (`name`) has the dtype, device and shape of `ref` (the
 * argument called `ref_name`), e.g. "add_n: argument 1 (out): expected shape (2, 3) like x,
 * got (3, 2)". Returns 0, or -1 with TypeError (dtype, device) or ValueError (shape, NULL, an
 * ndim out of 0..PF_TENSOR_MAX_NDIM or a missing shape in either). Inline: a few compares; the
 * refusal and its message are out of line. */
PF_INLINE int pf_dltensor_check_like(const DLTensor* t, const DLTensor* ref, const char* func,
                                     int32_t index, const char* name, const char* ref_name) {
  int same = t && ref && PF__CAST(uint32_t, ref->ndim) <= PF_TENSOR_MAX_NDIM &&
             (ref->ndim == 0 || ref->shape) && t->ndim == ref->ndim && (t->ndim == 0 || t->shape) &&
             pf_dtype_equal(t->dtype, ref->dtype) && pf_device_equal(t->device, ref->device);
  for (int32_t i = 0; same && i < t->ndim; ++i)
    same = t->shape[i] == ref->shape[i];
  return PF_LIKELY(same) ? 0 : pf__dltensor_check_like_refused(t, ref, func, index, name, ref_name);
}

#ifdef __cplusplus
}
#endif
#endif /* PACKFN_TENSOR_H_ */
