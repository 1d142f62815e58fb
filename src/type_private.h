/* Private: the type registry's table, shared by its readers (type.c) and registration
 * (object.c). */
#ifndef PACKFN_SRC_TYPE_PRIVATE_H_
#define PACKFN_SRC_TYPE_PRIVATE_H_

#include <pthread.h>
#include <stdint.h>

#include "packfn/object.h"

/* Most types a process may hold. Indices are never reused, so the table only grows; 4096
 * leaves room for thousands of registered types while keeping the table one 32 KiB array. */
#define PF__MAX_TYPES 4096

typedef struct {
  pf_type_info_t info;
  const char* short_name; /* for messages */
} pf__type_entry_t;

/* index -> entry (NULL: none); entries are published with a release store once complete.
 * Writers hold pf__types_lock; pf__next_type is the next dynamic index (under the lock). */
extern pf__type_entry_t* pf__types[PF__MAX_TYPES];
extern pthread_mutex_t pf__types_lock;
extern int32_t pf__next_type;

/* Fills in the static types on first use; every reader and writer calls it first. */
void pf__types_ensure(void);

/* The entry of an object type index, or NULL (not an object index, or none registered). */
const pf__type_entry_t* pf__type_entry(int32_t type_index);

#endif /* PACKFN_SRC_TYPE_PRIVATE_H_ */
