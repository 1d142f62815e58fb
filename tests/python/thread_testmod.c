/* tests/python/thread_testmod.c: a packfn function that calls its function argument on a new
 * thread and waits for it, as a C library may (conftest.py compiles it against the installed
 * package). call_in_thread(fn, x) -> fn(x) called on another thread; fn may also be an Array
 * or Map holding the function (depth first: an Array's items, a Map's values), as a C library
 * taking a list of hooks may. fail_after_notify(cb): raises ValueError, calls cb() (as cleanup
 * code may call a hook), then fails with the error it raised. */
#include <pthread.h>

#include <packfn/packfn.h>

typedef struct {
  pf_object_t* fn;
  pf_any_t arg;
  pf_any_t result;
  int rc;
  pf_object_t* error; /* the thread's error, handed back to the caller's thread */
} job_t;

static void* run(void* p) {
  job_t* job = p;
  job->rc = pf_function_call(job->fn, &job->arg, 1, &job->result);
  job->error = job->rc != 0 ? pf_error_take() : NULL;
  return NULL;
}

/* The first function in `v` (borrowed): `v` itself, or one found depth first among an Array's
 * or List's items or a Map's or Dict's values; NULL when none. */
static pf_object_t* find_function(const pf_any_t* v, int depth) {
  if (v->type_index == PF_TYPE_FUNCTION)
    return v->v_obj;
  if (v->type_index < PF_TYPE_STATIC_OBJECT_BEGIN || depth > 8)
    return NULL;
  pf_object_t* o = v->v_obj;
  pf_object_t* fn = NULL;
  if (o->type_index == PF_TYPE_ARRAY || o->type_index == PF_TYPE_LIST) {
    const pf_any_t* items;
    size_t n;
    if (pf_array_items(o, &items, &n) != 0)
      return NULL;
    for (size_t i = 0; !fn && i < n; ++i)
      fn = find_function(&items[i], depth + 1);
  } else if (o->type_index == PF_TYPE_MAP || o->type_index == PF_TYPE_DICT) {
    pf_map_iter_t it;
    const pf_any_t *key, *value;
    if (pf_map_iter_init(o, &it) != 0)
      return NULL;
    while (!fn && pf_map_iter_next(&it, &key, &value) == 1)
      fn = find_function(value, depth + 1);
  }
  return fn;
}

static int call_in_thread(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  pf_object_t* fn = num_args == 2 ? find_function(&args[0], 0) : NULL;
  if (!fn) {
    pf_error_clear(); /* a failed walk's error, if any: the TypeError below says it */
    pf_error_set(PF_ERR_TYPE,
                 "call_in_thread: expected (fn, x), fn a function or an Array or "
                 "Map holding one, got %d arguments",
                 (int)num_args);
    return -1;
  }
  job_t job = {fn, args[1], {PF_TYPE_NONE, {0}, {.v_int64 = 0}}, 0, NULL};
  pthread_t t;
  if (pthread_create(&t, NULL, run, &job) != 0) {
    pf_error_set(PF_ERR_OS, "call_in_thread: cannot start a thread");
    return -1;
  }
  pthread_join(t, NULL);
  if (job.rc != 0) {
    if (job.error) {
      (void)pf_error_raise(job.error);
      pf_object_release(job.error);
    }
    return -1;
  }
  *result = job.result;
  return 0;
}
PF_EXPORT(call_in_thread, call_in_thread);

static int fail_after_notify(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  pf_object_t* cb;
  if (num_args != 1 || pf_any_as_object(&args[0], &cb) != 0)
    return -1;
  pf_error_set(PF_ERR_VALUE, "the failure raised before the hook ran");
  pf_any_t r;
  if (pf_function_call(cb, NULL, 0, &r) == 0)
    pf_any_release(&r);
  *result = pf_any_none();
  return -1;
}
PF_EXPORT(fail_after_notify, fail_after_notify);
