/* bench_probes: how well the global table's slot hash spreads names, by family and table size.
 * For each family of names and each count n, a child process (so that every row starts from
 * an empty table: removed names would stay as tombstones) registers n names, reads the
 * table's shape (pf__global_stats: the mean and the longest probe of a live name, in slots
 * read per successful lookup) and prints one row. Deterministic (fixed seeds, no
 * timing); docs/performance.md quotes its table. Usage: bench_probes [--max N]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "packfn/packfn.h"

#include "global_private.h"

typedef void (*name_fn)(char* buf, size_t size, long i);

static void mylib_op(char* buf, size_t size, long i) {
  snprintf(buf, size, "mylib.op%ld", i);
}

static void bench_scale(char* buf, size_t size, long i) {
  snprintf(buf, size, "bench.scale.%ld", i);
}

static void model_layer(char* buf, size_t size, long i) {
  snprintf(buf, size, "model.layers.%ld.self_attn.q_proj.forward", i);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 29;
  return x;
}

static void random12(char* buf, size_t size, long i) {
  uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
  for (size_t k = 0; k < 12 && k + 1 < size; ++k) {
    x = mix(x + k);
    buf[k] = (char)('a' + x % 26);
  }
  buf[12] = '\0';
}

/* 34-byte names that differ only in bytes 7 and 15 (the high bytes of their first two words) */
static void bytes_7_15(char* buf, size_t size, long i) {
  snprintf(buf, size, "abcdefg%cijklmno%cqrstuvwxyz0123456",
           'A' + (int)(i % 52 % 26) + (i % 52 >= 26 ? 32 : 0),
           'A' + (int)(i / 52 % 26) + (i / 52 % 52 >= 26 ? 32 : 0));
}

static int seven(void* self, const pf_any_t* args, int32_t n, pf_any_t* result) {
  (void)self, (void)args, (void)n;
  *result = pf_any_int(7);
  return 0;
}

/* One row, in a child process: 0 when the child printed it. */
static int row(const char* family, name_fn make, long n, pf_object_t* fn) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    char name[128];
    for (long i = 0; i < n; ++i) {
      make(name, sizeof name, i);
      if (pf_global_set(name, fn, 0) != 0) {
        pf_object_t* e = pf_error_take();
        fprintf(stderr, "bench_probes: %s\n", e ? pf_error_message(e) : "failed");
        _exit(1);
      }
    }
    pf__global_stats_t st;
    pf__global_stats(&st);
    printf("| %s | %ld | %zu | %.2f | %zu |\n", family, n, st.capacity,
           st.live ? (double)st.total_probes / (double)st.live : 0.0, st.max_probes);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char** argv) {
  long max = 1000000;
  if (argc == 3 && strcmp(argv[1], "--max") == 0)
    max = strtol(argv[2], NULL, 10);
  else if (argc != 1) {
    fprintf(stderr, "usage: %s [--max N]\n", argv[0]);
    return 2;
  }
  pf_object_t* fn = NULL;
  if (pf_function_create(NULL, seven, NULL, &fn) != 0)
    return 1;
  static const struct {
    const char* family;
    name_fn make;
    long most; /* distinct names the family has */
  } families[] = {
      {"`mylib.op<i>`", mylib_op, 0},
      {"`bench.scale.<i>`", bench_scale, 0},
      {"`model.layers.<i>.self_attn.q_proj.forward`", model_layer, 0},
      {"random, 12 letters", random12, 0},
      {"bytes 7 and 15 vary (34 bytes)", bytes_7_15, 2704},
  };
  printf("| names | n | slots | mean probe | longest |\n|---|---:|---:|---:|---:|\n");
  for (size_t f = 0; f < sizeof families / sizeof families[0]; ++f)
    for (long n = 10; n <= max; n *= 10) {
      long count = families[f].most && n > families[f].most ? families[f].most : n;
      if (row(families[f].family, families[f].make, count, fn) != 0)
        return 1;
      if (count < n)
        break;
    }
  pf_object_release(fn);
  return 0;
}
