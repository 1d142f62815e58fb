/* Tests of DLPack exchange: imports of legacy and versioned managed tensors (deleters called
 * exactly once, failures leave the source alone), exports, round trips and read-only flags. */
#include <stdint.h>

#include "pf_test.h"

/* A producer's managed tensor over a small static buffer, counting deleter calls. */
static double g_data[6] = {0, 1, 2, 3, 4, 5};
static int64_t g_shape[2] = {2, 3};
static int g_deleted;

static void legacy_deleter(DLManagedTensor* self) {
  g_deleted++;
  free(self);
}

static DLManagedTensor* make_legacy(void) {
  DLManagedTensor* m = calloc(1, sizeof *m);
  DLTensor dl = {g_data, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, g_shape, NULL, 0};
  m->dl_tensor = dl;
  m->deleter = legacy_deleter;
  return m;
}

static void versioned_deleter(pf_dl_managed_tensor_versioned_t* self) {
  g_deleted++;
  free(self);
}

static pf_dl_managed_tensor_versioned_t* make_versioned(uint64_t flags) {
  pf_dl_managed_tensor_versioned_t* m = calloc(1, sizeof *m);
  m->version.major = 1;
  m->version.minor = 0;
  m->flags = flags;
  DLTensor dl = {g_data, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, g_shape, NULL, 0};
  m->dl_tensor = dl;
  m->deleter = versioned_deleter;
  return m;
}

START_TEST(test_import_legacy) {
  g_deleted = 0;
  DLManagedTensor* m = make_legacy();
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_from_dlpack(m, &t), 0);
  DLTensor* dl = pf_tensor_dltensor(t);
  ck_assert_ptr_eq(dl->data, g_data);
  ck_assert_ptr_eq(dl->shape, g_shape); /* the producer's, valid until its deleter runs */
  ck_assert_int_eq(dl->strides[0], 3);  /* filled in */
  ck_assert_int_eq(dl->strides[1], 1);
  ck_assert(!pf_tensor_is_read_only(t));
  pf_object_t* v;
  ck_assert_int_eq(pf_tensor_select(t, 0, 1, &v), 0);
  pf_object_release(t);
  ck_assert_int_eq(g_deleted, 0);
  ck_assert(((double*)pf_dltensor_data(pf_tensor_dltensor(v)))[2] == 5.0);
  pf_object_release(v);
  ck_assert_int_eq(g_deleted, 1);

  /* a NULL deleter is allowed: the producer keeps the memory */
  DLManagedTensor plain;
  memset(&plain, 0, sizeof plain);
  DLTensor dl0 = {g_data, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, g_shape, NULL, 0};
  plain.dl_tensor = dl0;
  ck_assert_int_eq(pf_tensor_from_dlpack(&plain, &t), 0);
  pf_object_release(t);
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_import_errors_leave_source) {
  g_deleted = 0;
  DLManagedTensor* m = make_legacy();
  int64_t bad_shape[2] = {2, -1};
  m->dl_tensor.shape = bad_shape;
  pf_object_t* t = (pf_object_t*)&t;
  ck_assert_int_eq(pf_tensor_from_dlpack(m, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_from_dlpack: argument src: expected extents >= 0, got -1 at axis 1");
  ck_assert_int_eq(g_deleted, 0); /* still the caller's */
  m->dl_tensor.shape = g_shape;
  m->dl_tensor.dtype = pf_dtype(PF_DL_FLOAT, 0, 1);
  ck_assert_int_eq(pf_tensor_from_dlpack(m, &t), -1);
  PF_ASSERT_RAISED("ValueError", "expected a valid data type");
  m->deleter(m);
  ck_assert_int_eq(g_deleted, 1);
  ck_assert_int_eq(pf_tensor_from_dlpack(NULL, &t), -1);
  PF_ASSERT_RAISED("ValueError", "argument src: expected a pointer, got NULL");
  m = make_legacy();
  ck_assert_int_eq(pf_tensor_from_dlpack(m, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  m->deleter(m);

  pf_dl_managed_tensor_versioned_t* mv = make_versioned(0);
  mv->version.major = 2;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &t), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_from_dlpack_versioned: argument src: expected DLPack major version "
                   "1, got 2.0");
  mv->version.major = 1;
  mv->dl_tensor.ndim = -1;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &t), -1);
  PF_ASSERT_RAISED("ValueError", "expected ndim in 0..64, got -1");
  mv->dl_tensor.ndim = 1;
  mv->dl_tensor.dtype = pf_dtype(PF_DL_FLOAT4_E2M1FN, 4, 1);
  mv->flags = PF_DLPACK_FLAG_SUBBYTE_TYPE_PADDED;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &t), -1);
  PF_ASSERT_RAISED("NotImplementedError", "padded to bytes are not supported, got float4_e2m1fn");
  /* lanes of sub-byte elements padded are no packed vector either (accepted and read packed,
   * 4 bytes counted of the producer's 8, before review) */
  mv->dl_tensor.dtype = pf_dtype(kDLInt, 4, 2);
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &t), -1);
  PF_ASSERT_RAISED("NotImplementedError", "padded to bytes are not supported, got int4x2");
  mv->dl_tensor.dtype = pf_dtype(PF_DL_FLOAT6_E2M3FN, 6, 3);
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &t), -1);
  PF_ASSERT_RAISED("NotImplementedError", "padded to bytes are not supported, got float6_e2m3fnx3");
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(NULL, &t), -1);
  PF_ASSERT_RAISED("ValueError", "argument src");
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  ck_assert_int_eq(g_deleted, 2);
  mv->deleter(mv);
  ck_assert_int_eq(g_deleted, 3);
}
END_TEST

/* byte_offset is validated with the rest of the description: an offset above INT64_MAX, or one
 * that moves the elements' bytes past the end of the address space or before its start, is
 * refused by every import and by pf_dltensor_copy, and the source stays the caller's (found by
 * review: 2^64 - 8 wrapped data + byte_offset to 8 bytes before data, and a copy read there). */
