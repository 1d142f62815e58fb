/* pf_fault_npy: the .npy writer and mapped reader (libpackfn_npy) under allocation failure. It
 * links the malloc interposer of pf_fault and runs each program below failing allocation N for
 * every N from 1 until the program completes without reaching its Nth allocation. Each run must
 *   - fail with -1 and a message that says memory ran out ("out of memory" or strerror(ENOMEM)),
 *     its target file untouched,
 *   - or succeed with the right file (a failure absorbed: a temporary named another way),
 * and either way leak nothing (fault_alloc.c counts blocks) and leave no temporary file.
 *   pf_fault_npy DIR     (a scratch folder)
 * Exit status 0 when every point passed; 1 with each failed point printed otherwise. */
#define _DEFAULT_SOURCE /* syscall, symlink */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fault.h"
#include "packfn/npy.h"

/* linkat as libpackfn_npy sees it: while linkat_fails, EXDEV, as a sandbox that refuses to name
 * an unnamed file through /proc answers (the writer then makes a named copy) */
static int linkat_fails;
__attribute__((visibility("default"))) int linkat(int olddirfd, const char* oldpath, int newdirfd,
                                                  const char* newpath, int flags) {
  if (linkat_fails) {
    errno = EXDEV;
    return -1;
  }
  return (int)syscall(SYS_linkat, olddirfd, oldpath, newdirfd, newpath, flags);
}

static const char* dir;
static char x_path[4096], y_path[4096], link_path[4096];

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
  if (data)
    *size = (size_t)n;
  return data;
}

/* 1 when DIR holds only x.npy, y.npy and link.npy; other files are reported and removed. */
static int no_stray_files(void) {
  DIR* d = opendir(dir);
  if (!d)
    return 0;
  int clean = 1;
  struct dirent* e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
        strcmp(e->d_name, "x.npy") != 0 && strcmp(e->d_name, "y.npy") != 0 &&
        strcmp(e->d_name, "link.npy") != 0) {
      printf("stray file %s\n", e->d_name);
      clean = 0;
      char path[8192];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  closedir(d);
  return clean;
}

static float values[15];
static const pf_npy_array_t* y_array(void) {
  static pf_npy_array_t a;
  memset(&a, 0, sizeof a);
  a.dtype.code = kDLFloat;
  a.dtype.bits = 32;
  a.dtype.lanes = 1;
  a.ndim = 2;
  a.shape[0] = 3;
  a.shape[1] = 5;
  a.data = values;
  a.nbytes = sizeof values;
  return &a;
}

/* The programs: 0, or -1 with a message in err. */
static int write_through_link(char* err, size_t size) {
  return pf_npy_write_file(link_path, y_array(), err, size);
}

static int write_named_copy(char* err, size_t size) {
  linkat_fails = 1;
  int rc = pf_npy_write_file(y_path, y_array(), err, size);
  linkat_fails = 0;
  return rc;
}

static int map_from_init(char* err, size_t size) {
  pf_npy_output_t out;
  if (pf_npy_output_open(y_path, &out, err, size) != 0)
    return -1;
  pf_npy_array_t desc = *y_array();
  desc.data = NULL;
  void* data = NULL;
  pf_npy_array_t arr = *y_array();
  if (pf_npy_output_map(&out, &desc, x_path, &data, err, size) != 0) {
    pf_npy_output_abort(&out, 1);
    return -1;
  }
  arr.data = data; /* x's values, as the sweep's reference run wrote them */
  if (pf_npy_output_write(&out, &arr, err, size) != 0) {
    pf_npy_output_abort(&out, 1);
    return -1;
  }
  return pf_npy_output_commit(&out, 1, err, size);
}

static int map_and_compare(char* err, size_t size) {
  pf_npy_map_t m;
  if (pf_npy_map_file(x_path, &m, err, size) != 0)
    return -1;
  int changed = -1;
  ((float*)m.array.data)[1] += 1.0f; /* a private copy of the page, compared with the file */
  int rc = pf_npy_map_changed(&m, &changed, err, size);
  pf_npy_map_release(&m);
  if (rc == 0 && changed != 1) {
    snprintf(err, size, "a changed map was found unchanged");
    return -2; /* never a memory error: reported as wrong */
  }
  return rc;
}

/* y's values in Fortran order: read back, transposed into a second buffer */
static unsigned char fortran_image[256];
static size_t fortran_image_size;
static int read_fortran_order(char* err, size_t size) {
  pf_npy_array_t arr;
  if (pf_npy_read_buffer(fortran_image, fortran_image_size, &arr, err, size) != 0)
    return -1;
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; ++i)
    for (int j = 0; j < 5 && rc == 0; ++j)
      if (((float*)arr.data)[5 * i + j] != values[5 * i + j]) {
        snprintf(err, size, "element (%d, %d) read wrong", i, j);
        rc = -2; /* never a memory error: reported as wrong */
      }
  pf_npy_array_free(&arr);
  return rc;
}

typedef struct {
  const char* name;
  int (*run)(char* err, size_t size);
  int writes_y;
} program_t;

