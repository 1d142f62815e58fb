/* Errors across the join to TVM-FFI (the stand-in fake_tvm_ffi_table.c, whose raised slot is a
 * thread-local pointer): PACKFN_NO_TVM_FFI set to "00" disables joining and set empty does not;
 * errors left pending in packfn's slot before the join move into TVM-FFI's slot (the cause of
 * one TVM-FFI raised since); raises once joined chain onto TVM-FFI's pending error; and a
 * thread that exits with an error in TVM-FFI's slot has it released; type lookups once joined.
 * One process, in order: the join happens once. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "pf_test.h"

static void (*fake_set_raised)(void* err);
static void (*fake_fail_lookup)(int fail, pf_object_t* err);

/* ---- errors laid out by hand, as another runtime's, that count their releases ---- */
typedef struct {
  pf_object_t header;
  pf_error_cell_t cell;
} counted_error_t;
static int g_freed;       /* counted errors freed */
static int g_late_raised; /* errors raised by raising_deleter */
static void counted_update(void* self, const pf_byte_array_t* bt, int32_t mode) {
  (void)self, (void)bt, (void)mode;
}
static void counted_deleter(void* self, int flags) {
  if (flags & 1) /* its cause: packfn may have chained one onto it */
    pf_object_release((pf_object_t*)((counted_error_t*)self)->cell.cause_chain);
  if (flags & 2) {
    __atomic_add_fetch(&g_freed, 1, __ATOMIC_SEQ_CST);
    free(self);
  }
}
static counted_error_t* counted_new(void (*deleter)(void*, int), const char* message) {
  counted_error_t* e = calloc(1, sizeof *e);
  ck_assert_ptr_nonnull(e);
  e->header.combined_ref_count = ((uint64_t)1 << 32) | 1;
  e->header.type_index = PF_TYPE_ERROR;
  e->header.deleter = deleter;
  e->cell.kind = (pf_byte_array_t){"KeyError", 8};
  e->cell.message = (pf_byte_array_t){message, (int64_t)strlen(message)};
  e->cell.backtrace = (pf_byte_array_t){"", 0};
  e->cell.update_backtrace = counted_update;
  return e;
}
/* Its release raises another error (a runtime's cleanup may), which counts too. */
static void raising_deleter(void* self, int flags) {
  if (flags & 1) {
    counted_error_t* late = counted_new(counted_deleter, "raised by a deleter");
    ck_assert_int_eq(pf_error_raise(&late->header), 0);
    pf_object_release(&late->header);
    g_late_raised++;
  }
  counted_deleter(self, flags & 2);
}

/* PACKFN_BACKTRACE asks for native stacks (the test_tvm_errors_full_backtrace run). */
static int full_stacks(void) {
  const char* env = getenv("PACKFN_BACKTRACE");
  return env && *env && strcmp(env, "0") != 0;
}

/* The cell's text (what TVM-FFI reads) has its native frames named: no address line. */
static int cell_named(const pf_object_t* err) {
  const pf_error_cell_t* cell = (const pf_error_cell_t*)(err + 1);
  return strstr(cell->backtrace.data, "<native>") == NULL;
}

/* ---- threads that raise before the join and go on after it ---- */
static pthread_barrier_t g_raised, g_joined;

/* Raises before the join; after it, takes that error back from TVM-FFI's slot. */
static void* take_after_join(void* unused) {
  (void)unused;
  PF_ERROR_SET(PF_ERR_INDEX, "raised before the join");
  pthread_barrier_wait(&g_raised);
  pthread_barrier_wait(&g_joined);
  pf_object_t* err = pf_error_take();
  int ok = err && strcmp(pf_error_message(err), "raised before the join") == 0 &&
           pf_error_cause(err) == NULL && pf_error_take() == NULL;
  /* full stacks: named as it entered TVM-FFI's slot (only this thread held it) */
  if (ok && full_stacks())
    ok = cell_named(err);
  pf_object_release(err);
  return (void*)(intptr_t)ok;
}

/* Raises before the join; after it, TVM-FFI raises its own error (another runtime's object) in
 * this thread: packfn's older error becomes its cause. */
static void* foreign_newer_after_join(void* unused) {
  (void)unused;
  PF_ERROR_SET(PF_ERR_INDEX, "older, before the join");
  pthread_barrier_wait(&g_raised);
  pthread_barrier_wait(&g_joined);
  counted_error_t* theirs = counted_new(counted_deleter, "TVM-FFI's own");
  fake_set_raised(theirs); /* the slot's own reference */
  pf_object_t* err = pf_error_take();
  int ok = err == &theirs->header && pf_error_cause(err) != NULL &&
           strcmp(pf_error_message(pf_error_cause(err)), "older, before the join") == 0 &&
           pf_error_take() == NULL;
  pf_object_release(err);
  pf_object_release(&theirs->header);
  return (void*)(intptr_t)ok;
}

