/* Regression test, issue 10 defect 1: pf_object_alloc with a size within 16 bytes of SIZE_MAX
 * must fail with MemoryError (or ValueError), not wrap the block-cache size computation,
 * pick the 64-byte class and memset past the block. Today: crashes (SIGSEGV in memset).
 * Run without PACKFN_NO_ALLOC_CACHE (the block cache is where the size wraps). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

static void deleter(void* self, int flags) {
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

int main(void) {
  int bad = 0;
  for (size_t k = 0; k <= 32; ++k) {
    size_t size = SIZE_MAX - k;
    pf_object_t* obj = (pf_object_t*)1;
    int rc = pf_object_alloc(size, PF_TYPE_OBJECT, deleter, &obj);
    pf_object_t* err = pf_error_take();
    if (rc != -1 || obj != NULL || !err ||
        (strcmp(pf_error_kind(err), PF_ERR_MEMORY) != 0 &&
         strcmp(pf_error_kind(err), PF_ERR_VALUE) != 0)) {
      fprintf(stderr, "FAIL: pf_object_alloc(SIZE_MAX - %zu) gave %d, error %s\n", k, rc,
              err ? pf_error_kind(err) : "(none)");
      bad = 1;
      if (rc == 0)
        pf_object_release(obj);
    }
    pf_object_release(err);
  }
  if (!bad)
    printf("ok: every size near SIZE_MAX failed with an error\n");
  return bad;
}
