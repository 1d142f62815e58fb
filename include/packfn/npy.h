/* packfn/npy.h: reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0) and
 * printing arrays the way NumPy's repr() does. The library libpackfn_npy (pkg-config packfn_npy,
 * CMake packfn::packfn_npy) needs only the C library and <dlpack/dlpack.h>, not libpackfn: any
 * C host can use it. Every function is thread-safe (no global state) and reports failure
 * through its return value and, where it takes one, the caller's `err` buffer: nothing is
 * raised in packfn's error slot. */
#ifndef PACKFN_NPY_H_
#define PACKFN_NPY_H_

#include <dlpack/dlpack.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbol visibility of libpackfn_npy (built with hidden visibility by default). */
#if defined(__GNUC__) || defined(__clang__)
#define PF_NPY_API __attribute__((visibility("default")))
#else
#define PF_NPY_API
#endif

/* Most dimensions an array may have: NumPy 1.x's NPY_MAXDIMS, and the size of `shape` below. */
#define PF_NPY_MAX_NDIM 32
/* Largest header the reader accepts, in bytes. NumPy itself refuses headers over 10000 bytes
 * unless told otherwise; ten times that leaves room for generous padding while keeping a
 * corrupt length field from making us allocate gigabytes. */
#define PF_NPY_MAX_HEADER_LEN 100000
/* DLPack type code for bool. DLPack 0.6, the version Debian ships, has no kDLBool yet; later
 * versions and the packfn ABI use 6. Integers are 0, unsigned 1, floats 2, bfloat 4, complex 5. */
#define PF_NPY_DTYPE_CODE_BOOL 6

/* One array in host memory. The reader fills every field; the writer reads every field. */
typedef struct pf_npy_array_s {
  DLDataType dtype;               /* code, bits, lanes (always 1); bool is {6, 8, 1} */
  int32_t ndim;                   /* 0 (a scalar) to PF_NPY_MAX_NDIM */
  int64_t shape[PF_NPY_MAX_NDIM]; /* shape[0..ndim-1], each >= 0; the rest unused */
  int fortran_order;              /* what the file said; the reader converts Fortran-order
                                     data to C order and then sets this back to 0, and the
                                     writer requires 0 */
  void* data;                     /* malloc'ed, owned; C order, host byte order (little-endian
                                     on every host packfn supports); never NULL after a
                                     successful read, even when nbytes is 0 */
  size_t nbytes;                  /* product(shape) * bits / 8 */
} pf_npy_array_t;

/* Reads the .npy file at `path` into *out, which the caller later frees with
 * pf_npy_array_free. Returns 0, or -1 with a one-line message that starts with `path` written
 * into err[0..err_size) (err may be NULL): e.g. "x.npy: unsupported dtype '<U10' (...)",
 * "x.npy: file is truncated: expected 96 bytes of data, got 40". On failure *out is zeroed and
 * owns nothing. Big-endian data is byte-swapped and Fortran-order data transposed to C order.
 * The file must hold exactly one array: bytes after the data are an error. */
PF_NPY_API int pf_npy_read_file(const char* path, pf_npy_array_t* out, char* err, size_t err_size);

/* Like pf_npy_read_file, from the `size` bytes at `buf` (copied; buf is not kept). Messages
 * start with "<buffer>". */
PF_NPY_API int pf_npy_read_buffer(const void* buf, size_t size, pf_npy_array_t* out, char* err,
                                  size_t err_size);

/* An array whose data lies in a private, copy-on-write memory map of its .npy file (or, when
 * the file's data cannot be mapped as it is, in memory read from it). */
typedef struct pf_npy_map_s {
  pf_npy_array_t array; /* the array; array.data points into the map (or is malloc'ed) */
  void* base;           /* start of the map, or NULL when the data was read instead */
  size_t length;        /* bytes mapped (the whole file) */
  size_t offset;        /* where the data starts in the file */
  int fd;               /* the file, kept open (close-on-exec) while mapped, for
                           pf_npy_map_changed; else -1.
                           Read only while base is not NULL: a zeroed map's 0 is not stdin */
} pf_npy_map_t;

/* Opens the .npy file at `path` without copying its data when it can: when the data is in this
 * host's byte order, in C order (or has at most one axis longer than 1) and starts at an
 * offset that is a multiple of its element size (np.save aligns to 64 bytes), the file is
 * mapped MAP_PRIVATE with read and write access: reading touches the page cache only, and a
 * write lands in a private copy of the page written (copy on write), never in the file. A file
 * of up to a quarter of the memory has its pages mapped at once (read-only with MAP_POPULATE,
 * then made writable), so reading it takes no page faults; a larger one faults in as read.
 * Otherwise the data is read as pf_npy_read_file does (out->base NULL), from the file as it was
 * opened: a pipe or a FIFO (/dev/stdin) is read once, as it streams. The same checks and
 * messages as pf_npy_read_file; 0, or -1 with *out zeroed (fd -1). Release with
 * pf_npy_map_release. */
