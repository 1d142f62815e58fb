/* packfn's public headers and macros from C++17: built with -Wall -Wextra -Werror -pedantic
 * by the C++ compilers found (g++ as CMake's C++ compiler, clang++ beside it), linked and run. */
#include "api_use.h"

int main() {
  int failures = pf_cxx_check();
  if (failures == 0)
    std::printf("cxx api: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
