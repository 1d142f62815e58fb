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
  /* the same chain with a different innermost item compares unequal */
  pf_object_t* c = chain(300000 - 1);
  pf_object_t* d = NULL;
  pf_any_t one = pf_any_int(1);
  pf_object_t* leaf = NULL;
  int ne = -1;
  if (c && pf_array_create(&one, 1, &leaf) == 0) {
    /* wrap the leaf so both chains are 300,000 deep: [[...[[1]]...]] vs [[...[[]]...]] */
    d = leaf;
    for (size_t i = 1; i < 300000 && d; ++i) {
      pf_any_t item = pf_any_object(d);
      pf_object_t* next = NULL;
      if (pf_array_create(&item, 1, &next) != 0)
        next = NULL;
      pf_object_release(d);
      d = next;
    }
    pf_any_t vd = pf_any_object(d);
    ne = d ? pf_container_equal(&va, &vd) : -1;
  }
  pf_object_release(a); /* deep releases: iterative too */
  pf_object_release(b);
  pf_object_release(c);
  pf_object_release(d);
  if (eq != 1 || ne != 0) {
    fprintf(stderr, "FAIL: equal chains compared %d (expected 1), different ones %d (expected 0)\n",
            eq, ne);
    return 1;
  }
  printf("ok: compared 300,000-deep chains (equal and different)\n");
  return 0;
}
