// tvmffi_ops.cc: the benchmark operations on TVM-FFI 0.1.x, through its C entry points where
// they exist and its C++ headers where they do not (typed functions, tensor allocation).
#include "harness.h"
#include "tvmffi_raised.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/string.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

namespace {

namespace ffi = tvm::ffi;

constexpr const char* kImpl = "tvmffi";

// Reports the raised TVM-FFI error of a failed entry point and exits.
[[noreturn]] void FailRaised(const char* what) {
  char detail[256];
  pf_bench_fail(kImpl, what, PfBenchTakeRaisedText(detail, sizeof(detail)));
}

inline TVMFFIAny AnyNone() {
  TVMFFIAny v;
  v.type_index = kTVMFFINone;
  v.zero_padding = 0;
  v.v_int64 = 0;
  return v;
}

inline TVMFFIAny AnyInt(int64_t x) {
  TVMFFIAny v;
  v.type_index = kTVMFFIInt;
  v.zero_padding = 0;
  v.v_int64 = x;
  return v;
}

inline TVMFFIAny AnyFloat(double x) {
  TVMFFIAny v;
  v.type_index = kTVMFFIFloat;
  v.zero_padding = 0;
  v.v_float64 = x;
  return v;
}

inline TVMFFIAny AnyRawStr(const char* s) {
  TVMFFIAny v;
  v.type_index = kTVMFFIRawStr;
  v.zero_padding = 0;
  v.v_c_str = s;
  return v;
}

// An object handle as a view, the way TVM-FFI's own AnyView(ObjectRef) and packfn's
// pf_any_object build it: the type index read from the object header, none for NULL.
inline TVMFFIAny AnyObject(TVMFFIObjectHandle h) {
  TVMFFIAny v;
  v.type_index = h ? static_cast<const TVMFFIObject*>(h)->type_index : kTVMFFINone;
  v.zero_padding = 0;
  v.v_obj = static_cast<TVMFFIObject*>(h);
  return v;
}

inline TVMFFIAny AnyPtr(int32_t type_index, void* p) {
  TVMFFIAny v;
  v.type_index = type_index;
  v.zero_padding = 0;
  v.v_ptr = p;
  return v;
}

// Releases what an owned Any holds; values below the first object index hold nothing.
inline void AnyRelease(TVMFFIAny* v) {
  if (v->type_index >= kTVMFFIStaticObjectBegin)
    TVMFFIObjectDecRef(v->v_obj);
  *v = AnyNone();
}

// ---- callees: C safe_call functions that check their arguments as a real callee does ----

int RaiseArgError(const char* message) {
  TVMFFIErrorSetRaisedFromCStr("TypeError", message);
  return -1;
}

inline int ReturnInt(TVMFFIAny* result, int64_t x) {
  *result = AnyInt(x);
  return 0;
}

int Callee0(void*, const TVMFFIAny*, int32_t num_args, TVMFFIAny* result) {
  if (num_args != 0)
    return RaiseArgError("callee0: expected 0 arguments");
  return ReturnInt(result, 1);
}

int Callee1(void*, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  if (num_args != 1 || args[0].type_index != kTVMFFIInt)
    return RaiseArgError("callee1: expected (int)");
  return ReturnInt(result, args[0].v_int64 + 1);
}

// A string argument may come as a raw C string, a small string or a string object.
inline const char* StrData(const TVMFFIAny* v) {
  switch (v->type_index) {
  case kTVMFFIRawStr:
    return v->v_c_str;
  case kTVMFFISmallStr:
    return v->v_bytes;
  case kTVMFFIStr:
    return TVMFFIBytesGetByteArrayPtr(v->v_obj)->data;
  default:
    return nullptr;
  }
}

int Callee3(void*, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  if (num_args != 3 || args[0].type_index != kTVMFFIInt || args[1].type_index != kTVMFFIFloat)
    return RaiseArgError("callee3: expected (int, float, str)");
  const char* s = StrData(&args[2]);
  if (s == nullptr)
    return RaiseArgError("callee3: argument 2: expected str");
  return ReturnInt(result, args[0].v_int64 + static_cast<int64_t>(args[1].v_float64) +
                               static_cast<int64_t>(static_cast<unsigned char>(s[0])));
}

int Callee6(void*, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  if (num_args != 6)
    return RaiseArgError("callee6: expected 6 arguments");
  int64_t sum = 0;
  for (int i = 0; i < 6; ++i) {
    if (args[i].type_index != kTVMFFIInt)
      return RaiseArgError("callee6: expected int arguments");
    sum += args[i].v_int64;
  }
  return ReturnInt(result, sum);
}

// Takes a tensor as a DLTensor* view or as a tensor object.
int CalleeTensor(void*, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  if (num_args != 1)
    return RaiseArgError("callee_tensor: expected 1 argument");
  const DLTensor* t;
  if (args[0].type_index == kTVMFFIDLTensorPtr) {
    t = static_cast<const DLTensor*>(args[0].v_ptr);
  } else if (args[0].type_index == kTVMFFITensor) {
    t = TVMFFITensorGetDLTensorPtr(args[0].v_obj);
  } else {
    return RaiseArgError("callee_tensor: expected a tensor");
  }
  return ReturnInt(result, t->shape[0]);
}

int CalleeClosure(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  int64_t step = *static_cast<const int64_t*>(self);
  if (num_args != 1 || args[0].type_index != kTVMFFIInt)
    return RaiseArgError("callee_closure: expected (int)");
  return ReturnInt(result, args[0].v_int64 + step);
}

int64_t closure_step = 1;
void ClosureDeleter(void*) {}

// ---- state ----

struct CallState {
  TVMFFIObjectHandle fn;
  TVMFFIObjectHandle tensor; // call_tensor only
};

TVMFFIObjectHandle CreateFunction(void* self, TVMFFISafeCallType call, void (*deleter)(void*),
                                  const char* what) {
  TVMFFIObjectHandle fn = nullptr;
  if (TVMFFIFunctionCreate(self, call, deleter, &fn) != 0)
    FailRaised(what);
  return fn;
}

CallState* NewCallState(TVMFFIObjectHandle fn) {
  CallState* s = static_cast<CallState*>(std::calloc(1, sizeof(CallState)));
  if (s == nullptr)
    pf_bench_fail(kImpl, "setup", "out of memory");
  s->fn = fn;
  return s;
}

void TeardownCall(void* state) {
  CallState* s = static_cast<CallState*>(state);
  TVMFFIObjectDecRef(s->fn);
  if (s->tensor != nullptr)
    TVMFFIObjectDecRef(s->tensor);
  std::free(s);
}

// CPU allocator for ffi::Tensor::FromNDAlloc, as in TVM-FFI's own example: malloc / free.
struct CPUNDAlloc {
  void AllocData(DLTensor* tensor) {
    tensor->data = std::malloc(ffi::GetDataSize(*tensor));
    if (tensor->data == nullptr)
      pf_bench_fail(kImpl, "tensor", "out of memory");
  }
  void FreeData(DLTensor* tensor) { std::free(tensor->data); }
};

// A new reference to what ref holds, as a C handle; the ObjectRef keeps its own. (The C++
// helper for this moved from namespace details to detail between 0.1.14 and 0.1.15.)
TVMFFIObjectHandle OwnedHandle(const ffi::ObjectRef& ref) {
  TVMFFIObjectHandle h = const_cast<ffi::Object*>(ref.get());
  TVMFFIObjectIncRef(h);
  return h;
}

constexpr DLDataType kFloat32 = {kDLFloat, 32, 1};
constexpr DLDevice kCPU = {kDLCPU, 0};
const int64_t kTensorShape[1] = {PF_BENCH_TENSOR_NUMEL};

TVMFFIObjectHandle NewTensor() {
  ffi::Tensor t =
      ffi::Tensor::FromNDAlloc(CPUNDAlloc(), ffi::ShapeView(kTensorShape, 1), kFloat32, kCPU);
  return OwnedHandle(t);
}

// ---- packed calls ----

void* SetupCall0() {
  return NewCallState(CreateFunction(nullptr, Callee0, nullptr, "call_0"));
}
void* SetupCall1() {
  return NewCallState(CreateFunction(nullptr, Callee1, nullptr, "call_1int"));
}
// TVMFFIFunctionCreate(NULL, call, NULL) makes TVM-FFI's direct form: the cell holds `call`,
// which receives the function handle (as pf_function_create_direct's does). A callee that gets
// the NULL it was created with, as pf_function_create(NULL, call, NULL)'s does, takes TVM-FFI's
// other form, which needs a deleter (here one that does nothing): its cell calls a trampoline.
void* SetupCall0Null() {
  return NewCallState(CreateFunction(nullptr, Callee0, ClosureDeleter, "call_0_plain"));
}
void* SetupCall1Null() {
  return NewCallState(CreateFunction(nullptr, Callee1, ClosureDeleter, "call_1int_plain"));
}
void* SetupCall3() {
  return NewCallState(CreateFunction(nullptr, Callee3, nullptr, "call_3mixed"));
}
void* SetupCall6() {
  return NewCallState(CreateFunction(nullptr, Callee6, nullptr, "call_6int"));
}
void* SetupClosure() {
  return NewCallState(
      CreateFunction(&closure_step, CalleeClosure, ClosureDeleter, "call_1int_closure"));
}
void* SetupCallDLTensor() {
  return NewCallState(CreateFunction(nullptr, CalleeTensor, nullptr, "call_dltensor"));
}
void* SetupCallTensor() {
  CallState* s = NewCallState(CreateFunction(nullptr, CalleeTensor, nullptr, "call_tensor"));
  s->tensor = NewTensor();
  return s;
}
void* SetupCallTyped() {
  ffi::Function f = ffi::Function::FromTyped([](int64_t a, int64_t b) { return a + b; });
  return NewCallState(OwnedHandle(f));
}

inline int64_t CallOrFail(TVMFFIObjectHandle fn, TVMFFIAny* args, int32_t n, const char* what) {
  TVMFFIAny result = AnyNone();
  if (TVMFFIFunctionCall(fn, args, n, &result) != 0)
    FailRaised(what);
  return result.v_int64; // an int result holds nothing to release
}

uint64_t RunCall0(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<CallState*>(state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += CallOrFail(fn, nullptr, 0, "call_0");
  return sum;
}

// Also serves call_1int_closure and call_typed, which take (i) and (i, 1).
uint64_t RunCall1(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<CallState*>(state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIAny args[1] = {AnyInt(i)};
    sum += CallOrFail(fn, args, 1, "call_1int");
  }
  return sum;
}

uint64_t RunCallTyped(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<CallState*>(state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIAny args[2] = {AnyInt(i), AnyInt(1)};
    sum += CallOrFail(fn, args, 2, "call_typed");
  }
  return sum;
}

uint64_t RunCall3(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<CallState*>(state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIAny args[3] = {AnyInt(i), AnyFloat(PF_BENCH_FLOAT_ARG), AnyRawStr(PF_BENCH_STR_ARG)};
    sum += CallOrFail(fn, args, 3, "call_3mixed");
  }
  return sum;
}

uint64_t RunCall6(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<CallState*>(state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIAny args[6] = {AnyInt(i), AnyInt(1), AnyInt(2), AnyInt(3), AnyInt(4), AnyInt(5)};
    sum += CallOrFail(fn, args, 6, "call_6int");
  }
  return sum;
}

uint64_t RunCallDLTensor(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<CallState*>(state)->fn;
  static float data[PF_BENCH_TENSOR_NUMEL];
  int64_t shape[1] = {PF_BENCH_TENSOR_NUMEL};
  DLTensor t = {data, kCPU, 1, kFloat32, shape, nullptr, 0};
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIAny args[1] = {AnyPtr(kTVMFFIDLTensorPtr, &t)};
    sum += CallOrFail(fn, args, 1, "call_dltensor");
  }
  return sum;
}

uint64_t RunCallTensor(void* state, int64_t iters) {
  CallState* s = static_cast<CallState*>(state);
  TVMFFIObjectHandle fn = s->fn;
  TVMFFIObjectHandle tensor = s->tensor;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIAny args[1] = {AnyObject(tensor)};
    sum += CallOrFail(fn, args, 1, "call_tensor");
  }
  return sum;
}

