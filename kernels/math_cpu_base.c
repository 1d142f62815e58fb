/* kernels/math_cpu_base.c: the inner loops for the compiler's baseline target (SSE2 on x86-64),
 * the level every CPU can run. */
#define PF__K_VBYTES 16
#define PF__K_NACC   8
#define PF__K_TABLE  pf__k_simd_base
#if defined(__x86_64__)
#define PF__K_NAME "sse2"
#else
#define PF__K_NAME "base"
#endif
#include "kernels/math_simd_body.h"
