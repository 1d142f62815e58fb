/* Copies between tensors, on one device or between the host and a device, through the copy
 * hook of the device type's allocator. */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
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

/* The runtime whose unified address space holds memory of this type: CUDA's for its pinned
 * host memory too (cuda_host), ROCm's for rocm_host. */
static int32_t pf__address_family(int32_t type) {
  return type == PF_DEV_CUDA_HOST   ? PF_DEV_CUDA
         : type == PF_DEV_ROCM_HOST ? PF_DEV_ROCM
                                    : pf__copy_family(type);
}

/* Whether the overlap of dst's and src's memories can be read from their addresses: both are
 * addresses (pf__is_address_device: a device type packfn does not know may hold handles) in
 * one address space, the same device's, or any two of CUDA's (unified addressing, its pinned
 * host memory included: a cuda_host side partly overlapping a cuda one reached
 * cudaMemcpyAsync; review) or ROCm's. Two devices of another type may each have memory of their
 * own, where equal addresses are different bytes (a copy between them was skipped as "the very
 * same bytes"; review). */
static int pf__one_address_space(DLDevice a, DLDevice b) {
  int32_t fa = pf__address_family((int32_t)a.device_type),
          fb = pf__address_family((int32_t)b.device_type);
  return fa == fb && pf__is_address_device(fa) &&
         (a.device_id == b.device_id || fa == PF_DEV_CUDA || fa == PF_DEV_ROCM);
}

/* The hooks of the copy between dst and src, not both on the host, into *hooks: 0, or -1 with
 * NotImplementedError (memories of two runtimes, no copy hook) or KeyError (no allocator). */
static int pf__copy_hooks(const DLTensor* dst, const DLTensor* src, const char* func,
                          pf_allocator_t* hooks) {
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
  if (pf__allocator_find((int32_t)side.device_type, func, hooks) != 0)
    return -1;
  if (!hooks->copy) {
    char label[48];
    PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED, "%s: the allocator of device type %s has no copy hook",
                 func, pf__device_type_label((int32_t)side.device_type, label, sizeof label));
    return -1;
  }
  return 0;
}

/* Copies the elements of host tensor src into host tensor dst (same shape, whole-byte elements
 * of `esize` bytes, any strides, not overlapping): the last axis as runs when both step by one
 * element there, else element by element. */
static void pf__host_copy_strided(DLTensor* dst, const DLTensor* src, size_t esize) {
  int32_t nd = src->ndim;
  int64_t ds[PF_TENSOR_MAX_NDIM], ss[PF_TENSOR_MAX_NDIM], idx[PF_TENSOR_MAX_NDIM];
  int64_t compact = 1;
  for (int32_t i = nd - 1; i >= 0; --i) {
    /* an axis of one element is never stepped along: its stride, however large, is not used */
    ds[i] = src->shape[i] == 1 ? 0 : dst->strides ? dst->strides[i] : compact;
    ss[i] = src->shape[i] == 1 ? 0 : src->strides ? src->strides[i] : compact;
    compact *= src->shape[i];
    idx[i] = 0;
  }
  char* to = pf_dltensor_data(dst);
  const char* from = pf_dltensor_data(src);
  if (nd == 0) {
    memcpy(to, from, esize);
    return;
  }
  int64_t n = src->shape[nd - 1];
  int64_t dstep = ds[nd - 1] * (int64_t)esize, sstep = ss[nd - 1] * (int64_t)esize;
  for (;;) {
    if (ds[nd - 1] == 1 && ss[nd - 1] == 1) {
      memcpy(to, from, (size_t)n * esize);
    } else {
      char* t = to;
      const char* f = from;
      switch (esize) { /* fixed sizes: a move each, not a call */
      case 2:
        for (int64_t k = 0; k < n; ++k, t += dstep, f += sstep)
          memcpy(t, f, 2);
        break;
      case 4:
        for (int64_t k = 0; k < n; ++k, t += dstep, f += sstep)
          memcpy(t, f, 4);
        break;
      case 8:
        for (int64_t k = 0; k < n; ++k, t += dstep, f += sstep)
          memcpy(t, f, 8);
        break;
      default:
        for (int64_t k = 0; k < n; ++k, t += dstep, f += sstep)
          memcpy(t, f, esize);
      }
    }
    /* next index of the outer axes, odometer order */
    int32_t i = nd - 2;
    for (; i >= 0; --i) {
      to += ds[i] * (int64_t)esize;
      from += ss[i] * (int64_t)esize;
      if (++idx[i] < src->shape[i])
        break;
      to -= ds[i] * (int64_t)esize * src->shape[i];
      from -= ss[i] * (int64_t)esize * src->shape[i];
      idx[i] = 0;
    }
    if (i < 0)
      return;
  }
}

