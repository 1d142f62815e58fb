/* fault_alloc.c: the allocation-failure interposer of pf_fault. This executable defines malloc,
 * calloc, realloc, free, posix_memalign, aligned_alloc and memalign, so every allocation of the
 * process (libpackfn's, libc's on its behalf) comes here; each forwards to glibc's
 * __libc_* functions. While armed, the Nth allocation call fails (NULL, ENOMEM), once; calls
 * from the dynamic loader's code are skipped (not counted, never failed) when fault_skip_loader
 * names it. The number of live blocks is counted, so a run that leaks shows as a difference. Not
 * thread safe by design: pf_fault runs one thread. Built only without sanitizers (they own malloc).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "fault.h"

/* the whole build hides symbols by default: the interposer must be seen by every library */
#define INTERPOSE __attribute__((visibility("default")))

void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t align, size_t size);
void __libc_free(void* p);

static long calls;                     /* allocation calls since arming */
static long fail_at;                   /* the call that fails, 0: none */
static int failed;                     /* 1 once the armed call failed */
static size_t failed_size;             /* the bytes the failed call asked for */
static long live;                      /* blocks allocated and not freed */
static uintptr_t loader_lo, loader_hi; /* the dynamic loader's code, when its calls are skipped */

void fault_skip_loader(uintptr_t lo, uintptr_t hi) {
  loader_lo = lo;
  loader_hi = hi;
}

void fault_arm(long n) {
  calls = 0;
  fail_at = n;
  failed = 0;
}

void fault_disarm(void) {
  fail_at = 0;
}

int fault_fired(void) {
  return failed;
}

size_t fault_failed_size(void) {
  return failed_size;
}

long fault_calls(void) {
  return calls;
}

long fault_live_blocks(void) {
  return live;
}

/* 1 when this allocation call, made from `caller`, must fail. The dynamic loader's own calls
 * are neither counted nor failed while fault_skip_loader has named its code. */
static int should_fail_from(const void* caller, size_t size) {
  if ((uintptr_t)caller - loader_lo < loader_hi - loader_lo)
    return 0;
  ++calls;
  if (fail_at != 0 && calls == fail_at) {
    failed = 1;
    failed_size = size;
    errno = ENOMEM;
    return 1;
  }
  return 0;
}

#define should_fail(size) should_fail_from(__builtin_return_address(0), size)

INTERPOSE void* malloc(size_t size) {
  if (should_fail(size))
    return NULL;
  void* p = __libc_malloc(size);
  live += p != NULL;
  return p;
}

INTERPOSE void* calloc(size_t n, size_t size) {
  if (should_fail(n * size))
    return NULL;
  void* p = __libc_calloc(n, size);
  live += p != NULL;
  return p;
}

INTERPOSE void* realloc(void* old, size_t size) {
  if (should_fail(size))
    return NULL;
  void* p = __libc_realloc(old, size);
  if (old == NULL)
    live += p != NULL;
  else if (size == 0 && p == NULL)
    --live; /* glibc's realloc(p, 0) frees p */
  return p;
}

INTERPOSE void free(void* p) {
  if (p) {
    --live;
    __libc_free(p);
  }
}

static void* memalign_from(const void* caller, size_t align, size_t size) {
  if (should_fail_from(caller, size))
    return NULL;
  void* p = __libc_memalign(align, size);
  live += p != NULL;
  return p;
}

INTERPOSE void* memalign(size_t align, size_t size) {
  return memalign_from(__builtin_return_address(0), align, size);
}

INTERPOSE void* aligned_alloc(size_t align, size_t size) {
  return memalign_from(__builtin_return_address(0), align, size);
}

INTERPOSE int posix_memalign(void** out, size_t align, size_t size) {
  if (align % sizeof(void*) != 0 || (align & (align - 1)) != 0)
    return EINVAL;
  void* p = memalign_from(__builtin_return_address(0), align, size);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}
