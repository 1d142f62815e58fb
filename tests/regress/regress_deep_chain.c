/* Regression test, issue 10 defect 8: releasing a 1,000,000-deep chain of arrays (each
 * holding the previous one) and comparing two 300,000-deep chains recurse once per level and
 * overflow the stack. Expected after the fix: both complete (iteratively).
 * Today: SIGSEGV (stack overflow) in the release, and in pf_container_equal.
 *   regress_deep_chain release   the 1,000,000-deep release
 *   regress_deep_chain equal     equality of two 300,000-deep chains */
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

/* Builds [[[...[]...]]] `depth` levels deep; NULL on failure (error printed). */
static pf_object_t* chain(size_t depth) {
  pf_object_t* cur;
  if (pf_array_create(NULL, 0, &cur) != 0)
    return NULL;
  for (size_t i = 1; i < depth; ++i) {
    pf_any_t item = pf_any_object(cur);
    pf_object_t* next;
    if (pf_array_create(&item, 1, &next) != 0) {
      pf_object_release(cur);
      return NULL;
    }
    pf_object_release(cur); /* the new array holds it */
    cur = next;
  }
  return cur;
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "release") != 0 && strcmp(argv[1], "equal") != 0)) {
    fprintf(stderr, "usage: %s release|equal\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "release") == 0) {
    pf_object_t* top = chain(1000000);
    if (!top) {
      fprintf(stderr, "FAIL: building the chain failed\n");
      return 1;
    }
    pf_object_release(top);
    printf("ok: released a 1,000,000-deep chain\n");
    return 0;
  }
  pf_object_t* a = chain(300000);
  pf_object_t* b = chain(300000);
  if (!a || !b) {
    fprintf(stderr, "FAIL: building the chains failed\n");
    return 1;
  }
  pf_any_t va = pf_any_object(a);
  pf_any_t vb = pf_any_object(b);
  int eq = pf_container_equal(&va, &vb);
  /* releasing them recurses too (defect 8, first half): leak them on purpose here so this
   * mode shows the equality alone */
  if (eq != 1) {
    fprintf(stderr, "FAIL: equal chains compared unequal (%d)\n", eq);
    return 1;
  }
  printf("ok: compared two 300,000-deep chains\n");
  return 0;
}