// ---- global table ----

// Registers one function under both benchmark names; the state is that function.
void* SetupGlobal() {
  TVMFFIObjectHandle fn = CreateFunction(nullptr, Callee0, nullptr, "global");
  const char* names[2] = {PF_BENCH_GLOBAL_SHORT, PF_BENCH_GLOBAL_LONG};
  for (const char* name : names) {
    TVMFFIByteArray ba = {name, std::strlen(name)};
    if (TVMFFIFunctionSetGlobal(&ba, fn, /*override=*/1) != 0)
      FailRaised("global set");
  }
  return NewCallState(fn);
}

// The name is a TVMFFIByteArray built once, as TVM-FFI's entry takes (data, size).
uint64_t RunGlobalGet(const TVMFFIByteArray* name, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIObjectHandle fn = nullptr;
    if (TVMFFIFunctionGetGlobal(name, &fn) != 0)
      FailRaised("global get");
    sum += fn != nullptr;
    TVMFFIObjectDecRef(fn);
  }
  return sum;
}

uint64_t RunGlobalShort(void*, int64_t iters) {
  static const TVMFFIByteArray name = {PF_BENCH_GLOBAL_SHORT, sizeof(PF_BENCH_GLOBAL_SHORT) - 1};
  return RunGlobalGet(&name, iters);
}

