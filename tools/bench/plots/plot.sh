#!/usr/bin/env bash
# tools/bench/plots/plot.sh: draws the benchmark report's PNG plots from homarpc-bench's data
# files. Called by tools/bench-report.sh (and its --plots-only DIR); owned with it.
#
#   tools/bench/plots/plot.sh DIR
#
# Reads the --data_dir files in DIR (formats in tools/bench/load_scenarios.h) and writes, into
# DIR, for whatever is there:
#   unloaded.png          from unloaded-<system>.dat: round-trip p50/p99 by request size
#   mixed-cdf.png         from mixed[-shared]-<system>.cdf: latency CDF of the small calls
#   mixed-tail.png        the same as 1 - CDF on a log axis (where p99 and p99.9 are read)
#   workload-<w>-<L>.png  from workload-<w>-<L>-<system>.dat: p50/p99 slowdown by size bucket,
#                         both systems against the common reference the data files use,
#                         homarpc's unloaded latency (the title names it; where the run's JSON
#                         lines, workload-<w>.jsonl, name another `reference`, that one)
# Systems are `homarpc` and `grpc`; a plot shows whichever of them has a file. Plots of these
# names left from an earlier run are removed first. Prints the PNGs written, one per line.
#
# Uses gnuplot's pngcairo terminal when gnuplot has it (gnuplot-nox does), else png. Exit
# status: 0 when every plot was drawn (also when there was nothing to draw), 1 when gnuplot is
# missing or a plot failed (the others are still drawn), 2 on bad usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
(($# == 1)) || { echo "plot: usage: $0 DIR" >&2; exit 2; }
dir="$1"
[[ -d "$dir" ]] || { echo "plot: $dir is not a directory" >&2; exit 2; }
command -v gnuplot >/dev/null || {
  echo "plot: gnuplot not found (apt-get install gnuplot-nox)" >&2
  exit 1
}
cd "$dir"  # gnuplot is given plain file names: no path quoting inside its commands

if gnuplot -e 'set terminal' 2>&1 | grep -qw pngcairo; then
  term="pngcairo size 960,600 noenhanced"
else
  term="png size 960,600 noenhanced"
fi

failed=0
# gnuplot SCRIPT OUT VAR=VALUE...: values are strings (in gnuplot's single quotes, a quote
# doubled) unless VAR is one of the numeric variables.
draw() {
  local script="$1" out="$2"
  shift 2
  local defs="term='$term'; out='$out'" kv value
  for kv in "$@"; do
    case "${kv%%=*}" in
      calls | tail) defs+="; ${kv}" ;;
      *) value="${kv#*=}"; defs+="; ${kv%%=*}='${value//\'/\'\'}'" ;;
    esac
  done
  if gnuplot -e "$defs" "$here/$script" && [[ -s "$out" ]]; then
    echo "$dir/$out"
  else
    echo "plot: $out failed ($script)" >&2
    failed=1
  fi
}
exists_or_empty() { [[ -f "$1" ]] && echo "$1" || echo ""; }

rm -f unloaded.png mixed-cdf.png mixed-tail.png workload-*.png

# ---- unloaded ----
homa="$(exists_or_empty unloaded-homarpc.dat)"
grpc="$(exists_or_empty unloaded-grpc.dat)"
if [[ -n "$homa$grpc" ]]; then
  draw by_size.gp unloaded.png "ttl=unloaded: round-trip latency by request size (64 B responses)" \
    "xlab=request size" "ylab=round-trip latency (us)" "homa=$homa" "grpc=$grpc" calls=0
fi

# ---- mixed: one line per (variant, system) that has a file ----
files="" titles="" styles=""
add_cdf() {  # file title style
  [[ -f "$1" ]] || return 0
  files+="$1 "
  titles+="\"$2\" "
  styles+="$3 "
}
add_cdf mixed-homarpc.cdf "homarpc" 1
add_cdf mixed-grpc.cdf "gRPC" 2
add_cdf mixed-shared-homarpc.cdf "homarpc, bulk on the same channel" 3
add_cdf mixed-shared-grpc.cdf "gRPC, bulk on the same channel" 4
if [[ -n "$files" ]]; then
  ttl="mixed: 64 B calls while bulk responses fill the server link"
  # titles holds double quotes; inside gnuplot's single-quoted string they stay as they are.
  draw cdf.gp mixed-cdf.png "ttl=$ttl (CDF)" "files=$files" "titles=$titles" \
    "styles=$styles" tail=0
  draw cdf.gp mixed-tail.png "ttl=$ttl (tail)" "files=$files" "titles=$titles" \
    "styles=$styles" tail=1
fi

# ---- workload: one plot per (workload, load) ----
shopt -s nullglob
tab=$'\t'
declare -A keys=()
for f in workload-*-homarpc.dat workload-*-grpc.dat; do
  key="${f%-*}"  # workload-w3-80
  keys["$key"]=1
done
for key in "${!keys[@]}"; do
  rest="${key#workload-}"  # w3-80
  w="${rest%-*}"
  load="${rest##*-}"
  # The reference the data files' slowdowns divide by: homarpc's for both systems, unless the
  # run's JSON lines say otherwise (load_scenarios.cc: without a homarpc calibration each system
  # is divided by its own).
  ref=""
  if [[ -f "workload-$w.jsonl" ]]; then
    ref="$(awk -v want=reference -v where="scenario=workload${tab}point=load${tab}label=$w $load%" \
      -f "$here/jsonl.awk" "workload-$w.jsonl")"
  fi
  if [[ -z "$ref" || "$ref" == homarpc ]]; then
    ref_text="homarpc's unloaded latency (common reference, both systems)"
    ref_short="common reference"
  else
    ref_text="each system's own unloaded latency (own reference)"
    ref_short="own reference"
  fi
  draw by_size.gp "$key.png" \
    "ttl=${w^^} at ${load}% load: slowdown = latency / $ref_text" \
    "xlab=request size (upper bound of the bucket)" "ylab=slowdown ($ref_short)" \
    "homa=$(exists_or_empty "$key-homarpc.dat")" "grpc=$(exists_or_empty "$key-grpc.dat")" \
    calls=4
done
exit "$failed"
