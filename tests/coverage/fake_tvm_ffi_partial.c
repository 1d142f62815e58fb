/* Stand-ins for libtvm_ffi.so (soname libtvm_ffi.so) that packfn must refuse to join, built in
 * variants (tests/CMakeLists.coverage.txt): FAKE_NO_VERSION leaves TVMFFIGetVersion out,
 * FAKE_MAJOR.FAKE_MINOR is the version it gives, FAKE_ENTRIES is how many of the entry points
 * packfn needs it has (the first ones, in the order packfn checks them) and FAKE_ONE_STREAM adds
 * TVMFFIEnvSetStream without TVMFFIEnvGetStream. packfn looks the entry points up and calls
 * only TVMFFIGetVersion. Used by test_tvm_refused. */
#include <stdint.h>

#define FAKE_API __attribute__((visibility("default")))

#ifndef FAKE_NO_VERSION
typedef struct {
  int32_t major, minor, patch;
} fake_version_t;

FAKE_API void TVMFFIGetVersion(fake_version_t* out) {
  out->major = FAKE_MAJOR;
  out->minor = FAKE_MINOR;
  out->patch = 0;
}
#endif

#if FAKE_ENTRIES > 0
FAKE_API void TVMFFIErrorMoveFromRaised(void) {}
#endif
#if FAKE_ENTRIES > 1
FAKE_API void TVMFFIErrorSetRaised(void) {}
#endif
#if FAKE_ENTRIES > 2
FAKE_API void TVMFFITypeGetOrAllocIndex(void) {}
#endif
#if FAKE_ENTRIES > 3
FAKE_API void TVMFFITypeKeyToIndex(void) {}
#endif
#if FAKE_ENTRIES > 4
FAKE_API void TVMFFIFunctionGetGlobal(void) {}
#endif
#if FAKE_ENTRIES > 5
FAKE_API void TVMFFIFunctionSetGlobal(void) {}
#endif
#if FAKE_ENTRIES > 6
FAKE_API void TVMFFIFunctionCall(void) {}
#endif
#if FAKE_ENTRIES > 7
FAKE_API void TVMFFIGetTypeInfo(void) {}
#endif
#ifdef FAKE_ONE_STREAM
FAKE_API void TVMFFIEnvSetStream(void) {}
#endif
