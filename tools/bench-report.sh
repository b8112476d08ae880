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
#   --cpu-latency=hold|as-is
#                     hold: keep a CPU wake-up latency request of 0 us open
#                     (/dev/cpu_dma_latency, the kernel's PM QoS) for the whole run, so idle
#                     CPUs poll instead of entering an idle state, the same for both systems;
#                     as-is: measure the machine as it is [hold]. On a VM whose idle CPUs
#                     halt (this one: cpuidle haltpoll with guest_halt_poll_ns=0), every
#                     wake-up of a sleeping thread waits for the hypervisor to resume the
#                     virtual CPU: it shows as steal, and it made gRPC's 64 B unary round
#                     trip 190-240 us instead of 75-80 us (2026-12-02), an artifact of the VM
#                     rather than of either system. What was used goes into machine.txt and
#                     the report.
# Relative paths are taken from the current directory; the defaults are in the repository.
#
# A run needs root (tools/testbed.sh builds network namespaces) and refuses otherwise. It first
# installs the Debian packages it is missing, gnuplot-nox among them (tools/lib/setup.sh, as
# tools/quickstart.sh does; HOMARPC_SKIP_SETUP=1 skips that), then builds homarpc-bench
# optimized in the build folder (RelWithDebInfo, g++, no sanitizers, no tests, like
# quickstart). Each scenario then runs in a fresh 3-host testbed:
#   tools/testbed.sh run --hosts=3 --rate=R --buffer=Q --priorities=8 -- \
#       BUILD/tools/homarpc-bench --testbed --scenario=S ... --data_dir=DIR/benchmarks \
#       --json_out=DIR/benchmarks/<run>.jsonl
# where Q, the queue limit in bytes, is 2 ms of the link rate R, at least 128 KiB (queue_bytes).
# `mixed` runs both of its variants (separate channels, and one shared channel), twice: on the
# priority ports (run `mixed`) and on one FIFO per port, --priorities=1, the issue's plain-tbf
# testbed (run `mixed-fifo`, data files in DIR/benchmarks/mixed-fifo/), then once more with
# 256 KiB bulk messages, 8 in flight (run `mixed-256k`); `workload` runs once per workload,
# each at its own link rate (the table `workload_rate` below), and W3 once more at 10% load
# (run `workload-w3-low`): those two explain missed targets (section "What limits"); `cpu`
# runs four times: both systems with their defaults (run `cpu`), then homarpc alone without
# busy-polling, --spin_us=0 (run `cpu-nopoll`), and with its sync handlers on the loop thread,
# --executor=inline (run `cpu-inline`), then both systems with callback servers,
# --server_api=callback (run `cpu-callback`).
#
# What it writes, in DIR/benchmarks/:
#   <run>.md, <run>.log, <run>.info   per run (unloaded, mixed, mixed-fifo, workload-w3, ...,
#                                     cpu, cpu-nopoll, cpu-inline, cpu-callback): the Markdown tables homarpc-bench printed,
#                                     its stderr, and how it ran (command, mode, link rate,
#                                     queue limit, exit status, date)
#   <run>.jsonl                       the run's JSON lines (homarpc-bench --json_out): the
#                                     report's targets are computed from them
#   machine.txt                       when, on what machine, from which commit and build
#   *.dat, *.cdf                      homarpc-bench's data files (tools/bench/load_scenarios.h)
#   *.png                             the plots (tools/bench/plots/plot.sh)
# and DIR/benchmarks.md: the machine, the commands to reproduce, the testbed, the issue's
# targets against the measured values, every run's tables and the plots. A run of every
# scenario first removes an earlier run's files there; one with --scenarios replaces only the
# files of the runs it makes, and the report lists it as redone (each run shows its own date
# and mode).
#
# Exit status: 0 when every run and plot succeeded; 1 when one failed (the report is still
# written and says which) or on a set-up error; 2 on bad usage; 130 (SIGINT) or 143 (SIGTERM)
# when interrupted: the running testbed and everything in it is stopped at once, and the
# testbed torn down.
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
# datacenter switch's: 8 strict-priority queues chosen by DSCP, each with a shallow buffer that
# scales with the link rate: 2 ms of the rate, at least 128 KiB: two of the 64 KiB GSO packets
# TCP hands the shaper. A queue smaller than one such packet drops every one of them (measured:
# with a 64 KiB queue at 150 Mbit/s, gRPC completed under 1% of W3's offered load). A fixed
# 256 KB queue (tools/testbed.sh's default) would hold 2 ms at
# 1 Gbit/s but 14 ms at 150 Mbit/s and 210 ms at 10 Mbit/s, inflating TCP's tails by the queue
# alone. The limit is passed to tools/testbed.sh in bytes.
hosts=3
queue_ms=2
queue_min_bytes=131072
priorities=8
default_rate=1gbit
# Link rate per workload. The offered load is a fraction of the link rate in request bytes, so
# a workload of small messages needs many calls per second to fill a link: at 1 Gbit/s and 80%
# load, W1 (mean request 189 B) would be 530k calls/s, W3 (2.9 KB) 34k/s. Two cores cannot
# start and serve that many gRPC calls, and the CPUs, not the link, would be measured. So each
# workload runs at the rate where 80% load is about 5000 calls/s (the `cpu` scenario's default
# rate; the two cores run the server and both client hosts), capped at the 1 Gbit/s default:
#   rate_mbps ~ 5000 * mean_bytes * 8 / 0.8 / 1e6, rounded     queue (queue_bytes)
#   W1 mean 189 B     ->   9.5 -> 10 Mbit/s   (80%: 5300 calls/s)   131072 B = 105 ms
#   W2 mean 442 B     ->  22   -> 20 Mbit/s   (80%: 4500 calls/s)   131072 B = 52 ms
#   W3 mean 2.9 KB    -> 146   -> 150 Mbit/s  (80%: 5100 calls/s)   131072 B = 7 ms
#   W4 mean 128 KB    -> 6390  -> 1 Gbit/s    (80%: 780 calls/s)    250000 B = 2 ms
#   W5 mean 2.6 MB    ->         1 Gbit/s     (80%: 39 calls/s)     250000 B = 2 ms
# (means from tools/bench/workloads/w*.cdf). At the low rates the 128 KiB floor is more than
# 2 ms; the report shows each run's queue in bytes and in ms.
declare -A workload_rate=([w1]=10mbit [w2]=20mbit [w3]=150mbit [w4]=1gbit [w5]=1gbit)
# Measuring time per point, in ms. `unloaded` has ~10 sizes x 2 systems; `mixed` 2 variants x 2
# systems; `workload` 2 loads x 2 systems per workload (plus its unloaded calibration); `cpu` 2
# systems, then homarpc alone without busy-polling and with inline handlers (runs cpu-nopoll,
# cpu-inline), then both systems' callback servers (run cpu-callback), the same time each. W5 gets
# longer in a full run: at 39 calls/s, 30 s would leave ~100 calls per bucket.
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
cpu_latency=hold

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
    --cpu-latency=hold | --cpu-latency=as-is) cpu_latency="${1#*=}" ;;
    --cpu-latency=*) usage_error "--cpu-latency is hold or as-is, not '${1#*=}'" ;;
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

