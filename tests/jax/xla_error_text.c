/* tests/jax/xla_error_text.c: the adapter's xla_error (xla/packfn_xla.c, included whole) on
 * messages that are not UTF-8 and under failing allocations, for test_errors.py. Writes each
 * message XLA receives to stdout, NUL-terminated, in the order of the cases below. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

static int fail_at; /* the allocation that fails, counted from 1 in each case; 0: none */
static int allocs;

static void* fallible_malloc(size_t n) {
  return ++allocs == fail_at ? NULL : malloc(n);
}

#define malloc fallible_malloc
#include "../../xla/packfn_xla.c"
#undef malloc

static XLA_FFI_Error* record(XLA_FFI_Error_Create_Args* args) {
  fwrite(args->message, 1, strlen(args->message) + 1, stdout);
  return NULL;
}

static void run(const char* text, int fail) {
  XLA_FFI_Api api;
  memset(&api, 0, sizeof api);
  api.XLA_FFI_Error_Create = record;
  allocs = 0;
  fail_at = fail;
  (void)xla_error(&api, XLA_FFI_Error_Code_INTERNAL, "%s", text);
}

int main(void) {
  static char wide[1 + 4 * 300 + 1], bad[2000 + 1];
  wide[0] = 'a'; /* then 4-byte characters: a cut at byte 508 splits one */
  for (int i = 0; i < 300; ++i)
    memcpy(wide + 1 + 4 * i, "\xf0\x9f\x98\x80", 4);
  for (int i = 0; i < 2000; ++i)
    bad[i] = i % 3 ? 'b' : '\xff';
  run("bad bytes \xff\xfe\xc3 end", 0);
  run("overlong \xc0\x80 \xe0\x80\x80, surrogate \xed\xa0\x80, past U+10FFFF \xf4\x90\x80\x80 "
      "\xf5, fine \xf0\x9f\x98\x80 \xed\x9f\xbf, cut \xe2\x82",
      0);
  run(wide, 0); /* whole */
  run(wide, 1); /* no memory for the long message: cut */
  run(bad, 0);  /* whole, escaped */
  run(bad, 1);  /* no memory for the long message */
  run(bad, 2);  /* no memory for its escaped copy */
  return 0;
}
