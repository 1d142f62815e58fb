/* Regression test (review of the ninth session's tree): an error raised in a thread's exit after
 * packfn's own thread-exit hook has run, by the destructor of a thread key the program made after
 * packfn's, stayed in the dead thread's slot for good (the hook was not armed again). Now the
 * hook runs once more in glibc's next round of key destructors and releases it.
 * The program keeps a weak reference to that error and checks, after joining the thread, that
 * it was destroyed. Exit status 0 when it was, 1 when it is still alive (leaked). */
#include <pthread.h>
#include <stdio.h>

#include "packfn/packfn.h"

static pthread_key_t late_key;
static pf_object_t* late_error; /* weak */

static void late_destructor(void* value) {
  (void)value;
  pf_object_t* err;
  if (pf_error_create(PF_ERR_VALUE, "raised in a key destructor at thread exit", NULL, &err) != 0)
    return;
  pf_object_weak_retain(err);
  late_error = err;
  (void)pf_error_raise(err); /* the thread's slot takes its own reference */
  pf_object_release(err);    /* left pending: the thread is exiting */
}

static void* worker(void* unused) {
  (void)unused;
  PF_ERROR_SET(PF_ERR_VALUE, "an early error"); /* arms packfn's thread-exit hook */
  pf_error_clear();
  (void)pthread_setspecific(late_key, (void*)1);
  return NULL;
}

int main(void) {
  /* packfn's key is made at the process's first raise: before the program's own */
  PF_ERROR_SET(PF_ERR_VALUE, "the first error");
  pf_error_clear();
  if (pthread_key_create(&late_key, late_destructor) != 0)
    return 2;
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
    return 2;
  if (!late_error) {
    fprintf(stderr, "FAIL: the key destructor did not raise\n");
    return 1;
  }
  int alive = pf_object_weak_lock(late_error);
  if (alive)
    pf_object_release(late_error);
  pf_object_weak_release(late_error);
  if (alive) {
    fprintf(stderr, "FAIL: the error raised at thread exit is still alive (leaked)\n");
    return 1;
  }
  printf("ok: the error raised after packfn's thread-exit hook was released\n");
  return 0;
}