# The files the runs of one scenario (or one workload run) write into $data, as globs (the
# data files per load_scenarios.h).
run_files() {
  case "$1" in
    unloaded) echo "unloaded.* unloaded-*.dat" ;;
    mixed) echo "mixed.* mixed-*.cdf mixed-fifo.* mixed-fifo mixed-256k.* mixed-256k" ;;
    workload-w3) echo "$1.* $1-*.dat $1-low.* $1-low" ;;
    workload-*) echo "$1.* $1-*.dat" ;;
    cpu) echo "cpu.* cpu-nopoll.* cpu-inline.* cpu-callback.*" ;;
  esac
}

# rate_bps RATE: a tc rate (1gbit, 150mbit, 12mbps, ...) in bits per second; "" if not one.
rate_bps() {
  awk -v r="$1" 'BEGIN {
    if (!match(r, /^[0-9]+(\.[0-9]+)?/)) exit
    v = substr(r, 1, RLENGTH); u = substr(r, RLENGTH + 1)
    m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9; m["tbit"] = 1e12
    m["bps"] = 8; m["kbps"] = 8e3; m["mbps"] = 8e6; m["gbps"] = 8e9; m["tbps"] = 8e12
    if (u in m) printf "%.0f", v * m[u] }'
}
# queue_bytes RATE: the queue limit of a link at RATE, in bytes: $queue_ms of the rate, at
# least $queue_min_bytes.
queue_bytes() {
  local bps
  bps="$(rate_bps "$1")"
  [[ -n "$bps" ]] || die "cannot read the link rate '$1'"
  awk -v b="$bps" -v ms="$queue_ms" -v min="$queue_min_bytes" 'BEGIN {
    q = int(b * ms / 1000 / 8 + 0.5); if (q < min) q = min; printf "%d", q }'
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
  echo "invocation=$invocation"
  echo "cpu_latency=$cpu_latency_state"
  echo "cpuidle=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)$(
    [[ -r /sys/module/haltpoll/parameters/guest_halt_poll_ns ]] &&
      echo ", guest_halt_poll_ns=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns)")"
}

# hold_cpu_latency: with --cpu-latency=hold, opens /dev/cpu_dma_latency and writes 0 (as a
# binary s32, which the kernel takes when exactly 4 bytes come); the request lasts while any
# process holds the file open: this script and the children that inherit the descriptor, so
# it ends with the run (a child left running after a SIGKILL would keep it). Sets
# cpu_latency_state for machine.txt and each run's .info.
cpu_latency_state="as-is (--cpu-latency=as-is)"
hold_cpu_latency() {
  [[ "$cpu_latency" == hold ]] || return 0
  # The braces keep the 2>/dev/null to the exec: on a bare `exec` it would stay for the script.
  if { exec {cpu_latency_fd}>/dev/cpu_dma_latency; } 2>/dev/null &&
    printf '\0\0\0\0' >&"$cpu_latency_fd" 2>/dev/null; then
    cpu_latency_state="held at 0 us (/dev/cpu_dma_latency) for the whole run"
    log "holding a CPU wake-up latency of 0 us (/dev/cpu_dma_latency) for the run"
  else
    [[ -z "${cpu_latency_fd:-}" ]] || exec {cpu_latency_fd}>&-
    cpu_latency_state="as-is: /dev/cpu_dma_latency could not be held"
    log "could not hold /dev/cpu_dma_latency: measuring the machine as it is"
  fi
}

failures=()
child=""     # the running tools/testbed.sh, leader of its own process group, during a run
follower=""  # the tail that shows that run's messages
# run_bench ID RATE DURATION_MS BENCH_ARGS...: one testbed run; its Markdown, stderr, JSON lines
# and description go to $data/ID.{md,log,jsonl,info}.
run_bench() {
  local id="$1" rate="$2" ms="$3"
  shift 3
  local buffer mode
  buffer="$(queue_bytes "$rate")"
  mode="$( ((quick)) && echo quick || echo full)"
  # RUN_PRIORITIES overrides --priorities for one run; RUN_DATA_DIR keeps its data files apart.
  local prios="${RUN_PRIORITIES:-$priorities}" dir="${RUN_DATA_DIR:-$data}"
  mkdir -p "$dir"
  local args=(--testbed "$@" --duration_ms="$ms" --data_dir="$dir" --json_out="$data/$id.jsonl")
  local shown_args=(--testbed "$@" --duration_ms="$ms" --data_dir="$(shown "$dir")"
                    --json_out="$(shown "$data/$id.jsonl")")
  local command
  command="tools/testbed.sh run --hosts=$hosts --rate=$rate --buffer=$buffer --priorities=$prios -- $(shown "$bench") ${shown_args[*]}"
  local started rc=0
  started="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  log "$id: $command"
  rm -f "$data/$id.jsonl"  # --json_out appends
  : >"$data/$id.log"
  # In a session and process group of its own, so that an interrupt ends the testbed,
  # homarpc-bench and its children at once (on_signal); `wait` returns as soon as a trapped
  # signal arrives. (A background job of this non-interactive shell is not a group leader, so
  # setsid execs in place: $! is the new group's id.)
  setsid "$here/testbed.sh" run --hosts="$hosts" --rate="$rate" --buffer="$buffer" \
    --priorities="$prios" -- \
    "$bench" "${args[@]}" >"$data/$id.md" 2>"$data/$id.log" &
  child=$!
  tail -n +1 -f --pid="$child" "$data/$id.log" >&2 &
  follower=$!
  wait "$child" || rc=$?
  child=""
  wait "$follower" 2>/dev/null || true  # it ends within a second of the run
  follower=""
  {
    echo "date=$started"
    echo "mode=$mode"
    echo "rate=$rate"
    echo "buffer=$buffer"
    echo "priorities=$prios"
    echo "hosts=$hosts"
    echo "duration_ms=$ms"
    echo "cpu_latency=$cpu_latency_state"
    echo "rc=$rc"
    echo "command=$command"
  } >"$data/$id.info"
  if ((rc != 0)); then
    log "$id: exit status $rc (see $(shown "$data/$id.log"))"
    failures+=("$id")
  fi
}