START_TEST(test_import_byte_offset) {
  static const uint64_t bad[] = {UINT64_MAX - 7, (uint64_t)1 << 63, ((uint64_t)1 << 63) + 4,
                                 (uint64_t)INT64_MAX};
  pf_object_t* t = (pf_object_t*)&t;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    g_deleted = 0;
    pf_dl_managed_tensor_versioned_t* mv = make_versioned(0);
    mv->dl_tensor.byte_offset = bad[i];
    ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &t), -1);
    ck_assert_ptr_null(t);
    PF_ASSERT_RAISED("ValueError", "argument src: byte_offset");
    DLManagedTensor* m = make_legacy();
    m->dl_tensor.byte_offset = bad[i];
    ck_assert_int_eq(pf_tensor_from_dlpack(m, &t), -1);
    PF_ASSERT_RAISED("ValueError", "byte_offset");
    ck_assert_int_eq(pf_tensor_from_dltensor(&m->dl_tensor, NULL, NULL, &t), -1);
    PF_ASSERT_RAISED("ValueError", "byte_offset");
    double out[6];
    DLTensor dst = {out, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, g_shape, NULL, 0};
    ck_assert_int_eq(pf_dltensor_copy(&dst, &m->dl_tensor), -1);
    PF_ASSERT_RAISED("ValueError", "argument src: byte_offset");
    ck_assert_int_eq(g_deleted, 0); /* refused: the sources are still the caller's */
    mv->deleter(mv);
    m->deleter(m);
  }
  /* data near the top of the address space: the last element's bytes would wrap */
  DLTensor top = {(void*)(UINTPTR_MAX - 15), PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, g_shape, NULL, 0};
  ck_assert_int_eq(pf_tensor_from_dltensor(&top, NULL, NULL, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_from_dltensor: argument desc: expected the bytes of "
                                 "its elements to lie within the address space from data ");
  /* with byte_offset 0 the message blames the layout, not the offset */
  ck_assert_int_eq(pf_tensor_from_dltensor(&top, NULL, NULL, &t), -1);
  PF_ASSERT_RAISED("ValueError", ", got shape (2, 3) and strides NULL");
  /* element reaches at the ends of int64, whose bytes the check must compute without overflow
   * (found by fuzz_dlpack under UBSan, and by review): refused when they reach below address 0
   * or have no int64 end; 2^63 - 2 one-bit elements (2^60 bytes) past data are addresses */
  static const struct {
    int64_t stride;
    uint8_t code, bits;
    int rc;
    const char* needle;
  } far[] = {{INT64_MAX, kDLFloat, 32, -1, "expected strides whose offsets in bytes fit"},
             {-INT64_MAX, kDLInt, 1, -1, "within the address space"},
             {INT64_MAX - 1, kDLInt, 1, 0, NULL},
             {-(INT64_C(1) << 61), kDLInt, 4, -1, "within the address space"},
             {INT64_MIN + 1, kDLInt, 8, -1, "within the address space"}};
  for (size_t i = 0; i < sizeof far / sizeof far[0]; ++i) {
    int64_t stride = far[i].stride;
    DLTensor d = {g_data, PF_DEVICE_CPU, 1, {far[i].code, far[i].bits, 1}, g_shape, &stride, 0};
    int rc = pf_tensor_from_dltensor(&d, NULL, NULL, &t);
    ck_assert_msg(rc == far[i].rc, "case %zu: rc %d", i, rc);
    if (rc == 0)
      pf_object_release(t);
    else
      PF_ASSERT_RAISED("ValueError", far[i].needle);
  }
  /* an offset that stays inside is fine; on a device whose data is a handle, only int64 counts */
  int64_t two = 2;
  DLTensor ok = {g_data, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, &two, NULL, 32};
  ck_assert_int_eq(pf_tensor_from_dltensor(&ok, NULL, NULL, &t), 0);
  ck_assert(*(double*)pf_dltensor_data(pf_tensor_dltensor(t)) == 4.0);
  pf_object_release(t);
  DLTensor handle = {(void*)(UINTPTR_MAX - 15),
                     pf_device(PF_DEV_OPENCL, 0),
                     2,
                     PF_DTYPE_FLOAT64,
                     g_shape,
                     NULL,
                     1024};
  ck_assert_int_eq(pf_tensor_from_dltensor(&handle, NULL, NULL, &t), 0);
  pf_object_release(t);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Strides whose element offsets fit in int64 but whose byte offsets do not: every import and
 * both sides of a copy name the strides (review: stride 2^62 on float32[2, 3] was refused as
 * "byte_offset 0: expected the bytes ... within the address space"). */
START_TEST(test_import_strides_in_bytes) {
  static const char want[] = "argument src: expected strides whose offsets in bytes fit in int64, "
                             "got strides (4611686018427387904, 1) for float32";
  int64_t strides[2] = {INT64_C(1) << 62, 1};
  float data[6] = {0};
  pf_object_t* t = (pf_object_t*)&t;
  g_deleted = 0;
  DLManagedTensor* m = make_legacy();
  m->dl_tensor.data = data;
  m->dl_tensor.dtype = PF_DTYPE_FLOAT32;
  m->dl_tensor.strides = strides;
  ck_assert_int_eq(pf_tensor_from_dlpack(m, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("ValueError", want);
  pf_dl_managed_tensor_versioned_t* mv = make_versioned(0);
  mv->dl_tensor = m->dl_tensor;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &t), -1);
  PF_ASSERT_RAISED("ValueError", want);
  ck_assert_int_eq(pf_tensor_from_dltensor(&m->dl_tensor, NULL, NULL, &t), -1);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_from_dltensor: argument desc: expected strides whose "
                                 "offsets in bytes fit in int64");
  float out[6];
  DLTensor dst = {out, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT32, g_shape, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&dst, &m->dl_tensor), -1);
  PF_ASSERT_RAISED("ValueError", want);
  ck_assert_int_eq(pf_dltensor_copy(&m->dl_tensor, &dst), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst: expected strides whose offsets "
                                 "in bytes fit in int64");
  /* a byte_offset at fault is still named */
  strides[0] = 3;
  m->dl_tensor.byte_offset = (uint64_t)INT64_MAX - 8;
  ck_assert_int_eq(pf_tensor_from_dlpack(m, &t), -1);
  PF_ASSERT_RAISED("ValueError", "argument src: byte_offset 9223372036854775799: expected");
  ck_assert_int_eq(g_deleted, 0);
  m->dl_tensor.byte_offset = 0;
  m->dl_tensor.strides = NULL;
  mv->deleter(mv);
  m->deleter(m);
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_import_versioned_read_only) {
  g_deleted = 0;
  pf_dl_managed_tensor_versioned_t* m =
      make_versioned(PF_DLPACK_FLAG_READ_ONLY | PF_DLPACK_FLAG_IS_COPIED);
  pf_object_t *t, *v;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(m, &t), 0);
  ck_assert(pf_tensor_is_read_only(t));
  ck_assert_int_eq(pf_tensor_slice(t, 1, 0, 2, 1, &v), 0);
  ck_assert(pf_tensor_is_read_only(v)); /* views inherit it */
  pf_object_t* w;
  ck_assert_int_eq(pf_tensor_view(t, 1, (int64_t[]){2}, NULL, 0, &w), 0); /* compact views too */
  ck_assert(pf_tensor_is_read_only(w));
  pf_object_release(w);
  ck_assert_int_eq(pf_tensor_reshape(t, 1, (int64_t[]){-1}, &w), 0);
  ck_assert(pf_tensor_is_read_only(w));
  pf_object_release(w);
  pf_dl_managed_tensor_versioned_t* out;
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(v, &out), 0);
  ck_assert_uint_eq(out->flags, PF_DLPACK_FLAG_READ_ONLY); /* is-copied is not ours to claim */
  ck_assert_uint_eq(out->version.major, PF_DLPACK_VERSIONED_MAJOR);
  ck_assert_uint_eq(out->version.minor, PF_DLPACK_VERSIONED_MINOR);
  pf_object_release(v);
  pf_object_release(t);
  ck_assert_int_eq(g_deleted, 0); /* the export still holds it */
  out->deleter(out);
  ck_assert_int_eq(g_deleted, 1);
  /* padding is harmless on whole-byte types; a minor version above ours is fine */
  m = make_versioned(PF_DLPACK_FLAG_SUBBYTE_TYPE_PADDED);
  m->version.minor = 9;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(m, &t), 0);
  ck_assert(!pf_tensor_is_read_only(t));
  pf_object_release(t);
  ck_assert_int_eq(g_deleted, 2);
}
END_TEST

