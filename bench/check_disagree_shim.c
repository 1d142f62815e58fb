/* check_disagree_shim.c: LD_PRELOAD'ed by check_bench_figures.cmake and
   check_scaling_figures.cmake. TVM-FFI's string constructor, given string_5's 5 bytes, makes a
   string of 4, and its global lookup does not find bench_scaling's "bench.scale.5" (the hot
   name of its 10-name table): those rows then return other checksums than packfn's, a
   disagreement packfn_bench and bench_scaling must report without figures. */
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

/* exported, as above: "bench.scale.5" is not found (0 and *out NULL, as for an absent name) */
__attribute__((visibility("default"))) int TVMFFIFunctionGetGlobal(const byte_array_t* name,
                                                                   void** out) {
  int (*real)(const byte_array_t*, void**);
  *(void**)&real = dlsym(RTLD_NEXT, "TVMFFIFunctionGetGlobal");
  if (real == NULL)
    return -1;
  if (name->size == 13 && memcmp(name->data, "bench.scale.5", 13) == 0) {
    *out = NULL;
    return 0;
  }
  return real(name, out);
}
