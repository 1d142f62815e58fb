# Errors across packfn and TVM-FFI (issue 11): one raised-error slot.
pf_add_interop_test(interop_errors errors_interop.c)
# PACKFN_NO_TVM_FFI=1: the runtimes keep separate slots and registries.
add_test(NAME interop_errors_apart COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_errors> --apart)
set_tests_properties(interop_errors_apart PROPERTIES LABELS "memcheck;interop"
                                                     ENVIRONMENT "PACKFN_NO_TVM_FFI=1")
# Errors raised with PACKFN_BACKTRACE=1 before a late join (by address then) reach TVM-FFI's
# slot after it with their frames named. Links only libpackfn; dlopen()s libtvm_ffi.
add_executable(interop_errors_frames_join errors_frames_join.c)
target_link_libraries(interop_errors_frames_join PRIVATE packfn ${CMAKE_DL_LIBS})
add_test(NAME interop_errors_frames_join
         COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_errors_frames_join> ${TVMFFI_LIBRARY})
set_tests_properties(interop_errors_frames_join PROPERTIES LABELS "memcheck;interop"
                                                           ENVIRONMENT "PACKFN_BACKTRACE=1")
# The same, for the process's first error raised with libtvm_ffi already loaded: it joins.
add_test(NAME interop_errors_frames_first
         COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_errors_frames_join> ${TVMFFI_LIBRARY}
                 first)
set_tests_properties(interop_errors_frames_first PROPERTIES LABELS "memcheck;interop"
                                                            ENVIRONMENT "PACKFN_BACKTRACE=1")
# Error calls in a thread's or the process's teardown, after TVM-FFI's thread_local slot is
# gone: key destructors of exiting threads, an atexit handler.
add_executable(interop_errors_teardown errors_teardown.c)
target_link_libraries(interop_errors_teardown PRIVATE packfn TVMFFI::tvm_ffi Threads::Threads)
foreach(mode thread exit)
  add_test(NAME interop_errors_teardown_${mode}
           COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_errors_teardown> ${mode})
  set_tests_properties(interop_errors_teardown_${mode} PROPERTIES LABELS "memcheck;interop")
endforeach()
# A packfn library's __tvm_ffi_<name> exports failing while the runtimes are apart
# (PACKFN_NO_TVM_FFI=1, or libtvm_ffi loaded after the library) or joined: the error goes to
# TVM-FFI's slot. The program links only libpackfn and dlopen()s libtvm_ffi and the library.
add_library(pf_interop_export_apart_lib MODULE export_apart_lib.c)
target_link_libraries(pf_interop_export_apart_lib PRIVATE packfn)
add_executable(interop_export_apart export_apart.c)
target_link_libraries(interop_export_apart PRIVATE packfn ${CMAKE_DL_LIBS})
add_dependencies(interop_export_apart pf_interop_export_apart_lib)
foreach(mode apart late joined)
  add_test(NAME interop_export_${mode}
           COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_export_apart> ${mode}
                   ${TVMFFI_LIBRARY} $<TARGET_FILE:pf_interop_export_apart_lib>)
  set_tests_properties(interop_export_${mode} PROPERTIES LABELS "memcheck;interop")
endforeach()
set_property(TEST interop_export_apart APPEND PROPERTY ENVIRONMENT "PACKFN_NO_TVM_FFI=1")
# The same library linked with libpackfn.a, its copy hidden (made for hosts without packfn), in
# a TVM-FFI host without packfn: the failure path of its exports is linked in too (it was left
# out of the archive: the exports reach it through a weak reference).
add_library(pf_interop_export_static_lib MODULE export_apart_lib.c)
target_link_libraries(pf_interop_export_static_lib PRIVATE packfn_static)
target_link_options(pf_interop_export_static_lib PRIVATE "LINKER:--exclude-libs,ALL")
add_executable(interop_export_static export_static.c)
target_link_libraries(interop_export_static PRIVATE TVMFFI::tvm_ffi ${CMAKE_DL_LIBS})
add_dependencies(interop_export_static pf_interop_export_static_lib)
foreach(mode apart joined)
  add_test(NAME interop_export_static_${mode}
           COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_export_static>
                   $<TARGET_FILE:pf_interop_export_static_lib>)
  set_tests_properties(interop_export_static_${mode} PROPERTIES LABELS "memcheck;interop")
endforeach()
set_property(TEST interop_export_static_apart APPEND PROPERTY ENVIRONMENT "PACKFN_NO_TVM_FFI=1")
