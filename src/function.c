/* Function objects: creation, the trampoline to the creator's (self, call), deleters run once,
 * signature and doc texts, and typed C functions with arity and per-argument checks. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/typed.h"

#include "common.h"
#include "alloc.h"
#include "function_private.h"

/* A packfn function object: header, the ABI cell, then the creator's function (48 bytes, what
 * pf_function_create without self or deleter and pf_function_create_direct make). */
typedef struct pf__function_s {
  pf_object_t header;
  pf_function_cell_t cell;
  pf_safe_call_t call; /* the creator's function (in the direct form also the cell's entry) */
} pf__function_t;

/* A function with a self or a deleter (64 bytes). */
typedef struct {
  pf__function_t fn;
  void* self;                  /* the creator's state */
  void (*deleter)(void* self); /* the creator's deleter, or NULL */
} pf__closure_t;

/* What few functions have (a signature, a doc, an owner kept alive: typed and static functions,
 * module functions, functions given texts later) lives outside the object, in a table keyed by
 * the object's address; a function that has such a record has an object deleter of its own
 * (the _ext ones below), so that every other function dies without looking the table up. */
typedef struct pf__fn_ext_s {
  const pf_object_t* fn;
  struct pf__fn_ext_s* next; /* in its bucket */
  pf_object_t* keepalive;    /* owned; released after the deleter (e.g. a module) */
  char* signature;           /* owned, or NULL */
  char* doc;                 /* owned, or NULL */
} pf__fn_ext_t;

typedef void (*pf__deleter_fn)(void* obj, int flags);

static pthread_mutex_t pf__ext_lock = PTHREAD_MUTEX_INITIALIZER;
static pf__fn_ext_t** pf__ext_buckets; /* under pf__ext_lock */
static size_t pf__ext_shift = 64;      /* 64 - log2(bucket count); 64: no buckets yet */
static size_t pf__ext_count;

static size_t pf__ext_bucket(const pf_object_t* fn, size_t shift) {
  return (size_t)(((uint64_t)(uintptr_t)fn * 0x9E3779B97F4A7C15ULL) >> shift);
}

void pf__function_fork_lock(void) {
  pthread_mutex_lock(&pf__ext_lock);
}

void pf__function_fork_unlock(void) {
  pthread_mutex_unlock(&pf__ext_lock);
}

/* The record of `fn`, or NULL; under pf__ext_lock. */
static pf__fn_ext_t* pf__ext_find(const pf_object_t* fn) {
  if (pf__ext_shift == 64)
    return NULL;
  pf__fn_ext_t* e = pf__ext_buckets[pf__ext_bucket(fn, pf__ext_shift)];
  while (e && e->fn != fn)
    e = e->next;
  return e;
}

/* Doubles the buckets once the records outnumber them; a failed allocation keeps the old ones
 * (longer chains, nothing lost). Under pf__ext_lock. */
static void pf__ext_grow(void) {
  size_t old_n = pf__ext_shift == 64 ? 0 : (size_t)1 << (64 - pf__ext_shift);
  if (pf__ext_count < old_n)
    return;
  size_t shift = old_n ? pf__ext_shift - 1 : 58; /* 64 buckets to start */
  size_t n = (size_t)1 << (64 - shift);
  pf__fn_ext_t** b = calloc(n, sizeof *b);
  if (!b)
    return;
  for (size_t i = 0; i < old_n; ++i) {
    for (pf__fn_ext_t* e = pf__ext_buckets[i]; e;) {
      pf__fn_ext_t* next = e->next;
      size_t k = pf__ext_bucket(e->fn, shift);
      e->next = b[k];
      b[k] = e;
      e = next;
    }
  }
  free(pf__ext_buckets);
  pf__ext_buckets = b;
  pf__ext_shift = shift;
}

/* Takes the record of `fn` out of the table (NULL when it has none). */
static pf__fn_ext_t* pf__ext_remove(const pf_object_t* fn) {
  pthread_mutex_lock(&pf__ext_lock);
  pf__fn_ext_t* found = NULL;
  if (pf__ext_shift != 64) {
    pf__fn_ext_t** link = &pf__ext_buckets[pf__ext_bucket(fn, pf__ext_shift)];
    while (*link && (*link)->fn != fn)
      link = &(*link)->next;
    found = *link;
    if (found) {
      *link = found->next;
      pf__ext_count--;
    }
  }
  pthread_mutex_unlock(&pf__ext_lock);
  return found;
}

/* Cell entry for functions with a self or a deleter: loads self and calls the creator. */
static int pf__function_trampoline(void* obj, const pf_any_t* args, int32_t num_args,
                                   pf_any_t* result) {
  pf__closure_t* f = (pf__closure_t*)obj;
  return f->fn.call(f->self, args, num_args, result);
}

/* Cell entry for functions made without self or deleter: the creator's call gets NULL. */
static int pf__function_trampoline_null(void* obj, const pf_any_t* args, int32_t num_args,
                                        pf_any_t* result) {
  return ((pf__function_t*)obj)->call(NULL, args, num_args, result);
}

