/* npy_write.c: the .npy writer: version 1.0 files, byte for byte what np.save writes, replacing
 * their targets atomically (a temporary file beside the target, fsync when it replaces a file,
 * rename). */
#include "npy_private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h> /* statfs */
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/capability.h> /* capget */
#include <linux/fs.h>         /* FS_IOC_GETFLAGS */
#include <linux/magic.h>      /* PROC_SUPER_MAGIC */
#include <sys/syscall.h>
#endif

/* NumPy pads the header so that the data starts on a multiple of 64 bytes (for mmap). */
#define NPY_ALIGN 64
/* NumPy leaves room after the dict for the first axis to grow in place to 21 digits, the length
 * of str(8 * 2**64 - 1); we write the same spaces so our files match NumPy's byte for byte. */
#define NPY_GROWTH_DIGITS 21

/* Checks that arr describes itself consistently; writes its descr. */
static int check_array(const pf_npy_array_t* arr, char* descr, size_t descr_size, const char* name,
                       char* err, size_t err_size) {
  if (pf_npy_dtype_descr(arr->dtype, descr, descr_size) != 0) {
    return pf__npy_fail(err, err_size, name,
                        "dtype (code %d, bits %d, lanes %d) has no .npy equivalent",
                        arr->dtype.code, arr->dtype.bits, arr->dtype.lanes);
  }
  if (arr->ndim < 0 || arr->ndim > PF_NPY_MAX_NDIM) {
    return pf__npy_fail(err, err_size, name, "ndim is %d: expected 0 to %d", (int)arr->ndim,
                        PF_NPY_MAX_NDIM);
  }
  size_t count = 0;
  size_t nbytes = 0;
  if (pf__npy_array_size(arr->shape, arr->ndim, arr->dtype.bits / 8u, &count, &nbytes) != 0) {
    char shape[PF_NPY_MAX_NDIM * 22 + 4];
    pf__npy_format_shape(shape, sizeof shape, arr->shape, arr->ndim);
    return pf__npy_fail(err, err_size, name, "shape %s is negative or too large", shape);
  }
  if (arr->nbytes != nbytes) {
    return pf__npy_fail(err, err_size, name, "nbytes is %zu, but the shape and dtype need %zu",
                        arr->nbytes, nbytes);
  }
  if (arr->data == NULL && nbytes > 0) {
    return pf__npy_fail(err, err_size, name, "data is NULL");
  }
  if (arr->fortran_order) {
    return pf__npy_fail(err, err_size, name, "fortran_order is set: the data must be in C order");
  }
  return 0;
}

/* Writes NumPy's own header for a C-order array into buf: magic, version 1.0, length, the dict
 * with its keys sorted, spare spaces for growth, padding to NPY_ALIGN and a newline. Returns
 * its length, or 0 if buf is too small. (With at most 32 dimensions the header stays under a
 * kilobyte, far below version 1.0's 65535-byte limit, so version 2.0 is never needed.) */
