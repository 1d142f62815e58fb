/* Private: the device layer's allocator table as the tensor layer uses it. */
#ifndef PACKFN_SRC_DEVICE_PRIVATE_H_
#define PACKFN_SRC_DEVICE_PRIVATE_H_

#include "packfn/device.h"
#include "packfn/error.h"
#include "packfn/object.h"

/* Around a call of a user's hook that returns 0, or -1 with an error raised: the error the
 * caller left pending, with a reference of its own (pf__hook_begin), so that it cannot be freed
 * during the call and a new error at its address be taken for it (review); the hook's errors
 * chain onto it as any raise does. pf__hook_failed after a failed call: 1 when the hook raised
 * nothing (the slot empty, or holding the pending error still), so that the caller raises its
 * fallback; pf__hook_end drops the reference. */
static inline pf_object_t* pf__hook_begin(void) {
  pf_object_t* pending = pf_error_peek();
  pf_object_retain(pending);
  return pending;
}
static inline int pf__hook_failed(const pf_object_t* pending) {
  const pf_object_t* now = pf_error_peek();
  return !now || now == pending;
}
static inline void pf__hook_end(pf_object_t* pending) {
  pf_object_release(pending);
}

/* Device types packfn knows whose data pointers are addresses (the host's, CUDA's and ROCm's
 * memories): offsets move the pointer itself, alignment and overlap can be read from it. A
 * device type packfn does not know may hold handles (OpenCL's cl_mem) there. */
static inline int pf__is_address_device(int32_t type) {
  uint32_t t = (uint32_t)type;
  return t < 32 && ((1u << PF_DEV_CPU | 1u << PF_DEV_CUDA | 1u << PF_DEV_CUDA_HOST |
                     1u << PF_DEV_CUDA_MANAGED | 1u << PF_DEV_ROCM | 1u << PF_DEV_ROCM_HOST) >>
                    t) &
                       1u;
}

/* packfn's own CPU allocator, and whether it is the one installed for device type cpu (0 once
 * pf_allocator_set replaced it): pf_tensor_empty then allocates CPU memory without the table. */
extern const pf_allocator_t pf__cpu_allocator;
extern int pf__cpu_allocator_builtin;

/* A buffer of nbytes (> 0) at PF_TENSOR_ALIGNMENT from packfn's CPU allocator, for a tensor that
 * keeps both the returned address (its data) and *block (what pf__cpu_allocator.free takes).
 * Up to PF__SLAB_MAX bytes the two are one slab block; beyond, *block is one malloc with room to
 * align inside it, which glibc serves in about a third of the time of posix_memalign (that
 * splits a larger chunk and frees the parts around the aligned one), or, with the slabs off
 * (memory checkers), an exact posix_memalign block. NULL with MemoryError raised when out of
 * memory. */
void* pf__cpu_alloc_tensor(size_t nbytes, void** block);

/* Copies the allocator installed for `device_type` into *out: 0, or -1 with KeyError naming
 * `func` and the device type when none is installed. */
int pf__allocator_find(int32_t device_type, const char* func, pf_allocator_t* out);

/* fork(): the allocator table's lock, taken before a fork and given back after it in parent and
 * child (global.c's handlers). */
void pf__device_fork_lock(void);
void pf__device_fork_unlock(void);

/* Calls a->alloc for nbytes (> 0) at PF_TENSOR_ALIGNMENT: 0 with the buffer in *out, or -1
 * with the hook's error (MemoryError naming func when the hook raised none). */
int pf__allocator_call(const pf_allocator_t* a, DLDevice device, size_t nbytes, const char* func,
                       void** out);

/* Device type as text for messages, "cuda (2)" or "device(99)", written into buf; returns
 * buf. */
const char* pf__device_type_label(int32_t type, char* buf, size_t size);

#endif /* PACKFN_SRC_DEVICE_PRIVATE_H_ */
