// Target parsing and name resolution (target.h). Owned by nobody: stateless functions, called
// once per channel or listening port, from whichever thread creates it.
//
// A target is first split into a scheme and a rest; only the schemes homarpc knows are
// treated as schemes (like gRPC, which falls back to "dns:" for anything it does not
// recognise, so "myhost:50051" is a host and a port, not scheme "myhost"). The rest is then a
// "host:port" (dns, homa, none) or a comma-separated list of numeric addresses (ipv4, ipv6).
#include "runtime/target.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace homarpc::internal {
namespace {

using transport::Address;

enum class Scheme { kDns, kIpv4, kIpv6 };

struct ParsedTarget {
  Scheme scheme = Scheme::kDns;
  absl::string_view rest;  // "host:port", or the list for ipv4/ipv6
};

absl::Status Invalid(absl::string_view target, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("invalid target '", target, "': ", why));
}

absl::StatusOr<ParsedTarget> ParseScheme(absl::string_view target) {
  ParsedTarget parsed;
  absl::string_view rest = target;
  if (absl::ConsumePrefix(&rest, "ipv4:")) {
    parsed.scheme = Scheme::kIpv4;
  } else if (absl::ConsumePrefix(&rest, "ipv6:")) {
    parsed.scheme = Scheme::kIpv6;
  } else if (absl::ConsumePrefix(&rest, "dns:")) {
    // dns:host:port, dns:///host:port, dns://authority/host:port (authority ignored).
    if (absl::ConsumePrefix(&rest, "//")) {
      const size_t slash = rest.find('/');
      if (slash == absl::string_view::npos) {
        return Invalid(target, "expected dns:///host:port or dns://authority/host:port");
      }
      rest.remove_prefix(slash + 1);
    }
  } else if (absl::ConsumePrefix(&rest, "homa:")) {
    // homa://host:port (host as the URI authority) and homa:///host:port (as the path).
    if (absl::ConsumePrefix(&rest, "//")) absl::ConsumePrefix(&rest, "/");
  } else if (absl::StartsWith(rest, "unix:") || absl::StartsWith(rest, "unix-abstract:") ||
             absl::StartsWith(rest, "vsock:") || absl::StartsWith(rest, "xds:")) {
    return Invalid(target, "scheme not supported by homarpc (Homa runs over UDP/IP)");
  }
  parsed.rest = rest;
  return parsed;
}

// Splits "host:port" / "[v6]:port" / "host". `port` is empty when there is none. An IPv6
// literal with a port needs brackets; without brackets, several colons mean a bare IPv6
// address (no port).
absl::Status SplitHostPort(absl::string_view target, absl::string_view text,
                           absl::string_view* host, absl::string_view* port) {
  *port = {};
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return Invalid(target, "unterminated '['");
    *host = text.substr(1, close - 1);
    absl::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (!absl::ConsumePrefix(&after, ":")) return Invalid(target, "junk after ']'");
      *port = after;
      if (port->empty()) return Invalid(target, "empty port");
    }
    return absl::OkStatus();
  }
  const size_t colon = text.find(':');
  if (colon != absl::string_view::npos && text.rfind(':') == colon) {
    *host = text.substr(0, colon);
    *port = text.substr(colon + 1);
    if (port->empty()) return Invalid(target, "empty port");
  } else {
    *host = text;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint16_t> ParsePort(absl::string_view target, absl::string_view port,
                                   bool allow_zero) {
  if (port.empty()) return Invalid(target, "missing port (Homa has no default port)");
  uint32_t value = 0;
  if (!absl::SimpleAtoi(port, &value) || value > 65535 || (value == 0 && !allow_zero)) {
    return Invalid(target, absl::StrCat("bad port '", port, "'"));
  }
  return static_cast<uint16_t>(value);
}

// "localhost" and friends, without asking DNS (see target.h for why 127.0.0.1 only).
bool ResolveLoopbackName(absl::string_view host, uint16_t port, std::vector<Address>* out) {
  if (absl::EqualsIgnoreCase(host, "localhost")) {
    out->push_back(Address::Loopback4(port));
    return true;
  }
  if (absl::EqualsIgnoreCase(host, "localhost6") || absl::EqualsIgnoreCase(host, "ip6-localhost")) {
    out->push_back(Address::Loopback6(port));
    return true;
  }
  return false;
}

// Numeric addresses and DNS names (getaddrinfo answers numeric ones without DNS).
absl::Status ResolveHost(absl::string_view target, absl::string_view host, uint16_t port,
                         bool passive, std::vector<Address>* out) {
  if (ResolveLoopbackName(host, port, out)) return absl::OkStatus();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_protocol = IPPROTO_UDP;
  // No AI_ADDRCONFIG (see target.h). AI_PASSIVE only matters for an empty host, which
  // callers never pass.
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string host_string(host);
  const int rc = getaddrinfo(host_string.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve '", host, "' (target '", target, "'): ", gai_strerror(rc)));
  }
  const size_t before = out->size();
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    Address a = Address::FromSockaddr(ai->ai_addr, ai->ai_addrlen);
    if (!a.is_set()) continue;
    a.set_port(port);
    if (std::find(out->begin() + before, out->end(), a) == out->end()) out->push_back(a);
  }
  freeaddrinfo(result);
  if (out->size() == before) {
    return absl::UnavailableError(
        absl::StrCat("'", host, "' (target '", target, "') has no IPv4 or IPv6 address"));
  }
  return absl::OkStatus();
}

