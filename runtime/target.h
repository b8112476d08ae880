// Target parsing and name resolution for channels and listening ports.
//
// Channels: ResolveTarget() turns a target string (the forms channel.h lists) into the list of
// addresses calls go to, round-robin. Servers: ResolveListenAddress() turns an
// AddListeningPort() address into the one address to bind. Both are called once, at channel
// or server creation, may block in getaddrinfo(), and are thread-safe (no state).
//
// Accepted forms (a scheme is matched case-sensitively, as gRPC does):
//   host:port, [v6addr]:port            numeric or a DNS name (gRPC's default scheme)
//   dns:///host:port, dns:host:port     the same
//   dns://authority/host:port           the same; the DNS server authority is ignored
//   homa://host:port, homa:///host:port homarpc's own spelling
//   ipv4:1.2.3.4:5000,1.2.3.5:5000      a literal list, numeric IPv4 only
//   ipv6:[::1]:5000,[::2]:5000          a literal list, numeric IPv6 only
// A port is required for channels (Homa has no default port). Names are resolved with
// getaddrinfo() (no AI_ADDRCONFIG: a host with only loopback configured must still resolve
// names that map to loopback) in the order it returns.
//
// "localhost" is resolved without DNS, to 127.0.0.1 only, and "localhost6"/"ip6-localhost"
// to [::1] only. Deliberately not both: Homa has no connection attempt that would tell a
// client which family the server listens on (gRPC's pick_first learns it by trying each
// address in turn), so round-robin over [::1] and 127.0.0.1 would send every other call to
// a port nobody listens on whenever the server bound one family -- and the usual server
// ("0.0.0.0:port", as gRPC's examples write it) binds IPv4 only. Use "[::1]:port" for IPv6.
#ifndef HOMARPC_RUNTIME_TARGET_H_
#define HOMARPC_RUNTIME_TARGET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/address.h"

namespace homarpc::internal {

// The addresses `target` names, in the order calls should use them (never empty on success).
// Errors: INVALID_ARGUMENT when the target does not parse (unsupported scheme such as unix:,
// missing or bad port, malformed list); UNAVAILABLE when a name does not resolve. Messages
// name the target.
absl::StatusOr<std::vector<transport::Address>> ResolveTarget(absl::string_view target);

// The address a server binds for `uri` (ServerBuilder::AddListeningPort): the same forms, a
// port is required ("0" = any free port); "0.0.0.0" is IPv4 any, "[::]" IPv6 any (dual-stack:
// it serves IPv4 peers too), "localhost" 127.0.0.1 (as above). Of several addresses, the
// first. Errors as ResolveTarget().
absl::StatusOr<transport::Address> ResolveListenAddress(absl::string_view uri);

// "ipv4:127.0.0.1:50051" / "ipv6:[::1]:50051", as gRPC's peer() strings.
std::string PeerString(const transport::Address& address);

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_TARGET_H_
