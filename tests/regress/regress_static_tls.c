/* Regression test (review of the allocator, finding 3): libpackfn.so loaded late, with dlopen
 * (a Python extension, ctypes), beside another library that uses initial-exec thread-local
 * storage. Such blocks come out of the small static TLS space glibc keeps for libraries loaded
 * late; libpackfn's took 1072 bytes, 512 of them a table of current streams, and its dlopen
 * then failed with "cannot allocate memory in static TLS block" once another library had taken
 * more than about 640 bytes of that space. The stream table is on the heap now (libpackfn's
 * block was 552 bytes then, 608 since the allocator's fresh blocks of 2026-11-24: it loads
 * beside up to about 1100 bytes of another library's).
 *
 * This program does not link libpackfn. It dlopen()s a library with 900 bytes of
 * initial-exec TLS (tls_hog.c) and touches them, then dlopen()s libpackfn, and through dlsym
 * sets and reads current streams (in main and in a second thread), creates and calls a
 * function and a string object.
 *   regress_static_tls TLS_HOG_LIBRARY LIBPACKFN
 * Exit 0; before the fix, exit 1: "dlopen ...: cannot allocate memory in static TLS block". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "packfn/packfn.h"

typedef int (*hog_touch_t)(void);
typedef int (*stream_set_t)(DLDevice, void*, void**);
typedef void* (*stream_get_t)(DLDevice);
typedef int (*function_create_t)(void*, pf_safe_call_t, void (*)(void*), pf_object_t**);
typedef int (*string_create_t)(const char*, size_t, pf_object_t**);
typedef void (*object_release_slow_t)(pf_object_t*, uint64_t);

static stream_set_t stream_set;
static stream_get_t stream_get;
static function_create_t function_create;
static string_create_t string_create;
static object_release_slow_t release_slow;

/* dlsym into a function pointer: POSIX guarantees the conversion, memcpy keeps ISO C quiet. */
#define LOOKUP(lib, var, name)                                                                     \
  do {                                                                                             \
    void* addr_ = dlsym(lib, name);                                                                \
    memcpy(&(var), &addr_, sizeof(var));                                                           \
  } while (0)

/* pf_object_release, which is inline (its slow path through dlsym) */
static void release(pf_object_t* obj) {
  uint64_t before = __atomic_fetch_sub(&obj->combined_ref_count, 1, __ATOMIC_ACQ_REL);
  if ((uint32_t)before == 1)
    release_slow(obj, before);
}

/* The PT_TLS size of the loaded object whose load address is `data` (a size_t in, out). */
static int tls_size_of(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  size_t* io = data;
  if (info->dlpi_addr != (ElfW(Addr)) * io)
    return 0;
  *io = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_TLS)
      *io = info->dlpi_phdr[i].p_memsz;
  return 1;
}

static int add_one(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  *result =
      pf_any_int(num_args == 1 && args[0].type_index == PF_TYPE_INT ? args[0].v_int64 + 1 : -1);
  return 0;
}

/* Two devices' current streams set, read back and reset in the calling thread; 0 when right. */
static int streams(uintptr_t tag) {
  DLDevice gpu0 = {kDLCUDA, 0}, gpu1 = {kDLCUDA, 1};
  void* a = (void*)(tag + 0x100);
  void* b = (void*)(tag + 0x200);
  void* prev = (void*)1;
  if (stream_get(gpu0) != NULL || stream_set(gpu0, a, &prev) != 0 || prev != NULL ||
      stream_set(gpu1, b, NULL) != 0 || stream_get(gpu0) != a || stream_get(gpu1) != b ||
      stream_set(gpu0, NULL, &prev) != 0 || prev != a || stream_get(gpu0) != NULL ||
      stream_get(gpu1) != b || stream_set(gpu1, NULL, NULL) != 0 || stream_get(gpu1) != NULL)
    return 1;
  return 0;
}

static void* thread_streams(void* unused) {
  (void)unused;
  return streams(0x7000) ? (void*)1 : NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s TLS_HOG_LIBRARY LIBPACKFN\n", argv[0]);
    return 2;
  }
  void* hog = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!hog) {
    fprintf(stderr, "FAIL: dlopen %s\n", dlerror());
    return 1;
  }
  hog_touch_t touch;
  LOOKUP(hog, touch, "regress_tls_hog_touch");
  if (!touch) {
    fprintf(stderr, "FAIL: dlsym regress_tls_hog_touch: %s\n", dlerror());
    return 1;
  }
  int bytes = touch();
  Dl_info where;
  size_t tls = 0;
  void* code;
  memcpy(&code, &touch, sizeof code);
  if (dladdr(code, &where) && where.dli_fbase) {
    tls = (size_t)(uintptr_t)where.dli_fbase;
    if (dl_iterate_phdr(tls_size_of, &tls) != 1)
      tls = 0;
  }
  if (tls < (size_t)bytes) {
    fprintf(stderr, "FAIL: %s has %zu bytes of TLS, not %d (was its variable optimised away?)\n",
            argv[1], tls, bytes);
    return 1;
  }
  printf("loaded a library with %zu bytes of initial-exec TLS\n", tls);
  fflush(stdout);
  void* lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "FAIL: dlopen after it: %s\n", dlerror());
    return 1;
  }
  LOOKUP(lib, stream_set, "pf_stream_set");
  LOOKUP(lib, stream_get, "pf_stream_get");
  LOOKUP(lib, function_create, "pf_function_create");
  LOOKUP(lib, string_create, "pf_string_object_create");
  LOOKUP(lib, release_slow, "pf__object_release_slow");
  if (!stream_set || !stream_get || !function_create || !string_create || !release_slow) {
    fprintf(stderr, "FAIL: dlsym: %s\n", dlerror());
    return 1;
  }
  if (streams(0x1000) != 0) {
    fprintf(stderr, "FAIL: current streams in the main thread\n");
    return 1;
  }
  pthread_t t;
  void* thread_rc = (void*)1;
  if (pthread_create(&t, NULL, thread_streams, NULL) != 0 || pthread_join(t, &thread_rc) != 0 ||
      thread_rc != NULL) {
    fprintf(stderr, "FAIL: current streams in a second thread\n");
    return 1;
  }
  pf_object_t* fn;
  if (function_create(NULL, add_one, NULL, &fn) != 0) {
    fprintf(stderr, "FAIL: pf_function_create\n");
    return 1;
  }
  /* pf_function_call, inline: the call through the function's cell */
  pf_any_t arg = pf_any_int(41), result = pf_any_none();
  int rc = ((const pf_function_cell_t*)(fn + 1))->safe_call(fn, &arg, 1, &result);
  release(fn);
  if (rc != 0 || result.type_index != PF_TYPE_INT || result.v_int64 != 42) {
    fprintf(stderr, "FAIL: calling a function made by pf_function_create\n");
    return 1;
  }
  static const char text[] = "a string long enough to be an object, not a small string";
  pf_object_t* s;
  if (string_create(text, sizeof text - 1, &s) != 0) {
    fprintf(stderr, "FAIL: pf_string_object_create\n");
    return 1;
  }
  release(s);
  printf("ok: libpackfn loaded after it; streams, a function call and a string object work\n");
  return 0;
}