/* memmove of the nbytes of packed elements from `from` to `to`, except that when the elements
 * end `tail` (1..7) bits into the last byte, the rest of dst's last byte keeps its value: it is
 * not dst's (a prefix view of an int4 tensor ends there, the next element above; review: the
 * whole byte was copied). DLPack packs sub-byte elements little bit-endian: element i occupies
 * the bits from i * bits up, so dst's own bits are the low `tail` ones. */
static void pf__host_move(void* to, const void* from, size_t nbytes, unsigned tail) {
  unsigned char* last = (unsigned char*)to + nbytes - 1;
  /* read before the move: the two sides may overlap */
  unsigned char keep = tail ? (unsigned char)(*last & (0xffu << tail)) : 0;
  memmove(to, from, nbytes);
  if (tail)
    *last = (unsigned char)((*last & ((1u << tail) - 1u)) | keep);
}

/* The bytes [lo, hi) a validated description reaches; -1 when twice that span, in bytes, does
 * not fit in int64 (no memory is that large; pf__host_copy_strided's byte steps stay within it
 * otherwise). The element count hi - lo + 1 may itself not fit: hi - lo, the strides' span,
 * can be INT64_MAX (review: undefined behaviour). */
static int pf__byte_range(const DLTensor* t, const pf__layout_t* l, size_t esize, uintptr_t* lo,
                          uintptr_t* hi) {
  int64_t count, span;
  if (__builtin_add_overflow(l->hi - l->lo, 1, &count) ||
      __builtin_mul_overflow(count, (int64_t)esize * 2, &span))
    return -1;
  uintptr_t first = (uintptr_t)pf_dltensor_data(t);
  *lo = first + (uintptr_t)l->lo * esize; /* unsigned: wraps for negative offsets */
  *hi = first + (uintptr_t)(l->hi + 1) * esize;
  return 0;
}

static int pf__offset_cmp(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

/* Whether two of the numel elements of strided host tensor t (no stride 0 along an axis of more
 * than one element; its element offsets span `span`, with twice that in bytes within int64, as
 * pf__byte_range checked) share one place: 0 no, 1 yes, -1 with MemoryError raised as `func`.
 * Taken by |stride| (a reversed axis shares what it would forward), axes that each step past
 * all the smaller ones reach share none (any permutation, reversal or slice of a compact
 * layout); more elements than places share some; any other layout (elements interleaved) has
 * its offsets listed and sorted. A stride 0 was refused before, with its own message (review:
 * strides (1, 1) on shape (2, 2) were accepted, and one element written over another). */
static int pf__elements_share(const DLTensor* t, int64_t numel, int64_t span, const char* func) {
  int64_t s[PF_TENSOR_MAX_NDIM], n[PF_TENSOR_MAX_NDIM];
  int32_t k = 0;
  for (int32_t i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 2)
      continue;
    int64_t a = t->strides[i] < 0 ? -t->strides[i] : t->strides[i];
    int32_t j = k++;
    for (; j > 0 && s[j - 1] > a; --j) {
      s[j] = s[j - 1];
      n[j] = n[j - 1];
    }
    s[j] = a;
    n[j] = t->shape[i];
  }
  int64_t reach = 0; /* at most span: no overflow */
  int32_t i = 0;
  for (; i < k && s[i] > reach; ++i)
    reach += s[i] * (n[i] - 1);
  if (i == k)
    return 0;
  if (numel - 1 > span)
    return 1;
  size_t size = SIZE_MAX;
  int64_t* offs = NULL;
  if (!__builtin_mul_overflow((size_t)numel, sizeof *offs, &size))
    offs = pf__alloc(size);
  else
    size = SIZE_MAX;
  if (!offs)
    return pf__raise_oom(func, size);
  int64_t idx[PF_TENSOR_MAX_NDIM] = {0}, off = 0; /* offsets within 2 * span: no overflow */
  for (int64_t e = 0; e < numel; ++e) {
    offs[e] = off;
    for (int32_t a = 0; a < k; ++a) {
      off += s[a];
      if (++idx[a] < n[a])
        break;
      off -= s[a] * n[a];
      idx[a] = 0;
    }
  }
  qsort(offs, (size_t)numel, sizeof *offs, pf__offset_cmp);
  int shared = 0;
  for (int64_t e = 1; e < numel && !shared; ++e)
    shared = offs[e] == offs[e - 1];
  pf__free(offs);
  return shared;
}

