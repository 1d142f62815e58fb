/* tests/python/thread_testmod.c: a packfn function that calls its function argument on a new
 * thread and waits for it, as a C library may (conftest.py compiles it against the installed
 * package). call_in_thread(fn, x) -> fn(x) called on another thread. */
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

static int call_in_thread(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  if (num_args != 2 || args[0].type_index != PF_TYPE_FUNCTION) {
    pf_error_set(PF_ERR_TYPE, "call_in_thread: expected (fn, x), got %d arguments", (int)num_args);
    return -1;
  }
  job_t job = {args[0].v_obj, args[1], {PF_TYPE_NONE, {0}, {.v_int64 = 0}}, 0, NULL};
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
