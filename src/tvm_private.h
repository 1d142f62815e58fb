/* Private: the TVM-FFI runtime of this process, once packfn has joined it (interop.h). The
 * entry points are looked up with dlsym in libtvm_ffi, which is never linked. */
#ifndef PACKFN_SRC_TVM_PRIVATE_H_
#define PACKFN_SRC_TVM_PRIVATE_H_

#include <pthread.h>
#include <stdint.h>

#include "packfn/abi.h"
#include "packfn/interop.h"
#include "packfn/object.h"

typedef struct {
  /* c_api.h's functions, by the same signatures (pf_byte_array_t is TVMFFIByteArray) */
  void (*error_move_from_raised)(void** result);
  void (*error_set_raised)(void* error);
  int32_t (*type_get_or_alloc_index)(const pf_byte_array_t* type_key, int32_t static_type_index,
                                     int32_t type_depth, int32_t num_child_slots,
                                     int32_t child_slots_can_overflow, int32_t parent_type_index);
  int (*type_key_to_index)(const pf_byte_array_t* type_key, int32_t* out_tindex);
  int (*function_get_global)(const pf_byte_array_t* name, void** out);
  int (*function_set_global)(const pf_byte_array_t* name, void* f, int allow_override);
  int (*function_call)(void* func, pf_any_t* args, int32_t num_args, pf_any_t* result);
  void* library; /* dlopen handle (RTLD_NOLOAD), held for the life of the process */
  int32_t version_major, version_minor, version_patch;
  /* types (type.c, object.c): TVMFFIGetTypeInfo; the result is a TVMFFITypeInfo. Only for an
   * index TVM-FFI handed out: it ends the process for one it does not know. */
  const struct pf__tvm_type_info_s* (*get_type_info)(int32_t type_index);
  /* streams (device.c): c_env_api.h's TVMFFIEnvSetStream and TVMFFIEnvGetStream, each thread's
   * current stream per device; NULL (both) when the library lacks either */
  int (*env_set_stream)(int32_t device_type, int32_t device_id, void* stream, void** prev);
  void* (*env_get_stream)(int32_t device_type, int32_t device_id);
} pf__tvm_t;

/* c_api.h's TVMFFITypeInfo, the fields packfn reads (the rest follows in TVM-FFI's). */
typedef struct pf__tvm_type_info_s {
  int32_t type_index;
  int32_t type_depth;
  pf_byte_array_t type_key;
  const struct pf__tvm_type_info_s** type_ancestors;
} pf__tvm_type_info_t;

/* 0: not looked for yet, 1: looked for and absent (or disabled), 2: joined */
extern int pf__tvm_state;
extern const pf__tvm_t* pf__tvm_api;

/* The joined runtime, or NULL. After a NULL, the caller may call pf__tvm_first_use(). */
static inline const pf__tvm_t* pf__tvm(void) {
  return __atomic_load_n(&pf__tvm_api, __ATOMIC_ACQUIRE);
}

/* For the first error, registration or table use of the process: looks for libtvm_ffi once
 * (later looks only happen at pf_tvm_ffi_join's call sites). Returns pf__tvm(). Cheap after
 * the first call: one load. */
static inline const pf__tvm_t* pf__tvm_first_use(void) {
  if (__builtin_expect(__atomic_load_n(&pf__tvm_state, __ATOMIC_ACQUIRE) == 0, 0))
    (void)pf_tvm_ffi_join();
  return pf__tvm();
}

/* Held around every call into TVM-FFI's function table, which takes no lock of its own
 * (global.c). Lock order: the join, pf__types_lock, pf__tvm_table, the table's writers. */
extern __attribute__((visibility("hidden"))) pthread_mutex_t pf__tvm_table;

/* After a failed call into TVM-FFI (its `what`, for the message when it raised nothing): moves
 * the error it raised into packfn's slot (the same slot once errors are joined); returns -1. */
__attribute__((cold)) int pf__tvm_failed(const pf__tvm_t* tvm, const char* func, const char* what);

/* Drops the error a failed call into TVM-FFI raised (where packfn must not raise). */
static inline void pf__tvm_discard(const pf__tvm_t* tvm) {
  void* err = NULL;
  tvm->error_move_from_raised(&err);
  pf_object_release((pf_object_t*)err);
}

/* What each layer hands TVM-FFI when packfn joins it (what it made before: registered types,
 * global functions). Layers set their hook from a constructor (so tvm.c calls no layer by
 * name); pf_tvm_ffi_join calls them once, under its lock, right after pf__tvm_api is
 * published, types first. A hook must not raise and must not call pf_tvm_ffi_join. */
enum { PF__TVM_HOOK_TYPES, PF__TVM_HOOK_GLOBALS, PF__TVM_HOOKS };
extern void (*pf__tvm_join_hooks[PF__TVM_HOOKS])(const pf__tvm_t* tvm);

/* fork(): the join's lock (pf_tvm_ffi_join runs the join hooks under it, which take the TVM-FFI
 * table's lock and the writers' lock: it comes first), taken before a fork and given back
 * after it, from alloc.c's handlers; pf__tvm_table, taken after the type registry's lock. */
void pf__tvm_fork_lock(void);
void pf__tvm_fork_unlock(void);
void pf__tvm_table_fork_lock(void);
void pf__tvm_table_fork_unlock(void);

/* A handle of the libtvm_ffi.so this process has loaded (a loaded object whose file has that
 * name: found with dl_iterate_phdr, then opened by its path with RTLD_NOLOAD, so the library
 * path is not searched and nothing is loaded), or NULL. Takes no packfn lock. */
void* pf__tvm_open_loaded(void);

#endif /* PACKFN_SRC_TVM_PRIVATE_H_ */
