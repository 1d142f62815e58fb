/* xla/packfn_xla.c: XLA FFI handlers calling packfn functions (see packfn_xla.h). C only: the
 * XLA side is xla/ffi/api/c_api.h, nothing of XLA's C++ ffi.h. */
#define _POSIX_C_SOURCE 200809L /* pthread_atfork */
#include "packfn_xla.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"

/* ---- bound functions ---- */

enum { P_TENSOR, P_INT, P_FLOAT, P_BOOL };

typedef struct {
  uint8_t kind;
  size_t name_len;
  const char* name; /* NUL-terminated, in the plan's own block (the function's signature text
                       can be replaced by pf_function_set_info, which frees the old one) */
} xparam_t;

typedef struct {
  pf_object_t* fn; /* strong reference, held until the process ends */
  char* name;      /* the global name, NUL-terminated */
  size_t name_len;
  char* sig;     /* the signature text the plan was parsed from, a copy in the plan's block (the
                    function's own may be replaced by pf_function_set_info, which frees it) */
  int64_t older; /* the slot bound for the same name before this one, or -1: each name's
                    slots form a chain, newest first, written before the slot is published
                    and never changed, so readers walk it without a lock */
  _Atomic int64_t gen; /* what a call's packfn_slot holds: how many of the name's slots were
                          given a generation before this one, or -1 until pf_xla_bind gives it
                          one. Given by pf_xla_bind only (the handler's binds by name give none),
                          so the numbers are the same in every process that registers the
                          name's functions in the same order, and a generation a call carries
                          from another process is never given to a slot the handler bound to
                          follow the global (it would then stop following it: review) */
  int32_t num_params, num_tensors;
  xparam_t params[]; /* num_params */
} plan_t;

/* Slots live in chunks that never move: chunk c holds 64 << c slots, starting at slot
 * 64 * (2^c - 1). Readers take a slot without a lock; writers append under `bind_lock` and
 * publish the new count with release order. */
#define CHUNKS 40
static plan_t** _Atomic chunks[CHUNKS];
static _Atomic int64_t num_slots;
static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork(): bind_lock is taken around it, so that a child forked while another thread was binding
 * can bind. Registered after libpackfn's handlers (this library loads after it), so the prepare
 * handler runs first and bind_lock is taken before packfn's locks, the order a bind nests them;
 * glibc drops the handlers if this library is unloaded. */
static void bind_fork_lock(void) {
  pthread_mutex_lock(&bind_lock);
}
static void bind_fork_unlock(void) {
  pthread_mutex_unlock(&bind_lock);
}
__attribute__((constructor)) static void bind_fork_register(void) {
  (void)pthread_atfork(bind_fork_lock, bind_fork_unlock, bind_fork_unlock);
}

static int chunk_of(int64_t slot, int64_t* index) {
  uint64_t q = (uint64_t)slot / 64 + 1;
  int c = 63 - __builtin_clzll(q);
  *index = slot - 64 * (((int64_t)1 << c) - 1);
  return c;
}

static plan_t* slot_get(int64_t slot) {
  if (slot < 0 || slot >= atomic_load_explicit(&num_slots, memory_order_acquire))
    return NULL;
  int64_t i;
  int c = chunk_of(slot, &i);
  return atomic_load_explicit(&chunks[c], memory_order_acquire)[i];
}

static int plan_named(const plan_t* plan, const char* name, size_t len) {
  return plan->name_len == len && memcmp(plan->name, name, len) == 0;
}

/* A length for "%.*s". */
static int text_len(size_t len) {
  return len > INT_MAX ? INT_MAX : (int)len;
}

/* ---- name index: global name -> the latest slot bound for it (the head of its chain) ----
 * Open addressing with linear probing over a power-of-two table kept at most half full, so a
 * probe always meets an empty entry. Readers probe without a lock (a call whose packfn_slot is
 * stale finds its function here); writers, under bind_lock, fill an empty entry or replace the
 * slot of an entry with a newer one for the same name (names are never removed), and grow by
 * publishing a copy twice the size. The replaced table stays allocated, linked from its
 * successor, because readers may still be probing it (what they find there is an older slot
 * of the right name, which the bind then checks against the global table). */
typedef struct names {
  struct names* prev;      /* the table this one replaced */
  size_t mask;             /* capacity - 1 */
  _Atomic int64_t slot1[]; /* slot + 1 of each entry; 0 when empty */
} names_t;

enum { NAMES_MIN = 64 }; /* first capacity: the functions a program typically binds */

static names_t* _Atomic names;
static size_t names_used; /* entries in use; under bind_lock */

static uint64_t name_hash(const char* name, size_t len) { /* FNV-1a */
  uint64_t h = 14695981039346656037u;
  for (size_t i = 0; i < len; ++i)
    h = (h ^ (unsigned char)name[i]) * 1099511628211u;
  return h;
}

/* The entry of t holding `name`, or the empty entry where it would go; *slot receives the slot
 * it holds (-1 when empty). A slot found in an entry is published (its plan was appended
 * before the entry was written, with release order both times). */
static size_t names_probe(names_t* t, const char* name, size_t len, int64_t* slot) {
  for (size_t i = (size_t)name_hash(name, len) & t->mask;; i = (i + 1) & t->mask) {
    int64_t s1 = atomic_load_explicit(&t->slot1[i], memory_order_acquire);
    if (s1 == 0 || plan_named(slot_get(s1 - 1), name, len)) {
      *slot = s1 - 1;
      return i;
    }
  }
}

