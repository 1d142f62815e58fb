/* Tensor views: new shapes and strides over the memory of an existing tensor, kept alive by a
 * reference to it; the general view, reshape, slice, select and permute are built on one helper. */
#include <string.h>

#include "packfn/tensor.h"

#include "common.h"
#include "tensor_private.h"

/* Strides of `t`, computing compact ones into buf when t has none. */
static const int64_t* pf__strides_of(const DLTensor* t, int64_t* buf) {
  if (t->strides)
    return t->strides;
  int64_t step = 1;
  for (int32_t i = t->ndim; i-- > 0;) {
    buf[i] = step;
    step *= t->shape[i] > 0 ? t->shape[i] : 1;
  }
  return buf;
}

/* The lowest and highest element offsets `t` reaches from its first element; 0 and -1 when it
 * has no element. Its layout is valid (packfn made it, or pf__view_check_foreign passed it), so
 * the unchecked sums of pf__strides_reach cannot overflow; one loop also finds an empty tensor,
 * which the checked helper would not (it counts a zero extent as 1). */
static void pf__reach(const DLTensor* t, int64_t* lo, int64_t* hi) {
  int64_t l = 0, h = 0;
  const int64_t* shape = t->shape;
  const int64_t* strides = t->strides; /* read once: not again at every axis */
  for (int32_t i = 0, ndim = t->ndim; i < ndim; ++i) {
    int64_t extent = shape[i];
    if (extent <= 0) {
      *lo = 0;
      *hi = -1;
      return;
    }
    if (strides) {
      int64_t far = strides[i] * (extent - 1);
      if (far < 0)
        l += far;
      else
        h += far;
    } else {
      h = (h + 1) * extent - 1; /* compact: numel - 1 */
    }
  }
  *lo = l;
  *hi = h;
}

/* Where a view whose layout (ndim, shape, strides) or reach against its base the fast checks
 * of pf__make_view refused: runs the checks again with their messages, in the order they had
 * before the fast path (the layout, then the reach). Cold: only refused views get here. -1. */
__attribute__((noinline, cold)) static int pf__view_refused(const DLTensor* src, int32_t ndim,
                                                            const int64_t* shape,
                                                            const int64_t* strides, int64_t offset,
                                                            const char* func) {
  DLTensor desc = {src->data,         src->device,     ndim, src->dtype, (int64_t*)shape,
                   (int64_t*)strides, src->byte_offset};
  pf__layout_t view;
  if (pf__dltensor_check(&desc, func, NULL, 0, &view) != 0) /* its own ndim, shape, strides */
    return -1;
  int64_t slo, shi, first, last; /* an empty base reaches nothing: 0..-1 */
  pf__reach(src, &slo, &shi);
  int overflow = __builtin_add_overflow(offset, view.lo, &first);
  overflow += __builtin_add_overflow(offset, view.hi, &last);
  PF_ERROR_SET(PF_ERR_INDEX,
               "%s: the view reaches elements %lld..%lld, outside the tensor's %lld..%lld", func,
               overflow ? (long long)offset : (long long)first,
               overflow ? (long long)offset : (long long)last, (long long)slo, (long long)shi);
  return -1;
}

/* The one view builder: checks the layout (ndim, shape, strides NULL for compact) against the
 * span of `base` (packfn's own when `ours`) and creates the view `offset` elements from base's
 * first element. Inlined into each view function: the call and its eight arguments cost a
 * tenth of a view's creation.
 *
 * The checks are pf__dltensor_check's for the view's description, less what the view takes
 * from `src` and its validation already holds (packfn's tensors at their creation, another
 * runtime's in pf__view_check_foreign): the dtype is valid and the device index not negative.
 * They raise nothing: a refused view goes to pf__view_refused for its message, so that the
 * description is never built in memory on the way that succeeds. */
