/* consumer.c: a program outside this repository, built against an installed (and moved) packfn
 * by tests/install/run.sh, once as C and once as C++ (consumer.cc includes this file), with
 * CMake's find_package and with pkg-config. It exports and registers functions with the public
 * macros, calls them through the global table and the system module, calls a kernel of
 * libpackfn_kernels both as a packed function and as a C function, and asks libpackfn_npy for
 * the .npy type string of float32. Prints "consumer (LANG): ok" and exits 0, or says what
 * failed and exits 1. Written in the common subset of C11 and C++17. */
#include <stdio.h>
#include <string.h>

#include "packfn/kernels.h"
#include "packfn/npy.h"
#include "packfn/packfn.h"

#ifdef __cplusplus
#define CONSUMER_LANG "C++"
#else
#define CONSUMER_LANG "C"
#endif

/* twice(x: int) -> int, a plain packed function. */
static int twice(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  int64_t x;
  (void)self;
  if (num_args != 1) {
    PF_ERROR_SET(PF_ERR_TYPE, "twice: expected 1 argument, got %d", (int)num_args);
    return -1;
  }
  if (pf_any_as_int(&args[0], &x) != 0)
    return -1;
  *result = pf_any_int(2 * x);
  return 0;
}
PF_EXPORT(twice, twice);                     /* __packfn_twice, for module loaders */
PF_REGISTER_GLOBAL("consumer.twice", twice); /* in the global table before main runs */

/* add(a: int, b: int) -> int, a typed function registered at start. */
PF_TYPED_DEFINE(add, INT, (INT, a), (INT, b)) {
  *result = pf_any_int(a + b);
  return 0;
}
PF_TYPED_REGISTER(add, "consumer.add");

static int failed(const char* what) {
  pf_object_t* err = pf_error_take();
  fprintf(stderr, "consumer (" CONSUMER_LANG "): %s failed: %s: %s\n", what,
          err != NULL ? pf_error_kind(err) : "no error", err != NULL ? pf_error_message(err) : "");
  pf_object_release(err);
  return 1;
}

/* Calls `name` with integer arguments and checks the integer result. */
static int expect_int(const char* name, const pf_any_t* args, int32_t num_args, int64_t want) {
  pf_any_t result;
  if (pf_global_call(name, args, num_args, &result) != 0)
    return failed(name);
  if (result.v_int64 != want) {
    fprintf(stderr, "consumer (" CONSUMER_LANG "): %s returned %lld, expected %lld\n", name,
            (long long)result.v_int64, (long long)want);
    return 1;
  }
  return 0;
}

/* A 1-d float32 CPU tensor over `data`. */
static DLTensor cpu_vector(float* data, int64_t* shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

int main(void) {
  pf_any_t args[2];
  args[0] = pf_any_int(21);
  if (expect_int("consumer.twice", args, 1, 42) != 0)
    return 1;
  args[0] = pf_any_int(40);
  args[1] = pf_any_int(2);
  if (expect_int("consumer.add", args, 2, 42) != 0)
    return 1;

  /* The executable's own export, through the system module (linked with ENABLE_EXPORTS). */
  pf_object_t* system_module;
  pf_any_t result;
  if (pf_module_system(&system_module) != 0)
    return failed("pf_module_system");
  args[0] = pf_any_int(5);
  int rc = pf_module_call(system_module, "twice", args, 1, &result);
  pf_object_release(system_module);
  if (rc != 0)
    return failed("system module twice");
  if (result.v_int64 != 10) {
    fprintf(stderr, "consumer (" CONSUMER_LANG "): twice(5) returned %lld\n",
            (long long)result.v_int64);
    return 1;
  }

  /* A kernel of libpackfn_kernels as a C call: out = x + 10. */
  float x[3] = {1.0f, 2.0f, 3.0f};
  float out[3] = {0.0f, 0.0f, 0.0f};
  int64_t shape[1] = {3};
  DLTensor tx = cpu_vector(x, shape);
  DLTensor tout = cpu_vector(out, shape);
  if (pf_kernel_add_n(&tx, &tout, 10.0) != 0)
    return failed("pf_kernel_add_n");
  if (out[0] != 11.0f || out[1] != 12.0f || out[2] != 13.0f) {
    fprintf(stderr, "consumer (" CONSUMER_LANG "): add_n gave %g %g %g\n", (double)out[0],
            (double)out[1], (double)out[2]);
    return 1;
  }
  /* ... and registered in the global table when the library loaded. */
  pf_object_t* kernel;
  if (pf_global_get("packfn.kernels.add_n", &kernel) != 0 || kernel == NULL) {
    fprintf(stderr, "consumer (" CONSUMER_LANG "): packfn.kernels.add_n is not registered\n");
    return 1;
  }
  pf_object_release(kernel);

  char descr[8];
  if (pf_npy_dtype_descr(tx.dtype, descr, sizeof descr) != 0 || strcmp(descr, "<f4") != 0) {
    fprintf(stderr, "consumer (" CONSUMER_LANG "): float32 is not '<f4' to libpackfn_npy\n");
    return 1;
  }

  printf("consumer (" CONSUMER_LANG "): ok, %d kernels\n", (int)pf_kernels_count());
  return 0;
}