uint64_t RunGlobalLong(void*, int64_t iters) {
  static const TVMFFIByteArray name = {PF_BENCH_GLOBAL_LONG, sizeof(PF_BENCH_GLOBAL_LONG) - 1};
  return RunGlobalGet(&name, iters);
}

// ---- object lifecycle ----

inline uint64_t StrongCount(TVMFFIObjectHandle obj) {
  return static_cast<const TVMFFIObject*>(obj)->combined_ref_count & 0xFFFFFFFFu;
}

uint64_t RunLifecycle(void* self, void (*deleter)(void*), int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIObjectHandle fn = nullptr;
    if (TVMFFIFunctionCreate(self, Callee1, deleter, &fn) != 0)
      FailRaised("function create");
    TVMFFIObjectIncRef(fn);
    sum += StrongCount(fn);
    TVMFFIObjectDecRef(fn);
    TVMFFIObjectDecRef(fn);
  }
  return sum;
}

uint64_t RunFunctionLifecycle(void*, int64_t iters) {
  return RunLifecycle(nullptr, nullptr, iters);
}
uint64_t RunClosureLifecycle(void*, int64_t iters) {
  return RunLifecycle(&closure_step, ClosureDeleter, iters);
}

// ---- references ----

uint64_t RunRetainRelease(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<CallState*>(state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIObjectIncRef(fn);
    sum += StrongCount(fn);
    TVMFFIObjectDecRef(fn);
  }
  return sum;
}

