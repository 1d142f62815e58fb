/* Private: packfn's tensor objects as the tensor layer's files (tensor.c, tensor_view.c,
 * tensor_copy.c, dlpack.c) share them. */
#ifndef PACKFN_SRC_TENSOR_PRIVATE_H_
#define PACKFN_SRC_TENSOR_PRIVATE_H_

#include "packfn/tensor.h"

#include "alloc.h"
#include "common.h"
#include "device_private.h"

/* A packfn tensor object: header, the ABI's DLTensor, then our private part, in one of three
 * forms told apart by the object deleter (pf__tensor_owns_memory, pf__tensor_is_import):
 * - memory it allocated (pf_tensor_empty): the buffer and the allocator hook that frees it; never
 *   read-only;
 * - memory something else keeps alive (views, pf_tensor_from_dltensor): flags and an owner
 *   released when the tensor dies;
 * - a DLPack import (pf__tensor_import_t below): flags and the managed tensor, no owner_release.
 * With one dimension the object takes 112 bytes. */
typedef struct pf__tensor_s {
  pf_object_t header;
  DLTensor dl; /* at offset 24 (ABI); shape/strides point into dims */
  union {
    struct {
      uint64_t flags; /* PF_DLPACK_FLAG_READ_ONLY when the memory is read-only */
      void* owner;    /* keeps the memory alive, released by owner_release */
      void (*owner_release)(void* owner); /* NULL when there is nothing to release */
    };
    struct {
      void* alloc_ptr; /* what alloc_free takes: the alloc hook's buffer (packfn's own large CPU
                        * buffers: the malloc block holding dl.data, pf__cpu_alloc_tensor) */
      void (*alloc_free)(void* ctx, DLDevice device, void* ptr); /* its free hook */
      void* alloc_ctx;                                           /* and context */
    };
  };
  int64_t dims[]; /* shape[ndim], then strides[ndim] */
} pf__tensor_t;

/* A DLPack import (pf_tensor_from_dlpack and its versioned form): the managed tensor keeps
 * the memory and, until its deleter runs, its DLTensor's shape and strides (DLPack's rule), so
 * dl.shape points into the producer's description, as dl.strides does when it has strides;
 * without them the compact strides are filled in after the object (as TVM-FFI's import does):
 * a 1-d import takes 96 bytes, as TVM-FFI's, where copying both took 112. flags at
 * pf__tensor_t's offset (pf__tensor_flags reads it in every form but the owning one); no
 * owner_release: its deleter knows what to call, and code that reads owner_release must check
 * pf__tensor_is_import first (here the strides may lie there). */
typedef struct {
  pf_object_t header;
  DLTensor dl;
  uint64_t flags;    /* as pf__tensor_t's */
  uintptr_t managed; /* the DLManagedTensor, or the versioned one with the low bit set */
  int64_t strides[]; /* ndim compact strides when the producer's are NULL (or ndim is 0) */
} pf__tensor_import_t;

_Static_assert(offsetof(pf__tensor_import_t, flags) == offsetof(pf__tensor_t, flags),
               "pf__tensor_flags reads an import's flags as pf__tensor_t's");

/* The object deleters of the three forms (tensor.c). */
void pf__tensor_deleter(void* self, int flags);
void pf__tensor_deleter_owning(void* self, int flags);
void pf__tensor_deleter_dlpack(void* self, int flags);

/* pf__tensor_new's body, inlined where creation is hot: pf_tensor_empty (a compact description,
 * which then makes it the owning form) and the views. */
static inline __attribute__((always_inline)) int
pf__tensor_make(const DLTensor* desc, uint64_t flags, const char* func, pf__tensor_t** out) {
  size_t ndim = (size_t)desc->ndim;
  size_t size = sizeof(pf__tensor_t) + 2 * ndim * sizeof(int64_t);
  pf__tensor_t* t = pf__alloc(size);
  if (!t) {
    *out = NULL;
    return pf__raise_oom(func, size);
  }
  pf__object_init(&t->header, PF_TYPE_TENSOR, pf__tensor_deleter);
  int64_t* shape = t->dims;
  int64_t* strides = t->dims + ndim;
  for (size_t i = 0; i < ndim; ++i)
    shape[i] = desc->shape[i];
  if (desc->strides) {
    for (size_t i = 0; i < ndim; ++i)
      strides[i] = desc->strides[i];
  } else {
    int64_t step = 1;
    for (size_t i = ndim; i-- > 0;) {
      strides[i] = step;
      step *= shape[i] > 0 ? shape[i] : 1;
    }
  }
  t->dl.data = desc->data;
  t->dl.device = desc->device;
  t->dl.ndim = desc->ndim;
  t->dl.dtype = desc->dtype;
  t->dl.shape = shape;
  t->dl.strides = strides;
  t->dl.byte_offset = desc->byte_offset;
  t->flags = flags;
  t->owner = NULL;
  t->owner_release = NULL;
  *out = t;
  return 0;
}

