// The reference side of bench_tvm_kernel.py: rms_norm exported with TVM-FFI's own C++ macro
// (TVM_FFI_DLL_EXPORT_TYPED_FUNC) whose body is the very C entry point packfn's kernel runs
// (pf_kernel_rms_norm), so the rows differ only in how the call reaches the loop. The library
// links no packfn library: `bind(path)` finds pf_kernel_rms_norm in the libpackfn_kernels the
// process already loaded (the Python package's copy), so one packfn runtime serves every row.
#include <dlfcn.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <string>

#include "packfn/error.h"

namespace {

struct Kernels {
  int (*rms_norm)(const DLTensor*, DLTensor*, double) = nullptr;
  pf_object_t* (*error_take)() = nullptr;
  const char* (*error_kind)(const pf_object_t*) = nullptr;
  const char* (*error_message)(const pf_object_t*) = nullptr;
  void (*object_release)(pf_object_t*) = nullptr;
};
Kernels g_kernels;

template <typename T> void Find(void* lib, const char* name, T* out) {
  *reinterpret_cast<void**>(out) = dlsym(lib, name);
  if (!*out)
    throw tvm::ffi::Error("RuntimeError", std::string("bind: no symbol ") + name, std::string());
}

void Bind(tvm::ffi::String path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!lib)
    throw tvm::ffi::Error("RuntimeError", "bind: " + std::string(path) + " is not loaded",
                          std::string());
  Kernels k;
  Find(lib, "pf_kernel_rms_norm", &k.rms_norm);
  Find(lib, "pf_error_take", &k.error_take);
  Find(lib, "pf_error_kind", &k.error_kind);
  Find(lib, "pf_error_message", &k.error_message);
  Find(lib, "pf_object_release", &k.object_release);
  g_kernels = k; // the handle's reference keeps the library for the process's life
}

void RmsNorm(DLTensor* x, DLTensor* out, double eps) {
  if (!g_kernels.rms_norm)
    throw tvm::ffi::Error("RuntimeError", "rms_norm: call bind(path) first", std::string());
  if (g_kernels.rms_norm(x, out, eps) == 0)
    return;
  pf_object_t* err = g_kernels.error_take();
  std::string kind = err ? g_kernels.error_kind(err) : "RuntimeError";
  std::string message = err ? g_kernels.error_message(err) : "rms_norm failed";
  g_kernels.object_release(err);
  throw tvm::ffi::Error(kind, message, std::string());
}

} // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(bind, Bind);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rms_norm, RmsNorm);
