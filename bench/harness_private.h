/* harness_private.h: what packfn_bench's driver files share: the catalogue and the selected
   rows (harness.c), options, and the report writers (harness_report.c). Not for the ops files:
   harness.h is their interface. */
#ifndef PF_BENCH_HARNESS_PRIVATE_H
#define PF_BENCH_HARNESS_PRIVATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "harness.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

typedef struct catalogue_entry {
  const char* op;
  const char* group;
  const char* what;
} catalogue_entry_t;

/* The operations, in report order (harness.c). Every implementation's op must be one of these. */
extern const catalogue_entry_t pf_bench_catalogue[];
extern const size_t pf_bench_catalogue_size;

/* Column order of the report's implementations, as measured (harness.c). */
extern const char* const pf_bench_impl_order[];
extern const size_t pf_bench_impl_order_size;

typedef struct entry {
  const pf_bench_op_t* op;
  size_t catalogue_index;
  int measured;
  uint64_t checksum;
  int64_t iters;
  int reps;
  double ns_median, ns_min, ns_max; /* per operation; negative when not timed */
  double ir_per_op;                 /* negative when unknown */
  long long ir_iters;               /* the callgrind loop ir_per_op comes from; 0 unknown */
  int disagrees; /* the implementations of its op returned different checksums: no figure */
} entry_t;

typedef struct options {
  int64_t iters;
  int reps;
  const char* op_patterns;   /* comma-separated fnmatch patterns, NULL for all */
  const char* impl_patterns; /* comma-separated, NULL for all */
  const char* json_path;
  const char* md_path;
  const char* ir_path;
  int cpu;
  int list;
  int pairs; /* --pairs: impl, op and the environment each selected row needs */
  int child; /* --child: one row for a parent harness, result on stdout */
  int callgrind;
  int no_time;
  int joined;
} options_t;

/* The selected rows, in report order once sorted (harness.c). */
extern entry_t pf_bench_entries[];
extern size_t pf_bench_num_entries;

/* ---- harness_report.c ---- */

/* Merges instruction counts from run_callgrind.sh: lines "impl<TAB>op<TAB>ir_per_op[<TAB>iters]"
   (iters: the length of the callgrind loop the count comes from, which --iters does not give). */
void pf_bench_read_ir_file(const char* path);

/* The results as a markdown table, and as JSON. */
void pf_bench_write_markdown(FILE* out, const options_t* opt);
void pf_bench_write_json(FILE* out, const options_t* opt);

/* A result file being written. */
typedef struct result_file_s {
  const char* path; /* the target */
  char* tmp;        /* the temporary file beside it (malloc'ed), or NULL */
  int device;       /* 1: the target is a character device, written in place at the end */
} result_file_t;

/* Writes files[i] with writers[i] into a temporary file beside each, flushed to disk; then,
 * only when every one is complete, renames them over their targets: a failure leaves every
 * existing target as it was. A target that exists and is not a regular file is refused, except
 * a character device (/dev/null, a terminal), which cannot be replaced and holds nothing to
 * lose: it is written in place, last. */
void pf_bench_write_results(result_file_t* files, void (*const* writers)(FILE*, const options_t*),
                            size_t n, const options_t* opt);

#endif /* PF_BENCH_HARNESS_PRIVATE_H */
