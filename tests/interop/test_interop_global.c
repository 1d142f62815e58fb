/* One global function table across packfn and TVM-FFI in one process (issue 11, deliverable
 * 6): a function registered before packfn joins is pushed into TVM-FFI's table at the join,
 * pf_global_set registers in both, a lookup packfn misses finds TVM-FFI's function, a name
 * either table holds is taken for pf_global_set without allow_override, and pf_global_remove
 * removes the name from both. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"

#include "interop_check.h"

/* c_api.h's functions, declared with packfn's names for the same ABI types */
int TVMFFIFunctionGetGlobal(const pf_byte_array_t* name, void** out);
int TVMFFIFunctionSetGlobal(const pf_byte_array_t* name, void* f, int allow_override);
int TVMFFIFunctionCreate(void* self, pf_safe_call_t safe_call, void (*deleter)(void* self),
                         void** out);
void TVMFFIErrorMoveFromRaised(void** result);

/* TVM-FFI's function of that name (new reference) or NULL */
static pf_object_t* tvm_get(const char* name) {
  pf_byte_array_t key = {name, strlen(name)};
  void* f = NULL;
  if (TVMFFIFunctionGetGlobal(&key, &f) != 0)
    return NULL;
  return f;
}

static int times(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)num_args;
  *result = pf_any_int(args[0].v_int64 * (int64_t)(intptr_t)self);
  return 0;
}

static pf_object_t* packfn_times(intptr_t k) {
  pf_object_t* fn = NULL;
  CHECK(pf_function_create((void*)k, times, NULL, &fn) == 0);
  return fn;
}

static int64_t call1(pf_object_t* fn, int64_t x) {
  pf_any_t arg = pf_any_int(x), r = pf_any_none();
  if (!fn || pf_function_call(fn, &arg, 1, &r) != 0)
    return -1;
  return r.v_int64;
}

int main(void) {
  /* before the join: packfn keeps its function to itself */
  setenv(PF_NO_TVM_FFI_ENV, "1", 1);
  pf_object_t* early = packfn_times(2);
  CHECK(pf_global_set("gm.early", early, 0) == 0);
  CHECK(pf_tvm_ffi_joined() == 0);
  CHECK(tvm_get("gm.early") == NULL);
  unsetenv(PF_NO_TVM_FFI_ENV);

  /* the join pushes it into TVM-FFI's table: the same object */
  CHECK(pf_tvm_ffi_join() == 1);
  pf_object_t* seen = tvm_get("gm.early");
  CHECK(seen == early);
  pf_object_release(seen);

  /* after the join, pf_global_set registers in both */
  pf_object_t* late = packfn_times(3);
  CHECK(pf_global_set("gm.late", late, 0) == 0);
  seen = tvm_get("gm.late");
  CHECK(seen == late && call1(seen, 5) == 15);
  pf_object_release(seen);

  /* TVM-FFI's function is found by pf_global_get and called by packfn */
  void* theirs = NULL;
  CHECK(TVMFFIFunctionCreate((void*)(intptr_t)7, times, NULL, &theirs) == 0);
  pf_byte_array_t key = {"gm.theirs", 9};
  CHECK(TVMFFIFunctionSetGlobal(&key, theirs, 0) == 0);
  pf_object_t* found = NULL;
  CHECK(pf_global_get("gm.theirs", &found) == 0 && found == theirs);
  CHECK(call1(found, 6) == 42);
  pf_object_release(found);
  CHECK(pf_global_get_bytes("gm.theirs_and_more", 9, &found) == 0 && found == theirs);
  pf_object_release(found);
  pf_any_t arg = pf_any_int(2), r = pf_any_none();
  CHECK(pf_global_call("gm.theirs", &arg, 1, &r) == 0 && r.v_int64 == 14);
  CHECK(pf_global_get("gm.nowhere", &found) == 0 && found == NULL);
  /* TVM-FFI's own globals too */
  CHECK(pf_global_get("ffi.FunctionRemoveGlobal", &found) == 0 && found != NULL);
  pf_object_release(found);

  /* a name TVM-FFI holds is taken; allow_override replaces it in both tables */
  pf_object_t* mine = packfn_times(10);
  CHECK(pf_global_set("gm.theirs", mine, 0) == -1);
  pf_object_t* err = pf_error_take();
  CHECK(err && strcmp(pf_error_kind(err), "ValueError") == 0);
  pf_object_release(err);
  CHECK(pf_global_set("gm.theirs", mine, 1) == 0);
  seen = tvm_get("gm.theirs");
  CHECK(seen == mine);
  pf_object_release(seen);
  CHECK(pf_global_get("gm.theirs", &found) == 0 && found == mine);
  pf_object_release(found);
  pf_object_release((pf_object_t*)theirs);

  /* removal removes from both; a name only TVM-FFI holds is removed from TVM-FFI's */
  CHECK(pf_global_remove("gm.theirs") == 0);
  CHECK(tvm_get("gm.theirs") == NULL);
  CHECK(pf_global_get("gm.theirs", &found) == 0 && found == NULL);
  CHECK(TVMFFIFunctionCreate((void*)(intptr_t)7, times, NULL, &theirs) == 0);
  key = (pf_byte_array_t){"gm.only_theirs", 14};
  CHECK(TVMFFIFunctionSetGlobal(&key, theirs, 0) == 0);
  pf_object_release((pf_object_t*)theirs);
  CHECK(pf_global_remove("gm.only_theirs") == 0);
  CHECK(tvm_get("gm.only_theirs") == NULL);
  CHECK(pf_global_remove("gm.only_theirs") == -1);
  err = pf_error_take();
  CHECK(err && strcmp(pf_error_kind(err), "KeyError") == 0);
  pf_object_release(err);

  /* pf_global_list lists packfn's own table only */
  char** names = NULL;
  size_t count = 0;
  CHECK(pf_global_list(&names, &count) == 0);
  for (size_t i = 0; names && i < count; ++i)
    CHECK(strncmp(names[i], "ffi.", 4) != 0);
  pf_global_list_free(names);

  CHECK(pf_global_remove("gm.early") == 0 && pf_global_remove("gm.late") == 0);
  CHECK(tvm_get("gm.early") == NULL && tvm_get("gm.late") == NULL);
  pf_object_release(early);
  pf_object_release(late);
  pf_object_release(mine);
  if (failures)
    fprintf(stderr, "test_interop_global: %d checks failed\n", failures);
  return failures != 0;
}
