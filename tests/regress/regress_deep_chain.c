/* Regression test, issue 10 defect 8: releasing a 1,000,000-deep chain of arrays (each
 * holding the previous one) and comparing two 300,000-deep chains recurse once per level and
 * overflow the stack. Expected after the fix: both complete (iteratively).
 * Today: SIGSEGV (stack overflow) in the release, and in pf_container_equal.
 *   regress_deep_chain release   the 1,000,000-deep release
 *   regress_deep_chain equal     equality of two 300,000-deep chains
 *   regress_deep_chain map       the release of a 1,000,000-deep chain of maps (value: the
 *                                previous map)
 *   regress_deep_chain cause     the release of an error with a 1,000,000-deep cause chain
 *                                (each raise over a pending error makes it the cause) */
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

/* {"k": {"k": ... {} ...}} `depth` levels deep, released; 0, or 1 on failure. */
static int map_chain_release(size_t depth) {
  pf_object_t* cur;
  if (pf_map_create(&cur) != 0)
    return 1;
  pf_any_t key = pf_any_cstr("k");
  for (size_t i = 1; i < depth; ++i) {
    pf_any_t value = pf_any_object(cur);
    pf_object_t* next;
    if (pf_map_create(&next) != 0 || pf_map_set(next, &key, &value) != 0) {
      pf_object_release(next);
      pf_object_release(cur);
      return 1;
    }
    pf_object_release(cur); /* the new map holds it */
    cur = next;
  }
  pf_object_release(cur);
  return 0;
}

/* Raises `depth` errors without taking any (each becomes the next one's cause), then takes
 * and releases the last; 0, or 1 on failure. */
static int cause_chain_release(size_t depth) {
  for (size_t i = 0; i < depth; ++i)
    pf_error_set(PF_ERR_RUNTIME, "error %zu", i);
  pf_object_t* err = pf_error_take();
  if (!err || !pf_error_cause(err))
    return 1;
  pf_object_release(err);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "release") != 0 && strcmp(argv[1], "equal") != 0 &&
                    strcmp(argv[1], "map") != 0 && strcmp(argv[1], "cause") != 0)) {
    fprintf(stderr, "usage: %s release|equal|map|cause\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "map") == 0 || strcmp(argv[1], "cause") == 0) {
    int map = strcmp(argv[1], "map") == 0;
    if ((map ? map_chain_release : cause_chain_release)(1000000) != 0) {
      fprintf(stderr, "FAIL: building the %s chain failed\n", argv[1]);
      return 1;
    }
    printf("ok: released a 1,000,000-deep %s chain\n", map ? "map" : "cause");
    return 0;
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
