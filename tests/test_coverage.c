/* Failure paths and unusual inputs the layer suites leave out (issue 10, coverage): TVM-FFI's
 * export metadata built from declarations and signature texts, equality and hashing of every
 * value kind, refusals of bad arguments (each checked for its kind and message), list index
 * errors, container equality across kinds, map keys, the CPU allocator; the suite's main. The
 * global table across fork() and the system module's refusals are in test_coverage_global.c. */
#include "pf_test_coverage.h"

/* ---- pf__export_tvm_info: the metadata behind __tvm_ffi__metadata_<name> ---- */

/* The text pf__export_tvm_info gives for (what, sig, signature, doc), checked to be a string. */
static void export_info(int what, const pf_signature_t* sig, const char* signature, const char* doc,
                        char* buf, size_t size) {
  pf_any_t r = pf_any_none();
  ck_assert_int_eq(pf__export_tvm_info(what, sig, signature, doc, &r), 0);
  PF_ASSERT_NO_ERROR();
  const char* data;
  size_t n;
  ck_assert_int_eq(pf_any_as_str(&r, &data, &n), 0);
  ck_assert_uint_lt(n, size);
  memcpy(buf, data, n);
  buf[n] = '\0';
  pf_any_release(&r);
}

#define BARE "{\"type_schema\":\"{\\\"type\\\":\\\"ffi.Function\\\"}\"}"
#define T(k) "{\\\"type\\\":\\\"" k "\\\"}"
#define SCHEMA(ret, params)                                                                        \
  "{\"type_schema\":\"{\\\"type\\\":\\\"ffi.Function\\\",\\\"named_args\\\":{\\\"return\\\":[" ret \
  "],\\\"params\\\":[" params "]}}\"}"

static void check_signature(const char* signature, const char* expected) {
  char buf[4096];
  export_info(0, NULL, signature, NULL, buf, sizeof buf);
  ck_assert_msg(strcmp(buf, expected) == 0, "%s: got %s, expected %s",
                signature ? signature : "NULL", buf, expected);
}

START_TEST(test_export_info_from_signature_text) {
  check_signature("f(x: Tensor, eps: float) -> None",
                  SCHEMA(T("None"), T("ffi.Tensor") "," T("float")));
  check_signature("g() -> int", SCHEMA(T("int"), ""));
  check_signature(
      "h(s: str, b: bytes, o: Object, a: Any, t: dtype, d: Device, p: void*, "
      "fn: Function, k: bool) -> Function",
      SCHEMA(T("ffi.Function"),
             T("ffi.String") "," T("ffi.Bytes") "," T("ffi.Object") "," T("Any") "," T(
                 "DataType") "," T("Device") "," T("void*") "," T("ffi.Function") "," T("bool")));
  /* texts that do not read as packfn writes signatures: the bare schema */
  check_signature(NULL, BARE);
  check_signature("no parenthesis", BARE);
  check_signature("f(x int) -> int", BARE);          /* no ": " */
  check_signature("f(x: Weird) -> int", BARE);       /* unknown kind */
  check_signature("f(x: int; y: int) -> int", BARE); /* not ", " between parameters */
  check_signature("f(x: int)", BARE);
  check_signature("f(x: int,y: int) -> int", BARE); /* no space after the comma */ /* no result */
  check_signature("f(x: int) -> Weird", BARE); /* unknown result */
  /* a parameter without its ": " took the next one's: one float parameter where the text has
   * two, and two where it has three (review) */
  check_signature("f(x:int, y: float) -> int", BARE);
  check_signature("f(x: int, y:int, z: float) -> int", BARE);
  check_signature("f(x, y: float) -> int", BARE);
  char many[1024] = "f(";
  for (int i = 0; i <= PF_TYPED_MAX_PARAMS; ++i)
    snprintf(many + strlen(many), sizeof many - strlen(many), "%sa%d: int", i ? ", " : "", i);
  strcat(many, ") -> int");
  check_signature(many, BARE); /* more parameters than a typed function has */
}
END_TEST

