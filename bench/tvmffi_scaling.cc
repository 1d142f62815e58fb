// tvmffi_scaling.cc: the TVM-FFI side of bench_scaling's series (see scaling.h), through its C
// entry points, and ffi::Tensor::FromNDAlloc (malloc / free) for allocation.
#include "scaling.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>

namespace {

namespace ffi = tvm::ffi;
constexpr const char* kImpl = "tvmffi";

[[noreturn]] void FailRaised(const char* what) {
  TVMFFIObjectHandle err = nullptr;
  TVMFFIErrorMoveFromRaised(&err);
  char detail[256] = "no error raised";
  if (err != nullptr) {
    const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
    std::snprintf(detail, sizeof(detail), "%.*s", static_cast<int>(cell->message.size),
                  cell->message.data);
    TVMFFIObjectDecRef(err);
  }
  sc_fail(kImpl, what, detail);
}

inline TVMFFIAny AnyInt(int64_t x) {
  TVMFFIAny v;
  v.type_index = kTVMFFIInt;
  v.zero_padding = 0;
  v.v_int64 = x;
  return v;
}

int SumCallee(void*, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  int64_t sum = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (args[i].type_index != kTVMFFIInt) {
      TVMFFIErrorSetRaisedFromCStr("TypeError", "sum: expected int arguments");
      return -1;
    }
    sum += args[i].v_int64;
  }
  *result = AnyInt(sum);
  return 0;
}

int Add1Callee(void*, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  if (n != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "add1: expected (int)");
    return -1;
  }
  *result = AnyInt(args[0].v_int64 + 1);
  return 0;
}

struct State {
  TVMFFIObjectHandle fn = nullptr;
  int nargs = 0;
  std::string name;
  int64_t shape = 0;
};

State* NewState(TVMFFISafeCallType call) {
  State* s = new State();
  if (call != nullptr && TVMFFIFunctionCreate(nullptr, call, nullptr, &s->fn) != 0)
    FailRaised("function create");
  return s;
}

inline int64_t Call(TVMFFIObjectHandle fn, const TVMFFIAny* args, int32_t n) {
  TVMFFIAny result;
  result.type_index = kTVMFFINone;
  result.zero_padding = 0;
  result.v_int64 = 0;
  if (TVMFFIFunctionCall(fn, const_cast<TVMFFIAny*>(args), n, &result) != 0)
    FailRaised("call");
  return result.v_int64;
}

void* ArgsSetup(int nargs) {
  State* s = NewState(SumCallee);
  s->nargs = nargs;
  return s;
}

uint64_t ArgsRun(void* state, int64_t iters) {
  State* s = static_cast<State*>(state);
  TVMFFIAny args[SC_MAX_ARGS];
  for (int k = 0; k < s->nargs; ++k)
    args[k] = AnyInt(k);
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    args[0].v_int64 = i;
    sum += static_cast<uint64_t>(Call(s->fn, args, s->nargs));
  }
  return sum;
}

int64_t registered = 0;
TVMFFIObjectHandle table_fn = nullptr; // the one function every table name maps to (kept)

void* LookupSetup(int64_t table_size) {
  State* s = NewState(SumCallee);
  if (table_fn == nullptr && TVMFFIFunctionCreate(nullptr, SumCallee, nullptr, &table_fn) != 0)
    FailRaised("function create");
  for (; registered < table_size; ++registered) {
    for (int kind : {SC_SUFFIX, SC_RANDOM}) {
      TVMFFIByteArray ba = {sc_name(kind, registered), sc_name_len(kind, registered)};
      if (TVMFFIFunctionSetGlobal(&ba, table_fn, 1) != 0)
        FailRaised("global set");
    }
  }
  s->name = sc_name(SC_SUFFIX, table_size / 2);
  return s;
}

// One global lookup and the release of what it returned: 1 when the name was found.
inline uint64_t LookupOnce(const TVMFFIByteArray* name) {
  TVMFFIObjectHandle fn = nullptr;
  if (TVMFFIFunctionGetGlobal(name, &fn) != 0)
    FailRaised("global get");
  TVMFFIObjectDecRef(fn);
  return fn != nullptr;
}

uint64_t LookupRun(void* state, int64_t iters) {
  State* s = static_cast<State*>(state);
  TVMFFIByteArray name = {s->name.data(), s->name.size()};
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i)
    sum += LookupOnce(&name);
  return sum;
}

void* LookupOwnSetup(int k) {
  State* s = NewState(SumCallee);
  s->name = "bench.own." + std::to_string(k);
  TVMFFIByteArray ba = {s->name.data(), s->name.size()};
  if (TVMFFIFunctionSetGlobal(&ba, s->fn, 1) != 0)
    FailRaised("global set");
  return s;
}

uint64_t LookupListRun(void*, const sc_name_list_t* list, int64_t iters) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    int64_t k = i & list->mask;
    TVMFFIByteArray name = {list->names[k], list->lens[k]};
    sum += LookupOnce(&name);
  }
  return sum;
}

struct CPUNDAlloc {
  void AllocData(DLTensor* tensor) {
    tensor->data = std::malloc(ffi::GetDataSize(*tensor));
    if (tensor->data == nullptr)
      sc_fail(kImpl, "alloc", "out of memory");
  }
  void FreeData(DLTensor* tensor) { std::free(tensor->data); }
};

void* AllocSetup(int64_t nbytes) {
  State* s = NewState(nullptr);
  s->shape = nbytes;
  return s;
}

uint64_t AllocRun(void* state, int64_t iters) {
  State* s = static_cast<State*>(state);
  constexpr DLDataType kUInt8 = {kDLUInt, 8, 1};
  constexpr DLDevice kCPU = {kDLCPU, 0};
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    ffi::Tensor t =
        ffi::Tensor::FromNDAlloc(CPUNDAlloc(), ffi::ShapeView(&s->shape, 1), kUInt8, kCPU);
    sum += static_cast<uint64_t>(t.GetDLTensorPtr()->shape[0]);
  }
  return sum;
}

void* ThreadsSetup() {
  return NewState(Add1Callee);
}

uint64_t ThreadsRun(void* state, int64_t iters) {
  TVMFFIObjectHandle fn = static_cast<State*>(state)->fn;
  uint64_t sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    TVMFFIAny args[1] = {AnyInt(i)};
    sum += static_cast<uint64_t>(Call(fn, args, 1));
  }
  return sum;
}

void Teardown(void* state) {
  State* s = static_cast<State*>(state);
  if (s->fn != nullptr)
    TVMFFIObjectDecRef(s->fn);
  delete s;
}

const sc_impl_t kTVMImpl = {kImpl,         ArgsSetup,    LookupSetup, LookupOwnSetup,
                            AllocSetup,    ThreadsSetup, ArgsRun,     LookupRun,
                            LookupListRun, AllocRun,     ThreadsRun,  Teardown};

} // namespace

extern "C" const sc_impl_t* sc_tvmffi_impl(void) {
  return &kTVMImpl;
}
