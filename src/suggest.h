/* Private: "did you mean" suggestions, the nearest of a set of names by edit distance. */
#ifndef PACKFN_SRC_SUGGEST_H_
#define PACKFN_SRC_SUGGEST_H_

#include <stddef.h>

/* The search for the candidate nearest to `name`: feed every candidate to pf__suggest_offer,
 * then read `best` (NULL when none was near enough). A candidate is near when it differs from
 * name by at least 1 and at most strlen(name) / 3 (clamped to 1..3) single-character insertions,
 * deletions or substitutions, or when name has no dot and is the candidate's last dotted part
 * ("rms_norm" for "packfn.kernels.rms_norm", counted as one edit); of several, the nearest
 * wins, then the first in strcmp order. */
typedef struct pf__suggest_s {
  const char* name; /* what was asked for */
  size_t len;       /* strlen(name) */
  size_t limit;     /* largest distance suggested */
  const char* best; /* borrowed candidate, or NULL */
  size_t best_distance;
} pf__suggest_t;

void pf__suggest_init(pf__suggest_t* s, const char* name);
void pf__suggest_offer(pf__suggest_t* s, const char* candidate);

/* Copies s->best into buf (truncated, NUL-terminated; "" when none) and returns 1 when there
 * is a suggestion, else 0. size 0 copies nothing. */
int pf__suggest_result(const pf__suggest_t* s, char* buf, size_t size);

/* The name `suggest(ctx, name, buf, size)` (a pf_*_suggest behind an adapter: 1 when it found
 * one) finds for `name`, whole: buffers grow until it fits (to 1 MiB, then cut). malloc'd, or
 * NULL for none, or when memory runs out (a suggestion is a courtesy: nothing is raised, and
 * what the search raised is cleared). */
char* pf__suggest_whole(int (*suggest)(void* ctx, const char* name, char* buf, size_t size),
                        void* ctx, const char* name);

/* pf__suggest_whole's adapter for the global table: pf_global_suggest, ctx unused
 * (global_write.c). */
int pf__suggest_in_globals(void* unused, const char* name, char* buf, size_t size);

#endif /* PACKFN_SRC_SUGGEST_H_ */
