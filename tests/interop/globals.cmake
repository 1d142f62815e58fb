# One global function table across packfn and TVM-FFI (issue 11, deliverable 6): each side
# finds the other's functions, registered before or after packfn joins.
pf_add_interop_test(test_interop_global ${CMAKE_CURRENT_LIST_DIR}/test_interop_global.c)
