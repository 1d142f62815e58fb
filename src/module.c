/* Modules: kernel libraries opened with dlopen and pinned, their ABI stamp checked, their
 * __packfn_ exports (or, for a library built against TVM-FFI, its __tvm_ffi_ exports) read from
 * the ELF dynamic symbol table (module_symbols.c), their function objects cached. A module
 * object has the dynamic type "packfn.Module", not TVM-FFI's ffi.Module (73), whose layout is a
 * C++ class. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/module.h"

#include "common.h"
#include "function_private.h"
#include "module_private.h"
#include "suggest.h"
#include "tvm_private.h"

#define PF__SYSTEM_PATH     "<system>"
#define PF__MODULE_TYPE_KEY "packfn.Module"

/* ---- the library: what a module and its function objects keep open ---- */

typedef struct {
  pf_object_t header;
  void* handle; /* from dlopen; closed with the last reference (a pinned library stays mapped) */
} pf__library_t;

static void pf__library_deleter(void* self, int flags) {
  pf__library_t* lib = (pf__library_t*)self;
  if (flags & PF_DELETER_STRONG)
    dlclose(lib->handle);
  if (flags & PF_DELETER_WEAK)
    free(self);
}

/* ---- the module object ---- */

static void pf__module_deleter(void* self, int flags) {
  pf__module_t* m = (pf__module_t*)self;
  if (flags & PF_DELETER_STRONG) {
    for (size_t i = 0; i < m->num_exports; ++i)
      pf_object_release(m->exports[i].fn);
    free(m->exports);
    pf_object_release(m->library); /* last: the functions above may hold it too */
  }
  if (flags & PF_DELETER_WEAK)
    free(self);
}

/* The index of "packfn.Module" (registered on first use; from TVM-FFI's registry when joined,
 * so that TVM-FFI reads a packfn module as an object of that key, never as its ffi.Module), or
 * -1 with the registry's error raised. */
static int32_t pf__module_type;

static int32_t pf__module_type_index(void) {
  int32_t index = __atomic_load_n(&pf__module_type, __ATOMIC_ACQUIRE);
  if (PF_LIKELY(index > 0))
    return index;
  if (pf_type_register(PF__MODULE_TYPE_KEY, PF_TYPE_OBJECT, &index) != 0)
    return -1;
  __atomic_store_n(&pf__module_type, index, __ATOMIC_RELEASE); /* the same index every time */
  return index;
}

static int pf__module_is_ours(const pf_object_t* obj) {
  return obj && obj->deleter == pf__module_deleter;
}

/* The module argument as ours, or NULL with TypeError raised. */
static pf__module_t* pf__module_arg(const char* func, pf_object_t* module) {
  if (pf__module_is_ours(module))
    return (pf__module_t*)module;
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument module: expected a Module made by packfn, got %s", func,
               module ? pf_type_name(module->type_index) : "NULL");
  return NULL;
}

/* The loader's last error text, never NULL. */
static const char* pf__dlerror(void) {
  const char* why = dlerror();
  return why ? why : "unknown reason";
}

/* ---- refusing a library its constructors registered globals from ---- */

/* Marks the loaded library at `path` never to be unloaded (best effort). */
static void pf__pin(const char* path) {
  void* pin = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD | RTLD_NODELETE);
  if (pin)
    dlclose(pin);
}

/* The libraries loaded after a refused one (its load mapped them: its dependencies, appended
 * after it to the loader's list; or another thread's load meanwhile), by load bias, taken in
 * one dl_iterate_phdr pass, which holds the loader's lock (the link maps' own list is not safe
 * to walk while another thread unloads a library). Beyond PF__LATER_MAX, any library counts. */
#define PF__LATER_MAX 256
typedef struct {
  const struct link_map* lm;
  int seen; /* lm's entry passed */
  int overflow;
  size_t n;
  uintptr_t bias[PF__LATER_MAX];
} pf__later_t;

static int pf__later_of(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  pf__later_t* l = arg;
  if (!l->seen)
    l->seen = info->dlpi_addr == l->lm->l_addr && info->dlpi_name &&
              strcmp(info->dlpi_name, l->lm->l_name) == 0;
  else if (l->n < PF__LATER_MAX)
    l->bias[l->n++] = info->dlpi_addr;
  else
    l->overflow = 1;
  return 0;
}

/* Where `addr` lies: 1 in the library whose link map is `lm`, 2 in one loaded after it
 * (`later`), else 0; the path of the library holding it in *path. */
static int pf__addr_in(const void* addr, const struct link_map* lm, const pf__later_t* later,
                       const char** path) {
  Dl_info info;
  struct link_map* owner = NULL;
  *path = NULL;
  if (!addr || !dladdr1(addr, &info, (void**)&owner, RTLD_DL_LINKMAP) || !owner)
    return 0;
  if (owner == lm)
    return 1;
  *path = info.dli_fname;
  for (size_t i = 0; i < later->n; ++i)
    if (later->bias[i] == owner->l_addr)
      return 2;
  return later->overflow ? 2 : 0;
}