static inline __attribute__((always_inline)) int
pf__make_view(pf_object_t* base, int ours, const DLTensor* src, int32_t ndim, const int64_t* shape,
              const int64_t* strides, int64_t offset, const char* func, pf_object_t** out) {
  int64_t numel, lo = 0, hi = -1;
  size_t nbytes;
  int ok = pf__layout_fits(ndim, shape, src->dtype, &numel, &nbytes) &&
           (numel == 0 || src->data != NULL);
  if (PF_LIKELY(ok) && numel > 0) {
    int32_t axis;
    hi = numel - 1; /* compact: 0..numel-1 */
    if (strides && !pf__strides_compact(ndim, shape, strides))
      ok = pf__strides_reach(ndim, shape, strides, &lo, &hi, &axis) == 0;
    int64_t slo, shi, first, last; /* an empty base reaches nothing: 0..-1 */
    pf__reach(src, &slo, &shi);
    ok = ok && !__builtin_add_overflow(offset, lo, &first) &&
         !__builtin_add_overflow(offset, hi, &last) && first >= slo && last <= shi;
  } else if (PF_LIKELY(ok) && strides) {
    int32_t axis; /* an empty view's strides must fit all the same */
    ok = pf__strides_reach(ndim, shape, strides, &lo, &hi, &axis) == 0;
  }
  if (PF_UNLIKELY(!ok))
    return pf__view_refused(src, ndim, shape, strides, offset, func);
  if (numel == 0)
    offset = 0; /* an empty view reads nothing: keep it at base's first element */
  DLTensor desc = {src->data,         src->device,     ndim, {0, 0, 0}, (int64_t*)shape,
                   (int64_t*)strides, src->byte_offset};
  memcpy(&desc.dtype, &src->dtype, sizeof desc.dtype); /* whole: not byte by byte */
  if (offset != 0) {
    size_t esize = pf_dtype_bytes(src->dtype);
    if (esize == 0) {
      char name[PF_DTYPE_STR_MAX];
      pf_dtype_format(src->dtype, name, sizeof name);
      /* int12 and float6_e2m3fnx3 are no sub-byte types, but their elements after the first
       * do not start at a byte either (review: called "the sub-byte type int12") */
      if ((uint32_t)src->dtype.bits * src->dtype.lanes < 8)
        PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED,
                     "%s: cannot offset a view by %lld elements of the sub-byte type %s", func,
                     (long long)offset, name);
      else
        PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED,
                     "%s: cannot offset a view by %lld elements of %s, whose elements are not "
                     "whole bytes",
                     func, (long long)offset, name);
      return -1;
    }
    int64_t byte_offset;
    if (src->byte_offset > (uint64_t)INT64_MAX ||
        __builtin_mul_overflow(offset, (int64_t)esize, &byte_offset) ||
        __builtin_add_overflow(byte_offset, (int64_t)src->byte_offset, &byte_offset)) {
      PF_ERROR_SET(PF_ERR_VALUE, "%s: the view's byte offset overflows (%lld elements)", func,
                   (long long)offset);
      return -1;
    }
    if (byte_offset >= 0) {
      desc.byte_offset = (uint64_t)byte_offset;
    } else if (pf__is_addressable(src->device)) {
      /* address arithmetic in integers: a foreign description may claim elements at
       * addresses its pointer's object does not cover (found by fuzz_dlpack) */
      desc.data = (void*)((uintptr_t)src->data - (uintptr_t)(0 - (uint64_t)byte_offset));
      desc.byte_offset = 0;
    } else {
      PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED,
                   "%s: the view would start %llu bytes before the data handle of a tensor on a "
                   "device whose data is not an address",
                   func, (unsigned long long)(0 - (uint64_t)byte_offset)); /* INT64_MIN too */
      return -1;
    }
  }
  /* Its elements lie within the tensor's, but their bytes counted from the view's own first
   * element must fit in int64 too: a negative stride far from that element reaches past
   * INT64_MIN bytes where the tensor, starting elsewhere, did not (pf_dltensor_check refused
   * the view; found by fuzz_dlpack) */
  if (numel > 0 && PF_UNLIKELY(pf__byte_reach_bad(&desc, lo, hi))) {
    pf__dltensor_error(&desc, func, "strides", numel, PF__AXIS_BYTE_OFFSET);
    return -1;
  }
  /* Views refer to the original storage: a view of a packfn view holds that view's owner. */
  pf_object_t* owner = base;
  uint64_t flags = 0;
  if (ours) {
    pf__tensor_t* b = (pf__tensor_t*)base;
    flags = pf__tensor_flags(b);
    /* only the owner form has owner_release: an owning tensor keeps its allocator's context
     * there, an import possibly its strides (review) */
    if (b->header.deleter == pf__tensor_deleter && b->owner_release == pf__owner_release_object)
      owner = (pf_object_t*)b->owner;
  }
  pf__tensor_t* t;
  if (pf__tensor_make(&desc, flags, func, &t) != 0)
    return -1;
  pf_object_retain(owner);
  t->owner = owner;
  t->owner_release = pf__owner_release_object;
  *out = &t->header;
  return 0;
}

