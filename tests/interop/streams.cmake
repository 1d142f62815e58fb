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
