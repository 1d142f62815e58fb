/* libffi_ops.c: the call operations through libffi's ffi_call on plain C functions, the cost
   of a generic dynamic call; each call interface is prepared once in setup, outside the loop. */
#include "harness.h"

#include <stdlib.h>

#include <ffi.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_ARGS      6

static int64_t libffi_f0(void) {
  return 1;
}
static int64_t libffi_f1(int64_t a) {
  return a + 1;
}
static int64_t libffi_f3(int64_t a, double b, const char* s) {
  return a + (int64_t)b + (int64_t)(unsigned char)s[0];
}
static int64_t libffi_f6(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f) {
  return a + b + c + d + e + f;
}

typedef struct libffi_state {
  ffi_cif cif;
  ffi_type* types[MAX_ARGS];
} libffi_state_t;

static void* libffi_prepare(unsigned nargs, ffi_type* const* types, const char* op) {
  libffi_state_t* s = calloc(1, sizeof(*s));
  if (s == NULL)
    pf_bench_fail("libffi", op, "out of memory");
  for (unsigned i = 0; i < nargs; ++i)
    s->types[i] = types[i];
  if (ffi_prep_cif(&s->cif, FFI_DEFAULT_ABI, nargs, &ffi_type_sint64, s->types) != FFI_OK)
    pf_bench_fail("libffi", op, "ffi_prep_cif failed");
  return s;
}

static void* libffi_setup_0(void) {
  return libffi_prepare(0, NULL, "call_0");
}

static void* libffi_setup_1(void) {
  ffi_type* types[] = {&ffi_type_sint64};
  return libffi_prepare(1, types, "call_1int");
}

static void* libffi_setup_3(void) {
  ffi_type* types[] = {&ffi_type_sint64, &ffi_type_double, &ffi_type_pointer};
  return libffi_prepare(3, types, "call_3mixed");
}

static void* libffi_setup_6(void) {
  ffi_type* types[] = {&ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64,
                       &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64};
  return libffi_prepare(6, types, "call_6int");
}

static void libffi_teardown(void* state) {
  free(state);
}

static uint64_t libffi_run_0(void* state, int64_t iters) {
  libffi_state_t* s = state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    ffi_arg rc;
    ffi_call(&s->cif, FFI_FN(libffi_f0), &rc, NULL);
    sum += (uint64_t)rc;
  }
  return sum;
}

static uint64_t libffi_run_1(void* state, int64_t iters) {
  libffi_state_t* s = state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    int64_t a = i;
    void* values[1] = {&a};
    ffi_arg rc;
    ffi_call(&s->cif, FFI_FN(libffi_f1), &rc, values);
    sum += (uint64_t)rc;
  }
  return sum;
}

static uint64_t libffi_run_3(void* state, int64_t iters) {
  libffi_state_t* s = state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    int64_t a = i;
    double b = PF_BENCH_FLOAT_ARG;
    const char* str = PF_BENCH_STR_ARG;
    void* values[3] = {&a, &b, &str};
    ffi_arg rc;
    ffi_call(&s->cif, FFI_FN(libffi_f3), &rc, values);
    sum += (uint64_t)rc;
  }
  return sum;
}

static uint64_t libffi_run_6(void* state, int64_t iters) {
  libffi_state_t* s = state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    int64_t a[6] = {i, 1, 2, 3, 4, 5};
    void* values[6] = {&a[0], &a[1], &a[2], &a[3], &a[4], &a[5]};
    ffi_arg rc;
    ffi_call(&s->cif, FFI_FN(libffi_f6), &rc, values);
    sum += (uint64_t)rc;
  }
  return sum;
}

static const pf_bench_op_t libffi_ops[] = {
    {"call_0", "libffi", "ffi_call", libffi_setup_0, libffi_run_0, libffi_teardown},
    {"call_1int", "libffi", "ffi_call", libffi_setup_1, libffi_run_1, libffi_teardown},
    {"call_3mixed", "libffi", "ffi_call", libffi_setup_3, libffi_run_3, libffi_teardown},
    {"call_6int", "libffi", "ffi_call", libffi_setup_6, libffi_run_6, libffi_teardown},
};

const pf_bench_op_t* pf_bench_libffi_ops(size_t* count) {
  *count = ARRAY_SIZE(libffi_ops);
  return libffi_ops;
}
