/* Joining the TVM-FFI runtime of the process (interop.h): finds a loaded libtvm_ffi with
 * dlopen(RTLD_NOLOAD), never loading it, checks its version and looks up its entry points. */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/export.h"
#include "packfn/interop.h"

#include "tvm_private.h"
#include "alloc.h"

int pf__tvm_state;
const pf__tvm_t* pf__tvm_api;
void (*pf__tvm_join_hooks[PF__TVM_HOOKS])(const pf__tvm_t* tvm);

static pf__tvm_t pf__tvm_found;
static pthread_mutex_t pf__tvm_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  int32_t major, minor, patch;
} pf__tvm_version_t;

static int pf__tvm_disabled(void) {
  const char* no = getenv(PF_NO_TVM_FFI_ENV);
  return no && *no && !(no[0] == '0' && no[1] == '\0');
}

/* Fills *t from the loaded library; 0 when an entry point is missing or the version is not
 * 0.1.x (the layouts packfn shares were checked against 0.1). */
static int pf__tvm_resolve(void* lib, pf__tvm_t* t) {
  void (*get_version)(pf__tvm_version_t*);
  *(void**)&get_version = dlsym(lib, "TVMFFIGetVersion");
  if (!get_version)
    return 0;
  pf__tvm_version_t v = {0, 0, 0};
  get_version(&v);
  if (v.major != 0 || v.minor != 1)
    return 0;
  t->version_major = v.major;
  t->version_minor = v.minor;
  t->version_patch = v.patch;
  *(void**)&t->error_move_from_raised = dlsym(lib, "TVMFFIErrorMoveFromRaised");
  *(void**)&t->error_set_raised = dlsym(lib, "TVMFFIErrorSetRaised");
  *(void**)&t->type_get_or_alloc_index = dlsym(lib, "TVMFFITypeGetOrAllocIndex");
  *(void**)&t->type_key_to_index = dlsym(lib, "TVMFFITypeKeyToIndex");
  *(void**)&t->function_get_global = dlsym(lib, "TVMFFIFunctionGetGlobal");
  *(void**)&t->function_set_global = dlsym(lib, "TVMFFIFunctionSetGlobal");
  *(void**)&t->function_call = dlsym(lib, "TVMFFIFunctionCall");
  *(void**)&t->get_type_info = dlsym(lib, "TVMFFIGetTypeInfo");
  /* optional: without them each runtime keeps its own current streams */
  *(void**)&t->env_set_stream = dlsym(lib, "TVMFFIEnvSetStream");
  *(void**)&t->env_get_stream = dlsym(lib, "TVMFFIEnvGetStream");
  if (!t->env_set_stream || !t->env_get_stream)
    t->env_set_stream = NULL, t->env_get_stream = NULL;
  t->library = lib;
  return t->error_move_from_raised && t->error_set_raised && t->type_get_or_alloc_index &&
         t->type_key_to_index && t->function_get_global && t->function_set_global &&
         t->function_call && t->get_type_info;
}

/* TVM-FFI's global table takes no lock (its writers are expected to serialise themselves), so
 * every call packfn makes into it holds pf__tvm_table (global_write.c, global.c, type.c). No
 * function is released under that lock: a replaced TVM-FFI entry is retained first and released
 * after unlocking, so a deleter may use either table. Lock order: pf__types_lock, then
 * pf__tvm_table, then the table's writers. */
pthread_mutex_t pf__tvm_table = PTHREAD_MUTEX_INITIALIZER;

/* fork (alloc.c's handlers), after the type registry's lock */
void pf__tvm_table_fork_lock(void) {
  pthread_mutex_lock(&pf__tvm_table);
}

void pf__tvm_table_fork_unlock(void) {
  pthread_mutex_unlock(&pf__tvm_table);
}

void pf__tvm_fork_lock(void) {
  pthread_mutex_lock(&pf__tvm_lock);
}

