/* Regression test: with the slabs off (memory checkers: AddressSanitizer, or valgrind with
 * PACKFN_NO_ALLOC_CACHE=1), a CPU tensor's buffer from pf_tensor_empty must be a block of its
 * exact size, so that the checker reports a write one byte past its end or before its start.
 * Buffers over 4 KiB were one malloc with up to 240 spare bytes to align the data inside
 * (commit ca23fca), which hid such writes from both checkers.
 *   regress_checked_overrun BYTES after|before
 * Registered only in the AddressSanitizer build and under valgrind, where it passes when the
 * checker's report appears in the output (tests/regress/CMakeLists.txt); run plainly it writes
 * the byte unnoticed and says so. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packfn/packfn.h"

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[2], "after") != 0 && strcmp(argv[2], "before") != 0)) {
    fprintf(stderr, "usage: regress_checked_overrun BYTES after|before\n");
    return 2;
  }
  int64_t n = strtoll(argv[1], NULL, 10);
  DLDataType u8 = {kDLUInt, 8, 1};
  DLDevice cpu = {kDLCPU, 0};
  pf_object_t* t = NULL;
  if (n <= 0 || pf_tensor_empty(&n, 1, u8, cpu, &t) != 0) {
    fprintf(stderr, "FAIL: pf_tensor_empty of %lld bytes\n", (long long)n);
    return 1;
  }
  volatile unsigned char* data = pf_tensor_dltensor(t)->data;
  memset((void*)data, 0, (size_t)n);
  if (strcmp(argv[2], "after") == 0)
    data[n] = 1; /* the checker stops the program here */
  else
    data[-1] = 1;
  fprintf(stderr, "no checker report: the byte %s the %lld-byte buffer was written without one\n",
          argv[2], (long long)n);
  pf_object_release(t);
  return 1;
}
