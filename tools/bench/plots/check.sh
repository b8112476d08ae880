#!/usr/bin/env bash
# tools/bench/plots/check.sh: the ctest `bench_report_plots` (tools/CMakeLists.txt). Writes small
# synthetic homarpc-bench data files and run records into a temporary folder, then checks that
#   - `tools/bench-report.sh --plots-only DIR` draws every plot as a PNG file, and
#   - `tools/bench-report.sh --report-only --out=OUT` writes OUT/benchmarks.md with the plots
#     linked, the runs' tables under the report's headings, a failed run marked, each run's
#     mode and queue limit, and the targets table computed from the runs' JSON lines (both
#     slowdown references, bulk goodput, CPU time with and without busy-polling), falling back
#     to the data files for a run without them (W4 here).
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

# ---- Synthetic JSON lines (homarpc-bench --json_out, load_report.cc's keys), with values that
# differ from the data files' where both hold one, so the report shows which it used. W4 has
# none: its common-reference slowdown comes from the .dat files, its own-reference one is "?".
# mixed: homarpc's p99 985.4 us (the CDF says 990), gRPC's 98000 us; bulk 0.9 and 1.0 Gbit/s.
# mixed-shared: only gRPC's line (homarpc's p99 falls back to its CDF; its goodput is missing).
cat >"$data/mixed.jsonl" <<'EOF'
not a JSON line
{"scenario":"unloaded","system":"homarpc","label":"mixed","size":64,"small_p99_us":1.000}
{"scenario":"mixed","system":"grpc","label":"mixed","small_p50_us":900.000,"small_p99_us":98000.000,"small_p999_us":null,"small_samples":5000,"small_late_starts":0,"small_failed":0,"bulk_goodput_gbps":1.000,"bulk_calls":70,"bulk_failed":0,"unfinished":0}
{"scenario":"mixed","system":"homarpc","label":"mixed","steal_pct":2.000,"small_p50_us":50.000,"small_p99_us":985.400,"small_p999_us":1200.000,"small_samples":5000,"small_late_starts":0,"small_failed":0,"bulk_goodput_gbps":0.900,"bulk_calls":64,"bulk_failed":0,"unfinished":0}
{"scenario":"mixed","system":"grpc","label":"mixed-shared","small_p50_us":5000.000,"small_p99_us":99000.000,"small_p999_us":99500.000,"small_samples":5000,"small_late_starts":3,"small_failed":0,"bulk_goodput_gbps":2.000,"bulk_calls":70,"bulk_failed":0,"unfinished":0}
EOF
# workload W3, shortest bucket (upper 1024 B; the .dat files say 1000 B):
#   80%: homarpc 2.5 (own 2.5), gRPC 40 (own 10): common 0.0625x met, own 0.25x missed
#   50%: homarpc 3.25 (own 3.25), gRPC 9 (own 4): both met
wl_line() {  # system load p99 p99_own
  printf '{"scenario":"workload","system":"%s","label":"w3 %s%%","point":"load","workload":"w3","load":0.%s0,"link_mbps":150,"achieved_load":0.79,"calls":9000,"failed":0,"unfinished":0,"late_starts":0,"reference":"homarpc","buckets":[{"upper_bytes":1024,"calls":900,"p50_slowdown":1.500,"p99_slowdown":%s,"p99_slowdown_own":%s,"p50_us":30.000,"p99_us":99.000},{"upper_bytes":4096,"calls":0,"p50_slowdown":null,"p99_slowdown":null,"p99_slowdown_own":null,"p50_us":0.000,"p99_us":0.000}]}\n' \
    "$1" "$2" "$2" "$3" "$4"
}
{
  echo '{"scenario":"workload","system":"homarpc","label":"w3 calibration 1 KiB","point":"calibration","workload":"w3","size":1024,"p50_us":20.000,"p99_us":25.000,"samples":40}'
  wl_line homarpc 50 3.250 3.250
  wl_line grpc 50 9.000 4.000
  wl_line homarpc 80 2.500 2.500
  wl_line grpc 80 40.000 10.000
} >"$data/workload-w3.jsonl"
# cpu: total us per RPC gRPC 40, homarpc 24 (0.6x, missed), homarpc --spin_us=0 12 (0.3x, met).
cat >"$data/cpu.jsonl" <<'EOF'
{"scenario":"cpu","system":"grpc","label":"64 B at 5000/s","steal_pct":1.500,"rate":5000.000,"calls":15000,"client_us_per_rpc":25.000,"server_us_per_rpc":15.000,"total_us_per_rpc":40.000,"client_involuntary_switches":5,"server_involuntary_switches":7,"failed":0,"late_starts":0}
{"scenario":"cpu","system":"homarpc","label":"64 B at 5000/s","steal_pct":3.000,"rate":5000.000,"calls":15000,"client_us_per_rpc":14.000,"server_us_per_rpc":10.000,"total_us_per_rpc":24.000,"client_involuntary_switches":5,"server_involuntary_switches":7,"failed":0,"late_starts":0}
EOF
cat >"$data/cpu-nopoll.jsonl" <<'EOF'
{"scenario":"cpu","system":"homarpc","label":"64 B at 5000/s","rate":5000.000,"calls":15000,"client_us_per_rpc":7.000,"server_us_per_rpc":5.000,"total_us_per_rpc":12.000,"client_involuntary_switches":50,"server_involuntary_switches":70,"failed":0,"late_starts":0}
EOF

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
invocation=tools/bench-report.sh --quick
rerun=2030-01-03 04:05:06 UTC: tools/bench-report.sh --scenarios=cpu
rerun=2030-01-04 05:06:07 UTC (commit 89abcdef0123): tools/bench-report.sh --scenarios=mixed
EOF
record() {  # id rate buffer mode rc
  cat >"$data/$1.info" <<EOF
date=2030-01-02 03:04:05 UTC
mode=$4
rate=$2
buffer=$3
priorities=8
hosts=3
duration_ms=5000
rc=$5
command=tools/testbed.sh run --hosts=3 --rate=$2 --buffer=$3 -- build/tools/homarpc-bench --testbed --scenario=$1
EOF
}
for id in unloaded mixed workload-w3 workload-w4 cpu-nopoll; do
  record "$id" 1gbit 250000 quick 0
  # shellcheck disable=SC2016  # Markdown backticks, not a command substitution
  printf '## %s\n\n| system | p99 |\n|---|---|\n| homarpc | 1 |\n\n### ratios\n\n```\n# not a heading\n```\n' \
    "$id" >"$data/$id.md"
