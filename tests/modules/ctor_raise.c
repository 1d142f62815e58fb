/* A library for test_module whose constructor raises after a PF_REGISTER_GLOBAL registration:
 * every load of it must be refused, and its globals removed. CTOR_SHARED: the error raised is one
 * the library keeps; DTOR_CLEAR: a destructor clears an error of its own. */
#include "packfn/packfn.h"

#include "one.h"
PF_REGISTER_GLOBAL("test.module.ctor_raise", one);

#if defined(CTOR_SHARED)
/* the constructor raises an error object it keeps (shared): it must not change */
static pf_object_t* cached;
__attribute__((constructor(200))) static void init(void) {
  if (pf_error_create(PF_ERR_VALUE, "ctor_shared: the cached error", NULL, &cached) == 0)
    (void)pf_error_raise(cached);
}
__attribute__((destructor)) static void fini_shared(void) {
  pf_object_release(cached);
}
#else
/* before raising, one more function registered under two names: the table's second reference
 * is no holder outside (counted as one, the refused library stayed mapped and its next load was
 * accepted without its constructors: review) */
__attribute__((constructor(200))) static void init(void) {
  pf_object_t* fn = NULL;
  if (pf_function_create_direct(one, &fn) == 0) {
    (void)pf_global_set("test.module.ctor_raise.twice", fn, 0);
    (void)pf_global_set("test.module.ctor_raise.alias", fn, 0);
    pf_object_release(fn);
  }
  PF_ERROR_SET(PF_ERR_RUNTIME, "ctor_raise: cannot initialise the device");
}
#endif

#if defined(DTOR_CLEAR)
/* the destructor meets an error of its own and clears it: the refusal must stay */
__attribute__((destructor)) static void fini(void) {
  (void)pf_global_remove("test.module.dtor_clear.never_registered");
  pf_error_clear();
}
#endif
