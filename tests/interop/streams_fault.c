/* The move of streams made current before the join into TVM-FFI's table (streams_interop.c)
 * when TVMFFIEnvSetStream fails there (out of memory): pf_stream_get, which never raises, must
 * leave the caller's pending error as it was. TVM-FFI raises its failure over the pending error
 * (TVMFFIErrorSetRaised replaces it), and packfn dropped what was raised then, so the caller's
 * error was gone (review). Each allocation from the first of pf_stream_get's is failed in turn,
 * each in a child process: an armed failure in glibc's registration of the thread's exit hook
 * ends that child ("failed to register TLS destructor"), which is not counted; where the move
 * failed, the stream stays packfn's, and the pending error must be the caller's. Links the
 * allocation interposer of pf_fault (tests/fault), so not run under valgrind or sanitizers. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "packfn/packfn.h"

#include "fault.h"
#include "interop_check.h"

#define S(n) ((void*)(uintptr_t)(0x1000 * (n)))
static const DLDevice gpu0 = {kDLCUDA, 0};
static const char pending_text[] = "the caller's pending error";

enum { MOVE_FAILED_CHECKED = 10, NOT_FIRED, FIRED_ELSEWHERE };

/* One run with allocation n of pf_stream_get failed: its exit status. */
static int run(const char* libtvm, long n) {
  CHECK(pf_tvm_ffi_join() == 0);
  CHECK(pf_stream_set(gpu0, S(1), NULL) == 0); /* made current before libtvm_ffi is there */
  void* tvm = dlopen(libtvm, RTLD_NOW | RTLD_GLOBAL);
  if (!tvm) {
    fprintf(stderr, "dlopen %s: %s\n", libtvm, dlerror());
    return 1;
  }
  void* (*env_get)(int32_t, int32_t);
  *(void**)&env_get = dlsym(tvm, "TVMFFIEnvGetStream");
  CHECK(env_get != NULL);
  if (!env_get)
    return 1;
  CHECK(pf_tvm_ffi_join() == 1);
  (void)env_get(kDLCUDA, 0); /* the host has made the thread's TVM-FFI table */
  pf_error_set(PF_ERR_VALUE, "%s", pending_text);
  fault_arm(n);
  void* s = pf_stream_get(gpu0); /* the first stream call since the join: the move */
  int fired = fault_fired();
  fault_disarm();
  if (!fired)
    return NOT_FIRED;
  pf_object_t* e = pf_error_peek();
  CHECK(e != NULL && strcmp(pf_error_message(e), pending_text) == 0);
  if (e && strcmp(pf_error_message(e), pending_text) != 0)
    fprintf(stderr, "n = %ld: pending after pf_stream_get: %s\n", n, pf_error_message(e));
  if (env_get(kDLCUDA, 0) == S(1)) /* moved: the failure was elsewhere */
    return failures ? 1 : FIRED_ELSEWHERE;
  CHECK(s == S(1)); /* not moved: still packfn's */
  return failures ? 1 : MOVE_FAILED_CHECKED;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: streams_fault LIBTVM_FFI\n");
    return 2;
  }
  int checked = 0;
  for (long n = 1; n <= 16; ++n) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
      _exit(run(argv[1], n));
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status))
      continue; /* glibc's registration of the exit hook failed: it ends the process */
    int rc = WEXITSTATUS(status);
    CHECK(rc == MOVE_FAILED_CHECKED || rc == NOT_FIRED || rc == FIRED_ELSEWHERE);
    checked += rc == MOVE_FAILED_CHECKED;
    if (rc == NOT_FIRED)
      break; /* pf_stream_get made fewer allocations */
  }
  CHECK(checked > 0); /* some failure hit the move */
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  return failures != 0;
}