static size_t build_header(char* buf, size_t size, const char* descr, const int64_t* shape,
                           int32_t ndim) {
  char shape_repr[PF_NPY_MAX_NDIM * 22 + 4];
  pf__npy_format_shape(shape_repr, sizeof shape_repr, shape, ndim);
  const size_t prefix = NPY_MAGIC_LEN + 4;
  int n = snprintf(buf + prefix, size > prefix ? size - prefix : 0,
                   "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape_repr);
  if (n < 0 || size <= prefix || (size_t)n >= size - prefix) {
    return 0;
  }
  size_t dict_len = (size_t)n;
  if (ndim > 0) {
    char first[24];
    int digits = snprintf(first, sizeof first, "%" PRId64, shape[0]);
    dict_len += NPY_GROWTH_DIGITS > digits ? (size_t)(NPY_GROWTH_DIGITS - digits) : 0;
  }
  size_t text_len = dict_len + 1; /* the newline */
  /* NumPy's rule, which pads a whole NPY_ALIGN when already aligned. */
  size_t pad = NPY_ALIGN - (prefix + text_len) % NPY_ALIGN;
  size_t total = prefix + text_len + pad;
  if (total > size || text_len + pad > 65535) {
    return 0;
  }
  memset(buf + prefix + (size_t)n, ' ', total - prefix - (size_t)n);
  buf[total - 1] = '\n';
  memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (char)((text_len + pad) & 0xff);
  buf[9] = (char)((text_len + pad) >> 8);
  return total;
}

/* A malloc'ed copy of s[0..n). */
static char* dup_n(const char* s, size_t n) {
  char* d = malloc(n + 1);
  if (d != NULL) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* What a file of mode `mode` is, for messages. */
static const char* file_kind(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

/* Writes all of buf to fd. 0, or -1 with errno set. */
static int write_all(int fd, const void* buf, size_t n) {
  const char* p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      if (w == 0) {
        errno = EIO;
      }
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The name of a temporary file beside target (dir_len bytes of folder): ".NAME.PID.N.tmp", NAME
 * cut to 200 bytes so that the whole fits in a file name (255 bytes) for any target name. */
static int temp_name(const char* target, size_t dir_len, unsigned long salt, char* tmp,
                     size_t tmp_size) {
  const char* base = target + dir_len;
  int base_len = strlen(base) > 200 ? 200 : (int)strlen(base);
  return snprintf(tmp, tmp_size, "%.*s.%.*s.%ld.%lx.tmp", (int)dir_len, target, base_len, base,
                  (long)getpid(), salt) < (int)tmp_size
             ? 0
             : -1;
}

static unsigned long temp_salt(const void* seed) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (unsigned long)now.tv_nsec ^ (unsigned long)(uintptr_t)seed;
}

/* Creates a named temporary file beside target: 0 with *fd and *tmp (malloc'ed), or -1 with
 * errno. */
static int output_temp(const char* target, size_t dir_len, mode_t mode, int* fd, char** tmp) {
  size_t tmp_size = strlen(target) + 64;
  *tmp = malloc(tmp_size);
  if (*tmp == NULL) {
    errno = ENOMEM;
    return -1;
  }
  unsigned long salt = temp_salt(tmp);
  *fd = -1;
  for (int attempt = 0; *fd < 0 && attempt < 100; ++attempt) {
    if (temp_name(target, dir_len, salt + (unsigned long)attempt, *tmp, tmp_size) != 0) {
      errno = ENAMETOOLONG;
      break;
    }
    *fd = open(*tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (*fd < 0 && errno != EEXIST) {
      break;
    }
  }
  if (*fd < 0) {
    int e = errno;
    free(*tmp);
    *tmp = NULL;
    errno = e;
    return -1;
  }
  return 0;
}

/* output_name where linkat refuses to name the unnamed file (a sandbox, an odd /proc): a named
 * temporary file beside the target gets a copy of its bytes and its mode (the target's, which
 * open reduces by the umask: 0664 became 0644) and takes its place in `out` (the output was
 * written, then lost with a misleading error; review). 0, or -1 with errno. */
static int output_name_by_copy(pf_npy_output_t* out, size_t dir_len) {
  struct stat st;
  int fd;
  char* tmp;
  if (fstat(out->fd, &st) != 0 || output_temp(out->path, dir_len, st.st_mode & 07777, &fd, &tmp))
    return -1;
  (void)fchmod(fd, st.st_mode & 07777); /* as pf_npy_output_open does for its file */
  off_t in = 0, to = 0;
  size_t left = (size_t)st.st_size;
  while (left > 0) {
    ssize_t n = copy_file_range(out->fd, &in, fd, &to, left, 0);
    if (n <= 0)
      break;
    left -= (size_t)n;
  }
  char buf[65536];
  while (left > 0) { /* where copy_file_range does not work: read and write */
    ssize_t n = pread(out->fd, buf, left < sizeof buf ? left : sizeof buf, in);
    if (n <= 0 || pwrite(fd, buf, (size_t)n, to) != n)
      break;
    in += n;
    to += n;
    left -= (size_t)n;
  }
  if (left > 0) {
    int e = left > 0 && errno == 0 ? EIO : errno;
    close(fd);
    unlink(tmp);
    free(tmp);
    errno = e;
    return -1;
  }
  close(out->fd);
  out->fd = fd;
  out->tmp_path = tmp;
  return 0;
}

/* Gives an unnamed output file (O_TMPFILE) its temporary name, once written, so that commit
 * can rename it over the target: 0, or -1 with errno. A named one is left as it is. */
static int output_name(pf_npy_output_t* out) {
  if (out->tmp_path != NULL) {
    return 0;
  }
  const char* slash = strrchr(out->path, '/');
  size_t dir_len = slash == NULL ? 0 : (size_t)(slash - out->path) + 1;
  size_t tmp_size = strlen(out->path) + 64;
  char* tmp = malloc(tmp_size);
  if (tmp == NULL) {
    errno = ENOMEM;
    return -1;
  }
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", out->fd);
  unsigned long salt = temp_salt(tmp);
  int rc = -1;
  for (int attempt = 0; rc != 0 && attempt < 100; ++attempt) {
    if (temp_name(out->path, dir_len, salt + (unsigned long)attempt, tmp, tmp_size) != 0) {
      errno = ENAMETOOLONG;
      break;
    }
    rc = linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW);
    if (rc != 0 && errno != EEXIST) {
      break;
    }
  }
  free(rc == 0 ? NULL : tmp);
  if (rc == 0) {
    out->tmp_path = tmp;
    return 0;
  }
  return output_name_by_copy(out, dir_len);
}

/* 1 when the file or folder at `path` is flagged immutable or append-only (chattr +i, +a),
 * where a rename cannot replace or remove it; 0 when not, or when that cannot be read. */
static int no_rename_flags(const char* path) {
#if defined(FS_IOC_GETFLAGS) && defined(FS_IMMUTABLE_FL) && defined(FS_APPEND_FL)
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return 0;
  int flags = 0; /* the kernel writes an int, whatever the ioctl's declared type */
  int r = ioctl(fd, FS_IOC_GETFLAGS, &flags);
  close(fd);
  return r == 0 && (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)) != 0;
#else
  (void)path;
  return 0;
#endif
}

/* Whether `id` (as this process sees it) lies in the inside ranges of `map_file` (a user
 * namespace's /proc/self/uid_map or gid_map: "inside outside count" lines), and is not, in a
 * user namespace, the overflow id of `overflow_file`; 1 where the map cannot be read (a system
 * without user namespaces: every id is mapped). */
static int id_mapped(const char* map_file, const char* overflow_file, unsigned long id) {
  FILE* f = fopen(map_file, "re");
  if (f == NULL) {
    return 1;
  }
  unsigned long inside, outside, count;
  int mapped = 0, whole = 0;
  while (!mapped && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3) {
    mapped = id >= inside && id - inside < count;
    whole = whole || (inside == 0 && outside == 0 && count == 4294967295ul);
  }
  fclose(f);
  if (!mapped || whole) {
    return mapped; /* the initial namespace maps every id */
  }
  /* in a user namespace the overflow id (65534) is also what an unmapped owner shows as, and
   * namespaces often map it (podman: "1 100000 65536"): such an owner is taken as unmapped
   * (it was let through, and the rename refused; review) */
  unsigned long overflow = 65534;
  FILE* o = fopen(overflow_file, "re");
  if (o != NULL) {
    if (fscanf(o, "%lu", &overflow) != 1) {
      overflow = 65534;
    }
    fclose(o);
  }
  return id != overflow;
}

/* Whether the calling thread may replace the file of stat `st`, another user's, in a sticky
 * folder, as the kernel decides it: CAP_FOWNER in the thread's effective set (capget of this
 * thread: /proc/self/status shows the main thread's, and another thread may have dropped it;
 * not only root holds it; review), and, in a user namespace, the file's owner and group mapped
 * into it (the capability reaches no other file). Where capget is missing, being root. */
static int may_replace_others_file(const struct stat* st) {
  int fowner;
#if defined(__linux__) && defined(SYS_capget) && defined(_LINUX_CAPABILITY_VERSION_3)
  struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capget, &head, data) == 0) {
    fowner = (data[0].effective >> CAP_FOWNER) & 1u;
  } else {
    fowner = geteuid() == 0;
  }
#else
  fowner = geteuid() == 0;
#endif
  return fowner &&
         id_mapped("/proc/self/uid_map", "/proc/sys/kernel/overflowuid",
                   (unsigned long)st->st_uid) &&
         id_mapped("/proc/self/gid_map", "/proc/sys/kernel/overflowgid", (unsigned long)st->st_gid);
}

