/* Tests of devices at run time: the allocator table (custom, replaced, failing allocators),
 * copies through copy hooks on a fake device, and per-thread current streams. */
#include <pthread.h>
#include <stdint.h>

#include "pf_test.h"

/* ---- a counting allocator over malloc, used for the CPU and for fake devices ---- */

typedef struct {
  int allocs, frees, copies;
  int fail; /* alloc: 1 raise MemoryError; 2 fail without raising; 3 succeed with NULL; 4 succeed
             * with memory 16 bytes past the alignment; 5 clear the slot and fail without
             * raising; 6 clear the slot and raise RuntimeError */
  int copy_fail; /* copy: 1 raise RuntimeError; 2 fail without raising */
  DLDevice last_dst, last_src;
} counter_t;

static int counting_alloc(void* ctx, DLDevice device, size_t nbytes, size_t alignment, void** out) {
  (void)device;
  counter_t* c = ctx;
  *out = NULL;
  if (c->fail == 1) {
    PF_ERROR_SET(PF_ERR_MEMORY, "counting_alloc: no memory for %zu bytes", nbytes);
    return -1;
  }
  if (c->fail == 2)
    return -1;
  if (c->fail == 3)
    return 0;
  if (c->fail == 5 || c->fail == 6) {
    pf_error_clear();
    if (c->fail == 6)
      PF_ERROR_SET(PF_ERR_RUNTIME, "counting_alloc: the device is gone");
    return -1;
  }
  ck_assert_uint_eq(alignment, PF_TENSOR_ALIGNMENT);
  ck_assert_int_eq(posix_memalign(out, alignment, nbytes + (c->fail == 4 ? 16 : 0)), 0);
  if (c->fail == 4)
    *out = (char*)*out + 16;
  c->allocs++;
  return 0;
}

static void counting_free(void* ctx, DLDevice device, void* ptr) {
  (void)device;
  ((counter_t*)ctx)->frees++;
  free((char*)ptr - ((uintptr_t)ptr % PF_TENSOR_ALIGNMENT)); /* what fail 4 moved */
}

static int counting_copy(void* ctx, void* dst, DLDevice dst_device, const void* src,
                         DLDevice src_device, size_t nbytes) {
  counter_t* c = ctx;
  c->copies++;
  c->last_dst = dst_device;
  c->last_src = src_device;
  if (c->copy_fail == 1) {
    PF_ERROR_SET(PF_ERR_RUNTIME, "counting_copy: device lost");
    return -1;
  }
  if (c->copy_fail == 2)
    return -1;
  memmove(dst, src, nbytes); /* a device type packfn does not know gets overlapping ones too */
  return 0;
}

START_TEST(test_allocator_get_set) {
  pf_allocator_t a;
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CPU, &a), 0);
  ck_assert(a.alloc != NULL && a.free != NULL && a.copy != NULL);
  a.alloc = counting_alloc;
  ck_assert_int_eq(pf_allocator_get(PF_DEV_VULKAN, &a), 0); /* absent: zeroed, no error */
  ck_assert(a.alloc == NULL && a.free == NULL && a.ctx == NULL);
  PF_ASSERT_NO_ERROR();
  int64_t one = 1;
  pf_object_t* t = NULL;
  ck_assert_int_eq(pf_tensor_empty(&one, 1, PF_DTYPE_INT8, pf_device(PF_DEV_VULKAN, 0), &t), -1);
  PF_ASSERT_RAISED("KeyError", "pf_tensor_empty: no allocator for device type vulkan (7)");
  ck_assert_int_eq(pf_allocator_get(0, &a), -1);
  PF_ASSERT_RAISED("ValueError", "pf_allocator_get: argument device_type: expected 1..63, got 0");
  ck_assert_int_eq(pf_allocator_get(PF_ALLOCATOR_MAX_DEVICE_TYPE, &a), -1);
  PF_ASSERT_RAISED("ValueError", "got 64");
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CPU, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");

  counter_t c = {0};
  pf_allocator_t hooks = {&c, counting_alloc, NULL, NULL};
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, &hooks), -1);
  PF_ASSERT_RAISED("ValueError", "expected alloc and free hooks, got NULL free");
  hooks.alloc = NULL;
  hooks.free = counting_free;
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, &hooks), -1);
  PF_ASSERT_RAISED("ValueError", "got NULL alloc");
  ck_assert_int_eq(pf_allocator_set(-1, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_allocator_set: argument device_type: expected 1..63, got -1");
  /* set, read back, remove */
  hooks.alloc = counting_alloc;
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, &hooks), 0);
  ck_assert_int_eq(pf_allocator_get(PF_DEV_VULKAN, &a), 0);
  ck_assert_ptr_eq(a.ctx, &c);
  ck_assert(a.alloc == counting_alloc);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, NULL), 0);
  ck_assert_int_eq(pf_allocator_get(PF_DEV_VULKAN, &a), 0);
  ck_assert(a.alloc == NULL);
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_cpu_allocator_replaced) {
  counter_t c = {0};
  pf_allocator_t hooks = {&c, counting_alloc, counting_free, NULL};
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CPU, &hooks), 0);
  int64_t shape[1] = {10};
  pf_object_t *t, *u;
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), 0);
  ck_assert_int_eq(c.allocs, 1);
  /* restoring the default while t lives: t still frees through the hooks it came from */
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CPU, NULL), 0);
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &u), 0);
  ck_assert_int_eq(c.allocs, 1);
  pf_object_release(u);
  ck_assert_int_eq(c.frees, 0);
  pf_object_release(t);
  ck_assert_int_eq(c.frees, 1);
  pf_allocator_t a;
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CPU, &a), 0);
  ck_assert(a.alloc != counting_alloc);
}
END_TEST

START_TEST(test_allocator_failures) {
  counter_t c = {0};
  pf_allocator_t hooks = {&c, counting_alloc, counting_free, counting_copy};
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, &hooks), 0);
  int64_t shape[1] = {4};
  pf_object_t* t = (pf_object_t*)&t;
  DLDevice dev = pf_device(PF_DEV_VULKAN, 0);
  c.fail = 1;
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, dev, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("MemoryError", "counting_alloc: no memory for 16 bytes");
  c.fail = 2;
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, dev, &t), -1);
  PF_ASSERT_RAISED("MemoryError", "pf_tensor_empty: out of memory allocating 16 bytes");
  /* with an error left from before: that one is no account of the hook's failure (it was
   * reported as such; review), the new one has it as its cause */
  PF_ERROR_SET(PF_ERR_VALUE, "an unrelated earlier error");
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, dev, &t), -1);
  PF_ASSERT_RAISED("MemoryError", "pf_tensor_empty: out of memory allocating 16 bytes");
  /* hooks that clear the slot: one failing without raising still gives an error (it gave
   * none), one raising its own has it reported (a new error at the freed one's address was
   * taken for it and replaced by a MemoryError; review); a hook that raises over the earlier
   * error gets it as its cause, as any raise does */
  for (int mode = 5; mode <= 7; ++mode) {
    c.fail = mode == 7 ? 1 : mode;
    PF_ERROR_SET(PF_ERR_VALUE, "an unrelated earlier error");
    ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, dev, &t), -1);
    pf_object_t* err = pf_error_take();
    ck_assert_ptr_nonnull(err);
    ck_assert_str_eq(pf_error_kind(err), mode == 6 ? "RuntimeError" : "MemoryError");
    if (mode == 6)
      ck_assert_str_eq(pf_error_message(err), "counting_alloc: the device is gone");
    pf_object_t* cause = pf_error_cause(err);
    if (mode == 7)
      ck_assert(cause && strcmp(pf_error_message(cause), "an unrelated earlier error") == 0);
    else
      ck_assert_ptr_null(cause); /* the hook cleared it */
    pf_object_release(err);
  }
  /* a hook that succeeds leaves the earlier error as it was */
  c.fail = 0;
  PF_ERROR_SET(PF_ERR_VALUE, "an unrelated earlier error");
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, dev, &t), 0);
  pf_object_release(t);
  PF_ASSERT_RAISED("ValueError", "an unrelated earlier error");
  c.fail = 3;
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, dev, &t), -1);
  PF_ASSERT_RAISED("RuntimeError",
                   "pf_tensor_empty: the allocator returned no memory for 16 bytes");
  /* memory off the alignment asked for: given back, refused (a tensor at 161 past 256 was
   * made; review); a device type that may hold handles is not checked */
  c.fail = 4;
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CUDA, &hooks), 0);
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, pf_device(PF_DEV_CUDA, 0), &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("RuntimeError", "pf_tensor_empty: the allocator of device type cuda (2) "
                                   "returned memory 16 bytes past a multiple of 256, the "
                                   "alignment it was asked for");
  ck_assert_int_eq(c.allocs, c.frees);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CUDA, NULL), 0);
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, dev, &t), 0);
  pf_object_release(t);
  ck_assert_int_eq(c.allocs, c.frees);
  /* device types no allocator may exist for: said so, without advice to install one */
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, pf_device(1000, 0), &t), -1);
  PF_ASSERT_RAISED("KeyError", "no allocator for device type device(1000) (allocators exist "
                               "for types 1..63)");
  c.fail = 0;
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, dev, &t), 0);
  pf_object_release(t);
  ck_assert_int_eq(c.allocs, 4); /* the misaligned one, the ones before and this */
  ck_assert_int_eq(c.frees, 4);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, NULL), 0);
}
END_TEST

