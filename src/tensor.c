/* Tensor objects: validation of DLTensor descriptions, the object (DLTensor at offset 24, shape
 * and strides inline, an owner that keeps the memory alive), creation, and argument checks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/tensor.h"

#include "common.h"
#include "alloc.h"
#include "device_private.h"
#include "tensor_private.h"

/* Deleter of tensors whose memory an owner keeps. */
void pf__tensor_deleter(void* self, int flags) {
  pf__tensor_t* t = (pf__tensor_t*)self;
  if ((flags & PF_DELETER_STRONG) && t->owner_release)
    t->owner_release(t->owner);
  if (flags & PF_DELETER_WEAK)
    pf__free_nonnull(self);
}

/* Deleter of tensors that allocated their memory. */
void pf__tensor_deleter_owning(void* self, int flags) {
  pf__tensor_t* t = (pf__tensor_t*)self;
  if (flags & PF_DELETER_STRONG)
    t->alloc_free(t->alloc_ctx, t->dl.device, t->alloc_ptr);
  if (flags & PF_DELETER_WEAK)
    pf__free_nonnull(self);
}

/* Deleter of DLPack imports (pf__tensor_import_t, dlpack.c): the managed tensor's deleter, once. */
void pf__tensor_deleter_dlpack(void* self, int flags) {
  pf__tensor_import_t* t = (pf__tensor_import_t*)self;
  if (flags & PF_DELETER_STRONG) {
    if (t->managed & 1) {
      pf_dl_managed_tensor_versioned_t* m = (pf_dl_managed_tensor_versioned_t*)(t->managed - 1);
      if (m->deleter)
        m->deleter(m);
    } else {
      DLManagedTensor* m = (DLManagedTensor*)t->managed;
      if (m->deleter)
        m->deleter(m);
    }
  }
  if (flags & PF_DELETER_WEAK)
    pf__free_nonnull(self);
}

/* Out of line on purpose (tensor_private.h says why). */
__attribute__((noinline)) int pf__tensor_is_import(const pf_object_t* obj) {
  return obj->deleter == pf__tensor_deleter_dlpack;
}

void pf__owner_release_object(void* obj) {
  pf_object_release((pf_object_t*)obj);
}

/* pf__format_dims and pf__format_spec_dims: `wild` prints negative entries as "*". */
static const char* pf__format_dims_as(const int64_t* dims, int32_t n, int wild, char* buf,
                                      size_t size) {
  if (size == 0)
    return buf;
  size_t used = 0;
  int cut = 0;
  for (int32_t i = -1; i <= n && !cut; ++i) {
    char part[32];
    if (i == -1)
      snprintf(part, sizeof part, "(");
    else if (i == n)
      snprintf(part, sizeof part, n == 1 ? ",)" : ")");
    else if (wild && dims[i] < 0)
      snprintf(part, sizeof part, "%s*", i ? ", " : "");
    else
      snprintf(part, sizeof part, "%s%lld", i ? ", " : "", (long long)dims[i]);
    size_t len = strlen(part);
    cut = used + len >= size;
    if (!cut) {
      memcpy(buf + used, part, len + 1);
      used += len;
    }
  }
  /* Did not fit: end with an ellipsis, right after what fitted, so the reader knows it was cut. */
  if (cut) {
    size_t at = size >= 5 ? (used < size - 5 ? used : size - 5) : 0;
    snprintf(buf + at, size - at, "...)");
  }
  return buf;
}

const char* pf__format_dims(const int64_t* dims, int32_t n, char* buf, size_t size) {
  return pf__format_dims_as(dims, n, 0, buf, size);
}

const char* pf__format_spec_dims(const int64_t* dims, int32_t n, char* buf, size_t size) {
  return pf__format_dims_as(dims, n, 1, buf, size);
}

/* Raises the error pf__validate_layout found; out of line so the check itself stays cheap. A
 * NULL `arg` names the function's own arguments ndim, shape and dtype, each where it is at
 * fault; otherwise `arg` is the description that holds them. */
