/* The README's example: create a typed function, register it globally, call it by name, and
 * handle the error a bad call raises. Built as packfn_example and run as a test. */
#include <stdio.h>

#include "packfn/packfn.h"

static int add(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_int(args[0].i + args[1].i);
  return 0;
}

int main(void) {
  pf_signature_t sig = PF_SIGNATURE("add", PF_PARAM_INT, {"a", PF_PARAM_INT}, {"b", PF_PARAM_INT});
  pf_object_t* fn;
  if (pf_function_create_typed(&sig, add, NULL, NULL, &fn) != 0 ||
      pf_global_set("demo.add", fn, 0) != 0)
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
  pf_global_remove("demo.add");
  return 0;
}
