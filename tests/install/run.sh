#!/usr/bin/env bash
# tests/install/run.sh BUILD WORK: the install check of `tools/dev test`.
#   1. installs the build folder BUILD into WORK/staged, then MOVES it to "WORK/moved prefix"
#      (a space in its path, as README.md allows);
#   2. builds tests/install (consumer.c as C and as C++) against the moved prefix with find_package
#      (default compilers) and with pkg-config (clang and clang++ when present), runs each;
#   3. runs the installed packfn info, list and call;
#   4. builds tests/install/subproject, which takes this source tree in with add_subdirectory
#      and with FetchContent, and runs its consumer;
#   5. checks the CMake package's message for a missing component, and that a packfn built
#      against a dlpack.h outside the system folders hands that folder to consumers;
#   6. with CUDA built, checks that libpackfn_kernels does not need libcudart;
#   7. checks the installed headers, library, pkg-config, CMake package and command line give
#      one version, and that a CMAKE_INSTALL_RPATH of the user's keeps packfn's $ORIGIN entries.
# Nothing runs with LD_LIBRARY_PATH: the installed files find each other through their RPATH.
# Runs every step, says which failed, and exits 1 if any did.
set -uo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BUILD WORK" >&2; exit 2; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$(cd "$1" && pwd)"
rm -rf "$2"
mkdir -p "$2"
WORK="$(cd "$2" && pwd)"
unset LD_LIBRARY_PATH
failures=()

step() { # name, command...: runs the command; on failure records name and returns 1
  local name="$1"
  shift
  printf -- '-- %s\n' "$name"
  "$@" && return 0
  printf -- '-- FAILED: %s\n' "$name"
  failures+=("$name")
  return 1
}

cmake --install "$BUILD" --prefix "$WORK/staged" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; exit 1; }
mv "$WORK/staged" "$WORK/moved prefix"
PREFIX="$WORK/moved prefix"
LIBDIR="$(dirname "$(find "$PREFIX" -name 'libpackfn.so' | head -n 1)")"

# ---- find_package ----
configure_consumer() {
  cmake -S "$HERE" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/consumer.log" 2>&1 ||
    { cat "$WORK/consumer.log"; return 1; }
}
build_and_run() { # target
  cmake --build "$WORK/consumer" --target "$1" >"$WORK/$1.log" 2>&1 ||
    { cat "$WORK/$1.log"; return 1; }
  "$WORK/consumer/$1"
}
if step "find_package: configure" configure_consumer; then
  step "find_package: C consumer" build_and_run consumer_c
  step "find_package: C++ consumer" build_and_run consumer_cxx
fi

# ---- pkg-config ----
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
CC_PC="$(command -v clang || command -v cc)"
CXX_PC="$(command -v clang++ || command -v c++)"
# pkg-config escapes a space in a path with a backslash: its output is read as a shell reads a
# command line (eval), as README.md tells users to, and so is --variable=libdir's.
pkg_words() { # array name, pkg-config arguments...: the output split into words as a shell would
  local out
  out="$(pkg-config "${@:2}")" || return 1
  eval "$1=($out)"
}
pkg_build_and_run() { # compiler, std, source, output
  local flags libdir
  pkg_words flags --cflags --libs packfn_kernels packfn_npy || return 1
  pkg_words libdir --variable=libdir packfn_kernels || return 1
  "$1" "-std=$2" -Wall -Wextra -Wpedantic -Werror -I"$HERE" "$HERE/$3" -o "$WORK/$4" "${flags[@]}" \
    -Wl,-rpath,"${libdir[0]}" -Wl,--export-dynamic &&
    "$WORK/$4"
}
step "pkg-config: C consumer ($CC_PC)" pkg_build_and_run "$CC_PC" c11 consumer.c pc_consumer_c
step "pkg-config: C++ consumer ($CXX_PC)" pkg_build_and_run "$CXX_PC" c++17 consumer.cc \
  pc_consumer_cxx
if [ -e "$LIBDIR/libpackfn_cuda.so" ]; then
  step "pkg-config: packfn_cuda" pkg-config --exists packfn_cuda
fi
if [ -e "$LIBDIR/libpackfn_kernels_cuda.so" ]; then
  step "pkg-config: packfn_kernels_cuda" pkg-config --exists packfn_kernels_cuda
fi

