/* Tests of function objects: creation, calls, deleters run exactly once, bad calls, the
 * typed C layer with its messages and signature, and a function object built by hand. */
#include "pf_test.h"

static int add_ints(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  int64_t sum = self ? *(int64_t*)self : 0;
  for (int32_t i = 0; i < n; ++i) {
    int64_t x;
    if (pf_any_as_int(&args[i], &x) != 0)
      return -1;
    sum += x;
  }
  *result = pf_any_int(sum);
  return 0;
}

static int g_deleted;
static void count_delete(void* self) {
  g_deleted++;
  free(self);
}

START_TEST(test_create_and_call) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, add_ints, NULL, &fn), 0);
  ck_assert_int_eq(fn->type_index, PF_TYPE_FUNCTION);
  pf_any_t args[3] = {pf_any_int(1), pf_any_int(2), pf_any_bool(1)};
  pf_any_t r = pf_any_float(9);
  ck_assert_int_eq(pf_function_call(fn, args, 3, &r), 0);
  ck_assert_int_eq(r.type_index, PF_TYPE_INT);
  ck_assert_int_eq(r.v_int64, 4);
  ck_assert_int_eq(pf_function_call(fn, NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 0);
  args[1] = pf_any_cstr("two");
  ck_assert_int_eq(pf_function_call(fn, args, 3, &r), -1);
  PF_ASSERT_RAISED("TypeError", "expected int, got str");
  pf_object_release(fn);
}
END_TEST

