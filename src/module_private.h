/* Private: packfn's module objects and their export tables, as module.c (loading, lookups,
 * listing) and module_symbols.c (reading a library's ELF dynamic symbol table) share them. Not
 * installed. */
#ifndef PACKFN_SRC_MODULE_PRIVATE_H_
#define PACKFN_SRC_MODULE_PRIVATE_H_

#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/module.h"

#define PF__EXPORT_PREFIX     "__packfn_"
#define PF__EXPORT_PREFIX_LEN (sizeof(PF__EXPORT_PREFIX) - 1)
#define PF__META_PREFIX       "meta_" /* after PF__EXPORT_PREFIX */
#define PF__META_PREFIX_LEN   (sizeof(PF__META_PREFIX) - 1)
#define PF__TVM_PREFIX        "__tvm_ffi_" /* TVM-FFI's exports; "__tvm_ffi__..." are not */
#define PF__TVM_PREFIX_LEN    (sizeof(PF__TVM_PREFIX) - 1)

/* ---- which runtime a library binds to ----
 * One exported byte in each file that holds process-wide state (the error slot, the global
 * table, the type registry, the allocator): what a library's references to that state resolve
 * to is where the dynamic loader finds these, and each is data no program takes the address of
 * (so never a copy or a PLT entry in a program). pf_module_load compares them with its own. */
PF_API extern const char pf__marker_error, pf__marker_global, pf__marker_type, pf__marker_alloc;
/* On their definitions: not instrumented by AddressSanitizer, which would take a program that
 * exports its static copy, and a libpackfn.so loaded beside it, for an ODR violation (the case
 * the markers exist to tell apart). */
#if defined(__clang__) /* gcc ignores the attribute on variables (and warns) */
#define PF__MARKER __attribute__((no_sanitize("address")))
#else
#define PF__MARKER
#endif

/* ---- the module object ---- */

typedef struct {
  const char* name;             /* export name (after the prefix), in the module's block */
  pf_safe_call_t call;          /* __packfn_<name> */
  const pf_export_meta_t* meta; /* __packfn_meta_<name>, or NULL */
  pf_object_t* fn;              /* cached function object (owned), published once by CAS */
} pf__export_t;

typedef struct {
  pf_object_t header;
  pf_object_t* library;  /* owned pf__library_t */
  pf__export_t* exports; /* sorted by name; one block holding the names after the entries */
  size_t num_exports;
  uint32_t abi_major;
  uint32_t abi_minor;
  int is_system;
  int is_tvm_ffi; /* a library built against TVM-FFI: its exports are __tvm_ffi_<name> */
  char path[];    /* as given, NUL-terminated */
} pf__module_t;

/* Orders exports by name (qsort, bsearch). */
static inline int pf__cmp_export(const void* a, const void* b) {
  return strcmp(((const pf__export_t*)a)->name, ((const pf__export_t*)b)->name);
}

/* The export of m named `name`, or NULL. */
static inline pf__export_t* pf__find_export(const pf__module_t* m, const char* name) {
  pf__export_t key = {name, NULL, NULL, NULL};
  return bsearch(&key, m->exports, m->num_exports, sizeof key, pf__cmp_export);
}

/* ---- reading the dynamic symbol table (module_symbols.c) ---- */

typedef struct {
  const struct link_map* lm; /* the object the table belongs to */
  const ElfW(Sym) * syms;
  size_t num_syms;
  const char* strtab;
  size_t strsz;
} pf__symtab_t;

/* What a scan of the symbol table finds besides the exports. */
typedef struct {
  const pf__symtab_t* st;      /* the table scanned */
  const ElfW(Sym) * stamp_sym; /* the __packfn_abi definition (any type), or NULL */
  const pf_abi_stamp_t* stamp; /* the stamp, once pf__check_stamp found it sound, else NULL */
} pf__scan_t;

/* The symbols a scan reads: the table's indices idx[0..n), or, with idx NULL, every index below
 * n. */
typedef struct {
  const uint32_t* idx;
  size_t n;
} pf__cands_t;

/* The program's own dynamic symbol table never changes, so pf_module_system reads it once and
 * keeps the indices of its __packfn_ definitions: a scan of every symbol a large executable
 * exports (sanitizer runtimes' included) took about a millisecond per call. Published once;
 * freed when libpackfn unloads. */
typedef struct {
  pf__symtab_t st;
  size_t n;
  uint32_t idx[]; /* symbol indices fit in 32 bits (ELF hash tables index with 32-bit words) */
} pf__system_syms_t;

/* Reads the dynamic symbol table of the library whose link map is `lm` (named `path` in
 * errors); -1 with NotImplementedError when it has none packfn can read. */
int pf__read_symtab(const char* func, const char* path, const struct link_map* lm,
                    pf__symtab_t* out);

/* The program's table and its __packfn_ definitions, read on first use; NULL with an error
 * raised. */
const pf__system_syms_t* pf__system_symbols(const char* func, const char* path,
                                            const struct link_map* lm);

/* Fills m->exports from the symbols `cands` of table `st` (the __tvm_ffi_ exports when
 * m->is_tvm_ffi) and `scan`; -1 with an error raised. */
int pf__scan_exports(const char* func, pf__module_t* m, void* handle, const pf__symtab_t* st,
                     const pf__cands_t* cands, pf__scan_t* scan);

/* The __packfn_abi definition (any type) among the symbols `cands` of table `st`, or NULL. */
const ElfW(Sym) * pf__find_stamp(const pf__symtab_t* st, const pf__cands_t* cands);

/* Checks the stamp of a library being loaded (found by its scan): a data object of the library
 * (not absolute, inside one of its readable segments, aligned) with packfn's magic and this
 * runtime's ABI major; sets scan->stamp. -1 with ValueError naming what was found. */
int pf__check_stamp(const char* func, const char* path, pf__scan_t* scan);

#endif /* PACKFN_SRC_MODULE_PRIVATE_H_ */