START_TEST(test_export_info_from_declaration) {
  char buf[4096];
  static const pf_param_t params[] = {{"x", PF_PARAM_FLOAT}, {"k", PF_PARAM_INT}};
  pf_signature_t sig = {"scale", 2, params, PF_PARAM_FLOAT, "Scales x by k."};
  export_info(0, &sig, "ignored(x: str) -> str", NULL, buf, sizeof buf);
  ck_assert_str_eq(buf, SCHEMA(T("float"), T("float") "," T("int")));
  export_info(1, &sig, NULL, "ignored doc", buf, sizeof buf);
  ck_assert_str_eq(buf, "Scales x by k.");
  sig.doc = NULL;
  export_info(1, &sig, NULL, "ignored doc", buf, sizeof buf);
  ck_assert_str_eq(buf, "");
  export_info(1, NULL, NULL, "the doc", buf, sizeof buf);
  ck_assert_str_eq(buf, "the doc");
  export_info(1, NULL, NULL, NULL, buf, sizeof buf);
  ck_assert_str_eq(buf, "");
  /* a kind with no name in TVM-FFI's schema (an invalid one): the bare schema */
  static const pf_param_t bad[] = {{"x", (pf_param_kind_t)99}};
  pf_signature_t bad_param = {"bad", 1, bad, PF_PARAM_INT, NULL};
  export_info(0, &bad_param, NULL, NULL, buf, sizeof buf);
  ck_assert_str_eq(buf, BARE);
  pf_signature_t bad_result = {"bad", 2, params, (pf_param_kind_t)99, NULL};
  export_info(0, &bad_result, NULL, NULL, buf, sizeof buf);
  ck_assert_str_eq(buf, BARE);
  ck_assert_str_eq(pf_param_kind_name((pf_param_kind_t)99), "unknown");
  /* a declaration out of range falls back to the signature text */
  pf_signature_t too_many = {"many", PF_TYPED_MAX_PARAMS + 1, params, PF_PARAM_INT, NULL};
  export_info(0, &too_many, "many(a: int) -> bool", NULL, buf, sizeof buf);
  ck_assert_str_eq(buf, SCHEMA(T("bool"), T("int")));
  pf_signature_t negative = {"neg", -1, params, PF_PARAM_INT, NULL};
  export_info(0, &negative, NULL, NULL, buf, sizeof buf);
  ck_assert_str_eq(buf, BARE);
  /* parameters declared without their array, which the loader refuses as a bad declaration:
   * TVM-FFI's metadata getter read params[0] at NULL (review) */
  pf_signature_t no_array = {"noarr", 2, NULL, PF_PARAM_INT, NULL};
  export_info(0, &no_array, NULL, NULL, buf, sizeof buf);
  ck_assert_str_eq(buf, BARE);
  pf_signature_t no_array_none = {"noarr0", 0, NULL, PF_PARAM_INT, NULL};
  export_info(0, &no_array_none, NULL, NULL, buf, sizeof buf);
  ck_assert_str_eq(buf, SCHEMA(T("int"), ""));
}
END_TEST

/* ---- values: equality and hashing of every kind, refusals ---- */

/* __tvm_ffi_<name>'s failure path in a process without TVM-FFI: the status goes back as it
 * is, the error stays in packfn's slot, and a failure that raised nothing gets a RuntimeError
 * naming the export (tests/interop/export_apart.c covers TVM-FFI loaded). */
START_TEST(test_export_tvm_failed_without_tvm_ffi) {
  PF_ERROR_SET(PF_ERR_VALUE, "the export's own error");
  ck_assert_int_eq(pf__export_tvm_failed(-1, "f"), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "the export's own error");
  ck_assert_int_eq(pf__export_tvm_failed(-1, "silent"), -1);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "silent returned -1 without raising an error");
  ck_assert_int_eq(pf__export_tvm_failed(-2, NULL), -2); /* the caller's protocol: untouched */
  ck_assert_ptr_null(pf_error_take());
}
END_TEST

