#!/bin/sh
# run_suite.sh: the whole benchmark suite, what `packfn bench` runs: instruction counts under
# callgrind, timed runs, scaling curves and their plot, in one results folder.
#
# usage: run_suite.sh --bench PATH [--quick] [--out DIR]
#   --bench PATH   the packfn_bench executable (bench_scaling, bench_objects beside it)
#   --quick        a short version (under a minute): fewer iterations and repetitions,
#                  fewer scaling points, short callgrind loops
#   --out DIR      results folder (default ./packfn-bench-results)
# Writes DIR/bench.md (the table, also printed), DIR/bench.json, DIR/objects.md and
# DIR/objects.json (bench_objects: memory per live object, creation with 1 M objects alive),
# DIR/scaling.json, DIR/scaling.csv, DIR/scaling.png, DIR/callgrind/ (one dump per operation),
# and, when the build's venv has the Python package installed, DIR/python.txt and DIR/jax.txt
# (calls from Python against TVM-FFI, ctypes and plain Python; jitted calls through the XLA
# adapter).
# Without valgrind the table has no instruction counts; without TVM-FFI or libffi (not found
# when packfn_bench was built) their columns read "absent"; without matplotlib (the build's
# venv, or PF_BENCH_PYTHON) the plot is drawn with gnuplot, and without either it is skipped.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bench=""
quick=0
out=./packfn-bench-results
while [ $# -gt 0 ]; do
  case $1 in
  --bench) bench=$2; shift 2 ;;
  --quick) quick=1; shift ;;
  --out) out=$2; shift 2 ;;
  -h | --help) sed -n '5,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "run_suite.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$bench" ] || { echo "run_suite.sh: --bench PATH is required" >&2; exit 2; }
[ -x "$bench" ] || { echo "run_suite.sh: $bench is not executable" >&2; exit 2; }
bench=$(cd "$(dirname "$bench")" && pwd)/$(basename "$bench")
scaling=$(dirname "$bench")/bench_scaling
mkdir -p "$out"

if [ "$quick" -eq 1 ]; then
  cg_iters=2000; iters=100000; reps=3; sc_opts="--quick"
else
  cg_iters=20000; iters=1000000; reps=7; sc_opts=""
fi

log() { echo "run_suite.sh: $*" >&2; }

# 1. instruction counts + timed run (run_callgrind.sh merges both into one table).
if command -v valgrind >/dev/null 2>&1; then
  log "callgrind counts ($cg_iters iterations per operation), then timed runs" \
    "($iters x $reps)"
  "$here/run_callgrind.sh" "$bench" "$out/callgrind" --cg-iters "$cg_iters" --iters "$iters" \
    --reps "$reps" >/dev/null
  cp "$out/callgrind/bench.md" "$out/bench.md"
  cp "$out/callgrind/bench.json" "$out/bench.json"
else
  log "valgrind not found: timed runs only, no instruction counts"
  "$bench" --iters "$iters" --reps "$reps" --md "$out/bench.md" --json "$out/bench.json"
fi

# 2. scaling curves.
if [ -x "$scaling" ]; then
  log "scaling curves${sc_opts:+ (quick)}"
  # shellcheck disable=SC2086 # $sc_opts is empty or one option
  "$scaling" $sc_opts --json "$out/scaling.json" --csv "$out/scaling.csv"
else
  log "$scaling not found: no scaling curves"
fi

# 2b. objects in bulk: memory per live object, create/release with many objects alive, packfn
#     (with and without its block cache) against TVM-FFI; instruction counts under callgrind.
objects=$(dirname "$bench")/bench_objects
objects_done=0
if [ -x "$objects" ]; then
  if [ "$quick" -eq 1 ]; then
    ob_opts="--n 100000 --rounds 3 --reps 1 --cg-n 10000"
  else
    ob_opts="--n 1000000 --rounds 5 --reps 5 --cg-n 100000"
  fi
  cg_opt=""
  command -v valgrind >/dev/null 2>&1 && cg_opt="--callgrind"
  log "objects in bulk ($ob_opts${cg_opt:+, callgrind})"
  # shellcheck disable=SC2086 # options are words
  "$objects" $ob_opts $cg_opt --cg-dir "$out/objects_cg" --md "$out/objects.md" \
    --json "$out/objects.json" && objects_done=1
