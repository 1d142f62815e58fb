/* Tests of the object layer: the reference protocol with weak references and deleter flags,
 * objects built by hand as another runtime would, threads, and the type registry. */
#include <pthread.h>

#include "pf_test.h"

static int g_flags[8];
static int g_calls;

static void recording_deleter(void* self, int flags) {
  g_flags[g_calls++ & 7] = flags;
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

static void reset(void) {
  memset(g_flags, 0, sizeof g_flags);
  g_calls = 0;
}

START_TEST(test_alloc_initialises_header) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(64, PF_TYPE_OBJECT, recording_deleter, &obj), 0);
  ck_assert_uint_eq(obj->combined_ref_count, ((uint64_t)1 << 32) | 1);
  ck_assert_int_eq(obj->type_index, PF_TYPE_OBJECT);
  ck_assert_uint_eq(obj->padding, 0);
  ck_assert(obj->deleter == recording_deleter);
  ck_assert_int_eq(((unsigned char*)obj)[40], 0); /* zeroed payload */
  ck_assert_uint_eq((uintptr_t)obj % 16, 0);
  reset();
  pf_object_release(obj);
  ck_assert_int_eq(g_calls, 1);
  ck_assert_int_eq(g_flags[0], PF_DELETER_BOTH);
}
END_TEST

START_TEST(test_alloc_bad_input) {
  pf_object_t* obj = (pf_object_t*)1;
  ck_assert_int_eq(pf_object_alloc(8, PF_TYPE_OBJECT, recording_deleter, &obj), -1);
  ck_assert_ptr_null(obj);
  PF_ASSERT_RAISED("ValueError", "argument size");
  ck_assert_int_eq(pf_object_alloc(32, PF_TYPE_INT, recording_deleter, &obj), -1);
  PF_ASSERT_RAISED("ValueError", "type_index");
  ck_assert_int_eq(pf_object_alloc(32, PF_TYPE_OBJECT, NULL, &obj), -1);
  PF_ASSERT_RAISED("ValueError", "deleter");
  ck_assert_int_eq(pf_object_alloc(32, PF_TYPE_OBJECT, recording_deleter, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  ck_assert_int_eq(pf_object_alloc((size_t)1 << 60, PF_TYPE_OBJECT, recording_deleter, &obj), -1);
  PF_ASSERT_RAISED("MemoryError", "pf_object_alloc");
}
END_TEST

START_TEST(test_strong_then_weak) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(32, PF_TYPE_OBJECT, recording_deleter, &obj), 0);
  pf_object_retain(obj);
  ck_assert_uint_eq(pf_object_strong_count(obj), 2);
  pf_object_weak_retain(obj);
  ck_assert_uint_eq(pf_object_weak_count(obj), 2);
  reset();
  pf_object_release(obj);
  ck_assert_int_eq(g_calls, 0);
  pf_object_release(obj); /* contents die; memory stays for the weak reference */
  ck_assert_int_eq(g_calls, 1);
  ck_assert_int_eq(g_flags[0], PF_DELETER_STRONG);
  ck_assert_uint_eq(pf_object_strong_count(obj), 0);
  ck_assert_uint_eq(pf_object_weak_count(obj), 1);
  ck_assert_int_eq(pf_object_weak_lock(obj), 0);
  pf_object_weak_release(obj);
  ck_assert_int_eq(g_calls, 2);
  ck_assert_int_eq(g_flags[1], PF_DELETER_WEAK);
}
END_TEST

START_TEST(test_weak_lock_alive) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(32, PF_TYPE_OBJECT, recording_deleter, &obj), 0);
  pf_object_weak_retain(obj);
  ck_assert_int_eq(pf_object_weak_lock(obj), 1);
  ck_assert_uint_eq(pf_object_strong_count(obj), 2);
  reset();
  pf_object_release(obj);
  pf_object_release(obj);
  ck_assert_int_eq(g_calls, 1);
  pf_object_weak_release(obj);
  ck_assert_int_eq(g_calls, 2);
  ck_assert_int_eq(pf_object_weak_lock(NULL), 0);
}
END_TEST

START_TEST(test_null_is_noop) {
  pf_object_retain(NULL);
  pf_object_release(NULL);
  pf_object_weak_retain(NULL);
  pf_object_weak_release(NULL);
  ck_assert_uint_eq(pf_object_strong_count(NULL), 0);
}
END_TEST

