# tools/bench/plots/cdf.gp: latency distributions of the small calls in `mixed`, one line per
# (system, variant), latency on a logarithmic axis. Owned by tools/bench-report.sh's plotting
# (tools/bench/plots/plot.sh calls it); gnuplot 5.
#
# Data files are homarpc-bench's --data_dir files mixed[-shared]-<system>.cdf
# (tools/bench/load_scenarios.h): `#` header line, columns  latency_us  cumulative_fraction.
#
# Variables, set with gnuplot -e:
#   term    terminal and its options, e.g. "pngcairo size 960,600 noenhanced"
#   out     the PNG to write
#   ttl     the title
#   files   the data files, space-separated
#   titles  one legend entry per file, each in double quotes: "\"homarpc\" \"gRPC\""
#   styles  one line style per file: 1 homarpc, 2 gRPC, 3 homarpc shared channel,
#           4 gRPC shared channel
#   tail    0: the CDF (fraction of calls at or below a latency, linear axis);
#           1: the tail, 1 - CDF (fraction of calls slower, logarithmic axis), with p99 and
#           p99.9 marked
set terminal @term
set output out
set title ttl
set xlabel "latency of a 64 B call (us)"
set logscale x
set format x "%g"
set grid xtics ytics mxtics mytics lc rgb "#e0e0e0"
set style line 1 lc rgb "#1f5fbf" lw 2
set style line 2 lc rgb "#c8323c" lw 2
set style line 3 lc rgb "#1f5fbf" lw 2 dt 2
set style line 4 lc rgb "#c8323c" lw 2 dt 2

if (words(files) == 0) {
  print "cdf.gp: no data file given"
  exit status 1
}
if (tail) {
  set logscale y
  set format y "%g"
  set ylabel "fraction of calls slower (1 - CDF)"
  set key bottom left box opaque
  set arrow 1 from graph 0, first 0.01 to graph 1, first 0.01 nohead dt 3 lc rgb "#808080"
  set label 1 "p99" at graph 0.01, first 0.012 tc rgb "#606060"
  set arrow 2 from graph 0, first 0.001 to graph 1, first 0.001 nohead dt 3 lc rgb "#808080"
  set label 2 "p99.9" at graph 0.01, first 0.0012 tc rgb "#606060"
  # 1 - F of the last sample is 0, which a log axis cannot show: not drawn.
  plot for [i=1:words(files)] word(files, i) \
      using 1:((1 - $2) > 0 ? 1 - $2 : NaN) with lines ls int(word(styles, i)) \
      title word(titles, i)
} else {
  set yrange [0:1]
  set ylabel "fraction of calls (CDF)"
  set key bottom right box opaque
  plot for [i=1:words(files)] word(files, i) \
      using 1:2 with lines ls int(word(styles, i)) title word(titles, i)
}
