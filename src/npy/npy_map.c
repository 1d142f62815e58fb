/* npy_map.c: .npy files mapped into memory without a copy (private, copy-on-write maps), and
 * finding out afterwards whether the mapped data was changed. */
#include "npy_private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when data of this header can be used in place: host byte order, and C order or a layout
 * where both orders agree (at most one axis longer than 1). */
static int usable_in_place(const pf__npy_header_t* h) {
  if (h->swap) {
    return 0;
  }
  int long_axes = 0;
  for (int32_t k = 0; k < h->ndim; k++) {
    long_axes += h->shape[k] > 1;
  }
  return !h->fortran_order || long_axes <= 1;
}

/* A private, writable map of the first `length` bytes of fd (MAP_FAILED on failure). A file of
 * up to a quarter of the memory is mapped read-only with its pages populated at once (its page
 * cache pages mapped in one call instead of one fault per 16 pages while the function reads),
 * then made writable: a page the function writes still becomes a private copy at that write.
 * (Populating a writable private map instead would copy every page up front.) Without
 * `populate`, pages fault in as they are read. */
static void* pf__npy_map_private(int fd, size_t length, int populate) {
  if (populate && pf__npy_populate_fits(length)) {
    void* base = mmap(NULL, length, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (base != MAP_FAILED) {
      if (mprotect(base, length, PROT_READ | PROT_WRITE) == 0) {
        return base;
      }
      munmap(base, length);
    }
  }
  return mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
}

/* Reads the data after the header h from fp, which stands at its first byte, and closes fp:
 * from the stream already open, not the path again, since a pipe or a FIFO gives its bytes
 * once (reopening a pipe finds the header gone, a FIFO waits for another writer). */
static int read_rest(FILE* fp, const char* path, const pf__npy_header_t* h, pf_npy_map_t* out,
                     char* err, size_t err_size) {
  int rc = pf__npy_read_data_file(fp, path, h, &out->array, err, err_size);
  fclose(fp);
  return rc;
}

int pf__npy_map_file_as(const char* path, int populate, pf_npy_map_t* out, char* err,
                        size_t err_size) {
  if (out != NULL) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
  }
  if (path == NULL || out == NULL) {
    return pf__npy_fail(err, err_size, "pf_npy_map_file", "path or output is NULL");
  }
  FILE* fp = fopen(path, "rbe"); /* close-on-exec, as every descriptor here */
  if (fp == NULL) {
    return pf__npy_fail(err, err_size, path, "cannot open: %s", strerror(errno));
  }
  pf__npy_header_t h;
  size_t nbytes = 0;
  struct stat st;
  long offset = -1;
  if (pf__npy_read_header_file(fp, path, &h, &nbytes, err, err_size) != 0) {
    fclose(fp);
    return -1;
  }
  offset = ftell(fp);
  size_t itemsize = h.dtype.bits / 8u;
  if (offset < 0 || fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode) || !usable_in_place(&h) ||
      (size_t)offset % itemsize != 0 || (uint64_t)st.st_size != (uint64_t)offset + nbytes) {
    /* read it instead: a pipe, another layout, or a size the reader reports precisely */
    return read_rest(fp, path, &h, out, err, err_size);
  }
  size_t length = (size_t)st.st_size;
  void* base = pf__npy_map_private(fileno(fp), length, populate);
  if (base == MAP_FAILED) {
    return read_rest(fp, path, &h, out, err, err_size);
  }
  out->fd = fcntl(fileno(fp), F_DUPFD_CLOEXEC, 0); /* not inherited by programs run meanwhile */
  fclose(fp);
  if (out->fd < 0) {
    munmap(base, length);
    return pf__npy_fail(err, err_size, path, "cannot keep the file open: %s", strerror(errno));
  }
  out->array.dtype = h.dtype;
  out->array.ndim = h.ndim;
  memcpy(out->array.shape, h.shape, sizeof h.shape);
  out->array.fortran_order = 0;
  out->array.data = (char*)base + offset;
  out->array.nbytes = nbytes;
  out->base = base;
  out->length = length;
  out->offset = (size_t)offset;
  return 0;
}

int pf_npy_map_file(const char* path, pf_npy_map_t* out, char* err, size_t err_size) {
  return pf__npy_map_file_as(path, 1, out, err, err_size);
}