__attribute__((noinline, cold)) int pf__layout_error(int32_t ndim, const int64_t* shape,
                                                     DLDataType dtype, const char* func,
                                                     const char* arg) {
  if (ndim < 0 || ndim > PF_TENSOR_MAX_NDIM) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected ndim in 0..%d, got %d", func,
                 arg ? arg : "ndim", PF_TENSOR_MAX_NDIM, (int)ndim);
    return -1;
  }
  const char* shape_arg = arg ? arg : "shape";
  if (ndim > 0 && !shape) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a shape of %d extents, got NULL", func,
                 shape_arg, (int)ndim);
    return -1;
  }
  for (int32_t i = 0; i < ndim; ++i)
    if (shape[i] < 0) {
      PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected extents >= 0, got %lld at axis %d",
                   func, shape_arg, (long long)shape[i], (int)i);
      return -1;
    }
  if (!pf_dtype_is_valid(dtype)) {
    char name[PF_DTYPE_STR_MAX];
    pf_dtype_format(dtype, name, sizeof name);
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a valid data type, got %s", func,
                 arg ? arg : "dtype", name);
    return -1;
  }
  char dims[128];
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument %s: expected a size that fits in memory (a zero extent counted as "
               "1), got shape %s",
               func, shape_arg, pf__format_dims(shape, ndim, dims, sizeof dims));
  return -1;
}

/* For an empty layout (some extent 0): 1 when the product of its other extents, in bits of
 * dtype, does not fit, as if the tensor were not empty. Compact strides, views and offsets of
 * an empty tensor are computed from the other extents (issue 10, defect 5: int8[0, 2^62, 4]
 * must not pass). Cold: only empty layouts get here. */
__attribute__((noinline, cold)) int pf__empty_layout_overflows(int32_t ndim, const int64_t* shape,
                                                               DLDataType dtype) {
  int64_t m = 1;
  uint64_t bits;
  for (int32_t i = 0; i < ndim; ++i)
    if (shape[i] != 0 && __builtin_mul_overflow(m, shape[i], &m))
      return 1;
  return __builtin_mul_overflow((uint64_t)m, (uint64_t)dtype.bits * dtype.lanes, &bits) ||
         bits / 8 >= (uint64_t)PTRDIFF_MAX;
}

/* pf__dltensor_error's message for bytes refused by pf__byte_reach_bad, blaming what is at
 * fault: the strides when the elements' offsets in bytes do not fit in int64 whatever data and
 * byte_offset are (review: stride 2^62 on float32 named "byte_offset 0"), else byte_offset, or,
 * when it is 0, the layout from data that leaves the address space. */
static void pf__byte_reach_error(const DLTensor* desc, const char* func, const char* arg,
                                 int64_t numel) {
  char a[128], b[128];
  if (desc->byte_offset <= (uint64_t)INT64_MAX && numel > 0) {
    int64_t lo = 0, hi = numel - 1;
    int32_t axis;
    DLTensor bare = *desc; /* the bytes from offset 0, no address to leave */
    bare.data = NULL;
    bare.byte_offset = 0;
    if (desc->strides) /* they passed pf__strides_reach before the bytes were checked */
      (void)pf__strides_reach(desc->ndim, desc->shape, desc->strides, &lo, &hi, &axis);
    if (desc->strides && pf__byte_reach_bad(&bare, lo, hi)) {
      pf_dtype_format(desc->dtype, a, sizeof a);
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument %s: expected strides whose offsets in bytes fit in int64, got "
                   "strides %s for %s",
                   func, arg, pf__format_dims(desc->strides, desc->ndim, b, sizeof b), a);
      return;
    }
    if (desc->byte_offset == 0) {
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument %s: expected the bytes of its elements to lie within the address "
                   "space from data %p, got shape %s and strides %s",
                   func, arg, desc->data, pf__format_dims(desc->shape, desc->ndim, a, sizeof a),
                   desc->strides ? pf__format_dims(desc->strides, desc->ndim, b, sizeof b)
                                 : "NULL");
      return;
    }
  }
  PF_ERROR_SET(PF_ERR_VALUE,
               "%s: argument %s: byte_offset %llu: expected the bytes of its elements to lie "
               "within the address space from data %p",
               func, arg, (unsigned long long)desc->byte_offset, desc->data);
}

