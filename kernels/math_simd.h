/* kernels/math_simd.h: the inner loops of the CPU kernels, one table of them per instruction
 * set, and the choice among the tables (run-time dispatch). Private to kernels/math_cpu*.c. */
#ifndef PACKFN_KERNELS_MATH_SIMD_H
#define PACKFN_KERNELS_MATH_SIMD_H

#include <stdint.h>

/* Every loop works on contiguous arrays of n >= 0 elements; an output may equal an input where
 * the kernel it serves allows that (kmath.h), never overlap it partially. */
/* Pages read at once by scale_pages, and their size. */
#define PF__K_PAGE_RUNS  4
#define PF__K_PAGE_BYTES 4096

typedef struct {
  const char* name; /* "sse2", "avx2", "avx512" or "base" (not x86) */
  /* sum_i a[i] * b[i] in float lanes of at most 16 terms each, folded into double lanes; a
   * and b may be the same array. The float32 sum may have overflowed or lost bits below
   * FLT_MIN: the caller checks the total and falls back on double products. */
  double (*dot_f32)(const float* a, const float* b, int64_t n);
  /* The same in double lanes, lane totals added with Neumaier's compensation. */
  double (*dot_f64)(const double* a, const double* b, int64_t n);
  /* out = x * s. stream: non-temporal stores (out overlaps no input); next, when not NULL, is
   * prefetched at the same offsets as x is read. */
  void (*scale_f32)(const float* x, float* out, int64_t n, float s, const float* next, int stream);
  void (*scale_f64)(const double* x, double* out, int64_t n, double s, const double* next,
                    int stream);
  /* scale with non-temporal stores (out overlaps no input), x read PF__K_PAGE_RUNS pages of
   * PF__K_PAGE_BYTES at a time, one cache line of each in turn, rather than front to back: the
   * same results. An Intel core's L2 prefetcher follows a stream within its page, so reading
   * several pages at once keeps more of DRAM's latency hidden from one core; on AMD Zen the
   * plain order is faster (math_cpu.c: pf__k_stream_order_set). */
  void (*scale_pages_f32)(const float* x, float* out, int64_t n, float s);
  void (*scale_pages_f64)(const double* x, double* out, int64_t n, double s);
  /* out = x * s from the last element to the first (the same results): a row just summed is
   * scaled starting with the part its sum read last, which is still in L1. */
  void (*scale_back_f32)(const float* x, float* out, int64_t n, float s);
  void (*scale_back_f64)(const double* x, double* out, int64_t n, double s);
  /* scale (without stream or prefetch) that also returns dot(next, next, n), bit for bit as
   * dot_f32 / dot_f64 would, next being another array of n elements. */
  double (*scale_dot_f32)(const float* x, float* out, int64_t n, float s, const float* next);
  double (*scale_dot_f64)(const double* x, double* out, int64_t n, double s, const double* next);
  /* out = a * p - b * q. stream: non-temporal stores (out overlaps neither p nor q), every
   * element computed by the vector expression where n holds a whole vector. */
  void (*axpby_f32)(const float* p, const float* q, float* out, int64_t n, float a, float b,
                    int stream);
  void (*axpby_f64)(const double* p, const double* q, double* out, int64_t n, double a, double b,
                    int stream);
  /* out = x + s; a = b + c. stream: non-temporal stores (the output overlaps no input). */
  void (*add_scalar_f32)(const float* x, float* out, int64_t n, float s, int stream);
  void (*add_scalar_f64)(const double* x, double* out, int64_t n, double s, int stream);
  void (*add_f32)(const float* b, const float* c, float* a, int64_t n, int stream);
  void (*add_f64)(const double* b, const double* c, double* a, int64_t n, int stream);
  /* Kepler's equation over n elements (kmath.h's pf__k_kepler_f32/_f64), solved in double
   * lanes with the level's own sin and cos polynomials; pf__k_kepler_solve takes the elements
   * the lanes do not (see math_simd_body.h). Each result depends on its own element only. */
  void (*kepler_f32)(const float* m, const float* e, float* s, float* c, int64_t n);
  void (*kepler_f64)(const double* m, const double* e, double* s, double* c, int64_t n);
} pf__k_simd_t;

/* The tables: pf__k_simd_base is built for the compiler's baseline target (SSE2 on x86-64);
 * the others exist on x86 only and must be used only where the CPU has the instructions. */
extern const pf__k_simd_t pf__k_simd_base;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PF__K_HAVE_X86_LEVELS 1
extern const pf__k_simd_t pf__k_simd_avx2;
extern const pf__k_simd_t pf__k_simd_avx512;
#else
#define PF__K_HAVE_X86_LEVELS 0
#endif

#endif /* PACKFN_KERNELS_MATH_SIMD_H */
