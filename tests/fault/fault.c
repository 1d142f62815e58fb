/* pf_fault: fails every allocation in turn. For each representative program and each N from 1
 * until the program completes without reaching its Nth allocation, it fails the Nth allocation
 * call and checks that the program either
 *   - fails: returns -1 with an error raised, MemoryError when the allocation failure caused it
 *     (module loading may also say OSError: the dynamic loader reports its own out-of-memory;
 *     or RuntimeError caused by a MemoryError: a library's constructor could not register),
 *   - or succeeds with correct results (a failure absorbed, e.g. by the error fallback),
 * and in both cases leaks nothing: every block allocated is freed (fault_alloc.c counts them)
 * but those the runtime keeps on purpose, counted exactly (the global table's array and the
 * names of its slots; a library that loaded stays mapped), every counted object and closure is
 * destroyed (their deleters count them), and no error is left raised. A crash fails the test
 * by itself. The first-load program runs each point in a child process, which the library is
 * new to; a child that crashes is a failed point.
 *   pf_fault MODULE_PATH FIRST_LOAD_PATH UNMAPPED_PATH
 *     MODULE_PATH      tests/stress/stress_module.c built (loaded once before its sweep)
 *     FIRST_LOAD_PATH  tests/fault/fault_module.c built (never loaded by this process itself)
 *     UNMAPPED_PATH    tests/fault/fault_unmapped.c built (mapped and unmapped once first)
 *   PACKFN_NO_ALLOC_CACHE=1 must be set: freed blocks then go back to free().
 *   PF_FAULT_ONLY=NAME sweeps only the program of that name.
 * Exit status 0 when every point passed; 1 with each failed point printed otherwise. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault.h"
#include "global_private.h"
#include "map_private.h"
#include "packfn/packfn.h"

static const char* module_path;
static const char* first_load_path;
static const char* unmapped_path;
static int32_t fault_type;
static long objects_alive; /* counted objects and closures not yet destroyed */

/* Returns -1 (for `return fail_if(...)` chains) after checking a condition that only a wrong
 * result makes false: such a result is reported as RuntimeError so the sweep counts it. */
static int wrong(const char* what) {
  PF_ERROR_SET(PF_ERR_RUNTIME, "pf_fault: wrong result: %s", what);
  return -1;
}

/* ---- counted objects ---- */
typedef struct fault_obj_s {
  pf_object_t header;
  int64_t value;
} fault_obj_t;

static void fault_obj_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    --objects_alive;
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

/* ---- programs: each returns 0, or -1 with an error raised; each frees all it made ---- */

static int prog_objects(void) {
  pf_object_t* a;
  if (pf_object_alloc(sizeof(fault_obj_t), fault_type, fault_obj_deleter, &a) != 0)
    return -1;
  ++objects_alive;
  ((fault_obj_t*)a)->value = 42;
  pf_object_weak_retain(a);
  pf_object_retain(a);
  pf_object_release(a);
  int alive = pf_object_weak_lock(a);
  pf_object_release(a);
  if (alive)
    pf_object_release(a);
  int dead = pf_object_weak_lock(a) == 0;
  pf_object_weak_release(a);
  int32_t again;
  if (pf_type_register("packfn.fault.Obj", PF_TYPE_OBJECT, &again) != 0)
    return -1;
  return alive && dead && again == fault_type ? 0 : wrong("weak references");
}

/* Bytes objects (more than a small value holds), made and copied from a byte array: each a
 * block of its own (pf__bytes_value's path when the thread's list is empty). */
static int prog_bytes_objects(void) {
  static const char text[] = "bytes long enough to need an object";
  pf_any_t b, owned;
  if (pf_bytes_create(text, sizeof text - 1, &b) != 0)
    return -1;
  pf_byte_array_t arr = {text, sizeof text - 1};
  pf_any_t view = pf_any_byte_array(&arr);
  int rc = pf_any_to_owned(&view, &owned);
  int ok = rc == 0 && pf_any_equal(&b, &owned) && b.type_index == PF_TYPE_BYTES;
  if (rc == 0)
    pf_any_release(&owned);
  pf_any_release(&b);
  return rc != 0 ? -1 : ok ? 0 : wrong("bytes objects");
}

static int prog_strings(void) {
  static const char text[] = "a string long enough to need an object, not a small string";
  pf_any_t s, b, owned;
  if (pf_string_create(text, sizeof text - 1, &s) != 0)
    return -1;
  if (pf_bytes_create(text, 5, &b) != 0) {
    pf_any_release(&s);
    return -1;
  }
  pf_any_t view = pf_any_cstr(text);
  int rc = pf_any_to_owned(&view, &owned);
  int ok = rc == 0 && pf_any_equal(&s, &owned) && pf_any_equal(&s, &view);
  const char* data;
  size_t size;
  ok = ok && pf_any_as_str(&s, &data, &size) == 0 && size == sizeof text - 1;
  if (rc == 0)
    pf_any_release(&owned);
  pf_any_release(&s);
  pf_any_release(&b);
  return rc != 0 ? -1 : ok ? 0 : wrong("strings");
}

typedef struct closure_s {
  int64_t k;
} closure_t;

static int closure_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  int64_t x;
  if (num_args != 1 || pf_any_as_int(&args[0], &x) != 0) {
    if (num_args != 1)
      PF_ERROR_SET(PF_ERR_TYPE, "closure: expected 1 argument, got %d", (int)num_args);
    return -1;
  }
  *result = pf_any_int(x + ((closure_t*)self)->k);
  return 0;
}

static void closure_free(void* self) {
  free(self);
  --objects_alive;
}

/* A closure adding k (counted in objects_alive): 0 and a new reference, or -1 raised. */
static int closure_new(int64_t k, pf_object_t** out) {
  closure_t* c = malloc(sizeof *c);
  if (!c) {
    PF_ERROR_SET(PF_ERR_MEMORY, "pf_fault: out of memory");
    return -1;
  }
  c->k = k;
  if (pf_function_create(c, closure_call, closure_free, out) != 0) {
    free(c);
    return -1;
  }
  ++objects_alive;
  return 0;
}

static int scale_impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_float(args[0].f * (double)args[1].i);
  return 0;
}

