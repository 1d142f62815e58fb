/* kernels/math_cpu_avx2.c: the inner loops for AVX2 with FMA (compiled with -mavx2 -mfma; run
 * only where the CPU has both). */
#define PF__K_VBYTES 32
#define PF__K_NACC   4
#define PF__K_TABLE  pf__k_simd_avx2
#define PF__K_NAME   "avx2"
#include "kernels/math_simd_body.h"
