/* pf_stress: many threads using packfn at once for a bounded time, then exact accounting.
 *
 *   pf_stress SECONDS [THREADS] MODULE_PATH
 *
 * THREADS (default 12, at least 8) run six roles in turn:
 *   global   registers, overwrites, removes, looks up and calls closures under 8 shared names;
 *            every version of name k adds k to its argument, so every result is checkable
 *   weak     publishes objects through weak references and upgrades them (pf_object_weak_lock)
 *            while their publishers drop the last strong reference
 *   shared   retains and releases 16 objects shared by every thread
 *   error    raises errors (formatted, with a cause, and one error object shared by every
 *            thread) and takes them back, checking kind, message and identity
 *   tensor   makes tensors (pf_tensor_empty and pf_tensor_from_dltensor with a counted
 *            deleter), fills them, hands them to other threads through a queue; those check
 *            the contents, take views and free them
 *   module   loads the stress module, calls its exports, releases module and functions in
 *            either order
 * At the end every object, closure and buffer created must have been destroyed exactly once
 * (counted by the deleters), no thread may hold a raised error, and no result may be wrong.
 * Exit status 0 on success, 1 on any wrong result or count (each is printed). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "packfn/packfn.h"

#define NUM_NAMES      8
#define NUM_SHARED     16
#define NUM_WEAK_SLOTS 8
#define RING           4
#define QUEUE_CAP      64
#define MAGIC_LIVE     0x5354524553534f4bull /* "STRESSOK" */
#define MAGIC_DEAD     0xdeaddeaddeaddeadull

enum { ROLE_GLOBAL, ROLE_WEAK, ROLE_SHARED, ROLE_ERROR, ROLE_TENSOR, ROLE_MODULE, NUM_ROLES };
static const char* const role_names[NUM_ROLES] = {"global", "weak",   "shared",
                                                  "error",  "tensor", "module"};

/* ---- counters (all atomics, read at the end) ---- */
static long stop_flag;
static long failures;
static long obj_created, obj_destroyed, obj_freed;
static long closure_created, closure_freed;
static long buf_created, buf_freed;
static long ops[NUM_ROLES];
static long upgrades_won, upgrades_lost;

static void count(long* c) {
  __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}
static long load(const long* c) {
  return __atomic_load_n(c, __ATOMIC_ACQUIRE);
}
static int stopping(void) {
  return __atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE) != 0;
}

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

/* Records a wrong result: prints the first 20, counts all. */
static void fail(const char* fmt, ...) {
  long n = __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
  if (n >= 20)
    return;
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&report_lock);
  fputs("pf_stress: FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  pthread_mutex_unlock(&report_lock);
  va_end(ap);
}

/* Records an unexpected error: the raised one is taken and printed. */
static void fail_raised(const char* what) {
  pf_object_t* err = pf_error_take();
  char text[512];
  if (err)
    pf_error_format(err, text, sizeof text);
  else
    snprintf(text, sizeof text, "(no error raised)");
  fail("%s: %s", what, text);
  pf_object_release(err);
}

