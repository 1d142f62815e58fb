/* fault.h: the allocation-failure interposer of pf_fault (fault_alloc.c). */
#ifndef PACKFN_FAULT_H_
#define PACKFN_FAULT_H_

#include <stddef.h>
#include <stdint.h>

/* From now on, allocation call number n (1-based) fails once; 0 fails none. Resets counts. */
void fault_arm(long n);
/* Stops failing allocations (counting goes on). */
void fault_disarm(void);
/* 1 when the armed allocation has failed since fault_arm. */
int fault_fired(void);
/* The bytes the armed allocation asked for (n * size for calloc), once it has failed. */
size_t fault_failed_size(void);
/* Allocation calls since fault_arm. */
long fault_calls(void);
/* From now on, allocation calls made from code in [lo, hi) (the dynamic loader's) are neither
 * counted nor failed; (0, 0) ends that. Their blocks still count as live. */
void fault_skip_loader(uintptr_t lo, uintptr_t hi);
/* Blocks allocated and not yet freed, process-wide. */
long fault_live_blocks(void);

#endif /* PACKFN_FAULT_H_ */