/* The four object deleters: without and with a self/deleter, without and with a record. */
static void pf__function_dispose(void* obj, int flags, int closure, int ext) {
  if (flags & PF_DELETER_STRONG) {
    if (closure) {
      pf__closure_t* f = (pf__closure_t*)obj;
      if (f->deleter)
        f->deleter(f->self);
    }
    if (ext) {
      pf__fn_ext_t* e = pf__ext_remove((const pf_object_t*)obj);
      if (e) {
        free(e->signature);
        free(e->doc);
        /* last: it may hold the library whose code the deleter above ran */
        pf_object_release(e->keepalive);
        free(e);
      }
    }
  }
  if (flags & PF_DELETER_WEAK)
    pf__free_nonnull(obj);
}
static void pf__function_deleter(void* obj, int flags) {
  pf__function_dispose(obj, flags, 0, 0);
}
static void pf__function_deleter_ext(void* obj, int flags) {
  pf__function_dispose(obj, flags, 0, 1);
}
static void pf__closure_deleter(void* obj, int flags) {
  pf__function_dispose(obj, flags, 1, 0);
}
static void pf__closure_deleter_ext(void* obj, int flags) {
  pf__function_dispose(obj, flags, 1, 1);
}

static int pf__function_is_ours(const pf_object_t* obj) {
  if (!obj || obj->type_index != PF_TYPE_FUNCTION)
    return 0;
  pf__deleter_fn d = __atomic_load_n(&obj->deleter, __ATOMIC_RELAXED);
  return d == pf__function_deleter || d == pf__function_deleter_ext || d == pf__closure_deleter ||
         d == pf__closure_deleter_ext;
}

static int pf__function_is_closure(const pf_object_t* obj) {
  pf__deleter_fn d = __atomic_load_n(&obj->deleter, __ATOMIC_RELAXED);
  return d == pf__closure_deleter || d == pf__closure_deleter_ext;
}

/* The record of `fn` (one of ours), made when it has none: NULL when out of memory. Under
 * pf__ext_lock. */
static pf__fn_ext_t* pf__ext_get(pf_object_t* fn) {
  pf__fn_ext_t* e = pf__ext_find(fn);
  if (e)
    return e;
  e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  pf__ext_grow();
  if (pf__ext_shift == 64) {
    free(e);
    return NULL;
  }
  e->fn = fn;
  size_t k = pf__ext_bucket(fn, pf__ext_shift);
  e->next = pf__ext_buckets[k];
  pf__ext_buckets[k] = e;
  pf__ext_count++;
  /* from now on its death looks the record up */
  __atomic_store_n(&fn->deleter,
                   pf__function_is_closure(fn) ? pf__closure_deleter_ext : pf__function_deleter_ext,
                   __ATOMIC_RELAXED);
  return e;
}

/* The forms of a function object: plain (header, cell, call: 48 bytes), a closure (plus self
 * and deleter: 64), and plain on a cache line of its own (64 bytes at a multiple of 64) for
 * the constructors whose functions are made to be registered and used by many threads at once
 * (pf_function_create_direct, pf_function_create_static: the registration macros). Two 48-byte
 * functions share a line; two threads retaining and releasing one each (every global lookup
 * does) then move that line between their cores on every lookup (measured: two threads 0.65x
 * one thread's lookups, 1.7-1.8x with a line each). */
enum { PF__FN_PLAIN, PF__FN_CLOSURE, PF__FN_LINE };
#define PF__FN_LINE_BYTES 64

static size_t pf__function_size(int form) {
  return form == PF__FN_CLOSURE ? sizeof(pf__closure_t)
         : form == PF__FN_LINE  ? PF__FN_LINE_BYTES
                                : sizeof(pf__function_t);
}

/* Fills a fresh block as a function of `form` whose cell calls `entry`. */
static inline __attribute__((always_inline)) pf__function_t*
pf__function_fill(void* block, pf_safe_call_t entry, int form, void* self, pf_safe_call_t call,
                  void (*deleter)(void*)) {
  pf__function_t* f = block;
  int closure = form == PF__FN_CLOSURE;
  pf__object_init(&f->header, PF_TYPE_FUNCTION,
                  closure ? pf__closure_deleter : pf__function_deleter);
  f->cell.safe_call = entry;
  f->cell.cpp_call = NULL;
  f->call = call;
  if (closure) {
    ((pf__closure_t*)f)->self = self;
    ((pf__closure_t*)f)->deleter = deleter;
  }
  return f;
}

/* Allocates a function of `form` whose cell calls `entry`. Never raises. */
static pf__function_t* pf__function_new(pf_safe_call_t entry, int form, void* self,
                                        pf_safe_call_t call, void (*deleter)(void*)) {
  size_t size = pf__function_size(form);
  /* the line form without the slabs: as pf__function_make_uncached's */
  void* b = form != PF__FN_LINE   ? pf__alloc(size)
            : pf__cache.state < 0 ? pf__alloc_malloc(size)
                                  : pf__alloc_aligned(size, size);
  return b ? pf__function_fill(b, entry, form, self, call, deleter) : NULL;
}

/* The public constructors' refusal of a NULL `call` or `out`. */
__attribute__((noinline, cold)) static int pf__function_make_bad(const char* func,
                                                                 pf_object_t** out) {
  if (out)
    *out = NULL; /* as every constructor's output on failure */
  PF_ERROR_SET(PF_ERR_VALUE, "%s: argument %s: expected %s, got NULL", func, out ? "call" : "out",
               out ? "a function" : "a pointer");
  return -1;
}

