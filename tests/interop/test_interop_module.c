/* Modules across packfn and TVM-FFI in one process (issue 11, deliverable 4 and 5): a library
 * built with TVM-FFI's own export macro loads with pf_module_load and is called; TVM-FFI's
 * ffi.Module (from its loader) is read through pf_module_get_function; a packfn module handed
 * to TVM-FFI's module functions is refused with a TypeError, never read as an ffi.Module. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"

#include "interop_check.h"

/* c_api.h's functions, declared with packfn's names for the same ABI types */
int TVMFFIFunctionCall(void* func, pf_any_t* args, int32_t num_args, pf_any_t* result);
void TVMFFIErrorMoveFromRaised(void** result);

static void test_load_tvm_ffi_library(void) {
  pf_object_t* m = NULL;
  CHECK(pf_module_load(PF_TVM_LIB, &m) == 0 && m != NULL);
  if (!m)
    return;
  CHECK(pf_tvm_ffi_joined() == 1);
  CHECK(strcmp(pf_type_name(m->type_index), "packfn.Module") == 0);
  CHECK(strcmp(pf_module_path(m), PF_TVM_LIB) == 0);
  pf_export_info_t* list = NULL;
  size_t count = 0;
  CHECK(pf_module_list(m, &list, &count) == 0 && count == 3);
  if (list && count == 3) {
    CHECK(strcmp(list[0].name, "add_ints") == 0); /* its metadata symbol is not a function */
    CHECK(strcmp(list[1].name, "greet") == 0);
    CHECK(strcmp(list[2].name, "halve") == 0);
  }
  pf_module_list_free(list);

  pf_any_t args[2] = {pf_any_int(40), pf_any_int(2)}, r;
  CHECK(pf_module_call(m, "add_ints", args, 2, &r) == 0 && r.type_index == PF_TYPE_INT &&
        r.v_int64 == 42);
  args[0] = pf_any_cstr("packfn");
  CHECK(pf_module_call(m, "greet", args, 1, &r) == 0);
  const char* text = NULL;
  CHECK(pf_any_as_cstr(&r, &text) == 0 && text && strcmp(text, "hello, packfn") == 0);
  pf_any_release(&r);
  args[0] = pf_any_float(5.0);
  CHECK(pf_module_call(m, "halve", args, 1, &r) == 0 && r.v_float64 == 2.5);

  pf_object_t* fn = (pf_object_t*)1;
  CHECK(pf_module_get_function(m, "_metadata_add_ints", &fn) == 0 && fn == NULL);
  CHECK(pf_module_call(m, "add_int", args, 1, &r) == -1);
  pf_object_t* err = pf_error_take();
  CHECK(err && strcmp(pf_error_kind(err), "KeyError") == 0 &&
        strstr(pf_error_message(err), "did you mean 'add_ints'") != NULL);
  pf_object_release(err);
  pf_object_release(m);
}

/* TVM-FFI's loader gives an ffi.Module (index 73, a C++ object): packfn reads its functions
 * through TVM-FFI's global ffi.ModuleGetFunction. */
static void test_tvm_ffi_module(void) {
  pf_any_t path = pf_any_cstr(PF_TVM_LIB), mod = pf_any_none();
  CHECK(pf_global_call("ffi.ModuleLoadFromFile", &path, 1, &mod) == 0);
  CHECK(mod.type_index == PF_TYPE_MODULE);
  if (mod.type_index != PF_TYPE_MODULE)
    return;
  pf_object_t* fn = NULL;
  CHECK(pf_module_get_function(mod.v_obj, "add_ints", &fn) == 0 && fn != NULL);
  pf_any_t args[2] = {pf_any_int(1), pf_any_int(2)}, r = pf_any_none();
  CHECK(fn && pf_function_call(fn, args, 2, &r) == 0 && r.v_int64 == 3);
  pf_object_release(fn);
  fn = (pf_object_t*)1;
  CHECK(pf_module_get_function(mod.v_obj, "nope", &fn) == 0 && fn == NULL);
  CHECK(pf_module_call(mod.v_obj, "add_ints", args, 2, &r) == 0 && r.v_int64 == 3);
  /* packfn's own readers of a module refuse TVM-FFI's with a TypeError */
  CHECK(pf_module_path(mod.v_obj) == NULL);
  CHECK(pf_module_list(mod.v_obj, &(pf_export_info_t*){NULL}, NULL) == -1);
  pf_object_t* err = pf_error_take();
  CHECK(err && strcmp(pf_error_kind(err), "TypeError") == 0);
  pf_object_release(err);
  pf_any_release(&mod);
}

/* A packfn module handed to TVM-FFI's module functions: a TypeError in TVM-FFI's slot. */
static void test_packfn_module_in_tvm_ffi(void) {
  pf_object_t *m = NULL, *kind = NULL;
  CHECK(pf_module_load(PF_KERNELS_LIB, &m) == 0);
  CHECK(pf_global_get("ffi.ModuleGetKind", &kind) == 0 && kind != NULL);
  if (!m || !kind)
    return;
  pf_any_t arg = pf_any_object(m), r = pf_any_none();
  CHECK(TVMFFIFunctionCall(kind, &arg, 1, &r) == -1);
  void* raised = NULL;
  TVMFFIErrorMoveFromRaised(&raised);
  pf_object_t* err = raised;
  CHECK(err && strcmp(pf_error_kind(err), "TypeError") == 0);
  pf_object_release(err);
  pf_object_release(kind);
  pf_object_release(m);
}

int main(void) {
  test_load_tvm_ffi_library();
  test_tvm_ffi_module();
  test_packfn_module_in_tvm_ffi();
  if (failures)
    fprintf(stderr, "test_interop_module: %d checks failed\n", failures);
  return failures != 0;
}
