/* cli_find.c: finding the function a command names: loading a --lib library (noting what its
 * constructors registered in the global table), looking a name up in the library and then the
 * global table, and the KeyError for a name found nowhere, with "did you mean" suggestions. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

int pf_cli_module_load(const char* path, pf_object_t** out) {
  struct stat st;
  if (strchr(path, '/') == NULL && stat(path, &st) == 0) {
    size_t n = strlen(path);
    char* local = malloc(n + 3);
    if (local == NULL) {
      PF_ERROR_SET(PF_ERR_MEMORY, "packfn: out of memory");
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
    PF_ERROR_SET(PF_ERR_MEMORY, "packfn: out of memory");
    rc = -1;
  }
  for (size_t i = 0; rc == 0 && i < num_after; ++i) {
    if (name_in(after[i], before, num_before))
      continue;
    added[*count] = strdup(after[i]);
    if (added[*count] == NULL) {
      PF_ERROR_SET(PF_ERR_MEMORY, "packfn: out of memory");
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

/* Raises the KeyError for `name`, found neither in `module` (NULL: no --lib) nor in the global
 * table, worded as pf_module_call's and pf_global_call's, with their suggestion (the library's
 * exports first, then the global table). */
static int raise_not_found(const char* lib, pf_object_t* module, const char* name) {
  char near[PF_CLI_MSG_MAX];
  int found = module != NULL && pf_module_suggest(module, name, near, sizeof near) == 1;
  if (!found)
    found = pf_global_suggest(name, near, sizeof near) == 1;
  pf_error_clear(); /* a failed search only costs the suggestion */
  const char* open = found ? " (did you mean '" : "";
  const char* close = found ? "'?)" : "";
  if (!found)
    near[0] = '\0';
  if (lib != NULL)
    PF_ERROR_SET(PF_ERR_KEY,
                 "%s has no function '%s', nor has the global table%s%s%s; `packfn list %s` "
                 "shows them",
                 lib, name, open, near, close, lib);
  else
    PF_ERROR_SET(PF_ERR_KEY, "no global function is named '%s'%s%s%s; `packfn list` shows them",
                 name, open, near, close);
  return -1;
}

int pf_cli_find_function(const char* lib, const char* name, pf_object_t** module,
                         pf_object_t** fn) {
  *module = NULL;
  *fn = NULL;
  if (lib != NULL) {
    if (pf_cli_module_load(lib, module) != 0)
      return -1;
    if (pf_module_get_function(*module, name, fn) != 0)
      return -1;
    if (*fn != NULL)
      return 0;
  }
  if (pf_global_get(name, fn) != 0)
    return -1;
  return *fn != NULL ? 0 : raise_not_found(lib, *module, name);
}
