/* A library for test_module that is no packfn library: no __packfn_abi stamp, no __packfn_ or
 * __tvm_ffi_ export, only a plain C function. Its load must be refused as neither kind. */
__attribute__((visibility("default"))) int plain_answer(void) {
  return 42;
}