/* ---- copies ---- */

static pf_object_t* cpu_iota(int64_t n) {
  pf_object_t* t;
  ck_assert_int_eq(pf_tensor_empty(&n, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &t), 0);
  double* p = pf_dltensor_data(pf_tensor_dltensor(t));
  for (int64_t i = 0; i < n; ++i)
    p[i] = (double)i;
  return t;
}

START_TEST(test_allocator_failures_copying_to_a_device) {
  /* pf_tensor_to_device's copy comes from the device's allocator: its failures, an empty
   * tensor's byte (the hook is asked for 1), a device type with no allocator */
  counter_t c = {0};
  pf_allocator_t hooks = {&c, counting_alloc, counting_free, counting_copy};
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, &hooks), 0);
  DLDevice dev = pf_device(PF_DEV_VULKAN, 0);
  pf_object_t* src = cpu_iota(4);
  pf_object_t* t = (pf_object_t*)&t;
  c.fail = 1;
  ck_assert_int_eq(pf_tensor_to_device(src, dev, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("MemoryError", "counting_alloc: no memory for 32 bytes");
  c.fail = 2;
  ck_assert_int_eq(pf_tensor_to_device(src, dev, &t), -1);
  PF_ASSERT_RAISED("MemoryError", "pf_tensor_to_device: out of memory allocating 32 bytes");
  ck_assert_int_eq(c.allocs, 0);
  c.fail = 0;
  int64_t zero = 0;
  pf_object_t* empty;
  ck_assert_int_eq(pf_tensor_empty(&zero, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &empty), 0);
  ck_assert_int_eq(pf_tensor_to_device(empty, dev, &t), 0);
  ck_assert_int_eq(c.allocs, 1);
  ck_assert_int_eq(pf_tensor_dltensor(t)->shape[0], 0);
  ck_assert_int_eq(pf_tensor_dltensor(t)->device.device_type, PF_DEV_VULKAN);
  pf_object_release(t);
  ck_assert_int_eq(c.frees, 1);
  /* and pf_tensor_empty of no elements on that device: 1 byte too */
  ck_assert_int_eq(pf_tensor_empty(&zero, 1, PF_DTYPE_FLOAT64, dev, &t), 0);
  ck_assert_int_eq(c.allocs, 2);
  /* back to the host: packfn's own allocator, a byte for no elements */
  pf_object_t* back;
  ck_assert_int_eq(pf_tensor_to_device(t, PF_DEVICE_CPU, &back), 0);
  ck_assert_int_eq(pf_tensor_dltensor(back)->shape[0], 0);
  ck_assert_int_eq(pf_tensor_dltensor(back)->device.device_type, PF_DEV_CPU);
  ck_assert_ptr_nonnull(pf_tensor_dltensor(back)->data);
  pf_object_release(back);
  pf_object_release(t);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, NULL), 0);
  ck_assert_int_eq(pf_tensor_to_device(src, dev, &t), -1);
  ck_assert_ptr_null(t);
  PF_ASSERT_RAISED("KeyError", "pf_tensor_to_device: no allocator for device type vulkan (7)");
  ck_assert_int_eq(c.frees, 2);
  pf_object_release(empty);
  pf_object_release(src);
}
END_TEST

START_TEST(test_copy_cpu) {
  pf_object_t* a = cpu_iota(6);
  pf_object_t* b;
  int64_t six = 6;
  ck_assert_int_eq(pf_tensor_empty(&six, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &b), 0);
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(b), pf_tensor_dltensor(a)), 0);
  ck_assert(((double*)pf_dltensor_data(pf_tensor_dltensor(b)))[5] == 5.0);
  /* cuda_host memory counts as host memory: no hook needed */
  DLTensor pinned = *pf_tensor_dltensor(b);
  pinned.device = pf_device(PF_DEV_CUDA_HOST, 0);
  ck_assert_int_eq(pf_dltensor_copy(&pinned, pf_tensor_dltensor(a)), 0);

  pf_object_t *c, *sl;
  ck_assert_int_eq(pf_tensor_empty(&six, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &c), 0);
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(c), pf_tensor_dltensor(a)), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_dltensor_copy: argument src: expected dtype float32 like dst, got float64");
  pf_object_release(c);
  ck_assert_int_eq(pf_tensor_slice(a, 0, 0, 6, 2, &sl), 0);
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(b), pf_tensor_dltensor(sl)), -1);
  PF_ASSERT_RAISED("ValueError", "expected shape (6,) like dst, got (3,)");
  int64_t three = 3;
  ck_assert_int_eq(pf_tensor_empty(&three, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &c), 0);
  /* host memory: strided sides are copied element by element */
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(c), pf_tensor_dltensor(sl)), 0);
  const double* cp = pf_dltensor_data(pf_tensor_dltensor(c));
  ck_assert(cp[0] == 0.0 && cp[1] == 2.0 && cp[2] == 4.0);
  ((double*)pf_dltensor_data(pf_tensor_dltensor(c)))[1] = -2.0;
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(sl), pf_tensor_dltensor(c)), 0);
  const double* ap = pf_dltensor_data(pf_tensor_dltensor(a));
  ck_assert(ap[0] == 0.0 && ap[1] == 1.0 && ap[2] == -2.0 && ap[3] == 3.0 && ap[4] == 4.0);
  ap = NULL;
  /* strided sides whose bytes overlap are refused, even when no element is shared */
  pf_object_t* odd;
  ck_assert_int_eq(pf_tensor_slice(a, 0, 1, 6, 2, &odd), 0);
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(odd), pf_tensor_dltensor(sl)), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst: overlaps src");
  pf_object_release(odd);
  ck_assert_int_eq(pf_dltensor_copy(NULL, pf_tensor_dltensor(c)), -1);
  PF_ASSERT_RAISED("ValueError", "argument dst: expected a DLTensor, got NULL");
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(c), NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument src");
  pf_object_release(c);
  pf_object_release(sl);
  /* empty copies do nothing */
  int64_t zero = 0;
  pf_object_t *e1, *e2;
  ck_assert_int_eq(pf_tensor_empty(&zero, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &e1), 0);
  ck_assert_int_eq(pf_tensor_empty(&zero, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &e2), 0);
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(e1), pf_tensor_dltensor(e2)), 0);
  pf_object_release(e1);
  pf_object_release(e2);
  pf_object_release(b);
  pf_object_release(a);
}
END_TEST

/* cuda and cuda_managed memory are copied by the CUDA runtime's hooks in either direction (the
 * destination's, as for any two memories of one device type); rocm is another runtime */
