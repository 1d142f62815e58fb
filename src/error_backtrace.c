/* Naming the native frames a raise captured by address (PACKFN_BACKTRACE, error.c), when packfn
 * first reads the text or the text changes: a frame line per address from backtrace_symbols, and
 * a cache of those lines by address, emptied when a library is unloaded. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <execinfo.h>
#include <link.h>
#endif

#include "error_private.h"

#include "common.h"
#include "alloc.h"

/* The parts of one of glibc's backtrace_symbols lines, "object(symbol+0x12) [0x7f...]" (the
 * symbol part may be "+0x12" or empty, the object part empty; with no object known, only
 * "[0x7f...]"). Parsed from the end, since the object's path may itself hold parentheses. */
typedef struct {
  const char* obj;
  size_t obj_len;
  const char* sym;
  size_t sym_len;
  int known; /* an object or a symbol was found */
} pf__frame_parts_t;

static pf__frame_parts_t pf__frame_parse(const char* name) {
  size_t n = strlen(name);
  const char* bracket = NULL; /* the last " [" */
  for (const char* p = name + n; p > name + 1; --p)
    if (p[-2] == ' ' && p[-1] == '[') {
      bracket = p - 2;
      break;
    }
  const char* end = bracket ? bracket : name + n;
  const char* open = NULL;
  if (end > name && end[-1] == ')')
    for (const char* p = end - 1; p > name; --p)
      if (p[-1] == '(') {
        open = p - 1;
        break;
      }
  pf__frame_parts_t parts = {name, (size_t)(end - name), PF__UNKNOWN, PF__LIT_LEN(PF__UNKNOWN), 0};
  if (open) {
    parts.obj_len = (size_t)(open - name);
    if (end - 1 > open + 1) {
      parts.sym = open + 1;
      parts.sym_len = (size_t)(end - 1 - parts.sym);
    }
  }
  parts.known = bracket || name[0] != '['; /* glibc's "[0x7f...]": dladdr found nothing */
  return parts;
}

/* The length of the frame line of parts, `  File "object", line 0, in symbol\n`. */
static size_t pf__frame_named_len(const pf__frame_parts_t* parts) {
  return PF__LIT_LEN(PF__FRAME_FILE PF__FRAME_LINE "0" PF__FRAME_FUNC "\n") + parts->obj_len +
         parts->sym_len;
}

/* Writes the frame line of parts into line, which holds pf__frame_named_len(parts) bytes (no
 * NUL); its length. Names are never cut: a long (mangled) symbol gives a long line. */
static size_t pf__frame_named(const pf__frame_parts_t* parts, char* line) {
  char* d = line;
  memcpy(d, PF__FRAME_FILE, PF__LIT_LEN(PF__FRAME_FILE));
  d += PF__LIT_LEN(PF__FRAME_FILE);
  memcpy(d, parts->obj, parts->obj_len);
  d += parts->obj_len;
  memcpy(d, PF__FRAME_LINE "0" PF__FRAME_FUNC, PF__LIT_LEN(PF__FRAME_LINE "0" PF__FRAME_FUNC));
  d += PF__LIT_LEN(PF__FRAME_LINE "0" PF__FRAME_FUNC);
  memcpy(d, parts->sym, parts->sym_len);
  d += parts->sym_len;
  *d++ = '\n';
  return (size_t)(d - line);
}

/* ---- names of native frames, cached by address ----
 * Naming a frame (backtrace_symbols: dladdr, a walk of every loaded object's symbols) is most of
 * a full backtrace's cost, and a program raises from the same few places again and again. So the
 * line of each address named is kept (a table of PF__PC_CACHE lines, filled until half full,
 * under a mutex: only readers of named texts come here). A library unloaded and another loaded
 * at its addresses would make a kept line wrong: the table is emptied whenever the dynamic
 * loader's count of unloads (dl_iterate_phdr's dlpi_subs) has changed since it was filled, and
 * frames captured before an unload are not named at all (pf__frames_name). Lines of addresses
 * no object held are never kept. */
#define PF__PC_CACHE 1024 /* a power of two */

typedef struct {
  const void* pc;
  char* line; /* malloc'd, NUL-terminated */
  size_t len;
} pf__pc_line_t;

static pf__pc_line_t pf__pc_lines[PF__PC_CACHE];
static size_t pf__pc_count;
static unsigned long long pf__pc_subs;
static pthread_mutex_t pf__pc_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork(): the frame-name cache's lock (held while the table is read or filled), so that a child
 * forked while another thread named frames can name its own. */
void pf__backtrace_fork_lock(void) {
  pthread_mutex_lock(&pf__pc_lock);
}

void pf__backtrace_fork_unlock(void) {
  pthread_mutex_unlock(&pf__pc_lock);
}

/* Under pf__pc_lock: the slot of pc (its line, or the empty slot it would take). */
static pf__pc_line_t* pf__pc_slot(const void* pc) {
  size_t i = (size_t)(((uintptr_t)pc * UINT64_C(0x9E3779B97F4A7C15)) >> 54) & (PF__PC_CACHE - 1);
  while (pf__pc_lines[i].pc && pf__pc_lines[i].pc != pc)
    i = (i + 1) & (PF__PC_CACHE - 1);
  return &pf__pc_lines[i];
}

unsigned long long pf__loader_subs(void) {
  unsigned long long subs;
  pf__loader_counts(NULL, &subs);
  return subs;
}

/* Under pf__pc_lock: empties the table when the loader's count of unloads is not the one it
 * was filled under (a library unloaded since). */
static void pf__pc_check_unloads(unsigned long long subs) {
  if (subs == pf__pc_subs && subs != ~0ull)
    return;
  for (size_t i = 0; i < PF__PC_CACHE; ++i) {
    free(pf__pc_lines[i].line);
    pf__pc_lines[i] = (pf__pc_line_t){NULL, NULL, 0};
  }
  pf__pc_count = 0;
  pf__pc_subs = subs;
}