__attribute__((noinline, cold)) int pf__dltensor_error(const DLTensor* desc, const char* func,
                                                       const char* arg, int64_t numel,
                                                       int32_t axis) {
  if (!desc) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a DLTensor, got NULL", func, arg);
  } else if (axis == PF__AXIS_BYTE_OFFSET) {
    pf__byte_reach_error(desc, func, arg, numel);
  } else if (axis >= 0) {
    PF_ERROR_SET(
        PF_ERR_VALUE,
        "%s: argument %s: expected strides whose offsets fit in int64, got %lld at axis %d", func,
        arg ? arg : "strides", (long long)desc->strides[axis], (int)axis);
  } else if (desc->device.device_id < 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a device index >= 0, got %d", func,
                 arg ? arg : "tensor", (int)desc->device.device_id);
  } else {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected data for %lld elements, got NULL", func,
                 arg ? arg : "tensor", (long long)numel);
  }
  return -1;
}

/* x * bits / 8 rounded down (up = 0) or up (up = 1), in *out: 0, or -1 when it does not fit in
 * int64. The bytes may fit where x * bits does not (bits: up to 8 times as many), so the
 * product is split at the byte: x = 8q + r with |r| < 8 (C's division truncates toward zero),
 * x * bits / 8 = q * bits + r * bits / 8. Multiplying first refused strided views of sub-byte
 * elements past 2^60 bytes whose compact base, checked in bytes, was accepted (a selection of
 * a 2^62-element int4 tensor; found by fuzz_dlpack). */
static int pf__bits_to_bytes(int64_t x, int64_t bits, int up, int64_t* out) {
  int64_t whole, part = (x % 8) * bits; /* |part| < 8 * bits: bits is below 2^24 */
  if (__builtin_mul_overflow(x / 8, bits, &whole))
    return -1;
  int64_t bytes = part / 8, rest = part % 8;
  bytes += up ? rest > 0 : -(rest < 0);
  return __builtin_add_overflow(whole, bytes, out) ? -1 : 0;
}

int pf__byte_reach_subbyte(int64_t bits, int64_t lo, int64_t hi, int64_t* first, int64_t* end) {
  /* whole bytes, rounded outward: the first byte lo's bits touch, one past the last hi's do */
  return pf__bits_to_bytes(lo, bits, 0, first) != 0 || pf__bits_to_bytes(hi + 1, bits, 1, end) != 0
             ? -1
             : 0;
}

int pf__dltensor_validate(const DLTensor* desc, const char* func, const char* arg) {
  pf__layout_t layout;
  return pf__dltensor_check(desc, func, arg, 1, &layout);
}

int pf__tensor_new(const DLTensor* desc, uint64_t flags, const char* func, pf__tensor_t** out) {
  return pf__tensor_make(desc, flags, func, out);
}

int pf__tensor_arg_error(pf_object_t* tensor, const char* func, const char* arg) {
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %s: expected a Tensor, got %s", func, arg,
               tensor ? pf_type_name(tensor->type_index) : "NULL");
  return -1;
}

/* pf_tensor_empty's body, raising as `func` (pf_tensor_to_device's copies name it); inlined
 * into both so the public call, a hot path, stays one call. */
static inline __attribute__((always_inline)) int pf__empty(const int64_t* shape, int32_t ndim,
                                                           DLDataType dtype, DLDevice device,
                                                           const char* func, pf_object_t** out) {
  if (!out) {
    return PF__NULL_ARG(func, "out");
  }
  *out = NULL;
  int64_t numel = 0;
  size_t nbytes = 0;
  if (pf__validate_layout(ndim, shape, dtype, func, NULL, &numel, &nbytes) != 0)
    return -1;
  if (device.device_id < 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument device: expected a device index >= 0, got %d", func,
                 (int)device.device_id);
    return -1;
  }
  pf_allocator_t a;
  /* Empty tensors get a real (1-byte) buffer too: consumers may reject a NULL data pointer. */
  void* ptr = NULL;
  void* block = NULL; /* what a.free takes: ptr, or for large CPU buffers the block holding it */
  if (device.device_type == kDLCPU &&
      __atomic_load_n(&pf__cpu_allocator_builtin, __ATOMIC_ACQUIRE)) {
    /* packfn's own CPU allocator, called directly: no table lookup, no indirect call */
    a = pf__cpu_allocator;
    ptr = pf__cpu_alloc_tensor(nbytes ? nbytes : 1, &block);
    if (!ptr)
      return -1;
  } else if (pf__allocator_find((int32_t)device.device_type, func, &a) != 0 ||
             pf__allocator_call(&a, device, nbytes ? nbytes : 1, func, &ptr) != 0) {
    return -1;
  } else {
    block = ptr;
  }
  DLTensor desc = {ptr, device, ndim, dtype, (int64_t*)shape, NULL, 0};
  pf__tensor_t* t;
  if (pf__tensor_make(&desc, 0, func, &t) != 0) {
    a.free(a.ctx, device, block);
    return -1;
  }
  t->header.deleter = pf__tensor_deleter_owning;
  t->alloc_ptr = block;
  t->alloc_free = a.free;
  t->alloc_ctx = a.ctx;
  *out = &t->header;
  return 0;
}

