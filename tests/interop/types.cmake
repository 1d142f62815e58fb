# Types across packfn and TVM-FFI (issue 11): one type registry.

# libtvm_ffi loaded after packfn was used: links only libpackfn and dlopen()s the wheel's
# library by path, then pf_tvm_ffi_join() (errors and types both; the pre-join error and types
# must survive the join).
add_executable(interop_types_loaded_later types_loaded_later.c)
target_link_libraries(interop_types_loaded_later PRIVATE packfn ${CMAKE_DL_LIBS})
target_compile_definitions(interop_types_loaded_later
                           PRIVATE TVMFFI_LIBRARY_PATH="${TVMFFI_LIBRARY}")
add_test(NAME interop_types_loaded_later
         COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_types_loaded_later>)
set_tests_properties(interop_types_loaded_later PROPERTIES LABELS "memcheck;interop")

# a library holding packfn statically, joined, closed and loaded again: its type blocks in
# TVM-FFI's registry do not collide with the ones the copy before reserved
add_executable(interop_types_reload types_reload.c)
target_include_directories(interop_types_reload PRIVATE ${PROJECT_SOURCE_DIR}/include
                                                        ${DLPACK_INCLUDE_DIR})
target_link_libraries(interop_types_reload PRIVATE ${CMAKE_DL_LIBS})
target_compile_definitions(interop_types_reload PRIVATE TVMFFI_LIBRARY_PATH="${TVMFFI_LIBRARY}")
add_dependencies(interop_types_reload pf_regress_static_packfn)
# Unwrapped and LeakSanitizer off: the types a copy registered are never freed (docs/object.md),
# and once the copy is unmapped nothing points at them any more, by design.
add_test(NAME interop_types_reload
         COMMAND interop_types_reload $<TARGET_FILE:pf_regress_static_packfn>)
set_tests_properties(interop_types_reload PROPERTIES LABELS "interop"
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")

# a type key registered by packfn and by TVM-FFI before they join: each registry knows the
# other's index for it (TVM-FFI ended the process for an object of packfn's)
add_executable(interop_types_twice types_twice.c)
target_link_libraries(interop_types_twice PRIVATE packfn ${CMAKE_DL_LIBS})
target_compile_definitions(interop_types_twice PRIVATE TVMFFI_LIBRARY_PATH="${TVMFFI_LIBRARY}")
add_test(NAME interop_types_twice COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_types_twice>)
set_tests_properties(interop_types_twice PROPERTIES LABELS "memcheck;interop")