/* The latest slot bound for `name`, or -1. Lock-free. */
static int64_t names_find(const char* name, size_t len) {
  names_t* t = atomic_load_explicit(&names, memory_order_acquire);
  int64_t slot = -1;
  if (t)
    names_probe(t, name, len, &slot);
  return slot;
}

/* The slot bound to the pair (`name`, fn), or -1: the name's chain walked from its latest
 * slot, one step per function bound under the name after fn (a name rarely holds more than a
 * few). Lock-free; the answer can only be -1 wrongly for a pair bound meanwhile by another
 * thread, which a caller holding bind_lock rules out. */
static int64_t pair_find(const char* name, size_t len, const pf_object_t* fn) {
  int64_t slot = names_find(name, len);
  while (slot >= 0 && slot_get(slot)->fn != fn)
    slot = slot_get(slot)->older;
  return slot;
}

/* Makes room for one more name. -1 when out of memory (nothing changed). Under bind_lock. */
static int names_reserve(void) {
  names_t* old = atomic_load_explicit(&names, memory_order_relaxed);
  if (old && 2 * (names_used + 1) <= old->mask + 1)
    return 0;
  size_t cap = old ? 2 * (old->mask + 1) : NAMES_MIN;
  names_t* t = calloc(1, sizeof *t + cap * sizeof t->slot1[0]);
  if (!t)
    return -1;
  t->prev = old;
  t->mask = cap - 1;
  for (size_t i = 0; old && i <= old->mask; ++i) {
    int64_t s1 = atomic_load_explicit(&old->slot1[i], memory_order_relaxed), unused;
    if (s1 == 0)
      continue;
    const plan_t* plan = slot_get(s1 - 1);
    size_t j = names_probe(t, plan->name, plan->name_len, &unused);
    atomic_store_explicit(&t->slot1[j], s1, memory_order_relaxed);
  }
  atomic_store_explicit(&names, t, memory_order_release);
  return 0;
}

/* Points `name` (the name of the plan in `slot`) at `slot`. Under bind_lock, after
 * names_reserve. */
static void names_put(int64_t slot) {
  const plan_t* plan = slot_get(slot);
  names_t* t = atomic_load_explicit(&names, memory_order_relaxed);
  int64_t old;
  size_t i = names_probe(t, plan->name, plan->name_len, &old);
  names_used += old < 0;
  atomic_store_explicit(&t->slot1[i], slot + 1, memory_order_release);
}

/* ---- signatures ---- */

static int param_kind(const char* type, size_t len) {
  static const struct {
    const char* text;
    int kind;
  } kinds[] = {{"Tensor", P_TENSOR},
               {"tensor", P_TENSOR},
               {"int", P_INT},
               {"float", P_FLOAT},
               {"bool", P_BOOL}};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i)
    if (strlen(kinds[i].text) == len && memcmp(kinds[i].text, type, len) == 0)
      return kinds[i].kind;
  return -1;
}

/* ASCII whitespace, as packfn.jax strips it: a signature may be written over several lines */
static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static const char* skip_space(const char* s, const char* end) {
  while (s < end && is_space(*s))
    ++s;
  return s;
}

static const char* trim_space(const char* s, const char* end) {
  while (end > s && is_space(end[-1]))
    --end;
  return end;
}

/* The ')' that closes the '(' at `open` (nested parentheses counted), or NULL: the parameter
 * list ends there, whatever the result annotation after it holds ("-> Tuple(int, int)"). */
static const char* close_of(const char* open) {
  int depth = 0;
  for (const char* p = open; *p; ++p)
    if (*p == '(')
      ++depth;
    else if (*p == ')' && --depth == 0)
      return p;
  return NULL;
}

/* The ',' ending the parameter that starts at p (the first at bracket depth 0), or end. */
static const char* param_end(const char* p, const char* end) {
  int depth = 0;
  for (; p < end; ++p)
    if (*p == '(' || *p == '[' || *p == '{')
      ++depth;
    else if (*p == ')' || *p == ']' || *p == '}')
      --depth;
    else if (*p == ',' && depth == 0)
      return p;
  return end;
}

/* The first `c` in [p, end), or NULL. */
static const char* find_char(const char* p, const char* end, char c) {
  for (; p < end; ++p)
    if (*p == c)
      return p;
  return NULL;
}

/* Names of the attributes every call carries: a parameter named so could never be given. */
static int reserved_name(const char* name, size_t len) {
  return (len == 11 && memcmp(name, "packfn_name", 11) == 0) ||
         (len == 11 && memcmp(name, "packfn_slot", 11) == 0);
}

/* Parses "name(a: Tensor, b: float) -> None", the signature of the global `name` (len bytes),
 * into a new plan (fn not yet set). NULL with TypeError or MemoryError raised. */
