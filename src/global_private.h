/* Private: a white-box view of the global function table, for tests and benchmarks. */
#ifndef PACKFN_SRC_GLOBAL_PRIVATE_H_
#define PACKFN_SRC_GLOBAL_PRIVATE_H_

#include <stddef.h>

#include "packfn/config.h"

/* The current table's shape. A live name's probe length is the number of slots a lookup of
 * it reads (1 when it sits in its home slot). */
typedef struct {
  size_t capacity;     /* slots */
  size_t used;         /* slots holding a name, live or removed */
  size_t live;         /* names with a function */
  size_t total_probes; /* sum of the live names' probe lengths */
  size_t max_probes;   /* the longest of them */
  size_t rebuilds;     /* tables replaced by a larger or tombstone-free one, ever */
} pf__global_stats_t;

/* Fills *out (not NULL) under the writers' lock; cannot fail. */
PF_API void pf__global_stats(pf__global_stats_t* out);

#endif /* PACKFN_SRC_GLOBAL_PRIVATE_H_ */
