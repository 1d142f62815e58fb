#!/usr/bin/env bash
# tools/gpu_check.sh: the checks that need an NVIDIA GPU, for a machine that has one (CI has
# none, so its GPU cases skip). Builds Release with -Werror for this machine's GPU, runs every
# CTest test, the CUDA test suites under compute-sanitizer (memcheck, racecheck, synccheck),
# the GPU benchmark bench_cuda, then installs the Python package into a folder and runs
# tests/python and tests/jax with that Python (CuPy and a CUDA jax make their GPU cases run).
#
#   tools/gpu_check.sh [OUT]        logs and bench_cuda.md in OUT (default build/gpu-check)
#
# Environment:
#   PF_CUDA_ARCH     CMAKE_CUDA_ARCHITECTURES (default: native, the GPUs of this machine)
#   PF_GPU_PYTHON    the Python for the package tests (default: python3; needs pytest, numpy)
#   PF_DEPS_PREFIX   a prefix holding Check and the DLPack headers (include/, lib/pkgconfig/)
#                    where they are not installed system-wide (a machine without apt access)
#   PF_GPU_WHEELS    a folder of wheels to install with the package (e.g. apache-tvm-ffi)
# Exit status: 0 when every step passed, else the number of failed steps.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mkdir -p "${1:-$ROOT/build/gpu-check}" && cd "${1:-$ROOT/build/gpu-check}" && pwd)"
BUILD="$OUT/build"
PY="${PF_GPU_PYTHON:-python3}"
JOBS="$(nproc 2>/dev/null || echo 4)"
failed=0

step() { # name, command...: runs it, its output in OUT/<name>.log, and says how it went
  local name="$1" start rc
  shift
  start=$(date +%s)
  "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  printf '== %-28s %s (%d s)\n' "$name" "$([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")" \
    $(($(date +%s) - start))
  [ $rc -eq 0 ] || { failed=$((failed + 1)); tail -25 "$OUT/$name.log"; }
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader ||
  { echo "gpu_check: nvidia-smi found no GPU"; exit 1; }

extra=()
if [ -n "${PF_DEPS_PREFIX:-}" ]; then
  export PKG_CONFIG_PATH="$PF_DEPS_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # the Python tests compile C against the installed package, whose headers include
  # <dlpack/dlpack.h>: on a machine without the system package the compiler finds it here
  export CPATH="$PF_DEPS_PREFIX/include${CPATH:+:$CPATH}"
  extra+=("-DCMAKE_INCLUDE_PATH=$PF_DEPS_PREFIX/include")
fi
arch="${PF_CUDA_ARCH:-native}"

step configure cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPF_WERROR=ON \
  -DPF_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DPF_PYTHON="$(command -v "$PY")" \
  "${extra[@]}" || exit 1
step build cmake --build "$BUILD" -j "$JOBS" || exit 1
step ctest ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 300
grep -h 'skipped' "$OUT/ctest.log" | sort -u

# The CUDA suites under compute-sanitizer. The tests make CUDA calls fail on purpose (out of
# memory, a bad copy direction, a launch during a capture): API errors are not reported, only
# what the tools find in device code. Timing cases (PF_TEST_NO_TIMING) are left out: the
# tools serialise the GPU.
for tool in memcheck racecheck synccheck; do
  for t in test_cuda test_kernels_cuda; do
    step "$tool-$t" env CK_FORK=no PF_TEST_NO_TIMING=1 compute-sanitizer --tool "$tool" \
      --report-api-errors no --error-exitcode 3 "$BUILD/tests/$t"
  done
done

step bench_cuda "$BUILD/bench/bench_cuda" --md "$OUT/bench_cuda.md"
sed -n '/== Bandwidth/,$p' "$OUT/bench_cuda.log"

site="$OUT/site"
rm -rf "$site"
wheels=()
[ -n "${PF_GPU_WHEELS:-}" ] && wheels=("$PF_GPU_WHEELS"/*.whl)
pip_defs=(--config-settings=build-dir="$OUT/py" --config-settings=cmake.define.PF_WERROR=ON
          --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES="$arch")
[ -n "${PF_DEPS_PREFIX:-}" ] &&
  pip_defs+=(--config-settings=cmake.define.CMAKE_INCLUDE_PATH="$PF_DEPS_PREFIX/include")
if step pip "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --target "$site" \
  "${pip_defs[@]}" "$ROOT" "${wheels[@]}"; then
  (cd "$OUT" && PYTHONPATH="$site" step pytest-python "$PY" -m pytest -q -rs -p no:cacheprovider \
    "$ROOT/tests/python") || failed=$((failed + 1))
  (cd "$OUT" && PYTHONPATH="$site" step pytest-jax "$PY" -m pytest -q -rs -p no:cacheprovider \
    "$ROOT/tests/jax") || failed=$((failed + 1))
  grep -h 'SKIPPED\|passed\|failed' "$OUT"/pytest-*.log
fi
echo "gpu_check: $failed step(s) failed; logs in $OUT"
exit "$failed"
