/* A module's exports read from a library's ELF dynamic symbol table: its __packfn_ definitions
 * (or, for a library built against TVM-FFI, its __tvm_ffi_ ones) with their metadata and the
 * __packfn_abi stamp; the program's own table is read once and kept. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "module_private.h"

#include "common.h"

/* ---- reading the dynamic symbol table ---- */

/* Address of a pointer entry of the dynamic section. glibc relocates these in place on most
 * targets but not all: a value below the load bias is still the file's virtual address. */
static const void* pf__dyn_ptr(const struct link_map* lm, ElfW(Addr) p) {
  return (const void*)(p < lm->l_addr ? p + lm->l_addr : p);
}

/* Number of symbols covered by a DT_GNU_HASH table: one past the last symbol of the longest
 * chain (chains end at a hash value with bit 0 set); symbols below symoffset are unhashed. */
static size_t pf__gnu_hash_count(const uint32_t* table) {
  uint32_t nbuckets = table[0], symoffset = table[1], bloom_words = table[2];
  const uint32_t* buckets = (const uint32_t*)((const ElfW(Addr)*)(table + 4) + bloom_words);
  const uint32_t* chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t i = 0; i < nbuckets; ++i)
    if (buckets[i] > last)
      last = buckets[i];
  if (last < symoffset)
    return symoffset;
  while (!(chain[last - symoffset] & 1))
    ++last;
  return (size_t)last + 1;
}

int pf__read_symtab(const char* func, const char* path, const struct link_map* lm,
                    pf__symtab_t* out) {
  const void *symtab = NULL, *strtab = NULL, *hash = NULL, *gnu_hash = NULL;
  size_t strsz = 0;
  for (const ElfW(Dyn)* d = lm->l_ld; d && d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
    case DT_SYMTAB:
      symtab = pf__dyn_ptr(lm, d->d_un.d_ptr);
      break;
    case DT_STRTAB:
      strtab = pf__dyn_ptr(lm, d->d_un.d_ptr);
      break;
    case DT_STRSZ:
      strsz = (size_t)d->d_un.d_val;
      break;
    case DT_HASH:
      hash = pf__dyn_ptr(lm, d->d_un.d_ptr);
      break;
    case DT_GNU_HASH:
      gnu_hash = pf__dyn_ptr(lm, d->d_un.d_ptr);
      break;
    default:
      break;
    }
  }
  if (!symtab || !strtab || (!hash && !gnu_hash)) {
    PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED,
                 "%s: cannot read the dynamic symbol table of %s (no DT_SYMTAB, DT_STRTAB or "
                 "symbol hash table)",
                 func, path);
    return -1;
  }
  out->lm = lm;
  out->syms = (const ElfW(Sym)*)symtab;
  out->strtab = (const char*)strtab;
  out->strsz = strsz;
  /* DT_HASH states the count (nchain); DT_GNU_HASH needs its chains walked */
  out->num_syms = hash ? ((const uint32_t*)hash)[1] : pf__gnu_hash_count(gnu_hash);
  return 0;
}

/* ---- where a data symbol lies ---- */

/* Finds the program headers of the object whose link map is `lm` (dl_iterate_phdr names it by
 * load bias and name; "" for the program); they stay mapped while the object is open. */
typedef struct {
  const struct link_map* lm;
  const ElfW(Phdr) * phdr;
  size_t phnum;
} pf__phdrs_t;

static int pf__find_phdrs(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  pf__phdrs_t* p = arg;
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  if (info->dlpi_addr != p->lm->l_addr || strcmp(name, p->lm->l_name ? p->lm->l_name : "") != 0)
    return 0;
  p->phdr = info->dlpi_phdr;
  p->phnum = info->dlpi_phnum;
  return 1;
}

/* The address of the data symbol `s` of the object `st` describes, when its `size` bytes lie in
 * one of the object's readable PT_LOAD segments and it is aligned to `align`; else NULL with
 * what it is instead written into why (an absolute symbol's value is no address in the library,
 * and dlsym returned it raw: reading it crashed). `*phdrs` is found on first use. */
