/* dlpack_foreign_ops.c: DLPack exchange across the two runtimes, for packfn_bench. One
   iteration: the producer exports its tensor (DLManagedTensorVersioned), the consumer imports
   it, exports its own tensor again, releases it and calls the export's deleter (which lets the
   import, and through it the producer's export, go): import -> export -> delete, the producer's
   export included. Checksum: shape[0] of the consumer's export (1024) per iteration.
     dlpack_foreign  the producer is the other runtime: packfn's column imports a TVM-FFI
                     tensor, TVM-FFI's column a packfn tensor (no shortcut can apply);
     dlpack_own      the producer is the consumer itself: packfn's import recognises its own
                     export and gives back the very tensor (a shortcut), TVM-FFI's wraps it.
   The TVM-FFI tensor is TVM-FFI's own object, made by TVMFFITensorFromDLPackVersioned over a
   malloc'd buffer (its C API allocates no CPU tensor by itself). */
#include "harness.h"

#include <stdlib.h>

#include "packfn/packfn.h"

/* TVM-FFI's C API (tvm/ffi/c_api.h; declared here so this file keeps packfn's dlpack.h). */
void TVMFFIErrorMoveFromRaised(void** result);
int TVMFFIObjectDecRef(void* obj);
int TVMFFITensorFromDLPackVersioned(pf_dl_managed_tensor_versioned_t* from, int32_t min_alignment,
                                    int32_t require_contiguous, void** out);
int TVMFFITensorToDLPackVersioned(void* from, pf_dl_managed_tensor_versioned_t** out);

static void fail_packfn(const char* what) {
  pf_object_t* err = pf_error_take();
  pf_bench_fail("packfn", what, err ? pf_error_message(err) : "no error raised");
}

static void fail_tvmffi(const char* what) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err) /* an error object's cell follows the header as packfn's does (the ABI) */
    pf_bench_fail("tvmffi", what, ((const pf_error_cell_t*)((pf_object_t*)err + 1))->message.data);
  pf_bench_fail("tvmffi", what, "no error raised");
}

static const DLDataType kFloat32 = {kDLFloat, 32, 1};
static const DLDevice kCPU = {kDLCPU, 0};

static void* new_packfn_tensor(void) {
  int64_t n = PF_BENCH_TENSOR_NUMEL;
  pf_object_t* t;
  if (pf_tensor_empty(&n, 1, kFloat32, kCPU, &t) != 0)
    fail_packfn("tensor");
  return t;
}

/* A producer's managed tensor: one block with its shape, plus the data buffer. */
typedef struct host_block {
  pf_dl_managed_tensor_versioned_t managed;
  int64_t shape[1];
} host_block_t;

static void host_block_delete(pf_dl_managed_tensor_versioned_t* self) {
  free(self->dl_tensor.data);
  free(self);
}

static void* new_tvmffi_tensor(void) {
  host_block_t* b = calloc(1, sizeof *b);
  void* data = malloc(PF_BENCH_TENSOR_NUMEL * sizeof(float));
  if (!b || !data)
    pf_bench_fail("tvmffi", "tensor", "out of memory");
  b->shape[0] = PF_BENCH_TENSOR_NUMEL;
  b->managed.version.major = PF_DLPACK_VERSIONED_MAJOR;
  b->managed.version.minor = 1;
  b->managed.deleter = host_block_delete;
  b->managed.dl_tensor.data = data;
  b->managed.dl_tensor.device = kCPU;
  b->managed.dl_tensor.ndim = 1;
  b->managed.dl_tensor.dtype = kFloat32;
  b->managed.dl_tensor.shape = b->shape;
  void* t = NULL;
  if (TVMFFITensorFromDLPackVersioned(&b->managed, 0, 0, &t) != 0)
    fail_tvmffi("tensor");
  return t;
}

static void release_packfn(void* t) {
  pf_object_release(t);
}
static void release_tvmffi(void* t) {
  TVMFFIObjectDecRef(t);
}

