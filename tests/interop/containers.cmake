# Maps and dicts crossing between packfn and TVM-FFI's C++ containers (issue 11, part 3): a C++
# program, built when a C++ compiler is found.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  pf_add_interop_test(interop_containers interop_containers.cc)
  set_target_properties(interop_containers PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  # keys TVM-FFI hashes through __any_hash__ (BigInt): packfn's writes refuse, never corrupt
  pf_add_interop_test(interop_map_foreign_hash interop_map_foreign_hash.cc)
  set_target_properties(interop_map_foreign_hash PROPERTIES CXX_STANDARD 17
                                                            CXX_STANDARD_REQUIRED ON)
else()
  message(STATUS "tests/interop: no C++ compiler: interop_containers and "
                 "interop_map_foreign_hash left out")
endif()