START_TEST(test_any_equal_and_hash_by_kind) {
  DLDataType f32 = {kDLFloat, 32, 1}, f16 = {kDLFloat, 16, 1}, f32x4 = {kDLFloat, 32, 4};
  pf_any_t a = pf_any_dtype(f32), b = pf_any_dtype(f32), c = pf_any_dtype(f16),
           d = pf_any_dtype(f32x4);
  ck_assert(pf_any_equal(&a, &b));
  ck_assert(!pf_any_equal(&a, &c));
  ck_assert(!pf_any_equal(&a, &d));
  ck_assert_uint_eq(pf_any_hash(&a), pf_any_hash(&b));
  ck_assert_uint_ne(pf_any_hash(&a), pf_any_hash(&c));
  DLDevice cpu = {kDLCPU, 0}, cpu1 = {kDLCPU, 1}, cuda = {kDLCUDA, 0};
  pf_any_t e = pf_any_device(cpu), f = pf_any_device(cpu), g = pf_any_device(cpu1),
           h = pf_any_device(cuda);
  ck_assert(pf_any_equal(&e, &f));
  ck_assert(!pf_any_equal(&e, &g));
  ck_assert(!pf_any_equal(&e, &h));
  ck_assert_uint_eq(pf_any_hash(&e), pf_any_hash(&f));
  ck_assert_uint_ne(pf_any_hash(&e), pf_any_hash(&g));
  pf_any_t n1 = pf_any_none(), n2 = pf_any_none();
  ck_assert(pf_any_equal(&n1, &n2));
  ck_assert(!pf_any_equal(&n1, &a));
  ck_assert_uint_eq(pf_any_hash(&n1), pf_any_hash(&n2));
  ck_assert(!pf_any_equal(&n1, NULL));
  ck_assert(!pf_any_equal(NULL, &n1));
  ck_assert_uint_eq(pf_any_hash(NULL), 0);
  pf_any_t z = pf_any_float(0.0), mz = pf_any_float(-0.0);
  ck_assert(pf_any_equal(&z, &mz));
  ck_assert_uint_eq(pf_any_hash(&z), pf_any_hash(&mz)); /* equal values hash alike */
  /* bytes: raw pointer form and object form compare by content */
  pf_any_t bo;
  ck_assert_int_eq(pf_bytes_create("a bytes value longer than a small one", 37, &bo), 0);
  pf_any_t bo2;
  ck_assert_int_eq(pf_bytes_create("a bytes value longer than a small one", 37, &bo2), 0);
  ck_assert(pf_any_equal(&bo, &bo2));
  ck_assert_uint_eq(pf_any_hash(&bo), pf_any_hash(&bo2));
  pf_any_release(&bo);
  pf_any_release(&bo2);
}
END_TEST