static const void* pf__symbol_data(const pf__symtab_t* st, const ElfW(Sym) * s, size_t size,
                                   size_t align, pf__phdrs_t* phdrs, char* why, size_t why_size) {
  if (s->st_shndx == SHN_ABS) {
    snprintf(why, why_size, "it is an absolute symbol (value 0x%llx), not data in the library",
             (unsigned long long)s->st_value);
    return NULL;
  }
  if (s->st_shndx >= SHN_LORESERVE && s->st_shndx != SHN_XINDEX) {
    snprintf(why, why_size, "it has the special section index 0x%x, not data in the library",
             (unsigned)s->st_shndx);
    return NULL;
  }
  uintptr_t addr = (uintptr_t)st->lm->l_addr + (uintptr_t)s->st_value;
  if (!phdrs->phdr) {
    phdrs->lm = st->lm;
    dl_iterate_phdr(pf__find_phdrs, phdrs);
  }
  for (size_t i = 0; i < phdrs->phnum; ++i) {
    const ElfW(Phdr)* ph = &phdrs->phdr[i];
    uintptr_t start = (uintptr_t)st->lm->l_addr + (uintptr_t)ph->p_vaddr;
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) || addr < start ||
        addr - start > (uintptr_t)ph->p_memsz || size > (uintptr_t)ph->p_memsz - (addr - start))
      continue;
    if (addr % align != 0) {
      snprintf(why, why_size, "it is not aligned to %zu bytes (at offset 0x%llx)", align,
               (unsigned long long)s->st_value);
      return NULL;
    }
    return (const void*)addr;
  }
  snprintf(why, why_size,
           "its %zu bytes at offset 0x%llx lie outside the library's readable segments", size,
           (unsigned long long)s->st_value);
  return NULL;
}

/* What an ELF symbol type names, for messages. */
static const char* pf__symbol_type_name(int type) {
  switch (type) {
  case STT_OBJECT:
    return "a data object";
  case STT_FUNC:
    return "a function";
  case STT_GNU_IFUNC:
    return "an indirect function";
  case STT_TLS:
    return "a thread-local variable";
  case STT_NOTYPE:
    return "a symbol of no type";
  default:
    return "a symbol of another kind";
  }
}

/* The name of symbol i when it is a definition whose name starts with `prefix` (of length
 * `len`): the part after the prefix, else NULL. */
static const char* pf__prefixed_symbol(const pf__symtab_t* st, size_t i, const char* prefix,
                                       size_t len, int* type, size_t* size) {
  const ElfW(Sym)* s = &st->syms[i];
  if (s->st_shndx == SHN_UNDEF || s->st_name >= st->strsz)
    return NULL;
  const char* name = st->strtab + s->st_name;
  if (strncmp(name, prefix, len) != 0)
    return NULL;
  *type = ELF64_ST_TYPE(s->st_info); /* same bits in ELF32 */
  *size = (size_t)s->st_size;
  return name + len;
}

static const char* pf__packfn_symbol(const pf__symtab_t* st, size_t i, int* type, size_t* size) {
  return pf__prefixed_symbol(st, i, PF__EXPORT_PREFIX, PF__EXPORT_PREFIX_LEN, type, size);
}

static int pf__is_function_symbol(int type) {
  return type == STT_FUNC || type == STT_GNU_IFUNC;
}

/* Whether `name` (after the export prefix) names an exported function: not empty and, after
 * TVM-FFI's prefix, not one of its "__tvm_ffi__" symbols (metadata, doc, library context). */
static int pf__export_name(const char* name, int tvm) {
  return name && *name && !(tvm && *name == '_');
}

static size_t pf__cand(const pf__cands_t* c, size_t k) {
  return c->idx ? c->idx[k] : k;
}

/* Made once and kept for the life of the process, never freed: a thread still running at exit
 * may be reading it (leak checkers count it as still reachable). */
static pf__system_syms_t* pf__system_syms;

