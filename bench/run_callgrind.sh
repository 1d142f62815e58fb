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
# OUTDIR/bench.json, OUTDIR/cg.out.N (one callgrind dump per operation) and OUTDIR/callgrind.log.
#
# How the counts are taken: every (implementation, operation) pair runs in a process of its own
# under callgrind (packfn_bench --pairs lists them, with the environment a pair needs, such as
# PACKFN_BACKTRACE=1 for error_roundtrip_bt), so that no count depends on what ran before it in
# the same process (one malloc heap, caches of the runtimes). packfn_bench sees
# RUNNING_ON_VALGRIND and runs setup and a warm-up loop uncounted, then CALLGRIND_ZERO_STATS,
# CALLGRIND_TOGGLE_COLLECT, the loop, CALLGRIND_TOGGLE_COLLECT and
# CALLGRIND_DUMP_STATS_AT("pfbench IMPL OP ITERS"). With --collect-atstart=no nothing else is
# counted, so a dump's total Ir divided by ITERS is the cost of one operation plus the loop's
# own few instructions (the direct column shows those).
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
ops="*"
impls="*"
timing=""
no_time=0
while [ $# -gt 0 ]; do
  case $1 in
  --cg-iters) cg_iters=$2; shift 2 ;;
  --op) ops=$2; shift 2 ;;
  --impl) impls=$2; shift 2 ;;
  --cpu) common="$common $1 $2"; shift 2 ;;
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
rm -f "$outdir"/cg.out "$outdir"/cg.out.* "$outdir"/cg.part.* "$outdir"/callgrind.log

# shellcheck disable=SC2086 # $common holds separate options on purpose
pairs=$("$bench" --op "$ops" --impl "$impls" $common --pairs) || {
  echo "run_callgrind.sh: $bench --pairs failed" >&2
  exit 1
}

# One process per pair: its dump becomes cg.out.N, its line of ir.tsv is read from that dump.
tab=$(printf '\t')
k=0
printf '# impl\top\tir_per_op\titers\tir_total\n' >"$outdir/ir.tsv"
while IFS=$tab read -r impl op env_needed; do
  [ -n "$impl" ] || continue
  k=$((k + 1))
  part="$outdir/cg.part.$k"
  echo "== $impl $op ${env_needed:+($env_needed)}" >>"$outdir/callgrind.log"
  # shellcheck disable=SC2086 # $env_needed is empty or NAME=VALUE words; $common options
  if ! env $env_needed valgrind --tool=callgrind --collect-atstart=no \
    --callgrind-out-file="$part" "$bench" --iters "$cg_iters" --op "$op" --impl "$impl" \
    $common </dev/null >>"$outdir/callgrind.log" 2>&1; then
    echo "run_callgrind.sh: the callgrind run of $impl $op failed; see $outdir/callgrind.log" >&2
    tail -n 20 "$outdir/callgrind.log" >&2
    exit 1
  fi
  # the dump of the measured loop is $part.1; $part is what was left at exit (nothing counted)
  if [ ! -f "$part.1" ]; then
    echo "run_callgrind.sh: no pfbench dump for $impl $op (was packfn_bench built with" \
      "valgrind/callgrind.h?)" >&2
    exit 1
  fi
  mv "$part.1" "$outdir/cg.out.$k"
  rm -f "$part" "$part".*
  awk '
    /^desc: Trigger: Client Request: pfbench / { impl = $6; op = $7; iters = $8 }
    /^totals:/ { total = $2 }
    END {
      if (impl != "" && iters > 0)
        printf "%s\t%s\t%.2f\t%.0f\t%.0f\n", impl, op, total / iters, iters, total
    }' "$outdir/cg.out.$k" >>"$outdir/ir.tsv"
done <<EOF
$pairs
EOF

if [ "$k" -eq 0 ]; then
  echo "run_callgrind.sh: no operation matches --op / --impl" >&2
  exit 1
fi

if [ "$no_time" -eq 1 ]; then
  mode="--no-time"
else
  mode="$timing"
fi
# shellcheck disable=SC2086
"$bench" --op "$ops" --impl "$impls" $common $mode --ir "$outdir/ir.tsv" \
  --md "$outdir/bench.md" --json "$outdir/bench.json"
cat "$outdir/bench.md"