/* An object laid out by hand per ABI.md, as another runtime would make it. */
typedef struct {
  uint64_t rc;
  int32_t type_index;
  uint32_t pad;
  void (*deleter)(void*, int);
  int64_t payload;
} foreign_obj_t;

static int g_foreign_contents_destroyed, g_foreign_freed;
static void foreign_deleter(void* self, int flags) {
  if (flags & 1)
    g_foreign_contents_destroyed++;
  if (flags & 2) {
    g_foreign_freed++;
    free(self);
  }
}

START_TEST(test_foreign_object) {
  foreign_obj_t* f = malloc(sizeof *f);
  f->rc = ((uint64_t)1 << 32) | 1;
  f->type_index = PF_TYPE_OBJECT;
  f->pad = 0;
  f->deleter = foreign_deleter;
  f->payload = 42;
  g_foreign_contents_destroyed = g_foreign_freed = 0;
  pf_object_t* obj = (pf_object_t*)f;
  pf_any_t v = pf_any_object(obj);
  pf_any_t owned;
  ck_assert_int_eq(pf_any_to_owned(&v, &owned), 0);
  ck_assert_uint_eq(f->rc & 0xffffffffu, 2);
  pf_object_weak_retain(obj);
  pf_any_release(&owned);
  pf_object_release(obj);
  ck_assert_int_eq(g_foreign_contents_destroyed, 1);
  ck_assert_int_eq(g_foreign_freed, 0);
  pf_object_weak_release(obj);
  ck_assert_int_eq(g_foreign_freed, 1);
}
END_TEST

/* A NULL deleter (memory owned by an arena or static storage, as TVM-FFI's protocol allows) is
 * skipped, never called: by the last strong release (flag 3, and flag 1 then the weak release's
 * flag 2), by the last weak release, and when a container drops the last reference. */
START_TEST(test_null_deleter_is_skipped) {
  static foreign_obj_t arena_owned[3];
  for (int i = 0; i < 3; ++i) {
    arena_owned[i].rc = ((uint64_t)1 << 32) | 1;
    arena_owned[i].type_index = PF_TYPE_OBJECT;
    arena_owned[i].deleter = NULL;
  }
  pf_object_t* both = (pf_object_t*)&arena_owned[0];
  pf_object_release(both); /* last strong, no weak: flag 3 (the count is left as it was) */
  ck_assert_uint_eq(pf_object_strong_count(both), 0);

  pf_object_t* weak = (pf_object_t*)&arena_owned[1];
  pf_object_weak_retain(weak);
  pf_object_release(weak); /* flag 1, a weak reference remains */
  ck_assert_int_eq(pf_object_weak_lock(weak), 0);
  pf_object_weak_release(weak); /* the last weak reference: flag 2 */
  ck_assert_uint_eq(arena_owned[1].rc, 0);

  pf_object_t* held = (pf_object_t*)&arena_owned[2];
  pf_any_t item = pf_any_object(held);
  pf_object_t* arr = NULL;
  ck_assert_int_eq(pf_array_create(&item, 1, &arr), 0); /* the array's own reference */
  pf_object_release(held);
  pf_object_release(arr); /* drops the last reference from the array's deleter */
  ck_assert_uint_eq(pf_object_strong_count(held), 0);
}
END_TEST

static void* retain_release_loop(void* arg) {
  pf_object_t* obj = arg;
  for (int i = 0; i < 200000; ++i) {
    pf_object_retain(obj);
    pf_object_retain(obj);
    pf_object_release(obj);
    pf_object_release(obj);
  }
  return NULL;
}

START_TEST(test_two_threads_no_lost_updates) {
  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(32, PF_TYPE_OBJECT, recording_deleter, &obj), 0);
  pthread_t a, b;
  pthread_create(&a, NULL, retain_release_loop, obj);
  pthread_create(&b, NULL, retain_release_loop, obj);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  ck_assert_uint_eq(obj->combined_ref_count, ((uint64_t)1 << 32) | 1);
  reset();
  pf_object_release(obj);
  ck_assert_int_eq(g_calls, 1);
}
END_TEST

static int g_race_destroyed;
static void race_deleter(void* self, int flags) {
  if (flags & 1)
    __atomic_fetch_add(&g_race_destroyed, 1, __ATOMIC_RELAXED);
  if (flags & 2)
    pf_object_free(self);
}
static void* weak_locker(void* arg) {
  pf_object_t* obj = arg;
  long gained = 0;
  for (int i = 0; i < 1000; ++i) {
    if (pf_object_weak_lock(obj)) {
      gained++;
      pf_object_release(obj);
    }
  }
  return (void*)gained;
}

