/* The README's example: define a typed function, register it globally, call it by name, and
 * handle the error a bad call raises. Built as packfn_example and run as a test. */
#include <stdio.h>

#include "packfn/packfn.h"

/* A typed C function: arity and argument types are checked for you. */
PF_TYPED_DEFINE(add, INT, (INT, a), (INT, b)) {
  *result = pf_any_int(a + b);
  return 0;
}

int main(void) {
  pf_object_t* fn;
  if (PF_TYPED_CREATE(add, &fn) != 0 || pf_global_set("demo.add", fn, 0) != 0)
    return 1;
  pf_object_release(fn); /* the table holds its own reference */

  pf_any_t args[2] = {pf_any_int(40), pf_any_int(2)};
  pf_any_t result;
  if (pf_global_call("demo.add", args, 2, &result) != 0)
    return 1;
  printf("demo.add(40, 2) = %lld\n", (long long)result.v_int64);

  args[1] = pf_any_cstr("two"); /* wrong type: the call fails with a TypeError */
  if (pf_global_call("demo.add", args, 2, &result) != 0) {
    pf_object_t* err = pf_error_take();
    printf("%s: %s\n", pf_error_kind(err), pf_error_message(err));
    pf_object_release(err);
  }
  return pf_global_remove("demo.add");
}
