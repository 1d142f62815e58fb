/* Private: the global function table's layout, state and locks, as global.c (lookups, readers'
 * records and grace periods, fork) and global_write.c (writers, listing, static registration,
 * joining TVM-FFI) share them: the table's inline accessors and what global.c defines for
 * global_write.c. Not installed. */
#ifndef PACKFN_SRC_GLOBAL_TABLE_H_
#define PACKFN_SRC_GLOBAL_TABLE_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "packfn/object.h"

#include "bytes.h"
#include "tvm_private.h"

/* ---- the layout ---- */

typedef struct {
  uint64_t hash;   /* pf__name_hash */
  uint64_t tail;   /* pf__hash_absorb's last word: for names of up to 8 bytes, the name itself */
  size_t len;      /* 0 until the slot is published (names are never empty) */
  char* name;      /* owned, NUL-terminated; NULL marks an empty slot */
  pf_object_t* fn; /* owned; NULL in an empty slot, one being filled, or a removed name's */
} pf__entry_t;

/* A table is one array: cell 0 its header, then `mask + 1` slots, a power of two >= 2; the
 * table is named by a pointer to its first slot (cell 1). A name's home slot is hash >> shift, the
 * hash's top bits (the multiply that ends pf__hash_absorb mixes every input bit into those; its low
 * bits see only the low bytes). */
typedef union {
  pf__entry_t entry;
  struct {
    size_t mask;
    size_t shift; /* 64 - log2(capacity) */
    size_t used;  /* slots with a name, live or removed; writers only */
  } head;
} pf__cell_t;

/* ---- the state (global.c) ---- */

/* Declared hidden as they are defined (the library's default), so that global_write.c reads them
 * PC-relative as global.c does, not through the GOT. */
#define PF__TABLE_HIDDEN __attribute__((visibility("hidden")))

/* The table before the first rebuild: two empty slots. */
extern PF__TABLE_HIDDEN pf__cell_t pf__empty[3];
/* The current table's first slot; replaced (not written in place) by rebuilds. */
extern PF__TABLE_HIDDEN pf__cell_t* pf__cells;
/* Serialises the writers; taken after pf__tvm_table. */
extern PF__TABLE_HIDDEN pthread_mutex_t pf__writers;
/* Held around every call into TVM-FFI's table (global.c says why). */
extern PF__TABLE_HIDDEN pthread_mutex_t pf__tvm_table;

/* ---- the table's accessors ---- */

/* The table's hash of a name: the absorbed state, mixed once more so that the home slot, its
 * top bits, depends on every bit of the state (the absorb's last multiply carries a
 * difference in the last word's high bytes, a numeric suffix's, only into the top bits, and
 * how well those few bits spread depended on the rest of the name: found by review). A
 * bijection of the state, so pf__probe's exactness for short names holds. *tail as
 * pf__hash_absorb gives it. */
static inline uint64_t pf__name_hash(const char* name, size_t len, uint64_t* tail) {
  uint64_t h = pf__hash_absorb(name, len, tail);
  h ^= h >> 32;
  return h * 0xd6e8feb86659fd93ULL;
}

static inline pf__entry_t* pf__slot(pf__cell_t* t, size_t i) {
  return &t[i].entry;
}

static inline size_t pf__mask(const pf__cell_t* t) {
  return t[-1].head.mask;
}

static inline size_t pf__home(const pf__cell_t* t, uint64_t h) {
  return (size_t)(h >> t[-1].head.shift);
}

/* TVM-FFI's function named (name, len): 0 with a new reference in *out, NULL when it has none;
 * -1 with TVM-FFI's error raised in TVM-FFI's slot. Caller holds pf__tvm_table. */
static inline int pf__tvm_get(const pf__tvm_t* tvm, const char* name, size_t len,
                              pf_object_t** out) {
  pf_byte_array_t key = {name, len};
  void* f = NULL;
  int rc = tvm->function_get_global(&key, &f);
  *out = rc == 0 ? f : NULL;
  return rc;
}

/* ---- global.c, for global_write.c ---- */

/* Waits for the grace period: 1 once every lookup that could see what was just unpublished is
 * done; 0 when the kernel refused the barrier that needs (global.c): the caller keeps what it
 * unpublished with pf__keep or pf__keep_table instead of releasing or freeing it. */
int pf__synchronize(void);
/* The table's part of the fork handlers (alloc.c calls them through weak references). */
void pf__global_fork_lock(void);
void pf__global_fork_unlock(void);
void pf__global_fork_child(void);
/* Keeps fn alive for the life of the process (takes a reference of its own); NULL is ignored. */
void pf__keep(pf_object_t* fn);
/* Keeps an unpublished table and its removed names for the life of the process. */
void pf__keep_table(pf__cell_t* t);

#endif /* PACKFN_SRC_GLOBAL_TABLE_H_ */