static int prog_functions(void) {
  pf_object_t* fn;
  if (closure_new(5, &fn) != 0)
    return -1;
  int rc = pf_function_set_info(fn, "add5(x: int) -> int", "Adds five.");
  /* its MemoryError names the size of the copy that failed (it said 0 bytes: review) */
  pf_object_t* oom = rc != 0 ? pf_error_peek() : NULL;
  if (oom && strstr(pf_error_message(oom), "allocating 0 bytes") != NULL) {
    pf_object_release(fn);
    return wrong(pf_error_message(oom));
  }
  pf_any_t arg = pf_any_int(37), res = pf_any_none();
  if (rc == 0)
    rc = pf_function_call(fn, &arg, 1, &res);
  int ok = rc != 0 || (res.type_index == PF_TYPE_INT && res.v_int64 == 42);
  pf_object_release(fn);
  if (rc != 0)
    return -1;
  static const pf_param_t params[] = {{"x", PF_PARAM_FLOAT}, {"k", PF_PARAM_INT}};
  static const pf_signature_t sig = {"scale", 2, params, PF_PARAM_FLOAT, "Scales x by k."};
  pf_object_t* typed;
  if (pf_function_create_typed(&sig, scale_impl, NULL, NULL, &typed) != 0)
    return -1;
  pf_any_t args[2] = {pf_any_float(1.5), pf_any_int(4)};
  rc = pf_function_call(typed, args, 2, &res);
  ok = ok && (rc != 0 || (res.type_index == PF_TYPE_FLOAT && res.v_float64 == 6.0));
  if (rc == 0) { /* a wrong argument must raise TypeError, whatever memory does */
    pf_any_t bad[2] = {pf_any_cstr("no"), pf_any_int(4)};
    rc = pf_function_call(typed, bad, 2, &res) == -1 ? 0 : -2;
    pf_object_t* err = pf_error_take();
    if (rc == 0 && err && strcmp(pf_error_kind(err), PF_ERR_TYPE) != 0) {
      pf_error_raise(err); /* MemoryError while raising the TypeError: the program fails */
      rc = -1;
    } else if (rc == 0 && !err) {
      rc = -2;
    }
    pf_object_release(err);
  }
  pf_object_release(typed);
  return rc == -1 ? -1 : ok && rc == 0 ? 0 : wrong("functions");
}

/* Another runtime's exports (static: the producer allocates nothing the sweep would fail),
 * counting their deleters' calls. */
static int fault_foreign_deleted;
static void fault_foreign_versioned(pf_dl_managed_tensor_versioned_t* m) {
  (void)m;
  fault_foreign_deleted++;
}
static void fault_foreign_legacy(DLManagedTensor* m) {
  (void)m;
  fault_foreign_deleted++;
}

static int prog_tensors(void) {
  int64_t shape[2] = {4, 6};
  DLDataType f32 = {kDLFloat, 32, 1};
  pf_object_t *t, *v = NULL, *r = NULL, *back = NULL, *copy = NULL;
  if (pf_tensor_empty(shape, 2, f32, PF_DEVICE_CPU, &t) != 0)
    return -1;
  float* data = pf_tensor_dltensor(t)->data;
  for (int i = 0; i < 24; ++i)
    data[i] = (float)i;
  int rc = pf_tensor_slice(t, 1, 1, 6, 2, &v);
  if (rc == 0)
    rc = pf_tensor_select(v, 0, 2, &r);
  DLManagedTensor* m = NULL;
  if (rc == 0)
    rc = pf_tensor_to_dlpack(r, &m);
  if (rc == 0) {
    rc = pf_tensor_from_dlpack(m, &back);
    if (rc != 0)
      m->deleter(m);
  }
  int ok = 1;
  if (rc == 0) { /* back is r: elements 13, 15, 17 at stride 2 */
    DLTensor* d = pf_tensor_dltensor(back);
    const float* bd = (const float*)((const char*)d->data + d->byte_offset);
    ok = back == r && d->ndim == 1 && d->shape[0] == 3 && bd[0] == 13.0f &&
         bd[d->strides[0]] == 15.0f && bd[2 * d->strides[0]] == 17.0f;
  }
  if (rc == 0)
    rc = pf_tensor_to_device(t, PF_DEVICE_CPU, &copy);
  if (rc == 0)
    ok = ok && ((const float*)pf_tensor_dltensor(copy)->data)[23] == 23.0f;
  pf_object_release(copy);
  /* another runtime's exports of t's memory: the imports' short way (versioned) and their
   * general one (legacy, t's transpose: strides that are not compact); a failed import leaves
   * the managed tensor to its caller, a tensor calls its deleter once */
  static pf_dl_managed_tensor_versioned_t fv;
  static DLManagedTensor fl;
  static int64_t fshape[2] = {4, 6}, tshape[2] = {6, 4}, tstrides[2] = {1, 6};
  memset(&fv, 0, sizeof fv);
  fv.version.major = 1;
  fv.deleter = fault_foreign_versioned;
  fv.dl_tensor = (DLTensor){data, PF_DEVICE_CPU, 2, f32, fshape, NULL, 0};
  memset(&fl, 0, sizeof fl);
  fl.deleter = fault_foreign_legacy;
  fl.dl_tensor = (DLTensor){data, PF_DEVICE_CPU, 2, f32, tshape, tstrides, 0};
  fault_foreign_deleted = 0;
  int handed = 0; /* managed tensors given to an import */
  pf_object_t *fa = NULL, *fb = NULL;
  if (rc == 0 && (++handed, rc = pf_tensor_from_dlpack_versioned(&fv, &fa)) != 0)
    fv.deleter(&fv);
  if (rc == 0 && (++handed, rc = pf_tensor_from_dlpack(&fl, &fb)) != 0)
    fl.deleter(&fl);
  if (rc == 0) { /* element (3, 5) of t, (5, 3) of its transpose */
    const DLTensor* a = pf_tensor_dltensor(fa);
    const DLTensor* b = pf_tensor_dltensor(fb);
    ok = ok && a->shape == fshape && b->strides == tstrides &&
         ((const float*)a->data)[3 * a->strides[0] + 5] == 23.0f &&
         ((const float*)b->data)[5 * b->strides[0] + 3 * b->strides[1]] == 23.0f;
  }
  pf_object_release(fa);
  pf_object_release(fb);
  ok = ok && fault_foreign_deleted == handed;
  pf_object_release(back);
  pf_object_release(r);
  pf_object_release(v);
  pf_object_release(t);
  return rc != 0 ? -1 : ok ? 0 : wrong("tensors");
}

/* A tensor made by hand as another runtime would (its views take the general way). */
typedef struct {
  pf_object_t header;
  DLTensor dl;
  int64_t shape[2];
  float data[24];
} fault_hand_tensor_t;

static void fault_hand_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    --objects_alive;
  if (flags & PF_DELETER_WEAK)
    pf_object_free(self);
}

/* The float at `idx` of 2-d float32 tensor t, or -1 for a tensor of another rank. */
static float fault_at2(pf_object_t* t, int64_t i, int64_t j) {
  const DLTensor* d = pf_tensor_dltensor(t);
  if (d->ndim != 2)
    return -1.0f;
  return ((const float*)pf_dltensor_data(d))[i * d->strides[0] + j * d->strides[1]];
}

/* Every view function on a tensor that owns its memory, on a view of it, on a tensor over
 * memory packfn does not own and on another runtime's tensor: the short ways' allocation
 * failing falls back to the general way, whose own failure raises MemoryError. */