/* packfn's own export of a read-only tensor comes back read-only when the consumer changed its
 * description (a slice) and, in the versioned form, whatever it did with the flag: the legacy
 * form came back writable (review). A writable tensor's exports come back writable. */
START_TEST(test_own_export_keeps_read_only) {
  g_deleted = 0;
  pf_object_t *t, *back;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(make_versioned(PF_DLPACK_FLAG_READ_ONLY), &t),
                   0);
  int64_t one_row[2] = {1, 2};
  DLManagedTensor* legacy;
  ck_assert_int_eq(pf_tensor_to_dlpack(t, &legacy), 0);
  legacy->dl_tensor.shape = one_row; /* what the consumer made of it */
  ck_assert_int_eq(pf_tensor_from_dlpack(legacy, &back), 0);
  ck_assert_ptr_ne(back, t);
  ck_assert_int_eq(pf_tensor_is_read_only(back), 1);
  pf_object_release(back);
  pf_dl_managed_tensor_versioned_t* v;
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(t, &v), 0);
  v->dl_tensor.shape = one_row;
  v->flags = 0;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(v, &back), 0);
  ck_assert_int_eq(pf_tensor_is_read_only(back), 1);
  pf_object_release(back);
  pf_object_release(t);
  ck_assert_int_eq(g_deleted, 1);
  /* writable: its changed exports stay writable */
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(make_versioned(0), &t), 0);
  ck_assert_int_eq(pf_tensor_to_dlpack(t, &legacy), 0);
  legacy->dl_tensor.shape = one_row;
  ck_assert_int_eq(pf_tensor_from_dlpack(legacy, &back), 0);
  ck_assert_int_eq(pf_tensor_is_read_only(back), 0);
  pf_object_release(back);
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(t, &v), 0);
  v->dl_tensor.shape = one_row;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(v, &back), 0);
  ck_assert_int_eq(pf_tensor_is_read_only(back), 0);
  pf_object_release(back);
  pf_object_release(t);
  ck_assert_int_eq(g_deleted, 2);
}
END_TEST