/* Removes every global function whose code or state lies in the library `handle`, which is
 * about to be unmapped (issue 10, defect 2): its constructors may have registered some before
 * it was refused. The raised error (the refusal) stays raised. Pins the library instead of
 * letting it be unmapped when the globals cannot be listed (out of memory), and when another
 * thread got one of those functions from the table before it was removed and still holds it
 * (its calls and its release would run unmapped code): no table entry and no reference ever
 * points into unmapped memory. A library the load mapped with it (a dependency) whose code a
 * global uses is pinned, and the global stays. Returns 1 when it pinned the library. */
static int pf__forget_library(void* handle, const char* path) {
  pf_object_t* reason = pf_error_take();
  struct link_map* lm = NULL;
  char** names = NULL;
  size_t count = 0;
  int held_elsewhere = 0;
  /* the functions removed, each once (a function registered under two names is one), with a
   * reference each: whether another holder exists is asked once every name is gone, since each
   * name still in the table is a reference of its own (an alias counted as a holder pinned
   * the library, and its next load was accepted without its constructors: review) */
  pf_object_t** removed = NULL;
  size_t n_removed = 0;
  int ok = dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && pf_global_list(&names, &count) == 0;
  if (ok && count > 0) {
    removed = malloc(count * sizeof *removed);
    ok = removed != NULL;
  }
  pf__later_t later = {lm, 0, 0, 0, {0}};
  if (ok)
    dl_iterate_phdr(pf__later_of, &later);
  for (size_t i = 0; ok && i < count; ++i) {
    pf_object_t* fn = NULL;
    const void* addrs[PF__FUNCTION_CODE_MAX];
    if (pf_global_get(names[i], &fn) != 0) {
      ok = 0;
      break;
    }
    size_t n = pf__function_code(fn, addrs);
    for (size_t k = 0; k < n; ++k) {
      const char* owner;
      int where = pf__addr_in(addrs[k], lm, &later, &owner);
      if (where == 2 && owner && *owner) {
        /* a dependency this load mapped registered it: that library stays, and the global with
         * it (unmapped with the refused one, the entry pointed into unmapped code; review) */
        pf__pin(owner);
      }
      if (where == 1) {
        /* only while the name is still this function's: another thread may have set it
         * since the lookup (removed by name, its new function went: review) */
        (void)pf__global_remove_if(names[i], fn);
        size_t j = 0;
        while (j < n_removed && removed[j] != fn)
          ++j;
        if (j == n_removed) {
          removed[n_removed++] = fn; /* the lookup's reference, kept */
          fn = NULL;
        }
        break;
      }
    }
    pf_object_release(fn);
  }
  pf_global_list_free(names);
  if (ok) {
    /* a function of it that left the table before the refusal (another thread removed or
     * overrode its name meanwhile) is out of the listing's sight, yet may still be held (its
     * holder's calls and release would run unmapped code): kept mapped (review) */
    const void* gone[PF__DISPLACED_MAX];
    int overflow = 0;
    size_t n_gone = pf__global_displaced(gone, &overflow);
    held_elsewhere |= overflow;
    for (size_t k = 0; k < n_gone && !held_elsewhere; ++k) {
      const char* owner;
      held_elsewhere = pf__addr_in(gone[k], lm, &later, &owner) == 1;
    }
  }
  for (size_t j = 0; j < n_removed; ++j) {
    /* each removal waited for lookups in flight: every other holder has retained by now. Not
     * counted: this reference and the library's own registration slots, which its destructor
     * drops (counted, every PF_REGISTER_GLOBAL library stayed pinned) */
    held_elsewhere |=
        pf_object_strong_count(removed[j]) > 1 + pf__global_static_holders(removed[j]);
    pf_object_release(removed[j]);
  }
  free(removed);
  if (!ok || held_elsewhere) {
    pf_error_clear();
    pf__pin(path);
  }
  if (reason) {
    (void)pf_error_raise(reason);
    pf_object_release(reason);
  }
  return !ok || held_elsewhere;
}

/* Raises `err` (taken; NULL raises nothing) alone, dropping what is pending now: the refusal
 * paths take their error before closing a library, whose destructors may raise or clear errors
 * of their own, and raise it again after. */
static void pf__raise_alone(pf_object_t* err) {
  pf_error_clear();
  if (err) {
    (void)pf_error_raise(err);
    pf_object_release(err);
  }
}

/* Closes a refused library's `handle` with the refusal raised now kept: when `fresh` (it was
 * not mapped before this load, so closing unmaps it), its code's entries in the global table
 * are removed first; its destructors, which may raise or clear errors of their own, cannot
 * touch the refusal, and what they leave raised is dropped. Returns -1. */