const pf__system_syms_t* pf__system_symbols(const char* func, const char* path,
                                            const struct link_map* lm) {
  pf__system_syms_t* s = __atomic_load_n(&pf__system_syms, __ATOMIC_ACQUIRE);
  if (PF_LIKELY(s != NULL))
    return s;
  pf__symtab_t st;
  if (pf__read_symtab(func, path, lm, &st) != 0)
    return NULL;
  int type;
  size_t size, n = 0;
  for (size_t i = 0; i < st.num_syms; ++i)
    n += pf__packfn_symbol(&st, i, &type, &size) != NULL;
  size_t total = sizeof *s + n * sizeof s->idx[0];
  s = malloc(total);
  if (!s) {
    pf__raise_oom(func, total);
    return NULL;
  }
  s->st = st;
  s->n = 0;
  for (size_t i = 0; i < st.num_syms; ++i)
    if (pf__packfn_symbol(&st, i, &type, &size))
      s->idx[s->n++] = (uint32_t)i;
  pf__system_syms_t* expected = NULL;
  if (!__atomic_compare_exchange_n(&pf__system_syms, &expected, s, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    free(s); /* another thread published first: the same symbols */
    s = expected;
  }
  return s;
}

/* Fills m->exports (sorted, metadata attached) from the library's symbols `cands` (every
 * __packfn_ or __tvm_ffi_ definition among them), and `scan`: its __packfn_ exports, or its
 * __tvm_ffi_ exports when m->is_tvm_ffi. */
int pf__scan_exports(const char* func, pf__module_t* m, void* handle, const pf__symtab_t* st,
                     const pf__cands_t* cands, pf__scan_t* scan) {
  size_t count = 0, name_bytes = 0;
  int type, tvm = m->is_tvm_ffi;
  size_t size;
  const char* prefix = tvm ? PF__TVM_PREFIX : PF__EXPORT_PREFIX;
  size_t prefix_len = tvm ? PF__TVM_PREFIX_LEN : PF__EXPORT_PREFIX_LEN;
  for (size_t k = 0; k < cands->n; ++k) {
    size_t i = pf__cand(cands, k);
    const char* name = pf__prefixed_symbol(st, i, prefix, prefix_len, &type, &size);
    if (pf__export_name(name, tvm) && pf__is_function_symbol(type)) {
      ++count;
      name_bytes += strlen(name) + 1;
    }
  }
  size_t total = count * sizeof(pf__export_t) + name_bytes;
  pf__export_t* exports = malloc(total ? total : 1);
  if (!exports)
    return pf__raise_oom(func, total);
  char* text = (char*)(exports + count);
  size_t n = 0;
  scan->st = st;
  scan->stamp_sym = NULL;
  scan->stamp = NULL;
  for (size_t k = 0; k < cands->n; ++k) {
    size_t i = pf__cand(cands, k);
    const char* name = pf__prefixed_symbol(st, i, prefix, prefix_len, &type, &size);
    if (!name)
      continue;
    if (!tvm && strcmp(name, "abi") == 0) {
      scan->stamp_sym = &st->syms[i]; /* whatever it is: pf__check_stamp says */
    } else if (pf__export_name(name, tvm) && pf__is_function_symbol(type)) {
      const ElfW(Sym)* s = &st->syms[i];
      if (s->st_shndx == SHN_ABS) {
        /* dlsym gives an absolute symbol's raw value: a call would jump there */
        PF_ERROR_SET(PF_ERR_VALUE,
                     "%s: %s: %s is not an exported function: it is an absolute symbol (value "
                     "0x%llx), not code in the library",
                     func, m->path, name - prefix_len, (unsigned long long)s->st_value);
        free(exports);
        return -1;
      }
      void* addr = dlsym(handle, name - prefix_len);
      if (!addr)
        continue;
      size_t len = strlen(name) + 1;
      memcpy(text, name, len);
      /* a function pointer from dlsym: POSIX guarantees the conversion */
      pf_safe_call_t call;
      memcpy(&call, &addr, sizeof call);
      exports[n++] = (pf__export_t){text, call, NULL, NULL};
      text += len;
    }
  }
  qsort(exports, n, sizeof *exports, pf__cmp_export);
  /* versioned duplicates of one name keep their first entry */
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i)
    if (kept == 0 || strcmp(exports[kept - 1].name, exports[i].name) != 0)
      exports[kept++] = exports[i];
  m->exports = exports;
  m->num_exports = kept;
  if (tvm)
    return 0; /* TVM-FFI's metadata is JSON text, not signatures packfn shows */
  /* attach metadata to the exports it describes; malformed metadata refuses the library */
  pf__phdrs_t phdrs = {NULL, NULL, 0};
  for (size_t k = 0; k < cands->n; ++k) {
    size_t i = pf__cand(cands, k);
    const char* name = pf__packfn_symbol(st, i, &type, &size);
    if (!name || type != STT_OBJECT || strncmp(name, PF__META_PREFIX, PF__META_PREFIX_LEN) != 0)
      continue;
    pf__export_t* e = pf__find_export(m, name + PF__META_PREFIX_LEN);
    if (!e)
      continue;
    char why[160];
    const pf_export_meta_t* meta = NULL;
    if (size < sizeof(pf_export_meta_t))
      snprintf(why, sizeof why, "it is %zu bytes", size);
    else if ((meta = pf__symbol_data(st, &st->syms[i], sizeof *meta, _Alignof(pf_export_meta_t),
                                     &phdrs, why, sizeof why)) == NULL)
      ; /* why says where it lies */
    else if (meta->magic != PF_EXPORT_META_MAGIC)
      snprintf(why, sizeof why, "its magic is 0x%08x", (unsigned)meta->magic);
    else if (meta->version < 1)
      snprintf(why, sizeof why, "its version is %u", (unsigned)meta->version);
    else if ((meta->typed_sig != NULL) != (meta->typed_impl != NULL))
      snprintf(why, sizeof why, "it has a typed %s without %s",
               meta->typed_sig ? "declaration" : "implementation",
               meta->typed_sig ? "its implementation" : "a declaration");
    else
      why[0] = '\0';
    if (why[0]) {
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: %s: %s%s is not packfn export metadata: %s (expected a pf_export_meta_t "
                   "of %zu bytes in the library with magic 0x%08x, version >= 1 and a typed "
                   "declaration with its implementation, or neither)",
                   func, m->path, PF__EXPORT_PREFIX, name, why, sizeof(pf_export_meta_t),
                   PF_EXPORT_META_MAGIC);
      return -1;
    }
    e->meta = meta;
  }
  return 0;
}