START_TEST(test_export_legacy) {
  pf_object_t* t;
  int64_t shape[2] = {2, 2};
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_INT32, PF_DEVICE_CPU, &t), 0);
  DLManagedTensor* m;
  ck_assert_int_eq(pf_tensor_to_dlpack(t, &m), 0);
  ck_assert_uint_eq(pf_object_strong_count(t), 2);
  DLTensor* dl = pf_tensor_dltensor(t);
  ck_assert_ptr_eq(m->dl_tensor.data, dl->data);
  ck_assert_ptr_eq(m->dl_tensor.shape, dl->shape);
  ck_assert_ptr_nonnull(m->dl_tensor.strides);
  ck_assert_int_eq(m->dl_tensor.ndim, 2);
  ck_assert(pf_dtype_equal(m->dl_tensor.dtype, PF_DTYPE_INT32));
  pf_object_release(t);
  /* the consumer is now the only owner; shape stays readable */
  ck_assert_int_eq(m->dl_tensor.shape[1], 2);
  ((int32_t*)m->dl_tensor.data)[3] = 9;
  m->deleter(m);

  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("x", 1, &s), 0);
  m = (DLManagedTensor*)&m;
  ck_assert_int_eq(pf_tensor_to_dlpack(s, &m), -1);
  ck_assert_ptr_null(m);
  PF_ASSERT_RAISED("TypeError", "pf_tensor_to_dlpack: argument tensor: expected a Tensor, got str");
  pf_dl_managed_tensor_versioned_t* mv = (pf_dl_managed_tensor_versioned_t*)&mv;
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(NULL, &mv), -1);
  ck_assert_ptr_null(mv);
  PF_ASSERT_RAISED("TypeError", "expected a Tensor, got NULL");
  ck_assert_int_eq(pf_tensor_to_dlpack(s, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(s, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  pf_object_release(s);
}
END_TEST

START_TEST(test_round_trips) {
  pf_object_t* t;
  int64_t n = 5;
  ck_assert_int_eq(pf_tensor_empty(&n, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), 0);
  /* legacy: the very same object comes back, with the count the caller started with */
  DLManagedTensor* m;
  ck_assert_int_eq(pf_tensor_to_dlpack(t, &m), 0);
  pf_object_t* back;
  ck_assert_int_eq(pf_tensor_from_dlpack(m, &back), 0);
  ck_assert_ptr_eq(back, t);
  ck_assert_uint_eq(pf_object_strong_count(t), 2);
  pf_object_release(back);
  /* versioned, likewise */
  pf_dl_managed_tensor_versioned_t* mv;
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(t, &mv), 0);
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &back), 0);
  ck_assert_ptr_eq(back, t);
  pf_object_release(back);
  /* a consumer that set READ_ONLY on the unchanged export gets a read-only tensor, not the
   * writable original (found by review) */
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(t, &mv), 0);
  mv->flags |= PF_DLPACK_FLAG_READ_ONLY;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(mv, &back), 0);
  ck_assert_ptr_ne(back, t);
  ck_assert_int_eq(pf_tensor_is_read_only(back), 1);
  ck_assert_int_eq(pf_tensor_is_read_only(t), 0);
  pf_object_release(back);
  ck_assert_uint_eq(pf_object_strong_count(t), 1);
  /* a consumer that changed the description gets a new tensor over the same memory, and the
   * export is released when that tensor dies */
  ck_assert_int_eq(pf_tensor_to_dlpack(t, &m), 0);
  m->dl_tensor.byte_offset = 4; /* skip one element, and describe the 4 that remain */
  int64_t four = 4;
  m->dl_tensor.shape = &four;
  m->dl_tensor.strides = NULL;
  ck_assert_int_eq(pf_tensor_from_dlpack(m, &back), 0);
  ck_assert_ptr_ne(back, t);
  ck_assert_uint_eq(pf_object_strong_count(t), 2);
  ck_assert_ptr_eq(pf_dltensor_data(pf_tensor_dltensor(back)),
                   (char*)pf_tensor_dltensor(t)->data + 4);
  pf_object_release(back);
  ck_assert_uint_eq(pf_object_strong_count(t), 1);
  pf_object_release(t);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A tensor object of another runtime (DLTensor at 24, no strides) exports through the ABI. */
typedef struct {
  pf_object_t header;
  DLTensor dl;
  int64_t shape[1];
  float data[3];
} foreign_t;

static int g_foreign_deleted;
static void foreign_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    g_foreign_deleted++;
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

START_TEST(test_export_foreign) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(sizeof(foreign_t), PF_TYPE_TENSOR, foreign_deleter, &obj), 0);
  foreign_t* f = (foreign_t*)obj;
  f->shape[0] = 3;
  DLTensor dl = {f->data, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT32, f->shape, NULL, 0};
  f->dl = dl;
  g_foreign_deleted = 0;
  pf_dl_managed_tensor_versioned_t* m;
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(obj, &m), 0);
  ck_assert_ptr_null(m->dl_tensor.strides);
  ck_assert_uint_eq(m->flags, 0);
  pf_object_release(obj);
  ck_assert_int_eq(g_foreign_deleted, 0);
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(m, &t), 0);
  ck_assert_ptr_eq(t, obj); /* our own export, unchanged: the same object */
  pf_object_release(t);
  ck_assert_int_eq(g_foreign_deleted, 1);
}
END_TEST

/* Our own export whose description the consumer changed in any one field (data, byte_offset,
 * ndim, dtype, device type or index, the shape or strides pointer) comes back as a new tensor with
 * that description, holding the exported one alive, in both forms; so does a versioned export whose
 * flags the consumer changed (a READ_ONLY added to a writable tensor gives a read-only one). */
START_TEST(test_changed_exports_are_new_tensors) {
  int64_t shape[2] = {2, 3};
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &t), 0);
  double* data = pf_dltensor_data(pf_tensor_dltensor(t));
  for (int i = 0; i < 6; ++i)
    data[i] = i;
  int64_t same_shape[2] = {2, 3}, strides[2] = {3, 1}, one[1] = {1};
  for (int form = 0; form < 2; ++form) {
    for (int change = 0; change < 8; ++change) {
      DLManagedTensor* legacy = NULL;
      pf_dl_managed_tensor_versioned_t* versioned = NULL;
      DLTensor* dl;
      if (form == 0) {
        ck_assert_int_eq(pf_tensor_to_dlpack(t, &legacy), 0);
        dl = &legacy->dl_tensor;
      } else {
        ck_assert_int_eq(pf_tensor_to_dlpack_versioned(t, &versioned), 0);
        dl = &versioned->dl_tensor;
      }
      switch (change) {
      case 0: /* from element 1, one element fewer */
        dl->data = data + 1;
        dl->ndim = 1;
        dl->shape = one;
        dl->strides = NULL;
        break;
      case 1:
        dl->byte_offset = 8;
        dl->ndim = 1;
        dl->shape = one;
        dl->strides = NULL;
        break;
      case 2:
        dl->ndim = 1; /* the first row's first two elements: shape[0] is 2 */
        break;
      case 3:
        dl->dtype = PF_DTYPE_INT64;
        break;
      case 4:
        dl->device = pf_device(PF_DEV_CUDA_HOST, 0);
        break;
      case 5:
        dl->shape = same_shape;
        break;
      case 6:
        dl->device = pf_device(PF_DEV_CPU, 1); /* the same type, another index */
        break;
      default:
        dl->strides = strides;
        break;
      }
      DLTensor want = *dl;
      pf_object_t* back = NULL;
      if (form == 0)
        ck_assert_int_eq(pf_tensor_from_dlpack(legacy, &back), 0);
      else
        ck_assert_int_eq(pf_tensor_from_dlpack_versioned(versioned, &back), 0);
      ck_assert_ptr_ne(back, t);
      const DLTensor* b = pf_tensor_dltensor(back);
      ck_assert_ptr_eq(b->data, want.data);
      ck_assert_uint_eq(b->byte_offset, want.byte_offset);
      ck_assert_int_eq(b->ndim, want.ndim);
      ck_assert(pf_dtype_equal(b->dtype, want.dtype));
      ck_assert(pf_device_equal(b->device, want.device));
      for (int32_t i = 0; i < b->ndim; ++i)
        ck_assert_int_eq(b->shape[i], want.shape[i]);
      ck_assert_int_eq(pf_tensor_is_read_only(back), 0);
      ck_assert_uint_eq(pf_object_strong_count(t), 2); /* the export's reference */
      pf_object_release(back);
      ck_assert_uint_eq(pf_object_strong_count(t), 1);
    }
  }
  /* versioned flags: IS_COPIED, and READ_ONLY added to a writable tensor */
  const uint64_t flags[2] = {PF_DLPACK_FLAG_IS_COPIED, PF_DLPACK_FLAG_READ_ONLY};
  for (int k = 0; k < 2; ++k) {
    pf_dl_managed_tensor_versioned_t* v;
    ck_assert_int_eq(pf_tensor_to_dlpack_versioned(t, &v), 0);
    ck_assert_uint_eq(v->flags, 0);
    v->flags = flags[k];
    pf_object_t* back;
    ck_assert_int_eq(pf_tensor_from_dlpack_versioned(v, &back), 0);
    ck_assert_ptr_ne(back, t);
    ck_assert_ptr_eq(pf_tensor_dltensor(back)->data, data);
    ck_assert_int_eq(pf_tensor_is_read_only(back), k == 1);
    ck_assert_int_eq(pf_tensor_is_read_only(t), 0);
    pf_object_release(back);
  }
  ck_assert_uint_eq(pf_object_strong_count(t), 1);
  pf_object_release(t);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A versioned managed tensor without a deleter (its producer keeps the memory): imported, and
 * nothing is called when the tensor goes; a read-only tensor's own export comes back as itself
 * when the consumer keeps its READ_ONLY flag. */
