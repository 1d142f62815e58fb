/* Tests of the error layer: raising and taking, the exact cell layout, cause chains, raise
 * sites in the backtrace, per-thread isolation and errors from another runtime. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <wchar.h>

#include "pf_test.h"

START_TEST(test_set_take) {
  ck_assert_ptr_null(pf_error_peek());
  int raise_line = __LINE__ + 1;
  PF_ERROR_SET("ValueError", "bad value %d for %s", 7, "x");
  pf_object_t* err = pf_error_peek();
  ck_assert_ptr_nonnull(err);
  ck_assert_int_eq(err->type_index, PF_TYPE_ERROR);
  err = pf_error_take();
  ck_assert_ptr_null(pf_error_peek());
  ck_assert_str_eq(pf_error_kind(err), "ValueError");
  ck_assert_str_eq(pf_error_message(err), "bad value 7 for x");
  const pf_error_cell_t* cell = (const pf_error_cell_t*)((char*)err + 24);
  ck_assert_uint_eq(cell->kind.size, 10);
  ck_assert_uint_eq(cell->message.size, strlen("bad value 7 for x"));
  ck_assert(cell->update_backtrace != NULL);
  ck_assert_ptr_null(cell->cause_chain);
  ck_assert_ptr_null(cell->extra_context);
  /* the raise site: this file, this line, this function, as TVM-FFI writes a frame */
  char frame[512];
  snprintf(frame, sizeof frame, "  File \"%s\", line %d, in %s\n", __FILE__, raise_line, __func__);
  ck_assert_str_eq(pf_error_backtrace(err), frame);
  ck_assert_uint_eq(pf_object_strong_count(err), 1);
  pf_object_release(err);
  ck_assert_ptr_null(pf_error_take());
}
END_TEST

/* pf_error_set is a plain function (no macro of that name): called directly or through a
 * pointer, it raises with no recorded site; PF_ERROR_SET records the site. */
START_TEST(test_plain_function_form) {
  void (*fp)(const char*, const char*, ...) = &pf_error_set;
  fp("KeyError", "no %s", "key");
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), "KeyError");
  ck_assert_str_eq(pf_error_message(err), "no key");
  ck_assert_str_eq(pf_error_backtrace(err), "  File \"<unknown>\", line 0, in <unknown>\n");
  pf_object_release(err);
  /* an explicit site: file, line and function given; a NULL function reads "<unknown>" */
  pf_error_set_at("dir/x.c", 12, "caller", "KeyError", "m");
  err = pf_error_take();
  ck_assert_str_eq(pf_error_backtrace(err), "  File \"dir/x.c\", line 12, in caller\n");
  pf_object_release(err);
  pf_error_set_at("y.c", 3, NULL, "KeyError", "m");
  err = pf_error_take();
  ck_assert_str_eq(pf_error_backtrace(err), "  File \"y.c\", line 3, in <unknown>\n");
  pf_object_release(err);
  /* a compile-time site without a line number after its last ':' */
  pf_error_site_t odd = {"c:/odd", 6, NULL, 0};
  pf_error_set_site(&odd, "KeyError", "m");
  err = pf_error_take();
  ck_assert_str_eq(pf_error_backtrace(err), "  File \"c:/odd\", line 0, in <unknown>\n");
  pf_object_release(err);
  pf_error_set(PF_ERR_VALUE, "direct %d", 7);
  err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "direct 7");
  ck_assert_ptr_null(strstr(pf_error_backtrace(err), "test_error.c"));
  pf_object_release(err);
  PF_ERROR_SET(NULL, NULL);
  err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), "RuntimeError");
  ck_assert_str_eq(pf_error_message(err), "");
  pf_object_release(err);
}
END_TEST

START_TEST(test_long_message) {
  char big[2000];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  PF_ERROR_SET("ValueError", "<%s>", big);
  pf_object_t* err = pf_error_take();
  ck_assert_uint_eq(strlen(pf_error_message(err)), sizeof big + 1);
  pf_object_release(err);
}
END_TEST

/* A message whose formatting fails (here a wide character the C locale cannot encode; a
 * message past INT_MAX bytes fails the same way) keeps the text formatted before the failure:
 * it was empty. */
/* An error kind is a name: an empty one raises as RuntimeError (as NULL does), and
 * pf_error_create refuses it, leaving its output NULL as on every failure. */
START_TEST(test_empty_kind) {
  pf_error_set("", "no kind");
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), "RuntimeError");
  ck_assert_str_eq(pf_error_message(err), "no kind");
  pf_object_release(err);
  pf_object_t* out = (pf_object_t*)&err;
  ck_assert_int_eq(pf_error_create("", "m", NULL, &out), -1);
  PF_ASSERT_RAISED("ValueError", "pf_error_create: argument kind: expected an error kind name");
  ck_assert_ptr_null(out);
  out = (pf_object_t*)&err;
  ck_assert_int_eq(pf_error_create(NULL, "m", NULL, &out), -1);
  PF_ASSERT_RAISED("ValueError", "pf_error_create: argument kind");
  ck_assert_ptr_null(out);
}
END_TEST

