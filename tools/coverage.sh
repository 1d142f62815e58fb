#!/usr/bin/env bash
# tools/coverage.sh: line and branch coverage of the test suite (issue 10; goal for src/:
# >= 95% of lines, >= 85% of branches).
#   tools/coverage.sh
# Builds build/coverage with gcc --coverage -O0 (CUDA off), runs every CTest test but the
# fuzzers (stress and fault injection included), then reports with gcovr: a summary for src/,
# kernels/ and the command line (tools/ or cli/, whichever exists), and an HTML report in
# build/coverage/coverage/index.html. gcovr comes from build/venv (pip-installed there when
# missing; tools/dev test makes that venv). Counters are atomic (-fprofile-update=atomic), as
# the stress test runs many threads; branches gcc marks unreachable are left out.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_ROOT="${PF_BUILD_ROOT:-$ROOT/build}"
BUILD="$BUILD_ROOT/coverage"
JOBS="${PF_JOBS:-2}"
VENV="$BUILD_ROOT/venv"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import gcovr" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check gcovr
fi
GCOVR=("$VENV/bin/python" -m gcovr)
PY_ARG=()
"$VENV/bin/python" -c "import numpy" 2>/dev/null && PY_ARG=("-DPF_PYTHON=$VENV/bin/python")

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_C_FLAGS=--coverage -O0 -fprofile-update=atomic" -DCMAKE_EXE_LINKER_FLAGS=--coverage \
  -DCMAKE_SHARED_LINKER_FLAGS=--coverage -DCMAKE_MODULE_LINKER_FLAGS=--coverage \
  -DPF_WITH_CUDA=OFF -DPF_BUILD_BENCH=OFF "${PY_ARG[@]}" >"$BUILD.configure.log" 2>&1 ||
  { cat "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" -j "$JOBS" >/dev/null
find "$BUILD" -name '*.gcda' -delete
# CMake's compiler-identification objects are no part of the project
find "$BUILD/CMakeFiles" -path '*CompilerId*' -name '*.gcno' -delete
# failures are reported but do not stop the report: coverage of a failing suite still counts
ctest --test-dir "$BUILD" -j "$JOBS" -LE fuzz --output-on-failure | tail -3 || true

cli=tools
[ -d "$ROOT/cli" ] && cli=cli
common=(--root "$ROOT" --object-directory "$BUILD" --exclude-unreachable-branches
        --exclude-throw-branches --gcov-ignore-parse-errors=negative_hits.warn_once_per_file)
mkdir -p "$BUILD/coverage"
printf '\n%-10s %-34s %s\n' "folder" "lines" "branches"
for dir in src kernels "$cli"; do
  [ -d "$ROOT/$dir" ] || continue
  # never --output /dev/null: gcovr replaces its output file, device nodes included
  out=$("${GCOVR[@]}" "${common[@]}" --filter "$ROOT/$dir/" --print-summary \
        --txt "$BUILD/coverage/${dir%/}.txt" 2>"$BUILD/coverage/${dir%/}.log")
  lines=$(printf '%s\n' "$out" | sed -n 's/^lines: *//p')
  branches=$(printf '%s\n' "$out" | sed -n 's/^branches: *//p')
  printf '%-10s %-34s %s\n' "$dir/" "$lines" "$branches"
done
"${GCOVR[@]}" "${common[@]}" --filter "$ROOT/src/" --filter "$ROOT/kernels/" \
  --filter "$ROOT/$cli/" --html-details "$BUILD/coverage/index.html" >"$BUILD/coverage/html.log" 2>&1
printf '\nper-file report: %s\n' "$BUILD/coverage/index.html"