# ---- the installed command line ----
run_cli() { # expected output pattern, packfn arguments...
  local want="$1" out
  shift
  out="$("$PREFIX/bin/packfn" "$@" 2>&1)" || { printf '%s\n' "$out"; return 1; }
  printf '%s\n' "$out"
  grep -q -- "$want" <<<"$out" || { echo "expected output matching '$want'"; return 1; }
}
if [ -x "$PREFIX/bin/packfn" ]; then
  step "installed packfn info" run_cli "ABI version" info
  step "installed packfn list" run_cli "packfn.kernels.add_n" list
  step "installed packfn call" run_cli "array(\[11., 12., 13.\], dtype=float32)" \
    call packfn.kernels.add_n 'float32[3]:1,2,3' 'float32[3]' 10
  step "installed packfn bench NAME" run_cli "ns per call" \
    bench --repeat 2 packfn.kernels.add_n 'float32[3]:1,2,3' 'float32[3]' 10
  bench_suite_refused() {
    local out rc=0
    out="$("$PREFIX/bin/packfn" bench --quick 2>&1)" || rc=$?
    printf '%s\n' "$out"
    [ "$rc" -eq 2 ] && grep -q "runs from a build tree only" <<<"$out"
  }
  step "installed packfn bench (suite) says it runs from a build tree" bench_suite_refused
fi

# ---- packfn as a subproject: add_subdirectory and FetchContent ----
SOURCE="$(cd "$HERE/../.." && pwd)"
subproject() { # mode, extra cmake arguments...
  local mode="$1" dir="$WORK/sub_$1"
  shift
  cmake -S "$HERE/subproject" -B "$dir" -DPF_SOURCE="$SOURCE" -DPF_MODE="$mode" \
    -DPF_WITH_CUDA=OFF "$@" >"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
  cmake --build "$dir" -j "${PF_JOBS:-2}" >>"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
  # packfn's own tests and benchmarks are off in someone else's build
  if [ -e "$dir/packfn/tests" ] || [ -e "$dir/_deps/packfn-build/tests" ] ||
    [ -e "$dir/packfn/bench" ] || [ -e "$dir/_deps/packfn-build/bench" ]; then
    echo "packfn built its tests or benchmarks as a subproject"
    return 1
  fi
  "$dir/sub_consumer"
}
step "subproject: add_subdirectory" subproject add_subdirectory
step "subproject: FetchContent (no command line)" subproject FetchContent -DPF_BUILD_TOOLS=OFF

# ---- installed libraries find their dependencies beside themselves ----
installed_runpaths() {
  local files
  files="$(find "$LIBDIR" -maxdepth 1 -name 'libpackfn*.so' | sort | paste -sd ';')"
  cmake "-DFILES=$files" '-DEXPECT=$ORIGIN' -P "$HERE/../check_runpath.cmake"
}
step "installed libraries' RUNPATH is \$ORIGIN" installed_runpaths

# ---- one version: headers, library file, pkg-config, CMake package, command line ----
versions_agree() {
  local header lib pc cm cli
  header="$(sed -n 's/^#define PF_VERSION_STRING *"\(.*\)"$/\1/p' "$PREFIX/include/packfn/abi.h")"
  lib="$(basename "$(readlink -f "$LIBDIR/libpackfn.so")")"
  lib="${lib#libpackfn.so.}"
  pc="$(pkg-config --modversion packfn)"
  cm="$(cmake -S "$HERE/probe" -B "$WORK/probe_version" -DCMAKE_PREFIX_PATH="$PREFIX" 2>&1 |
    sed -n 's/^-- packfn version: //p')"
  echo "abi.h $header, libpackfn.so.$lib, pkg-config $pc, find_package $cm"
  [ -n "$header" ] && [ "$lib" = "$header" ] && [ "$pc" = "$header" ] && [ "$cm" = "$header" ] ||
    return 1
  if [ -x "$PREFIX/bin/packfn" ]; then
    cli="$("$PREFIX/bin/packfn" info | head -n 1)"
    echo "packfn info: $cli"
    [ "$cli" = "packfn $header" ] || return 1
  fi
}
step "the installed version is one version" versions_agree

