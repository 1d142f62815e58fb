#!/bin/sh
# run_callgrind.sh: measures instructions per operation under callgrind (collection on only
# around each measured loop), then times the same operations natively and prints one table.
#
# usage: run_callgrind.sh BENCH OUTDIR [options]
#   BENCH            the packfn_bench executable
#   OUTDIR           where the dumps and results go (created; old dumps removed)
#   --cg-iters N     loop length under callgrind (default 100000; counts are exact)
#   --op PATS        operations (comma-separated fnmatch patterns), both runs
#   --impl PATS      implementations, both runs
#   --iters N        loop length of the timed run (default: the harness's, 1e6)
#   --reps R         timed repetitions (default: the harness's, 7)
#   --cpu N          pin both runs to CPU N
#   --no-time        instruction counts only
#   --joined         packfn joins the TVM-FFI the benchmark links (default: packfn alone)
# Writes OUTDIR/ir.tsv (impl, op, Ir per operation, iters, total Ir), OUTDIR/bench.md,
# OUTDIR/bench.json, and OUTDIR/cg.out.N (one callgrind dump per operation).
#
# How the counts are taken: packfn_bench sees RUNNING_ON_VALGRIND and, per operation, runs
# setup and a warm-up loop uncounted, then CALLGRIND_ZERO_STATS, CALLGRIND_TOGGLE_COLLECT, the
# loop, CALLGRIND_TOGGLE_COLLECT and CALLGRIND_DUMP_STATS_AT("pfbench IMPL OP ITERS"). With
# --collect-atstart=no nothing else is counted, so a dump's total Ir divided by ITERS is the
# cost of one operation plus the loop's own few instructions (the direct column shows those).
set -eu

usage() {
  sed -n '4,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

[ $# -ge 2 ] || usage
bench=$1
outdir=$2
shift 2

cg_iters=100000
common=""
timing=""
no_time=0
while [ $# -gt 0 ]; do
  case $1 in
  --cg-iters) cg_iters=$2; shift 2 ;;
  --op | --impl | --cpu) common="$common $1 $2"; shift 2 ;;
  --iters | --reps) timing="$timing $1 $2"; shift 2 ;;
  --no-time) no_time=1; shift ;;
  --joined) common="$common $1"; shift ;;
  *) echo "run_callgrind.sh: unknown option '$1'" >&2; usage ;;
  esac
done

command -v valgrind >/dev/null 2>&1 || {
  echo "run_callgrind.sh: valgrind not found (apt-get install valgrind)" >&2
  exit 2
}
[ -x "$bench" ] || { echo "run_callgrind.sh: $bench is not executable" >&2; exit 2; }

# packfn alone unless --joined, from the start (a kernel library may join when it loads)
case " $common " in
*" --joined "*) ;;
*) export PACKFN_NO_TVM_FFI=1 ;;
esac

mkdir -p "$outdir"
rm -f "$outdir"/cg.out "$outdir"/cg.out.*

# shellcheck disable=SC2086 # $common holds separate options on purpose
if ! valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$outdir/cg.out" \
  "$bench" --iters "$cg_iters" $common >"$outdir/callgrind.log" 2>&1; then
  echo "run_callgrind.sh: the callgrind run failed; see $outdir/callgrind.log" >&2
  tail -n 20 "$outdir/callgrind.log" >&2
  exit 1
fi

# One dump per operation: its label and its total Ir.
{
  printf '# impl\top\tir_per_op\titers\tir_total\n'
  for f in "$outdir"/cg.out.*; do
    [ -e "$f" ] || continue
    awk '
      /^desc: Trigger: Client Request: pfbench / { impl = $6; op = $7; iters = $8 }
      /^totals:/ { total = $2 }
      END {
        if (impl != "" && iters > 0)
          printf "%s\t%s\t%.2f\t%.0f\t%.0f\n", impl, op, total / iters, iters, total
      }' "$f"
  done
} >"$outdir/ir.tsv"

count=$(grep -vc '^#' "$outdir/ir.tsv" || true)
if [ "$count" -eq 0 ]; then
  echo "run_callgrind.sh: no pfbench dumps in $outdir (was packfn_bench built with" \
    "valgrind/callgrind.h?)" >&2
  exit 1
fi

if [ "$no_time" -eq 1 ]; then
  mode="--no-time"
else
  mode="$timing"
fi
# shellcheck disable=SC2086
"$bench" $common $mode --ir "$outdir/ir.tsv" --md "$outdir/bench.md" \
  --json "$outdir/bench.json"
cat "$outdir/bench.md"
