/* A stand-in libtvm_ffi.so (soname libtvm_ffi.so) that packfn must refuse to join: its version
 * is set by the test (fake_tvm_ffi_set_version) and it has only two of the entry points packfn
 * needs. Used by test_tvm_refused. */
#include <stdint.h>

#define FAKE_API __attribute__((visibility("default")))

typedef struct {
  int32_t major, minor, patch;
} fake_version_t;

static fake_version_t fake_version = {0, 2, 0};

FAKE_API void fake_tvm_ffi_set_version(int32_t major, int32_t minor) {
  fake_version.major = major;
  fake_version.minor = minor;
}

FAKE_API void TVMFFIGetVersion(fake_version_t* out) {
  *out = fake_version;
}

FAKE_API int TVMFFIErrorMoveFromRaised(void** out) {
  *out = 0;
  return 0;
}

FAKE_API void TVMFFIErrorSetRaised(void* err) {
  (void)err;
}