else
  log "$objects not found: no memory and bulk creation tables"
fi

# 3. plot: matplotlib when some Python has it, else gnuplot.
plot_done=0
if [ -f "$out/scaling.json" ]; then
  for py in "${PF_BENCH_PYTHON:-}" "$(dirname "$(dirname "$bench")")/venv/bin/python" python3; do
    [ -n "$py" ] || continue
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c 'import matplotlib' 2>/dev/null; then
      "$py" "$here/plot_scaling.py" "$out/scaling.json" "$out/scaling.png" && plot_done=1
      break
    fi
  done
  if [ "$plot_done" -eq 0 ] && command -v gnuplot >/dev/null 2>&1; then
    "$here/plot_scaling.gp.sh" "$out/scaling.csv" "$out/scaling.png" && plot_done=1
  fi
  [ "$plot_done" -eq 1 ] || log "neither matplotlib nor gnuplot found: no plot"
fi

# 4. calls from Python and jitted JAX calls, when a Python with the packfn package installed is
#    found (the build's venv after `pip install .`, or PF_BENCH_PYTHON).
py_done=0
jax_done=0
tvm_done=0
# (tools/dev keeps the venv beside its build folders: BUILD/venv next to BUILD/werror)
build=$(dirname "$(dirname "$bench")")
for py in "${PF_BENCH_PYTHON:-}" "$build/venv/bin/python" "$(dirname "$build")/venv/bin/python"; do
  [ -n "$py" ] || continue
  command -v "$py" >/dev/null 2>&1 || continue
  "$py" -c 'import packfn, numpy' 2>/dev/null || continue
  quick_opt=""
  [ "$quick" -eq 1 ] && quick_opt="--quick"
  log "calls from Python ($py)"
  # shellcheck disable=SC2086 # $quick_opt is empty or one option
  "$py" "$here/python/bench_calls.py" $quick_opt >"$out/python.txt" && py_done=1
  tvm_lib="$(dirname "$bench")/libpf_bench_tvm_rms_norm.so"
  if [ -f "$tvm_lib" ] && "$py" -c 'import tvm_ffi' 2>/dev/null; then
    log "a packfn kernel called through tvm_ffi against the same kernel built with TVM-FFI's macro"
    # shellcheck disable=SC2086
    "$py" "$here/python/bench_tvm_kernel.py" --tvm-lib "$tvm_lib" $quick_opt >"$out/tvm_kernel.txt" &&
      tvm_done=1
  fi
  if "$py" -c 'import jax, packfn.jax' 2>/dev/null; then
    log "jitted calls through packfn's XLA adapter"
    # shellcheck disable=SC2086
    "$py" "$here/jax/bench_ffi.py" $quick_opt >"$out/jax.txt" && jax_done=1
  fi
  break
done
[ "$py_done" -eq 1 ] || log "no Python with the packfn package (pip install .): no Python rows"

cat "$out/bench.md"
echo
[ "$objects_done" -eq 1 ] && { cat "$out/objects.md"; echo; }
[ "$py_done" -eq 1 ] && { cat "$out/python.txt"; echo; }
[ "$tvm_done" -eq 1 ] && { cat "$out/tvm_kernel.txt"; echo; }
[ "$jax_done" -eq 1 ] && { cat "$out/jax.txt"; echo; }
files="bench.md bench.json"
[ "$py_done" -eq 1 ] && files="$files python.txt"
[ "$tvm_done" -eq 1 ] && files="$files tvm_kernel.txt"
[ "$jax_done" -eq 1 ] && files="$files jax.txt"
[ "$objects_done" -eq 1 ] && files="$files objects.md objects.json"
[ -f "$out/scaling.json" ] && files="$files scaling.json scaling.csv"
[ "$plot_done" -eq 1 ] && files="$files scaling.png"
log "results in $out: $files"
