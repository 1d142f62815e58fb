/* libFuzzer harness: DLPack import, legacy (pf_tensor_from_dlpack) and versioned
 * (pf_tensor_from_dlpack_versioned), of managed tensors whose metadata comes from the fuzz
 * input: ndim, shape, strides (or NULL), dtype, device, byte_offset, data (a real buffer or
 * NULL), version and flags. Properties: never crashes, never reports UB; a refusal raises an
 * error and leaves the managed tensor untouched (its deleter not called); an accepted one is
 * a consistent tensor whose views, contiguity test and re-export work, and its deleter runs
 * exactly once when the last reference goes. Data is never read: an import does not prove
 * the producer's memory bounds. */
#include "fuzz_util.h"
#include "packfn/packfn.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define MAX_DIMS 70 /* past PF_TENSOR_MAX_NDIM, so too many dimensions are tried too */

static int legacy_deleted;
static int versioned_deleted;
static void legacy_deleter(DLManagedTensor* self) {
  (void)self;
  ++legacy_deleted;
}
static void versioned_deleter(pf_dl_managed_tensor_versioned_t* self) {
  (void)self;
  ++versioned_deleted;
}

/* The lowest and highest element offsets `ndim` axes reach from the first element, in 128
 * bits (no overflow here); *empty when an extent is 0. Written apart from packfn's checks, to
 * hold them to it. */
static void reach128(int32_t ndim, const int64_t* shape, const int64_t* strides, __int128* lo,
                     __int128* hi, int* empty) {
  __int128 l = 0, h = 0, step = 1;
  *empty = 0;
  for (int32_t i = ndim; i-- > 0;) {
    if (shape[i] == 0)
      *empty = 1;
    __int128 s = strides ? (__int128)strides[i] : step;
    __int128 far = s * (shape[i] > 0 ? shape[i] - 1 : 0);
    if (far < 0)
      l += far;
    else
      h += far;
    step *= shape[i] > 0 ? shape[i] : 1;
  }
  *lo = l;
  *hi = h;
}

/* 1 when packfn accepts `w` as a tensor's description (what every view it makes must be:
 * a view of 2^58 float64 elements, whose size in bits wraps, was once made; review). */
static int valid_description(const DLTensor* w) {
  pf_tensor_spec_t any = {0};
  if (w && pf_dltensor_check(w, &any, "fuzz", 0, "view") == 0)
    return 1;
  pf_error_clear();
  return 0;
}

/* pf_tensor_view with a layout from the input: refused with an error raised, or accepted with
 * every element it reaches inside the span `t` reaches, and the layout asked for. */
static void exercise_view(pf_object_t* t, const DLTensor* d, fuzz_input_t* in) {
  int64_t shape[6], strides[6];
  uint8_t nd = fuzz_u8(in);
  int32_t ndim = nd < 250 ? (int32_t)(nd % 5) : (nd == 255 ? -1 : 65);
  for (int32_t i = 0; i < 6; ++i) {
    uint8_t b = fuzz_u8(in);
    shape[i] = b < 200 ? (int64_t)(b % 6) : fuzz_i64(in);
    b = fuzz_u8(in);
    strides[i] = b < 200 ? (int64_t)(b % 9) - 4 : fuzz_i64(in);
  }
  uint8_t how = fuzz_u8(in);
  const int64_t* st = (how & 1) ? strides : NULL;
  int64_t offset = (how & 2) ? fuzz_i64(in) : (int64_t)(fuzz_u8(in) % 16) - 4;
  pf_object_t* v = (pf_object_t*)&v;
  if (pf_tensor_view(t, ndim, (how & 4) && ndim > 0 ? NULL : shape, st, offset, &v) != 0) {
    FUZZ_CHECK(v == NULL && pf_error_peek() != NULL);
    pf_error_clear();
    return;
  }
  FUZZ_CHECK(pf_error_peek() == NULL);
  DLTensor* w = pf_tensor_dltensor(v);
  FUZZ_CHECK(valid_description(w));
  FUZZ_CHECK(w != NULL && w->ndim == ndim && w->dtype.code == d->dtype.code &&
             w->dtype.bits == d->dtype.bits && w->dtype.lanes == d->dtype.lanes);
  for (int32_t i = 0; i < ndim; ++i)
    FUZZ_CHECK(w->shape[i] == shape[i] && shape[i] >= 0 && (!st || w->strides[i] == st[i]));
  __int128 vlo, vhi, blo, bhi;
  int vempty, bempty;
  reach128(ndim, shape, st, &vlo, &vhi, &vempty);
  reach128(d->ndim, d->shape, d->strides, &blo, &bhi, &bempty);
  if (!vempty)
    FUZZ_CHECK(!bempty && offset + vlo >= blo && offset + vhi <= bhi);
  pf_object_release(v);
}

/* A view `v` that a selection or slice of `t` (description d) along `axis` made: the axes it
 * kept are d's, and every element it reaches lies inside the span d reaches (its offset read
 * from where its first element lies, relative to d's). The short way of these functions skips
 * the reach checks a view of arbitrary layout takes; this holds it to them. */
