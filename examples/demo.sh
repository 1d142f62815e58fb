#!/bin/sh
# demo.sh: a short tour of the packfn command line (tools/dev demo runs it after building):
# info, list, kernel calls on inline tensors, an .npy round trip, and a failing call.
# usage: examples/demo.sh PATH/TO/packfn
set -eu

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH/TO/packfn (the built executable, e.g. build/release/cli/packfn, as tools/dev demo builds it)" >&2
  exit 2
fi
case "$1" in
/*) packfn="$1" ;;
*) packfn="$(pwd)/$1" ;;
esac
work="$(mktemp -d "${TMPDIR:-/tmp}/packfn-demo.XXXXXX")"
trap 'rm -rf "$work"' EXIT INT TERM
cd "$work"

show() { # prints the command, then runs it
  printf '\n$ packfn'
  printf ' %s' "$@"
  printf '\n'
  "$packfn" "$@"
}

show info
show list
# add_n(x, out, n): out = x + n; float32[2,3] with no values is a zero tensor the kernel fills
show call packfn.kernels.add_n 'float32[2,3]:1,2,3,4,5,6' 'float32[2,3]' 10
# rms_norm(x, out, eps), with x written to a .npy file first (add_n of 0 copies it out)
show call packfn.kernels.add_n 'float32[2,4]:1,2,3,4,-1,0,1,2' 'float32[2,4]' 0 --out x.npy
# y.npy does not exist yet: named by --out, it is created like x.npy and written back
show call packfn.kernels.rms_norm x.npy y.npy 1e-5 --out y.npy
# read it back: add 0 and print
show call packfn.kernels.add_n y.npy 'float32[2,4]' 0
# a bad call: shapes that do not match; the error goes to stderr and the exit code is 1
set +e
show call packfn.kernels.add_n 'float32[2]:1,2' 'float32[3]' 1 2>&1
code=$?
set -e
printf 'exit code: %s\n' "$code"
[ "$code" -eq 1 ] || { echo "demo: expected exit code 1" >&2; exit 1; }
printf '\ndemo finished: %s\n' "$("$packfn" --version)"