static plan_t* plan_parse(const char* name, size_t len, const char* sig) {
  const char* open = strchr(sig, '(');
  const char* close = open ? close_of(open) : NULL;
  if (!close) {
    pf_error_set(PF_ERR_TYPE, "%.*s: signature '%s' has no parameter list", text_len(len), name,
                 sig);
    return NULL;
  }
  int32_t n = 0;
  /* a trailing comma, with or without space after it, ends the list (as packfn.jax reads it) */
  for (const char* p = skip_space(open + 1, close); p < close;
       p = skip_space(param_end(p, close) + 1, close))
    ++n;
  /* the block holds the plan, the global name, the parameter names and the signature, each
   * with its NUL: the parameter names with theirs take at most the parameter list's length
   * plus one */
  size_t list_len = (size_t)(close - open), sig_len = strlen(sig);
  plan_t* plan =
      calloc(1, sizeof *plan + (size_t)n * sizeof(xparam_t) + len + 1 + list_len + sig_len + 1);
  if (!plan) {
    pf_error_set(PF_ERR_MEMORY, "binding %.*s", text_len(len), name);
    return NULL;
  }
  plan->name = (char*)(plan->params + n);
  memcpy(plan->name, name, len);
  plan->name_len = len;
  plan->sig = plan->name + len + 1;
  memcpy(plan->sig, sig, sig_len);
  char* names_at = plan->sig + sig_len + 1;
  const char* p = open + 1;
  for (int32_t i = 0; i < n; ++i) {
    const char* end = param_end(p, close);
    const char* colon = find_char(p, end, ':');
    const char* pname = skip_space(p, end);
    const char* pname_end = trim_space(pname, colon ? colon : end);
    const char* type = colon ? skip_space(colon + 1, end) : end;
    int kind = param_kind(type, (size_t)(trim_space(type, end) - type));
    size_t plen = (size_t)(pname_end - pname);
    if (kind < 0 || plen == 0) {
      pf_error_set(PF_ERR_TYPE,
                   "%.*s: parameter %d '%.*s' cannot come from XLA (tensors, int, float and bool "
                   "parameters can)",
                   text_len(len), name, (int)i,
                   (int)(trim_space(skip_space(p, end), end) - skip_space(p, end)),
                   skip_space(p, end));
      free(plan);
      return NULL;
    }
    if (reserved_name(pname, plen)) {
      pf_error_set(PF_ERR_TYPE,
                   "%.*s: parameter %d is named '%.*s', an attribute the adapter gives every call "
                   "itself (packfn_name, packfn_slot): rename the parameter",
                   text_len(len), name, (int)i, (int)plen, pname);
      free(plan);
      return NULL;
    }
    for (int32_t k = 0; k < i && kind != P_TENSOR; ++k)
      if (plan->params[k].kind != P_TENSOR && plan->params[k].name_len == plen &&
          memcmp(plan->params[k].name, pname, plen) == 0) {
        /* a call's attributes are named once: no call could give both (found by review) */
        pf_error_set(PF_ERR_TYPE,
                     "%.*s: parameters %d and %d are both named '%.*s': scalar parameters come "
                     "from attributes named after them, so their names must differ",
                     text_len(len), name, (int)k, (int)i, (int)plen, pname);
        free(plan);
        return NULL;
      }
    plan->params[i].kind = (uint8_t)kind;
    plan->params[i].name = names_at;
    plan->params[i].name_len = plen;
    memcpy(names_at, pname, plen);
    names_at += plen + 1; /* calloc wrote the NUL */
    plan->num_tensors += kind == P_TENSOR;
    p = end + 1;
  }
  plan->num_params = n;
  return plan;
}

/* ---- binding ---- */

/* Raises KeyError for the missing global `name` (len bytes), with the nearest name, whole. */
static void raise_no_function(const char* name, size_t len) {
  /* a suggestion is a few edits from the name, or a dotted name ending in it, which may be far
   * longer: the room doubles until it fits (it was len + 256, and a longer name was cut into
   * one no global has: review) */
  char* text = NULL;
  int found = 0;
  for (size_t near_size = len + 256;; near_size *= 2) {
    free(text);
    text = near_size <= SIZE_MAX / 2 - len ? malloc(len + 1 + near_size) : NULL;
    if (!text) {
      found = 0; /* out of memory: no suggestion rather than a cut one */
      break;
    }
    memcpy(text, name, len);
    text[len] = '\0';
    found = pf_global_suggest(text, text + len + 1, near_size);
    if (found != 1 || strlen(text + len + 1) + 1 < near_size)
      break;
  }
  if (found < 0)
    pf_error_clear(); /* no suggestion then, and no unrelated cause for the KeyError */
  if (found == 1)
    pf_error_set(PF_ERR_KEY, "no global function '%.*s' (did you mean '%s'?)", text_len(len), name,
                 text + len + 1);
  else
    pf_error_set(PF_ERR_KEY, "no global function '%.*s'", text_len(len), name);
  free(text);
}

/* Binds `fn` (a new reference, taken by the slot on success), the global `name`, to a new slot
 * that becomes the name's latest, chained to the one it replaces. -1 with the error raised (fn
 * then released). Under bind_lock, after pair_find found no slot for the pair. */
static int64_t bind_new_locked(const char* name, size_t len, pf_object_t* fn) {
  const char* sig = pf_function_signature(fn);
  plan_t* plan = NULL;
  if (!sig)
    pf_error_set(PF_ERR_TYPE,
                 "%.*s has no signature: XLA cannot tell its tensor and scalar parameters",
                 text_len(len), name);
  else
    plan = plan_parse(name, len, sig);
  if (!plan) {
    pf_object_release(fn);
    return -1;
  }
  plan->fn = fn;
  plan->older = names_find(name, len);
  atomic_init(&plan->gen, -1);
  int64_t slot = atomic_load_explicit(&num_slots, memory_order_relaxed), i;
  int c = chunk_of(slot, &i);
  plan_t** chunk = atomic_load_explicit(&chunks[c], memory_order_relaxed);
  if (!chunk) {
    chunk = calloc((size_t)64 << c, sizeof *chunk);
    if (chunk)
      atomic_store_explicit(&chunks[c], chunk, memory_order_release);
  }
  if (!chunk || names_reserve() != 0) {
    pf_error_set(PF_ERR_MEMORY, "binding %.*s", text_len(len), name);
    pf_object_release(fn);
    free(plan);
    return -1;
  }
  chunk[i] = plan;
  atomic_store_explicit(&num_slots, slot + 1, memory_order_release);
  names_put(slot);
  return slot;
}