done
record workload-w3 150mbit 65536 quick 0
record cpu-nopoll 1gbit 250000 full 0
# An older run's record: the queue as a tc size, no mode.
record cpu 1gbit 256kb "" 1
sed -i '/^mode=$/d' "$data/cpu.info"
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
expect "| \`workload-w3\` | quick | 150mbit | 65536 B (3.50 ms) | 8 | 5000 ms | 0 |"
expect "| \`workload-w4\` | quick | 1gbit | 250000 B (2.00 ms) | 8 | 5000 ms | 0 |"
# The steal column: each system's mean and largest steal_pct over the run's lines, "?" without.
expect "| \`cpu\` |  | 1gbit | 262144 B (2.10 ms) | 8 | 5000 ms | 1 | grpc 1.5% (max 1.5%), homarpc 3.0% (max 3.0%) |"
expect "| \`workload-w3\` | quick | 150mbit | 65536 B (3.50 ms) | 8 | 5000 ms | 0 | ? |"
expect "| \`cpu-nopoll\` | full | 1gbit | 250000 B (2.00 ms) | 8 | 5000 ms | 0 |"
expect "Run 2030-01-02 03:04:05 UTC (full mode), link rate 1gbit, queue 250000 B (2.00 ms) per priority, 5000 ms per point:"
expect "- 2030-01-03 04:05:06 UTC: \`tools/bench-report.sh --scenarios=cpu\`"
expect "- 2030-01-04 05:06:07 UTC (commit 89abcdef0123): \`tools/bench-report.sh --scenarios=mixed\`"
grep -q '^| mode |' "$md" && fail "the report claims one mode for every run"
# The targets, exactly.
expect "| \`mixed\`, separate channels: p99 of the 64 B calls | 985 us | 98000 us | 0.0101x | <= 0.1x | **yes** |"
expect "| \`mixed\`, separate channels: bulk goodput | 0.90 Gbit/s | 1.00 Gbit/s | 0.9x | >= 0.8x | **yes** |"
expect "| \`mixed\`, bulk on the same channel: p99 of the 64 B calls | 990 us | 99000 us | 0.01x | <= 0.1x | **yes** |"
expect "| \`mixed\`, bulk on the same channel: bulk goodput | ? | 2.00 Gbit/s | ? | >= 0.8x | ? |"
w3="\`workload\` W3 at 80% of 150mbit: p99 slowdown, sizes <= 1024 B"
common="(a) common reference (÷ homarpc's unloaded latency)"
own="(b) own reference (÷ each system's unloaded latency)"
expect "| $w3, $common | 2.50 | 40.0 | 0.0625x | <= 0.2x | **yes** |"
expect "| $w3, $own | 2.50 | 10.0 | 0.25x | <= 0.2x | **no** |"
w3="\`workload\` W3 at 50% of 150mbit: p99 slowdown, sizes <= 1024 B"
expect "| $w3, $common | 3.25 | 9.00 | 3.25 | <= 5 | **yes** |"
expect "| $w3, $own | 3.25 | 4.00 | 3.25 | <= 5 | **yes** |"
w4="\`workload\` W4 at 80% of 1gbit: p99 slowdown, sizes <= 1000 B"
expect "| $w4, $common | 10.0 | 20.0 | 0.5x | <= 0.2x | **no** |"
expect "| $w4, $own | ? | ? | ? | <= 0.2x | ? |"
w4="\`workload\` W4 at 50% of 1gbit: p99 slowdown, sizes <= 1000 B"
expect "| $w4, $common | 7.00 | 9.00 | 7.00 | <= 5 | **no** |"
expect "| $w4, $own | ? | ? | ? | <= 5 | ? |"
cpu="\`cpu\`: CPU time per 64 B RPC (client + server)"
expect "| $cpu, homarpc with its default busy-polling | 24.0 us | 40.0 us | 0.6x | <= 0.5x | **no** |"
expect "| $cpu, homarpc without busy-polling (\`--spin_us=0\`, run \`cpu-nopoll\`; gRPC from run \`cpu\`) | 12.0 us | 40.0 us | 0.3x | <= 0.5x | **yes** |"
expect "| gRPC | \`cpu\` | 25.0 | 15.0 | 40.0 | 1x |"
expect "| homarpc, busy-polling (default) | \`cpu\` | 14.0 | 10.0 | 24.0 | 0.6x |"
expect "| homarpc, no busy-polling (--spin_us=0) | \`cpu-nopoll\` | 7.00 | 5.00 | 12.0 | 0.3x |"
expect "(a) common reference (latency / homarpc's unloaded latency, both systems)](benchmarks/workload-w3-80.png)"
expect "its JSON lines (\`<run>.jsonl\`)"
grep -q 'see table' "$md" && fail "a target is left to the reader (see table)"
expect "## \`mixed\`: 64 B calls behind bulk fetches"
expect "### mixed"          # the run's own headings, moved to level 3 and below
expect "#### ratios"
expect "# not a heading"    # inside a code fence: left alone
grep -qx "### not a heading" "$md" && fail "a line inside a code fence was taken for a heading"
expect "**This run failed (exit status 1)**"
expect "_No tables: homarpc-bench printed nothing._"
echo "ok: --report-only wrote benchmarks.md with the plots, the tables and the targets (both references)"
