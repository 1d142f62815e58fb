/* DLPack exchange: tensors from legacy and versioned managed tensors (taking them over without
 * copying) and managed tensors from tensors (holding a reference), with round trips kept exact. */
#include <stdlib.h>

#include "packfn/tensor.h"

#include "common.h"
#include "alloc.h"
#include "tensor_private.h"

/* ---- export ---- */

/* A legacy export: manager_ctx is the tensor object, whose reference the deleter drops. */
static void pf__dlpack_legacy_deleter(DLManagedTensor* self) {
  pf_object_release((pf_object_t*)self->manager_ctx);
  pf__free(self);
}

static void pf__dlpack_versioned_deleter(pf_dl_managed_tensor_versioned_t* self) {
  pf_object_release((pf_object_t*)self->manager_ctx);
  pf__free(self);
}

/* The part both exports share: checks the arguments, finds the DLTensor and allocates the
 * managed block of `size` bytes. 0 with *dl and *block set, or -1 with the error raised. */
static int pf__export_begin(const char* func, pf_object_t* tensor, void* out, size_t size,
                            DLTensor** dl, void** block) {
  if (!out) {
    return PF__NULL_ARG(func, "out");
  }
  if (pf__tensor_arg(tensor, func, "tensor", dl) != 0)
    return -1;
  *block = pf__alloc(size);
  if (!*block)
    return pf__raise_oom(func, size);
  return 0;
}

int pf_tensor_to_dlpack(pf_object_t* tensor, DLManagedTensor** out) {
  DLTensor* dl;
  void* block;
  if (out)
    *out = NULL;
  if (pf__export_begin("pf_tensor_to_dlpack", tensor, out, sizeof(DLManagedTensor), &dl, &block) !=
      0)
    return -1;
  DLManagedTensor* m = block;
  m->dl_tensor = *dl; /* shape and strides point into the tensor, which m keeps alive */
  m->manager_ctx = tensor;
  m->deleter = pf__dlpack_legacy_deleter;
  pf_object_retain(tensor);
  *out = m;
  return 0;
}

int pf_tensor_to_dlpack_versioned(pf_object_t* tensor, pf_dl_managed_tensor_versioned_t** out) {
  DLTensor* dl;
  pf_dl_managed_tensor_versioned_t* m;
  if (out)
    *out = NULL;
  if (pf__export_begin("pf_tensor_to_dlpack_versioned", tensor, out, sizeof *m, &dl, (void**)&m) !=
      0)
    return -1;
  m->version.major = PF_DLPACK_VERSIONED_MAJOR;
  m->version.minor = PF_DLPACK_VERSIONED_MINOR;
  m->manager_ctx = tensor;
  m->deleter = pf__dlpack_versioned_deleter;
  m->flags = pf__tensor_read_only(tensor);
  m->dl_tensor = *dl;
  pf_object_retain(tensor);
  *out = m;
  return 0;
}

/* ---- import ---- */

/* 1 when `dl` still describes the tensor object `obj` exactly as packfn exported it (the
 * consumer changed nothing), so the import may hand back obj itself. */
static int pf__is_unchanged_export(const DLTensor* dl, pf_object_t* obj) {
  const DLTensor* t = pf_tensor_dltensor(obj);
  return t && dl->data == t->data && dl->byte_offset == t->byte_offset && dl->ndim == t->ndim &&
         pf_dtype_equal(dl->dtype, t->dtype) && pf_device_equal(dl->device, t->device) &&
         dl->shape == t->shape && dl->strides == t->strides;
}

/* Fills import `t` (a block of pf__import_size(dl, fill) bytes) over the validated DLTensor
 * `dl` of the managed tensor `managed` (tagged as pf__tensor_import_t says), which keeps it and
 * its memory valid until its deleter runs: shape and strides are read there, not copied;
 * compact strides of its own when `fill` (the producer has none, or ndim is 0). `usual` (a
 * constant) when pf__import_usual accepted dl: no extent is 0 then. */
