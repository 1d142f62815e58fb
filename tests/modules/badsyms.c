/* A library for test_module whose __packfn_abi or __packfn_meta_one symbol is not what its
 * name promises, one variant per compile definition: an absolute symbol (SHN_ABS, its value no
 * address in the library) of object type as the stamp (STAMP_ABS) or as metadata (META_ABS),
 * the stamp as a function (STAMP_FUNC) or a thread-local variable (STAMP_TLS), metadata of 4
 * bytes (META_SMALL), an export that is an absolute function symbol (FUNC_ABS: dlsym gave its
 * raw value, and a call jumped there), a stamp of no type (STAMP_NOTYPE), an indirect function
 * (STAMP_IFUNC), or past the library's segments (STAMP_OUTSIDE), metadata at an address not
 * aligned for it (META_UNALIGNED) or past the segments (META_OUTSIDE). Each must be refused with
 * a ValueError saying what was found. IFUNC_EXPORT is no bad library: its export ifn (returns 7)
 * is an indirect function, which the loader accepts as a function. */
#if defined(STAMP_ABS) || defined(STAMP_FUNC) || defined(STAMP_TLS) || defined(STAMP_NOTYPE) ||    \
    defined(STAMP_IFUNC) || defined(STAMP_OUTSIDE)
#define PF_NO_ABI_STAMP
#endif
#include "packfn/packfn.h"

#include "one.h"

#if defined(STAMP_ABS)
__asm__(".globl __packfn_abi\n .type __packfn_abi,@object\n .size __packfn_abi,16\n"
        " .set __packfn_abi, 0x10\n");
#elif defined(META_ABS)
__asm__(".globl __packfn_meta_one\n .type __packfn_meta_one,@object\n"
        " .size __packfn_meta_one,48\n .set __packfn_meta_one, 0x20\n");
#elif defined(STAMP_FUNC)
__attribute__((visibility("default"))) int __packfn_abi(void) {
  return 0;
}
#elif defined(STAMP_TLS)
__attribute__((visibility("default"))) __thread pf_abi_stamp_t __packfn_abi = PF_ABI_STAMP_INIT;
#elif defined(FUNC_ABS)
__asm__(".globl __packfn_boom\n .type __packfn_boom,@function\n .set __packfn_boom, 0x40\n");
#elif defined(META_SMALL)
__attribute__((visibility("default"))) const uint32_t __packfn_meta_one = PF_EXPORT_META_MAGIC;
#elif defined(STAMP_NOTYPE)
__asm__(".data\n .balign 8\n .globl __packfn_abi\n .size __packfn_abi,16\n"
        "__packfn_abi:\n .zero 16\n .previous\n");
#elif defined(STAMP_IFUNC)
static void abi_impl(void) {}
__attribute__((used)) static void (*resolve_abi(void))(void) {
  return abi_impl;
}
__attribute__((visibility("default"), ifunc("resolve_abi"))) void __packfn_abi(void);
#elif defined(STAMP_OUTSIDE)
__asm__(".data\n .balign 8\n pf_anchor_stamp:\n .zero 8\n .globl __packfn_abi\n"
        " .type __packfn_abi,@object\n .size __packfn_abi,16\n"
        " .set __packfn_abi, pf_anchor_stamp + 0x10000000\n .previous\n");
#elif defined(META_UNALIGNED)
__asm__(".data\n .balign 8\n .byte 0\n .globl __packfn_meta_one\n"
        " .type __packfn_meta_one,@object\n .size __packfn_meta_one,40\n"
        "__packfn_meta_one:\n .zero 40\n .previous\n");
#elif defined(META_OUTSIDE)
__asm__(".data\n .balign 8\n pf_anchor_meta:\n .zero 8\n .globl __packfn_meta_one\n"
        " .type __packfn_meta_one,@object\n .size __packfn_meta_one,40\n"
        " .set __packfn_meta_one, pf_anchor_meta + 0x10000000\n .previous\n");
#elif defined(IFUNC_EXPORT)
static int ifn_impl(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(7);
  return 0;
}
typedef int (*ifn_t)(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result);
__attribute__((used)) static ifn_t resolve_ifn(void) {
  return ifn_impl;
}
__attribute__((visibility("default"), ifunc("resolve_ifn"))) int
__packfn_ifn(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result);
#endif