START_TEST(test_failed_format_keeps_text) {
  static const wchar_t bad[] = {0x80, 0};
  PF_ERROR_SET("ValueError", "abc%lsdef", bad);
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), "ValueError");
  ck_assert_str_eq(pf_error_message(err), "abc");
  pf_object_release(err);
}
END_TEST

START_TEST(test_cause_chain) {
  PF_ERROR_SET("KeyError", "inner");
  PF_ERROR_SET("RuntimeError", "outer");
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "outer");
  pf_object_t* cause = pf_error_cause(err);
  ck_assert_ptr_nonnull(cause);
  ck_assert_str_eq(pf_error_kind(cause), "KeyError");
  ck_assert_ptr_null(pf_error_cause(cause));
  char buf[256];
  size_t n = pf_error_format(err, buf, sizeof buf);
  ck_assert_str_eq(buf, "RuntimeError: outer\ncaused by KeyError: inner");
  ck_assert_uint_eq(n, strlen(buf));
  char tiny[8];
  ck_assert_uint_eq(pf_error_format(err, NULL, 64), n); /* measures only (it crashed, review) */
  ck_assert_uint_eq(pf_error_format(err, tiny, sizeof tiny), n);
  ck_assert_uint_eq(strlen(tiny), 7);
  pf_object_release(err);
}
END_TEST

START_TEST(test_create_raise_existing) {
  pf_object_t* err;
  ck_assert_int_eq(pf_error_create("IndexError", "out of range", "site\n", &err), 0);
  ck_assert_ptr_null(pf_error_peek());
  ck_assert_int_eq(pf_error_raise(err), 0);
  ck_assert_ptr_eq(pf_error_peek(), err);
  ck_assert_uint_eq(pf_object_strong_count(err), 2);
  /* raising the same one again does not chain it to itself */
  ck_assert_int_eq(pf_error_raise(err), 0);
  ck_assert_ptr_null(pf_error_cause(err));
  ck_assert_uint_eq(pf_object_strong_count(err), 2);
  pf_error_clear();
  ck_assert_ptr_null(pf_error_peek());
  ck_assert_uint_eq(pf_object_strong_count(err), 1);
  ck_assert_int_eq(pf_error_append_backtrace(err, "more\n"), 0);
  ck_assert_str_eq(pf_error_backtrace(err), "site\nmore\n");
  pf_object_release(err);
}
END_TEST

START_TEST(test_reraise_does_not_loop) {
  pf_object_t* a;
  ck_assert_int_eq(pf_error_create("KeyError", "a", NULL, &a), 0);
  ck_assert_int_eq(pf_error_raise(a), 0);
  PF_ERROR_SET("ValueError", "b");        /* a becomes b's cause */
  ck_assert_int_eq(pf_error_raise(a), 0); /* raising a again must not make a's cause b */
  ck_assert_ptr_null(pf_error_cause(a));
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_eq(err, a);
  pf_object_release(err);
  ck_assert_uint_eq(pf_object_strong_count(a), 1);
  pf_object_release(a);
}
END_TEST

/* A shared error object (another reference than the raiser's) is never changed by a raise: the
 * pending error is dropped, not made its cause. Before, the first raise fixed the cause that
 * every later raise reported, and two threads raising it at once raced on the cause (review). */
static pf_object_t* g_shared_error;

static void* raise_shared(void* arg) {
  pf_object_t* mine = g_shared_error; /* this thread's own reference, taken before it started */
  for (int i = 0; i < 2000; ++i) {
    PF_ERROR_SET(PF_ERR_KEY, "pending in thread %d", (int)(intptr_t)arg);
    if (pf_error_raise(mine) != 0)
      return (void*)1;
    pf_object_t* err = pf_error_take();
    int wrong = err != mine || pf_error_cause(err) != NULL;
    pf_object_release(err);
    if (wrong)
      return (void*)1;
  }
  pf_object_release(mine);
  return NULL;
}

START_TEST(test_raise_shared_leaves_it_unchanged) {
  pf_object_t* err;
  ck_assert_int_eq(pf_error_create(PF_ERR_RUNTIME, "device lost", NULL, &err), 0);
  pf_object_t* cache = err; /* a second holder: the error is shared */
  pf_object_retain(cache);
  PF_ERROR_SET(PF_ERR_KEY, "first");
  ck_assert_int_eq(pf_error_raise(err), 0);
  ck_assert_ptr_null(pf_error_cause(err)); /* KeyError dropped, the object unchanged */
  pf_error_clear();
  pf_object_release(cache);
  /* the caller's reference alone: the pending error becomes its cause, as documented */
  PF_ERROR_SET(PF_ERR_KEY, "second");
  ck_assert_int_eq(pf_error_raise(err), 0);
  ck_assert_ptr_nonnull(pf_error_cause(err));
  ck_assert_str_eq(pf_error_message(pf_error_cause(err)), "second");
  pf_error_clear();
  pf_object_release(err);
  /* two threads raising one shared error, each over its own pending error */
  ck_assert_int_eq(pf_error_create(PF_ERR_RUNTIME, "shared", NULL, &g_shared_error), 0);
  pthread_t t[2];
  for (intptr_t i = 0; i < 2; ++i) {
    pf_object_retain(g_shared_error); /* handed to the thread, which releases it */
    ck_assert_int_eq(pthread_create(&t[i], NULL, raise_shared, (void*)i), 0);
  }
  for (int i = 0; i < 2; ++i) {
    void* failed;
    ck_assert_int_eq(pthread_join(t[i], &failed), 0);
    ck_assert_ptr_null(failed);
  }
  ck_assert_ptr_null(pf_error_cause(g_shared_error));
  ck_assert_uint_eq(pf_object_strong_count(g_shared_error), 1);
  pf_object_release(g_shared_error);
}
END_TEST