/* The element count of `ndim` (0..PF_TENSOR_MAX_NDIM) extents of `shape`, each >= 1, in *numel:
 * 1, or 0 when an extent is below 1 or the count overflows int64 (nothing raised). The short
 * ways' check (pf_tensor_empty, the views): their layouts have elements, so an empty one, whose
 * other extents need checks of their own, goes the general way. */
static inline __attribute__((always_inline)) int pf__extents_fit(const int64_t* shape, int32_t ndim,
                                                                 int64_t* numel) {
  int64_t n = 1;
  int bad = 0;
  for (int32_t i = 0; i < ndim; ++i) {
    bad |= shape[i] < 1;
    bad |= __builtin_mul_overflow(n, shape[i], &n);
  }
  *numel = n;
  return !bad;
}

/* Fills a fresh tensor's shape (a copy of `shape`: ndim >= 1 extents, each >= 1) and its compact
 * row-major strides, and points dl.shape and dl.strides at them. */
static inline __attribute__((always_inline)) void
pf__tensor_dims_compact(pf__tensor_t* t, const int64_t* shape, int32_t ndim) {
  int64_t* dims = t->dims;
  int64_t step = 1;
  for (int32_t i = ndim; i-- > 0;) {
    int64_t e = shape[i];
    dims[i] = e;
    dims[ndim + i] = step;
    step *= e; /* no overflow: pf__extents_fit passed the whole product */
  }
  t->dl.shape = dims;
  t->dl.strides = dims + ndim;
  t->dl.ndim = ndim;
}

/* 1 when `t` (a packfn tensor) holds memory it allocated, 0 when an owner keeps its memory. */
static inline int pf__tensor_owns_memory(const pf__tensor_t* t) {
  return t->header.deleter == pf__tensor_deleter_owning;
}

/* The flags of a packfn tensor (0 for one that allocated its memory). */
static inline uint64_t pf__tensor_flags(const pf__tensor_t* t) {
  return pf__tensor_owns_memory(t) ? 0 : t->flags;
}

/* What pf__dltensor_check learns of a valid layout: its element count, the lowest and highest
 * element offsets it reaches from its first element (0 and -1 when it has no element), and
 * whether its strides are NULL or, with elements, spell the compact row-major layout (then
 * pf_dltensor_is_contiguous holds; 0 says nothing: an empty tensor with strides may be
 * contiguous too). */
typedef struct {
  int64_t numel;
  int64_t lo, hi;
  int compact;
} pf__layout_t;

/* Out-of-line halves of pf__dltensor_check (tensor.c), each raising ValueError and returning -1
 * (pf__empty_layout_overflows: 1 when an empty layout's other extents overflow;
 * pf__dltensor_error: the strides' message when `axis` >= 0, the axis where they overflow).
 * `arg` names the description at fault, or is NULL when ndim, shape, dtype and strides are the
 * function's own arguments of those names (pf_tensor_empty, the views: a view's data and device
 * are then those of its argument tensor). */
int pf__layout_error(int32_t ndim, const int64_t* shape, DLDataType dtype, const char* func,
                     const char* arg);
int pf__empty_layout_overflows(int32_t ndim, const int64_t* shape, DLDataType dtype);
#define PF__AXIS_BYTE_OFFSET (-2) /* pf__dltensor_error's axis for a byte_offset refused */
int pf__dltensor_error(const DLTensor* desc, const char* func, const char* arg, int64_t numel,
                       int32_t axis);

/* 1 for the dtypes most tensors have (int, uint and float of 16, 32 or 64 bits, any lane count
 * but 0), which pf_dtype_is_valid accepts too: checked inline before calling it. */
static inline int pf__dtype_is_common(DLDataType t) {
  return t.code <= PF_DL_FLOAT && t.lanes != 0 && (t.bits == 32 || t.bits == 64 || t.bits == 16);
}

/* ndim (0..PF_TENSOR_MAX_NDIM), shape (not NULL with axes, extents >= 0) and the element count
 * and packed byte size of `dtype`'s elements without overflow (an empty layout's other extents
 * must fit as well), the dtype's validity aside: 1 with *numel and *nbytes stored, or 0. Raises
 * nothing. For callers whose dtype is known valid (a view has its tensor's). */
