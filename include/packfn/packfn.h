/* packfn: a packed-function runtime in C11 following the TVM-FFI ABI.
 * Include this one header; it pulls in every core layer of libpackfn. The CUDA helpers
 * (packfn/cuda.h, library packfn_cuda) and the kernels (packfn/kernels.h) are included
 * explicitly by the code that uses them. */
#ifndef PACKFN_PACKFN_H_
#define PACKFN_PACKFN_H_

#include "packfn/config.h"
#include "packfn/abi.h"
#include "packfn/object.h"
#include "packfn/any.h"
#include "packfn/error.h"
#include "packfn/function.h"
#include "packfn/typed.h"
#include "packfn/container.h"
#include "packfn/export.h"
#include "packfn/module.h"
#include "packfn/interop.h"
#include "packfn/device.h"
#include "packfn/tensor.h"

#endif /* PACKFN_PACKFN_H_ */