/* pf_dltensor_copy, raising as `func`. */
static int pf__copy(DLTensor* dst, const DLTensor* src, const char* func) {
  if (!dst || !src) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected a DLTensor, got NULL", func,
                 dst ? "src" : "dst");
    return -1;
  }
  pf__layout_t dl, sl;
  if (pf__dltensor_check(dst, func, "dst", 1, &dl) != 0 ||
      pf__dltensor_check(src, func, "src", 1, &sl) != 0)
    return -1;
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
  int host = pf__is_host(dst->device) && pf__is_host(src->device);
  pf_allocator_t hooks;
  if (sl.numel == 0) /* nothing to copy, but the devices are checked as for one element (review) */
    return host ? 0 : pf__copy_hooks(dst, src, func, &hooks);
  int dst_compact = pf_dltensor_is_contiguous(dst);
  if (!dst_compact || !pf_dltensor_is_contiguous(src)) {
    const DLTensor* bad = dst_compact ? src : dst;
    uint64_t ebits = (uint64_t)src->dtype.bits * src->dtype.lanes;
    if (!host) {
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument %s: expected a contiguous tensor (copies to or from a device "
                   "need both), got strides %s",
                   func, bad == dst ? "dst" : "src",
                   pf__format_dims(bad->strides, bad->ndim, b, sizeof b));
      return -1;
    }
    /* a broadcast destination (stride 0 where the extent exceeds 1) holds one element where
     * several would be copied; the last one won, silently (review). PyTorch refuses it too. */
    for (int32_t i = 0; bad == dst && i < dst->ndim; ++i)
      if (dst->strides[i] == 0 && dst->shape[i] > 1) {
        PF_ERROR_SET(PF_ERR_VALUE,
                     "%s: argument dst: expected a stride other than 0 along axis %d (%lld "
                     "elements would share one), got strides %s",
                     func, (int)i, (long long)dst->shape[i],
                     pf__format_dims(dst->strides, dst->ndim, b, sizeof b));
        return -1;
      }
    if (ebits % 8 != 0) {
      pf_dtype_format(src->dtype, a, sizeof a);
      PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED,
                   "%s: argument %s: strided copies of %s (elements smaller than a byte) are not "
                   "supported, got strides %s",
                   func, bad == dst ? "dst" : "src", a,
                   pf__format_dims(bad->strides, bad->ndim, b, sizeof b));
      return -1;
    }
    size_t esize = (size_t)(ebits / 8);
    uintptr_t dlo, dhi, slo, shi;
    if (pf__byte_range(dst, &dl, esize, &dlo, &dhi) != 0 ||
        pf__byte_range(src, &sl, esize, &slo, &shi) != 0) {
      PF_ERROR_SET(PF_ERR_VALUE, "%s: the strides of %s reach more bytes than memory has", func,
                   pf__byte_range(dst, &dl, esize, &dlo, &dhi) != 0 ? "dst" : "src");
      return -1;
    }
    if (bad == dst) {
      int shared = pf__elements_share(dst, dl.numel, dl.hi - dl.lo, func);
      if (shared < 0)
        return -1;
      if (shared) {
        char c[128];
        PF_ERROR_SET(PF_ERR_VALUE,
                     "%s: argument dst: expected strides under which no two elements share a "
                     "place, got strides %s for shape %s",
                     func, pf__format_dims(dst->strides, dst->ndim, b, sizeof b),
                     pf__format_dims(dst->shape, dst->ndim, c, sizeof c));
        return -1;
      }
    }
    if (dlo < shi && slo < dhi) {
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: argument dst: overlaps src; a strided copy needs separate memory", func);
      return -1;
    }
    pf__host_copy_strided(dst, src, esize);
    return 0;
  }
  size_t nbytes = pf_dltensor_nbytes(src);
  void* to = pf_dltensor_data(dst);
  const void* from = pf_dltensor_data(src);
  if (host) {
    pf__host_move(to, from, nbytes,
                  (unsigned)((uint64_t)sl.numel * src->dtype.bits * src->dtype.lanes % 8));
    return 0;
  }
  /* Device copies (cudaMemcpyAsync and the like) are undefined for overlapping memory, where
   * memmove is not: the same bytes are left alone, a partial overlap refused, where addresses
   * tell (pf__one_address_space); the hook of another device type gets any two buffers. */
  uintptr_t t0 = (uintptr_t)to, f0 = (uintptr_t)from;
  if (t0 < f0 + nbytes && f0 < t0 + nbytes && pf__one_address_space(dst->device, src->device)) {
    if (t0 == f0)
      return 0;
    PF_ERROR_SET(PF_ERR_VALUE,
                 "%s: argument dst: overlaps src; a copy on a device needs separate memory", func);
    return -1;
  }
  if (pf__copy_hooks(dst, src, func, &hooks) != 0)
    return -1;
  pf_object_t* pending = pf__hook_begin();
  if (hooks.copy(hooks.ctx, to, dst->device, from, src->device, nbytes) != 0) {
    if (pf__hook_failed(pending))
      PF_ERROR_SET(PF_ERR_RUNTIME, "%s: the copy hook failed without an error", func);
    pf__hook_end(pending);
    return -1;
  }
  pf__hook_end(pending);
  return 0;
}

