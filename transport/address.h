// Address: an IPv4 or IPv6 UDP endpoint (address + port), the identity of a Homa peer.
//
// A small value type (28 bytes) that is cheap to copy, hash and compare. It wraps a
// sockaddr_in or sockaddr_in6 so it can be handed to the kernel without conversion.
// Thread-compatible: no shared state.
#ifndef HOMARPC_TRANSPORT_ADDRESS_H_
#define HOMARPC_TRANSPORT_ADDRESS_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace homarpc::transport {

class Address {
 public:
  // An unset address (family AF_UNSPEC); compares equal only to other unset addresses.
  Address();

  // Parses "1.2.3.4:port", "[::1]:port" or a bare IP with `default_port`. Numeric only: name
  // resolution belongs to the runtime. Returns INVALID_ARGUMENT on anything else.
  static absl::StatusOr<Address> Parse(absl::string_view text, uint16_t default_port = 0);
  // Copies a kernel socket address. Returns an unset Address for families other than
  // AF_INET/AF_INET6 or a `len` too short for the family.
  static Address FromSockaddr(const sockaddr* sa, socklen_t len);
  static Address Loopback4(uint16_t port);
  static Address Loopback6(uint16_t port);

  bool is_set() const { return storage_.v4.sin_family != AF_UNSPEC; }
  bool is_v6() const { return storage_.v4.sin_family == AF_INET6; }
  int family() const { return storage_.v4.sin_family; }
  // 127.0.0.0/8, ::1, or an IPv4-mapped 127/8 (::ffff:127.x.y.z).
  bool is_loopback() const;
  uint16_t port() const;
  void set_port(uint16_t port);

  const sockaddr* sockaddr_ptr() const { return &storage_.any; }
  sockaddr* mutable_sockaddr_ptr() { return &storage_.any; }
  socklen_t sockaddr_len() const;

  // "1.2.3.4:80" or "[::1]:80".
  std::string ToString() const;

  friend bool operator==(const Address& a, const Address& b);
  friend bool operator!=(const Address& a, const Address& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const Address& a) {
    if (a.is_v6()) {
      return H::combine(
          H::combine_contiguous(std::move(h), a.storage_.v6.sin6_addr.s6_addr, 16),
          a.storage_.v6.sin6_port, a.storage_.v6.sin6_scope_id);
    }
    return H::combine(std::move(h), a.storage_.v4.sin_family, a.storage_.v4.sin_addr.s_addr,
                      a.storage_.v4.sin_port);
  }

 private:
  union Storage {
    sockaddr any;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } storage_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_ADDRESS_H_
