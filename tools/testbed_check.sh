#!/usr/bin/env bash
# tools/testbed_check.sh: the ctest `testbed_smoke` (tools/CMakeLists.txt). Builds a 3-host
# testbed with tools/testbed.sh and checks that an RPC crosses it: a greeter server in host 0,
# greeter clients in hosts 1 and 2 calling it at host 0's address; with BENCH, that
# `homarpc-bench --testbed` runs both RPC systems across it; that the switch port toward
# host 0 queued homarpc's small messages in its top priority band and gRPC's TCP in the lowest
# (the DSCP classes reach the HTB bands, tools/testbed.sh); then that the teardown left no
# namespace behind. Exits 77 (ctest's skip code here) when not root.
#
#   tools/testbed_check.sh GREETER_SERVER GREETER_CLIENT [BENCH]
set -euo pipefail
server_bin="$1"
client_bin="$2"
bench_bin="${3:-}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ "$(id -u)" != 0 ]]; then
  echo "skipped: tools/testbed.sh needs root (network namespaces)"
  exit 77
fi
prefix="hrt$$"
prefix="${prefix:0:8}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# Runs inside `testbed.sh run`: the testbed exists, its addresses are in the environment.
inside() {
  local p="$HOMARPC_TESTBED_PREFIX"
  ip netns exec "$p-h0" "$server_bin" --port=50051 >"$log" 2>&1 &
  local server=$!
  local i
  for ((i = 0; i < 100; i++)); do
    grep -q "listening" "$log" && break
    kill -0 "$server" 2>/dev/null || { echo "server exited: $(cat "$log")"; return 1; }
    sleep 0.1  # polling for the server's "listening" line, bounded at 10 s
  done
  local out1 out2
  out1="$(ip netns exec "$p-h1" "$client_bin" --target="$HOMARPC_TESTBED_ADDR_0:50051" --name=h1)"
  out2="$(ip netns exec "$p-h2" "$client_bin" --target="$HOMARPC_TESTBED_ADDR_0:50051" --name=h2)"
  kill -TERM "$server"
  wait "$server"
  [[ "$out1" == "Greeter received: Hello h1" ]] || { echo "host 1 got: $out1"; return 1; }
  [[ "$out2" == "Greeter received: Hello h2" ]] || { echo "host 2 got: $out2"; return 1; }
  echo "RPCs crossed the testbed: $out1 / $out2"
  if [[ -n "$bench_bin" ]]; then
    local json
    json="$("$bench_bin" --testbed --scenario=unary --sizes=64 --iterations=50 --warmup=5 \
      --duration_ms=2000 --json)"
    for system in grpc homarpc; do
      grep -q "\"system\":\"$system\".*\"size\":64," <<<"$json" ||
        { echo "no $system result from homarpc-bench --testbed: $json"; return 1; }
    done
    echo "homarpc-bench --testbed ran both systems"
    # Bytes sent by the switch port toward host 0 per band: 1:10 is served first (class 7:
    # homarpc's messages of at most 200 bytes), 1:17 last (class 0: TCP).
    local stats top lowest
    stats="$(ip netns exec "$p-sw" tc -s class show dev p0)"
    top="$(awk '/^class htb 1:10 /{f=1} f&&/Sent/{print $2; exit}' <<<"$stats")"
    lowest="$(awk '/^class htb 1:17 /{f=1} f&&/Sent/{print $2; exit}' <<<"$stats")"
    [[ "${top:-0}" -gt 0 && "${lowest:-0}" -gt 0 ]] ||
      { echo "priority bands not used as expected (top=$top lowest=$lowest): $stats"; return 1; }
    echo "priority bands: top $top bytes (homarpc), lowest $lowest bytes (TCP)"
  fi
}
export -f inside
export server_bin client_bin bench_bin log

"$here/testbed.sh" run --hosts=3 --rate=200mbit --prefix="$prefix" -- bash -c inside
if ip netns list | grep -q "^$prefix-"; then
  echo "testbed $prefix was not torn down"
  exit 1
fi
echo "torn down"