/* The slot of the global function `name` (len bytes, no NUL needed) as the global table holds
 * it now: the slot already bound to that name and function object, else a new one (the name
 * never held this function when bound before). So a global switched back and forth between
 * functions reuses their slots: the slots bound for a name are its distinct functions (found
 * by review: a new slot per switch grew without limit). -1 with the error raised: ValueError
 * (empty name), KeyError (no such global), TypeError (no usable signature), MemoryError.
 * Takes bind_lock only to bind. */
static int64_t bind_bytes(const char* name, size_t len) {
  if (len == 0) {
    pf_error_set(PF_ERR_VALUE, "packfn_xla: expected a function name, got ''");
    return -1;
  }
  pf_object_t* fn;
  if (pf_global_get_bytes(name, len, &fn) != 0)
    return -1;
  if (!fn) {
    raise_no_function(name, len);
    return -1;
  }
  int64_t slot = pair_find(name, len, fn);
  if (PF_LIKELY(slot >= 0)) {
    pf_object_release(fn);
    return slot;
  }
  pthread_mutex_lock(&bind_lock);
  slot = pair_find(name, len, fn); /* another thread may have bound it meanwhile */
  if (slot >= 0)
    pf_object_release(fn);
  else
    slot = bind_new_locked(name, len, fn);
  pthread_mutex_unlock(&bind_lock);
  return slot;
}

/* Gives `slot` a generation if it has none: one more than the largest its name's slots have. */
static void give_generation(int64_t slot) {
  plan_t* plan = slot_get(slot);
  if (atomic_load_explicit(&plan->gen, memory_order_acquire) >= 0)
    return;
  pthread_mutex_lock(&bind_lock);
  if (atomic_load_explicit(&plan->gen, memory_order_relaxed) < 0) {
    int64_t next = 0;
    for (int64_t at = names_find(plan->name, plan->name_len); at >= 0; at = slot_get(at)->older) {
      int64_t g = atomic_load_explicit(&slot_get(at)->gen, memory_order_relaxed);
      if (g >= next)
        next = g + 1;
    }
    atomic_store_explicit(&plan->gen, next, memory_order_release);
  }
  pthread_mutex_unlock(&bind_lock);
}

/* An error pending on the thread when pf_xla_bind starts (C code that raised and then ran the
 * Python registering a function) is set aside during the bind and put back after, as around a
 * call: a failing bind raised its own error over it (the pending one became its cause) and took
 * both away, so the C code's failure was then reported as one without an error (review). */
int64_t pf_xla_bind(const char* name, char* err, size_t err_size) {
  if (err && err_size > 0)
    err[0] = '\0';
  pf_object_t* aside = pf_error_take();
  int64_t slot = bind_bytes(name ? name : "", name ? strlen(name) : 0);
  if (slot >= 0) {
    give_generation(slot);
  } else {
    pf_object_t* e = pf_error_take();
    if (err && err_size > 0) {
      size_t n = (size_t)snprintf(err, err_size, "%s: %s", e ? pf_error_kind(e) : PF_ERR_RUNTIME,
                                  e ? pf_error_message(e) : "binding failed");
      if (n >= err_size && err_size >= 4) /* cut: say so */
        memcpy(err + err_size - 4, "...", 4);
    }
    pf_object_release(e);
  }
  if (PF_UNLIKELY(aside != NULL)) {
    (void)pf_error_raise(aside); /* the slot is empty: it is put back unchanged */
    pf_object_release(aside);
  }
  return slot;
}

int64_t pf_xla_generation(int64_t slot) {
  plan_t* plan = slot_get(slot);
  return plan ? atomic_load_explicit(&plan->gen, memory_order_acquire) : -1;
}

int32_t pf_xla_num_tensors(int64_t slot) {
  plan_t* plan = slot_get(slot);
  return plan ? plan->num_tensors : -1;
}

const char* pf_xla_signature(int64_t slot) {
  plan_t* plan = slot_get(slot);
  return plan ? plan->sig : NULL;
}
/* ---- XLA side ---- */

/* The length of the UTF-8 character starting at s (n > 0 bytes there), or 0 when s[0] starts
 * none: what Python's strict decoder accepts (RFC 3629: no overlong forms, no surrogates, no
 * code point past U+10FFFF). */
static size_t utf8_char(const unsigned char* s, size_t n) {
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xC2 && s[0] <= 0xDF) {
    len = 2;
  } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
    len = 3;
    lo = s[0] == 0xE0 ? 0xA0 : lo; /* overlong below */
    hi = s[0] == 0xED ? 0x9F : hi; /* surrogates above */
  } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
    len = 4;
    lo = s[0] == 0xF0 ? 0x90 : lo; /* overlong below */
    hi = s[0] == 0xF4 ? 0x8F : hi; /* past U+10FFFF above */
  } else {
    return 0;
  }
  if (n < len || s[1] < lo || s[1] > hi)
    return 0;
  for (size_t i = 2; i < len; ++i)
    if ((s[i] & 0xC0) != 0x80)
      return 0;
  return len;
}

