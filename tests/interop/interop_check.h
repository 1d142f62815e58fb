/* The check of the interop test programs: a failed condition prints itself and the
 * error packfn has raised (taken), and counts as a failure; main returns failures != 0. */
#ifndef PF_TESTS_INTEROP_CHECK_H_
#define PF_TESTS_INTEROP_CHECK_H_

#include <stdio.h>

#include "packfn/packfn.h"

static int failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      pf_object_t* e_ = pf_error_take();                                                           \
      fprintf(stderr, "%s:%d: CHECK(%s) failed%s%s%s%s\n", __FILE__, __LINE__, #cond,              \
              e_ ? " (" : "", e_ ? pf_error_kind(e_) : "", e_ ? ": " : "",                         \
              e_ ? pf_error_message(e_) : "");                                                     \
      pf_object_release(e_);                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#endif