START_TEST(test_any_refusals) {
  const char* s;
  size_t n;
  ck_assert_int_eq(pf_any_as_cstr(NULL, &s), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "v");
  pf_any_t i = pf_any_int(3);
  ck_assert_int_eq(pf_any_as_cstr(&i, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "out");
  ck_assert_int_eq(pf_any_as_str(&i, &s, &n), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "expected str, got int");
  pf_any_t out;
  ck_assert_int_eq(pf_string_from_cstr(NULL, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_string_from_cstr");
  ck_assert_int_eq(pf_string_from_cstr("x", NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "out");
  ck_assert_int_eq(pf_bytes_create(NULL, 3, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "data");
  ck_assert_int_eq(pf_bytes_create("abc", 3, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "out");
  ck_assert_int_eq(pf_any_to_owned(NULL, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "view");
  ck_assert_int_eq(pf_any_to_owned(&i, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "out");
  pf_any_t null_obj = pf_any_none();
  null_obj.type_index = PF_TYPE_ARRAY;
  null_obj.v_obj = NULL;
  ck_assert_int_eq(pf_any_to_owned(&null_obj, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "with a NULL pointer");
  ck_assert_int_eq(pf_string_create("s", 1, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "out");
}
END_TEST

/* ---- errors: refusals of non-errors ---- */

START_TEST(test_error_refusals) {
  pf_object_t* err;
  ck_assert_int_eq(pf_error_create(PF_ERR_VALUE, "m", NULL, &err), 0);
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_error_set_cause(list, err), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_error_set_cause");
  ck_assert_int_eq(pf_error_set_cause(err, list), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "argument cause: expected Error, got");
  ck_assert_int_eq(pf_error_append_backtrace(list, "x"), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_error_append_backtrace: argument err: expected Error");
  /* a cause that is itself caused: the chain shows both */
  pf_object_t *mid, *root;
  ck_assert_int_eq(pf_error_create(PF_ERR_KEY, "mid", NULL, &mid), 0);
  ck_assert_int_eq(pf_error_create(PF_ERR_INDEX, "root", NULL, &root), 0);
  ck_assert_int_eq(pf_error_set_cause(mid, root), 0);
  ck_assert_int_eq(pf_error_set_cause(err, mid), 0);
  ck_assert_ptr_eq(pf_error_cause(pf_error_cause(err)), root);
  ck_assert_int_eq(pf_error_set_cause(err, NULL), 0);
  ck_assert_ptr_null(pf_error_cause(err));
  pf_object_release(root);
  pf_object_release(mid);
  pf_object_release(list);
  pf_object_release(err);
  /* a site whose text has no line number, and one with a function name */
  pf_error_set_at("file-without-line.c", 0, NULL, PF_ERR_RUNTIME, "no line %d", 1);
  err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_message(err), "no line 1");
  ck_assert_str_eq(pf_error_kind(err), PF_ERR_RUNTIME);
  pf_object_release(err);
  /* pf_error_ensure: -1 without an error becomes RuntimeError naming the callee */
  ck_assert_int_eq(pf_error_ensure("callee_x", -1), -1);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "callee_x returned -1 without raising an error");
  ck_assert_int_eq(pf_error_ensure(NULL, 2), -1);
  PF_ASSERT_RAISED(PF_ERR_RUNTIME, "a function returned 2 without raising an error");
  PF_ERROR_SET(PF_ERR_KEY, "raised before");
  ck_assert_int_eq(pf_error_ensure("callee_x", -1), -1); /* an error raised is kept */
  PF_ASSERT_RAISED(PF_ERR_KEY, "raised before");
}
END_TEST

/* ---- errors: what a raise does with an error already pending ---- */

START_TEST(test_error_pending_becomes_cause) {
  /* a new error over a pending one: the pending one is its cause */
  PF_ERROR_SET(PF_ERR_KEY, "first");
  PF_ERROR_SET(PF_ERR_VALUE, "second");
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "second");
  pf_object_t* cause = pf_error_cause(err);
  ck_assert_ptr_nonnull(cause);
  ck_assert_str_eq(pf_error_kind(cause), PF_ERR_KEY);
  ck_assert_str_eq(pf_error_message(cause), "first");
  /* raising an error that already has a cause over a pending one: the pending one is dropped */
  PF_ERROR_SET(PF_ERR_INDEX, "dropped");
  ck_assert_int_eq(pf_error_raise(err), 0);
  pf_object_t* again = pf_error_take();
  ck_assert_ptr_eq(again, err);
  ck_assert_ptr_eq(pf_error_cause(again), cause);
  pf_object_release(again);
  /* raising the pending error itself again: one reference, no cause to itself */
  ck_assert_int_eq(pf_error_raise(err), 0);
  ck_assert_int_eq(pf_error_raise(err), 0);
  again = pf_error_take();
  ck_assert_ptr_eq(again, err);
  ck_assert_ptr_eq(pf_error_cause(again), cause);
  pf_object_release(again);
  ck_assert_ptr_null(pf_error_peek());
  /* raising the cause of a pending error over it: it would loop, so the pending one goes */
  ck_assert_int_eq(pf_error_raise(err), 0);
  ck_assert_int_eq(pf_error_raise(cause), 0);
  again = pf_error_take();
  ck_assert_ptr_eq(again, cause);
  ck_assert_ptr_null(pf_error_cause(again));
  pf_object_release(again);
  /* an error without a cause raised over a pending one adopts it */
  pf_object_t* plain;
  ck_assert_int_eq(pf_error_create(PF_ERR_OS, "plain", NULL, &plain), 0);
  PF_ERROR_SET(PF_ERR_TYPE, "pending");
  ck_assert_int_eq(pf_error_raise(plain), 0);
  again = pf_error_take();
  ck_assert_ptr_eq(again, plain);
  ck_assert_str_eq(pf_error_message(pf_error_cause(again)), "pending");
  pf_object_release(again);
  pf_object_release(plain);
  pf_object_release(err);
  /* refusals: NULL and objects that are not errors */
  ck_assert_int_eq(pf_error_raise(NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_error_raise");
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_error_raise(list), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "pf_error_raise");
  pf_object_release(list);
}
END_TEST

START_TEST(test_error_sites) {
  char text[512];
  /* "file.c:123" sites, with and without a function and a line */
  static const pf_error_site_t with_line = {"site_file.c:123", 15, "site_func", 9};
  pf_error_set_site(&with_line, PF_ERR_VALUE, "at %s", "a line");
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "at a line");
  const char* bt = pf_error_backtrace(err);
  ck_assert_msg(strstr(bt, "site_file.c") && strstr(bt, "123") && strstr(bt, "site_func"), "%s",
                bt);
  pf_object_release(err);
  static const pf_error_site_t no_line = {"no_line_here.c", 14, NULL, 0};
  pf_error_set_site(&no_line, PF_ERR_KEY, "no line");
  err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), PF_ERR_KEY);
  bt = pf_error_backtrace(err);
  ck_assert_msg(strstr(bt, "no_line_here.c"), "%s", bt);
  pf_object_release(err);
  static const pf_error_site_t digits_only = {"12345", 5, NULL, 0};
  pf_error_set_site(&digits_only, PF_ERR_INDEX, "digits only");
  err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "digits only");
  pf_object_release(err);
  static const pf_error_site_t frame = {"  File \"frame.c\", line 7, in ", 29, NULL, 0};
  pf_error_set_frame(&frame, PF_ERR_RUNTIME, "a frame without a function");
  err = pf_error_take();
  bt = pf_error_backtrace(err);
  ck_assert_msg(strstr(bt, "File \"frame.c\", line 7"), "%s", bt);
  pf_object_release(err);
  /* a message longer than the stack buffer is kept whole */
  char big[1500];
  memset(big, 'm', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  pf_error_set(PF_ERR_VALUE, "%s!", big);
  err = pf_error_take();
  ck_assert_uint_eq(strlen(pf_error_message(err)), sizeof big);
  ck_assert_int_eq(pf_error_message(err)[sizeof big - 1], '!');
  /* formatting into small buffers truncates and terminates */
  size_t full = strlen("ValueError: ") + sizeof big;
  ck_assert_uint_eq(pf_error_format(err, text, 1), full);
  ck_assert_int_eq(text[0], '\0');
  ck_assert_uint_eq(pf_error_format(err, text, 8), full);
  ck_assert_str_eq(text, "ValueEr");
  pf_object_release(err);
}
END_TEST

/* ---- functions: refusals of objects that are not packfn's functions ---- */

START_TEST(test_function_refusals) {
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_function_set_info(list, "f() -> None", NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "expected a Function made by packfn");
  ck_assert_ptr_null(pf_function_signature(list));
  ck_assert_ptr_null(pf_function_doc(list));
  pf_object_release(list);
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, add_one, NULL, &fn), 0);
  ck_assert_int_eq(pf_function_set_info(fn, NULL, "doc only"), 0);
  ck_assert_ptr_null(pf_function_signature(fn));
  ck_assert_str_eq(pf_function_doc(fn), "doc only");
  pf_object_release(fn);
  static const pf_param_t params[] = {{"x", PF_PARAM_INT}};
  pf_signature_t sig = {"f", 1, params, PF_PARAM_INT, NULL};
  ck_assert_int_eq(pf_function_create_static(&sig, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "packed");
  ck_assert_int_eq(pf_function_create_static(NULL, add_one, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "sig");
}
END_TEST

/* ---- typed functions: every parameter kind through the converting path ---- */

static int kinds_impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  /* bytes and str read alike; object and function are borrowed objects */
  int64_t sum = (int64_t)args[0].s.size + (args[1].obj != NULL) + (args[2].obj != NULL) +
                (args[3].any->type_index == PF_TYPE_INT ? args[3].any->v_int64 : 0);
  *result = pf_any_int(sum);
  return 0;
}

START_TEST(test_typed_kinds_converted) {
  static const pf_param_t params[] = {
      {"b", PF_PARAM_BYTES}, {"o", PF_PARAM_OBJECT}, {"f", PF_PARAM_FUNCTION}, {"a", PF_PARAM_ANY}};
  static const pf_signature_t sig = {"kinds", 4, params, PF_PARAM_INT, NULL};
  pf_object_t *fn, *list;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), 0);
  ck_assert_int_eq(pf_list_create(&list), 0);
  pf_any_t big;
  ck_assert_int_eq(pf_bytes_create("bytes held by an object, not small", 34, &big), 0);
  pf_any_t small = pf_any_none();
  ck_assert_int_eq(pf_bytes_create("tiny", 4, &small), 0);
  pf_any_t args[4] = {big, pf_any_object(list), pf_any_object(fn), pf_any_int(5)};
  pf_any_t r = pf_any_none();
  ck_assert_int_eq(pf_function_call(fn, args, 4, &r), 0);
  ck_assert_int_eq(r.v_int64, 34 + 1 + 1 + 5);
  args[0] = small;
  args[3] = pf_any_cstr("any");
  ck_assert_int_eq(pf_function_call(fn, args, 4, &r), 0);
  ck_assert_int_eq(r.v_int64, 4 + 1 + 1);
  /* each kind refusing a wrong value */
  pf_any_t wrong[4] = {pf_any_int(1), pf_any_object(list), pf_any_object(fn), pf_any_int(0)};
  ck_assert_int_eq(pf_function_call(fn, wrong, 4, &r), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "kinds: argument 0 (b): expected bytes, got int");
  wrong[0] = small;
  wrong[1] = pf_any_int(2);
  ck_assert_int_eq(pf_function_call(fn, wrong, 4, &r), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "kinds: argument 1 (o): expected Object, got int");
  wrong[1] = pf_any_object(list);
  wrong[2] = pf_any_object(list);
  ck_assert_int_eq(pf_function_call(fn, wrong, 4, &r), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "kinds: argument 2 (f): expected Function");
  ck_assert_int_eq(pf_function_call(fn, wrong, 3, &r), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "kinds: expected 4 arguments, got 3");
  pf_any_release(&small);
  pf_any_release(&big);
  pf_object_release(list);
  pf_object_release(fn);
}
END_TEST

START_TEST(test_typed_declaration_refusals) {
  static const pf_param_t ok_params[] = {{"x", PF_PARAM_INT}};
  pf_object_t* fn = NULL;
  pf_signature_t sig = {"decl", 1, ok_params, PF_PARAM_INT, NULL};
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_function_create_typed: argument out");
  ck_assert_int_eq(pf_function_create_typed(NULL, kinds_impl, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_function_create_typed: argument sig");
  ck_assert_int_eq(pf_function_create_typed(&sig, NULL, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_function_create_typed: argument impl");
  sig.name = NULL;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "pf_function_create_typed: argument sig->name");
  sig.name = "decl";
  sig.num_params = PF_TYPED_MAX_PARAMS + 1;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "decl: expected 0..32 parameters with a params array, got 33");
  sig.num_params = -1;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "got -1");
  sig.num_params = 1;
  sig.result = (pf_param_kind_t)77;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "decl: unknown result kind 77");
  sig.result = PF_PARAM_NONE; /* a result may be none, a parameter not */
  static const pf_param_t none_param[] = {{"x", PF_PARAM_NONE}};
  sig.params = none_param;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "parameter 0: expected a name and a kind, got x and kind 0");
  static const pf_param_t empty_name[] = {{"", PF_PARAM_INT}};
  sig.params = empty_name;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "parameter 0: expected a name and a kind, got \"\" and kind 1");
  static const pf_param_t null_name[] = {{NULL, PF_PARAM_INT}};
  sig.params = null_name;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "parameter 0: expected a name and a kind, got NULL and kind 1");
  ck_assert_ptr_null(fn);
  /* a declaration with no parameters: one argument too many is refused */
  sig.num_params = 0;
  sig.params = NULL;
  sig.result = PF_PARAM_INT;
  ck_assert_int_eq(pf_function_create_typed(&sig, kinds_impl, NULL, NULL, &fn), 0);
  pf_any_t arg = pf_any_int(1), r;
  ck_assert_int_eq(pf_function_call(fn, &arg, 1, &r), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "decl: expected 0 arguments, got 1");
  ck_assert_str_eq(pf_function_signature(fn), "decl() -> int");
  pf_object_release(fn);
}
END_TEST

