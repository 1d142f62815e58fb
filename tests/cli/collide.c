/* collide.c: a library whose second registration at load fails (the name is taken by the
 * first), for `packfn list LIBRARY` and `packfn list`/`info` with the library preloaded: they
 * report the function missing and exit 1. */
#include "packfn/packfn.h"

static int answer(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(42);
  return 0;
}

PF_REGISTER_GLOBAL("cli_test.collide", answer);
PF_REGISTER_GLOBAL("cli_test.collide", answer);
