// tvmffi_raised.h: the text of TVM-FFI's raised error, for the benchmarks' failure reports.
#ifndef PF_BENCH_TVMFFI_RAISED_H
#define PF_BENCH_TVMFFI_RAISED_H

#include <cstddef>
#include <cstdio>

#include <tvm/ffi/c_api.h>

// Takes the error raised in this thread (if any) and writes "Kind: message" into buf, or
// "no error raised"; returns buf.
inline const char* PfBenchTakeRaisedText(char* buf, std::size_t size) {
  TVMFFIObjectHandle err = nullptr;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == nullptr) {
    std::snprintf(buf, size, "no error raised");
    return buf;
  }
  const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  std::snprintf(buf, size, "%.*s: %.*s", static_cast<int>(cell->kind.size), cell->kind.data,
                static_cast<int>(cell->message.size), cell->message.data);
  TVMFFIObjectDecRef(err);
  return buf;
}

#endif // PF_BENCH_TVMFFI_RAISED_H
