/* bench_objects.c: objects in bulk, packfn against TVM-FFI in one run. For each kind of object
   (function without self, closure, direct function, 8- and 100-byte strings, 100 bytes, array
   of 4 ints, list and map of 4 items, shape, error, tensor view and slice, tensor with 1 KiB of
   data, tensor imported from a DLPack producer) and each runtime, a fresh process creates N objects
   and keeps them all alive, then releases them all, then does it again: memory    bytes in use
   after the N creates minus before, divided by N: what one live object costs. malloc's bytes in use
   (mallinfo2: uordblks + hblkhd: its chunk headers and rounding included) plus, for packfn, the 64
   KiB spans its slab allocator has given to size classes (pf__alloc_slab_bytes: blocks in use, free
               ones and the unused tail of each class's newest span all count);
     cold      ns per create and per release in the first round (fresh heap: sbrk, page faults);
     warm      the same in the later rounds (the memory the first round freed is reused).
   packfn runs twice: with its slab allocator (the default) and with PACKFN_NO_ALLOC_CACHE=1,
   every block a malloc of its size (read once per process, hence a process of its own). Every
   figure is the median over --reps processes (warm: over their later rounds, 4 by default: an
   even count, since with glibc's blocks the warm rounds may alternate between two speeds).
   With --callgrind, each kind and runtime also runs once under callgrind with --cg-n objects
   (fewer: callgrind is ~50x slower), giving instructions per create and per release, cold and
   warm.
   With --churn the later rounds churn instead: the N objects stay alive, and each round
   releases half of them, chosen at random (the same choice in every process and runtime), then
   makes them again, so that the allocator serves requests among blocks in use and blocks freed
   out of order, as in a program whose objects live for different times ("release, churn" and
   "create, churn" are per object of that half; the first round's release is not done).

   usage: bench_objects [--n N] [--rounds R] [--reps R] [--kind PATS] [--callgrind]
                        [--cg-n N] [--cg-dir DIR] [--md FILE] [--json FILE] [--churn]
   A child (internal): bench_objects --child KIND IMPL N ROUNDS [churn]. */
#define _GNU_SOURCE
#include "objects.h"
#include "timing.h"

#include <errno.h>
#include <fnmatch.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "packfn/packfn.h"

#include "valgrind_compat.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_REPS      101
#define MAX_ROUNDS    16

void pf_objbench_fail(const char* impl, const char* what, const char* detail) {
  fprintf(stderr, "bench_objects: %s %s: %s\n", impl, what, detail ? detail : "failed");
  exit(2);
}

/* ---- packfn's side ---- */

static const char* const kImpl = "packfn";

static void fail_raised(const char* what) {
  pf_object_t* err = pf_error_take();
  char detail[256] = "no error raised";
  if (err) {
    snprintf(detail, sizeof detail, "%s: %s", pf_error_kind(err), pf_error_message(err));
    pf_object_release(err);
  }
  pf_objbench_fail(kImpl, what, detail);
}

static int callee(void* self, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = pf_any_int(1);
  return 0;
}

static int64_t closure_state = 1;
static void closure_deleter(void* self) {
  (void)self;
}

static void* create_function(void* self, void (*deleter)(void*), uint64_t* checksum) {
  pf_object_t* fn;
  if (pf_function_create(self, callee, deleter, &fn) != 0)
    fail_raised("pf_function_create");
  *checksum += (uint64_t)fn->type_index;
  return fn;
}
static void* create_fn(void* state, uint64_t* checksum) {
  (void)state;
  return create_function(NULL, NULL, checksum);
}
static void* create_closure(void* state, uint64_t* checksum) {
  (void)state;
  return create_function(&closure_state, closure_deleter, checksum);
}
/* function_direct: the cell calls `callee` itself (the form static registrations use), 64
 * bytes: a cache line of its own, for lookups from several threads (docs/function.md). */
static void* create_fn_direct(void* state, uint64_t* checksum) {
  (void)state;
  pf_object_t* fn;
  if (pf_function_create_direct(callee, &fn) != 0)
    fail_raised("pf_function_create_direct");
  *checksum += (uint64_t)fn->type_index;
  return fn;
}

static void* create_string(const char* data, size_t size, uint64_t* checksum) {
  pf_any_t s;
  if (pf_string_create(data, size, &s) != 0)
    fail_raised("pf_string_create");
  if (s.type_index != PF_TYPE_STR)
    pf_objbench_fail(kImpl, "string", "expected a string object");
  const char* d;
  size_t n;
  if (pf_any_as_str(&s, &d, &n) != 0)
    fail_raised("pf_any_as_str");
  *checksum += n;
  return s.v_obj;
}
static void* create_string8(void* state, uint64_t* checksum) {
  (void)state;
  return create_string(PF_OBJBENCH_STRING_8, sizeof(PF_OBJBENCH_STRING_8) - 1, checksum);
}
static void* create_string100(void* state, uint64_t* checksum) {
  (void)state;
  return create_string(PF_OBJBENCH_STRING_100, sizeof(PF_OBJBENCH_STRING_100) - 1, checksum);
}

static void* create_bytes100(void* state, uint64_t* checksum) {
  (void)state;
  pf_any_t b;
  if (pf_bytes_create(PF_OBJBENCH_STRING_100, sizeof(PF_OBJBENCH_STRING_100) - 1, &b) != 0)
    fail_raised("pf_bytes_create");
  if (b.type_index != PF_TYPE_BYTES)
    pf_objbench_fail(kImpl, "bytes", "expected a bytes object");
  const char* d;
  size_t n;
  if (pf_any_as_bytes(&b, &d, &n) != 0)
    fail_raised("pf_any_as_bytes");
  *checksum += n;
  return b.v_obj;
}