static int pf__close_refused(void* handle, const char* path, int fresh) {
  if (fresh)
    (void)pf__forget_library(handle, path);
  pf_object_t* refusal = pf_error_take();
  dlclose(handle);
  pf__raise_alone(refusal);
  return -1;
}

/* Builds a module over an open `handle` (taken: closed on failure). For a library (not the
 * system), checks its stamp and pins it. `fresh`: the library was not mapped
 * before this load, so refusing it unmaps it. */
static int pf__module_open(const char* func, const char* path, void* handle, int is_system,
                           int fresh, pf_object_t** out) {
  int32_t type_index = pf__module_type_index();
  if (type_index < 0)
    return pf__close_refused(handle, path, fresh);
  size_t path_len = strlen(path);
  pf__module_t* m = malloc(sizeof *m + path_len + 1);
  pf__library_t* lib = malloc(sizeof *lib);
  if (!m || !lib) {
    free(m);
    free(lib);
    if (fresh)
      (void)pf__forget_library(handle, path);
    dlclose(handle);
    return pf__raise_oom(func, sizeof *m + path_len + 1);
  }
  pf__object_init(&lib->header, PF_TYPE_OBJECT, pf__library_deleter);
  lib->handle = handle;
  pf__object_init(&m->header, type_index, pf__module_deleter);
  m->library = &lib->header; /* from here on, releasing the module closes the handle */
  m->exports = NULL;
  m->num_exports = 0;
  m->abi_major = PF_ABI_VERSION_MAJOR;
  m->abi_minor = PF_ABI_VERSION_MINOR;
  m->is_system = is_system;
  m->is_tvm_ffi = 0;
  memcpy(m->path, path, path_len + 1);

  struct link_map* lm = NULL;
  pf__symtab_t own;
  const pf__symtab_t* st = &own;
  pf__cands_t cands = {NULL, 0};
  pf__scan_t scan = {NULL, NULL, NULL};
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
    PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED, "%s: cannot find the link map of %s: %s", func, path,
                 pf__dlerror());
    goto fail;
  }
  if (is_system) {
    const pf__system_syms_t* sys = pf__system_symbols(func, path, lm);
    if (!sys)
      goto fail;
    st = &sys->st;
    cands = (pf__cands_t){sys->idx, sys->n};
  } else {
    if (pf__read_symtab(func, path, lm, &own) != 0)
      goto fail;
    cands.n = own.num_syms;
    /* the stamp first: a library built for another ABI major is refused as such, not for
     * exports or metadata that major may lay out otherwise (they were read first, and its
     * metadata was refused as malformed: review) */
    scan.st = st;
    scan.stamp_sym = pf__find_stamp(st, &cands);
    if (scan.stamp_sym && pf__check_stamp(func, path, &scan) != 0)
      goto fail;
  }
  if (pf__scan_exports(func, m, handle, st, &cands, &scan) != 0)
    goto fail;
  if (!is_system && !scan.stamp_sym && m->num_exports == 0) {
    /* no stamp and no __packfn_ export: a library built against TVM-FFI when it exports
     * __tvm_ffi_<name> functions (its ABI is this runtime's) */
    free(m->exports);
    m->exports = NULL;
    m->is_tvm_ffi = 1;
    if (pf__scan_exports(func, m, handle, st, &cands, &scan) != 0)
      goto fail;
    if (m->num_exports == 0)
      m->is_tvm_ffi = 0; /* neither kind: the stamp check below refuses it */
  }
  if (!is_system) {
    if (!m->is_tvm_ffi && pf__check_stamp(func, path, &scan) != 0)
      goto fail;
    if (!m->is_tvm_ffi) {
      m->abi_major = scan.stamp->major;
      m->abi_minor = scan.stamp->minor;
    }
    /* pin it: code and data of the library must outlive every object its code made */
    void* pin = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD | RTLD_NODELETE);
    if (!pin) {
      PF_ERROR_SET(PF_ERR_OS, "%s: cannot pin %s in memory: %s", func, path, pf__dlerror());
      goto fail;
    }
    dlclose(pin);
  }
  *out = &m->header;
  return 0;
fail:
  if (fresh)
    (void)pf__forget_library(handle, path);
  /* releasing closes the library: its destructors must not clear the refusal */
  pf_object_t* refusal = pf_error_take();
  pf_object_release(&m->header);
  pf__raise_alone(refusal);
  return -1;
}

/* 1 when the cause chain from `err` to its end can take another error at its end without
 * changing an error object anyone else holds: each error on the way has no reference but its
 * parent's (or, for `err`, the caller's). (Whether pf_error_set_cause accepts the end is the
 * caller's to check.) */
