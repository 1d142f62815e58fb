/* packfn's public headers and macros in a CUDA source: built with nvcc next to a kernel, and
 * run (registering and calling functions needs no GPU; the kernel is never launched). */
#include "api_use.h"

__global__ void cxx_fill(float* out, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = value;
}

int main() {
  int failures = pf_cxx_check();
  if (failures == 0)
    std::printf("cuda api: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
