# Current streams shared with TVM-FFI's environment once joined (TVMFFIEnvSetStream): the
# program links only libpackfn and loads libtvm_ffi with dlopen.
add_executable(interop_streams streams_interop.c)
target_link_libraries(interop_streams PRIVATE packfn Threads::Threads ${CMAKE_DL_LIBS})
foreach(mode late apart teardown host)
  add_test(NAME interop_streams_${mode}
           COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_streams> ${mode} ${TVMFFI_LIBRARY})
  set_tests_properties(interop_streams_${mode} PROPERTIES LABELS "memcheck;interop")
endforeach()
set_property(TEST interop_streams_apart APPEND PROPERTY ENVIRONMENT "PACKFN_NO_TVM_FFI=1")

# The move of pre-join streams when TVMFFIEnvSetStream fails (out of memory): pf_fault's
# allocation interposer, so not under sanitizers (they own malloc) nor valgrind (label "fault").
if(NOT PF_SANITIZE)
  add_executable(interop_streams_fault streams_fault.c
                                       ${PROJECT_SOURCE_DIR}/tests/fault/fault_alloc.c)
  target_include_directories(interop_streams_fault PRIVATE ${PROJECT_SOURCE_DIR}/tests/fault)
  target_link_libraries(interop_streams_fault PRIVATE packfn ${CMAKE_DL_LIBS})
  add_test(NAME interop_streams_fault COMMAND interop_streams_fault ${TVMFFI_LIBRARY})
  set_tests_properties(interop_streams_fault PROPERTIES LABELS "fault;interop"
                                                        ENVIRONMENT "PACKFN_NO_ALLOC_CACHE=1")
endif()
