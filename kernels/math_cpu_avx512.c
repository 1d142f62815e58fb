/* kernels/math_cpu_avx512.c: the inner loops for AVX-512 (F, VL, BW, DQ, with AVX2 and FMA;
 * compiled with those flags and 512-bit vectors preferred; run only where the CPU has them). */
#define PF__K_VBYTES 64
#define PF__K_NACC   4
#define PF__K_TABLE  pf__k_simd_avx512
#define PF__K_NAME   "avx512"
#include "kernels/math_simd_body.h"
