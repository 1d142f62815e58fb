/* pf_fault_cli: the command line under allocation failure (issue 10, deliverable 4). It links
 * the command line's sources (not its main) with the malloc interposer of pf_fault and runs
 * `packfn call` commands in process, failing allocation N for every N from 1 until a command
 * completes without reaching its Nth allocation. Each run must
 *   - fail with exit status 1 or 2 and a report on stderr that says memory ran out
 *     (MemoryError, "out of memory" or strerror(ENOMEM); exit 2, a usage error, only for an
 *     input .npy that could not be read for it), its output file untouched and no
 *     temporary file left beside it,
 *   - or succeed with the right output (a failure absorbed),
 * and either way leave no error raised and leak nothing (fault_alloc.c counts blocks).
 *   pf_fault_cli DIR     (a scratch folder; PACKFN_NO_ALLOC_CACHE=1 must be set)
 * Exit status 0 when every point passed; 1 with each failed point printed otherwise. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "packfn/kernels.h"
#include "packfn/npy.h"
#include "packfn/packfn.h"

int pf_cli_call_main(int argc, char** argv);

static const char* dir;
static char x_path[4096], y_path[4096], err_path[4096], out_path[4096];
static long err_seen; /* bytes of err_file already checked */

static char* slurp(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* data = malloc((size_t)n + 1);
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  if (data) {
    data[n] = '\0';
    *size = (size_t)n;
  }
  return data;
}

