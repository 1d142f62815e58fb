# One global function table across packfn and TVM-FFI (issue 11, deliverable 6): each side
# finds the other's functions, registered before or after packfn joins.
pf_add_interop_test(test_interop_global ${CMAKE_CURRENT_LIST_DIR}/test_interop_global.c)

# An error pending in TVM-FFI's slot at the join, while the join pushes a name TVM-FFI holds:
# the refusal dropped it (tests/interop/join_pending.c). Links only libpackfn.
add_executable(interop_join_pending join_pending.c)
target_link_libraries(interop_join_pending PRIVATE packfn ${CMAKE_DL_LIBS})
add_test(NAME interop_join_pending COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_join_pending>
                                           $<TARGET_FILE:TVMFFI::tvm_ffi>)
set_tests_properties(interop_join_pending PROPERTIES LABELS "memcheck;interop")
if(PF_SANITIZE MATCHES "address")
  # the refusal is a C++ throw inside libtvm_ffi, and AddressSanitizer looks __cxa_throw up when
  # the program starts: this C program needs libstdc++ loaded from the start (as modules.cmake)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
                  OUTPUT_VARIABLE _pf_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
  set_property(TEST interop_join_pending APPEND PROPERTY ENVIRONMENT "LD_PRELOAD=${_pf_libstdcxx}")
endif()

# Joining TVM-FFI while another thread writes (tests/interop/join_race.c): the writer's first
# lock waits for the join, so the old race is certain; and packfn's mirror of TVM-FFI's type
# registry against writes to TVM-FFI's function table. Links only libpackfn (libtvm_ffi is
# dlopen()ed); not under valgrind, nor ThreadSanitizer: the program defines pthread_mutex_lock,
# which takes the place of the sanitizer's own (it then reports every unlock as unpaired).
if(PF_SANITIZE MATCHES "thread")
  return()
endif()
add_executable(interop_join_race join_race.c)
target_link_libraries(interop_join_race PRIVATE packfn Threads::Threads ${CMAKE_DL_LIBS})
set_target_properties(interop_join_race PROPERTIES ENABLE_EXPORTS ON) # its pthread_mutex_lock
foreach(mode remove set type mirror)
  add_test(NAME interop_join_race_${mode}
           COMMAND interop_join_race ${mode} $<TARGET_FILE:TVMFFI::tvm_ffi>)
  set_tests_properties(interop_join_race_${mode} PROPERTIES LABELS "interop" TIMEOUT 60)
endforeach()
# LeakSanitizer's exit-time scan of this program crashed its tracer in about one run in six
# under load (two CI runs of two): it records a dynamic TLS block of the dlopen()ed libtvm_ffi
# with a bogus range ("DTLS 5 at 0x9dc16-0x20009ed18", LSAN_OPTIONS=verbosity=1) after the
# mirroring thread, which used TVM-FFI's thread-locals, exited, and reads it. Not tracking
# __tls_get_addr avoids it (0 crashes in 12 runs under load, no leak reported); packfn's own
# thread-locals are static TLS, scanned either way.
if(PF_SANITIZE MATCHES "address")
  set_tests_properties(interop_join_race_mirror PROPERTIES
                       ENVIRONMENT_MODIFICATION "ASAN_OPTIONS=string_append::intercept_tls_get_addr=0")
endif()
