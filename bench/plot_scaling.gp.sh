#!/bin/sh
# plot_scaling.gp.sh: draws bench_scaling's CSV with gnuplot (the fallback when no Python has
# matplotlib): four panels, packfn against TVM-FFI. usage: plot_scaling.gp.sh CSV PNG
set -eu
csv=$1
png=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One data file per series and implementation: x median min max.
for s in args lookup alloc threads; do
  for i in packfn tvmffi; do
    awk -F, -v s="$s" -v i="$i" '$1 == s && $2 == i { print $3, $5, $6, $7 }' "$csv" \
      >"$tmp/$s.$i"
  done
done
plot_pair() { # series: both implementations when present
  line="plot"
  sep=""
  for i in packfn tvmffi; do
    if [ -s "$tmp/$1.$i" ]; then
      line="$line$sep '$tmp/$1.$i' using 1:2:3:4 with yerrorlines title '$i'"
      sep=","
    fi
  done
  echo "$line"
}
gnuplot <<GP
set terminal pngcairo size 1000,760 font ",9"
set output '$png'
set multiplot layout 2,2 title "packfn scaling (median, bars min-max)"
set grid
set title "packed call against argument count"; set xlabel "arguments"; set ylabel "ns per call"
set logscale x 2
$(plot_pair args)
unset logscale
set title "global lookup against table size"; set xlabel "registered names"; set ylabel "ns"
set logscale x 10
$(plot_pair lookup)
unset logscale
set title "calls per second, one shared function"; set xlabel "threads"; set ylabel "calls/s"
set xrange [0.5:2.5]
$(plot_pair threads)
set autoscale x
set title "tensor empty + release against size"; set xlabel "bytes"; set ylabel "ns"
set logscale xy 10
$(plot_pair alloc)
unset multiplot
GP