/* pf_tensor_empty when the fast path below declines: the general body, out of line. */
__attribute__((noinline)) static int pf__empty_general(const int64_t* shape, int32_t ndim,
                                                       DLDataType dtype, DLDevice device,
                                                       pf_object_t** out) {
  return pf__empty(shape, ndim, dtype, device, "pf_tensor_empty", out);
}

/* pf_tensor_empty's common case, what pf__empty does for it with fewer steps: a CPU tensor with
 * elements, of a common dtype, whose buffer (at most PF__SLAB_MAX bytes) and header both come
 * from this thread's lists of packfn's own allocator. The tensor, or NULL when any of that does
 * not hold (nothing allocated then, nothing raised): the general path decides, and raises what
 * it raises. Written apart from pf__empty so that the common case needs no description built in
 * memory and no registers saved (pf__empty's frame was a sixth of a 1 KiB tensor's creation). */
static inline __attribute__((always_inline)) pf_object_t*
pf__empty_fast(const int64_t* shape, int32_t ndim, DLDataType dtype, DLDevice device) {
  /* dtype and device stored whole, as the integers they arrive in (field by field, gcc took
   * them apart into registers of their own, and saved six around the body) */
  uint32_t dt;
  uint64_t dv;
  memcpy(&dt, &dtype, sizeof dt);
  memcpy(&dv, &device, sizeof dv);
  uint32_t bits = dtype.bits, lanes = dtype.lanes;
  int64_t numel;
  uint64_t nbytes;
  /* CPU with a device index >= 0; a common dtype (pf__dtype_is_common) */
  /* (an allocator installed for the CPU declines first, before the extents are counted) */
  if (device.device_type != kDLCPU || device.device_id < 0 ||
      !__atomic_load_n(&pf__cpu_allocator_builtin, __ATOMIC_ACQUIRE) || dtype.code > PF_DL_FLOAT ||
      lanes == 0 || (bits != 32 && bits != 64 && bits != 16) ||
      (uint32_t)ndim - 1u >= (uint32_t)PF_TENSOR_MAX_NDIM || !shape ||
      !pf__extents_fit(shape, ndim, &numel) ||
      __builtin_mul_overflow((uint64_t)numel, (uint64_t)(bits >> 3) * lanes, &nbytes) ||
      nbytes > PF__SLAB_MAX)
    return NULL;
  /* pf__cpu_alloc_tensor's block (pf__alloc_aligned: a slab block of a class whose blocks are
   * all aligned, or with the slabs off an exact posix_memalign block), then the header */
  void* data = pf__alloc_aligned(nbytes, PF_TENSOR_ALIGNMENT);
  if (!data)
    return NULL; /* out of memory: the general path raises it */
  pf__tensor_t* t = pf__alloc(sizeof(pf__tensor_t) + 2 * sizeof(int64_t) * ndim);
  if (!t) {
    pf__free_nonnull(data);
    return NULL;
  }
  pf__object_init(&t->header, PF_TYPE_TENSOR, pf__tensor_deleter_owning);
  t->dl.data = data;
  memcpy(&t->dl.device, &dv, sizeof dv);
  memcpy(&t->dl.dtype, &dt, sizeof dt);
  t->dl.byte_offset = 0;
  pf__tensor_dims_compact(t, shape, ndim);
  t->alloc_ptr = data;
  t->alloc_free = pf__cpu_allocator.free;
  t->alloc_ctx = NULL;
  return &t->header;
}

