/* Private: what the module layer needs from packfn's function objects. */
#ifndef PACKFN_SRC_FUNCTION_PRIVATE_H_
#define PACKFN_SRC_FUNCTION_PRIVATE_H_

#include "packfn/function.h"

/* Makes `fn` (a packfn function) hold a reference to `owner` (retained) until it dies, after
 * its deleter ran: used so a module's code outlives its functions. -1 with TypeError. */
int pf__function_set_keepalive(pf_object_t* fn, pf_object_t* owner);

#endif /* PACKFN_SRC_FUNCTION_PRIVATE_H_ */
