/* A library holding packfn statically, loaded and unloaded 1100 times, makes a stream current
 * on each load (found by review, 2026-11-23): each load's stream table took a thread key its
 * unload never gave back, and after about 1024 cycles the process had no key left
 * (pf_stream_set failed, and so did every pthread_key_create). Usage:
 * regress_stream_key_cycles LIBRARY (pf_regress_static_packfn: the whole archive, exported). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "packfn/device.h"

typedef int (*stream_set_t)(DLDevice device, void* stream, void** prev);
typedef void* (*stream_get_t)(DLDevice device);

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  DLDevice gpu = {kDLCUDA, 0};
  for (int cycle = 1; cycle <= 1100; ++cycle) {
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      fprintf(stderr, "cycle %d: dlopen: %s\n", cycle, dlerror());
      return 1;
    }
    stream_set_t set;
    stream_get_t get;
    *(void**)&set = dlsym(lib, "pf_stream_set");
    *(void**)&get = dlsym(lib, "pf_stream_get");
    if (!set || !get) {
      fprintf(stderr, "cycle %d: the library exports no pf_stream_set/get\n", cycle);
      return 1;
    }
    if (set(gpu, (void*)0x1234, NULL) != 0 || get(gpu) != (void*)0x1234) {
      fprintf(stderr, "cycle %d: pf_stream_set failed\n", cycle);
      return 1;
    }
    dlclose(lib);
    if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD)) {
      fprintf(stderr, "cycle %d: the library stayed mapped: the test needs it unloaded\n", cycle);
      return 1;
    }
  }
  pthread_key_t key;
  if (pthread_key_create(&key, NULL) != 0) {
    fprintf(stderr, "no thread key left after the cycles\n");
    return 1;
  }
  printf("1100 load/unload cycles with a current stream: ok\n");
  return 0;
}