void pf__tvm_fork_unlock(void) {
  pthread_mutex_unlock(&pf__tvm_lock);
}

/* dl_iterate_phdr: copies the path of a loaded object whose file is named libtvm_ffi.so into
 * out (PATH_MAX bytes) and ends the walk. */
static int pf__tvm_find_loaded(struct dl_phdr_info* info, size_t size, void* out) {
  (void)size;
  const char* name = info->dlpi_name;
  const char* file = name ? strrchr(name, '/') : NULL;
  file = file ? file + 1 : name;
  if (!file || strcmp(file, "libtvm_ffi.so") != 0 || strlen(name) >= PATH_MAX)
    return 0;
  memcpy(out, name, strlen(name) + 1);
  return 1;
}

void* pf__tvm_open_loaded(void) {
  char path[PATH_MAX];
  if (!dl_iterate_phdr(pf__tvm_find_loaded, path))
    return NULL;
  /* loaded, so found by name: no search of the library path, and no error record (a failed
   * dlopen's, made inside a library's constructor, is one glibc 2.36 mishandles when its
   * malloc fails: SIGSEGV in the outer dlopen, found by pf_fault) */
  return dlopen(path, RTLD_NOW | RTLD_NOLOAD);
}

/* The loader's count of loaded objects when libtvm_ffi was last looked for and not found. */
static unsigned long long pf__tvm_absent_at = ~0ull;

int pf_tvm_ffi_join(void) {
  if (__atomic_load_n(&pf__tvm_state, __ATOMIC_ACQUIRE) == 2)
    return 1;
  /* Looked for before taking the lock: dlopen takes the loader's lock, and a library constructor
   * running under that lock (in another thread's dlopen) may be the one that joins, on its first
   * error or registration. Holding pf__tvm_lock across dlopen inverted that order (a deadlock,
   * found by review). Two threads may both look; the loser closes its handle. */
  /* Not loaded when last looked for, and no library loaded since: still not there. Every
   * PF_EXPORT's constructor joins, and a dlopen("libtvm_ffi.so", RTLD_NOLOAD) searched the
   * library path for the name: 5000 exports took 100 ms to load (review). */
  unsigned long long adds;
  pf__loader_counts(&adds, NULL);
  if (__atomic_load_n(&pf__tvm_state, __ATOMIC_ACQUIRE) == 1 && adds != ~0ull &&
      __atomic_load_n(&pf__tvm_absent_at, __ATOMIC_RELAXED) == adds)
    return 0;
  pf__tvm_t found = {0};
  int disabled = pf__tvm_disabled(); /* read each time: a program may change it */
  void* lib = disabled ? NULL : pf__tvm_open_loaded();
  int usable = lib && pf__tvm_resolve(lib, &found);
  int kept = 0;
  pthread_mutex_lock(&pf__tvm_lock);
  int state = pf__tvm_state;
  if (state != 2) {
    state = 1;
    if (usable) {
      pf__tvm_found = found;
      __atomic_store_n(&pf__tvm_api, &pf__tvm_found, __ATOMIC_RELEASE);
      for (int i = 0; i < PF__TVM_HOOKS; ++i)
        if (pf__tvm_join_hooks[i])
          pf__tvm_join_hooks[i](&pf__tvm_found);
      state = 2;
      kept = 1;
    }
    if (state == 1) /* remembered only when looked for: not while disabled */
      __atomic_store_n(&pf__tvm_absent_at, disabled ? ~0ull : adds, __ATOMIC_RELAXED);
    __atomic_store_n(&pf__tvm_state, state, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&pf__tvm_lock);
  if (lib && !kept)
    dlclose(lib);
  return state == 2;
}

int pf__export_join(void) {
  return pf_tvm_ffi_join();
}

int pf_tvm_ffi_joined(void) {
  return __atomic_load_n(&pf__tvm_state, __ATOMIC_ACQUIRE) == 2;
}
