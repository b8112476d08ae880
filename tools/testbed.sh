#!/usr/bin/env bash
# tools/testbed.sh: a small multi-host cluster on this machine, built from network namespaces,
# for measurements where the network, not the CPUs, is the bottleneck.
#
#   tools/testbed.sh run [options] -- COMMAND...   build the testbed, run COMMAND in the root
#                                                  namespace, tear everything down afterwards
#                                                  (also on failure or Ctrl-C)
#   tools/testbed.sh up [options]                  build it and leave it (for experiments)
#   tools/testbed.sh down [--prefix=P]             tear down a testbed left by `up`
#   tools/testbed.sh exec HOST COMMAND...          run COMMAND inside host HOST (0, 1, ...)
#   tools/testbed.sh show [--prefix=P]             print hosts, addresses and qdiscs
#
# Options (defaults in brackets):
#   --hosts=N       hosts, N >= 2 [3]
#   --rate=R        each link's rate, a tc rate such as 1gbit, 500mbit [1gbit]
#   --buffer=B      queue limit of each link, bytes or a tc size such as 256kb [256kb]
#   --mtu=M         link MTU [1500]
#   --priorities=P  strict-priority queues per link port, 1 (one FIFO) or 2..8 [8]
#   --prefix=P      name prefix of the namespaces and interfaces [hrpc]
#
# The shape: namespace P-sw holds a Linux bridge, the switch. Each host is a namespace P-hI
# whose eth0 (10.77.0.(I+1)/24, fd77::(I+1)/64) is one end of a veth pair; the other end sits in
# P-sw, attached to the bridge. Both directions of every link are shaped with `tc tbf` at the
# same rate and queue limit: the host's eth0 is its NIC uplink, the switch's port toward the
# host is the switch egress queue (where incast queues build, as on a real top-of-rack switch).
# Like datacenter switches (and the Homa papers' testbeds), each port has P strict-priority
# queues chosen by the packet's DSCP class selector (the top 3 bits of the IPv4 TOS / IPv6
# traffic class; 7 is served first), each holding up to the queue limit: shaped with HTB (this
# kernel has no prio qdisc), see shape(). TCP, and so gRPC, sends class 0 and lands in the
# lowest band, where it is alone: for it the port is the single FIFO of --priorities=1 (plain
# tbf). homarpc marks its packets with Homa's priorities.
# Nothing is created in the root namespace, so traffic never leaves the testbed.
#
# Environment for COMMAND (run): HOMARPC_TESTBED_PREFIX, HOMARPC_TESTBED_HOSTS,
# HOMARPC_TESTBED_RATE, HOMARPC_TESTBED_BUFFER, HOMARPC_TESTBED_MTU,
# HOMARPC_TESTBED_PRIORITIES, and
# HOMARPC_TESTBED_ADDR_<I> (IPv4 address of host I). Run a program inside host I with
# `ip netns exec "$HOMARPC_TESTBED_PREFIX-h$I" program`.
#
# Needs root (network namespaces, veth, tc) and iproute2; refuses with a one-line message
# otherwise. Exit status: COMMAND's for `run`, 0 on success, 1 on a set-up error, 2 on bad usage.
set -euo pipefail

die() { printf 'testbed: %s\n' "$*" >&2; exit 1; }
usage_error() { printf 'testbed: %s (see the top of %s)\n' "$*" "$0" >&2; exit 2; }

hosts=3
rate=1gbit
buffer=256kb
mtu=1500
priorities=8
prefix=hrpc