/* Compares the mapped bytes [from, to) of the map with the file. 1 differs, 0 same, -1 error. */
static int differs(const pf_npy_map_t* map, size_t from, size_t to, char* buf, size_t buf_size) {
  while (from < to) {
    size_t n = to - from < buf_size ? to - from : buf_size;
    ssize_t got = pread(map->fd, buf, n, (off_t)from);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return got == 0 ? 1 : -1; /* the file shrank: it differs */
    }
    if (memcmp(buf, (const char*)map->base + from, (size_t)got) != 0) {
      return 1;
    }
    from += (size_t)got;
  }
  return 0;
}

int pf_npy_map_changed(const pf_npy_map_t* map, int* changed, char* err, size_t err_size) {
  if (map == NULL || changed == NULL || map->base == NULL) {
    return pf__npy_fail(err, err_size, "pf_npy_map_changed", "not mapped");
  }
  *changed = 0;
  if (map->array.nbytes == 0) {
    return 0;
  }
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t first = map->offset / page, last = (map->offset + map->array.nbytes - 1) / page;
  char* buf = malloc(1u << 20);
  if (buf == NULL) {
    return pf__npy_fail(err, err_size, "pf_npy_map_changed", "out of memory");
  }
  /* /proc/self/pagemap: one 64-bit entry per virtual page; bit 63 present, 62 swapped, 61 a
   * page of a file (or shared). A page of our private map that is present and not a file page,
   * or swapped out, is a private copy: it was written. */
  int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  uintptr_t vfirst = (uintptr_t)map->base / page;
  int rc = 0;
  int read_errno = 0; /* pread's, kept from the close and free below (review) */
  for (size_t p = first; p <= last && rc == 0 && !*changed;) {
    size_t batch = last - p + 1 < 4096 ? last - p + 1 : 4096;
    uint64_t entries[4096];
    ssize_t got = pm >= 0 ? pread(pm, entries, batch * 8, (off_t)((vfirst + p) * 8)) : -1;
    if (got != (ssize_t)(batch * 8)) {
      size_t from = p * page, to = (last + 1) * page;
      from = from < map->offset ? map->offset : from;
      to = to > map->offset + map->array.nbytes ? map->offset + map->array.nbytes : to;
      rc = differs(map, from, to, buf, 1u << 20); /* no page map: compare everything left */
      *changed = rc == 1;
      rc = rc < 0 ? -1 : 0;
      read_errno = errno;
      break;
    }
    for (size_t k = 0; k < batch && !*changed; ++k) {
      uint64_t e = entries[k];
      int copied = (((e >> 63) & 1) && !((e >> 61) & 1)) || ((e >> 62) & 1);
      if (!copied) {
        continue;
      }
      size_t from = (p + k) * page, to = from + page;
      from = from < map->offset ? map->offset : from;
      to = to > map->offset + map->array.nbytes ? map->offset + map->array.nbytes : to;
      int d = differs(map, from, to, buf, 1u << 20);
      if (d < 0) {
        rc = -1;
        read_errno = errno;
      }
      *changed = d == 1;
    }
    p += batch;
  }
  if (pm >= 0) {
    close(pm);
  }
  free(buf);
  if (rc != 0) {
    return pf__npy_fail(err, err_size, "pf_npy_map_changed", "read error: %s",
                        strerror(read_errno));
  }
  /* a file that no longer holds the data differs: its truncation also took the pages written
   * into the map past its new end (the kernel drops private copies with the file's pages), so
   * the page map shows nothing written there (it said unchanged; coverage review). Checked
   * after the page map was read: checked before, a truncation while it was read went unseen
   * (review) */
  struct stat st;
  if (!*changed && fstat(map->fd, &st) == 0 &&
      (uint64_t)st.st_size < (uint64_t)map->offset + map->array.nbytes) {
    *changed = 1;
  }
  return 0;
}

void pf_npy_map_release(pf_npy_map_t* map) {
  if (map == NULL) {
    return;
  }
  if (map->base != NULL) {
    munmap(map->base, map->length);
  } else {
    pf_npy_array_free(&map->array);
  }
  /* only a mapped file keeps its fd: a zeroed map's fd 0 (base NULL) is stdin, not ours */
  if (map->base != NULL && map->fd >= 0) {
    close(map->fd);
  }
  memset(map, 0, sizeof *map);
  map->fd = -1;
}