/* Why the rename that commits an output could not put it at `target` in its folder (the first
 * `dir_len` bytes of target; "." when 0), replacing the regular file there when `st` is not
 * NULL (its stat), found before the call, so that a commit of several outputs does not stop
 * half way (review: each of these passed the check and failed at the rename, after earlier
 * outputs were in place): a file not writable, on a read-only file system, flagged immutable
 * or append-only, a folder flagged so (no entry may be removed there, the temporary name's
 * included), or another user's file in a sticky folder (only its owner, the folder's owner or
 * a privileged process may replace it there). NULL when nothing says so. */
static const char* rename_refusal(const char* target, size_t dir_len, const struct stat* st) {
  if (st != NULL && faccessat(AT_FDCWD, target, W_OK, AT_EACCESS) != 0) {
    if (errno == EACCES)
      return "is not writable";
    if (errno == EROFS)
      return "is on a read-only file system";
    if (errno == EPERM)
      return "is flagged immutable (chattr +i)";
  }
  if (st != NULL && no_rename_flags(target))
    return "is flagged immutable or append-only (chattr)";
  char* dir = dir_len > 0 ? dup_n(target, dir_len) : dup_n(".", 1);
  if (dir == NULL)
    return NULL; /* out of memory: the commit will tell */
  struct stat ds;
  int dir_known = stat(dir, &ds) == 0;
  int dir_flags = no_rename_flags(dir);
  free(dir);
  if (dir_flags)
    return "is in a folder flagged immutable or append-only (chattr), where no name may be "
           "replaced or removed";
  uid_t me = geteuid();
  if (st != NULL && dir_known && (ds.st_mode & S_ISVTX) && me != st->st_uid && me != ds.st_uid &&
      !may_replace_others_file(st))
    return "belongs to another user in a sticky folder, where only its owner may replace it";
  return NULL;
}