/* Raises a counted error before the join; after it, raises another over it (its cause now) and
 * exits with that one pending in TVM-FFI's slot: both are released at the thread's exit. */
static void* exit_with_pending(void* unused) {
  (void)unused;
  counted_error_t* e = counted_new(counted_deleter, "left pending");
  ck_assert_int_eq(pf_error_raise(&e->header), 0);
  pf_object_release(&e->header);
  pthread_barrier_wait(&g_raised);
  pthread_barrier_wait(&g_joined);
  PF_ERROR_SET(PF_ERR_VALUE, "raised after the join");
  pf_object_t* err = pf_error_peek();
  int ok = err && strcmp(pf_error_message(err), "raised after the join") == 0 &&
           pf_error_cause(err) == &e->header;
  return (void*)(intptr_t)ok;
}

START_TEST(test_errors_across_the_join) {
  /* before libtvm_ffi is loaded: packfn's own slot, in this thread and in three others */
  PF_ERROR_SET(PF_ERR_KEY, "main's, before the join");
  pf_object_t* mains = pf_error_peek();
  pf_object_retain(mains); /* shared: another holder may be reading its text */
  pthread_t a, b, c;
  ck_assert_int_eq(pthread_barrier_init(&g_raised, NULL, 4), 0);
  ck_assert_int_eq(pthread_barrier_init(&g_joined, NULL, 4), 0);
  ck_assert_int_eq(pthread_create(&a, NULL, take_after_join, NULL), 0);
  ck_assert_int_eq(pthread_create(&b, NULL, exit_with_pending, NULL), 0);
  ck_assert_int_eq(pthread_create(&c, NULL, foreign_newer_after_join, NULL), 0);
  pthread_barrier_wait(&g_raised);
  ck_assert_int_eq(pf_tvm_ffi_joined(), 0);

  void* fake = dlopen(PF_FAKE_TVM_FFI_TABLE, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(fake != NULL, "%s", dlerror());
  *(void**)&fake_set_raised = dlsym(fake, "TVMFFIErrorSetRaised");
  ck_assert(fake_set_raised != NULL);
  *(void**)&fake_fail_lookup = dlsym(fake, "fake_tvm_ffi_fail_lookup");
  ck_assert(fake_fail_lookup != NULL);
  /* "00" is not "0": joining is off; empty: on */
  ck_assert_int_eq(setenv("PACKFN_NO_TVM_FFI", "00", 1), 0);
  ck_assert_int_eq(pf_tvm_ffi_join(), 0);
  ck_assert_int_eq(pf_tvm_ffi_joined(), 0);
  ck_assert_int_eq(setenv("PACKFN_NO_TVM_FFI", "", 1), 0);
  ck_assert_int_eq(pf_tvm_ffi_join(), 1);
  ck_assert_int_eq(unsetenv("PACKFN_NO_TVM_FFI"), 0);

  /* TVM-FFI raised an error in this thread since: main's older one becomes its cause */
  pf_object_t* newer;
  ck_assert_int_eq(pf_error_create(PF_ERR_RUNTIME, "TVM-FFI's", NULL, &newer), 0);
  fake_set_raised(newer); /* the slot's own reference */
  pf_object_t* got = pf_error_take();
  ck_assert_ptr_eq(got, newer);
  ck_assert_ptr_nonnull(pf_error_cause(got));
  ck_assert_ptr_eq(pf_error_cause(got), mains);
  if (full_stacks()) { /* shared, its cell was left as it was; packfn's reader names it */
    ck_assert(!cell_named(mains));
    ck_assert_ptr_null(strstr(pf_error_backtrace(mains), "<native>"));
  }
  pf_object_release(mains);
  ck_assert_ptr_null(pf_error_take());
  pf_object_release(got);
  pf_object_release(newer);

  g_freed = 0;
  pthread_barrier_wait(&g_joined);
  void* ok_a = NULL;
  void* ok_b = NULL;
  ck_assert_int_eq(pthread_join(a, &ok_a), 0);
  ck_assert_int_eq(pthread_join(b, &ok_b), 0);
  void* ok_c = NULL;
  ck_assert_int_eq(pthread_join(c, &ok_c), 0);
  ck_assert_msg(ok_c != NULL, "TVM-FFI's error did not take the older one as its cause");
  ck_assert_msg(ok_a != NULL, "the error raised before the join was not taken back");
  ck_assert_msg(ok_b != NULL, "the error raised after the join did not chain");
  /* b's pending error (and its cause) released at its exit; c's, TVM-FFI's, by c */
  ck_assert_int_eq(g_freed, 2);
  pthread_barrier_destroy(&g_raised);
  pthread_barrier_destroy(&g_joined);

  /* joined: raising an error that already has a cause over a pending error whose release
   * raises another: both pending and late errors are released, the raised one keeps its cause */
  pf_object_t *err, *cause;
  ck_assert_int_eq(pf_error_create(PF_ERR_VALUE, "raised", NULL, &err), 0);
  ck_assert_int_eq(pf_error_create(PF_ERR_KEY, "its cause", NULL, &cause), 0);
  ck_assert_int_eq(pf_error_set_cause(err, cause), 0);
  counted_error_t* pending = counted_new(raising_deleter, "pending");
  ck_assert_int_eq(pf_error_raise(&pending->header), 0);
  pf_object_release(&pending->header);
  g_freed = 0;
  g_late_raised = 0;
  ck_assert_int_eq(pf_error_raise(err), 0);
  ck_assert_int_eq(g_late_raised, 1);
  ck_assert_int_eq(g_freed, 2); /* the pending error and the one its release raised */
  ck_assert_ptr_eq(pf_error_peek(), err);
  got = pf_error_take();
  ck_assert_ptr_eq(got, err);
  ck_assert_ptr_eq(pf_error_cause(got), cause);
  ck_assert_ptr_null(pf_error_peek());
  pf_object_release(got);
  /* a new error over a pending one whose release raises: the pending one is its cause */
  pending = counted_new(raising_deleter, "pending again");
  ck_assert_int_eq(pf_error_raise(&pending->header), 0);
  pf_object_release(&pending->header);
  PF_ERROR_SET(PF_ERR_OS, "new");
  got = pf_error_take();
  ck_assert_ptr_eq(pf_error_cause(got), &pending->header);
  g_freed = 0;
  pf_object_release(got);
  ck_assert_int_eq(g_freed, 1);
  /* its deleter raised once more as it went: that error is pending now */
  got = pf_error_take();
  ck_assert_ptr_nonnull(got);
  ck_assert_str_eq(pf_error_message(got), "raised by a deleter");
  pf_object_release(got);
  /* a shared error raised over a pending one: left as it is, the pending one released */
  PF_ERROR_SET(PF_ERR_KEY, "dropped");
  pf_object_retain(err); /* another reference */
  ck_assert_int_eq(pf_error_raise(err), 0);
  got = pf_error_take();
  ck_assert_ptr_eq(got, err);
  ck_assert_ptr_eq(pf_error_cause(got), cause);
  pf_object_release(got);
  pf_object_release(err);
  pf_object_release(err);
  pf_object_release(cause);
}
END_TEST

/* Joined (the test above ran first), an index packfn has no entry for is looked for among
 * TVM-FFI's types (ffi.GetRegisteredTypeKeys, which the stand-in lacks): still unknown, and a
 * failed lookup raises nothing, an error TVM-FFI raised for it included. */
START_TEST(test_unknown_type_lookups_joined) {
  ck_assert_int_eq(pf_tvm_ffi_joined(), 1);
  ck_assert_str_eq(pf_type_name(20000), "unknown");
  ck_assert_ptr_null(pf_type_info(20000));
  ck_assert_ptr_null(pf_error_peek());
  fake_fail_lookup(1, NULL);
  ck_assert_str_eq(pf_type_name(20001), "unknown");
  ck_assert_int_eq(pf_type_is_instance(20001, PF_TYPE_OBJECT), 0);
  ck_assert_ptr_null(pf_error_peek());
  pf_object_t* theirs;
  ck_assert_int_eq(pf_error_create(PF_ERR_RUNTIME, "TVM-FFI's lookup failed", NULL, &theirs), 0);
  fake_fail_lookup(1, theirs);
  ck_assert_str_eq(pf_type_name(20002), "unknown");
  ck_assert_ptr_null(pf_error_peek()); /* dropped */
  fake_fail_lookup(0, NULL);
  ck_assert_uint_eq(pf_object_strong_count(theirs), 1);
  pf_object_release(theirs);
  ck_assert_str_eq(pf_type_name(PF_TYPE_TENSOR), "Tensor");
}
END_TEST

Suite* make_suite(void) {
  Suite* s = suite_create("tvm_errors");
  TCase* tc = tcase_create("join");
  tcase_add_test(tc, test_errors_across_the_join);
  tcase_add_test(tc, test_unknown_type_lookups_joined);
  suite_add_tcase(s, tc);
  return s;
}

PF_TEST_MAIN()
