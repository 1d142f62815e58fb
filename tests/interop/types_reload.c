/* A library holding packfn statically, joined to TVM-FFI, registers a subtype of Tensor (at
 * an index of a block packfn reserves in TVM-FFI's registry), is closed, loaded again (at the
 * same address, as the loader tends to), and registers another. The copy loaded again named
 * its first block as the copy before had, TVM-FFI handed back that block and its taken index,
 * and the registration ended the process ("Conflicting static index"; review). Both are
 * registered now, at different indices TVM-FFI knows.
 *   interop_types_reload STATIC_PACKFN_LIBRARY */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "packfn/abi.h"

typedef int (*join_fn)(void);
typedef int (*register_fn)(const char*, int32_t, int32_t*);

static int register_in_a_copy(const char* lib, const char* key, int32_t* index) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "FAIL: dlopen %s: %s\n", lib, dlerror());
    return 1;
  }
  join_fn join;
  register_fn reg;
  *(void**)&join = dlsym(h, "pf_tvm_ffi_join");
  *(void**)&reg = dlsym(h, "pf_type_register");
  int bad = !join || !reg || join() != 1 || reg(key, PF_TYPE_TENSOR, index) != 0;
  if (bad)
    fprintf(stderr, "FAIL: %s: the copy did not join or register %s\n", lib, key);
  dlclose(h);
  return bad;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: interop_types_reload STATIC_PACKFN_LIBRARY\n");
    return 2;
  }
  void* tvm = dlopen(TVMFFI_LIBRARY_PATH, RTLD_NOW | RTLD_GLOBAL);
  if (!tvm) {
    fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  int (*key_to_index)(const pf_byte_array_t*, int32_t*);
  *(void**)&key_to_index = dlsym(tvm, "TVMFFITypeKeyToIndex");
  int32_t a = -1, b = -1, ta = -2, tb = -2;
  if (register_in_a_copy(argv[1], "interop.reload.SubTensorA", &a) != 0 ||
      register_in_a_copy(argv[1], "interop.reload.SubTensorB", &b) != 0)
    return 1;
  pf_byte_array_t ka = {"interop.reload.SubTensorA", 25}, kb = {"interop.reload.SubTensorB", 25};
  if (!key_to_index || key_to_index(&ka, &ta) != 0 || key_to_index(&kb, &tb) != 0 || ta != a ||
      tb != b || a == b || a < 128 || b < 128) {
    fprintf(stderr, "FAIL: indices %d and %d, TVM-FFI's %d and %d\n", a, b, ta, tb);
    return 1;
  }
  return 0;
}