static uint64_t next_random(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

/* ---- counted objects ---- */
typedef struct stress_obj_s {
  pf_object_t header;
  uint64_t magic;
  int64_t value;
} stress_obj_t;

static int32_t stress_type;

static void stress_obj_deleter(void* self, int flags) {
  stress_obj_t* o = self;
  if (flags & PF_DELETER_STRONG) {
    if (o->magic != MAGIC_LIVE)
      fail("object %p destroyed twice or corrupt", self);
    o->magic = MAGIC_DEAD;
    count(&obj_destroyed);
  }
  if (flags & PF_DELETER_WEAK) {
    count(&obj_freed);
    pf_object_free(self);
  }
}

static stress_obj_t* stress_obj_new(int64_t value) {
  pf_object_t* obj;
  if (pf_object_alloc(sizeof(stress_obj_t), stress_type, stress_obj_deleter, &obj) != 0) {
    fail_raised("pf_object_alloc");
    return NULL;
  }
  stress_obj_t* o = (stress_obj_t*)obj;
  o->magic = MAGIC_LIVE;
  o->value = value;
  count(&obj_created);
  return o;
}

/* ---- role global ---- */
typedef struct closure_s {
  int64_t k;
} closure_t;

static int closure_call(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  int64_t x;
  if (num_args != 1) {
    PF_ERROR_SET(PF_ERR_TYPE, "closure: expected 1 argument, got %d", (int)num_args);
    return -1;
  }
  if (pf_any_as_int(&args[0], &x) != 0)
    return -1;
  *result = pf_any_int(x + ((closure_t*)self)->k);
  return 0;
}

static void closure_free(void* self) {
  free(self);
  count(&closure_freed);
}

static pf_object_t* closure_new(int64_t k) {
  closure_t* c = malloc(sizeof *c);
  if (!c) {
    fail("malloc failed");
    return NULL;
  }
  c->k = k;
  pf_object_t* fn;
  if (pf_function_create(c, closure_call, closure_free, &fn) != 0) {
    free(c);
    fail_raised("pf_function_create");
    return NULL;
  }
  count(&closure_created);
  return fn;
}

static void name_of(int k, char* buf, size_t size) {
  snprintf(buf, size, "stress.g%d", k);
}

static void check_call(pf_object_t* fn, int k, int64_t x, const char* how) {
  pf_any_t arg = pf_any_int(x);
  pf_any_t res = pf_any_none();
  if (pf_function_call(fn, &arg, 1, &res) != 0) {
    fail_raised(how);
    return;
  }
  if (res.type_index != PF_TYPE_INT || res.v_int64 != x + k)
    fail("%s: name %d: %lld + %d gave type %d value %lld", how, k, (long long)x, k,
         (int)res.type_index, (long long)res.v_int64);
  pf_any_release(&res);
}

static void global_step(uint64_t* rng) {
  int k = (int)(next_random(rng) % NUM_NAMES);
  char name[32];
  name_of(k, name, sizeof name);
  int64_t x = (int64_t)(next_random(rng) % 1000000);
  switch (next_random(rng) % 6) {
  case 0:   /* overwrite */
  case 1: { /* register only when absent */
    int override = (next_random(rng) & 1) == 0;
    pf_object_t* fn = closure_new(k);
    if (!fn)
      return;
    if (pf_global_set(name, fn, override) != 0) {
      pf_object_t* err = pf_error_take();
      if (override || !err || strcmp(pf_error_kind(err), PF_ERR_VALUE) != 0)
        fail("pf_global_set(%s, override %d) failed: %s", name, override,
             err ? pf_error_message(err) : "(no error)");
      pf_object_release(err);
    }
    check_call(fn, k, x, "call of a new closure");
    pf_object_release(fn);
    break;
  }
  case 2: /* remove */
    if (pf_global_remove(name) != 0) {
      pf_object_t* err = pf_error_take();
      if (!err || strcmp(pf_error_kind(err), PF_ERR_KEY) != 0)
        fail("pf_global_remove(%s): expected KeyError", name);
      pf_object_release(err);
    }
    break;
  case 3:
  case 4: { /* look up and call, keeping the function across a possible removal */
    pf_object_t* fn;
    if (pf_global_get(name, &fn) != 0) {
      fail_raised("pf_global_get");
      return;
    }
    if (fn) {
      check_call(fn, k, x, "call of a looked-up function");
      pf_object_release(fn);
    }
    break;
  }
  default: { /* call by name */
    pf_any_t arg = pf_any_int(x);
    pf_any_t res = pf_any_none();
    if (pf_global_call(name, &arg, 1, &res) != 0) {
      pf_object_t* err = pf_error_take();
      if (!err || strcmp(pf_error_kind(err), PF_ERR_KEY) != 0)
        fail("pf_global_call(%s): unexpected failure %s", name,
             err ? pf_error_message(err) : "(no error)");
      pf_object_release(err);
    } else {
      if (res.type_index != PF_TYPE_INT || res.v_int64 != x + k)
        fail("pf_global_call(%s, %lld) gave %lld", name, (long long)x, (long long)res.v_int64);
      pf_any_release(&res);
    }
    break;
  }
  }
}

/* ---- role weak ---- */
static pthread_mutex_t weak_lock[NUM_WEAK_SLOTS];
static stress_obj_t* weak_slot[NUM_WEAK_SLOTS]; /* each holds a weak reference */

typedef struct weak_state_s {
  stress_obj_t* ring[RING]; /* strong references this thread published */
  int next;
} weak_state_t;

static void weak_step(uint64_t* rng, weak_state_t* st) {
  int s = (int)(next_random(rng) % NUM_WEAK_SLOTS);
  if (next_random(rng) % 4 == 0) { /* publish a new object, drop the oldest strong ref held */
    stress_obj_t* o = stress_obj_new((int64_t)s);
    if (!o)
      return;
    pf_object_weak_retain(&o->header);
    pthread_mutex_lock(&weak_lock[s]);
    stress_obj_t* old = weak_slot[s];
    weak_slot[s] = o;
    pthread_mutex_unlock(&weak_lock[s]);
    pf_object_weak_release(old ? &old->header : NULL);
    stress_obj_t* drop = st->ring[st->next];
    st->ring[st->next] = o;
    st->next = (st->next + 1) % RING;
    pf_object_release(drop ? &drop->header : NULL);
    return;
  }
  /* upgrade: take a weak reference under the lock, promote it outside */
  pthread_mutex_lock(&weak_lock[s]);
  stress_obj_t* o = weak_slot[s];
  if (o)
    pf_object_weak_retain(&o->header);
  pthread_mutex_unlock(&weak_lock[s]);
  if (!o)
    return;
  if (pf_object_weak_lock(&o->header)) {
    if (o->magic != MAGIC_LIVE || o->value != s)
      fail("weak_lock gained a strong reference to a destroyed object");
    count(&upgrades_won);
    pf_object_release(&o->header);
  } else {
    count(&upgrades_lost);
  }
  pf_object_weak_release(&o->header);
}

static void weak_finish(weak_state_t* st) {
  for (int i = 0; i < RING; ++i)
    if (st->ring[i])
      pf_object_release(&st->ring[i]->header);
}

/* ---- role shared ---- */
static stress_obj_t* shared_obj[NUM_SHARED];

static void shared_step(uint64_t* rng) {
  stress_obj_t* held[4];
  int n = 1 + (int)(next_random(rng) % 4);
  for (int i = 0; i < n; ++i) {
    held[i] = shared_obj[next_random(rng) % NUM_SHARED];
    pf_object_retain(&held[i]->header);
  }
  for (int i = n - 1; i >= 0; --i) {
    if (held[i]->magic != MAGIC_LIVE)
      fail("shared object destroyed while referenced");
    pf_object_release(&held[i]->header);
  }
}

/* ---- role error ---- */
static pf_object_t* shared_error;

static void error_step(uint64_t* rng, int tid) {
  unsigned long n = (unsigned long)(next_random(rng) % 100000);
  switch (n % 3) {
  case 0: {
    PF_ERROR_SET(PF_ERR_INDEX, "stress %d %lu", tid, n);
    char want[64];
    snprintf(want, sizeof want, "stress %d %lu", tid, n);
    pf_object_t* err = pf_error_take();
    if (!err || strcmp(pf_error_kind(err), PF_ERR_INDEX) != 0 ||
        strcmp(pf_error_message(err), want) != 0)
      fail("raised IndexError '%s' came back as %s '%s'", want, err ? pf_error_kind(err) : "-",
           err ? pf_error_message(err) : "-");
    pf_object_release(err);
    break;
  }
  case 1: { /* a cause chain */
    PF_ERROR_SET(PF_ERR_KEY, "inner %lu", n);
    PF_ERROR_SET(PF_ERR_RUNTIME, "outer %lu", n);
    pf_object_t* err = pf_error_take();
    pf_object_t* cause = err ? pf_error_cause(err) : NULL;
    if (!cause || strcmp(pf_error_kind(cause), PF_ERR_KEY) != 0 ||
        strcmp(pf_error_kind(err), PF_ERR_RUNTIME) != 0)
      fail("cause chain lost");
    pf_object_release(err);
    if (pf_error_peek())
      fail("error slot not empty after take");
    break;
  }
  default: /* one error object raised by every thread at once */
    if (pf_error_raise(shared_error) != 0) {
      fail_raised("pf_error_raise");
      return;
    }
    pf_object_t* err = pf_error_take();
    if (err != shared_error)
      fail("pf_error_take gave %p, raised %p", (void*)err, (void*)shared_error);
    pf_object_release(err);
    break;
  }
}

/* ---- role tensor ---- */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pf_object_t* queue_items[QUEUE_CAP];
static int queue_len;

static void buf_deleter(void* ctx) {
  free(ctx);
  count(&buf_freed);
}

static pf_object_t* tensor_new(uint64_t* rng, int64_t n, int32_t tag) {
  DLDataType i32 = {kDLInt, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  pf_object_t* t = NULL;
  if (next_random(rng) & 1) {
    if (pf_tensor_empty(&n, 1, i32, cpu, &t) != 0) {
      fail_raised("pf_tensor_empty");
      return NULL;
    }
  } else {
    int32_t* buf = malloc((size_t)n * sizeof *buf + 1);
    if (!buf) {
      fail("malloc failed");
      return NULL;
    }
    DLTensor desc;
    memset(&desc, 0, sizeof desc);
    desc.data = buf;
    desc.device = cpu;
    desc.ndim = 1;
    desc.dtype = i32;
    desc.shape = &n;
    if (pf_tensor_from_dltensor(&desc, buf, buf_deleter, &t) != 0) {
      free(buf);
      fail_raised("pf_tensor_from_dltensor");
      return NULL;
    }
    count(&buf_created);
  }
  int32_t* data = pf_tensor_dltensor(t)->data;
  data[0] = tag;
  for (int64_t i = 1; i < n; ++i)
    data[i] = (int32_t)(tag + i);
  return t;
}

static void tensor_check(pf_object_t* t) {
  DLTensor* d = pf_tensor_dltensor(t);
  const int32_t* data = (const int32_t*)((const char*)d->data + d->byte_offset);
  int32_t tag = data[0];
  for (int64_t i = 1; i < d->shape[0]; ++i)
    if (data[i] != (int32_t)(tag + i)) {
      fail("tensor contents changed at %lld", (long long)i);
      return;
    }
  if (d->shape[0] > 2) {
    pf_object_t* view;
    if (pf_tensor_slice(t, 0, 1, d->shape[0], 2, &view) != 0) {
      fail_raised("pf_tensor_slice");
      return;
    }
    DLTensor* v = pf_tensor_dltensor(view);
    const int32_t* vd = (const int32_t*)((const char*)v->data + v->byte_offset);
    if (vd[0] != tag + 1)
      fail("slice view sees %d, expected %d", (int)vd[0], (int)(tag + 1));
    pf_object_release(view);
  }
}

static void tensor_step(uint64_t* rng) {
  pf_object_t* mine = NULL;
  if (next_random(rng) & 1)
    mine =
        tensor_new(rng, 1 + (int64_t)(next_random(rng) % 256), (int32_t)(next_random(rng) % 1000));
  pf_object_t* theirs = NULL;
  pthread_mutex_lock(&queue_lock);
  if (mine && queue_len < QUEUE_CAP) {
    queue_items[queue_len++] = mine;
    mine = NULL;
  } else if (queue_len > 0) {
    theirs = queue_items[--queue_len];
  }
  pthread_mutex_unlock(&queue_lock);
  if (theirs) {
    tensor_check(theirs);
    pf_object_release(theirs);
  }
  if (mine) {
    tensor_check(mine);
    pf_object_release(mine);
  }
}

/* ---- role module ---- */
static const char* module_path;

static void module_step(uint64_t* rng) {
  pf_object_t* mod;
  if (pf_module_load(module_path, &mod) != 0) {
    fail_raised("pf_module_load");
    return;
  }
  pf_object_t* mul;
  if (pf_module_get_function(mod, "stress_mul", &mul) != 0) {
    fail_raised("pf_module_get_function");
    pf_object_release(mod);
    return;
  }
  int release_module_first = (int)(next_random(rng) & 1);
  if (release_module_first)
    pf_object_release(mod);
  int64_t a = (int64_t)(next_random(rng) % 100000);
  int64_t b = (int64_t)(next_random(rng) % 100000);
  pf_any_t args[2] = {pf_any_int(a), pf_any_int(b)};
  pf_any_t res = pf_any_none();
  if (pf_function_call(mul, args, 2, &res) != 0)
    fail_raised("stress_mul");
  else if (res.type_index != PF_TYPE_INT || res.v_int64 != a * b)
    fail("stress_mul(%lld, %lld) gave %lld", (long long)a, (long long)b, (long long)res.v_int64);
  pf_object_release(mul);
  if (!release_module_first) {
    if (pf_module_call(mod, "stress_tag", NULL, 0, &res) != 0) {
      fail_raised("stress_tag");
    } else {
      const char* s;
      size_t len;
      if (pf_any_as_str(&res, &s, &len) != 0 || len != 6 || memcmp(s, "stress", 6) != 0)
        fail("stress_tag gave a wrong value");
      pf_any_release(&res);
    }
    pf_object_release(mod);
  }
}

/* ---- threads ---- */
typedef struct worker_s {
  pthread_t thread;
  int tid;
  int role;
} worker_t;

static void* worker_main(void* arg) {
  worker_t* w = arg;
  uint64_t rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)w->tid * 0x100000001b3ull);
  weak_state_t weak = {{NULL}, 0};
  long n = 0;
  while (!stopping()) {
    switch (w->role) {
    case ROLE_GLOBAL:
      global_step(&rng);
      break;
    case ROLE_WEAK:
      weak_step(&rng, &weak);
      break;
    case ROLE_SHARED:
      shared_step(&rng);
      break;
    case ROLE_ERROR:
      error_step(&rng, w->tid);
      break;
    case ROLE_TENSOR:
      tensor_step(&rng);
      break;
    default:
      module_step(&rng);
      break;
    }
    ++n;
  }
  weak_finish(&weak);
  if (pf_error_peek())
    fail_raised("error left raised in a worker thread");
  __atomic_fetch_add(&ops[w->role], n, __ATOMIC_RELAXED);
  return NULL;
}