PF_NPY_API int pf_npy_map_file(const char* path, pf_npy_map_t* out, char* err, size_t err_size);

/* Sets *changed to 1 when the data of `map` differs from what the file holds, else 0: only the
 * pages written since the mapping (those /proc/self/pagemap shows as private copies; every page
 * when that file cannot be read) are compared with the file. For data that was read rather
 * than mapped (base NULL) returns -1 ("not mapped"): keep a copy to compare with instead.
 * 0, or -1 with a message in err (a read error). Borrows map. */
PF_NPY_API int pf_npy_map_changed(const pf_npy_map_t* map, int* changed, char* err,
                                  size_t err_size);

/* Unmaps (or frees) the data, closes the file and zeroes *map (fd -1). NULL and a zeroed map
 * are no-ops (a zeroed map's fd 0 is left open). Cannot fail. */
PF_NPY_API void pf_npy_map_release(pf_npy_map_t* map);

/* Writes `arr` to `path` as a version 1.0 file (32 dimensions always fit its header), C order,
 * host byte order, byte for byte what np.save writes for the same array. Returns 0, or -1 with a
 * message in err; checks that dtype has a .npy equivalent, that shape and nbytes agree and that
 * fortran_order is 0. Borrows `arr` (the caller keeps owning its data). The write is atomic, as
 * pf_npy_output_open .. pf_npy_output_commit below: on failure `path` is as it was. */
PF_NPY_API int pf_npy_write_file(const char* path, const pf_npy_array_t* arr, char* err,
                                 size_t err_size);

/* ---- atomic writes: several files replaced all together or not at all ----
 * pf_npy_output_open checks the target and creates a temporary file beside it; write each
 * array with pf_npy_output_write; then pf_npy_output_commit renames every temporary over its
 * target (or pf_npy_output_abort removes them all when anything failed): no existing file is
 * changed before every output is complete on disk. */
typedef struct pf_npy_output_s {
  char* path;     /* malloc'ed: the file replaced (a symbolic link's target); non-NULL exactly
                     while the output is open: NULL in a zeroed output, whose fd 0 no function
                     reads, writes or closes, and once committed or aborted */
  char* tmp_path; /* malloc'ed: the temporary file's name beside it; NULL while the file has no
                     name (an unnamed file until written) and once renamed or removed */
  int fd;         /* the temporary file, open until written; -1 once written, -2 when the
                     write failed (commit refuses both -2 and an open file) */
  void* map;      /* pf_npy_output_map's shared map of the temporary file, or NULL */
  size_t map_length;
  size_t nbytes; /* the mapped array's data size */
} pf_npy_output_t;

/* Prepares to replace `path`: refuses a target that exists and is not a regular file ("x: not
 * a regular file (a character device): refusing to replace it"), a path reaching a regular
 * file through a descriptor link /proc/PID/fd/N such as /dev/stdout redirected to a file ("x:
 * names an open file descriptor ..."), or a target that we may not write ("x: is not
 * writable: refusing to replace it"), a missing folder or one we cannot write ("cannot
 * create a file in 'dir': ..."), then creates the temporary file in the target's folder (mode
 * 0666 less the umask, or the target's mode): an unnamed one (O_TMPFILE) that
 * pf_npy_output_write names "DIR/.NAME.PID.N.tmp" (NAME cut to 200 bytes), so that a process
 * killed before then leaves no file behind, or, where the system has no unnamed files, one
 * created under that name at once. 0, or -1 with a
 * message in err (*out then owns nothing). Release with pf_npy_output_abort or commit. */
PF_NPY_API int pf_npy_output_open(const char* path, pf_npy_output_t* out, char* err,
                                  size_t err_size);

/* Lays out the temporary file for an array of `desc`'s dtype and shape (desc->data and nbytes
 * are not read): header, then the data, zeros (blocks reserved with fallocate where the file
 * system can, so that a full disk fails here and not as a SIGBUS while the map is written;
 * nothing is written), or the data of
 * the .npy file `init` when not NULL (which must have the same dtype, shape and a data layout
 * pf_npy_map_file maps; it is copied in the kernel, copy_file_range). Maps the file shared and
 * sets *data to its data: what is written there is the file's content, written once (no copy
 * at pf_npy_output_write). The map stays valid until commit or abort unmaps it. 0, or -1 with a
 * message in err (desc->ndim outside 0..PF_NPY_MAX_NDIM, checked before desc->shape is read; no
 * room on the disk, a file size limit, an init file that differs); on failure the output is
 * left open and empty, as pf_npy_output_open made it (pf_npy_output_write may still write it),
 * or, where it cannot be emptied, closed as a failed write that commit refuses. An output that
 * is not open (zeroed, or already written) is refused: -1, "pf_npy_output_map: output not
 * open ...", nothing written. */
