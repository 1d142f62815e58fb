/* "did you mean" suggestions: the Levenshtein distance between a name and each candidate,
 * two rows at a time, cut short once every entry of a row exceeds the limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suggest.h"

/* The most edits a suggestion may be away (pf__suggest_init's limit): only cells of the distance
 * table within this many of its diagonal can hold a distance that small, so two rows of that
 * band are all the table kept, on the stack, for names of any length. */
#define PF__SUGGEST_MAX_LIMIT 3
#define PF__SUGGEST_BAND      (2 * PF__SUGGEST_MAX_LIMIT + 1)

void pf__suggest_init(pf__suggest_t* s, const char* name) {
  s->name = name;
  s->len = strlen(name);
  s->limit = s->len / 3 < 1                       ? 1
             : s->len / 3 > PF__SUGGEST_MAX_LIMIT ? PF__SUGGEST_MAX_LIMIT
                                                  : s->len / 3;
  s->best = NULL;
  s->best_distance = (size_t)-1;
}

/* Edit distance of a[0..n) and b[0..m), or limit + 1 when it exceeds limit (<=
 * PF__SUGGEST_MAX_LIMIT). Row i keeps the cells (i, j) with |i - j| <= limit, cell (i, i + d -
 * limit) at index d; a cell outside the band counts as limit + 1, which it is at least. Names
 * of any length (a limit of 255 bytes skipped longer ones: review). */
static size_t pf__edit_distance(const char* a, size_t n, const char* b, size_t m, size_t limit) {
  const size_t over = limit + 1;
  const size_t width = 2 * limit + 1;
  size_t rows[2][PF__SUGGEST_BAND];
  size_t* prev = rows[0];
  size_t* cur = rows[1];
  for (size_t d = 0; d < width; ++d) /* row 0: (0, j) is j, for 0 <= j = d - limit <= m */
    prev[d] = d >= limit && d - limit <= m ? d - limit : over;
  for (size_t i = 1; i <= n; ++i) {
    size_t row_min = over;
    for (size_t d = 0; d < width; ++d) {
      size_t v = over;
      if (i + d >= limit && i + d - limit <= m) {
        size_t j = i + d - limit;
        if (j == 0) {
          v = i < over ? i : over;
        } else {
          v = prev[d] + (a[i - 1] != b[j - 1]);     /* from (i - 1, j - 1) */
          if (d + 1 < width && prev[d + 1] + 1 < v) /* from (i - 1, j) */
            v = prev[d + 1] + 1;
          if (d > 0 && cur[d - 1] + 1 < v) /* from (i, j - 1) */
            v = cur[d - 1] + 1;
          if (v > over)
            v = over;
        }
      }
      cur[d] = v;
      if (v < row_min)
        row_min = v;
    }
    if (row_min > limit)
      return over;
    size_t* t = prev;
    prev = cur;
    cur = t;
  }
  /* (n, m) lies in the band: pf__suggest_offer skips lengths more than limit apart */
  return prev[m + limit - n];
}

/* 1 when `name` has no dot and is the last dotted part of `candidate` ("rms_norm" for
 * "packfn.kernels.rms_norm"): a short name of a namespaced function. */
static int pf__suggest_is_leaf(const pf__suggest_t* s, const char* candidate, size_t m) {
  return m > s->len && candidate[m - s->len - 1] == '.' && memchr(s->name, '.', s->len) == NULL &&
         memcmp(candidate + m - s->len, s->name, s->len) == 0;
}

void pf__suggest_offer(pf__suggest_t* s, const char* candidate) {
  size_t m = strlen(candidate);
  size_t d;
  if (pf__suggest_is_leaf(s, candidate, m)) {
    d = 1; /* as near as one edit */
  } else {
    size_t gap = m > s->len ? m - s->len : s->len - m;
    if (gap > s->limit)
      return;
    d = pf__edit_distance(s->name, s->len, candidate, m, s->limit);
    if (d == 0 || d > s->limit)
      return;
  }
  if (d < s->best_distance || (d == s->best_distance && strcmp(candidate, s->best) < 0)) {
    s->best = candidate;
    s->best_distance = d;
  }
}

int pf__suggest_result(const pf__suggest_t* s, char* buf, size_t size) {
  if (size > 0)
    snprintf(buf, size, "%s", s->best ? s->best : "");
  return s->best != NULL;
}

char* pf__suggest_whole(int (*suggest)(void* ctx, const char* name, char* buf, size_t size),
                        void* ctx, const char* name) {
  const size_t max = (size_t)1 << 20;
  for (size_t size = 128; size <= max; size *= 2) {
    char* buf = malloc(size);
    if (!buf || suggest(ctx, name, buf, size) != 1) {
      free(buf);
      return NULL;
    }
    if (strlen(buf) + 1 < size || size == max)
      return buf;
    free(buf);
  }
  return NULL;
}