START_TEST(test_self_and_deleter_once) {
  int64_t* base = malloc(sizeof *base);
  *base = 100;
  pf_object_t* fn;
  g_deleted = 0;
  ck_assert_int_eq(pf_function_create(base, add_ints, count_delete, &fn), 0);
  pf_any_t a = pf_any_int(5), r;
  ck_assert_int_eq(pf_function_call(fn, &a, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 105);
  pf_object_retain(fn);
  pf_object_weak_retain(fn);
  pf_object_release(fn);
  ck_assert_int_eq(g_deleted, 0);
  pf_object_release(fn);
  ck_assert_int_eq(g_deleted, 1);
  pf_object_weak_release(fn);
  ck_assert_int_eq(g_deleted, 1);
  /* the closure form refuses a NULL call or out without running the deleter */
  int64_t state = 1;
  fn = (pf_object_t*)&state;
  ck_assert_int_eq(pf_function_create(&state, NULL, count_delete, &fn), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_function_create: argument call: expected a function, got NULL");
  ck_assert_ptr_null(fn);
  ck_assert_int_eq(pf_function_create(&state, add_ints, count_delete, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create: argument out: expected a pointer, got NULL");
  ck_assert_int_eq(pf_function_create_direct(add_ints, NULL), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_function_create_direct: argument out: expected a pointer, got NULL");
  ck_assert_int_eq(g_deleted, 1);
}
END_TEST

static int direct_call(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)args;
  /* the direct form hands the function object itself to the callee */
  *result = pf_any_int(n == 0 && ((pf_object_t*)self)->type_index == PF_TYPE_FUNCTION);
  return 0;
}

START_TEST(test_direct_form) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_direct(direct_call, &fn), 0);
  ck_assert(((const pf_function_cell_t*)(fn + 1))->safe_call == direct_call);
  pf_any_t r;
  ck_assert_int_eq(pf_function_call(fn, NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 1);
  pf_object_release(fn);
  ck_assert_int_eq(pf_function_create_direct(NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "call");
}
END_TEST

START_TEST(test_bad_calls) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, add_ints, NULL, &fn), 0);
  pf_any_t r, a = pf_any_int(1);
  ck_assert_int_eq(pf_function_call(NULL, &a, 1, &r), -1);
  PF_ASSERT_RAISED("TypeError", "argument fn: expected Function, got NULL");
  ck_assert_int_eq(r.type_index, PF_TYPE_NONE);
  ck_assert_int_eq(pf_function_call(fn, &a, -1, &r), -1);
  PF_ASSERT_RAISED("ValueError", "num_args");
  ck_assert_int_eq(pf_function_call(fn, NULL, 2, &r), -1);
  PF_ASSERT_RAISED("ValueError", "argument args: expected 2 arguments, got NULL");
  ck_assert_int_eq(pf_function_call(fn, NULL, 1, &r), -1);
  PF_ASSERT_RAISED("ValueError", "argument args: expected 1 argument, got NULL");
  ck_assert_int_eq(pf_function_call(fn, &a, 1, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "argument result");
  /* no arguments as (NULL, 0) is valid: the NULL result is what is wrong (the message blamed
   * args, "expected 0 arguments, got NULL": review) */
  ck_assert_int_eq(pf_function_call(fn, NULL, 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_call: argument result: expected a pointer, got NULL");
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("definitely a str", 16, &s), 0);
  ck_assert_int_eq(pf_function_call(s, &a, 1, &r), -1);
  PF_ASSERT_RAISED("TypeError", "expected Function, got str");
  pf_object_release(s);
  pf_object_t* out = fn;
  ck_assert_int_eq(pf_function_create(NULL, NULL, NULL, &out), -1);
  PF_ASSERT_RAISED("ValueError", "call");
  ck_assert_ptr_null(out); /* every constructor sets its output on failure (it was left) */
  out = fn;
  ck_assert_int_eq(pf_function_create_direct(NULL, &out), -1);
  PF_ASSERT_RAISED("ValueError", "call");
  ck_assert_ptr_null(out);
  ck_assert_int_eq(pf_function_create(NULL, add_ints, NULL, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "out");
  ck_assert_ptr_null(pf_function_signature(NULL));
  ck_assert_int_eq(pf_function_set_info(NULL, "x", NULL), -1);
  PF_ASSERT_RAISED("TypeError", "NULL");
  ck_assert_int_eq(pf_function_set_info(fn, "f(x: int) -> int", "adds"), 0);
  ck_assert_str_eq(pf_function_signature(fn), "f(x: int) -> int");
  ck_assert_str_eq(pf_function_doc(fn), "adds");
  pf_object_release(fn);
}
END_TEST

/* A function object laid out by hand, as another runtime would: cell called with the object. */
typedef struct {
  pf_object_t header;
  pf_function_cell_t cell;
  int64_t bias;
} foreign_fn_t;
static int foreign_call(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  foreign_fn_t* f = self;
  (void)n;
  *result = pf_any_int(args[0].v_int64 + f->bias);
  return 0;
}
static void foreign_deleter(void* self, int flags) {
  if (flags & 2)
    free(self);
}

START_TEST(test_foreign_function) {
  foreign_fn_t* f = calloc(1, sizeof *f);
  f->header.combined_ref_count = ((uint64_t)1 << 32) | 1;
  f->header.type_index = PF_TYPE_FUNCTION;
  f->header.deleter = foreign_deleter;
  f->cell.safe_call = foreign_call;
  f->bias = 1000;
  pf_any_t a = pf_any_int(7), r;
  ck_assert_int_eq(pf_function_call(&f->header, &a, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 1007);
  ck_assert_ptr_null(pf_function_signature(&f->header));
  ck_assert_int_eq(pf_global_set("test.foreign", &f->header, 0), 0);
  pf_object_release(&f->header);
  ck_assert_int_eq(pf_global_call("test.foreign", &a, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 1007);
  ck_assert_int_eq(pf_global_remove("test.foreign"), 0);
}
END_TEST

static int typed_add(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_int(args[0].i + args[1].i);
  return 0;
}

static int typed_mix(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  char buf[128];
  snprintf(buf, sizeof buf, "%g|%d|%s|%d", args[0].f, args[1].b, args[2].s.data,
           args[3].tensor ? (int)args[3].tensor->ndim : -1);
  return pf_string_from_cstr(buf, result);
}

START_TEST(test_typed_function) {
  pf_signature_t sig = PF_SIGNATURE("add", PF_PARAM_INT, {"a", PF_PARAM_INT}, {"b", PF_PARAM_INT});
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_add, NULL, NULL, &fn), 0);
  ck_assert_str_eq(pf_function_signature(fn), "add(a: int, b: int) -> int");
  ck_assert_ptr_null(pf_function_doc(fn));
  pf_any_t args[3] = {pf_any_int(2), pf_any_bool(1), pf_any_int(0)};
  pf_any_t r;
  ck_assert_int_eq(pf_function_call(fn, args, 2, &r), 0);
  ck_assert_int_eq(r.v_int64, 3);
  ck_assert_int_eq(pf_function_call(fn, args, 3, &r), -1);
  PF_ASSERT_RAISED("TypeError", "add: expected 2 arguments, got 3");
  args[1] = pf_any_cstr("x");
  ck_assert_int_eq(pf_function_call(fn, args, 2, &r), -1);
  PF_ASSERT_RAISED("TypeError", "add: argument 1 (b): expected int, got str");
  args[0] = pf_any_float(1.5);
  ck_assert_int_eq(pf_function_call(fn, args, 2, &r), -1);
  PF_ASSERT_RAISED("TypeError", "add: argument 0 (a): expected int, got float");
  pf_object_release(fn);
}
END_TEST

START_TEST(test_typed_mixed_kinds) {
  static const pf_param_t params[] = {{"x", PF_PARAM_FLOAT},
                                      {"flag", PF_PARAM_BOOL},
                                      {"label", PF_PARAM_STR},
                                      {"t", PF_PARAM_TENSOR}};
  pf_signature_t sig = {"mix", 4, params, PF_PARAM_STR, "mixes things"};
  pf_object_t* fn;
  int64_t* state = malloc(sizeof *state);
  g_deleted = 0;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_mix, state, count_delete, &fn), 0);
  ck_assert_str_eq(pf_function_signature(fn),
                   "mix(x: float, flag: bool, label: str, t: Tensor) -> str");
  ck_assert_str_eq(pf_function_doc(fn), "mixes things");
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.ndim = 2;
  pf_any_t args[4] = {pf_any_int(3), pf_any_int(5), pf_any_cstr("lbl"), pf_any_dltensor(&t)};
  pf_any_t r;
  ck_assert_int_eq(pf_function_call(fn, args, 4, &r), 0);
  const char* s;
  size_t n;
  ck_assert_int_eq(pf_any_as_str(&r, &s, &n), 0);
  ck_assert_str_eq(s, "3|1|lbl|2");
  pf_any_release(&r);
  args[3] = pf_any_int(1);
  ck_assert_int_eq(pf_function_call(fn, args, 4, &r), -1);
  PF_ASSERT_RAISED("TypeError", "mix: argument 3 (t): expected Tensor, got int");
  pf_object_release(fn);
  ck_assert_int_eq(g_deleted, 1);
}
END_TEST

static int typed_plain(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  char buf[128];
  snprintf(buf, sizeof buf, "%lld|%g|%d|%d:%d|%d:%d|%s", (long long)args[0].i, args[1].f,
           (int)args[2].tensor->ndim, args[3].dtype.code, args[3].dtype.bits,
           args[4].device.device_type, args[4].device.device_id, args[5].ptr ? "p" : "null");
  return pf_string_from_cstr(buf, result);
}

/* Every parameter of this declaration takes some argument types as they are (the entry copies
 * those without converting); the other accepted types must still convert, and wrong ones must
 * still name the right argument, whichever position they are in. */
START_TEST(test_typed_plain_kinds) {
  static const pf_param_t params[] = {{"n", PF_PARAM_INT},      {"x", PF_PARAM_FLOAT},
                                      {"t", PF_PARAM_TENSOR},   {"dt", PF_PARAM_DTYPE},
                                      {"dev", PF_PARAM_DEVICE}, {"p", PF_PARAM_PTR}};
  pf_signature_t sig = {"plain", 6, params, PF_PARAM_STR, NULL};
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_plain, NULL, NULL, &fn), 0);
  int64_t shape[2] = {2, 3};
  pf_object_t* tensor;
  ck_assert_int_eq(pf_tensor_empty(shape, 2, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &tensor), 0);
  int cookie = 0;
  pf_any_t exact[6] = {pf_any_int(7),
                       pf_any_float(2.5),
                       pf_any_dltensor(pf_tensor_dltensor(tensor)),
                       pf_any_dtype(PF_DTYPE_FLOAT32),
                       pf_any_device(pf_device(PF_DEV_CPU, 3)),
                       pf_any_ptr(&cookie)};
  pf_any_t r;
  const char* s;
  size_t n;
  ck_assert_int_eq(pf_function_call(fn, exact, 6, &r), 0);
  ck_assert_int_eq(pf_any_as_str(&r, &s, &n), 0);
  ck_assert_str_eq(s, "7|2.5|2|2:32|1:3|p");
  pf_any_release(&r);
  /* accepted, but converted: bool for int, int for float, a tensor object, none for a pointer */
  pf_any_t converted[6] = {pf_any_bool(1), pf_any_int(4), pf_any_object(tensor),
                           exact[3],       exact[4],      pf_any_none()};
  ck_assert_int_eq(pf_function_call(fn, converted, 6, &r), 0);
  ck_assert_int_eq(pf_any_as_str(&r, &s, &n), 0);
  ck_assert_str_eq(s, "1|4|2|2:32|1:3|null");
  pf_any_release(&r);
  static const char* const expected[6] = {"int", "float", "Tensor", "dtype", "Device", "void*"};
  for (int i = 0; i < 6; ++i) {
    pf_any_t bad[6];
    memcpy(bad, exact, sizeof bad);
    bad[i] = pf_any_cstr("nope");
    ck_assert_int_eq(pf_function_call(fn, bad, 6, &r), -1);
    ck_assert_int_eq(r.type_index, PF_TYPE_NONE);
    char msg[96];
    snprintf(msg, sizeof msg, "plain: argument %d (%s): expected %s, got str", i, params[i].name,
             expected[i]);
    PF_ASSERT_RAISED("TypeError", msg);
  }
  /* a NULL DLTensor* is refused, not handed to the implementation (review) */
  pf_any_t null_tensor[6];
  memcpy(null_tensor, exact, sizeof null_tensor);
  null_tensor[2] = (pf_any_t){PF_TYPE_DLTENSOR_PTR, {0}, {.v_ptr = NULL}};
  ck_assert_int_eq(pf_function_call(fn, null_tensor, 6, &r), -1);
  PF_ASSERT_RAISED("TypeError", "plain: argument 2 (t): expected Tensor, got a NULL DLTensor*");
  ck_assert_int_eq(pf_function_call(fn, exact, 5, &r), -1);
  PF_ASSERT_RAISED("TypeError", "plain: expected 6 arguments, got 5");
  ck_assert_int_eq(pf_function_call(fn, NULL, 0, &r), -1);
  PF_ASSERT_RAISED("TypeError", "plain: expected 6 arguments, got 0");
  pf_object_release(tensor);
  pf_object_release(fn);
}
END_TEST