/* array_4: an array of the ints 1..4 (PF_OBJBENCH_ARRAY_N). */
static void* create_array4(void* state, uint64_t* checksum) {
  (void)state;
  pf_any_t items[PF_OBJBENCH_ARRAY_N];
  for (int i = 0; i < PF_OBJBENCH_ARRAY_N; ++i)
    items[i] = pf_any_int(i + 1);
  pf_object_t* a;
  if (pf_array_create(items, PF_OBJBENCH_ARRAY_N, &a) != 0)
    fail_raised("pf_array_create");
  size_t n;
  if (pf_array_count(a, &n) != 0)
    fail_raised("pf_array_count");
  *checksum += n;
  return a;
}

/* shape_2: the shape (3, 4). */
static void* create_shape2(void* state, uint64_t* checksum) {
  (void)state;
  static const int64_t dims[2] = {3, 4};
  pf_object_t* s;
  if (pf_shape_create(dims, 2, &s) != 0)
    fail_raised("pf_shape_create");
  const int64_t* d;
  size_t n;
  if (pf_shape_data(s, &d, &n) != 0)
    fail_raised("pf_shape_data");
  *checksum += n;
  return s;
}

/* list_4: an empty list, then the ints 1..4 appended one at a time (growing as it must). */
static void* create_list4(void* state, uint64_t* checksum) {
  (void)state;
  pf_object_t* l;
  if (pf_list_create(&l) != 0)
    fail_raised("pf_list_create");
  for (int i = 1; i <= PF_OBJBENCH_ARRAY_N; ++i) {
    pf_any_t v = pf_any_int(i);
    if (pf_list_append(l, &v) != 0)
      fail_raised("pf_list_append");
  }
  size_t n;
  if (pf_array_count(l, &n) != 0)
    fail_raised("pf_array_count");
  *checksum += n;
  return l;
}

/* map_4: an empty map, then the keys "k1".."k4" (small strings) set to the ints 1..4. */
static void* create_map4(void* state, uint64_t* checksum) {
  (void)state;
  static const char* const keys[PF_OBJBENCH_ARRAY_N] = {"k1", "k2", "k3", "k4"};
  pf_object_t* m;
  if (pf_map_create(&m) != 0)
    fail_raised("pf_map_create");
  for (int i = 0; i < PF_OBJBENCH_ARRAY_N; ++i) {
    pf_any_t k = pf_any_cstr(keys[i]), v = pf_any_int(i + 1);
    if (pf_map_set(m, &k, &v) != 0)
      fail_raised("pf_map_set");
  }
  size_t n;
  if (pf_map_count(m, &n) != 0)
    fail_raised("pf_map_count");
  *checksum += n;
  return m;
}

/* error: an error object made, not raised, without a backtrace. */
static void* create_error(void* state, uint64_t* checksum) {
  (void)state;
  pf_object_t* e;
  if (pf_error_create(PF_OBJBENCH_ERROR_KIND, PF_OBJBENCH_ERROR_MESSAGE, NULL, &e) != 0)
    fail_raised("pf_error_create");
  *checksum += (unsigned char)pf_error_message(e)[0];
  return e;
}

/* ---- the neutral DLPack producer both sides import from (objects.h) ---- */

static float dlpack_data[PF_OBJBENCH_DATA_NUMEL]; /* shared by every export: read, not written */

typedef struct {
  pf_dl_managed_tensor_versioned_t managed;
  int64_t shape[1];
} dlpack_block_t;

static void dlpack_block_delete(pf_dl_managed_tensor_versioned_t* self) {
  free(self); /* the block starts with `managed` */
}

void* pf_objbench_dlpack_produce(void) {
  dlpack_block_t* b = malloc(sizeof *b);
  if (!b)
    pf_objbench_fail("producer", "dlpack", "out of memory");
  b->shape[0] = PF_OBJBENCH_DATA_NUMEL;
  b->managed.version.major = 1;
  b->managed.version.minor = 0;
  b->managed.manager_ctx = NULL;
  b->managed.deleter = dlpack_block_delete;
  b->managed.flags = 0;
  b->managed.dl_tensor.data = dlpack_data;
  b->managed.dl_tensor.device = (DLDevice){kDLCPU, 0};
  b->managed.dl_tensor.ndim = 1;
  b->managed.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
  b->managed.dl_tensor.shape = b->shape;
  b->managed.dl_tensor.strides = NULL;
  b->managed.dl_tensor.byte_offset = 0;
  return &b->managed;
}

/* tensor_dlpack: a foreign tensor imported: the producer's export, then
 * pf_tensor_from_dlpack_versioned; the producer's deleter runs at the release. */
static void* create_dlpack(void* state, uint64_t* checksum) {
  (void)state;
  pf_object_t* t;
  if (pf_tensor_from_dlpack_versioned(pf_objbench_dlpack_produce(), &t) != 0)
    fail_raised("pf_tensor_from_dlpack_versioned");
  *checksum += (uint64_t)pf_tensor_dltensor(t)->shape[0];
  return t;
}

static const DLDataType kFloat32 = {kDLFloat, 32, 1};
static const DLDevice kCPU = {kDLCPU, 0};

static pf_object_t* new_tensor(int64_t numel) {
  pf_object_t* t;
  if (pf_tensor_empty(&numel, 1, kFloat32, kCPU, &t) != 0)
    fail_raised("pf_tensor_empty");
  return t;
}

/* tensor_view: the state is the base tensor; each view keeps it alive. */
static void* setup_view(void) {
  return new_tensor(PF_OBJBENCH_VIEW_NUMEL);
}
static void teardown_view(void* base) {
  pf_object_release(base);
}
static void* create_view(void* base, uint64_t* checksum) {
  static const int64_t shape[1] = {PF_OBJBENCH_VIEW_NUMEL};
  pf_object_t* v;
  if (pf_tensor_view(base, 1, shape, NULL, 0, &v) != 0)
    fail_raised("pf_tensor_view");
  *checksum += (uint64_t)pf_tensor_dltensor(v)->shape[0];
  return v;
}

