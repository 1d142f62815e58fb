/* packfn exports: what a kernel library (shared object) exports so that loaders find its
 * functions: the ABI stamp, the PF_EXPORT* macros and their metadata. For library authors;
 * compiles in C, C++ and CUDA sources. Loading is in packfn/module.h. */
#ifndef PACKFN_EXPORT_H_
#define PACKFN_EXPORT_H_

#include "packfn/typed.h"

PF_EXTERN_C_BEGIN

/* ---- what a kernel library exports (see docs/modules.md) ----
 * __packfn_abi            one pf_abi_stamp_t: the ABI version the library was compiled for
 * __packfn_<name>         a function of type pf_safe_call_t, one per exported function
 * __packfn_meta_<name>    optional pf_export_meta_t: signature and doc text, typed declaration
 * The loader reads the names from the library's dynamic symbol table, so any library that
 * exports these symbols works, whatever built it; the macros below are the easy way.
 * The macros also export each function under TVM-FFI's names, so tvm_ffi.load_module(path)
 * finds it too:
 * __tvm_ffi_<name>            calling the same function (TVM-FFI's loader passes self = NULL)
 * __tvm_ffi__metadata_<name>  (PF_EXPORT_DOC, PF_EXPORT_TYPED) a safe-call taking no argument
 *                             that returns TVM-FFI's metadata text, {"type_schema": "..."}
 * __tvm_ffi__doc_<name>       (PF_EXPORT_DOC, PF_EXPORT_TYPED) the same, returning the doc
 * and each export runs pf_tvm_ffi_join (packfn/interop.h) when the library loads, so a library
 * loaded by TVM-FFI into a process that has libpackfn joins the two runtimes. When they stay
 * apart (PACKFN_NO_TVM_FFI, a TVM-FFI loaded after the join was tried), __tvm_ffi_<name> moves
 * the error of a failed call into TVM-FFI's raised slot, where its caller looks. */

/* Tells a packfn stamp from an unrelated symbol of the same name ("pfn1" in memory). */
#define PF_ABI_MAGIC 0x316e6670u

/* The ABI stamp. A loader refuses a library whose major differs from its own
 * PF_ABI_VERSION_MAJOR; minors only add, so any minor of the same major is accepted. */
typedef struct pf_abi_stamp_s {
  uint32_t magic; /* PF_ABI_MAGIC */
  uint32_t major; /* PF_ABI_VERSION_MAJOR the library was compiled with */
  uint32_t minor; /* PF_ABI_VERSION_MINOR */
  uint32_t size;  /* sizeof(pf_abi_stamp_t) at compile time: later versions may append fields */
} pf_abi_stamp_t;

/* Initialiser of a stamp for the headers being compiled against. */
#define PF_ABI_STAMP_INIT                                                                          \
  {                                                                                                \
    PF_ABI_MAGIC, PF_ABI_VERSION_MAJOR, PF_ABI_VERSION_MINOR,                                      \
        PF__CAST(uint32_t, sizeof(pf_abi_stamp_t))                                                 \
  }

/* Every translation unit that includes this header defines the stamp as a weak symbol with
 * default visibility; the linker keeps exactly one per library (or executable). So any shared
 * library compiled against packfn carries a correct stamp with no line to write, and the
 * export macros need nothing more. Define PF_NO_ABI_STAMP before including to leave it out
 * (then define __packfn_abi yourself, or have no stamp). libpackfn itself carries none. */
#ifdef __cplusplus
#define PF__C_DATA extern "C" /* a const definition with external C linkage */
#else
#define PF__C_DATA
#endif
/* Declares a const object with external C linkage before its definition (no
 * -Wmissing-variable-declarations warning for includers). */
#ifdef __cplusplus
#define PF__C_DATA_DECL extern "C"
#else
#define PF__C_DATA_DECL extern
#endif
#if !defined(PF_NO_ABI_STAMP) && !defined(PF_BUILDING_LIBRARY) && defined(__GNUC__)
PF__C_DATA_DECL const pf_abi_stamp_t __packfn_abi;
PF__C_DATA __attribute__((weak, visibility("default"))) const pf_abi_stamp_t __packfn_abi =
    PF_ABI_STAMP_INIT;
#endif

/* Tells export metadata from an unrelated symbol ("pfnm" in memory). */
#define PF_EXPORT_META_MAGIC 0x6d6e6670u
/* Layout version of pf_export_meta_t; later versions only append fields. */
#define PF_EXPORT_META_VERSION 1u

/* Metadata of one export, as the symbol __packfn_meta_<name>. Either texts for a plain export
 * (PF_EXPORT_DOC), or the declaration of a typed one (PF_EXPORT_TYPED), whose function objects
 * the loader builds with pf_function_create_typed: argument checks, signature text and doc. */
