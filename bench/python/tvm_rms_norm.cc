// The reference side of bench_tvm_kernel.py: rms_norm exported with TVM-FFI's own C++ macro
// (TVM_FFI_DLL_EXPORT_TYPED_FUNC), its body the very same C entry point packfn's kernel runs
// (pf_kernel_rms_norm), so the two rows differ only in how the call reaches the loop.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <string>

#include "packfn/error.h"
#include "packfn/kernels.h"

namespace {

void RmsNorm(DLTensor* x, DLTensor* out, double eps) {
  if (pf_kernel_rms_norm(x, out, eps) == 0)
    return;
  pf_object_t* err = pf_error_take();
  std::string kind = err ? pf_error_kind(err) : "RuntimeError";
  std::string message = err ? pf_error_message(err) : "rms_norm failed";
  pf_object_release(err);
  throw tvm::ffi::Error(kind, message, std::string());
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(rms_norm, RmsNorm);