static void check_within(const DLTensor* d, pf_object_t* v, int32_t axis, int selected) {
  DLTensor* w = pf_tensor_dltensor(v);
  FUZZ_CHECK(valid_description(w));
  int32_t ax = axis < 0 ? axis + d->ndim : axis;
  FUZZ_CHECK(w != NULL && w->ndim == d->ndim - selected && w->strides != NULL);
  for (int32_t i = 0, k = 0; i < d->ndim; ++i) {
    if (i == ax) {
      k += !selected;
      continue;
    }
    FUZZ_CHECK(w->shape[k] == d->shape[i]);
    ++k;
  }
  __int128 vlo, vhi, blo, bhi;
  int vempty, bempty;
  reach128(w->ndim, w->shape, w->strides, &vlo, &vhi, &vempty);
  reach128(d->ndim, d->shape, d->strides, &blo, &bhi, &bempty);
  size_t bits = (size_t)d->dtype.bits * d->dtype.lanes;
  if (vempty || bits % 8 != 0 || bits == 0)
    return;
  __int128 delta = ((__int128)(uintptr_t)w->data + (__int128)w->byte_offset) -
                   ((__int128)(uintptr_t)d->data + (__int128)d->byte_offset);
  FUZZ_CHECK(delta % (__int128)(bits / 8) == 0);
  __int128 offset = delta / (__int128)(bits / 8);
  FUZZ_CHECK(!bempty && offset + vlo >= blo && offset + vhi <= bhi);
}

/* An accepted import wraps the producer's description unchanged (no copy): data, byte_offset,
 * device, dtype, shape, and strides or, for NULL strides, the compact row-major ones. */
static void check_import(const DLTensor* d, const DLTensor* src) {
  FUZZ_CHECK(d->data == src->data && d->byte_offset == src->byte_offset &&
             pf_device_equal(d->device, src->device) && d->ndim == src->ndim &&
             d->dtype.code == src->dtype.code && d->dtype.bits == src->dtype.bits &&
             d->dtype.lanes == src->dtype.lanes && d->strides != NULL);
  int64_t step = 1;
  for (int32_t i = d->ndim; i-- > 0;) {
    FUZZ_CHECK(d->shape[i] == src->shape[i]);
    FUZZ_CHECK(d->strides[i] == (src->strides ? src->strides[i] : step));
    step *= src->shape[i] > 0 ? src->shape[i] : 1;
  }
}

/* Exported and imported again, unchanged, in either form: the very same tensor comes back. */
static void check_round_trips(pf_object_t* t) {
  DLManagedTensor* back;
  pf_object_t* again = NULL;
  if (pf_tensor_to_dlpack(t, &back) == 0) {
    FUZZ_CHECK(pf_tensor_from_dlpack(back, &again) == 0 && again == t);
    pf_object_release(again);
  } else {
    pf_error_clear();
  }
  pf_dl_managed_tensor_versioned_t* vback;
  if (pf_tensor_to_dlpack_versioned(t, &vback) == 0) {
    FUZZ_CHECK((vback->flags & PF_DLPACK_FLAG_READ_ONLY) ==
               (pf_tensor_is_read_only(t) == 1 ? PF_DLPACK_FLAG_READ_ONLY : 0));
    FUZZ_CHECK(pf_tensor_from_dlpack_versioned(vback, &again) == 0 && again == t);
    pf_object_release(again);
  } else {
    pf_error_clear();
  }
}

