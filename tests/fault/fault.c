/* pf_fault: fails every allocation in turn. For each representative program and each N from 1
 * until the program completes without reaching its Nth allocation, it fails the Nth allocation
 * call and checks that the program either
 *   - fails: returns -1 with an error raised, MemoryError when the allocation failure caused it
 *     (module loading may also say OSError: the dynamic loader reports its own out-of-memory),
 *   - or succeeds with correct results (a failure absorbed, e.g. by the error fallback),
 * and in both cases leaks nothing: every block allocated is freed (fault_alloc.c counts them),
 * every counted object and closure is destroyed (their deleters count them), and no error is
 * left raised. A crash fails the test by itself.
 *   pf_fault MODULE_PATH      (tests/stress/stress_module.c built; PACKFN_NO_ALLOC_CACHE=1 must
 *                             be set: freed blocks then go back to free())
 * Exit status 0 when every point passed; 1 with each failed point printed otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "packfn/packfn.h"

static const char* module_path;
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
  pf_object_release(back);
  pf_object_release(r);
  pf_object_release(v);
  pf_object_release(t);
  return rc != 0 ? -1 : ok ? 0 : wrong("tensors");
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

typedef struct program_s {
  const char* name;
  int (*run)(void);
  int loader_may_say_os; /* the dynamic loader reports out-of-memory as its own error */
} program_t;

static const program_t programs[] = {
    {"objects", prog_objects, 0},       {"strings", prog_strings, 0},
    {"functions", prog_functions, 0},   {"tensors", prog_tensors, 0},
    {"containers", prog_containers, 0}, {"errors", prog_errors, 0},
    {"module", prog_module, 1},         {"globals", prog_globals, 0},
    {"lists", prog_lists, 0},           {"dicts", prog_dicts, 0},
    {"exports", prog_exports, 0},
};

static long bad_points;

static void report(const program_t* p, long n, const char* fmt, const char* detail) {
  if (++bad_points <= 40) {
    fprintf(stderr, "pf_fault: FAIL: %s, allocation %ld: ", p->name, n);
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
  }
}

/* Runs p with allocation n failing (0: none). 1 when the program ran past its last allocation
 * without the failure firing (the sweep is complete). */
static int run_point(const program_t* p, long n) {
  long live_before = fault_live_blocks();
  long objects_before = objects_alive;
  fault_arm(n);
  int rc = p->run();
  fault_disarm();
  int fired = fault_fired();
  pf_object_t* err = pf_error_take();
  if (rc != 0 && rc != -1)
    report(p, n, "returned %s", "neither 0 nor -1");
  if (rc == -1) {
    const char* kind = err ? pf_error_kind(err) : NULL;
    if (!err)
      report(p, n, "%s", "returned -1 with no error raised");
    else if (!fired)
      report(p, n, "failed with no allocation failed: %s", pf_error_message(err));
    else if (strcmp(kind, PF_ERR_MEMORY) != 0 &&
             !(p->loader_may_say_os && strcmp(kind, PF_ERR_OS) == 0))
      report(p, n, "an allocation failure raised %s instead of MemoryError", kind);
  } else if (rc == 0 && err) {
    report(p, n, "succeeded but left an error raised: %s", pf_error_message(err));
  }
  pf_object_release(err);
  if (objects_alive != objects_before)
    report(p, n, "%s", "counted objects or closures were not destroyed");
  long leaked = fault_live_blocks() - live_before;
  if (leaked != 0) {
    char text[32];
    snprintf(text, sizeof text, "%ld", leaked);
    report(p, n, "%s blocks leaked", text);
  }
  return !fired;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODULE_PATH\n", argv[0]);
    return 2;
  }
  const char* env = getenv("PACKFN_NO_ALLOC_CACHE");
  if (!env || strcmp(env, "1") != 0) {
    fprintf(stderr, "pf_fault: set PACKFN_NO_ALLOC_CACHE=1 (cached blocks would count as leaks)\n");
    return 2;
  }
  module_path = argv[1];
  if (pf_type_register("packfn.fault.Obj", PF_TYPE_OBJECT, &fault_type) != 0)
    return 1;
  long total_points = 0;
  for (size_t i = 0; i < sizeof programs / sizeof programs[0]; ++i) {
    const program_t* p = &programs[i];
    /* a first run allocates what lives for the process (the module stays mapped, per-thread
     * slots) so the sweep sees only what the program itself owns */
    if (p->run() != 0) {
      pf_object_t* err = pf_error_take();
      fprintf(stderr, "pf_fault: %s fails without fault injection: %s\n", p->name,
              err ? pf_error_message(err) : "(no error)");
      pf_object_release(err);
      return 1;
    }
    long before = bad_points;
    long n = 1;
    while (!run_point(p, n))
      ++n;
    total_points += n - 1;
    printf("pf_fault: %-10s %4ld allocation points failed in turn, %ld bad\n", p->name, n - 1,
           bad_points - before);
  }
  printf("pf_fault: %ld allocation points in all, %ld bad\n", total_points, bad_points);
  return bad_points == 0 ? 0 : 1;
}
