/* packfn: a packed-function runtime in C11 following the TVM-FFI ABI.
 * Include this one header; it pulls in every public layer. */
#ifndef PACKFN_PACKFN_H_
#define PACKFN_PACKFN_H_

#include "packfn/abi.h"
#include "packfn/object.h"
#include "packfn/any.h"
#include "packfn/error.h"
#include "packfn/function.h"
#include "packfn/container.h"
#include "packfn/module.h"
#include "packfn/tensor.h"
#include "packfn/cuda.h" /* declarations only: link libpackfn_cuda to use them */

#endif /* PACKFN_PACKFN_H_ */
