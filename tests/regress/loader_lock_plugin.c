/* The library regress_loader_lock loads: its constructor, which runs under the dynamic loader's
 * lock, makes its first packfn call of a kind chosen by PF_LOADER_LOCK_MODE, after a pause that
 * lets the program's worker thread start the same kind of call first. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "packfn/packfn.h"

static int plugin_fn(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(7);
  return 0;
}

__attribute__((constructor)) static void plugin_init(void) {
  const char* mode = getenv("PF_LOADER_LOCK_MODE");
  /* the worker's call starts meanwhile (it waits 100 ms) */
  nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
  if (mode && strcmp(mode, "list") == 0) {
    pf_object_t* list;
    if (pf_list_create(&list) == 0) {
      pf_any_t v = pf_any_int(1);
      if (pf_list_append(list, &v) != 0)
        pf_error_clear();
      pf_object_release(list);
    }
  } else if (mode && strcmp(mode, "raise") == 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "raised in a constructor");
    (void)pf_error_backtrace(pf_error_peek()); /* names the frames (PACKFN_BACKTRACE=1) */
    pf_error_clear();
  } else {
    pf_object_t* fn;
    if (pf_function_create_direct(plugin_fn, &fn) == 0) {
      if (pf_global_set("regress.loader_lock", fn, 1) != 0)
        pf_error_clear();
      pf_object_release(fn);
    }
  }
}
