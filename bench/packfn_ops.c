/* packfn_ops.c: the packfn implementation of every benchmark operation (see harness.h for the
 * contract each one follows), written as a packfn user would write it, through the public API. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "packfn/packfn.h"

static const char kImpl[] = "packfn";

__attribute__((noreturn)) static void fail_raised(const char* what) {
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
  pf_error_set(PF_ERR_TYPE, "%s", message);
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
    fail_raised(what);
  return new_state(fn);
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
    fail_raised("call_1int_closure");
  return new_state(fn);
}

static void* setup_typed(void) {
  pf_object_t* fn;
  if (PF_TYPED_CREATE(typed_add, &fn) != 0)
    fail_raised("call_typed");
  return new_state(fn);
}

static inline int64_t call_or_fail(pf_object_t* fn, const pf_any_t* args, int32_t n,
                                   const char* what) {
  pf_any_t result;
  if (pf_function_call(fn, args, n, &result) != 0)
    fail_raised(what);
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

/* ---- global table ---- */

static void* setup_global(void) {
  call_state_t* s = setup_direct(callee0, "global");
  if (pf_global_set(PF_BENCH_GLOBAL_SHORT, s->fn, 1) != 0 ||
      pf_global_set(PF_BENCH_GLOBAL_LONG, s->fn, 1) != 0)
    fail_raised("global set");
  return s;
}

static void teardown_global(void* state) {
  if (pf_global_remove(PF_BENCH_GLOBAL_SHORT) != 0 || pf_global_remove(PF_BENCH_GLOBAL_LONG) != 0)
    fail_raised("global remove");
  teardown_call(state);
}

static uint64_t run_global(const char* name, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* fn;
    if (pf_global_get(name, &fn) != 0)
      fail_raised("global get");
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

static uint64_t run_function_lifecycle(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* fn;
    if (pf_function_create_direct(callee1, &fn) != 0)
      fail_raised("function create");
    pf_object_retain(fn);
    sum += pf_object_strong_count(fn);
    pf_object_release(fn);
    pf_object_release(fn);
  }
  return sum;
}

static uint64_t run_closure_lifecycle(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* fn;
    if (pf_function_create(&closure_step, callee_closure, closure_deleter, &fn) != 0)
      fail_raised("function create");
    pf_object_retain(fn);
    sum += pf_object_strong_count(fn);
    pf_object_release(fn);
    pf_object_release(fn);
  }
  return sum;
}

/* ---- strings ---- */

static uint64_t run_string(const char* data, size_t size, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t s;
    const char* d;
    size_t n;
    if (pf_string_create(data, size, &s) != 0 || pf_any_as_str(&s, &d, &n) != 0)
      fail_raised("string create");
    sum += n;
    pf_any_release(&s);
  }
  return sum;
}

static uint64_t run_string5(void* state, int64_t iters) {
  (void)state;
  return run_string(PF_BENCH_STRING_5, sizeof(PF_BENCH_STRING_5) - 1, iters);
}
static uint64_t run_string100(void* state, int64_t iters) {
  (void)state;
  return run_string(PF_BENCH_STRING_100, sizeof(PF_BENCH_STRING_100) - 1, iters);
}

/* ---- errors ---- */

/* pf_error_set records the raise site (file:line, function) and never walks the stack unless
 * PACKFN_BACKTRACE asks for it: the same work as TVM-FFI's raise without its stack walk. */
static uint64_t run_error(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_error_set(PF_BENCH_ERROR_KIND, PF_BENCH_ERROR_MESSAGE);
    pf_object_t* err = pf_error_take();
    if (!err)
      pf_bench_fail(kImpl, "error_roundtrip", "no error was raised");
    sum += ((const pf_error_cell_t*)(err + 1))->message.size;
    pf_object_release(err);
  }
  return sum;
}

static const pf_bench_op_t kOps[] = {
    {"call_0", kImpl, "pf_function_call (pf_function_create_direct)", setup_call0, run_call0,
     teardown_call},
    {"call_1int", kImpl, "pf_function_call (pf_function_create_direct)", setup_call1, run_call1,
     teardown_call},
    {"call_1int_closure", kImpl, "pf_function_call (pf_function_create with self + deleter)",
     setup_closure, run_call1, teardown_call},
    {"call_3mixed", kImpl, "pf_function_call, str as a raw C string", setup_call3, run_call3,
     teardown_call},
    {"call_6int", kImpl, "pf_function_call", setup_call6, run_call6, teardown_call},
    {"call_dltensor", kImpl, "pf_function_call, DLTensor* view", setup_dltensor, run_dltensor,
     teardown_call},
    {"call_typed", kImpl, "pf_function_call on PF_TYPED_DEFINE (PF_TYPED_CREATE)", setup_typed,
     run_typed, teardown_call},
    {"global_get_short", kImpl, "pf_global_get + pf_object_release", setup_global, run_global_short,
     teardown_global},
    {"global_get_long", kImpl, "pf_global_get + pf_object_release", setup_global, run_global_long,
     teardown_global},
    {"function_lifecycle", kImpl, "pf_function_create_direct + retain + release x2", NULL,
     run_function_lifecycle, NULL},
    {"closure_lifecycle", kImpl, "pf_function_create(self, deleter) + retain + release x2", NULL,
     run_closure_lifecycle, NULL},
    {"string_5", kImpl, "pf_string_create + pf_any_release", NULL, run_string5, NULL},
    {"string_100", kImpl, "pf_string_create + pf_any_release", NULL, run_string100, NULL},
    {"error_roundtrip", kImpl, "pf_error_set + pf_error_take + pf_object_release", NULL, run_error,
     NULL},
    {"error_roundtrip_nobt", kImpl, "pf_error_set + pf_error_take + pf_object_release", NULL,
     run_error, NULL},
};

const pf_bench_op_t* pf_bench_packfn_ops(size_t* count) {
  *count = sizeof kOps / sizeof kOps[0];
  return kOps;
}