static int prog_views(void) {
  static float outside[24];
  int64_t shape[2] = {4, 6};
  DLDataType f32 = {kDLFloat, 32, 1};
  pf_object_t *bases[4] = {NULL}, *obj = NULL;
  if (pf_tensor_empty(shape, 2, f32, PF_DEVICE_CPU, &bases[0]) != 0)
    return -1;
  float* data = pf_tensor_dltensor(bases[0])->data;
  for (int i = 0; i < 24; ++i)
    data[i] = outside[i] = (float)i;
  int rc = pf_tensor_slice(bases[0], 0, 0, 4, 1, &bases[1]); /* the whole of it, a view */
  DLTensor desc = {outside, PF_DEVICE_CPU, 2, f32, shape, NULL, 0};
  if (rc == 0)
    rc = pf_tensor_from_dltensor(&desc, NULL, NULL, &bases[2]);
  if (rc == 0)
    rc = pf_object_alloc(sizeof(fault_hand_tensor_t), PF_TYPE_TENSOR, fault_hand_deleter, &obj);
  if (rc == 0) {
    ++objects_alive;
    fault_hand_tensor_t* h = (fault_hand_tensor_t*)obj;
    h->shape[0] = 4;
    h->shape[1] = 6;
    for (int i = 0; i < 24; ++i)
      h->data[i] = (float)i;
    DLTensor hd = {h->data, PF_DEVICE_CPU, 2, f32, h->shape, NULL, 0};
    h->dl = hd;
    bases[3] = obj;
  }
  int ok = 1;
  for (int k = 0; rc == 0 && k < 4; ++k) {
    pf_object_t* b = bases[k];
    pf_object_t *v = NULL, *w = NULL;
    /* compact from the first element; strided from element 7; an empty one (the general way) */
    rc = pf_tensor_view(b, 2, (int64_t[]){2, 3}, NULL, 0, &v);
    ok = ok && (rc != 0 || fault_at2(v, 1, 2) == 5.0f);
    pf_object_release(v);
    v = NULL;
    if (rc == 0)
      rc = pf_tensor_view(b, 2, (int64_t[]){2, 2}, (int64_t[]){6, 2}, 7, &v);
    ok = ok && (rc != 0 || fault_at2(v, 1, 1) == 15.0f);
    pf_object_release(v);
    v = NULL;
    if (rc == 0)
      rc = pf_tensor_view(b, 2, (int64_t[]){0, 3}, NULL, 0, &v);
    ok = ok && (rc != 0 || pf_dltensor_numel(pf_tensor_dltensor(v)) == 0);
    pf_object_release(v);
    v = NULL;
    if (rc == 0)
      rc = pf_tensor_reshape(b, 2, (int64_t[]){3, -1}, &v);
    ok = ok && (rc != 0 || fault_at2(v, 2, 7) == 23.0f);
    pf_object_release(v);
    v = NULL;
    if (rc == 0)
      rc = pf_tensor_slice(b, 1, 5, 0, -2, &v); /* columns 5, 3, 1 */
    ok = ok && (rc != 0 || fault_at2(v, 3, 2) == 19.0f);
    pf_object_release(v);
    v = NULL;
    if (rc == 0)
      rc = pf_tensor_select(b, 0, -1, &v); /* the last row: 18..23 */
    ok = ok && (rc != 0 || (pf_tensor_dltensor(v)->ndim == 1 &&
                            ((const float*)pf_dltensor_data(pf_tensor_dltensor(v)))[2] == 20.0f));
    if (rc == 0) /* a view of that view, whose owner it holds */
      rc = pf_tensor_slice(v, 0, 1, 3, 1, &w);
    ok = ok && (rc != 0 || ((const float*)pf_dltensor_data(pf_tensor_dltensor(w)))[0] == 19.0f);
    pf_object_release(w);
    pf_object_release(v);
    v = NULL;
    if (rc == 0)
      rc = pf_tensor_permute(b, (int32_t[]){1, 0}, &v);
    ok = ok && (rc != 0 || fault_at2(v, 5, 3) == 23.0f);
    pf_object_release(v);
    v = NULL;
    /* an export whose shape the consumer changed (its first row): imported as a new tensor;
     * a failed import leaves the managed tensor to its caller */
    DLManagedTensor* m = NULL;
    if (rc == 0)
      rc = pf_tensor_to_dlpack(b, &m);
    if (rc == 0) {
      static int64_t row[2] = {1, 6};
      m->dl_tensor.shape = row;
      rc = pf_tensor_from_dlpack(m, &v);
      if (rc != 0)
        m->deleter(m);
    }
    ok = ok && (rc != 0 || (v != b && fault_at2(v, 0, 5) == 5.0f));
    pf_object_release(v);
  }
  for (int k = 3; k >= 0; --k)
    pf_object_release(bases[k]);
  return rc != 0 ? -1 : ok ? 0 : wrong("views");
}

static int prog_containers(void) {
  pf_object_t* map;
  if (pf_map_create(&map) != 0)
    return -1;
  int rc = 0;
  for (int i = 0; i < 40 && rc == 0; ++i) {
    char key[48];
    snprintf(key, sizeof key, "a key long enough to be an object %d", i);
    pf_any_t k = pf_any_cstr(key), v = pf_any_int(i);
    rc = pf_map_set(map, &k, &v);
  }
  pf_object_t* arr = NULL;
  if (rc == 0) {
    pf_any_t items[3] = {pf_any_int(1), pf_any_cstr("a string that is not small"),
                         pf_any_object(map)};
    rc = pf_array_create(items, 3, &arr);
  }
  int ok = 1;
  if (rc == 0) {
    const pf_any_t* got;
    pf_any_t k = pf_any_cstr("a key long enough to be an object 39");
    ok = pf_map_is_frozen(map) && pf_map_get(map, &k, &got) == 0 && got->v_int64 == 39;
    pf_any_t a = pf_any_object(arr);
    ok = ok && pf_container_equal(&a, &a) == 1;
  }
  pf_object_release(arr);
  pf_object_release(map);
  return rc != 0 ? -1 : ok ? 0 : wrong("containers");
}

static int prog_errors(void) {
  pf_object_t *inner, *outer;
  /* its MemoryError names the size of the error that failed (it said the message's: 0 bytes for
   * an empty one; review) */
  if (pf_error_create(PF_ERR_KEY, "", NULL, &inner) != 0) {
    pf_object_t* oom = pf_error_peek();
    if (oom && strstr(pf_error_message(oom), "allocating 0 bytes") != NULL)
      return wrong(pf_error_message(oom));
    return -1;
  }
  pf_object_release(inner);
  if (pf_error_create(PF_ERR_KEY, "inner", NULL, &inner) != 0)
    return -1;
  if (pf_error_create(PF_ERR_VALUE, "outer", "site\n", &outer) != 0) {
    pf_object_release(inner);
    return -1;
  }
  int rc = pf_error_set_cause(outer, inner);
  if (rc == 0)
    rc = pf_error_append_backtrace(outer, "another line");
  char text[256];
  int ok = rc != 0 || (pf_error_format(outer, text, sizeof text) > 0 && strstr(text, "inner"));
  pf_object_release(inner);
  pf_object_release(outer);
  if (rc != 0)
    return -1;
  /* raising never fails: on no memory the preallocated MemoryError comes instead */
  PF_ERROR_SET(PF_ERR_INDEX, "index %d out of range for a list of %d", 7, 3);
  pf_object_t* err = pf_error_take();
  if (!err)
    return wrong("pf_error_set raised nothing");
  if (strcmp(pf_error_kind(err), PF_ERR_INDEX) != 0) {
    pf_error_raise(err);
    pf_object_release(err);
    return -1;
  }
  ok = ok && strcmp(pf_error_message(err), "index 7 out of range for a list of 3") == 0;
  pf_object_release(err);
  return ok ? 0 : wrong("errors");
}

/* A cause chain deeper than the nesting of releases (64): releasing it queues the deepest
 * levels on a growing list, whose allocation may fail too (each level is released at once
 * then); either way every error is freed. */