/* Writes the n bytes at `in` to `out` (NULL: counts only) as valid UTF-8, each byte that starts
 * no character as the 4 characters "\xNN", and stops before the first character or escape that
 * would take it past `limit` bytes, so that a cut falls between characters. Returns the bytes
 * written; no NUL. */
static size_t utf8_copy(const char* in, size_t n, char* out, size_t limit) {
  static const char hex[] = "0123456789abcdef";
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)in[i];
    size_t len = utf8_char((const unsigned char*)in + i, n - i);
    if (w + (len ? len : 4) > limit)
      break;
    if (out && len) {
      memcpy(out + w, in + i, len);
    } else if (out) {
      out[w] = '\\';
      out[w + 1] = 'x';
      out[w + 2] = hex[c >> 4];
      out[w + 3] = hex[c & 15];
    }
    w += len ? len : 4;
    i += len ? len : 1;
  }
  return w;
}

static XLA_FFI_Error* xla_error(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const char* fmt,
                                ...) __attribute__((format(printf, 3, 4)));

/* An XLA error (XLA copies the message) with the formatted message, whole however long (a
 * kernel's goes through the heap), made valid UTF-8: Python decodes it strictly, and a kernel's
 * message may hold any bytes. Out of memory, the message is cut between characters and ends
 * in "...". */
static XLA_FFI_Error* xla_error(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const char* fmt,
                                ...) {
  char stack[512], cut[512];
  char* text = stack;
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  int n = vsnprintf(stack, sizeof stack, fmt, ap);
  va_end(ap);
  if (n < 0)
    stack[0] = '\0';
  size_t len = n > 0 ? (size_t)n : 0;
  int whole = 1; /* text holds the whole message */
  if (len >= sizeof stack) {
    text = malloc(len + 1);
    if (text) {
      vsnprintf(text, len + 1, fmt, again);
    } else {
      text = stack; /* the first 511 bytes, cut below */
      len = sizeof stack - 1;
      whole = 0;
    }
  }
  va_end(again);
  char* msg = text;
  size_t clean = utf8_copy(text, len, NULL, SIZE_MAX);
  if (whole && clean != len) { /* bytes to escape */
    msg = clean < sizeof cut ? cut : malloc(clean + 1);
    if (msg)
      msg[utf8_copy(text, len, msg, clean)] = '\0';
  }
  /* out of memory: cut to at most 508 bytes and "...". A character split at byte 511 (where
   * vsnprintf cut) starts at byte 508 or later, so it is dropped, not escaped. */
  if (!whole || !msg) {
    msg = cut;
    memcpy(cut + utf8_copy(text, len, cut, sizeof cut - 4), "...", 4);
  }
  XLA_FFI_Error_Create_Args args = {.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE,
                                    .extension_start = NULL,
                                    .message = msg,
                                    .errc = code};
  XLA_FFI_Error* out = api->XLA_FFI_Error_Create(&args);
  if (msg != text && msg != cut)
    free(msg);
  if (text != stack)
    free(text);
  return out;
}

/* The XLA code for a packfn error kind (docs/jax.md, "Errors"). */
static XLA_FFI_Error_Code code_of(const char* kind) {
  if (!strcmp(kind, PF_ERR_TYPE) || !strcmp(kind, PF_ERR_VALUE))
    return XLA_FFI_Error_Code_INVALID_ARGUMENT;
  if (!strcmp(kind, PF_ERR_NOT_IMPLEMENTED))
    return XLA_FFI_Error_Code_UNIMPLEMENTED;
  if (!strcmp(kind, PF_ERR_MEMORY))
    return XLA_FFI_Error_Code_RESOURCE_EXHAUSTED;
  if (!strcmp(kind, PF_ERR_KEY))
    return XLA_FFI_Error_Code_NOT_FOUND;
  return XLA_FFI_Error_Code_INTERNAL;
}

/* The raised packfn error as an XLA error, "<kind>: <message>" with its code; the thread's
 * error slot is empty after. Callers raise one first (pf_error_ensure after a call). */
static XLA_FFI_Error* xla_error_from_packfn(const XLA_FFI_Api* api) {
  pf_object_t* e = pf_error_take();
  const char* kind = e ? pf_error_kind(e) : PF_ERR_RUNTIME;
  const char* msg = e ? pf_error_message(e) : "packfn_xla: failed without raising an error";
  XLA_FFI_Error* out = xla_error(api, code_of(kind), "%s: %s", kind, msg);
  pf_object_release(e);
  return out;
}

/* Answers XLA's metadata query: the API version this file was compiled against. */
static XLA_FFI_Error* metadata(XLA_FFI_CallFrame* frame) {
  XLA_FFI_Metadata_Extension* ext = (XLA_FFI_Metadata_Extension*)frame->extension_start;
  if (ext->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE ||
      ext->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE)
    return xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     "packfn_xla: metadata structs smaller than the header's");
  ext->metadata->api_version = (XLA_FFI_Api_Version){
      .struct_size = XLA_FFI_Api_Version_STRUCT_SIZE,
      .extension_start = NULL,
      .major_version = XLA_FFI_API_MAJOR,
      .minor_version = XLA_FFI_API_MINOR,
  };
  ext->metadata->traits = 0;
  ext->metadata->state_type_id = (XLA_FFI_TypeId){0};
  return NULL;
}

/* XLA's numbers of its one-byte float8 types (those of its PrimitiveType, stable across
 * versions; older c_api.h headers do not name them all). Sub-byte types (S4, U4, F4E2M1FN, ...)
 * are left out: they are not passed to kernels. */
