/* packfn modules: loading kernel libraries (shared objects), finding and listing their
 * exports, and the system library. What a library exports (the ABI stamp, the export macros
 * and their metadata) is in packfn/export.h, included here. */
#ifndef PACKFN_MODULE_H_
#define PACKFN_MODULE_H_

#include "packfn/export.h"
#include "packfn/function.h"

PF_EXTERN_C_BEGIN

/* ---- loading and using modules ----
 * A module is an object of the dynamic type "packfn.Module" (not TVM-FFI's ffi.Module, index
 * 73 = PF_TYPE_MODULE, a C++ class; TVM-FFI refuses a packfn module with a TypeError). Test for
 * one with pf_module_path(obj) != NULL.
 * Lifetime: a module holds its library open; every function object it hands out holds the
 * library too, so releasing the module first never breaks later calls or releases. A library
 * is never unloaded once a module has accepted it (it is pinned with RTLD_NODELETE): objects
 * its code made (results whose deleter lies in the library, closures, errors) stay valid for
 * the whole process. A library refused by pf_module_load is closed again. */

/* Loads the shared library at `path` (dlopen with RTLD_NOW | RTLD_LOCAL; a path without '/'
 * is searched as dlopen does from libpackfn: its RUNPATH (libpackfn's own folder),
 * LD_LIBRARY_PATH, the system folders; so prefer "./libfoo.so" to a bare name), checks its
 * __packfn_abi stamp and reads its exports. A library without a stamp and without __packfn_<name>
 * exports that exports __tvm_ffi_<name> functions (built with TVM-FFI's
 * TVM_FFI_DLL_EXPORT_TYPED_FUNC) is loaded as a TVM-FFI library: those are its functions. Then
 * calls pf_tvm_ffi_join(). New module reference in *out. -1, *out NULL, with: OSError naming the
 * path and the loader's reason (missing file, not a shared library, unresolved symbols); ValueError
 * naming the path when the library has no stamp or a malformed stamp or metadata (a symbol that is
 * not data inside the library, absolute, too small, or with the wrong magic: the message says
 * what was found), or an export that is an absolute symbol, or was built for another ABI major
 * ("libfoo.so was built for packfn ABI 7.0, this runtime is ABI 0.1"), or for a NULL or empty path
 * or NULL out; RuntimeError when the library's initialisation raised (its constructors left an
 * error pending, e.g. a PF_REGISTER_GLOBAL whose name is taken: that error is the cause; a load of
 * it in another thread at the same moment accepts it, without its globals: docs/modules.md), or
 * when it binds to another packfn runtime than this one or holds an exported copy of its own (a
 * program holding libpackfn.a without exporting it, loading a library linked against libpackfn.so;
 * a library linked with libpackfn.a: its errors, globals and types would never reach this runtime;
 * the message names both files), unless both runtimes joined one TVM-FFI (a copy with hidden
 * symbols cannot be told: its errors stay in it); NotImplementedError when
 * the library's symbol table cannot be read; MemoryError. An error pending in the caller is set
 * aside during the load (a constructor neither sees nor clears it) and is pending again afterwards:
 * unchanged on success, at the end of the new error's cause chain on failure. Thread-safe; no
 * packfn lock is held across the loader. */
PF_API int pf_module_load(const char* path, pf_object_t** out);

/* The system library: the running program itself. Its functions are the __packfn_<name>
 * exports of the main executable (link it with -rdynamic / ENABLE_EXPORTS so they are
 * visible) and, after them, every function of the global table (pf_global_set and
 * PF_REGISTER_GLOBAL*, including those registered by loaded libraries). Its path reads
 * "<system>". Each call makes a new module object. New reference in *out.
 * -1 with ValueError (NULL out), OSError (the program cannot be opened with dlopen),
 * NotImplementedError or MemoryError; *out is then NULL (when out is not). */
PF_API int pf_module_system(pf_object_t** out);

/* The function `name` of a module, as a function object: new reference in *out. The first
 * lookup of a name builds it (direct form for plain exports, typed for typed ones, carrying
 * the metadata's signature and doc); later lookups return the same object, cheaply (a binary
 * search and a retain). Thread-safe. Global-table functions of the system module are not
 * cached (the table may change): they come from pf_global_get.
 * Also takes TVM-FFI's ffi.Module (type 73, e.g. from tvm_ffi.load_module) once packfn has
 * joined TVM-FFI: the lookup goes through TVM-FFI's global "ffi.ModuleGetFunction".
 * Follows the lookup rule (see packfn/function.h): 0 with *out = NULL, nothing raised, when
 * the module has no such function. -1, *out NULL, with: TypeError when module is neither a
 * packfn Module nor (joined) TVM-FFI's; ValueError for a NULL or empty name or NULL out;
 * MemoryError; TVM-FFI's error when its lookup fails. */
PF_API int pf_module_get_function(pf_object_t* module, const char* name, pf_object_t** out);

/* Looks `name` up and calls it: pf_module_get_function then pf_function_call (so TVM-FFI's
 * ffi.Module is accepted too; args are borrowed, *result owned on success). A missing
 * function is an error here: -1 with KeyError "pf_module_call: <path> has no function 'x'",
 * with " (did you mean 'y'?)" when pf_module_suggest finds a near name. Otherwise fails as
 * the two calls do; *result is none on failure. */
PF_API int pf_module_call(pf_object_t* module, const char* name, const pf_any_t* args,
                          int32_t num_args, pf_any_t* result);

/* The function of `module` nearest to `name` (its exports and, for the system module, the
 * global table), chosen and written into buf as pf_global_suggest does. 1 when one was
 * found, 0 when none is near; -1 with TypeError (not a packfn Module) or ValueError (NULL
 * name, NULL buf with size > 0), buf then left as it was. */
PF_API int pf_module_suggest(pf_object_t* module, const char* name, char* buf, size_t size);

/* One function of a module, as pf_module_list describes it. */
typedef struct pf_export_info_s {
  const char* name;      /* "scale" */
  const char* signature; /* "scale(x: float, k: int) -> float", or NULL when none is known */
  const char* doc;       /* documentation, or NULL */
} pf_export_info_t;

/* Describes every function of a module, sorted by name (strcmp), in one block the caller frees
 * with pf_module_list_free: entries then a terminating entry whose name is NULL. All texts are
 * copies, valid after the module is gone. *count (may be NULL) receives the number of
 * functions. Builds (and caches) the module's function objects to read their signatures; a
 * typed export whose declaration this runtime cannot build is listed with a NULL signature and
 * doc.
 * -1 with TypeError (not a packfn Module), ValueError (NULL out) or MemoryError; *out is then
 * NULL and *count 0 (those not NULL). */
PF_API int pf_module_list(pf_object_t* module, pf_export_info_t** out, size_t* count);

/* Frees what pf_module_list returned (the whole block, texts included); NULL is a no-op. */
PF_API void pf_module_list_free(pf_export_info_t* list);

/* The path a module was loaded from, as given to pf_module_load ("<system>" for the system
 * library), borrowed for the module's lifetime; NULL when module is not a packfn Module. Never
 * raises. */
PF_API const char* pf_module_path(const pf_object_t* module);

/* The ABI version the module's library was built for (its stamp; this runtime's for the system
 * library) into *major and *minor (either may be NULL). -1 with TypeError (not a packfn
 * Module); the outputs are then left as they were. */
PF_API int pf_module_abi_version(const pf_object_t* module, uint32_t* major, uint32_t* minor);

PF_EXTERN_C_END
#endif /* PACKFN_MODULE_H_ */