static inline __attribute__((always_inline)) int pf__layout_fits(int32_t ndim, const int64_t* shape,
                                                                 DLDataType dtype, int64_t* numel,
                                                                 size_t* nbytes) {
  if (PF_UNLIKELY(ndim < 0 || ndim > PF_TENSOR_MAX_NDIM || (ndim > 0 && !shape)))
    return 0;
  int64_t n = 1;
  int bad = 0;
  for (int32_t i = 0; i < ndim; ++i) {
    bad |= shape[i] < 0;
    bad |= __builtin_mul_overflow(n, shape[i], &n);
  }
  /* The packed size in bits must fit too, with room for the rounding up to bytes. */
  uint64_t bits;
  if (PF_UNLIKELY(bad ||
                  __builtin_mul_overflow((uint64_t)n, (uint64_t)dtype.bits * dtype.lanes, &bits) ||
                  bits / 8 >= (uint64_t)PTRDIFF_MAX ||
                  (n == 0 && pf__empty_layout_overflows(ndim, shape, dtype))))
    return 0;
  *numel = n;
  *nbytes = (size_t)((bits + 7) / 8);
  return 1;
}

/* Checks ndim, shape (extents >= 0) and dtype, and computes the element count and packed byte
 * size without overflow; an empty layout's other extents must fit as well. 0, or -1 with
 * ValueError (the message from pf__layout_error, naming `arg` as it does), or with nothing
 * raised when `quiet` (a constant: the raising calls compile away). */
static inline __attribute__((always_inline)) int
pf__validate_layout_as(int32_t ndim, const int64_t* shape, DLDataType dtype, const char* func,
                       const char* arg, int64_t* numel, size_t* nbytes, int quiet) {
  if (PF_UNLIKELY(!pf__layout_fits(ndim, shape, dtype, numel, nbytes) ||
                  !(pf__dtype_is_common(dtype) || pf_dtype_is_valid(dtype)))) {
    if (!quiet)
      pf__layout_error(ndim, shape, dtype, func, arg);
    return -1;
  }
  return 0;
}

static inline __attribute__((always_inline)) int
pf__validate_layout(int32_t ndim, const int64_t* shape, DLDataType dtype, const char* func,
                    const char* arg, int64_t* numel, size_t* nbytes) {
  return pf__validate_layout_as(ndim, shape, dtype, func, arg, numel, nbytes, 0);
}

/* The lowest and highest element offsets that `ndim` axes of `shape` and `strides` reach from
 * the first element, a zero extent counted as 1 (an empty tensor's views and slices still
 * compute offsets from its other axes). 0, or -1 (nothing stored) when the sum of
 * |stride| * (extent - 1) does not fit in int64, with the axis where it stops fitting in *axis.
 * Each offset is bounded by that sum, so neither can overflow once it fits. */
static inline __attribute__((always_inline)) int
pf__strides_reach(int32_t ndim, const int64_t* shape, const int64_t* strides, int64_t* lo,
                  int64_t* hi, int32_t* axis) {
  int64_t span = 0, l = 0, h = 0, term;
  for (int32_t i = 0; i < ndim; ++i) {
    int64_t s = strides[i];
    int64_t reach = shape[i] > 0 ? shape[i] - 1 : 0;
    if (PF_UNLIKELY(s == INT64_MIN || __builtin_mul_overflow(s < 0 ? -s : s, reach, &term) ||
                    __builtin_add_overflow(span, term, &span))) {
      *axis = i;
      return -1;
    }
    if (s < 0)
      l -= term;
    else
      h += term;
  }
  *lo = l;
  *hi = h;
  return 0;
}

/* Device types whose data pointer is an address, so offsets move the pointer itself. */
static inline int pf__is_addressable(DLDevice d) {
  return pf__is_address_device((int32_t)d.device_type);
}

/* pf__byte_reach_bad's bytes of the elements lo..hi+1 for sub-byte elements: rounded outward. */
__attribute__((noinline, cold)) int pf__byte_reach_subbyte(int64_t bits, int64_t lo, int64_t hi,
                                                           int64_t* first, int64_t* end);

/* Whether the bytes elements lo..hi (element offsets, lo <= 0 <= hi) of `desc` cover lie, from
 * data + byte_offset, outside what int64 offsets (and, for an address, the address space, from
 * address 1: no object is at 0, and a view of an element there had data NULL) reach. A
 * byte_offset near 2^64 used to wrap data + byte_offset to before data (review). */