/* Validates a tensor another runtime made as a description would be (packfn's own were at
 * creation): the view code computes offsets from its shape and strides, which must therefore
 * fit in int64. 0, or -1 with ValueError. Out of line: packfn's tensors never get here. */
__attribute__((noinline, cold)) static int pf__view_check_foreign(const DLTensor* src,
                                                                  const char* func) {
  pf__layout_t layout;
  return pf__dltensor_check(src, func, "tensor", 1, &layout);
}

/* Common entry of the view functions: checks out and tensor (a foreign one's description too);
 * *ours tells whether packfn made the tensor (read once here: the store to *out could alias its
 * deleter as far as the compiler knows, so it would read it again later). */
static inline int pf__view_args(pf_object_t* tensor, pf_object_t** out, const char* func,
                                DLTensor** src, int* ours) {
  if (!out) {
    return PF__NULL_ARG(func, "out");
  }
  *out = NULL;
  if (PF_LIKELY(pf__tensor_is_ours(tensor))) { /* a tensor object: its deleter says so */
    *src = &((pf__tensor_t*)tensor)->dl;
    *ours = 1;
    return 0;
  }
  *ours = 0;
  if (pf__tensor_arg(tensor, func, "tensor", src) != 0)
    return -1;
  return pf__view_check_foreign(*src, func);
}

/* Normalises an axis that may count from the end; -1 with IndexError when out of range. */
static int pf__axis(int64_t axis, int32_t ndim, const char* func, int32_t* out) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (ndim == 0) { /* no axis is valid: not the empty range "-0..-1" (review) */
    PF_ERROR_SET(PF_ERR_INDEX, "%s: argument axis: expected no axis of a 0-d tensor, got %lld",
                 func, (long long)axis);
    return -1;
  }
  if (a < 0 || a >= ndim) {
    PF_ERROR_SET(PF_ERR_INDEX, "%s: argument axis: expected -%d..%d, got %lld", func, (int)ndim,
                 (int)ndim - 1, (long long)axis);
    return -1;
  }
  *out = (int32_t)a;
  return 0;
}

/* The short way's view of packfn tensor `base`, `offset` elements from its first element, with
 * its header, data, device, dtype, byte offset, ndim, flags and owner set and dl.shape and
 * dl.strides pointing at its dims, which the caller fills; for a view with elements whose
 * elements the caller knows lie within the base's. NULL when the offset's bytes are not whole,
 * overflow or land before the data handle, or no block is to be had (nothing raised, nothing
 * changed): the caller then takes the general way, which decides and raises. */