START_TEST(test_copy_cuda_and_managed_share_hooks) {
  counter_t cu = {0}, mg = {0}, ro = {0};
  pf_allocator_t hooks = {&cu, counting_alloc, counting_free, counting_copy};
  pf_allocator_t saved_cu, saved_mg, saved_ro;
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CUDA, &saved_cu), 0); /* alloc NULL: none */
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CUDA_MANAGED, &saved_mg), 0);
  ck_assert_int_eq(pf_allocator_get(PF_DEV_ROCM, &saved_ro), 0);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CUDA, &hooks), 0);
  hooks.ctx = &mg;
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CUDA_MANAGED, &hooks), 0);
  hooks.ctx = &ro;
  ck_assert_int_eq(pf_allocator_set(PF_DEV_ROCM, &hooks), 0);
  pf_object_t* a = cpu_iota(4);
  pf_object_t *dev, *managed, *back, *bad = NULL;
  ck_assert_int_eq(pf_tensor_to_device(a, pf_device(PF_DEV_CUDA, 0), &dev), 0);
  ck_assert_int_eq(pf_tensor_to_device(dev, pf_device(PF_DEV_CUDA_MANAGED, 0), &managed), 0);
  ck_assert_int_eq(mg.copies, 1);
  ck_assert(pf_device_equal(mg.last_src, pf_device(PF_DEV_CUDA, 0)));
  ck_assert_int_eq(pf_tensor_to_device(managed, pf_device(PF_DEV_CUDA, 0), &back), 0);
  ck_assert_int_eq(cu.copies, 2);
  ck_assert(pf_device_equal(cu.last_src, pf_device(PF_DEV_CUDA_MANAGED, 0)));
  ck_assert(((double*)pf_dltensor_data(pf_tensor_dltensor(back)))[3] == 3.0);
  ck_assert_int_eq(pf_tensor_to_device(managed, pf_device(PF_DEV_ROCM, 0), &bad), -1);
  PF_ASSERT_RAISED("NotImplementedError", "cannot copy from cuda_managed:0 to rocm:0");
  ck_assert_int_eq(ro.copies, 0);
  /* CUDA's memories are addresses in one (unified) address space: the same bytes are left
   * alone and overlapping ones refused, on one device and between two (the hooks' device
   * copies are undefined for them, unlike memmove) */
  DLTensor d3 = *pf_tensor_dltensor(dev), d3s = d3, d3m = d3;
  int64_t three = 3;
  d3.shape = d3s.shape = d3m.shape = &three;
  d3s.byte_offset += sizeof(double);
  d3m.device = pf_device(PF_DEV_CUDA_MANAGED, 1);
  int copies = cu.copies + mg.copies;
  ck_assert_int_eq(pf_dltensor_copy(&d3, &d3), 0);
  ck_assert_int_eq(pf_dltensor_copy(&d3m, &d3), 0);
  ck_assert_int_eq(pf_dltensor_copy(&d3s, &d3), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_dltensor_copy: argument dst: overlaps src; a copy on a device needs "
                   "separate memory");
  d3s.device = pf_device(PF_DEV_CUDA, 1);
  ck_assert_int_eq(pf_dltensor_copy(&d3s, &d3), -1);
  PF_ASSERT_RAISED("ValueError", "overlaps src");
  ck_assert_int_eq(cu.copies + mg.copies, copies);
  /* an empty tensor's copy checks the devices as one of one element does (it succeeded between
   * any two; review) */
  d3.shape = &(int64_t){0};
  d3s.shape = d3.shape;
  d3s.device = pf_device(PF_DEV_ROCM, 0);
  ck_assert_int_eq(pf_dltensor_copy(&d3s, &d3), -1);
  PF_ASSERT_RAISED("NotImplementedError", "cannot copy from cuda:0 to rocm:0");
  d3s.device = pf_device(PF_DEV_VULKAN, 0);
  ck_assert_int_eq(pf_dltensor_copy(&d3s, &d3), -1);
  PF_ASSERT_RAISED("NotImplementedError", "cannot copy from cuda:0 to vulkan:0");
  pf_object_release(back);
  pf_object_release(managed);
  pf_object_release(dev);
  pf_object_release(a);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CUDA, saved_cu.alloc ? &saved_cu : NULL), 0);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CUDA_MANAGED, saved_mg.alloc ? &saved_mg : NULL), 0);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_ROCM, saved_ro.alloc ? &saved_ro : NULL), 0);
  ck_assert_int_eq(cu.allocs, cu.frees);
  ck_assert_int_eq(mg.allocs, mg.frees);
}
END_TEST

