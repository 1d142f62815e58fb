/* A library regress_exit_reader links after libpackfn: its destructor, which runs after
 * libpackfn's at exit, pauses, so the reader thread is still running (and checking) after every
 * destructor of libpackfn has run, instead of the process ending a few microseconds later. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

static long pause_ms;

/* How long the destructor pauses (the program calls it, which also keeps it linked). */
__attribute__((visibility("default"))) void regress_exit_pause(long ms) {
  pause_ms = ms;
}

__attribute__((destructor)) static void regress_exit_pause_fini(void) {
  if (pause_ms > 0)
    nanosleep(&(struct timespec){pause_ms / 1000, (pause_ms % 1000) * 1000000L}, NULL);
}
