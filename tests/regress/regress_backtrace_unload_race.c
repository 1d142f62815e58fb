/* Regression test (review of the error layer, rev22): a library unloaded while an error's frames
 * are being named (PACKFN_BACKTRACE=1, set by CTest). The naming drops its own names then, but it
 * still read the name cache, which another naming had emptied and filled for the new count of
 * unloads meanwhile: frames captured before the unload took lines named after it, from whatever
 * was mapped at their addresses then. Here the program's backtrace_symbols (interposed) unloads a
 * module during the first naming and, inside it, names another error raised at the same
 * addresses with names no real frame has ("gone_object"); the first error's text showed them.
 *   regress_backtrace_unload_race MODULE (bt_module.c built as a module) */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"

static void* g_module; /* unloaded by the first naming */
static int g_armed;    /* 1: the next naming unloads g_module and names another error */
static int g_invented; /* 1: names are made up (what another library there would give) */

/* Raises from one call site, so that errors raised here share their frames' addresses. */
__attribute__((noinline, visibility("default"))) void raise_here(void) {
  PF_ERROR_SET(PF_ERR_VALUE, "raised here");
  __asm__ volatile(""); /* keeps the call above from being a tail call */
}

/* Names as glibc writes them, in one block the caller frees: "gone_object(gone_name+0x0) [0x..]".
 */
static char** invented_names(void* const* pc, int n) {
  size_t line = 64;
  char** names = malloc((size_t)n * (sizeof(char*) + line));
  if (!names)
    return NULL;
  char* text = (char*)(names + n);
  for (int i = 0; i < n; ++i) {
    names[i] = text + (size_t)i * line;
    snprintf(names[i], line, "gone_object(gone_name+0x0) [%p]", pc[i]);
  }
  return names;
}

/* Interposes glibc's: libpackfn's naming calls this one. */
__attribute__((visibility("default"))) char** backtrace_symbols(void* const* pc, int n) {
  if (g_invented)
    return invented_names(pc, n);
  if (g_armed) {
    g_armed = 0;
    dlclose(g_module); /* the loader's count of unloads moves on */
    g_module = NULL;
    raise_here();
    pf_object_t* other = pf_error_take();
    g_invented = 1;
    (void)pf_error_backtrace(other); /* named (and kept) under the new count */
    g_invented = 0;
    pf_object_release(other);
  }
  char** (*real)(void* const*, int);
  void* sym = dlsym(RTLD_NEXT, "backtrace_symbols");
  if (!sym)
    return NULL;
  memcpy(&real, &sym, sizeof real); /* POSIX makes the conversion valid; memcpy keeps ISO C quiet */
  return real(pc, n);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODULE\n", argv[0]);
    return 2;
  }
  const char* env = getenv("PACKFN_BACKTRACE");
  if (!env || strcmp(env, "1") != 0) {
    fprintf(stderr, "run with PACKFN_BACKTRACE=1\n");
    return 2;
  }
  g_module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!g_module) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  raise_here();
  pf_object_t* err = pf_error_take();
  if (!err) {
    fprintf(stderr, "nothing raised\n");
    return 1;
  }
  g_armed = 1;
  const char* text = pf_error_backtrace(err); /* the first naming of the process */
  int failed = 0;
  if (g_armed) {
    fprintf(stderr, "FAIL: backtrace_symbols was not called\n");
    failed = 1;
  }
  if (strstr(text, "gone_object") != NULL) {
    fprintf(stderr, "FAIL: frames captured before the unload named after it:\n%s", text);
    failed = 1;
  }
  if (strstr(text, "File \"<native>\", line 0, in 0x") == NULL) {
    fprintf(stderr, "FAIL: no address lines:\n%s", text);
    failed = 1;
  }
  pf_object_release(err);
  if (g_module)
    dlclose(g_module);
  if (failed)
    return 1;
  printf("ok: frames named while a library unloads keep their address lines\n");
  return 0;
}
