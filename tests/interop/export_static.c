/* A packfn kernel library linked with libpackfn.a (its copy hidden: made for hosts without
 * packfn) in a TVM-FFI host without packfn: its __tvm_ffi_<name> exports that fail leave their
 * error in TVM-FFI's slot, apart (PACKFN_NO_TVM_FFI=1) or joined, as a library linked against
 * the shared libpackfn does (the archive's member holding the failure path was never linked:
 * the exports reach it through a weak reference).
 *   export_static LIB    this program links only libtvm_ffi and dlopen()s LIB */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tvm/ffi/c_api.h>

static int failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* Calls LIB's __tvm_ffi_<name> as TVM-FFI's loader does (self NULL, result none); the error it
 * left in TVM-FFI's slot (taken; NULL when none), its kind and message in kind and message. */
static int call_export(void* lib, const char* name, char* kind, char* message, size_t size) {
  char symbol[64];
  snprintf(symbol, sizeof symbol, "__tvm_ffi_%s", name);
  TVMFFISafeCallType fn;
  *(void**)&fn = dlsym(lib, symbol);
  CHECK(fn != NULL);
  if (!fn)
    return 0;
  TVMFFIAny arg, result;
  memset(&arg, 0, sizeof arg);
  memset(&result, 0, sizeof result);
  arg.type_index = kTVMFFIInt;
  arg.v_int64 = 7;
  int rc = fn(NULL, &arg, 1, &result);
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  kind[0] = message[0] = '\0';
  if (err) {
    const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)((const char*)err + sizeof(TVMFFIObject));
    snprintf(kind, size, "%.*s", (int)cell->kind.size, cell->kind.data);
    snprintf(message, size, "%.*s", (int)cell->message.size, cell->message.data);
    TVMFFIObjectDecRef(err);
  }
  return rc;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: export_static LIB\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  char kind[64], message[256];
  CHECK(call_export(lib, "ok", kind, message, sizeof kind) == 0);
  CHECK(kind[0] == '\0');
  CHECK(call_export(lib, "fails", kind, message, sizeof message) == -1);
  CHECK(strcmp(kind, "ValueError") == 0);
  CHECK(strcmp(message, "fails: bad argument") == 0);
  /* a -1 that raised nothing still leaves an error for TVM-FFI */
  CHECK(call_export(lib, "silent", kind, message, sizeof message) == -1);
  CHECK(strcmp(kind, "RuntimeError") == 0);
  CHECK(strstr(message, "silent returned -1 without raising") != NULL);
  if (failures)
    fprintf(stderr, "export_static: %d checks failed\n", failures);
  dlclose(lib);
  return failures != 0;
}