/* tensor_slice: a strided view (every second element from element 1) of the same base, which
 * takes the general way of packfn's views (strides, an offset) where tensor_view's compact view
 * takes the short one. */
static void* create_slice(void* base, uint64_t* checksum) {
  pf_object_t* v;
  if (pf_tensor_slice(base, 0, 1, PF_OBJBENCH_VIEW_NUMEL, 2, &v) != 0)
    fail_raised("pf_tensor_slice");
  *checksum += (uint64_t)pf_tensor_dltensor(v)->shape[0];
  return v;
}

static void* create_tensor1k(void* state, uint64_t* checksum) {
  (void)state;
  pf_object_t* t = new_tensor(PF_OBJBENCH_DATA_NUMEL);
  DLTensor* d = pf_tensor_dltensor(t);
  ((float*)d->data)[0] = 1.0f;
  *checksum += (uint64_t)d->shape[0];
  return t;
}

static void release(void* obj) {
  pf_object_release(obj);
}

static const pf_objbench_kind_t packfn_kinds[] = {
    {"function", "packfn", "pf_function_create(NULL self, NULL deleter)", NULL, create_fn, release,
     NULL},
    {"closure", "packfn", "pf_function_create(self, deleter)", NULL, create_closure, release, NULL},
    {"function_direct", "packfn", "pf_function_create_direct (a 64-byte line of its own)", NULL,
     create_fn_direct, release, NULL},
    {"string_8", "packfn", "pf_string_create (8 bytes: a string object)", NULL, create_string8,
     release, NULL},
    {"string_100", "packfn", "pf_string_create", NULL, create_string100, release, NULL},
    {"bytes_100", "packfn", "pf_bytes_create", NULL, create_bytes100, release, NULL},
    {"array_4", "packfn", "pf_array_create of 4 ints", NULL, create_array4, release, NULL},
    {"list_4", "packfn", "pf_list_create + 4 x pf_list_append (ints)", NULL, create_list4, release,
     NULL},
    {"map_4", "packfn", "pf_map_create + 4 x pf_map_set (small str keys, int values)", NULL,
     create_map4, release, NULL},
    {"shape_2", "packfn", "pf_shape_create (3, 4)", NULL, create_shape2, release, NULL},
    {"error", "packfn", "pf_error_create (no backtrace, not raised)", NULL, create_error, release,
     NULL},
    {"tensor_view", "packfn", "pf_tensor_view of a live 1024-float tensor", setup_view, create_view,
     release, teardown_view},
    {"tensor_slice", "packfn",
     "pf_tensor_slice(axis 0, 1, 1024, step 2) of a live 1024-float tensor", setup_view,
     create_slice, release, teardown_view},
    {"tensor_1k", "packfn", "pf_tensor_empty, 256 float32", NULL, create_tensor1k, release, NULL},
    {"tensor_dlpack", "packfn",
     "pf_tensor_from_dlpack_versioned of a neutral producer's export (256 float32)", NULL,
     create_dlpack, release, NULL},
};

/* ---- kinds and variants ---- */

static const char* const kind_names[] = {
    "function",  "closure",     "function_direct", "string_8",  "string_100",
    "bytes_100", "array_4",     "list_4",          "map_4",     "shape_2",
    "error",     "tensor_view", "tensor_slice",    "tensor_1k", "tensor_dlpack"};
static const char* const kind_what[] = {
    "function, no self (type 68)",
    "closure: function with self + deleter",
    "function, direct form (packfn: a 64-byte line of its own; TVM-FFI: its same direct form)",
    "string, 8 bytes (an object)",
    "string, 100 bytes",
    "bytes, 100 bytes",
    "array of 4 ints",
    "list: 4 ints appended to an empty one",
    "map: 4 small-string keys set to ints in an empty one",
    "shape (3, 4)",
    "error object, no backtrace (made, not raised)",
    "tensor header: a 1-d view",
    "tensor header: a 1-d strided view (512 of 1024, step 2, from element 1)",
    "tensor, 1-d float32, 1 KiB of data",
    /* parenthesised: clang's -Wstring-concatenation (an error with PF_WERROR) took the two
     * literals for a missing comma */
    ("tensor imported from a neutral DLPack producer (its 1 KiB of data shared; producer's block "
     "counted on both sides)"),
};

/* A variant is a runtime plus how its process runs. */
typedef struct variant {
  const char* name; /* column name */
  const char* impl; /* which table */
  int no_cache;     /* PACKFN_NO_ALLOC_CACHE=1 */
} variant_t;

static const variant_t variants[] = {
    {"packfn", "packfn", 0},
    {"packfn_nocache", "packfn", 1},
#ifdef PF_BENCH_HAVE_TVMFFI
    {"tvmffi", "tvmffi", 0},
#endif
};
#define NVAR  ARRAY_SIZE(variants)
#define NKIND ARRAY_SIZE(kind_names)

static const pf_objbench_kind_t* find_kind(const char* kind, const char* impl) {
  const pf_objbench_kind_t* table = packfn_kinds;
  size_t count = ARRAY_SIZE(packfn_kinds);
#ifdef PF_BENCH_HAVE_TVMFFI
  if (strcmp(impl, "tvmffi") == 0)
    table = pf_objbench_tvmffi_kinds(&count);
#endif
  for (size_t i = 0; i < count; ++i)
    if (strcmp(table[i].kind, kind) == 0 && strcmp(table[i].impl, impl) == 0)
      return &table[i];
  return NULL;
}

/* ---- the child: one kind, one runtime, one process ---- */

/* libpackfn's private count of slab bytes (src/alloc.h); TVM-FFI allocates with malloc only. */
size_t pf__alloc_slab_bytes(void);

static double bytes_in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return (double)m.uordblks + (double)m.hblkhd + (double)pf__alloc_slab_bytes();
}