START_TEST(test_weak_lock_races_last_release) {
  for (int round = 0; round < 200; ++round) {
    pf_object_t* obj;
    ck_assert_int_eq(pf_object_alloc(32, PF_TYPE_OBJECT, race_deleter, &obj), 0);
    pf_object_weak_retain(obj);
    g_race_destroyed = 0;
    pthread_t t;
    pthread_create(&t, NULL, weak_locker, obj);
    pf_object_release(obj);
    pthread_join(t, NULL);
    ck_assert_int_eq(g_race_destroyed, 1);
    ck_assert_int_eq(pf_object_weak_lock(obj), 0);
    pf_object_weak_release(obj);
  }
}
END_TEST

START_TEST(test_registry_static_types) {
  const pf_type_info_t* info = pf_type_info(PF_TYPE_TENSOR);
  ck_assert_ptr_nonnull(info);
  ck_assert_int_eq(info->depth, 1);
  ck_assert_int_eq(info->parent_index, PF_TYPE_OBJECT);
  ck_assert_str_eq(pf_type_name(PF_TYPE_TENSOR), "Tensor");
  ck_assert_str_eq(pf_type_name(PF_TYPE_INT), "int");
  ck_assert_str_eq(pf_type_name(PF_TYPE_SMALL_STR), "str");
  ck_assert_str_eq(pf_type_name(PF_TYPE_STR), "str");
  ck_assert_str_eq(pf_type_name(PF_TYPE_RAW_STR), "str");
  ck_assert_str_eq(pf_type_name(PF_TYPE_NONE), "None");
  ck_assert_str_eq(pf_type_name(999), "unknown");
  ck_assert_str_eq(pf_type_name(-7), "unknown");
  ck_assert_ptr_null(pf_type_info(PF_TYPE_INT));
  ck_assert_ptr_null(pf_type_info(100000));
  ck_assert_int_eq(pf_type_is_instance(PF_TYPE_TENSOR, PF_TYPE_OBJECT), 1);
  ck_assert_int_eq(pf_type_is_instance(PF_TYPE_TENSOR, PF_TYPE_STR), 0);
  ck_assert_int_eq(pf_type_is_instance(PF_TYPE_OBJECT, PF_TYPE_TENSOR), 0);
  int32_t idx;
  ck_assert_int_eq(pf_type_index_of("ffi.Function", &idx), 0);
  ck_assert_int_eq(idx, PF_TYPE_FUNCTION);
}
END_TEST

/* Every static index of TVM-FFI 0.1.15's c_api.h has a name; object ones have info. */
START_TEST(test_registry_wheel_statics) {
  ck_assert_str_eq(pf_type_name(13), "Unchanged");
  ck_assert_str_eq(pf_type_name(74), "OpaqueHostObject");
  ck_assert_str_eq(pf_type_name(75), "List");
  ck_assert_str_eq(pf_type_name(76), "Dict");
  ck_assert_str_eq(pf_type_name(77), "VisitInterrupt");
  ck_assert_str_eq(pf_type_name(78), "BigInt");
  ck_assert_str_eq(pf_type_info(78)->key, "ffi.BigInt");
  ck_assert_int_eq(pf_type_is_instance(77, PF_TYPE_OBJECT), 1);
  ck_assert_str_eq(pf_type_name(79), "unknown");
  ck_assert_str_eq(pf_type_name(14), "unknown");
  /* a value of such a type is refused with a TypeError naming it */
  pf_any_t v = {0};
  v.type_index = 13;
  int64_t i;
  ck_assert_int_eq(pf_any_as_int(&v, &i), -1);
  PF_ASSERT_RAISED("TypeError", "Unchanged");
}
END_TEST

