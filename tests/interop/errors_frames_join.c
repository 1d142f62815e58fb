/* Errors raised with PACKFN_BACKTRACE=1 before a late join reach TVM-FFI's slot after it (review,
 * 2026-11-26). Before the join packfn keeps a raise's frames by address and names them when it
 * first reads the text; once joined it names them at the raise, since TVM-FFI reads the cell's
 * text as it is (docs/error.md). An error left pending at the join (moved to TVM-FFI's slot at
 * the thread's next error call), and one taken before the join and raised again after it,
 * reached TVM-FFI with `File "<native>", line 0, in 0x...` lines. The cell must hold the named
 * text, the one pf_error_backtrace gives. This program links only libpackfn and dlopen()s the
 * wheel's libtvm_ffi by path (argv[1]); run with PACKFN_BACKTRACE=1.
 * `first`: libtvm_ffi is loaded before packfn's first error, which joins as it is raised; that
 * error reached TVM-FFI's slot with address lines too (review: the raise asked whether packfn
 * had joined before its slot access joined).
 *   interop_errors_frames_join LIBTVM_FFI [first] */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

#include "interop_check.h"

static void (*move_from_raised)(void**);

__attribute__((noinline)) static void raise_early(const char* message) {
  PF_ERROR_SET(PF_ERR_VALUE, "%s", message);
}

/* The cell's text of `err`, as TVM-FFI reads it, is named (no address line) and is the text
 * pf_error_backtrace gives. */
static int cell_named(const pf_object_t* err) {
  const pf_error_cell_t* c = (const pf_error_cell_t*)(err + 1);
  const char* bt = pf_error_backtrace(err);
  if (strstr(c->backtrace.data, "\"<native>\"") != NULL || !bt || strlen(bt) != c->backtrace.size ||
      memcmp(bt, c->backtrace.data, c->backtrace.size) != 0) {
    fprintf(stderr, "TVM-FFI reads:\n%.*s\n", (int)c->backtrace.size, c->backtrace.data);
    return 0;
  }
  return strstr(c->backtrace.data, "raise_early") != NULL; /* the stack is there at all */
}

/* `first` mode: the process's first error, raised with libtvm_ffi loaded, joins. */
static int first_error_joins(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  *(void**)&move_from_raised = dlsym(lib, "TVMFFIErrorMoveFromRaised");
  CHECK(move_from_raised != NULL);
  if (failures)
    return 1;
  CHECK(!pf_tvm_ffi_joined());
  raise_early("the process's first error");
  CHECK(pf_tvm_ffi_joined());
  void* err = NULL;
  move_from_raised(&err);
  CHECK(err && strcmp(pf_error_message(err), "the process's first error") == 0 && cell_named(err));
  pf_object_release((pf_object_t*)err);
  return failures != 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[2], "first") == 0)
    return first_error_joins(argv[1]);
  if (argc != 2) {
    fprintf(stderr, "usage: interop_errors_frames_join LIBTVM_FFI [first]\n");
    return 2;
  }
  /* before the join: one error taken (kept by the program), one left pending */
  raise_early("taken before the join");
  pf_object_t* kept = pf_error_take();
  CHECK(kept != NULL);
  raise_early("pending at the join");
  CHECK(pf_tvm_ffi_join() == 0); /* not loaded yet */

  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  *(void**)&move_from_raised = dlsym(lib, "TVMFFIErrorMoveFromRaised");
  CHECK(move_from_raised != NULL);
  if (failures)
    return 1;
  CHECK(pf_tvm_ffi_join() == 1);

  /* the pending one moves to TVM-FFI's slot at this thread's next error call */
  CHECK(pf_error_peek() != NULL);
  void* err = NULL;
  move_from_raised(&err);
  CHECK(err && strcmp(pf_error_message(err), "pending at the join") == 0 && cell_named(err));
  pf_object_release((pf_object_t*)err);

  /* the kept one, raised again after the join */
  CHECK(pf_error_raise(kept) == 0);
  pf_object_release(kept);
  err = NULL;
  move_from_raised(&err);
  CHECK(err && strcmp(pf_error_message(err), "taken before the join") == 0 && cell_named(err));
  pf_object_release((pf_object_t*)err);
  return failures != 0;
}