START_TEST(test_bad_input) {
  ck_assert_int_eq(pf_error_raise(NULL), -1);
  PF_ASSERT_RAISED("TypeError", "expected Error, got NULL");
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("not an error at all", 19, &s), 0);
  ck_assert_int_eq(pf_error_raise(s), -1);
  PF_ASSERT_RAISED("TypeError", "expected Error, got str");
  ck_assert_ptr_null(pf_error_kind(s));
  ck_assert_ptr_null(pf_error_message(s));
  ck_assert_ptr_null(pf_error_backtrace(s));
  ck_assert_ptr_null(pf_error_cause(s));
  ck_assert_ptr_null(pf_error_kind(NULL));
  ck_assert_int_eq(pf_error_append_backtrace(s, "x"), -1);
  PF_ASSERT_RAISED("TypeError", "expected Error");
  pf_object_release(s);
  pf_object_t* err;
  ck_assert_int_eq(pf_error_create(NULL, "m", NULL, &err), -1);
  PF_ASSERT_RAISED("ValueError", "kind");
  ck_assert_int_eq(pf_error_create("K", NULL, NULL, &err), -1);
  PF_ASSERT_RAISED("ValueError", "message");
  ck_assert_int_eq(pf_error_create("K", "m", NULL, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "out");
  ck_assert_int_eq(pf_error_create("K", "m", NULL, &err), 0);
  ck_assert_int_eq(pf_error_append_backtrace(err, NULL), -1);
  PF_ASSERT_RAISED("ValueError", "text");
  /* cause loops are refused */
  pf_object_t* other;
  ck_assert_int_eq(pf_error_create("K", "other", NULL, &other), 0);
  ck_assert_int_eq(pf_error_set_cause(err, other), 0);
  ck_assert_int_eq(pf_error_set_cause(other, err), -1);
  PF_ASSERT_RAISED("ValueError", "loop");
  ck_assert_int_eq(pf_error_set_cause(err, NULL), 0);
  ck_assert_ptr_null(pf_error_cause(err));
  pf_object_release(other);
  pf_object_release(err);
}
END_TEST

static void* raise_in_thread(void* arg) {
  const char* kind = arg;
  if (pf_error_peek() != NULL)
    return (void*)1;
  for (int i = 0; i < 1000; ++i) {
    PF_ERROR_SET(kind, "from thread %d", i);
    pf_object_t* err = pf_error_take();
    if (!err || strcmp(pf_error_kind(err), kind) != 0)
      return (void*)2;
    pf_object_release(err);
  }
  PF_ERROR_SET(kind, "left pending at thread exit"); /* freed by the thread-exit hook */
  return NULL;
}

START_TEST(test_thread_isolation) {
  PF_ERROR_SET("ValueError", "main thread's");
  pthread_t a, b;
  void *ra, *rb;
  pthread_create(&a, NULL, raise_in_thread, "KeyError");
  pthread_create(&b, NULL, raise_in_thread, "IndexError");
  pthread_join(a, &ra);
  pthread_join(b, &rb);
  ck_assert_ptr_null(ra);
  ck_assert_ptr_null(rb);
  PF_ASSERT_RAISED("ValueError", "main thread's");
}
END_TEST

/* An error object laid out by hand as another runtime would, then raised through packfn. */
typedef struct {
  pf_object_t header;
  pf_error_cell_t cell;
} foreign_error_t;
static int g_foreign_freed;
static void foreign_error_deleter(void* self, int flags) {
  if (flags & 2) {
    g_foreign_freed++;
    free(self);
  }
}
static void foreign_update(void* self, const pf_byte_array_t* bt, int32_t mode) {
  (void)self;
  (void)bt;
  (void)mode;
}