parse_options() {
  while (($#)); do
    case "$1" in
      --hosts=*) hosts="${1#*=}" ;;
      --rate=*) rate="${1#*=}" ;;
      --buffer=*) buffer="${1#*=}" ;;
      --mtu=*) mtu="${1#*=}" ;;
      --priorities=*) priorities="${1#*=}" ;;
      --prefix=*) prefix="${1#*=}" ;;
      --) shift; break ;;
      *) break ;;
    esac
    shift
  done
  remaining=("$@")
  [[ "$hosts" =~ ^[0-9]+$ ]] && ((hosts >= 2 && hosts <= 200)) ||
    usage_error "--hosts must be a number in [2, 200], not '$hosts'"
  [[ "$mtu" =~ ^[0-9]+$ ]] && ((mtu >= 576 && mtu <= 9000)) ||
    usage_error "--mtu must be in [576, 9000], not '$mtu'"
  [[ "$priorities" =~ ^[1-8]$ ]] ||
    usage_error "--priorities must be a number in [1, 8], not '$priorities'"
  [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] ||
    usage_error "--rate must be a tc rate such as 1gbit or 500mbit, not '$rate'"
  [[ "$buffer" =~ ^[0-9]+([kmg]?b)?$ ]] ||
    usage_error "--buffer must be a size such as 256kb or 262144, not '$buffer'"
  [[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] ||
    usage_error "--prefix must be 1-8 lowercase letters and digits, starting with a letter"
}

require_root() {
  [[ "$(id -u)" == 0 ]] || die "needs root (network namespaces, veth links and tc); run as root"
  command -v ip >/dev/null || die "needs iproute2's ip (apt-get install iproute2)"
  command -v tc >/dev/null || die "needs iproute2's tc (apt-get install iproute2)"
}

sw() { echo "$prefix-sw"; }
# The namespaces of this testbed (prefix) that exist now, one per line.
namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(sw|h[0-9]+)$" || true
}
host_ns() { echo "$prefix-h$1"; }

# Deletes every namespace of this prefix; their interfaces (veth ends, the bridge) go with
# them. Safe to run on a partial or absent testbed.
teardown() {
  local ns
  for ns in $(namespaces); do
    ip netns delete "$ns" 2>/dev/null || true
  done
}

shape() {  # namespace device: $rate, a $buffer queue, $priorities strict-priority bands
  local ns="$1" dev="$2"
  # burst: enough for one MTU-sized packet per timer tick at this rate (tc's rule of thumb is
  # rate/HZ); 64 KiB covers 1 Gbit/s at HZ 250 and GSO-sized bursts.
  if ((priorities == 1)); then
    ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst 64kb \
      limit "$buffer"
    return 0
  fi
  # This kernel has no prio/ets qdisc; HTB does strict priority for bandwidth a class borrows:
  # one parent class at the link rate, one leaf per band with a token guaranteed rate (1/1000 of
  # the link each) that borrows the rest up to the link rate, lower `prio` served first. Each
  # leaf queues in a bfifo of the queue limit. Band b (0 = served first) takes DSCP class
  # selector c = priorities - 1 - b (TOS bits 7..5); classes above the top band share it; class
  # 0 and unclassified packets (ARP) take the lowest band.
  local t="ip netns exec $ns tc" lowest=$((priorities - 1)) band c
  $t qdisc replace dev "$dev" root handle 1: htb default "$((10 + lowest))"
  $t class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" quantum 1514 burst 64kb \
    cburst 64kb
  for ((band = 0; band < priorities; band++)); do
    $t class add dev "$dev" parent 1:1 classid "1:$((10 + band))" htb rate "$(leaf_rate)" \
      ceil "$rate" burst 64kb cburst 64kb prio "$band" quantum 1514
    $t qdisc add dev "$dev" parent "1:$((10 + band))" bfifo limit "$buffer"
  done
  for ((c = 0; c < 8; c++)); do
    band=$((lowest - c))
    ((band >= 0)) || band=0
    $t filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip tos "$((c << 5))" 0xe0 \
      flowid "1:$((10 + band))"
    $t filter add dev "$dev" parent 1: protocol ipv6 prio 2 u32 \
      match ip6 priority "$((c << 5))" 0xe0 flowid "1:$((10 + band))"
  done
}

