/* Private: packfn's error objects, as error.c (raising, the thread's slot, cause chains, the
 * native stack a raise captures) and error_backtrace.c (naming those frames) share them: the
 * object's layout, the frame lines of a backtrace text, and what error_backtrace.c defines for
 * error.c. Not installed. */
#ifndef PACKFN_SRC_ERROR_PRIVATE_H_
#define PACKFN_SRC_ERROR_PRIVATE_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "packfn/error.h"

/* ---- the object ---- */

/* Native frames a raise captured (PACKFN_BACKTRACE) but has not named yet: the cell's text
 * shows them by address (`  File "<native>", line 0, in 0x7f...`) and packfn's readers
 * (pf_error_backtrace) get the named text, built the first time it is read; an update of the
 * text names them first (pf__frames_settle). Naming (dladdr per frame) is most of a full
 * stack's cost, so a raise that nobody reads the stack of stays cheap. */
typedef struct {
  size_t site_len;         /* bytes of the cell's text before the frame lines */
  char* named;             /* the whole text with names, once built (published with a CAS) */
  unsigned long long subs; /* the loader's count of unloads before the capture (pf__loader_subs) */
  int n;                   /* frames in pc */
  void* pc[];
} pf__frames_t;

typedef struct {
  pf_object_t header;
  pf_error_cell_t cell;
  char* heap_backtrace; /* owned when the backtrace was updated after creation */
  pf__frames_t* frames; /* unnamed native frames, or NULL */
  /* then: kind NUL message NUL backtrace NUL */
} pf__error_t;

/* ---- frame lines, `  File "file", line N, in func\n` as TVM-FFI writes them ---- */

#define PF__UNKNOWN      "<unknown>"
#define PF__FRAME_FILE   "  File \""
#define PF__FRAME_LINE   "\", line "
#define PF__FRAME_FUNC   ", in "
#define PF__LIT_LEN(lit) (sizeof(lit) - 1)

#define PF__FRAME_NATIVE PF__FRAME_FILE "<native>" PF__FRAME_LINE "0" PF__FRAME_FUNC "0x"

/* One frame line by address, `  File "<native>", line 0, in 0x00007f0123456789\n`: no call. */
static inline size_t pf__frame_unnamed(const void* pc, char* line) {
  static const char hex[] = "0123456789abcdef";
  memcpy(line, PF__FRAME_NATIVE, PF__LIT_LEN(PF__FRAME_NATIVE));
  char* d = line + PF__LIT_LEN(PF__FRAME_NATIVE);
  uintptr_t v = (uintptr_t)pc;
  for (int i = (int)sizeof v * 2 - 1; i >= 0; --i, v >>= 4)
    d[i] = hex[v & 15];
  d[sizeof v * 2] = '\n';
  return PF__LIT_LEN(PF__FRAME_NATIVE) + sizeof v * 2 + 1;
}

/* ---- error_backtrace.c, for error.c ---- */

/* e's backtrace text with its frames (e->frames) named: malloc'd, length in *len; NULL when out
 * of memory. */
char* pf__frames_name(const pf__error_t* e, size_t* len);

/* The dynamic loader's count of unloads (dl_iterate_phdr's dlpi_subs; ~0 when it cannot be
 * read): frames captured under one count are named only while it holds. Takes no packfn lock. */
unsigned long long pf__loader_subs(void);

/* fork(): the frame-name cache's lock, taken before a fork and given back after it in parent and
 * child (global.c's handlers). */
void pf__backtrace_fork_lock(void);
void pf__backtrace_fork_unlock(void);

#endif /* PACKFN_SRC_ERROR_PRIVATE_H_ */
