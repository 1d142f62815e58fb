/* packfn_ops_objects.c: the packfn side's object rows: strings, maps, errors, tensors and
 * DLPack exchange (see harness.h for the contract each one follows; packfn_ops.c holds the
 * table). */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "packfn_ops.h"
#include "packfn/packfn.h"
#include "packfn/tensor.h"

/* ---- strings ---- */

static uint64_t run_string(const char* data, size_t size, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_any_t s;
    const char* d;
    size_t n;
    PF_BENCH_OPAQUE(data);
    if (pf_string_create(data, size, &s) != 0)
      pf_bench_packfn_fail_raised("string create");
    /* A small string is built inline and its size is a constant: without this the loop would
     * keep neither the value nor the read back. */
    PF_BENCH_OPAQUE_MEM(s);
    if (pf_any_as_str(&s, &d, &n) != 0)
      pf_bench_packfn_fail_raised("string read");
    sum += n;
    pf_any_release(&s);
  }
  return sum;
}

uint64_t pf_bench_packfn_run_string5(void* state, int64_t iters) {
  (void)state;
  return run_string(PF_BENCH_STRING_5, sizeof(PF_BENCH_STRING_5) - 1, iters);
}
uint64_t pf_bench_packfn_run_string100(void* state, int64_t iters) {
  (void)state;
  return run_string(PF_BENCH_STRING_100, sizeof(PF_BENCH_STRING_100) - 1, iters);
}

/* ---- maps ---- */

/* The keys of the map rows: "op.name.NNNN" (12 bytes: string objects, as real names are) or
 * ints; a map from each key to its position. */
#define PF_BENCH_MAP_MAX 1024

typedef struct {
  pf_object_t* map;
  pf_any_t keys[PF_BENCH_MAP_MAX];
  int64_t n;
} map_state_t;

static void map_key(map_state_t* st, int64_t i, int str) {
  if (!str) {
    st->keys[i] = pf_any_int(i * 7919);
    return;
  }
  char name[32];
  int len = snprintf(name, sizeof name, "op.name.%04d", (int)i);
  if (pf_string_create(name, (size_t)len, &st->keys[i]) != 0)
    pf_bench_fail(kImpl, "map", "pf_string_create failed");
}

static map_state_t* map_setup(int64_t n, int str) {
  map_state_t* st = calloc(1, sizeof *st);
  if (!st || pf_map_create(&st->map) != 0)
    pf_bench_fail(kImpl, "map", "setup failed");
  st->n = n;
  for (int64_t i = 0; i < n; ++i) {
    map_key(st, i, str);
    pf_any_t v = pf_any_int(i);
    if (pf_map_set(st->map, &st->keys[i], &v) != 0)
      pf_bench_fail(kImpl, "map", "pf_map_set failed");
  }
  return st;
}

void* pf_bench_packfn_setup_map_small(void) {
  return map_setup(4, 1);
}
void* pf_bench_packfn_setup_map_1k_str(void) {
  return map_setup(PF_BENCH_MAP_MAX, 1);
}
void* pf_bench_packfn_setup_map_1k_int(void) {
  return map_setup(PF_BENCH_MAP_MAX, 0);
}
void* pf_bench_packfn_setup_map_keys(void) { /* keys only: map_build_64 makes its maps */
  map_state_t* st = map_setup(0, 1);
  pf_object_release(st->map);
  st->map = NULL;
  st->n = 64;
  for (int64_t i = 0; i < st->n; ++i)
    map_key(st, i, 1);
  return st;
}

void pf_bench_packfn_teardown_map(void* state) {
  map_state_t* st = state;
  for (int64_t i = 0; i < PF_BENCH_MAP_MAX; ++i)
    pf_any_release(&st->keys[i]);
  pf_object_release(st->map);
  free(st);
}

uint64_t pf_bench_packfn_run_map_get(void* state, int64_t iters) {
  map_state_t* st = state;
  uint64_t sum = 0;
  const int64_t mask = st->n - 1; /* n is a power of two */
  for (int64_t i = 0; i < iters; ++i) {
    const pf_any_t* v;
    if (pf_map_get(st->map, &st->keys[i & mask], &v) != 0 || !v)
      pf_bench_fail(kImpl, "map_get", "key not found");
    sum += (uint64_t)v->v_int64;
  }
  return sum;
}

