/* Regression test (review of the allocator, finding 2): an address-space limit (ulimit -v,
 * RLIMIT_AS). The small-object allocator reserved 8 GiB of address space (inaccessible, but
 * RLIMIT_AS counts it) at its first allocation, so under a 10 GiB limit a 3 GiB CPU tensor
 * failed with MemoryError although the program used a few MiB. Now the reservation is an
 * eighth of a finite limit.
 *
 * The program sets RLIMIT_AS to 10 GiB and runs itself again (the limit holds from the new
 * image's first instruction, before packfn's first allocation), then creates small objects of
 * every size class (the allocator's range reserved), a 3 GiB uint8 CPU tensor, writes its first
 * and last bytes, releases it, and small objects again. Exit 0; 77 (skipped) under a sanitizer
 * whose shadow memory needs more address space than the limit, or where the limit cannot be
 * set or 3 GiB cannot be mapped even without packfn. Before the fix: exit 1, "out of memory
 * allocating 3221225472 bytes". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "packfn/packfn.h"

#define LIMIT_BYTES  ((uint64_t)10 << 30)
#define TENSOR_BYTES ((int64_t)3 << 30)
#define SKIP         77

/* 1 under a sanitizer that maps shadow memory of terabytes (reserved, but RLIMIT_AS counts it) */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SHADOW_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define SHADOW_SANITIZER 1
#endif
#endif
#ifndef SHADOW_SANITIZER
#define SHADOW_SANITIZER 0
#endif

static int fail(const char* what) {
  pf_object_t* e = pf_error_peek();
  printf("FAIL: %s%s%s\n", what, e ? ": " : "", e ? pf_error_message(e) : "");
  return 1;
}

/* Objects of every small size (up to the allocator's 4096-byte classes), kept at once. */
static int small_objects(const char* when) {
  enum { N = 2000 };
  static pf_object_t* objs[N];
  static char text[4096];
  memset(text, 'x', sizeof text);
  int rc = 0;
  for (int i = 0; i < N; ++i)
    if (pf_string_object_create(text, (size_t)i * 37 % sizeof text, &objs[i]) != 0) {
      objs[i] = NULL;
      rc = fail(when);
      break;
    }
  for (int i = 0; i < N; ++i)
    pf_object_release(objs[i]);
  return rc;
}

static int limited(void) {
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur != LIMIT_BYTES) {
    printf("FAIL: RLIMIT_AS is not the 10 GiB set before exec\n");
    return 1;
  }
  /* the machine must be able to map 3 GiB under the limit at all (overcommit, memory) */
  void* probe =
      mmap(NULL, (size_t)TENSOR_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) {
    printf("SKIP: 3 GiB cannot be mapped here even without packfn (%s)\n", strerror(errno));
    return SKIP;
  }
  munmap(probe, (size_t)TENSOR_BYTES);

  if (small_objects("small objects before the tensor"))
    return 1;
  int64_t shape[1] = {TENSOR_BYTES};
  DLDataType u8 = {kDLUInt, 8, 1};
  DLDevice cpu = {kDLCPU, 0};
  pf_object_t* t;
  if (pf_tensor_empty(shape, 1, u8, cpu, &t) != 0)
    return fail("a 3 GiB CPU tensor under a 10 GiB address-space limit");
  uint8_t* data = pf_dltensor_data(pf_tensor_dltensor(t));
  data[0] = 1;
  data[TENSOR_BYTES - 1] = 2;
  pf_object_release(t);
  if (small_objects("small objects after the tensor"))
    return 1;
  printf("ok: small objects and a 3 GiB CPU tensor under RLIMIT_AS = 10 GiB\n");
  return 0;
}

int main(int argc, char** argv) {
  if (SHADOW_SANITIZER) {
    printf("SKIP: a sanitizer's shadow memory needs more address space than the 10 GiB limit\n");
    return SKIP;
  }
  if (argc > 1 && strcmp(argv[1], "limited") == 0)
    return limited();
  const char* env = getenv("PACKFN_NO_ALLOC_CACHE");
  if (env && *env && strcmp(env, "0") != 0)
    printf("note: PACKFN_NO_ALLOC_CACHE is set, so the allocator reserves nothing here\n");
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) != 0) {
    printf("SKIP: getrlimit(RLIMIT_AS): %s\n", strerror(errno));
    return SKIP;
  }
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < LIMIT_BYTES) {
    printf("SKIP: the hard address-space limit is below 10 GiB\n");
    return SKIP;
  }
  lim.rlim_cur = LIMIT_BYTES;
  if (setrlimit(RLIMIT_AS, &lim) != 0) {
    printf("SKIP: setrlimit(RLIMIT_AS, 10 GiB): %s\n", strerror(errno));
    return SKIP;
  }
  fflush(stdout);
  char* args[] = {argv[0], "limited", NULL};
  execv("/proc/self/exe", args);
  printf("SKIP: cannot run itself again: %s\n", strerror(errno));
  return SKIP;
}
