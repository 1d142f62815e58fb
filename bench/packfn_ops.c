/* packfn_ops.c: the packfn implementation of every benchmark operation (see harness.h for the
 * contract each one follows), written as a packfn user would write it, through the public API:
 * calls, the global table, functions and references, and the table of every row (the rows of
 * strings, maps, errors, tensors and DLPack are packfn_ops_objects.c's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "packfn_ops.h"
#include "packfn/module.h"
#include "packfn/packfn.h"
#include "packfn/tensor.h"
#ifdef PF_BENCH_HAVE_KERNELS
#include "packfn/kernels.h"
#endif

void pf_bench_packfn_fail_raised(const char* what) {
  pf_object_t* err = pf_error_take();
  char msg[512];
  if (err)
    pf_error_format(err, msg, sizeof msg);
  else
    strcpy(msg, "(no error raised)");
  pf_object_release(err);
  pf_bench_fail(kImpl, what, msg);
}

/* ---- callees: check their arguments as a real callee does ---- */

static int arg_error(const char* message) {
  PF_ERROR_SET(PF_ERR_TYPE, "%s", message);
  return -1;
}

static int callee0(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  (void)args;
  if (n != 0)
    return arg_error("callee0: expected 0 arguments");
  *result = pf_any_int(1);
  return 0;
}

static int callee1(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  if (n != 1 || args[0].type_index != PF_TYPE_INT)
    return arg_error("callee1: expected (int)");
  *result = pf_any_int(args[0].v_int64 + 1);
  return 0;
}

static int callee3(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  const char* s;
  size_t len;
  if (n != 3 || args[0].type_index != PF_TYPE_INT || args[1].type_index != PF_TYPE_FLOAT)
    return arg_error("callee3: expected (int, float, str)");
  if (pf_any_as_str(&args[2], &s, &len) != 0)
    return -1;
  *result = pf_any_int(args[0].v_int64 + (int64_t)args[1].v_float64 + (unsigned char)s[0]);
  return 0;
}

static int callee6(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  if (n != 6)
    return arg_error("callee6: expected 6 arguments");
  int64_t sum = 0;
  for (int i = 0; i < 6; ++i) {
    if (args[i].type_index != PF_TYPE_INT)
      return arg_error("callee6: expected int arguments");
    sum += args[i].v_int64;
  }
  *result = pf_any_int(sum);
  return 0;
}

static int callee_tensor(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  DLTensor* t;
  if (n != 1)
    return arg_error("callee_tensor: expected 1 argument");
  if (pf_any_as_dltensor(&args[0], &t) != 0)
    return -1;
  *result = pf_any_int(t->shape[0]);
  return 0;
}

static int64_t closure_step = 1;
static int callee_closure(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  if (n != 1 || args[0].type_index != PF_TYPE_INT)
    return arg_error("callee_closure: expected (int)");
  *result = pf_any_int(args[0].v_int64 + *(const int64_t*)self);
  return 0;
}
static void closure_deleter(void* self) {
  (void)self;
}

/* The typed C layer: arity and per-argument checks generated inline by PF_TYPED_DEFINE. */
PF_TYPED_DEFINE(typed_add, INT, (INT, a), (INT, b)) {
  *result = pf_any_int(a + b);
  return 0;
}

/* ---- state ---- */

typedef struct {
  pf_object_t* fn;
} call_state_t;

static void* new_state(pf_object_t* fn) {
  call_state_t* s = malloc(sizeof *s);
  if (!s)
    pf_bench_fail(kImpl, "setup", "out of memory");
  s->fn = fn;
  return s;
}

static void teardown_call(void* state) {
  call_state_t* s = state;
  pf_object_release(s->fn);
  free(s);
}

static void* setup_direct(pf_safe_call_t call, const char* what) {
  pf_object_t* fn;
  if (pf_function_create_direct(call, &fn) != 0)
    pf_bench_packfn_fail_raised(what);
  return new_state(fn);
}

/* The general constructor with no self or deleter: the cell calls a trampoline that passes the
 * NULL self to `call`. TVM-FFI's like form is TVMFFIFunctionCreate(NULL, call, deleter), whose
 * trampoline passes its stored NULL; TVMFFIFunctionCreate(NULL, call, NULL) is instead its
 * direct form, whose `call` gets the function handle, as pf_function_create_direct's does. */