START_TEST(test_copy_through_device_hooks) {
  counter_t vk = {0}, mt = {0};
  pf_allocator_t hooks = {&vk, counting_alloc, counting_free, counting_copy};
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, &hooks), 0);
  hooks.ctx = &mt;
  hooks.copy = NULL;
  ck_assert_int_eq(pf_allocator_set(PF_DEV_METAL, &hooks), 0);

  pf_object_t* a = cpu_iota(5);
  pf_object_t *dev, *back;
  ck_assert_int_eq(pf_tensor_to_device(a, pf_device(PF_DEV_VULKAN, 1), &dev), 0);
  ck_assert_int_eq(vk.copies, 1);
  ck_assert(pf_device_equal(vk.last_dst, pf_device(PF_DEV_VULKAN, 1)));
  ck_assert(pf_device_equal(vk.last_src, PF_DEVICE_CPU));
  ck_assert(pf_device_equal(pf_tensor_dltensor(dev)->device, pf_device(PF_DEV_VULKAN, 1)));
  ck_assert_int_eq(pf_tensor_to_device(dev, PF_DEVICE_CPU, &back), 0);
  ck_assert_int_eq(vk.copies, 2);
  ck_assert(pf_device_equal(vk.last_src, pf_device(PF_DEV_VULKAN, 1)));
  ck_assert(((double*)pf_dltensor_data(pf_tensor_dltensor(back)))[4] == 4.0);
  pf_object_release(back);
  /* between two devices of one type: through that type's hook */
  ck_assert_int_eq(pf_tensor_to_device(dev, pf_device(PF_DEV_VULKAN, 0), &back), 0);
  ck_assert_int_eq(vk.copies, 3);
  ck_assert(pf_device_equal(vk.last_dst, pf_device(PF_DEV_VULKAN, 0)));
  ck_assert(pf_device_equal(vk.last_src, pf_device(PF_DEV_VULKAN, 1)));
  pf_object_release(back);

  /* a failing hook: its error, or one of ours if it raised none; the new tensor is freed */
  pf_object_t* bad = (pf_object_t*)&bad;
  vk.copy_fail = 1;
  ck_assert_int_eq(pf_tensor_to_device(a, pf_device(PF_DEV_VULKAN, 0), &bad), -1);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("RuntimeError", "counting_copy: device lost");
  vk.copy_fail = 2;
  ck_assert_int_eq(pf_tensor_to_device(a, pf_device(PF_DEV_VULKAN, 0), &bad), -1);
  PF_ASSERT_RAISED("RuntimeError", "pf_tensor_to_device: the copy hook failed without an error");
  vk.copy_fail = 0;
  ck_assert_int_eq(vk.allocs, vk.frees + 1); /* only `dev` is alive */

  /* a device type packfn does not know may hold handles, not addresses (OpenCL's cl_mem), and
   * each of its devices memory of its own: its hook gets any two buffers, also ones whose
   * values overlap or are equal (refused as an overlap, or skipped as the very same bytes,
   * before; review) */
  DLTensor d4 = *pf_tensor_dltensor(dev), d4s = d4;
  int64_t four = 4;
  d4.shape = &four;
  d4s.shape = &four;
  d4s.byte_offset += sizeof(double);
  int copies = vk.copies;
  ck_assert_int_eq(pf_dltensor_copy(&d4s, &d4), 0);
  ck_assert_int_eq(vk.copies, copies + 1);
  DLTensor other = d4;
  other.device.device_id = 0; /* vulkan:0, same address as d4 on vulkan:1 */
  ck_assert_int_eq(pf_dltensor_copy(&other, &d4), 0);
  ck_assert_int_eq(vk.copies, copies + 2);
  ck_assert(pf_device_equal(vk.last_dst, pf_device(PF_DEV_VULKAN, 0)));

  /* no copy hook; two different device types */
  ck_assert_int_eq(pf_tensor_to_device(a, pf_device(PF_DEV_METAL, 0), &bad), -1);
  PF_ASSERT_RAISED("NotImplementedError",
                   "pf_tensor_to_device: the allocator of device type metal (8) has no copy hook");
  ck_assert_int_eq(pf_tensor_to_device(dev, pf_device(PF_DEV_METAL, 0), &bad), -1);
  PF_ASSERT_RAISED("NotImplementedError",
                   "pf_tensor_to_device: cannot copy from vulkan:1 to metal:0 (different device "
                   "types)");
  ck_assert_int_eq(pf_allocator_set(PF_DEV_METAL, NULL), 0);
  ck_assert_int_eq(pf_tensor_to_device(a, pf_device(PF_DEV_METAL, 0), &bad), -1);
  PF_ASSERT_RAISED("KeyError", "pf_tensor_to_device: no allocator for device type metal (8)");
  ck_assert_int_eq(pf_tensor_to_device(a, pf_device(PF_DEV_CPU, -1), &bad), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_tensor_to_device: argument device: expected a device index >= 0, got -1");
  /* the copy of a device tensor whose allocator was removed */
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, NULL), 0);
  ck_assert_int_eq(pf_tensor_to_device(dev, PF_DEVICE_CPU, &bad), -1);
  PF_ASSERT_RAISED("KeyError", "pf_tensor_to_device: no allocator for device type vulkan (7)");
  ck_assert_int_eq(pf_tensor_to_device(NULL, PF_DEVICE_CPU, &bad), -1);
  PF_ASSERT_RAISED("TypeError", "pf_tensor_to_device: argument tensor: expected a Tensor");
  ck_assert_int_eq(pf_tensor_to_device(a, PF_DEVICE_CPU, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  pf_object_release(dev); /* still frees through the hooks it was made with */
  ck_assert_int_eq(vk.allocs, vk.frees);
  ck_assert_int_eq(mt.allocs, mt.frees);
  pf_object_release(a);
}
END_TEST

/* ---- streams ---- */

static void* other_thread_stream(void* arg) {
  (void)arg;
  return pf_stream_get(pf_device(PF_DEV_CUDA, 0));
}

START_TEST(test_streams) {
  DLDevice d0 = pf_device(PF_DEV_CUDA, 0), d1 = pf_device(PF_DEV_CUDA, 1);
  int s0, s1, s2;
  void* prev = &prev;
  ck_assert_ptr_null(pf_stream_get(d0));
  ck_assert_int_eq(pf_stream_set(d0, &s0, &prev), 0);
  ck_assert_ptr_null(prev);
  ck_assert_int_eq(pf_stream_set(d1, &s1, NULL), 0);
  ck_assert_ptr_eq(pf_stream_get(d0), &s0);
  ck_assert_ptr_eq(pf_stream_get(d1), &s1);
  ck_assert_ptr_null(pf_stream_get(pf_device(PF_DEV_ROCM, 0)));
  ck_assert_int_eq(pf_stream_set(d0, &s2, &prev), 0);
  ck_assert_ptr_eq(prev, &s0);
  /* another thread has its own streams */
  pthread_t th;
  void* seen = &seen;
  ck_assert_int_eq(pthread_create(&th, NULL, other_thread_stream, NULL), 0);
  ck_assert_int_eq(pthread_join(th, &seen), 0);
  ck_assert_ptr_null(seen);
  /* back to the defaults */
  ck_assert_int_eq(pf_stream_set(d0, NULL, &prev), 0);
  ck_assert_ptr_eq(prev, &s2);
  ck_assert_ptr_null(pf_stream_get(d0));
  ck_assert_ptr_eq(pf_stream_get(d1), &s1);
  ck_assert_int_eq(pf_stream_set(d1, NULL, NULL), 0);
  ck_assert_int_eq(pf_stream_set(d1, NULL, &prev), 0);
  ck_assert_ptr_null(prev);
  PF_ASSERT_NO_ERROR();
}
END_TEST

START_TEST(test_streams_full) {
  int streams[PF_STREAM_MAX_DEVICES + 1];
  for (int i = 0; i < PF_STREAM_MAX_DEVICES; ++i)
    ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, i), &streams[i], NULL), 0);
  /* replacing one that is there still works when the table is full */
  ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, 3), &streams[4], NULL), 0);
  void* prev = &prev;
  ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, PF_STREAM_MAX_DEVICES),
                                 &streams[PF_STREAM_MAX_DEVICES], &prev),
                   -1);
  ck_assert_ptr_null(prev);
  PF_ASSERT_RAISED("RuntimeError",
                   "pf_stream_set: cannot make a stream current on cuda:32: this thread already "
                   "holds non-default streams for 32 devices");
  ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, PF_STREAM_MAX_DEVICES), NULL, NULL), 0);
  for (int i = 0; i < PF_STREAM_MAX_DEVICES; ++i)
    ck_assert_int_eq(pf_stream_set(pf_device(PF_DEV_CUDA, i), NULL, NULL), 0);
  ck_assert_ptr_null(pf_stream_get(pf_device(PF_DEV_CUDA, 0)));
}
END_TEST