static int pf__chain_is_private(pf_object_t* err) {
  for (pf_object_t* e = err; e; e = pf_error_cause(e))
    if (pf_object_strong_count(e) != 1)
      return 0;
  return 1;
}

/* Raises the refusal of the library at `path` whose constructors raised `raised` (taken), with
 * the caller's error `host` (taken, may be NULL) kept: RuntimeError "... raised an error while
 * initialising (the cause)", the constructor's error its cause and the caller's at the end of
 * that chain. When the chain cannot take it (an error another holder sees: it would change
 * under them, found by review; one made by another runtime), the refusal names the
 * constructor's error in its text and the caller's error is its cause. */
static void pf__raise_refusal(const char* path, pf_object_t* raised, pf_object_t* host) {
  if (host) {
    pf_object_t* end = raised;
    while (pf_error_cause(end))
      end = pf_error_cause(end);
    if (!pf__chain_is_private(raised) || pf_error_set_cause(end, host) != 0) {
      pf_error_clear(); /* pf_error_set_cause's refusal, if any */
      (void)pf_error_raise(host);
      pf_object_release(host);
      PF_ERROR_SET(PF_ERR_RUNTIME,
                   "pf_module_load: %s raised an error while initialising: %s: %s (the cause is "
                   "the caller's pending error)",
                   path, pf_error_kind(raised), pf_error_message(raised));
      pf_object_release(raised);
      return;
    }
    pf_object_release(host);
  }
  (void)pf_error_raise(raised);
  pf_object_release(raised);
  PF_ERROR_SET(PF_ERR_RUNTIME, "pf_module_load: %s raised an error while initialising (the cause)",
               path);
}

/* Raises the caller's error `host` (taken) again; NULL does nothing. */
static void pf__restore(pf_object_t* host) {
  if (host) {
    (void)pf_error_raise(host);
    pf_object_release(host);
  }
}

/* The link map of the library `handle`, or NULL. */
static const struct link_map* pf__link_map(void* handle) {
  struct link_map* lm = NULL;
  return dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 ? lm : NULL;
}

/* The link map of the object holding `addr`, or NULL. */
static struct link_map* pf__object_of(const void* addr) {
  Dl_info info;
  struct link_map* owner = NULL;
  return addr && dladdr1(addr, &info, (void**)&owner, RTLD_DL_LINKMAP) ? owner : NULL;
}

/* Whether the runtime holding `theirs` has joined TVM-FFI (its pf_tvm_ffi_joined, looked up in
 * its own object; `global` the global scope's handle for a program's exported copy). */
static int pf__joined_at(const void* theirs, void* global) {
  Dl_info info;
  int joined = 0;
  if (!dladdr(theirs, &info) || !info.dli_fname)
    return 0;
  void* object = *info.dli_fname ? dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD) : NULL;
  int (*fn)(void);
  *(void**)&fn = dlsym(object ? object : global, "pf_tvm_ffi_joined");
  if (fn && pf__object_of((const void*)(uintptr_t)fn) == pf__object_of(theirs))
    joined = fn() == 1;
  if (object)
    dlclose(object);
  return joined;
}

/* The file of a packfn runtime other than this one that the library `handle` uses, in buf,
 * else NULL. A program holding libpackfn.a (its symbols not exported) that loads a library
 * linked against libpackfn.so gets a second runtime (the library's libpackfn.so.0 is no object
 * of the process), and its errors, globals and types would never reach this one (a failing call
 * returned -1 with no error to take, review). Decided from the state markers
 * (module_private.h): where the loader resolves the library's references to them (the global
 * scope first, through the program's handle: RTLD_DEFAULT would search libpackfn's own scope,
 * which holds this runtime even where the program loaded libpackfn RTLD_LOCAL, as Python's
 * extensions are; then the library's own scope), and whether the library holds a copy of its
 * own (its calls may bind to it whatever its data references do: -Bsymbolic-functions, review).
 * A program exporting its static copy (-rdynamic), or one whose code takes pf_error_set's
 * address (a non-PIE program's PLT entry then stands for it), is this runtime. Two runtimes
 * joined to one TVM-FFI share its error slot and tables, and are let be. */
