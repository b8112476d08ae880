#!/usr/bin/env bash
# tools/bench/plots/check.sh: the ctest `bench_report_plots` (tools/CMakeLists.txt). Writes small
# synthetic homarpc-bench data files and run records into a temporary folder, then checks that
#   - `tools/bench-report.sh --plots-only DIR` draws every plot as a PNG file, and
#   - `tools/bench-report.sh --report-only --out=OUT` writes OUT/benchmarks.md with the plots
#     linked, the runs' tables under the report's headings, a failed run marked, and the
#     targets table computed from the data files.
# Needs gnuplot and no root; runs no benchmark. Exits 77 (ctest's skip code here) when gnuplot
# is missing.
#
#   tools/bench/plots/check.sh [BENCH_REPORT_SH]
set -euo pipefail
if ! command -v gnuplot >/dev/null; then
  echo "skipped: gnuplot not found (apt-get install gnuplot-nox)"
  exit 77
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="${1:-$here/../../bench-report.sh}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
out="$tmp/out"
data="$out/benchmarks"
mkdir -p "$data"
fail() { echo "FAIL: $*"; exit 1; }

# ---- Synthetic data files, in load_scenarios.h's formats, with values chosen so the targets
# table's numbers are known exactly ----
for system in homarpc grpc; do
  scale=1
  [[ "$system" == grpc ]] && scale=5
  awk -v k="$scale" 'BEGIN { print "# size_bytes p50_us p99_us"
    for (s = 64; s <= 8388608; s *= 4) print s, k * (20 + s / 120), k * (40 + s / 100) }' \
    >"$data/unloaded-$system.dat"
done
# 100 samples each: homarpc at 10, 20, ..., 1000 us (p99 990 us); gRPC 100x slower.
for variant in mixed mixed-shared; do
  awk 'BEGIN { print "# latency_us cumulative_fraction"; for (i = 1; i <= 100; i++) print i * 10, i / 100 }' \
    >"$data/$variant-homarpc.cdf"
  awk 'BEGIN { print "# latency_us cumulative_fraction"; for (i = 1; i <= 100; i++) print i * 1000, i / 100 }' \
    >"$data/$variant-grpc.cdf"
done
# workload_file W LOAD SYSTEM P99_OF_THE_SHORTEST_BUCKET: ten buckets, the last one empty.
workload_file() {
  awk -v p99="$4" 'BEGIN { print "# bucket_upper_bytes p50_slowdown p99_slowdown calls"
    b = 1000
    for (i = 0; i < 10; i++) { print b, 1 + p99 / 4, p99 + i, (i == 9 ? 0 : 500); b *= 4 } }' \
    >"$data/workload-$1-$2-$3.dat"
}
workload_file w3 80 homarpc 2
workload_file w3 80 grpc 40    # 0.05x: met
workload_file w3 50 homarpc 3  # <= 5: met
workload_file w3 50 grpc 9
workload_file w4 80 homarpc 10
workload_file w4 80 grpc 20    # 0.5x: missed
workload_file w4 50 homarpc 7  # > 5: missed
workload_file w4 50 grpc 9

# ---- Synthetic run records, as bench-report.sh's runs leave them ----
cat >"$data/machine.txt" <<'EOF'
date=2030-01-02 03:04:05 UTC
kernel=6.1.0-test
os=Debian GNU/Linux 12 (bookworm)
cpus=2
cpu_model=Synthetic CPU @ 1.00GHz
memory=7.8 GiB
virtualization=kvm
commit=0123456789ab
build_type=RelWithDebInfo
sanitize=OFF
compiler=g++ (Debian 12.2.0-14) 12.2.0
gnuplot=gnuplot 5.4 patchlevel 4
mode=quick
invocation=tools/bench-report.sh --quick
EOF
record() {  # id rate rc
  cat >"$data/$1.info" <<EOF
date=2030-01-02 03:04:05 UTC
rate=$2
buffer=256kb
priorities=8
hosts=3
duration_ms=5000
rc=$3
command=tools/testbed.sh run --hosts=3 --rate=$2 --buffer=256kb -- build/tools/homarpc-bench --testbed --scenario=$1
EOF
}
for id in unloaded mixed workload-w3 workload-w4; do
  record "$id" 1gbit 0
  # shellcheck disable=SC2016  # Markdown backticks, not a command substitution
  printf '## %s\n\n| system | p99 |\n|---|---|\n| homarpc | 1 |\n\n### ratios\n\n```\n# not a heading\n```\n' \
    "$id" >"$data/$id.md"