static int expect_equal(const char* what, long a, long b) {
  if (a == b)
    return 0;
  fprintf(stderr, "pf_stress: FAIL: %s: %ld created, %ld destroyed\n", what, a, b);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SECONDS [THREADS] MODULE_PATH\n", argv[0]);
    return 2;
  }
  double seconds = atof(argv[1]);
  int num_threads = argc > 3 ? atoi(argv[2]) : 12;
  module_path = argv[argc - 1];
  if (seconds <= 0 || num_threads < 8 || num_threads > 256) {
    fprintf(stderr, "pf_stress: need SECONDS > 0 and 8 <= THREADS <= 256\n");
    return 2;
  }
  if (pf_type_register("packfn.stress.Obj", PF_TYPE_OBJECT, &stress_type) != 0) {
    fail_raised("pf_type_register");
    return 1;
  }
  for (int i = 0; i < NUM_WEAK_SLOTS; ++i)
    pthread_mutex_init(&weak_lock[i], NULL);
  for (int i = 0; i < NUM_SHARED; ++i)
    if (!(shared_obj[i] = stress_obj_new(i)))
      return 1;
  if (pf_error_create(PF_ERR_VALUE, "shared", NULL, &shared_error) != 0) {
    fail_raised("pf_error_create");
    return 1;
  }

  worker_t* workers = calloc((size_t)num_threads, sizeof *workers);
  if (!workers)
    return 1;
  for (int i = 0; i < num_threads; ++i) {
    workers[i].tid = i;
    workers[i].role = i % NUM_ROLES;
    if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
      fprintf(stderr, "pf_stress: pthread_create failed\n");
      return 1;
    }
  }
  struct timespec ts;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
  __atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < num_threads; ++i)
    pthread_join(workers[i].thread, NULL);
  free(workers);

  /* tear down what the roles left behind */
  for (int k = 0; k < NUM_NAMES; ++k) {
    char name[32];
    name_of(k, name, sizeof name);
    if (pf_global_remove(name) != 0)
      pf_error_clear();
  }
  for (int i = 0; i < queue_len; ++i) {
    tensor_check(queue_items[i]);
    pf_object_release(queue_items[i]);
  }
  queue_len = 0;
  for (int i = 0; i < NUM_WEAK_SLOTS; ++i) {
    pf_object_weak_release(weak_slot[i] ? &weak_slot[i]->header : NULL);
    weak_slot[i] = NULL;
    pthread_mutex_destroy(&weak_lock[i]);
  }
  for (int i = 0; i < NUM_SHARED; ++i) {
    if (pf_object_strong_count(&shared_obj[i]->header) != 1)
      fail("shared object %d has %u strong references at the end", i,
           (unsigned)pf_object_strong_count(&shared_obj[i]->header));
    pf_object_release(&shared_obj[i]->header);
  }
  if (pf_object_strong_count(shared_error) != 1)
    fail("shared error has %u strong references at the end",
         (unsigned)pf_object_strong_count(shared_error));
  pf_object_release(shared_error);

  int bad = 0;
  bad |= expect_equal("objects (contents)", load(&obj_created), load(&obj_destroyed));
  bad |= expect_equal("objects (memory)", load(&obj_created), load(&obj_freed));
  bad |= expect_equal("closures", load(&closure_created), load(&closure_freed));
  bad |= expect_equal("tensor buffers", load(&buf_created), load(&buf_freed));
  printf("pf_stress: %d threads x %.1f s:", num_threads, seconds);
  for (int r = 0; r < NUM_ROLES; ++r)
    printf(" %s %ld", role_names[r], load(&ops[r]));
  printf(" ops; %ld objects, %ld closures, %ld buffers freed; upgrades %ld won %ld lost\n",
         load(&obj_freed), load(&closure_freed), load(&buf_freed), load(&upgrades_won),
         load(&upgrades_lost));
  for (int r = 0; r < NUM_ROLES; ++r)
    if (load(&ops[r]) == 0) {
      fprintf(stderr, "pf_stress: FAIL: role %s never ran\n", role_names[r]);
      bad = 1;
    }
  if (load(&failures) != 0 || bad) {
    fprintf(stderr, "pf_stress: %ld wrong results\n", load(&failures));
    return 1;
  }
  return 0;
}