/* A malloc'd copy of the first len bytes of s, NUL-terminated; NULL when memory runs out. */
static char* pf__text_copy(const char* s, size_t len) {
  char* copy = malloc(len + 1);
  if (copy) {
    memcpy(copy, s, len);
    copy[len] = '\0';
  }
  return copy;
}

/* The line of frame i of f into out (NULL: only its length): the kept line (when `kept`), else
 * from this call's names (miss, names: nmiss of them), else by address. */
static size_t pf__frame_line(const pf__frames_t* f, int i, int kept, void* const* miss,
                             char* const* names, int nmiss, char* out) {
  const pf__pc_line_t* slot = pf__pc_slot(f->pc[i]);
  if (kept && slot->pc) {
    if (out)
      memcpy(out, slot->line, slot->len);
    return slot->len;
  }
  int k = 0;
  while (k < nmiss && miss[k] != f->pc[i])
    ++k;
  if (names && k < nmiss) {
    pf__frame_parts_t parts = pf__frame_parse(names[k]);
    if (parts.known)
      return out ? pf__frame_named(&parts, out) : pf__frame_named_len(&parts);
  }
  char unnamed[PF__LIT_LEN(PF__FRAME_NATIVE) + sizeof(void*) * 2 + 1];
  size_t n = pf__frame_unnamed(f->pc[i], unnamed);
  if (out)
    memcpy(out, unnamed, n);
  return n;
}

/* The backtrace text with e's frames named: the site lines, then a named line per frame.
 * malloc'd, NUL-terminated, length in *len; NULL when memory runs out. The naming itself
 * (backtrace_symbols: dladdr, which takes the loader's lock) runs between two holds of
 * pf__pc_lock, never under it: a library constructor raising under the loader's lock would
 * otherwise wait for a thread that waits for the loader (a deadlock, found by review). Frames
 * captured before a library was unloaded keep their address lines: what is mapped at their
 * addresses now may be another library (or nothing); so do those named while one was unloaded,
 * except the lines kept from before. */
char* pf__frames_name(const pf__error_t* e, size_t* len) {
  const pf__frames_t* f = e->frames;
  unsigned long long subs = pf__loader_subs();
  if (subs != f->subs || subs == ~0ull) {
    *len = e->cell.backtrace.size;
    return pf__text_copy(e->cell.backtrace.data, e->cell.backtrace.size);
  }
  /* the addresses not named yet */
  void* miss[64];
  int nmiss = 0;
  pthread_mutex_lock(&pf__pc_lock);
  pf__pc_check_unloads(subs);
  for (int i = 0; i < f->n; ++i) {
    pf__pc_line_t* slot = pf__pc_slot(f->pc[i]);
    if (!slot->pc && nmiss < (int)(sizeof miss / sizeof miss[0])) {
      int dup = 0;
      for (int k = 0; k < nmiss && !dup; ++k)
        dup = miss[k] == f->pc[i];
      if (!dup)
        miss[nmiss++] = f->pc[i];
    }
  }
  pthread_mutex_unlock(&pf__pc_lock);
  char** names = nmiss ? backtrace_symbols(miss, nmiss) : NULL;
  if (names && pf__loader_subs() != subs) {
    /* a library unloaded while naming: these names may be another library's (review); the
     * frames not kept yet keep their address lines */
    free(names);
    names = NULL;
  }
  pthread_mutex_lock(&pf__pc_lock);
  /* the kept lines are for this count still: no other thread emptied the table for a newer one
   * and filled it with names of what is mapped since (they named frames captured before the
   * unload: review) */
  int kept = pf__pc_subs == subs;
  int keep = names != NULL && kept;
  for (int k = 0; keep && k < nmiss; ++k) {
    if (pf__pc_count >= PF__PC_CACHE / 2) /* kept at most half full: probes stay short */
      break;
    pf__pc_line_t* slot = pf__pc_slot(miss[k]);
    pf__frame_parts_t parts = pf__frame_parse(names[k]);
    if (slot->pc || !parts.known)
      continue; /* another thread named it meanwhile, or no object holds it */
    size_t n = pf__frame_named_len(&parts);
    char* copy = malloc(n + 1);
    if (!copy)
      break;
    pf__frame_named(&parts, copy);
    copy[n] = '\0';
    *slot = (pf__pc_line_t){miss[k], copy, n};
    pf__pc_count++;
  }
  /* measured first, then written: each line exactly as long as measured */
  size_t total = f->site_len;
  for (int i = 0; i < f->n; ++i)
    total += pf__frame_line(f, i, kept, miss, names, nmiss, NULL);
  char* text = malloc(total + 1);
  if (text) {
    memcpy(text, e->cell.backtrace.data, f->site_len);
    size_t used = f->site_len;
    for (int i = 0; i < f->n; ++i)
      used += pf__frame_line(f, i, kept, miss, names, nmiss, text + used);
    text[used] = '\0';
    *len = used;
  }
  pthread_mutex_unlock(&pf__pc_lock);
  free(names);
  return text;
}

/* Frees the named frames kept when the library unloads (or the process exits), under the lock:
 * another thread may be naming frames while the process exits (it fills the table again). */
__attribute__((destructor)) static void pf__frames_fini(void) {
  pthread_mutex_lock(&pf__pc_lock);
  for (size_t i = 0; i < PF__PC_CACHE; ++i) {
    free(pf__pc_lines[i].line);
    pf__pc_lines[i] = (pf__pc_line_t){NULL, NULL, 0};
  }
  pf__pc_count = 0;
  pthread_mutex_unlock(&pf__pc_lock);
}