static int prog_deep_causes(void) {
  pf_object_t* top = NULL;
  for (int i = 0; i < 80; ++i) {
    pf_object_t* err;
    if (pf_error_create(PF_ERR_VALUE, "level", NULL, &err) != 0) {
      pf_object_release(top);
      return -1;
    }
    if (top && pf_error_set_cause(err, top) != 0) {
      pf_object_release(err);
      pf_object_release(top);
      return -1;
    }
    pf_object_release(top);
    top = err;
  }
  int depth = 0;
  for (pf_object_t* e = top; e; e = pf_error_cause(e))
    ++depth;
  pf_object_release(top);
  return depth == 80 ? 0 : wrong("a cause chain of 80");
}

static int prog_module(void) {
  pf_object_t *mod, *fn = NULL;
  if (pf_module_load(module_path, &mod) != 0)
    return -1;
  int rc = pf_module_get_function(mod, "stress_mul", &fn);
  pf_any_t args[2] = {pf_any_int(6), pf_any_int(7)}, res = pf_any_none();
  if (rc == 0)
    rc = pf_function_call(fn, args, 2, &res);
  int ok = rc != 0 || (res.type_index == PF_TYPE_INT && res.v_int64 == 42);
  pf_export_info_t* list = NULL;
  size_t count = 0;
  if (rc == 0)
    rc = pf_module_list(mod, &list, &count);
  ok = ok && (rc != 0 || (count == 2 && strcmp(list[0].name, "stress_mul") == 0 &&
                          strcmp(list[1].name, "stress_tag") == 0));
  pf_module_list_free(list);
  pf_object_release(fn);
  pf_object_release(mod);
  return rc != 0 ? -1 : ok ? 0 : wrong("module");
}

static int prog_globals(void) {
  pf_object_t* fn;
  if (closure_new(1, &fn) != 0)
    return -1;
  int rc = pf_global_set("fault.inc", fn, 0);
  pf_object_release(fn);
  if (rc != 0)
    return -1;
  pf_any_t arg = pf_any_int(41), res = pf_any_none();
  rc = pf_global_call("fault.inc", &arg, 1, &res);
  int ok = rc != 0 || res.v_int64 == 42;
  char** names = NULL;
  size_t count = 0;
  if (rc == 0)
    rc = pf_global_list(&names, &count);
  pf_global_list_free(names);
  pf_object_t* err = pf_error_take(); /* keep the first failure across the removal */
  if (pf_global_remove("fault.inc") != 0)
    return wrong("pf_global_remove of a registered name failed");
  if (err) {
    pf_error_raise(err);
    pf_object_release(err);
  }
  return rc != 0 ? -1 : ok ? 0 : wrong("globals");
}

/* Lists: growth past several capacities, insert, set, pop, clear; shapes; arrays taking values. */
static int prog_lists(void) {
  pf_object_t* list;
  if (pf_list_create(&list) != 0)
    return -1;
  int rc = 0;
  for (int i = 0; i < 20 && rc == 0; ++i) {
    char text[48];
    snprintf(text, sizeof text, "list item long enough to be an object %d", i);
    pf_any_t v = i % 2 ? pf_any_int(i) : pf_any_cstr(text);
    rc = pf_list_append(list, &v);
  }
  pf_any_t front = pf_any_cstr("inserted at the front, not a small string"), popped = pf_any_none();
  if (rc == 0)
    rc = pf_list_insert(list, 0, &front);
  pf_any_t seven = pf_any_int(7);
  if (rc == 0)
    rc = pf_list_set(list, 3, &seven);
  if (rc == 0)
    rc = pf_list_pop(list, -1, &popped);
  size_t count = 0;
  int ok = rc != 0 || (pf_array_count(list, &count) == 0 && count == 20 &&
                       popped.type_index == PF_TYPE_INT && popped.v_int64 == 19);
  pf_any_release(&popped);
  int64_t dims[3] = {2, 3, 4};
  pf_object_t *shape = NULL, *arr = NULL;
  if (rc == 0)
    rc = pf_shape_create(dims, 3, &shape);
  if (rc == 0) {
    pf_any_t items[2] = {pf_any_object(shape), pf_any_object(list)};
    pf_object_retain(shape);
    pf_object_retain(list);
    rc = pf_array_create_take(items, 2, &arr);
    if (rc != 0) { /* the items are still ours */
      pf_object_release(shape);
      pf_object_release(list);
    }
  }
  if (rc == 0)
    rc = pf_list_clear(list);
  ok = ok && (rc != 0 || (pf_array_count(list, &count) == 0 && count == 0));
  pf_object_release(arr);
  pf_object_release(shape);
  pf_object_release(list);
  return rc != 0 ? -1 : ok ? 0 : wrong("lists");
}

/* 1000 int keys whose hashes differ in their low bits only (one chain at any table size) set,
 * then one whose home lies inside that chain: the whole chain moves, planned in heap arrays and
 * a hash set past 64 keys (pf__spare_head, pf__move_plan_grow), every allocation of which may
 * fail (100 keys moved only a few and never reached the heap plan; review). */
static int prog_long_chain(void) {
  const uint64_t c = 11400714819323198485ull;
  uint64_t inv = c; /* c's inverse modulo 2^64 */
  for (int i = 0; i < 6; ++i)
    inv *= 2 - c * inv;
  const uint64_t x = 0x5000000000000000ull;
  pf_object_t* dict;
  if (pf_dict_create(&dict) != 0)
    return -1;
  int rc = 0;
  for (uint64_t j = 0; j < 1000 && rc == 0; ++j) {
    pf_any_t k = pf_any_int((int64_t)((inv * (x + j) ^ 1) - 0x9e3779b9u - 64)), v = pf_any_int(1);
    rc = pf_dict_set(dict, &k, &v);
  }
  size_t n = 0;
  if (rc == 0) {
    unsigned bits = 64 - ((const pf__mapcell_t*)dict)->fib_shift;
    uint64_t h = inv * (x + (30ull << (64 - bits)));
    pf_any_t k = pf_any_int((int64_t)((h ^ 1) - 0x9e3779b9u - 64)), v = pf_any_int(2);
    rc = pf_dict_set(dict, &k, &v);
  }
  int ok = rc != 0 || (pf_dict_count(dict, &n) == 0 && n == 1001);
  pf_object_release(dict);
  return rc != 0 ? -1 : ok ? 0 : wrong("a long chain moved");
}

