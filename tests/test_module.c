/* Tests of modules: loading the test libraries CMake builds, plain, documented and typed
 * exports, listing, lifetime after the module is gone, refused libraries, the system library. */
#include <dlfcn.h>
#include <pthread.h>

#include "pf_test.h"

/* ---- the system library's own exports (the executable is linked with ENABLE_EXPORTS) ---- */

static int sys_twice(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t x;
  if (num_args != 1 || pf_any_as_int(&args[0], &x) != 0) {
    pf_error_clear();
    PF_ERROR_SET(PF_ERR_TYPE, "sys_twice: expected one int");
    return -1;
  }
  *result = pf_any_int(2 * x);
  return 0;
}
PF_EXPORT_DOC(test_sys_twice, sys_twice, "test_sys_twice(x: int) -> int", "Doubles x.");

static int sys_global(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  *result = pf_any_int(100 + num_args);
  return 0;
}
PF_REGISTER_GLOBAL("test.module.global", sys_global);

/* Keeps a reference to its argument, a function, for test_refused_library_still_held. */
static pf_object_t* grabbed;
static int grab(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)result;
  pf_object_t* fn = NULL;
  if (num_args != 1 || pf_any_as_object(&args[0], &fn) != 0)
    return -1;
  pf_object_retain(fn);
  grabbed = fn;
  return 0;
}
PF_REGISTER_GLOBAL("test.module.grab", grab);

/* ---- helpers ---- */

static pf_object_t* load(const char* path) {
  pf_object_t* m = NULL;
  int rc = pf_module_load(path, &m);
  pf_object_t* err = pf_error_peek();
  ck_assert_msg(rc == 0, "loading %s failed: %s", path, err ? pf_error_message(err) : "?");
  ck_assert_ptr_nonnull(m);
  return m;
}

static pf_object_t* get_fn(pf_object_t* module, const char* name) {
  pf_object_t* fn = NULL;
  int rc = pf_module_get_function(module, name, &fn);
  pf_object_t* err = pf_error_peek();
  ck_assert_msg(rc == 0, "getting %s failed: %s", name, err ? pf_error_message(err) : "?");
  return fn;
}

static int64_t call_int(pf_object_t* fn, const pf_any_t* args, int32_t n) {
  pf_any_t r = pf_any_none();
  ck_assert_int_eq(pf_function_call(fn, args, n, &r), 0);
  ck_assert_int_eq(r.type_index, PF_TYPE_INT);
  return r.v_int64;
}

/* 1 when the library at path is mapped in the process now. */
static int is_loaded(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h)
    dlclose(h);
  return h != NULL;
}

/* Asserts that loading `path` fails with `kind` and a message holding `needle` and the path. */
static void assert_load_fails(const char* path, const char* kind, const char* needle) {
  pf_object_t* m = (pf_object_t*)0x1;
  ck_assert_int_eq(pf_module_load(path, &m), -1);
  ck_assert_ptr_null(m);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_kind(err), kind);
  ck_assert_msg(strstr(pf_error_message(err), needle) != NULL, "message '%s' lacks '%s'",
                pf_error_message(err), needle);
  ck_assert_msg(strstr(pf_error_message(err), path) != NULL, "message '%s' lacks the path",
                pf_error_message(err));
  pf_object_release(err);
}

/* ---- loading and calling ---- */