static double median_of(double* v, int n) {
  double lo, med, hi;
  pf_bench_summarise(v, n, &lo, &med, &hi);
  return med;
}

/* Prints "result CHECKSUM MEM" (bytes per object), then "rounds" and for each round its ns per
   create, ns per release and order (the share of objects made at a higher address than the one
   before them); the driver takes cold and warm figures from those. Under callgrind it dumps
   cold_create, cold_release, warm_create, warm_release (the first warm round) instead of
   timing (the times it prints are then meaningless). */
/* --churn's order of the objects: a permutation of 0..n-1 from xorshift, the same in every
   process. */
static int64_t* churn_order(int64_t n) {
  int64_t* order = malloc((size_t)n * sizeof *order);
  if (!order)
    return NULL;
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  uint64_t x = 88172645463325252ull;
  for (int64_t i = n - 1; i > 0; --i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    int64_t j = (int64_t)(x % (uint64_t)(i + 1));
    int64_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  return order;
}

/* How many objects a churn round releases and makes again: half of them. */
static int64_t churn_half(int64_t n) {
  return n / 2 > 0 ? n / 2 : 1;
}

/* A churn round (r >= 1): releases the objects of a window of half the permutation, then makes
   them again, in the permutation's order; times per object in *create and *release, the share
   made at a higher address than the one before in *ascending. Returns the checksum part. */
static uint64_t churn_round(const pf_objbench_kind_t* k, void* state, void** objs,
                            const int64_t* order, int64_t n, int r, double* create, double* release,
                            double* ascending) {
  int64_t h = churn_half(n), start = ((int64_t)(r - 1) * (n / 3 + 1)) % n;
  uint64_t sum = 0;
  double t0 = pf_bench_now_ns();
  for (int64_t j = 0; j < h; ++j)
    k->release(objs[order[(start + j) % n]]);
  double t1 = pf_bench_now_ns();
  for (int64_t j = 0; j < h; ++j)
    objs[order[(start + j) % n]] = k->create(state, &sum);
  double t2 = pf_bench_now_ns();
  int64_t up = 0;
  for (int64_t j = 1; j < h; ++j)
    up += (uintptr_t)objs[order[(start + j) % n]] > (uintptr_t)objs[order[(start + j - 1) % n]];
  *release = (t1 - t0) / (double)h;
  *create = (t2 - t1) / (double)h;
  *ascending = h > 1 ? (double)up / (double)(h - 1) : 1.0;
  return sum;
}

static int run_child(const char* kind_name, const char* impl, int64_t n, int rounds, int churn) {
  const pf_objbench_kind_t* k = find_kind(kind_name, impl);
  if (!k)
    pf_objbench_fail(impl, kind_name, "no such kind for this runtime");
  void** objs = malloc((size_t)n * sizeof(void*));
  if (!objs)
    pf_objbench_fail(impl, kind_name, "out of memory");
  memset(objs, 0, (size_t)n * sizeof(void*)); /* touched now, not inside a timed loop */
  void* state = k->setup ? k->setup() : NULL;
  uint64_t checksum = 0, round_sum = 0;
  double mem = 0, create_ns[MAX_ROUNDS], release_ns[MAX_ROUNDS], ascending[MAX_ROUNDS];
  const int cg = RUNNING_ON_VALGRIND;
  static const char* const labels[2][2] = {{"cold_create", "cold_release"},
                                           {"warm_create", "warm_release"}};
  int64_t* order = NULL;
  if (churn && !(order = churn_order(n)))
    pf_objbench_fail(impl, kind_name, "out of memory");
  for (int r = 0; r < rounds; ++r) {
    uint64_t sum = 0;
    if (churn && r > 0) {
      int64_t h = churn_half(n);
      sum = churn_round(k, state, objs, order, n, r, &create_ns[r], &release_ns[r], &ascending[r]);
      /* every object adds the same amount: the half adds h / n of a whole round */
      if (sum * (uint64_t)n != round_sum * (uint64_t)h)
        pf_objbench_fail(impl, kind_name, "churn rounds disagree on the checksum");
      checksum += sum;
      continue;
    }
    double before = r == 0 ? bytes_in_use() : 0;
    if (cg) {
      CALLGRIND_ZERO_STATS;
      CALLGRIND_TOGGLE_COLLECT;
    }
    double t0 = pf_bench_now_ns();
    for (int64_t i = 0; i < n; ++i)
      objs[i] = k->create(state, &sum);
    double t1 = pf_bench_now_ns();
    if (cg) {
      CALLGRIND_TOGGLE_COLLECT;
      if (r < 2)
        CALLGRIND_DUMP_STATS_AT(labels[r][0]);
    }
    if (r == 0)
      mem = (bytes_in_use() - before) / (double)n;
    if (cg) {
      CALLGRIND_ZERO_STATS;
      CALLGRIND_TOGGLE_COLLECT;
    }
    double t2 = pf_bench_now_ns();
    for (int64_t i = 0; i < n && !churn; ++i) /* churn: all stay alive */
      k->release(objs[i]);
    double t3 = pf_bench_now_ns();
    if (cg) {
      CALLGRIND_TOGGLE_COLLECT;
      if (r < 2)
        CALLGRIND_DUMP_STATS_AT(labels[r][1]);
    }
    create_ns[r] = (t1 - t0) / (double)n;
    release_ns[r] = churn ? -1 : (t3 - t2) / (double)n;
    /* The round's order: the share of objects made at a higher address than the one before
       (addresses compared as numbers; the objects are released). */
    int64_t up = 0;
    for (int64_t i = 1; i < n; ++i)
      up += (uintptr_t)objs[i] > (uintptr_t)objs[i - 1];
    ascending[r] = n > 1 ? (double)up / (double)(n - 1) : 1.0;
    if (r == 0)
      round_sum = sum;
    else if (sum != round_sum)
      pf_objbench_fail(impl, kind_name, "rounds disagree on the checksum");
    checksum += sum;
  }
  for (int64_t i = 0; i < n && churn; ++i)
    k->release(objs[i]);
  free(order);
  if (k->teardown)
    k->teardown(state);
  free(objs);
  printf("result %llu %.3f\nrounds", (unsigned long long)checksum, mem);
  for (int r = 0; r < rounds; ++r)
    printf(" %.3f %.3f %.3f", create_ns[r], release_ns[r], ascending[r]);
  printf("\n");
  return fflush(stdout) == 0 ? 0 : 2;
}

/* ---- the driver ---- */

typedef struct options {
  int64_t n, cg_n;
  int rounds, reps;
  const char* kinds; /* comma-separated fnmatch patterns, NULL for all */
  int callgrind;
  const char* cg_dir;
  const char* md_path;
  const char* json_path;
  int per_round; /* --per-round: every process's rounds in the markdown too */
  int churn;     /* --churn: the later rounds release and remake a random half */
} options_t;

typedef struct cell {
  int runs;
  uint64_t checksum;
  double mem[MAX_REPS], cold_c[MAX_REPS], cold_r[MAX_REPS], warm_c[MAX_REPS], warm_r[MAX_REPS];
  double m_mem, m_cold_c, m_cold_r, m_warm_c, m_warm_r; /* medians */
  double ir[4]; /* per object: cold create, cold release, warm create, warm release; -1 unknown */
  int failed;   /* its checksum differs from packfn's: no figure of it is reported */
  /* each process's rounds: create and release ns, the share of objects above the previous one */
  double round_c[MAX_REPS][MAX_ROUNDS], round_r[MAX_REPS][MAX_ROUNDS],
      round_a[MAX_REPS][MAX_ROUNDS];
} cell_t;

static cell_t cells[NKIND][NVAR];

static int kind_selected(const options_t* opt, const char* kind) {
  if (!opt->kinds)
    return 1;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", opt->kinds);
  for (char* tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
    if (fnmatch(tok, kind, 0) == 0)
      return 1;
  return 0;
}

/* Runs argv (argv[0] searched on PATH) with the variant's environment; its stdout into out
   (NUL-terminated). Returns the exit status, or -1 when it could not run. */
static int run_process(char* const argv[], const variant_t* v, char* out, size_t size) {
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    close(fds[0]);
    if (dup2(fds[1], STDOUT_FILENO) < 0)
      _exit(127);
    close(fds[1]);
    if (v->no_cache)
      setenv("PACKFN_NO_ALLOC_CACHE", "1", 1);
    else
      unsetenv("PACKFN_NO_ALLOC_CACHE");
    execvp(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  size_t used = 0;
  ssize_t got;
  while ((got = read(fds[0], out + used, size - 1 - used)) > 0 || (got < 0 && errno == EINTR))
    if (got > 0)
      used += (size_t)got;
  out[used] = '\0';
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void child_argv(char* buf[], char nbuf[], char rbuf[], const char* kind, const char* impl,
                       int64_t n, int rounds, int i0, int churn) {
  snprintf(nbuf, 24, "%lld", (long long)n);
  snprintf(rbuf, 24, "%d", rounds);
  buf[i0 + 0] = "/proc/self/exe";
  buf[i0 + 1] = "--child";
  buf[i0 + 2] = (char*)kind;
  buf[i0 + 3] = (char*)impl;
  buf[i0 + 4] = nbuf;
  buf[i0 + 5] = rbuf;
  buf[i0 + 6] = churn ? "churn" : NULL;
  buf[i0 + 7] = NULL;
}

static void measure_once(const options_t* opt, size_t k, size_t v) {
  char nbuf[24], rbuf[24], out[1024];
  char* argv[9];
  child_argv(argv, nbuf, rbuf, kind_names[k], variants[v].impl, opt->n, opt->rounds, 0, opt->churn);
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    pf_objbench_fail("driver", "readlink", strerror(errno));
  self[len] = '\0';
  argv[0] = self;
  int rc = run_process(argv, &variants[v], out, sizeof out);
  unsigned long long checksum;
  double mem, f[3 * MAX_ROUNDS]; /* per round: create ns, release ns, order */
  const char* at = strstr(out, "\nrounds");
  int got = 0;
  if (rc == 0 && sscanf(out, "result %llu %lf", &checksum, &mem) == 2 && at) {
    char* p = (char*)at + 7;
    for (; got < 3 * opt->rounds; ++got) {
      char* end;
      f[got] = strtod(p, &end);
      if (end == p)
        break;
      p = end;
    }
  }
  if (got != 3 * opt->rounds) {
    fprintf(stderr, "bench_objects: %s %s: child failed (status %d)\n", variants[v].name,
            kind_names[k], rc);
    exit(2);
  }
  cell_t* c = &cells[k][v];
  if (c->runs > 0 && c->checksum != checksum)
    pf_objbench_fail(variants[v].name, kind_names[k], "processes disagree on the checksum");
  c->checksum = checksum;
  c->mem[c->runs] = mem;
  double warm_c[MAX_ROUNDS], warm_r[MAX_ROUNDS];
  for (int r = 0; r < opt->rounds; ++r) {
    c->round_c[c->runs][r] = f[3 * r];
    c->round_r[c->runs][r] = f[3 * r + 1];
    c->round_a[c->runs][r] = f[3 * r + 2];
    if (r > 0) {
      warm_c[r - 1] = f[3 * r];
      warm_r[r - 1] = f[3 * r + 1];
    }
  }
  c->cold_c[c->runs] = f[0];
  c->cold_r[c->runs] = f[1];
  c->warm_c[c->runs] = median_of(warm_c, opt->rounds - 1); /* rounds >= 2 */
  c->warm_r[c->runs] = median_of(warm_r, opt->rounds - 1);
  c->runs++;
}

/* Total Ir of a callgrind dump file ("totals: N" or, failing that, "summary: N"), -1 if none. */
static double dump_total(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f)
    return -1;
  char line[512];
  double total = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long long x;
    if (sscanf(line, "totals: %llu", &x) == 1)
      total = (double)x;
    else if (total < 0 && sscanf(line, "summary: %llu", &x) == 1)
      total = (double)x;
  }
  fclose(f);
  return total;
}

/* One run under callgrind with opt->cg_n objects and 2 rounds: dumps 1..4 are cold create,
   cold release, warm create, warm release. */
static void measure_callgrind(const options_t* opt, size_t k, size_t v) {
  char nbuf[24], rbuf[24], out[512], file_opt[4200], base[4096];
  char* argv[16];
  snprintf(base, sizeof base, "%s/cg.%s.%s", opt->cg_dir, kind_names[k], variants[v].name);
  snprintf(file_opt, sizeof file_opt, "--callgrind-out-file=%s", base);
  argv[0] = "valgrind";
  argv[1] = "--tool=callgrind";
  argv[2] = "--collect-atstart=no";
  argv[3] = file_opt;
  argv[4] = "-q";
  child_argv(argv, nbuf, rbuf, kind_names[k], variants[v].impl, opt->cg_n, 2, 5, 0);
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    pf_objbench_fail("driver", "readlink", strerror(errno));
  self[len] = '\0';
  argv[5] = self;
  cell_t* c = &cells[k][v];
  int rc = run_process(argv, &variants[v], out, sizeof out);
  unsigned long long checksum;
  if (rc != 0 || sscanf(out, "result %llu", &checksum) != 1) {
    fprintf(stderr, "bench_objects: %s %s: run under callgrind failed (status %d)\n",
            variants[v].name, kind_names[k], rc);
    exit(2);
  }
  for (int d = 0; d < 4; ++d) {
    char path[4200];
    snprintf(path, sizeof path, "%s.%d", base, d + 1);
    double total = dump_total(path);
    c->ir[d] = total < 0 ? -1 : total / (double)opt->cg_n;
  }
}

static void summarise(cell_t* c) {
  c->m_mem = median_of(c->mem, c->runs);
  c->m_cold_c = median_of(c->cold_c, c->runs);
  c->m_cold_r = median_of(c->cold_r, c->runs);
  c->m_warm_c = median_of(c->warm_c, c->runs);
  c->m_warm_r = median_of(c->warm_r, c->runs);
}

static void write_ratio(FILE* out, double a, double b) {
  if (a >= 0 && b > 0)
    fprintf(out, " %.2f |", a / b);
  else
    fprintf(out, " - |");
}

static void write_num(FILE* out, double x, const char* fmt) {
  if (x >= 0)
    fprintf(out, fmt, x);
  else
    fprintf(out, " - |");
}

static size_t variant_index(const char* name) {
  for (size_t v = 0; v < NVAR; ++v)
    if (strcmp(variants[v].name, name) == 0)
      return v;
  return (size_t)-1;
}

/* A cell's figure for phase 0..3 (cold create, cold release, warm create, warm release): the
   median time, or instructions when ir. */
static double phase_value(const cell_t* c, int phase, int ir) {
  if (ir)
    return c->ir[phase];
  const double t[4] = {c->m_cold_c, c->m_cold_r, c->m_warm_c, c->m_warm_r};
  return t[phase];
}

/* One row per kind and phase: packfn, packfn without cache, TVM-FFI, and the two ratios. */
static void write_phase_table(FILE* out, const char* unit, int ir, int churn) {
  static const char* const phase_names[2][4] = {
      {"create, cold", "release, cold", "create, warm", "release, warm"},
      {"create, cold", "release, cold", "create, churn", "release, churn"}};
  const char* const* phase_name = phase_names[churn && !ir];
  const size_t p = variant_index("packfn"), pn = variant_index("packfn_nocache");
  const size_t t = variant_index("tvmffi");
  fprintf(out,
          "| kind | phase | packfn %s | packfn no cache %s | TVM-FFI %s | packfn / TVM-FFI | "
          "no cache / TVM-FFI |\n",
          unit, unit, unit);
  fprintf(out, "|---|---|---|---|---|---|---|\n");
  for (size_t k = 0; k < NKIND; ++k) {
    if (!cells[k][p].runs)
      continue;
    for (int ph = 0; ph < 4; ++ph) {
      double xp = phase_value(&cells[k][p], ph, ir), xn = phase_value(&cells[k][pn], ph, ir);
      double xt = t != (size_t)-1 ? phase_value(&cells[k][t], ph, ir) : -1;
      fprintf(out, "| %s | %s |", kind_names[k], phase_name[ph]);
      write_num(out, xp, " %.1f |");
      write_num(out, xn, " %.1f |");
      write_num(out, xt, " %.1f |");
      write_ratio(out, xp, xt);
      write_ratio(out, xn, xt);
      fprintf(out, "\n");
    }
  }
}

/* --per-round: every process's rounds, create / release ns, one line per kind, variant and
   process, so that rounds that alternate (or drift) show. */
static void write_rounds(FILE* out, const options_t* opt) {
  fprintf(out,
          "\n### Every round (ns per object, create / release; round 1 cold; in parentheses the "
          "share of objects made at a higher address than the one made before them)\n\n");
  fprintf(out, "| kind | variant | process |");
  for (int r = 0; r < opt->rounds; ++r)
    fprintf(out, " round %d |", r + 1);
  fprintf(out, "\n|---|---|---|");
  for (int r = 0; r < opt->rounds; ++r)
    fprintf(out, "---|");
  fprintf(out, "\n");
  for (size_t k = 0; k < NKIND; ++k)
    for (size_t v = 0; v < NVAR; ++v)
      for (int p = 0; !cells[k][v].failed && p < cells[k][v].runs; ++p) {
        fprintf(out, "| %s | %s | %d |", kind_names[k], variants[v].name, p + 1);
        for (int r = 0; r < opt->rounds; ++r) {
          double rel = cells[k][v].round_r[p][r];
          fprintf(out, " %.1f / ", cells[k][v].round_c[p][r]);
          if (rel >= 0)
            fprintf(out, "%.1f", rel);
          else
            fprintf(out, "-"); /* --churn's first round releases none */
          fprintf(out, " (%.2f) |", cells[k][v].round_a[p][r]);
        }
        fprintf(out, "\n");
      }
}

static void write_markdown(FILE* out, const options_t* opt, int have_ir) {
  const size_t p = variant_index("packfn"), pn = variant_index("packfn_nocache");
  const size_t t = variant_index("tvmffi");
  const int tvm = t != (size_t)-1;
  pf_bench_conditions_print(out, "");
  fprintf(out,
          "\n### Memory per live object (%lld live; bytes in use per object: malloc's, mallinfo2, "
          "plus packfn's slab spans)\n\n",
          (long long)opt->n);
  fprintf(out, "| kind | what | packfn B | packfn no cache B | TVM-FFI B | packfn / TVM-FFI |\n");
  fprintf(out, "|---|---|---|---|---|---|\n");
  for (size_t k = 0; k < NKIND; ++k) {
    if (!cells[k][p].runs)
      continue;
    fprintf(out, "| %s | %s |", kind_names[k], kind_what[k]);
    write_num(out, cells[k][p].m_mem, " %.1f |");
    write_num(out, cells[k][pn].m_mem, " %.1f |");
    write_num(out, tvm ? cells[k][t].m_mem : -1, " %.1f |");
    write_ratio(out, cells[k][p].m_mem, tvm ? cells[k][t].m_mem : -1);
    fprintf(out, "\n");
  }
  if (opt->churn)
    fprintf(out,
            "\n### Create and release with %lld objects alive, churning (ns per object, median "
            "of %d processes; churn: rounds 2..%d, each releasing a random half of the objects "
            "and making it again)\n\n",
            (long long)opt->n, opt->reps, opt->rounds);
  else
    fprintf(out,
            "\n### Create and release with %lld objects alive (ns per object, median of %d "
            "processes; warm: rounds 2..%d)\n\n",
            (long long)opt->n, opt->reps, opt->rounds);
  write_phase_table(out, "ns", 0, opt->churn);
  if (opt->per_round)
    write_rounds(out, opt);
  if (!have_ir)
    return;
  fprintf(out,
          "\n### Instructions per object under callgrind (%lld objects alive, one process each; "
          "warm: the second round)\n\n",
          (long long)opt->cg_n);
  write_phase_table(out, "Ir", 1, 0);
}

static void json_num(FILE* out, const char* key, double x, int comma) {
  if (x >= 0)
    fprintf(out, "\"%s\": %.3f%s", key, x, comma ? ", " : "");
  else
    fprintf(out, "\"%s\": null%s", key, comma ? ", " : "");
}

static void write_json(FILE* out, const options_t* opt) {
  fprintf(out, "{\n  \"conditions\": {");
  pf_bench_conditions_json(out);
  fprintf(out,
          "},\n  \"live_objects\": %lld, \"rounds\": %d, \"reps\": %d, \"callgrind_objects\": ",
          (long long)opt->n, opt->rounds, opt->reps);
  if (opt->callgrind)
    fprintf(out, "%lld,\n", (long long)opt->cg_n);
  else
    fprintf(out, "null,\n");
  fprintf(out, "  \"results\": [");
  int first = 1;
  for (size_t k = 0; k < NKIND; ++k)
    for (size_t v = 0; v < NVAR; ++v) {
      const cell_t* c = &cells[k][v];
      if (!c->runs)
        continue;
      const pf_objbench_kind_t* e = find_kind(kind_names[k], variants[v].impl);
      fprintf(out, "%s\n    {\"kind\": \"%s\", \"impl\": \"%s\", \"entry\": \"%s\", ",
              first ? "" : ",", kind_names[k], variants[v].name, e ? e->entry : "");
      first = 0;
      json_num(out, "bytes_per_object", c->m_mem, 1);
      json_num(out, "cold_create_ns", c->m_cold_c, 1);
      json_num(out, "cold_release_ns", c->m_cold_r, 1);
      json_num(out, "warm_create_ns", c->m_warm_c, 1);
      json_num(out, "warm_release_ns", c->m_warm_r, 1);
      json_num(out, "cold_create_ir", c->ir[0], 1);
      json_num(out, "cold_release_ir", c->ir[1], 1);
      json_num(out, "warm_create_ir", c->ir[2], 1);
      json_num(out, "warm_release_ir", c->ir[3], 0);
      fprintf(out, "}");
    }
  fprintf(out, "\n  ]\n}\n");
}

static void write_file(const char* path, const options_t* opt, int have_ir, int json) {
  FILE* f = fopen(path, "w");
  if (!f)
    pf_objbench_fail("driver", path, strerror(errno));
  if (json)
    write_json(f, opt);
  else
    write_markdown(f, opt, have_ir);
  if (fclose(f) != 0)
    pf_objbench_fail("driver", path, strerror(errno));
}

static void usage(void) {
  fprintf(stderr,
          "usage: bench_objects [--n N] [--rounds R] [--reps R] [--kind PATS] [--callgrind]\n"
          "                     [--cg-n N] [--cg-dir DIR] [--md FILE] [--json FILE]\n"
          "                     [--per-round] [--churn]\n"
          "  --n N        live objects per round (default 1000000)\n"
          "  --rounds R   rounds per process, the first cold (default 5, 2..%d)\n"
          "  --reps R     processes per kind and runtime (default 5, 1..%d)\n"
          "  --kind PATS  kinds (comma-separated fnmatch patterns): function, closure,\n"
          "               function_direct, string_8, string_100, bytes_100, array_4, list_4,\n"
          "               map_4, shape_2, error,\n"
          "               tensor_view, tensor_slice, tensor_1k, tensor_dlpack\n"
          "  --callgrind  also count instructions under callgrind (valgrind on PATH)\n"
          "  --cg-n N     live objects under callgrind (default 100000)\n"
          "  --cg-dir D   where callgrind's dumps go (default ./bench_objects_cg)\n"
          "  --md FILE    markdown tables (default: stdout); --json FILE: results as JSON\n"
          "  --per-round  the markdown also lists every process's rounds, not only medians\n"
          "  --churn      the later rounds keep the objects alive and release and make again a\n"
          "               random half of them (instruction counts stay whole rounds)\n",
          MAX_ROUNDS, MAX_REPS);
  exit(2);
}

static int64_t parse_count(const char* s, int64_t lo, int64_t hi) {
  char* end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || *end || x < lo || x > hi)
    usage();
  return x;
}

int main(int argc, char** argv) {
  /* packfn alone, as in packfn_bench: it must not join the TVM-FFI this program links (the
     children inherit the variable; nothing here uses packfn before this line). */
  if (setenv("PACKFN_NO_TVM_FFI", "1", 1) != 0)
    pf_objbench_fail("driver", "setenv", strerror(errno));
  if ((argc == 6 || (argc == 7 && strcmp(argv[6], "churn") == 0)) &&
      strcmp(argv[1], "--child") == 0)
    return run_child(argv[2], argv[3], parse_count(argv[4], 1, INT64_C(1) << 40),
                     (int)parse_count(argv[5], 1, MAX_ROUNDS), argc == 7);
  pf_bench_conditions(); /* the date and load average at start */
  /* 5 rounds: 4 warm ones. Where glibc serves the blocks, warm rounds can alternate between
     two speeds (its thread cache hands a round's blocks back in address order, the next round's
     in reversed groups of 8; docs/performance.md): an even count of warm rounds weighs both
     alike, where 3 would give the median to whichever came twice. */
  options_t opt = {1000000, 100000, 5, 5, NULL, 0, "bench_objects_cg", NULL, NULL, 0, 0};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* val = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--callgrind") == 0 || strcmp(a, "--per-round") == 0 ||
        strcmp(a, "--churn") == 0) {
      *(a[2] == 'p' ? &opt.per_round : a[3] == 'a' ? &opt.callgrind : &opt.churn) = 1;
      continue;
    }
    if (!val)
      usage();
    if (strcmp(a, "--n") == 0)
      opt.n = parse_count(val, 1, INT64_C(1) << 40);
    else if (strcmp(a, "--cg-n") == 0)
      opt.cg_n = parse_count(val, 1, INT64_C(1) << 40);
    else if (strcmp(a, "--rounds") == 0)
      opt.rounds = (int)parse_count(val, 2, MAX_ROUNDS);
    else if (strcmp(a, "--reps") == 0)
      opt.reps = (int)parse_count(val, 1, MAX_REPS);
    else if (strcmp(a, "--kind") == 0)
      opt.kinds = val;
    else if (strcmp(a, "--cg-dir") == 0)
      opt.cg_dir = val;
    else if (strcmp(a, "--md") == 0)
      opt.md_path = val;
    else if (strcmp(a, "--json") == 0)
      opt.json_path = val;
    else
      usage();
    ++i;
  }
  /* Processes interleaved: each repetition visits every kind and runtime once. */
  for (int rep = 0; rep < opt.reps; ++rep)
    for (size_t k = 0; k < NKIND; ++k)
      if (kind_selected(&opt, kind_names[k]))
        for (size_t v = 0; v < NVAR; ++v)
          measure_once(&opt, k, v);
  int bad = 0;
  for (size_t k = 0; k < NKIND; ++k)
    for (size_t v = 0; v < NVAR; ++v) {
      cell_t* c = &cells[k][v];
      for (int d = 0; d < 4; ++d)
        c->ir[d] = -1;
      if (!c->runs)
        continue;
      summarise(c);
      /* Both runtimes read back the same values from the same objects. A figure that fails a
         check is reported as none ("-", null), not as a number. */
      if (c->checksum != cells[k][0].checksum) {
        fprintf(stderr, "bench_objects: %s: %s checksum %llu, packfn %llu\n", kind_names[k],
                variants[v].name, (unsigned long long)c->checksum,
                (unsigned long long)cells[k][0].checksum);
        c->failed = 1;
        c->m_mem = c->m_cold_c = c->m_cold_r = c->m_warm_c = c->m_warm_r = -1;
        bad = 1;
      }
      if (!c->failed && !(c->m_mem > 0)) {
        fprintf(stderr, "bench_objects: %s %s: no memory in use per object (%.1f)\n", kind_names[k],
                variants[v].name, c->m_mem);
        c->m_mem = -1;
        bad = 1;
      }
    }
  int have_ir = 0;
  if (opt.callgrind) {
    char* vg_argv[] = {"valgrind", "--version", NULL};
    char vg_out[128];
    if (run_process(vg_argv, &variants[0], vg_out, sizeof vg_out) != 0) {
      fprintf(stderr, "bench_objects: valgrind not found: no instruction counts\n");
    } else if (mkdir(opt.cg_dir, 0777) != 0 && errno != EEXIST) {
      pf_objbench_fail("driver", opt.cg_dir, strerror(errno));
    } else {
      have_ir = 1;
      for (size_t k = 0; k < NKIND; ++k)
        if (kind_selected(&opt, kind_names[k]))
          for (size_t v = 0; v < NVAR; ++v)
            if (!cells[k][v].failed)
              measure_callgrind(&opt, k, v);
    }
  }
  if (opt.md_path)
    write_file(opt.md_path, &opt, have_ir, 0);
  else
    write_markdown(stdout, &opt, have_ir);
  if (opt.json_path)
    write_file(opt.json_path, &opt, have_ir, 1);
  return bad;
}
