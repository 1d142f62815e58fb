/* npy_private.h: what the .npy reader, writer and printer (the .c files of src/npy/) share; not
 * installed. */
#ifndef PACKFN_SRC_NPY_PRIVATE_H_
#define PACKFN_SRC_NPY_PRIVATE_H_

#include "packfn/npy.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__) || defined(__clang__)
#define NPY_PRINTF(fmt_index, args_index) __attribute__((format(printf, fmt_index, args_index)))
#else
#define NPY_PRINTF(fmt_index, args_index)
#endif

/* Every .npy file starts with these 6 bytes, then the major and minor version. */
#define NPY_MAGIC     "\x93NUMPY"
#define NPY_MAGIC_LEN 6

/* Writes "name: message" into err (when err is not NULL and err_size > 0), control characters
 * shown as '?', and returns -1, so that failing reads as `return pf__npy_fail(...)`. */
NPY_PRINTF(4, 5)
int pf__npy_fail(char* err, size_t err_size, const char* name, const char* fmt, ...);

/* 1 on a little-endian host, else 0. */
int pf__npy_host_is_little_endian(void);

/* 1 when `length` bytes are at most a quarter of the machine's memory: the files whose pages
 * the maps populate at once (larger ones fault in as used). */
int pf__npy_populate_fits(size_t length);

/* Python's repr of a tuple of ints into buf: "()", "(3,)", "(2, 3)"; cut short if size is too
 * small. */
void pf__npy_format_shape(char* buf, size_t size, const int64_t* shape, int32_t ndim);

/* Sets *count to product(shape) and *nbytes to count * itemsize; -1 if a dimension is negative
 * or the product of the non-zero dimensions times itemsize exceeds both SIZE_MAX and INT64_MAX,
 * so that every partial product of the shape fits later index arithmetic too. */
int pf__npy_array_size(const int64_t* shape, int32_t ndim, size_t itemsize, size_t* count,
                       size_t* nbytes);

/* A parsed .npy header: what the dict said, validated. */
typedef struct {
  DLDataType dtype;
  int swap;          /* the data is in the other byte order than the host's */
  int fortran_order; /* the data is in Fortran order */
  int32_t ndim;
  int64_t shape[PF_NPY_MAX_NDIM];
} pf__npy_header_t;

/* pf_npy_map_file, with the file's pages populated at once (as pf_npy_map_file does) only when
 * `populate` is not 0: pf_npy_output_map copies an init file with copy_file_range and reads
 * its map only where the kernel cannot copy. */
int pf__npy_map_file_as(const char* path, int populate, pf_npy_map_t* out, char* err,
                        size_t err_size);

/* Reads the preamble and header of the .npy file open as fp (named `name` in messages), leaving
 * fp at the first byte of data: *h the header, *nbytes the size of the data. 0, or -1 with a
 * message in err. */
int pf__npy_read_header_file(FILE* fp, const char* name, pf__npy_header_t* h, size_t* nbytes,
                             char* err, size_t err_size);

/* Reads the data that follows a header pf__npy_read_header_file read from fp, as
 * pf_npy_read_file does (byte-swapped, transposed to C order, nothing left over), into *out
 * (zeroed on failure): for a stream that cannot be read again from its start, a pipe or a
 * FIFO. 0, or -1 with a message in err. */
int pf__npy_read_data_file(FILE* fp, const char* name, const pf__npy_header_t* h,
                           pf_npy_array_t* out, char* err, size_t err_size);

#endif /* PACKFN_SRC_NPY_PRIVATE_H_ */