done
record workload-w3 150mbit 0
record cpu 1gbit 1
: >"$data/cpu.md"

# ---- Plots ----
"$script" --plots-only "$data" >"$tmp/plots.txt" || fail "--plots-only failed: $(cat "$tmp/plots.txt")"
pngs=(unloaded.png mixed-cdf.png mixed-tail.png workload-w3-50.png workload-w3-80.png
      workload-w4-50.png workload-w4-80.png)
for png in "${pngs[@]}"; do
  [[ -s "$data/$png" ]] || fail "$png was not drawn"
  magic="$(head -c 8 "$data/$png" | od -An -tx1 | tr -d ' \n')"
  [[ "$magic" == 89504e470d0a1a0a ]] || fail "$png is not a PNG file ($magic)"
  grep -qx "$data/$png" "$tmp/plots.txt" || fail "--plots-only did not list $png"
done
echo "ok: --plots-only drew ${#pngs[@]} PNG files"

# ---- The report ----
rm -f "$data"/*.png  # --report-only draws them again
"$script" --report-only --out="$out" || fail "--report-only failed"
md="$out/benchmarks.md"
[[ -s "$md" ]] || fail "no $md"
expect() { grep -qF -- "$1" "$md" || fail "benchmarks.md lacks: $1"; }
for png in "${pngs[@]}"; do
  expect "](benchmarks/$png)"
  [[ -s "$data/$png" ]] || fail "--report-only did not draw $png"
done
expect "| date | 2030-01-02 03:04:05 UTC |"
expect "| machine | 2 CPUs, Synthetic CPU @ 1.00GHz, 7.8 GiB memory |"
expect "tools/bench-report.sh --quick"
expect "| \`workload-w3\` | 150mbit | 256kb | 8 | 5000 ms | 0 |"
expect "| \`mixed\`: p99 of the 64 B calls, separate channels | 990 us | 99000 us | 0.01x | <= 0.1x | **yes** |"
expect "| \`mixed\`: p99 of the 64 B calls, bulk on the same channel | 990 us | 99000 us | 0.01x | <= 0.1x | **yes** |"
expect "| \`workload\` W3 at 80% of 150mbit: p99 slowdown, sizes <= 1000 B | 2.00 | 40.0 | 0.05x | <= 0.2x | **yes** |"
expect "| \`workload\` W3 at 50% of 150mbit: p99 slowdown, sizes <= 1000 B | 3.00 | 9.00 | 3.00 | <= 5 | **yes** |"
expect "| \`workload\` W4 at 80% of 1gbit: p99 slowdown, sizes <= 1000 B | 10.0 | 20.0 | 0.5x | <= 0.2x | **no** |"
expect "| \`workload\` W4 at 50% of 1gbit: p99 slowdown, sizes <= 1000 B | 7.00 | 9.00 | 7.00 | <= 5 | **no** |"
expect "## \`mixed\`: 64 B calls behind bulk fetches"
expect "### mixed"          # the run's own headings, moved to level 3 and below
expect "#### ratios"
expect "# not a heading"    # inside a code fence: left alone
grep -qx "### not a heading" "$md" && fail "a line inside a code fence was taken for a heading"
expect "**This run failed (exit status 1)**"
expect "_No tables: homarpc-bench printed nothing._"
echo "ok: --report-only wrote benchmarks.md with the plots, the tables and the targets"