// ---- a function from a loaded module: bench_module.c exports __tvm_ffi_add1 too ----

struct ModuleState {
  ffi::Module module;
  TVMFFIObjectHandle fn;
};

void* SetupModuleCall() {
#ifdef PF_BENCH_MODULE_PATH
  try {
    ffi::Module module = ffi::Module::LoadFromFile(PF_BENCH_MODULE_PATH);
    ffi::Optional<ffi::Function> f = module->GetFunction("add1");
    if (!f.has_value())
      pf_bench_fail(kImpl, "module_call", "add1 not found");
    return new ModuleState{module, OwnedHandle(*f)};
  } catch (const ffi::Error& e) {
    pf_bench_fail(kImpl, "module_call", e.what());
  }
#else
  pf_bench_fail(kImpl, "module_call", "built without PF_BENCH_MODULE_PATH");
#endif
}

void TeardownModuleCall(void* state) {
  ModuleState* s = static_cast<ModuleState*>(state);
  TVMFFIObjectDecRef(s->fn);
  delete s;
}

uint64_t RunModuleCall(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<ModuleState*>(state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIAny args[1] = {AnyInt(i)};
    sum += CallOrFail(fn, args, 1, "module_call");
  }
  return sum;
}

// ---- strings ----

inline size_t StringSize(const TVMFFIAny* v) {
  if (v->type_index == kTVMFFISmallStr)
    return v->small_str_len;
  return TVMFFIBytesGetByteArrayPtr(v->v_obj)->size;
}

