/* harness_report.c: packfn_bench's reports: instruction counts merged from run_callgrind.sh,
   the markdown table and JSON of the results, and the result files, written beside their
   targets and renamed over them when all are complete. */
#define _GNU_SOURCE
#include "harness.h"
#include "harness_private.h"
#include "timing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__clang__)
#define COMPILER_NAME __VERSION__
#elif defined(__GNUC__)
#define COMPILER_NAME "gcc " __VERSION__
#else
#define COMPILER_NAME "unknown"
#endif

/* The wheel's own version (from CMake) and the C ABI version libtvm_ffi reports differ. */
#ifndef PF_BENCH_TVMFFI_WHEEL
#define PF_BENCH_TVMFFI_WHEEL "unknown"
#endif

/* ---- instruction counts from run_callgrind.sh: lines "impl<TAB>op<TAB>ir_per_op[<TAB>iters]" ----
 */

void pf_bench_read_ir_file(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL)
    pf_bench_fail("harness", path, strerror(errno));
  char line[512];
  while (fgets(line, sizeof(line), f) != NULL) {
    char impl[64], op[128];
    double ir;
    long long iters = 0;
    if (line[0] == '#' || sscanf(line, "%63s %127s %lf %lld", impl, op, &ir, &iters) < 3)
      continue;
    for (size_t i = 0; i < pf_bench_num_entries; ++i) {
      if (strcmp(pf_bench_entries[i].op->impl, impl) == 0 &&
          strcmp(pf_bench_entries[i].op->op, op) == 0) {
        pf_bench_entries[i].ir_per_op = ir;
        pf_bench_entries[i].ir_iters = iters > 0 ? iters : 0;
      }
    }
  }
  fclose(f);
}

/* ---- reports ---- */

static const entry_t* find_entry(size_t catalogue_index, const char* impl) {
  for (size_t i = 0; i < pf_bench_num_entries; ++i) {
    if (pf_bench_entries[i].catalogue_index == catalogue_index &&
        strcmp(pf_bench_entries[i].op->impl, impl) == 0)
      return &pf_bench_entries[i];
  }
  return NULL;
}

static int impl_present(const char* impl) {
  for (size_t i = 0; i < pf_bench_num_entries; ++i) {
    if (strcmp(pf_bench_entries[i].op->impl, impl) == 0)
      return 1;
  }
  return 0;
}

static void print_ratio(FILE* out, double num, double den) {
  if (num >= 0 && den > 0)
    fprintf(out, " %.2fx |", num / den);
  else
    fprintf(out, " - |");
}

/* Column order of the markdown table: packfn, TVM-FFI, their ratios, then libffi and the
   direct floor. */
static const char* const report_order[] = {"packfn", "tvmffi", "libffi", "direct"};

/* 1 when this build has the implementation at all (an absent one gets an "absent" column). */
static int impl_built(const char* impl) {
  if (strcmp(impl, "tvmffi") == 0) {
#ifdef PF_BENCH_HAVE_TVMFFI
    return 1;
#else
    return 0;
#endif
  }
  if (strcmp(impl, "libffi") == 0) {
#ifdef PF_BENCH_HAVE_LIBFFI
    return 1;
#else
    return 0;
#endif
  }
  if (strcmp(impl, "packfn") == 0) {
#ifdef PF_BENCH_HAVE_PACKFN
    return 1;
#else
    return 0;
#endif
  }
  return 1;
}

/* Shown: measured in this run, or not built (then its cells read "absent"). */
static int impl_shown(const char* impl) {
  return impl_present(impl) || !impl_built(impl);
}

static void write_cells(FILE* out, const entry_t* e, const char* impl, int have_time, int have_ir,
                        int show_sum) {
  const char* none = impl_built(impl) ? "-" : "absent";
  if (have_time) {
    if (e != NULL && e->ns_median >= 0)
      fprintf(out, " %.2f [%.2f-%.2f] |", e->ns_median, e->ns_min, e->ns_max);
    else
      fprintf(out, " %s |", none);
  }
  if (have_ir) {
    if (e != NULL && e->ir_per_op >= 0)
      fprintf(out, " %.1f |", e->ir_per_op);
    else
      fprintf(out, " %s |", none);
  }
  if (show_sum) {
    if (e != NULL)
      fprintf(out, " %llu |", (unsigned long long)e->checksum);
    else
      fprintf(out, " %s |", none);
  }
}

