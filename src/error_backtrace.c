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

/* One frame line for a native frame: named from glibc's "object(symbol+0x12) [0x7f...]"
 * (object as the file, symbol as the function), into line (size bytes); its length. */
static size_t pf__frame_named(const char* name, char* line, size_t size) {
  const char* open = strchr(name, '(');
  const char* close = open ? strchr(open, ')') : NULL;
  int obj_len = open ? (int)(open - name) : (int)strlen(name);
  int has_sym = open && close && close > open + 1;
  const char* sym = has_sym ? open + 1 : PF__UNKNOWN;
  int sym_len = has_sym ? (int)(close - sym) : (int)PF__LIT_LEN(PF__UNKNOWN);
  int len = snprintf(line, size, PF__FRAME_FILE "%.*s" PF__FRAME_LINE "0" PF__FRAME_FUNC "%.*s\n",
                     obj_len, name, sym_len, sym);
  if (len < 0)
    return 0;
  return (size_t)len >= size ? size - 1 : (size_t)len;
}

/* ---- names of native frames, cached by address ----
 * Naming a frame (backtrace_symbols: dladdr, a walk of every loaded object's symbols) is most of
 * a full backtrace's cost, and a program raises from the same few places again and again. So the
 * line of each address named is kept (a table of PF__PC_CACHE lines, filled until full, under a
 * mutex: only readers of named texts come here). A library unloaded and another loaded at its
 * addresses would make a kept line wrong: the table is emptied whenever the dynamic loader's
 * count of unloads (dl_iterate_phdr's dlpi_subs) has changed since it was filled. */
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

#if defined(__GLIBC__)
static int pf__loader_subs_of(struct dl_phdr_info* info, size_t size, void* out) {
  *(unsigned long long*)out =
      size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs ? info->dlpi_subs
                                                                                : ~0ull;
  return 1; /* the counts are the same in every entry: the first will do */
}
#endif

/* Under pf__pc_lock: the slot of pc (its line, or the empty slot it would take). */
static pf__pc_line_t* pf__pc_slot(const void* pc) {
  size_t i = (size_t)(((uintptr_t)pc * UINT64_C(0x9E3779B97F4A7C15)) >> 54) & (PF__PC_CACHE - 1);
  while (pf__pc_lines[i].pc && pf__pc_lines[i].pc != pc)
    i = (i + 1) & (PF__PC_CACHE - 1);
  return &pf__pc_lines[i];
}

/* The dynamic loader's count of unloads (~0 when it cannot be read). Called under no lock of
 * packfn's: dl_iterate_phdr takes a lock of the loader. */
static unsigned long long pf__loader_subs(void) {
  unsigned long long subs = ~0ull;
#if defined(__GLIBC__)
  dl_iterate_phdr(pf__loader_subs_of, &subs);
#endif
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

/* The backtrace text with e's frames named: the site lines, then a named line per frame.
 * malloc'd, NUL-terminated, length in *len; NULL when memory runs out. The naming itself
 * (backtrace_symbols: dladdr, which takes the loader's lock) runs between two holds of
 * pf__pc_lock, never under it: a library constructor raising under the loader's lock would
 * otherwise wait for a thread that waits for the loader (a deadlock, found by review). Lines
 * named while a library was unloaded are used for this text but not kept. */
char* pf__frames_name(const pf__error_t* e, size_t* len) {
  const pf__frames_t* f = e->frames;
  char* text = NULL;
  unsigned long long subs = pf__loader_subs();
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
  int keep = names && pf__loader_subs() == subs;
  char line[1024];
  pthread_mutex_lock(&pf__pc_lock);
  keep = keep && pf__pc_subs == subs; /* no other thread emptied it for a newer count */
  for (int k = 0; keep && k < nmiss; ++k) {
    if (pf__pc_count >= PF__PC_CACHE / 2) /* kept at most half full: probes stay short */
      break;
    pf__pc_line_t* slot = pf__pc_slot(miss[k]);
    if (slot->pc)
      continue; /* another thread named it meanwhile */
    size_t n = pf__frame_named(names[k], line, sizeof line);
    char* copy = malloc(n + 1);
    if (!copy)
      break;
    memcpy(copy, line, n + 1);
    *slot = (pf__pc_line_t){miss[k], copy, n};
    pf__pc_count++;
  }
  size_t cap = f->site_len + 1, used = f->site_len;
  for (int i = 0; i < f->n; ++i) {
    const pf__pc_line_t* slot = pf__pc_slot(f->pc[i]);
    cap += slot->pc ? slot->len : sizeof line;
  }
  text = malloc(cap);
  if (text) {
    memcpy(text, e->cell.backtrace.data, f->site_len);
    for (int i = 0; i < f->n; ++i) {
      const pf__pc_line_t* slot = pf__pc_slot(f->pc[i]);
      if (slot->pc) {
        memcpy(text + used, slot->line, slot->len);
        used += slot->len;
        continue;
      }
      /* not kept (the table full, memory short, or a library unloaded while naming): named
       * from this call's names, else by address */
      int k = 0;
      while (k < nmiss && miss[k] != f->pc[i])
        ++k;
      used += names && k < nmiss ? pf__frame_named(names[k], text + used, cap - used)
                                 : pf__frame_unnamed(f->pc[i], text + used);
    }
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