START_TEST(test_typed_bad_declarations) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_typed(NULL, typed_add, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "sig");
  pf_signature_t sig = PF_SIGNATURE("f", PF_PARAM_INT, {"a", PF_PARAM_INT});
  ck_assert_int_eq(pf_function_create_typed(&sig, NULL, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "impl");
  sig.num_params = -1;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_add, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "parameters");
  sig.num_params = PF_TYPED_MAX_PARAMS + 1;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_add, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "parameters");
  pf_param_t bad[1] = {{NULL, PF_PARAM_INT}};
  pf_signature_t sig2 = {"g", 1, bad, PF_PARAM_NONE, NULL};
  ck_assert_int_eq(pf_function_create_typed(&sig2, typed_add, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "parameter 0");
  bad[0].name = "x";
  bad[0].kind = (pf_param_kind_t)99;
  ck_assert_int_eq(pf_function_create_typed(&sig2, typed_add, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "kind 99");
  /* the compile-time path checks declarations with the same validator */
  ck_assert_int_eq(pf_function_create_static(&sig2, direct_call, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_static: g: parameter 0: expected a name and "
                                 "a kind, got x and kind 99");
  sig2.num_params = 1;
  sig2.params = NULL;
  ck_assert_int_eq(pf_function_create_static(&sig2, direct_call, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_static: g: expected 0..32 parameters with a "
                                 "params array, got 1 and params NULL");
  sig2.params = bad;
  sig2.result = (pf_param_kind_t)77;
  bad[0].kind = PF_PARAM_INT;
  ck_assert_int_eq(pf_function_create_typed(&sig2, typed_add, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "result kind");
  /* an empty name, and two parameters of one name, are refused (review: both were accepted) */
  sig2.result = PF_PARAM_INT;
  sig2.name = "";
  ck_assert_int_eq(pf_function_create_typed(&sig2, typed_add, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "expected a function name, got \"\"");
  pf_param_t twice[2] = {{"a", PF_PARAM_INT}, {"a", PF_PARAM_INT}};
  pf_signature_t sig3 = {"h", 2, twice, PF_PARAM_INT, NULL};
  ck_assert_int_eq(pf_function_create_typed(&sig3, typed_add, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "h: parameters 0 and 1 are both named 'a'");
  /* names that would make the signature text unreadable ("f(x(a, b: int) -> int" reads back
   * as other parameters) are refused, on both paths (review) */
  static const char* const broken[] = {"a, b", "c)", "x(a", "k:v", "tab\there", "nl\n", "sp ace"};
  pf_param_t one[1] = {{"a", PF_PARAM_INT}};
  pf_signature_t sig4 = {"f", 1, one, PF_PARAM_INT, NULL};
  for (size_t i = 0; i < sizeof broken / sizeof broken[0]; ++i) {
    one[0].name = broken[i];
    sig4.name = "f";
    ck_assert_int_eq(pf_function_create_typed(&sig4, typed_add, NULL, NULL, &fn), -1);
    PF_ASSERT_RAISED("ValueError", "f: parameter 0: expected a name without spaces, control "
                                   "characters, commas, colons or parentheses, got '");
    ck_assert_ptr_null(fn);
    one[0].name = "a";
    sig4.name = broken[i];
    ck_assert_int_eq(pf_function_create_static(&sig4, direct_call, &fn), -1);
    PF_ASSERT_RAISED("ValueError", "pf_function_create_static: argument sig: expected a function "
                                   "name without spaces, control characters, commas, colons or "
                                   "parentheses, got '");
  }
  /* dots, underscores, digits, <>, - and non-ASCII stay names */
  one[0].name = "x_1";
  sig4.name = "my.lib.f<locals>-\xc3\xa9";
  ck_assert_int_eq(pf_function_create_typed(&sig4, typed_add, NULL, NULL, &fn), 0);
  pf_object_release(fn);
  ck_assert_str_eq(pf_param_kind_name(PF_PARAM_DEVICE), "Device");
}
END_TEST

PF_TYPED_DEFINE(scale, FLOAT, (FLOAT, x), (INT, times), (BOOL, negate)) {
  double v = x * (double)times;
  *result = pf_any_float(negate ? -v : v);
  return 0;
}

PF_TYPED_DEFINE(describe, STR, (STR, label), (TENSOR, t), (ANY, extra), (DTYPE, dt), (DEVICE, dev),
                (PTR, p), (OBJECT, o), (FUNCTION, f)) {
  char buf[160];
  snprintf(buf, sizeof buf, "%s:%d:%d:%d:%d:%s:%d:%d", label.data, (int)t->ndim, extra->type_index,
           dt.bits, dev.device_id, p ? "p" : "null", o->type_index, f->type_index);
  return pf_string_from_cstr(buf, result);
}

PF_TYPED_DEFINE(blob_len, INT, (BYTES, b)) {
  *result = pf_any_int((int64_t)b.size);
  return 0;
}

START_TEST(test_typed_define) {
  pf_object_t* fn;
  ck_assert_int_eq(PF_TYPED_CREATE(scale, &fn), 0);
  ck_assert_str_eq(pf_function_signature(fn), "scale(x: float, times: int, negate: bool) -> float");
  pf_any_t args[3] = {pf_any_float(1.5), pf_any_int(4), pf_any_bool(1)};
  pf_any_t r;
  ck_assert_int_eq(pf_function_call(fn, args, 3, &r), 0);
  ck_assert_double_eq(r.v_float64, -6.0);
  args[0] = pf_any_int(2); /* int converts to float */
  args[2] = pf_any_int(0); /* int converts to bool */
  ck_assert_int_eq(pf_function_call(fn, args, 3, &r), 0);
  ck_assert_double_eq(r.v_float64, 8.0);
  ck_assert_int_eq(pf_function_call(fn, args, 2, &r), -1);
  PF_ASSERT_RAISED("TypeError", "scale: expected 3 arguments, got 2");
  args[1] = pf_any_float(2.0);
  ck_assert_int_eq(pf_function_call(fn, args, 3, &r), -1);
  PF_ASSERT_RAISED("TypeError", "scale: argument 1 (times): expected int, got float");
  args[1] = pf_any_int(1);
  args[0] = pf_any_cstr("x");
  ck_assert_int_eq(pf_function_call(fn, args, 3, &r), -1);
  PF_ASSERT_RAISED("TypeError", "scale: argument 0 (x): expected float, got str");
  pf_object_release(fn);
}
END_TEST

START_TEST(test_typed_define_all_kinds) {
  pf_object_t* fn;
  ck_assert_int_eq(PF_TYPED_CREATE(describe, &fn), 0);
  ck_assert_str_eq(pf_function_signature(fn),
                   "describe(label: str, t: Tensor, extra: Any, dt: dtype, dev: Device, p: void*, "
                   "o: Object, f: Function) -> str");
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.ndim = 3;
  DLDataType dt = {kDLFloat, 16, 1};
  DLDevice dev = {kDLCPU, 5};
  pf_any_t args[8] = {pf_any_cstr("L"),  pf_any_dltensor(&t), pf_any_bool(1),
                      pf_any_dtype(dt),  pf_any_device(dev),  pf_any_none(),
                      pf_any_object(fn), pf_any_object(fn)};
  pf_any_t r;
  ck_assert_int_eq(pf_function_call(fn, args, 8, &r), 0);
  const char* s;
  size_t n;
  ck_assert_int_eq(pf_any_as_str(&r, &s, &n), 0);
  ck_assert_str_eq(s, "L:3:2:16:5:null:68:68");
  pf_any_release(&r);
  /* each kind refuses a wrong type with its own message */
  const struct {
    int index;
    pf_any_t bad;
    const char* expected;
  } cases[] = {
      {0, pf_any_int(1), "argument 0 (label): expected str, got int"},
      {1, pf_any_int(1), "argument 1 (t): expected Tensor, got int"},
      {3, pf_any_int(1), "argument 3 (dt): expected dtype, got int"},
      {4, pf_any_int(1), "argument 4 (dev): expected Device, got int"},
      {5, pf_any_int(1), "argument 5 (p): expected void*, got int"},
      {6, pf_any_int(1), "argument 6 (o): expected Object, got int"},
      {7, pf_any_cstr("f"), "argument 7 (f): expected Function, got str"},
      /* NULL pointers of the right type never reach the body (review: a NULL
         DLTensor* and NULL objects did; a NULL str view said "expected str, got str"
         with a ValueError chained) */
      {0,
       {PF_TYPE_RAW_STR, {0}, {.v_c_str = NULL}},
       "argument 0 (label): expected str, got a NULL"},
      {1,
       {PF_TYPE_DLTENSOR_PTR, {0}, {.v_ptr = NULL}},
       "argument 1 (t): expected Tensor, got a NULL"},
      {6,
       {PF_TYPE_FUNCTION, {0}, {.v_obj = NULL}},
       "argument 6 (o): expected Object, got a NULL Function"},
      {7,
       {PF_TYPE_FUNCTION, {0}, {.v_obj = NULL}},
       "argument 7 (f): expected Function, got a NULL Function"},
      /* string and tensor objects holding NULL (a foreign producer's): the string
         one crashed in the conversion (review) */
      {0, {PF_TYPE_STR, {0}, {.v_obj = NULL}}, "argument 0 (label): expected str, got a NULL str"},
      {1,
       {PF_TYPE_TENSOR, {0}, {.v_obj = NULL}},
       "argument 1 (t): expected Tensor, got a NULL Tensor"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    pf_any_t saved = args[cases[i].index];
    args[cases[i].index] = cases[i].bad;
    ck_assert_int_eq(pf_function_call(fn, args, 8, &r), -1);
    ck_assert_ptr_null(pf_error_cause(pf_error_peek()));
    PF_ASSERT_RAISED("TypeError", cases[i].expected);
    args[cases[i].index] = saved;
  }
  pf_object_release(fn);
  ck_assert_int_eq(PF_TYPED_CREATE(blob_len, &fn), 0);
  pf_byte_array_t b = {"abc\0def", 7};
  args[0] = pf_any_byte_array(&b);
  ck_assert_int_eq(pf_function_call(fn, args, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 7);
  args[0] = pf_any_cstr("abc");
  ck_assert_int_eq(pf_function_call(fn, args, 1, &r), -1);
  PF_ASSERT_RAISED("TypeError", "expected bytes, got str");
  args[0] = (pf_any_t){PF_TYPE_BYTES, {0}, {.v_obj = NULL}}; /* crashed (review) */
  ck_assert_int_eq(pf_function_call(fn, args, 1, &r), -1);
  ck_assert_ptr_null(pf_error_cause(pf_error_peek()));
  PF_ASSERT_RAISED("TypeError", "argument 0 (b): expected bytes, got a NULL bytes");
  pf_byte_array_t at_null = {NULL, 5}; /* a view of 5 bytes at NULL reached the body (review) */
  args[0] = pf_any_byte_array(&at_null);
  ck_assert_int_eq(pf_function_call(fn, args, 1, &r), -1);
  PF_ASSERT_RAISED("TypeError",
                   "argument 0 (b): expected bytes, got a bytes view with a NULL data pointer");
  /* the helpers the typed entries call refuse what they cannot read (they crashed, review) */
  ck_assert_int_eq(pf_typed_arg_error(&blob_len_signature, 5, &args[0]), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arg_error: argument index: expected 0..0 for blob_len");
  ck_assert_int_eq(pf_typed_arg_error(NULL, 0, &args[0]), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arg_error: argument sig");
  ck_assert_int_eq(pf_typed_arg_error(&blob_len_signature, 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arg_error: argument arg");
  ck_assert_int_eq(pf_typed_arity_error(NULL, 0), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arity_error: argument sig");
  ck_assert_int_eq(pf_typed_arity_error(&blob_len_signature, 3), -1);
  PF_ASSERT_RAISED("TypeError", "blob_len: expected 1 argument, got 3");
  pf_object_release(fn);
  fn = (pf_object_t*)&r;
  ck_assert_int_eq(pf_function_create_static(NULL, blob_len_packed, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_static: argument sig");
  ck_assert_ptr_null(fn); /* set on failure, as every constructor's (it was left) */
  /* the message names the macro the caller wrote, not the function behind it */
  ck_assert_int_eq(PF_TYPED_CREATE(blob_len, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "PF_TYPED_CREATE: argument out: expected a pointer, got NULL");
}
END_TEST

/* A foreign value with a type index far below zero is refused by every numeric kind, at run
 * time and by PF_TYPED_DEFINE's entries: the range test subtracted PF_TYPE_INT from INT32_MIN
 * in int (signed overflow, which UBSan stopped at; review). */
START_TEST(test_typed_refuses_extreme_type_indices) {
  static const pf_param_t params[] = {
      {"n", PF_PARAM_INT}, {"flag", PF_PARAM_BOOL}, {"x", PF_PARAM_FLOAT}};
  pf_signature_t sig = {"nums", 3, params, PF_PARAM_INT, NULL};
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_add, NULL, NULL, &fn), 0);
  pf_object_t* st;
  ck_assert_int_eq(PF_TYPED_CREATE(scale, &st), 0);
  static const int32_t indices[] = {INT32_MIN, INT32_MIN + 1, -1, INT32_MAX};
  static const char* const names[3][2] = {{"n", "int"}, {"flag", "bool"}, {"x", "float"}};
  static const char* const scale_names[3][2] = {
      {"x", "float"}, {"times", "int"}, {"negate", "bool"}};
  for (size_t k = 0; k < sizeof indices / sizeof indices[0]; ++k)
    for (int i = 0; i < 3; ++i) {
      pf_any_t args[3] = {pf_any_int(1), pf_any_bool(1), pf_any_float(1.0)};
      pf_any_t scale_args[3] = {pf_any_float(1.0), pf_any_int(1), pf_any_bool(0)};
      args[i].type_index = indices[k];
      scale_args[i].type_index = indices[k];
      pf_any_t r;
      char msg[96];
      ck_assert_int_eq(pf_function_call(fn, args, 3, &r), -1);
      snprintf(msg, sizeof msg, "nums: argument %d (%s): expected %s, got", i, names[i][0],
               names[i][1]);
      PF_ASSERT_RAISED("TypeError", msg);
      ck_assert_int_eq(pf_function_call(st, scale_args, 3, &r), -1);
      snprintf(msg, sizeof msg, "scale: argument %d (%s): expected %s, got", i, scale_names[i][0],
               scale_names[i][1]);
      PF_ASSERT_RAISED("TypeError", msg);
    }
  pf_object_release(st);
  pf_object_release(fn);
}
END_TEST

static int typed_echo_numbers(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  char buf[64];
  snprintf(buf, sizeof buf, "%lld|%g|%d", (long long)args[0].i, args[1].f, args[2].b);
  return pf_string_from_cstr(buf, result);
}

PF_TYPED_DEFINE(echo_numbers, STR, (INT, n), (FLOAT, x), (BOOL, flag)) {
  char buf[64];
  snprintf(buf, sizeof buf, "%lld|%g|%d", (long long)n, x, flag);
  return pf_string_from_cstr(buf, result);
}

/* A bool another producer stored as 2 (or -1) is true, 1, for every numeric kind, as
 * pf_any_as_int and pf_any_as_float read it: an int parameter received 2 and a float one 2.0
 * (the fast path of the run-time entry copied the payload, and the conversions read it raw;
 * review). */
START_TEST(test_typed_bool_payload_read_as_0_or_1) {
  static const pf_param_t params[] = {
      {"n", PF_PARAM_INT}, {"x", PF_PARAM_FLOAT}, {"flag", PF_PARAM_BOOL}};
  pf_signature_t sig = {"echo", 3, params, PF_PARAM_STR, NULL};
  pf_object_t* fns[2];
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_echo_numbers, NULL, NULL, &fns[0]), 0);
  ck_assert_int_eq(PF_TYPED_CREATE(echo_numbers, &fns[1]), 0);
  static const int64_t payloads[] = {2, -1, INT64_MIN};
  for (int f = 0; f < 2; ++f)
    for (size_t k = 0; k < sizeof payloads / sizeof payloads[0]; ++k) {
      pf_any_t args[3] = {pf_any_bool(1), pf_any_bool(1), pf_any_bool(1)};
      for (int i = 0; i < 3; ++i)
        args[i].v_int64 = payloads[k];
      pf_any_t r;
      ck_assert_int_eq(pf_function_call(fns[f], args, 3, &r), 0);
      const char* s;
      size_t n;
      ck_assert_int_eq(pf_any_as_str(&r, &s, &n), 0);
      ck_assert_str_eq(s, "1|1|1");
      pf_any_release(&r);
      /* only the first argument a bool: the run-time entry's path for exact payloads */
      pf_any_t mixed[3] = {args[0], pf_any_float(0.5), pf_any_bool(0)};
      ck_assert_int_eq(pf_function_call(fns[f], mixed, 3, &r), 0);
      ck_assert_int_eq(pf_any_as_str(&r, &s, &n), 0);
      ck_assert_str_eq(s, "1|0.5|0");
      pf_any_release(&r);
    }
  pf_object_release(fns[0]);
  pf_object_release(fns[1]);
}
END_TEST

/* A small string or bytes longer than 7 (a broken producer's) is refused with a TypeError that
 * says so and has no cause, at run time and by PF_TYPED_DEFINE's entries: the conversions
 * called the accessor, which raised a ValueError of its own, so that the TypeError said
 * "expected str, got str" with that error as its cause (review). */
START_TEST(test_typed_refuses_broken_small_strings) {
  static const pf_param_t params[] = {{"s", PF_PARAM_STR}, {"b", PF_PARAM_BYTES}};
  pf_signature_t sig = {"texts", 2, params, PF_PARAM_INT, NULL};
  pf_object_t *fn, *st, *bl;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_add, NULL, NULL, &fn), 0);
  ck_assert_int_eq(PF_TYPED_CREATE(describe, &st), 0);
  ck_assert_int_eq(PF_TYPED_CREATE(blob_len, &bl), 0);
  pf_any_t str, bytes, r;
  ck_assert_int_eq(pf_string_create("abc", 3, &str), 0);
  ck_assert_int_eq(pf_bytes_create("abc", 3, &bytes), 0);
  ck_assert_int_eq(str.type_index, PF_TYPE_SMALL_STR);
  ck_assert_int_eq(bytes.type_index, PF_TYPE_SMALL_BYTES);
  str.small_str_len = 9;
  bytes.small_str_len = 8;
  struct {
    pf_object_t* fn;
    pf_any_t args[8];
    int32_t n;
    const char* msg;
  } cases[] = {
      {fn, {str, bytes}, 2, "texts: argument 0 (s): expected str, got a small string of length 9"},
      {fn,
       {pf_any_cstr("x"), bytes},
       2,
       "texts: argument 1 (b): expected bytes, got a small bytes of length 8"},
      {st, {str}, 8, "describe: argument 0 (label): expected str, got a small string of length 9"},
      {bl, {bytes}, 1, "blob_len: argument 0 (b): expected bytes, got a small bytes of length 8"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    ck_assert_int_eq(pf_function_call(cases[i].fn, cases[i].args, cases[i].n, &r), -1);
    pf_object_t* err = pf_error_take();
    ck_assert_ptr_nonnull(err);
    ck_assert_str_eq(pf_error_kind(err), "TypeError");
    ck_assert_msg(strstr(pf_error_message(err), cases[i].msg) != NULL, "message '%s' lacks '%s'",
                  pf_error_message(err), cases[i].msg);
    ck_assert_ptr_null(pf_error_cause(err));
    pf_object_release(err);
  }
  pf_object_release(bl);
  pf_object_release(st);
  pf_object_release(fn);
}
END_TEST

/* A NULL object of a registered type with a long key: the message names the whole key (a
 * 64-byte buffer cut it: review), at run time and in PF_TYPED_DEFINE's entries. */
START_TEST(test_typed_null_object_of_a_long_type_named_whole) {
  static const char key[] = "test.function.a_type_key_long_enough_to_pass_sixty_four_bytes.Config";
  int32_t index;
  ck_assert_int_eq(pf_type_register(key, PF_TYPE_OBJECT, &index), 0);
  static const pf_param_t params[] = {{"config", PF_PARAM_OBJECT}};
  pf_signature_t sig = {"build", 1, params, PF_PARAM_NONE, NULL};
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_add, NULL, NULL, &fn), 0);
  pf_any_t arg = {index, {0}, {.v_ptr = NULL}}, r;
  char want[160];
  snprintf(want, sizeof want, "build: argument 0 (config): expected Object, got a NULL %s", key);
  ck_assert_int_eq(pf_function_call(fn, &arg, 1, &r), -1);
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_message(err), want);
  pf_object_release(err);
  ck_assert_int_eq(pf_typed_arg_error(&sig, 0, &arg), -1);
  err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_message(err), want);
  pf_object_release(err);
  pf_object_release(fn);
}
END_TEST

/* ---- failure paths and forms the tests above leave out (issue 10, coverage) ---- */

static int g_null_self_deleted;
static void note_null_self(void* self) {
  ck_assert_ptr_null(self);
  g_null_self_deleted++;
}

/* Many functions with texts alive at once: the table of texts grows (rehashing its records)
 * and every function keeps its own texts; a deleter without self is still a closure's. */
START_TEST(test_function_texts_of_many_functions) {
  enum { N = 300 };
  static pf_object_t* fns[N];
  char sig[64], doc[64];
  g_null_self_deleted = 0;
  for (int i = 0; i < N; ++i) {
    /* every third one a closure whose self is NULL: its deleter still runs, with NULL */
    ck_assert_int_eq(
        pf_function_create(NULL, add_ints, i % 3 == 0 ? note_null_self : NULL, &fns[i]), 0);
    snprintf(sig, sizeof sig, "f%d(x: int) -> int", i);
    snprintf(doc, sizeof doc, "doc %d", i);
    /* a signature alone, a doc alone, or both */
    ck_assert_int_eq(pf_function_set_info(fns[i], i % 4 == 1 ? NULL : sig, i % 4 == 2 ? NULL : doc),
                     0);
  }
  for (int i = 0; i < N; ++i) {
    snprintf(sig, sizeof sig, "f%d(x: int) -> int", i);
    snprintf(doc, sizeof doc, "doc %d", i);
    if (i % 4 == 1)
      ck_assert_ptr_null(pf_function_signature(fns[i]));
    else
      ck_assert_str_eq(pf_function_signature(fns[i]), sig);
    if (i % 4 == 2)
      ck_assert_ptr_null(pf_function_doc(fns[i]));
    else
      ck_assert_str_eq(pf_function_doc(fns[i]), doc);
    pf_any_t a = pf_any_int(i), r = pf_any_none();
    ck_assert_int_eq(pf_function_call(fns[i], &a, 1, &r), 0);
    ck_assert_int_eq(r.v_int64, i);
  }
  /* release every other one, then check the rest still find their texts */
  for (int i = 0; i < N; i += 2)
    pf_object_release(fns[i]);
  for (int i = 1; i < N; i += 2) {
    snprintf(doc, sizeof doc, "doc %d", i);
    if (i % 4 != 2)
      ck_assert_str_eq(pf_function_doc(fns[i]), doc);
    /* texts replaced: the new ones read back */
    ck_assert_int_eq(pf_function_set_info(fns[i], "g() -> none", NULL), 0);
    ck_assert_str_eq(pf_function_signature(fns[i]), "g() -> none");
    ck_assert_ptr_null(pf_function_doc(fns[i]));
    pf_object_release(fns[i]);
  }
  ck_assert_int_eq(g_null_self_deleted, (N + 2) / 3);
}
END_TEST

static int packed_zero(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(0);
  return 0;
}

/* pf_function_create_static refuses each NULL argument and a bad declaration, setting *out to
 * NULL; a declaration without doc has none; PF_TYPED_CREATE's refusal names that macro. */
START_TEST(test_static_function_refusals) {
  static const pf_param_t one[] = {{"x", PF_PARAM_INT}};
  pf_signature_t sig = {"st", 1, one, PF_PARAM_INT, NULL};
  pf_object_t* fn = (pf_object_t*)&sig;
  ck_assert_int_eq(pf_function_create_static(&sig, packed_zero, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_static: argument out");
  ck_assert_int_eq(pf_function_create_static(&sig, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_static: argument packed");
  ck_assert_ptr_null(fn);
  fn = (pf_object_t*)&sig;
  ck_assert_int_eq(pf_function_create_static(NULL, packed_zero, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_static: argument sig");
  ck_assert_ptr_null(fn);
  pf_signature_t unnamed = {NULL, 1, one, PF_PARAM_INT, NULL};
  ck_assert_int_eq(pf_function_create_static(&unnamed, packed_zero, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_static: argument sig->name");
  pf_signature_t bad = {"st", 1, one, (pf_param_kind_t)77, NULL};
  fn = (pf_object_t*)&sig;
  ck_assert_int_eq(pf_function_create_static(&bad, packed_zero, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "pf_function_create_static: st: unknown result kind 77");
  ck_assert_ptr_null(fn);
  ck_assert_int_eq(pf__typed_create(&sig, packed_zero, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "PF_TYPED_CREATE: argument out");
  ck_assert_int_eq(pf__typed_create(&bad, packed_zero, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "PF_TYPED_CREATE: st: unknown result kind 77");
  ck_assert_int_eq(pf__typed_create(&sig, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "PF_TYPED_CREATE: argument packed");
  ck_assert_int_eq(pf__typed_create(NULL, packed_zero, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "PF_TYPED_CREATE: argument sig:");
  ck_assert_int_eq(pf__typed_create(&unnamed, packed_zero, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "PF_TYPED_CREATE: argument sig->name");
  ck_assert_ptr_null(fn);
  /* a declaration with a doc (PF_TYPED_DEFINE's have none) keeps it */
  pf_signature_t documented = {"st", 1, one, PF_PARAM_INT, "Returns zero."};
  ck_assert_int_eq(pf__typed_create(&documented, packed_zero, &fn), 0);
  ck_assert_str_eq(pf_function_doc(fn), "Returns zero.");
  ck_assert_str_eq(pf_function_signature(fn), "st(x: int) -> int");
  pf_object_release(fn);
  ck_assert_int_eq(pf_function_create_static(&sig, packed_zero, &fn), 0);
  ck_assert_str_eq(pf_function_signature(fn), "st(x: int) -> int");
  ck_assert_ptr_null(pf_function_doc(fn));
  pf_any_t r = pf_any_none();
  ck_assert_int_eq(pf_function_call(fn, NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 0);
  pf_object_release(fn);
}
END_TEST

/* The public error helpers of PF_TYPED_DEFINE's entries refuse what they cannot name. */
START_TEST(test_typed_error_helpers_refusals) {
  static const pf_param_t one[] = {{"x", PF_PARAM_BYTES}};
  pf_signature_t sig = {"h", 1, one, PF_PARAM_NONE, NULL};
  pf_any_t a = pf_any_int(1);
  ck_assert_int_eq(pf_typed_arity_error(NULL, 2), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arity_error: argument sig: expected");
  pf_signature_t unnamed = sig;
  unnamed.name = NULL;
  ck_assert_int_eq(pf_typed_arity_error(&unnamed, 2), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arity_error: argument sig->name");
  ck_assert_int_eq(pf_typed_arity_error(&sig, 0), -1);
  PF_ASSERT_RAISED("TypeError", "h: expected 1 argument, got 0");
  ck_assert_int_eq(pf_typed_arg_error(NULL, 0, &a), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arg_error: argument sig:");
  ck_assert_int_eq(pf_typed_arg_error(&unnamed, 0, &a), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arg_error: argument sig->name");
  ck_assert_int_eq(pf_typed_arg_error(&sig, 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arg_error: argument arg:");
  pf_signature_t no_params = sig;
  no_params.params = NULL;
  ck_assert_int_eq(pf_typed_arg_error(&no_params, 0, &a), -1);
  PF_ASSERT_RAISED("ValueError", "pf_typed_arg_error: argument sig->params");
  ck_assert_int_eq(pf_typed_arg_error(&sig, -1, &a), -1);
  PF_ASSERT_RAISED("ValueError", "argument index: expected 0..0 for h, got -1");
  ck_assert_int_eq(pf_typed_arg_error(&sig, 1, &a), -1);
  PF_ASSERT_RAISED("ValueError", "argument index: expected 0..0 for h, got 1");
  /* a parameter without a name reads as "?"; a bytes view at NULL with a size is named so */
  pf_param_t nameless[] = {{NULL, PF_PARAM_BYTES}};
  pf_signature_t anon = {"h", 1, nameless, PF_PARAM_NONE, NULL};
  pf_byte_array_t broken = {NULL, 3};
  pf_any_t b = pf_any_byte_array(&broken);
  ck_assert_int_eq(pf_typed_arg_error(&anon, 0, &b), -1);
  PF_ASSERT_RAISED("TypeError", "h: argument 0 (?): expected bytes, got a bytes view with a NULL "
                                "data pointer");
  pf_byte_array_t empty = {NULL, 0};
  pf_any_t e = pf_any_byte_array(&empty);
  ck_assert_int_eq(pf_typed_arg_error(&sig, 0, &e), -1);
  PF_ASSERT_RAISED("TypeError", "h: argument 0 (x): expected bytes, got ");
  /* a valid bytes view, and a byte-array Any without its array (hand-made) */
  pf_byte_array_t three = {"abc", 3};
  pf_any_t t = pf_any_byte_array(&three);
  static const pf_param_t int_param[] = {{"n", PF_PARAM_INT}};
  pf_signature_t isig = {"h", 1, int_param, PF_PARAM_NONE, NULL};
  ck_assert_int_eq(pf_typed_arg_error(&isig, 0, &t), -1);
  PF_ASSERT_RAISED("TypeError", "h: argument 0 (n): expected int, got bytes");
  pf_any_t noarr = pf_any_none();
  noarr.type_index = PF_TYPE_BYTE_ARRAY_PTR;
  ck_assert_int_eq(pf_typed_arg_error(&isig, 0, &noarr), -1);
  PF_ASSERT_RAISED("TypeError", "h: argument 0 (n): expected int, got a NULL bytes");
}
END_TEST

static int typed_len(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_int((int64_t)args[0].s.size);
  return 0;
}

/* A typed function with one parameter: its arity message says "argument"; a bytes view at NULL
 * with a size is refused, an empty one at NULL is an empty bytes; an object handed to a plain
 * (int) parameter goes to the converting entry and is refused. */
START_TEST(test_typed_one_parameter_edges) {
  pf_signature_t sig = PF_SIGNATURE("blen", PF_PARAM_INT, {"data", PF_PARAM_BYTES});
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create_typed(&sig, typed_len, NULL, NULL, &fn), 0);
  pf_any_t r = pf_any_none();
  ck_assert_int_eq(pf_function_call(fn, NULL, 0, &r), -1);
  PF_ASSERT_RAISED("TypeError", "blen: expected 1 argument, got 0");
  pf_byte_array_t broken = {NULL, 5};
  pf_any_t a = pf_any_byte_array(&broken);
  ck_assert_int_eq(pf_function_call(fn, &a, 1, &r), -1);
  PF_ASSERT_RAISED("TypeError", "blen: argument 0 (data): expected bytes, got a bytes view with a "
                                "NULL data pointer");
  pf_byte_array_t empty = {NULL, 0};
  a = pf_any_byte_array(&empty);
  ck_assert_int_eq(pf_function_call(fn, &a, 1, &r), 0);
  ck_assert_int_eq(r.v_int64, 0);
  pf_object_release(fn);
  pf_signature_t isig = PF_SIGNATURE("neg", PF_PARAM_INT, {"x", PF_PARAM_INT});
  ck_assert_int_eq(pf_function_create_typed(&isig, typed_len, NULL, NULL, &fn), 0);
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("an object, not an int", 21, &s), 0);
  a = pf_any_object(s);
  ck_assert_int_eq(pf_function_call(fn, &a, 1, &r), -1);
  PF_ASSERT_RAISED("TypeError", "neg: argument 0 (x): expected int, got str");
  pf_object_release(s);
  pf_object_release(fn);
  /* a name with DEL in it is refused as unreadable in the signature text */
  pf_signature_t del = PF_SIGNATURE("ne\x7fg", PF_PARAM_INT, {"x", PF_PARAM_INT});
  fn = (pf_object_t*)&del;
  ck_assert_int_eq(pf_function_create_typed(&del, typed_len, NULL, NULL, &fn), -1);
  PF_ASSERT_RAISED("ValueError", "expected a function name without spaces");
  ck_assert_ptr_null(fn);
}
END_TEST

/* pf_global_call's own checks name it, for one argument as for several. */
START_TEST(test_global_call_refusals_name_it) {
  pf_object_t* fn;
  ck_assert_int_eq(pf_function_create(NULL, add_ints, NULL, &fn), 0);
  ck_assert_int_eq(pf_global_set("test.function.gcall", fn, 0), 0);
  pf_any_t r = pf_any_int(3);
  ck_assert_int_eq(pf_global_call("test.function.gcall", NULL, 1, &r), -1);
  PF_ASSERT_RAISED("ValueError", "pf_global_call: argument args: expected 1 argument, got NULL");
  ck_assert_int_eq(pf_global_call("test.function.gcall", NULL, 2, &r), -1);
  PF_ASSERT_RAISED("ValueError", "pf_global_call: argument args: expected 2 arguments, got NULL");
  ck_assert_int_eq(pf_global_call("test.function.gcall", NULL, -1, &r), -1);
  PF_ASSERT_RAISED("ValueError",
                   "pf_global_call: argument num_args: expected a count >= 0, got -1");
  ck_assert_int_eq(pf_global_call("test.function.gcall", NULL, 0, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "pf_global_call: argument result");
  ck_assert_int_eq(pf_global_call("test.function.gcall", NULL, 0, &r), 0);
  ck_assert_int_eq(r.v_int64, 0);
  ck_assert_int_eq(pf_global_remove("test.function.gcall"), 0);
  pf_object_release(fn);
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("function");
  TCase* tc = tcase_create("core");
  tcase_add_test(tc, test_create_and_call);
  tcase_add_test(tc, test_self_and_deleter_once);
  tcase_add_test(tc, test_direct_form);
  tcase_add_test(tc, test_bad_calls);
  tcase_add_test(tc, test_foreign_function);
  tcase_add_test(tc, test_typed_function);
  tcase_add_test(tc, test_typed_mixed_kinds);
  tcase_add_test(tc, test_typed_plain_kinds);
  tcase_add_test(tc, test_typed_bad_declarations);
  tcase_add_test(tc, test_typed_define);
  tcase_add_test(tc, test_typed_define_all_kinds);
  tcase_add_test(tc, test_typed_refuses_extreme_type_indices);
  tcase_add_test(tc, test_typed_bool_payload_read_as_0_or_1);
  tcase_add_test(tc, test_typed_refuses_broken_small_strings);
  tcase_add_test(tc, test_typed_null_object_of_a_long_type_named_whole);
  tcase_add_test(tc, test_function_texts_of_many_functions);
  tcase_add_test(tc, test_static_function_refusals);
  tcase_add_test(tc, test_typed_error_helpers_refusals);
  tcase_add_test(tc, test_typed_one_parameter_edges);
  tcase_add_test(tc, test_global_call_refusals_name_it);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
