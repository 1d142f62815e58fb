/* A kernel library for test_module whose results are objects with deleters in the library:
 * boxes (plain objects) and adders (closures), with a count of those still alive. */
#include <stdlib.h>

#include "packfn/packfn.h"

static int g_live; /* boxes and adders made and not yet destroyed */

typedef struct {
  pf_object_t header;
  int64_t value;
} box_t;

static void box_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    __atomic_fetch_sub(&g_live, 1, __ATOMIC_RELAXED);
  if (flags & PF_DELETER_WEAK)
    free(self);
}

static int make_box(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t v = 0;
  if (num_args > 0 && pf_any_as_int(&args[0], &v) != 0)
    return -1;
  box_t* b = malloc(sizeof *b);
  if (!b) {
    PF_ERROR_SET(PF_ERR_MEMORY, "make_box: out of memory");
    return -1;
  }
  b->header.combined_ref_count = PF_REF_INITIAL;
  b->header.type_index = PF_TYPE_OBJECT;
  b->header.padding = 0;
  b->header.deleter = box_deleter;
  b->value = v;
  __atomic_fetch_add(&g_live, 1, __ATOMIC_RELAXED);
  *result = pf_any_object(&b->header); /* the new reference moves to the caller */
  return 0;
}
PF_EXPORT(make_box, make_box);

static int box_value(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  if (num_args != 1 || args[0].type_index < PF_TYPE_STATIC_OBJECT_BEGIN ||
      args[0].v_obj->deleter != box_deleter) {
    PF_ERROR_SET(PF_ERR_TYPE, "box_value: expected one box");
    return -1;
  }
  const pf_object_t* obj = args[0].v_obj;
  *result = pf_any_int(((const box_t*)obj)->value);
  return 0;
}
PF_EXPORT(box_value, box_value);

static int adder_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  int64_t x = 0;
  if (num_args > 0 && pf_any_as_int(&args[0], &x) != 0)
    return -1;
  *result = pf_any_int(x + *(int64_t*)self);
  return 0;
}

static void adder_free(void* self) {
  free(self);
  __atomic_fetch_sub(&g_live, 1, __ATOMIC_RELAXED);
}

static int make_adder(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  int64_t* n = malloc(sizeof *n);
  if (!n) {
    PF_ERROR_SET(PF_ERR_MEMORY, "make_adder: out of memory");
    return -1;
  }
  *n = 0;
  pf_object_t* fn;
  if ((num_args > 0 && pf_any_as_int(&args[0], n) != 0) ||
      pf_function_create(n, adder_call, adder_free, &fn) != 0) {
    free(n);
    return -1;
  }
  __atomic_fetch_add(&g_live, 1, __ATOMIC_RELAXED);
  *result = pf_any_object(fn);
  return 0;
}
PF_EXPORT(make_adder, make_adder);

static int live_objects(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(__atomic_load_n(&g_live, __ATOMIC_RELAXED));
  return 0;
}
PF_EXPORT(live_objects, live_objects);