enum {
  XLA_F8E5M2 = 19,
  XLA_F8E4M3FN = 20,
  XLA_F8E4M3B11FNUZ = 23,
  XLA_F8E5M2FNUZ = 24,
  XLA_F8E4M3FNUZ = 25,
  XLA_F8E4M3 = 28,
  XLA_F8E3M4 = 29,
  XLA_F8E8M0FNU = 33,
};

static int dtype_of(XLA_FFI_DataType t, DLDataType* out) {
  static const struct {
    int xla;
    uint8_t code, bits;
  } map[] = {
      {XLA_FFI_DataType_F32, PF_DL_FLOAT, 32},     {XLA_FFI_DataType_F64, PF_DL_FLOAT, 64},
      {XLA_FFI_DataType_F16, PF_DL_FLOAT, 16},     {XLA_FFI_DataType_BF16, PF_DL_BFLOAT, 16},
      {XLA_FFI_DataType_S8, PF_DL_INT, 8},         {XLA_FFI_DataType_S16, PF_DL_INT, 16},
      {XLA_FFI_DataType_S32, PF_DL_INT, 32},       {XLA_FFI_DataType_S64, PF_DL_INT, 64},
      {XLA_FFI_DataType_U8, PF_DL_UINT, 8},        {XLA_FFI_DataType_U16, PF_DL_UINT, 16},
      {XLA_FFI_DataType_U32, PF_DL_UINT, 32},      {XLA_FFI_DataType_U64, PF_DL_UINT, 64},
      {XLA_FFI_DataType_PRED, PF_DL_BOOL, 8},      {XLA_FFI_DataType_C64, PF_DL_COMPLEX, 64},
      {XLA_FFI_DataType_C128, PF_DL_COMPLEX, 128}, {XLA_F8E5M2, PF_DL_FLOAT8_E5M2, 8},
      {XLA_F8E4M3FN, PF_DL_FLOAT8_E4M3FN, 8},      {XLA_F8E4M3B11FNUZ, PF_DL_FLOAT8_E4M3B11FNUZ, 8},
      {XLA_F8E5M2FNUZ, PF_DL_FLOAT8_E5M2FNUZ, 8},  {XLA_F8E4M3FNUZ, PF_DL_FLOAT8_E4M3FNUZ, 8},
      {XLA_F8E4M3, PF_DL_FLOAT8_E4M3, 8},          {XLA_F8E3M4, PF_DL_FLOAT8_E3M4, 8},
      {XLA_F8E8M0FNU, PF_DL_FLOAT8_E8M0FNU, 8},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; ++i)
    if (map[i].xla == (int)t) {
      *out = (DLDataType){.code = map[i].code, .bits = map[i].bits, .lanes = 1};
      return 0;
    }
  return -1;
}

/* The scalar attribute as a packfn value of the parameter's kind: 0; -1 when its type does not
 * fit; -2 for an unsigned 64-bit value past INT64_MAX given to an int parameter. Integers of
 * every width are ints (jax.ffi.ffi_call sends an np.int8 or np.uint32 with its own width: they
 * were refused as no int, all but the 32-bit signed and the 8-bit unsigned: review). */
static int scalar_of(const XLA_FFI_Scalar* s, int kind, pf_any_t* out) {
  double f = 0;
  int64_t i = 0; /* floats never become ints (below): no float-to-int conversion, which is
                    undefined for NaN or out-of-range values */
  int is_float = 0, fits = 1;
  switch (s->dtype) {
  case XLA_FFI_DataType_F64:
    f = *(const double*)s->value;
    is_float = 1;
    break;
  case XLA_FFI_DataType_F32:
    f = *(const float*)s->value;
    is_float = 1;
    break;
  case XLA_FFI_DataType_S64:
    i = *(const int64_t*)s->value;
    break;
  case XLA_FFI_DataType_S32:
    i = *(const int32_t*)s->value;
    break;
  case XLA_FFI_DataType_S16:
    i = *(const int16_t*)s->value;
    break;
  case XLA_FFI_DataType_S8:
    i = *(const int8_t*)s->value;
    break;
  case XLA_FFI_DataType_PRED:
  case XLA_FFI_DataType_U8:
    i = *(const uint8_t*)s->value;
    break;
  case XLA_FFI_DataType_U16:
    i = *(const uint16_t*)s->value;
    break;
  case XLA_FFI_DataType_U32:
    i = *(const uint32_t*)s->value;
    break;
  case XLA_FFI_DataType_U64: {
    uint64_t u = *(const uint64_t*)s->value;
    fits = u <= (uint64_t)INT64_MAX;
    i = fits ? (int64_t)u : 0;
    f = (double)u;
    break;
  }
  default:
    return -1;
  }
  if (!is_float && fits)
    f = (double)i;
  if (s->dtype == XLA_FFI_DataType_PRED && kind != P_BOOL)
    return -1; /* a bool is not a number here, as packfn's int and float parameters say */
  if (kind == P_FLOAT)
    *out = pf_any_float(f);
  else if (kind == P_INT && !is_float && !fits)
    return -2;
  else if (kind == P_INT && !is_float)
    *out = pf_any_int(i);
  else if (kind == P_BOOL && s->dtype == XLA_FFI_DataType_PRED)
    *out = pf_any_bool(i != 0);
  else
    return -1;
  return 0;
}