uint64_t RunString(const char* data, size_t size, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    PF_BENCH_OPAQUE(data);
    TVMFFIByteArray ba = {data, size};
    TVMFFIAny s = AnyNone();
    if (TVMFFIStringFromByteArray(&ba, &s) != 0)
      FailRaised("string create");
    PF_BENCH_OPAQUE_MEM(s); // as packfn's row does (a no-op here: s is built by a call)
    sum += StringSize(&s);
    AnyRelease(&s);
  }
  return sum;
}

uint64_t RunString5(void*, int64_t iters) {
  return RunString(PF_BENCH_STRING_5, sizeof(PF_BENCH_STRING_5) - 1, iters);
}
uint64_t RunString100(void*, int64_t iters) {
  return RunString(PF_BENCH_STRING_100, sizeof(PF_BENCH_STRING_100) - 1, iters);
}

// ---- errors ----

// error_roundtrip_bt: TVMFFIErrorSetRaisedFromCStr always walks the stack and names the frames
// (libbacktrace in the wheel); the text is read back as packfn's row reads its own.
uint64_t RunError(void*, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIErrorSetRaisedFromCStr(PF_BENCH_ERROR_KIND, PF_BENCH_ERROR_MESSAGE);
    TVMFFIObjectHandle err = nullptr;
    TVMFFIErrorMoveFromRaised(&err);
    if (err == nullptr)
      pf_bench_fail(kImpl, "error_roundtrip_bt", "no error was raised");
    const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
    const char* bt = cell->backtrace.data;
    PF_BENCH_OPAQUE(bt);
    sum += cell->message.size;
    TVMFFIObjectDecRef(err);
  }
  return sum;
}

// TVMFFIErrorSetRaisedFromCStr always walks the stack (libbacktrace in the wheel); creating
// the error with an empty backtrace and raising it skips that.
uint64_t RunErrorNoBacktrace(void*, int64_t iters) {
  static const TVMFFIByteArray kind = {PF_BENCH_ERROR_KIND, sizeof(PF_BENCH_ERROR_KIND) - 1};
  static const TVMFFIByteArray message = {PF_BENCH_ERROR_MESSAGE,
                                          sizeof(PF_BENCH_ERROR_MESSAGE) - 1};
  static const TVMFFIByteArray backtrace = {"", 0};
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIObjectHandle raised = nullptr;
    if (TVMFFIErrorCreate(&kind, &message, &backtrace, &raised) != 0)
      pf_bench_fail(kImpl, "error_roundtrip_nobt", "TVMFFIErrorCreate failed");
    TVMFFIErrorSetRaised(raised); // the slot takes its own reference
    TVMFFIObjectDecRef(raised);
    TVMFFIObjectHandle err = nullptr;
    TVMFFIErrorMoveFromRaised(&err);
    if (err == nullptr)
      pf_bench_fail(kImpl, "error_roundtrip_nobt", "no error was raised");
    sum += TVMFFIErrorGetCellPtr(err)->message.size;
    TVMFFIObjectDecRef(err);
  }
  return sum;
}

// ---- tensors ----

// C++ only: TVM-FFI has no C entry that allocates a CPU tensor by itself.
uint64_t RunTensorEmpty(void*, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    ffi::Tensor t =
        ffi::Tensor::FromNDAlloc(CPUNDAlloc(), ffi::ShapeView(kTensorShape, 1), kFloat32, kCPU);
    sum += t.GetDLTensorPtr()->shape[0];
  }
  return sum;
}

// A host's DLPack allocator for TVMFFIEnvTensorAlloc: one block holding the managed tensor
// and its shape, plus the data buffer.
struct EnvBlock {
  DLManagedTensorVersioned managed;
  int64_t shape[1];
};

void EnvBlockDeleter(DLManagedTensorVersioned* self) {
  std::free(self->dl_tensor.data);
  std::free(self);
}

int EnvAllocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                 void (*set_error)(void* error_ctx, const char* kind, const char* message)) {
  if (prototype->ndim != 1) {
    set_error(error_ctx, "ValueError", "bench env allocator: 1-d tensors only");
    return -1;
  }
  EnvBlock* b = static_cast<EnvBlock*>(std::calloc(1, sizeof(EnvBlock)));
  void* data = std::malloc(ffi::GetDataSize(*prototype));
  if (b == nullptr || data == nullptr) {
    std::free(b);
    std::free(data);
    set_error(error_ctx, "MemoryError", "bench env allocator: out of memory");
    return -1;
  }
  b->shape[0] = prototype->shape[0];
  b->managed.version.major = DLPACK_MAJOR_VERSION;
  b->managed.version.minor = DLPACK_MINOR_VERSION;
  b->managed.deleter = EnvBlockDeleter;
  b->managed.dl_tensor.data = data;
  b->managed.dl_tensor.device = prototype->device;
  b->managed.dl_tensor.ndim = 1;
  b->managed.dl_tensor.dtype = prototype->dtype;
  b->managed.dl_tensor.shape = b->shape;
  *out = &b->managed;
  return 0;
}

struct EnvState {
  DLPackManagedTensorAllocator previous;
};

void* SetupTensorEnv() {
  EnvState* s = static_cast<EnvState*>(std::calloc(1, sizeof(EnvState)));
  if (s == nullptr)
    pf_bench_fail(kImpl, "setup", "out of memory");
  if (TVMFFIEnvSetDLPackManagedTensorAllocator(EnvAllocator, 0, &s->previous) != 0)
    FailRaised("env allocator set");
  return s;
}

void TeardownTensorEnv(void* state) {
  EnvState* s = static_cast<EnvState*>(state);
  TVMFFIEnvSetDLPackManagedTensorAllocator(s->previous, 0, nullptr);
  std::free(s);
}

uint64_t RunTensorEmptyEnv(void*, int64_t iters) {
  int64_t shape[1] = {PF_BENCH_TENSOR_NUMEL};
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    DLTensor prototype = {nullptr, kCPU, 1, kFloat32, shape, nullptr, 0};
    TVMFFIObjectHandle t = nullptr;
    if (TVMFFIEnvTensorAlloc(&prototype, &t) != 0)
      FailRaised("tensor_empty_env");
    sum += TVMFFITensorGetDLTensorPtr(t)->shape[0];
    TVMFFIObjectDecRef(t);
  }
  return sum;
}

// ---- DLPack exchange: the state is one tensor object ----

void* SetupTensor() {
  return NewTensor();
}
void TeardownTensor(void* state) {
  TVMFFIObjectDecRef(state);
}

uint64_t RunDLPackLegacy(void* state, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    DLManagedTensor* managed = nullptr;
    if (TVMFFITensorToDLPack(state, &managed) != 0)
      FailRaised("to dlpack");
    TVMFFIObjectHandle back = nullptr;
    if (TVMFFITensorFromDLPack(managed, 0, 0, &back) != 0)
      FailRaised("from dlpack");
    sum += TVMFFITensorGetDLTensorPtr(back)->shape[0];
    TVMFFIObjectDecRef(back);
  }
  return sum;
}

uint64_t RunDLPackVersioned(void* state, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    DLManagedTensorVersioned* managed = nullptr;
    if (TVMFFITensorToDLPackVersioned(state, &managed) != 0)
      FailRaised("to dlpack versioned");
    TVMFFIObjectHandle back = nullptr;
    if (TVMFFITensorFromDLPackVersioned(managed, 0, 0, &back) != 0)
      FailRaised("from dlpack versioned");
    sum += TVMFFITensorGetDLTensorPtr(back)->shape[0];
    TVMFFIObjectDecRef(back);
  }
  return sum;
}

// ---- maps: the same keys and sizes as packfn_ops_objects.c's rows ----

constexpr int64_t kMapMax = 1024;

struct MapState {
  ffi::Map<ffi::Any, ffi::Any> map;
  std::vector<ffi::Any> keys;
};

ffi::Any MapKey(int64_t i, bool str) {
  if (!str)
    return ffi::Any(static_cast<int64_t>(i * 7919));
  char name[32];
  std::snprintf(name, sizeof(name), "op.name.%04d", static_cast<int>(i));
  return ffi::Any(ffi::String(name));
}

