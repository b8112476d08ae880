# tools/bench/plots/by_size.gp: p50 and p99 of one quantity by message size, homarpc against
# gRPC, both axes logarithmic — four lines (homarpc solid blue, gRPC solid red; p99 dashed).
# Owned by tools/bench-report.sh's plotting (tools/bench/plots/plot.sh calls it); gnuplot 5.
#
# Used for the `workload` slowdown plots (bucket upper bound -> p50/p99 slowdown) and the
# `unloaded` latency plot (request size -> p50/p99 round trip). Data files are homarpc-bench's
# --data_dir files (tools/bench/load_scenarios.h): whitespace-separated, `#` header line,
# columns  x  p50  p99  [calls].
#
# Variables, set with gnuplot -e:
#   term   terminal and its options, e.g. "pngcairo size 960,600 noenhanced"
#   out    the PNG to write
#   ttl    the title
#   xlab, ylab   axis labels
#   homa, grpc   the two systems' data files; "" = that system did not run
#   calls  the column holding the number of calls in the row (rows with 0 calls are not drawn),
#          or 0 when the files have no such column
set terminal @term
set output out
set title ttl
set xlabel xlab
set ylabel ylab
set logscale xy
set format x "%.0s %cB"
set grid xtics ytics mxtics mytics lc rgb "#e0e0e0"
set key top left box opaque
set style line 1 lc rgb "#1f5fbf" lw 2 pt 7 ps 0.9
set style line 2 lc rgb "#1f5fbf" lw 2 dt 2 pt 7 ps 0.9
set style line 3 lc rgb "#c8323c" lw 2 pt 5 ps 0.9
set style line 4 lc rgb "#c8323c" lw 2 dt 2 pt 5 ps 0.9

# A value is drawn when it is positive (log axes) and its row has calls.
keep(c) = (column(c) > 0 && (calls == 0 || column(calls) > 0)) ? column(c) : NaN

cmd = ""
if (homa ne "") {
  cmd = cmd . sprintf("'%s' using 1:(keep(2)) with linespoints ls 1 title 'homarpc p50', ", homa)
  cmd = cmd . sprintf("'%s' using 1:(keep(3)) with linespoints ls 2 title 'homarpc p99', ", homa)
}
if (grpc ne "") {
  cmd = cmd . sprintf("'%s' using 1:(keep(2)) with linespoints ls 3 title 'gRPC p50', ", grpc)
  cmd = cmd . sprintf("'%s' using 1:(keep(3)) with linespoints ls 4 title 'gRPC p99', ", grpc)
}
if (cmd eq "") {
  print "by_size.gp: no data file given"
  exit status 1
}
eval("plot " . cmd[1:strlen(cmd) - 2])