static inline __attribute__((always_inline)) pf__tensor_t*
pf__view_alloc(pf_object_t* base, int32_t ndim, int64_t offset) {
  pf__tensor_t* b = (pf__tensor_t*)base;
  uint64_t byte_offset = b->dl.byte_offset;
  if (offset != 0) {
    uint32_t bits = (uint32_t)b->dl.dtype.bits * b->dl.dtype.lanes;
    int64_t at;
    if (bits % 8 != 0 || byte_offset > (uint64_t)INT64_MAX ||
        __builtin_mul_overflow(offset, (int64_t)(bits / 8), &at) ||
        __builtin_add_overflow(at, (int64_t)byte_offset, &at) || at < 0)
      return NULL; /* sub-byte elements, overflow, before the data handle: the general way */
    byte_offset = (uint64_t)at;
  }
  pf_object_t* owner = base; /* a view of a packfn view holds that view's owner */
  uint64_t flags = 0;
  if (!pf__tensor_owns_memory(b)) {
    flags = b->flags;
    /* an import has no owner_release (its strides may lie there): a call, as in
     * pf__tensor_is_ours, on views of views only */
    if (!pf__tensor_is_import(base) && b->owner_release == pf__owner_release_object)
      owner = (pf_object_t*)b->owner;
  }
  pf__tensor_t* t = pf__alloc(sizeof(pf__tensor_t) + 2 * sizeof(int64_t) * ndim);
  if (!t)
    return NULL;
  pf__object_init(&t->header, PF_TYPE_TENSOR, pf__tensor_deleter);
  t->dl.data = b->dl.data;
  t->dl.device = b->dl.device;
  t->dl.ndim = ndim;
  t->dl.dtype = b->dl.dtype;
  t->dl.shape = t->dims;
  t->dl.strides = t->dims + ndim;
  t->dl.byte_offset = byte_offset;
  t->flags = flags;
  pf_object_retain(owner);
  t->owner = owner;
  t->owner_release = pf__owner_release_object;
  return t;
}

/* 1 when every extent of packfn tensor `t` is at least 1 (it has elements, and then its data is
 * not NULL: packfn's tensors were checked so when made). Not pf__extents_fit: the count of a
 * tensor packfn made fits, and its multiplications cost a slice 6 instructions in 250. */
static inline int pf__has_elements(const DLTensor* t) {
  int none = 0;
  for (int32_t i = 0; i < t->ndim; ++i)
    none |= t->shape[i] < 1;
  return !none;
}

/* The short ways' last step: view `t`, its dims filled, or NULL (t released) where its bytes
 * counted from its own first element pass int64, which pf__make_view refuses with its message:
 * its elements lie within the tensor's, but a negative stride far from its first element can
 * reach past INT64_MIN bytes where the tensor, starting elsewhere, did not (found by
 * fuzz_dlpack). Only a tensor that reaches before its own first element (`reaches_back`) can
 * make such a view: otherwise the view's bytes are bounded by the tensor's own. */
static inline pf_object_t* pf__view_checked(pf__tensor_t* t, int reaches_back) {
  int64_t lo, hi;
  if (PF_UNLIKELY(reaches_back)) {
    pf__reach(&t->dl, &lo, &hi);
    if (pf__byte_reach_bad(&t->dl, lo, hi)) {
      pf_object_release(&t->header);
      return NULL;
    }
  }
  return &t->header;
}

/* The views' short way, what pf__make_view does with fewer steps for a view with elements of a
 * tensor packfn made: strides NULL (compact) or given, an element offset (pf__view_alloc's
 * rules). The view, or NULL when any of that does not hold, the view reaches outside the
 * tensor's elements, or pf__view_alloc declines (nothing raised, nothing changed):
 * pf__make_view then decides, and raises what it raises. The view's size in bits is checked
 * as pf__layout_fits checks it: its elements lie within the base's reach, whose bytes fit in
 * int64, but a strided base reaches many more elements than it has, and their bits need not
 * fit in 64 (2^58 float64: pf_dltensor_nbytes wrapped to 0; review). Fitting, they are below
 * 2^61 bytes, under pf__layout_fits's PTRDIFF_MAX. */
