/* A stand-in libtvm_ffi.so (soname libtvm_ffi.so) that packfn joins: version 0.1 and every
 * entry point packfn needs, with an error slot per thread and a global table that holds
 * nothing and whose lookup fails on demand (fake_tvm_ffi_fail_lookup), so that the failure
 * paths of packfn's fallback lookup can be reached. Used by test_tvm_lookup_failed. */
#include <stdint.h>
#include <stddef.h>

#include "packfn/object.h"

#define FAKE_API __attribute__((visibility("default")))

typedef struct {
  int32_t major, minor, patch;
} fake_version_t;

static _Thread_local pf_object_t* fake_slot;
static int fake_fail;            /* 1: TVMFFIFunctionGetGlobal fails */
static pf_object_t* fake_raises; /* what a failing lookup raises (borrowed), or NULL */

/* From now on lookups fail (fail != 0), raising `err` (borrowed; NULL: nothing). */
FAKE_API void fake_tvm_ffi_fail_lookup(int fail, pf_object_t* err) {
  fake_fail = fail;
  fake_raises = err;
}

FAKE_API void TVMFFIGetVersion(fake_version_t* out) {
  out->major = 0;
  out->minor = 1;
  out->patch = 0;
}

FAKE_API void TVMFFIErrorMoveFromRaised(void** out) {
  *out = fake_slot;
  fake_slot = NULL;
}

FAKE_API void TVMFFIErrorSetRaised(void* err) {
  pf_object_t* old = fake_slot;
  pf_object_retain((pf_object_t*)err);
  fake_slot = (pf_object_t*)err;
  pf_object_release(old);
}

FAKE_API int32_t TVMFFITypeGetOrAllocIndex(const void* key, int32_t static_index, int32_t depth,
                                           int32_t slots, int32_t overflow, int32_t parent) {
  (void)key, (void)depth, (void)slots, (void)overflow;
  static int32_t next = 128; /* dynamic indexes (the system module's type) */
  if (parent == -2)
    return -2; /* a lookup of a key: none is known */
  return static_index >= 0 ? static_index : next++;
}

FAKE_API int TVMFFITypeKeyToIndex(const void* key, int32_t* out) {
  (void)key;
  *out = -1;
  return -1;
}

FAKE_API int TVMFFIFunctionGetGlobal(const void* name, void** out) {
  (void)name;
  *out = NULL;
  if (!fake_fail)
    return 0;
  if (fake_raises)
    TVMFFIErrorSetRaised(fake_raises);
  return -1;
}

FAKE_API int TVMFFIFunctionSetGlobal(const void* name, void* f, int allow_override) {
  (void)name, (void)f, (void)allow_override;
  return 0;
}

FAKE_API int TVMFFIFunctionCall(void* f, void* args, int32_t n, void* result) {
  (void)f, (void)args, (void)n, (void)result;
  return -1;
}

FAKE_API const void* TVMFFIGetTypeInfo(int32_t type_index) {
  (void)type_index;
  return NULL;
}
