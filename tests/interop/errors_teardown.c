/* Error calls made while a thread or the process is torn down, with the runtimes joined.
 * TVM-FFI's raised slot is a C++ thread_local, which glibc destroys before the thread's pthread
 * key destructors run (thread mode) and, in the thread calling exit(), before atexit handlers
 * (exit mode). packfn's error calls made after that must not reach the destroyed slot, which
 * still hands out the error it released (review: that error was released again, a double free
 * that later crashed the allocator, or chained as a cause). The error pending when TVM-FFI's
 * slot goes stays pending, in packfn's own slot, and is released once.
 *   errors_teardown thread | exit */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tvm/ffi/c_api.h>

#include "packfn/packfn.h"

#include "interop_check.h"

/* An error object whose deleter counts its calls and frees nothing (static storage), so a
 * second release of its last reference shows as a count, not as a crash. */
typedef struct {
  pf_object_t header;
  pf_error_cell_t cell;
  int deleted; /* deleter calls with PF_DELETER_STRONG */
} counted_error_t;

static void counted_deleter(void* self, int flags) {
  if (flags & PF_DELETER_STRONG)
    __atomic_add_fetch(&((counted_error_t*)self)->deleted, 1, __ATOMIC_RELAXED);
}

static void no_backtrace_update(void* self, const pf_byte_array_t* bt, int32_t mode) {
  (void)self;
  (void)bt;
  (void)mode;
}

static void counted_init(counted_error_t* e) {
  memset(e, 0, sizeof *e);
  e->header.combined_ref_count = PF_REF_INITIAL;
  e->header.type_index = PF_TYPE_ERROR;
  e->header.deleter = counted_deleter;
  e->cell.kind = (pf_byte_array_t){"ValueError", 10};
  e->cell.message = (pf_byte_array_t){"left pending at teardown", 24};
  e->cell.backtrace = (pf_byte_array_t){"", 0};
  e->cell.update_backtrace = no_backtrace_update;
}

/* Raises `e` (the slot takes the only reference) and leaves it pending. */
static void leave_pending(counted_error_t* e) {
  CHECK(pf_error_raise(&e->header) == 0);
  pf_object_release(&e->header);
  CHECK(pf_object_strong_count(&e->header) == 1 && e->deleted == 0);
}

/* Error calls in the teardown, after TVM-FFI's thread_locals are gone: `e` is still pending
 * (in packfn's slot) unless packfn's own thread-exit hook has drained it already, a lookup
 * that fails raises over it, and `e` is released exactly once. Ends with a fresh error left
 * pending, for packfn's exit hooks to drain (memcheck reports a leak otherwise). */
static void teardown_calls(counted_error_t* e) {
  pf_object_t* pending = pf_error_peek();
  if (pending) {
    CHECK(pending == &e->header);
    CHECK(e->deleted == 0 && pf_object_strong_count(&e->header) == 1);
  } else {
    CHECK(e->deleted == 1);
  }
  CHECK(pf_global_call("no.such.function", NULL, 0, NULL) == -1);
  pf_object_t* err = pf_error_take();
  CHECK(err && strcmp(pf_error_kind(err), "KeyError") == 0);
  CHECK(err && pf_error_cause(err) == (pending ? &e->header : NULL));
  pf_object_release(err);
  CHECK(pf_error_take() == NULL);
  CHECK(e->deleted == 1 && pf_object_strong_count(&e->header) == 0);
  PF_ERROR_SET(PF_ERR_VALUE, "raised in the teardown, left pending");
}

/* ---- thread mode: key destructors of exiting threads ---- */

enum { THREADS = 8 };
static pthread_key_t key;
static counted_error_t thread_errors[THREADS];

static void key_destructor(void* p) {
  if (p == (void*)1) { /* a packfn error was left: the reviewer's program */
    CHECK(pf_global_call("no.such.function", NULL, 0, NULL) == -1);
    pf_error_clear();
    return;
  }
  teardown_calls(p);
}

static void* worker(void* arg) {
  long i = (long)arg;
  if (i % 2) {
    CHECK(pthread_setspecific(key, (void*)1) == 0);
    PF_ERROR_SET(PF_ERR_VALUE, "left pending when the thread exits");
  } else {
    if (i % 4 == 2) /* TVM-FFI makes its slot in this thread before packfn uses it */
      TVMFFIErrorSetRaisedFromCStr("RuntimeError", "raised by TVM-FFI first");
    counted_init(&thread_errors[i]);
    CHECK(pthread_setspecific(key, &thread_errors[i]) == 0);
    leave_pending(&thread_errors[i]);
  }
  return NULL;
}

static int thread_mode(void) {
  for (long i = 0; i < THREADS; ++i) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, (void*)i) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
  for (int i = 0; i < THREADS; i += 2)
    CHECK(thread_errors[i].deleted == 1);
  return failures != 0;
}

/* ---- exit mode: an atexit handler of the thread that calls exit() ---- */

static counted_error_t exit_error;

static void at_exit(void) {
  teardown_calls(&exit_error);
  CHECK(pf_global_remove("no.such.function") == -1); /* raises over the fresh one */
  if (failures) {
    fprintf(stderr, "errors_teardown exit: %d checks failed\n", failures);
    _exit(1);
  }
}

static int exit_mode(void) {
  CHECK(atexit(at_exit) == 0);
  counted_init(&exit_error);
  leave_pending(&exit_error);
  return failures != 0;
}

int main(int argc, char** argv) {
  CHECK(pthread_key_create(&key, key_destructor) == 0); /* before packfn's own keys */
  void* none = NULL;
  TVMFFIErrorMoveFromRaised(&none); /* also makes this program need libtvm_ffi */
  CHECK(none == NULL);
  CHECK(pf_tvm_ffi_join() == 1);
  int rc = 2;
  if (argc > 1 && strcmp(argv[1], "thread") == 0)
    rc = thread_mode();
  else if (argc > 1 && strcmp(argv[1], "exit") == 0)
    rc = exit_mode();
  else
    fprintf(stderr, "usage: errors_teardown thread | exit\n");
  if (failures)
    fprintf(stderr, "errors_teardown: %d checks failed\n", failures);
  return rc;
}