/* What the public constructors put in the cell: the trampolines of pf_function_create, or, in
 * the line form (pf_function_create_direct), `call` itself. */
static inline pf_safe_call_t pf__function_entry(int form, pf_safe_call_t call) {
  return form == PF__FN_CLOSURE ? pf__function_trampoline
         : form == PF__FN_LINE  ? call
                                : pf__function_trampoline_null;
}

/* pf__function_make when this thread's list of the form's class is empty (the slabs off
 * included), out of line so that the common path keeps no frame; raises MemoryError as the
 * constructor of `form`. One copy per form (below), each saving across the allocation only
 * what its form fills in. */
static inline __attribute__((always_inline)) int pf__function_make_uncached(int form, void* self,
                                                                            pf_safe_call_t call,
                                                                            void (*deleter)(void*),
                                                                            pf_object_t** out) {
  size_t size = pf__function_size(form);
  /* the line form's own line is for lookups from several threads, with the slabs; without them
   * (the memory-checker mode) a plain malloc: posix_memalign cost 850 instructions a create */
  void* b = form != PF__FN_LINE   ? pf__alloc_uncached(size)
            : pf__cache.state < 0 ? pf__alloc_malloc(size)
                                  : pf__alloc_aligned_slow(size, size);
  if (!b) {
    *out = NULL;
    return pf__raise_oom(form == PF__FN_LINE ? "pf_function_create_direct" : "pf_function_create",
                         size);
  }
  *out = &pf__function_fill(b, pf__function_entry(form, call), form, self, call, deleter)->header;
  return 0;
}
__attribute__((noinline)) static int pf__function_uncached_plain(pf_safe_call_t call,
                                                                 pf_object_t** out) {
  return pf__function_make_uncached(PF__FN_PLAIN, NULL, call, NULL, out);
}
__attribute__((noinline)) static int pf__function_uncached_closure(void* self, pf_safe_call_t call,
                                                                   void (*deleter)(void*),
                                                                   pf_object_t** out) {
  return pf__function_make_uncached(PF__FN_CLOSURE, self, call, deleter, out);
}
__attribute__((noinline)) static int pf__function_uncached_line(pf_safe_call_t call,
                                                                pf_object_t** out) {
  return pf__function_make_uncached(PF__FN_LINE, NULL, call, NULL, out);
}

/* Allocation and fill shared by the public constructors, once they have refused a NULL `call`
 * or `out`: the block from this thread's list, else from an out-of-line copy per form. */
static inline __attribute__((always_inline)) int pf__function_make(int form, void* self,
                                                                   pf_safe_call_t call,
                                                                   void (*deleter)(void*),
                                                                   pf_object_t** out) {
  size_t size = pf__function_size(form);
  /* the line form's 64 bytes: a block of the 64-byte class is aligned to 64 */
  void* b = pf__alloc_cached(size);
  if (PF_UNLIKELY(!b))
    return form == PF__FN_CLOSURE ? pf__function_uncached_closure(self, call, deleter, out)
           : form == PF__FN_LINE  ? pf__function_uncached_line(call, out)
                                  : pf__function_uncached_plain(call, out);
  *out = &pf__function_fill(b, pf__function_entry(form, call), form, self, call, deleter)->header;
  return 0;
}

int pf_function_create(void* self, pf_safe_call_t call, void (*deleter)(void* self),
                       pf_object_t** out) {
  /* checked once, before the form is chosen: inside each form's copy, gcc merged the two
   * copies' checks into flags computed ahead of the dispatch (four instructions more) */
  if (PF_UNLIKELY(!call || !out))
    return pf__function_make_bad("pf_function_create", out);
  if (!self && !deleter)
    return pf__function_make(PF__FN_PLAIN, NULL, call, NULL, out);
  return pf__function_make(PF__FN_CLOSURE, self, call, deleter, out);
}

int pf_function_create_direct(pf_safe_call_t call, pf_object_t** out) {
  if (PF_UNLIKELY(!call || !out))
    return pf__function_make_bad("pf_function_create_direct", out);
  /* the cell calls `call` itself */
  return pf__function_make(PF__FN_LINE, NULL, call, NULL, out);
}

/* The checks of pf_function_call's other arguments, naming `func`: 0 when num_args >= 0, args
 * is not NULL for num_args > 0 and result is not NULL; else -1 with ValueError. */
static int pf__call_args_check(const char* func, const pf_any_t* args, int32_t num_args,
                               const pf_any_t* result) {
  if (num_args < 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument num_args: expected a count >= 0, got %d", func,
                 (int)num_args);
    return -1;
  }
  if (!args && num_args > 0) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument args: expected %d argument%s, got NULL", func,
                 (int)num_args, num_args == 1 ? "" : "s");
    return -1;
  }
  if (!result)
    return PF__NULL_ARG(func, "result");
  return 0;
}

