/* tools/npy.h: forwards to the installed header packfn/npy.h while the command line sources in
 * tools/ still include "npy.h"; removed once they include "packfn/npy.h". */
#ifndef PACKFN_TOOLS_NPY_H_
#define PACKFN_TOOLS_NPY_H_
#include "packfn/npy.h"
#endif /* PACKFN_TOOLS_NPY_H_ */