MapState* MapSetup(int64_t n, bool str, bool fill) {
  auto* st = new MapState();
  for (int64_t i = 0; i < n; ++i) {
    st->keys.push_back(MapKey(i, str));
    if (fill)
      st->map.Set(st->keys.back(), ffi::Any(static_cast<int64_t>(i)));
  }
  return st;
}

void* SetupMapSmall() {
  return MapSetup(4, true, true);
}
void* SetupMap1kStr() {
  return MapSetup(kMapMax, true, true);
}
void* SetupMap1kInt() {
  return MapSetup(kMapMax, false, true);
}
void* SetupMapKeys() {
  return MapSetup(64, true, false);
}
void TeardownMap(void* state) {
  delete static_cast<MapState*>(state);
}

uint64_t RunMapGet(void* state, int64_t iters) {
  auto* st = static_cast<MapState*>(state);
  const int64_t mask = static_cast<int64_t>(st->keys.size()) - 1;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    auto it = st->map.find(st->keys[static_cast<size_t>(i & mask)]);
    if (it == st->map.end())
      pf_bench_fail(kImpl, "map_get", "key not found");
    sum += static_cast<uint64_t>((*it).second.cast<int64_t>());
  }
  return sum;
}

uint64_t RunMapBuild(void* state, int64_t iters) {
  auto* st = static_cast<MapState*>(state);
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    ffi::Map<ffi::Any, ffi::Any> m;
    for (size_t k = 0; k < st->keys.size(); ++k)
      m.Set(st->keys[k], ffi::Any(static_cast<int64_t>(k)));
    sum += m.size();
  }
  return sum;
}

