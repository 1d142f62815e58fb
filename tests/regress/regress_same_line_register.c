/* Two registration macros expanded at the same line number of one translation unit, as two
 * files registering on the same line are when CMake's UNITY_BUILD compiles them as one: their
 * slot, constructor and destructor were named after the line only, and the unit did not
 * compile ("redefinition of 'pf__reg_ctor_3'"; review). Now named after __COUNTER__: this file
 * compiles, and both functions are registered when it loads. (#line stands in for the second
 * file's line numbers.) */
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

PF_TYPED_DEFINE(same_line_a, INT, (INT, x)) {
  *result = pf_any_int(x + 1);
  return 0;
}
PF_TYPED_DEFINE(same_line_b, INT, (INT, x)) {
  *result = pf_any_int(x + 2);
  return 0;
}
static int same_line_c(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self, (void)args, (void)num_args;
  *result = pf_any_int(3);
  return 0;
}

#line 1000
PF_TYPED_REGISTER(same_line_a, "regress.same_line.a");
#line 1000
PF_TYPED_REGISTER(same_line_b, "regress.same_line.b");
#line 1000
PF_REGISTER_GLOBAL("regress.same_line.c", same_line_c);
#line 33

static int call(const char* name, int64_t x, int64_t expect) {
  pf_any_t arg = pf_any_int(x), r;
  if (pf_global_call(name, &arg, 1, &r) != 0 || r.type_index != PF_TYPE_INT ||
      r.v_int64 != expect) {
    fprintf(stderr, "FAIL: %s(%lld) did not give %lld\n", name, (long long)x, (long long)expect);
    pf_error_clear();
    return 1;
  }
  return 0;
}

int main(void) {
  int bad = call("regress.same_line.a", 1, 2) + call("regress.same_line.b", 1, 3) +
            call("regress.same_line.c", 1, 3);
  if (pf_global_static_failures() != 0) {
    fprintf(stderr, "FAIL: %d static registrations failed\n", pf_global_static_failures());
    bad = 1;
  }
  return bad;
}
