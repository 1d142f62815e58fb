/* An error pending in TVM-FFI's slot when packfn joins (review, 2026-11-26). The join pushes
 * packfn's globals into TVM-FFI's table; a name TVM-FFI already holds is refused, and the
 * refusal raised over the joining thread's pending error, which TVM-FFI released, and the join
 * then dropped the refusal: the error was gone. It must still be pending after the join, and
 * the two tables keep their own functions under the shared name. This program links only
 * libpackfn and dlopen()s the wheel's libtvm_ffi by path (argv[1]).
 *   interop_join_pending LIBTVM_FFI */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

#include "interop_check.h"

static int seven(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)n;
  *result = pf_any_int(7);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: interop_join_pending LIBTVM_FFI\n");
    return 2;
  }
  pf_object_t* fn = NULL;
  CHECK(pf_function_create(NULL, seven, NULL, &fn) == 0);
  CHECK(pf_global_set("interop.join_pending.both", fn, 0) == 0);
  CHECK(pf_global_set("interop.join_pending.ours", fn, 0) == 0);
  CHECK(pf_tvm_ffi_join() == 0); /* not loaded yet */

  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  int (*set_global)(const pf_byte_array_t*, void*, int);
  int (*get_global)(const pf_byte_array_t*, void**);
  void (*raise_cstr)(const char*, const char*);
  *(void**)&set_global = dlsym(lib, "TVMFFIFunctionSetGlobal");
  *(void**)&get_global = dlsym(lib, "TVMFFIFunctionGetGlobal");
  *(void**)&raise_cstr = dlsym(lib, "TVMFFIErrorSetRaisedFromCStr");
  CHECK(set_global && get_global && raise_cstr);
  if (failures)
    return 1;
  /* TVM-FFI holds one of packfn's names (its own function), and an error is pending in its
   * slot in this thread when packfn joins */
  pf_object_t* theirs = NULL;
  CHECK(pf_function_create(NULL, seven, NULL, &theirs) == 0);
  pf_byte_array_t both = {"interop.join_pending.both", 25};
  CHECK(set_global(&both, theirs, 0) == 0);
  raise_cstr("KeyError", "pending in TVM-FFI's slot at the join");

  CHECK(pf_tvm_ffi_join() == 1);
  pf_object_t* err = pf_error_take();
  CHECK(err && strcmp(pf_error_kind(err), "KeyError") == 0 &&
        strcmp(pf_error_message(err), "pending in TVM-FFI's slot at the join") == 0);
  CHECK(!err || !pf_error_cause(err)); /* the refusal is not chained to it either */
  pf_object_release(err);
  CHECK(pf_error_peek() == NULL);

  /* the join still did its work: TVM-FFI kept its function under the shared name, and got
   * packfn's other one */
  void* got = NULL;
  CHECK(get_global(&both, &got) == 0 && got == theirs);
  pf_object_release((pf_object_t*)got);
  pf_byte_array_t ours = {"interop.join_pending.ours", 25};
  got = NULL;
  CHECK(get_global(&ours, &got) == 0 && got == fn);
  pf_object_release((pf_object_t*)got);

  CHECK(pf_global_remove("interop.join_pending.both") == 0);
  CHECK(pf_global_remove("interop.join_pending.ours") == 0);
  pf_object_release(theirs);
  pf_object_release(fn);
  return failures != 0;
}