static const char* pf__other_runtime(void* handle, char* buf, size_t size) {
  static const char* const names[] = {"pf__marker_error", "pf__marker_global", "pf__marker_type",
                                      "pf__marker_alloc"};
  void* global = dlopen(NULL, RTLD_NOW);
  const struct link_map* lib = pf__link_map(handle);
  /* this runtime's object, from a static function's address: an exported marker of this
   * runtime may itself be interposed by another copy earlier in the global scope (review) */
  struct link_map* self = pf__object_of((const void*)(uintptr_t)pf__object_of);
  void* theirs = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !theirs; ++i) {
    void* in_global = global ? dlsym(global, names[i]) : NULL;
    void* own = dlsym(handle, names[i]);
    void* bound = in_global ? in_global : own;
    if (bound && pf__object_of(bound) != self)
      theirs = bound;
    else if (own && lib && lib != self && pf__object_of(own) == lib)
      theirs = own; /* a copy of its own */
  }
  /* the library's constructors may have brought libtvm_ffi in and joined their runtime to it:
   * this one joins now too if it can (pf_tvm_ffi_joined would not look again, review) */
  int joined = theirs && pf_tvm_ffi_join() == 1 && pf__joined_at(theirs, global);
  if (global)
    dlclose(global);
  if (!theirs || joined)
    return NULL;
  Dl_info info;
  snprintf(buf, size, "%s",
           dladdr(theirs, &info) && info.dli_fname && *info.dli_fname ? info.dli_fname
                                                                      : "another object");
  return buf;
}

/* Libraries pf_module_load accepted (pinned, so their link maps stay valid): a library mapped
 * before a load is judged again unless it is one of these (one dlopen()ed by someone else, or
 * refused before but left mapped, was accepted unjudged, review). Slots filled without a lock
 * and no allocation; past the last one, or while a slot is being filled, a library is judged
 * again, as it was when first loaded. */
#define PF__ACCEPTED_MAX 1024
static const struct link_map* pf__accepted[PF__ACCEPTED_MAX];
static unsigned pf__accepted_n; /* slots taken, some maybe not yet written */

static int pf__accepted_before(const struct link_map* lm) {
  unsigned n = __atomic_load_n(&pf__accepted_n, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; lm && i < n && i < PF__ACCEPTED_MAX; ++i)
    if (__atomic_load_n(&pf__accepted[i], __ATOMIC_ACQUIRE) == lm)
      return 1;
  return 0;
}

static void pf__remember_accepted(const struct link_map* lm) {
  if (!lm || pf__accepted_before(lm))
    return;
  unsigned i = __atomic_fetch_add(&pf__accepted_n, 1, __ATOMIC_ACQ_REL);
  if (i < PF__ACCEPTED_MAX)
    __atomic_store_n(&pf__accepted[i], lm, __ATOMIC_RELEASE);
  else
    __atomic_store_n(&pf__accepted_n, PF__ACCEPTED_MAX, __ATOMIC_RELAXED); /* no wrap */
}

/* This runtime's file (the program's when it holds libpackfn.a), in buf. */
static const char* pf__this_runtime(char* buf, size_t size) {
  Dl_info info;
  const char* at =
      dladdr((const void*)(uintptr_t)pf__object_of, &info) && info.dli_fname && *info.dli_fname
          ? info.dli_fname
          : "the program";
  snprintf(buf, size, "%s", at);
  return buf;
}

static int pf__module_load(const char* path, int was_mapped, pf_object_t* host, pf_object_t** out);

int pf_module_load(const char* path, pf_object_t** out) {
  if (!out)
    return PF__NULL_ARG("pf_module_load", "out");
  *out = NULL;
  if (!path || !*path) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "pf_module_load: argument path: expected a library path, got %s (the program "
                 "itself is pf_module_system)",
                 path ? "\"\"" : "NULL");
    return -1;
  }
  /* the caller's pending error is set aside, so that a constructor's error is told from it
   * (and a constructor that clears its own errors cannot clear it), and raised again after */
  pf_object_t* host = pf_error_take();
  (void)dlerror(); /* clear a stale message */
  void* mapped = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (mapped)
    dlclose(mapped); /* already loaded (accepted before, or linked): a refusal unmaps nothing */
  (void)dlerror();
  pf__global_watch_begin(); /* what leaves the global table from here on is recorded */
  int rc = pf__module_load(path, mapped != NULL, host, out);
  pf__global_watch_end();
  return rc;
}

/* pf_module_load from its dlopen on, inside the global table's watch of what leaves it
 * (function_private.h): `host` the caller's pending error (taken), `was_mapped` whether the
 * library was mapped before (a refusal then unmaps nothing). */