static inline __attribute__((always_inline)) void pf__import_fill(pf__tensor_import_t* t,
                                                                  const DLTensor* dl, int fill,
                                                                  uint64_t flags, uintptr_t managed,
                                                                  int usual) {
  /* read before the stores, which could alias them as far as the compiler knows */
  const int64_t* shape = dl->shape;
  size_t ndim = (size_t)dl->ndim;
  pf__object_init(&t->header, PF_TYPE_TENSOR, pf__tensor_deleter_dlpack);
  t->dl = *dl;
  if (fill) {
    int64_t step = 1;
    for (size_t i = ndim; i-- > 0;) {
      t->strides[i] = step;
      step *= usual || shape[i] > 0 ? shape[i] : 1; /* no overflow: the layout was validated */
    }
    t->dl.strides = t->strides; /* packfn's tensors always have strides */
  }
  t->flags = flags;
  t->managed = managed;
}

static inline size_t pf__import_size(const DLTensor* dl, int fill) {
  return sizeof(pf__tensor_import_t) + (fill ? (size_t)dl->ndim * sizeof(int64_t) : 0);
}

/* The general way of both imports, once `dl` passed their checks: wraps it as pf__import_fill
 * says. 0, or -1 with MemoryError raised as `func`. */
static inline __attribute__((always_inline)) int pf__import(const DLTensor* dl, uint64_t flags,
                                                            uintptr_t managed, const char* func,
                                                            pf_object_t** out) {
  int fill = !dl->strides || dl->ndim == 0;
  size_t size = pf__import_size(dl, fill);
  pf__tensor_import_t* t = pf__alloc(size);
  if (!t)
    return pf__raise_oom(func, size);
  pf__import_fill(t, dl, fill, flags, managed, 0);
  if (dl->ndim == 0) /* its shape may be NULL: never read, but kept a pointer, as packfn's are */
    t->dl.shape = t->strides;
  *out = &t->header;
  return 0;
}

/* 1 when pf__dltensor_check (with the bytes) accepts `dl` and it has the layout almost every
 * producer's tensor has: 1..PF_TENSOR_MAX_NDIM extents, each at least 1, one lane of an int,
 * uint or float type of 8 (ints), 16, 32 or 64 bits, strides NULL or compact, and data,
 * byte_offset and the end of its bytes below 2^63; 0 says nothing (the general way then
 * decides, and raises). Its checks are those of pf__dltensor_check for that layout, without
 * the branches for the others: the short ways of the imports (issue 14: 314 instructions a
 * foreign import, with the producer's own, where TVM-FFI took 276, checking nothing). */
static inline __attribute__((always_inline)) int pf__import_usual(const DLTensor* dl) {
  int32_t ndim = dl->ndim;
  const int64_t* shape = dl->shape;
  const int64_t* strides = dl->strides;
  unsigned bits = dl->dtype.bits;
  uint8_t code = dl->dtype.code;
  /* data is not NULL (the layout has elements), and below 2^63 (see the end) */
  if ((uint32_t)ndim - 1 >= PF_TENSOR_MAX_NDIM || !shape || (intptr_t)dl->data <= 0 ||
      dl->device.device_id < 0 || dl->dtype.lanes != 1 || code > PF_DL_FLOAT ||
      !(bits == 32 || bits == 64 || bits == 16 || (bits == 8 && code != PF_DL_FLOAT)))
    return 0;
  /* pf__extents_fit's rule, branching at once (no flags kept: 4 instructions an axis fewer, and
   * the registers they held) */
  int64_t numel = 1;
  for (int32_t i = 0; i < ndim; ++i)
    if (shape[i] < 1 || __builtin_mul_overflow(numel, shape[i], &numel))
      return 0;
  if (strides && !pf__strides_compact(ndim, shape, strides))
    return 0;
  uint64_t size;
  /* pf__layout_fits's size rule (the size in bits fits in 64 bits: its bytes then fit in
   * PTRDIFF_MAX), then pf__compact_reach_bad's: byte_offset and the end of the bytes at most
   * INT64_MAX, and with data below 2^63 too (checked first), data + end cannot wrap, whatever
   * the device */
  if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)bits, &size))
    return 0;
  uint64_t end = dl->byte_offset + size / 8;
  return (int64_t)(dl->byte_offset | end) >= 0;
}

