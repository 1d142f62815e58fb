# Errors across packfn and TVM-FFI (issue 11): one raised-error slot.
pf_add_interop_test(interop_errors errors_interop.c)
# PACKFN_NO_TVM_FFI=1: the runtimes keep separate slots and registries.
add_test(NAME interop_errors_apart COMMAND ${PF_TEST_WRAPPER} $<TARGET_FILE:interop_errors> --apart)
set_tests_properties(interop_errors_apart PROPERTIES LABELS "memcheck;interop"
                                                     ENVIRONMENT "PACKFN_NO_TVM_FFI=1")