static int pf__module_load(const char* path, int was_mapped, pf_object_t* host, pf_object_t** out) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  pf_object_t* raised = pf_error_take(); /* what its constructors raised */
  if (!handle) {
    char why[512]; /* copied: raising may call the loader (backtraces), which reuses its text */
    snprintf(why, sizeof why, "%s", pf__dlerror());
    pf__restore(host);
    pf__restore(raised);
    PF_ERROR_SET(PF_ERR_OS, "pf_module_load: cannot load %s: %s", path, why);
    return -1;
  }
  /* a library this function accepted before was bound then and is not judged again (the
   * global scope may have changed since); any other is */
  char theirs[512];
  if (!(was_mapped && pf__accepted_before(pf__link_map(handle))) &&
      pf__other_runtime(handle, theirs, sizeof theirs)) {
    char ours[512];
    pf__restore(host);
    pf__restore(raised); /* raised in this runtime's slot: a dependency's constructor */
    PF_ERROR_SET(PF_ERR_RUNTIME,
                 "pf_module_load: cannot load %s: it is bound to the packfn runtime in %s, not "
                 "this process's (%s), so its errors, global functions and types would never "
                 "reach this one; build the library against the shared libpackfn this process "
                 "uses, without a copy of its own (and link a program that holds libpackfn.a "
                 "with the shared libpackfn instead: packfn::packfn, -lpackfn)",
                 path, theirs, pf__this_runtime(ours, sizeof ours));
    /* its constructors may have registered globals in this runtime's table (its calls bound
     * here, its own copy aside): removed before its code is unmapped (a call crashed, review) */
    return pf__close_refused(handle, path, !was_mapped);
  }
  if (raised) {
    /* a constructor of the library raised (a PF_REGISTER_GLOBAL name already taken...): refuse
     * it; closing it runs its destructors, which undo what they registered, and anything
     * else of its code left in the global table is removed first */
    pf__raise_refusal(path, raised, host);
    /* closing runs its destructors: one that clears its own error must not clear the refusal
     * (review) */
    return pf__close_refused(handle, path, !was_mapped);
  }
  pf__restore(host);
  int rc = pf__module_open("pf_module_load", path, handle, 0, !was_mapped, out);
  if (rc == 0) {
    pf__remember_accepted(pf__link_map(handle)); /* pinned now: its link map stays */
    (void)pf_tvm_ffi_join();                     /* the library may have brought libtvm_ffi in */
  }
  return rc;
}

int pf_module_system(pf_object_t** out) {
  if (!out)
    return PF__NULL_ARG("pf_module_system", "out");
  *out = NULL;
  void* handle = dlopen(NULL, RTLD_NOW);
  if (!handle) {
    PF_ERROR_SET(PF_ERR_OS, "pf_module_system: cannot open the program: %s", pf__dlerror());
    return -1;
  }
  return pf__module_open("pf_module_system", PF__SYSTEM_PATH, handle, 1, 0, out);
}

/* ---- functions ---- */

/* Makes the function object of an export for `func`; it holds the library open. */
static int pf__export_function(const char* func, const pf__module_t* m, const pf__export_t* e,
                               pf_object_t** out) {
  const pf_export_meta_t* meta = e->meta;
  int rc;
  if (meta && meta->typed_sig) {
    rc = pf_function_create_typed(meta->typed_sig, meta->typed_impl, NULL, NULL, out);
    /* a refused declaration's error stays as the cause; running out of memory is no bad
     * declaration and stays a MemoryError */
    pf_object_t* why = rc != 0 ? pf_error_peek() : NULL;
    if (why && strcmp(pf_error_kind(why), PF_ERR_MEMORY) != 0)
      PF_ERROR_SET(PF_ERR_VALUE, "%s: %s: typed export '%s' has a bad declaration (the cause)",
                   func, m->path, e->name);
  } else {
    rc = pf_function_create_direct(e->call, out);
    if (rc == 0 && meta && (meta->signature || meta->doc))
      rc = pf_function_set_info(*out, meta->signature, meta->doc);
  }
  if (rc == 0)
    rc = pf__function_set_keepalive(*out, m->library);
  if (rc != 0) {
    pf_object_release(*out);
    *out = NULL;
  }
  return rc;
}

