/* Regression test (review of the module loader, 2026-11-23): pf_tvm_ffi_join, which every
 * PF_EXPORT's constructor calls, looked for libtvm_ffi with dlopen("libtvm_ffi.so",
 * RTLD_NOLOAD) on every call while it was absent, and such a dlopen searches the library path
 * for the name: a library of 5000 exports took 100 ms to load. It now walks the loaded objects
 * (dl_iterate_phdr) for one of that name, and only once the loader has loaded something since
 * it last looked; each join still reads the loader's counts (one more dl_iterate_phdr). This
 * program counts both through its own definitions of dlopen and dl_iterate_phdr.
 *   regress_join_looks MODULE (any loadable library) */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"

static int searches; /* dlopen("libtvm_ffi.so", ...): a search of the library path */
static int walks;    /* dl_iterate_phdr calls */

static void* next_symbol(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (!f) {
    fprintf(stderr, "no next %s\n", name);
    abort();
  }
  return f;
}

__attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  static void* (*real)(const char*, int);
  if (!real) {
    void* f = next_symbol("dlopen");
    memcpy(&real, &f, sizeof f); /* POSIX makes the conversion valid; memcpy keeps ISO C quiet */
  }
  if (file && strcmp(file, "libtvm_ffi.so") == 0)
    __atomic_add_fetch(&searches, 1, __ATOMIC_RELAXED);
  return real(file, mode);
}

__attribute__((visibility("default"))) int
dl_iterate_phdr(int (*callback)(struct dl_phdr_info*, size_t, void*), void* data) {
  static int (*real)(int (*)(struct dl_phdr_info*, size_t, void*), void*);
  if (!real) {
    void* f = next_symbol("dl_iterate_phdr");
    memcpy(&real, &f, sizeof f);
  }
  __atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED);
  return real(callback, data);
}

/* Walks made by n joins. */
static int joins(int n) {
  int before = walks;
  for (int i = 0; i < n; ++i)
    if (pf_tvm_ffi_join() != 0) {
      printf("skipped: libtvm_ffi is loaded in this process\n");
      exit(77);
    }
  return walks - before;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODULE\n", argv[0]);
    return 2;
  }
  int failures = 0;
  (void)joins(1); /* the first look */
  int idle = joins(100);
  if (idle != 100) { /* the counts only */
    fprintf(stderr,
            "FAIL: 100 joins with nothing loaded walked the loaded objects %d times, "
            "expected 100 (one read of the counts each)\n",
            idle);
    failures++;
  }
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  int after_load = joins(100);
  if (after_load != 101) { /* one look more */
    fprintf(stderr, "FAIL: 100 joins after a library was loaded walked %d times, expected 101\n",
            after_load);
    failures++;
  }
  if (searches != 0) {
    fprintf(stderr, "FAIL: %d searches of the library path for libtvm_ffi.so\n", searches);
    failures++;
  }
  dlclose(h);
  if (failures)
    return 1;
  printf("ok: no search of the library path; one look per library loaded\n");
  return 0;
}