# running PID: "yes" while PID runs (an exited child not yet waited for is a zombie: no).
running() {
  local state
  state="$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)"
  [[ -n "$state" && "$state" != Z ]] && echo yes
  return 0
}

# on_signal STATUS: the INT and TERM trap. Stops a running testbed and what runs in it at once
# (its whole process group), waits for tools/testbed.sh to tear the testbed down (at most
# 10 s, then kills the group: `tools/testbed.sh down` or its next run removes what is left),
# and exits with STATUS.
on_signal() {
  trap '' INT TERM
  log "interrupted"
  if [[ -n "$child" ]]; then
    kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null || true
    local i=0
    while [[ -n "$(running "$child")" ]] && ((i++ < 100)); do sleep 0.1; done
    if [[ -n "$(running "$child")" ]]; then
      log "the testbed did not stop within 10 s: killing it (tools/testbed.sh down removes what it leaves)"
      kill -KILL -- "-$child" 2>/dev/null || kill -KILL "$child" 2>/dev/null || true
    fi
    wait "$child" 2>/dev/null || true
  fi
  [[ -z "$follower" ]] || kill "$follower" 2>/dev/null || true
  exit "$1"
}

run_all() {
  [[ "$(id -u)" == 0 ]] ||
    die "needs root (tools/testbed.sh builds network namespaces); run as root, or use --report-only or --plots-only DIR, which run nothing"
  # shellcheck source=tools/lib/setup.sh disable=SC1091
  source "$here/lib/setup.sh"
  homarpc_setup
  command -v setsid >/dev/null || die "needs setsid (util-linux)"
  hold_cpu_latency
  cd "$root"
  if ((!no_build)); then
    homarpc_configure_release "$build"
    log "building homarpc-bench in $(shown "$build")"
    cmake --build "$build" --target homarpc-bench
  fi
  [[ -x "$bench" ]] || die "$bench not found (build it, or drop --no-build)"
  # The load scenarios' flags exist only in a homarpc-bench new enough to run them.
  local flags
  flags="$("$bench" --helpfull 2>&1 || true)"
  grep -q -- '-data_dir' <<<"$flags" ||
    die "$bench has no load scenarios (no --data_dir flag): rebuild it (drop --no-build)"
  grep -q -- '-json_out' <<<"$flags" ||
    die "$bench has no --json_out flag, which the report's targets are computed from: rebuild it (drop --no-build)"

  # What machine.txt says, taken before this run removes the earlier run's files (which git
  # would otherwise count as uncommitted changes of the commit being measured).
  local machine_text
  machine_text="$(machine_info)"
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
            rm -rf $(run_files "workload-$w")
          done
        else
          # shellcheck disable=SC2046
          rm -rf $(run_files "$s")
        fi
      done
    else
      rm -f ./*.md ./*.log ./*.info ./*.dat ./*.cdf ./*.png ./*.jsonl machine.txt
      rm -rf mixed-fifo mixed-256k workload-w3-low  # runs' own data folders
    fi
  )
  if ((partial)) && [[ -f "$data/machine.txt" ]]; then
    # The report stays the earlier run's, with these runs redone: say so (each run's .info
    # holds its own date and mode).
    echo "rerun=$(date -u '+%Y-%m-%d %H:%M:%S UTC') (commit $(sed -n 's/^commit=//p' <<<"$machine_text")): $invocation" \
      >>"$data/machine.txt"
  else
    echo "$machine_text" >"$data/machine.txt"
  fi

  local s w ms
  for s in "${scenarios[@]}"; do
    if ((quick)); then ms="${quick_ms[$s]}"; else ms="${full_ms[$s]}"; fi
    case "$s" in
      unloaded) run_bench unloaded "$default_rate" "$ms" --scenario=unloaded ;;
      mixed)
        run_bench mixed "$default_rate" "$ms" --scenario=mixed
        # The issue's literal testbed: one FIFO (plain tbf) per port, no priority queues.
        RUN_PRIORITIES=1 RUN_DATA_DIR="$data/mixed-fifo" \
          run_bench mixed-fifo "$default_rate" "$ms" --scenario=mixed
        # What the multi-megabyte messages cost (section "What limits the missed targets"):
        # the same link load in 256 KiB bulk messages, 8 in flight.
        RUN_DATA_DIR="$data/mixed-256k" run_bench mixed-256k "$default_rate" "$ms" \
          --scenario=mixed --bulk_bytes=256K --bulk_in_flight=8
        ;;
      workload)
        for w in "${workloads[@]}"; do
          local wms="$ms"
          ((quick)) || wms="${full_workload_ms[$w]:-$ms}"
          run_bench "workload-$w" "${workload_rate[$w]}" "$wms" --scenario=workload \
            --workloads="$w" --loads=0.5,0.8
          # The tail that is there without load (section "What limits the missed targets").
          if [[ "$w" == w3 ]]; then
            RUN_DATA_DIR="$data/workload-w3-low" run_bench workload-w3-low "${workload_rate[w3]}" \
              "$wms" --scenario=workload --workloads=w3 --loads=0.1
          fi
        done
        ;;
      cpu)
        run_bench cpu "$default_rate" "$ms" --scenario=cpu
        run_bench cpu-nopoll "$default_rate" "$ms" --scenario=cpu --systems=homarpc --spin_us=0
        run_bench cpu-inline "$default_rate" "$ms" --scenario=cpu --systems=homarpc \
          --executor=inline
        run_bench cpu-callback "$default_rate" "$ms" --scenario=cpu --server_api=callback
        ;;
    esac
  done
}

# ---- The report ----

# info FILE KEY: the value of KEY in a key=value file ("" when absent).
info() {
  [[ -f "$1" ]] || return 0
  awk -v k="$2" 'index($0, k "=") == 1 { print substr($0, length(k) + 2); exit }' "$1"
}

# jv FILE FIELD [KEY=VALUE...]: FIELD's value in the last JSON line of FILE whose KEYs have
# these values ("" when there is none, or the field is absent or null). Paths as in
# tools/bench/plots/jsonl.awk: `label`, `buckets[0].p99_slowdown`.
jv() {
  [[ -f "$1" ]] || return 0
  local file="$1" field="$2" where
  shift 2
  where="$(IFS=$'\t'; echo "$*")"
  awk -v want="$field" -v where="$where" -f "$here/bench/plots/jsonl.awk" "$file"
}

# Numbers for the report: 3 significant digits, no exponent.
num() { awk -v v="$1" 'BEGIN {
  a = v < 0 ? -v : v
  if (a >= 100) printf "%.0f", v; else if (a >= 10) printf "%.1f", v; else printf "%.2f", v }'; }
# cell VALUE [UNIT]: a table cell, "?" when VALUE is missing; xcell RATIO: "RATIOx" or "?".
cell() { if [[ -n "$1" ]]; then echo "$(num "$1")${2:+ $2}"; else echo "?"; fi; }
xcell() { if [[ -n "$1" ]]; then echo "${1}x"; else echo "?"; fi; }
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
# ratio_row LABEL HOMARPC GRPC UNIT OP LIMIT: a targets row judged on homarpc / gRPC.
ratio_row() {
  local r
  r="$(ratio "$2" "$3")"
  echo "| $1 | $(cell "$2" "$4") | $(cell "$3" "$4") | $(xcell "$r") | $5 ${6}x | $(verdict "$r" "$5" "$6") |"
}
# queue_cell INFO_FILE: the run's queue limit in bytes and in ms of its link rate.
queue_cell() {
  local buffer rate bytes bps
  buffer="$(info "$1" buffer)"
  rate="$(info "$1" rate)"
  bytes="$(awk -v s="$buffer" 'BEGIN {  # a tc size: bytes, or b/kb/mb/gb (binary)
    if (!match(s, /^[0-9]+/)) exit
    v = substr(s, 1, RLENGTH); u = substr(s, RLENGTH + 1)
    f["b"] = 1; f["kb"] = 1024; f["mb"] = 1048576; f["gb"] = 1073741824
    if (u == "") printf "%d", v; else if (u in f) printf "%d", v * f[u] }')"
  bps="$(rate_bps "$rate")"
  if [[ -n "$bytes" && -n "$bps" ]]; then
    echo "$bytes B ($(num "$(awk -v q="$bytes" -v b="$bps" 'BEGIN { print q * 8 / b * 1000 }')") ms)"
  else
    echo "${buffer:-?}"
  fi
}

# steal_cell JSONL: the hypervisor's steal during the run's points (homarpc-bench's steal_pct:
# the share of time the machine's CPUs were ready but not run while a point measured), per
# system: mean over its points and the largest; "?" without a file or without the field.
steal_cell() {
  [[ -f "$1" ]] || { echo "?"; return; }
  awk '
    match($0, /"system":"[^"]*"/) {
      sys = substr($0, RSTART + 10, RLENGTH - 11)
      if (!match($0, /"steal_pct":[0-9.]+/)) next
      v = substr($0, RSTART + 12, RLENGTH - 12) + 0
      if (!(sys in n)) order[++k] = sys
      n[sys]++; sum[sys] += v; if (v > max[sys]) max[sys] = v
    }
    END {
      if (k == 0) { print "?"; exit }
      for (i = 1; i <= k; i++) {
        s = order[i]
        printf "%s%s %.1f%% (max %.1f%%)", (i > 1 ? ", " : ""), s, sum[s] / n[s], max[s]
      }
      print ""
    }' "$1"
}

# The mixed rows, per variant: the small calls' p99 (the JSON lines; the CDF files without
# them) and the bulk goodput (the JSON lines only).
targets_mixed_rows() {  # variant label [run]
  local j="$data/${3:-mixed}.jsonl" h g hb gb
  [[ -f "$j" || -z "${3:-}" ]] || return 0
  h="$(jv "$j" small_p99_us scenario=mixed "label=$1" system=homarpc)"
  g="$(jv "$j" small_p99_us scenario=mixed "label=$1" system=grpc)"
  local cdfs="$data${3:+/$3}"
  [[ -n "$h" ]] || h="$(cdf_at "$cdfs/$1-homarpc.cdf" 0.99)"
  [[ -n "$g" ]] || g="$(cdf_at "$cdfs/$1-grpc.cdf" 0.99)"
  hb="$(jv "$j" bulk_goodput_gbps scenario=mixed "label=$1" system=homarpc)"
  gb="$(jv "$j" bulk_goodput_gbps scenario=mixed "label=$1" system=grpc)"
  ratio_row "\`mixed\`, $2: p99 of the 64 B calls" "$h" "$g" us "<=" 0.1
  ratio_row "\`mixed\`, $2: bulk goodput" "$hb" "$gb" Gbit/s ">=" 0.8
}

# shortest_json FILE SYSTEM LABEL: "upper p99 p99_own" of the shortest size bucket in the
# system's JSON line for LABEL (the p99s "-" when the bucket had no calls); "" without a line.
shortest_json() {
  local upper calls p99 own
  upper="$(jv "$1" 'buckets[0].upper_bytes' scenario=workload point=load "system=$2" "label=$3")"
  [[ -n "$upper" ]] || return 0
  calls="$(jv "$1" 'buckets[0].calls' scenario=workload point=load "system=$2" "label=$3")"
  p99="$(jv "$1" 'buckets[0].p99_slowdown' scenario=workload point=load "system=$2" "label=$3")"
  own="$(jv "$1" 'buckets[0].p99_slowdown_own' scenario=workload point=load "system=$2" "label=$3")"
  if [[ "${calls:-0}" == 0 ]]; then p99="" own=""; fi
  echo "$upper ${p99:--} ${own:--}"
}

# The rows of one workload at one load, judged with both references: (a) the common one, both
# systems divided by homarpc's unloaded latency (the JSON lines' p99_slowdown; the .dat files
# without them), (b) each system's own unloaded latency (p99_slowdown_own; JSON lines only).
targets_workload_rows() {  # w load(50|80)
  local w="$1" load="$2" j="$data/workload-$1.jsonl" rate upper label ref
  local hu h ho gu g go x
  rate="$(info "$data/workload-$w.info" rate)"
  read -r hu h ho <<<"$(shortest_json "$j" homarpc "$w $load%")"
  read -r gu g go <<<"$(shortest_json "$j" grpc "$w $load%")"
  if [[ -z "$hu" ]]; then  # no JSON line: the common-reference value from the data file
    read -r hu h <<<"$(shortest_bucket "$data/workload-$w-$load-homarpc.dat")"
  fi
  if [[ -z "$gu" ]]; then
    read -r gu g <<<"$(shortest_bucket "$data/workload-$w-$load-grpc.dat")"
  fi
  for x in h ho g go; do [[ "${!x}" != - ]] || printf -v "$x" '%s' ""; done
  upper="${hu:-$gu}"
  ref="$(jv "$j" reference scenario=workload point=load "label=$w $load%")"
  label="\`workload\` ${w^^} at $load% of ${rate:-?}: p99 slowdown, sizes <= ${upper:-?} B"
  if [[ "$load" == 80 ]]; then  # relative to gRPC
    ratio_row "$label, (a) common reference (÷ ${ref:-homarpc}'s unloaded latency)" "$h" "$g" "" "<=" 0.2
    ratio_row "$label, (b) own reference (÷ each system's unloaded latency)" "$ho" "$go" "" "<=" 0.2
  else  # absolute
    echo "| $label, (a) common reference (÷ ${ref:-homarpc}'s unloaded latency) | $(cell "$h") | $(cell "$g") | $(cell "$h") | <= 5 | $(verdict "$h" "<=" 5) |"
    echo "| $label, (b) own reference (÷ each system's unloaded latency) | $(cell "$ho") | $(cell "$go") | $(cell "$ho") | <= 5 | $(verdict "$ho" "<=" 5) |"
  fi
}

# What a reader must know to weigh these numbers: the testbed's own artifacts, each measured
# or read off the setup, and where the long tails come from.
caveats_section() {
  cat <<'EOF2'
## Reading these numbers

- **Idle CPUs, wake-ups and steal.** This machine is a VM whose idle CPUs halt (cpuidle
  haltpoll with its polling off): a thread woken on an idle CPU then waits for the hypervisor
  to resume that virtual CPU, which the kernel counts as steal. Both systems wake threads, gRPC
  far more often, so a full run holds a CPU wake-up latency request of 0 us
  (`/dev/cpu_dma_latency`, `--cpu-latency=hold`, the "CPU idle" row above): idle CPUs then
  poll, and a wake-up costs what it costs on a host whose cores do not sleep. Measured both
  ways on 2026-12-02 (loopback, `--scenario=unary`, 64 B): gRPC 193-236 us p50 with the CPUs
  as they are, 77 us with the request held; homarpc, which busy-polls, 16-20 us either way.
  The runs table's steal column shows what the hypervisor still withheld.
- **All hosts share two cores.** The server and every client host are processes on one 2-CPU
  machine, so a host's work competes with the others' for a core, which real hosts do not.
  homarpc busy-polls (its loops spin briefly when work is expected), and the bulk copies of
  multi-megabyte messages (serializing, parsing, page faults) run for milliseconds; a small
  call's thread that wakes then may wait for a core. The slow small calls of `mixed` and
  `workload` cluster at the moments multi-megabyte messages start or finish, and complete
  together when the burst ends (measured with per-call start times and `perf sched`); they,
  not queueing in the network, set homarpc's p99 here: in `mixed`, sampled with `tc -s`, the
  switch queues held at most a packet of homarpc's and dropped nothing.
- **The unloaded reference is a software round trip.** The shapers let an idle link pass a
  burst (64 KB) at once, so a lone small request crosses the testbed without serialization
  delay: homarpc's unloaded 64 B round trip (the `unloaded` table: 11-90 us on the VMs this
  has run on) is all software. Slowdown 5 then means a p99 of five such round trips under load
  on two shared cores, where one wait for a core held by another host's loop can alone take
  longer (section "What limits the missed targets").
- **The burst flatters TCP at mid sizes.** The same 64 KB burst lets TCP hand over a 16-64 KiB
  message at once on an idle link, while homarpc paces itself to the link rate (keeping the
  switch queue short is what its pacer is for); so gRPC's unloaded latency at those sizes is
  below the wire time, and homarpc's is not.
- **Queues per priority.** Each of the 8 priority queues of a port holds up to the queue limit;
  gRPC's TCP uses one of them, homarpc several. Homa's short messages ride the top queues,
  which stay nearly empty. The run `mixed-fifo` repeats `mixed` on one FIFO per port (plain
  tbf, the issue's testbed as written): there gRPC's small calls queue behind its bulk data in
  the same FIFO (and TCP recovers its drops), while homarpc's receiver keeps that queue short.
- **Load counts request payload, and homarpc's per-call overhead is larger.** Each homarpc
  request carries ~180 bytes besides its payload (a 56-byte Homa DATA header, the envelope with
  the full method name, UDP/IP/Ethernet), where HTTP/2 indexes the method with HPACK and TCP
  packs several small calls into one segment. W1's requests average 189 bytes, so "50% load"
  is about 100% of the link on the wire for homarpc (W2 at 80%: ~110%): homarpc's W1 runs and
  W2 at 80% are overloaded and collapse (most calls time out), while gRPC's are not. A method
  id instead of the benchmark's 29-byte method name would save ~25 of those bytes: not
  enough to leave overload. What the transport can do there is not feed it: a request still
  queued behind the overload drew an RPC_UNKNOWN and a fresh copy at every probe; since
  session 14 a client backs off its probes after each restart (proto/PROTOCOL.md, section
  10). W1 at 50%, homarpc alone, 10 s points, 3 A/B pairs (the tables here predate it):
  9.3-10.3% of the link delivered -> 18.6-19.6%, failed calls 13.2-13.4 k -> 6.1-6.5 k; W2 at
  80%, 2 pairs: 7.2-10.5% -> 26.9-28.8%, failed calls 22.9-24.7 k -> 7.1-10.8 k.
- **CPU time per RPC includes the network.** Sending through the testbed's veth, bridge and
  shapers is kernel work charged to the sending process, for both systems, and so is waking
  the receiving thread (an inter-processor interrupt in this VM).
- **homarpc's default sync server hands each call to a worker.** Its loop thread receives the
  request and wakes a pool worker to run the handler (a futex wake, ~10 us of the server's CPU
  per call here); gRPC's sync server runs the handler on the thread that polled the socket.
  The run `cpu-inline` measures homarpc without that hand-off (`--executor=inline`, for
  handlers that never block). A caller (or a server worker) that finds the transport's loop
  asleep sends a one-packet request (or response) itself instead of waking the loop to send it
  ("direct sends", on by default; `--direct_send=0` turns them off): in an A/B run of `cpu`
  that took ~20% off homarpc's CPU per call. The run `cpu-callback` gives both systems
  callback servers, whose handlers run on the thread that received the call (gRPC's callback
  threads, homarpc's loop): gRPC's server is not cheaper that way.
- **One run is a sample.** Single 5 s runs of `cpu` made minutes apart on 2026-12-03 gave
  homarpc ÷ gRPC 0.60-0.69x with sync servers and 0.59-0.77x with callback servers (homarpc's
  client 71-103 us per call).

EOF2
}

targets_section() {
  cat <<'EOF'
## Targets

<!-- Generated by tools/bench-report.sh from the runs' files in benchmarks/. -->
Issue 4's targets (same testbed, same offered load, one run) against this run. The values come
from each run's JSON lines (`benchmarks/<run>.jsonl`, homarpc-bench's `--json_out`): the small
calls' p99 and the bulk goodput of `mixed`, the shortest size bucket of `workload`, the CPU time
per RPC of `cpu`. Where a run has no JSON lines, the small calls' p99 falls back to the `mixed`
CDF files (nearest rank) and the common-reference slowdown to the `workload` data files. `?`
means the value is missing (the run failed or was not made).

Slowdown is a call's latency divided by an unloaded latency at the same request size, and
depends on whose unloaded latency:

- **(a) common reference**: both systems divided by homarpc's unloaded latency (the faster
  system's), so the two columns compare latencies directly. The `workload` tables' p50 and p99
  columns, the data files and the slowdown plots use it.
- **(b) own reference**: each system divided by its own unloaded latency, the Homa papers'
  definition (the `workload` tables' "own" column for gRPC; for homarpc it is (a)).

The `workload` targets are judged both ways.

| target | homarpc | gRPC | measured | goal | met |
|---|---|---|---|---|---|
EOF
  targets_mixed_rows mixed "separate channels"
  targets_mixed_rows mixed-shared "bulk on the same channel"
  targets_mixed_rows mixed "separate channels, one FIFO per port (run \`mixed-fifo\`)" mixed-fifo
  targets_mixed_rows mixed-shared "bulk on the same channel, one FIFO per port (run \`mixed-fifo\`)" mixed-fifo
  local w
  for w in w3 w4; do
    targets_workload_rows "$w" 80
    targets_workload_rows "$w" 50
  done
  local h g n
  h="$(jv "$data/cpu.jsonl" total_us_per_rpc scenario=cpu system=homarpc)"
  g="$(jv "$data/cpu.jsonl" total_us_per_rpc scenario=cpu system=grpc)"
  n="$(jv "$data/cpu-nopoll.jsonl" total_us_per_rpc scenario=cpu system=homarpc)"
  ratio_row "\`cpu\`: CPU time per 64 B RPC (client + server), homarpc with its default busy-polling" \
    "$h" "$g" us "<=" 0.5
  ratio_row "\`cpu\`: CPU time per 64 B RPC (client + server), homarpc without busy-polling (\`--spin_us=0\`, run \`cpu-nopoll\`; gRPC from run \`cpu\`)" \
    "$n" "$g" us "<=" 0.5
  if [[ -f "$data/cpu-inline.jsonl" ]]; then
    n="$(jv "$data/cpu-inline.jsonl" total_us_per_rpc scenario=cpu system=homarpc)"
    ratio_row "\`cpu\`: CPU time per 64 B RPC (client + server), homarpc's sync handlers on the loop thread (\`--executor=inline\`, run \`cpu-inline\`; gRPC from run \`cpu\`)" \
      "$n" "$g" us "<=" 0.5
  fi
  if [[ -f "$data/cpu-callback.jsonl" ]]; then
    ratio_row "\`cpu\`: CPU time per 64 B RPC (client + server), both systems' callback servers (\`--server_api=callback\`, run \`cpu-callback\`)" \
      "$(jv "$data/cpu-callback.jsonl" total_us_per_rpc scenario=cpu system=homarpc)" \
      "$(jv "$data/cpu-callback.jsonl" total_us_per_rpc scenario=cpu system=grpc)" us "<=" 0.5
  fi
  echo
}

# Two runs that show what holds the targets missed on this machine: the small calls' p99
# behind bulk fetches of 256 KiB rather than 8 MiB (run mixed-256k), and W3's tail at 10% load
# (run workload-w3-low).
limits_section() {
  [[ -f "$data/mixed-256k.jsonl" || -f "$data/workload-w3-low.jsonl" ]] || return 0
  cat <<'EOF2'
## What limits the missed targets

Two runs made only to explain the rows above that miss their goal, judged by the same goals:

- **`mixed-256k`**: `mixed` with the bulk stream in 256 KiB messages, 8 in flight, instead of
  8 MiB, 2 in flight: the same link load, the same small calls. If the small calls' p99 meets
  its goal here, what holds it in `mixed` grows with the size of a message, not with the load
  on the link: the multi-millisecond copies of an 8 MiB message (the server's handler
  serializing it, the client parsing it, the receive path assembling it), and the kernel's
  per-packet work of sending through veth, bridge and shapers, which on this machine runs on
  the same two cores as every host's loops. (Measured on 2026-12-02, not by this script: in
  `mixed` the server's loop thread used ~85% of a core at 0.86 Gbit/s, the bulk client's loop
  ~75%, and woken threads waited up to 4 ms for a core, `perf sched latency`.) A real host
  has its own cores. Half of the run's page faults used to come from one place, the server's
  handler copying the 8 MiB payload into a fresh response (`set_payload`), which glibc maps
  afresh each call and unmaps again; homarpc now recycles large response objects per method
  (`runtime/message_pool.h`), which cut page faults by two thirds and the small calls' p99
  from 7-24 ms to 1.1-1.7 ms (2026-12-02, `perf stat -e page-faults`, homarpc alone, A/B with
  the build before). What is left was traced with `perf sched` (homarpc's threads are named
  `hrpc-loop<N>`, `hrpc-worker`) and each slow small call matched to it by time
  (2026-12-02, homarpc alone, not by this script):
  - The slow calls bunch around the bulk calls' completions: in the 4 ms around one, the small
    calls' median is 310-450 us, elsewhere 140 us. There the server's worker copies the next
    8 MiB response (0.7-1.7 ms of CPU in one stretch) and the bulk client parses the last.
  - In a slow call a thread of the small call's path (the small client's loop, the server's
    worker, the open-loop sender) is runnable but waits 0.3-2 ms in the run queue of a core
    busy with another host's thread (the server's or bulk client's loop, the copying worker)
    or with softirq work of the emulated links (shaper timers forwarding packets through the
    bridge), while the other core is sometimes idle: Linux neither preempted (the waiting
    thread's 100 us slice gives no wake-up preemption over another short-slice thread, and
    with 250 Hz ticks and no kernel preemption a running thread keeps the core up to 4 ms)
    nor moved it. On hosts with their own cores these threads would not share one.
  - It is not busy-polling: with `--spin_us=0` the loops stop spinning and a quarter of the
    machine is idle, and the p99 stays at 0.9-1.9 ms (A/Bs, 8 s each). Worker slices of
    100 us, 3 ms or the default changed nothing measurable either.
  - Since 794356a (2026-12-02) the pacer refills its NIC queue in bursts of about four packets
    (`pacer_refill_percent`, transport/config.h) instead of one packet per wake-up: the
    server's loop went from 95% to 68% of a core and the bulk client's from 79% to 67% at the
    same goodput (`--spin_us=0`, perf sched over 3 s). The small calls' p99 did not move
    (0.9-1.3 ms in A/Bs): the spare CPU is not where the waiting thread is queued.
  - Measured again on 2026-12-03 (homarpc alone, request held, each call's start time from
    `--calls_dir`): of the 64 B calls that started within 3 ms of a bulk call's completion
    (7% of them), 18% took over 400 us; of the others, 0.6%. Two suspects were ruled out.
    Page faults: the benchmark's handlers (both systems) now fill the 8 MiB response with
    `mutable_payload()->assign()`, since protobuf 3.21's `set_payload(data, size)` first
    built a temporary copy; the run's page faults fell from 0.52-0.66 M to 0.34-0.38 M and
    homarpc's p99 stayed where it was (gRPC's fell with them, 4.3-5.8 -> 3.9-4.9 ms).
    The emulated network's per-packet cost: turning off the bridge's netfilter hooks
    (`bridge-nf-call-iptables=0` in the switch namespace) or turning on GRO at the hosts'
    veth ends moved neither system's p99 beyond the run-to-run spread (2 A/B pairs each).
- **`workload-w3-low`**: W3 at 10% load, where neither link nor CPU is busy. Slowdown divides
  by a closed-loop unloaded latency, whose threads never sleep; an open-loop call at a low
  rate finds them asleep and pays a wake-up at each hop. The p99 slowdown this run measures
  is the floor the 50% rows stand on. Measured 2026-12-02 (homarpc alone, request held, not
  by this script): open-loop 64 B calls on the idle testbed (`--scenario=cpu`, 1000/s and
  5000/s) took p50 84 and 71 us, p99 264 and 143 us, against a closed-loop 41-62 us: a p99
  slowdown of 3-6 with no load at all. Spinning longer makes it worse, not better: with
  `--spin_us=1000` three processes' loops compete for two cores, and W3 at 10% went from
  p50/p99 103-149/331-446 us to 132-158/675-805 us for the shortest bucket.
- **`cpu`** (its four runs above, no extra run): homarpc's CPU time per call moves less with
  its configuration than with the machine's state: 99.6-125 us across the configurations on
  2026-12-02/03, 103-105 us in all four on a later run, against gRPC's 175-210 us (sync
  server); the inline configuration met the goal in one full run (0.47x) and not the next
  (0.59x). Where it goes (2026-12-03, `perf record -a` over a 4 s homarpc `cpu` run, request
  held, shares of each thread's samples): the open-loop sender spends about half of its time
  in the kernel carrying each request across the emulated network (veth, bridge, the shapers'
  classifiers and queues, route lookups), and the server's loop about a third carrying the
  responses, kernel work per packet that gRPC's threads pay as well; the client's loop spends
  a quarter reading the clock while it spins for the response, and not spinning costs as
  much again in wake-ups (run `cpu-nopoll`). The part that is homarpc's own, user-space work
  per call (the envelope, protobuf, allocation), is the smaller share on both sides.

| target | homarpc | gRPC | measured | goal | met |
|---|---|---|---|---|---|
EOF2
  targets_mixed_rows mixed "separate channels, 256 KiB bulk messages (run \`mixed-256k\`)" mixed-256k
  targets_mixed_rows mixed-shared "bulk on the same channel, 256 KiB bulk messages (run \`mixed-256k\`)" mixed-256k
  local j="$data/workload-w3-low.jsonl" hu h ho gu g go rate
  if [[ -f "$j" ]]; then
    rate="$(info "$data/workload-w3-low.info" rate)"
    read -r hu h ho <<<"$(shortest_json "$j" homarpc "w3 10%")"
    read -r gu g go <<<"$(shortest_json "$j" grpc "w3 10%")"
    [[ "$h" != - ]] || h=""
    [[ "$g" != - ]] || g=""
    echo "| \`workload\` W3 at 10% of ${rate:-?} (run \`workload-w3-low\`): p99 slowdown, sizes <= ${hu:-${gu:-?}} B, (a) common reference | $(cell "$h") | $(cell "$g") | $(cell "$h") | <= 5 | $(verdict "$h" "<=" 5) |"
  fi
  echo
}

# The CPU time per RPC of both cpu runs side by side, from their JSON lines.
cpu_comparison() {
  local c="$data/cpu.jsonl" n="$data/cpu-nopoll.jsonl"
  [[ -f "$c" || -f "$n" ]] || return 0
  local g
  g="$(jv "$c" total_us_per_rpc scenario=cpu system=grpc)"
  echo "## \`cpu\`: homarpc with and without busy-polling, pool and inline handlers"
  echo
  echo "CPU time per 64 B RPC in µs (the measuring phase's CPU time over the calls completed in it),"
  echo "from the JSON lines of the runs \`cpu\`, \`cpu-nopoll\`, \`cpu-inline\` and \`cpu-callback\`. By default"
  echo "homarpc's waiting threads busy-poll (\`--spin_us\`) before they sleep, and that CPU time counts"
  echo "here; \`--spin_us=0\` always blocks. By default homarpc runs sync handlers on a worker pool (one"
  echo "thread hand-off per call, which gRPC's sync server, running handlers on its polling threads,"
  echo "does not pay); \`--executor=inline\` runs them on the loop thread, for handlers that never block."
  echo "\`--server_api=callback\` gives both systems callback servers (\`Echo::CallbackService\`), whose"
  echo "handlers run on the thread that received the call: gRPC's callback threads, homarpc's loop."
  echo "The last column divides by gRPC's total in run \`cpu\` (its sync server)."
  echo
  echo "| system | run | client | server | total | total ÷ gRPC's |"
  echo "|---|---|---:|---:|---:|---:|"
  local row file system name t r
  for row in "grpc cpu gRPC" "homarpc cpu homarpc, busy-polling (default)" \
    "homarpc cpu-nopoll homarpc, no busy-polling (--spin_us=0)" \
    "homarpc cpu-inline homarpc, handlers on the loop thread (--executor=inline)" \
    "grpc cpu-callback gRPC, callback server (--server_api=callback)" \
    "homarpc cpu-callback homarpc, callback server (--server_api=callback)"; do
    read -r system file name <<<"$row"
    [[ -f "$data/$file.jsonl" ]] || continue
    t="$(jv "$data/$file.jsonl" total_us_per_rpc scenario=cpu "system=$system")"
    r="$(ratio "$t" "$g")"
    echo "| $name | \`$file\` | $(cell "$(jv "$data/$file.jsonl" client_us_per_rpc scenario=cpu "system=$system")") | $(cell "$(jv "$data/$file.jsonl" server_us_per_rpc scenario=cpu "system=$system")") | $(cell "$t") | $(xcell "$r") |"
  done
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

all_runs=(unloaded mixed mixed-fifo mixed-256k workload-w1 workload-w2 workload-w3 workload-w3-low
  workload-w4 workload-w5 cpu cpu-nopoll cpu-inline cpu-callback)

run_section() {  # id title
  local id="$1" f="$data/$1.info" rc run_mode
  [[ -f "$f" ]] || return 0
  rc="$(info "$f" rc)"
  run_mode="$(info "$f" mode)"
  echo "## $2"
  echo
  echo "Run $(info "$f" date)${run_mode:+ ($run_mode mode)}, link rate $(info "$f" rate), queue $(queue_cell "$f") per priority, $(info "$f" duration_ms) ms per point:"
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
  local m="$data/machine.txt" tmp="$report.tmp" w load ref
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
  local cpuidle cpu_latency_used
  cpuidle="$(info "$m" cpuidle)"
  cpu_latency_used="$(info "$m" cpu_latency)"
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
| CPU idle | ${cpuidle:-not recorded}; wake-up latency request: ${cpu_latency_used:-not recorded} |
| load average before the runs (1, 5, 15 min) | $(info "$m" load_average) |
| system | $(info "$m" os), Linux $(info "$m" kernel) |
| commit | $(info "$m" commit) |
| build | ${build_type:-unknown}, sanitizers ${sanitize:-unknown}, $(info "$m" compiler) |
| gnuplot | $(info "$m" gnuplot) |

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
      echo "Some runs were redone later, each on its own date and in its own mode (see the testbed table and the runs' sections):"
      echo
      # shellcheck disable=SC2016  # Markdown backticks, not a command substitution
      sed -n 's/^rerun=\(.* UTC\)\( (commit .*)\)\{0,1\}: \(.*\)$/- \1\2: `\3`/p' "$m"
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
on the other hosts (run \`mixed-fifo\` alone uses one plain FIFO per port instead). A workload
of short messages runs at a lower link rate, so that 80% load stays
within what two cores can serve (about 5000 calls/s; the table \`workload_rate\` in
\`tools/bench-report.sh\` says how each rate was chosen).

The queue limit scales with the link rate, like a switch buffer sized in time: ${queue_ms} ms
of the rate, at least ${queue_min_bytes} bytes (two of the 64 KiB GSO packets TCP hands the
shaper: a queue smaller than one drops every one of them), passed to
\`tools/testbed.sh --buffer\` in bytes. So a queue holds about ${queue_ms} ms at 1 Gbit/s, and more
at the low rates, where the floor applies; the table gives each run's value in bytes and in ms
of its link rate. "mode" is how the run was made: \`quick\` (\`--quick\`, short points) or
\`full\`.

The last column is the hypervisor's steal while the run's points measured (the share of this
machine's CPU time during which its CPUs were ready to run but the host ran other guests or its
own work; mean over each system's points, and the largest): on this VM it changes a run's tails
more than anything in either system, so compare runs with similar steal. Some of it follows the
workload itself (\`tools/bench/machine_cpu.h\`).

| run | mode | link rate | queue per priority | priorities | measuring time per point | exit status | steal |
|---|---|---|---|---|---|---|---|
EOF
    local id
    for id in "${all_runs[@]}"; do
      [[ -f "$data/$id.info" ]] || continue
      echo "| \`$id\` | $(info "$data/$id.info" mode) | $(info "$data/$id.info" rate) | $(queue_cell "$data/$id.info") | $(info "$data/$id.info" priorities) | $(info "$data/$id.info" duration_ms) ms | $(info "$data/$id.info" rc) | $(steal_cell "$data/$id.jsonl") |"
    done
    echo
    caveats_section
    targets_section
    limits_section
    if ((!plots_ok)); then
      echo "_Some plots are missing: gnuplot was not available or failed (see the script's messages)._"
      echo
    fi
    run_section unloaded "\`unloaded\`: round trips on the idle testbed"
    image unloaded.png "unloaded: round-trip latency by request size"
    run_section mixed "\`mixed\`: 64 B calls behind bulk fetches"
    image mixed-cdf.png "mixed: latency CDF of the 64 B calls"
    image mixed-tail.png "mixed: latency tail (1 - CDF) of the 64 B calls"
    run_section mixed-fifo "\`mixed-fifo\`: the same on one FIFO per port (\`--priorities=1\`, plain tbf)"
    run_section mixed-256k "\`mixed-256k\`: the same with 256 KiB bulk messages (8 in flight)"
    for w in "${all_workloads[@]}"; do
      run_section "workload-$w" "\`workload\` ${w^^}"
      for load in 50 80; do
        # The data files' reference, as plot.sh names it in the plot's title.
        ref="$(jv "$data/workload-$w.jsonl" reference scenario=workload point=load "label=$w $load%")"
        if [[ -z "$ref" || "$ref" == homarpc ]]; then
          ref="(a) common reference (latency / homarpc's unloaded latency, both systems)"
        else
          ref="(b) own reference (latency / each system's unloaded latency)"
        fi
        image "workload-$w-$load.png" "${w^^} at ${load}% load: slowdown by size, $ref"
      done
      [[ "$w" != w3 ]] || run_section workload-w3-low "\`workload\` W3 at 10% load (run \`workload-w3-low\`)"
    done
    run_section cpu "\`cpu\`: CPU time per RPC"
    run_section cpu-nopoll "\`cpu-nopoll\`: CPU time per RPC, homarpc without busy-polling (\`--spin_us=0\`)"
    run_section cpu-inline "\`cpu-inline\`: CPU time per RPC, homarpc's handlers on the loop thread (\`--executor=inline\`)"
    run_section cpu-callback "\`cpu-callback\`: CPU time per RPC, both systems' callback servers (\`--server_api=callback\`)"
    cpu_comparison
    echo "## Files"
    echo
    echo "[\`benchmarks/\`](benchmarks/) holds what the runs wrote: per run its Markdown (\`<run>.md\`),"
    echo "its JSON lines (\`<run>.jsonl\`), its messages (\`<run>.log\`) and how it ran (\`<run>.info\`);"
    echo "\`machine.txt\`; and the data files the plots are drawn from (formats in"
    echo "\`tools/bench/load_scenarios.h\`)."
  } >"$tmp"
  mv "$tmp" "$report"
  log "wrote $(shown "$report")"
  ((plots_ok)) || failures+=(plots)
}

trap 'on_signal 130' INT
trap 'on_signal 143' TERM
if [[ "$mode" == run ]]; then
  run_all
fi
assemble_report
if ((${#failures[@]})); then
  log "failed: ${failures[*]} (the report says which runs; their logs are in $(shown "$data"))"
  exit 1
fi