void pf_bench_write_markdown(FILE* out, const options_t* opt) {
  int have_time = !opt->callgrind && !opt->no_time;
  int have_ir = 0;
  for (size_t i = 0; i < pf_bench_num_entries; ++i)
    have_ir |= pf_bench_entries[i].ir_per_op >= 0;
  int show_sum = !have_time && !have_ir; /* --no-time alone: show what was checked */
  int ratio = impl_present("packfn") && impl_shown("tvmffi");

  fprintf(out, "packfn_bench: %lld iterations x %d repetitions, %s", (long long)opt->iters,
          have_time ? opt->reps : 1, COMPILER_NAME);
#ifdef PF_BENCH_HAVE_TVMFFI
  fprintf(out, ", TVM-FFI %s (C ABI %s)", PF_BENCH_TVMFFI_WHEEL, pf_bench_tvmffi_version());
#else
  fprintf(out, ", TVM-FFI absent");
#endif
#ifndef PF_BENCH_HAVE_LIBFFI
  fprintf(out, ", libffi absent");
#endif
  if (have_ir) {
    /* the loops the counts come from, which the iterations above are not */
    long long lo = 0, hi = 0;
    for (size_t i = 0; i < pf_bench_num_entries; ++i) {
      long long n = pf_bench_entries[i].ir_per_op >= 0 ? pf_bench_entries[i].ir_iters : 0;
      if (n > 0 && (lo == 0 || n < lo))
        lo = n;
      hi = n > hi ? n : hi;
    }
    fprintf(out, "; Ir/op from callgrind");
    if (lo == 0)
      fprintf(out, " (loop length not given)");
    else if (lo == hi)
      fprintf(out, " (loops of %lld operations)", lo);
    else
      fprintf(out, " (loops of %lld to %lld operations)", lo, hi);
  }
  fprintf(out, "\n");
  pf_bench_conditions_print(out, "");
  fprintf(out, "\n| op |");
  size_t ncols = 0;
  for (size_t k = 0; k < ARRAY_SIZE(report_order); ++k) {
    const char* impl = report_order[k];
    if (impl_shown(impl)) {
      if (have_time)
        fprintf(out, " %s ns/op median [min-max] |", impl), ++ncols;
      if (have_ir)
        fprintf(out, " %s Ir/op |", impl), ++ncols;
      if (show_sum)
        fprintf(out, " %s checksum |", impl), ++ncols;
    }
    if (ratio && strcmp(impl, "tvmffi") == 0) {
      if (have_ir)
        fprintf(out, " packfn/tvmffi Ir |"), ++ncols;
      if (have_time)
        fprintf(out, " packfn/tvmffi time |"), ++ncols;
    }
  }
  fprintf(out, "\n|---|");
  for (size_t k = 0; k < ncols; ++k)
    fprintf(out, "---:|");
  fprintf(out, "\n");

  for (size_t c = 0; c < pf_bench_catalogue_size; ++c) {
    int any = 0;
    for (size_t k = 0; k < pf_bench_impl_order_size; ++k)
      any |= find_entry(c, pf_bench_impl_order[k]) != NULL;
    if (!any)
      continue;
    fprintf(out, "| %s |", pf_bench_catalogue[c].op);
    for (size_t k = 0; k < ARRAY_SIZE(report_order); ++k) {
      const char* impl = report_order[k];
      if (impl_shown(impl))
        write_cells(out, find_entry(c, impl), impl, have_time, have_ir, show_sum);
      if (ratio && strcmp(impl, "tvmffi") == 0) {
        const entry_t* p = find_entry(c, "packfn");
        const entry_t* t = find_entry(c, "tvmffi");
        if (have_ir)
          print_ratio(out, p ? p->ir_per_op : -1, t ? t->ir_per_op : -1);
        if (have_time)
          print_ratio(out, p ? p->ns_median : -1, t ? t->ns_median : -1);
      }
    }
    fprintf(out, "\n");
  }
  /* what each row compares: both columns of a row do this work */
  fprintf(out, "\nRows:\n");
  for (size_t c = 0; c < pf_bench_catalogue_size; ++c) {
    int any = 0;
    for (size_t k = 0; k < pf_bench_impl_order_size; ++k)
      any |= find_entry(c, pf_bench_impl_order[k]) != NULL;
    if (any)
      fprintf(out, "- %s: %s\n", pf_bench_catalogue[c].op, pf_bench_catalogue[c].what);
  }
}

