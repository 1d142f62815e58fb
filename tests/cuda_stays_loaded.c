/* libpackfn_cuda is never unmapped once loaded: every tensor it allocated keeps its free hook,
 * and a tensor released after a dlclose of the library called unmapped code (review; shown
 * with a host-only stand-in for the CUDA runtime, as this needs no GPU). Loads the library by
 * the path given, closes it, and checks that it is still there.
 *   cuda_stays_loaded LIBPACKFN_CUDA_PATH */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cuda_stays_loaded LIBPACKFN_CUDA_PATH\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  if (dlclose(lib) != 0) {
    fprintf(stderr, "FAIL: dlclose: %s\n", dlerror());
    return 1;
  }
  void* again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  if (!again) {
    fprintf(stderr, "FAIL: %s was unmapped by dlclose (it must be linked -z nodelete)\n", argv[1]);
    return 1;
  }
  dlclose(again);
  return 0;
}