/* A foreign error with `deleter`, kind ValueError, the given message. */
static foreign_error_t* foreign_error_new(void (*deleter)(void*, int), const char* message) {
  foreign_error_t* e = calloc(1, sizeof *e);
  ck_assert_ptr_nonnull(e);
  e->header.combined_ref_count = ((uint64_t)1 << 32) | 1;
  e->header.type_index = PF_TYPE_ERROR;
  e->header.deleter = deleter;
  e->cell.kind = (pf_byte_array_t){"ValueError", 10};
  e->cell.message = (pf_byte_array_t){message, (int64_t)strlen(message)};
  e->cell.backtrace = (pf_byte_array_t){"", 0};
  e->cell.update_backtrace = foreign_update;
  return e;
}

/* pf_error_set_cause replacing a cause: the old chain is released after the new cause is in
 * place. A deleter in the old chain (another runtime's error here) that reads err's cause saw
 * the old cause, then being destroyed (review: it was released first). */
static pf_object_t* g_watched;
static char g_seen[32];
static void reading_error_deleter(void* self, int flags) {
  if (flags & 2) {
    pf_object_t* c = pf_error_cause(g_watched);
    snprintf(g_seen, sizeof g_seen, "%s", c ? pf_error_message(c) : "(none)");
    free(self);
  }
}
static pf_object_t* error_with_message(const char* message) {
  PF_ERROR_SET(PF_ERR_VALUE, "%s", message);
  pf_object_t* e = pf_error_take();
  ck_assert_ptr_nonnull(e);
  return e;
}
START_TEST(test_set_cause_releases_the_old_chain_last) {
  pf_object_t* err = error_with_message("outer");
  pf_object_t* old = error_with_message("old");
  foreign_error_t* f = foreign_error_new(reading_error_deleter, "deep");
  ck_assert_int_eq(pf_error_set_cause(old, &f->header), 0);
  pf_object_release(&f->header);
  ck_assert_int_eq(pf_error_set_cause(err, old), 0);
  pf_object_release(old); /* err holds the chain old -> f alone */
  pf_object_t* fresh = error_with_message("new");
  g_watched = err;
  g_seen[0] = '\0';
  ck_assert_int_eq(pf_error_set_cause(err, fresh), 0); /* releases old, then f */
  ck_assert_str_eq(g_seen, "new");
  pf_object_release(fresh);
  pf_object_release(err);
}
END_TEST

START_TEST(test_foreign_error) {
  foreign_error_t* e = foreign_error_new(foreign_error_deleter, "from elsewhere");
  g_foreign_freed = 0;
  PF_ERROR_SET("KeyError", "pending");
  ck_assert_int_eq(pf_error_raise(&e->header), 0);
  pf_object_release(&e->header); /* the slot holds it now */
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "from elsewhere");
  ck_assert_int_eq(pf_error_append_backtrace(err, "x"), 0);
  /* its cause cannot be set by packfn; the message says why, not "expected Error, got Error" */
  ck_assert_int_eq(pf_error_set_cause(err, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "expected an Error made by packfn, got an Error made by another "
                                "runtime");
  pf_object_release(err);
  ck_assert_int_eq(g_foreign_freed, 1);
}
END_TEST

/* A foreign error whose deleter raises another (as a runtime's cleanup may): released while a
 * raise replaces it, its deleter's error was overwritten in the slot and never released (found
 * by review). Now each such error joins the raised error's chain or is released. */
static void raising_error_deleter(void* self, int flags) {
  if (flags & 1) { /* strong: the cleanup raises */
    foreign_error_t* late = foreign_error_new(foreign_error_deleter, "raised by a deleter");
    ck_assert_int_eq(pf_error_raise(&late->header), 0);
    pf_object_release(&late->header); /* the slot holds it */
  }
  if (flags & 2)
    free(self);
}

START_TEST(test_deleter_raising_during_raise) {
  g_foreign_freed = 0;
  foreign_error_t* first = foreign_error_new(raising_error_deleter, "pending");
  ck_assert_int_eq(pf_error_raise(&first->header), 0);
  pf_object_release(&first->header); /* only the slot holds it */
  /* a shared error (a reference besides the caller's, as a cached error has): raising it
   * releases the pending one, whose deleter raises; that error is released in turn, not left
   * behind or lost */
  pf_object_t* shared = NULL;
  ck_assert_int_eq(pf_error_create(PF_ERR_KEY, "shared", NULL, &shared), 0);
  pf_object_retain(shared); /* the other reference */
  ck_assert_int_eq(pf_error_raise(shared), 0);
  ck_assert_int_eq(g_foreign_freed, 1); /* released: its deleter counted */
  pf_object_t* got = pf_error_take();
  ck_assert_ptr_eq(got, shared);
  ck_assert_ptr_null(pf_error_cause(got)); /* a shared error is left unchanged */
  ck_assert_ptr_null(pf_error_take());
  pf_object_release(got);
  pf_object_release(shared);
  pf_object_release(shared); /* the other reference */
}
END_TEST

/* Raises from one place (exported, so that the dynamic symbol table names its frame). */
__attribute__((noinline, visibility("default"))) void raise_deep(void) {
  PF_ERROR_SET(PF_ERR_VALUE, "again");
}

