# The dynamic loader's lock against packfn's with TVM-FFI joined (tests/regress/
# regress_loader_lock.c): the first list growth after the join, and a raise whose frames are
# named, each made at once by a worker thread and by a library constructor.
foreach(mode list raise)
  add_test(NAME regress_loader_lock_${mode}
           COMMAND regress_loader_lock ${mode} $<TARGET_FILE:pf_regress_loader_lock>
                   $<TARGET_FILE:TVMFFI::tvm_ffi>)
  set_tests_properties(regress_loader_lock_${mode} PROPERTIES LABELS "regress;interop" TIMEOUT 60
                       ENVIRONMENT "PACKFN_BACKTRACE=1")
endforeach()
