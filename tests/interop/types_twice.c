/* A type key registered on both sides before the join (this program links only libpackfn):
 * packfn registers "interop.Twice" while libtvm_ffi is not loaded, then a TVM-FFI library
 * loaded later registers the same key (as a library built for both runtimes would), then
 * pf_tvm_ffi_join(). TVM-FFI keeps its index for the key, packfn keeps its own (objects carry
 * it); each registry must still know the other's index: TVM-FFI ended the process (exit in
 * TVMFFIGetTypeInfo) for an object of packfn's index, and packfn named TVM-FFI's "unknown". */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

#include "interop_check.h"

/* The part of c_api.h's TVMFFITypeInfo read here. */
typedef struct tvm_type_info_s {
  int32_t type_index;
  int32_t type_depth;
  pf_byte_array_t type_key;
  const struct tvm_type_info_s** type_ancestors;
} tvm_type_info_t;

int main(void) {
  int32_t ours = -1, child = -1;
  CHECK(pf_type_register("interop.Twice", PF_TYPE_OBJECT, &ours) == 0 && ours >= 8192);
  CHECK(pf_type_register("interop.TwiceChild", ours, &child) == 0 && child == ours + 1);

  void* lib = dlopen(TVMFFI_LIBRARY_PATH, RTLD_NOW | RTLD_GLOBAL);
  CHECK(lib != NULL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  int32_t (*alloc_index)(const pf_byte_array_t*, int32_t, int32_t, int32_t, int32_t, int32_t);
  const tvm_type_info_t* (*get_type_info)(int32_t);
  *(void**)&alloc_index = dlsym(lib, "TVMFFITypeGetOrAllocIndex");
  *(void**)&get_type_info = dlsym(lib, "TVMFFIGetTypeInfo");
  CHECK(alloc_index && get_type_info);
  if (failures)
    return 1;
  /* what a TVM-FFI library's static initialiser does for a class of that key */
  pf_byte_array_t key = {"interop.Twice", 13};
  int32_t theirs = alloc_index(&key, -1, 1, 0, 1, PF_TYPE_OBJECT);
  CHECK(theirs >= 128 && theirs != ours);

  CHECK(pf_tvm_ffi_join() == 1);
  /* packfn keeps its index for the key (its code holds it), and names TVM-FFI's */
  int32_t found = -1;
  CHECK(pf_type_index_of("interop.Twice", &found) == 0 && found == ours);
  CHECK(strcmp(pf_type_name(theirs), "interop.Twice") == 0);
  CHECK(pf_type_info(theirs) && pf_type_info(theirs)->parent_index == PF_TYPE_OBJECT);
  CHECK(pf_error_peek() == NULL);
  /* TVM-FFI knows packfn's indices: asked about an object of either, it answers (it ended the
   * process), with the parent packfn gave the type */
  fflush(stderr);
  const tvm_type_info_t* info = get_type_info(ours);
  CHECK(info && info->type_index == ours && info->type_depth == 1);
  CHECK(info && info->type_ancestors[0]->type_index == PF_TYPE_OBJECT);
  CHECK(info && info->type_key.size > 13 && memcmp(info->type_key.data, "interop.Twice", 13) == 0);
  info = get_type_info(child);
  CHECK(info && info->type_depth == 2 && info->type_ancestors[1]->type_index == ours);
  /* a type registered after the join under packfn's type is a subtype on both sides */
  int32_t after = -1;
  CHECK(pf_type_register("interop.TwiceAfter", ours, &after) == 0 && after >= 128);
  info = get_type_info(after);
  CHECK(info && info->type_depth == 2 && info->type_ancestors[1]->type_index == ours);
  CHECK(pf_type_is_instance(after, ours) == 1);
  if (failures)
    fprintf(stderr, "types_twice: %d checks failed\n", failures);
  return failures != 0;
}
