/* A library for regress_refused_static: registered with PF_REGISTER_GLOBAL (a static slot, which
 * keeps a reference of its own until the library's destructor drops it), linked against a
 * dependency that registers a global of its own (refused_dep.c), and stamped with another ABI
 * major, so that pf_module_load refuses it. */
#define PF_NO_ABI_STAMP
#include "packfn/packfn.h"

__attribute__((weak, visibility("default"))) const pf_abi_stamp_t __packfn_abi = {
    PF_ABI_MAGIC, PF_ABI_VERSION_MAJOR + 7, 0, (uint32_t)sizeof(pf_abi_stamp_t)};

int regress_refused_dep_value(void); /* refused_dep.c: makes the dependency a real one */

static int refused_static_fn(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(regress_refused_dep_value());
  return 0;
}

PF_REGISTER_GLOBAL("regress.refused_static", refused_static_fn);