uint64_t pf_bench_packfn_run_map_build(void* state, int64_t iters) {
  map_state_t* st = state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* m;
    if (pf_map_create(&m) != 0)
      pf_bench_fail(kImpl, "map_build_64", "pf_map_create failed");
    for (int64_t k = 0; k < st->n; ++k) {
      pf_any_t v = pf_any_int(k);
      if (pf_map_set(m, &st->keys[k], &v) != 0)
        pf_bench_fail(kImpl, "map_build_64", "pf_map_set failed");
    }
    size_t count;
    pf_map_count(m, &count);
    sum += count;
    pf_object_release(m);
  }
  return sum;
}

/* ---- errors ---- */

#ifdef PF_BENCH_HAVE_TVMFFI
/* TVM-FFI's C API (tvm/ffi/c_api.h; declared here so this file keeps packfn's dlpack.h). */
void TVMFFIErrorMoveFromRaised(void** result);
void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);
int TVMFFIObjectDecRef(void* obj);

/* Errors crossing the shared slot: only meaningful once packfn has joined (--joined). */
void* pf_bench_packfn_setup_joined(void) {
  if (!pf_tvm_ffi_join())
    pf_bench_fail(kImpl, "error_to_tvmffi", "packfn did not join TVM-FFI (run with --joined)");
  return NULL;
}

uint64_t pf_bench_packfn_run_error_to_tvmffi(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    PF_ERROR_SET(PF_BENCH_ERROR_KIND, PF_BENCH_ERROR_MESSAGE);
    void* err = NULL;
    TVMFFIErrorMoveFromRaised(&err);
    if (!err)
      pf_bench_fail(kImpl, "error_to_tvmffi", "TVM-FFI took no error");
    sum += ((const pf_error_cell_t*)((pf_object_t*)err + 1))->message.size;
    TVMFFIObjectDecRef(err);
  }
  return sum;
}

uint64_t pf_bench_packfn_run_error_from_tvmffi(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIErrorSetRaisedFromCStr(PF_BENCH_ERROR_KIND, PF_BENCH_ERROR_MESSAGE);
    pf_object_t* err = pf_error_take();
    if (!err)
      pf_bench_fail(kImpl, "error_from_tvmffi", "packfn took no error");
    sum += ((const pf_error_cell_t*)(err + 1))->message.size;
    pf_object_release(err);
  }
  return sum;
}
#endif

/* The two error rows differ in packfn's backtrace mode, which PACKFN_BACKTRACE sets once per
 * process (the harness runs a row in a process of its own when its mode differs from the
 * harness's). Each setup checks the mode on a probe error: its backtrace text has the raise
 * site's line only (off), or native frames after it (on). */
static void* setup_error_mode(int full, const char* op) {
  PF_ERROR_SET(PF_BENCH_ERROR_KIND, PF_BENCH_ERROR_MESSAGE);
  pf_object_t* err = pf_error_take();
  if (!err)
    pf_bench_fail(kImpl, op, "no error was raised");
  int lines = 0;
  for (const char* bt = pf_error_backtrace(err); bt && *bt; ++bt)
    lines += *bt == '\n';
  pf_object_release(err);
  if ((lines > 1) != full)
    pf_bench_fail(kImpl, op,
                  full ? "errors carry no native stack: PACKFN_BACKTRACE=1 was not in effect"
                       : "errors carry a native stack: PACKFN_BACKTRACE is on");
  return NULL;
}

void* pf_bench_packfn_setup_error_bt(void) {
  return setup_error_mode(1, "error_roundtrip_bt");
}
void* pf_bench_packfn_setup_error_nobt(void) {
  return setup_error_mode(0, "error_roundtrip_nobt");
}

/* The error rows' loop: raise, take, read the backtrace text when `read_bt`, release.
 * error_roundtrip_nobt: PF_ERROR_SET records the raise site (file:line, function) as the
 * backtrace's one line and walks no stack (PACKFN_BACKTRACE off). error_roundtrip_bt: with
 * PACKFN_BACKTRACE=1 the raise also takes the native stack (backtrace(3), addresses); the
 * frames are named when the text is first read, as here: TVM-FFI's raise walks and names its
 * frames at once (libbacktrace), and its row reads the text too. */
