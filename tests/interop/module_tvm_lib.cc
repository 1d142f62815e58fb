// A kernel library built only against TVM-FFI's C++ headers, as TVM-FFI's users build them:
// exports __tvm_ffi_<name> through TVM_FFI_DLL_EXPORT_TYPED_FUNC (and metadata), no packfn
// stamp. test_interop_module and test_cli load it with pf_module_load / packfn call --lib.
#define TVM_FFI_DLL_EXPORT_INCLUDE_METADATA 1
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <string>

namespace {

int64_t AddInts(int64_t a, int64_t b) {
  return a + b;
}

tvm::ffi::String Greet(tvm::ffi::String name) {
  return tvm::ffi::String("hello, " + std::string(name.data(), name.size()));
}

double Halve(double x) {
  if (x < 0)
    TVM_FFI_THROW(ValueError) << "halve: negative input " << x;
  return x / 2;
}

} // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_ints, AddInts);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(greet, Greet);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(halve, Halve);