int pf_tensor_empty(const int64_t* shape, int32_t ndim, DLDataType dtype, DLDevice device,
                    pf_object_t** out) {
  if (PF_LIKELY(out != NULL)) {
    pf_object_t* t = pf__empty_fast(shape, ndim, dtype, device);
    if (PF_LIKELY(t != NULL)) {
      *out = t;
      return 0;
    }
  }
  return pf__empty_general(shape, ndim, dtype, device, out);
}

int pf__tensor_empty_as(const int64_t* shape, int32_t ndim, DLDataType dtype, DLDevice device,
                        const char* func, pf_object_t** out) {
  return pf__empty(shape, ndim, dtype, device, func, out);
}

int pf_tensor_from_dltensor(const DLTensor* desc, void* ctx, void (*deleter)(void* ctx),
                            pf_object_t** out) {
  static const char func[] = "pf_tensor_from_dltensor";
  if (!out) {
    return PF__NULL_ARG(func, "out");
  }
  *out = NULL;
  pf__tensor_t* t;
  if (pf__dltensor_validate(desc, func, "desc") != 0 || pf__tensor_new(desc, 0, func, &t) != 0)
    return -1;
  t->owner = ctx;
  t->owner_release = deleter;
  *out = &t->header;
  return 0;
}

int pf_tensor_is_read_only(pf_object_t* tensor) {
  return tensor && pf__tensor_read_only(tensor) != 0;
}

/* ---- argument checks for kernels ---- */

/* Raises `kind` with "func: argument index (name): <detail>". */
static int pf__arg_error(const char* kind, const char* func, int32_t index, const char* name,
                         const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static int pf__arg_error(const char* kind, const char* func, int32_t index, const char* name,
                         const char* fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  PF_ERROR_SET(kind, "%s: argument %d%s%s%s: %s", func ? func : "?", (int)index, name ? " (" : "",
               name ? name : "", name ? ")" : "", detail);
  return -1;
}

static const char* pf__dtype_text(DLDataType t, char* buf) {
  pf_dtype_format(t, buf, PF_DTYPE_STR_MAX);
  return buf;
}

/* "float32", "float32 or float64", "float16, float32 or float64" into buf. */
static const char* pf__dtype_list_text(const DLDataType* dtypes, int32_t n, char* buf,
                                       size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < n && used < size; ++i) {
    char one[PF_DTYPE_STR_MAX];
    const char* sep = i == 0 ? "" : (i == n - 1 ? " or " : ", ");
    int w = snprintf(buf + used, size - used, "%s%s", sep, pf__dtype_text(dtypes[i], one));
    used += w > 0 ? (size_t)w : 0;
  }
  return buf;
}

static const char* pf__device_type_text(int32_t type, char* buf, size_t size) {
  const char* name = pf_device_type_name(type);
  if (name)
    snprintf(buf, size, "%s", name);
  else
    snprintf(buf, size, "device(%d)", (int)type);
  return buf;
}

/* pf_dltensor_check's refusal of a description no tensor can have (the quiet validator failed):
 * the structural faults first, in the messages they always had, then the validator's own. */
__attribute__((noinline, cold)) static int pf__dltensor_invalid(const DLTensor* t, const char* func,
                                                                int32_t index, const char* name) {
  if ((uint32_t)t->ndim > PF_TENSOR_MAX_NDIM) /* one unsigned compare bounds ndim both ways */
    return pf__arg_error(PF_ERR_VALUE, func, index, name, "expected ndim in 0..%d, got %d",
                         PF_TENSOR_MAX_NDIM, (int)t->ndim);
  if (t->ndim > 0 && !t->shape)
    return pf__arg_error(PF_ERR_VALUE, func, index, name, "expected a shape, got ndim %d and NULL",
                         (int)t->ndim);
  for (int32_t i = 0; i < t->ndim; ++i)
    if (t->shape[i] < 0)
      return pf__arg_error(PF_ERR_VALUE, func, index, name,
                           "expected extents >= 0, got %lld at axis %d", (long long)t->shape[i],
                           (int)i);
  char arg[160];
  snprintf(arg, sizeof arg, "%d%s%s%s", (int)index, name ? " (" : "", name ? name : "",
           name ? ")" : "");
  if (pf__dltensor_validate(t, func ? func : "?", arg) == 0) /* cannot happen: same checks */
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a valid tensor description",
                 func ? func : "?", arg);
  return -1;
}