const pf_bench_op_t kOps[] = {
    {"map_get_small", kImpl, "ffi::Map::find", SetupMapSmall, RunMapGet, TeardownMap},
    {"map_get_1k_str", kImpl, "ffi::Map::find", SetupMap1kStr, RunMapGet, TeardownMap},
    {"map_get_1k_int", kImpl, "ffi::Map::find", SetupMap1kInt, RunMapGet, TeardownMap},
    {"map_build_64", kImpl, "ffi::Map + 64 x Map::Set (held alone: in place)", SetupMapKeys,
     RunMapBuild, TeardownMap},
    {"call_0", kImpl, "TVMFFIFunctionCall (TVMFFIFunctionCreate, no self: callee gets the handle)",
     SetupCall0, RunCall0, TeardownCall},
    {"call_1int", kImpl,
     "TVMFFIFunctionCall (TVMFFIFunctionCreate, no self: callee gets the handle)", SetupCall1,
     RunCall1, TeardownCall},
    {"call_0_plain", kImpl,
     "TVMFFIFunctionCall (TVMFFIFunctionCreate, NULL self + no-op deleter: callee gets NULL)",
     SetupCall0Null, RunCall0, TeardownCall},
    {"call_1int_plain", kImpl,
     "TVMFFIFunctionCall (TVMFFIFunctionCreate, NULL self + no-op deleter: callee gets NULL)",
     SetupCall1Null, RunCall1, TeardownCall},
    {"call_1int_closure", kImpl, "TVMFFIFunctionCall (TVMFFIFunctionCreate with self + deleter)",
     SetupClosure, RunCall1, TeardownCall},
    {"call_3mixed", kImpl, "TVMFFIFunctionCall, str as kTVMFFIRawStr", SetupCall3, RunCall3,
     TeardownCall},
    {"call_6int", kImpl, "TVMFFIFunctionCall", SetupCall6, RunCall6, TeardownCall},
    {"call_dltensor", kImpl, "TVMFFIFunctionCall, kTVMFFIDLTensorPtr", SetupCallDLTensor,
     RunCallDLTensor, TeardownCall},
    {"call_tensor", kImpl, "TVMFFIFunctionCall, kTVMFFITensor", SetupCallTensor, RunCallTensor,
     TeardownCall},
    {"call_typed", kImpl, "TVMFFIFunctionCall on ffi::Function::FromTyped (C++)", SetupCallTyped,
     RunCallTyped, TeardownCall},
    {"call_typed_dynamic", kImpl,
     "TVMFFIFunctionCall on ffi::Function::FromTyped (C++; no run-time declaration form)",
     SetupCallTyped, RunCallTyped, TeardownCall},
    {"module_call", kImpl, "TVMFFIFunctionCall on ffi::Module::LoadFromFile + GetFunction",
     SetupModuleCall, RunModuleCall, TeardownModuleCall},
    {"global_get_short", kImpl, "TVMFFIFunctionGetGlobal + TVMFFIObjectDecRef", SetupGlobal,
     RunGlobalShort, TeardownCall},
    {"global_get_long", kImpl, "TVMFFIFunctionGetGlobal + TVMFFIObjectDecRef", SetupGlobal,
     RunGlobalLong, TeardownCall},
    {"function_lifecycle", kImpl,
     "TVMFFIFunctionCreate(NULL self) + TVMFFIObjectIncRef + TVMFFIObjectDecRef x2", nullptr,
     RunFunctionLifecycle, nullptr},
    {"function_lifecycle_plain", kImpl,
     "TVMFFIFunctionCreate(NULL self) + TVMFFIObjectIncRef + TVMFFIObjectDecRef x2: as "
     "function_lifecycle (TVM-FFI's cheaper form; its callee gets the handle)",
     nullptr, RunFunctionLifecycle, nullptr},
    {"closure_lifecycle", kImpl,
     "TVMFFIFunctionCreate(self, deleter) + TVMFFIObjectIncRef + TVMFFIObjectDecRef x2", nullptr,
     RunClosureLifecycle, nullptr},
    {"retain_release", kImpl, "TVMFFIObjectIncRef + TVMFFIObjectDecRef", SetupCall1,
     RunRetainRelease, TeardownCall},
    {"string_5", kImpl, "TVMFFIStringFromByteArray (+ TVMFFIObjectDecRef if an object)", nullptr,
     RunString5, nullptr},
    {"string_100", kImpl, "TVMFFIStringFromByteArray + TVMFFIObjectDecRef", nullptr, RunString100,
     nullptr},
    {"error_roundtrip_bt", kImpl,
     "TVMFFIErrorSetRaisedFromCStr (stack walked and named: libbacktrace) + "
     "TVMFFIErrorMoveFromRaised + backtrace read + TVMFFIObjectDecRef",
     nullptr, RunError, nullptr},
    {"error_roundtrip_nobt", kImpl,
     "no stack walk: TVMFFIErrorCreate (empty backtrace) + TVMFFIErrorSetRaised + "
     "TVMFFIObjectDecRef + TVMFFIErrorMoveFromRaised + TVMFFIObjectDecRef",
     nullptr, RunErrorNoBacktrace, nullptr},
    {"tensor_empty", kImpl, "ffi::Tensor::FromNDAlloc (C++, malloc/free) + inline release", nullptr,
     RunTensorEmpty, nullptr},
    {"tensor_empty_env", kImpl,
     "TVMFFIEnvTensorAlloc (host DLPack allocator, malloc/free) + TVMFFIObjectDecRef",
     SetupTensorEnv, RunTensorEmptyEnv, TeardownTensorEnv},
    {"dlpack_legacy", kImpl, "TVMFFITensorToDLPack + TVMFFITensorFromDLPack + TVMFFIObjectDecRef",
     SetupTensor, RunDLPackLegacy, TeardownTensor},
    {"dlpack_versioned", kImpl,
     "TVMFFITensorToDLPackVersioned + TVMFFITensorFromDLPackVersioned + TVMFFIObjectDecRef",
     SetupTensor, RunDLPackVersioned, TeardownTensor},
};

} // namespace

extern "C" const pf_bench_op_t* pf_bench_tvmffi_ops(size_t* count) {
  *count = sizeof(kOps) / sizeof(kOps[0]);
  return kOps;
}

extern "C" const char* pf_bench_tvmffi_version(void) {
  static char text[48];
  TVMFFIVersion v;
  TVMFFIGetVersion(&v);
  std::snprintf(text, sizeof(text), "%u.%u.%u", v.major, v.minor, v.patch);
  return text;
}