/* Sweeps one program; returns the number of failed points. */
static int sweep(const program_t* p, const char* y_before, size_t y_before_size) {
  char err[512];
  FILE* f;
  if (!(f = fopen(y_path, "wb")) || fwrite(y_before, 1, y_before_size, f) != y_before_size ||
      fclose(f) != 0)
    return 1;
  if (p->run(err, sizeof err) != 0) {
    printf("%s: fails without a fault: %s\n", p->name, err);
    return 1;
  }
  size_t want_size = 0;
  char* want = p->writes_y ? slurp(y_path, &want_size) : NULL;
  int failures = 0;
  long n = 1;
  for (;; ++n) {
    if (!(f = fopen(y_path, "wb")) || fwrite(y_before, 1, y_before_size, f) != y_before_size ||
        fclose(f) != 0)
      return failures + 1;
    long live = fault_live_blocks();
    err[0] = '\0';
    fault_arm(n);
    int rc = p->run(err, sizeof err);
    fault_disarm();
    int fired = fault_fired();
    size_t y_size = 0;
    char* y = slurp(y_path, &y_size);
    const char* bad = NULL;
    if (rc != 0 && rc != -1) {
      bad = "wrong result";
    } else if (rc != 0 && !fired) {
      bad = "failed with no allocation failure";
    } else if (rc != 0 && !strstr(err, "out of memory") && !strstr(err, "Cannot allocate memory")) {
      bad = "the message does not say memory ran out";
    } else if (rc != 0 && p->writes_y &&
               !(y && y_size == y_before_size && memcmp(y, y_before, y_size) == 0)) {
      bad = "a failed call changed its target";
    } else if (rc == 0 && p->writes_y &&
               !(y && want && y_size == want_size && memcmp(y, want, y_size) == 0)) {
      bad = "a call that succeeded wrote a wrong file";
    } else if (fault_live_blocks() - (y ? 1 : 0) != live) {
      bad = "leaked blocks";
    } else if (!no_stray_files()) {
      bad = "left a temporary file";
    }
    if (bad) {
      printf("%s: allocation %ld: %s (rc %d): %s\n", p->name, n, bad, rc, err);
      ++failures;
    }
    free(y);
    if (!fired)
      break; /* the program completed before reaching allocation n */
  }
  printf("%s: %ld allocation points swept, %d failed\n", p->name, n - 1, failures);
  free(want);
  return failures;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: pf_fault_npy DIR\n");
    return 2;
  }
  dir = argv[1];
  snprintf(x_path, sizeof x_path, "%s/x.npy", dir);
  snprintf(y_path, sizeof y_path, "%s/y.npy", dir);
  snprintf(link_path, sizeof link_path, "%s/link.npy", dir);
  char err[512];
  for (int i = 0; i < 15; ++i)
    values[i] = (float)i * 0.5f;
  (void)no_stray_files(); /* what an earlier run left */
  unlink(link_path);
  if (pf_npy_write_file(x_path, y_array(), err, sizeof err) != 0 || symlink("y.npy", link_path)) {
    fprintf(stderr, "pf_fault_npy: setting up %s: %s\n", dir, err);
    return 1;
  }
  for (int i = 0; i < 15; ++i)
    values[i] = 7.0f; /* y before each run: 7s; what the programs write: x's values */
  if (pf_npy_write_file(y_path, y_array(), err, sizeof err) != 0)
    return 1;
  size_t y_before_size = 0;
  char* y_before = slurp(y_path, &y_before_size);
  for (int i = 0; i < 15; ++i)
    values[i] = (float)i * 0.5f;
  static const char dict[] = "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 5), }";
  size_t hlen = 128 - 10; /* the dict padded with spaces, ended with a newline */
  memcpy(fortran_image, "\x93NUMPY\x01\x00", 8);
  fortran_image[8] = (unsigned char)hlen;
  fortran_image[9] = 0;
  memset(fortran_image + 10, ' ', hlen);
  memcpy(fortran_image + 10, dict, sizeof dict - 1);
  fortran_image[10 + hlen - 1] = '\n';
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j)
      memcpy(fortran_image + 128 + 4 * (i + 3 * j), &values[5 * i + j], 4);
  fortran_image_size = 128 + sizeof values;
  static const program_t programs[] = {
      {"pf_npy_write_file through a symbolic link", write_through_link, 1},
      {"pf_npy_write_file, linkat refused (named copy)", write_named_copy, 1},
      {"pf_npy_output_map from x.npy, write, commit", map_from_init, 1},
      {"pf_npy_map_file, write into the map, pf_npy_map_changed", map_and_compare, 0},
      {"pf_npy_read_buffer of a Fortran-order image", read_fortran_order, 0},
  };
  int failures = y_before ? 0 : 1;
  for (size_t i = 0; y_before && i < sizeof programs / sizeof programs[0]; ++i)
    failures += sweep(&programs[i], y_before, y_before_size);
  free(y_before);
  printf("pf_fault_npy: %d failed points\n", failures);
  return failures ? 1 : 0;
}
