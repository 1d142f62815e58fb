/* Errors with both runtimes in one process: raised in either, taken from either, with kind,
 * message, cause chain and backtrace intact, directly and through calls each way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/ffi/c_api.h>

#include "packfn/packfn.h"

#include "interop_check.h"

static const TVMFFIErrorCell* cell_of(void* err) {
  return (const TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
}

static int bytes_eq(TVMFFIByteArray b, const char* s) {
  return b.size == strlen(s) && memcmp(b.data, s, b.size) == 0;
}

/* A TVM-FFI C function (TVMFFISafeCallType) that raises through TVM-FFI. */
static int tvm_raiser(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  (void)result;
  TVMFFIErrorSetRaisedFromCStr("IndexError", "raised by a TVM-FFI function");
  return -1;
}

/* A packfn function that raises through packfn. */
static int pf_raiser(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)n;
  (void)result;
  PF_ERROR_SET(PF_ERR_KEY, "raised by a packfn function");
  return -1;
}

static void packfn_to_tvm(void) {
  PF_ERROR_SET(PF_ERR_VALUE, "from packfn %d", 1);
  CHECK(pf_tvm_ffi_joined());
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err != NULL);
  if (!err)
    return;
  CHECK(bytes_eq(cell_of(err)->kind, "ValueError"));
  CHECK(bytes_eq(cell_of(err)->message, "from packfn 1"));
  /* TVM-FFI's frame format, most recent first */
  CHECK(strncmp(cell_of(err)->backtrace.data, "  File \"", 8) == 0);
  CHECK(strstr(cell_of(err)->backtrace.data, "in packfn_to_tvm\n") != NULL);
  /* update_backtrace from TVM-FFI's side (append, as it does going up the stack) */
  TVMFFIByteArray more = {"  File \"outer.cc\", line 9, in outer\n", 36};
  cell_of(err)->update_backtrace(err, &more, kTVMFFIBacktraceUpdateModeAppend);
  CHECK(strstr(pf_error_backtrace(err), "in outer\n") != NULL);
  CHECK(pf_error_peek() == NULL);
  CHECK(pf_error_take() == NULL);
  TVMFFIObjectDecRef(err);
}

static void tvm_to_packfn(void) {
  TVMFFIErrorSetRaisedFromCStr("RuntimeError", "from TVM-FFI");
  pf_object_t* peeked = pf_error_peek();
  CHECK(peeked != NULL);
  pf_object_t* err = pf_error_take();
  CHECK(err == peeked);
  CHECK(err && strcmp(pf_error_kind(err), "RuntimeError") == 0);
  CHECK(err && strcmp(pf_error_message(err), "from TVM-FFI") == 0);
  CHECK(err && pf_object_strong_count(err) == 1);
  /* packfn appends to a TVM-FFI error's backtrace through its cell */
  CHECK(pf_error_append_backtrace(err, "  File \"x.c\", line 1, in f\n") == 0);
  CHECK(err && strstr(pf_error_backtrace(err), "in f\n") != NULL);
  pf_object_release(err);
  void* none = (void*)1;
  TVMFFIErrorMoveFromRaised(&none);
  CHECK(none == NULL);
}

/* packfn's rule over TVM-FFI's slot: a pending error (from either) becomes the cause. */
static void causes(void) {
  TVMFFIErrorSetRaisedFromCStr("KeyError", "inner, from TVM-FFI");
  PF_ERROR_SET(PF_ERR_RUNTIME, "outer, from packfn");
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err && bytes_eq(cell_of(err)->message, "outer, from packfn"));
  void* cause = err ? cell_of(err)->cause_chain : NULL;
  CHECK(cause && bytes_eq(cell_of(cause)->message, "inner, from TVM-FFI"));
  char buf[256];
  pf_error_format(err, buf, sizeof buf);
  CHECK(strcmp(buf, "RuntimeError: outer, from packfn\ncaused by KeyError: inner, from TVM-FFI") ==
        0);
  if (err)
    TVMFFIObjectDecRef(err);
  /* nothing stale: the next error has no cause */
  PF_ERROR_SET(PF_ERR_VALUE, "alone");
  pf_object_t* alone = pf_error_take();
  CHECK(alone && pf_error_cause(alone) == NULL);
  pf_object_release(alone);
  /* a TVM-FFI error created with a cause, read from packfn */
  void* inner = NULL;
  void* outer = NULL;
  TVMFFIByteArray k = {"OSError", 7}, m = {"io", 2}, b = {"", 0};
  CHECK(TVMFFIErrorCreate(&k, &m, &b, &inner) == 0);
  CHECK(TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, inner, NULL, &outer) == 0);
  CHECK(pf_error_cause(outer) == inner);
  CHECK(pf_error_raise(outer) == 0);
  pf_error_clear();
  TVMFFIObjectDecRef(outer);
  TVMFFIObjectDecRef(inner);
}

