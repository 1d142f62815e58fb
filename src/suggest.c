/* "did you mean" suggestions: the Levenshtein distance between a name and each candidate,
 * two rows at a time, cut short once every entry of a row exceeds the limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suggest.h"

/* Names longer than this are never compared (no suggestion): the rows live on the stack. */
#define PF__SUGGEST_MAX_LEN 255

void pf__suggest_init(pf__suggest_t* s, const char* name) {
  s->name = name;
  s->len = strlen(name);
  s->limit = s->len / 3 < 1 ? 1 : s->len / 3 > 3 ? 3 : s->len / 3;
  s->best = NULL;
  s->best_distance = (size_t)-1;
}

/* Edit distance of a[0..n) and b[0..m), or limit + 1 when it exceeds limit. */
static size_t pf__edit_distance(const char* a, size_t n, const char* b, size_t m, size_t limit) {
  size_t rows[2][PF__SUGGEST_MAX_LEN + 1];
  size_t* prev = rows[0];
  size_t* cur = rows[1];
  for (size_t j = 0; j <= m; ++j)
    prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    size_t row_min = cur[0];
    for (size_t j = 1; j <= m; ++j) {
      size_t d = prev[j - 1] + (a[i - 1] != b[j - 1]);
      if (prev[j] + 1 < d)
        d = prev[j] + 1;
      if (cur[j - 1] + 1 < d)
        d = cur[j - 1] + 1;
      cur[j] = d;
      if (d < row_min)
        row_min = d;
    }
    if (row_min > limit)
      return limit + 1;
    size_t* t = prev;
    prev = cur;
    cur = t;
  }
  return prev[m];
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
    if (s->len > PF__SUGGEST_MAX_LEN || m > PF__SUGGEST_MAX_LEN)
      return;
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