/* pf__import_short's import when this thread's list had no block: from the slabs' depot or
 * malloc (as pf__alloc would: with the slabs off every block comes this way). 0, or -1 with
 * MemoryError. Out of line: the short way then makes no call, and needs no frame. */
__attribute__((noinline)) static int pf__import_uncached(const DLTensor* dl, int fill,
                                                         uint64_t flags, uintptr_t managed,
                                                         const char* func, pf_object_t** out) {
  size_t size = pf__import_size(dl, fill);
  pf__tensor_import_t* t = pf__alloc_uncached(size);
  if (!t) {
    *out = NULL;
    return pf__raise_oom(func, size);
  }
  pf__import_fill(t, dl, fill, flags, managed, 1);
  *out = &t->header;
  return 0;
}

/* The short way of both imports: `dl`, which pf__import_usual accepts, wrapped. 0, or -1 with
 * MemoryError. */
static inline __attribute__((always_inline)) int pf__import_short(const DLTensor* dl,
                                                                  uint64_t flags, uintptr_t managed,
                                                                  const char* func,
                                                                  pf_object_t** out) {
  int fill = !dl->strides;
  pf__tensor_import_t* t = pf__alloc_cached(pf__import_size(dl, fill));
  if (PF_UNLIKELY(t == NULL))
    return pf__import_uncached(dl, fill, flags, managed, func, out);
  pf__import_fill(t, dl, fill, flags, managed, 1);
  *out = &t->header;
  return 0;
}

/* pf_tensor_from_dlpack's general way: NULL arguments, our own exports that changed, and
 * another runtime's that pf__import_usual declines. */
__attribute__((noinline)) static int pf__from_dlpack(DLManagedTensor* src, pf_object_t** out) {
  static const char func[] = "pf_tensor_from_dlpack";
  if (!out || !src) {
    if (out)
      *out = NULL;
    return PF__NULL_ARG(func, out ? "src" : "out");
  }
  *out = NULL;
  pf__layout_t layout;
  if (pf__dltensor_check(&src->dl_tensor, func, "src", 1, &layout) != 0)
    return -1;
  /* our own export of a read-only tensor, its description changed by the consumer (a slice):
   * still the read-only memory, though the legacy form cannot say so (came back writable,
   * review) */
  uint64_t flags = src->deleter == pf__dlpack_legacy_deleter &&
                           pf_tensor_is_read_only((pf_object_t*)src->manager_ctx) == 1
                       ? PF_DLPACK_FLAG_READ_ONLY
                       : 0;
  return pf__import(&src->dl_tensor, flags, (uintptr_t)src, func, out);
}

/* pf_tensor_from_dlpack_versioned's general way, as pf__from_dlpack's (and another major
 * version). */
