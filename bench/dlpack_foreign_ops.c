/* dlpack_foreign_ops.c: DLPack exchange rows that need both runtimes in one file, for
   packfn_bench. One iteration: a producer exports a tensor (DLManagedTensorVersioned), the
   consumer (the column's runtime) imports it, exports its tensor again, releases it and calls
   the export's deleter (which lets the import, and through it the producer's export, go):
   export -> import -> export -> release -> delete, the producer's deleter included. Checksum:
   shape[0] of the consumer's export (1024) per iteration.
     dlpack_neutral  the producer is neutral, the same for both columns: plain C in this file,
                     one DLManagedTensorVersioned over a buffer the benchmark owns, handed out
                     again each iteration (its deleter marks it returned; exporting it while a
                     consumer still holds it fails the row). Both columns do the same producer
                     work (a few stores), so the ratio compares the consumers only. No shortcut
                     can apply: the export is neither runtime's.
     dlpack_own      the producer is the consumer itself: packfn's import recognises its own
                     export and gives back the very tensor (a shortcut), TVM-FFI's wraps it.
   The TVM-FFI tensor of dlpack_own is TVM-FFI's own object, made by
   TVMFFITensorFromDLPackVersioned over a malloc'd buffer (its C API allocates no CPU tensor by
   itself). */
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

/* The neutral producer: one managed tensor, lent out to one consumer at a time. */
typedef struct neutral {
  pf_dl_managed_tensor_versioned_t managed; /* first: the deleter's self is the producer */
  int64_t shape[1];
  float* data;
  int lent; /* 1 from its export until the consumer calls its deleter */
} neutral_t;

static void neutral_deleter(pf_dl_managed_tensor_versioned_t* self) {
  ((neutral_t*)self)->lent = 0;
}

static void* new_neutral(void) {
  neutral_t* p = calloc(1, sizeof *p);
  float* data = aligned_alloc(64, PF_BENCH_TENSOR_NUMEL * sizeof(float));
  if (!p || !data)
    pf_bench_fail("neutral", "tensor", "out of memory");
  p->data = data;
  return p;
}

static void free_neutral(void* state) {
  neutral_t* p = state;
  if (p->lent)
    pf_bench_fail("neutral", "teardown", "a consumer kept the export");
  free(p->data);
  free(p);
}

/* The producer's export: the managed tensor's fields written afresh (a consumer must not
 * change them, and any that did would not carry over), then lent. */
static inline pf_dl_managed_tensor_versioned_t* export_neutral(neutral_t* p) {
  if (p->lent)
    pf_bench_fail("neutral", "export", "the last consumer did not call the deleter");
  p->lent = 1;
  p->shape[0] = PF_BENCH_TENSOR_NUMEL;
  p->managed.version.major = PF_DLPACK_VERSIONED_MAJOR;
  p->managed.version.minor = 1;
  p->managed.manager_ctx = p;
  p->managed.deleter = neutral_deleter;
  p->managed.flags = 0;
  p->managed.dl_tensor.data = p->data;
  p->managed.dl_tensor.device = kCPU;
  p->managed.dl_tensor.ndim = 1;
  p->managed.dl_tensor.dtype = kFloat32;
  p->managed.dl_tensor.shape = p->shape;
  p->managed.dl_tensor.strides = NULL;
  p->managed.dl_tensor.byte_offset = 0;
  return &p->managed;
}

static uint64_t run_packfn_neutral(void* state, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += consume_packfn(export_neutral(state));
  return sum;
}
static uint64_t run_tvmffi_neutral(void* state, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += consume_tvmffi(export_neutral(state));
  return sum;
}

/* dlpack_own: the runtime's own export, then its import, export, release, delete. */
static uint64_t run_packfn_own(void* state, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += consume_packfn(export_packfn(state));
  return sum;
}
static uint64_t run_tvmffi_own(void* state, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += consume_tvmffi(export_tvmffi(state));
  return sum;
}

static const pf_bench_op_t ops[] = {
    {"dlpack_neutral", "packfn",
     "neutral producer's export (plain C, lent again each iteration) + "
     "pf_tensor_from_dlpack_versioned + pf_tensor_to_dlpack_versioned + pf_object_release + "
     "deleter (-> the producer's deleter)",
     new_neutral, run_packfn_neutral, free_neutral},
    {"dlpack_neutral", "tvmffi",
     "neutral producer's export (plain C, lent again each iteration) + "
     "TVMFFITensorFromDLPackVersioned + TVMFFITensorToDLPackVersioned + TVMFFIObjectDecRef + "
     "deleter (-> the producer's deleter)",
     new_neutral, run_tvmffi_neutral, free_neutral},
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
