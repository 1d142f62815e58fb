/* Joined to TVM-FFI (the stand-in fake_tvm_ffi_table.c), a name packfn's table misses is looked
 * up in TVM-FFI's; when that lookup fails, the error names the function the caller called:
 * pf_global_call's failure, and the system module's pf_module_get_function's, named
 * pf_global_get (review). An error TVM-FFI raised for the
 * failure is passed on as it came. */
#include <dlfcn.h>

#include "pf_test.h"

static void* fake;
static void (*fail_lookup)(int fail, pf_object_t* err);

/* Loaded once and kept for the process (the join keeps it). */
static void join_fake(void) {
  if (fake != NULL)
    return;
  fake = dlopen(PF_FAKE_TVM_FFI_TABLE, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(fake != NULL, "%s", dlerror());
  *(void**)&fail_lookup = dlsym(fake, "fake_tvm_ffi_fail_lookup");
  ck_assert(fail_lookup != NULL);
  ck_assert_int_eq(pf_tvm_ffi_join(), 1);
  ck_assert_int_eq(pf_tvm_ffi_joined(), 1);
}

/* TVM-FFI's lookup fails without raising: packfn's RuntimeError names the caller's function. */
START_TEST(test_failed_lookup_names_the_caller) {
  join_fake();
  pf_object_t* fn = NULL;
  fail_lookup(0, NULL);
  ck_assert_int_eq(pf_global_get("packfn.test.absent", &fn), 0); /* absent from both */
  ck_assert_ptr_null(fn);
  fail_lookup(1, NULL);
  pf_any_t result = pf_any_int(1);
  ck_assert_int_eq(pf_global_call("packfn.test.absent", NULL, 0, &result), -1);
  ck_assert_int_eq(result.type_index, PF_TYPE_NONE);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "pf_global_call: TVM-FFI's global table failed");
  ck_assert_int_eq(pf_global_get("packfn.test.absent", &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "pf_global_get: TVM-FFI's global table failed");
  ck_assert_int_eq(pf_global_get_bytes("packfn.test.absent", 18, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "pf_global_get_bytes: TVM-FFI's global table failed");
  /* a name longer than 32 bytes takes the other lookup path */
  const char* longer = "packfn.test.a_name_longer_than_thirty_two_bytes";
  ck_assert_int_eq(pf_global_call(longer, NULL, 0, &result), -1);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "pf_global_call: TVM-FFI's global table failed");
  /* the system module looks a name it does not export up in the global table */
  pf_object_t* sys = NULL;
  ck_assert_int_eq(pf_module_system(&sys), 0);
  fn = (pf_object_t*)&fn;
  ck_assert_int_eq(pf_module_get_function(sys, "packfn.test.absent", &fn), -1);
  ck_assert_ptr_null(fn);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "pf_module_get_function: TVM-FFI's global table failed");
  pf_object_release(sys);
  fail_lookup(0, NULL);
}
END_TEST

/* TVM-FFI raised its own error for the failure: that error comes back unchanged. */
START_TEST(test_failed_lookup_keeps_tvm_error) {
  join_fake();
  pf_object_t* theirs = NULL;
  ck_assert_int_eq(pf_error_create(PF_ERR_MEMORY, "TVM-FFI ran out", NULL, &theirs), 0);
  fail_lookup(1, theirs);
  ck_assert_int_eq(pf_global_call("packfn.test.absent", NULL, 0, NULL), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_eq(err, theirs);
  pf_object_release(err);
  fail_lookup(0, NULL);
  pf_object_release(theirs);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("tvm_lookup_failed");
  TCase* tc = tcase_create("join");
  tcase_add_test(tc, test_failed_lookup_names_the_caller);
  tcase_add_test(tc, test_failed_lookup_keeps_tvm_error);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