/* Full native stacks (PACKFN_BACKTRACE, read once per process: the test_error_full_backtrace
 * run sets it): taken at the raise, shown by address in the cell, named when packfn reads the
 * text, named before the text changes. Without the variable: raise sites only. */
START_TEST(test_full_backtrace) {
  const char* env = getenv(PF_BACKTRACE_ENV);
  int full = env && *env && strcmp(env, "0") != 0;
  PF_ERROR_SET(PF_ERR_VALUE, "deep");
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  const pf_error_cell_t* cell = (const pf_error_cell_t*)(err + 1);
  const char* named = pf_error_backtrace(err);
  ck_assert_ptr_nonnull(named);
  ck_assert_msg(strncmp(named, "  File \"", 8) == 0, "backtrace '%s'", named);
  ck_assert_msg(strstr(named, "in test_full_backtrace") != NULL, "no raise site in '%s'", named);
  if (!full) {
    ck_assert_ptr_null(strstr(cell->backtrace.data, "<native>"));
    ck_assert_ptr_eq(named, cell->backtrace.data);
    pf_object_release(err);
    return;
  }
  /* the cell (what other runtimes read) shows addresses; packfn's reader names them */
  ck_assert_ptr_nonnull(strstr(cell->backtrace.data, "in 0x"));
  ck_assert_msg(strstr(named, "pf_error_set_frame") != NULL, "unnamed: '%s'", named);
  ck_assert_ptr_null(strstr(named, "<native>"));
  ck_assert_ptr_eq(pf_error_backtrace(err), named); /* built once */
  /* an update names the frames in the cell first, then appends */
  ck_assert_int_eq(pf_error_append_backtrace(err, "  File \"x.py\", line 1, in f\n"), 0);
  ck_assert_ptr_nonnull(strstr(cell->backtrace.data, "pf_error_set_frame"));
  ck_assert_ptr_nonnull(strstr(cell->backtrace.data, "x.py"));
  ck_assert_ptr_null(strstr(cell->backtrace.data, "<native>"));
  ck_assert_ptr_eq(pf_error_backtrace(err), cell->backtrace.data);
  pf_object_release(err);
  /* an error with unnamed frames that nobody read is released cleanly (valgrind, ASan) */
  PF_ERROR_SET(PF_ERR_VALUE, "unread");
  pf_error_clear();
  /* frames raised again at the same addresses are named from the lines kept for them: the
   * same lines (compared up to the frame that calls raise_deep, since the compiler may call it
   * from two places in the loop below) */
  char* first = NULL;
  size_t first_len = 0;
  for (int k = 0; k < 3; ++k) {
    raise_deep();
    pf_object_t* e2 = pf_error_take();
    const char* text = pf_error_backtrace(e2);
    ck_assert_msg(strstr(text, "in raise_deep") != NULL, "unnamed: '%s'", text);
    const char* cut = strstr(text, "pf_error_set_frame");
    ck_assert_msg(cut != NULL && strchr(cut, '\n') != NULL, "unnamed: '%s'", text);
    size_t len = (size_t)(strchr(cut, '\n') - text);
    if (k == 0) {
      first = strndup(text, len);
      first_len = len;
    } else {
      ck_assert_uint_eq(len, first_len);
      ck_assert_int_eq(strncmp(text, first, len), 0);
    }
    pf_object_release(e2);
  }
  free(first);
}
END_TEST

/* A runtime may hand update_backtrace part of the cell's own text (to trim it, or to write it
 * back): with unnamed native frames (PACKFN_BACKTRACE) the update named them first and freed
 * that text before copying from it (use after free, found by review). The bytes given are the
 * bytes kept, in both modes. */
START_TEST(test_update_with_own_text) {
  PF_ERROR_SET(PF_ERR_VALUE, "own text");
  pf_object_t* err = pf_error_take();
  pf_error_cell_t* cell = (pf_error_cell_t*)(err + 1);
  char* before = strndup(cell->backtrace.data, cell->backtrace.size);
  ck_assert_ptr_nonnull(before);
  pf_byte_array_t own = cell->backtrace; /* replace the text with itself */
  cell->update_backtrace(err, &own, 0);
  ck_assert_str_eq(cell->backtrace.data, before);
  ck_assert_uint_eq(cell->backtrace.size, strlen(before));
  pf_object_release(err);
  free(before);
  /* append the cell's text to itself */
  PF_ERROR_SET(PF_ERR_VALUE, "own text");
  err = pf_error_take();
  cell = (pf_error_cell_t*)(err + 1);
  before = strndup(cell->backtrace.data, cell->backtrace.size);
  ck_assert_ptr_nonnull(before);
  ck_assert_int_eq(pf_error_append_backtrace(err, cell->backtrace.data), 0);
  const char* text = pf_error_backtrace(err);
  size_t len = strlen(text), tail = strlen(before);
  ck_assert_uint_gt(len, tail);
  ck_assert_msg(strcmp(text + len - tail, before) == 0, "appended '%s'", text);
  free(before);
  pf_object_release(err);
}
END_TEST

