/* Current streams with TVM-FFI in the process: once joined, packfn's pf_stream_get/pf_stream_set
 * and TVM-FFI's TVMFFIEnvGetStream/TVMFFIEnvSetStream are one per-thread table, so a stream a
 * host makes current on one side is the one kernels of the other launch on.
 *   streams_interop late LIBTVM_FFI      streams made current before libtvm_ffi is loaded move
 *                                        to its table at the join; then shared both ways, per
 *                                        thread; a device TVM-FFI cannot index stays packfn's
 *   streams_interop apart LIBTVM_FFI     PACKFN_NO_TVM_FFI=1: each runtime keeps its own
 *   streams_interop host LIBTVM_FFI      a stream made current before the join, then another
 *                                        for the same device through TVM-FFI after it (a host
 *                                        around a call): packfn's first stream call moves its
 *                                        own only where TVM-FFI's table holds the default
 *   streams_interop teardown LIBTVM_FFI  stream calls in a thread's key destructors, after
 *                                        TVM-FFI's thread_local table is gone, before and after
 *                                        packfn's own table is freed: every device on its
 *                                        default stream, nothing read from either dead table
 *                                        (run under valgrind in CI's memcheck stage)
 * No GPU is touched: streams are opaque handles here. This program links only libpackfn and
 * loads libtvm_ffi with dlopen. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

#include "interop_check.h"

static int (*env_set)(int32_t, int32_t, void*, void**);
static void* (*env_get)(int32_t, int32_t);

static const DLDevice gpu0 = {kDLCUDA, 0};
static const DLDevice gpu1 = {kDLCUDA, 1};
static const DLDevice far = {kDLCUDA, 5000}; /* beyond what packfn asks TVM-FFI to index */
#define S(n) ((void*)(uintptr_t)(0x1000 * (n)))

static void* thread_main(void* arg) {
  (void)arg;
  /* a new thread starts on the default streams on both sides, whatever main made current */
  CHECK(pf_stream_get(gpu0) == NULL);
  CHECK(env_get(kDLCUDA, 0) == NULL);
  void* prev = S(99);
  CHECK(pf_stream_set(gpu0, S(7), &prev) == 0);
  CHECK(prev == NULL);
  CHECK(env_get(kDLCUDA, 0) == S(7));
  return NULL;
}

static void shared_both_ways(void) {
  void* prev = S(99);
  CHECK(pf_stream_set(gpu1, S(2), &prev) == 0);
  CHECK(prev == NULL);
  CHECK(env_get(kDLCUDA, 1) == S(2));
  CHECK(env_set(kDLCUDA, 1, S(3), NULL) == 0);
  CHECK(pf_stream_get(gpu1) == S(3));
  CHECK(pf_stream_set(gpu1, NULL, &prev) == 0); /* back to the default on both sides */
  CHECK(prev == S(3));
  CHECK(env_get(kDLCUDA, 1) == NULL);
  CHECK(pf_stream_get(gpu1) == NULL);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(pf_stream_get(gpu0) == S(1)); /* the thread's streams were its own */
}

static pthread_key_t early_key, late_key; /* made before and after packfn's streams key */
static int late_rounds;

/* A key destructor: runs after the thread's C++ thread_locals, TVM-FFI's table among them, are
 * destroyed. packfn must not read that table then. */
static void late_stream_calls(void* value) {
  (void)value;
  CHECK(pf_stream_get(gpu0) == NULL); /* the thread's teardown: default streams */
  void* prev = S(99);
  CHECK(pf_stream_set(gpu0, S(8), &prev) == 0);
  CHECK(pf_stream_get(gpu0) == S(8));
  CHECK(pf_stream_set(gpu0, NULL, NULL) == 0);
  late_rounds++;
}