static const char* kind_name(int kind) {
  return kind == P_TENSOR ? "Tensor" : kind == P_INT ? "int" : kind == P_FLOAT ? "float" : "bool";
}

static int span_is(const XLA_FFI_ByteSpan* s, const char* text, size_t len) {
  return s->len == len && memcmp(s->ptr, text, len) == 0;
}

/* The plans calls found last, by the address of their name's text (XLA keeps an executable's
 * attributes in place while it lives, so a call site finds its entry again): a hit whose name
 * and generation match spares hashing the name (about 30 ns a call). Plans are never freed, so
 * an entry another call site overwrote, or one from a freed executable, is only a miss. */
enum { CALL_CACHE = 256 };
static plan_t* _Atomic call_cache[CALL_CACHE];

static size_t call_cache_index(const void* text) {
  uintptr_t p = (uintptr_t)text;
  return (size_t)((p >> 4 ^ p >> 12) & (CALL_CACHE - 1));
}

/* The plan named by the attributes packfn_name and packfn_slot; *own receives how many of the
 * call's attributes are those two (1 or 2). */
static XLA_FFI_Error* plan_of(XLA_FFI_CallFrame* frame, plan_t** out, int64_t* own) {
  const XLA_FFI_Attrs* attrs = &frame->attrs;
  const XLA_FFI_ByteSpan* name = NULL;
  int64_t slot = -1;
  *own = 0;
  for (int64_t a = 0; a < attrs->size; ++a) {
    if (span_is(attrs->names[a], "packfn_name", 11) && attrs->types[a] == XLA_FFI_AttrType_STRING) {
      name = attrs->attrs[a];
      ++*own;
    } else if (span_is(attrs->names[a], "packfn_slot", 11)) {
      if (attrs->types[a] != XLA_FFI_AttrType_SCALAR ||
          ((const XLA_FFI_Scalar*)attrs->attrs[a])->dtype != XLA_FFI_DataType_S64)
        return xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "packfn_xla: the attribute packfn_slot is not an int64 scalar");
      slot = *(const int64_t*)((const XLA_FFI_Scalar*)attrs->attrs[a])->value;
      ++*own;
    }
  }
  if (!name)
    return xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     "packfn_xla: the custom call has no string attribute packfn_name naming "
                     "the packfn function");
  if (memchr(name->ptr, '\0', name->len) != NULL)
    return xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     "packfn_xla: the attribute packfn_name holds a NUL byte");
  /* packfn_slot is the binding's generation: the plan a call with this name text found last,
   * when it is of that name and generation, else the name's chain walked from its newest slot */
  size_t ci = call_cache_index(name->ptr);
  plan_t* plan = atomic_load_explicit(&call_cache[ci], memory_order_acquire);
  if (PF_LIKELY(plan && slot >= 0 &&
                atomic_load_explicit(&plan->gen, memory_order_relaxed) == slot &&
                plan_named(plan, name->ptr, name->len))) {
    *out = plan;
    return NULL;
  }
  /* the name's slots are few: walked whole (generations are given in the order pf_xla_bind
   * meets the slots, not the order they were bound) */
  int64_t at = slot >= 0 ? names_find(name->ptr, name->len) : -1;
  while (at >= 0 && atomic_load_explicit(&slot_get(at)->gen, memory_order_acquire) != slot)
    at = slot_get(at)->older;
  if (PF_LIKELY(at >= 0)) {
    *out = slot_get(at);
    atomic_store_explicit(&call_cache[ci], *out, memory_order_release);
    return NULL;
  }
  /* a generation this process never bound (an executable another process compiled after
   * more rebinds, or a missing packfn_slot): the name's current binding, found without a lock
   * unless the global changed */
  slot = bind_bytes(name->ptr, name->len);
  if (slot < 0)
    return xla_error_from_packfn(frame->api);
  *out = slot_get(slot);
  return NULL;
}

enum { STACK_PARAMS = 16 };