int pf__call_found(const char* func, const char* name, pf_object_t* fn, const pf_any_t* args,
                   int32_t num_args, pf_any_t* result) {
  if (pf__call_args_check(func, args, num_args, result) != 0) {
    pf_object_release(fn); /* checked here, so that the message names `func` (review) */
    return -1;
  }
  int rc = pf_function_call(fn, args, num_args, result);
  pf_object_release(fn);
  if (rc == 0)
    return 0;
  /* a callee may leave a value that needs no releasing (the ABI allows it): none, as promised */
  *result = pf_any_none();
  return pf_error_ensure(name, rc);
}

int pf__function_call_invalid(const pf_object_t* fn, const pf_any_t* args, int32_t num_args,
                              const pf_any_t* result) {
  if (!fn)
    PF_ERROR_SET(PF_ERR_TYPE, "pf_function_call: argument fn: expected Function, got NULL");
  else if (fn->type_index != PF_TYPE_FUNCTION)
    PF_ERROR_SET(PF_ERR_TYPE, "pf_function_call: argument fn: expected Function, got %s",
                 pf_type_name(fn->type_index));
  else if (num_args < 0)
    PF_ERROR_SET(PF_ERR_VALUE, "pf_function_call: argument num_args: expected a count >= 0, got %d",
                 (int)num_args);
  else if (!args && num_args != 0) /* (NULL, 0) is no arguments: then result is the NULL one */
    PF_ERROR_SET(PF_ERR_VALUE, "pf_function_call: argument args: expected %d argument%s, got NULL",
                 (int)num_args, num_args == 1 ? "" : "s");
  else
    (void)PF__NULL_ARG("pf_function_call", "result");
  if (result)
    *(pf_any_t*)result = pf_any_none();
  return -1;
}

/* The text `which` (0: signature, 1: doc) of `fn`, or NULL. */
static const char* pf__function_text(const pf_object_t* fn, int which) {
  if (!pf__function_is_ours(fn))
    return NULL;
  pthread_mutex_lock(&pf__ext_lock);
  const pf__fn_ext_t* e = pf__ext_find(fn);
  const char* s = e ? (which ? e->doc : e->signature) : NULL;
  pthread_mutex_unlock(&pf__ext_lock);
  return s;
}

const char* pf_function_signature(const pf_object_t* fn) {
  return pf__function_text(fn, 0);
}

const char* pf_function_doc(const pf_object_t* fn) {
  return pf__function_text(fn, 1);
}

/* Gives `fn` (one of ours) the texts s and d (owned; either NULL), replacing its old ones: 0, or
 * -1 when its record cannot be made (s and d freed, nothing raised). */
static int pf__function_put_texts(pf_object_t* fn, char* s, char* d) {
  pthread_mutex_lock(&pf__ext_lock);
  pf__fn_ext_t* e = pf__ext_get(fn);
  if (!e) {
    pthread_mutex_unlock(&pf__ext_lock);
    free(s);
    free(d);
    return -1;
  }
  char* old_s = e->signature;
  char* old_d = e->doc;
  e->signature = s;
  e->doc = d;
  pthread_mutex_unlock(&pf__ext_lock);
  free(old_s);
  free(old_d);
  return 0;
}

int pf_function_set_info(pf_object_t* fn, const char* signature, const char* doc) {
  if (!pf__function_is_ours(fn)) {
    PF_ERROR_SET(PF_ERR_TYPE,
                 "pf_function_set_info: argument fn: expected a Function made by packfn, got %s",
                 fn ? pf_type_name(fn->type_index) : "NULL");
    return -1;
  }
  char* s = signature ? pf__strdup(signature) : NULL;
  char* d = doc ? pf__strdup(doc) : NULL;
  if ((signature && !s) || (doc && !d)) {
    free(s);
    free(d); /* the size of the copy that failed (it said 0 bytes: review) */
    return pf__raise_oom("pf_function_set_info", strlen(signature && !s ? signature : doc) + 1);
  }
  if (pf__function_put_texts(fn, s, d) != 0)
    return pf__raise_oom("pf_function_set_info", sizeof(pf__fn_ext_t));
  return 0;
}

int pf__function_set_keepalive(pf_object_t* fn, pf_object_t* owner) {
  if (!pf__function_is_ours(fn)) {
    PF_ERROR_SET(PF_ERR_TYPE, "expected a Function made by packfn, got %s",
                 fn ? pf_type_name(fn->type_index) : "NULL");
    return -1;
  }
  pthread_mutex_lock(&pf__ext_lock);
  pf__fn_ext_t* e = pf__ext_get(fn);
  pf_object_t* old = NULL;
  if (e) {
    pf_object_retain(owner);
    old = e->keepalive;
    e->keepalive = owner;
  }
  pthread_mutex_unlock(&pf__ext_lock);
  if (!e)
    return pf__raise_oom("pf_function_set_keepalive", sizeof(pf__fn_ext_t));
  pf_object_release(old);
  return 0;
}

/* ---- typed functions ---- */

typedef struct {
  pf_typed_call_t impl;
  void* self;
  void (*deleter)(void* self);
  const char* name;
  const uint64_t* same; /* per parameter, see pf__same_payload; in this block, after params */
  int32_t num_params;
  pf_param_t params[]; /* then `same`, then the name strings */
} pf__typed_t;

