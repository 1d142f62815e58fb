/* Private: the type registry's table, shared by its readers (type.c) and registration
 * (object.c). */
#ifndef PACKFN_SRC_TYPE_PRIVATE_H_
#define PACKFN_SRC_TYPE_PRIVATE_H_

#include <pthread.h>
#include <stdint.h>

#include "packfn/object.h"

#include "tvm_private.h"

/* Indices the table covers: TVM-FFI's and packfn's (below). Indices are never reused, so the
 * table only grows; unused entries are untouched zero pages. */
#define PF__MAX_TYPES 32768

/* Before packfn joins TVM-FFI it counts its own dynamic indices from here, well above where
 * TVM-FFI's counter (128 on) realistically is when packfn joins; at the join those types are
 * registered in TVM-FFI's registry at these same indices (docs/object.md). */
#define PF__TYPE_OWN_BEGIN 8192

/* Most registered types (packfn's own and TVM-FFI's mirrored ones) findable by key. */
#define PF__MAX_KEYED_TYPES 8192

typedef struct {
  pf_type_info_t info;
  const char* short_name; /* for messages */
} pf__type_entry_t;

/* index -> entry (NULL: none); entries are published with a release store once complete.
 * Writers hold pf__types_lock: pf__next_own is packfn's next own index (before the join),
 * pf__keyed the registered and mirrored entries in the order they were added (parents first),
 * pf__keyed_count their number. */
extern pf__type_entry_t* pf__types[PF__MAX_TYPES];
extern pthread_mutex_t pf__types_lock;
/* fork(): pf__types_lock taken before a fork and given back after it (alloc.c's handlers). */
void pf__types_fork_lock(void);
void pf__types_fork_unlock(void);
extern int32_t pf__next_own;
extern pf__type_entry_t* pf__keyed[PF__MAX_KEYED_TYPES];
extern int32_t pf__keyed_count;

/* Caller holds the lock: the registered or mirrored entry of `key` (static keys included), or
 * NULL. */
pf__type_entry_t* pf__type_find_key(const char* key, size_t key_len);

/* Caller holds the lock: makes and publishes the entry of a new type `key` at `index` under
 * `parent`. NULL when out of memory or the keyed list is full (nothing raised). */
pf__type_entry_t* pf__type_publish(int32_t index, const char* key, size_t key_len,
                                   const pf__type_entry_t* parent);

/* Caller holds the lock, packfn has joined `tvm`: the entry of a type TVM-FFI knows by `key`,
 * mirrored into packfn's table on first sight; NULL when TVM-FFI does not know the key (or
 * its index is past the table, or memory runs out). */
pf__type_entry_t* pf__type_from_tvm_key(const pf__tvm_t* tvm, const char* key, size_t key_len);

/* Fills in the static types on first use; every reader and writer calls it first. */
void pf__types_ensure(void);

/* The entry of an object type index, or NULL (not an object index, or none registered). */
const pf__type_entry_t* pf__type_entry(int32_t type_index);

#endif /* PACKFN_SRC_TYPE_PRIVATE_H_ */
