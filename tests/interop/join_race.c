/* Joining TVM-FFI while packfn writes (found by review, 2026-11-23). This program links only
 * libpackfn and dlopen()s the wheel's libtvm_ffi by path (argv[2]), so the join happens while
 * another thread is inside a packfn call. Modes (argv[1]):
 *
 *   remove, set, type: a writer thread calls pf_global_remove / pf_global_set /
 *     pf_type_register while the main thread joins. The window is made certain, not likely:
 *     this program defines pthread_mutex_lock (libpackfn's calls reach it through the PLT),
 *     and the writer's first lock waits there until the join is done. A writer that decided
 *     "not joined" before its lock then wrote packfn's side only: a removed name came back
 *     through TVM-FFI's table, a new one never reached it, and a new type got an index
 *     TVM-FFI did not know (an object of it ended the process inside TVM-FFI).
 *   mirror: joined, one thread asks the name of a type index nobody registered (packfn then
 *     mirrors TVM-FFI's registry, calling into TVM-FFI's tables) while another sets and
 *     removes globals (packfn writes TVM-FFI's function table). TVM-FFI's tables take no lock
 *     of their own; packfn's mirror called into them without packfn's locks. A crash needs
 *     the two to meet inside a rehash: this 3-second run crashed the old code in one of three
 *     runs, the reviewer's 5-second runs in eight of eight. */
#define _GNU_SOURCE /* RTLD_NEXT, usleep, clock_gettime, syscall */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "packfn/packfn.h"

#include "interop_check.h"

/* The thread whose next pthread_mutex_lock waits for the join (its kernel id), 0 for none. Not
 * a thread-local: LeakSanitizer's tracer, a thread without TLS, also calls pthread_mutex_lock at
 * exit, and reading a __thread there crashed it (under ASan in CI, once). */
static pid_t armed_tid;
static int writer_waiting, join_done; /* atomics */

__attribute__((visibility("default"))) int pthread_mutex_lock(pthread_mutex_t* m) {
  static int (*real)(pthread_mutex_t*);
  if (!__atomic_load_n(&real, __ATOMIC_ACQUIRE)) {
    void* f = dlsym(RTLD_NEXT, "pthread_mutex_lock");
    __atomic_store_n((void**)&real, f, __ATOMIC_RELEASE);
  }
  pid_t armed = __atomic_load_n(&armed_tid, __ATOMIC_ACQUIRE);
  if (armed && armed == (pid_t)syscall(SYS_gettid)) {
    __atomic_store_n(&armed_tid, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&writer_waiting, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&join_done, __ATOMIC_SEQ_CST))
      usleep(1000);
  }
  return real(m);
}

static int seven(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self, (void)args, (void)n;
  *result = pf_any_int(7);
  return 0;
}

static pf_object_t* make_function(void) {
  pf_object_t* f = NULL;
  CHECK(pf_function_create(NULL, seven, NULL, &f) == 0);
  return f;
}

static const char* mode;
static int32_t registered = -1;

static void* writer(void* unused) {
  (void)unused;
  pf_object_t* f = make_function(); /* made before arming */
  __atomic_store_n(&armed_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
  if (strcmp(mode, "remove") == 0)
    CHECK(pf_global_remove("join_race.removed") == 0);
  else if (strcmp(mode, "set") == 0)
    CHECK(pf_global_set("join_race.added", f, 0) == 0);
  else
    CHECK(pf_type_register("join_race.Type", PF_TYPE_OBJECT, &registered) == 0);
  __atomic_store_n(&armed_tid, 0, __ATOMIC_RELEASE);
  pf_object_release(f);
  return NULL;
}

typedef struct {
  int (*get_global)(const pf_byte_array_t* name, void** out);
  int (*key_to_index)(const pf_byte_array_t* key, int32_t* out);
  void (*move_from_raised)(void** out);
} tvm_api_t;

static int writer_during_join(const char* library) {
  pf_object_t* f = make_function();
  CHECK(pf_global_set("join_race.removed", f, 0) == 0); /* the process's first table use */
  pf_object_release(f);
  CHECK(!pf_tvm_ffi_joined());
  pthread_t t;
  CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
  while (!__atomic_load_n(&writer_waiting, __ATOMIC_SEQ_CST))
    usleep(1000);
  void* lib = dlopen(library, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", library, dlerror());
    return 1;
  }
  CHECK(pf_tvm_ffi_join() == 1);
  __atomic_store_n(&join_done, 1, __ATOMIC_SEQ_CST);
  pthread_join(t, NULL);

  tvm_api_t tvm;
  *(void**)&tvm.get_global = dlsym(lib, "TVMFFIFunctionGetGlobal");
  *(void**)&tvm.key_to_index = dlsym(lib, "TVMFFITypeKeyToIndex");
  *(void**)&tvm.move_from_raised = dlsym(lib, "TVMFFIErrorMoveFromRaised");
  CHECK(tvm.get_global && tvm.key_to_index && tvm.move_from_raised);
  if (strcmp(mode, "type") == 0) {
    pf_byte_array_t key = {"join_race.Type", 14};
    int32_t theirs = -1;
    CHECK(tvm.key_to_index(&key, &theirs) == 0);
    if (theirs != registered)
      fprintf(stderr, "packfn registered join_race.Type as %d, TVM-FFI knows it as %d\n",
              (int)registered, (int)theirs);
    CHECK(registered >= 0 && theirs == registered);
  } else {
    const char* name = strcmp(mode, "remove") == 0 ? "join_race.removed" : "join_race.added";
    int want = strcmp(mode, "set") == 0; /* present in both tables, or in neither */
    pf_byte_array_t key = {name, strlen(name)};
    void* theirs = NULL;
    CHECK(tvm.get_global(&key, &theirs) == 0);
    pf_object_t* ours = NULL;
    CHECK(pf_global_get(name, &ours) == 0);
    if ((theirs != NULL) != want || (ours != NULL) != want)
      fprintf(stderr, "%s after the %s: packfn's lookup %s, TVM-FFI's table %s\n", name, mode,
              ours ? "finds it" : "does not find it", theirs ? "holds it" : "does not");
    CHECK((theirs != NULL) == want);
    CHECK((ours != NULL) == want);
    pf_object_release(theirs);
    pf_object_release(ours);
  }
  return 0;
}

static int stop;

static void* type_names(void* unused) {
  (void)unused;
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
    CHECK(strcmp(pf_type_name(20000), "unknown") == 0); /* an index nobody registered */
  return NULL;
}

static int mirror_while_writing(const char* library) {
  void* lib = dlopen(library, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", library, dlerror());
    return 1;
  }
  CHECK(pf_tvm_ffi_join() == 1);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, type_names, NULL) == 0);
  pf_object_t* f = make_function();
  char name[64];
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long i = 0;
  do {
    snprintf(name, sizeof name, "join_race.mirror.%ld", i);
    CHECK(pf_global_set(name, f, 0) == 0);
    if (i++ % 2)
      CHECK(pf_global_remove(name) == 0);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec - start.tv_sec < 3);
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  pthread_join(t, NULL);
  pf_object_release(f);
  printf("%ld names written while the other thread mirrored\n", i);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s remove|set|type|mirror LIBTVM_FFI\n", argv[0]);
    return 2;
  }
  mode = argv[1];
  int rc =
      strcmp(mode, "mirror") == 0 ? mirror_while_writing(argv[2]) : writer_during_join(argv[2]);
  if (rc == 0 && failures == 0)
    printf("join_race %s: ok\n", mode);
  return rc != 0 || failures != 0;
}