/* 1 when the folder `real` (a resolved path) is a descriptor folder, PROC/PID/fd or
 * PROC/PID/task/TID/fd: named "fd" on a procfs, which need not be mounted at /proc (a
 * container's /host/proc, a chroot's proc seen from outside: such links were let through). */
static int is_fd_folder(const char* real) {
  size_t n = strlen(real);
  if (n < 3 || strcmp(real + n - 3, "/fd") != 0) {
    return 0;
  }
#if defined(__linux__) && defined(PROC_SUPER_MAGIC)
  struct statfs fs;
  if (statfs(real, &fs) == 0) {
    return fs.f_type == PROC_SUPER_MAGIC;
  }
#endif
  return n > 9 && strncmp(real, "/proc/", 6) == 0;
}

/* 1 when `path` reaches its file through a descriptor link, an entry of /proc/PID/fd (which
 * /dev/stdout, /dev/stderr and /dev/fd/N are or lead to), wherever procfs is mounted: it names
 * a stream open in some process, not a file to replace. Renaming over the file behind it
 * (stdout redirected to a file) wrote beside the stream: `>> log` lost the log's lines, and what
 * the process printed after went to the replaced, unlinked file (review). 0 otherwise, also
 * when it cannot tell. */
static int through_fd_link(const char* path) {
  char cur[PATH_MAX], next[PATH_MAX];
  if (strlen(path) >= sizeof cur) {
    return 0;
  }
  strcpy(cur, path);
  for (int hops = 0; hops < 40; ++hops) { /* as many links as the kernel follows */
    struct stat st;
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) {
      return 0;
    }
    const char* slash = strrchr(cur, '/');
    size_t dir_len = slash == NULL ? 0 : slash == cur ? 1 : (size_t)(slash - cur);
    char* dir = dir_len > 0 ? dup_n(cur, dir_len) : dup_n(".", 1);
    char* real = dir != NULL ? realpath(dir, NULL) : NULL;
    free(dir);
    int fd_dir = real != NULL && is_fd_folder(real);
    free(real);
    if (fd_dir) {
      return 1;
    }
    ssize_t len = readlink(cur, next, sizeof next - 1);
    if (len < 0) {
      return 0;
    }
    next[len] = '\0';
    if (next[0] == '/') {
      memcpy(cur, next, (size_t)len + 1);
    } else { /* relative to the link's folder */
      size_t keep = slash == NULL ? 0 : (size_t)(slash - cur) + 1;
      if (keep + (size_t)len >= sizeof cur) {
        return 0;
      }
      memcpy(cur + keep, next, (size_t)len + 1);
    }
  }
  return 0;
}