START_TEST(test_registry_register) {
  int32_t base, derived, again, deeper;
  ck_assert_int_eq(pf_type_register("test.Base", PF_TYPE_OBJECT, &base), 0);
  /* without TVM-FFI, packfn's own indices start far above TVM-FFI's first dynamic ones */
  ck_assert_int_ge(base, 8192);
  ck_assert_int_eq(pf_type_register("test.Derived", base, &derived), 0);
  ck_assert_int_eq(pf_type_register("test.Deeper", derived, &deeper), 0);
  ck_assert_int_eq(pf_type_register("test.Base", PF_TYPE_OBJECT, &again), 0);
  ck_assert_int_eq(again, base);
  const pf_type_info_t* info = pf_type_info(deeper);
  ck_assert_int_eq(info->depth, 3);
  ck_assert_int_eq(info->ancestors[0], PF_TYPE_OBJECT);
  ck_assert_int_eq(info->ancestors[1], base);
  ck_assert_int_eq(info->ancestors[2], derived);
  ck_assert_str_eq(info->key, "test.Deeper");
  ck_assert_str_eq(pf_type_name(deeper), "test.Deeper");
  ck_assert_int_eq(pf_type_is_instance(deeper, base), 1);
  ck_assert_int_eq(pf_type_is_instance(deeper, PF_TYPE_OBJECT), 1);
  ck_assert_int_eq(pf_type_is_instance(base, deeper), 0);
  ck_assert_int_eq(pf_type_is_instance(derived, PF_TYPE_TENSOR), 0);
  int32_t looked;
  ck_assert_int_eq(pf_type_index_of("test.Derived", &looked), 0);
  ck_assert_int_eq(looked, derived);

  pf_object_t* obj;
  ck_assert_int_eq(pf_object_alloc(32, deeper, recording_deleter, &obj), 0);
  ck_assert_int_eq(pf_object_is_instance(obj, base), 1);
  ck_assert_int_eq(pf_object_is_instance(NULL, base), 0);
  pf_object_release(obj);
}
END_TEST