/* A formatted message holding a NUL byte (%c of 0) ends there: the size in the cell, which
 * TVM-FFI reads, is the length of the C string pf_error_message gives, also for a message past
 * the 511-byte stack buffer (the size was the formatted length, "a\0b" read as "a" by packfn
 * and as "a\0b" by TVM-FFI; review). */
START_TEST(test_message_ends_at_nul) {
  PF_ERROR_SET(PF_ERR_VALUE, "before%cafter %d", 0, 7);
  pf_object_t* err = pf_error_take();
  const pf_error_cell_t* cell = (const pf_error_cell_t*)(err + 1);
  ck_assert_str_eq(pf_error_message(err), "before");
  ck_assert_uint_eq(cell->message.size, strlen("before"));
  char text[64];
  ck_assert_uint_eq(pf_error_format(err, text, sizeof text), strlen("ValueError: before"));
  ck_assert_str_eq(text, "ValueError: before");
  pf_object_release(err);
  char* head = malloc(601);
  ck_assert_ptr_nonnull(head);
  memset(head, 'x', 600);
  head[600] = '\0';
  PF_ERROR_SET(PF_ERR_VALUE, "%s%c%s", head, 0, "tail");
  err = pf_error_take();
  cell = (const pf_error_cell_t*)(err + 1);
  ck_assert_str_eq(pf_error_message(err), head);
  ck_assert_uint_eq(cell->message.size, 600);
  ck_assert_uint_eq(pf_error_format(err, NULL, 0), strlen("ValueError: ") + 600);
  pf_object_release(err);
  free(head);
}
END_TEST

/* pf_error_set_site's "file.c:123" text in its unusual forms: the digits after a last ':' are
 * the line, anything else is the whole file with line 0; a NULL function is "<unknown>". */
static void assert_site_frame(const char* where, const char* func, const char* frame) {
  pf_error_site_t site = {where, strlen(where), func, func ? strlen(func) : 0};
  pf_error_set_site(&site, PF_ERR_VALUE, "site");
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(pf_error_message(err), "site");
  ck_assert_str_eq(pf_error_backtrace(err), frame);
  pf_object_release(err);
}

START_TEST(test_site_forms) {
  assert_site_frame("f.c:7", "fn", "  File \"f.c\", line 7, in fn\n");
  assert_site_frame("f.c:", "fn", "  File \"f.c:\", line 0, in fn\n");            /* no digits */
  assert_site_frame("f.c/12", NULL, "  File \"f.c/12\", line 0, in <unknown>\n"); /* no ':' */
  assert_site_frame("f.cZ", "fn", "  File \"f.cZ\", line 0, in fn\n");
  assert_site_frame("", "fn", "  File \"\", line 0, in fn\n");
  assert_site_frame(":9", "fn", "  File \"\", line 9, in fn\n");
  /* pf_error_set_at: no file means no line; a negative line is none */
  pf_error_set_at(NULL, 12, NULL, PF_ERR_KEY, "no file");
  pf_object_t* err = pf_error_take();
  ck_assert_str_eq(pf_error_backtrace(err), "  File \"<unknown>\", line 0, in <unknown>\n");
  pf_object_release(err);
  pf_error_set_at("g.c", -3, "g", PF_ERR_KEY, NULL); /* a NULL format: an empty message */
  err = pf_error_take();
  ck_assert_str_eq(pf_error_message(err), "");
  ck_assert_str_eq(pf_error_backtrace(err), "  File \"g.c\", line 0, in g\n");
  pf_object_release(err);
  /* pf_error_set_frame with no function */
  const char* prefix = "  File \"h.c\", line 3, in ";
  pf_error_site_t frame = {prefix, strlen(prefix), NULL, 0};
  pf_error_set_frame(&frame, NULL, "framed %d", 1); /* NULL kind: RuntimeError */
  err = pf_error_take();
  ck_assert_str_eq(pf_error_kind(err), PF_ERR_RUNTIME);
  ck_assert_str_eq(pf_error_message(err), "framed 1");
  ck_assert_str_eq(pf_error_backtrace(err), "  File \"h.c\", line 3, in <unknown>\n");
  pf_object_release(err);
}
END_TEST

/* The update_backtrace hook other runtimes call: a NULL array, or NULL bytes with a size, leave
 * the text as it is; NULL bytes of size 0 replace it with nothing (mode 0) or append nothing. */
