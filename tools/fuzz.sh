#!/usr/bin/env bash
# tools/fuzz.sh: runs the libFuzzer harnesses of tests/fuzz for long, off CI (issue 10's goal:
# >= 10 M executions per harness without a finding).
#   tools/fuzz.sh [SECONDS] [HARNESS...]
# SECONDS per harness (default 3600); HARNESS names (default: all of them, one after another).
# Builds build/fuzz (clang, libFuzzer + ASan + UBSan) when needed. Each harness keeps its
# growing corpus in build/fuzz/corpus/<name> across runs and starts from the seeds in
# tests/fuzz/corpus/<name>; findings go to build/fuzz/findings/. PF_FUZZ_JOBS=N runs N worker
# processes per harness (libFuzzer -fork=N; default 1) and keeps going after a finding.
# Prints one line per harness: executions, corpus size, findings. Exit status 1 if any found.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PF_BUILD_ROOT:-$ROOT/build}/fuzz"
SECONDS_EACH="${1:-3600}"
shift || true
JOBS="${PF_FUZZ_JOBS:-1}"
ALL=(fuzz_npy fuzz_dtype_device fuzz_dlpack fuzz_containers fuzz_module_meta fuzz_cli_args)
HARNESSES=("$@")
[ ${#HARNESSES[@]} -eq 0 ] && HARNESSES=("${ALL[@]}")

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  mkdir -p "$BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER=clang -DPF_FUZZ=ON -DPF_WERROR=ON \
    -DPF_SANITIZE=fuzzer-no-link,address,undefined -DPF_WITH_CUDA=OFF -DPF_BUILD_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD.configure.log" 2>&1 ||
    { cat "$BUILD.configure.log"; exit 1; }
fi
cmake --build "$BUILD" -j "${PF_JOBS:-2}" --target "${HARNESSES[@]}" >/dev/null

export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$BUILD/findings"
found=0
for h in "${HARNESSES[@]}"; do
  bin="$BUILD/tests/fuzz/$h"
  corpus="$BUILD/corpus/$h"
  log="$BUILD/$h.log"
  mkdir -p "$corpus"
  args=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$BUILD/findings/$h-")
  [ "$JOBS" -gt 1 ] && args+=(-fork="$JOBS" -ignore_crashes=1)
  rc=0
  "$bin" "${args[@]}" "$corpus" "$ROOT/tests/fuzz/corpus/$h" >"$log" 2>&1 || rc=$?
  # single process: the final stats; fork mode: the "#N:" of its last status line
  execs=$(grep -o 'number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  [ -z "$execs" ] && execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#' || true)
  n_found=$(find "$BUILD/findings" -name "$h-*" | wc -l)
  printf '%-18s %12s executions  %6s corpus files  %3s findings  (rc %d, log %s)\n' \
    "$h" "${execs:-?}" "$(find "$corpus" -type f | wc -l)" "$n_found" "$rc" "$log"
  [ "$rc" -ne 0 ] || [ "$n_found" -ne 0 ] && found=1
done
exit "$found"
