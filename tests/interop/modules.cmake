# Modules across the two runtimes (issue 11): a library built with TVM-FFI's C++ export macro
# (no packfn stamp) loaded by pf_module_load and by `packfn call --lib`; TVM-FFI's ffi.Module
# read through pf_module_get_function; a packfn module refused by TVM-FFI with a TypeError.
# modules_errors.c: errors such a library raises (into TVM-FFI's slot), taken with
# pf_error_take through the joined slot.
include(CheckLanguage)
check_language(CXX)
if(NOT CMAKE_CXX_COMPILER)
  message(STATUS "tests/interop/modules.cmake: no C++ compiler: module interop tests left out")
else()
  enable_language(CXX)
  add_library(pf_interop_tvm_lib MODULE ${CMAKE_CURRENT_LIST_DIR}/module_tvm_lib.cc)
  target_link_libraries(pf_interop_tvm_lib PRIVATE TVMFFI::tvm_ffi)
  set_target_properties(pf_interop_tvm_lib PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  # uninstrumented, like libtvm_ffi itself: PF_SANITIZE's link option would link this C++
  # compiler's sanitizer runtime, which clashes with the C compiler's in the test programs
  set_property(TARGET pf_interop_tvm_lib PROPERTY LINK_OPTIONS "")

  pf_add_interop_test(test_interop_module ${CMAKE_CURRENT_LIST_DIR}/test_interop_module.c)
  target_compile_definitions(test_interop_module PRIVATE
    PF_TVM_LIB="$<TARGET_FILE:pf_interop_tvm_lib>"
    PF_KERNELS_LIB="$<TARGET_FILE:packfn_kernels>")
  add_dependencies(test_interop_module pf_interop_tvm_lib)
  pf_add_interop_test(test_interop_module_errors ${CMAKE_CURRENT_LIST_DIR}/modules_errors.c)
  target_compile_definitions(test_interop_module_errors PRIVATE
    PF_TVM_LIB="$<TARGET_FILE:pf_interop_tvm_lib>")
  add_dependencies(test_interop_module_errors pf_interop_tvm_lib)

  if(TARGET packfn_cli AND PF_PYTHON)
    add_test(NAME test_cli_tvm_ffi
      COMMAND ${PF_PYTHON} ${PROJECT_SOURCE_DIR}/tests/test_cli.py
              --packfn $<TARGET_FILE:packfn_cli>
              --echo-lib $<TARGET_FILE:pf_testmod_cli>
              --good-lib $<TARGET_FILE:pf_testmod_good>
              --collide-lib $<TARGET_FILE:pf_testmod_collide>
              --tvm-lib $<TARGET_FILE:pf_interop_tvm_lib>
              --workdir ${CMAKE_CURRENT_BINARY_DIR}/cli_tvm_files
              -- ${PF_TEST_WRAPPER})
    set_tests_properties(test_cli_tvm_ffi PROPERTIES LABELS "memcheck;interop" TIMEOUT 300)
    if(PF_SANITIZE MATCHES "address")
      # AddressSanitizer looks __cxa_throw up when a program starts: the command line (C) that
      # dlopen()s a C++ library which throws needs libstdc++ loaded from the start
      execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
                      OUTPUT_VARIABLE _pf_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
      set_property(TEST test_cli_tvm_ffi APPEND PROPERTY ENVIRONMENT "LD_PRELOAD=${_pf_libstdcxx}")
    endif()
  endif()
endif()

# A program holding libpackfn.a (its symbols not exported) loading a library linked with
# libpackfn.so and libtvm_ffi: a second packfn runtime, but both join the TVM-FFI the library
# brings in, so they share its error slot and tables: accepted, its error and its global reach
# the program (pf_module_load refused it: this runtime had looked for TVM-FFI before the load
# only; review). tests/regress/regress_static_host.c's accept mode.
add_library(pf_interop_good_tvm MODULE ${PROJECT_SOURCE_DIR}/tests/modules/good.c)
target_link_options(pf_interop_good_tvm PRIVATE "LINKER:--no-as-needed") # keep libtvm_ffi
target_link_libraries(pf_interop_good_tvm PRIVATE packfn TVMFFI::tvm_ffi)
add_executable(interop_static_host_joined ${PROJECT_SOURCE_DIR}/tests/regress/regress_static_host.c)
target_link_libraries(interop_static_host_joined PRIVATE packfn_static Threads::Threads
                                                         ${CMAKE_DL_LIBS})
add_dependencies(interop_static_host_joined pf_interop_good_tvm)
add_test(NAME interop_static_host_joined
         COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_static_host_joined> accept
                 $<TARGET_FILE:pf_interop_good_tvm>)
set_tests_properties(interop_static_host_joined PROPERTIES LABELS "memcheck;interop")
