// bench/jax/native_rms_norm.cc: the rms_norm handler a C++ author writes with XLA's ffi.h (the
// JAX FFI tutorial's way), calling the same packfn kernel (pf_kernel_rms_norm, the direct C
// entry of libpackfn_kernels) that packfn's C adapter calls through the packed function. Built
// by bench_ffi.py for the overhead comparison only; no part of the library.
#include <cstdint>
#include <string>

#include "packfn/error.h"
#include "packfn/kernels.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

template <typename T>
static DLTensor View(T& buf, DLDataType dtype) {
  DLTensor t{};
  t.data = buf.untyped_data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(buf.dimensions().size());
  t.dtype = dtype;
  t.shape = const_cast<int64_t*>(buf.dimensions().begin());
  return t;
}

static ffi::Error RmsNormImpl(float eps, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  DLDataType f32{kDLFloat, 32, 1};
  DLTensor xt = View(x, f32), yt = View(*y, f32);
  if (pf_kernel_rms_norm(&xt, &yt, eps) != 0) {
    pf_object_t* e = pf_error_take();
    std::string msg = std::string(pf_error_kind(e)) + ": " + pf_error_message(e);
    pf_object_release(e);
    return ffi::Error::InvalidArgument(msg);
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(NativeRmsNorm, RmsNormImpl,
                              ffi::Ffi::Bind()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
