#!/usr/bin/env bash
# call-timeline.sh: where the time of a 64 B unary call goes, step by step on both sides, and
# which step holds the extra time of the calls that stalled (docs/rpc-benchmarks.md, session 22).
#
#   tools/call-timeline.sh [--build=DIR] [--no-build] [--calls=N] [--keep=DIR] [-- BENCH_FLAG...]
#
# Builds DIR as the measuring scripts do, with trace points (cmake -DHOMARPC_TRACE_POINTS=ON,
# transport/trace_points.h), runs
#   homarpc-bench --scenario=unary --systems=homarpc --sizes=64 --iterations=N --warmup=200
# with HOMARPC_TRACE_DIR set, so that the caller and the server stamp each step of every call,
# and prints homarpc-call-timeline's table: p50, p90 and p99 of each step in microseconds (they
# chain without overlap, so a call's steps add up to the call; the two send system calls are
# also timed on their own, inside the "in flight" steps), and how many of the stalled calls
# (at least the median + 20 us, as homarpc-bench's stalled_pct) had most of their extra time
# in each step. The first 200 calls are left out. A stamp reads the clock (~25 ns here, 14 a
# call), so a traced call is ~0.3 us longer than an untraced one; compare traced runs with
# traced runs.
#
#   --build=DIR   build directory (default: build-trace; it is configured with trace points,
#                 so do not point it at the build you measure with)
#   --no-build    use DIR's programs as they are (they must have been built with trace points)
#   --calls=N     measured calls (default 20000; 200 warm-up calls before them)
#   --keep=DIR    keep the trace files in DIR (default: a temporary directory, removed)
#   -- FLAGS      passed on to homarpc-bench (for instance --executor=inline --io_backend=epoll)
# Relative directories are taken from the repository root.
#
# Exit status 0 on success, 1 when the run or the analysis fails (or the programs record no
# trace points), 2 for bad options. Unless --no-build it installs missing packages
# (tools/lib/setup.sh) first.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cd "$root"

MEASURE_SCRIPT=call-timeline.sh
build=build-trace
# shellcheck source=tools/lib/measure.sh disable=SC1091
source "$here/lib/measure.sh"
calls=20000
bench_flags=()
while (($#)); do
  arg="$1"
  shift
  measure_common_option "$arg" && continue
  measure_calls_option "$arg" && continue
  case "$arg" in
    --)
      bench_flags=("$@")
      break
      ;;
    *) measure_usage_error "unknown option '$arg' (see --help)" ;;
  esac
done

measure_programs -DHOMARPC_TRACE_POINTS=ON -- homarpc-bench homarpc-call-timeline
bench="$build/tools/homarpc-bench"
timeline="$build/tools/homarpc-call-timeline"

if [[ -n "$keep" ]]; then
  mkdir -p "$keep" 2>/dev/null || measure_fail "--keep: cannot make directory '$keep'"
  out="$(cd "$keep" && pwd)"
  rm -f "$out"/trace.*
else
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
warmup=200
result="$(HOMARPC_TRACE_DIR="$out" "$bench" --scenario=unary --systems=homarpc --sizes=64 \
  --iterations="$calls" --duration_ms=600000 --warmup="$warmup" --cpu_probe_ms=0 \
  ${bench_flags[@]+"${bench_flags[@]}"} 2>&1)" ||
  { echo "call-timeline.sh: the run failed; it said:" >&2; tail -n 5 <<<"$result" >&2; exit 1; }
row="$(grep '| homarpc |' <<<"$result" || true)"
if [[ -z "$row" ]]; then
  echo "call-timeline.sh: the run printed no result; it said:" >&2
  tail -n 5 <<<"$result" >&2
  exit 1
fi
compgen -G "$out/trace.*" >/dev/null ||
  measure_fail "no trace files in $out: $bench records no trace points (build it with\
 -DHOMARPC_TRACE_POINTS=ON, or drop --no-build)"
"$timeline" --skip="$warmup" "$out"
echo
echo "The run, traced: $row"
