# One global function table across packfn and TVM-FFI (issue 11, deliverable 6): each side
# finds the other's functions, registered before or after packfn joins.
pf_add_interop_test(test_interop_global ${CMAKE_CURRENT_LIST_DIR}/test_interop_global.c)

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
# The mirror mode needs no window, so its build leaves pthread_mutex_lock alone: one less
# thing in the way of LeakSanitizer's tracer, which ran at exit under ASan and crashed once in
# a CI run (signal 11 at a pc in the program; the tracer has no thread-local storage, and
# glibc calls pthread_mutex_lock on its behalf).
add_executable(interop_join_race_mirror_only join_race.c)
target_compile_definitions(interop_join_race_mirror_only PRIVATE PF_JOIN_RACE_MIRROR_ONLY)
target_link_libraries(interop_join_race_mirror_only PRIVATE packfn Threads::Threads
                                                            ${CMAKE_DL_LIBS})
foreach(mode remove set type mirror)
  set(pf_program interop_join_race)
  if(mode STREQUAL "mirror")
    set(pf_program interop_join_race_mirror_only)
  endif()
  add_test(NAME interop_join_race_${mode}
           COMMAND ${pf_program} ${mode} $<TARGET_FILE:TVMFFI::tvm_ffi>)
  set_tests_properties(interop_join_race_${mode} PROPERTIES LABELS "interop" TIMEOUT 60)
endforeach()
