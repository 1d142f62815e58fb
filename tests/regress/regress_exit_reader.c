/* Regression test (review of the ninth session's tree): a thread still using packfn while the
 * process exits. libpackfn's destructors freed the type registry at exit, under a thread reading
 * it (a detached thread, a Python daemon thread): the reader then got NULL for a registered type,
 * or read freed memory (valgrind: "Invalid read ... free'd by pf__types_fini"). Registered types
 * now live as long as the process.
 * A reader thread checks a registered type's info and name without pause; main returns while it
 * runs, and a library linked after libpackfn (exit_pause.c) pauses 200 ms in its destructor,
 * after libpackfn's have run. If the reader ever finds the type gone, it ends the process with
 * status 1 (exit has no other way to report it); status 0 otherwise. Before the fix: status 1 or
 * a crash. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "packfn/packfn.h"

void regress_exit_pause(long ms); /* exit_pause.c */

static const char key[] = "regress.ExitReaderType";
static int32_t index_;
static int running; /* atomic */

static void* reader(void* unused) {
  (void)unused;
  for (;;) {
    const pf_type_info_t* info = pf_type_info(index_);
    const char* name = pf_type_name(index_);
    if (!info || !name || strcmp(info->key, key) != 0 || strcmp(name, key) != 0) {
      static const char msg[] = "FAIL: a registered type was gone while the process exited\n";
      (void)!write(2, msg, sizeof msg - 1);
      _exit(1);
    }
    __atomic_store_n(&running, 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

int main(void) {
  if (pf_type_register(key, PF_TYPE_OBJECT, &index_) != 0) {
    fprintf(stderr, "FAIL: pf_type_register: %s\n", pf_error_message(pf_error_peek()));
    return 1;
  }
  regress_exit_pause(200);
  pthread_t t;
  if (pthread_create(&t, NULL, reader, NULL) != 0 || pthread_detach(t) != 0)
    return 2;
  while (!__atomic_load_n(&running, __ATOMIC_ACQUIRE))
    sched_yield();
  printf("ok: returning from main while the reader runs\n");
  fflush(stdout);
  return 0; /* exit(): libpackfn's destructors run while the reader still reads */
}