START_TEST(test_update_backtrace_bad_arrays) {
  pf_object_t* err;
  ck_assert_int_eq(pf_error_create(PF_ERR_VALUE, "m", "site\n", &err), 0);
  pf_error_cell_t* cell = (pf_error_cell_t*)(err + 1);
  cell->update_backtrace(err, NULL, 1);
  ck_assert_str_eq(pf_error_backtrace(err), "site\n");
  pf_byte_array_t bad = {NULL, 5};
  cell->update_backtrace(err, &bad, 0);
  cell->update_backtrace(err, &bad, 1);
  ck_assert_str_eq(pf_error_backtrace(err), "site\n");
  ck_assert_uint_eq(cell->backtrace.size, 5);
  ck_assert_int_eq(pf_error_append_backtrace(err, ""), 0);
  ck_assert_str_eq(pf_error_backtrace(err), "site\n");
  ck_assert_uint_eq(cell->backtrace.size, 5);
  pf_byte_array_t none = {NULL, 0};
  cell->update_backtrace(err, &none, 1);
  ck_assert_str_eq(pf_error_backtrace(err), "site\n");
  cell->update_backtrace(err, &none, 0);
  ck_assert_str_eq(pf_error_backtrace(err), "");
  ck_assert_uint_eq(cell->backtrace.size, 0);
  ck_assert_int_eq(pf_error_append_backtrace(err, "after\n"), 0);
  ck_assert_str_eq(pf_error_backtrace(err), "after\n");
  pf_object_release(err);
}
END_TEST

/* Another runtime's error whose cell has no update_backtrace: appending is a no-op, not a call
 * through NULL. Refusals of pf_error_set_cause name what came. */
START_TEST(test_foreign_error_without_hook) {
  foreign_error_t* e = foreign_error_new(foreign_error_deleter, "no hook");
  e->cell.backtrace = (pf_byte_array_t){"theirs\n", 7};
  e->cell.update_backtrace = NULL;
  g_foreign_freed = 0;
  ck_assert_int_eq(pf_error_append_backtrace(&e->header, "mine\n"), 0);
  ck_assert_str_eq(pf_error_backtrace(&e->header), "theirs\n");
  PF_ASSERT_NO_ERROR();
  ck_assert_int_eq(pf_error_set_cause(NULL, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "expected an Error made by packfn, got NULL");
  ck_assert_int_eq(pf_error_append_backtrace(NULL, "x"), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE,
                   "pf_error_append_backtrace: argument err: expected Error, got NULL");
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("text", 4, &s), 0);
  ck_assert_int_eq(pf_error_set_cause(s, NULL), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "expected an Error made by packfn, got str");
  pf_object_t* mine;
  ck_assert_int_eq(pf_error_create(PF_ERR_KEY, "mine", NULL, &mine), 0);
  ck_assert_int_eq(pf_error_set_cause(mine, s), -1);
  PF_ASSERT_RAISED(PF_ERR_TYPE, "argument cause: expected Error, got str");
  ck_assert_ptr_null(pf_error_cause(mine));
  /* a foreign error is a valid cause */
  ck_assert_int_eq(pf_error_set_cause(mine, &e->header), 0);
  ck_assert_ptr_eq(pf_error_cause(mine), &e->header);
  pf_object_release(s);
  pf_object_release(&e->header);
  ck_assert_int_eq(g_foreign_freed, 0); /* mine holds it */
  pf_object_release(mine);
  ck_assert_int_eq(g_foreign_freed, 1);
}
END_TEST

/* An error owns its cell's extra_context (another runtime may set it): released with it. */
static int g_context_freed;
static void context_deleter(void* self, int flags) {
  if (flags & 2) {
    g_context_freed++;
    free(self);
  }
}

START_TEST(test_extra_context_released) {
  pf_object_t* ctx = calloc(1, sizeof *ctx);
  ck_assert_ptr_nonnull(ctx);
  ctx->combined_ref_count = ((uint64_t)1 << 32) | 1;
  ctx->type_index = PF_TYPE_OBJECT;
  ctx->deleter = context_deleter;
  g_context_freed = 0;
  pf_object_t* err;
  ck_assert_int_eq(pf_error_create(PF_ERR_VALUE, "with context", NULL, &err), 0);
  ((pf_error_cell_t*)(err + 1))->extra_context = ctx; /* the error's reference */
  pf_object_release(err);
  ck_assert_int_eq(g_context_freed, 1);
}
END_TEST

/* pf_error_format of what is not an error writes an empty string; a chain is written at most
 * 66 errors deep (docs/error.md). */