leaf_rate() {  # 1/1000 of $rate, as a tc rate in kbit (at least 8kbit)
  local value="${rate%%[kmgt]*}" unit="${rate#"${rate%%[kmgt]*}"}" kbit
  case "$unit" in
    kbit) kbit=$(awk "BEGIN{print $value/1000}") ;;
    mbit) kbit=$(awk "BEGIN{print $value}") ;;
    gbit) kbit=$(awk "BEGIN{print $value*1000}") ;;
    tbit) kbit=$(awk "BEGIN{print $value*1000000}") ;;
    kbps) kbit=$(awk "BEGIN{print $value*8/1000}") ;;
    mbps) kbit=$(awk "BEGIN{print $value*8}") ;;
    gbps) kbit=$(awk "BEGIN{print $value*8000}") ;;
    *) kbit=8 ;;
  esac
  awk "BEGIN{k=int($kbit); if (k < 8) k = 8; print k \"kbit\"}"
}

setup() {
  teardown  # a stale testbed of this prefix, from a killed earlier run
  ip netns add "$(sw)"
  ip -n "$(sw)" link set lo up
  ip -n "$(sw)" link add br0 type bridge
  ip -n "$(sw)" link set br0 mtu "$mtu" up
  local i
  for ((i = 0; i < hosts; i++)); do
    local ns
    ns="$(host_ns "$i")"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Created inside the switch namespace, then one end moved to the host: the root namespace
    # never holds either end.
    ip -n "$(sw)" link add "p$i" mtu "$mtu" type veth peer name eth0 mtu "$mtu"
    ip -n "$(sw)" link set eth0 netns "$ns"
    ip -n "$(sw)" link set "p$i" master br0 up
    ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
    ip -n "$ns" addr add "fd77::$((i + 1))/64" dev eth0 nodad
    ip -n "$ns" link set eth0 up
    shape "$ns" eth0
    shape "$(sw)" "p$i"
  done
}

export_env() {
  export HOMARPC_TESTBED_PREFIX="$prefix" HOMARPC_TESTBED_HOSTS="$hosts"
  export HOMARPC_TESTBED_RATE="$rate" HOMARPC_TESTBED_BUFFER="$buffer" HOMARPC_TESTBED_MTU="$mtu"
  export HOMARPC_TESTBED_PRIORITIES="$priorities"
  local i
  for ((i = 0; i < hosts; i++)); do export "HOMARPC_TESTBED_ADDR_$i=10.77.0.$((i + 1))"; done
}

show() {
  local ns
  for ns in $(namespaces | sort); do
    echo "== $ns"
    ip -n "$ns" -brief addr show | grep -v '^lo' || true
    ip netns exec "$ns" tc qdisc show | grep -E 'tbf|htb' || true
  done
}

cmd="${1:-}"
[[ -n "$cmd" ]] || usage_error "missing command: run, up, down, exec or show"
shift
case "$cmd" in
  run)
    parse_options "$@"
    ((${#remaining[@]})) || usage_error "run needs a command after --"
    require_root
    trap teardown EXIT
    trap 'exit 130' INT TERM
    setup || die "set-up failed (see the messages above)"
    export_env
    status=0
    "${remaining[@]}" || status=$?
    exit "$status"
    ;;
  up)
    parse_options "$@"
    require_root
    trap 'teardown; die "set-up failed"' ERR
    setup
    trap - ERR
    echo "testbed $prefix: $hosts hosts at $rate, queue $buffer, $priorities priorities, MTU $mtu; tear down with: $0 down --prefix=$prefix"
    ;;
  down)
    parse_options "$@"
    require_root
    teardown
    ;;
  exec)
    [[ $# -ge 2 ]] || usage_error "exec needs a host number and a command"
    host="$1"
    shift
    [[ "$host" =~ ^[0-9]+$ ]] || usage_error "exec: host must be a number, not '$host'"
    parse_options "$@"
    require_root
    exec ip netns exec "$(host_ns "$host")" "${remaining[@]}"
    ;;
  show)
    parse_options "$@"
    require_root
    show
    ;;
  *)
    usage_error "unknown command '$cmd': run, up, down, exec or show"
    ;;
esac