/* The cached function of an export, built on first use; borrowed (the module holds it). */
static pf_object_t* pf__export_cached(const char* func, const pf__module_t* m, pf__export_t* e) {
  pf_object_t* fn = __atomic_load_n(&e->fn, __ATOMIC_ACQUIRE);
  if (PF_LIKELY(fn != NULL))
    return fn;
  if (pf__export_function(func, m, e, &fn) != 0)
    return NULL;
  pf_object_t* expected = NULL;
  if (!__atomic_compare_exchange_n(&e->fn, &expected, fn, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    pf_object_release(fn); /* another thread published first: use its object */
    fn = expected;
  }
  return fn;
}

/* Whether `obj` is TVM-FFI's ffi.Module (a C++ object of index 73, e.g. from
 * tvm_ffi.load_module) in a process that joined TVM-FFI. */
static int pf__is_tvm_module(const pf_object_t* obj) {
  return obj && obj->type_index == PF_TYPE_MODULE && !pf__module_is_ours(obj) && pf__tvm();
}

/* Function `name` of TVM-FFI's module `module` through TVM-FFI's global "ffi.ModuleGetFunction"
 * (imports not searched): as pf_module_get_function. */
static int pf__tvm_module_function(const char* func, pf_object_t* module, const char* name,
                                   pf_object_t** out) {
  pf_object_t* get;
  if (pf_global_get("ffi.ModuleGetFunction", &get) != 0)
    return -1;
  if (!get) {
    PF_ERROR_SET(PF_ERR_NOT_IMPLEMENTED,
                 "%s: TVM-FFI has no global ffi.ModuleGetFunction to read its ffi.Module with",
                 func);
    return -1;
  }
  pf_any_t args[3] = {pf_any_object(module), pf_any_cstr(name), pf_any_bool(0)};
  pf_any_t found = pf_any_none();
  int rc = pf_function_call(get, args, 3, &found);
  pf_object_release(get);
  if (rc != 0)
    return pf_error_ensure(func, rc);
  if (found.type_index == PF_TYPE_FUNCTION) {
    *out = found.v_obj;
    return 0;
  }
  pf_any_release(&found); /* none: no such function */
  return 0;
}

/* The lookup of pf_module_get_function for `func`: 0 with a new reference in *out, or 0 with
 * *out = NULL when the module has no such function; -1 for bad arguments. *m receives the
 * module when it is one of packfn's (NULL for TVM-FFI's ffi.Module). */
static int pf__module_lookup(const char* func, pf_object_t* module, const char* name,
                             pf_object_t** out, pf__module_t** mod) {
  if (!out)
    return PF__NULL_ARG(func, "out");
  *out = NULL;
  *mod = NULL;
  int tvm = pf__is_tvm_module(module);
  pf__module_t* m = tvm ? NULL : pf__module_arg(func, module);
  if (!m && !tvm)
    return -1;
  *mod = m;
  if (!name || !*name) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument name: expected a function name, got %s", func,
                 name ? "\"\"" : "NULL");
    return -1;
  }
  if (tvm)
    return pf__tvm_module_function(func, module, name, out);
  pf__export_t* e = pf__find_export(m, name);
  if (e) {
    pf_object_t* fn = pf__export_cached(func, m, e);
    if (!fn)
      return -1;
    pf_object_retain(fn);
    *out = fn;
    return 0;
  }
  return m->is_system ? pf__global_lookup_as(name, strlen(name), out, func) : 0;
}

int pf_module_get_function(pf_object_t* module, const char* name, pf_object_t** out) {
  pf__module_t* m;
  return pf__module_lookup("pf_module_get_function", module, name, out, &m);
}

/* pf__suggest_whole's adapter for the module's functions (ctx the module). */
static int pf__suggest_in_module(void* module, const char* name, char* buf, size_t size) {
  return pf_module_suggest((pf_object_t*)module, name, buf, size);
}

int pf_module_suggest(pf_object_t* module, const char* name, char* buf, size_t size) {
  pf__module_t* m = pf__module_arg("pf_module_suggest", module);
  if (!m)
    return -1;
  if (!name || (!buf && size > 0))
    return PF__NULL_ARG("pf_module_suggest", name ? "buf" : "name");
  pf__suggest_t s;
  pf__suggest_init(&s, name);
  for (size_t i = 0; i < m->num_exports; ++i)
    pf__suggest_offer(&s, m->exports[i].name);
  char* global = m->is_system ? pf__suggest_whole(pf__suggest_in_globals, NULL, name) : NULL;
  if (global)
    pf__suggest_offer(&s, global);
  int rc = pf__suggest_result(&s, buf, size);
  free(global);
  return rc;
}

int pf_module_call(pf_object_t* module, const char* name, const pf_any_t* args, int32_t num_args,
                   pf_any_t* result) {
  pf_object_t* fn;
  pf__module_t* m = NULL;
  if (result)
    *result = pf_any_none();
  if (pf__module_lookup("pf_module_call", module, name, &fn, &m) != 0)
    return -1;
  if (!fn) {
    char* near = m ? pf__suggest_whole(pf__suggest_in_module, module, name) : NULL;
    PF_ERROR_SET(PF_ERR_KEY, "pf_module_call: %s has no function '%s'%s%s%s",
                 m ? m->path : "the TVM-FFI module", name, near ? " (did you mean '" : "",
                 near ? near : "", near ? "'?)" : "");
    free(near);
    return -1;
  }
  return pf__call_found("pf_module_call", name, fn, args, num_args, result);
}

/* ---- listing ---- */

/* A function being listed: its name (borrowed from the module or the global list) and object
 * (owned). */
typedef struct {
  const char* name;
  pf_object_t* fn;
} pf__listed_t;

static int pf__cmp_listed(const void* a, const void* b) {
  return strcmp(((const pf__listed_t*)a)->name, ((const pf__listed_t*)b)->name);
}

static size_t pf__text_size(const char* s) {
  return s ? strlen(s) + 1 : 0;
}

/* Copies s (may be NULL) to *text, advancing it; returns the copy or NULL. */
static const char* pf__copy_text(const char* s, char** text) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char* copy = *text;
  memcpy(copy, s, n);
  *text += n;
  return copy;
}

