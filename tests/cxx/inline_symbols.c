/* Every inline function of the public API (PF_INLINE in the headers) is also an exported
 * symbol of libpackfn: resolves each with dlsym from the library named by argv[1] and calls a
 * few through those symbols, as ctypes or cffi would. The names come from the headers
 * (inline_names.h, generated at configure time), so a new inline function is checked too. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

#include "inline_names.h"

static int add_ints(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  if (num_args != 2)
    return -1;
  *result = pf_any_int(args[0].v_int64 + args[1].v_int64);
  return 0;
}

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

/* dlsym into a function pointer of the type of `proto` (the inline function's own type). */
#define RESOLVE(lib, proto, name) ((__typeof__(&proto))pf__resolve((lib), (name)))
static void (*pf__resolve(void* lib, const char* name))(void) {
  void (*fn)(void);
  void* sym = dlsym(lib, name);
  memcpy(&fn, &sym, sizeof fn);
  return fn;
}

int main(int argc, char** argv) {
  int failures = 0;
  if (argc != 2) {
    fprintf(stderr, "usage: %s path/to/libpackfn.so\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  size_t count = sizeof pf_inline_names / sizeof pf_inline_names[0];
  CHECK(count >= 40); /* the headers' inline API, found by the configure step */
  for (size_t i = 0; i < count; ++i)
    if (!dlsym(lib, pf_inline_names[i])) {
      fprintf(stderr, "not exported: %s\n", pf_inline_names[i]);
      ++failures;
    }

  /* through the library's own symbols (its own global table and allocator) */
  int (*create_direct)(pf_safe_call_t, pf_object_t**) =
      RESOLVE(lib, pf_function_create_direct, "pf_function_create_direct");
  int (*global_set)(const char*, pf_object_t*, int) = RESOLVE(lib, pf_global_set, "pf_global_set");
  int (*global_remove)(const char*) = RESOLVE(lib, pf_global_remove, "pf_global_remove");
  __typeof__(&pf_function_call) call = RESOLVE(lib, pf_function_call, "pf_function_call");
  __typeof__(&pf_object_release) release = RESOLVE(lib, pf_object_release, "pf_object_release");
  __typeof__(&pf_object_retain) retain = RESOLVE(lib, pf_object_retain, "pf_object_retain");
  __typeof__(&pf_object_strong_count) strong =
      RESOLVE(lib, pf_object_strong_count, "pf_object_strong_count");
  __typeof__(&pf_any_int) any_int = RESOLVE(lib, pf_any_int, "pf_any_int");
  __typeof__(&pf_any_as_int) as_int = RESOLVE(lib, pf_any_as_int, "pf_any_as_int");
  __typeof__(&pf_global_get) global_get = RESOLVE(lib, pf_global_get, "pf_global_get");
  __typeof__(&pf_dtype_bytes) dtype_bytes = RESOLVE(lib, pf_dtype_bytes, "pf_dtype_bytes");
  CHECK(create_direct && global_set && global_remove && call && release && retain && strong &&
        any_int && as_int && global_get && dtype_bytes);
  if (failures)
    return 1;

  pf_object_t* fn = NULL;
  CHECK(create_direct(add_ints, &fn) == 0);
  pf_any_t args[2] = {any_int(40), any_int(2)};
  pf_any_t result;
  CHECK(call(fn, args, 2, &result) == 0);
  int64_t value = 0;
  CHECK(as_int(&result, &value) == 0 && value == 42);
  CHECK(call(NULL, args, 2, &result) == -1); /* the failure path raises, *result is none */
  CHECK(result.type_index == PF_TYPE_NONE);
  CHECK(global_set("inline.add", fn, 0) == 0);
  pf_object_t* got = NULL;
  CHECK(global_get("inline.add", &got) == 0 && got == fn);
  CHECK(strong(fn) == 3); /* ours, the table's, got */
  retain(got);
  CHECK(strong(fn) == 4);
  release(got);
  release(got);
  CHECK(strong(fn) == 2);
  CHECK(global_get("inline.absent", &got) == 0 && got == NULL);
  CHECK(dtype_bytes(pf_dtype(PF_DL_FLOAT, 32, 4)) == 16);
  CHECK(global_remove("inline.add") == 0);
  CHECK(strong(fn) == 1);
  release(fn);
  /* no dlclose: the table's storage stays reachable through the loaded library */
  if (failures == 0)
    printf("inline symbols: %zu exported, all checks passed\n", count);
  return failures == 0 ? 0 : 1;
}
