#!/usr/bin/env bash
# tools/bench-report.sh: runs homarpc-bench's load scenarios (homarpc against gRPC C++) on the
# namespace testbed and writes the benchmark report, docs/benchmarks.md, with gnuplot plots.
#
#   tools/bench-report.sh [--quick] [--out=DIR] [--build=DIR] [--no-build]
#                         [--scenarios=LIST] [--workloads=LIST]
#   tools/bench-report.sh --report-only [--out=DIR]   redo the plots and the report from the
#                                                     files of an earlier run; runs nothing
#   tools/bench-report.sh --plots-only DIR            draw the plots from the data files in DIR
#
# Options (defaults in brackets):
#   --quick           short measuring times: a few minutes in all; W3 and W4 only [full run:
#                     longer times, W1-W5; about half an hour]
#   --out=DIR         where the report goes: DIR/benchmarks.md, and DIR/benchmarks/ for the
#                     plots and everything the runs wrote [docs]
#   --build=DIR       the build folder homarpc-bench is built in [build]
#   --no-build        use DIR/tools/homarpc-bench as it is (the report notes its build type)
#   --scenarios=LIST  comma list of unloaded, mixed, workload, cpu [all four]
#   --workloads=LIST  comma list of w1..w5 for `workload` [w3,w4 with --quick, else w1..w5]
# Relative paths are taken from the current directory; the defaults are in the repository.
#
# A run needs root (tools/testbed.sh builds network namespaces) and refuses otherwise. It first
# installs the Debian packages it is missing, gnuplot-nox among them (tools/lib/setup.sh, as
# tools/quickstart.sh does; HOMARPC_SKIP_SETUP=1 skips that), then builds homarpc-bench
# optimized in the build folder (RelWithDebInfo, g++, no sanitizers, no tests, like
# quickstart). Each scenario then runs in a fresh 3-host testbed:
#   tools/testbed.sh run --hosts=3 --rate=R --buffer=256kb --priorities=8 -- \
#       BUILD/tools/homarpc-bench --testbed --scenario=S ... --data_dir=DIR/benchmarks
# `mixed` runs both of its variants (separate channels, and one shared channel); `workload`
# runs once per workload, each at its own link rate (the table `workload_rate` below).
#
# What it writes, in DIR/benchmarks/:
#   <run>.md, <run>.log, <run>.info   per run (unloaded, mixed, workload-w3, ..., cpu): the
#                                     Markdown tables homarpc-bench printed, its stderr, and
#                                     how it ran (command, link rate, exit status, date)
#   machine.txt                       when, on what machine, from which commit and build
#   *.dat, *.cdf                      homarpc-bench's data files (tools/bench/load_scenarios.h)
#   *.png                             the plots (tools/bench/plots/plot.sh)
# and DIR/benchmarks.md: the machine, the commands to reproduce, the testbed, the issue's
# targets against the measured values, every run's tables and the plots. A run of every
# scenario first removes an earlier run's files there; one with --scenarios replaces only the
# files of the runs it makes, and the report lists it as redone.
#
# Exit status: 0 when every run and plot succeeded; 1 when one failed (the report is still
# written and says which) or on a set-up error; 2 on bad usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
invocation="tools/bench-report.sh${*:+ $*}"