static int write_bytes(const char* path, const char* data, size_t size) {
  FILE* f = fopen(path, "wb");
  if (!f)
    return -1;
  int ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* What the command wrote to stderr since the last call (malloc'd; the sweep is disarmed). */
static char* new_stderr(void) {
  fflush(stderr);
  size_t size = 0;
  char* all = slurp(err_path, &size);
  if (!all)
    return NULL;
  char* tail = strdup(all + ((size_t)err_seen <= size ? (size_t)err_seen : size));
  err_seen = (long)size;
  free(all);
  return tail;
}

/* 1 when DIR holds only the files the sweep made; other files are reported and removed (so
 * one stray file fails one point). */
static int no_stray_files(void) {
  DIR* d = opendir(dir);
  if (!d)
    return 0;
  int clean = 1;
  struct dirent* e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
        strcmp(e->d_name, "x.npy") != 0 && strcmp(e->d_name, "y.npy") != 0 &&
        strcmp(e->d_name, "stderr.txt") != 0 && strcmp(e->d_name, "stdout.txt") != 0) {
      fprintf(stdout, "stray file %s\n", e->d_name);
      clean = 0;
      char path[8192];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  closedir(d);
  return clean;
}

typedef struct {
  const char* name;
  int argc;
  char* argv[12];
  int writes_y; /* the command's output is y.npy */
} command_t;

/* Sweeps one command; returns the number of failed points. */
static int sweep(const command_t* c, const char* y_before, size_t y_before_size) {
  /* the expected output, and first-call work (thread-local slots, the table) done outside */
  if (write_bytes(y_path, y_before, y_before_size) != 0)
    return 1;
  if (pf_cli_call_main(c->argc, (char**)c->argv) != 0) {
    fprintf(stdout, "%s: fails without a fault\n", c->name);
    return 1;
  }
  size_t want_size = 0;
  char* want = c->writes_y ? slurp(y_path, &want_size) : NULL;
  free(new_stderr());
  int failures = 0;
  long n = 1;
  for (;; ++n) {
    if (write_bytes(y_path, y_before, y_before_size) != 0)
      return failures + 1;
    long live = fault_live_blocks();
    fault_arm(n);
    int rc = pf_cli_call_main(c->argc, (char**)c->argv);
    fault_disarm();
    int fired = fault_fired();
    fflush(stdout);
    char* err = new_stderr();
    size_t y_size = 0;
    char* y = slurp(y_path, &y_size);
    const char* bad = NULL;
    if (pf_error_peek()) {
      bad = "an error is left raised";
      pf_error_clear();
    } else if (rc != 0 && (rc != 1 && rc != 2)) {
      bad = "unexpected exit status";
    } else if (rc == 2 && !(err && strstr(err, ".npy: "))) {
      /* a usage error only where an input .npy could not be read (docs/cli.md); packfn's
       * MemoryError, or an allocation of the command line's own, is exit 1 */
      bad = "ran out of memory but exited as for a usage error";
    } else if (rc != 0 && !fired) {
      bad = "failed with no allocation failure";
    } else if (rc != 0 && !(err && (strstr(err, "MemoryError") || strstr(err, "out of memory") ||
                                    strstr(err, "Cannot allocate memory")))) {
      bad = "the report does not say memory ran out";
    } else if (rc != 0 && c->writes_y &&
               !(y && y_size == y_before_size && memcmp(y, y_before, y_size) == 0)) {
      bad = "a failed call changed its output file";
    } else if (rc == 0 && c->writes_y &&
               !(y && want && y_size == want_size && memcmp(y, want, y_size) == 0)) {
      bad = "a call that succeeded wrote a wrong output";
    } else if (fault_live_blocks() - (y ? 1 : 0) - (err ? 1 : 0) != live) {
      bad = "leaked blocks";
    } else if (!no_stray_files()) {
      bad = "left a temporary file";
    }
    if (bad) {
      fprintf(stdout, "%s: allocation %ld: %s (exit %d)\n  stderr: %s\n", c->name, n, bad, rc,
              err ? err : "(unreadable)");
      ++failures;
    }
    free(y);
    free(err);
    if (!fired)
      break; /* the command completed before reaching allocation n */
  }
  fprintf(stdout, "%s: %ld allocation points swept, %d failed\n", c->name, n - 1, failures);
  free(want);
  return failures;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: pf_fault_cli DIR\n");
    return 2;
  }
  dir = argv[1];
  /* keeps libpackfn_kernels linked under --as-needed: its kernels register when it loads */
  if (pf_kernels_count() <= 0)
    return 1;
  snprintf(x_path, sizeof x_path, "%s/x.npy", dir);
  snprintf(y_path, sizeof y_path, "%s/y.npy", dir);
  snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
  snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
  /* an input tensor x (3 x 5 float32) and an output y of the same shape, filled with 7s */
  float x[15], y0[15];
  for (int i = 0; i < 15; ++i) {
    x[i] = (float)(i - 7) * 0.5f;
    y0[i] = 7.0f;
  }
  pf_npy_array_t xa;
  memset(&xa, 0, sizeof xa);
  xa.dtype = PF_DTYPE_FLOAT32;
  xa.ndim = 2;
  xa.shape[0] = 3;
  xa.shape[1] = 5;
  xa.data = x;
  xa.nbytes = sizeof x;
  char msg[256];
  pf_npy_array_t ya = xa;
  ya.data = y0;
  (void)no_stray_files(); /* what an earlier run left */
  if (pf_npy_write_file(x_path, &xa, msg, sizeof msg) != 0 ||
      pf_npy_write_file(y_path, &ya, msg, sizeof msg) != 0) {
    fprintf(stderr, "pf_fault_cli: %s\n", msg);
    return 1;
  }
  size_t y_before_size = 0;
  char* y_before = slurp(y_path, &y_before_size);
  /* the commands' reports go to files, read back after each run; the summary to the real
   * stderr */
  int real_stderr = dup(2);
  if (real_stderr < 0 || !freopen(err_path, "w", stderr) || !freopen(out_path, "w", stdout)) {
    perror("pf_fault_cli: redirecting");
    return 1;
  }
  setvbuf(stderr, NULL, _IONBF, 0);
  setvbuf(stdout, NULL, _IONBF, 0);
  static command_t commands[] = {
      {"rms_norm x.npy y.npy --out y.npy",
       7,
       {"call", "packfn.kernels.rms_norm", x_path, y_path, "1e-5", "--out", y_path, NULL},
       1},
      {"add_n literals, printed",
       5,
       {"call", "packfn.kernels.add_n", "float32[4]:1,2,3,4", "float32[4]", "2.5", NULL},
       0},
      {"add_n x.npy into a printed literal",
       5,
       {"call", "packfn.kernels.add_n", x_path, "float32[3,5]", "1.0", NULL},
       0},
  };
  int failures = 0;
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    failures += sweep(&commands[i], y_before, y_before_size);
  free(y_before);
  dprintf(real_stderr, "pf_fault_cli: %d failed points (details in %s)\n", failures, out_path);
  if (failures) { /* the details too, for CTest's log */
    size_t n = 0;
    char* details = slurp(out_path, &n);
    if (details)
      dprintf(real_stderr, "%s", details);
    free(details);
  }
  close(real_stderr);
  return failures ? 1 : 0;
}
