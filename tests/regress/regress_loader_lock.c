/* Regression test (review of the ninth session's tree): packfn's locks against the dynamic
 * loader's. The main thread dlopen()s a plugin whose constructor (run under the loader's lock)
 * makes a packfn call while a worker thread makes the same kind of call, its first, which used to
 * take a packfn lock and then call into the loader (dlopen, dlsym, dladdr) under it: each
 * thread then waited for the other's lock forever.
 *   regress_loader_lock MODE PLUGIN [LIBTVM_FFI]
 * MODE join: the process's first registration and raise (joining TVM-FFI looks for it with
 *            dlopen); list: the first list growth after joining TVM-FFI (C++'s heap looked up
 *            with dlsym); raise: a raise whose frames are named (backtrace_symbols, dladdr), with
 *            TVM-FFI joined and PACKFN_BACKTRACE=1. list and raise need LIBTVM_FFI, loaded first.
 * Exits 0 when both threads finish; an alarm fails it after 30 s instead of hanging. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "packfn/packfn.h"

static const char* mode;

static void* worker(void* unused) {
  (void)unused;
  /* the main thread is in the plugin's constructor by now */
  nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
  if (strcmp(mode, "list") == 0) {
    pf_object_t* list;
    if (pf_list_create(&list) != 0)
      return (void*)1;
    pf_any_t v = pf_any_int(2);
    int rc = pf_list_append(list, &v);
    pf_object_release(list);
    return rc == 0 ? NULL : (void*)1;
  }
  PF_ERROR_SET(PF_ERR_VALUE, "raised in the worker");
  const char* bt = pf_error_backtrace(pf_error_peek());
  pf_error_clear();
  return bt ? NULL : (void*)1;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: still running after 30 s: a deadlock\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

int main(int argc, char** argv) {
  if (argc < 3 || (strcmp(argv[1], "join") != 0 && argc < 4)) {
    fprintf(stderr, "usage: regress_loader_lock join|list|raise PLUGIN [LIBTVM_FFI]\n");
    return 2;
  }
  mode = argv[1];
  signal(SIGALRM, on_alarm);
  alarm(30);
  if (setenv("PF_LOADER_LOCK_MODE", mode, 1) != 0)
    return 2;
  if (argc > 3) {
    if (!dlopen(argv[3], RTLD_NOW | RTLD_GLOBAL)) {
      fprintf(stderr, "FAIL: cannot load %s: %s\n", argv[3], dlerror());
      return 1;
    }
    if (!pf_tvm_ffi_join()) {
      fprintf(stderr, "FAIL: packfn did not join %s\n", argv[3]);
      return 1;
    }
  }
  if (strcmp(mode, "raise") == 0) {
    /* a raise first: backtrace() loads its unwinder (a dlopen) on its first call, which would
     * make the worker wait for the loader before it takes any lock of packfn's */
    PF_ERROR_SET(PF_ERR_VALUE, "raised before the worker starts");
    (void)pf_error_backtrace(pf_error_peek());
    pf_error_clear();
  }
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0)
    return 2;
  void* plugin = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  void* failed = NULL;
  pthread_join(t, &failed);
  if (!plugin) {
    fprintf(stderr, "FAIL: cannot load %s: %s\n", argv[2], dlerror());
    return 1;
  }
  if (failed) {
    fprintf(stderr, "FAIL: the worker's call failed\n");
    return 1;
  }
  printf("ok: %s: the constructor's call and the worker's both finished\n", mode);
  return 0;
}
