#!/usr/bin/env bash
# call-instructions.sh: how many instructions homarpc's own code spends on one 64 B unary call,
# counted by valgrind's callgrind (instructions, not seconds: the same binary gives the same
# counts whatever else this noisy machine is doing, so a change of a few hundred instructions
# shows where a latency benchmark cannot resolve it).
#
#   tools/call-instructions.sh [--build=DIR] [--no-build] [--calls=N] [--keep=DIR]
#
# Runs homarpc-bench --scenario=unary --systems=homarpc --sizes=64 under callgrind (server and
# client processes both traced; epoll backend, inline executor, because valgrind does not model
# io_uring and the default executor's choice depends on timing), then prints, per call:
#   client  encode      ClientCall::Encode (envelope and protobuf into one buffer)
#   client  start       ClientCall::Start (to the request's packet handed to the kernel, and
#                       the RPC's bookkeeping)
#   client  response    the response's packet through the engine to the waiting caller
#   client  complete    ClientCall::Complete (envelope and protobuf out)
#   server  request     the request's packet through the engine, the runtime, the handler and
#                       the response's packet (the inline executor runs it all in one go)
#   server  reap        Engine::Reap: ended RPCs and the acks that rode on requests
# User-space instructions only: the kernel's share of each system call is not counted, nor
# are the empty polls of a waiting loop (how many there are depends on timing). The sum is a
# measure of homarpc's code, not of a call's time (docs/rpc-benchmarks.md, session 21).
#
#   --build=DIR   build directory (default: build)
#   --no-build    use DIR/tools/homarpc-bench as it is
#   --calls=N     measured calls (default 4000; 100 warm-up calls are counted too). One-time
#                 costs are spread over the calls, so compare counts taken with the same N
#   --keep=DIR    keep callgrind's output files in DIR (for callgrind_annotate)
# Relative directories are taken from the repository root.
#
# Exit status 0 on success, 1 when the run fails (or a step's function is not found: renamed,
# or inlined away), 2 for bad options, 77 when valgrind is not installed. Unless --no-build it
# installs missing packages (tools/lib/setup.sh) and builds DIR as tools/rpc-ratios.sh does.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cd "$root"

MEASURE_SCRIPT=call-instructions.sh
build=build
# shellcheck source=tools/lib/measure.sh disable=SC1091
source "$here/lib/measure.sh"
calls=4000
for arg in "$@"; do
  measure_common_option "$arg" || measure_calls_option "$arg" ||
    measure_usage_error "unknown option '$arg' (see --help)"
done

measure_programs -- homarpc-bench
bench="$build/tools/homarpc-bench"
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
  { echo "call-instructions.sh: valgrind not found (apt-get install valgrind)" >&2; exit 77; }

if [[ -n "$keep" ]]; then
  mkdir -p "$keep"
  out="$(cd "$keep" && pwd)"
  rm -f "$out"/callgrind.out.*
else
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
bench="$(cd "$(dirname "$bench")" && pwd)/$(basename "$bench")"
warmup=100
(
  cd "$out"
  valgrind --tool=callgrind --trace-children=yes "$bench" --scenario=unary --systems=homarpc \
    --sizes=64 --iterations="$calls" --duration_ms=600000 --warmup="$warmup" --cpu_probe_ms=0 \
    --io_backend=epoll --executor=inline >bench.txt 2>valgrind.txt
) || { echo "call-instructions.sh: the run failed; valgrind's output:" >&2; tail -n 5 "$out/valgrind.txt" >&2; exit 1; }
result="$(grep '| homarpc |' "$out/bench.txt" || true)"
samples="$(awk -F'|' '{ gsub(/ /, "", $10); print $10 }' <<<"$result")"
[[ "$samples" == "$calls" ]] || {
  echo "call-instructions.sh: $calls calls wanted, the benchmark measured '${samples}'; it said:" >&2
  tail -n 5 "$out/bench.txt" >&2
  exit 1
}

# Which process was which, by what it ran (the parent process only forks the other two).
with() { grep -l -F "$1" "$out"/callgrind.out.* 2>/dev/null || true; }
mapfile -t servers < <(with 'ServerImpl::ProcessRequest(')
mapfile -t clients < <(with 'ClientCall::Start(')
((${#servers[@]} == 1 && ${#clients[@]} == 1)) || {
  measure_fail "expected one server and one client profile, found ${#servers[@]} and ${#clients[@]}"
}
server="${servers[0]}"
client="${clients[0]}"

# Inclusive instructions per call of the function named `name` in its own source `file` (a
# plain string match, "file:name(").
total=$((calls + warmup))
per_call() {
  local profile="$1"
  callgrind_annotate --inclusive=yes --threshold=100 "$profile" 2>/dev/null |
    WANT="$2" awk -v n="$total" '
      index($0, ENVIRON["WANT"]) { x = $1; gsub(",", "", x); if (x + 0 > best) best = x + 0 }
      END { printf "%d", best / n + 0.5 }'
}
rows=(
  "client|encode|$client|runtime/client_call.cc:homarpc::internal::ClientCall::Encode("
  "client|start|$client|runtime/client_call.cc:homarpc::internal::ClientCall::Start("
  "client|response|$client|transport/engine.cc:homarpc::transport::Engine::HandlePacket("
  "client|complete|$client|runtime/client_call.cc:homarpc::internal::ClientCall::Complete("
  "server|request|$server|transport/engine.cc:homarpc::transport::Engine::HandlePacket("
  "server|reap|$server|transport/engine.cc:homarpc::transport::Engine::Reap()"
)
echo "| side | step | instructions per call |"
echo "|---|---|---:|"
sum=0
for row in "${rows[@]}"; do
  IFS='|' read -r side step file pattern <<<"$row"
  n="$(per_call "$file" "$pattern")"
  ((n > 0)) || measure_fail "no '$pattern' in the $side's profile"
  sum=$((sum + n))
  echo "| $side | $step | $n |"
done
echo "| both | sum | $sum |"
echo
echo "$calls measured + $warmup warm-up calls of 64 B ($(awk -F'|' '{ gsub(/ /, "", $5); print $5 }' <<<"$result") us p50 under valgrind); binary $bench"
