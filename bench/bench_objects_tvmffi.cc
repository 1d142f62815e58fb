// bench_objects_tvmffi.cc: TVM-FFI's side of bench_objects: the same kinds of object as
// bench_objects.c builds with packfn, through TVM-FFI's C entry points where they exist and its
// C++ headers for tensors (no C entry allocates a CPU tensor or makes a view).
#include "objects.h"
#include "tvmffi_raised.h"

#include <cstdio>
#include <cstdlib>

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/list.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/string.h>
#include <tvm/ffi/container/tensor.h>

namespace {

namespace ffi = tvm::ffi;

constexpr const char* kImpl = "tvmffi";

[[noreturn]] void FailRaised(const char* what) {
  char detail[256];
  pf_objbench_fail(kImpl, what, PfBenchTakeRaisedText(detail, sizeof(detail)));
}

int Callee(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) {
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = 1;
  return 0;
}

int64_t closure_state = 1;
void ClosureDeleter(void*) {}

void* CreateFunction(void* self, void (*deleter)(void*), uint64_t* checksum) {
  TVMFFIObjectHandle fn = nullptr;
  if (TVMFFIFunctionCreate(self, Callee, deleter, &fn) != 0)
    FailRaised("TVMFFIFunctionCreate");
  *checksum += static_cast<uint64_t>(static_cast<const TVMFFIObject*>(fn)->type_index);
  return fn;
}

void* CreateFn(void*, uint64_t* checksum) {
  return CreateFunction(nullptr, nullptr, checksum);
}
void* CreateClosure(void*, uint64_t* checksum) {
  return CreateFunction(&closure_state, ClosureDeleter, checksum);
}

void* CreateString(const char* data, size_t size, uint64_t* checksum) {
  TVMFFIByteArray bytes = {data, size};
  TVMFFIAny s;
  if (TVMFFIStringFromByteArray(&bytes, &s) != 0)
    FailRaised("TVMFFIStringFromByteArray");
  if (s.type_index != kTVMFFIStr)
    pf_objbench_fail(kImpl, "string", "expected a string object");
  *checksum += TVMFFIBytesGetByteArrayPtr(s.v_obj)->size;
  return s.v_obj;
}
void* CreateString8(void*, uint64_t* checksum) {
  return CreateString(PF_OBJBENCH_STRING_8, sizeof(PF_OBJBENCH_STRING_8) - 1, checksum);
}
void* CreateString100(void*, uint64_t* checksum) {
  return CreateString(PF_OBJBENCH_STRING_100, sizeof(PF_OBJBENCH_STRING_100) - 1, checksum);
}

// A CPU allocator for ffi::Tensor::FromNDAlloc, as in TVM-FFI's own example: malloc / free.
struct CPUNDAlloc {
  void AllocData(DLTensor* tensor) {
    tensor->data = std::malloc(ffi::GetDataSize(*tensor));
    if (tensor->data == nullptr)
      pf_objbench_fail(kImpl, "tensor", "out of memory");
  }
  void FreeData(DLTensor* tensor) { std::free(tensor->data); }
};

constexpr DLDataType kFloat32 = {kDLFloat, 32, 1};
constexpr DLDevice kCPU = {kDLCPU, 0};

// A new reference to what t holds, as a C handle (t keeps its own until it goes).
// The reference moved out of `t` (no count changed), as packfn's constructors hand theirs over:
// an IncRef here and the DecRef of the temporary's destruction were two atomic operations per
// create on TVM-FFI's side only (review).
TVMFFIObjectHandle Handle(ffi::ObjectRef&& t) {
  return ffi::detail::ObjectUnsafe::MoveObjectRefToTVMFFIObjectPtr(std::move(t));
}

TVMFFIObjectHandle NewTensor(int64_t numel) {
  const int64_t shape[1] = {numel};
  return Handle(ffi::Tensor::FromNDAlloc(CPUNDAlloc(), ffi::ShapeView(shape, 1), kFloat32, kCPU));
}

// tensor_view: the state is the base tensor; each view keeps it alive (as packfn's do).
void* SetupView() {
  const int64_t shape[1] = {PF_OBJBENCH_VIEW_NUMEL};
  return new ffi::Tensor(
      ffi::Tensor::FromNDAlloc(CPUNDAlloc(), ffi::ShapeView(shape, 1), kFloat32, kCPU));
}
void TeardownView(void* base) {
  delete static_cast<ffi::Tensor*>(base);
}
void* CreateView(void* base, uint64_t* checksum) {
  static const int64_t shape[1] = {PF_OBJBENCH_VIEW_NUMEL};
  static const int64_t strides[1] = {1};
  ffi::Tensor v = static_cast<const ffi::Tensor*>(base)->as_strided(ffi::ShapeView(shape, 1),
                                                                    ffi::ShapeView(strides, 1));
  *checksum += static_cast<uint64_t>(v.GetDLTensorPtr()->shape[0]);
  return Handle(std::move(v));
}

// tensor_slice: every second element from element 1, as pf_tensor_slice(0, 1, 1024, 2) makes.
void* CreateSlice(void* base, uint64_t* checksum) {
  static const int64_t shape[1] = {PF_OBJBENCH_VIEW_NUMEL / 2};
  static const int64_t strides[1] = {2};
  ffi::Tensor v = static_cast<const ffi::Tensor*>(base)->as_strided(
      ffi::ShapeView(shape, 1), ffi::ShapeView(strides, 1), int64_t{1});
  *checksum += static_cast<uint64_t>(v.GetDLTensorPtr()->shape[0]);
  return Handle(std::move(v));
}

void* CreateTensor1k(void*, uint64_t* checksum) {
  TVMFFIObjectHandle t = NewTensor(PF_OBJBENCH_DATA_NUMEL);
  DLTensor* d = TVMFFITensorGetDLTensorPtr(t);
  static_cast<float*>(d->data)[0] = 1.0f;
  *checksum += static_cast<uint64_t>(d->shape[0]);
  return t;
}

void* CreateBytes100(void*, uint64_t* checksum) {
  TVMFFIByteArray bytes = {PF_OBJBENCH_STRING_100, sizeof(PF_OBJBENCH_STRING_100) - 1};
  TVMFFIAny b;
  if (TVMFFIBytesFromByteArray(&bytes, &b) != 0)
    FailRaised("TVMFFIBytesFromByteArray");
  if (b.type_index != kTVMFFIBytes)
    pf_objbench_fail(kImpl, "bytes", "expected a bytes object");
  *checksum += TVMFFIBytesGetByteArrayPtr(b.v_obj)->size;
  return b.v_obj;
}

// array_4: the ints 1 .. 4 in an ffi::Array (C++: no C entry makes an array).
void* CreateArray4(void*, uint64_t* checksum) {
  ffi::Array<ffi::Any> a;
  a.reserve(PF_OBJBENCH_ARRAY_N);
  for (int64_t i = 1; i <= PF_OBJBENCH_ARRAY_N; ++i)
    a.push_back(i);
  *checksum += static_cast<uint64_t>(a.size());
  return Handle(std::move(a));
}

// list_4: an empty ffi::List, then 4 push_back (no reserve, as packfn's side).
void* CreateList4(void*, uint64_t* checksum) {
  ffi::List<ffi::Any> l;
  for (int64_t i = 1; i <= PF_OBJBENCH_ARRAY_N; ++i)
    l.push_back(i);
  *checksum += static_cast<uint64_t>(l.size());
  return Handle(std::move(l));
}

// map_4: an empty ffi::Map, then Set of the keys "k1".."k4" to the ints 1..4.
void* CreateMap4(void*, uint64_t* checksum) {
  static const char* const keys[PF_OBJBENCH_ARRAY_N] = {"k1", "k2", "k3", "k4"};
  ffi::Map<ffi::Any, ffi::Any> m;
  for (int64_t i = 0; i < PF_OBJBENCH_ARRAY_N; ++i)
    m.Set(ffi::String(keys[i]), i + 1);
  *checksum += static_cast<uint64_t>(m.size());
  return Handle(std::move(m));
}

void* CreateShape2(void*, uint64_t* checksum) {
  ffi::Shape s({3, 4});
  *checksum += static_cast<uint64_t>(s.size());
  return Handle(std::move(s));
}

void* CreateError(void*, uint64_t* checksum) {
  static const TVMFFIByteArray kind = {PF_OBJBENCH_ERROR_KIND, sizeof(PF_OBJBENCH_ERROR_KIND) - 1};
  static const TVMFFIByteArray message = {PF_OBJBENCH_ERROR_MESSAGE,
                                          sizeof(PF_OBJBENCH_ERROR_MESSAGE) - 1};
  static const TVMFFIByteArray backtrace = {"", 0};
  TVMFFIObjectHandle e = nullptr;
  if (TVMFFIErrorCreate(&kind, &message, &backtrace, &e) != 0)
    pf_objbench_fail(kImpl, "error", "TVMFFIErrorCreate failed");
  *checksum += static_cast<unsigned char>(TVMFFIErrorGetCellPtr(e)->message.data[0]);
  return e;
}

// tensor_dlpack: the neutral producer's export (objects.h) imported, no alignment or
// contiguity asked (what packfn's import accepts too).
void* CreateDLPack(void*, uint64_t* checksum) {
  TVMFFIObjectHandle t = nullptr;
  if (TVMFFITensorFromDLPackVersioned(
          static_cast<DLManagedTensorVersioned*>(pf_objbench_dlpack_produce()), 0, 0, &t) != 0)
    FailRaised("TVMFFITensorFromDLPackVersioned");
  *checksum += static_cast<uint64_t>(TVMFFITensorGetDLTensorPtr(t)->shape[0]);
  return t;
}

void Release(void* obj) {
  TVMFFIObjectDecRef(obj);
}

const pf_objbench_kind_t kKinds[] = {
    {"function", kImpl, "TVMFFIFunctionCreate(NULL self, NULL deleter)", nullptr, CreateFn, Release,
     nullptr},
    {"function_direct", kImpl, "TVMFFIFunctionCreate(NULL self, NULL deleter): its direct form",
     nullptr, CreateFn, Release, nullptr},
    {"closure", kImpl, "TVMFFIFunctionCreate(self, deleter)", nullptr, CreateClosure, Release,
     nullptr},
    {"string_8", kImpl, "TVMFFIStringFromByteArray (8 bytes: a string object)", nullptr,
     CreateString8, Release, nullptr},
    {"string_100", kImpl, "TVMFFIStringFromByteArray", nullptr, CreateString100, Release, nullptr},
    {"bytes_100", kImpl, "TVMFFIBytesFromByteArray", nullptr, CreateBytes100, Release, nullptr},
    {"array_4", kImpl, "ffi::Array<Any> (C++, reserve + 4 push_back)", nullptr, CreateArray4,
     Release, nullptr},
    {"list_4", kImpl, "ffi::List<Any> (C++, 4 push_back)", nullptr, CreateList4, Release, nullptr},
    {"map_4", kImpl, "ffi::Map<Any, Any> (C++, 4 Set of ffi::String keys)", nullptr, CreateMap4,
     Release, nullptr},
    {"shape_2", kImpl, "ffi::Shape({3, 4}) (C++)", nullptr, CreateShape2, Release, nullptr},
    {"error", kImpl, "TVMFFIErrorCreate (empty backtrace, not raised)", nullptr, CreateError,
     Release, nullptr},
    {"tensor_view", kImpl, "ffi::Tensor::as_strided (C++) of a live 1024-float tensor", SetupView,
     CreateView, Release, TeardownView},
    {"tensor_slice", kImpl, "ffi::Tensor::as_strided (C++, strides {2}, element offset 1)",
     SetupView, CreateSlice, Release, TeardownView},
    {"tensor_1k", kImpl, "ffi::Tensor::FromNDAlloc (C++, malloc/free), 256 float32", nullptr,
     CreateTensor1k, Release, nullptr},
    {"tensor_dlpack", kImpl, "TVMFFITensorFromDLPackVersioned of a neutral producer's export",
     nullptr, CreateDLPack, Release, nullptr},
};

} // namespace

extern "C" const pf_objbench_kind_t* pf_objbench_tvmffi_kinds(size_t* count) {
  *count = sizeof(kKinds) / sizeof(kKinds[0]);
  return kKinds;
}