__attribute__((noinline)) static int
pf__from_dlpack_versioned(pf_dl_managed_tensor_versioned_t* src, pf_object_t** out) {
  static const char func[] = "pf_tensor_from_dlpack_versioned";
  if (!out || !src) {
    if (out)
      *out = NULL;
    return PF__NULL_ARG(func, out ? "src" : "out");
  }
  *out = NULL;
  if (src->version.major != PF_DLPACK_VERSIONED_MAJOR) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument src: expected DLPack major version %d, got %u.%u",
                 func, PF_DLPACK_VERSIONED_MAJOR, (unsigned)src->version.major,
                 (unsigned)src->version.minor);
    return -1;
  }
  pf_object_t* exported = (pf_object_t*)src->manager_ctx;
  pf__layout_t layout;
  if (pf__dltensor_check(&src->dl_tensor, func, "src", 1, &layout) != 0)
    return -1;
  DLDataType dt = src->dl_tensor.dtype;
  /* a sub-byte type is one of fewer than 8 bits per lane, whatever the lane count: int4 x 2
   * padded holds each lane in a byte of its own, which a packed reading would misplace */
  if ((src->flags & PF_DLPACK_FLAG_SUBBYTE_TYPE_PADDED) && dt.bits < 8) {
    char name[PF_DTYPE_STR_MAX];
    pf_dtype_format(dt, name, sizeof name);
    PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED,
                 "%s: argument src: sub-byte elements padded to bytes are not supported, got %s",
                 func, name);
    return -1;
  }
  /* our own export of a read-only tensor stays read-only, whatever the consumer did with the
   * flag (as the legacy form above) */
  uint64_t flags = src->flags & PF_DLPACK_FLAG_READ_ONLY;
  if (src->deleter == pf__dlpack_versioned_deleter && pf_tensor_is_read_only(exported) == 1)
    flags = PF_DLPACK_FLAG_READ_ONLY;
  return pf__import(&src->dl_tensor, flags, (uintptr_t)src | 1, func, out);
}

/* packfn's own legacy export: the tensor itself when unchanged, else the general way. Out of
 * line: another runtime's export, the short way's, then needs no frame. */
__attribute__((noinline)) static int pf__from_own_dlpack(DLManagedTensor* src, pf_object_t** out) {
  if (pf__is_unchanged_export(&src->dl_tensor, (pf_object_t*)src->manager_ctx)) {
    *out = (pf_object_t*)src->manager_ctx; /* the export's reference becomes the caller's */
    pf__free(src);                         /* our own export block */
    return 0;
  }
  return pf__from_dlpack(src, out);
}

/* As pf__from_own_dlpack, in the versioned form. */
__attribute__((noinline)) static int
pf__from_own_dlpack_versioned(pf_dl_managed_tensor_versioned_t* src, pf_object_t** out) {
  pf_object_t* exported = (pf_object_t*)src->manager_ctx;
  /* only when the consumer added no flag either: a READ_ONLY it set must give a read-only
   * tensor, not the writable original (found by review) */
  if (pf__is_unchanged_export(&src->dl_tensor, exported) &&
      (src->flags == 0 ||
       (src->flags == PF_DLPACK_FLAG_READ_ONLY && pf_tensor_is_read_only(exported) == 1))) {
    *out = exported;
    pf__free(src); /* our own export block */
    return 0;
  }
  return pf__from_dlpack_versioned(src, out);
}

/* packfn's own export, unchanged, gives back the tensor itself; another runtime's of the usual
 * layout takes the short way; everything else the general one. */
int pf_tensor_from_dlpack(DLManagedTensor* src, pf_object_t** out) {
  if (PF_LIKELY(out && src)) {
    if (src->deleter == pf__dlpack_legacy_deleter)
      return pf__from_own_dlpack(src, out);
    if (pf__import_usual(&src->dl_tensor))
      return pf__import_short(&src->dl_tensor, 0, (uintptr_t)src, "pf_tensor_from_dlpack", out);
  }
  return pf__from_dlpack(src, out);
}

/* As pf_tensor_from_dlpack. The short way needs no check of the flags: sub-byte types are not
 * the usual layout's. */
int pf_tensor_from_dlpack_versioned(pf_dl_managed_tensor_versioned_t* src, pf_object_t** out) {
  if (PF_LIKELY(out && src && src->version.major == PF_DLPACK_VERSIONED_MAJOR)) {
    if (src->deleter == pf__dlpack_versioned_deleter)
      return pf__from_own_dlpack_versioned(src, out);
    if (pf__import_usual(&src->dl_tensor))
      return pf__import_short(&src->dl_tensor, src->flags & PF_DLPACK_FLAG_READ_ONLY,
                              (uintptr_t)src | 1, "pf_tensor_from_dlpack_versioned", out);
  }
  return pf__from_dlpack_versioned(src, out);
}
