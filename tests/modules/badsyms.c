/* A library for test_module whose __packfn_abi or __packfn_meta_one symbol is not what its
 * name promises, one variant per compile definition: an absolute symbol (SHN_ABS, its value no
 * address in the library) of object type as the stamp (STAMP_ABS) or as metadata (META_ABS),
 * the stamp as a function (STAMP_FUNC) or a thread-local variable (STAMP_TLS), metadata of 4
 * bytes (META_SMALL), an export that is an absolute function symbol (FUNC_ABS: dlsym gave its
 * raw value, and a call jumped there). Each must be refused with a ValueError saying what was
 * found. */
#if defined(STAMP_ABS) || defined(STAMP_FUNC) || defined(STAMP_TLS)
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
#endif