/* Strided host copies over several axes and element sizes; invalid descriptions raise. */
START_TEST(test_copy_strided_and_invalid) {
  /* a 3-D int16 tensor permuted (2, 0, 1): pf_tensor_to_device gives a contiguous copy */
  int64_t shape[3] = {2, 3, 4};
  pf_object_t *t, *p, *c;
  ck_assert_int_eq(pf_tensor_empty(shape, 3, PF_DTYPE_INT16, PF_DEVICE_CPU, &t), 0);
  int16_t* tp = pf_dltensor_data(pf_tensor_dltensor(t));
  for (int i = 0; i < 24; ++i)
    tp[i] = (int16_t)i;
  int32_t axes[3] = {2, 0, 1};
  ck_assert_int_eq(pf_tensor_permute(t, axes, &p), 0);
  ck_assert(!pf_dltensor_is_contiguous(pf_tensor_dltensor(p)));
  ck_assert_int_eq(pf_tensor_to_device(p, PF_DEVICE_CPU, &c), 0);
  DLTensor* cd = pf_tensor_dltensor(c);
  ck_assert(pf_dltensor_is_contiguous(cd));
  ck_assert_int_eq(cd->shape[0], 4);
  ck_assert_int_eq(cd->shape[2], 3);
  const int16_t* cv = pf_dltensor_data(cd);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        ck_assert_int_eq(cv[(k * 2 + i) * 3 + j], (i * 3 + j) * 4 + k);
  pf_object_release(c);
  /* a reversed uint8 axis (negative stride), and a 0-d tensor */
  pf_object_t *u, *r, *ru;
  int64_t five = 5;
  ck_assert_int_eq(pf_tensor_empty(&five, 1, PF_DTYPE_UINT8, PF_DEVICE_CPU, &u), 0);
  uint8_t* up = pf_dltensor_data(pf_tensor_dltensor(u));
  for (int i = 0; i < 5; ++i)
    up[i] = (uint8_t)(10 + i);
  ck_assert_int_eq(pf_tensor_slice(u, 0, 4, -6, -1, &r), 0);
  ck_assert_int_eq(pf_tensor_to_device(r, PF_DEVICE_CPU, &ru), 0);
  const uint8_t* rp = pf_dltensor_data(pf_tensor_dltensor(ru));
  ck_assert(rp[0] == 14 && rp[4] == 10);
  pf_object_release(ru);
  pf_object_release(r);
  pf_object_t *s0, *s0c;
  ck_assert_int_eq(pf_tensor_select(u, 0, 3, &s0), 0);
  ck_assert_int_eq(pf_tensor_to_device(s0, PF_DEVICE_CPU, &s0c), 0);
  ck_assert_int_eq(*(uint8_t*)pf_dltensor_data(pf_tensor_dltensor(s0c)), 13);
  pf_object_release(s0c);
  pf_object_release(s0);
  /* elements smaller than a byte cannot be copied with strides */
  int64_t i4shape[2] = {2, 4}, i4strides[2] = {1, 2};
  uint8_t bytes[4] = {0};
  DLTensor i4 = {bytes, PF_DEVICE_CPU, 2, {PF_DL_INT, 4, 1}, i4shape, i4strides, 0};
  uint8_t out4[4];
  DLTensor o4 = {out4, PF_DEVICE_CPU, 2, {PF_DL_INT, 4, 1}, i4shape, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&o4, &i4), -1);
  PF_ASSERT_RAISED("NotImplementedError", "strided copies of int4");
  /* descriptions a tensor could not have: raised, never read */
  int64_t neg[1] = {-3};
  float f[4];
  DLTensor bad = {f, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT32, neg, NULL, 0};
  DLTensor bad2 = bad;
  ck_assert_int_eq(pf_dltensor_copy(&bad, &bad2), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst");
  DLTensor ok = *pf_tensor_dltensor(t);
  DLTensor noshape = ok;
  noshape.shape = NULL;
  ck_assert_int_eq(pf_dltensor_copy(&ok, &noshape), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument src");
  DLTensor nodata = ok;
  nodata.data = NULL;
  ck_assert_int_eq(pf_dltensor_copy(&nodata, &ok), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst");
  pf_object_release(p);
  pf_object_release(u);
  pf_object_release(t);
}
END_TEST

/* A strided host tensor bound for a device is gathered on the host, then copied once through
 * the device's hook; a strided device tensor is refused. */
START_TEST(test_copy_strided_to_device) {
  counter_t vk = {0};
  pf_allocator_t hooks = {&vk, counting_alloc, counting_free, counting_copy};
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, &hooks), 0);
  pf_object_t* a = cpu_iota(8);
  pf_object_t *sl, *dev, *back, *dsl;
  ck_assert_int_eq(pf_tensor_slice(a, 0, 1, 8, 3, &sl), 0); /* 1, 4, 7 */
  ck_assert_int_eq(pf_tensor_to_device(sl, pf_device(PF_DEV_VULKAN, 0), &dev), 0);
  ck_assert_int_eq(vk.copies, 1);
  ck_assert_int_eq(pf_tensor_to_device(dev, PF_DEVICE_CPU, &back), 0);
  const double* bp = pf_dltensor_data(pf_tensor_dltensor(back));
  ck_assert(bp[0] == 1.0 && bp[1] == 4.0 && bp[2] == 7.0);
  ck_assert_int_eq(pf_tensor_slice(dev, 0, 0, 3, 2, &dsl), 0);
  pf_object_t* bad = (pf_object_t*)&bad;
  ck_assert_int_eq(pf_tensor_to_device(dsl, PF_DEVICE_CPU, &bad), -1);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("ValueError", "pf_tensor_to_device: argument src: expected a contiguous "
                                 "tensor (copies to or from a device need both), got strides "
                                 "(2,)");
  pf_object_release(dsl);
  pf_object_release(back);
  pf_object_release(dev);
  pf_object_release(sl);
  pf_object_release(a);
  ck_assert_int_eq(vk.allocs, vk.frees);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, NULL), 0);
}
END_TEST

/* Elements smaller than a byte: a copy whose last element ends inside a byte writes only that
 * element's bits; the rest of the byte belongs to whatever lies past dst (the next element of
 * the tensor dst is a prefix view of), and keeps its value (review: the whole byte was copied,
 * so copying into a prefix of an int4 tensor overwrote the element after it). */
START_TEST(test_copy_subbyte_keeps_bits_past_the_end) {
  int64_t four = 4, three = 3;
  DLDataType int4 = pf_dtype(PF_DL_INT, 4, 1);
  pf_object_t *t, *prefix, *src;
  ck_assert_int_eq(pf_tensor_empty(&four, 1, int4, PF_DEVICE_CPU, &t), 0);
  uint8_t* tp = pf_dltensor_data(pf_tensor_dltensor(t));
  tp[0] = 0x21; /* elements 1, 2, 3, 4: element i in bits 4i..4i+3 (DLPack's bit order) */
  tp[1] = 0x43;
  ck_assert_int_eq(pf_tensor_slice(t, 0, 0, 3, 1, &prefix), 0);
  ck_assert_int_eq(pf_tensor_empty(&three, 1, int4, PF_DEVICE_CPU, &src), 0);
  uint8_t* sp = pf_dltensor_data(pf_tensor_dltensor(src));
  sp[0] = 0x99;
  sp[1] = 0xf9; /* 9, 9, 9 and four bits past the end */
  ck_assert_int_eq(pf_dltensor_copy(pf_tensor_dltensor(prefix), pf_tensor_dltensor(src)), 0);
  ck_assert_uint_eq(tp[0], 0x99);
  ck_assert_uint_eq(tp[1], 0x49); /* element 3 (4) kept */
  pf_object_release(src);
  pf_object_release(prefix);
  pf_object_release(t);
  /* overlapping sides (moved as memmove does): dst's bits past its end as they were before */
  uint8_t buf[3] = {0x21, 0x43, 0x65};
  DLTensor dst = {buf, PF_DEVICE_CPU, 1, int4, &three, NULL, 0};
  DLTensor from = dst;
  from.byte_offset = 1; /* elements 3, 4, 5 */
  ck_assert_int_eq(pf_dltensor_copy(&dst, &from), 0);
  ck_assert_uint_eq(buf[0], 0x43);
  ck_assert_uint_eq(buf[1], 0x45);
  ck_assert_uint_eq(buf[2], 0x65);
  /* five uint1 elements, and a 0-d int4 */
  int64_t five = 5;
  uint8_t bits_dst = 0xa0, bits_src = 0xff;
  DLTensor b_dst = {&bits_dst, PF_DEVICE_CPU, 1, pf_dtype(PF_DL_UINT, 1, 1), &five, NULL, 0};
  DLTensor b_src = b_dst;
  b_src.data = &bits_src;
  ck_assert_int_eq(pf_dltensor_copy(&b_dst, &b_src), 0);
  ck_assert_uint_eq(bits_dst, 0xbf);
  uint8_t s_dst = 0xa7, s_src = 0x03;
  DLTensor z_dst = {&s_dst, PF_DEVICE_CPU, 0, int4, NULL, NULL, 0};
  DLTensor z_src = z_dst;
  z_src.data = &s_src;
  ck_assert_int_eq(pf_dltensor_copy(&z_dst, &z_src), 0);
  ck_assert_uint_eq(s_dst, 0xa3);
}
END_TEST

/* A destination with stride 0 along an axis of more than one element (a broadcast view) holds
 * one element where several are copied: refused, as PyTorch refuses (review: the last one won,
 * silently). A broadcast source is a fill, and a stride 0 where the extent is 1 moves nothing. */
START_TEST(test_copy_broadcast_dst_refused) {
  double one[1] = {0}, vals[3] = {1, 2, 3}, out[3] = {0};
  int64_t three = 3, zero = 0;
  DLTensor bdst = {one, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, &three, &zero, 0};
  DLTensor src = {vals, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, &three, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&bdst, &src), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst: expected a stride other than 0 "
                                 "along axis 0 (3 elements would share one), got strides (0,)");
  ck_assert(one[0] == 0.0);
  int64_t shape2[2] = {2, 3}, strides2[2] = {0, 1};
  double six[6] = {0};
  DLTensor bdst2 = {one, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape2, strides2, 0};
  DLTensor src2 = {six, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape2, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&bdst2, &src2), -1);
  PF_ASSERT_RAISED("ValueError", "along axis 0 (2 elements would share one), got strides (0, 1)");
  /* a broadcast source fills dst */
  DLTensor bsrc = {vals + 1, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, &three, &zero, 0};
  DLTensor odst = {out, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, &three, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&odst, &bsrc), 0);
  ck_assert(out[0] == 2.0 && out[1] == 2.0 && out[2] == 2.0);
  /* stride 0 on an axis of one element: an ordinary destination */
  int64_t shape3[2] = {1, 3}, strides3[2] = {0, 1};
  DLTensor dst3 = {out, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape3, strides3, 0};
  DLTensor src3 = {vals, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape3, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&dst3, &src3), 0);
  ck_assert(out[0] == 1.0 && out[2] == 3.0);
}
END_TEST

