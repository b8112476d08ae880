#include "transport/address.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace homarpc::transport {

Address::Address() { std::memset(&storage_, 0, sizeof(storage_)); }

absl::StatusOr<Address> Address::Parse(absl::string_view text, uint16_t default_port) {
  Address a;
  std::string host;
  absl::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unterminated '[' in address: ", text));
    }
    host = std::string(text.substr(1, close - 1));
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return absl::InvalidArgumentError(absl::StrCat("junk after ']' in address: ", text));
      }
      port_text = rest.substr(1);
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != absl::string_view::npos && text.find(':') == colon) {
      host = std::string(text.substr(0, colon));
      port_text = text.substr(colon + 1);
    } else {
      host = std::string(text);  // bare IPv4, or bare IPv6 without brackets
    }
  }
  uint32_t port = default_port;
  if (!port_text.empty() && (!absl::SimpleAtoi(port_text, &port) || port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in address: ", text));
  }
  if (inet_pton(AF_INET, host.c_str(), &a.storage_.v4.sin_addr) == 1) {
    a.storage_.v4.sin_family = AF_INET;
    a.storage_.v4.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }
  if (inet_pton(AF_INET6, host.c_str(), &a.storage_.v6.sin6_addr) == 1) {
    a.storage_.v6.sin6_family = AF_INET6;
    a.storage_.v6.sin6_port = htons(static_cast<uint16_t>(port));
    return a;
  }
  return absl::InvalidArgumentError(absl::StrCat("not a numeric IP address: ", text));
}

Address Address::FromSockaddr(const sockaddr* sa, socklen_t len) {
  Address a;
  if (sa == nullptr) return a;
  if (sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(&a.storage_.v4, sa, sizeof(sockaddr_in));
  } else if (sa->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    std::memcpy(&a.storage_.v6, sa, sizeof(sockaddr_in6));
    a.storage_.v6.sin6_flowinfo = 0;  // not part of the identity
  }
  return a;
}

Address Address::Loopback4(uint16_t port) {
  Address a;
  a.storage_.v4.sin_family = AF_INET;
  a.storage_.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.storage_.v4.sin_port = htons(port);
  return a;
}

Address Address::Loopback6(uint16_t port) {
  Address a;
  a.storage_.v6.sin6_family = AF_INET6;
  a.storage_.v6.sin6_addr = in6addr_loopback;
  a.storage_.v6.sin6_port = htons(port);
  return a;
}

bool Address::is_loopback() const {
  if (is_v6()) {
    const in6_addr& a = storage_.v6.sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
  }
  return is_set() && (ntohl(storage_.v4.sin_addr.s_addr) >> 24) == 127;
}

uint16_t Address::port() const {
  if (is_v6()) return ntohs(storage_.v6.sin6_port);
  if (is_set()) return ntohs(storage_.v4.sin_port);
  return 0;
}

void Address::set_port(uint16_t port) {
  if (is_v6()) {
    storage_.v6.sin6_port = htons(port);
  } else if (is_set()) {
    storage_.v4.sin_port = htons(port);
  }
}

socklen_t Address::sockaddr_len() const {
  if (is_v6()) return sizeof(sockaddr_in6);
  if (is_set()) return sizeof(sockaddr_in);
  return 0;
}

std::string Address::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (is_v6()) {
    inet_ntop(AF_INET6, &storage_.v6.sin6_addr, buf, sizeof(buf));
    return absl::StrCat("[", buf, "]:", port());
  }
  if (is_set()) {
    inet_ntop(AF_INET, &storage_.v4.sin_addr, buf, sizeof(buf));
    return absl::StrCat(buf, ":", port());
  }
  return "<unset>";
}

bool operator==(const Address& a, const Address& b) {
  if (a.family() != b.family()) return false;
  if (a.is_v6()) {
    return std::memcmp(&a.storage_.v6.sin6_addr, &b.storage_.v6.sin6_addr, 16) == 0 &&
           a.storage_.v6.sin6_port == b.storage_.v6.sin6_port &&
           a.storage_.v6.sin6_scope_id == b.storage_.v6.sin6_scope_id;
  }
  if (!a.is_set()) return true;
  return a.storage_.v4.sin_addr.s_addr == b.storage_.v4.sin_addr.s_addr &&
         a.storage_.v4.sin_port == b.storage_.v4.sin_port;
}

}  // namespace homarpc::transport