/* The type indices (all below 64) whose 8-byte payload already is the converted argument of a
 * parameter of kind k: the pf_arg_t member read for k lies at the same offset with the same
 * representation as the Any's. Other accepted types (strings, objects, none for a pointer,
 * numbers to convert) take the general path, and so do DLTensor pointers, which it refuses when
 * NULL (review: a NULL one reached the function), and bools for an int, which another producer
 * may have stored as 2 (review: the function received 2). */
static uint64_t pf__same_payload(pf_param_kind_t k) {
  switch (k) {
  case PF_PARAM_INT:
    return 1ULL << PF_TYPE_INT;
  case PF_PARAM_FLOAT:
    return 1ULL << PF_TYPE_FLOAT;
  case PF_PARAM_DTYPE:
    return 1ULL << PF_TYPE_DTYPE;
  case PF_PARAM_DEVICE:
    return 1ULL << PF_TYPE_DEVICE;
  case PF_PARAM_PTR:
    return 1ULL << PF_TYPE_OPAQUE_PTR;
  default:
    return 0;
  }
}

const char* pf_param_kind_name(pf_param_kind_t kind) {
  switch (kind) {
  case PF_PARAM_NONE:
    return "None";
  case PF_PARAM_INT:
    return "int";
  case PF_PARAM_FLOAT:
    return "float";
  case PF_PARAM_BOOL:
    return "bool";
  case PF_PARAM_STR:
    return "str";
  case PF_PARAM_BYTES:
    return "bytes";
  case PF_PARAM_TENSOR:
    return "Tensor";
  case PF_PARAM_OBJECT:
    return "Object";
  case PF_PARAM_ANY:
    return "Any";
  case PF_PARAM_DTYPE:
    return "dtype";
  case PF_PARAM_DEVICE:
    return "Device";
  case PF_PARAM_PTR:
    return "void*";
  case PF_PARAM_FUNCTION:
    return "Function";
  }
  return "unknown";
}

/* The type's name after *prefix "a NULL " for a pointer or object argument holding NULL (not
 * formatted into buf, which cut a registered type's long key: review), the length of a small
 * string or bytes longer than PF_SMALL_STR_MAX (the conversions refuse those), else the type's
 * name after an empty *prefix: what a typed function's argument error says it got. */
static const char* pf__arg_got(const pf_any_t* arg, char* buf, size_t size, const char** prefix) {
  int32_t t = arg->type_index;
  *prefix = "";
  int null_ptr = (t == PF_TYPE_RAW_STR || t == PF_TYPE_BYTE_ARRAY_PTR ||
                  t == PF_TYPE_DLTENSOR_PTR || t >= PF_TYPE_STATIC_OBJECT_BEGIN) &&
                 arg->v_ptr == NULL;
  if ((t == PF_TYPE_SMALL_STR || t == PF_TYPE_SMALL_BYTES) &&
      arg->small_str_len > PF_SMALL_STR_MAX) {
    snprintf(buf, size, "a small %s of length %u, more than %d",
             t == PF_TYPE_SMALL_STR ? "string" : "bytes", (unsigned)arg->small_str_len,
             PF_SMALL_STR_MAX);
    return buf;
  }
  if (t == PF_TYPE_BYTE_ARRAY_PTR && arg->v_ptr && !((const pf_byte_array_t*)arg->v_ptr)->data &&
      ((const pf_byte_array_t*)arg->v_ptr)->size != 0) {
    snprintf(buf, size, "a bytes view with a NULL data pointer");
    return buf;
  }
  if (null_ptr)
    *prefix = "a NULL ";
  return pf_type_name(t);
}

static int pf__typed_arg_error(const pf__typed_t* t, int32_t i, const pf_any_t* arg) {
  char buf[64];
  const char* prefix;
  const char* got = pf__arg_got(arg, buf, sizeof buf, &prefix);
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %d (%s): expected %s, got %s%s", t->name, (int)i,
               t->params[i].name, pf_param_kind_name(t->params[i].kind), prefix, got);
  return -1;
}

/* Converts argument i by its parameter's kind: 0, or -1 with the TypeError raised. The
 * conversions are typed.h's pf__conv_<KIND>, the same PF_TYPED_DEFINE's entries inline. */
static __attribute__((noinline)) int pf__typed_convert(const pf__typed_t* t, int32_t i,
                                                       const pf_any_t* a, pf_arg_t* out) {
  int ok;
  switch (t->params[i].kind) {
#define PF__CONVERT_CASE(K, member)                                                                \
  case PF_PARAM_##K:                                                                               \
    ok = pf__conv_##K(a, &out->member);                                                            \
    break;
    PF__CONVERT_CASE(INT, i)
    PF__CONVERT_CASE(FLOAT, f)
    PF__CONVERT_CASE(BOOL, b)
    PF__CONVERT_CASE(STR, s)
    PF__CONVERT_CASE(BYTES, s)
    PF__CONVERT_CASE(TENSOR, tensor)
    PF__CONVERT_CASE(OBJECT, obj)
    PF__CONVERT_CASE(FUNCTION, obj)
    PF__CONVERT_CASE(ANY, any)
    PF__CONVERT_CASE(DTYPE, dtype)
    PF__CONVERT_CASE(DEVICE, device)
    PF__CONVERT_CASE(PTR, ptr)
#undef PF__CONVERT_CASE
  default:
    ok = 0;
  }
  return ok ? 0 : pf__typed_arg_error(t, i, a);
}