static void through_calls(void) {
  /* TVMFFIFunctionCall on a packfn function that raises */
  pf_object_t* fn = NULL;
  CHECK(pf_function_create(NULL, pf_raiser, NULL, &fn) == 0);
  TVMFFIAny result;
  result.type_index = kTVMFFINone;
  result.v_int64 = 0;
  CHECK(TVMFFIFunctionCall(fn, NULL, 0, &result) == -1);
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err && bytes_eq(cell_of(err)->kind, "KeyError"));
  CHECK(err && strstr(cell_of(err)->backtrace.data, "in pf_raiser\n") != NULL);
  if (err)
    TVMFFIObjectDecRef(err);
  pf_object_release(fn);
  /* pf_function_call on a TVM-FFI function that raises */
  void* tfn = NULL;
  CHECK(TVMFFIFunctionCreate(NULL, tvm_raiser, NULL, &tfn) == 0);
  pf_any_t out = pf_any_none();
  CHECK(pf_function_call((pf_object_t*)tfn, NULL, 0, &out) == -1);
  pf_object_t* perr = pf_error_take();
  CHECK(perr && strcmp(pf_error_kind(perr), "IndexError") == 0);
  CHECK(perr && strcmp(pf_error_message(perr), "raised by a TVM-FFI function") == 0);
  pf_object_release(perr);
  TVMFFIObjectDecRef(tfn);
}

/* A MemoryError packfn raises for an allocation it cannot make crosses like any other. */
static void never_deleted(void* self, int flags) {
  (void)self;
  (void)flags;
}

static void oom_crosses(void) {
  pf_object_t* obj = NULL;
  CHECK(pf_object_alloc((size_t)1 << 62, PF_TYPE_OBJECT, never_deleted, &obj) == -1);
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err && bytes_eq(cell_of(err)->kind, "MemoryError"));
  if (err)
    TVMFFIObjectDecRef(err);
}

/* With PACKFN_NO_TVM_FFI=1 the two runtimes keep separate slots. */
static int apart(void) {
  CHECK(pf_tvm_ffi_join() == 0);
  PF_ERROR_SET(PF_ERR_VALUE, "packfn's own");
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err == NULL);
  TVMFFIErrorSetRaisedFromCStr("KeyError", "TVM-FFI's own");
  pf_object_t* mine = pf_error_take();
  CHECK(mine && strcmp(pf_error_message(mine), "packfn's own") == 0);
  pf_object_release(mine);
  CHECK(pf_error_take() == NULL);
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err && bytes_eq(cell_of(err)->message, "TVM-FFI's own"));
  if (err)
    TVMFFIObjectDecRef(err);
  int32_t t = -1;
  CHECK(pf_type_register("interop.Apart", PF_TYPE_OBJECT, &t) == 0 && t >= 8192);
  TVMFFIByteArray key = {"interop.Apart", 13};
  CHECK(TVMFFITypeGetOrAllocIndex(&key, -1, 0, 0, 0, -2) == -2); /* TVM-FFI never saw it */
  return failures != 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--apart") == 0)
    return apart();
  CHECK(pf_tvm_ffi_join() == 1);
  packfn_to_tvm();
  tvm_to_packfn();
  causes();
  through_calls();
  oom_crosses();
  if (failures)
    fprintf(stderr, "errors_interop: %d checks failed\n", failures);
  return failures != 0;
}