static void* setup_plain(pf_safe_call_t call, const char* what) {
  pf_object_t* fn;
  if (pf_function_create(NULL, call, NULL, &fn) != 0)
    pf_bench_packfn_fail_raised(what);
  return new_state(fn);
}
static void* setup_call0_plain(void) {
  return setup_plain(callee0, "call_0_plain");
}
static void* setup_call1_plain(void) {
  return setup_plain(callee1, "call_1int_plain");
}

static void* setup_call0(void) {
  return setup_direct(callee0, "call_0");
}
static void* setup_call1(void) {
  return setup_direct(callee1, "call_1int");
}
static void* setup_call3(void) {
  return setup_direct(callee3, "call_3mixed");
}
static void* setup_call6(void) {
  return setup_direct(callee6, "call_6int");
}
static void* setup_dltensor(void) {
  return setup_direct(callee_tensor, "call_dltensor");
}

static void* setup_closure(void) {
  pf_object_t* fn;
  if (pf_function_create(&closure_step, callee_closure, closure_deleter, &fn) != 0)
    pf_bench_packfn_fail_raised("call_1int_closure");
  return new_state(fn);
}

static void* setup_typed(void) {
  pf_object_t* fn;
  if (PF_TYPED_CREATE(typed_add, &fn) != 0)
    pf_bench_packfn_fail_raised("call_typed");
  return new_state(fn);
}

static inline int64_t call_or_fail(pf_object_t* fn, const pf_any_t* args, int32_t n,
                                   const char* what) {
  pf_any_t result;
  if (pf_function_call(fn, args, n, &result) != 0)
    pf_bench_packfn_fail_raised(what);
  return result.v_int64; /* an int result holds nothing to release */
}

