/* Regression test (review of this session's commits): pf_module_load in a program that loaded
 * libpackfn with RTLD_LOCAL, as Python loads its extensions (libpackfn then is in no global
 * scope). The runtime check looked the markers up with RTLD_DEFAULT, which from inside libpackfn
 * searches libpackfn's own scope too, so it always found this runtime: a library holding a copy
 * of its own was accepted, and its failing calls returned -1 with no error to take.
 *   regress_local_host LIBPACKFN refuse LIBRARY_WITH_ITS_OWN_COPY
 *   regress_local_host LIBPACKFN accept LIBRARY_LINKED_WITH_LIBPACKFN_SO
 *   regress_local_host LIBPACKFN reload LIBRARY_LINKED_WITH_LIBPACKFN_SO COPY: LIBRARY accepted,
 *     COPY (a library holding an exported copy) loaded RTLD_GLOBAL, LIBRARY loaded again:
 *     accepted again, its references were bound at its first load (the check looked at the
 *     global scope of the moment, found COPY's markers and refused it, review). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

typedef struct {
  int (*load)(const char*, pf_object_t**);
  int (*call)(pf_object_t*, const char*, const pf_any_t*, int32_t, pf_any_t*);
  pf_object_t* (*take)(void);
  const char* (*message)(const pf_object_t*);
  void (*release)(pf_object_t*);
} api_t;

static int bind(void* lib, api_t* api) {
  *(void**)&api->load = dlsym(lib, "pf_module_load");
  *(void**)&api->call = dlsym(lib, "pf_module_call");
  *(void**)&api->take = dlsym(lib, "pf_error_take");
  *(void**)&api->message = dlsym(lib, "pf_error_message");
  *(void**)&api->release = dlsym(lib, "pf_object_release");
  return api->load && api->call && api->take && api->message && api->release ? 0 : -1;
}

static int check(api_t* api, const char* mode, const char* path);

int main(int argc, char** argv) {
  int reload = argc == 5 && strcmp(argv[2], "reload") == 0;
  if (!reload &&
      (argc != 4 || (strcmp(argv[2], "refuse") != 0 && strcmp(argv[2], "accept") != 0))) {
    fprintf(stderr, "usage: regress_local_host LIBPACKFN refuse|accept LIBRARY, or LIBPACKFN "
                    "reload LIBRARY COPY\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  api_t api;
  if (!lib || bind(lib, &api) != 0) {
    fprintf(stderr, "FAIL: cannot use %s: %s\n", argv[1], dlerror());
    return 1;
  }
  if (!reload)
    return check(&api, argv[2], argv[3]);
  if (check(&api, "accept", argv[3]) != 0)
    return 1;
  void* copy = dlopen(argv[4], RTLD_NOW | RTLD_GLOBAL);
  if (!copy) {
    fprintf(stderr, "FAIL: cannot load %s: %s\n", argv[4], dlerror());
    return 1;
  }
  int rc = check(&api, "accept", argv[3]);
  dlclose(copy);
  return rc;
}

/* Loads `path` and checks it is refused or accepted (its error reaching this runtime). */
static int check(api_t* api_in, const char* mode, const char* path) {
  api_t api = *api_in;
  pf_object_t* mod = NULL;
  int rc = api.load(path, &mod);
  pf_object_t* err = api.take();
  int failures = 0;
  if (strcmp(mode, "refuse") == 0) {
    if (rc == 0 || !err || !strstr(api.message(err), "is bound to the packfn runtime in")) {
      fprintf(stderr, "FAIL: a library holding its own packfn was %s\n",
              rc == 0 ? "accepted" : api.message(err));
      ++failures;
    } else {
      printf("refused: %s\n", api.message(err));
    }
  } else if (rc != 0) {
    fprintf(stderr, "FAIL: refused: %s\n", err ? api.message(err) : "(no error)");
    ++failures;
  } else {
    pf_any_t result;
    pf_object_t* e = NULL;
    if (api.call(mod, "fail", NULL, 0, &result) != -1 || !(e = api.take()) ||
        strcmp(api.message(e), "fail: this kernel always fails") != 0) {
      fprintf(stderr, "FAIL: the library's error did not reach this runtime\n");
      ++failures;
    } else {
      printf("accepted, its error reaches this runtime\n");
    }
    api.release(e);
  }
  api.release(err);
  api.release(mod);
  return failures != 0;
}
