/* bench_scaling_packfn.c: the packfn side of bench_scaling's series (see scaling.h; the driver
   is bench_scaling.c, the TVM-FFI side tvmffi_scaling.cc), through packfn's C API. */
#define _GNU_SOURCE
#include "scaling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"
#include "packfn/tensor.h"

static const char kImpl[] = "packfn";

__attribute__((noreturn)) static void fail_raised(const char* what) {
  pf_object_t* err = pf_error_take();
  char msg[512] = "(no error raised)";
  if (err)
    pf_error_format(err, msg, sizeof msg);
  pf_object_release(err);
  sc_fail(kImpl, what, msg);
}

/* ---- packfn implementation ---- */

typedef struct {
  pf_object_t* fn;
  int nargs;
  const char* name;
  size_t name_len; /* strlen(name), measured once as TVM-FFI's side builds its byte array once */
  int64_t shape;
  int own_name; /* name is malloc'ed */
} pf_state_t;

static pf_state_t* pf_state_new(void) {
  pf_state_t* s = calloc(1, sizeof *s);
  if (!s)
    sc_fail(kImpl, "setup", "out of memory");
  return s;
}

/* Reads every argument, as a real callee does: count, each type index, the sum. */
static int sum_callee(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  int64_t sum = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (args[i].type_index != PF_TYPE_INT) {
      PF_ERROR_SET(PF_ERR_TYPE, "sum: argument %d: expected int", (int)i);
      return -1;
    }
    sum += args[i].v_int64;
  }
  *result = pf_any_int(sum);
  return 0;
}

static void* pf_args_setup(int nargs) {
  pf_state_t* s = pf_state_new();
  if (pf_function_create_direct(sum_callee, &s->fn) != 0)
    fail_raised("args setup");
  s->nargs = nargs;
  return s;
}

static uint64_t pf_args_run(void* state, int64_t iters) {
  pf_state_t* s = state;
  pf_any_t args[SC_MAX_ARGS];
  for (int k = 0; k < s->nargs; ++k)
    args[k] = pf_any_int(k);
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t result;
    args[0].v_int64 = i;
    if (pf_function_call(s->fn, args, s->nargs, &result) != 0)
      fail_raised("args call");
    sum += (uint64_t)result.v_int64;
  }
  return sum;
}

static int64_t pf_registered;    /* names of both kinds with i < pf_registered exist */
static pf_object_t* pf_table_fn; /* the one function every table name maps to (kept) */

static void* pf_lookup_setup(int64_t table_size) {
  pf_state_t* s = pf_state_new();
  if (pf_function_create_direct(sum_callee, &s->fn) != 0)
    fail_raised("lookup setup");
  if (!pf_table_fn && pf_function_create_direct(sum_callee, &pf_table_fn) != 0)
    fail_raised("lookup setup");
  for (; pf_registered < table_size; ++pf_registered) {
    if (pf_global_set(sc_name(SC_SUFFIX, pf_registered), pf_table_fn, 1) != 0 ||
        pf_global_set(sc_name(SC_RANDOM, pf_registered), pf_table_fn, 1) != 0)
      fail_raised("global set");
  }
  s->name = sc_name(SC_SUFFIX, table_size / 2);
  s->name_len = strlen(s->name);
  return s;
}

static uint64_t pf_lookup_run(void* state, int64_t iters) {
  pf_state_t* s = state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* fn;
    if (pf_global_get_bytes(s->name, s->name_len, &fn) != 0)
      fail_raised("global get");
    sum += fn != NULL;
    pf_object_release(fn);
  }
  return sum;
}

static void* pf_lookup_own_setup(int k) {
  pf_state_t* s = pf_state_new();
  char name[32];
  snprintf(name, sizeof name, "bench.own.%d", k);
  if (pf_function_create_direct(sum_callee, &s->fn) != 0 || pf_global_set(name, s->fn, 1) != 0)
    fail_raised("lookup own setup");
  s->name = strdup(name);
  s->own_name = 1;
  if (!s->name)
    sc_fail(kImpl, "setup", "out of memory");
  s->name_len = strlen(s->name);
  return s;
}

static uint64_t pf_lookup_list_run(void* state, const sc_name_list_t* list, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* fn;
    int64_t k = i & list->mask;
    if (pf_global_get_bytes(list->names[k], list->lens[k], &fn) != 0)
      fail_raised("global get");
    sum += fn != NULL;
    pf_object_release(fn);
  }
  return sum;
}

static void* pf_alloc_setup(int64_t nbytes) {
  pf_state_t* s = pf_state_new();
  s->shape = nbytes;
  return s;
}

static uint64_t pf_alloc_run(void* state, int64_t iters) {
  pf_state_t* s = state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* t;
    if (pf_tensor_empty(&s->shape, 1, PF_DTYPE_UINT8, PF_DEVICE_CPU, &t) != 0)
      fail_raised("tensor empty");
    sum += (uint64_t)pf_tensor_dltensor(t)->shape[0];
    pf_object_release(t);
  }
  return sum;
}

static int add1_callee(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  if (n != 1 || args[0].type_index != PF_TYPE_INT) {
    PF_ERROR_SET(PF_ERR_TYPE, "add1: expected (int)");
    return -1;
  }
  *result = pf_any_int(args[0].v_int64 + 1);
  return 0;
}

static void* pf_threads_setup(void) {
  pf_state_t* s = pf_state_new();
  if (pf_function_create_direct(add1_callee, &s->fn) != 0)
    fail_raised("threads setup");
  return s;
}

static uint64_t pf_threads_run(void* state, int64_t iters) {
  pf_object_t* fn = ((pf_state_t*)state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t args[1] = {pf_any_int(i)};
    pf_any_t result;
    if (pf_function_call(fn, args, 1, &result) != 0)
      fail_raised("threads call");
    sum += (uint64_t)result.v_int64;
  }
  return sum;
}

static void pf_teardown(void* state) {
  pf_state_t* s = state;
  pf_object_release(s->fn);
  if (s->own_name)
    free((char*)s->name);
  free(s);
}

static const sc_impl_t packfn_impl = {kImpl,
                                      pf_args_setup,
                                      pf_lookup_setup,
                                      pf_lookup_own_setup,
                                      pf_alloc_setup,
                                      pf_threads_setup,
                                      pf_args_run,
                                      pf_lookup_run,
                                      pf_lookup_list_run,
                                      pf_alloc_run,
                                      pf_threads_run,
                                      pf_teardown};

const sc_impl_t* sc_packfn_impl(void) {
  return &packfn_impl;
}