/* fd of an output whose write failed: commit refuses it as not written (-1 is "written"; a
 * failed write has no temporary name to rename, so the commit skipped it and returned 0
 * without writing anything; review). */
#define PF__NPY_WRITE_FAILED (-2)

int pf_npy_output_open(const char* path, pf_npy_output_t* out, char* err, size_t err_size) {
  if (out == NULL || path == NULL || path[0] == '\0') {
    return pf__npy_fail(err, err_size, "pf_npy_output_open", "path or output is NULL or empty");
  }
  memset(out, 0, sizeof *out);
  out->fd = -1;
  struct stat st;
  int exists = lstat(path, &st) == 0;
  struct stat fd_file; /* a stream that is no regular file is refused below, saying what it is */
  if (exists && S_ISLNK(st.st_mode) && stat(path, &fd_file) == 0 && S_ISREG(fd_file.st_mode) &&
      through_fd_link(path)) {
    return pf__npy_fail(err, err_size, path,
                        "names an open file descriptor (/proc/PID/fd/N), not a file: refusing "
                        "to replace what it is open on");
  }
  char* target = exists && S_ISLNK(st.st_mode) ? realpath(path, NULL) : dup_n(path, strlen(path));
  if (exists && S_ISLNK(st.st_mode) && target == NULL && errno == ENOENT) {
    /* a link to a pipe or socket through /proc/self/fd (/dev/stdin of a pipeline) has a
     * target realpath cannot name ("pipe:[N]"), yet it is there (review): the path itself then
     * goes to the check below, which refuses what is not a regular file */
    struct stat to;
    if (stat(path, &to) != 0 || S_ISREG(to.st_mode)) {
      return pf__npy_fail(err, err_size, path, "a symbolic link to a missing file: refusing it");
    }
    target = dup_n(path, strlen(path));
  }
  if (target == NULL) {
    return pf__npy_fail(err, err_size, path, "cannot resolve the path: %s", strerror(errno));
  }
  exists = stat(target, &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    pf__npy_fail(err, err_size, path, "not a regular file (%s): refusing to replace it",
                 file_kind(st.st_mode));
    free(target);
    return -1;
  }
  const char* slash = strrchr(target, '/');
  size_t dir_len = slash == NULL ? 0 : (size_t)(slash - target) + 1;
  const char* base = target + dir_len;
  if (base[0] == '\0') {
    pf__npy_fail(err, err_size, path, "names a folder, not a file");
    free(target);
    return -1;
  }
  /* a file we may not write: a rename would replace it all the same; refuse, as cp and
   * numpy.save do (review); and what a rename could not replace, refused before the call */
  const char* refusal = rename_refusal(target, dir_len, exists ? &st : NULL);
  if (refusal != NULL) {
    pf__npy_fail(err, err_size, path, "%s: refusing to %s it", refusal,
                 exists ? "replace" : "write");
    free(target);
    return -1;
  }
  mode_t mode = exists ? st.st_mode & 07777 : 0666;
  int fd = -1;
#ifdef O_TMPFILE
  /* An unnamed file in the target's folder, named only when it is written (output_name): a
   * process killed meanwhile (an interrupt, a SIGBUS from an input truncated under its map)
   * leaves nothing behind, where a named temporary stayed, as large as the output (review).
   * Naming goes through /proc/self/fd; without /proc, or where the file system has no unnamed
   * files, the temporary is named at once, as before. */
  char* tmp = NULL;
  if (access("/proc/self/fd", X_OK) == 0) {
    char* dir = dir_len > 0 ? dup_n(target, dir_len) : dup_n(".", 1);
    if (dir != NULL) {
      fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
      free(dir);
    }
  }
#endif
  if (fd < 0 && output_temp(target, dir_len, mode, &fd, &tmp) != 0) {
    int e = errno;
    if (dir_len > 1) {
      pf__npy_fail(err, err_size, path, "cannot create a file in '%.*s': %s", (int)dir_len - 1,
                   target, strerror(e));
    } else {
      pf__npy_fail(err, err_size, path, "cannot create a file in '%s': %s",
                   dir_len == 1 ? "/" : ".", strerror(e));
    }
    free(target);
    return -1;
  }
  if (exists) {
    (void)fchmod(fd, mode); /* open's mode was reduced by the umask */
  }
  out->path = target;
  out->tmp_path = tmp; /* NULL while the file is unnamed */
  out->fd = fd;
  return 0;
}