/* Collects into list[] (room for every export and global) the module's functions: its
 * exports, then the global names (system module) that no export shadows, each with a new
 * reference. Returns the count, or -1 with an error raised and nothing held. */
static ptrdiff_t pf__collect(pf__module_t* m, char** globals, size_t num_globals,
                             pf__listed_t* list) {
  size_t n = 0;
  /* the caller's pending error, held so that it is pending again after a declaration's error
   * (which takes it as its cause) is dropped below (review: the clear dropped it too) */
  pf_object_t* before = pf_error_peek();
  pf_object_retain(before);
  for (size_t i = 0; i < m->num_exports; ++i) {
    pf_object_t* fn = pf__export_cached("pf_module_list", m, &m->exports[i]);
    if (!fn) {
      /* a typed declaration this runtime cannot build (a bad one, or a newer minor ABI's
       * kind): listed without a signature, as the lookup of that name alone fails (it failed
       * every listing of the module, found by review) */
      pf_object_t* err = pf_error_peek();
      if (!err || strcmp(pf_error_kind(err), PF_ERR_MEMORY) == 0)
        goto fail;
      pf_object_t* dropped = pf_error_take();
      if (before)
        (void)pf_error_raise(before);
      pf_object_release(dropped);
    } else {
      pf_object_retain(fn);
    }
    list[n++] = (pf__listed_t){m->exports[i].name, fn};
  }
  for (size_t i = 0; i < num_globals; ++i) {
    pf_object_t* fn;
    if (pf__find_export(m, globals[i]))
      continue;
    if (pf_global_get(globals[i], &fn) != 0)
      goto fail;
    if (fn) /* NULL: removed since the names were taken */
      list[n++] = (pf__listed_t){globals[i], fn};
  }
  pf_object_release(before);
  return (ptrdiff_t)n;
fail:
  pf_object_release(before);
  for (size_t i = 0; i < n; ++i)
    pf_object_release(list[i].fn);
  return -1;
}

/* One block: the entries, a terminating entry, then every text they point at. */
static pf_export_info_t* pf__info_block(const pf__listed_t* items, size_t n) {
  size_t total = (n + 1) * sizeof(pf_export_info_t);
  for (size_t i = 0; i < n; ++i)
    total += pf__text_size(items[i].name) + pf__text_size(pf_function_signature(items[i].fn)) +
             pf__text_size(pf_function_doc(items[i].fn));
  pf_export_info_t* list = malloc(total);
  if (!list) {
    pf__raise_oom("pf_module_list", total);
    return NULL;
  }
  char* text = (char*)(list + n + 1);
  for (size_t i = 0; i < n; ++i) {
    list[i].name = pf__copy_text(items[i].name, &text);
    list[i].signature = pf__copy_text(pf_function_signature(items[i].fn), &text);
    list[i].doc = pf__copy_text(pf_function_doc(items[i].fn), &text);
  }
  list[n] = (pf_export_info_t){NULL, NULL, NULL};
  return list;
}

int pf_module_list(pf_object_t* module, pf_export_info_t** out, size_t* count) {
  if (count)
    *count = 0; /* on every failure, a NULL out's too */
  if (!out)
    return PF__NULL_ARG("pf_module_list", "out");
  *out = NULL;
  pf__module_t* m = pf__module_arg("pf_module_list", module);
  if (!m)
    return -1;
  char** globals = NULL;
  size_t num_globals = 0;
  if (m->is_system && pf_global_list(&globals, &num_globals) != 0)
    return -1;
  size_t cap = m->num_exports + num_globals;
  pf__listed_t* items = malloc((cap ? cap : 1) * sizeof *items);
  ptrdiff_t n = items ? pf__collect(m, globals, num_globals, items) : -1;
  if (!items)
    pf__raise_oom("pf_module_list", cap * sizeof *items);
  pf_export_info_t* list = NULL;
  if (n >= 0) {
    qsort(items, (size_t)n, sizeof *items, pf__cmp_listed);
    list = pf__info_block(items, (size_t)n);
    for (ptrdiff_t i = 0; i < n; ++i)
      pf_object_release(items[i].fn);
  }
  free(items);
  pf_global_list_free(globals);
  if (!list)
    return -1;
  *out = list;
  if (count)
    *count = (size_t)n;
  return 0;
}

void pf_module_list_free(pf_export_info_t* list) {
  free(list);
}

const char* pf_module_path(const pf_object_t* module) {
  return pf__module_is_ours(module) ? ((const pf__module_t*)module)->path : NULL;
}

int pf_module_abi_version(const pf_object_t* module, uint32_t* major, uint32_t* minor) {
  const pf__module_t* m = pf__module_arg("pf_module_abi_version", (pf_object_t*)module);
  if (!m)
    return -1;
  if (major)
    *major = m->abi_major;
  if (minor)
    *minor = m->abi_minor;
  return 0;
}
