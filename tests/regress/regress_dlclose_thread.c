/* Regression test, issue 10 defect 3: a host dlopen()s libpackfn, a thread uses it (filling
 * its per-thread block cache, raising an error and looking a global name up, so the three
 * thread-exit destructors are armed), the host dlclose()s libpackfn while that thread still runs,
 * then the thread exits. Expected after the fix: the thread exits cleanly (keys deleted at unload,
 * or the library pinned). Today: the destructors run in unmapped code (SIGSEGV at thread exit).
 *   regress_dlclose_thread PATH_TO_libpackfn.so
 * Uses dlsym only: this program does not link libpackfn. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

typedef int (*string_create_t)(const char*, size_t, pf_object_t**);
typedef int (*error_create_t)(const char*, const char*, const char*, pf_object_t**);
typedef int (*error_raise_t)(pf_object_t*);
typedef void (*object_release_slow_t)(pf_object_t*, uint64_t);
typedef int (*global_get_bytes_t)(const char*, size_t, pf_object_t**);

static void* lib;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage; /* 1: the thread used packfn; 2: the host closed the library */

/* dlsym into a function pointer: POSIX guarantees the conversion, memcpy keeps ISO C quiet. */
#define LOOKUP(var, name)                                                                          \
  do {                                                                                             \
    void* addr_ = dlsym(lib, name);                                                                \
    memcpy(&(var), &addr_, sizeof(var));                                                           \
  } while (0)

static void* worker(void* arg) {
  (void)arg;
  string_create_t string_create;
  error_create_t error_create;
  error_raise_t error_raise;
  object_release_slow_t release_slow;
  global_get_bytes_t global_get;
  LOOKUP(global_get, "pf_global_get_bytes");
  LOOKUP(string_create, "pf_string_object_create");
  LOOKUP(error_create, "pf_error_create");
  LOOKUP(error_raise, "pf_error_raise");
  LOOKUP(release_slow, "pf__object_release_slow");
  if (!string_create || !error_create || !error_raise || !release_slow || !global_get) {
    fprintf(stderr, "FAIL: dlsym: %s\n", dlerror());
    pthread_mutex_lock(&lock);
    stage = 3; /* tells the host to stop waiting */
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    return (void*)1;
  }
  /* a string object through the block cache, then its memory back into the cache: the
   * release path is inline, so free it by dropping the count the way pf_object_release does */
  static const char text[] = "a string long enough to be an object, not a small string";
  pf_object_t* s;
  if (string_create(text, sizeof text - 1, &s) == 0) {
    uint64_t before = __atomic_fetch_sub(&s->combined_ref_count, 1, __ATOMIC_ACQ_REL);
    if ((uint32_t)before == 1)
      release_slow(s, before);
  }
  /* a global lookup registers this thread as a reader of the table (its own exit hook) */
  pf_object_t* fn = NULL;
  (void)global_get("no.such.function", 16, &fn);
  pf_object_t* err;
  if (error_create("ValueError", "raised in the worker", NULL, &err) == 0) {
    error_raise(err); /* the slot keeps its own reference: armed until thread exit */
    uint64_t before = __atomic_fetch_sub(&err->combined_ref_count, 1, __ATOMIC_ACQ_REL);
    (void)before; /* the slot still holds one, so this is never the last */
  }
  pthread_mutex_lock(&lock);
  stage = 1;
  pthread_cond_broadcast(&cond);
  while (stage != 2)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  return NULL; /* thread-exit destructors run here */
}

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && strcmp(argv[2], "unmapped") == 0)) {
    fprintf(stderr, "usage: %s LIBPACKFN [unmapped]\n", argv[0]);
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0)
    return 1;
  pthread_mutex_lock(&lock);
  while (stage == 0)
    pthread_cond_wait(&cond, &lock);
  int used = stage == 1;
  pthread_mutex_unlock(&lock);
  if (!used) {
    pthread_join(t, NULL);
    return 1;
  }
  dlclose(lib);
  void* still = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  printf("libpackfn %s after dlclose\n", still ? "stays mapped" : "is unmapped");
  if (still)
    dlclose(still);
  if (still && argc == 3) {
    /* a library holding packfn statically: its unload path is what this run must exercise */
    fprintf(stderr, "FAIL: expected %s to be unmapped by dlclose\n", argv[1]);
    return 1;
  }
  fflush(stdout);
  pthread_mutex_lock(&lock);
  stage = 2;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  void* rc;
  pthread_join(t, &rc);
  if (rc) {
    fprintf(stderr, "FAIL: the worker failed\n");
    return 1;
  }
  printf("ok: the worker exited after libpackfn was closed\n");
  return 0;
}