START_TEST(test_registry_bad_input) {
  int32_t idx;
  ck_assert_int_eq(pf_type_register(NULL, PF_TYPE_OBJECT, &idx), -1);
  PF_ASSERT_RAISED("ValueError", "key");
  ck_assert_int_eq(pf_type_register("", PF_TYPE_OBJECT, &idx), -1);
  PF_ASSERT_RAISED("ValueError", "non-empty");
  ck_assert_int_eq(pf_type_register("test.X", PF_TYPE_OBJECT, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "out");
  ck_assert_int_eq(pf_type_register("test.X", PF_TYPE_INT, &idx), -1);
  PF_ASSERT_RAISED("TypeError", "parent_index");
  ck_assert_int_eq(pf_type_register("test.X", 4000, &idx), -1);
  PF_ASSERT_RAISED("TypeError", "parent_index");
  ck_assert_int_eq(pf_type_register("test.X", PF_TYPE_OBJECT, &idx), 0);
  ck_assert_int_eq(pf_type_register("test.X", PF_TYPE_TENSOR, &idx), -1);
  PF_ASSERT_RAISED("KeyError", "pf_type_register: type 'test.X' is already registered with "
                               "parent Object, not Tensor");
  /* the root has no parent to name (it said "with parent Any"; review) */
  ck_assert_int_eq(pf_type_register("ffi.Object", PF_TYPE_OBJECT, &idx), -1);
  PF_ASSERT_RAISED("KeyError", "pf_type_register: type 'ffi.Object' is already registered as the "
                               "root type, not Object");
  idx = 5;
  ck_assert_int_eq(pf_type_index_of("test.Nope", &idx), 0); /* absent: -1, no error */
  ck_assert_int_eq(idx, -1);
  PF_ASSERT_NO_ERROR();
  ck_assert_int_eq(pf_type_index_of(NULL, &idx), -1);
  PF_ASSERT_RAISED("ValueError", "key");
  ck_assert_int_eq(pf_type_index_of("test.X", NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_type_index_of: argument out");
}
END_TEST

static void* register_many(void* arg) {
  const char* prefix = arg;
  for (int i = 0; i < 50; ++i) {
    char key[64];
    snprintf(key, sizeof key, "race.%s.%d", prefix, i);
    int32_t idx, again;
    if (pf_type_register(key, PF_TYPE_OBJECT, &idx) != 0 || pf_type_index_of(key, &again) != 0 ||
        idx != again || strcmp(pf_type_name(idx), key) != 0)
      return (void*)1;
  }
  return NULL;
}

START_TEST(test_registry_threads) {
  pthread_t a, b;
  void *ra, *rb;
  pthread_create(&a, NULL, register_many, "a");
  pthread_create(&b, NULL, register_many, "b");
  pthread_join(a, &ra);
  pthread_join(b, &rb);
  ck_assert_ptr_null(ra);
  ck_assert_ptr_null(rb);
}
END_TEST

/* pf_type_name of every value type (no registry entry), and pf_type_is_instance of a type and
 * itself, and of indices nothing registered. */
START_TEST(test_registry_value_types_and_unknown) {
  static const struct {
    int32_t index;
    const char* name;
  } names[] = {{PF_TYPE_ANY, "Any"},
               {PF_TYPE_NONE, "None"},
               {PF_TYPE_INT, "int"},
               {PF_TYPE_BOOL, "bool"},
               {PF_TYPE_FLOAT, "float"},
               {PF_TYPE_OPAQUE_PTR, "void*"},
               {PF_TYPE_DTYPE, "dtype"},
               {PF_TYPE_DEVICE, "Device"},
               {PF_TYPE_DLTENSOR_PTR, "DLTensor*"},
               {PF_TYPE_RAW_STR, "str"},
               {PF_TYPE_BYTE_ARRAY_PTR, "bytes"},
               {PF_TYPE_OBJECT_RVALUE_REF, "ObjectRValueRef"},
               {PF_TYPE_SMALL_STR, "str"},
               {PF_TYPE_SMALL_BYTES, "bytes"},
               {PF_TYPE_UNCHANGED, "Unchanged"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    ck_assert_str_eq(pf_type_name(names[i].index), names[i].name);
  ck_assert_int_eq(pf_type_is_instance(PF_TYPE_INT, PF_TYPE_INT), 1);
  ck_assert_int_eq(pf_type_is_instance(PF_TYPE_TENSOR, PF_TYPE_TENSOR), 1);
  ck_assert_int_eq(pf_type_is_instance(20000, PF_TYPE_OBJECT), 0); /* nothing registered there */
  ck_assert_int_eq(pf_type_is_instance(PF_TYPE_TENSOR, 20000), 0);
  ck_assert_int_eq(pf_type_is_instance(PF_TYPE_INT, PF_TYPE_OBJECT), 0); /* a value type */
  ck_assert_ptr_null(pf_type_info(20000));
  ck_assert_ptr_null(pf_type_info(PF_TYPE_INT));
}
END_TEST

/* The registry holds 8192 registered types: the next new key is refused with RuntimeError
 * (docs/object.md), while keys already registered are still found. Its own case, last: the
 * table stays full for the rest of the process. */
START_TEST(test_registry_full) {
  int32_t first = -1, index = -1;
  char key[64];
  int n = 0;
  for (; n < 9000; ++n) {
    snprintf(key, sizeof key, "test.full.T%d", n);
    if (pf_type_register(key, PF_TYPE_OBJECT, &index) != 0)
      break;
    if (n == 0)
      first = index;
  }
  ck_assert_int_lt(n, 9000);
  ck_assert_int_gt(n, 8000); /* a few slots went to earlier registrations */
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "pf_type_register: the type table is full (8192 types)");
  ck_assert_int_eq(pf_type_register("test.full.another", PF_TYPE_OBJECT, &index), -1);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "the type table is full");
  ck_assert_int_eq(pf_type_register("test.full.T0", PF_TYPE_OBJECT, &index), 0);
  ck_assert_int_eq(index, first);
  ck_assert_str_eq(pf_type_name(first), "test.full.T0");
  snprintf(key, sizeof key, "test.full.T%d", n - 1);
  ck_assert_int_eq(pf_type_register(key, PF_TYPE_OBJECT, &index), 0);
  ck_assert_str_eq(pf_type_name(index), key);
  ck_assert_int_eq(pf_type_is_instance(index, PF_TYPE_OBJECT), 1);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("object");
  TCase* tc = tcase_create("core");
  tcase_add_test(tc, test_alloc_initialises_header);
  tcase_add_test(tc, test_alloc_bad_input);
  tcase_add_test(tc, test_strong_then_weak);
  tcase_add_test(tc, test_weak_lock_alive);
  tcase_add_test(tc, test_null_is_noop);
  tcase_add_test(tc, test_foreign_object);
  tcase_add_test(tc, test_null_deleter_is_skipped);
  tcase_add_test(tc, test_two_threads_no_lost_updates);
  tcase_add_test(tc, test_weak_lock_races_last_release);
  tcase_add_test(tc, test_registry_static_types);
  tcase_add_test(tc, test_registry_register);
  tcase_add_test(tc, test_registry_bad_input);
  tcase_add_test(tc, test_registry_threads);
  tcase_add_test(tc, test_registry_wheel_statics);
  tcase_add_test(tc, test_registry_value_types_and_unknown);
  suite_add_tcase(s, tc);
  TCase* full = tcase_create("registry_full");
  tcase_set_timeout(full, 120);
  tcase_add_test(full, test_registry_full);
  suite_add_tcase(s, full);
  return s;
}

PF_TEST_MAIN()
