/* packfn and TVM-FFI in one process: when the apache-tvm-ffi runtime (libtvm_ffi) is loaded,
 * packfn joins it, so the two share one raised-error slot, one type registry and one global
 * function table. libpackfn never links libtvm_ffi: it finds it at run time. docs/interop.md
 * says what crosses and how. */
#ifndef PACKFN_INTEROP_H_
#define PACKFN_INTEROP_H_

#include "packfn/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Environment variable: set to a non-empty value other than "0", packfn never joins TVM-FFI
 * (the two runtimes then keep separate error slots, registries and tables). Read at every
 * attempt to join until one succeeds, so setting or clearing it at run time takes effect at the
 * next attempt; once joined, the two runtimes stay joined whatever it says. */
#define PF_NO_TVM_FFI_ENV "PACKFN_NO_TVM_FFI"

/* Looks for libtvm_ffi among the libraries already loaded in this process (it never loads
 * it) and joins it the first time it is found: from then on errors raised in either runtime
 * are taken from either, type indices come from TVM-FFI's registry, and each global table
 * sees the other's functions. Returns 1 when joined (now or earlier), 0 when libtvm_ffi is not
 * loaded, its version is not 0.1.x, or PF_NO_TVM_FFI_ENV disables joining. Never raises.
 * Thread-safe. packfn calls it itself on the first error, type registration and global-table
 * use of the process, after each pf_module_load, when a library built with packfn/export.h
 * is loaded, and when the Python package sees tvm_ffi imported; a C program that dlopen()s
 * libtvm_ffi after using packfn calls it once after that dlopen. */
PF_API int pf_tvm_ffi_join(void);

/* 1 when this process has joined TVM-FFI, 0 otherwise. Never raises. */
PF_API int pf_tvm_ffi_joined(void);

#ifdef __cplusplus
}
#endif

#endif /* PACKFN_INTEROP_H_ */
