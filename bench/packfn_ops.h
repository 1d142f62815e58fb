/* packfn_ops.h: what the packfn side's two files share: packfn_ops.c (calls, functions, the
   table of every row) and packfn_ops_objects.c (the rows of strings, maps, errors, tensors and
   DLPack exchange, whose setup, run and teardown the table names). */
#ifndef PF_BENCH_PACKFN_OPS_H
#define PF_BENCH_PACKFN_OPS_H

#include <stdint.h>

#include "packfn/packfn.h"

/* The implementation name of every row (pf_bench_op_t.impl) and of every failure. */
static const char kImpl[] = "packfn";

/* Takes the error raised in this thread and fails with its text (pf_bench_fail). */
__attribute__((noreturn)) void pf_bench_packfn_fail_raised(const char* what);

/* A 1-d float32 CPU tensor of PF_BENCH_TENSOR_NUMEL elements; fails with `what` (objects). */
pf_object_t* pf_bench_packfn_new_tensor(const char* what);

/* ---- the rows of packfn_ops_objects.c (pf_bench_op_t's setup, run, teardown) ---- */

uint64_t pf_bench_packfn_run_string5(void* state, int64_t iters);
uint64_t pf_bench_packfn_run_string100(void* state, int64_t iters);

void* pf_bench_packfn_setup_map_small(void);
void* pf_bench_packfn_setup_map_1k_str(void);
void* pf_bench_packfn_setup_map_1k_int(void);
void* pf_bench_packfn_setup_map_keys(void);
void pf_bench_packfn_teardown_map(void* state);
uint64_t pf_bench_packfn_run_map_get(void* state, int64_t iters);
uint64_t pf_bench_packfn_run_map_build(void* state, int64_t iters);

void* pf_bench_packfn_setup_error_bt(void);
void* pf_bench_packfn_setup_error_nobt(void);
uint64_t pf_bench_packfn_run_error(void* state, int64_t iters);
uint64_t pf_bench_packfn_run_error_bt(void* state, int64_t iters);
#ifdef PF_BENCH_HAVE_TVMFFI
void* pf_bench_packfn_setup_joined(void);
uint64_t pf_bench_packfn_run_error_to_tvmffi(void* state, int64_t iters);
uint64_t pf_bench_packfn_run_error_from_tvmffi(void* state, int64_t iters);
#endif

uint64_t pf_bench_packfn_run_tensor_empty(void* state, int64_t iters);
void* pf_bench_packfn_setup_tensor_env(void);
void pf_bench_packfn_teardown_tensor_env(void* state);

void* pf_bench_packfn_setup_tensor(void);
void pf_bench_packfn_teardown_tensor(void* state);
uint64_t pf_bench_packfn_run_dlpack_legacy(void* state, int64_t iters);
uint64_t pf_bench_packfn_run_dlpack_versioned(void* state, int64_t iters);

#endif /* PF_BENCH_PACKFN_OPS_H */