# ---- a CMAKE_INSTALL_RPATH of the user's is added to packfn's relative entries ----
# (set alone, it replaced them: the installed packfn could not find libpackfn_npy.so.0)
user_rpath() {
  local dir="$WORK/rpath_build" pre="$WORK/rpath_prefix" extra="/opt/packfn-test/lib" lib
  { cmake -S "$SOURCE" -B "$dir" "-DCMAKE_INSTALL_RPATH=$extra" -DPF_BUILD_TESTS=OFF \
      -DPF_BUILD_BENCH=OFF -DPF_WITH_CUDA=OFF &&
    cmake --build "$dir" -j "${PF_JOBS:-2}" --target packfn_cli packfn_static &&
    cmake --install "$dir" --prefix "$pre"; } >"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
  "$pre/bin/packfn" info | head -n 1 || return 1
  lib="$(dirname "$(find "$pre" -name 'libpackfn.so' | head -n 1)")"
  cmake "-DFILES=$lib/libpackfn.so" '-DEXPECT=$ORIGIN' -P "$HERE/../check_runpath.cmake" &&
    cmake "-DFILES=$lib/libpackfn_kernels.so;$lib/libpackfn_npy.so" "-DEXPECT=\$ORIGIN;$extra" \
      -P "$HERE/../check_runpath.cmake"
}
step "a CMAKE_INSTALL_RPATH of the user's is added to \$ORIGIN, not put in its place" user_rpath

# ---- the licence travels with the files ----
step "the licence is installed" test -s "$PREFIX/share/doc/packfn/LICENSE"

# ---- the CMake package's refusals and DLPack outside the system folders ----
missing_component() {
  local out
  out="$(cmake -S "$HERE/probe" -B "$WORK/probe_missing" -DCMAKE_PREFIX_PATH="$PREFIX" \
    "-DPF_COMPONENTS=npy;nosuch" 2>&1)" && { echo "a missing component was accepted"; return 1; }
  printf '%s\n' "$out" | tail -n 8
  grep -q "component(s) nosuch not in this installation of packfn" <<<"$out"
}
step "find_package: a missing REQUIRED component is named" missing_component
# packfn built against a dlpack.h in a folder of its own: pkg-config and the CMake package
# must hand that folder to consumers (their compilers do not search it), as one word each
# when its path holds a space
dlpack_elsewhere() {
  local system dl="$WORK/dlpack elsewhere/include" dir="$WORK/dl_build" pre="$WORK/dl_prefix"
  system="$(sed -n 's/^DLPACK_INCLUDE_DIR:PATH=//p' "$BUILD/CMakeCache.txt")"
  mkdir -p "$dl" && cp -r "$system/dlpack" "$dl/" || return 1
  { cmake -S "$SOURCE" -B "$dir" -DDLPACK_INCLUDE_DIR="$dl" -DPF_BUILD_TESTS=OFF \
      -DPF_BUILD_BENCH=OFF -DPF_BUILD_TOOLS=OFF -DPF_WITH_CUDA=OFF &&
    cmake --build "$dir" -j "${PF_JOBS:-2}" --target packfn packfn_static packfn_npy \
      packfn_kernels && cmake --install "$dir" --prefix "$pre"; } >"$dir.log" 2>&1 ||
    { cat "$dir.log"; return 1; }
  local pc cflags out
  pc="$(dirname "$(find "$pre" -name packfn.pc | head -n 1)")"
  PKG_CONFIG_PATH="$pc" pkg_words cflags --cflags packfn packfn_npy || return 1
  echo "pkg-config --cflags, as words:"
  printf '  [%s]\n' "${cflags[@]}"
  printf '%s\n' "${cflags[@]}" | grep -qxF -- "-I$dl" ||
    { echo "pkg-config does not name $dl as one -I"; return 1; }
  printf '#include <packfn/packfn.h>\n#include <packfn/npy.h>\ntypedef int pf_probe_t;\n' |
    cc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -x c - "${cflags[@]}" ||
    { echo "the headers do not compile with pkg-config's --cflags"; return 1; }
  out="$(cmake -S "$HERE/probe" -B "$WORK/probe_dl" -DCMAKE_PREFIX_PATH="$pre" 2>&1)" ||
    { printf '%s\n' "$out"; return 1; }
  grep "packfn include path" <<<"$out"
  grep -q "packfn include path: .*$dl" <<<"$out" ||
    { echo "packfn::packfn does not carry $dl"; return 1; }
}
step "DLPack outside the system folders reaches consumers" dlpack_elsewhere

# ---- CPU kernels without the CUDA runtime ----
no_cudart() {
  if ldd "$LIBDIR/libpackfn_kernels.so" | grep libcudart; then
    echo "libpackfn_kernels.so needs libcudart: CPU-only users would need the CUDA runtime"
    return 1
  fi
}
if [ -e "$LIBDIR/libpackfn_cuda.so" ]; then
  step "libpackfn_kernels does not link libcudart" no_cudart
fi

if [ ${#failures[@]} -ne 0 ]; then
  printf 'install check: %d failed:\n' "${#failures[@]}"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
echo "install check: all passed"