static inline __attribute__((always_inline)) uint64_t error_loop(int64_t iters, int read_bt,
                                                                 const char* op) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    PF_ERROR_SET(PF_BENCH_ERROR_KIND, PF_BENCH_ERROR_MESSAGE);
    pf_object_t* err = pf_error_take();
    if (!err)
      pf_bench_fail(kImpl, op, "no error was raised");
    if (read_bt) {
      const char* bt = pf_error_backtrace(err);
      PF_BENCH_OPAQUE(bt);
    }
    sum += ((const pf_error_cell_t*)(err + 1))->message.size;
    pf_object_release(err);
  }
  return sum;
}

uint64_t pf_bench_packfn_run_error(void* state, int64_t iters) {
  (void)state;
  return error_loop(iters, 0, "error_roundtrip_nobt");
}

uint64_t pf_bench_packfn_run_error_bt(void* state, int64_t iters) {
  (void)state;
  return error_loop(iters, 1, "error_roundtrip_bt");
}

/* ---- tensors ---- */

static const int64_t kTensorShape[1] = {PF_BENCH_TENSOR_NUMEL};

pf_object_t* pf_bench_packfn_new_tensor(const char* what) {
  pf_object_t* t;
  if (pf_tensor_empty(kTensorShape, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t) != 0)
    pf_bench_packfn_fail_raised(what);
  return t;
}

uint64_t pf_bench_packfn_run_tensor_empty(void* state, int64_t iters) {
  (void)state;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_object_t* t;
    if (pf_tensor_empty(kTensorShape, 1, PF_DTYPE_FLOAT32, PF_DEVICE_CPU, &t) != 0)
      pf_bench_packfn_fail_raised("tensor_empty");
    sum += (uint64_t)pf_tensor_dltensor(t)->shape[0];
    pf_object_release(t);
  }
  return sum;
}

/* tensor_empty_env: a host allocator installed for the CPU (aligned_alloc / free), as TVM-FFI's
 * TVMFFIEnvTensorAlloc goes through a host DLPack allocator. */
static int env_alloc(void* ctx, DLDevice device, size_t nbytes, size_t alignment, void** out) {
  (void)ctx;
  (void)device;
  *out = aligned_alloc(alignment, (nbytes + alignment - 1) / alignment * alignment);
  if (*out == NULL) {
    PF_ERROR_SET(PF_ERR_MEMORY, "bench env allocator: out of memory");
    return -1;
  }
  return 0;
}

static void env_free(void* ctx, DLDevice device, void* ptr) {
  (void)ctx;
  (void)device;
  free(ptr);
}

void* pf_bench_packfn_setup_tensor_env(void) {
  pf_allocator_t a = {NULL, env_alloc, env_free, NULL};
  if (pf_allocator_set(PF_DEV_CPU, &a) != 0)
    pf_bench_packfn_fail_raised("allocator set");
  return NULL;
}

void pf_bench_packfn_teardown_tensor_env(void* state) {
  (void)state;
  if (pf_allocator_set(PF_DEV_CPU, NULL) != 0)
    pf_bench_packfn_fail_raised("allocator restore");
}

/* ---- DLPack exchange: the state is one tensor object ---- */

void* pf_bench_packfn_setup_tensor(void) {
  return pf_bench_packfn_new_tensor("dlpack");
}

void pf_bench_packfn_teardown_tensor(void* state) {
  pf_object_release(state);
}

uint64_t pf_bench_packfn_run_dlpack_legacy(void* state, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    DLManagedTensor* managed;
    pf_object_t* back;
    if (pf_tensor_to_dlpack(state, &managed) != 0)
      pf_bench_packfn_fail_raised("to dlpack");
    if (pf_tensor_from_dlpack(managed, &back) != 0)
      pf_bench_packfn_fail_raised("from dlpack");
    sum += (uint64_t)pf_tensor_dltensor(back)->shape[0];
    pf_object_release(back);
  }
  return sum;
}

uint64_t pf_bench_packfn_run_dlpack_versioned(void* state, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    pf_dl_managed_tensor_versioned_t* managed;
    pf_object_t* back;
    if (pf_tensor_to_dlpack_versioned(state, &managed) != 0)
      pf_bench_packfn_fail_raised("to dlpack versioned");
    if (pf_tensor_from_dlpack_versioned(managed, &back) != 0)
      pf_bench_packfn_fail_raised("from dlpack versioned");
    sum += (uint64_t)pf_tensor_dltensor(back)->shape[0];
    pf_object_release(back);
  }
  return sum;
}
