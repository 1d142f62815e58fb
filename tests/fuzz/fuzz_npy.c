/* libFuzzer harness: the .npy reader (pf_npy_read_buffer) on arbitrary bytes. Properties: it
 * never crashes; a success describes a consistent array (ndim in range, extents >= 0, nbytes
 * = product(shape) * itemsize, data non-NULL) that can be printed and written back; a failure
 * leaves the output zeroed with a message starting "<buffer>". */
#include "fuzz_util.h"
#include "packfn/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

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
  }
  pf_npy_array_free(&arr);
  return 0;
}