/* Flushes the temporary file to disk (fsync) when its rename will replace an existing file, so
 * that a crash after the rename cannot leave a file whose data never reached the disk in place of
 * the old one. A new target replaces nothing and is not flushed, as cp and numpy.save do not
 * flush: a crash may then lose the new file's data, never an older file's (and a write error
 * that only shows at writeback goes unreported, as with cp). A target stat cannot see for any
 * other reason than its absence is flushed. 1 on success, 0 with errno. */
static int flush_if_replacing(const pf_npy_output_t* out) {
  struct stat st;
  if (stat(out->path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
    return 1;
  }
  return fsync(out->fd) == 0;
}

int pf_npy_output_write(pf_npy_output_t* out, const pf_npy_array_t* arr, char* err,
                        size_t err_size) {
  /* path is NULL in a zeroed (never opened) or released output: its fd is no file of ours,
   * even when it reads 0 (stdin) */
  if (out == NULL || out->path == NULL || out->fd < 0 || arr == NULL) {
    return pf__npy_fail(err, err_size, "pf_npy_output_write", "output not open, or array is NULL");
  }
  const char* name = out->path;
  char descr[8];
  if (check_array(arr, descr, sizeof descr, name, err, err_size) != 0) {
    return -1;
  }
  if (out->map != NULL) {
    char* data = (char*)out->map + (out->map_length - out->nbytes);
    if (arr->nbytes != out->nbytes) {
      return pf__npy_fail(err, err_size, name, "%zu bytes of data for a file mapped for %zu",
                          arr->nbytes, out->nbytes);
    }
    /* the header the map was laid out with must be this array's: the same bytes as another
     * dtype or shape kept the mapped header over them (review) */
    char header[2048];
    size_t header_len = build_header(header, sizeof header, descr, arr->shape, arr->ndim);
    if (header_len != out->map_length - out->nbytes || memcmp(header, out->map, header_len) != 0) {
      return pf__npy_fail(err, err_size, name,
                          "an array of dtype '%s' and %d dimension%s for a file mapped for "
                          "another dtype or shape",
                          descr, (int)arr->ndim, arr->ndim == 1 ? "" : "s");
    }
    if (arr->data != data && arr->nbytes > 0) {
      memcpy(data, arr->data, arr->nbytes);
    }
    /* when flushed: the pages dirtied through the map */
    int ok = output_name(out) == 0 && flush_if_replacing(out);
    int saved_errno = errno;
    if (close(out->fd) != 0 && ok) {
      ok = 0;
      saved_errno = errno;
    }
    out->fd = ok ? -1 : PF__NPY_WRITE_FAILED;
    return ok ? 0 : pf__npy_fail(err, err_size, name, "write error: %s", strerror(saved_errno));
  }
  char header[2048];
  size_t header_len = build_header(header, sizeof header, descr, arr->shape, arr->ndim);
  if (header_len == 0) {
    return pf__npy_fail(err, err_size, name,
                        "header does not fit"); /* unreachable: see build_header */
  }
  int ok = write_all(out->fd, header, header_len) == 0 &&
           (arr->nbytes == 0 || write_all(out->fd, arr->data, arr->nbytes) == 0) &&
           output_name(out) == 0 && flush_if_replacing(out);
  int saved_errno = errno;
  if (close(out->fd) != 0 && ok) {
    ok = 0;
    saved_errno = errno;
  }
  out->fd = ok ? -1 : PF__NPY_WRITE_FAILED;
  if (!ok) {
    return pf__npy_fail(err, err_size, name, "write error: %s", strerror(saved_errno));
  }
  return 0;
}

/* Allocates the blocks of the file's first `length` bytes (fallocate: they read as zeros), so
 * that a full disk or a quota is an error here, before the call, rather than a SIGBUS when the
 * function first writes a page of the shared map. A length beyond the space the file system
 * says an unprivileged writer has left fails at once (ENOSPC) without allocating, also for
 * root: counting root's reserved blocks (tried after a review) let such a fallocate fill them,
 * and the disk for every other writer meanwhile (CI's other tests failed to write): a fallocate
 * that fails keeps what it allocated until the file is removed, which on ext4 can fill the
 * disk for every other writer meanwhile; such a failure also truncates the file at once. 0, or
 * -1 with errno; a file system that cannot reserve blocks (EOPNOTSUPP) leaves the file sparse
 * and counts as success. */
static int reserve_blocks(int fd, size_t length) {
  struct statvfs fs;
  if (length == 0) {
    return 0;
  }
  if (fstatvfs(fd, &fs) == 0 && fs.f_blocks > 0 && fs.f_frsize > 0 &&
      (uint64_t)fs.f_bavail < ((uint64_t)length + fs.f_frsize - 1) / fs.f_frsize) {
    errno = ENOSPC;
    return -1;
  }
  int rc;
  do {
    rc = fallocate(fd, 0, 0, (off_t)length);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0 || errno == EOPNOTSUPP || errno == ENOSYS) {
    return 0;
  }
  int e = errno;
  if (ftruncate(fd, 0) != 0) {
    /* nothing more to give back: the reservation's error is the one reported */
  }
  errno = e;
  return -1;
}

/* Makes every page of a shared map of up to a quarter of the memory writable at once
 * (MADV_POPULATE_WRITE, Linux 5.14): one call instead of a write fault per page while the
 * function fills it. Best effort: where it fails the pages fault in as they are written. */
static void populate_for_write(void* map, size_t length) {
#ifdef MADV_POPULATE_WRITE
  if (pf__npy_populate_fits(length)) {
    (void)madvise(map, length, MADV_POPULATE_WRITE);
  }
#else
  (void)map;
  (void)length;
#endif
}

/* Returns the temporary file of an output whose pf_npy_output_map failed after writing into it
 * to what pf_npy_output_open left: empty, written from its start, its reserved blocks given
 * back; a pf_npy_output_write after the refused map wrote after the header the map had laid
 * out, and committed a file of two headers (review). Where that fails the output counts as a
 * failed write, which commit refuses. -1 (the caller's error is in err). */
static int output_map_undo(pf_npy_output_t* out) {
  if (ftruncate(out->fd, 0) != 0 || lseek(out->fd, 0, SEEK_SET) != 0) {
    close(out->fd);
    out->fd = PF__NPY_WRITE_FAILED;
  }
  return -1;
}

int pf_npy_output_map(pf_npy_output_t* out, const pf_npy_array_t* desc, const char* init,
                      void** data, char* err, size_t err_size) {
  if (out == NULL || out->path == NULL || out->fd < 0 || out->map != NULL || desc == NULL ||
      data == NULL) {
    return pf__npy_fail(err, err_size, "pf_npy_output_map",
                        "output not open or already mapped, or NULL argument");
  }
  const char* name = out->path;
  if (desc->ndim < 0 || desc->ndim > PF_NPY_MAX_NDIM) {
    /* before anything reads desc->shape[0..ndim) */
    return pf__npy_fail(err, err_size, name, "ndim is %d: expected 0 to %d", (int)desc->ndim,
                        PF_NPY_MAX_NDIM);
  }
  pf_npy_array_t shape = *desc;
  size_t count = 0;
  if (pf__npy_array_size(shape.shape, shape.ndim, shape.dtype.bits / 8u, &count, &shape.nbytes) !=
      0) {
    return pf__npy_fail(err, err_size, name, "shape is negative or too large");
  }
  shape.data = &count; /* not read: check_array only wants it non-NULL */
  shape.fortran_order = 0;
  char descr[8];
  if (check_array(&shape, descr, sizeof descr, name, err, err_size) != 0) {
    return -1;
  }
  char header[2048];
  size_t header_len = build_header(header, sizeof header, descr, shape.shape, shape.ndim);
  size_t length = header_len + shape.nbytes;
  if (header_len == 0 || write_all(out->fd, header, header_len) != 0 ||
      ftruncate(out->fd, (off_t)length) != 0 || reserve_blocks(out->fd, length) != 0) {
    pf__npy_fail(err, err_size, name, "write error: %s", strerror(errno));
    return output_map_undo(out);
  }
  if (init != NULL) {
    pf_npy_map_t src;
    if (pf__npy_map_file_as(init, 0, &src, err, err_size) != 0) {
      return output_map_undo(out);
    }
    int same = src.base != NULL && src.array.nbytes == shape.nbytes &&
               src.array.ndim == shape.ndim && src.array.dtype.code == shape.dtype.code &&
               src.array.dtype.bits == shape.dtype.bits &&
               memcmp(src.array.shape, shape.shape, sizeof(int64_t) * (size_t)shape.ndim) == 0;
    loff_t from = (loff_t)src.offset, to = (loff_t)header_len;
    size_t left = shape.nbytes;
    while (same && left > 0) {
      ssize_t n = copy_file_range(src.fd, &from, out->fd, &to, left, 0);
      if (n <= 0) {
        /* no kernel copy here (an old kernel, across file systems): copy from the map */
        n = pwrite(out->fd, (char*)src.array.data + (shape.nbytes - left), left, to);
        if (n <= 0) {
          int e = n == 0 ? EIO : errno;
          pf_npy_map_release(&src);
          pf__npy_fail(err, err_size, name, "write error: %s", strerror(e));
          return output_map_undo(out);
        }
        to += n;
        from += n; /* a later copy_file_range continues from here too */
      }
      left -= (size_t)n;
    }
    pf_npy_map_release(&src);
    if (!same) {
      pf__npy_fail(err, err_size, init, "cannot be mapped as the output's initial data");
      return output_map_undo(out);
    }
  }
  void* map = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, out->fd, 0);
  if (map == MAP_FAILED) {
    pf__npy_fail(err, err_size, name, "cannot map: %s", strerror(errno));
    return output_map_undo(out);
  }
  populate_for_write(map, length);
  out->map = map;
  out->map_length = length;
  out->nbytes = shape.nbytes;
  *data = (char*)map + header_len;
  return 0;
}

