/* A library for test_module with a hand-made __packfn_abi, built once per variant from compile
 * definitions: another major, a newer minor, a bad magic, a stamp too small, no stamp, a global
 * registration that fails at load, a function handed to the host before the load is refused
 * (and its name removed again, or given another function, before the refusal), metadata
 * of another layout (beside another major); also linked with a SysV (DT_HASH) symbol table. */
#define PF_NO_ABI_STAMP
#include "packfn/packfn.h"

#ifndef STAMP_MAGIC
#define STAMP_MAGIC PF_ABI_MAGIC
#endif
#ifndef STAMP_MAJOR
#define STAMP_MAJOR PF_ABI_VERSION_MAJOR
#endif
#ifndef STAMP_MINOR
#define STAMP_MINOR PF_ABI_VERSION_MINOR
#endif

/* weak like the header's own stamp: ASan leaves weak globals uninstrumented, so their symbol
 * keeps its true size and no redzone registration can bind to another object's stamp */
#if defined(STAMP_TOO_SMALL)
__attribute__((weak, visibility("default"))) const uint32_t __packfn_abi = STAMP_MAGIC;
#elif !defined(NO_STAMP)
__attribute__((weak, visibility("default"))) const pf_abi_stamp_t __packfn_abi = {
    STAMP_MAGIC, STAMP_MAJOR, STAMP_MINOR, (uint32_t)sizeof(pf_abi_stamp_t)};
#endif

#include "one.h"

#ifdef OTHER_META
/* metadata as another ABI major might lay it out (here: another magic), read by this runtime
 * as malformed (weak, as the stamp above) */
__attribute__((weak, visibility("default")))
const pf_export_meta_t __packfn_meta_one = {0x12345678u, 1, "one() -> int", NULL, NULL, NULL};
#endif

#ifdef REGISTER_NAME
PF_REGISTER_GLOBAL(REGISTER_NAME, one);
#endif

#ifdef GRAB_NAME
/* Registers `one` under GRAB_NAME and hands it to the host's "test.module.grab", which keeps a
 * reference, as another thread might look it up between this constructor and the refusal of
 * the library (it has no stamp). */
__attribute__((constructor)) static void grab(void) {
  pf_object_t* fn = NULL;
  if (pf_function_create_direct(one, &fn) != 0)
    return;
  if (pf_global_set(GRAB_NAME, fn, 0) == 0) {
    pf_any_t arg = pf_any_object(fn);
    pf_any_t r = pf_any_none();
    if (pf_global_call("test.module.grab", &arg, 1, &r) == 0)
      pf_any_release(&r);
#ifdef GRAB_THEN_REMOVE
    /* the name goes before the refusal (another thread's pf_global_remove or override might
     * take it meanwhile): the host's reference is still one into this library */
    if (pf_global_remove(GRAB_NAME) != 0)
      pf_error_clear();
#endif
#ifdef GRAB_THEN_OVERRIDE
    /* the name is given the host's "test.module.global" before the refusal, as another
     * thread's override might: the host's reference is still one into this library */
    pf_object_t* theirs = NULL;
    if (pf_global_get("test.module.global", &theirs) != 0 || !theirs ||
        pf_global_set(GRAB_NAME, theirs, 1) != 0)
      pf_error_clear();
    pf_object_release(theirs);
#endif
  }
  pf_object_release(fn);
}
#endif