/* What pf_dltensor_check found wrong with t against spec, for pf__check_refusal. */
enum {
  PF__CHECK_DTYPE,
  PF__CHECK_DEVICE_TYPE,
  PF__CHECK_DEVICE,
  PF__CHECK_NDIM,
  PF__CHECK_MIN_NDIM,
  PF__CHECK_SHAPE,
  PF__CHECK_CONTIGUOUS
};

/* Raises pf_dltensor_check's refusal `what`; out of line with its buffers, so that the check
 * that passes sets up no frame for them. Returns -1. */
__attribute__((noinline, cold)) static int pf__check_refusal(int what, const DLTensor* t,
                                                             const pf_tensor_spec_t* spec,
                                                             const char* func, int32_t index,
                                                             const char* name) {
  char a[PF_DTYPE_STR_MAX], b[256], c[256];
  switch (what) {
  case PF__CHECK_DTYPE: {
    const char* want = pf__dtype_list_text(spec->dtypes, spec->num_dtypes, b, sizeof b);
    return pf__arg_error(PF_ERR_TYPE, func, index, name, "expected %s %s tensor, got %s",
                         pf__article(want), want, pf__dtype_text(t->dtype, a));
  }
  case PF__CHECK_DEVICE_TYPE:
    pf_device_format(t->device, c, sizeof c);
    return pf__arg_error(PF_ERR_TYPE, func, index, name, "expected a tensor on %s, got %s",
                         pf__device_type_text(spec->device_type, b, sizeof b), c);
  case PF__CHECK_DEVICE:
    pf_device_format(*spec->device, b, sizeof b);
    pf_device_format(t->device, c, sizeof c);
    return pf__arg_error(PF_ERR_TYPE, func, index, name, "expected a tensor on %s, got %s", b, c);
  case PF__CHECK_NDIM:
    return pf__arg_error(PF_ERR_VALUE, func, index, name, "expected %d dimension%s, got %d",
                         (int)spec->ndim, spec->ndim == 1 ? "" : "s", (int)t->ndim);
  case PF__CHECK_MIN_NDIM:
    return pf__arg_error(PF_ERR_VALUE, func, index, name,
                         "expected at least %d dimension%s, got %d", (int)spec->min_ndim,
                         spec->min_ndim == 1 ? "" : "s", (int)t->ndim);
  case PF__CHECK_SHAPE:
    return pf__arg_error(PF_ERR_VALUE, func, index, name, "expected shape %s, got %s",
                         pf__format_spec_dims(spec->shape, spec->ndim, b, sizeof b),
                         pf__format_dims(t->shape, t->ndim, c, sizeof c));
  default:
    return pf__arg_error(PF_ERR_VALUE, func, index, name,
                         "expected a contiguous tensor, got strides %s",
                         pf__format_dims(t->strides, t->ndim, b, sizeof b));
  }
}