static XLA_FFI_Error* call_frame(XLA_FFI_CallFrame* frame, DLDevice device) {
  if (PF_UNLIKELY(frame->extension_start &&
                  frame->extension_start->type == XLA_FFI_Extension_Metadata))
    return metadata(frame);
  if (PF_UNLIKELY(frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE))
    return xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     "packfn_xla: call frame of %zu bytes, expected at least %zu",
                     frame->struct_size, (size_t)XLA_FFI_CallFrame_STRUCT_SIZE);
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE)
    return NULL;
  plan_t* plan = NULL;
  int64_t own = 0;
  XLA_FFI_Error* xerr = plan_of(frame, &plan, &own);
  if (xerr)
    return xerr;
  int64_t nargs = frame->args.size, nrets = frame->rets.size;
  if (PF_UNLIKELY(nargs + nrets != plan->num_tensors))
    return xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     "%s: %d tensor parameters, but the call has %lld operands and %lld results",
                     plan->name, (int)plan->num_tensors, (long long)nargs, (long long)nrets);
  /* each scalar parameter finds its attribute by name below, so with this count no attribute
   * is left over that none of them took (an unknown one is refused) */
  if (PF_UNLIKELY(frame->attrs.size != plan->num_params - plan->num_tensors + own))
    return xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     "%s: %d scalar parameters, but the call has %lld attributes besides "
                     "packfn_name and packfn_slot",
                     plan->name, (int)(plan->num_params - plan->num_tensors),
                     (long long)(frame->attrs.size - own));

  pf_any_t args_stack[STACK_PARAMS];
  DLTensor views_stack[STACK_PARAMS];
  pf_any_t* args = args_stack;
  DLTensor* views = views_stack;
  if (PF_UNLIKELY(plan->num_params > STACK_PARAMS)) {
    args = malloc((size_t)plan->num_params * (sizeof *args + sizeof *views));
    if (!args)
      return xla_error(frame->api, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
                       "%s: out of memory for %d arguments", plan->name, (int)plan->num_params);
    views = (DLTensor*)(args + plan->num_params);
  }

  int32_t t = 0;
  for (int32_t p = 0; p < plan->num_params && !xerr; ++p) {
    const xparam_t* param = &plan->params[p];
    if (param->kind == P_TENSOR) {
      XLA_FFI_Buffer* b = t < nargs ? frame->args.args[t] : frame->rets.rets[t - nargs];
      DLTensor* v = &views[t];
      if (PF_UNLIKELY(dtype_of(b->dtype, &v->dtype) != 0)) {
        xerr = xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "%s: argument %d (%s): XLA type %d is not passed to packfn functions "
                         "(only types of whole bytes with a DLPack code are)",
                         plan->name, (int)p, param->name, (int)b->dtype);
        break;
      }
      v->data = b->data;
      v->device = device;
      v->ndim = (int32_t)b->rank;
      v->shape = b->dims;
      v->strides = NULL;
      v->byte_offset = 0;
      args[p] = pf_any_dltensor(v);
      ++t;
      continue;
    }
    const XLA_FFI_Attrs* attrs = &frame->attrs;
    int64_t a = 0;
    while (a < attrs->size && !span_is(attrs->names[a], param->name, param->name_len))
      ++a;
    const XLA_FFI_Scalar* scalar = a < attrs->size && attrs->types[a] == XLA_FFI_AttrType_SCALAR
                                       ? (const XLA_FFI_Scalar*)attrs->attrs[a]
                                       : NULL;
    int rc = scalar ? scalar_of(scalar, param->kind, &args[p]) : -1;
    if (a == attrs->size)
      xerr = xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "%s: argument %d (%s): no attribute %s (%s) in the call", plan->name, (int)p,
                       param->name, param->name, kind_name(param->kind));
    else if (rc == -2)
      xerr = xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "%s: argument %d (%s): expected an int in [-2**63, 2**63), got %llu",
                       plan->name, (int)p, param->name,
                       (unsigned long long)*(const uint64_t*)scalar->value);
    else if (rc != 0)
      xerr = xla_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "%s: argument %d (%s): expected %s %s attribute", plan->name, (int)p,
                       param->name, param->kind == P_INT ? "an" : "a", kind_name(param->kind));
  }

  if (!xerr) {
    void* prev = NULL;
    int set_stream = device.device_type == kDLCUDA;
    if (set_stream) {
      XLA_FFI_Stream_Get_Args sargs = {.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE,
                                       .extension_start = NULL,
                                       .ctx = frame->ctx,
                                       .stream = NULL};
      xerr = frame->api->XLA_FFI_Stream_Get(&sargs);
      if (!xerr && pf_stream_set(device, sargs.stream, &prev) != 0)
        xerr = xla_error_from_packfn(frame->api);
    }
    if (!xerr) {
      pf_any_t result;
      int rc = pf_function_call(plan->fn, args, plan->num_params, &result);
      if (rc != 0) {
        (void)pf_error_ensure(plan->name, rc); /* a function failing without raising: named */
        xerr = xla_error_from_packfn(frame->api);
      } else {
        pf_any_release(&result); /* what it raises call() drops */
      }
      /* restoring fails only on a full stream table; its error must not stay raised */
      if (set_stream && pf_stream_set(device, prev, NULL) != 0) {
        if (!xerr)
          xerr = xla_error_from_packfn(frame->api);
        else
          pf_error_clear();
      }
    }
  }
  if (args != args_stack)
    free(args);
  return xerr;
}

/* Runs the call with the thread's error slot empty: an error pending before it (on the CPU this
 * is the caller's thread, where C code may have raised and then run the Python making this
 * call) is set aside and put back after, so that it is neither taken for the call's failure
 * nor lost; what the call leaves raised though it succeeded (a function's stray error) is
 * dropped, so that no later call reports it as its own (review). */
static XLA_FFI_Error* call(XLA_FFI_CallFrame* frame, DLDevice device) {
  pf_object_t* aside = pf_error_take();
  XLA_FFI_Error* xerr = call_frame(frame, device);
  pf_error_clear();
  if (PF_UNLIKELY(aside != NULL)) {
    (void)pf_error_raise(aside); /* the slot is empty: it is put back unchanged */
    pf_object_release(aside);
  }
  return xerr;
}

XLA_FFI_Error* pf_xla_call_cpu(XLA_FFI_CallFrame* frame) {
  return call(frame, (DLDevice){kDLCPU, 0});
}

XLA_FFI_Error* pf_xla_call_cuda(XLA_FFI_CallFrame* frame) {
  if (frame->extension_start && frame->extension_start->type == XLA_FFI_Extension_Metadata)
    return metadata(frame);
  XLA_FFI_DeviceOrdinal_Get_Args oargs = {.struct_size = XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE,
                                          .extension_start = NULL,
                                          .ctx = frame->ctx,
                                          .device_ordinal = 0};
  XLA_FFI_Error* xerr = frame->api->XLA_FFI_DeviceOrdinal_Get(&oargs);
  if (xerr)
    return xerr;
  return call(frame, (DLDevice){kDLCUDA, oargs.device_ordinal});
}