// One literal of an ipv4:/ipv6: list.
absl::StatusOr<Address> ParseLiteral(absl::string_view target, absl::string_view item,
                                     Scheme scheme, bool allow_zero_port) {
  absl::string_view host, port_text;
  if (absl::Status s = SplitHostPort(target, item, &host, &port_text); !s.ok()) return s;
  absl::StatusOr<uint16_t> port = ParsePort(target, port_text, allow_zero_port);
  if (!port.ok()) return port.status();
  // Numeric only, and strictly (inet_pton: no "1.2.3" or hex forms).
  absl::StatusOr<Address> a = Address::Parse(host, *port);
  if (!a.ok() || a->is_v6() != (scheme == Scheme::kIpv6)) {
    return Invalid(target, absl::StrCat("'", item, "' is not a numeric ",
                                        scheme == Scheme::kIpv4 ? "IPv4" : "IPv6", " address"));
  }
  return a;
}

absl::StatusOr<std::vector<Address>> Resolve(absl::string_view target, bool listen) {
  absl::StatusOr<ParsedTarget> parsed = ParseScheme(target);
  if (!parsed.ok()) return parsed.status();
  std::vector<Address> out;
  if (parsed->scheme != Scheme::kDns) {
    if (parsed->rest.empty()) return Invalid(target, "empty address list");
    for (absl::string_view item : absl::StrSplit(parsed->rest, ',')) {
      absl::StatusOr<Address> a = ParseLiteral(target, item, parsed->scheme, listen);
      if (!a.ok()) return a.status();
      if (std::find(out.begin(), out.end(), *a) == out.end()) out.push_back(*a);
    }
    return out;
  }
  absl::string_view host, port_text;
  if (absl::Status s = SplitHostPort(target, parsed->rest, &host, &port_text); !s.ok()) return s;
  absl::StatusOr<uint16_t> port = ParsePort(target, port_text, listen);
  if (!port.ok()) return port.status();
  if (host.empty()) {
    // ":50051" binds IPv4 any for a server; a client has nowhere to go.
    if (!listen) return Invalid(target, "missing host");
    out.push_back(*Address::Parse("0.0.0.0", *port));
    return out;
  }
  if (absl::Status s = ResolveHost(target, host, *port, listen, &out); !s.ok()) return s;
  return out;
}

}  // namespace

absl::StatusOr<std::vector<transport::Address>> ResolveTarget(absl::string_view target) {
  return Resolve(target, /*listen=*/false);
}

absl::StatusOr<transport::Address> ResolveListenAddress(absl::string_view uri) {
  absl::StatusOr<std::vector<transport::Address>> all = Resolve(uri, /*listen=*/true);
  if (!all.ok()) return all.status();
  return all->front();
}

std::string PeerString(const transport::Address& address) {
  if (!address.is_set()) return std::string();
  return absl::StrCat(address.is_v6() ? "ipv6:" : "ipv4:", address.ToString());
}

}  // namespace homarpc::internal
