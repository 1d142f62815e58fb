/* A module that raises, for regress_backtrace_names: its frame is named from its exported
 * symbol while it is loaded. */
#include "packfn/packfn.h"

__attribute__((noinline, visibility("default"))) void bt_module_raise(void) {
  PF_ERROR_SET(PF_ERR_VALUE, "raised in the module");
  __asm__ volatile(""); /* keeps the call above from being a tail call */
}