static __attribute__((noinline, cold)) int pf__typed_arity_error(const pf__typed_t* t,
                                                                 int32_t num_args) {
  PF_ERROR_SET(PF_ERR_TYPE, "%s: expected %d argument%s, got %d", t->name, (int)t->num_params,
               t->num_params == 1 ? "" : "s", (int)num_args);
  return -1;
}

/* Cell entry of a typed function: arity, conversion of every argument, then the impl. An
 * argument whose payload already is its converted form (an int for an int parameter, say) is
 * copied as it is; the others go through pf__typed_convert. */
static int pf__typed_entry(void* obj, const pf_any_t* args, int32_t num_args, pf_any_t* result) {
  const pf__typed_t* t = (const pf__typed_t*)((pf__closure_t*)obj)->self;
  if (PF_UNLIKELY(num_args != t->num_params))
    return pf__typed_arity_error(t, num_args);
  pf_arg_t conv[PF_TYPED_MAX_PARAMS];
  for (int32_t i = 0; i < num_args; ++i) {
    uint32_t ti = (uint32_t)args[i].type_index;
    if (PF_LIKELY(ti < 64 && ((t->same[i] >> ti) & 1)))
      memcpy(&conv[i], &args[i].v_int64, sizeof args[i].v_int64);
    else if (pf__typed_convert(t, i, &args[i], &conv[i]) != 0)
      return -1;
  }
  return t->impl(t->self, conv, result);
}

/* Cell entry of a typed function whose every parameter has a payload that can be used as it
 * is (ints, floats, dtypes, ...): the same checks with nothing to convert, so it
 * keeps nothing across a call and saves no registers. Anything else (a bool for a float, a
 * tensor object, a wrong arity or type) goes to pf__typed_entry, which converts or raises. */
static int pf__typed_entry_plain(void* obj, const pf_any_t* args, int32_t num_args,
                                 pf_any_t* result) {
  const pf__typed_t* t = (const pf__typed_t*)((pf__closure_t*)obj)->self;
  pf_arg_t conv[PF_TYPED_MAX_PARAMS];
  if (PF_LIKELY(num_args == t->num_params)) {
    int32_t i = 0;
    for (; i < num_args; ++i) {
      uint32_t ti = (uint32_t)args[i].type_index;
      if (PF_UNLIKELY(ti >= 64 || !((t->same[i] >> ti) & 1)))
        break;
      memcpy(&conv[i], &args[i].v_int64, sizeof args[i].v_int64);
    }
    if (PF_LIKELY(i == num_args))
      return t->impl(t->self, conv, result);
  }
  return pf__typed_entry(obj, args, num_args, result);
}

int pf_typed_arity_error(const pf_signature_t* sig, int32_t got) {
  if (!sig || !sig->name)
    return PF__NULL_ARG("pf_typed_arity_error", sig ? "sig->name" : "sig");
  PF_ERROR_SET(PF_ERR_TYPE, "%s: expected %d argument%s, got %d", sig->name, (int)sig->num_params,
               sig->num_params == 1 ? "" : "s", (int)got);
  return -1;
}

int pf_typed_arg_error(const pf_signature_t* sig, int32_t index, const pf_any_t* arg) {
  if (!sig || !sig->name || !sig->params || !arg)
    return PF__NULL_ARG("pf_typed_arg_error", !sig         ? "sig"
                                              : !sig->name ? "sig->name"
                                              : !arg       ? "arg"
                                                           : "sig->params");
  if (index < 0 || index >= sig->num_params) {
    PF_ERROR_SET(PF_ERR_VALUE, "pf_typed_arg_error: argument index: expected 0..%d for %s, got %d",
                 (int)sig->num_params - 1, sig->name, (int)index);
    return -1;
  }
  char buf[64];
  const char* prefix;
  const char* got = pf__arg_got(arg, buf, sizeof buf, &prefix);
  PF_ERROR_SET(PF_ERR_TYPE, "%s: argument %d (%s): expected %s, got %s%s", sig->name, (int)index,
               sig->params[index].name ? sig->params[index].name : "?",
               pf_param_kind_name(sig->params[index].kind), prefix, got);
  return -1;
}

static void pf__typed_deleter(void* self) {
  pf__typed_t* t = (pf__typed_t*)self;
  if (t->deleter)
    t->deleter(t->self);
  free(t);
}

static int pf__kind_valid(pf_param_kind_t k, int allow_none) {
  return (k == PF_PARAM_NONE && allow_none) || (k >= PF_PARAM_INT && k <= PF_PARAM_FUNCTION);
}

/* 1 when `name` holds a character that would make the signature text unreadable (a space or
 * control character, a comma, a colon or a parenthesis): "f(x(a, b: int) -> int" of a
 * parameter named "x(a, b" reads back as other parameters (the typed functions' review). */