die() { printf 'bench-report: %s\n' "$*" >&2; exit 1; }
usage_error() { printf 'bench-report: %s (see the top of %s)\n' "$*" "$0" >&2; exit 2; }
log() { printf '[bench-report] %s\n' "$*" >&2; }
abspath() { if [[ "$1" == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
# A path as the report shows it: relative to the repository when inside it.
shown() { if [[ "$1" == "$root/"* ]]; then echo "${1#"$root/"}"; else echo "$1"; fi; }

all_scenarios=(unloaded mixed workload cpu)
all_workloads=(w1 w2 w3 w4 w5)

# ---- The measurement plan ----
# Every run uses 3 hosts (server on host 0, clients on hosts 1 and 2) and switch ports like a
# datacenter switch's: 8 strict-priority queues chosen by DSCP, each up to 256 KB, a shallow
# buffer (tools/testbed.sh's defaults, named here so the report states them).
hosts=3
buffer=256kb
priorities=8
default_rate=1gbit
# Link rate per workload. The offered load is a fraction of the link rate in request bytes, so
# a workload of small messages needs many calls per second to fill a link: at 1 Gbit/s and 80%
# load, W1 (mean request 189 B) would be 530k calls/s, W3 (2.9 KB) 34k/s. Two cores cannot
# start and serve that many gRPC calls, and the CPUs, not the link, would be measured. So each
# workload runs at the rate where 80% load is about 5000 calls/s (the `cpu` scenario's default
# rate; the two cores run the server and both client hosts), capped at the 1 Gbit/s default:
#   rate_mbps ~ 5000 * mean_bytes * 8 / 0.8 / 1e6, rounded
#   W1 mean 189 B     ->   9.5 -> 10 Mbit/s   (80%: 5300 calls/s)
#   W2 mean 442 B     ->  22   -> 20 Mbit/s   (80%: 4500 calls/s)
#   W3 mean 2.9 KB    -> 146   -> 150 Mbit/s  (80%: 5100 calls/s)
#   W4 mean 128 KB    -> 6390  -> 1 Gbit/s    (80%: 780 calls/s)
#   W5 mean 2.6 MB    ->         1 Gbit/s     (80%: 39 calls/s)
# (means from tools/bench/workloads/w*.cdf). The queue stays 256 KB at every rate.
declare -A workload_rate=([w1]=10mbit [w2]=20mbit [w3]=150mbit [w4]=1gbit [w5]=1gbit)
# Measuring time per point, in ms. `unloaded` has ~10 sizes x 2 systems; `mixed` 2 variants x 2
# systems; `workload` 2 loads x 2 systems per workload (plus its unloaded calibration); `cpu` 2
# systems. W5 gets longer in a full run: at 39 calls/s, 30 s would leave ~100 calls per bucket.
declare -A quick_ms full_ms
quick_ms=([unloaded]=500 [mixed]=5000 [workload]=5000 [cpu]=3000)
full_ms=([unloaded]=3000 [mixed]=30000 [workload]=30000 [cpu]=10000)
declare -A full_workload_ms=([w5]=60000)

# ---- Options ----
quick=0
out="$root/docs"
build="$root/build"
no_build=0
mode=run
plots_dir=""
scenarios=()
workloads=()
partial=0

# split_list NAME VALUE KNOWN...: the comma list VALUE into the array `items`, each checked
# against KNOWN.
split_list() {
  local name="$1" value="$2" item
  shift 2
  [[ "$value" =~ ^[a-z0-9]+(,[a-z0-9]+)*$ ]] || usage_error "$name needs a comma list, not '$value'"
  IFS=, read -r -a items <<<"$value"
  for item in "${items[@]}"; do
    [[ " $* " == *" $item "* ]] || usage_error "unknown '$item' in $name (known: $*)"
  done
}

while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --out=*) [[ -n "${1#*=}" ]] || usage_error "--out needs a directory"; out="$(abspath "${1#*=}")" ;;
    --build=*) [[ -n "${1#*=}" ]] || usage_error "--build needs a directory"; build="$(abspath "${1#*=}")" ;;
    --no-build) no_build=1 ;;
    --scenarios=*)
      split_list --scenarios "${1#*=}" "${all_scenarios[@]}"
      scenarios=("${items[@]}")
      partial=1 ;;
    --workloads=*)
      split_list --workloads "${1#*=}" "${all_workloads[@]}"
      workloads=("${items[@]}") ;;
    --report-only) mode=report ;;
    --plots-only=*) mode=plots; plots_dir="${1#*=}" ;;
    --plots-only)
      (($# >= 2)) || usage_error "--plots-only needs a directory"
      mode=plots; plots_dir="$2"; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) usage_error "unknown option '$1'" ;;
  esac
  shift
done

if [[ "$mode" == plots ]]; then
  [[ -d "$plots_dir" ]] || usage_error "--plots-only: '$plots_dir' is not a directory"
  exec "$here/bench/plots/plot.sh" "$plots_dir"
fi

data="$out/benchmarks"
report="$out/benchmarks.md"
bench="$build/tools/homarpc-bench"
((${#scenarios[@]})) || scenarios=("${all_scenarios[@]}")
if ((!${#workloads[@]})); then
  if ((quick)); then workloads=(w3 w4); else workloads=("${all_workloads[@]}"); fi
fi

# ---- Running ----

# The files one run writes into $data, as globs (the data files per load_scenarios.h).
run_files() {
  case "$1" in
    unloaded) echo "unloaded.* unloaded-*.dat" ;;
    mixed) echo "mixed.* mixed-*.cdf" ;;
    workload-*) echo "$1.* $1-*.dat" ;;
    cpu) echo "cpu.*" ;;
  esac
}

machine_info() {
  local cpu mem os virt="" commit="unknown" cache="$build/CMakeCache.txt" cxx=""
  cpu="$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)"
  [[ -n "$cpu" ]] || cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1 || true)"
  mem="$(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null || true)"
  os="$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null || true)"
  command -v systemd-detect-virt >/dev/null && virt="$(systemd-detect-virt 2>/dev/null || true)"
  if command -v git >/dev/null && git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    commit="$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
    [[ -z "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]] ||
      commit+=" (with uncommitted changes)"
  fi
  if [[ -f "$cache" ]]; then
    cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$cache" | head -1)"
  fi
  echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "kernel=$(uname -r)"
  echo "os=${os:-unknown}"
  echo "cpus=$(nproc)"
  echo "cpu_model=${cpu:-unknown}"
  echo "memory=${mem:-unknown}"
  echo "load_average=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
  echo "virtualization=${virt:-unknown}"
  echo "commit=$commit"
  echo "build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache" 2>/dev/null | head -1)"
  echo "sanitize=$(sed -n 's/^HOMARPC_SANITIZE:[A-Z]*=//p' "$cache" 2>/dev/null | head -1)"
  echo "compiler=${cxx:+$("$cxx" --version 2>/dev/null | head -1)}"
  echo "gnuplot=$(gnuplot --version 2>/dev/null || echo missing)"
  echo "mode=$( ((quick)) && echo quick || echo full)"
  echo "invocation=$invocation"
}

failures=()
# run_bench ID RATE DURATION_MS BENCH_ARGS...: one testbed run; its Markdown, stderr and
# description go to $data/ID.{md,log,info}.
run_bench() {
  local id="$1" rate="$2" ms="$3"
  shift 3
  local args=(--testbed "$@" --duration_ms="$ms" --data_dir="$data")
  local shown_args=(--testbed "$@" --duration_ms="$ms" --data_dir="$(shown "$data")")
  local command
  command="tools/testbed.sh run --hosts=$hosts --rate=$rate --buffer=$buffer --priorities=$priorities -- $(shown "$bench") ${shown_args[*]}"
  local started rc
  started="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  log "$id: $command"
  set +e
  "$here/testbed.sh" run --hosts="$hosts" --rate="$rate" --buffer="$buffer" \
    --priorities="$priorities" -- \
    "$bench" "${args[@]}" 2>&1 >"$data/$id.md" | tee "$data/$id.log" >&2
  rc=${PIPESTATUS[0]}
  set -e
  {
    echo "date=$started"
    echo "rate=$rate"
    echo "buffer=$buffer"
    echo "priorities=$priorities"
    echo "hosts=$hosts"
    echo "duration_ms=$ms"
    echo "rc=$rc"
    echo "command=$command"
  } >"$data/$id.info"
  if ((rc != 0)); then
    log "$id: exit status $rc (see $(shown "$data/$id.log"))"
    failures+=("$id")
  fi
}

run_all() {
  [[ "$(id -u)" == 0 ]] ||
    die "needs root (tools/testbed.sh builds network namespaces); run as root, or use --report-only or --plots-only DIR, which run nothing"
  # shellcheck source=tools/lib/setup.sh disable=SC1091
  source "$here/lib/setup.sh"
  homarpc_setup
  cd "$root"
  if ((!no_build)); then
    local cxx
    cxx="$(command -v g++ || true)"
    [[ -n "$cxx" ]] || die "g++ not found"
    log "configuring $(shown "$build") with $cxx (RelWithDebInfo, no sanitizers)"
    cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHOMARPC_SANITIZE=OFF -DHOMARPC_BUILD_TESTS=OFF
    log "building homarpc-bench in $(shown "$build")"
    cmake --build "$build" --target homarpc-bench
  fi
  [[ -x "$bench" ]] || die "$bench not found (build it, or drop --no-build)"
  # The load scenarios' flags exist only in a homarpc-bench new enough to run them.
  local flags
  flags="$("$bench" --helpfull 2>&1 || true)"
  grep -q -- '-data_dir' <<<"$flags" ||
    die "$bench has no load scenarios (no --data_dir flag): rebuild it (drop --no-build)"

  mkdir -p "$data"
  (
    cd "$data"
    shopt -s nullglob
    if ((partial)); then
      local s w
      for s in "${scenarios[@]}"; do
        if [[ "$s" == workload ]]; then
          for w in "${workloads[@]}"; do
            # shellcheck disable=SC2046  # the globs are meant to expand
            rm -f $(run_files "workload-$w")
          done
        else
          # shellcheck disable=SC2046
          rm -f $(run_files "$s")
        fi
      done
    else
      rm -f ./*.md ./*.log ./*.info ./*.dat ./*.cdf ./*.png ./*.jsonl machine.txt
    fi
  )
  if ((partial)) && [[ -f "$data/machine.txt" ]]; then
    # The report stays the earlier run's, with these runs redone: say so.
    echo "rerun=$(date -u '+%Y-%m-%d %H:%M:%S UTC'): $invocation" >>"$data/machine.txt"
  else
    machine_info >"$data/machine.txt"
  fi

  local s w ms
  for s in "${scenarios[@]}"; do
    if ((quick)); then ms="${quick_ms[$s]}"; else ms="${full_ms[$s]}"; fi
    case "$s" in
      unloaded) run_bench unloaded "$default_rate" "$ms" --scenario=unloaded ;;
      mixed) run_bench mixed "$default_rate" "$ms" --scenario=mixed ;;
      workload)
        for w in "${workloads[@]}"; do
          local wms="$ms"
          ((quick)) || wms="${full_workload_ms[$w]:-$ms}"
          run_bench "workload-$w" "${workload_rate[$w]}" "$wms" --scenario=workload \
            --workloads="$w" --loads=0.5,0.8
        done
        ;;
      cpu) run_bench cpu "$default_rate" "$ms" --scenario=cpu ;;
    esac
  done
}

# ---- The report ----

# info FILE KEY: the value of KEY in a key=value file ("" when absent).
info() {
  [[ -f "$1" ]] || return 0
  awk -v k="$2" 'index($0, k "=") == 1 { print substr($0, length(k) + 2); exit }' "$1"
}

# Numbers for the report: 3 significant digits, no exponent.
num() { awk -v v="$1" 'BEGIN {
  a = v < 0 ? -v : v
  if (a >= 100) printf "%.0f", v; else if (a >= 10) printf "%.1f", v; else printf "%.2f", v }'; }
# cdf_at FILE Q: the first latency whose cumulative fraction is >= Q (nearest rank), "" if none.
cdf_at() {
  [[ -f "$1" ]] || return 0
  awk -v q="$2" '!/^#/ && NF >= 2 && $2 + 0 >= q - 1e-9 { print $1 + 0; exit }' "$1"
}
# shortest_bucket FILE: "upper p99" of the shortest size bucket (the file's first row), p99
# empty when the bucket had no calls; "" without a file.
shortest_bucket() {
  [[ -f "$1" ]] || return 0
  awk '!/^#/ && NF >= 4 { print $1 + 0, ($4 + 0 > 0 ? $3 + 0 : ""); exit }' "$1"
}
# verdict VALUE OP LIMIT: yes/no, or "?" when VALUE is missing.
verdict() {
  [[ -n "$1" ]] || { echo "?"; return; }
  awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN {
    ok = (op == "<=") ? (v <= l) : (v >= l); print ok ? "**yes**" : "**no**" }'
}
ratio() {  # a b: a/b, "" when either is missing or b is 0
  [[ -n "$1" && -n "$2" ]] || return 0
  awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3g", a / b }'
}

# One row of the targets table per mixed variant.
targets_mixed_row() {  # variant label
  local h g r
  h="$(cdf_at "$data/$1-homarpc.cdf" 0.99)"
  g="$(cdf_at "$data/$1-grpc.cdf" 0.99)"
  r="$(ratio "$h" "$g")"
  echo "| \`mixed\`: p99 of the 64 B calls, $2 | ${h:+$(num "$h") us} | ${g:+$(num "$g") us} | ${r:+${r}x} | <= 0.1x | $(verdict "$r" "<=" 0.1) |"
}
targets_workload_row() {  # w load(50|80)
  local w="$1" load="$2" rate upper h grpc_upper g r label
  rate="$(info "$data/workload-$w.info" rate)"
  read -r upper h <<<"$(shortest_bucket "$data/workload-$w-$load-homarpc.dat")"
  read -r grpc_upper g <<<"$(shortest_bucket "$data/workload-$w-$load-grpc.dat")"
  upper="${upper:-$grpc_upper}"
  label="\`workload\` ${w^^} at $load% of ${rate:-?}: p99 slowdown, sizes <= ${upper:-?} B"
  if [[ "$load" == 80 ]]; then  # relative to gRPC
    r="$(ratio "$h" "$g")"
    echo "| $label | ${h:+$(num "$h")} | ${g:+$(num "$g")} | ${r:+${r}x} | <= 0.2x | $(verdict "$r" "<=" 0.2) |"
  else  # absolute
    echo "| $label | ${h:+$(num "$h")} | ${g:+$(num "$g")} | ${h:+$(num "$h")} | <= 5 | $(verdict "$h" "<=" 5) |"
  fi
}

targets_section() {
  cat <<'EOF'
## Targets

<!-- Generated by tools/bench-report.sh from the data files in benchmarks/. -->
Issue 4's targets (same testbed, same offered load, one run) against this run. The p99 of the
small calls is read from the `mixed` CDF files (nearest rank), the slowdowns from the shortest
size bucket of the `workload` data files; so they can differ from the tables' values by the
rounding of those files. Bulk goodput and CPU time are not in the data files: **read them from
the `mixed` and `cpu` tables below** (rows marked "see table"). `?` means the value is missing
(the run failed or was not made).

| target | homarpc | gRPC | measured | goal | met |
|---|---|---|---|---|---|
EOF
  targets_mixed_row mixed "separate channels"
  targets_mixed_row mixed-shared "bulk on the same channel"
  echo "| \`mixed\`: bulk goodput, homarpc / gRPC | see table | see table | | >= 0.8x | see table |"
  local w
  for w in w3 w4; do
    targets_workload_row "$w" 80
    targets_workload_row "$w" 50
  done
  echo "| \`cpu\`: CPU time per 64 B RPC (client + server), homarpc / gRPC | see table | see table | | <= 0.5x | see table |"
  echo
}

# A run's Markdown with its headings moved down so that its top level is 3, under the report's
# "## <run>" (lines inside code fences are not headings).
demoted() {
  awk 'function level(line) { match(line, /^#+/); return RLENGTH }
    FNR == 1 { fence = 0 }
    /^```/ { fence = !fence }
    NR == FNR { if (!fence && /^#+ / && (top == 0 || level($0) < top)) top = level($0); next }
    !fence && /^#+ / { printf "%s", substr("######", 1, 3 - top) }
    { print }' "$1" "$1"
}

image() {  # file caption
  [[ -f "$data/$1" ]] || return 0
  printf '![%s](benchmarks/%s)\n\n' "$2" "$1"
}

run_section() {  # id title
  local id="$1" f="$data/$1.info" rc
  [[ -f "$f" ]] || return 0
  rc="$(info "$f" rc)"
  echo "## $2"
  echo
  echo "Run $(info "$f" date), link rate $(info "$f" rate), $(info "$f" duration_ms) ms per point:"
  echo
  echo '```'
  info "$f" command
  echo '```'
  echo
  if [[ "$rc" != 0 ]]; then
    echo "**This run failed (exit status $rc)**; its messages are in [benchmarks/$id.log](benchmarks/$id.log)."
    echo
  fi
  if [[ -s "$data/$id.md" ]]; then
    demoted "$data/$id.md"
    echo
  else
    echo "_No tables: homarpc-bench printed nothing._"
    echo
  fi
}

assemble_report() {
  local m="$data/machine.txt" tmp="$report.tmp" w load
  [[ -f "$m" ]] || die "$(shown "$m") not found: no run to report in $(shown "$data")"
  local plots_ok=1
  if command -v gnuplot >/dev/null; then
    "$here/bench/plots/plot.sh" "$data" >/dev/null || plots_ok=0
  else
    log "gnuplot not found: the report has no plots (apt-get install gnuplot-nox)"
    plots_ok=0
  fi
  local build_type sanitize tb_hosts readme f
  build_type="$(info "$m" build_type)"
  tb_hosts="$hosts"
  for f in "$data"/*.info; do
    [[ -f "$f" ]] && tb_hosts="$(info "$f" hosts)" && break
  done
  # A link from the report to the benchmark's README when both are in the repository.
  readme="\`tools/bench/README.md\`"
  if [[ "$out/" == "$root/"* ]]; then
    readme="[$readme]($(realpath -m --relative-to="$out" "$root/tools/bench/README.md"))"
  fi
  sanitize="$(info "$m" sanitize)"
  {
    cat <<EOF
# Benchmarks: tail latency under load, homarpc against gRPC C++

<!-- Generated by tools/bench-report.sh; edits are lost on the next run. -->
Homa's claim is that short messages keep their latency when the network is busy, where TCP
makes them queue behind bulk transfers. These measurements test it on a multi-host testbed
built from network namespaces on one machine, against gRPC C++ over TCP, with the same proto,
the same offered load and the same links, in one run of \`tools/bench-report.sh\`. Every
number below comes from that run; what the scenarios do is described in
$readme.

## When and where

| | |
|---|---|
| date | $(info "$m" date) |
| machine | $(info "$m" cpus) CPUs, $(info "$m" cpu_model), $(info "$m" memory) memory |
| virtualization | $(info "$m" virtualization) |
| load average before the runs (1, 5, 15 min) | $(info "$m" load_average) |
| system | $(info "$m" os), Linux $(info "$m" kernel) |
| commit | $(info "$m" commit) |
| build | ${build_type:-unknown}, sanitizers ${sanitize:-unknown}, $(info "$m" compiler) |
| gnuplot | $(info "$m" gnuplot) |
| mode | $(info "$m" mode) |

EOF
    if [[ "$build_type" != RelWithDebInfo && "$build_type" != Release ]] || [[ "$sanitize" == ON ]]; then
      echo "**Warning: homarpc-bench was not an optimized build without sanitizers; these numbers do not measure homarpc.**"
      echo
    fi
    cat <<EOF
## How to reproduce

As root, on Debian 12, from the repository root:

\`\`\`
$(info "$m" invocation)
\`\`\`

It installs missing packages, builds \`homarpc-bench\` (RelWithDebInfo, g++, no sanitizers)
and makes each run below in a fresh testbed, writing this file and \`benchmarks/\`. One run
alone is its command below (after the build).

EOF
    if grep -q '^rerun=' "$m"; then
      echo "Some runs were redone later, each on its own date (see the runs' sections):"
      echo
      # shellcheck disable=SC2016  # Markdown backticks, not a command substitution
      sed -n 's/^rerun=\(.* UTC\): \(.*\)$/- \1: `\2`/p' "$m"
      echo
    fi
    cat <<EOF
## The testbed

\`tools/testbed.sh\`: ${tb_hosts} hosts, each a network namespace attached through a veth pair
(MTU 1500) to a Linux bridge in a namespace of its own. Both directions of every link are
shaped to the run's link rate; like a datacenter switch port, each has strict-priority queues
chosen by the packets' DSCP class, each with the queue limit below. homarpc marks its packets
with Homa's priorities and paces its sender to the link rate (\`--testbed\` sets
\`--link_mbps\` from it); gRPC runs over the kernel's TCP with its defaults, whose packets
all land in the lowest queue, a single FIFO for them. The server runs on host 0, the clients
on the other hosts. A workload of short messages runs at a lower link rate, so that 80% load stays
within what two cores can serve (about 5000 calls/s; the table \`workload_rate\` in
\`tools/bench-report.sh\` says how each rate was chosen).

| run | link rate | queue per priority | priorities | measuring time per point | exit status |
|---|---|---|---|---|---|
EOF
    local id
    for id in unloaded mixed workload-w1 workload-w2 workload-w3 workload-w4 workload-w5 cpu; do
      [[ -f "$data/$id.info" ]] || continue
      echo "| \`$id\` | $(info "$data/$id.info" rate) | $(info "$data/$id.info" buffer) | $(info "$data/$id.info" priorities) | $(info "$data/$id.info" duration_ms) ms | $(info "$data/$id.info" rc) |"
    done
    echo
    targets_section
    if ((!plots_ok)); then
      echo "_Some plots are missing: gnuplot was not available or failed (see the script's messages)._"
      echo
    fi
    run_section unloaded "\`unloaded\`: round trips on the idle testbed"
    image unloaded.png "unloaded: round-trip latency by request size"
    run_section mixed "\`mixed\`: 64 B calls behind bulk fetches"
    image mixed-cdf.png "mixed: latency CDF of the 64 B calls"
    image mixed-tail.png "mixed: latency tail (1 - CDF) of the 64 B calls"
    for w in "${all_workloads[@]}"; do
      run_section "workload-$w" "\`workload\` ${w^^}"
      for load in 50 80; do
        image "workload-$w-$load.png" "${w^^} at ${load}% load: slowdown by size"
      done
    done
    run_section cpu "\`cpu\`: CPU time per RPC"
    echo "## Files"
    echo
    echo "[\`benchmarks/\`](benchmarks/) holds what the runs wrote: per run its Markdown (\`<run>.md\`),"
    echo "its messages (\`<run>.log\`) and how it ran (\`<run>.info\`); \`machine.txt\`; the data files"
    echo "the plots are drawn from (formats in \`tools/bench/load_scenarios.h\`)$( [[ -f "$data/results.jsonl" ]] && echo ", the JSON lines (\`results.jsonl\`)")."
  } >"$tmp"
  mv "$tmp" "$report"
  log "wrote $(shown "$report")"
  ((plots_ok)) || failures+=(plots)
}

trap 'log "interrupted"; exit 130' INT TERM
if [[ "$mode" == run ]]; then
  run_all
fi
assemble_report
if ((${#failures[@]})); then
  log "failed: ${failures[*]} (the report says which runs; their logs are in $(shown "$data"))"
  exit 1
fi