static inline __attribute__((always_inline)) pf_object_t*
pf__view_fast(pf_object_t* base, int32_t ndim, const int64_t* shape, const int64_t* strides,
              int64_t offset) {
  pf__tensor_t* b = (pf__tensor_t*)base;
  int64_t numel, lo = 0, hi, slo, shi, first, last;
  uint64_t bits;
  int32_t axis;
  if ((uint32_t)ndim - 1u >= (uint32_t)PF_TENSOR_MAX_NDIM || !shape ||
      !pf__extents_fit(shape, ndim, &numel) || !b->dl.data ||
      __builtin_mul_overflow((uint64_t)numel, (uint64_t)b->dl.dtype.bits * b->dl.dtype.lanes,
                             &bits))
    return NULL;
  hi = numel - 1;
  if (strides && pf__strides_reach(ndim, shape, strides, &lo, &hi, &axis) != 0)
    return NULL;
  pf__reach(&b->dl, &slo, &shi);
  if (__builtin_add_overflow(offset, lo, &first) || __builtin_add_overflow(offset, hi, &last) ||
      first < slo || last > shi)
    return NULL;
  pf__tensor_t* t = pf__view_alloc(base, ndim, offset);
  if (!t)
    return NULL;
  if (strides) {
    for (int32_t i = 0; i < ndim; ++i) {
      t->dims[i] = shape[i];
      t->dims[ndim + i] = strides[i];
    }
    return pf__view_checked(t, slo != 0);
  }
  pf__tensor_dims_compact(t, shape, ndim); /* from the first element on: within the tensor's */
  return &t->header;
}

/* pf__make_view for a view of a tensor whose arguments pf__view_args accepted: the short way
 * when the tensor is packfn's and it does not decline, else the general one. */
static inline __attribute__((always_inline)) int
pf__view_finish(pf_object_t* base, int ours, const DLTensor* src, int32_t ndim,
                const int64_t* shape, const int64_t* strides, int64_t offset, const char* func,
                pf_object_t** out) {
  if (PF_LIKELY(ours)) {
    pf_object_t* v = pf__view_fast(base, ndim, shape, strides, offset);
    if (PF_LIKELY(v != NULL)) {
      *out = v;
      return 0;
    }
  }
  return pf__make_view(base, ours, src, ndim, shape, strides, offset, func, out);
}

int pf_tensor_view(pf_object_t* tensor, int32_t ndim, const int64_t* shape, const int64_t* strides,
                   int64_t offset, pf_object_t** out) {
  static const char func[] = "pf_tensor_view";
  if (PF_LIKELY(out && !strides && offset == 0 && pf__tensor_is_ours(tensor))) {
    /* the compact view from the first element, in a copy of its own (no strides to read) */
    pf_object_t* v = pf__view_fast(tensor, ndim, shape, NULL, 0);
    if (PF_LIKELY(v != NULL)) {
      *out = v;
      return 0;
    }
  }
  DLTensor* src;
  int ours;
  if (pf__view_args(tensor, out, func, &src, &ours) != 0)
    return -1;
  return pf__view_finish(tensor, ours, src, ndim, shape, strides, offset, func, out);
}

int pf_tensor_reshape(pf_object_t* tensor, int32_t ndim, const int64_t* shape, pf_object_t** out) {
  static const char func[] = "pf_tensor_reshape";
  DLTensor* src;
  int ours;
  if (pf__view_args(tensor, out, func, &src, &ours) != 0)
    return -1;
  char a[256], b[256];
  if (!pf_dltensor_is_contiguous(src)) {
    /* the advice only where pf_tensor_to_device can gather the elements: host memory, whole
     * bytes (review: given for strided int4 and device tensors, whose copies it refuses) */
    int32_t type = (int32_t)src->device.device_type;
    int gather = (type == PF_DEV_CPU || type == PF_DEV_CUDA_HOST || type == PF_DEV_ROCM_HOST) &&
                 (uint32_t)src->dtype.bits * src->dtype.lanes % 8 == 0;
    PF_ERROR_SET(PF_ERR_VALUE,
                 "%s: argument tensor: expected a contiguous tensor, got strides %s%s", func,
                 pf__format_dims(src->strides, src->ndim, a, sizeof a),
                 gather ? "; copy it first with pf_tensor_to_device" : "");
    return -1;
  }
  if (ndim < 0 || ndim > PF_TENSOR_MAX_NDIM || (ndim > 0 && !shape)) {
    /* let the validator phrase it */
    return pf__make_view(tensor, ours, src, ndim, shape, NULL, 0, func, out);
  }
  int64_t dims[PF_TENSOR_MAX_NDIM];
  int32_t infer = -1;
  int64_t known = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    dims[i] = shape[i];
    if (shape[i] == -1 && infer < 0) {
      infer = i;
    } else if (shape[i] < 0) {
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument shape: expected extents >= 0 and at most one -1, got %lld at "
                   "axis %d",
                   func, (long long)shape[i], (int)i);
      return -1;
    } else if (known >= 0 && __builtin_mul_overflow(known, shape[i], &known)) {
      /* cannot match any real tensor; the extents after it are still checked (a break here
       * reported a later -5 or second -1 as a count mismatch) */
      known = -1;
    }
  }
  int64_t numel = pf_dltensor_numel(src);
  int fits;
  if (infer >= 0) {
    fits = known > 0 && numel % known == 0; /* known < 0: overflow; 0: nothing to infer from */
    if (fits)
      dims[infer] = numel / known;
  } else {
    fits = known == numel;
  }
  if (!fits) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument shape: cannot view %lld elements of shape %s as %s",
                 func, (long long)numel, pf__format_dims(src->shape, src->ndim, a, sizeof a),
                 pf__format_spec_dims(shape, ndim, b, sizeof b));
    return -1;
  }
  return pf__view_finish(tensor, ours, src, ndim, dims, NULL, 0, func, out);
}

