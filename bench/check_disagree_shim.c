/* check_disagree_shim.c: LD_PRELOAD'ed by check_bench_figures.cmake. TVM-FFI's string
   constructor, given string_5's 5 bytes, makes a string of 4: its string_5 row then returns
   another checksum than packfn's, a disagreement packfn_bench must report without figures. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

typedef struct byte_array {
  const char* data;
  size_t size;
} byte_array_t;

/* exported: the project builds with hidden visibility */
__attribute__((visibility("default"))) int TVMFFIStringFromByteArray(const byte_array_t* input,
                                                                     void* out) {
  int (*real)(const byte_array_t*, void*);
  *(void**)&real = dlsym(RTLD_NEXT, "TVMFFIStringFromByteArray");
  if (real == NULL)
    return -1;
  byte_array_t b = *input;
  if (b.size == 5 && memcmp(b.data, "hello", 5) == 0)
    b.size = 4;
  return real(&b, out);
}