static inline int pf__byte_reach_bad(const DLTensor* desc, int64_t lo, int64_t hi) {
  int64_t bits = (int64_t)desc->dtype.bits * desc->dtype.lanes, first, end;
  if (PF_UNLIKELY(hi == INT64_MAX)) /* its end, hi + 1, has no int64 (the strides allow it) */
    return 1;
  if (PF_LIKELY(bits % 8 == 0)) {
    if (PF_UNLIKELY(__builtin_mul_overflow(lo, bits / 8, &first) ||
                    __builtin_mul_overflow(hi + 1, bits / 8, &end)))
      return 1;
  } else if (pf__byte_reach_subbyte(bits, lo, hi, &first, &end) != 0) {
    return 1;
  }
  int64_t offset = (int64_t)desc->byte_offset; /* <= INT64_MAX: checked first */
  if (PF_UNLIKELY(__builtin_add_overflow(offset, first, &first) ||
                  __builtin_add_overflow(offset, end, &end)))
    return 1;
  uintptr_t p = (uintptr_t)desc->data;
  return p && pf__is_addressable(desc->device) &&
         ((first < 0 && p <= (uintptr_t)(0 - (uint64_t)first)) || p > UINTPTR_MAX - (uint64_t)end);
}

/* 1 when `strides` give the compact row-major layout of `shape` (the strides of extent-1 axes
 * ignored: they move nothing, but INT64_MIN, which pf__strides_reach refuses on any axis, is
 * left to it), whose element offsets are 0..numel-1. For a layout with elements whose count
 * fits in int64 (the running product cannot overflow then). */
static inline int pf__strides_compact(int32_t ndim, const int64_t* shape, const int64_t* strides) {
  int64_t expect = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    if ((shape[i] != 1 && strides[i] != expect) || strides[i] == INT64_MIN)
      return 0;
    expect *= shape[i];
  }
  return 1;
}

/* pf__byte_reach_bad for a compact layout (strides NULL or compact) of `nbytes` packed bytes (numel
 * > 0, byte_offset <= INT64_MAX): its bytes are [0, nbytes) from data + byte_offset, so no
 * multiplication is needed (nbytes < PTRDIFF_MAX: the sum cannot wrap a uint64). */
static inline int pf__compact_reach_bad(const DLTensor* desc, size_t nbytes) {
  uint64_t end = desc->byte_offset + (uint64_t)nbytes;
  uintptr_t p = (uintptr_t)desc->data;
  return end > (uint64_t)INT64_MAX ||
         (p && pf__is_addressable(desc->device) && p > UINTPTR_MAX - end);
}

/* Validates the description `desc` as argument `arg` of `func` (ndim, shape, dtype, device
 * index, data, size and offset overflow and, when `bytes`, the bytes reached from data and
 * byte_offset) and fills *layout. A view leaves the bytes to the check against its base, and
 * passes a NULL `arg` (see pf__layout_error). 0, or -1 with ValueError (*layout untouched), or
 * with nothing raised when `quiet` (a constant). Inline where creation is hot (views);
 * pf__dltensor_validate is the call. */
static inline __attribute__((always_inline)) int
pf__dltensor_check_as(const DLTensor* desc, const char* func, const char* arg, int bytes,
                      pf__layout_t* layout, int quiet) {
  if (PF_UNLIKELY(!desc)) {
    if (!quiet)
      pf__dltensor_error(desc, func, arg, 0, -1);
    return -1;
  }
  int64_t numel = 0;
  size_t nbytes = 0;
  if (pf__validate_layout_as(desc->ndim, desc->shape, desc->dtype, func, arg, &numel, &nbytes,
                             quiet) != 0)
    return -1;
  if (PF_UNLIKELY(desc->device.device_id < 0 || (numel > 0 && !desc->data))) {
    if (!quiet)
      pf__dltensor_error(desc, func, arg, numel, -1);
    return -1;
  }
  /* Every element offset must be representable (pf__strides_reach), empty tensors checked
   * too (issue 10, defect 5); a layout without elements reaches nothing. */
  int64_t lo = 0, hi = numel - 1; /* compact: 0..numel-1 */
  int32_t axis;
  /* strides that spell the compact layout (most tensors' strides, filled in) reach 0..numel-1,
   * whose bytes the packed size gives: no per-axis overflow checks */
  int compact =
      !desc->strides || (numel > 0 && pf__strides_compact(desc->ndim, desc->shape, desc->strides));
  if (!compact) {
    if (PF_UNLIKELY(pf__strides_reach(desc->ndim, desc->shape, desc->strides, &lo, &hi, &axis) !=
                    0)) {
      if (!quiet)
        pf__dltensor_error(desc, func, arg, numel, axis);
      return -1;
    }
    if (numel == 0) {
      lo = 0;
      hi = -1;
    }
  }
  if (bytes && PF_UNLIKELY(desc->byte_offset > (uint64_t)INT64_MAX ||
                           (numel > 0 && (compact ? pf__compact_reach_bad(desc, nbytes)
                                                  : pf__byte_reach_bad(desc, lo, hi))))) {
    if (!quiet)
      pf__dltensor_error(desc, func, arg, numel, PF__AXIS_BYTE_OFFSET);
    return -1;
  }
  layout->numel = numel;
  layout->compact = compact;
  layout->lo = lo;
  layout->hi = hi;
  return 0;
}

