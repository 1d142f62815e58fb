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
  m->flags = pf_tensor_is_read_only(tensor) ? PF_DLPACK_FLAG_READ_ONLY : 0;
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

/* Wraps a validated description, the DLTensor of the managed tensor `managed` (tagged as
 * pf__tensor_import_t says), which keeps it and its memory valid until its deleter runs: shape
 * and strides are read there, not copied. Inline in both imports, as their validation is
 * (pf__dltensor_check): the calls' frames were 30 of the 380 instructions of a foreign
 * tensor's import. */
static inline __attribute__((always_inline)) int pf__import(const DLTensor* dl, uint64_t flags,
                                                            uintptr_t managed, const char* func,
                                                            pf_object_t** out) {
  size_t ndim = (size_t)dl->ndim; /* 0..PF_TENSOR_MAX_NDIM: validated */
  const int64_t* shape = dl->shape;
  /* strides of its own only when the producer has none: packfn's tensors always have them */
  int fill = !dl->strides || ndim == 0;
  size_t size = sizeof(pf__tensor_import_t) + (fill ? ndim * sizeof(int64_t) : 0);
  pf__tensor_import_t* t = pf__alloc(size);
  if (!t)
    return pf__raise_oom(func, size);
  pf__object_init(&t->header, PF_TYPE_TENSOR, pf__tensor_deleter_dlpack);
  t->dl = *dl;
  if (fill) {
    int64_t step = 1;
    for (size_t i = ndim; i-- > 0;) {
      t->strides[i] = step;
      step *= shape[i] > 0 ? shape[i] : 1; /* no overflow: the layout was validated */
    }
    t->dl.strides = t->strides;
    if (ndim == 0) /* its shape may be NULL: never read, but kept a pointer, as packfn's are */
      t->dl.shape = t->strides;
  }
  t->flags = flags;
  t->managed = managed;
  *out = &t->header;
  return 0;
}

int pf_tensor_from_dlpack(DLManagedTensor* src, pf_object_t** out) {
  static const char func[] = "pf_tensor_from_dlpack";
  if (!out || !src) {
    if (out)
      *out = NULL;
    return PF__NULL_ARG(func, out ? "src" : "out");
  }
  *out = NULL;
  if (src->deleter == pf__dlpack_legacy_deleter &&
      pf__is_unchanged_export(&src->dl_tensor, (pf_object_t*)src->manager_ctx)) {
    *out = (pf_object_t*)src->manager_ctx; /* the export's reference becomes the caller's */
    pf__free(src);                         /* our own export block */
    return 0;
  }
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

int pf_tensor_from_dlpack_versioned(pf_dl_managed_tensor_versioned_t* src, pf_object_t** out) {
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
  /* the shortcut only when the consumer added no flag either: a READ_ONLY it set must give a
   * read-only tensor, not the writable original (found by review) */
  pf_object_t* exported = (pf_object_t*)src->manager_ctx;
  if (src->deleter == pf__dlpack_versioned_deleter &&
      pf__is_unchanged_export(&src->dl_tensor, exported) &&
      (src->flags == 0 ||
       (src->flags == PF_DLPACK_FLAG_READ_ONLY && pf_tensor_is_read_only(exported) == 1))) {
    *out = (pf_object_t*)src->manager_ctx;
    pf__free(src); /* our own export block */
    return 0;
  }
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
