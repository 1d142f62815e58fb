/* Private: what the module layer needs from packfn's function objects. */
#ifndef PACKFN_SRC_FUNCTION_PRIVATE_H_
#define PACKFN_SRC_FUNCTION_PRIVATE_H_

#include "packfn/function.h"

/* Makes `fn` (a packfn function) hold a reference to `owner` (retained) until it dies, after
 * its deleter ran: used so a module's code outlives its functions. -1 with TypeError. */
int pf__function_set_keepalive(pf_object_t* fn, pf_object_t* owner);

/* Most addresses pf__function_code reports. */
#define PF__FUNCTION_CODE_MAX 8

/* The code and data addresses a function object's behaviour depends on (its entry and object
 * deleter; for a packfn function also the creator's call, deleter and self, and a typed
 * function's implementation, deleter and self), NULL entries included: writes at most
 * PF__FUNCTION_CODE_MAX into addrs and returns the count (0 for a non-function). Used to find
 * the functions whose code lies in a library about to be unmapped. Never raises. */
size_t pf__function_code(const pf_object_t* fn, const void** addrs);

/* How many static registration slots (PF_REGISTER_GLOBAL and its kin, typed.h) hold `fn`: 0 or
 * 1, each the reference its library's destructor drops when the library unloads; 0 too when the
 * slot could not be recorded (out of memory), which makes a caller assume another holder. */
size_t pf__global_static_holders(const pf_object_t* fn);

/* Removes the global `name` while it names `fn` (global_write.c): 1 when removed, 0 when the
 * name is gone or names another function. Raises nothing. */
int pf__global_remove_if(const char* name, pf_object_t* fn);

/* Loads in flight (module.c, around each pf_module_load, from before its dlopen to its end):
 * while one is, every function a pf_global_set override, a pf_global_remove or a joined set's
 * undo takes out of the table has its pf__function_code addresses recorded (global_write.c,
 * under the writers' lock; no reference kept, so no deleter is delayed), up to
 * PF__DISPLACED_MAX; the record is emptied when the last load ends. A refused library looks
 * there for functions of its own that left the table before its refusal, which someone may
 * still hold (pf__forget_library only sees what the table still names). */
#define PF__DISPLACED_MAX 256
void pf__global_watch_begin(void);
void pf__global_watch_end(void);
/* Copies the recorded addresses into out (room for PF__DISPLACED_MAX) and returns their
 * number; *overflow is set to 1 when some were not recorded (no room), else 0. */
size_t pf__global_displaced(const void** out, int* overflow);

/* fork(): the side table's lock (a leaf: nothing else is taken under it), taken before a fork
 * and given back after it, from global.c's handlers. */
void pf__function_fork_lock(void);
void pf__function_fork_unlock(void);

/* The call of pf_global_call and pf_module_call once they found `fn` under `name` (a new
 * reference, released here): pf_function_call's other arguments checked with messages naming
 * `func` (ValueError: num_args < 0, NULL args for num_args > 0, NULL result), then the call;
 * *result is none after every failure, and a callee that fails without raising gets
 * pf_error_ensure's RuntimeError naming `name`. */
int pf__call_found(const char* func, const char* name, pf_object_t* fn, const pf_any_t* args,
                   int32_t num_args, pf_any_t* result);

/* pf_global_get_bytes for a caller whose failures name `func` (pf_global_call, the system
 * module's pf_module_get_function), once the name is checked: 0 with a new reference in *out
 * (NULL when no table has the name), -1 when TVM-FFI's table failed (global.c). */
int pf__global_lookup_as(const char* name, size_t size, pf_object_t** out, const char* func);

#endif /* PACKFN_SRC_FUNCTION_PRIVATE_H_ */