/* A destination whose non-zero strides still let two of its elements share one place (shape
 * (2, 2), strides (1, 1): elements (0, 1) and (1, 0) are one double) is refused as a broadcast
 * is (review: the copy was accepted and the later source element overwrote the earlier one,
 * silently). Layouts whose elements interleave without sharing a place (shape (3, 2), strides
 * (2, 3): offsets 0, 3, 2, 5, 4, 7) stay accepted, as do reversed and transposed ones. */
START_TEST(test_copy_overlapping_dst_refused) {
  double buf[8] = {0}, vals[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 2}, ones[2] = {1, 1};
  DLTensor dst = {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, ones, 0};
  DLTensor src = {vals, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&dst, &src), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst: expected strides under which "
                                 "no two elements share a place, got strides (1, 1) for shape "
                                 "(2, 2)");
  ck_assert(buf[0] == 0.0 && buf[1] == 0.0 && buf[2] == 0.0);
  /* as many places as elements, but two shared: offsets 0, 2, 4 and 2, 4, 6 (negative too) */
  int64_t shape23[2] = {2, 3}, st23[2] = {2, 2}, neg23[2] = {-2, 2};
  DLTensor d23 = {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape23, st23, 0};
  DLTensor s23 = {vals, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape23, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&d23, &s23), -1);
  PF_ASSERT_RAISED("ValueError", "got strides (2, 2) for shape (2, 3)");
  d23.strides = neg23;
  d23.byte_offset = 2 * sizeof(double);
  ck_assert_int_eq(pf_dltensor_copy(&d23, &s23), -1);
  PF_ASSERT_RAISED("ValueError", "got strides (-2, 2) for shape (2, 3)");
  /* interleaved without sharing: every element lands in its own place */
  int64_t shape32[2] = {3, 2}, st32[2] = {2, 3};
  DLTensor d32 = {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape32, st32, 0};
  DLTensor s32 = {vals, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape32, NULL, 0};
  memset(buf, 0, sizeof buf);
  ck_assert_int_eq(pf_dltensor_copy(&d32, &s32), 0);
  const double want[8] = {1, 0, 3, 2, 5, 4, 0, 6};
  for (int i = 0; i < 8; ++i)
    ck_assert(buf[i] == want[i]);
  /* reversed and transposed destinations */
  int64_t rev[2] = {-2, -1}, tr[2] = {1, 3};
  DLTensor dr = {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape32, rev, 5 * sizeof(double)};
  ck_assert_int_eq(pf_dltensor_copy(&dr, &s32), 0);
  ck_assert(buf[5] == 1.0 && buf[0] == 6.0);
  DLTensor dt = {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape32, tr, 0};
  ck_assert_int_eq(pf_dltensor_copy(&dt, &s32), 0);
  ck_assert(buf[0] == 1.0 && buf[3] == 2.0 && buf[1] == 3.0 && buf[5] == 6.0);
  /* interleaved, and too many elements to list their offsets (2^59 uint8 at addresses never
   * read): MemoryError, nothing copied */
  if (UINTPTR_MAX == UINT64_MAX) {
    int64_t big[2] = {INT64_C(1) << 58, 2}, bigst[2] = {2, 3};
    DLTensor bd = {(void*)((uintptr_t)1 << 60), PF_DEVICE_CPU, 2, PF_DTYPE_UINT8, big, bigst, 0};
    DLTensor bs = {(void*)((uintptr_t)1 << 62), PF_DEVICE_CPU, 2, PF_DTYPE_UINT8, big, NULL, 0};
    ck_assert_int_eq(pf_dltensor_copy(&bd, &bs), -1);
    PF_ASSERT_RAISED("MemoryError", "pf_dltensor_copy: out of memory allocating "
                                    "4611686018427387904 bytes");
  }
  /* a source that shares places is a fill, as a broadcast one is */
  double out[4] = {0};
  DLTensor odst = {out, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, NULL, 0};
  DLTensor osrc = {vals, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, ones, 0};
  ck_assert_int_eq(pf_dltensor_copy(&odst, &osrc), 0);
  ck_assert(out[0] == 1.0 && out[1] == 2.0 && out[2] == 2.0 && out[3] == 3.0);
}
END_TEST

/* A strided layout whose element offsets span exactly INT64_MAX (valid: every offset fits, and
 * the bytes lie inside the address space) is refused with a ValueError before any byte is
 * touched; computing its span's size overflowed int64 (undefined behaviour, trapped by UBSan;
 * review). The address is never read. */
START_TEST(test_copy_strided_span_of_int64_max) {
  if (UINTPTR_MAX < UINT64_MAX)
    return; /* the address below needs 64 bits */
  int64_t shape[2] = {2, 2}, strides[2] = {-(INT64_C(1) << 62), (INT64_C(1) << 62) - 1};
  uint8_t bytes[4] = {0};
  DLTensor dst = {
      (void*)(uintptr_t)(UINT64_C(1) << 63), PF_DEVICE_CPU, 2, PF_DTYPE_UINT8, shape, strides, 0};
  DLTensor src = {bytes, PF_DEVICE_CPU, 2, PF_DTYPE_UINT8, shape, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&dst, &src), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: the strides of dst reach more bytes than "
                                 "memory has");
}
END_TEST

/* Host copies between layouts: one side's strides NULL (compact) and the other's strided,
 * rows padded (runs of the last axis), a destination whose stride 0 is on an axis of one
 * element (nothing shared), a cuda_host or rocm_host side (host memory, copied directly), and
 * the refusals that name src: strided sub-byte elements, strides whose span has no bytes. */
