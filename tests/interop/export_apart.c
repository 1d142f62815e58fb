/* A packfn kernel library's __tvm_ffi_<name> exports called as TVM-FFI calls them while the
 * two runtimes are apart: TVM-FFI reads a failed call's error from its own raised slot (and
 * crashed finding it empty: review), so the export moves the error there.
 *   export_apart apart LIBTVM_FFI LIB   PACKFN_NO_TVM_FFI=1: libtvm_ffi loaded, never joined
 *   export_apart late LIBTVM_FFI LIB    libtvm_ffi loaded after LIB, not joined yet
 *   export_apart joined LIBTVM_FFI LIB  the same checks once joined (one slot)
 * This program links only libpackfn and loads both libraries with dlopen. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

#include "interop_check.h"

static void* open_or_report(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
  return h;
}

/* Calls LIB's __tvm_ffi_<name> as TVM-FFI's loader does (self NULL, result none). */
static int call_export(void* lib, const char* name, pf_any_t* result) {
  char symbol[64];
  snprintf(symbol, sizeof symbol, "__tvm_ffi_%s", name);
  pf_safe_call_t fn;
  *(void**)&fn = dlsym(lib, symbol);
  CHECK(fn != NULL);
  *result = pf_any_none();
  pf_any_t arg = pf_any_int(7);
  return fn ? fn(NULL, &arg, 1, result) : -99;
}

int main(int argc, char** argv) {
  int late = argc == 4 && strcmp(argv[1], "late") == 0;
  int joined = argc == 4 && strcmp(argv[1], "joined") == 0;
  if (argc != 4 || !(late || joined || strcmp(argv[1], "apart") == 0)) {
    fprintf(stderr, "usage: export_apart apart|late|joined LIBTVM_FFI LIB\n");
    return 2;
  }
  void* tvm = NULL;
  if (!late)
    tvm = open_or_report(argv[2]);
  else
    CHECK(pf_tvm_ffi_join() == 0);     /* looked for, absent */
  void* lib = open_or_report(argv[3]); /* its constructor tries to join */
  if (late)
    tvm = open_or_report(argv[2]);
  if (!tvm || !lib)
    return 1;
  CHECK(pf_tvm_ffi_joined() == joined);
  void (*move_from_raised)(void**);
  *(void**)&move_from_raised = dlsym(tvm, "TVMFFIErrorMoveFromRaised");
  CHECK(move_from_raised != NULL);
  if (!move_from_raised)
    return 1;

  pf_any_t result;
  CHECK(call_export(lib, "ok", &result) == 0);
  CHECK(result.type_index == PF_TYPE_INT && result.v_int64 == 1);
  void* err = NULL;
  move_from_raised(&err);
  CHECK(err == NULL);

  /* the error is in TVM-FFI's slot, none is left in packfn's (joined, they are one) */
  CHECK(call_export(lib, "fails", &result) == -1);
  CHECK(joined || pf_error_peek() == NULL);
  move_from_raised(&err);
  CHECK(err != NULL);
  if (err) {
    CHECK(strcmp(pf_error_kind(err), "ValueError") == 0);
    CHECK(strcmp(pf_error_message(err), "fails: bad argument") == 0);
    pf_object_release(err);
  }

  /* a -1 that raised nothing still leaves an error for TVM-FFI */
  err = NULL;
  CHECK(call_export(lib, "silent", &result) == -1);
  CHECK(joined || pf_error_peek() == NULL);
  move_from_raised(&err);
  CHECK(err != NULL);
  if (err) {
    CHECK(strcmp(pf_error_kind(err), "RuntimeError") == 0);
    CHECK(strstr(pf_error_message(err), "silent returned -1 without raising") != NULL);
    pf_object_release(err);
  }

  /* packfn's own calls through __packfn_<name> leave the error where pf_error_take finds it */
  pf_safe_call_t own;
  *(void**)&own = dlsym(lib, "__packfn_fails");
  CHECK(own && own(NULL, NULL, 0, &result) == -1);
  pf_object_t* mine = pf_error_take();
  CHECK(mine && strcmp(pf_error_message(mine), "fails: bad argument") == 0);
  pf_object_release(mine);
  err = NULL;
  move_from_raised(&err);
  CHECK(err == NULL);
  if (failures)
    fprintf(stderr, "export_apart %s: %d checks failed\n", argv[1], failures);
  return failures != 0;
}
