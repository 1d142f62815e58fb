/* valgrind_compat.h: callgrind's client requests (Debian package valgrind), or no-op stand-ins
   when the build did not find valgrind/callgrind.h (PF_BENCH_HAVE_VALGRIND undefined). */
#ifndef PF_BENCH_VALGRIND_COMPAT_H
#define PF_BENCH_VALGRIND_COMPAT_H

#ifdef PF_BENCH_HAVE_VALGRIND
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(label) ((void)(label))
#endif

#endif /* PF_BENCH_VALGRIND_COMPAT_H */