START_TEST(test_copy_between_layouts) {
  double buf[12], out[12];
  for (int i = 0; i < 12; ++i)
    buf[i] = i;
  int64_t shape[2] = {2, 3}, padded[2] = {4, 1}, cols[2] = {1, 2};
  /* src rows padded to 4 (elements 0..2, 4..6), dst compact with NULL strides */
  DLTensor src = {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, padded, 0};
  DLTensor dst = {out, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, NULL, 0};
  memset(out, 0, sizeof out);
  ck_assert_int_eq(pf_dltensor_copy(&dst, &src), 0);
  const double want[6] = {0, 1, 2, 4, 5, 6};
  for (int i = 0; i < 6; ++i)
    ck_assert(out[i] == want[i]);
  ck_assert(out[6] == 0.0);
  /* src compact (NULL strides), dst column-major (strides 1, 2) */
  memset(out, 0, sizeof out);
  src.strides = NULL;
  dst.strides = cols;
  ck_assert_int_eq(pf_dltensor_copy(&dst, &src), 0);
  const double colmajor[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i)
    ck_assert(out[i] == colmajor[i]);
  /* dst of one row with stride 0 on that row and a column stride of 2: not broadcast */
  int64_t row[2] = {1, 3}, zero_row[2] = {0, 2};
  for (int i = 0; i < 12; ++i)
    out[i] = -1;
  dst.shape = row;
  dst.strides = zero_row;
  src.shape = row;
  ck_assert_int_eq(pf_dltensor_copy(&dst, &src), 0);
  ck_assert(out[0] == 0.0 && out[1] == -1.0 && out[2] == 1.0 && out[3] == -1.0 && out[4] == 2.0);
  /* host memory of the CUDA and ROCm runtimes: copied by the host, no hook (none installed) */
  DLDevice hosts[2] = {pf_device(PF_DEV_ROCM_HOST, 0), pf_device(PF_DEV_CUDA_HOST, 0)};
  for (int k = 0; k < 2; ++k) {
    memset(out, 0, sizeof out);
    DLTensor h = {out, hosts[k], 2, PF_DTYPE_FLOAT64, shape, NULL, 0};
    DLTensor c = {buf, PF_DEVICE_CPU, 2, PF_DTYPE_FLOAT64, shape, padded, 0};
    ck_assert_int_eq(pf_dltensor_copy(&h, &c), 0);
    for (int i = 0; i < 6; ++i)
      ck_assert(out[i] == want[i]);
  }
  /* strided sub-byte elements in src (dst compact): refused, naming src */
  uint8_t nibbles[4] = {0x21, 0x43, 0x65, 0x87}, got[2] = {0xaa, 0xaa};
  int64_t four[1] = {4}, two[1] = {2};
  DLTensor s4 = {nibbles, PF_DEVICE_CPU, 1, pf_dtype(PF_DL_INT, 4, 1), four, two, 0};
  DLTensor d4 = {got, PF_DEVICE_CPU, 1, pf_dtype(PF_DL_INT, 4, 1), four, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&d4, &s4), -1);
  PF_ASSERT_RAISED("NotImplementedError",
                   "pf_dltensor_copy: argument src: strided copies of int4 (elements smaller than "
                   "a byte) are not supported, got strides (2,)");
  ck_assert(got[0] == 0xaa && got[1] == 0xaa);
  /* and in dst (src compact) */
  s4.strides = NULL;
  d4.strides = two;
  ck_assert_int_eq(pf_dltensor_copy(&d4, &s4), -1);
  PF_ASSERT_RAISED("NotImplementedError",
                   "pf_dltensor_copy: argument dst: strided copies of int4 (elements smaller than "
                   "a byte) are not supported, got strides (2,)");
  ck_assert(got[0] == 0xaa && got[1] == 0xaa);
  /* src strides whose span, twice over in bytes, passes int64: refused before any byte moves */
  if (UINTPTR_MAX >= UINT64_MAX) {
    uint8_t small[2] = {0};
    int64_t far[1] = {(int64_t)1 << 62};
    DLTensor sf = {(void*)(uintptr_t)0x1000, PF_DEVICE_CPU, 1, PF_DTYPE_UINT8, two, far, 0};
    DLTensor df = {small, PF_DEVICE_CPU, 1, PF_DTYPE_UINT8, two, NULL, 0};
    ck_assert_int_eq(pf_dltensor_copy(&df, &sf), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: the strides of src reach more bytes than "
                                   "memory has");
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

/* Copies between device memories whose addresses tell their overlap (CUDA's unified
 * addressing across devices, ROCm's): the very same bytes are left alone with no hook called
 * (none is installed: a call would raise KeyError), a partial overlap is refused; memories of
 * two runtimes are refused whatever their addresses; a strided side is named. */
START_TEST(test_copy_device_overlaps) {
  int64_t four[1] = {4}, two[1] = {2};
  void* at = (void*)(uintptr_t)0x100000;
  void* next = (void*)(uintptr_t)0x100008;
  const int32_t types[2] = {PF_DEV_CUDA, PF_DEV_ROCM};
  for (int k = 0; k < 2; ++k) {
    DLTensor d = {at, pf_device(types[k], 0), 1, PF_DTYPE_FLOAT64, four, NULL, 0};
    DLTensor s = {at, pf_device(types[k], 1), 1, PF_DTYPE_FLOAT64, four, NULL, 0};
    ck_assert_int_eq(pf_dltensor_copy(&d, &s), 0);
    s.data = next;
    ck_assert_int_eq(pf_dltensor_copy(&d, &s), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst: overlaps src; a copy on a "
                                   "device needs separate memory");
  }
  /* the runtime's pinned host memory (cuda_host, rocm_host) is in that one address space too:
   * a side there partly overlapping a device side reached the copy hook (cudaMemcpyAsync,
   * undefined for overlapping memory; review) */
  const int32_t pinned[3][2] = {{PF_DEV_CUDA_HOST, PF_DEV_CUDA},
                                {PF_DEV_CUDA_HOST, PF_DEV_CUDA_MANAGED},
                                {PF_DEV_ROCM_HOST, PF_DEV_ROCM}};
  for (int k = 0; k < 3; ++k) {
    DLTensor h = {at, pf_device(pinned[k][0], 0), 1, PF_DTYPE_FLOAT64, four, NULL, 0};
    DLTensor g = {at, pf_device(pinned[k][1], 1), 1, PF_DTYPE_FLOAT64, four, NULL, 0};
    ck_assert_int_eq(pf_dltensor_copy(&h, &g), 0); /* the very same bytes */
    ck_assert_int_eq(pf_dltensor_copy(&g, &h), 0);
    g.data = next;
    ck_assert_int_eq(pf_dltensor_copy(&h, &g), -1);
    PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst: overlaps src; a copy on a "
                                   "device needs separate memory");
    ck_assert_int_eq(pf_dltensor_copy(&g, &h), -1);
    PF_ASSERT_RAISED("ValueError", "argument dst: overlaps src");
  }
  DLTensor d = {at, pf_device(PF_DEV_CUDA, 0), 1, PF_DTYPE_FLOAT64, four, NULL, 0};
  DLTensor s = {at, pf_device(PF_DEV_VULKAN, 0), 1, PF_DTYPE_FLOAT64, four, NULL, 0};
  ck_assert_int_eq(pf_dltensor_copy(&d, &s), -1);
  PF_ASSERT_RAISED(
      "NotImplementedError",
      "pf_dltensor_copy: cannot copy from vulkan:0 to cuda:0 (different device types)");
  /* a strided host src bound for a device through pf_dltensor_copy (no staging there) */
  double buf[4] = {0};
  DLTensor hs = {buf, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, two, two, 0};
  d.shape = two;
  ck_assert_int_eq(pf_dltensor_copy(&d, &hs), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument src: expected a contiguous tensor "
                                 "(copies to or from a device need both), got strides (2,)");
  /* and a strided device dst */
  DLTensor hd = {buf, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, two, NULL, 0};
  d.strides = two;
  ck_assert_int_eq(pf_dltensor_copy(&d, &hd), -1);
  PF_ASSERT_RAISED("ValueError", "pf_dltensor_copy: argument dst: expected a contiguous tensor "
                                 "(copies to or from a device need both), got strides (2,)");
}
END_TEST

/* A tensor made by hand (another runtime's) copies to a device like packfn's own. */
typedef struct {
  pf_object_t header;
  DLTensor dl;
  int64_t shape[1], strides[1];
  double data[6];
} hand_tensor_t;

static void hand_deleter(void* self, int flags) {
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

/* The staging of a strided host tensor bound for a device: a copy of a valid foreign tensor
 * arrives; the staged copy's refusal (strided sub-byte elements) and a failure to allocate the
 * staging buffer raise, leaving no device memory behind. */
START_TEST(test_copy_staged_to_device_failures) {
  counter_t vk = {0};
  pf_allocator_t hooks = {&vk, counting_alloc, counting_free, counting_copy};
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, &hooks), 0);
  pf_object_t* f;
  ck_assert_int_eq(pf_object_alloc(sizeof(hand_tensor_t), PF_TYPE_TENSOR, hand_deleter, &f), 0);
  hand_tensor_t* h = (hand_tensor_t*)f;
  for (int i = 0; i < 6; ++i)
    h->data[i] = 10 + i;
  h->shape[0] = 3;
  h->strides[0] = 2;
  DLTensor dl = {h->data, PF_DEVICE_CPU, 1, PF_DTYPE_FLOAT64, h->shape, h->strides, 0};
  h->dl = dl;
  pf_object_t *dev, *back;
  ck_assert_int_eq(pf_tensor_to_device(f, pf_device(PF_DEV_VULKAN, 0), &dev), 0);
  ck_assert_int_eq(pf_tensor_to_device(dev, PF_DEVICE_CPU, &back), 0);
  const double* bp = pf_dltensor_data(pf_tensor_dltensor(back));
  ck_assert(bp[0] == 10.0 && bp[1] == 12.0 && bp[2] == 14.0);
  pf_object_release(back);
  pf_object_release(dev);
  /* strided int4: the staging copy refuses it */
  h->dl.dtype = pf_dtype(PF_DL_INT, 4, 1);
  pf_object_t* bad = (pf_object_t*)&bad;
  ck_assert_int_eq(pf_tensor_to_device(f, pf_device(PF_DEV_VULKAN, 0), &bad), -1);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("NotImplementedError", "pf_tensor_to_device: argument src: strided copies of "
                                          "int4");
  /* no CPU memory for the staging buffer */
  h->dl.dtype = PF_DTYPE_FLOAT64;
  counter_t cpu = {.fail = 1};
  pf_allocator_t failing = {&cpu, counting_alloc, counting_free, counting_copy};
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CPU, &failing), 0);
  ck_assert_int_eq(pf_tensor_to_device(f, pf_device(PF_DEV_VULKAN, 0), &bad), -1);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CPU, NULL), 0);
  ck_assert_ptr_null(bad);
  PF_ASSERT_RAISED("MemoryError", "counting_alloc: no memory");
  ck_assert_int_eq(vk.copies, 2); /* there and back, the first time only */
  ck_assert_int_eq(vk.allocs, 3);
  ck_assert_int_eq(vk.allocs, vk.frees);
  pf_object_release(f);
  ck_assert_int_eq(pf_allocator_set(PF_DEV_VULKAN, NULL), 0);
}
END_TEST

