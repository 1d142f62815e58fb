/* packfn base definitions every public header builds on: symbol visibility, branch hints,
 * C/C++ linkage guards and the inline-definition macro. Compiles as C11, C++17 and CUDA. */
#ifndef PACKFN_CONFIG_H_
#define PACKFN_CONFIG_H_

/* Symbol visibility for the packfn libraries. */
#if defined(__GNUC__)
#define PF_API __attribute__((visibility("default")))
#else
#define PF_API
#endif

/* Branch hints: the condition's value, telling the compiler which way it usually goes. */
#if defined(__GNUC__)
#define PF_LIKELY(x)   __builtin_expect(!!(x), 1)
#define PF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PF_LIKELY(x)   (x)
#define PF_UNLIKELY(x) (x)
#endif

/* Wrap declarations that must keep C linkage when the header is read by a C++ compiler. */
#ifdef __cplusplus
#define PF_EXTERN_C_BEGIN extern "C" {
#define PF_EXTERN_C_END   }
#else
#define PF_EXTERN_C_BEGIN
#define PF_EXTERN_C_END
#endif

/* Marks a function of the public API defined in a header. It is `static inline` for every
 * includer, so calls compile inline; libpackfn also exports each one as an ordinary symbol
 * (src/inline.c includes the headers with PF_INLINE_EXPORT defined, turning these definitions
 * into exported external ones), so ctypes, cffi and other languages' FFIs can bind them. */
#if defined(PF_INLINE_EXPORT)
#define PF_INLINE PF_API
#else
#define PF_INLINE static inline
#endif

/* Compile-time assertion usable at file scope in C and C++. */
#if defined(__cplusplus)
#define PF__STATIC_ASSERT static_assert
#else
#define PF__STATIC_ASSERT _Static_assert
#endif

/* Token pasting after expansion (PF__CAT(slot_, __LINE__)). */
#define PF__CAT2(a, b) a##b
#define PF__CAT(a, b)  PF__CAT2(a, b)

/* A braced initialiser as an expression of type T: a compound literal in C, a temporary in
 * C++ (which has no compound literals): PF__LITERAL(DLDataType){2, 32, 1}. */
#if defined(__cplusplus)
#define PF__LITERAL(T) T
#else
#define PF__LITERAL(T) (T)
#endif

/* Casts and the null pointer in header code: C++'s named casts and nullptr under C++ (silent
 * under -Wold-style-cast and -Wzero-as-null-pointer-constant), the C cast and NULL in C. */
#if defined(__cplusplus)
#define PF__CAST(T, x)             static_cast<T>(x)
#define PF__REINTERPRET_CAST(T, x) reinterpret_cast<T>(x)
#define PF__NULL                   nullptr
#else
#define PF__CAST(T, x)             ((T)(x))
#define PF__REINTERPRET_CAST(T, x) ((T)(x))
#define PF__NULL                   NULL
#endif

#endif /* PACKFN_CONFIG_H_ */
