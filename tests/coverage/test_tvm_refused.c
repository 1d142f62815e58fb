/* pf_tvm_ffi_join refuses a libtvm_ffi.so it cannot use: another version than 0.1.x, or one
 * without every entry point packfn needs (the stand-in fake_tvm_ffi.c); PACKFN_NO_TVM_FFI=0
 * does not disable joining, =1 does. packfn keeps its own error slot throughout. */
#include <dlfcn.h>

#include "pf_test.h"

static void* fake;
static void (*set_version)(int32_t major, int32_t minor);

/* The join is refused and errors still work in packfn's own slot. */
static void expect_refused(void) {
  ck_assert_int_eq(pf_tvm_ffi_join(), 0);
  ck_assert_int_eq(pf_tvm_ffi_joined(), 0);
  PF_ERROR_SET(PF_ERR_VALUE, "still local %d", 1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "still local 1");
}

START_TEST(test_refuses_what_it_cannot_use) {
  fake = dlopen(PF_FAKE_TVM_FFI, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(fake != NULL, "%s", dlerror());
  *(void**)&set_version = dlsym(fake, "fake_tvm_ffi_set_version");
  ck_assert(set_version != NULL);
  /* the stand-in is what packfn finds by name */
  void* found = dlopen("libtvm_ffi.so", RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_eq(found, fake);
  dlclose(found);
  ck_assert_int_eq(setenv("PACKFN_NO_TVM_FFI", "0", 1), 0); /* "0": joining stays on */
  set_version(0, 2);
  expect_refused();
  set_version(1, 1);
  expect_refused();
  set_version(0, 1); /* the version packfn knows, but entry points missing */
  expect_refused();
  ck_assert_int_eq(setenv("PACKFN_NO_TVM_FFI", "1", 1), 0);
  expect_refused();
  ck_assert_int_eq(unsetenv("PACKFN_NO_TVM_FFI"), 0);
  dlclose(fake);
}
END_TEST

/* Each variant of fake_tvm_ffi_partial.c, loaded alone: refused for its version or for the entry
 * point it lacks (the first one missing in the order packfn checks them). */
START_TEST(test_refuses_each_missing_part) {
  static const char* const variants[] = {"noversion", "v1_1",     "entries0", "entries1",
                                         "entries2",  "entries3", "entries4", "entries5",
                                         "entries6",  "entries7"};
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s/libtvm_ffi.so", PF_FAKE_TVM_FFI_VARIANTS, variants[i]);
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "%s", dlerror());
    void* found = dlopen("libtvm_ffi.so", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(found == lib, "variant %s is not the libtvm_ffi.so found", variants[i]);
    dlclose(found);
    expect_refused();
    dlclose(lib);
  }
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("tvm_refused");
  TCase* tc = tcase_create("join");
  tcase_add_test(tc, test_refuses_what_it_cannot_use);
  tcase_add_test(tc, test_refuses_each_missing_part);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