int pf_dltensor_copy(DLTensor* dst, const DLTensor* src) {
  return pf__copy(dst, src, "pf_dltensor_copy");
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
  /* another runtime's tensor is checked as a description first, so the allocation below sees
   * a valid layout and raises only on `device` */
  if (!pf__tensor_is_ours(tensor) && pf__dltensor_validate(src, func, "tensor") != 0)
    return -1;
  pf_object_t* copy;
  if (pf__tensor_empty_as(src->shape, src->ndim, src->dtype, device, func, &copy) != 0)
    return -1;
  DLTensor* to = pf_tensor_dltensor(copy);
  pf_object_t* staged = NULL; /* a strided host tensor bound for a device: gathered here first */
  int rc;
  if (!pf_dltensor_is_contiguous(src) && pf__is_host(src->device) && !pf__is_host(device)) {
    DLDevice cpu = {kDLCPU, 0};
    rc = pf__tensor_empty_as(src->shape, src->ndim, src->dtype, cpu, func, &staged);
    if (rc == 0)
      rc = pf__copy(pf_tensor_dltensor(staged), src, func);
    if (rc == 0)
      rc = pf__copy(to, pf_tensor_dltensor(staged), func);
    pf_object_release(staged);
  } else {
    rc = pf__copy(to, src, func);
  }
  if (rc != 0) {
    pf_object_release(copy);
    return -1;
  }
  *out = copy;
  return 0;
}
