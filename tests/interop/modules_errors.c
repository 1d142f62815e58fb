/* Errors a TVM-FFI-built library raises, taken through packfn (issue 11, deliverables 1 and 5):
 * the library raises into TVM-FFI's slot, which is packfn's once joined (pf_module_load joins
 * after its dlopen). */
#include <string.h>

#include "packfn/packfn.h"

#include "interop_check.h"

int main(void) {
  pf_object_t* m = NULL;
  CHECK(pf_module_load(PF_TVM_LIB, &m) == 0);
  if (!m)
    return 1;
  /* TVM_FFI_THROW(ValueError) in the library */
  pf_any_t arg = pf_any_float(-1.0), r;
  CHECK(pf_module_call(m, "halve", &arg, 1, &r) == -1);
  pf_object_t* err = pf_error_take();
  CHECK(err && strcmp(pf_error_kind(err), "ValueError") == 0 &&
        strstr(pf_error_message(err), "halve: negative input") != NULL);
  pf_object_release(err);
  /* TVM-FFI's own argument check: a str where an int is declared */
  pf_any_t args[2] = {pf_any_cstr("x"), pf_any_int(1)};
  CHECK(pf_module_call(m, "add_ints", args, 2, &r) == -1);
  err = pf_error_take();
  CHECK(err && strcmp(pf_error_kind(err), "TypeError") == 0);
  pf_object_release(err);
  CHECK(pf_error_take() == NULL); /* nothing left in either slot */
  pf_object_release(m);
  return failures != 0;
}
