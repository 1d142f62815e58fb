/* objects.h: the interface between bench_objects.c (driver, packfn's side) and
   bench_objects_tvmffi.cc (TVM-FFI's side): one kind of object, created and released one at a
   time, many alive at once. */
#ifndef PF_BENCH_OBJECTS_H
#define PF_BENCH_OBJECTS_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Inputs shared by both sides, so that they build the same objects. */
#define PF_OBJBENCH_STRING_8 "abcdefgh" /* 8 bytes: one more than a small string holds */
#define PF_OBJBENCH_STRING_100                                                                     \
  "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstu"  \
  "vwxyz!?"
#define PF_OBJBENCH_VIEW_NUMEL    1024 /* tensor_view: a 1-d float32 view of a live base tensor */
#define PF_OBJBENCH_DATA_NUMEL    256  /* tensor_1k: 1-d float32, 1024 bytes of data */
#define PF_OBJBENCH_ARRAY_N       4    /* array_4: the ints 1 .. 4 */
#define PF_OBJBENCH_ERROR_KIND    "ValueError"
#define PF_OBJBENCH_ERROR_MESSAGE "bench_objects: an error object that is made, never raised"

/* One kind of object on one runtime. The driver calls setup once, create n times (keeping
   every object alive), release on each, teardown. create returns the object (never NULL: a
   failure exits through pf_objbench_fail) and adds to *checksum a value read back from it:
     function, closure,  the type index (68)
     function_direct
     string_8, _100      the size read back (8, 100)
     bytes_100           the size read back (100)
     array_4, list_4     the item count (4)
     map_4               the entry count (4)
     shape_2             ndim (2)
     error               the message's first byte
     tensor_view         shape[0] (1024)
     tensor_slice        shape[0] (512)
     tensor_1k           shape[0] (256); the first element is written, 1.0f
     tensor_dlpack       shape[0] (256) */
typedef struct pf_objbench_kind {
  /* function, closure, function_direct, string_8, string_100, bytes_100, array_4, list_4,
     map_4, shape_2, error,
     tensor_view, tensor_slice, tensor_1k, tensor_dlpack */
  const char* kind;
  const char* impl;  /* "packfn", "tvmffi" */
  const char* entry; /* the entry points measured, for the report */
  void* (*setup)(void);
  void* (*create)(void* state, uint64_t* checksum);
  void (*release)(void* obj);
  void (*teardown)(void* state);
} pf_objbench_kind_t;

/* Prints "bench_objects: <impl> <what>: <detail>" to stderr and exits with status 2. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noreturn))
#endif
void pf_objbench_fail(const char* impl, const char* what, const char* detail);

/* tensor_dlpack's producer, the same for both sides (bench_objects.c): a new
   DLManagedTensorVersioned (DLPack 1.0; one malloc block with its shape) of 256 float32 on the
   CPU, compact, over one static buffer; its deleter frees the block. Never NULL. */
void* pf_objbench_dlpack_produce(void);

#ifdef PF_BENCH_HAVE_TVMFFI
const pf_objbench_kind_t* pf_objbench_tvmffi_kinds(size_t* count);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PF_BENCH_OBJECTS_H */