static uint64_t run_call0(void* state, int64_t iters) {
  pf_object_t* fn = ((call_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += (uint64_t)call_or_fail(fn, NULL, 0, "call_0");
  return sum;
}

static uint64_t run_call1(void* state, int64_t iters) {
  pf_object_t* fn = ((call_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[1] = {pf_any_int(i)};
    sum += (uint64_t)call_or_fail(fn, args, 1, "call_1int");
  }
  return sum;
}

static uint64_t run_typed(void* state, int64_t iters) {
  pf_object_t* fn = ((call_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[2] = {pf_any_int(i), pf_any_int(1)};
    sum += (uint64_t)call_or_fail(fn, args, 2, "call_typed");
  }
  return sum;
}

static uint64_t run_call3(void* state, int64_t iters) {
  pf_object_t* fn = ((call_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[3] = {pf_any_int(i), pf_any_float(PF_BENCH_FLOAT_ARG),
                        pf_any_cstr(PF_BENCH_STR_ARG)};
    sum += (uint64_t)call_or_fail(fn, args, 3, "call_3mixed");
  }
  return sum;
}

static uint64_t run_call6(void* state, int64_t iters) {
  pf_object_t* fn = ((call_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[6] = {pf_any_int(i), pf_any_int(1), pf_any_int(2),
                        pf_any_int(3), pf_any_int(4), pf_any_int(5)};
    sum += (uint64_t)call_or_fail(fn, args, 6, "call_6int");
  }
  return sum;
}

static uint64_t run_dltensor(void* state, int64_t iters) {
  pf_object_t* fn = ((call_state_t*)state)->fn;
  static float data[PF_BENCH_TENSOR_NUMEL];
  int64_t shape[1] = {PF_BENCH_TENSOR_NUMEL};
  DLTensor t = {data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[1] = {pf_any_dltensor(&t)};
    sum += (uint64_t)call_or_fail(fn, args, 1, "call_dltensor");
  }
  return sum;
}

/* call_tensor: the callee is callee_tensor, which takes a tensor object as well as a view. */
typedef struct {
  pf_object_t* fn;
  pf_object_t* tensor;
} tensor_call_state_t;

static void* setup_call_tensor(void) {
  tensor_call_state_t* s = malloc(sizeof *s);
  if (!s)
    pf_bench_fail(kImpl, "setup", "out of memory");
  if (pf_function_create_direct(callee_tensor, &s->fn) != 0)
    pf_bench_packfn_fail_raised("call_tensor");
  s->tensor = pf_bench_packfn_new_tensor("call_tensor");
  return s;
}

static void teardown_call_tensor(void* state) {
  tensor_call_state_t* s = state;
  pf_object_release(s->fn);
  pf_object_release(s->tensor);
  free(s);
}

static uint64_t run_call_tensor(void* state, int64_t iters) {
  tensor_call_state_t* s = state;
  pf_object_t* fn = s->fn;
  pf_object_t* tensor = s->tensor;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[1] = {pf_any_object(tensor)};
    sum += (uint64_t)call_or_fail(fn, args, 1, "call_tensor");
  }
  return sum;
}

/* ---- global table ---- */

static void* setup_global(void) {
  call_state_t* s = setup_direct(callee0, "global");
  if (pf_global_set(PF_BENCH_GLOBAL_SHORT, s->fn, 1) != 0 ||
      pf_global_set(PF_BENCH_GLOBAL_LONG, s->fn, 1) != 0)
    pf_bench_packfn_fail_raised("global set");
  return s;
}

static void teardown_global(void* state) {
  if (pf_global_remove(PF_BENCH_GLOBAL_SHORT) != 0 || pf_global_remove(PF_BENCH_GLOBAL_LONG) != 0)
    pf_bench_packfn_fail_raised("global remove");
  teardown_call(state);
}

static uint64_t run_global(const char* name, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* fn;
    if (pf_global_get(name, &fn) != 0)
      pf_bench_packfn_fail_raised("global get");
    sum += fn != NULL;
    pf_object_release(fn);
  }
  return sum;
}

static uint64_t run_global_short(void* state, int64_t iters) {
  (void)state;
  return run_global(PF_BENCH_GLOBAL_SHORT, iters);
}
static uint64_t run_global_long(void* state, int64_t iters) {
  (void)state;
  return run_global(PF_BENCH_GLOBAL_LONG, iters);
}

/* ---- object lifecycle ---- */

/* Create, retain, read the count, release twice; `direct`: pf_function_create_direct (the form
 * TVMFFIFunctionCreate(NULL, call, NULL) makes), else pf_function_create without self (its
 * callee gets NULL through a trampoline). Inlined into each row with a constant, so each loop
 * calls one constructor. */
static inline uint64_t function_lifecycle_loop(int64_t iters, int direct) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* fn;
    int rc = direct ? pf_function_create_direct(callee1, &fn)
                    : pf_function_create(NULL, callee1, NULL, &fn);
    if (rc != 0)
      pf_bench_packfn_fail_raised("function create");
    pf_object_retain(fn);
    sum += pf_object_strong_count(fn);
    pf_object_release(fn);
    pf_object_release(fn);
  }
  return sum;
}

static uint64_t run_function_lifecycle(void* state, int64_t iters) {
  (void)state;
  return function_lifecycle_loop(iters, 1);
}

static uint64_t run_function_lifecycle_plain(void* state, int64_t iters) {
  (void)state;
  return function_lifecycle_loop(iters, 0);
}

static uint64_t run_closure_lifecycle(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* fn;
    if (pf_function_create(&closure_step, callee_closure, closure_deleter, &fn) != 0)
      pf_bench_packfn_fail_raised("function create");
    pf_object_retain(fn);
    sum += pf_object_strong_count(fn);
    pf_object_release(fn);
    pf_object_release(fn);
  }
  return sum;
}

/* ---- references ---- */

static uint64_t run_retain_release(void* state, int64_t iters) {
  pf_object_t* fn = ((call_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_retain(fn);
    sum += pf_object_strong_count(fn);
    pf_object_release(fn);
  }
  return sum;
}

/* weak_lock: the state holds a weak reference besides its strong one; each iteration promotes
 * it (+1 when alive) and drops the strong reference the promotion gave. */
static void* setup_weak(void) {
  call_state_t* s = setup_direct(callee1, "weak_lock");
  pf_object_weak_retain(s->fn);
  return s;
}

static void teardown_weak(void* state) {
  pf_object_weak_release(((call_state_t*)state)->fn);
  teardown_call(state);
}

static uint64_t run_weak_lock(void* state, int64_t iters) {
  pf_object_t* fn = ((call_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    int alive = pf_object_weak_lock(fn);
    sum += (uint64_t)alive;
    if (alive)
      pf_object_release(fn);
  }
  return sum;
}

/* ---- typed function built at run time from a declaration (pf_function_create_typed) ---- */

static int typed_dynamic_add(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_int(args[0].i + args[1].i);
  return 0;
}

static void* setup_typed_dynamic(void) {
  static const pf_param_t params[] = {{"a", PF_PARAM_INT}, {"b", PF_PARAM_INT}};
  static const pf_signature_t sig = {"add", 2, params, PF_PARAM_INT, NULL};
  pf_object_t* fn;
  if (pf_function_create_typed(&sig, typed_dynamic_add, NULL, NULL, &fn) != 0)
    pf_bench_packfn_fail_raised("call_typed_dynamic");
  return new_state(fn);
}

/* ---- a function from a loaded module (bench/bench_module.c, built next to packfn_bench) ---- */

typedef struct {
  pf_object_t* module;
  pf_object_t* fn;
} module_state_t;

static void* setup_module(void) {
#ifdef PF_BENCH_MODULE_PATH
  module_state_t* s = malloc(sizeof *s);
  if (!s)
    pf_bench_fail(kImpl, "setup", "out of memory");
  if (pf_module_load(PF_BENCH_MODULE_PATH, &s->module) != 0)
    pf_bench_packfn_fail_raised("module_call: load");
  if (pf_module_get_function(s->module, "add1", &s->fn) != 0)
    pf_bench_packfn_fail_raised("module_call: get function");
  return s;
#else
  pf_bench_fail(kImpl, "module_call", "built without PF_BENCH_MODULE_PATH");
#endif
}

static void teardown_module(void* state) {
  module_state_t* s = state;
  pf_object_release(s->fn);
  pf_object_release(s->module);
  free(s);
}

static uint64_t run_module_call(void* state, int64_t iters) {
  pf_object_t* fn = ((module_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[1] = {pf_any_int(i)};
    sum += (uint64_t)call_or_fail(fn, args, 1, "module_call");
  }
  return sum;
}

#ifdef PF_BENCH_HAVE_KERNELS
/* ---- add_n on one element: the dispatch cost of a real kernel (libpackfn_kernels) ---- */

typedef struct {
  pf_object_t* fn; /* packfn.kernels.add_n, NULL for the direct C entry */
  pf_object_t* x;
  pf_object_t* out;
} add_n_state_t;

static const int64_t kOneShape[1] = {1};

static void* setup_add_n_common(int packed) {
  add_n_state_t* s = calloc(1, sizeof *s);
  if (!s)
    pf_bench_fail(kImpl, "setup", "out of memory");
  if (packed && pf_global_get(PF_KERNELS_PREFIX "add_n", &s->fn) != 0)
    pf_bench_packfn_fail_raised("add_n_1: lookup");
  if (pf_tensor_empty(kOneShape, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &s->x) != 0 ||
      pf_tensor_empty(kOneShape, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &s->out) != 0)
    pf_bench_packfn_fail_raised("add_n_1: tensors");
  *(float*)pf_dltensor_data(pf_tensor_dltensor(s->x)) = 0.0f;
  return s;
}

static void* setup_add_n(void) {
  return setup_add_n_common(1);
}
static void* setup_add_n_direct(void) {
  return setup_add_n_common(0);
}

static void teardown_add_n(void* state) {
  add_n_state_t* s = state;
  pf_object_release(s->fn);
  pf_object_release(s->x);
  pf_object_release(s->out);
  free(s);
}

/* The n of call i: 1 .. 8, never the same twice in a row, so a call that left out as it was
 * would show in the sum. */
static inline double add_n_value(int64_t i) {
  return (double)((i & 7) + 1);
}

/* The sum of (i mod 8) + 1 over i < iters: what out[0] adds up to when every call worked. */
static void check_add_n(uint64_t sum, int64_t iters, const char* impl) {
  uint64_t full = (uint64_t)(iters / 8), rest = (uint64_t)(iters % 8);
  if (sum != full * 36 + rest * (rest + 1) / 2)
    pf_bench_fail(impl, "add_n_1", "out[0] is not x + n after some call");
}

/* out = x + n with x = 0: + n per call, read back from out. */
static uint64_t run_add_n(void* state, int64_t iters) {
  add_n_state_t* s = state;
  const float* out = pf_dltensor_data(pf_tensor_dltensor(s->out));
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[3] = {pf_any_object(s->x), pf_any_object(s->out), pf_any_float(add_n_value(i))};
    pf_any_t result;
    if (pf_function_call(s->fn, args, 3, &result) != 0)
      pf_bench_packfn_fail_raised("add_n_1");
    sum += (uint64_t)out[0];
  }
  check_add_n(sum, iters, kImpl);
  return sum;
}

static uint64_t run_add_n_direct(void* state, int64_t iters) {
  add_n_state_t* s = state;
  const DLTensor* x = pf_tensor_dltensor(s->x);
  DLTensor* out = pf_tensor_dltensor(s->out);
  const float* data = pf_dltensor_data(out);
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    if (pf_kernel_add_n(x, out, add_n_value(i)) != 0)
      pf_bench_packfn_fail_raised("add_n_1 direct");
    sum += (uint64_t)data[0];
  }
  check_add_n(sum, iters, "direct");
  return sum;
}

#endif /* PF_BENCH_HAVE_KERNELS */

static const pf_bench_op_t kOps[] = {
    {"call_0", kImpl, "pf_function_call (pf_function_create_direct)", setup_call0, run_call0,
     teardown_call},
    {"call_1int", kImpl, "pf_function_call (pf_function_create_direct)", setup_call1, run_call1,
     teardown_call},
    {"call_0_plain", kImpl, "pf_function_call (pf_function_create, no self)", setup_call0_plain,
     run_call0, teardown_call},
    {"call_1int_plain", kImpl, "pf_function_call (pf_function_create, no self)", setup_call1_plain,
     run_call1, teardown_call},
    {"call_1int_closure", kImpl, "pf_function_call (pf_function_create with self + deleter)",
     setup_closure, run_call1, teardown_call},
    {"call_3mixed", kImpl, "pf_function_call, str as a raw C string", setup_call3, run_call3,
     teardown_call},
    {"call_6int", kImpl, "pf_function_call", setup_call6, run_call6, teardown_call},
    {"call_dltensor", kImpl, "pf_function_call, DLTensor* view", setup_dltensor, run_dltensor,
     teardown_call},
    {"call_tensor", kImpl, "pf_function_call, tensor object (pf_tensor_empty)", setup_call_tensor,
     run_call_tensor, teardown_call_tensor},
    {"call_typed", kImpl, "pf_function_call on PF_TYPED_DEFINE (PF_TYPED_CREATE)", setup_typed,
     run_typed, teardown_call},
    {"call_typed_dynamic", kImpl, "pf_function_call on pf_function_create_typed",
     setup_typed_dynamic, run_typed, teardown_call},
    {"module_call", kImpl, "pf_function_call on pf_module_get_function (pf_module_load)",
     setup_module, run_module_call, teardown_module},
#ifdef PF_BENCH_HAVE_KERNELS
    {"add_n_1", kImpl, "pf_function_call on packfn.kernels.add_n, 2 tensor objects + float",
     setup_add_n, run_add_n, teardown_add_n},
    {"add_n_1", "direct", "pf_kernel_add_n (the C entry, no packing)", setup_add_n_direct,
     run_add_n_direct, teardown_add_n},
#endif
    {"global_get_short", kImpl, "pf_global_get + pf_object_release", setup_global, run_global_short,
     teardown_global},
    {"global_get_long", kImpl, "pf_global_get + pf_object_release", setup_global, run_global_long,
     teardown_global},
    {"function_lifecycle", kImpl, "pf_function_create_direct + retain + release x2", NULL,
     run_function_lifecycle, NULL},
    {"function_lifecycle_plain", kImpl, "pf_function_create(NULL self) + retain + release x2", NULL,
     run_function_lifecycle_plain, NULL},
    {"closure_lifecycle", kImpl, "pf_function_create(self, deleter) + retain + release x2", NULL,
     run_closure_lifecycle, NULL},
    {"retain_release", kImpl, "pf_object_retain + pf_object_release (inline atomics)", setup_call1,
     run_retain_release, teardown_call},
    {"weak_lock", kImpl, "pf_object_weak_lock + pf_object_release", setup_weak, run_weak_lock,
     teardown_weak},
    {"string_5", kImpl, "pf_string_create + pf_any_release", NULL, pf_bench_packfn_run_string5,
     NULL},
    {"string_100", kImpl, "pf_string_create + pf_any_release", NULL, pf_bench_packfn_run_string100,
     NULL},
    {"error_roundtrip_bt", kImpl,
     "PACKFN_BACKTRACE=1: PF_ERROR_SET (site + backtrace(3)) + pf_error_take + "
     "pf_error_backtrace (frames named: backtrace_symbols) + pf_object_release",
     pf_bench_packfn_setup_error_bt, pf_bench_packfn_run_error_bt, NULL},
    {"error_roundtrip_nobt", kImpl,
     "PACKFN_BACKTRACE off: PF_ERROR_SET (raise site line only) + pf_error_take + "
     "pf_object_release",
     pf_bench_packfn_setup_error_nobt, pf_bench_packfn_run_error, NULL},
    {"map_get_small", kImpl, "pf_map_get", pf_bench_packfn_setup_map_small,
     pf_bench_packfn_run_map_get, pf_bench_packfn_teardown_map},
    {"map_get_1k_str", kImpl, "pf_map_get", pf_bench_packfn_setup_map_1k_str,
     pf_bench_packfn_run_map_get, pf_bench_packfn_teardown_map},
    {"map_get_1k_int", kImpl, "pf_map_get", pf_bench_packfn_setup_map_1k_int,
     pf_bench_packfn_run_map_get, pf_bench_packfn_teardown_map},
    {"map_build_64", kImpl, "pf_map_create + 64 x pf_map_set + pf_object_release",
     pf_bench_packfn_setup_map_keys, pf_bench_packfn_run_map_build, pf_bench_packfn_teardown_map},
    {"tensor_empty", kImpl, "pf_tensor_empty (1024 float32 CPU) + pf_object_release", NULL,
     pf_bench_packfn_run_tensor_empty, NULL},
    {"tensor_empty_env", kImpl,
     "pf_tensor_empty through a host allocator (pf_allocator_set, aligned_alloc/free)",
     pf_bench_packfn_setup_tensor_env, pf_bench_packfn_run_tensor_empty,
     pf_bench_packfn_teardown_tensor_env},
    {"dlpack_legacy", kImpl, "pf_tensor_to_dlpack + pf_tensor_from_dlpack + pf_object_release",
     pf_bench_packfn_setup_tensor, pf_bench_packfn_run_dlpack_legacy,
     pf_bench_packfn_teardown_tensor},
    {"dlpack_versioned", kImpl,
     "pf_tensor_to_dlpack_versioned + pf_tensor_from_dlpack_versioned + pf_object_release",
     pf_bench_packfn_setup_tensor, pf_bench_packfn_run_dlpack_versioned,
     pf_bench_packfn_teardown_tensor},
#ifdef PF_BENCH_HAVE_TVMFFI
    /* last: left out unless packfn may join TVM-FFI (--joined) */
    {"error_to_tvmffi", kImpl, "PF_ERROR_SET + TVMFFIErrorMoveFromRaised + TVMFFIObjectDecRef",
     pf_bench_packfn_setup_joined, pf_bench_packfn_run_error_to_tvmffi, NULL},
    {"error_from_tvmffi", kImpl, "TVMFFIErrorSetRaisedFromCStr + pf_error_take + release",
     pf_bench_packfn_setup_joined, pf_bench_packfn_run_error_from_tvmffi, NULL},
#endif
};

int pf_bench_packfn_joined(void) {
  return pf_tvm_ffi_joined();
}

const pf_bench_op_t* pf_bench_packfn_ops(size_t* count) {
  *count = sizeof kOps / sizeof kOps[0];
#ifdef PF_BENCH_HAVE_TVMFFI
  const char* apart = getenv("PACKFN_NO_TVM_FFI");
  if (apart && *apart && strcmp(apart, "0") != 0)
    *count -= 2; /* the joined-only rows */
#endif
  return kOps;
}