START_TEST(test_load_and_call_plain_exports) {
  pf_object_t* m = load(PF_TESTMOD_GOOD);
  ck_assert_str_eq(pf_type_name(m->type_index), "packfn.Module");
  ck_assert_str_eq(pf_module_path(m), PF_TESTMOD_GOOD);
  uint32_t major = 9, minor = 9;
  ck_assert_int_eq(pf_module_abi_version(m, &major, &minor), 0);
  ck_assert_uint_eq(major, PF_ABI_VERSION_MAJOR);
  ck_assert_uint_eq(minor, PF_ABI_VERSION_MINOR);

  pf_object_t* add = get_fn(m, "add_ints");
  ck_assert_int_eq(add->type_index, PF_TYPE_FUNCTION);
  pf_any_t args[3] = {pf_any_int(40), pf_any_int(2), pf_any_bool(1)};
  ck_assert_int_eq(call_int(add, args, 3), 43);
  /* the plain export sits in the function's cell: no trampoline per call */
  void* h = dlopen(PF_TESTMOD_GOOD, RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(h);
  void* raw = dlsym(h, "__packfn_add_ints");
  ck_assert_ptr_nonnull(raw);
  pf_safe_call_t raw_call;
  memcpy(&raw_call, &raw, sizeof raw_call);
  ck_assert(((const pf_function_cell_t*)(add + 1))->safe_call == raw_call);
  dlclose(h);
  ck_assert_ptr_null(pf_function_signature(add));
  /* the same object comes back, and the module holds one reference */
  pf_object_t* again = get_fn(m, "add_ints");
  ck_assert_ptr_eq(again, add);
  ck_assert_uint_eq(pf_object_strong_count(add), 3);
  pf_object_release(again);

  pf_object_t* greet = get_fn(m, "greet");
  pf_any_t who = pf_any_cstr("world");
  pf_any_t r;
  ck_assert_int_eq(pf_function_call(greet, &who, 1, &r), 0);
  const char* text;
  size_t len;
  ck_assert_int_eq(pf_any_as_str(&r, &text, &len), 0);
  ck_assert_str_eq(text, "hello, world");
  pf_any_release(&r);
  ck_assert_str_eq(pf_function_signature(greet), "greet(name: str) -> str");
  ck_assert_str_eq(pf_function_doc(greet), "Says hello to name.");

  pf_object_t* fail = get_fn(m, "fail");
  ck_assert_int_eq(pf_function_call(fail, NULL, 0, &r), -1);
  PF_ASSERT_RAISED("RuntimeError", "fail: this kernel always fails");
  ck_assert_int_eq(r.type_index, PF_TYPE_NONE);

  pf_object_t* meta_info = get_fn(m, "meta_info");
  ck_assert_int_eq(call_int(meta_info, args, 2), 2);

  ck_assert_int_eq(pf_module_call(m, "add_ints", args, 2, &r), 0);
  ck_assert_int_eq(r.v_int64, 42);
  ck_assert_int_eq(pf_module_call(m, "nope", args, 2, &r), -1);
  PF_ASSERT_RAISED("KeyError", "pf_module_call: " PF_TESTMOD_GOOD " has no function 'nope'");
  ck_assert_int_eq(r.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_module_call(m, "add_int", args, 2, &r), -1);
  PF_ASSERT_RAISED("KeyError", "has no function 'add_int' (did you mean 'add_ints'?)");
  ck_assert_int_eq(pf_module_call(m, "add_ints", NULL, 2, &r), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_call: argument args: expected 2 arguments, got NULL");
  ck_assert_int_eq(pf_module_call(m, "add_ints", args, 2, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_call: argument result");
  char near[16];
  ck_assert_int_eq(pf_module_suggest(m, "ad_ints", near, sizeof near), 1);
  ck_assert_str_eq(near, "add_ints");
  ck_assert_int_eq(pf_module_suggest(m, "zzzzzz", near, sizeof near), 0);
  ck_assert_str_eq(near, "");
  ck_assert_int_eq(pf_module_suggest(NULL, "x", near, sizeof near), -1);
  PF_ASSERT_RAISED("TypeError", "pf_module_suggest");
  /* NULL buf with size 0 only asks whether a near name exists; NULL name or NULL buf with room
   * is refused, buf left as it was */
  ck_assert_int_eq(pf_module_suggest(m, "ad_ints", NULL, 0), 1);
  ck_assert_int_eq(pf_module_suggest(m, "zzzzzz", NULL, 0), 0);
  strcpy(near, "kept");
  ck_assert_int_eq(pf_module_suggest(m, NULL, near, sizeof near), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_suggest: argument name");
  ck_assert_str_eq(near, "kept");
  ck_assert_int_eq(pf_module_suggest(m, "ad_ints", NULL, 8), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_suggest: argument buf");
  /* a call on no module fails as the lookup does, the result left none */
  r = pf_any_int(5);
  ck_assert_int_eq(pf_module_call(NULL, "add_ints", args, 2, &r), -1);
  PF_ASSERT_RAISED("TypeError", "pf_module_call");
  ck_assert_int_eq(r.type_index, PF_TYPE_NONE);

  pf_object_release(add);
  pf_object_release(greet);
  pf_object_release(fail);
  pf_object_release(meta_info);
  pf_object_release(m);
}
END_TEST

START_TEST(test_typed_export) {
  pf_object_t* m = load(PF_TESTMOD_GOOD);
  pf_object_t* scale = get_fn(m, "scale");
  ck_assert_str_eq(pf_function_signature(scale), "scale(x: float, k: int) -> float");
  ck_assert_str_eq(pf_function_doc(scale), "Multiplies x by k.");
  pf_any_t args[2] = {pf_any_float(2.5), pf_any_int(4)};
  pf_any_t r;
  ck_assert_int_eq(pf_function_call(scale, args, 2, &r), 0);
  ck_assert_int_eq(r.type_index, PF_TYPE_FLOAT);
  ck_assert(r.v_float64 == 10.0);
  args[1] = pf_any_cstr("four");
  ck_assert_int_eq(pf_function_call(scale, args, 2, &r), -1);
  PF_ASSERT_RAISED("TypeError", "scale: argument 1 (k): expected int, got str");
  ck_assert_int_eq(pf_function_call(scale, args, 1, &r), -1);
  PF_ASSERT_RAISED("TypeError", "scale: expected 2 arguments, got 1");

  /* the raw symbol stays a working safe-call for loaders that ignore metadata */
  void* h = dlopen(PF_TESTMOD_GOOD, RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(h);
  void* raw = dlsym(h, "__packfn_scale");
  ck_assert_ptr_nonnull(raw);
  pf_safe_call_t raw_call;
  memcpy(&raw_call, &raw, sizeof raw_call);
  args[1] = pf_any_int(3);
  r = pf_any_none();
  ck_assert_int_eq(raw_call(NULL, args, 2, &r), 0);
  ck_assert(r.v_float64 == 7.5);
  r = pf_any_none();
  ck_assert_int_eq(raw_call(NULL, args, 3, &r), -1);
  PF_ASSERT_RAISED("TypeError", "scale: expected 2 arguments, got 3");
  dlclose(h);
  pf_object_release(scale);
  pf_object_release(m);
}
END_TEST

START_TEST(test_get_function_bad_input) {
  pf_object_t* m = load(PF_TESTMOD_GOOD);
  pf_object_t* fn = (pf_object_t*)0x1;
  /* the lookup rule: absent is 0 with NULL and no error, including names exported but not
   * as a packfn function, the stamp and metadata */
  const char* absent[] = {"nope", "testmod_good_unrelated", "abi", "meta_greet"};
  for (size_t i = 0; i < sizeof absent / sizeof absent[0]; ++i) {
    fn = (pf_object_t*)0x1;
    ck_assert_int_eq(pf_module_get_function(m, absent[i], &fn), 0);
    ck_assert_ptr_null(fn);
    PF_ASSERT_NO_ERROR();
  }
  ck_assert_int_eq(pf_module_get_function(m, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "argument name: expected a function name, got NULL");
  ck_assert_int_eq(pf_module_get_function(m, "", &fn), -1);
  PF_ASSERT_RAISED("ValueError", "got \"\"");
  ck_assert_int_eq(pf_module_get_function(m, "add_ints", NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument out");
  ck_assert_int_eq(pf_module_get_function(NULL, "add_ints", &fn), -1);
  PF_ASSERT_RAISED("TypeError", "argument module: expected a Module made by packfn, got NULL");
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("a string, not a module", 22, &s), 0);
  ck_assert_int_eq(pf_module_get_function(s, "add_ints", &fn), -1);
  PF_ASSERT_RAISED("TypeError", "got str");
  ck_assert_ptr_null(pf_module_path(s));
  ck_assert_ptr_null(pf_module_path(NULL));
  ck_assert_int_eq(pf_module_abi_version(s, NULL, NULL), -1);
  PF_ASSERT_RAISED("TypeError", "pf_module_abi_version");
  pf_export_info_t* list = (pf_export_info_t*)0x1;
  ck_assert_int_eq(pf_module_list(s, &list, NULL), -1);
  PF_ASSERT_RAISED("TypeError", "pf_module_list");
  ck_assert_ptr_null(list);
  ck_assert_int_eq(pf_module_list(m, NULL, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_list: argument out");
  /* *count is 0 on every failure, a NULL out's included (it was left as it was) */
  size_t count = 7;
  ck_assert_int_eq(pf_module_list(m, NULL, &count), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_list: argument out");
  ck_assert_uint_eq(count, 0);
  pf_object_release(s);
  pf_object_release(m);
}
END_TEST

START_TEST(test_list_functions) {
  pf_object_t* m = load(PF_TESTMOD_GOOD);
  pf_export_info_t* list;
  size_t n = 0;
  ck_assert_int_eq(pf_module_list(m, &list, &n), 0);
  ck_assert_uint_eq(n, 5);
  const char* names[] = {"add_ints", "fail", "greet", "meta_info", "scale"};
  for (size_t i = 0; i < n; ++i)
    ck_assert_str_eq(list[i].name, names[i]);
  ck_assert_ptr_null(list[5].name);
  ck_assert_ptr_null(list[0].signature);
  ck_assert_ptr_null(list[0].doc);
  ck_assert_str_eq(list[2].signature, "greet(name: str) -> str");
  ck_assert_str_eq(list[2].doc, "Says hello to name.");
  ck_assert_str_eq(list[4].signature, "scale(x: float, k: int) -> float");
  ck_assert_str_eq(list[4].doc, "Multiplies x by k.");
  pf_object_release(m); /* the texts are copies */
  ck_assert_str_eq(list[4].name, "scale");
  pf_module_list_free(list);
  pf_module_list_free(NULL);
}
END_TEST

/* ---- lifetime ---- */

START_TEST(test_module_released_before_functions_and_results) {
  pf_object_t* m = load(PF_TESTMOD_OBJECTS);
  pf_object_t* make_box = get_fn(m, "make_box");
  pf_object_t* box_value = get_fn(m, "box_value");
  pf_object_t* make_adder = get_fn(m, "make_adder");
  pf_object_t* live = get_fn(m, "live_objects");
  pf_object_release(m); /* first: the functions keep the library */

  pf_any_t seven = pf_any_int(7), ten = pf_any_int(10), r;
  ck_assert_int_eq(pf_function_call(make_box, &seven, 1, &r), 0);
  pf_object_t* box = r.v_obj;
  ck_assert_int_eq(call_int(box_value, &r, 1), 7);
  ck_assert_int_eq(pf_function_call(make_adder, &ten, 1, &r), 0);
  pf_object_t* adder = r.v_obj;
  ck_assert_int_eq(adder->type_index, PF_TYPE_FUNCTION);
  ck_assert_int_eq(call_int(adder, &seven, 1), 17);
  ck_assert_int_eq(call_int(live, NULL, 0), 2);

  /* functions go next; the results made by the library's code outlive them */
  pf_object_release(make_box);
  pf_object_release(make_adder);
  pf_object_release(box_value);
  ck_assert_int_eq(call_int(adder, &ten, 1), 20);
  pf_object_release(box);   /* its deleter lies in the library */
  pf_object_release(adder); /* its call and deleter too */
  ck_assert_int_eq(call_int(live, NULL, 0), 0);
  pf_object_release(live);
  /* nothing refers to the library any more: it stays mapped (pinned) all the same */
  ck_assert(is_loaded(PF_TESTMOD_OBJECTS));
}
END_TEST

START_TEST(test_same_library_loaded_twice) {
  pf_object_t* a = load(PF_TESTMOD_GOOD);
  pf_object_t* b = load(PF_TESTMOD_GOOD);
  ck_assert_ptr_ne(a, b);
  pf_object_t* fa = get_fn(a, "add_ints");
  pf_object_t* fb = get_fn(b, "add_ints");
  ck_assert_ptr_ne(fa, fb); /* each module caches its own objects */
  pf_object_release(a);
  pf_any_t one = pf_any_int(1);
  ck_assert_int_eq(call_int(fa, &one, 1), 1);
  pf_object_release(b);
  ck_assert_int_eq(call_int(fb, &one, 1), 1);
  pf_object_release(fa);
  pf_object_release(fb);
}
END_TEST

typedef struct {
  pf_object_t* module;
  pf_object_t* seen;
  int failures;
} getter_t;

static void* get_many(void* arg) {
  getter_t* g = arg;
  for (int i = 0; i < 500; ++i) {
    pf_object_t* fn;
    if (pf_module_get_function(g->module, i % 2 ? "scale" : "add_ints", &fn) != 0) {
      g->failures++;
      continue;
    }
    if (i == 0)
      g->seen = fn;
    else if (i % 2 == 0 && fn != g->seen)
      g->failures++;
    if (i != 0)
      pf_object_release(fn);
  }
  return NULL;
}

START_TEST(test_concurrent_first_lookups) {
  pf_object_t* m = load(PF_TESTMOD_GOOD);
  getter_t g[4];
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) {
    g[i] = (getter_t){m, NULL, 0};
    pthread_create(&t[i], NULL, get_many, &g[i]);
  }
  for (int i = 0; i < 4; ++i)
    pthread_join(t[i], NULL);
  for (int i = 0; i < 4; ++i) {
    ck_assert_int_eq(g[i].failures, 0);
    ck_assert_ptr_eq(g[i].seen, g[0].seen);
  }
  for (int i = 0; i < 4; ++i)
    pf_object_release(g[i].seen);
  ck_assert_uint_eq(pf_object_strong_count(g[0].seen), 1); /* the module's own reference */
  pf_object_release(m);
}
END_TEST

/* ---- bad input ---- */

START_TEST(test_refused_libraries) {
  assert_load_fails("/nonexistent/dir/libnothing.so", "OSError", "cannot load");
  assert_load_fails(PF_TEST_NOT_A_LIBRARY, "OSError", "cannot load");
  assert_load_fails(PF_TESTMOD_NO_STAMP, "ValueError",
                    "is not a packfn library: it exports no __packfn_abi stamp");
  assert_load_fails(PF_TESTMOD_ABI7, "ValueError",
                    PF_TESTMOD_ABI7 " was built for packfn ABI 7.0, this runtime is ABI 0.1");
  /* its metadata, in a layout this runtime does not read, is not what refuses it: the stamp
   * says why (it was refused as malformed metadata) */
  assert_load_fails(PF_TESTMOD_ABI7_META, "ValueError",
                    PF_TESTMOD_ABI7_META " was built for packfn ABI 7.0, this runtime is ABI 0.1");
  assert_load_fails(PF_TESTMOD_BAD_MAGIC, "ValueError", "is not a packfn ABI stamp");
  assert_load_fails(PF_TESTMOD_SMALL_STAMP, "ValueError", "is not a packfn ABI stamp (4 bytes");
  assert_load_fails(PF_TESTMOD_BADMETA, "ValueError",
                    "__packfn_meta_two is not packfn export metadata");
  assert_load_fails(PF_TESTMOD_CLASH, "RuntimeError", "raised an error while initialising");
  ck_assert_int_eq(pf_global_call("test.module.global", NULL, 0, &(pf_any_t){0}), 0);
  /* a refused library is closed again */
  ck_assert(!is_loaded(PF_TESTMOD_ABI7));
  ck_assert(!is_loaded(PF_TESTMOD_ABI7_META));
  ck_assert(!is_loaded(PF_TESTMOD_NO_STAMP));
  ck_assert(!is_loaded(PF_TESTMOD_BADMETA));
  ck_assert(!is_loaded(PF_TESTMOD_CLASH));

  pf_object_t* m = (pf_object_t*)0x1;
  ck_assert_int_eq(pf_module_load(NULL, &m), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_load: argument path: expected a library path, got "
                                 "NULL");
  ck_assert_ptr_null(m);
  ck_assert_int_eq(pf_module_load("", &m), -1);
  PF_ASSERT_RAISED("ValueError", "got \"\"");
  ck_assert_int_eq(pf_module_load(PF_TESTMOD_GOOD, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_load: argument out");
  ck_assert_int_eq(pf_module_system(NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_system: argument out");
}
END_TEST

START_TEST(test_refused_library_still_held) {
  /* The library registers a function and something takes a reference to it before the load
   * is refused: the global goes, but the library stays mapped so that the reference can still
   * be called and released (it was unmapped, and the call crashed). */
  assert_load_fails(PF_TESTMOD_GRABBED, "ValueError", "exports no __packfn_abi stamp");
  ck_assert_ptr_nonnull(grabbed);
  pf_object_t* fn = NULL;
  ck_assert_int_eq(pf_global_get("test.module.grabbed", &fn), 0);
  ck_assert_ptr_null(fn);
  ck_assert(is_loaded(PF_TESTMOD_GRABBED));
  ck_assert_int_eq(call_int(grabbed, NULL, 0), 1);
  pf_object_release(grabbed);
  grabbed = NULL;
  /* a refused library nobody holds anything of is still unmapped */
  ck_assert(!is_loaded(PF_TESTMOD_NO_STAMP));
}
END_TEST

START_TEST(test_refused_library_held_after_its_name_went) {
  /* As above, but the name is removed again before the refusal (another thread's removal or
   * override in between): the loader no longer finds the function in the table, yet the host
   * still holds it, so the library must stay mapped (it was unmapped: the call crashed) */
  assert_load_fails(PF_TESTMOD_GRABBED_REMOVED, "ValueError", "exports no __packfn_abi stamp");
  ck_assert_ptr_nonnull(grabbed);
  pf_object_t* fn = NULL;
  ck_assert_int_eq(pf_global_get("test.module.grabbed_removed", &fn), 0);
  ck_assert_ptr_null(fn);
  ck_assert(is_loaded(PF_TESTMOD_GRABBED_REMOVED));
  ck_assert_int_eq(call_int(grabbed, NULL, 0), 1);
  pf_object_release(grabbed);
  grabbed = NULL;
  /* the same when the name was given another function (not the library's: it stays) */
  assert_load_fails(PF_TESTMOD_GRABBED_OVERRIDDEN, "ValueError", "exports no __packfn_abi stamp");
  ck_assert_ptr_nonnull(grabbed);
  pf_object_t* global = NULL;
  ck_assert_int_eq(pf_global_get("test.module.global", &global), 0);
  ck_assert_int_eq(pf_global_get("test.module.grabbed_overridden", &fn), 0);
  ck_assert_ptr_eq(fn, global);
  pf_object_release(fn);
  pf_object_release(global);
  ck_assert(is_loaded(PF_TESTMOD_GRABBED_OVERRIDDEN));
  ck_assert_int_eq(call_int(grabbed, NULL, 0), 1);
  pf_object_release(grabbed);
  grabbed = NULL;
  ck_assert_int_eq(pf_global_remove("test.module.grabbed_overridden"), 0);
}
END_TEST

START_TEST(test_sysv_hash_table) {
  pf_object_t* m = load(PF_TESTMOD_SYSV);
  pf_export_info_t* list;
  size_t n;
  ck_assert_int_eq(pf_module_list(m, &list, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(list[0].name, "one");
  pf_module_list_free(list);
  pf_object_release(m);
}
END_TEST

START_TEST(test_newer_minor_accepted) {
  pf_object_t* m = load(PF_TESTMOD_NEWER_MINOR);
  uint32_t major, minor;
  ck_assert_int_eq(pf_module_abi_version(m, &major, &minor), 0);
  ck_assert_uint_eq(major, PF_ABI_VERSION_MAJOR);
  ck_assert_uint_eq(minor, 99);
  pf_any_t r;
  ck_assert_int_eq(pf_module_call(m, "one", NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 1);
  pf_object_release(m);
}
END_TEST

/* ---- symbols that are not what their names promise (review of the loader) ---- */

START_TEST(test_stamp_and_metadata_outside_the_library) {
  /* absolute symbols: dlsym gave their raw value, and reading it crashed */
  assert_load_fails(PF_TESTMOD_STAMP_ABS, "ValueError",
                    "its __packfn_abi symbol is not a packfn ABI stamp: it is an absolute symbol "
                    "(value 0x10), not data in the library (expected a pf_abi_stamp_t object");
  assert_load_fails(PF_TESTMOD_META_ABS, "ValueError",
                    "__packfn_meta_one is not packfn export metadata: it is an absolute symbol "
                    "(value 0x20), not data in the library (expected a pf_export_meta_t");
  ck_assert(!is_loaded(PF_TESTMOD_STAMP_ABS));
  ck_assert(!is_loaded(PF_TESTMOD_META_ABS));
  /* an export that is an absolute function symbol: the library was accepted and a call of
   * boom jumped to address 0x40 (review) */
  assert_load_fails(PF_TESTMOD_FUNC_ABS, "ValueError",
                    "__packfn_boom is not an exported function: it is an absolute symbol (value "
                    "0x40), not code in the library");
  ck_assert(!is_loaded(PF_TESTMOD_FUNC_ABS));
}
END_TEST

START_TEST(test_refusals_say_what_was_found) {
  assert_load_fails(PF_TESTMOD_STAMP_FUNC, "ValueError",
                    "its __packfn_abi symbol is a function, not a packfn ABI stamp (expected a "
                    "pf_abi_stamp_t object");
  assert_load_fails(PF_TESTMOD_STAMP_TLS, "ValueError",
                    "its __packfn_abi symbol is a thread-local variable, not a packfn ABI stamp");
  assert_load_fails(PF_TESTMOD_BAD_MAGIC, "ValueError",
                    "(16 bytes starting with magic 0x12345678, expected at least 16 starting with "
                    "magic 0x316e6670)");
  assert_load_fails(PF_TESTMOD_BADMETA, "ValueError",
                    "__packfn_meta_two is not packfn export metadata: its magic is 0xdeadbeef "
                    "(expected");
  assert_load_fails(PF_TESTMOD_META_V0, "ValueError",
                    "__packfn_meta_two is not packfn export metadata: its version is 0 (expected");
  assert_load_fails(PF_TESTMOD_META_SIG_ONLY, "ValueError",
                    "__packfn_meta_two is not packfn export metadata: it has a typed declaration "
                    "without its implementation (expected");
  assert_load_fails(PF_TESTMOD_META_IMPL_ONLY, "ValueError",
                    "__packfn_meta_two is not packfn export metadata: it has a typed "
                    "implementation without a declaration (expected");
  ck_assert(!is_loaded(PF_TESTMOD_META_V0));
  ck_assert(!is_loaded(PF_TESTMOD_META_SIG_ONLY));
  ck_assert(!is_loaded(PF_TESTMOD_META_IMPL_ONLY));
  /* its size: 4 bytes, more where a sanitizer pads globals */
  assert_load_fails(PF_TESTMOD_META_SMALL, "ValueError",
                    "__packfn_meta_one is not packfn export metadata: it is ");
  assert_load_fails(PF_TESTMOD_META_SMALL, "ValueError",
                    " bytes (expected a pf_export_meta_t of 40 bytes");
  assert_load_fails(PF_TESTMOD_STAMP_NOTYPE, "ValueError",
                    "its __packfn_abi symbol is a symbol of no type, not a packfn ABI stamp");
  assert_load_fails(PF_TESTMOD_STAMP_IFUNC, "ValueError",
                    "its __packfn_abi symbol is an indirect function, not a packfn ABI stamp");
  assert_load_fails(PF_TESTMOD_STAMP_OUTSIDE, "ValueError",
                    "its __packfn_abi symbol is not a packfn ABI stamp: its 16 bytes at offset 0x");
  assert_load_fails(PF_TESTMOD_STAMP_OUTSIDE, "ValueError",
                    "lie outside the library's readable segments (expected a pf_abi_stamp_t");
  assert_load_fails(PF_TESTMOD_META_UNALIGNED, "ValueError",
                    "__packfn_meta_one is not packfn export metadata: it is not aligned to 8 bytes "
                    "(at offset 0x");
  assert_load_fails(PF_TESTMOD_META_OUTSIDE, "ValueError",
                    "__packfn_meta_one is not packfn export metadata: its 40 bytes at offset 0x");
  const char* const refused[] = {PF_TESTMOD_STAMP_NOTYPE, PF_TESTMOD_STAMP_IFUNC,
                                 PF_TESTMOD_STAMP_OUTSIDE, PF_TESTMOD_META_UNALIGNED,
                                 PF_TESTMOD_META_OUTSIDE};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; ++i)
    ck_assert_msg(!is_loaded(refused[i]), "%s stayed loaded", refused[i]);
}
END_TEST

/* Metadata may give a doc without a signature, or neither: listed as given, the function
 * called as a plain export. */
START_TEST(test_metadata_with_some_texts) {
  const char* const paths[2] = {PF_TESTMOD_META_DOC_ONLY, PF_TESTMOD_META_NO_TEXTS};
  for (int k = 0; k < 2; ++k) {
    pf_object_t* m = load(paths[k]);
    pf_export_info_t* list = NULL;
    size_t count = 0;
    ck_assert_int_eq(pf_module_list(m, &list, &count), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_str_eq(list[0].name, "two");
    ck_assert_ptr_null(list[0].signature);
    if (k == 0)
      ck_assert_str_eq(list[0].doc, "Returns two.");
    else
      ck_assert_ptr_null(list[0].doc);
    pf_module_list_free(list);
    pf_any_t r = pf_any_none();
    ck_assert_int_eq(pf_module_call(m, "two", NULL, 0, &r), 0);
    ck_assert_int_eq(r.v_int64, 2);
    pf_object_release(m);
  }
}
END_TEST

/* A plain C library (no stamp, no __packfn_ nor __tvm_ffi_ export) is neither kind of library:
 * refused, and unmapped again. */
START_TEST(test_plain_library_refused) {
  assert_load_fails(PF_TESTMOD_PLAIN, "ValueError",
                    "is not a packfn library: it exports no __packfn_abi stamp (compile it against "
                    "packfn's headers), nor is it a TVM-FFI library");
  ck_assert(!is_loaded(PF_TESTMOD_PLAIN));
}
END_TEST

/* A module held only weakly once its last strong reference went: its exports are released, the
 * library stays loaded for the functions taken from it, which still work; the weak reference
 * frees the module's memory at the end. */
START_TEST(test_module_held_weakly) {
  pf_object_t* m = load(PF_TESTMOD_GOOD);
  pf_object_t* add = get_fn(m, "add_ints");
  pf_object_weak_retain(m);
  pf_object_release(m);
  ck_assert_uint_eq(pf_object_strong_count(m), 0);
  ck_assert_int_eq(pf_object_weak_lock(m), 0); /* gone: cannot be had again */
  pf_any_t args[3] = {pf_any_int(40), pf_any_int(2), pf_any_bool(1)};
  ck_assert_int_eq(call_int(add, args, 3), 43);
  pf_object_weak_release(m);
  ck_assert(is_loaded(PF_TESTMOD_GOOD));
  ck_assert_int_eq(call_int(add, args, 2), 42);
  pf_object_release(add);
}
END_TEST

/* An export that is an indirect function (STT_GNU_IFUNC, chosen by its resolver at load) is a
 * function like any other: listed, found and called. */
START_TEST(test_indirect_function_export) {
  pf_object_t* m = load(PF_TESTMOD_IFUNC_EXPORT);
  pf_any_t r = pf_any_none();
  ck_assert_int_eq(pf_module_call(m, "ifn", NULL, 0, &r), 0);
  ck_assert_int_eq(r.type_index, PF_TYPE_INT);
  ck_assert_int_eq(r.v_int64, 7);
  ck_assert_int_eq(pf_module_call(m, "one", NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 1);
  pf_object_release(m);
}
END_TEST

/* ---- constructors that raise, and the host's pending error ---- */

START_TEST(test_constructor_error_refuses_each_load) {
  /* a library whose constructor raises is refused at every load, unmapped each time (its
   * constructor runs again), and its global is gone. (Two threads loading it at the same time:
   * the constructor runs in one of them, and the other may accept it without its global; see
   * docs/modules.md.) */
  for (int i = 0; i < 3; ++i) {
    pf_object_t* m = (pf_object_t*)0x1;
    ck_assert_int_eq(pf_module_load(PF_TESTMOD_CTOR_RAISE, &m), -1);
    ck_assert_ptr_null(m);
    PF_ASSERT_RAISED("RuntimeError", "raised an error while initialising");
    pf_object_t* fn = (pf_object_t*)0x1;
    ck_assert_int_eq(pf_global_get("test.module.ctor_raise", &fn), 0);
    ck_assert_ptr_null(fn);
    ck_assert_int_eq(pf_global_get("test.module.ctor_raise.alias", &fn), 0);
    ck_assert_ptr_null(fn);
    ck_assert(!is_loaded(PF_TESTMOD_CTOR_RAISE));
  }
}
END_TEST

START_TEST(test_refusal_keeps_shared_errors_and_survives_destructors) {
  /* the constructor raises an error it keeps: the caller's error cannot go at the end of that
   * chain (it would change under the library); the refusal quotes it and has the caller's
   * error as its cause (it was lost) */
  PF_ERROR_SET(PF_ERR_VALUE, "the host's own pending error");
  pf_object_t* m = NULL;
  ck_assert_int_eq(pf_module_load(PF_TESTMOD_CTOR_SHARED, &m), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_kind(err), "RuntimeError");
  ck_assert_ptr_nonnull(strstr(pf_error_message(err), "ValueError: ctor_shared: the cached error"));
  pf_object_t* c = pf_error_cause(err);
  ck_assert_ptr_nonnull(c);
  ck_assert_str_eq(pf_error_message(c), "the host's own pending error");
  pf_object_release(err);
  /* a destructor of the refused library clears an error of its own: the refusal stays */
  ck_assert_int_eq(pf_module_load(PF_TESTMOD_DTOR_CLEAR, &m), -1);
  PF_ASSERT_RAISED("RuntimeError", "raised an error while initialising");
}
END_TEST

START_TEST(test_host_pending_error_kept) {
  /* a constructor that clears its own handled error: accepted, and the host's error is pending
   * again afterwards (the clear removed it, and the load was refused) */
  PF_ERROR_SET(PF_ERR_VALUE, "the host's own pending error");
  pf_object_t* m = NULL;
  ck_assert_int_eq(pf_module_load(PF_TESTMOD_CTOR_CLEAR, &m), 0);
  ck_assert_ptr_nonnull(m);
  PF_ASSERT_RAISED("ValueError", "the host's own pending error");
  pf_object_release(m);

  /* refused: the host's error ends the cause chain, after the constructor's */
  PF_ERROR_SET(PF_ERR_VALUE, "the host's own pending error");
  ck_assert_int_eq(pf_module_load(PF_TESTMOD_CLASH, &m), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), "RuntimeError");
  ck_assert_ptr_nonnull(strstr(pf_error_message(err), "raised an error while initialising"));
  pf_object_t* c = pf_error_cause(err);
  ck_assert_ptr_nonnull(c);
  ck_assert_ptr_null(strstr(pf_error_message(c), "host"));
  while (pf_error_cause(c))
    c = pf_error_cause(c);
  ck_assert_str_eq(pf_error_kind(c), "ValueError");
  ck_assert_str_eq(pf_error_message(c), "the host's own pending error");
  pf_object_release(err);

  /* any other failure: the host's error is the cause, as pf_error_set makes it */
  PF_ERROR_SET(PF_ERR_VALUE, "the host's own pending error");
  ck_assert_int_eq(pf_module_load(PF_TESTMOD_NO_STAMP, &m), -1);
  err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), "ValueError");
  ck_assert_ptr_nonnull(pf_error_cause(err));
  ck_assert_str_eq(pf_error_message(pf_error_cause(err)), "the host's own pending error");
  pf_object_release(err);
}
END_TEST

/* ---- typed declarations ---- */

START_TEST(test_bad_typed_declaration_listed_without_signature) {
  /* the library loads (a newer minor ABI may declare kinds this runtime does not know); the
   * listing shows the export without a signature (it failed as a whole, naming
   * pf_module_get_function); its lookup alone fails, naming the caller */
  pf_object_t* m = load(PF_TESTMOD_BADTYPED);
  pf_export_info_t* list = NULL;
  size_t count = 0;
  PF_ERROR_SET(PF_ERR_VALUE, "the caller's own pending error"); /* it stays pending (review) */
  ck_assert_int_eq(pf_module_list(m, &list, &count), 0);
  PF_ASSERT_RAISED("ValueError", "the caller's own pending error");
  PF_ASSERT_NO_ERROR();
  ck_assert_uint_eq(count, 2);
  ck_assert_str_eq(list[0].name, "badkind");
  ck_assert_ptr_null(list[0].signature);
  ck_assert_str_eq(list[1].name, "fine");
  ck_assert_ptr_nonnull(list[1].signature);
  pf_module_list_free(list);
  /* the same with no error pending: none is left */
  ck_assert_int_eq(pf_module_list(m, &list, &count), 0);
  PF_ASSERT_NO_ERROR();
  ck_assert_uint_eq(count, 2);
  ck_assert_ptr_null(list[0].signature);
  pf_module_list_free(list);
  pf_object_t* fn = NULL;
  ck_assert_int_eq(pf_module_get_function(m, "badkind", &fn), -1);
  PF_ASSERT_RAISED("ValueError", "pf_module_get_function: " PF_TESTMOD_BADTYPED
                                 ": typed export 'badkind' has a bad declaration");
  ck_assert_int_eq(pf_module_get_function(m, "fine", &fn), 0);
  pf_any_t a = pf_any_int(3), r = pf_any_none();
  ck_assert_int_eq(pf_function_call(fn, &a, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 1);
  pf_object_release(fn);
  pf_object_release(m);
}
END_TEST

/* ---- suggestions of long names ---- */

#define LONG_EXPORT                                                                                \
  "f12345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"     \
  "012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"     \
  "0123456789012345678_tail"

START_TEST(test_long_names_suggested_whole) {
  ck_assert_uint_eq(strlen(LONG_EXPORT), 204);
  pf_object_t* m = load(PF_TESTMOD_LONGNAME);
  char typo[256];
  snprintf(typo, sizeof typo, "%s", LONG_EXPORT);
  typo[150] = 'x';
  pf_any_t r;
  ck_assert_int_eq(pf_module_call(m, typo, NULL, 0, &r), -1);
  PF_ASSERT_RAISED("KeyError", "(did you mean '" LONG_EXPORT "'?)");
  pf_object_release(m);

  /* a 150-character global of the system library */
  char global[151], near[151];
  memset(global, 'g', 150);
  global[150] = '\0';
  memcpy(global, "test.module.", 12);
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_direct(sys_global, &fn), 0);
  ck_assert_int_eq(pf_global_set(global, fn, 0), 0);
  pf_object_release(fn);
  memcpy(near, global, sizeof near);
  near[100] = 'h';
  pf_object_t* sys;
  ck_assert_int_eq(pf_module_system(&sys), 0);
  ck_assert_int_eq(pf_module_call(sys, near, NULL, 0, &r), -1);
  pf_object_t* err = pf_error_take();
  char expected[200];
  snprintf(expected, sizeof expected, "(did you mean '%s'?)", global);
  ck_assert_msg(strstr(pf_error_message(err), expected) != NULL, "message '%s' lacks '%s'",
                pf_error_message(err), expected);
  pf_object_release(err);
  ck_assert_int_eq(pf_global_remove(global), 0);
  pf_object_release(sys);
}
END_TEST

/* ---- the system library ---- */

/* A global of the same name as an export of the program: the system module lists the name once,
 * as the export, which its lookup finds too. */
START_TEST(test_system_export_shadows_a_global) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_direct(sys_global, &fn), 0);
  ck_assert_int_eq(pf_global_set("test_sys_twice", fn, 0), 0);
  pf_object_release(fn);
  pf_object_t* sys;
  ck_assert_int_eq(pf_module_system(&sys), 0);
  pf_export_info_t* list = NULL;
  size_t count = 0, seen = 0;
  ck_assert_int_eq(pf_module_list(sys, &list, &count), 0);
  for (size_t i = 0; i < count; ++i)
    if (strcmp(list[i].name, "test_sys_twice") == 0) {
      ++seen;
      ck_assert_ptr_nonnull(list[i].doc);
      ck_assert_str_eq(list[i].doc, "Doubles x.");
    }
  pf_module_list_free(list);
  ck_assert_uint_eq(seen, 1);
  pf_object_t* twice = get_fn(sys, "test_sys_twice");
  pf_any_t x = pf_any_int(21);
  ck_assert_int_eq(call_int(twice, &x, 1), 42);
  pf_object_release(twice);
  pf_object_release(sys);
  ck_assert_int_eq(pf_global_remove("test_sys_twice"), 0);
}
END_TEST

START_TEST(test_system_library) {
  pf_object_t* sys;
  ck_assert_int_eq(pf_module_system(&sys), 0);
  ck_assert_str_eq(pf_type_name(sys->type_index), "packfn.Module");
  ck_assert_str_eq(pf_module_path(sys), "<system>");
  pf_object_t* twice = get_fn(sys, "test_sys_twice");
  pf_any_t x = pf_any_int(21);
  ck_assert_int_eq(call_int(twice, &x, 1), 42);
  ck_assert_str_eq(pf_function_doc(twice), "Doubles x.");
  pf_object_t* global = get_fn(sys, "test.module.global");
  ck_assert_int_eq(call_int(global, &x, 1), 101);
  pf_object_t* missing;
  ck_assert_int_eq(pf_module_get_function(sys, "test.module.nope", &missing), 0);
  ck_assert_ptr_null(missing);
  PF_ASSERT_NO_ERROR();
  pf_any_t none_r;
  ck_assert_int_eq(pf_module_call(sys, "test.module.globl", &x, 1, &none_r), -1);
  PF_ASSERT_RAISED("KeyError", "<system> has no function 'test.module.globl' (did you mean "
                               "'test.module.global'?)");

  /* a loaded library's global registrations join the system library */
  pf_object_t* good = load(PF_TESTMOD_GOOD);
  pf_any_t r;
  ck_assert_int_eq(pf_module_call(sys, "testmod.good.hello", NULL, 0, &r), 0);
  const char* text;
  size_t len;
  ck_assert_int_eq(pf_any_as_str(&r, &text, &len), 0);
  ck_assert_str_eq(text, "hello from the good library");
  pf_any_release(&r);
  pf_object_release(good);

  pf_export_info_t* list;
  size_t n;
  ck_assert_int_eq(pf_module_list(sys, &list, &n), 0);
  ck_assert_uint_eq(n, pf_global_count() + 1);
  int seen_twice = 0, seen_global = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0)
      ck_assert_int_lt(strcmp(list[i - 1].name, list[i].name), 0);
    if (strcmp(list[i].name, "test_sys_twice") == 0) {
      seen_twice = 1;
      ck_assert_str_eq(list[i].signature, "test_sys_twice(x: int) -> int");
    }
    seen_global |= strcmp(list[i].name, "test.module.global") == 0;
  }
  ck_assert(seen_twice && seen_global);
  ck_assert_ptr_null(list[n].name);
  pf_module_list_free(list);
  pf_object_release(twice);
  pf_object_release(global);
  pf_object_release(sys);
}
END_TEST

/* A failed pf_module_call leaves *result none, as its header says, even when the callee left
 * there a value that needs no releasing (the ABI allows it; pf_function_call passes it on). */
START_TEST(test_call_failure_leaves_result_none) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, pf_test_fail_leaving_int, NULL, &fn), 0);
  ck_assert_int_eq(pf_global_set("test.module.fail_leaving_int", fn, 0), 0);
  pf_object_t* sys;
  ck_assert_int_eq(pf_module_system(&sys), 0);
  pf_any_t r = pf_any_none();
  ck_assert_int_eq(pf_module_call(sys, "test.module.fail_leaving_int", NULL, 0, &r), -1);
  PF_ASSERT_RAISED("ValueError", "fail_leaving_int: always fails");
  ck_assert_int_eq(r.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(r.v_int64, 0);
  ck_assert_int_eq(pf_global_remove("test.module.fail_leaving_int"), 0);
  pf_object_release(sys);
  pf_object_release(fn);
}
END_TEST

START_TEST(test_typed_export_raw_call_refusals) {
  /* the raw symbol of a typed export with no result to reset, and with a signature its function
   * cannot be made from: the error is create_typed's, the slot stays empty */
  static const pf_param_t params[] = {{"x", PF_PARAM_INT}};
  static const pf_signature_t sig = {"raw", 1, params, PF_PARAM_INT, NULL};
  pf_any_t arg = pf_any_int(1);
  ck_assert_int_eq(pf__export_typed_call(NULL, &sig, NULL, &arg, 1, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf__export_typed_call: argument slot");
  pf_object_t* slot = NULL;
  pf_any_t r = pf_any_int(7);
  ck_assert_int_eq(pf__export_typed_call(&slot, NULL, NULL, &arg, 1, &r), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_typed");
  ck_assert_int_eq(r.type_index, PF_TYPE_NONE);
  ck_assert_ptr_null(slot);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("module");
  TCase* tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_load_and_call_plain_exports);
  tcase_add_test(tc, test_typed_export);
  tcase_add_test(tc, test_get_function_bad_input);
  tcase_add_test(tc, test_list_functions);
  tcase_add_test(tc, test_module_released_before_functions_and_results);
  tcase_add_test(tc, test_same_library_loaded_twice);
  tcase_add_test(tc, test_concurrent_first_lookups);
  tcase_add_test(tc, test_refused_libraries);
  tcase_add_test(tc, test_refused_library_still_held);
  tcase_add_test(tc, test_refused_library_held_after_its_name_went);
  tcase_add_test(tc, test_sysv_hash_table);
  tcase_add_test(tc, test_newer_minor_accepted);
  tcase_add_test(tc, test_system_library);
  tcase_add_test(tc, test_call_failure_leaves_result_none);
  tcase_add_test(tc, test_stamp_and_metadata_outside_the_library);
  tcase_add_test(tc, test_refusals_say_what_was_found);
  tcase_add_test(tc, test_indirect_function_export);
  tcase_add_test(tc, test_metadata_with_some_texts);
  tcase_add_test(tc, test_plain_library_refused);
  tcase_add_test(tc, test_system_export_shadows_a_global);
  tcase_add_test(tc, test_module_held_weakly);
  tcase_add_test(tc, test_constructor_error_refuses_each_load);
  tcase_add_test(tc, test_host_pending_error_kept);
  tcase_add_test(tc, test_refusal_keeps_shared_errors_and_survives_destructors);
  tcase_add_test(tc, test_bad_typed_declaration_listed_without_signature);
  tcase_add_test(tc, test_long_names_suggested_whole);
  tcase_add_test(tc, test_typed_export_raw_call_refusals);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