const ElfW(Sym) * pf__find_stamp(const pf__symtab_t* st, const pf__cands_t* cands) {
  int type;
  size_t size;
  for (size_t k = 0; k < cands->n; ++k) {
    size_t i = pf__cand(cands, k);
    const char* name = pf__packfn_symbol(st, i, &type, &size);
    if (name && strcmp(name, "abi") == 0)
      return &st->syms[i];
  }
  return NULL;
}

int pf__check_stamp(const char* func, const char* path, pf__scan_t* scan) {
  static const char expected[] = "expected a pf_abi_stamp_t object: compile the library against "
                                 "packfn's headers";
  const ElfW(Sym)* sym = scan->stamp_sym;
  if (!sym) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "%s: %s is not a packfn library: it exports no __packfn_abi stamp (compile it "
                 "against packfn's headers), nor is it a TVM-FFI library (exports "
                 "__tvm_ffi_<name> and no __packfn_<name>)",
                 func, path);
    return -1;
  }
  int type = ELF64_ST_TYPE(sym->st_info); /* same bits in ELF32 */
  if (type != STT_OBJECT) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: %s: its __packfn_abi symbol is %s, not a packfn ABI stamp (%s)",
                 func, path, pf__symbol_type_name(type), expected);
    return -1;
  }
  size_t size = (size_t)sym->st_size;
  if (size < sizeof(pf_abi_stamp_t)) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "%s: %s: its __packfn_abi symbol is not a packfn ABI stamp (%zu bytes, expected "
                 "at least %zu starting with magic 0x%08x)",
                 func, path, size, sizeof(pf_abi_stamp_t), PF_ABI_MAGIC);
    return -1;
  }
  char why[160];
  pf__phdrs_t phdrs = {NULL, NULL, 0};
  const pf_abi_stamp_t* stamp = pf__symbol_data(scan->st, sym, sizeof *stamp,
                                                _Alignof(pf_abi_stamp_t), &phdrs, why, sizeof why);
  if (!stamp) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: %s: its __packfn_abi symbol is not a packfn ABI stamp: %s (%s)",
                 func, path, why, expected);
    return -1;
  }
  if (stamp->magic != PF_ABI_MAGIC) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "%s: %s: its __packfn_abi symbol is not a packfn ABI stamp (%zu bytes starting "
                 "with magic 0x%08x, expected at least %zu starting with magic 0x%08x)",
                 func, path, size, (unsigned)stamp->magic, sizeof(pf_abi_stamp_t), PF_ABI_MAGIC);
    return -1;
  }
  if (stamp->major != PF_ABI_VERSION_MAJOR) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: %s was built for packfn ABI %u.%u, this runtime is ABI %d.%d",
                 func, path, (unsigned)stamp->major, (unsigned)stamp->minor, PF_ABI_VERSION_MAJOR,
                 PF_ABI_VERSION_MINOR);
    return -1;
  }
  scan->stamp = stamp;
  return 0;
}