int pf_tensor_slice(pf_object_t* tensor, int32_t axis, int64_t start, int64_t stop, int64_t step,
                    pf_object_t** out) {
  static const char func[] = "pf_tensor_slice";
  DLTensor* src;
  int ours;
  int32_t ax;
  if (pf__view_args(tensor, out, func, &src, &ours) != 0 ||
      pf__axis(axis, src->ndim, func, &ax) != 0)
    return -1;
  if (step == 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument step: expected a non-zero step, got 0", func);
    return -1;
  }
  /* Python's slice.indices(): clamp into [lower, upper] after counting negatives from the end. */
  int64_t n = src->shape[ax];
  int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  int64_t bounds[2] = {start, stop};
  for (int k = 0; k < 2; ++k) {
    if (bounds[k] < 0)
      bounds[k] += n; /* no overflow: n >= 0 */
    bounds[k] = bounds[k] < lower ? lower : bounds[k] > upper ? upper : bounds[k];
  }
  start = bounds[0];
  stop = bounds[1];
  uint64_t len = 0;
  if (step > 0 && stop > start)
    len = (uint64_t)(stop - start - 1) / (uint64_t)step + 1;
  else if (step < 0 && start > stop)
    len = (uint64_t)(start - stop - 1) / (0 - (uint64_t)step) + 1;
  /* The short way: a slice with elements of a packfn tensor with elements lies within it by
   * construction, and its offset and strides fit (they are within the base's span; a packfn
   * tensor has its strides); it has no more elements than the tensor, whose size in bits was
   * checked when it was made */
  if (PF_LIKELY(ours) && len > 0 && pf__has_elements(src)) {
    int32_t nd = src->ndim;
    const int64_t* bs = src->strides;
    pf__tensor_t* t = pf__view_alloc(tensor, nd, start * bs[ax]);
    if (PF_LIKELY(t != NULL)) {
      int negative = 0;
      for (int32_t d = 0; d < nd; ++d) {
        t->dims[d] = src->shape[d];
        t->dims[nd + d] = bs[d];
        negative |= bs[d] < 0;
      }
      t->dims[ax] = (int64_t)len;
      if (len > 1)
        t->dims[nd + ax] = bs[ax] * step;
      pf_object_t* v = pf__view_checked(t, negative);
      if (PF_LIKELY(v != NULL)) {
        *out = v;
        return 0;
      }
    }
  }
  int64_t buf[PF_TENSOR_MAX_NDIM], shape[PF_TENSOR_MAX_NDIM], strides[PF_TENSOR_MAX_NDIM];
  const int64_t* s = pf__strides_of(src, buf);
  for (int32_t d = 0; d < src->ndim; ++d) { /* a loop: memcpy's call cost more than its copy */
    shape[d] = src->shape[d];
    strides[d] = s[d];
  }
  shape[ax] = (int64_t)len;
  /* With two or more elements, |step| < n, so the product stays within the base's span. */
  if (len > 1)
    strides[ax] = s[ax] * step;
  int64_t offset = len > 0 ? start * s[ax] : 0;
  return pf__view_finish(tensor, ours, src, src->ndim, shape, strides, offset, func, out);
}