static int pf__name_breaks_text(const char* name) {
  for (const unsigned char* c = (const unsigned char*)name; *c; ++c)
    if (*c <= ' ' || *c == 0x7f || *c == ',' || *c == ':' || *c == '(' || *c == ')')
      return 1;
  return 0;
}
#define PF__NAME_RULE "without spaces, control characters, commas, colons or parentheses"

/* The one check of a declaration (sig and sig->name not NULL): parameter count and array, the
 * result kind, each parameter's name and kind. 0, or -1 with ValueError naming `func`. */
static int pf__signature_check(const char* func, const pf_signature_t* sig) {
  if (!*sig->name) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: argument sig: expected a function name, got \"\"", func);
    return -1;
  }
  if (pf__name_breaks_text(sig->name)) {
    PF_ERROR_SET(PF_ERR_VALUE,
                 "%s: argument sig: expected a function name " PF__NAME_RULE ", got '%s'", func,
                 sig->name);
    return -1;
  }
  if (sig->num_params < 0 || sig->num_params > PF_TYPED_MAX_PARAMS ||
      (sig->num_params > 0 && !sig->params)) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: %s: expected 0..%d parameters with a params array, got %d%s",
                 func, sig->name, PF_TYPED_MAX_PARAMS, (int)sig->num_params,
                 sig->params ? "" : " and params NULL");
    return -1;
  }
  if (!pf__kind_valid(sig->result, 1)) {
    PF_ERROR_SET(PF_ERR_VALUE, "%s: %s: unknown result kind %d", func, sig->name, (int)sig->result);
    return -1;
  }
  for (int32_t i = 0; i < sig->num_params; ++i) {
    const pf_param_t* p = &sig->params[i];
    if (!p->name || !*p->name || !pf__kind_valid(p->kind, 0)) {
      PF_ERROR_SET(
          PF_ERR_VALUE, "%s: %s: parameter %d: expected a name and a kind, got %s and kind %d",
          func, sig->name, (int)i, p->name ? (*p->name ? p->name : "\"\"") : "NULL", (int)p->kind);
      return -1;
    }
    if (pf__name_breaks_text(p->name)) {
      PF_ERROR_SET(PF_ERR_VALUE,
                   "%s: %s: parameter %d: expected a name " PF__NAME_RULE ", got '%s'", func,
                   sig->name, (int)i, p->name);
      return -1;
    }
    for (int32_t k = 0; k < i; ++k)
      if (strcmp(sig->params[k].name, p->name) == 0) {
        PF_ERROR_SET(PF_ERR_VALUE, "%s: %s: parameters %d and %d are both named '%s'", func,
                     sig->name, (int)k, (int)i, p->name);
        return -1;
      }
  }
  return 0;
}

/* Builds "name(a: int, b: int) -> int" into a new string; NULL when out of memory. *size gets
 * the bytes it takes (for the MemoryError). */
static char* pf__signature_text(const char* name, int32_t n, const pf_param_t* params,
                                pf_param_kind_t result, size_t* size_out) {
  size_t size = strlen(name) + 16 + strlen(pf_param_kind_name(result));
  for (int32_t i = 0; i < n; ++i)
    size += strlen(params[i].name) + strlen(pf_param_kind_name(params[i].kind)) + 4;
  *size_out = size;
  char* s = malloc(size);
  if (!s)
    return NULL;
  char* p = s;
  p += sprintf(p, "%s(", name);
  for (int32_t i = 0; i < n; ++i)
    p += sprintf(p, "%s%s: %s", i ? ", " : "", params[i].name, pf_param_kind_name(params[i].kind));
  sprintf(p, ") -> %s", pf_param_kind_name(result));
  return s;
}

/* The size of the allocation that failed of a typed or static function's signature text (NULL,
 * text_size bytes), doc copy (NULL for a doc) and object (fn_size bytes), for its MemoryError,
 * which said the size of another block: review. */
static size_t pf__texts_failed(const char* signature, size_t text_size, const char* want_doc,
                               const char* doc, size_t fn_size) {
  return !signature ? text_size : want_doc && !doc ? strlen(want_doc) + 1 : fn_size;
}