static inline __attribute__((always_inline)) int pf__dltensor_check(const DLTensor* desc,
                                                                    const char* func,
                                                                    const char* arg, int bytes,
                                                                    pf__layout_t* layout) {
  return pf__dltensor_check_as(desc, func, arg, bytes, layout, 0);
}

/* pf__dltensor_check without the layout. */
int pf__dltensor_validate(const DLTensor* desc, const char* func, const char* arg);

/* pf_tensor_empty raising its errors as `func` (pf_tensor_to_device). */
int pf__tensor_empty_as(const int64_t* shape, int32_t ndim, DLDataType dtype, DLDevice device,
                        const char* func, pf_object_t** out);

/* Allocates a tensor object copying `desc` (already validated): shape and strides inline
 * (compact strides when desc->strides is NULL), no owner. 0, or -1 with MemoryError. */
int pf__tensor_new(const DLTensor* desc, uint64_t flags, const char* func, pf__tensor_t** out);

/* The DLTensor of `tensor` (argument `arg` of `func`): 0, or -1 with TypeError for NULL or a
 * non-tensor (raised by pf__tensor_arg_error, which returns -1). */
int pf__tensor_arg_error(pf_object_t* tensor, const char* func, const char* arg);
static inline int pf__tensor_arg(pf_object_t* tensor, const char* func, const char* arg,
                                 DLTensor** out) {
  *out = pf_tensor_dltensor(tensor);
  return PF_LIKELY(*out != NULL) ? 0 : pf__tensor_arg_error(tensor, func, arg);
}

/* 1 when packfn tensor `obj` is a DLPack import (pf__tensor_import_t, without owner_release).
 * Out of line (tensor.c): a third address compared inline in pf__tensor_is_ours had GCC keep
 * the deleters' addresses in registers across pf_tensor_view, 8 instructions a view more. */
int pf__tensor_is_import(const pf_object_t* obj);

/* 1 when obj is a tensor made by packfn (whose private part we may read). */
static inline int pf__tensor_is_ours(const pf_object_t* obj) {
  return obj && (obj->deleter == pf__tensor_deleter || obj->deleter == pf__tensor_deleter_owning ||
                 pf__tensor_is_import(obj));
}

/* PF_DLPACK_FLAG_READ_ONLY when obj (not NULL) is a packfn tensor over read-only memory, else 0:
 * the flags of the two forms that have them (an owning tensor's memory is never read-only, another
 * runtime's tensor says nothing). Compares both deleters inline (the export's path: the import
 * test's call was part of 21 instructions there); pf_tensor_is_read_only is this rule. */
static inline uint64_t pf__tensor_read_only(const pf_object_t* obj) {
  if (obj->deleter != pf__tensor_deleter && obj->deleter != pf__tensor_deleter_dlpack)
    return 0;
  return ((const pf__tensor_t*)obj)->flags & PF_DLPACK_FLAG_READ_ONLY; /* at one offset in both */
}

/* Releases an object reference held as an owner (owner_release of views and exports). */
void pf__owner_release_object(void* obj);

/* Writes "(2, 3)" for n extents or strides into buf (cut short with "...)" when it does not
 * fit). Returns buf. */
const char* pf__format_dims(const int64_t* dims, int32_t n, char* buf, size_t size);
/* The same for a shape whose negative entries mean "any extent" (a pf_tensor_spec_t's, the -1
 * of a reshape), printed as "*". */
const char* pf__format_spec_dims(const int64_t* dims, int32_t n, char* buf, size_t size);

#endif /* PACKFN_SRC_TENSOR_PRIVATE_H_ */
