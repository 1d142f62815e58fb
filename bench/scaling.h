/* scaling.h: the interface between bench_scaling's driver (bench_scaling.c) and each
   implementation (packfn: bench_scaling_packfn.c, TVM-FFI: tvmffi_scaling.cc): four scaling
   series, each a setup / measured loop / teardown triple. */
#ifndef PF_BENCH_SCALING_H
#define PF_BENCH_SCALING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most arguments of the argument-count series. */
#define SC_MAX_ARGS 64
/* The lookup series' names (see sc_name): kind SC_SUFFIX is "bench.scale.<i>", names that
   differ only in a numeric suffix; kind SC_RANDOM is random lowercase letters of the same
   length as the SC_SUFFIX name with the same i. A table of size n holds both kinds for i < n
   (2n names); the hot lookup is of SC_SUFFIX name n / 2. */
#define SC_NAME_PREFIX "bench.scale."
enum { SC_SUFFIX = 0, SC_RANDOM = 1 };

/* Name i of a kind, NUL-terminated, and its length; made by the driver, kept until exit. */
const char* sc_name(int kind, int64_t i);
size_t sc_name_len(int kind, int64_t i);

/* An order to look names up in: names[k & mask] for k = 0, 1, ...; mask + 1 a power of two. */
typedef struct sc_name_list {
  const char* const* names;
  const size_t* lens;
  int64_t mask;
} sc_name_list_t;

/* Each run returns a checksum that both implementations agree on:
     args      f(i, 1, 2, ..., n-1) returns the sum of its n int arguments; sum of results
     lookup    global lookup of one registered name (hot) + release; +1 per hit
     lookup_list  lookups in a list's order + release; +1 per hit
     alloc     1-d uint8 CPU tensor of `size` bytes + release; + shape[0]
     threads   f(i) -> i + 1 on one function shared by every thread; sum of results
   A NULL setup member means the implementation lacks that series. */
typedef struct sc_impl {
  const char* name;
  void* (*args_setup)(int nargs);
  void* (*lookup_setup)(int64_t table_size); /* registers names up to table_size (kept) */
  /* registers "bench.own.<k>" with a function of its own; lookup_run then looks that up */
  void* (*lookup_own_setup)(int k);
  void* (*alloc_setup)(int64_t nbytes);
  void* (*threads_setup)(void);
  uint64_t (*args_run)(void* state, int64_t iters);
  uint64_t (*lookup_run)(void* state, int64_t iters); /* also from several threads at once */
  uint64_t (*lookup_list_run)(void* state, const sc_name_list_t* list, int64_t iters);
  uint64_t (*alloc_run)(void* state, int64_t iters);
  uint64_t (*threads_run)(void* state, int64_t iters); /* called from several threads at once */
  void (*teardown)(void* state);                       /* frees any state above */
} sc_impl_t;

/* Prints "bench_scaling: <impl> <what>: <detail>" and exits with status 2. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noreturn))
#endif
void sc_fail(const char* impl, const char* what, const char* detail);

const sc_impl_t* sc_packfn_impl(void);
#ifdef PF_BENCH_HAVE_TVMFFI
const sc_impl_t* sc_tvmffi_impl(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PF_BENCH_SCALING_H */
