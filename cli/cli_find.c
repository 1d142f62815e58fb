/* cli_find.c: finding the function a command names: loading a --lib library (noting what its
 * constructors registered in the global table), looking a name up in the library and then the
 * global table, and the KeyError for a name found nowhere, with "did you mean" suggestions. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* Most suggestions a KeyError names. */
#define FIND_MAX_SUGGESTIONS 3

int pf_cli_module_load(const char* path, pf_object_t** out) {
  struct stat st;
  if (strchr(path, '/') == NULL && stat(path, &st) == 0) {
    size_t n = strlen(path);
    char* local = malloc(n + 3);
    if (local == NULL) {
      pf_error_set(PF_ERR_MEMORY, "packfn: out of memory");
      return -1;
    }
    memcpy(local, "./", 2);
    memcpy(local + 2, path, n + 1);
    int rc = pf_module_load(local, out);
    free(local);
    return rc;
  }
  return pf_module_load(path, out);
}

static int name_in(const char* name, char** sorted, size_t count) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(sorted[mid], name);
    if (c == 0)
      return 1;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

int pf_cli_library_load(const char* path, pf_object_t** module, char*** registered, size_t* count) {
  char** before;
  size_t num_before;
  *registered = NULL;
  *count = 0;
  if (pf_global_list(&before, &num_before) != 0)
    return -1;
  int rc = pf_cli_module_load(path, module);
  char** after = NULL;
  size_t num_after = 0;
  if (rc == 0)
    rc = pf_global_list(&after, &num_after);
  char** added = rc == 0 ? calloc(num_after + 1, sizeof(char*)) : NULL;
  if (rc == 0 && added == NULL) {
    pf_error_set(PF_ERR_MEMORY, "packfn: out of memory");
    rc = -1;
  }
  for (size_t i = 0; rc == 0 && i < num_after; ++i) {
    if (name_in(after[i], before, num_before))
      continue;
    added[*count] = strdup(after[i]);
    if (added[*count] == NULL) {
      pf_error_set(PF_ERR_MEMORY, "packfn: out of memory");
      rc = -1;
      break;
    }
    ++*count;
  }
  pf_global_list_free(before);
  pf_global_list_free(after);
  if (rc != 0) {
    pf_cli_names_free(added);
    *count = 0;
    pf_object_release(*module);
    *module = NULL;
    return -1;
  }
  *registered = added;
  return 0;
}

void pf_cli_names_free(char** names) {
  for (size_t i = 0; names != NULL && names[i] != NULL; ++i)
    free(names[i]);
  free(names);
}

/* Edit distance (insertions, deletions, substitutions) between a and b, or more than `limit`
 * (then limit + 1) when it is larger. */
static size_t distance(const char* a, const char* b, size_t limit) {
  size_t na = strlen(a), nb = strlen(b);
  if ((na > nb ? na - nb : nb - na) > limit)
    return limit + 1;
  size_t* row = malloc(sizeof(size_t) * (nb + 1));
  if (row == NULL)
    return limit + 1;
  for (size_t j = 0; j <= nb; ++j)
    row[j] = j;
  for (size_t i = 1; i <= na; ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= nb; ++j) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  size_t d = row[nb];
  free(row);
  return d;
}

typedef struct suggestion_s {
  const char* name;
  size_t score;
} suggestion_t;

/* Keeps the best FIND_MAX_SUGGESTIONS candidates near `name` (closest first, then shortest): within
 * an edit distance of a sixth of its length (at least 2), or whose last dotted part is `name`
 * itself. */
static void consider(const char* name, const char* candidate, suggestion_t* best) {
  size_t limit = strlen(name) / 6 > 2 ? strlen(name) / 6 : 2;
  size_t score = distance(name, candidate, limit);
  const char* dot = strrchr(candidate, '.');
  if (dot != NULL && strchr(name, '.') == NULL && strcmp(dot + 1, name) == 0)
    score = 1;
  if (score > limit)
    return;
  for (int i = 0; i < FIND_MAX_SUGGESTIONS; ++i) {
    if (best[i].name != NULL && strcmp(best[i].name, candidate) == 0)
      return;
    if (best[i].name == NULL || score < best[i].score ||
        (score == best[i].score && strlen(candidate) < strlen(best[i].name))) {
      memmove(&best[i + 1], &best[i],
              sizeof(suggestion_t) * (size_t)(FIND_MAX_SUGGESTIONS - 1 - i));
      best[i] = (suggestion_t){candidate, score};
      return;
    }
  }
}

/* Raises the KeyError for `name`, found neither in `module` (NULL: no --lib) nor in the global
 * table. */
static int raise_not_found(const char* lib, pf_object_t* module, const char* name) {
  suggestion_t best[FIND_MAX_SUGGESTIONS + 1];
  memset(best, 0, sizeof best);
  pf_export_info_t* exports = NULL;
  char** globals = NULL;
  size_t count = 0;
  if (module != NULL && pf_module_list(module, &exports, NULL) == 0)
    for (pf_export_info_t* e = exports; e->name != NULL; ++e)
      consider(name, e->name, best);
  if (pf_global_list(&globals, &count) == 0)
    for (size_t i = 0; i < count; ++i)
      consider(name, globals[i], best);
  pf_error_clear(); /* a failed listing only costs the suggestions */
  char hint[PF_CLI_MSG_MAX] = "";
  size_t used = 0;
  for (int i = 0; i < FIND_MAX_SUGGESTIONS && best[i].name != NULL && used < sizeof hint; ++i)
    used += (size_t)snprintf(hint + used, sizeof hint - used, "%s'%s'",
                             i == 0 ? "; did you mean " : " or ", best[i].name);
  if (used > 0 && used < sizeof hint)
    snprintf(hint + used, sizeof hint - used, "?");
  if (lib != NULL)
    pf_error_set(PF_ERR_KEY,
                 "no function named '%s' in %s or the global table%s (`packfn list %s` "
                 "shows them)",
                 name, lib, hint, lib);
  else
    pf_error_set(PF_ERR_KEY, "no global function named '%s'%s (`packfn list` shows them)", name,
                 hint);
  pf_module_list_free(exports);
  pf_global_list_free(globals);
  return -1;
}

int pf_cli_find_function(const char* lib, const char* name, pf_object_t** module,
                         pf_object_t** fn) {
  *module = NULL;
  *fn = NULL;
  if (lib != NULL) {
    if (pf_cli_module_load(lib, module) != 0)
      return -1;
    if (pf_module_get_function(*module, name, fn) == 0)
      return 0;
    pf_object_t* err = pf_error_peek();
    if (err == NULL || strcmp(pf_error_kind(err), PF_ERR_ATTRIBUTE) != 0)
      return -1; /* not an absent name: that error stands */
    pf_error_clear();
  }
  if (pf_global_get(name, fn) != 0)
    return -1;
  return *fn != NULL ? 0 : raise_not_found(lib, *module, name);
}
