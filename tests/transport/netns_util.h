// netns_util: network namespaces and veth links for tests that need a real link (a real MTU,
// real packet counters) without touching the host's network.
//
// A NetNamespace is a named Linux network namespace ("ip netns add <name>") owned by one C++
// object: the destructor deletes it, and with it every interface inside, so tests clean up on
// every path (including a failed ASSERT). ConnectVeth() creates a veth pair *inside* two
// namespaces (the host namespace never sees either end), sets the MTU, addresses and brings the
// links up. RunInside() runs code on a thread that has joined the namespace, which is how a test
// creates sockets there: a socket belongs to the namespace of the thread that created it,
// forever, whichever thread uses it afterwards.
//
// Everything here shells out to iproute2's `ip` (posix_spawn, exit codes checked) and reads
// /proc/thread-self/net/*; nothing is cached. Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN).
// Written for tests/transport/netns_test.cc and meant to be reused by a multi-host benchmark
// testbed. Thread-compatible: one thread sets a testbed up and tears it down; RunInside() may be
// called from any thread.
#ifndef HOMARPC_TESTS_TRANSPORT_NETNS_UTIL_H_
#define HOMARPC_TESTS_TRANSPORT_NETNS_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/address.h"

namespace homarpc::testing {

// Runs argv[0] (looked up in PATH) with `argv`, without a shell, and waits for it. Returns its
// standard output. Errors: NOT_FOUND when the program does not exist, INTERNAL when it could not
// be started or exited non-zero (the message holds the command line, exit status and stderr).
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

// OK when this process may create network namespaces: running as root, `ip` in PATH, and
// HOMARPC_NETNS_TEST is not "0" in the environment (the override that forces the skip path).
// Otherwise FAILED_PRECONDITION saying which. Whether the kernel then allows it is only known by
// trying: NetNamespace::Create() reports that.
absl::Status CheckNetnsPrerequisites();

class NetNamespace {
 public:
  // Creates namespace `name` (a stale one of that exact name, left by a crashed earlier process,
  // is deleted first) and brings its loopback up. `name` must be unique to this process; use
  // UniqueName(). Errors: FAILED_PRECONDITION when the kernel or container refuses (the test
  // should skip), INTERNAL otherwise.
  static absl::StatusOr<std::unique_ptr<NetNamespace>> Create(std::string name);
  // "<prefix>-<pid>": unique among live processes, recognisable as ours in `ip netns list`.
  static std::string UniqueName(absl::string_view prefix);

  // Deletes the namespace; its interfaces (a veth end, and so the whole pair) go with it.
  // Failure is logged to stderr, not fatal. Sockets still open in it keep it alive in the
  // kernel until they close, but its name and interfaces disappear now.
  ~NetNamespace();
  NetNamespace(const NetNamespace&) = delete;
  NetNamespace& operator=(const NetNamespace&) = delete;

  const std::string& name() const { return name_; }

  // Runs `fn` on a new thread that has joined this namespace, and waits for it. Sockets `fn`
  // creates live in this namespace; threads `fn` starts inherit it. The calling thread's
  // namespace is untouched. Errors: the setns()/open() failure (then `fn` does not run).
  absl::Status RunInside(absl::FunctionRef<void()> fn) const;

  // `ip -n <name> <args...>`; returns its stdout (see RunCommand).
  absl::StatusOr<std::string> Ip(const std::vector<std::string>& args) const;

  // The MTU of `ifname` in this namespace, parsed from `ip -o link show dev <ifname>`.
  absl::StatusOr<int> LinkMtu(absl::string_view ifname) const;

  // A counter from /proc/net/<file> as seen inside this namespace, for the two formats the
  // kernel uses: "snmp" style (a header line "Ip: Forwarding ... FragCreates" followed by a
  // value line with the same prefix; group = "Ip", "Udp", ...) and "snmp6" style ("Ip6FragCreates
  // 0" per line; pass group = ""). NOT_FOUND when the counter is absent.
  absl::StatusOr<int64_t> ProcNetCounter(absl::string_view file, absl::string_view group,
                                         absl::string_view name) const;

  struct LinkCounters {
    int64_t rx_packets = 0;
    int64_t rx_bytes = 0;
    int64_t tx_packets = 0;
    int64_t tx_bytes = 0;
  };
  // Packet counters of `ifname` from /proc/net/dev inside this namespace.
  absl::StatusOr<LinkCounters> Counters(absl::string_view ifname) const;

 private:
  explicit NetNamespace(std::string name) : name_(std::move(name)) {}
  // /proc/thread-self/net/<file>, read from a thread inside the namespace.
  absl::StatusOr<std::string> ReadProcNet(absl::string_view file) const;

  std::string name_;
};

struct VethOptions {
  // Interface names at each end (namespaces keep them apart from the host's).
  std::string ifname_a = "hveth-a";
  std::string ifname_b = "hveth-b";
  int mtu = 1500;
  // IPv4 subnet as "A.B.C" (a /24); ends get .1 (a) and .2 (b). Used only inside the two
  // namespaces, so it cannot clash with the host's routes.
  std::string ipv4_prefix = "10.213.0";
  // IPv6 /64 prefix as "fd00:213:0:0"; ends get ::1 and ::2, added with `nodad`. Empty = no
  // IPv6. IPv6 setup failure is not an error: VethLink::ipv6_error says why.
  std::string ipv6_prefix;
};

struct VethLink {
  std::string ifname_a, ifname_b;
  // Port 0; set the port before binding.
  transport::Address ipv4_a, ipv4_b;
  // Unset when IPv6 was not requested or could not be configured (then ipv6_error says why).
  transport::Address ipv6_a, ipv6_b;
  std::string ipv6_error;
};

// Creates a veth pair with one end in each namespace (created from inside `a`, its peer placed
// directly into `b`: no interface ever exists in the host namespace), sets the MTU, assigns
// addresses, brings both ends up and returns once both are operational (state UP, real qdisc),
// so the first packet sent is not dropped. The pair lives as long as the namespaces. Errors:
// FAILED_PRECONDITION when veth pairs cannot be created (no veth driver), INTERNAL for later
// steps (including a link not operational within 10 s).
absl::StatusOr<VethLink> ConnectVeth(const NetNamespace& a, const NetNamespace& b,
                                     const VethOptions& options);

}  // namespace homarpc::testing

#endif  // HOMARPC_TESTS_TRANSPORT_NETNS_UTIL_H_
