/* Private: packfn's tensor objects as the tensor layer's files (tensor.c, tensor_view.c,
 * tensor_copy.c, dlpack.c) share them. */
#ifndef PACKFN_SRC_TENSOR_PRIVATE_H_
#define PACKFN_SRC_TENSOR_PRIVATE_H_

#include "packfn/tensor.h"

/* A packfn tensor object: header, the ABI's DLTensor, then our private part, in one of two
 * forms told apart by the object deleter (pf__tensor_owns_memory):
 * - memory it allocated (pf_tensor_empty): the buffer and the allocator hook that frees it; never
 *   read-only;
 * - memory something else keeps alive (views, imports, pf_tensor_from_dltensor): flags and an
 *   owner released when the tensor dies.
 * With one dimension the object takes 112 bytes. */
typedef struct pf__tensor_s {
  pf_object_t header;
  DLTensor dl; /* at offset 24 (ABI); shape/strides point into dims */
  union {
    struct {
      uint64_t flags; /* PF_DLPACK_FLAG_READ_ONLY when the memory is read-only */
      void* owner;    /* keeps the memory alive, released by owner_release */
      void (*owner_release)(void* owner); /* NULL when there is nothing to release */
    };
    struct {
      void* alloc_ptr; /* what the allocator's alloc hook gave */
      void (*alloc_free)(void* ctx, DLDevice device, void* ptr); /* its free hook */
      void* alloc_ctx;                                           /* and context */
    };
  };
  int64_t dims[]; /* shape[ndim], then strides[ndim] */
} pf__tensor_t;

/* The object deleters of the two forms (tensor.c). */
void pf__tensor_deleter(void* self, int flags);
void pf__tensor_deleter_owning(void* self, int flags);

/* 1 when `t` (a packfn tensor) holds memory it allocated, 0 when an owner keeps its memory. */
static inline int pf__tensor_owns_memory(const pf__tensor_t* t) {
  return t->header.deleter == pf__tensor_deleter_owning;
}

/* The flags of a packfn tensor (0 for one that allocated its memory). */
static inline uint64_t pf__tensor_flags(const pf__tensor_t* t) {
  return pf__tensor_owns_memory(t) ? 0 : t->flags;
}

/* Validates the description `desc` as argument `arg` of `func` (ndim, shape, dtype, data, size
 * overflow). 0, or -1 with ValueError. */
int pf__dltensor_validate(const DLTensor* desc, const char* func, const char* arg);

/* Allocates a tensor object copying `desc` (already validated): shape and strides inline
 * (compact strides when desc->strides is NULL), no owner. 0, or -1 with MemoryError. */
int pf__tensor_new(const DLTensor* desc, uint64_t flags, const char* func, pf__tensor_t** out);

/* The DLTensor of `tensor` (argument `arg` of `func`): 0, or -1 with TypeError for NULL or a
 * non-tensor. */
int pf__tensor_arg(pf_object_t* tensor, const char* func, const char* arg, DLTensor** out);

/* 1 when obj is a tensor made by packfn (whose private part we may read). */
static inline int pf__tensor_is_ours(const pf_object_t* obj) {
  return obj && (obj->deleter == pf__tensor_deleter || obj->deleter == pf__tensor_deleter_owning);
}

/* Releases an object reference held as an owner (owner_release of views and exports). */
void pf__owner_release_object(void* obj);

/* Writes "(2, 3)" for n extents into buf (truncated with "..." when it does not fit); -1
 * entries print as "*". Returns buf. */
const char* pf__format_dims(const int64_t* dims, int32_t n, char* buf, size_t size);

#endif /* PACKFN_SRC_TENSOR_PRIVATE_H_ */