typedef struct pf_export_meta_s {
  uint32_t magic;                  /* PF_EXPORT_META_MAGIC */
  uint32_t version;                /* PF_EXPORT_META_VERSION */
  const char* signature;           /* plain: "greet(name: str) -> str", or NULL */
  const char* doc;                 /* plain: documentation, or NULL */
  const pf_signature_t* typed_sig; /* typed: the declaration (its doc included), else NULL */
  pf_typed_call_t typed_impl;      /* typed: the implementation (self is NULL), else NULL */
} pf_export_meta_t;

#ifdef __cplusplus
#define PF__EXTERN_C extern "C"
#else
#define PF__EXTERN_C
#endif
#define PF__EXPORT_VIS __attribute__((visibility("default")))
/* Metadata objects are weak, like the stamp: sanitizers leave weak globals alone, so their
 * instrumentation never binds to a same-named symbol another object (an -rdynamic program)
 * exports. The function beside each stays strong: a name exported twice fails to link. */
#define PF__META_VIS __attribute__((weak, visibility("default")))

/* The load-time join of every export, and its failure path toward TVM-FFI, are reached
 * through weak references (declared once, below: a second declaration adding `weak` drew
 * -Wredundant-decls warnings in includers), so a library that exports functions without
 * linking libpackfn still loads (then nothing runs, and a failed call's status goes back as it
 * is). */
#if !defined(PF_BUILDING_LIBRARY) && defined(__GNUC__)
#define PF__EXPORT_WEAK __attribute__((weak))
#else
#define PF__EXPORT_WEAK
#endif

/* The failure path of every __tvm_ffi_<name> (TVM-FFI is the caller): `rc`, the nonzero
 * status the export's function returned, and `name`, the export's name. When packfn has not
 * joined TVM-FFI but a TVM-FFI 0.1.x is loaded, moves the error raised in packfn's slot into
 * TVM-FFI's (TVM-FFI reads a failed call's error from its own slot and crashes when it finds
 * none); joined, the slot is already TVM-FFI's. A -1 that raised nothing gets a RuntimeError
 * naming `name`. Other statuses (-2: an error kept in a caller's front end) are returned as
 * they are, the slots untouched. Returns rc. Never fails. */
PF_API int pf__export_tvm_failed(int rc, const char* name) PF__EXPORT_WEAK;

/* pf_tvm_ffi_join under a name of its own, for the export macros' constructors below. Never
 * fails. (A weak reference to pf_tvm_ffi_join itself made every includer's references to it
 * weak: a program whose only call into libpackfn was pf_tvm_ffi_join was linked without it
 * under --as-needed and called address 0.) */
PF_API int pf__export_join(void) PF__EXPORT_WEAK;

#if !defined(PF_BUILDING_LIBRARY) && defined(__GNUC__)
#define PF__EXPORT_JOIN(name)                                                                      \
  __attribute__((constructor)) static void pf__export_join_##name(void) {                          \
    if (pf__export_join)                                                                           \
      (void)pf__export_join();                                                                     \
  }
#define PF__EXPORT_TVM_FAILED(rc, name)                                                            \
  (pf__export_tvm_failed ? pf__export_tvm_failed((rc), (name)) : (rc))
#else
#define PF__EXPORT_JOIN(name)
#define PF__EXPORT_TVM_FAILED(rc, name) pf__export_tvm_failed((rc), (name))
#endif

/* At file scope in a library: exports `impl` (a pf_safe_call_t) as __packfn_<name> and as
 * __tvm_ffi_<name>, `name` being an identifier. Loaders call it with an unspecified `self`
 * (packfn passes the function object, TVM-FFI NULL): ignore it. __packfn_<name> compiles to a
 * jump (or to impl itself, inlined); __tvm_ffi_<name> adds, after a failed call only,
 * pf__export_tvm_failed (the error into TVM-FFI's slot when the runtimes are apart).
 *   static int add(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {...}
 *   PF_EXPORT(add, add); */
#define PF_EXPORT(name, impl)                                                                      \
  PF__EXTERN_C PF__EXPORT_VIS int __packfn_##name(void* self, const pf_any_t* args,                \
                                                  int32_t num_args, pf_any_t* result);             \
  int __packfn_##name(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {      \
    return (impl)(self, args, num_args, result);                                                   \
  }                                                                                                \
  PF__EXTERN_C PF__EXPORT_VIS int __tvm_ffi_##name(void* self, const pf_any_t* args,               \
                                                   int32_t num_args, pf_any_t* result);            \
  int __tvm_ffi_##name(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {     \
    int rc_ = (impl)(self, args, num_args, result);                                                \
    return PF_LIKELY(rc_ == 0) ? 0 : PF__EXPORT_TVM_FAILED(rc_, #name);                            \
  }                                                                                                \
  PF__EXPORT_JOIN(name)                                                                            \
  PF__STATIC_ASSERT(1, "PF_EXPORT")

/* TVM-FFI's metadata and doc getters of an export, from its typed declaration `sig` (may be
 * NULL) or its signature text and doc (may be NULL): see pf__export_tvm_info. */