START_TEST(test_format_limits) {
  char buf[16] = "untouched";
  ck_assert_uint_eq(pf_error_format(NULL, buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "");
  pf_object_t* s;
  ck_assert_int_eq(pf_string_object_create("text", 4, &s), 0);
  strcpy(buf, "untouched");
  ck_assert_uint_eq(pf_error_format(s, buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "");
  pf_object_release(s);
  /* 70 errors, the newest first: e69 caused by e68 ... caused by e0 */
  pf_object_t* top = NULL;
  for (int i = 0; i < 70; ++i) {
    char msg[8];
    snprintf(msg, sizeof msg, "e%d", i);
    pf_object_t* e;
    ck_assert_int_eq(pf_error_create("K", msg, NULL, &e), 0);
    ck_assert_int_eq(pf_error_set_cause(e, top), 0);
    pf_object_release(top);
    top = e;
  }
  size_t n = pf_error_format(top, NULL, 0);
  char* text = malloc(n + 1);
  ck_assert_ptr_nonnull(text);
  ck_assert_uint_eq(pf_error_format(top, text, n + 1), n);
  ck_assert_uint_eq(strlen(text), n);
  int lines = 1;
  for (const char* p = text; (p = strstr(p, "\ncaused by ")) != NULL; ++p)
    ++lines;
  ck_assert_int_eq(lines, 66);
  ck_assert(strncmp(text, "K: e69\ncaused by K: e68\n", 24) == 0);
  const char* last = strrchr(text, '\n');
  ck_assert_str_eq(last, "\ncaused by K: e4");
  free(text);
  pf_object_release(top);
}
END_TEST

/* A raise from a function that code in an anonymous executable mapping called (a JIT's code):
 * no object holds that frame, so its line keeps the address form; the raise site and the
 * frames in objects are named. Full stacks only (the full_backtrace case); x86-64 Linux. */
#if defined(__x86_64__) && defined(__linux__)
__attribute__((noinline)) static void raise_from_jit_callee(void) {
  PF_ERROR_SET(PF_ERR_VALUE, "called from generated code");
}

START_TEST(test_frame_in_generated_code) {
  const char* env = getenv(PF_BACKTRACE_ENV);
  if (!(env && *env && strcmp(env, "0") != 0))
    return;
  /* sub rsp, 8; movabs rax, callee; call rax; add rsp, 8; ret */
  unsigned char code[] = {0x48, 0x83, 0xEC, 0x08, 0x48, 0xB8, 0,    0,    0,    0,   0,
                          0,    0,    0,    0xFF, 0xD0, 0x48, 0x83, 0xC4, 0x08, 0xC3};
  void (*callee)(void) = raise_from_jit_callee;
  memcpy(code + 6, &callee, sizeof callee);
  void* page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(page, MAP_FAILED);
  memcpy(page, code, sizeof code);
  ck_assert_int_eq(mprotect(page, 4096, PROT_READ | PROT_EXEC), 0);
  void (*generated)(void);
  *(void**)&generated = page;
  generated();
  pf_object_t* err = pf_error_take();
  ck_assert_ptr_nonnull(err);
  const char* bt = pf_error_backtrace(err);
  char line[128]; /* the return address into the mapping: just past the call */
  snprintf(line, sizeof line, "  File \"<native>\", line 0, in 0x%016lx\n",
           (unsigned long)((uintptr_t)page + 16));
  ck_assert_msg(strstr(bt, line) != NULL, "no line '%s' in '%s'", line, bt);
  ck_assert_msg(strstr(bt, ", in raise_from_jit_callee\n") != NULL, "no raise site in '%s'", bt);
  ck_assert_msg(strstr(bt, "pf_error_set_frame") != NULL, "unnamed: '%s'", bt);
  const char* native = strstr(bt, "<native>"); /* the only address line */
  ck_assert_ptr_eq(native, strstr(bt, line) + strlen("  File \""));
  ck_assert_ptr_null(strstr(native + 1, "<native>"));
  pf_object_release(err);
  ck_assert_int_eq(munmap(page, 4096), 0);
}
END_TEST
#endif

Suite* make_suite(void) {
  Suite* s = suite_create("error");
  TCase* tc = tcase_create("core");
  tcase_add_test(tc, test_set_take);
  tcase_add_test(tc, test_plain_function_form);
  tcase_add_test(tc, test_long_message);
  tcase_add_test(tc, test_failed_format_keeps_text);
  tcase_add_test(tc, test_empty_kind);
  tcase_add_test(tc, test_cause_chain);
  tcase_add_test(tc, test_create_raise_existing);
  tcase_add_test(tc, test_reraise_does_not_loop);
  tcase_add_test(tc, test_raise_shared_leaves_it_unchanged);
  tcase_add_test(tc, test_bad_input);
  tcase_add_test(tc, test_thread_isolation);
  tcase_add_test(tc, test_foreign_error);
  tcase_add_test(tc, test_deleter_raising_during_raise);
  tcase_add_test(tc, test_full_backtrace);
  tcase_add_test(tc, test_update_with_own_text);
  tcase_add_test(tc, test_set_cause_releases_the_old_chain_last);
  tcase_add_test(tc, test_message_ends_at_nul);
  tcase_add_test(tc, test_site_forms);
  tcase_add_test(tc, test_update_backtrace_bad_arrays);
  tcase_add_test(tc, test_foreign_error_without_hook);
  tcase_add_test(tc, test_extra_context_released);
  tcase_add_test(tc, test_format_limits);
  suite_add_tcase(s, tc);
  /* the same test alone, for the PACKFN_BACKTRACE=1 run (CK_RUN_CASE=full_backtrace): the
   * core cases compare raise-site texts exactly */
  TCase* full = tcase_create("full_backtrace");
  tcase_add_test(full, test_full_backtrace);
  tcase_add_test(full, test_update_with_own_text);
#if defined(__x86_64__) && defined(__linux__)
  tcase_add_test(full, test_frame_in_generated_code);
#endif
  suite_add_tcase(s, full);
  return s;
}

PF_TEST_MAIN()
