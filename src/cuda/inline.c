/* The exported copies of packfn/cuda.h's inline functions (PF_CUDA_INLINE), for languages
 * that bind C by symbol; every other file keeps them static inline. */
#define PF_CUDA_INLINE_EXPORT 1

#include "packfn/cuda.h"