PF_NPY_API int pf_npy_output_map(pf_npy_output_t* out, const pf_npy_array_t* desc, const char* init,
                                 void** data, char* err, size_t err_size);

/* Writes `arr` (as pf_npy_write_file does) into the temporary file and closes it; for a mapped
 * output, arr must have the dtype and shape the map was laid out for, and arr->data is the
 * map's data (nothing to copy) or data of the same size copied into it.
 * When the target exists the file is first flushed to disk (fsync), so that a crash after the
 * commit cannot put a file whose data never reached the disk in place of the old one; a new
 * target is not flushed (as cp and numpy.save do not flush: a crash may lose the new file's data,
 * never an older file's). 0, or -1 with a message naming the target in err (disk full, file size
 * limit, a bad array, another dtype or shape than a map's); the target is untouched either
 * way. An output that is not open (zeroed,
 * or already written) is refused: -1, "pf_npy_output_write: output not open ...", nothing
 * written. */
PF_NPY_API int pf_npy_output_write(pf_npy_output_t* out, const pf_npy_array_t* arr, char* err,
                                   size_t err_size);

/* Renames the written temporary files of outs[0..n) over their targets, in order, and frees
 * them. 0, or -1 with a message in err when a rename fails: the outputs before it are in
 * place, that one and those after it are removed (a rename within one folder fails only in
 * rare cases: the folder removed or made read-only meanwhile). An output not yet written
 * (pf_npy_output_write) refuses the whole commit before any rename (-1, "not written before
 * commit"), as does a zeroed one ("pf_npy_output_commit: output I is not open"): then no target
 * is changed. outs NULL with n > 0 is refused ("pf_npy_output_commit: outputs are NULL"). */
PF_NPY_API int pf_npy_output_commit(pf_npy_output_t* outs, size_t n, char* err, size_t err_size);

/* Removes the temporary files of outs[0..n) (closing those still open) and frees them; targets
 * are untouched. Zeroed entries (path NULL) are skipped: their fd 0 is left open. outs NULL is
 * a no-op. Cannot fail. */
PF_NPY_API void pf_npy_output_abort(pf_npy_output_t* outs, size_t n);

/* Frees arr->data (of an array pf_npy_read_* filled) and zeroes *arr. NULL and an already
 * freed or zeroed array are no-ops. Cannot fail. */
PF_NPY_API void pf_npy_array_free(pf_npy_array_t* arr);

/* Writes the NumPy type string of `dtype` ("<f4", "|b1", "<c16", ...) into the caller's buf,
 * NUL-terminated.
 * Returns 0, or -1 (buf left empty when size > 0) if dtype has no .npy equivalent (bfloat16,
 * lanes > 1, odd widths) or buf is too small: 5 bytes hold every answer. */
PF_NPY_API int pf_npy_dtype_descr(DLDataType dtype, char* buf, size_t size);

/* Replaces in place each control character of the NUL-terminated `text` with '?': C0, DEL and
 * C1 (U+0080..U+009F in UTF-8, or a byte 0x80..0x9F that is no part of a UTF-8 character, which
 * an 8-bit terminal reads as C1), so that text taken from a file or its name cannot send a
 * terminal escape sequences; other bytes, UTF-8 text included, stay. Never lengthens the text.
 * The messages this library writes into `err` are already cleaned this way. NULL: no-op. */
PF_NPY_API void pf_npy_clean_text(char* text);

/* Prints `arr` as NumPy's repr() does with default print options (NumPy 2.3 and later):
 * "array([[1., 2., 3.],\n       [4., 5., 6.]], dtype=float32)", lines wrapped at 75
 * columns, arrays of more than 1000 elements summarised with "..." and their shape shown;
 * data in Fortran order when arr->fortran_order is set. No trailing newline. Borrows `arr` and
 * `out` (neither is kept nor closed). Returns 0, or -1 if the dtype cannot be printed, the shape
 * needs more than arr->nbytes bytes, memory runs out or writing to `out` fails; on failure part
 * of the text may already be written (nothing for a refused shape). */
PF_NPY_API int pf_npy_format(const pf_npy_array_t* arr, FILE* out);

/* Like pf_npy_format, for any strided array in host memory, without copying it: the element at
 * index (i0, ..., in-1) lies at (const char*)data + (i0 * strides[0] + ...) * bits / 8.
 * `strides` counts elements (as in DLTensor), may be negative or 0, and may be NULL for
 * C order; `shape` may be NULL when ndim is 0. Prints bool, int8-64, uint8-64, float16/32/64,
 * bfloat16 (like a float, with dtype=bfloat16) and complex64/128, lanes 1. Borrows every
 * argument. Failure as for pf_npy_format. */
PF_NPY_API int pf_npy_format_raw(DLDataType dtype, int32_t ndim, const int64_t* shape,
                                 const int64_t* strides, const void* data, FILE* out);

#ifdef __cplusplus
}
#endif

#endif /* PACKFN_NPY_H_ */