int pf_dltensor_check(const DLTensor* t, const pf_tensor_spec_t* spec, const char* func,
                      int32_t index, const char* name) {
  if (!spec) {
    return PF__NULL_ARG("pf_dltensor_check", "spec");
  }
  if (!t)
    return pf__arg_error(PF_ERR_VALUE, func, index, name, "expected a tensor, got NULL");
  /* Whatever the spec, t must be what pf_tensor_from_dltensor accepts: ndim, shape, extents,
   * dtype, a size and strides whose offsets fit, data for its elements, bytes within the address
   * space (a description made by hand with a size that wrapped to 0 slipped past the kernels'
   * own checks, review). Checked quietly here, refused after the spec's dtype and device (a
   * mismatch there is the TypeError it always was), with a message made only then. */
  pf__layout_t layout;
  layout.compact = 0; /* read only when valid (gcc cannot tell) */
  int valid = pf__dltensor_check_as(t, NULL, NULL, 1, &layout, 1) == 0;
  int what;
  if (spec->num_dtypes > 0) {
    int found = 0;
    for (int32_t i = 0; i < spec->num_dtypes && !found; ++i)
      found = pf_dtype_equal(t->dtype, spec->dtypes[i]);
    if (!found) {
      what = PF__CHECK_DTYPE;
      goto refuse;
    }
  }
  if (spec->device_type != 0 && (int32_t)t->device.device_type != spec->device_type) {
    what = PF__CHECK_DEVICE_TYPE;
    goto refuse;
  }
  if (spec->device && !pf_device_equal(t->device, *spec->device)) {
    what = PF__CHECK_DEVICE;
    goto refuse;
  }
  if (PF_UNLIKELY(!valid))
    return pf__dltensor_invalid(t, func, index, name);
  if ((spec->ndim > 0 || spec->shape) && t->ndim != spec->ndim) {
    what = PF__CHECK_NDIM;
    goto refuse;
  }
  if (t->ndim < spec->min_ndim) {
    what = PF__CHECK_MIN_NDIM;
    goto refuse;
  }
  if (spec->shape) {
    for (int32_t i = 0; i < t->ndim; ++i)
      if (spec->shape[i] >= 0 && spec->shape[i] != t->shape[i]) {
        what = PF__CHECK_SHAPE;
        goto refuse;
      }
  }
  /* the validator's strides test answers for most tensors; the full test only when it did not */
  if (spec->contiguous && !layout.compact && !pf_dltensor_is_contiguous(t)) {
    what = PF__CHECK_CONTIGUOUS;
    goto refuse;
  }
  return 0;
refuse:
  return pf__check_refusal(what, t, spec, func, index, name);
}

/* pf_dltensor_check_like's refusals (its inline check in tensor.h found a difference), out of
 * line with their message buffers, so that the check itself is a few compares without a large
 * frame (the kernels compare every output with its input through it). */
__attribute__((cold)) int pf__dltensor_check_like_refused(const DLTensor* t, const DLTensor* ref,
                                                          const char* func, int32_t index,
                                                          const char* name, const char* ref_name) {
  if (!ref) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_dltensor_check_like: argument ref: expected a DLTensor, got NULL");
    return -1;
  }
  if (!t)
    return pf__arg_error(PF_ERR_VALUE, func, index, name, "expected a tensor, got NULL");
  /* descriptions made by hand: their shapes are read below (a NULL one crashed, review) */
  if ((uint32_t)ref->ndim > PF_TENSOR_MAX_NDIM || (ref->ndim > 0 && !ref->shape)) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_dltensor_check_like: argument ref: expected ndim in 0..%d with a shape, got "
                 "ndim %d%s",
                 PF_TENSOR_MAX_NDIM, (int)ref->ndim, ref->shape ? "" : " and a NULL shape");
    return -1;
  }
  if ((uint32_t)t->ndim > PF_TENSOR_MAX_NDIM || (t->ndim > 0 && !t->shape))
    return pf__arg_error(PF_ERR_VALUE, func, index, name,
                         "expected ndim in 0..%d with a shape, got ndim %d%s", PF_TENSOR_MAX_NDIM,
                         (int)t->ndim, t->shape ? "" : " and a NULL shape");
  const char* like = ref_name ? ref_name : "the reference tensor";
  char a[PF_DTYPE_STR_MAX], b[256], c[256];
  if (!pf_dtype_equal(t->dtype, ref->dtype)) {
    const char* want = pf__dtype_text(ref->dtype, a);
    return pf__arg_error(PF_ERR_TYPE, func, index, name, "expected %s %s tensor like %s, got %s",
                         pf__article(want), want, like, pf__dtype_text(t->dtype, c));
  }
  if (!pf_device_equal(t->device, ref->device)) {
    pf_device_format(ref->device, b, sizeof b);
    pf_device_format(t->device, c, sizeof c);
    return pf__arg_error(PF_ERR_TYPE, func, index, name, "expected a tensor on %s like %s, got %s",
                         b, like, c);
  }
  return pf__arg_error(PF_ERR_VALUE, func, index, name, "expected shape %s like %s, got %s",
                       pf__format_dims(ref->shape, ref->ndim, b, sizeof b), like,
                       pf__format_dims(t->shape, t->ndim, c, sizeof c));
}
