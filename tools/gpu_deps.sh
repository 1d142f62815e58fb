#!/usr/bin/env bash
# tools/gpu_deps.sh DIR: prepares, on this (Debian) machine, what tools/gpu_check.sh needs on a
# GPU machine that has a compiler, CMake, CUDA and Python but no package access:
#   DIR/sys   a relocatable prefix with Check (static), libsubunit (static), the DLPack headers
#             and their pkg-config files (prefix=${pcfiledir}/../..)
#   DIR/whl   the apache-tvm-ffi wheel for CPython 3.12 on manylinux x86-64
# Then, there: PF_DEPS_PREFIX=DIR/sys PF_GPU_WHEELS=DIR/whl tools/gpu_check.sh
# Needs the Debian packages check, libsubunit-dev and libdlpack-dev here (tools/dev installs
# them) and a pip that reaches PyPI (PF_PIP, default: build/venv's, else python3 -m pip).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:?usage: tools/gpu_deps.sh DIR}"
TVM_FFI_VERSION="${PF_TVM_FFI_VERSION:-0.1.15.post2}"
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
lib="/usr/lib/$multiarch"

mkdir -p "$DIR/sys/include" "$DIR/sys/lib/pkgconfig" "$DIR/whl"
cp /usr/include/check.h /usr/include/check_stdint.h "$DIR/sys/include/"
cp -r /usr/include/dlpack /usr/include/subunit "$DIR/sys/include/"
cp "$lib/libcheck_pic.a" "$lib/libsubunit.a" "$DIR/sys/lib/"
for pc in check libsubunit; do
  sed -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' -e 's|^libdir=.*|libdir=${prefix}/lib|' \
    -e 's|^includedir=.*|includedir=${prefix}/include|' "$lib/pkgconfig/$pc.pc" \
    >"$DIR/sys/lib/pkgconfig/$pc.pc"
done

pip=(${PF_PIP:-})
if [ ${#pip[@]} -eq 0 ]; then
  if [ -x "$ROOT/build/venv/bin/pip" ]; then pip=("$ROOT/build/venv/bin/pip"); else pip=(python3 -m pip); fi
fi
"${pip[@]}" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$DIR/whl" "apache-tvm-ffi==$TVM_FFI_VERSION"
echo "gpu_deps: $DIR/sys and $DIR/whl ready"
