/* Regression test, issue 10 defect 7: a function that returns -1 without raising an error
 * breaks the contract; the runtime should turn that into a clear error naming the function.
 * Expected after the fix: pf_global_call of such a function returns -1 with an error raised
 * whose message names "regress.silent". Today: -1 with no error raised at all. */
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

static int silent(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  return -1; /* no pf_error_set: a contract violation */
}

int main(void) {
  pf_object_t* fn;
  if (pf_function_create_direct(silent, &fn) != 0 || pf_global_set("regress.silent", fn, 1) != 0)
    return 2;
  pf_object_release(fn);
  int bad = 0;
  pf_any_t res = pf_any_none();
  int rc = pf_global_call("regress.silent", NULL, 0, &res);
  pf_object_t* err = pf_error_take();
  if (rc != -1 || !err || !strstr(pf_error_message(err), "regress.silent")) {
    fprintf(stderr, "FAIL: pf_global_call of a silent failure: rc %d, error %s%s%s\n", rc,
            err ? pf_error_kind(err) : "(none raised)", err ? ": " : "",
            err ? pf_error_message(err) : "");
    bad = 1;
  } else {
    printf("ok: %s: %s\n", pf_error_kind(err), pf_error_message(err));
  }
  pf_object_release(err);
  pf_global_remove("regress.silent");
  return bad;
}
