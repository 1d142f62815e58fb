/* timing.c: the sample summary and the run conditions of timing.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, gmtime_r */
#include "timing.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set by bench/CMakeLists.txt per program; a program built without them says so. */
#ifndef PF_BENCH_BUILD_TYPE
#define PF_BENCH_BUILD_TYPE "unknown"
#endif
#ifndef PF_BENCH_C_FLAGS
#define PF_BENCH_C_FLAGS "unknown"
#endif
/* `git describe --always --dirty` as of the build: pf_bench_git.c, generated at every build by
   cmake/pf_bench_git.cmake (not at configure time, which a later commit would leave stale). */
#ifdef PF_BENCH_GIT_GENERATED
extern const char pf_bench_git_describe[];
#define PF_BENCH_GIT pf_bench_git_describe
#else
#define PF_BENCH_GIT "unknown"
#endif

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

void pf_bench_summarise(double* samples, int reps, double* min, double* median, double* max) {
  qsort(samples, (size_t)reps, sizeof(double), compare_doubles);
  *min = samples[0];
  *max = samples[reps - 1];
  *median = reps % 2 ? samples[reps / 2] : 0.5 * (samples[reps / 2 - 1] + samples[reps / 2]);
}

/* The value of the first "model name" line of /proc/cpuinfo, else "unknown". */
static void read_cpu_model(char* out, size_t size) {
  snprintf(out, size, "unknown");
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (f == NULL)
    return;
  char line[256];
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "model name", 10) != 0)
      continue;
    const char* v = strchr(line, ':');
    if (v == NULL)
      continue;
    v += 1 + (v[1] == ' ');
    snprintf(out, size, "%.*s", (int)strcspn(v, "\n"), v);
    break;
  }
  fclose(f);
}

static void read_loadavg(char* out, size_t size) {
  snprintf(out, size, "unknown");
  FILE* f = fopen("/proc/loadavg", "r");
  if (f == NULL)
    return;
  double a, b, c;
  if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
    snprintf(out, size, "%.2f %.2f %.2f", a, b, c);
  fclose(f);
}

const pf_bench_conditions_t* pf_bench_conditions(void) {
  static pf_bench_conditions_t c;
  static int taken;
  if (!taken) {
    c.build_type = *PF_BENCH_BUILD_TYPE ? PF_BENCH_BUILD_TYPE : "none";
    c.c_flags = PF_BENCH_C_FLAGS;
    c.git = PF_BENCH_GIT;
    read_cpu_model(c.cpu_model, sizeof c.cpu_model);
    c.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (c.cpus < 0)
      c.cpus = 0;
    read_loadavg(c.loadavg, sizeof c.loadavg);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) == NULL ||
        strftime(c.date, sizeof c.date, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
      snprintf(c.date, sizeof c.date, "unknown");
    taken = 1;
  }
  return &c;
}

void pf_bench_conditions_print(FILE* out, const char* prefix) {
  const pf_bench_conditions_t* c = pf_bench_conditions();
  char cpus[24] = "unknown";
  if (c->cpus > 0)
    snprintf(cpus, sizeof cpus, "%ld", c->cpus);
  fprintf(out,
          "%sconditions: %s build, C flags '%s', git %s; CPU %s, %s logical CPUs; %s; load average "
          "%s at start\n",
          prefix, c->build_type, c->c_flags, c->git, c->cpu_model, cpus, c->date, c->loadavg);
}

static void json_text(FILE* out, const char* key, const char* s, int comma) {
  fprintf(out, "\"%s\": \"", key);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\')
      fputc('\\', out);
    if ((unsigned char)*s >= 0x20)
      fputc(*s, out);
  }
  fprintf(out, "\"%s", comma ? ", " : "");
}

void pf_bench_conditions_json(FILE* out) {
  const pf_bench_conditions_t* c = pf_bench_conditions();
  json_text(out, "build_type", c->build_type, 1);
  json_text(out, "c_flags", c->c_flags, 1);
  json_text(out, "git", c->git, 1);
  json_text(out, "cpu_model", c->cpu_model, 1);
  fprintf(out, "\"logical_cpus\": %ld, ", c->cpus);
  json_text(out, "date", c->date, 1);
  json_text(out, "loadavg", c->loadavg, 0);
}