/* Dicts: growth through the small and dense forms, erase, copies, iteration, freezing. */
static int prog_dicts(void) {
  pf_object_t *dict, *copy = NULL;
  if (pf_dict_create(&dict) != 0)
    return -1;
  int rc = 0;
  for (int i = 0; i < 40 && rc == 0; ++i) {
    char key[48];
    snprintf(key, sizeof key, "dict key long enough to be an object %d", i);
    pf_any_t k = i % 3 ? pf_any_cstr(key) : pf_any_int(i), v = pf_any_int(i);
    rc = pf_dict_set(dict, &k, &v);
  }
  for (int i = 0; i < 40 && rc == 0; i += 3) {
    pf_any_t k = pf_any_int(i);
    rc = pf_dict_erase(dict, &k) == 1 ? 0 : -1;
  }
  if (rc == 0)
    rc = pf_map_copy(dict, &copy);
  int ok = 1;
  if (rc == 0) {
    pf_map_iter_t it;
    const pf_any_t *k, *v;
    int64_t sum = 0;
    size_t n = 0;
    ok = pf_map_iter_init(copy, &it) == 0;
    while (ok && pf_map_iter_next(&it, &k, &v) == 1) {
      sum += v->v_int64;
      ++n;
    }
    ok = ok && n == 26 &&
         sum == 780 - (0 + 3 + 6 + 9 + 12 + 15 + 18 + 21 + 24 + 27 + 30 + 33 + 36 + 39);
    rc = pf_map_freeze(copy);
  }
  if (rc == 0) {
    pf_any_t k = pf_any_cstr("dict key long enough to be an object 38");
    const pf_any_t* got = NULL;
    ok = ok && pf_map_is_frozen(copy) && pf_map_get(copy, &k, &got) == 0 && got &&
         got->v_int64 == 38;
  }
  pf_object_release(copy);
  pf_object_release(dict);
  return rc != 0 ? -1 : ok ? 0 : wrong("dicts");
}

static int static_entry(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  *result = pf_any_int(num_args);
  return 0;
}

/* Static typed entries and TVM-FFI's metadata of an export. */
static int prog_exports(void) {
  static const pf_param_t params[] = {{"x", PF_PARAM_TENSOR}, {"eps", PF_PARAM_FLOAT}};
  static const pf_signature_t sig = {"norm", 2, params, PF_PARAM_NONE, "Normalises x."};
  pf_object_t* fn;
  if (pf_function_create_static(&sig, static_entry, &fn) != 0)
    return -1;
  int ok = strcmp(pf_function_signature(fn), "norm(x: Tensor, eps: float) -> None") == 0 &&
           strcmp(pf_function_doc(fn), "Normalises x.") == 0;
  pf_object_release(fn);
  pf_any_t meta = pf_any_none(), doc = pf_any_none(), text = pf_any_none();
  int rc = pf__export_tvm_info(0, &sig, NULL, NULL, &meta);
  if (rc == 0)
    rc = pf__export_tvm_info(1, &sig, NULL, NULL, &doc);
  if (rc == 0)
    rc = pf__export_tvm_info(0, NULL, "f(a: int, b: str) -> bool", "doc", &text);
  const char* data;
  size_t size;
  ok = ok && (rc != 0 || (pf_any_as_str(&meta, &data, &size) == 0 && strstr(data, "ffi.Tensor") &&
                          pf_any_as_str(&text, &data, &size) == 0 && strstr(data, "ffi.String")));
  pf_any_release(&meta);
  pf_any_release(&doc);
  pf_any_release(&text);
  return rc != 0 ? -1 : ok ? 0 : wrong("exports");
}

/* Many functions with texts alive at once, each point from a process that made no texts yet
 * (forked): the first record makes the texts table, the 65th grows it (its records rehashed);
 * a failed growth keeps the old buckets, a failed first one raises MemoryError. The table, once
 * made, stays (texts_table_held). */
static int texts_table_made;

static long texts_table_held(void) {
  return texts_table_made;
}

static int prog_function_texts(void) {
  enum { N = 70 };
  pf_object_t* fns[N] = {NULL};
  char sig[32];
  int rc = 0, ok = 1;
  for (int i = 0; i < N && rc == 0; ++i) {
    rc = pf_function_create(NULL, static_entry, NULL, &fns[i]);
    snprintf(sig, sizeof sig, "f%d() -> int", i);
    if (rc == 0)
      rc = pf_function_set_info(fns[i], i % 2 ? sig : NULL, "doc");
    texts_table_made |= rc == 0;
  }
  for (int i = 0; i < N && rc == 0; ++i) {
    snprintf(sig, sizeof sig, "f%d() -> int", i);
    const char* s = pf_function_signature(fns[i]);
    const char* d = pf_function_doc(fns[i]);
    ok = ok && (i % 2 ? s && strcmp(s, sig) == 0 : !s) && d && strcmp(d, "doc") == 0;
  }
  for (int i = 0; i < N; ++i)
    pf_object_release(fns[i]);
  return rc != 0 ? -1 : ok ? 0 : wrong("function texts");
}

static int bare_impl(void* self, const pf_arg_t* args, pf_any_t* result) {
  (void)self;
  *result = pf_any_float(args[0].f);
  return 0;
}

/* PF_TYPED_CREATE's entry and a typed function, both declared without a doc: each allocation
 * of their texts and records failing in turn (their MemoryErrors name the block that failed). */
static int prog_bare_texts(void) {
  static const pf_param_t params[] = {{"eps", PF_PARAM_FLOAT}};
  static const pf_signature_t sig = {"bare", 1, params, PF_PARAM_FLOAT, NULL};
  pf_object_t* fn;
  if (pf__typed_create(&sig, static_entry, &fn) != 0)
    return -1;
  int ok =
      strcmp(pf_function_signature(fn), "bare(eps: float) -> float") == 0 && !pf_function_doc(fn);
  pf_object_release(fn);
  if (pf_function_create_typed(&sig, bare_impl, NULL, NULL, &fn) != 0)
    return -1;
  ok = ok && strcmp(pf_function_signature(fn), "bare(eps: float) -> float") == 0 &&
       !pf_function_doc(fn);
  pf_any_t a = pf_any_float(2.5), r = pf_any_none();
  int rc = pf_function_call(fn, &a, 1, &r);
  ok = ok && (rc != 0 || (r.type_index == PF_TYPE_FLOAT && r.v_float64 == 2.5));
  pf_object_release(fn);
  return rc != 0 ? -1 : ok ? 0 : wrong("bare texts");
}

/* ---- blocks the runtime keeps on purpose ---- */

/* Blocks the global table owns: its array, once it left the static empty one (two slots), and
 * the name of every used slot (a removed name stays until a rebuild drops it). */
static long table_blocks(void) {
  pf__global_stats_t s;
  pf__global_stats(&s);
  return (long)s.used + (s.capacity > 2);
}

/* Frees the dynamic loader's per-thread error record (dlerror frees it on the call after the
 * one that returned its message), so that it never counts as a block held or leaked. */
static void dl_flush(void) {
  (void)dlsym(RTLD_DEFAULT, "pf_fault_no_such_symbol");
  (void)dlerror();
  (void)dlerror();
}

/* The dynamic loader's code (ld.so, found by its base address in the auxiliary vector): the
 * first-load program does not fail its allocations. They are glibc's own: its failure paths keep
 * or drop caches of its own (search paths, the error record), which a count of blocks cannot
 * tell from a leak; packfn's handling of a failed dlopen is swept by the module program. */
static uintptr_t loader_lo, loader_hi;

static int find_loader(struct dl_phdr_info* info, size_t size, void* base) {
  (void)size;
  if (info->dlpi_addr != (uintptr_t)base)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (!loader_lo || lo < loader_lo)
      loader_lo = lo;
    if (hi > loader_hi)
      loader_hi = hi;
  }
  return 1;
}

/* ---- the global table growing while allocations fail ---- */

#define GROWTHS  3      /* the table grows (is rebuilt larger) this many times per run */
#define GROW_MAX 100000 /* names at most: it has grown GROWTHS times long before */

static void grow_name(char* buf, size_t size, int k) {
  snprintf(buf, size, "fault.grow.%d", k);
}