int pf_function_create_typed(const pf_signature_t* sig, pf_typed_call_t impl, void* self,
                             void (*deleter)(void* self), pf_object_t** out) {
  const char* bad = !out ? "out" : !sig ? "sig" : !impl ? "impl" : !sig->name ? "sig->name" : NULL;
  if (out)
    *out = NULL; /* as every constructor's output on failure */
  if (bad)
    return PF__NULL_ARG("pf_function_create_typed", bad);
  if (pf__signature_check("pf_function_create_typed", sig) != 0)
    return -1;
  size_t size = sizeof(pf__typed_t) +
                (sizeof(pf_param_t) + sizeof(uint64_t)) * (size_t)sig->num_params +
                strlen(sig->name) + 1;
  for (int32_t i = 0; i < sig->num_params; ++i)
    size += strlen(sig->params[i].name) + 1;
  pf__typed_t* t = malloc(size);
  if (!t)
    return pf__raise_oom("pf_function_create_typed", size);
  t->impl = impl;
  t->self = self;
  t->deleter = deleter;
  t->num_params = sig->num_params;
  uint64_t* same = (uint64_t*)&t->params[sig->num_params];
  t->same = same;
  char* text = (char*)&same[sig->num_params];
  for (int32_t i = 0; i < sig->num_params; ++i) {
    size_t n = strlen(sig->params[i].name) + 1;
    memcpy(text, sig->params[i].name, n);
    t->params[i].name = text;
    t->params[i].kind = sig->params[i].kind;
    same[i] = pf__same_payload(sig->params[i].kind);
    text += n;
  }
  memcpy(text, sig->name, strlen(sig->name) + 1);
  t->name = text;
  size_t text_size;
  char* signature = pf__signature_text(t->name, t->num_params, t->params, sig->result, &text_size);
  char* doc = sig->doc ? pf__strdup(sig->doc) : NULL;
  int plain = 1;
  for (int32_t i = 0; i < t->num_params; ++i)
    plain &= same[i] != 0;
  pf__function_t* f = pf__function_new(plain ? pf__typed_entry_plain : pf__typed_entry,
                                       PF__FN_CLOSURE, t, NULL, pf__typed_deleter);
  if (!signature || (sig->doc && !doc) || !f) {
    size_t failed =
        pf__texts_failed(signature, text_size, sig->doc, doc, pf__function_size(PF__FN_CLOSURE));
    free(signature);
    free(doc);
    pf__free(f);
    free(t);
    return pf__raise_oom("pf_function_create_typed", failed);
  }
  *out = &f->header;
  if (pf__function_put_texts(*out, signature, doc) != 0) {
    t->deleter = NULL;       /* a failed create does not call the caller's deleter */
    pf_object_release(*out); /* frees t through pf__typed_deleter */
    *out = NULL;
    return pf__raise_oom("pf_function_create_typed", sizeof(pf__fn_ext_t));
  }
  return 0;
}

/* pf_function_create_static with the name its errors give: its own, or PF_TYPED_CREATE for
 * that macro's entry. Inlined into both, so the name is a constant and costs nothing. */
static inline __attribute__((always_inline)) int pf__create_static(const char* func,
                                                                   const pf_signature_t* sig,
                                                                   pf_safe_call_t packed,
                                                                   pf_object_t** out) {
  if (out)
    *out = NULL; /* as every constructor's output on failure */
  if (!sig || !sig->name || !packed || !out)
    return PF__NULL_ARG(func, !out ? "out" : !packed ? "packed" : !sig ? "sig" : "sig->name");
  if (pf__signature_check(func, sig) != 0)
    return -1;
  size_t text_size;
  char* signature =
      pf__signature_text(sig->name, sig->num_params, sig->params, sig->result, &text_size);
  char* doc = sig->doc ? pf__strdup(sig->doc) : NULL;
  pf__function_t* f = pf__function_new(packed, PF__FN_LINE, NULL, packed, NULL);
  if (!signature || (sig->doc && !doc) || !f) {
    size_t failed = pf__texts_failed(signature, text_size, sig->doc, doc, PF__FN_LINE_BYTES);
    free(signature);
    free(doc);
    pf__free(f);
    return pf__raise_oom(func, failed);
  }
  *out = &f->header;
  if (pf__function_put_texts(*out, signature, doc) != 0) {
    pf_object_release(*out);
    *out = NULL;
    return pf__raise_oom(func, sizeof(pf__fn_ext_t));
  }
  return 0;
}

int pf_function_create_static(const pf_signature_t* sig, pf_safe_call_t packed, pf_object_t** out) {
  return pf__create_static("pf_function_create_static", sig, packed, out);
}

int pf__typed_create(const pf_signature_t* sig, pf_safe_call_t packed, pf_object_t** out) {
  return pf__create_static("PF_TYPED_CREATE", sig, packed, out);
}

/* ---- what a function's code depends on (for unloading) ---- */

/* A function pointer as an address, for dladdr; POSIX guarantees the conversion. */
#define PF__CODE_ADDR(fp, out)                                                                     \
  do {                                                                                             \
    const void* addr_ = NULL;                                                                      \
    memcpy(&addr_, &(fp), sizeof addr_);                                                           \
    (out) = addr_;                                                                                 \
  } while (0)

size_t pf__function_code(const pf_object_t* fn, const void** addrs) {
  size_t n = 0;
  if (!fn || fn->type_index != PF_TYPE_FUNCTION)
    return 0;
  const pf_function_cell_t* cell = (const pf_function_cell_t*)(fn + 1);
  PF__CODE_ADDR(fn->deleter, addrs[n++]);
  PF__CODE_ADDR(cell->safe_call, addrs[n++]);
  if (!pf__function_is_ours(fn))
    return n;
  const pf__function_t* f = (const pf__function_t*)fn;
  PF__CODE_ADDR(f->call, addrs[n++]);
  if (!pf__function_is_closure(fn))
    return n;
  const pf__closure_t* k = (const pf__closure_t*)fn;
  PF__CODE_ADDR(k->deleter, addrs[n++]);
  addrs[n++] = k->self;
  if (k->deleter == pf__typed_deleter) {
    const pf__typed_t* t = (const pf__typed_t*)k->self;
    PF__CODE_ADDR(t->impl, addrs[n++]);
    PF__CODE_ADDR(t->deleter, addrs[n++]);
    addrs[n++] = t->self;
  }
  return n;
}