START_TEST(test_versioned_without_deleter) {
  g_deleted = 0;
  pf_dl_managed_tensor_versioned_t* m = make_versioned(PF_DLPACK_FLAG_READ_ONLY);
  m->deleter = NULL;
  pf_object_t *t, *back;
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(m, &t), 0);
  ck_assert_ptr_eq(pf_tensor_dltensor(t)->data, g_data);
  ck_assert_int_eq(pf_tensor_is_read_only(t), 1);
  pf_dl_managed_tensor_versioned_t* v;
  ck_assert_int_eq(pf_tensor_to_dlpack_versioned(t, &v), 0);
  ck_assert_uint_eq(v->flags, PF_DLPACK_FLAG_READ_ONLY);
  ck_assert_int_eq(pf_tensor_from_dlpack_versioned(v, &back), 0);
  ck_assert_ptr_eq(back, t);
  pf_object_release(back);
  pf_object_release(t);
  ck_assert_int_eq(g_deleted, 0);
  free(m);
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Producers that keep shape and strides in their managed block, as DLPack's do: an import
 * reads them there (as TVM-FFI's does), so the block must outlive every tensor, view and export
 * made from it, and be freed exactly once after the last. The deleters scribble over the dims
 * before freeing them, so that a tensor reading them afterwards sees garbage in a plain run and
 * a use after free under AddressSanitizer. */
static float g_f[24];

typedef struct {
  pf_dl_managed_tensor_versioned_t m;
  int64_t shape[3], strides[3];
} vblock_t;

typedef struct {
  DLManagedTensor m;
  int64_t shape[3], strides[3];
} lblock_t;

static void vblock_delete(pf_dl_managed_tensor_versioned_t* self) {
  vblock_t* b = (vblock_t*)self->manager_ctx;
  memset(b->shape, 0xEE, sizeof b->shape + sizeof b->strides);
  g_deleted++;
  free(b);
}

static void lblock_delete(DLManagedTensor* self) {
  lblock_t* b = (lblock_t*)self->manager_ctx;
  memset(b->shape, 0xEE, sizeof b->shape + sizeof b->strides);
  g_deleted++;
  free(b);
}

/* float32 [4, 3, 2] over g_f with `strides` (NULL for none), in either form. */
static void* make_block(int versioned, const int64_t* strides, DLTensor** dl) {
  static const int64_t shape[3] = {4, 3, 2};
  int64_t *bs, *bt;
  void* managed;
  if (versioned) {
    vblock_t* b = calloc(1, sizeof *b);
    b->m.version.major = 1;
    b->m.manager_ctx = b;
    b->m.deleter = vblock_delete;
    *dl = &b->m.dl_tensor;
    bs = b->shape;
    bt = b->strides;
    managed = &b->m;
  } else {
    lblock_t* b = calloc(1, sizeof *b);
    b->m.manager_ctx = b;
    b->m.deleter = lblock_delete;
    *dl = &b->m.dl_tensor;
    bs = b->shape;
    bt = b->strides;
    managed = &b->m;
  }
  memcpy(bs, shape, sizeof shape);
  DLTensor d = {g_f, PF_DEVICE_CPU, 3, PF_DTYPE_FLOAT32, bs, NULL, 0};
  if (strides) {
    memcpy(bt, strides, 3 * sizeof *strides);
    d.strides = bt;
  }
  **dl = d;
  return managed;
}

static int import_block(int versioned, void* managed, pf_object_t** out) {
  return versioned ? pf_tensor_from_dlpack_versioned(managed, out)
                   : pf_tensor_from_dlpack(managed, out);
}

/* The element of `t` at (i, j, k), through its own shape and strides. */
static float elem3(pf_object_t* t, int64_t i, int64_t j, int64_t k) {
  const DLTensor* d = pf_tensor_dltensor(t);
  return (
      (const float*)pf_dltensor_data(d))[i * d->strides[0] + j * d->strides[1] + k * d->strides[2]];
}

/* An import sees the producer's shape and strides (its very arrays), or compact strides of its
 * own when the producer has none, in both forms; its views, copies and exports read them while
 * the producer's block lives, which is until the last of them is gone (issue 14). */
START_TEST(test_import_reads_producer_dims) {
  for (int i = 0; i < 24; ++i)
    g_f[i] = (float)i;
  static const int64_t compact[3] = {6, 2, 1};
  static const int64_t permuted[3] = {1, 4, 12}; /* the transpose of a compact [2, 3, 4] */
  const int64_t* cases[3] = {NULL, compact, permuted};
  for (int versioned = 0; versioned < 2; ++versioned) {
    for (int c = 0; c < 3; ++c) {
      const int64_t* want = cases[c] ? cases[c] : compact;
      g_deleted = 0;
      DLTensor* pd;
      void* managed = make_block(versioned, cases[c], &pd);
      pf_object_t* t;
      ck_assert_int_eq(import_block(versioned, managed, &t), 0);
      DLTensor* dl = pf_tensor_dltensor(t);
      ck_assert_ptr_eq(dl->shape, pd->shape);
      if (cases[c])
        ck_assert_ptr_eq(dl->strides, pd->strides);
      ck_assert_ptr_nonnull(dl->strides);
      for (int a = 0; a < 3; ++a) {
        ck_assert_int_eq(dl->shape[a], 4 - a);
        ck_assert_int_eq(dl->strides[a], want[a]);
      }
      float at = g_f[3 * want[0] + 2 * want[1] + 1 * want[2]];
      ck_assert(elem3(t, 3, 2, 1) == at);
      /* views, an export of each form and a copy, all made before the import is released */
      pf_object_t *sel, *sl, *perm, *copy, *flat = NULL;
      ck_assert_int_eq(pf_tensor_select(t, 0, 3, &sel), 0);
      ck_assert_int_eq(pf_tensor_slice(t, 1, 1, 3, 1, &sl), 0);
      static const int32_t axes[3] = {2, 1, 0};
      ck_assert_int_eq(pf_tensor_permute(t, axes, &perm), 0);
      if (c < 2)
        ck_assert_int_eq(pf_tensor_reshape(t, 1, (int64_t[]){-1}, &flat), 0);
      ck_assert_int_eq(pf_tensor_to_device(t, PF_DEVICE_CPU, &copy), 0);
      DLManagedTensor* ml;
      pf_dl_managed_tensor_versioned_t* mv;
      ck_assert_int_eq(pf_tensor_to_dlpack(t, &ml), 0);
      ck_assert_int_eq(pf_tensor_to_dlpack_versioned(t, &mv), 0);
      ck_assert_ptr_eq(ml->dl_tensor.shape, pd->shape);
      pf_object_release(t);
      ck_assert_int_eq(g_deleted, 0); /* the views and exports hold it */
      const DLTensor* sd = pf_tensor_dltensor(sel);
      ck_assert_int_eq(sd->ndim, 2);
      ck_assert_int_eq(sd->shape[0], 3);
      ck_assert_int_eq(sd->strides[1], want[2]);
      ck_assert(((const float*)pf_dltensor_data(sd))[2 * sd->strides[0] + sd->strides[1]] == at);
      ck_assert(elem3(sl, 3, 1, 1) == at);
      pf_object_t* sv; /* a view of a view: holds the import, the view's owner */
      ck_assert_int_eq(pf_tensor_select(sl, 0, 3, &sv), 0);
      pf_object_release(sl);
      sl = NULL;
      const DLTensor* vd = pf_tensor_dltensor(sv);
      ck_assert(((const float*)pf_dltensor_data(vd))[vd->strides[0] + vd->strides[1]] == at);
      ck_assert(elem3(perm, 1, 2, 3) == at);
      ck_assert(elem3(copy, 3, 2, 1) == at);
      if (flat) {
        ck_assert(((const float*)pf_dltensor_data(pf_tensor_dltensor(flat)))[23] == 23.0f);
        pf_object_release(flat);
      }
      pf_object_release(sel);
      pf_object_release(sv);
      pf_object_release(perm);
      pf_object_release(copy); /* its own memory: not the producer's */
      /* the exports come back as the import itself, whose dims are still the producer's */
      pf_object_t* back;
      ck_assert_int_eq(pf_tensor_from_dlpack(ml, &back), 0);
      ck_assert_ptr_eq(pf_tensor_dltensor(back)->shape, pd->shape);
      ck_assert(elem3(back, 3, 2, 1) == at);
      pf_object_release(back);
      ck_assert_int_eq(g_deleted, 0);
      ck_assert_int_eq(mv->dl_tensor.shape[0], 4);
      mv->deleter(mv); /* the last reference: the producer's block goes, once */
      ck_assert_int_eq(g_deleted, 1);
    }
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* A 0-d import: the producer's shape and strides may be NULL; packfn's tensor still has both
 * pointers (it always does), and one element. */
START_TEST(test_import_scalar) {
  g_f[0] = 7.0f;
  for (int versioned = 0; versioned < 2; ++versioned) {
    for (int with_strides = 0; with_strides < 2; ++with_strides) {
      g_deleted = 0;
      DLTensor* pd;
      static const int64_t ones[3] = {1, 1, 1};
      void* managed = make_block(versioned, with_strides ? ones : NULL, &pd);
      pd->ndim = 0;
      if (!with_strides)
        pd->shape = NULL;
      pf_object_t* t;
      ck_assert_int_eq(import_block(versioned, managed, &t), 0);
      DLTensor* dl = pf_tensor_dltensor(t);
      ck_assert_int_eq(dl->ndim, 0);
      ck_assert_ptr_nonnull(dl->shape);
      ck_assert_ptr_nonnull(dl->strides);
      ck_assert_int_eq(pf_dltensor_numel(dl), 1);
      ck_assert(*(const float*)pf_dltensor_data(dl) == 7.0f);
      pf_object_t* v;
      ck_assert_int_eq(pf_tensor_reshape(t, 1, (int64_t[]){1}, &v), 0);
      pf_object_release(t);
      ck_assert(*(const float*)pf_dltensor_data(pf_tensor_dltensor(v)) == 7.0f);
      pf_object_release(v);
      ck_assert_int_eq(g_deleted, 1);
    }
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Imports of another runtime's exports take a short way for the usual layouts (pf__import_usual)
 * and the general one for the rest: either way they accept what pf_tensor_from_dltensor
 * accepts, and describe it alike, in both forms; the boundaries of the short way's checks
 * included. */
static void ignore_versioned(pf_dl_managed_tensor_versioned_t* self) {
  (void)self;
  g_deleted++;
}
static void ignore_legacy(DLManagedTensor* self) {
  (void)self;
  g_deleted++;
}

static void expect_same_import(const DLTensor* d, int rc_want, const char* what) {
  pf_object_t *a = NULL, *b = NULL, *c = NULL;
  pf_dl_managed_tensor_versioned_t mv;
  memset(&mv, 0, sizeof mv);
  mv.version.major = 1;
  mv.deleter = ignore_versioned;
  mv.dl_tensor = *d;
  DLManagedTensor ml;
  memset(&ml, 0, sizeof ml);
  ml.deleter = ignore_legacy;
  ml.dl_tensor = *d;
  g_deleted = 0;
  int rv = pf_tensor_from_dlpack_versioned(&mv, &a);
  pf_error_clear();
  int rl = pf_tensor_from_dlpack(&ml, &b);
  pf_error_clear();
  int rd = pf_tensor_from_dltensor(d, NULL, NULL, &c);
  pf_error_clear();
  ck_assert_msg(rv == rc_want && rl == rc_want && rd == rc_want, "%s: rc %d %d %d", what, rv, rl,
                rd);
  if (rc_want == 0) {
    const DLTensor* want = pf_tensor_dltensor(c);
    for (int k = 0; k < 2; ++k) {
      const DLTensor* got = pf_tensor_dltensor(k ? b : a);
      ck_assert_msg(got->data == want->data && got->ndim == want->ndim &&
                        pf_dtype_equal(got->dtype, want->dtype) &&
                        pf_device_equal(got->device, want->device) &&
                        got->byte_offset == want->byte_offset,
                    "%s", what);
      ck_assert_msg(d->ndim == 0 || got->shape == d->shape, "%s: not the producer's shape", what);
      for (int32_t i = 0; i < got->ndim; ++i)
        ck_assert_msg(got->shape[i] == want->shape[i] && got->strides[i] == want->strides[i],
                      "%s: axis %d", what, (int)i);
    }
    pf_object_release(a);
    pf_object_release(b);
    pf_object_release(c);
    ck_assert_int_eq(g_deleted, 2);
  } else {
    ck_assert_msg(!a && !b && !c, "%s", what);
    ck_assert_int_eq(g_deleted, 0); /* refused: still the caller's */
  }
}

START_TEST(test_import_short_and_general_ways) {
  static char buf[64];
  int64_t s23[2] = {2, 3}, s6[1] = {6}, s0[2] = {0, 3}, s21[2] = {2, 1};
  int64_t compact[2] = {3, 1}, loose[2] = {3, 7}, cols[2] = {1, 2}, neg[1] = {-1};
  const DLDataType f32 = PF_DTYPE_FLOAT32;
  static const struct {
    DLDataType dtype;
    int rc;
  } types[] = {
      {{kDLFloat, 32, 1}, 0},     {{kDLFloat, 64, 1}, 0}, {{kDLFloat, 16, 1}, 0},
      {{kDLInt, 8, 1}, 0},        {{kDLUInt, 16, 1}, 0},  {{kDLInt, 64, 1}, 0},
      {{PF_DL_BOOL, 8, 1}, 0},    {{kDLFloat, 16, 2}, 0}, {{kDLInt, 4, 1}, 0},
      {{kDLComplex, 64, 1}, 0},   {{kDLFloat, 8, 1}, -1}, {{kDLInt, 8, 0}, -1},
      {{PF_DL_BFLOAT, 16, 1}, 0},
  };
  char what[64];
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
    DLTensor d = {buf, PF_DEVICE_CPU, 1, types[i].dtype, s6, NULL, 0};
    snprintf(what, sizeof what, "dtype %zu", i);
    expect_same_import(&d, types[i].rc, what);
  }
  DLTensor d = {buf, PF_DEVICE_CPU, 2, f32, s23, NULL, 0};
  expect_same_import(&d, 0, "float32[2, 3]");
  d.strides = compact;
  expect_same_import(&d, 0, "compact strides");
  d.strides = cols;
  expect_same_import(&d, 0, "column-major strides");
  d.shape = s21;
  d.strides = loose; /* an extent-1 axis's stride moves nothing: still compact */
  expect_same_import(&d, 0, "loose stride of an extent-1 axis");
  d.strides = NULL;
  d.shape = s0;
  expect_same_import(&d, 0, "empty");
  d.data = NULL;
  expect_same_import(&d, 0, "empty without data");
  d.shape = s23;
  expect_same_import(&d, -1, "data NULL");
  d.data = buf;
  d.device.device_id = -1;
  expect_same_import(&d, -1, "device -1");
  d.device.device_id = 0;
  d.shape = NULL;
  expect_same_import(&d, -1, "shape NULL");
  d.shape = neg;
  d.ndim = 1;
  expect_same_import(&d, -1, "extent -1");
  d.shape = s23;
  d.ndim = 65;
  expect_same_import(&d, -1, "ndim 65");
  d.ndim = 0;
  d.shape = NULL;
  expect_same_import(&d, 0, "0-d");
  /* byte_offset and data at the ends of the checks: the last byte at INT64_MAX is fine */
  d.ndim = 2;
  d.shape = s23;
  d.data = (void*)(uintptr_t)16;
  d.byte_offset = (uint64_t)INT64_MAX - 24;
  expect_same_import(&d, 0, "end at INT64_MAX");
  d.byte_offset++;
  expect_same_import(&d, -1, "end past INT64_MAX");
  d.byte_offset = 0;
  d.data = (void*)(UINTPTR_MAX - 23); /* its 24 bytes end at the top of the address space */
  expect_same_import(&d, -1, "bytes past the address space");
  d.device = pf_device(PF_DEV_OPENCL, 0); /* a handle, not an address: fine */
  expect_same_import(&d, 0, "handle above 2^63");
  d.device = PF_DEVICE_CPU;
  d.data = (void*)((uintptr_t)1 << 63);
  expect_same_import(&d, 0, "address 2^63");
  int64_t big[2] = {INT64_C(1) << 58, 4};
  d.data = buf;
  d.shape = big;
  expect_same_import(&d, -1, "2^60 elements of 4 bytes: 2^65 bits");
  big[0] = big[1] = INT64_C(1) << 32; /* the extents' product passes int64 */
  expect_same_import(&d, -1, "2^64 elements");
  big[0] = INT64_C(1) << 57;
  big[1] = 4;
  d.dtype = pf_dtype(kDLInt, 8, 1);
  expect_same_import(&d, 0, "2^59 one-byte elements");
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* The same over descriptions drawn at random near every boundary (a fixed seed): both forms
 * accept what pf_tensor_from_dltensor accepts, and describe it alike. */
static uint64_t g_rng = 0x9E3779B97F4A7C15u;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}
#define PICK(a) ((a)[rnd() % (sizeof(a) / sizeof((a)[0]))])

START_TEST(test_import_random_descriptions) {
  static char buf[256];
  static const int32_t ndims[] = {0, 1, 1, 2, 2, 3, 4, 64, 65, -1};
  static const int64_t extents[] = {
      1, 1, 2, 3, 7, 0, -1, INT64_C(1) << 31, INT64_C(1) << 32, INT64_C(1) << 62, INT64_MAX};
  static const int64_t odd_strides[] = {0, 1, -1, 2, 5, INT64_MIN, INT64_MAX, INT64_C(1) << 40};
  static const uint8_t codes[] = {kDLInt, kDLUInt, kDLFloat, kDLFloat, 3, 4, 5, 6, 7};
  static const uint8_t bits[] = {8, 16, 32, 32, 64, 1, 4, 6, 128, 0, 12};
  static const uint16_t lanes[] = {1, 1, 1, 2, 0};
  static const uint64_t offsets[] = {
      0, 0, 8, 4, (uint64_t)INT64_MAX - 24, (uint64_t)INT64_MAX, (uint64_t)1 << 63, UINT64_MAX - 7};
  void* datas[] = {
      buf, buf, NULL, (void*)((uintptr_t)1 << 63), (void*)(UINTPTR_MAX - 15), (void*)(uintptr_t)16};
  static const DLDevice devices[] = {
      {kDLCPU, 0}, {kDLCPU, 0}, {kDLCPU, -1}, {kDLOpenCL, 0}, {kDLCUDA, 1}};
  static int64_t shape[65], strides[65];
  for (int n = 0; n < 100000; ++n) {
    DLTensor d = {PICK(datas), PICK(devices), PICK(ndims),  {PICK(codes), PICK(bits), PICK(lanes)},
                  shape,       NULL,          PICK(offsets)};
    int32_t nd = d.ndim > 0 ? d.ndim : 0;
    int64_t step = 1;
    for (int32_t i = nd; i-- > 0;) {
      shape[i] = rnd() % 4 ? (int64_t)(rnd() % 4) + 1 : PICK(extents);
      strides[i] = rnd() % 8 ? step : PICK(odd_strides); /* mostly compact */
      step *= shape[i] > 0 && shape[i] < 1000 && step < INT64_C(1) << 40 ? shape[i] : 1;
    }
    if (rnd() % 2)
      d.strides = strides;
    if (rnd() % 16 == 0)
      d.shape = NULL;
    pf_object_t* t = NULL;
    int want = pf_tensor_from_dltensor(&d, NULL, NULL, &t);
    pf_error_clear();
    pf_object_release(t);
    char what[32];
    snprintf(what, sizeof what, "case %d", n);
    expect_same_import(&d, want, what);
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Many imports alive: the short way's blocks come from this thread's list until it is empty,
 * then from the general allocator (pf__import_uncached), every one a valid tensor. */
START_TEST(test_import_many_alive) {
  enum { N = 3000 };
  static pf_dl_managed_tensor_versioned_t m[N];
  static pf_object_t* t[N];
  static int64_t shape[1] = {6};
  g_deleted = 0;
  for (int i = 0; i < N; ++i) {
    memset(&m[i], 0, sizeof m[i]);
    m[i].version.major = 1;
    m[i].deleter = ignore_versioned;
    DLTensor d = {g_data, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, shape, NULL, 0};
    m[i].dl_tensor = d;
    m[i].dl_tensor.byte_offset = (uint64_t)(i % 6) * 8;
    m[i].dl_tensor.shape = &shape[0];
    ck_assert_int_eq(pf_tensor_from_dlpack_versioned(&m[i], &t[i]), 0);
  }
  for (int i = 0; i < N; ++i) {
    const DLTensor* d = pf_tensor_dltensor(t[i]);
    ck_assert_int_eq(d->strides[0], 1);
    ck_assert(*(const double*)pf_dltensor_data(d) == (double)(i % 6));
    pf_object_release(t[i]);
  }
  ck_assert_int_eq(g_deleted, N);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("dlpack");
  TCase* tc = tcase_create("import");
  tcase_add_test(tc, test_import_legacy);
  tcase_add_test(tc, test_import_errors_leave_source);
  tcase_add_test(tc, test_import_versioned_read_only);
  tcase_add_test(tc, test_import_byte_offset);
  tcase_add_test(tc, test_import_strides_in_bytes);
  tcase_add_test(tc, test_import_reads_producer_dims);
  tcase_add_test(tc, test_import_scalar);
  tcase_add_test(tc, test_import_short_and_general_ways);
  tcase_add_test(tc, test_import_random_descriptions);
  tcase_add_test(tc, test_import_many_alive);
  suite_add_tcase(s, tc);
  tc = tcase_create("export");
  tcase_add_test(tc, test_own_export_keeps_read_only);
  tcase_add_test(tc, test_export_legacy);
  tcase_add_test(tc, test_round_trips);
  tcase_add_test(tc, test_export_foreign);
  tcase_add_test(tc, test_changed_exports_are_new_tensors);
  tcase_add_test(tc, test_versioned_without_deleter);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