/* ---- lists: index and argument errors ---- */

START_TEST(test_list_refusals) {
  pf_object_t* list;
  ck_assert_int_eq(pf_list_create(&list), 0);
  pf_any_t v = pf_any_int(1), out;
  ck_assert_int_eq(pf_list_insert(list, 1, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "out of range");
  ck_assert_int_eq(pf_list_insert(list, -1, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "out of range");
  ck_assert_int_eq(pf_list_set(list, 0, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "out of range");
  ck_assert_int_eq(pf_list_pop(list, 0, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "out of range");
  ck_assert_int_eq(pf_list_append(list, &v), 0);
  ck_assert_int_eq(pf_list_set(list, 0, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "value");
  ck_assert_int_eq(pf_list_set(list, 1, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "out of range");
  ck_assert_int_eq(pf_list_pop(list, -2, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_INDEX, "out of range");
  pf_object_t* map;
  ck_assert_int_eq(pf_map_create(&map), 0);
  ck_assert_int_eq(pf_list_append(map, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "List");
  ck_assert_int_eq(pf_list_pop(map, 0, &out), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "List");
  ck_assert_int_eq(pf_list_set(map, 0, &v), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "List");
  pf_object_release(map);
  pf_object_release(list);
}
END_TEST

/* ---- container equality across kinds ---- */

START_TEST(test_container_equal_across_kinds) {
  int64_t d12[2] = {1, 2}, d13[2] = {1, 3};
  pf_object_t *s12, *s12b, *s13, *s1, *s0, *s0b;
  ck_assert_int_eq(pf_shape_create(d12, 2, &s12), 0);
  ck_assert_int_eq(pf_shape_create(d12, 2, &s12b), 0);
  ck_assert_int_eq(pf_shape_create(d13, 2, &s13), 0);
  ck_assert_int_eq(pf_shape_create(d12, 1, &s1), 0);
  ck_assert_int_eq(pf_shape_create(NULL, 0, &s0), 0);
  ck_assert_int_eq(pf_shape_create(NULL, 0, &s0b), 0);
  pf_any_t a = pf_any_object(s12), b = pf_any_object(s12b), c = pf_any_object(s13),
           d = pf_any_object(s1), e = pf_any_object(s0), f = pf_any_object(s0b);
  ck_assert_int_eq(pf_container_equal(&a, &b), 1);
  ck_assert_int_eq(pf_container_equal(&a, &c), 0);
  ck_assert_int_eq(pf_container_equal(&a, &d), 0);
  ck_assert_int_eq(pf_container_equal(&e, &f), 1);
  pf_object_t* refused = s12;
  ck_assert_int_eq(pf_shape_create(NULL, 2, &refused), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "dims");
  ck_assert_ptr_null(refused);
  /* a list is no array and a dict no map: other kinds compare by identity */
  pf_object_t *arr, *list, *map, *dict;
  pf_any_t one = pf_any_int(1);
  ck_assert_int_eq(pf_array_create(&one, 1, &arr), 0);
  ck_assert_int_eq(pf_list_create(&list), 0);
  ck_assert_int_eq(pf_list_append(list, &one), 0);
  ck_assert_int_eq(pf_map_create(&map), 0);
  ck_assert_int_eq(pf_dict_create(&dict), 0);
  ck_assert_int_eq(pf_map_set(map, &one, &one), 0);
  ck_assert_int_eq(pf_dict_set(dict, &one, &one), 0);
  pf_any_t va = pf_any_object(arr), vl = pf_any_object(list), vm = pf_any_object(map),
           vd = pf_any_object(dict);
  ck_assert_int_eq(pf_container_equal(&va, &vl), 0);
  ck_assert_int_eq(pf_container_equal(&vl, &vl), 1);
  ck_assert_int_eq(pf_container_equal(&vm, &vd), 0);
  ck_assert_int_eq(pf_container_equal(&va, &vm), 0);
  ck_assert_int_eq(pf_container_equal(&a, &va), 0);
  pf_object_t* objs[] = {s12, s12b, s13, s1, s0, s0b, arr, list, map, dict};
  for (size_t i = 0; i < sizeof objs / sizeof objs[0]; ++i)
    pf_object_release(objs[i]);
}
END_TEST

/* ---- map keys: string objects of every short length, rvalue references ---- */

START_TEST(test_map_string_object_keys) {
  static const char text[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";
  static const size_t lens[] = {1, 2, 3, 5, 7, 8, 12, 16, 20, 40};
  enum { N = sizeof lens / sizeof lens[0] };
  pf_object_t* map;
  ck_assert_int_eq(pf_dict_create(&map), 0);
  pf_object_t* keys[N];
  for (size_t i = 0; i < N; ++i) {
    ck_assert_int_eq(pf_string_object_create(text, lens[i], &keys[i]), 0);
    pf_any_t k = pf_any_object(keys[i]), v = pf_any_int((int64_t)lens[i]);
    ck_assert_int_eq(pf_dict_set(map, &k, &v), 0);
  }
  for (size_t i = 0; i < N; ++i) {
    const pf_any_t* got = NULL;
    pf_any_t same = pf_any_object(keys[i]); /* the stored object itself */
    ck_assert_int_eq(pf_dict_get(map, &same, &got), 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->v_int64, (int64_t)lens[i]);
    pf_object_t *fresh, *other;
    ck_assert_int_eq(pf_string_object_create(text, lens[i], &fresh), 0);
    char changed[64];
    memcpy(changed, text, lens[i]);
    changed[lens[i] - 1] = '#'; /* same length, last byte differs */
    ck_assert_int_eq(pf_string_object_create(changed, lens[i], &other), 0);
    pf_any_t kf = pf_any_object(fresh), ko = pf_any_object(other);
    got = NULL;
    ck_assert_int_eq(pf_dict_get(map, &kf, &got), 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->v_int64, (int64_t)lens[i]);
    /* an rvalue reference to a key object looks up its object */
    pf_object_t* ref = fresh;
    pf_any_t kr = pf_any_none();
    kr.type_index = PF_TYPE_OBJECT_RVALUE_REF;
    kr.v_ptr = &ref;
    got = NULL;
    ck_assert_int_eq(pf_dict_get(map, &kr, &got), 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(pf_dict_get(map, &ko, &got), 0);
    ck_assert_ptr_null(got);
    pf_object_release(fresh);
    pf_object_release(other);
  }
  /* an rvalue reference to a NULL object is no key: a NULL pointer (ValueError, as for values) */
  pf_object_t* null_obj = NULL;
  pf_any_t kn = pf_any_none();
  kn.type_index = PF_TYPE_OBJECT_RVALUE_REF;
  kn.v_ptr = &null_obj;
  const pf_any_t* got;
  ck_assert_int_eq(pf_dict_get(map, &kn, &got), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "argument key: an object rvalue reference with a NULL pointer");
  for (size_t i = 0; i < N; ++i)
    pf_object_release(keys[i]);
  pf_object_release(map);
}
END_TEST

/* ---- the CPU allocator called directly ---- */

START_TEST(test_cpu_allocator_hooks) {
  pf_allocator_t cpu;
  ck_assert_int_eq(pf_allocator_get(kDLCPU, &cpu), 0);
  ck_assert(cpu.alloc != NULL && cpu.free != NULL && cpu.copy != NULL);
  DLDevice dev = {kDLCPU, 0};
  void* p = &cpu;
  ck_assert_int_eq(cpu.alloc(cpu.ctx, dev, 64, 3, &p), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "argument alignment: expected a power of two");
  ck_assert_ptr_null(p);
  ck_assert_int_eq(cpu.alloc(cpu.ctx, dev, 64, 2, &p), -1);
  PF_ASSERT_RAISED(PF_ERR_VALUE, "got 2");
  ck_assert_int_eq(cpu.alloc(cpu.ctx, dev, SIZE_MAX - 8, 64, &p), -1);
  PF_ASSERT_RAISED(PF_ERR_MEMORY, "pf_allocator(cpu)");
  ck_assert_int_eq(cpu.alloc(cpu.ctx, dev, 100, 128, &p), 0);
  ck_assert_uint_eq((uintptr_t)p % 128, 0);
  char* q = NULL;
  ck_assert_int_eq(cpu.alloc(cpu.ctx, dev, 100, 16, (void**)&q), 0);
  memset(q, 7, 100);
  ck_assert_int_eq(cpu.copy(cpu.ctx, p, dev, q, dev, 100), 0);
  ck_assert_int_eq(((char*)p)[99], 7);
  cpu.free(cpu.ctx, dev, q);
  cpu.free(cpu.ctx, dev, p);
  cpu.free(cpu.ctx, dev, NULL); /* a no-op */
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("coverage");
  TCase* tc = tcase_create("core");
  tcase_add_test(tc, test_export_info_from_signature_text);
  tcase_add_test(tc, test_export_info_from_declaration);
  tcase_add_test(tc, test_export_tvm_failed_without_tvm_ffi);
  tcase_add_test(tc, test_any_equal_and_hash_by_kind);
  tcase_add_test(tc, test_any_refusals);
  tcase_add_test(tc, test_error_refusals);
  tcase_add_test(tc, test_error_pending_becomes_cause);
  tcase_add_test(tc, test_error_sites);
  tcase_add_test(tc, test_function_refusals);
  tcase_add_test(tc, test_typed_kinds_converted);
  tcase_add_test(tc, test_typed_declaration_refusals);
  tcase_add_test(tc, test_list_refusals);
  pf_test_coverage_add_global_tests(tc);
  tcase_add_test(tc, test_container_equal_across_kinds);
  tcase_add_test(tc, test_map_string_object_keys);
  tcase_add_test(tc, test_cpu_allocator_hooks);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
