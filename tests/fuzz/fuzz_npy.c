/* libFuzzer harness: the .npy reader (pf_npy_read_buffer) on arbitrary bytes. Properties: it
 * never crashes; a success describes a consistent array (ndim in range, extents >= 0, nbytes
 * = product(shape) * itemsize, data non-NULL) that can be printed and written back
 * (pf_npy_write_file into a folder of /dev/shm, or of /tmp, then pf_npy_read_file gives the
 * same dtype, shape and bytes); a failure leaves the output zeroed with a message starting
 * "<buffer>". */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <unistd.h>

#include "fuzz_util.h"
#include "packfn/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* The file the round trip writes, in a folder of its own made at the first call; NULL when
 * none could be made (the round trip is then skipped). */
static char rt_path[64];
static char rt_folder[64];

static void remove_round_trip_files(void) {
  unlink(rt_path);
  rmdir(rt_folder);
}

static const char* round_trip_path(void) {
  static int tried;
  if (!tried) {
    tried = 1;
    char dir[] = "/dev/shm/pf_fuzz_npy.XXXXXX";
    char dir_tmp[] = "/tmp/pf_fuzz_npy.XXXXXX";
    const char* d = mkdtemp(dir) ? dir : mkdtemp(dir_tmp);
    if (d) {
      snprintf(rt_folder, sizeof rt_folder, "%s", d);
      snprintf(rt_path, sizeof rt_path, "%s/a.npy", d);
      atexit(remove_round_trip_files);
    }
  }
  return rt_path[0] ? rt_path : NULL;
}

/* Writes arr and reads it back: the same array. The file is removed first, so that the write
 * replaces nothing (a replaced target is flushed to disk first, which would be slow). */
static void round_trip(const pf_npy_array_t* arr) {
  const char* path = round_trip_path();
  if (!path)
    return;
  char err[512];
  unlink(path);
  if (pf_npy_write_file(path, arr, err, sizeof err) != 0) {
    fprintf(stderr, "round trip: %s\n", err);
    FUZZ_CHECK(!"pf_npy_write_file refused an array pf_npy_read_buffer gave");
  }
  pf_npy_array_t back;
  if (pf_npy_read_file(path, &back, err, sizeof err) != 0) {
    fprintf(stderr, "round trip: %s\n", err);
    FUZZ_CHECK(!"pf_npy_read_file refused what pf_npy_write_file wrote");
  }
  FUZZ_CHECK(back.dtype.code == arr->dtype.code && back.dtype.bits == arr->dtype.bits &&
             back.dtype.lanes == arr->dtype.lanes && back.ndim == arr->ndim &&
             back.fortran_order == 0 && back.nbytes == arr->nbytes);
  for (int32_t i = 0; i < arr->ndim; ++i)
    FUZZ_CHECK(back.shape[i] == arr->shape[i]);
  FUZZ_CHECK(arr->nbytes == 0 || memcmp(back.data, arr->data, arr->nbytes) == 0);
  pf_npy_array_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pf_npy_array_t arr;
  char err[256];
  if (pf_npy_read_buffer(data, size, &arr, err, sizeof err) != 0) {
    FUZZ_CHECK(arr.data == NULL && arr.nbytes == 0 && arr.ndim == 0);
    FUZZ_CHECK(strncmp(err, "<buffer>", 8) == 0);
    return 0;
  }
  FUZZ_CHECK(arr.ndim >= 0 && arr.ndim <= PF_NPY_MAX_NDIM);
  FUZZ_CHECK(arr.data != NULL && arr.fortran_order == 0 && arr.dtype.lanes == 1);
  size_t numel = 1;
  for (int32_t i = 0; i < arr.ndim; ++i) {
    FUZZ_CHECK(arr.shape[i] >= 0);
    numel *= (size_t)arr.shape[i];
  }
  FUZZ_CHECK(arr.nbytes == numel * (arr.dtype.bits / 8u));
  /* the data must be readable to its end */
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < arr.nbytes; i += 4096)
    sink ^= ((const uint8_t*)arr.data)[i];
  if (arr.nbytes)
    sink ^= ((const uint8_t*)arr.data)[arr.nbytes - 1];
  (void)sink;
  char descr[8];
  FUZZ_CHECK(pf_npy_dtype_descr(arr.dtype, descr, sizeof descr) == 0);
  if (arr.nbytes <= 65536) {
    static FILE* devnull;
    if (!devnull)
      devnull = fopen("/dev/null", "w");
    if (devnull)
      pf_npy_format(&arr, devnull);
    round_trip(&arr);
  }
  pf_npy_array_free(&arr);
  return 0;
}