/* Our strings are identifiers and API names; escape the two characters JSON requires. */
static void json_string(FILE* out, const char* s) {
  fputc('"', out);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\')
      fputc('\\', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void json_number(FILE* out, double v) {
  if (v >= 0)
    fprintf(out, "%.4f", v);
  else
    fprintf(out, "null");
}

void pf_bench_write_json(FILE* out, const options_t* opt) {
  fprintf(out, "{\n  \"meta\": {\"mode\": ");
  json_string(out, opt->callgrind ? "callgrind" : opt->no_time ? "check" : "time");
  fprintf(out, ", \"iters\": %lld, \"reps\": %d, \"compiler\": ", (long long)opt->iters,
          opt->callgrind || opt->no_time ? 1 : opt->reps);
  json_string(out, COMPILER_NAME);
  fprintf(out, ", \"tvmffi_wheel\": ");
#ifdef PF_BENCH_HAVE_TVMFFI
  json_string(out, PF_BENCH_TVMFFI_WHEEL);
  fprintf(out, ", \"tvmffi_abi\": ");
  json_string(out, pf_bench_tvmffi_version());
#else
  fprintf(out, "null, \"tvmffi_abi\": null");
#endif
  fprintf(out, ", ");
  pf_bench_conditions_json(out);
  fprintf(out, ", \"cpu\": %d, \"available\": {", opt->cpu);
  for (size_t k = 0; k < ARRAY_SIZE(report_order); ++k)
    fprintf(out, "%s\"%s\": %s", k ? ", " : "", report_order[k],
            impl_built(report_order[k]) ? "true" : "false");
  fprintf(out, "}},\n  \"results\": [");
  for (size_t i = 0; i < pf_bench_num_entries; ++i) {
    const entry_t* e = &pf_bench_entries[i];
    fprintf(out, "%s\n    {\"op\": ", i ? "," : "");
    json_string(out, e->op->op);
    fprintf(out, ", \"impl\": ");
    json_string(out, e->op->impl);
    fprintf(out, ", \"group\": ");
    json_string(out, pf_bench_catalogue[e->catalogue_index].group);
    fprintf(out, ", \"entry\": ");
    json_string(out, e->op->entry);
    fprintf(out, ", \"iters\": %lld, \"reps\": %d, \"ns_median\": ", (long long)e->iters, e->reps);
    json_number(out, e->ns_median);
    fprintf(out, ", \"ns_min\": ");
    json_number(out, e->ns_min);
    fprintf(out, ", \"ns_max\": ");
    json_number(out, e->ns_max);
    fprintf(out, ", \"ir_per_op\": ");
    json_number(out, e->ir_per_op);
    fprintf(out, ", \"ir_iters\": ");
    if (e->ir_per_op >= 0 && e->ir_iters > 0)
      fprintf(out, "%lld", e->ir_iters);
    else
      fprintf(out, "null");
    fprintf(out, ", \"checksum\": %llu}", (unsigned long long)e->checksum);
  }
  fprintf(out, "\n  ],\n  \"ratios\": [");
  /* packfn / TVM-FFI per operation, where both have a figure. */
  int first = 1;
  for (size_t c = 0; c < pf_bench_catalogue_size; ++c) {
    const entry_t* p = find_entry(c, "packfn");
    const entry_t* t = find_entry(c, "tvmffi");
    if (p == NULL || t == NULL)
      continue;
    fprintf(out, "%s\n    {\"op\": ", first ? "" : ",");
    json_string(out, pf_bench_catalogue[c].op);
    fprintf(out, ", \"ir\": ");
    json_number(out, p->ir_per_op >= 0 && t->ir_per_op > 0 ? p->ir_per_op / t->ir_per_op : -1);
    fprintf(out, ", \"time\": ");
    json_number(out, p->ns_median >= 0 && t->ns_median > 0 ? p->ns_median / t->ns_median : -1);
    fprintf(out, "}");
    first = 0;
  }
  fprintf(out, "\n  ]\n}\n");
}

/* ---- result files: written beside their targets, renamed over them when all are complete ---- */

/* Removes every temporary file of files[0..n) and fails with `detail` about `path`. */
static void results_fail(result_file_t* files, size_t n, const char* path, const char* detail) {
  for (size_t i = 0; i < n; ++i)
    if (files[i].tmp != NULL)
      unlink(files[i].tmp);
  pf_bench_fail("harness", path, detail);
}

void pf_bench_write_results(result_file_t* files, void (*const* writers)(FILE*, const options_t*),
                            size_t n, const options_t* opt) {
  mode_t mask = umask(0);
  umask(mask);
  for (size_t i = 0; i < n; ++i) {
    struct stat st;
    files[i].device = stat(files[i].path, &st) == 0 && S_ISCHR(st.st_mode);
    if (files[i].device)
      continue;
    if (stat(files[i].path, &st) == 0 && !S_ISREG(st.st_mode))
      results_fail(files, i, files[i].path, "not a regular file: refusing to replace it");
    size_t len = strlen(files[i].path) + 8;
    files[i].tmp = malloc(len);
    if (files[i].tmp == NULL)
      results_fail(files, i, files[i].path, "out of memory");
    snprintf(files[i].tmp, len, "%s.XXXXXX", files[i].path);
    int fd = mkstemp(files[i].tmp);
    if (fd < 0) {
      free(files[i].tmp);
      files[i].tmp = NULL;
      results_fail(files, i, files[i].path, strerror(errno));
    }
    FILE* f = fdopen(fd, "w");
    if (f == NULL) {
      close(fd);
      results_fail(files, i + 1, files[i].path, strerror(errno));
    }
    writers[i](f, opt);
    int ok = fchmod(fd, 0666 & ~mask) == 0 && fflush(f) == 0 && !ferror(f) && fsync(fd) == 0;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
      ok = 0;
      saved = errno;
    }
    if (!ok)
      results_fail(files, i + 1, files[i].path, strerror(saved));
  }
  for (size_t i = 0; i < n; ++i) {
    if (files[i].device) {
      FILE* f = fopen(files[i].path, "w");
      if (f == NULL)
        results_fail(files + i, n - i, files[i].path, strerror(errno));
      writers[i](f, opt);
      if (fclose(f) != 0)
        results_fail(files + i, n - i, files[i].path, strerror(errno));
      continue;
    }
    if (rename(files[i].tmp, files[i].path) != 0)
      results_fail(files + i, n - i, files[i].path, strerror(errno));
    free(files[i].tmp);
    files[i].tmp = NULL;
  }
}