int pf_tensor_select(pf_object_t* tensor, int32_t axis, int64_t index, pf_object_t** out) {
  static const char func[] = "pf_tensor_select";
  DLTensor* src;
  int ours;
  int32_t ax;
  if (pf__view_args(tensor, out, func, &src, &ours) != 0 ||
      pf__axis(axis, src->ndim, func, &ax) != 0)
    return -1;
  int64_t n = src->shape[ax];
  int64_t i = index < 0 ? index + n : index;
  if (n == 0) { /* no index is valid: not the empty range "-0..-1" (review) */
    PF_ERROR_SET(PF_ERR_INDEX,
                 "%s: argument index: expected no index along axis %d of extent 0, got %lld", func,
                 (int)ax, (long long)index);
    return -1;
  }
  if (i < 0 || i >= n) {
    PF_ERROR_SET(PF_ERR_INDEX, "%s: argument index: expected -%lld..%lld along axis %d, got %lld",
                 func, (long long)n, (long long)n - 1, (int)ax, (long long)index);
    return -1;
  }
  /* The short way, as pf_tensor_slice's: one element along the axis lies within the tensor */
  if (PF_LIKELY(ours) && pf__has_elements(src)) {
    int32_t nd = src->ndim - 1;
    const int64_t* bs = src->strides;
    pf__tensor_t* t = pf__view_alloc(tensor, nd, i * bs[ax]);
    if (PF_LIKELY(t != NULL)) {
      int negative = 0;
      for (int32_t d = 0, k = 0; d <= nd; ++d) {
        negative |= bs[d] < 0;
        if (d == ax)
          continue;
        t->dims[k] = src->shape[d];
        t->dims[nd + k] = bs[d];
        ++k;
      }
      pf_object_t* v = pf__view_checked(t, negative);
      if (PF_LIKELY(v != NULL)) {
        *out = v;
        return 0;
      }
    }
  }
  int64_t buf[PF_TENSOR_MAX_NDIM], shape[PF_TENSOR_MAX_NDIM], strides[PF_TENSOR_MAX_NDIM];
  const int64_t* s = pf__strides_of(src, buf);
  int32_t k = 0;
  for (int32_t d = 0; d < src->ndim; ++d) {
    if (d == ax)
      continue;
    shape[k] = src->shape[d];
    strides[k] = s[d];
    ++k;
  }
  return pf__view_finish(tensor, ours, src, src->ndim - 1, shape, strides, i * s[ax], func, out);
}

int pf_tensor_permute(pf_object_t* tensor, const int32_t* axes, pf_object_t** out) {
  static const char func[] = "pf_tensor_permute";
  DLTensor* src;
  int ours;
  if (pf__view_args(tensor, out, func, &src, &ours) != 0)
    return -1;
  if (!axes && src->ndim > 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument axes: expected %d axes, got NULL", func,
                 (int)src->ndim);
    return -1;
  }
  int64_t buf[PF_TENSOR_MAX_NDIM], shape[PF_TENSOR_MAX_NDIM], strides[PF_TENSOR_MAX_NDIM];
  unsigned char seen[PF_TENSOR_MAX_NDIM] = {0};
  const int64_t* s = pf__strides_of(src, buf);
  for (int32_t i = 0; i < src->ndim; ++i) {
    int64_t a = axes[i] < 0 ? (int64_t)axes[i] + src->ndim : axes[i];
    if (a < 0 || a >= src->ndim || seen[a]) {
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument axes: expected a permutation of 0..%d, got %d at position %d",
                   func, (int)src->ndim - 1, (int)axes[i], (int)i);
      return -1;
    }
    seen[a] = 1;
    shape[i] = src->shape[a];
    strides[i] = s[a];
  }
  return pf__view_finish(tensor, ours, src, src->ndim, shape, strides, 0, func, out);
}