/* Views and exports of an accepted tensor: each may fail, but only with an error raised. */
static void exercise(pf_object_t* t, fuzz_input_t* in) {
  DLTensor* d = pf_tensor_dltensor(t);
  FUZZ_CHECK(d != NULL && d->ndim >= 0 && d->ndim <= PF_TENSOR_MAX_NDIM);
  __int128 numel = 1; /* saturated at INT64_MAX: extents beside a 0 may multiply past it */
  for (int32_t i = 0; i < d->ndim; ++i) {
    FUZZ_CHECK(d->shape[i] >= 0);
    numel *= d->shape[i];
    if (numel > INT64_MAX)
      numel = INT64_MAX;
  }
  (void)pf_dltensor_is_contiguous(d);
  pf_object_t* v = NULL;
  if (d->ndim > 0) {
    int32_t axis = (int32_t)(fuzz_u8(in) % (d->ndim + 1)) - 1;
    if (pf_tensor_select(t, axis, fuzz_i64(in), &v) == 0) {
      check_within(d, v, axis, 1);
      pf_object_release(v);
    } else {
      pf_error_clear();
    }
    if (pf_tensor_slice(t, axis, fuzz_i64(in), fuzz_i64(in), fuzz_i64(in), &v) == 0) {
      check_within(d, v, axis, 0);
      pf_object_release(v);
    } else {
      pf_error_clear();
    }
  }
  exercise_view(t, d, in);
  int64_t flat = -1;
  if (pf_tensor_reshape(t, 1, &flat, &v) == 0) {
    DLTensor* w = pf_tensor_dltensor(v);
    FUZZ_CHECK(w != NULL && w->ndim == 1 && w->shape[0] == numel);
    pf_object_release(v);
  } else {
    pf_error_clear();
  }
  DLManagedTensor* back;
  if (pf_tensor_to_dlpack(t, &back) == 0) {
    check_import(&back->dl_tensor, d);
    back->deleter(back);
  } else {
    pf_error_clear();
  }
  check_round_trips(t);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static _Alignas(64) uint8_t buffer[4096];
  static int64_t shape[MAX_DIMS];
  static int64_t strides[MAX_DIMS];
  fuzz_input_t in = {data, size};
  uint8_t mode = fuzz_u8(&in);
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  uint8_t nd = fuzz_u8(&in);
  desc.ndim = nd < 200 ? (int32_t)(nd % 8) : nd == 255 ? -1 : (int32_t)(nd - 200 + 20);
  if (desc.ndim > MAX_DIMS)
    desc.ndim = MAX_DIMS;
  for (int32_t i = 0; i < MAX_DIMS; ++i)
    shape[i] = strides[i] = 0;
  for (int32_t i = 0; i < desc.ndim; ++i) {
    uint8_t b = fuzz_u8(&in);
    shape[i] = b < 200 ? (int64_t)(b % 8) : fuzz_i64(&in);
  }
  uint8_t flags = fuzz_u8(&in);
  desc.shape = (flags & 1) ? NULL : shape;
  if (flags & 2) {
    for (int32_t i = 0; i < desc.ndim; ++i) {
      uint8_t b = fuzz_u8(&in);
      strides[i] = b < 200 ? (int64_t)(b % 16) - 4 : fuzz_i64(&in);
    }
    desc.strides = strides;
  }
  desc.data = (flags & 4) ? NULL : buffer;
  desc.byte_offset = (flags & 8) ? fuzz_u64(&in, 8) : fuzz_u8(&in);
  static const uint8_t codes[] = {kDLInt, kDLUInt, kDLFloat, kDLBfloat, 5, 6, 7, 3};
  static const uint8_t bits[] = {8, 16, 32, 64, 1, 4, 6, 128};
  uint8_t dt = fuzz_u8(&in);
  desc.dtype.code = (flags & 16) ? fuzz_u8(&in) : codes[dt % 8];
  desc.dtype.bits = (flags & 16) ? fuzz_u8(&in) : bits[(dt >> 3) % 8];
  desc.dtype.lanes = (flags & 16) ? (uint16_t)fuzz_u64(&in, 2) : (uint16_t)(1 + (dt >> 6));
  desc.device.device_type = (flags & 32) ? (DLDeviceType)(int32_t)fuzz_u64(&in, 4) : kDLCPU;
  desc.device.device_id = (flags & 32) ? (int32_t)fuzz_u64(&in, 4) : 0;

  pf_object_t* t = NULL;
  int rc;
  if (mode & 1) {
    pf_dl_managed_tensor_versioned_t m;
    memset(&m, 0, sizeof m);
    m.version.major = (mode & 2) ? fuzz_u8(&in) : PF_DLPACK_VERSIONED_MAJOR;
    m.version.minor = fuzz_u8(&in);
    m.flags = (mode & 4) ? fuzz_u64(&in, 8) : (fuzz_u8(&in) & 7);
    m.deleter = (mode & 8) ? NULL : versioned_deleter;
    m.dl_tensor = desc;
    versioned_deleted = 0;
    rc = pf_tensor_from_dlpack_versioned(&m, &t);
    FUZZ_CHECK(versioned_deleted == 0);
    if (rc == 0) {
      check_import(pf_tensor_dltensor(t), &desc);
      FUZZ_CHECK(pf_tensor_is_read_only(t) == ((m.flags & PF_DLPACK_FLAG_READ_ONLY) ? 1 : 0));
      exercise(t, &in);
      pf_object_release(t);
      FUZZ_CHECK(versioned_deleted == (m.deleter ? 1 : 0));
    }
  } else {
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    m.deleter = (mode & 8) ? NULL : legacy_deleter;
    m.dl_tensor = desc;
    legacy_deleted = 0;
    rc = pf_tensor_from_dlpack(&m, &t);
    FUZZ_CHECK(legacy_deleted == 0);
    if (rc == 0) {
      check_import(pf_tensor_dltensor(t), &desc);
      FUZZ_CHECK(pf_tensor_is_read_only(t) == 0);
      exercise(t, &in);
      pf_object_release(t);
      FUZZ_CHECK(legacy_deleted == (m.deleter ? 1 : 0));
    }
  }
  if (rc != 0) {
    FUZZ_CHECK(t == NULL);
    pf_object_t* err = pf_error_take();
    FUZZ_CHECK(err != NULL);
    pf_object_release(err);
  }
  FUZZ_CHECK(pf_error_peek() == NULL);
  return 0;
}