/* 1 when `name` names `fn` in the table (or, with fn NULL, nothing). */
static int finds(const char* name, pf_object_t* fn) {
  pf_object_t* got = NULL;
  if (pf_global_get(name, &got) != 0) {
    pf_error_clear();
    return 0;
  }
  pf_object_release(got);
  return got == fn;
}

/* Registers new names for one closure until the table has grown (been rebuilt larger) GROWTHS
 * times, stopping at the first failure; then checks that the table is consistent: every name
 * registered before the failure found, the failed one either absent or present and whole
 * (found and counted), every name held before the program still found, the count exact; then
 * removes its names again. Run in a child process for each point: a removed name keeps its
 * slot, so only a table that has never seen these names grows for them. */
static int prog_global_growth(void) {
  pf_object_t* fn;
  if (closure_new(3, &fn) != 0)
    return -1;
  pf__global_stats_t stats;
  pf__global_stats(&stats);
  size_t count_before = pf_global_count(), capacity = stats.capacity;
  char** old = NULL;
  size_t num_old = 0;
  int rc = pf_global_list(&old, &num_old);
  int k = 0, failed_set = 0, growths = 0;
  char name[64];
  while (rc == 0 && growths < GROWTHS && k < GROW_MAX) {
    grow_name(name, sizeof name, k);
    rc = pf_global_set(name, fn, 0);
    failed_set = rc != 0;
    k += rc == 0;
    pf__global_stats(&stats);
    growths += stats.capacity > capacity;
    capacity = stats.capacity;
  }
  pf_object_t* err = pf_error_take(); /* the failure, kept across the checks */
  const char* why = NULL;
  /* its MemoryError names the size that failed (a failed rebuild named the old array's) */
  char size_text[64];
  snprintf(size_text, sizeof size_text, "allocating %zu bytes", fault_failed_size());
  if (failed_set && err && strcmp(pf_error_kind(err), PF_ERR_MEMORY) == 0 &&
      strstr(pf_error_message(err), size_text) == NULL)
    why = "its MemoryError names another size than the allocation that failed";
  for (int i = 0; i < k && !why; ++i) {
    grow_name(name, sizeof name, i);
    if (!finds(name, fn))
      why = "a name registered before the failure is not found";
  }
  int present = 0;
  if (failed_set) {
    grow_name(name, sizeof name, k);
    present = !finds(name, NULL);
    if (present && !finds(name, fn))
      why = "the name that failed to register names another function";
  }
  if (!why && pf_global_count() != count_before + (size_t)k + (size_t)present)
    why = "the count does not match the names found";
  for (size_t i = 0; i < num_old && !why; ++i)
    if (finds(old[i], NULL))
      why = "a name held before the program is lost";
  if (!why && rc == 0) { /* every name calls the closure; the table grew GROWTHS times */
    grow_name(name, sizeof name, k - 1);
    pf_any_t arg = pf_any_int(39), res = pf_any_none();
    if (pf_global_call(name, &arg, 1, &res) != 0 || res.v_int64 != 42)
      why = "the last name registered does not call its function";
    else if (growths < GROWTHS)
      why = "the table grew fewer than GROWTHS times";
  }
  for (int i = 0; i < k + present; ++i) {
    grow_name(name, sizeof name, i);
    if (pf_global_remove(name) != 0 && !why)
      why = "a registered name could not be removed";
  }
  if (!why && pf_global_count() != count_before)
    why = "the count is not back after removing every name";
  pf_global_list_free(old);
  pf_object_release(fn);
  if (why) {
    pf_object_release(err);
    pf_error_clear();
    return wrong(why);
  }
  if (err) {
    pf_error_raise(err);
    pf_object_release(err);
  }
  return rc;
}

/* ---- a library's first load ---- */

static long first_load_kept = -1; /* blocks a library's successful first load keeps for good */

/* 1 when the first-load library is mapped in this process. */
static int first_load_mapped(void) {
  void* h = dlopen(first_load_path, RTLD_NOW | RTLD_NOLOAD);
  if (h)
    dlclose(h);
  return h != NULL;
}

static long first_load_held(void) {
  long held = table_blocks() + (first_load_mapped() ? first_load_kept : 0);
  dl_flush();
  return held;
}

/* Loads the library, which this process has never loaded: the loader's, its constructors'
 * (a global registration, the TVM-FFI join of each export) and the metadata's allocations;
 * then calls a documented export, a typed one and the registered global, and lists it. A
 * refused library must leave no global behind (issue 10, defect 2): it is unmapped. */
static int prog_first_load(void) {
  pf_object_t *mod, *add = NULL, *scale = NULL;
  if (pf_module_load(first_load_path, &mod) != 0) {
    pf_object_t* err = pf_error_take();
    pf_object_t* left = NULL;
    int found = pf_global_get("fault.module.answer", &left) != 0 || left != NULL;
    pf_object_release(left);
    if (found) {
      pf_object_release(err);
      pf_error_clear();
      return wrong("a refused library's global stays registered");
    }
    if (err) {
      pf_error_raise(err);
      pf_object_release(err);
    }
    return -1;
  }
  int rc = pf_module_get_function(mod, "fault_add", &add);
  if (rc == 0)
    rc = pf_module_get_function(mod, "fault_scale", &scale);
  pf_any_t res = pf_any_none();
  int ok = 1;
  if (rc == 0) {
    pf_any_t args[2] = {pf_any_int(40), pf_any_int(2)};
    rc = pf_function_call(add, args, 2, &res);
    ok = rc != 0 || (res.type_index == PF_TYPE_INT && res.v_int64 == 42);
  }
  if (rc == 0) {
    pf_any_t args[2] = {pf_any_float(1.5), pf_any_int(4)};
    rc = pf_function_call(scale, args, 2, &res);
    ok = ok && (rc != 0 || (res.type_index == PF_TYPE_FLOAT && res.v_float64 == 6.0));
  }
  if (rc == 0) {
    rc = pf_global_call("fault.module.answer", NULL, 0, &res);
    ok = ok && (rc != 0 || (res.type_index == PF_TYPE_INT && res.v_int64 == 42));
  }
  pf_export_info_t* list = NULL;
  size_t count = 0;
  if (rc == 0)
    rc = pf_module_list(mod, &list, &count);
  ok =
      ok && (rc != 0 || (count == 2 && strcmp(list[0].name, "fault_add") == 0 &&
                         strcmp(list[0].signature, "fault_add(a: int, b: int) -> int") == 0 &&
                         strcmp(list[1].name, "fault_scale") == 0 &&
                         strcmp(list[1].signature, "fault_scale(x: float, k: int) -> float") == 0));
  pf_module_list_free(list);
  pf_object_release(scale);
  pf_object_release(add);
  pf_object_release(mod);
  return rc != 0 ? -1 : ok ? 0 : wrong("first load");
}

/* ---- full native stacks (PACKFN_BACKTRACE=1: the fault_alloc_backtrace run) ---- */

/* err (owned) is the preallocated MemoryError a raise gave for want of memory: it must refuse a
 * cause and keep its empty backtrace. Raises it again; -1. */