/* packfn's CPU alloc hook with a host's own free (and ctx): tensors free through the hooks
 * installed, not through pf_tensor_empty's shortcut for the built-in allocator. */
typedef struct {
  pf_allocator_t builtin;
  int frees;
} forward_t;

static int forwarding_alloc(void* ctx, DLDevice device, size_t nbytes, size_t alignment,
                            void** out) {
  forward_t* f = ctx;
  return f->builtin.alloc(f->builtin.ctx, device, nbytes, alignment, out);
}

static void forwarding_free(void* ctx, DLDevice device, void* ptr) {
  forward_t* f = ctx;
  f->frees++;
  f->builtin.free(f->builtin.ctx, device, ptr);
}

START_TEST(test_cpu_allocator_own_free) {
  forward_t f = {0};
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CPU, &f.builtin), 0);
  int64_t shape[1] = {16};
  pf_object_t* t;
  /* the built-in alloc itself, with another free; then another alloc with the built-in free */
  pf_allocator_t hooks[2] = {{&f, f.builtin.alloc, forwarding_free, NULL},
                             {&f, forwarding_alloc, f.builtin.free, NULL}};
  for (int k = 0; k < 2; ++k) {
    f.frees = 0;
    ck_assert_int_eq(pf_allocator_set(PF_DEV_CPU, &hooks[k]), 0);
    ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t), 0);
    ck_assert_int_eq(pf_allocator_set(PF_DEV_CPU, NULL), 0);
    pf_object_release(t);
    ck_assert_int_eq(f.frees, k == 0 ? 1 : 0);
  }
}
END_TEST

/* Device strings and hooks at the edges: a KeyError's advice for each of CUDA's device types
 * (link libpackfn_cuda) and another type's (install one); the built-in CPU hooks installed with
 * a context of their own (then not pf_tensor_empty's shortcut: the tensor still allocates and
 * frees through them); current streams of devices TVM-FFI's table could not index (a negative
 * or large type or index) kept in packfn's table. */
START_TEST(test_device_edges) {
  int64_t one = 1;
  pf_object_t* t = (pf_object_t*)&t;
  const int32_t cuda_types[3] = {PF_DEV_CUDA, PF_DEV_CUDA_HOST, PF_DEV_CUDA_MANAGED};
  for (int k = 0; k < 3; ++k) {
    pf_allocator_t saved;
    ck_assert_int_eq(pf_allocator_get(cuda_types[k], &saved), 0);
    if (saved.alloc) /* libpackfn_cuda is linked in: nothing to see */
      continue;
    ck_assert_int_eq(pf_tensor_empty(&one, 1, PF_DTYPE_INT8, pf_device(cuda_types[k], 0), &t), -1);
    ck_assert_ptr_null(t);
    PF_ASSERT_RAISED("KeyError", "; link libpackfn_cuda (or install one with pf_allocator_set)");
  }
  ck_assert_int_eq(pf_tensor_empty(&one, 1, PF_DTYPE_INT8, pf_device(PF_DEV_METAL, 0), &t), -1);
  PF_ASSERT_RAISED("KeyError", "no allocator for device type metal (8); install one with "
                               "pf_allocator_set");

  pf_allocator_t builtin, with_ctx;
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CPU, &builtin), 0);
  with_ctx = builtin;
  with_ctx.ctx = &with_ctx; /* the built-in hooks ignore it */
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CPU, &with_ctx), 0);
  int64_t shape[1] = {1000};
  ck_assert_int_eq(pf_tensor_empty(shape, 1, PF_DTYPE_FLOAT64, PF_DEVICE_CPU, &t), 0);
  double* p = pf_dltensor_data(pf_tensor_dltensor(t));
  ck_assert_uint_eq((uintptr_t)p % PF_TENSOR_ALIGNMENT, 0);
  p[0] = 1.0;
  p[999] = 2.0;
  ck_assert_int_eq(pf_allocator_set(PF_DEV_CPU, NULL), 0);
  pf_object_release(t); /* through the hooks it was made with */
  pf_allocator_t now;
  ck_assert_int_eq(pf_allocator_get(PF_DEV_CPU, &now), 0);
  ck_assert(now.alloc == builtin.alloc && now.free == builtin.free && now.ctx == NULL);

  const DLDevice odd[4] = {
      {(DLDeviceType)-3, 0}, {(DLDeviceType)64, 0}, {kDLCUDA, -1}, {kDLCUDA, 1024}};
  int streams[4];
  for (int k = 0; k < 4; ++k) {
    void* prev = &prev;
    ck_assert_ptr_null(pf_stream_get(odd[k]));
    ck_assert_int_eq(pf_stream_set(odd[k], &streams[k], &prev), 0);
    ck_assert_ptr_null(prev);
  }
  for (int k = 0; k < 4; ++k) {
    ck_assert_ptr_eq(pf_stream_get(odd[k]), &streams[k]);
    void* prev = NULL;
    ck_assert_int_eq(pf_stream_set(odd[k], NULL, &prev), 0);
    ck_assert_ptr_eq(prev, &streams[k]);
    ck_assert_ptr_null(pf_stream_get(odd[k]));
  }
  PF_ASSERT_NO_ERROR();
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("device");
  TCase* tc = tcase_create("allocators");
  tcase_add_test(tc, test_allocator_get_set);
  tcase_add_test(tc, test_cpu_allocator_replaced);
  tcase_add_test(tc, test_allocator_failures);
  tcase_add_test(tc, test_cpu_allocator_own_free);
  tcase_add_test(tc, test_device_edges);
  suite_add_tcase(s, tc);
  tc = tcase_create("copies");
  tcase_add_test(tc, test_copy_cpu);
  tcase_add_test(tc, test_allocator_failures_copying_to_a_device);
  tcase_add_test(tc, test_copy_through_device_hooks);
  tcase_add_test(tc, test_copy_cuda_and_managed_share_hooks);
  tcase_add_test(tc, test_copy_strided_and_invalid);
  tcase_add_test(tc, test_copy_strided_to_device);
  tcase_add_test(tc, test_copy_subbyte_keeps_bits_past_the_end);
  tcase_add_test(tc, test_copy_broadcast_dst_refused);
  tcase_add_test(tc, test_copy_overlapping_dst_refused);
  tcase_add_test(tc, test_copy_strided_span_of_int64_max);
  tcase_add_test(tc, test_copy_between_layouts);
  tcase_add_test(tc, test_copy_device_overlaps);
  tcase_add_test(tc, test_copy_staged_to_device_failures);
  suite_add_tcase(s, tc);
  tc = tcase_create("streams");
  tcase_add_test(tc, test_streams);
  tcase_add_test(tc, test_streams_full);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
