/* Private: packfn's tensor objects as the tensor layer's files (tensor.c, tensor_view.c,
 * tensor_copy.c, dlpack.c) share them. */
#ifndef PACKFN_SRC_TENSOR_PRIVATE_H_
#define PACKFN_SRC_TENSOR_PRIVATE_H_

#include "packfn/tensor.h"

/* A packfn tensor object: header, the ABI's DLTensor, then our private part. */
typedef struct pf__tensor_s {
  pf_object_t header;
  DLTensor dl;                        /* at offset 24 (ABI); shape/strides point into dims */
  uint64_t flags;                     /* PF_DLPACK_FLAG_READ_ONLY when the memory is read-only */
  void* owner;                        /* keeps the memory alive, released by owner_release */
  void (*owner_release)(void* owner); /* NULL when there is nothing to release */
  pf_allocator_t allocator;           /* the hooks that allocated alloc_ptr */
  void* alloc_ptr;                    /* memory from allocator.alloc to free, or NULL */
  int64_t dims[];                     /* shape[ndim], then strides[ndim] */
} pf__tensor_t;

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
int pf__tensor_is_ours(const pf_object_t* obj);

/* Releases an object reference held as an owner (owner_release of views and exports). */
void pf__owner_release_object(void* obj);

/* Writes "(2, 3)" for n extents into buf (truncated with "..." when it does not fit); -1
 * entries print as "*". Returns buf. */
const char* pf__format_dims(const int64_t* dims, int32_t n, char* buf, size_t size);

#endif /* PACKFN_SRC_TENSOR_PRIVATE_H_ */