static int shared_memory_error(pf_object_t* err) {
  int ok = pf_error_set_cause(err, NULL) == -1;
  pf_object_t* refusal = pf_error_take();
  ok = ok && refusal &&
       strstr(pf_error_message(refusal), "packfn's shared MemoryError, which takes no cause");
  pf_object_release(refusal);
  ok = ok && pf_error_append_backtrace(err, "line\n") == 0 &&
       strcmp(pf_error_backtrace(err), "") == 0 && pf_error_cause(err) == NULL;
  pf_error_raise(err);
  pf_object_release(err);
  return ok ? -1 : wrong("the shared MemoryError");
}

/* 1 when bt starts with a frame and holds the raise site in raise_and_read. */
static int has_site(const char* bt) {
  return bt && strncmp(bt, "  File \"", 8) == 0 && strstr(bt, ", in raise_and_read\n");
}

/* Raises a message past the 511-byte stack buffer, reads its backtrace (the native frames are
 * named then) and appends a line (named again first); raises another and appends to it unread
 * (named as the text changes); raises a third and releases it unread. 0, or -1 with the error
 * raised (a MemoryError). */
static __attribute__((noinline)) int raise_and_read(void) {
  char big[600];
  memset(big, 'b', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  PF_ERROR_SET(PF_ERR_VALUE, "%s!", big);
  pf_object_t* err = pf_error_take();
  if (!err)
    return wrong("PF_ERROR_SET raised nothing");
  if (strcmp(pf_error_kind(err), PF_ERR_MEMORY) == 0)
    return shared_memory_error(err);
  /* the whole message, or its first 511 bytes when the longer copy found no memory */
  const char* msg = pf_error_message(err);
  size_t len = strlen(msg);
  int ok = strcmp(pf_error_kind(err), PF_ERR_VALUE) == 0 &&
           ((len == sizeof big && strspn(msg, "b") == len - 1 && msg[len - 1] == '!') ||
            (len == 511 && strspn(msg, "b") == len));
  /* the raise site first, whether the frames could be named or not */
  ok = ok && has_site(pf_error_backtrace(err));
  const char* line = "  File \"x.py\", line 1, in f\n";
  ok = ok && pf_error_append_backtrace(err, line) == 0 && has_site(pf_error_backtrace(err));
  pf_object_release(err);
  if (!ok)
    return wrong("a raised error's message or backtrace");
  PF_ERROR_SET(PF_ERR_KEY, "appended unread");
  err = pf_error_take();
  if (err && strcmp(pf_error_kind(err), PF_ERR_MEMORY) == 0)
    return shared_memory_error(err);
  ok = err && pf_error_append_backtrace(err, line) == 0 && has_site(pf_error_backtrace(err));
  pf_object_release(err);
  if (!ok)
    return wrong("an appended backtrace");
  PF_ERROR_SET(PF_ERR_KEY, "released unread");
  err = pf_error_take();
  if (err && strcmp(pf_error_kind(err), PF_ERR_MEMORY) == 0)
    return shared_memory_error(err);
  ok = err && strcmp(pf_error_message(err), "released unread") == 0;
  pf_object_release(err);
  return ok ? 0 : wrong("an error released unread");
}

/* Maps and unmaps a library: the next naming of frames empties the cache of frame names. */
static int unload_one(void) {
  void* h = dlopen(unmapped_path, RTLD_NOW | RTLD_LOCAL);
  if (!h || dlclose(h) != 0) {
    PF_ERROR_SET(PF_ERR_OS, "%s", dlerror());
    return -1;
  }
  return 0;
}

/* Unswept: an unload, then a raise read in a new thread, whose stack is the same whoever runs
 * the program (pf_fault's first run or a swept point): the cache of frame names is emptied and
 * then holds that stack's lines, the same blocks kept at every point. */
static void* refill_frame_names(void* unused) {
  (void)unused;
  return (void*)(intptr_t)(raise_and_read() == 0);
}

/* A raise read after an unload (the previous run's), so that its frames are named anew
 * (backtrace_symbols and the cache's copies under the sweep too). The unloads themselves run
 * unswept: a library's unload runs its code (coverage builds: gcov's dump, which allocates). */
static int prog_backtraces(void) {
  int rc = raise_and_read();
  fault_disarm();
  pthread_t t;
  void* refilled = NULL;
  if (unload_one() != 0 || pthread_create(&t, NULL, refill_frame_names, NULL) != 0 ||
      pthread_join(t, &refilled) != 0 || !refilled || unload_one() != 0) {
    pf_error_clear();
    return wrong("the unswept raise in a thread");
  }
  return rc;
}

typedef struct program_s {
  const char* name;
  int (*run)(void);
  int loader;         /* loads a library: the dynamic loader reports out-of-memory as OSError,
                         a constructor's failed registration as RuntimeError (its cause) */
  long (*held)(void); /* blocks the runtime keeps on purpose now, or NULL for none */
  int forked;         /* each point in a child process, from the same state */
  long* kept;         /* forked: receives the blocks the unswept run kept beyond held's */
  int skip_loader;    /* the dynamic loader's own allocations are not failed */
} program_t;

static const program_t programs[] = {
    {.name = "objects", .run = prog_objects},
    {.name = "strings", .run = prog_strings},
    {.name = "bytes objects", .run = prog_bytes_objects},
    {.name = "fn texts", .run = prog_function_texts, .held = texts_table_held, .forked = 1},
    {.name = "functions", .run = prog_functions},
    {.name = "tensors", .run = prog_tensors},
    {.name = "views", .run = prog_views},
    {.name = "containers", .run = prog_containers},
    {.name = "errors", .run = prog_errors},
    {.name = "deep causes", .run = prog_deep_causes},
    {.name = "module", .run = prog_module, .loader = 1},
    {.name = "globals", .run = prog_globals},
    {.name = "lists", .run = prog_lists},
    {.name = "dicts", .run = prog_dicts},
    {.name = "long chain", .run = prog_long_chain},
    {.name = "exports", .run = prog_exports},
    {.name = "bare texts", .run = prog_bare_texts},
    {.name = "growth", .run = prog_global_growth, .held = table_blocks, .forked = 1},
    {.name = "first load",
     .run = prog_first_load,
     .loader = 1,
     .held = first_load_held,
     .forked = 1,
     .kept = &first_load_kept,
     .skip_loader = 1},
    {.name = "backtraces", .run = prog_backtraces},
};

static long bad_points;

static void report(const program_t* p, long n, const char* fmt, const char* detail) {
  if (++bad_points <= 40) {
    fprintf(stderr, "pf_fault: FAIL: %s, allocation %ld: ", p->name, n);
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
  }
}

/* 1 when err is a MemoryError or, for a program that loads a library, an OSError (the dynamic
 * loader's) or a RuntimeError with a MemoryError as its cause (a constructor's registration). */
static int memory_error(const program_t* p, pf_object_t* err) {
  const char* kind = pf_error_kind(err);
  if (strcmp(kind, PF_ERR_MEMORY) == 0)
    return 1;
  if (!p->loader)
    return 0;
  pf_object_t* cause = pf_error_cause(err);
  return strcmp(kind, PF_ERR_OS) == 0 || (strcmp(kind, PF_ERR_RUNTIME) == 0 && cause &&
                                          strcmp(pf_error_kind(cause), PF_ERR_MEMORY) == 0);
}

/* Runs p with allocation n failing (0: none). 1 when the program ran past its last allocation
 * without the failure firing (the sweep is complete). */
static int run_point(const program_t* p, long n) {
  long held_before = p->held ? p->held() : 0;
  dl_flush();
  long live_before = fault_live_blocks();
  long objects_before = objects_alive;
  if (p->skip_loader)
    fault_skip_loader(loader_lo, loader_hi);
  fault_arm(n);
  int rc = p->run();
  fault_disarm();
  fault_skip_loader(0, 0);
  int fired = fault_fired();
  pf_object_t* err = pf_error_take();
  if (rc != 0 && rc != -1)
    report(p, n, "returned %s", "neither 0 nor -1");
  if (rc == -1) {
    if (!err)
      report(p, n, "%s", "returned -1 with no error raised");
    else if (!fired)
      report(p, n, "failed with no allocation failed: %s", pf_error_message(err));
    else if (!memory_error(p, err)) {
      char text[512];
      snprintf(text, sizeof text, "%s: %s", pf_error_kind(err), pf_error_message(err));
      report(p, n, "an allocation failure raised %s, not MemoryError", text);
    }
  } else if (rc == 0 && err) {
    report(p, n, "succeeded but left an error raised: %s", pf_error_message(err));
  }
  /* every error, the preallocated MemoryError included, has the hook other runtimes call
   * without checking it for NULL when they re-raise it (TVM-FFI's C++ and Python) */
  if (err && !((const pf_error_cell_t*)(err + 1))->update_backtrace)
    report(p, n, "raised an error without update_backtrace: %s", pf_error_message(err));
  pf_object_release(err);
  if (objects_alive != objects_before)
    report(p, n, "%s", "counted objects or closures were not destroyed");
  long held = p->held ? p->held() - held_before : 0;
  dl_flush();
  long leaked = fault_live_blocks() - live_before - held;
  if (leaked != 0) {
    char text[32];
    snprintf(text, sizeof text, "%ld", leaked);
    report(p, n, "%s blocks leaked", text);
  }
  return !fired;
}

/* A child leaves through _exit, which writes no coverage counters: under tools/coverage.sh
 * (PF_FAULT_COVERAGE, set by CMake for a --coverage build) it writes them first, those of every
 * library the process loaded, or the forked programs' failure paths counted as never run. */
#ifdef PF_FAULT_COVERAGE
void __gcov_dump(void);
#define coverage_dump() __gcov_dump()
#else
#define coverage_dump() ((void)0)
#endif

#define MAX_POINTS 100000 /* a sweep that never completes (a child crashing forever) stops */

/* run_point in a child process: 1 when the sweep is complete (or must stop); a child that
 * failed a check or died is a bad point here too. */
static int run_point_forked(const program_t* p, long n) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    report(p, n, "cannot fork: %s", strerror(errno));
    return 1;
  }
  if (pid == 0) {
    long before = bad_points;
    int complete = run_point(p, n);
    fflush(stderr);
    coverage_dump();
    _exit((complete ? 1 : 0) | (bad_points != before ? 2 : 0));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      report(p, n, "cannot wait for the child: %s", strerror(errno));
      return 1;
    }
  if (WIFSIGNALED(status)) {
    report(p, n, "crashed: %s", strsignal(WTERMSIG(status)));
    return n >= MAX_POINTS;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 4;
  if (code > 3) {
    report(p, n, "%s", "the child exited abnormally");
    return 1;
  }
  if (code & 2)
    ++bad_points; /* the child printed what */
  return (code & 1) || n >= MAX_POINTS;
}