/* The producers' exports. */
static pf_dl_managed_tensor_versioned_t* export_packfn(void* t) {
  pf_dl_managed_tensor_versioned_t* m;
  if (pf_tensor_to_dlpack_versioned(t, &m) != 0)
    fail_packfn("to dlpack versioned");
  return m;
}
static pf_dl_managed_tensor_versioned_t* export_tvmffi(void* t) {
  pf_dl_managed_tensor_versioned_t* m = NULL;
  if (TVMFFITensorToDLPackVersioned(t, &m) != 0)
    fail_tvmffi("to dlpack versioned");
  return m;
}

/* The consumers: import, export, release, delete. */
static uint64_t consume_packfn(pf_dl_managed_tensor_versioned_t* in) {
  pf_object_t* t;
  if (pf_tensor_from_dlpack_versioned(in, &t) != 0)
    fail_packfn("from dlpack versioned");
  pf_dl_managed_tensor_versioned_t* out;
  if (pf_tensor_to_dlpack_versioned(t, &out) != 0)
    fail_packfn("to dlpack versioned");
  uint64_t n = (uint64_t)out->dl_tensor.shape[0];
  pf_object_release(t);
  out->deleter(out);
  return n;
}
static uint64_t consume_tvmffi(pf_dl_managed_tensor_versioned_t* in) {
  void* t = NULL;
  if (TVMFFITensorFromDLPackVersioned(in, 0, 0, &t) != 0)
    fail_tvmffi("from dlpack versioned");
  pf_dl_managed_tensor_versioned_t* out = NULL;
  if (TVMFFITensorToDLPackVersioned(t, &out) != 0)
    fail_tvmffi("to dlpack versioned");
  uint64_t n = (uint64_t)out->dl_tensor.shape[0];
  TVMFFIObjectDecRef(t);
  out->deleter(out);
  return n;
}

/* One loop: producer's export, then the consumer's import, export, release, delete. Inlined
   into each run_ below with its two functions known. */
static inline uint64_t run_exchange(void* state, int64_t iters,
                                    pf_dl_managed_tensor_versioned_t* (*produce)(void*),
                                    uint64_t (*consume)(pf_dl_managed_tensor_versioned_t*)) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += consume(produce(state));
  return sum;
}

static uint64_t run_packfn_foreign(void* state, int64_t iters) {
  return run_exchange(state, iters, export_tvmffi, consume_packfn);
}
static uint64_t run_packfn_own(void* state, int64_t iters) {
  return run_exchange(state, iters, export_packfn, consume_packfn);
}
static uint64_t run_tvmffi_foreign(void* state, int64_t iters) {
  return run_exchange(state, iters, export_packfn, consume_tvmffi);
}
static uint64_t run_tvmffi_own(void* state, int64_t iters) {
  return run_exchange(state, iters, export_tvmffi, consume_tvmffi);
}

static const pf_bench_op_t ops[] = {
    {"dlpack_foreign", "packfn",
     "TVMFFITensorToDLPackVersioned (TVM-FFI's tensor) + pf_tensor_from_dlpack_versioned + "
     "pf_tensor_to_dlpack_versioned + pf_object_release + deleter",
     new_tvmffi_tensor, run_packfn_foreign, release_tvmffi},
    {"dlpack_foreign", "tvmffi",
     "pf_tensor_to_dlpack_versioned (packfn's tensor) + TVMFFITensorFromDLPackVersioned + "
     "TVMFFITensorToDLPackVersioned + TVMFFIObjectDecRef + deleter",
     new_packfn_tensor, run_tvmffi_foreign, release_packfn},
    {"dlpack_own", "packfn",
     "pf_tensor_to_dlpack_versioned + pf_tensor_from_dlpack_versioned (its own export: the same "
     "tensor back) + pf_tensor_to_dlpack_versioned + pf_object_release + deleter",
     new_packfn_tensor, run_packfn_own, release_packfn},
    {"dlpack_own", "tvmffi",
     "TVMFFITensorToDLPackVersioned + TVMFFITensorFromDLPackVersioned + "
     "TVMFFITensorToDLPackVersioned + TVMFFIObjectDecRef + deleter",
     new_tvmffi_tensor, run_tvmffi_own, release_tvmffi},
};

const pf_bench_op_t* pf_bench_dlpack_foreign_ops(size_t* count) {
  *count = sizeof ops / sizeof ops[0];
  return ops;
}