static void* teardown_thread(void* arg) {
  (void)arg;
  CHECK(pthread_setspecific(early_key, (void*)1) == 0);
  CHECK(pthread_setspecific(late_key, (void*)1) == 0);
  CHECK(pf_stream_set(gpu0, S(4), NULL) == 0); /* the thread uses TVM-FFI's table */
  CHECK(env_get(kDLCUDA, 0) == S(4));
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc == 3 ? argv[1] : "";
  int late = strcmp(mode, "late") == 0, apart = strcmp(mode, "apart") == 0;
  int teardown = strcmp(mode, "teardown") == 0, host = strcmp(mode, "host") == 0;
  if (!late && !apart && !teardown && !host) {
    fprintf(stderr, "usage: streams_interop late|apart|teardown|host LIBTVM_FFI\n");
    return 2;
  }
  if (late || host) { /* made current before libtvm_ffi is there */
    CHECK(pf_tvm_ffi_join() == 0);
    CHECK(pf_stream_set(gpu0, S(1), NULL) == 0);
    CHECK(pf_stream_set(far, S(5), NULL) == 0);
  }
  if (host)
    CHECK(pf_stream_set(gpu1, S(2), NULL) == 0);
  void* tvm = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
  if (!tvm) {
    fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
    return 1;
  }
  *(void**)&env_set = dlsym(tvm, "TVMFFIEnvSetStream");
  *(void**)&env_get = dlsym(tvm, "TVMFFIEnvGetStream");
  CHECK(env_set != NULL && env_get != NULL);
  if (!env_set || !env_get)
    return 1;
  CHECK(pf_tvm_ffi_join() == !apart);

  if (apart) {
    CHECK(pf_stream_set(gpu0, S(1), NULL) == 0);
    CHECK(env_get(kDLCUDA, 0) == NULL);
    CHECK(env_set(kDLCUDA, 0, S(2), NULL) == 0);
    CHECK(pf_stream_get(gpu0) == S(1));
  } else if (host) {
    /* The host makes S(6) current on gpu0 through TVM-FFI before packfn's first stream call
     * since the join, and calls in: packfn's kernels launch on the host's stream, and the pre-join
     * S(1) does not overwrite it (it did: the launch went to S(1), and the host's S(6) was gone
     * from TVM-FFI's table until the host restored its prev) */
    void* prev = S(99);
    CHECK(env_set(kDLCUDA, 0, S(6), &prev) == 0);
    CHECK(prev == NULL);
    CHECK(pf_stream_get(gpu0) == S(6));
    CHECK(env_get(kDLCUDA, 0) == S(6));
    CHECK(pf_stream_get(gpu1) == S(2)); /* where TVM-FFI held the default, packfn's moved */
    CHECK(env_get(kDLCUDA, 1) == S(2));
    CHECK(env_set(kDLCUDA, 0, prev, NULL) == 0); /* the host restores */
    CHECK(pf_stream_get(gpu0) == NULL);
    CHECK(pf_stream_set(gpu1, NULL, &prev) == 0);
    CHECK(prev == S(2));
    CHECK(env_get(kDLCUDA, 1) == NULL);
    CHECK(pf_stream_get(far) == S(5)); /* stays packfn's */
    CHECK(pf_stream_set(far, NULL, NULL) == 0);
  } else if (late) {
    CHECK(pf_stream_get(gpu0) == S(1)); /* the first call after the join moves it */
    CHECK(env_get(kDLCUDA, 0) == S(1));
    CHECK(pf_stream_get(far) == S(5)); /* stays packfn's */
    shared_both_ways();
    CHECK(pf_stream_set(far, NULL, NULL) == 0);
    CHECK(pf_stream_set(gpu0, NULL, NULL) == 0);
    CHECK(env_get(kDLCUDA, 0) == NULL);
  } else {
    /* one key destructor runs before packfn's streams key frees the thread's table, one
     * after it (glibc runs them by key number) */
    CHECK(pthread_key_create(&early_key, late_stream_calls) == 0);
    CHECK(pf_stream_get(gpu0) == NULL); /* makes packfn's streams key */
    CHECK(pthread_key_create(&late_key, late_stream_calls) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, teardown_thread, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(late_rounds == 2);
  }
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  return failures != 0;
}