/* The unswept first run of a forked program, in a child: it must succeed; sets *p->kept (when
 * asked) to the blocks it kept beyond the table's. 0, or 1 after printing why not. */
static int warm_forked(const program_t* p) {
  long* shared =
      mmap(NULL, sizeof(long) * 2, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    fprintf(stderr, "pf_fault: mmap: %s\n", strerror(errno));
    return 1;
  }
  shared[0] = -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    long table_before = table_blocks();
    dl_flush();
    long live_before = fault_live_blocks();
    int rc = p->run();
    pf_object_t* err = pf_error_take();
    if (rc != 0 || err)
      fprintf(stderr, "pf_fault: %s fails without fault injection: %s\n", p->name,
              err ? pf_error_message(err) : "(no error)");
    pf_object_release(err);
    long table = table_blocks() - table_before;
    dl_flush();
    shared[1] = fault_live_blocks() - live_before - table;
    shared[0] = rc == 0 && !err;
    coverage_dump();
    _exit(0);
  }
  int status = 0;
  int ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && shared[0] == 1;
  if (p->kept)
    *p->kept = shared[1];
  munmap(shared, sizeof(long) * 2);
  if (!ok)
    fprintf(stderr, "pf_fault: %s: its unswept run failed in the child\n", p->name);
  return !ok;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODULE_PATH FIRST_LOAD_PATH UNMAPPED_PATH\n", argv[0]);
    return 2;
  }
  const char* env = getenv("PACKFN_NO_ALLOC_CACHE");
  if (!env || strcmp(env, "1") != 0) {
    fprintf(stderr, "pf_fault: set PACKFN_NO_ALLOC_CACHE=1 (cached blocks would count as leaks)\n");
    return 2;
  }
  module_path = argv[1];
  first_load_path = argv[2];
  unmapped_path = argv[3];
  const char* only = getenv("PF_FAULT_ONLY"); /* one program's sweep (a run with other settings) */
  unsigned long base = getauxval(AT_BASE);
  if (!base || !dl_iterate_phdr(find_loader, (void*)base) || loader_lo == loader_hi) {
    fprintf(stderr, "pf_fault: cannot find the dynamic loader's code\n");
    return 1;
  }
  /* the dynamic loader allocates once at the process's first unmapping of a library: let that
   * happen here, not in a child whose refused first load unmaps its library */
  void* unmapped = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
  if (!unmapped || dlclose(unmapped) != 0) {
    fprintf(stderr, "pf_fault: cannot map and unmap %s: %s\n", argv[3], dlerror());
    return 1;
  }
  dl_flush();
  if (pf_type_register("packfn.fault.Obj", PF_TYPE_OBJECT, &fault_type) != 0)
    return 1;
  long total_points = 0;
  for (size_t i = 0; i < sizeof programs / sizeof programs[0]; ++i) {
    const program_t* p = &programs[i];
    if (only && strcmp(only, p->name) != 0)
      continue;
    /* a first run allocates what lives for the process (the module stays mapped, per-thread
     * slots) so the sweep sees only what the program itself owns; a forked program's runs
     * in children, so that each point loads its library for the first time */
    if (p->forked ? warm_forked(p) != 0 : p->run() != 0) {
      pf_object_t* err = pf_error_take();
      fprintf(stderr, "pf_fault: %s fails without fault injection: %s\n", p->name,
              err ? pf_error_message(err) : "(no error)");
      pf_object_release(err);
      return 1;
    }
    long before = bad_points;
    long n = 1;
    while (!(p->forked ? run_point_forked(p, n) : run_point(p, n)))
      ++n;
    total_points += n - 1;
    printf("pf_fault: %-10s %4ld allocation points failed in turn, %ld bad\n", p->name, n - 1,
           bad_points - before);
  }
  printf("pf_fault: %ld allocation points in all, %ld bad\n", total_points, bad_points);
  return bad_points == 0 ? 0 : 1;
}
