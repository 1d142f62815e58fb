/* A library for test_module whose constructor tries to register a name the host holds, and
 * handles the failure by clearing its error: a well-behaved library, to be accepted whatever
 * error the host has pending (the clear removed the host's error, and the load was refused). */
#include "packfn/packfn.h"

#include "one.h"

__attribute__((constructor)) static void init(void) {
  pf_object_t* fn;
  if (pf_function_create_direct(one, &fn) != 0) {
    pf_error_clear();
    return;
  }
  if (pf_global_set("test.module.global", fn, 0) != 0) /* taken by test_module: handled */
    pf_error_clear();
  pf_object_release(fn);
}