#define PF__EXPORT_TVM_INFO(name, sig, signature, doc)                                             \
  PF__EXTERN_C PF__EXPORT_VIS int __tvm_ffi__metadata_##name(void* self, const pf_any_t* args,     \
                                                             int32_t num_args, pf_any_t* result);  \
  int __tvm_ffi__metadata_##name(void* self, const pf_any_t* args, int32_t num_args,               \
                                 pf_any_t* result) {                                               \
    (void)self;                                                                                    \
    (void)args;                                                                                    \
    (void)num_args;                                                                                \
    return pf__export_tvm_info(0, (sig), (signature), (doc), result);                              \
  }                                                                                                \
  PF__EXTERN_C PF__EXPORT_VIS int __tvm_ffi__doc_##name(void* self, const pf_any_t* args,          \
                                                        int32_t num_args, pf_any_t* result);       \
  int __tvm_ffi__doc_##name(void* self, const pf_any_t* args, int32_t num_args,                    \
                            pf_any_t* result) {                                                    \
    (void)self;                                                                                    \
    (void)args;                                                                                    \
    (void)num_args;                                                                                \
    return pf__export_tvm_info(1, (sig), (signature), (doc), result);                              \
  }

/* Body of the TVM-FFI getters PF_EXPORT_DOC and PF_EXPORT_TYPED export. what 0: the metadata
 * JSON text {"type_schema": "<schema>"}, the schema built from `sig` when given with a sound
 * parameter count and array, else parsed
 * from `signature` when it reads as packfn writes signatures ("f(x: Tensor, eps: float) ->
 * None"), else the bare {"type":"ffi.Function"}; what 1: the doc (sig's, else `doc`), "" when
 * none. A new string in *result; -1 with MemoryError. */
PF_API int pf__export_tvm_info(int what, const pf_signature_t* sig, const char* signature,
                               const char* doc, pf_any_t* result);

/* PF_EXPORT plus metadata: the `signature` and `doc` strings (either may be NULL) that
 * listings show and that the function objects the loader makes carry. */
#define PF_EXPORT_DOC(name, impl, signature, doc)                                                  \
  PF__C_DATA_DECL const pf_export_meta_t __packfn_meta_##name;                                     \
  PF__C_DATA PF__META_VIS const pf_export_meta_t __packfn_meta_##name = {                          \
      PF_EXPORT_META_MAGIC, PF_EXPORT_META_VERSION, (signature), (doc), PF__NULL, PF__NULL};       \
  PF__EXPORT_TVM_INFO(name, PF__NULL, (signature), (doc))                                          \
  PF_EXPORT(name, impl)

/* Exports a typed function: `sig` points at a pf_signature_t with static storage (its name
 * should be `name`; its doc is the export's doc), `impl` is a pf_typed_call_t receiving
 * self == NULL. The loader makes a typed function object (arity and argument types checked,
 * "scale(x: float, k: int) -> float" as signature). __packfn_<name> itself stays a plain
 * safe-call for other loaders: on first use it builds the same typed function, kept until the
 * library unloads.
 *   static const pf_param_t scale_params[] = {{"x", PF_PARAM_FLOAT}, {"k", PF_PARAM_INT}};
 *   static const pf_signature_t scale_sig = {"scale", 2, scale_params, PF_PARAM_FLOAT, "..."};
 *   PF_EXPORT_TYPED(scale, &scale_sig, scale_impl); */
#define PF_EXPORT_TYPED(name, sig, impl)                                                           \
  PF__C_DATA_DECL const pf_export_meta_t __packfn_meta_##name;                                     \
  PF__C_DATA PF__META_VIS const pf_export_meta_t __packfn_meta_##name = {                          \
      PF_EXPORT_META_MAGIC, PF_EXPORT_META_VERSION, PF__NULL, PF__NULL, (sig), (impl)};            \
  static pf_object_t* pf__typed_export_##name;                                                     \
  __attribute__((destructor)) static void pf__typed_export_fini_##name(void) {                     \
    pf_object_release(__atomic_exchange_n(&pf__typed_export_##name, NULL, __ATOMIC_ACQ_REL));      \
  }                                                                                                \
  static int pf__typed_export_call_##name(void* self, const pf_any_t* args, int32_t num_args,      \
                                          pf_any_t* result) {                                      \
    (void)self;                                                                                    \
    return pf__export_typed_call(&pf__typed_export_##name, (sig), (impl), args, num_args, result); \
  }                                                                                                \
  PF__EXPORT_TVM_INFO(name, (sig), PF__NULL, PF__NULL)                                             \
  PF_EXPORT(name, pf__typed_export_call_##name)

/* Body of a typed export's __packfn_<name>: builds the typed function of (sig, impl) into *slot
 * on first use (thread-safe; the library's destructor releases it), then calls it. It takes
 * the declaration itself rather than the exported metadata, so the library's own call never
 * goes through a symbol another object could interpose. For PF_EXPORT_TYPED only. */
PF_API int pf__export_typed_call(pf_object_t** slot, const pf_signature_t* sig,
                                 pf_typed_call_t impl, const pf_any_t* args, int32_t num_args,
                                 pf_any_t* result);

PF_EXTERN_C_END
#endif /* PACKFN_EXPORT_H_ */
