/* A library with REGRESS_TLS_HOG_BYTES of initial-exec thread-local storage, as libraries built
 * with that model (or linked with -ftls-model=initial-exec) have: loaded with dlopen, its block
 * is taken from the static TLS space glibc keeps for libraries loaded late, and what it takes is
 * no longer there for libpackfn (regress_static_tls). */
#include <string.h>

#ifndef REGRESS_TLS_HOG_BYTES
#define REGRESS_TLS_HOG_BYTES 900
#endif

/* exported, so that no optimiser may drop it (a static one written and never read may go) */
__attribute__((visibility("default"))) _Thread_local char regress_tls_hog[REGRESS_TLS_HOG_BYTES]
    __attribute__((tls_model("initial-exec")));

/* Writes every byte of the calling thread's block; returns its size. */
__attribute__((visibility("default"))) int regress_tls_hog_touch(void) {
  memset(regress_tls_hog, 1, sizeof regress_tls_hog);
  return (int)sizeof regress_tls_hog;
}