/* Frees what one output owns, removing its temporary file when it is still there. An output
 * whose path is NULL owns nothing: zeroed (its fd 0 is not ours to close) or already dropped. */
static void output_drop(pf_npy_output_t* out) {
  if (out->path == NULL) {
    return;
  }
  if (out->map != NULL) {
    munmap(out->map, out->map_length);
    out->map = NULL;
  }
  if (out->fd >= 0) {
    close(out->fd);
  }
  if (out->tmp_path != NULL) {
    unlink(out->tmp_path);
  }
  free(out->tmp_path);
  free(out->path);
  out->path = NULL;
  out->tmp_path = NULL;
  out->fd = -1;
}

int pf_npy_output_commit(pf_npy_output_t* outs, size_t n, char* err, size_t err_size) {
  if (outs == NULL && n > 0) {
    return pf__npy_fail(err, err_size, "pf_npy_output_commit", "outputs are NULL");
  }
  int rc = 0;
  /* an output not written refuses the whole commit before anything is renamed */
  for (size_t i = 0; i < n && rc == 0; ++i) {
    if (outs[i].fd != -1 && outs[i].path == NULL) { /* zeroed: never opened */
      rc = pf__npy_fail(err, err_size, "pf_npy_output_commit", "output %zu is not open", i);
    } else if (outs[i].fd != -1) { /* still open, or its write failed */
      rc = pf__npy_fail(err, err_size, outs[i].path, "not written before commit");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (rc == 0 && outs[i].tmp_path != NULL) {
      if (rename(outs[i].tmp_path, outs[i].path) != 0) {
        rc = pf__npy_fail(err, err_size, outs[i].path, "cannot replace: %s", strerror(errno));
      } else {
        free(outs[i].tmp_path);
        outs[i].tmp_path = NULL;
      }
    }
    output_drop(&outs[i]);
  }
  return rc;
}

void pf_npy_output_abort(pf_npy_output_t* outs, size_t n) {
  for (size_t i = 0; outs != NULL && i < n; ++i) {
    output_drop(&outs[i]);
  }
}

int pf_npy_write_file(const char* path, const pf_npy_array_t* arr, char* err, size_t err_size) {
  if (path == NULL) {
    return pf__npy_fail(err, err_size, "pf_npy_write_file", "path is NULL");
  }
  if (arr == NULL) {
    return pf__npy_fail(err, err_size, path, "array is NULL");
  }
  char descr[8];
  if (check_array(arr, descr, sizeof descr, path, err, err_size) != 0) {
    return -1; /* before creating anything */
  }
  pf_npy_output_t out;
  if (pf_npy_output_open(path, &out, err, err_size) != 0) {
    return -1;
  }
  if (pf_npy_output_write(&out, arr, err, err_size) != 0) {
    pf_npy_output_abort(&out, 1);
    return -1;
  }
  return pf_npy_output_commit(&out, 1, err, err_size);
}
