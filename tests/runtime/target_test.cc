// Tests of runtime/target.{h,cc}: every target form a channel accepts, the listening-address
// forms a server accepts, their errors, and peer strings. Names other than "localhost" are
// avoided except for one that must not resolve (".invalid" is reserved for that, RFC 6761), so
// the tests do not depend on the machine's DNS. Single-threaded.
#include "runtime/target.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace homarpc::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using transport::Address;

Address A(const char* text) { return *Address::Parse(text); }

std::vector<std::string> Peers(absl::string_view target) {
  absl::StatusOr<std::vector<Address>> resolved = ResolveTarget(target);
  EXPECT_TRUE(resolved.ok()) << target << ": " << resolved.status();
  std::vector<std::string> out;
  if (resolved.ok()) {
    for (const Address& a : *resolved) out.push_back(PeerString(a));
  }
  return out;
}

TEST(Target_Resolve, NumericHostPort) {
  EXPECT_THAT(Peers("127.0.0.1:50051"), ElementsAre("ipv4:127.0.0.1:50051"));
  EXPECT_THAT(Peers("10.1.2.3:1"), ElementsAre("ipv4:10.1.2.3:1"));
}

TEST(Target_Resolve, BracketedIpv6) {
  EXPECT_THAT(Peers("[::1]:50051"), ElementsAre("ipv6:[::1]:50051"));
  EXPECT_THAT(Peers("[fd00::7]:65535"), ElementsAre("ipv6:[fd00::7]:65535"));
}

TEST(Target_Resolve, DnsSchemeForms) {
  EXPECT_THAT(Peers("dns:///127.0.0.1:5000"), ElementsAre("ipv4:127.0.0.1:5000"));
  EXPECT_THAT(Peers("dns:127.0.0.1:5000"), ElementsAre("ipv4:127.0.0.1:5000"));
  // The DNS server authority is accepted and ignored.
  EXPECT_THAT(Peers("dns://8.8.8.8/127.0.0.1:5000"), ElementsAre("ipv4:127.0.0.1:5000"));
  EXPECT_THAT(Peers("dns:///[::1]:5000"), ElementsAre("ipv6:[::1]:5000"));
}

TEST(Target_Resolve, HomaSchemeForms) {
  EXPECT_THAT(Peers("homa://127.0.0.1:7"), ElementsAre("ipv4:127.0.0.1:7"));
  EXPECT_THAT(Peers("homa:///127.0.0.1:7"), ElementsAre("ipv4:127.0.0.1:7"));
  EXPECT_THAT(Peers("homa://[::1]:7"), ElementsAre("ipv6:[::1]:7"));
  EXPECT_THAT(Peers("homa:///localhost:7"), ElementsAre("ipv4:127.0.0.1:7"));
}

TEST(Target_Resolve, LocalhostIsIpv4LoopbackOnly) {
  // Fixed, not from /etc/hosts (see target.h for why one address and why IPv4).
  EXPECT_THAT(Peers("localhost:50051"), ElementsAre("ipv4:127.0.0.1:50051"));
  EXPECT_THAT(Peers("LocalHost:1"), ElementsAre("ipv4:127.0.0.1:1"));
  EXPECT_THAT(Peers("dns:///localhost:50051"), ElementsAre("ipv4:127.0.0.1:50051"));
  EXPECT_THAT(Peers("localhost6:50051"), ElementsAre("ipv6:[::1]:50051"));
  EXPECT_THAT(Peers("ip6-localhost:50051"), ElementsAre("ipv6:[::1]:50051"));
}

TEST(Target_Resolve, Ipv4List) {
  EXPECT_THAT(Peers("ipv4:1.2.3.4:5000,1.2.3.5:5001"),
              ElementsAre("ipv4:1.2.3.4:5000", "ipv4:1.2.3.5:5001"));
  EXPECT_THAT(Peers("ipv4:127.0.0.1:9"), ElementsAre("ipv4:127.0.0.1:9"));
  // Duplicates collapse (round-robin would otherwise weigh them double).
  EXPECT_THAT(Peers("ipv4:1.2.3.4:5,1.2.3.4:5"), ElementsAre("ipv4:1.2.3.4:5"));
}

TEST(Target_Resolve, Ipv6List) {
  EXPECT_THAT(Peers("ipv6:[::1]:5000,[::2]:5000"),
              ElementsAre("ipv6:[::1]:5000", "ipv6:[::2]:5000"));
}

TEST(Target_Resolve, ReturnsAddressesUsableForSending) {
  absl::StatusOr<std::vector<Address>> resolved = ResolveTarget("ipv4:127.0.0.1:80");
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->front(), A("127.0.0.1:80"));
  EXPECT_FALSE(resolved->front().is_v6());
  resolved = ResolveTarget("[::1]:80");
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->front(), Address::Loopback6(80));
}

void ExpectInvalid(absl::string_view target, absl::string_view why) {
  absl::StatusOr<std::vector<Address>> resolved = ResolveTarget(target);
  ASSERT_FALSE(resolved.ok()) << target;
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument) << target;
  EXPECT_THAT(std::string(resolved.status().message()), HasSubstr(why)) << target;
  EXPECT_THAT(std::string(resolved.status().message()), HasSubstr(std::string(target)));
}

TEST(Target_Resolve, MissingOrBadPortIsInvalidArgument) {
  ExpectInvalid("localhost", "missing port");
  ExpectInvalid("127.0.0.1", "missing port");
  ExpectInvalid("[::1]", "missing port");
  ExpectInvalid("dns:///localhost", "missing port");
  ExpectInvalid("127.0.0.1:", "empty port");
  ExpectInvalid("127.0.0.1:65536", "bad port");
  ExpectInvalid("127.0.0.1:http", "bad port");
  ExpectInvalid("127.0.0.1:0", "bad port");  // a channel cannot send to port 0
  ExpectInvalid("ipv4:1.2.3.4", "missing port");
  // Without brackets, an IPv6 address has no port.
  ExpectInvalid("::1:50051", "missing port");
}

TEST(Target_Resolve, MalformedTargetsAreInvalidArgument) {
  ExpectInvalid("", "missing port");
  ExpectInvalid(":50051", "missing host");
  ExpectInvalid("[::1:50051", "unterminated");
  ExpectInvalid("[::1]x50051", "junk after");
  ExpectInvalid("ipv4:", "empty address list");
  ExpectInvalid("ipv4:1.2.3.4:5,", "missing port");
  ExpectInvalid("ipv4:[::1]:5", "not a numeric IPv4 address");
  ExpectInvalid("ipv4:localhost:5", "not a numeric IPv4 address");
  ExpectInvalid("ipv4:1.2.3:5", "not a numeric IPv4 address");
  ExpectInvalid("ipv6:[1.2.3.4]:5", "not a numeric IPv6 address");
  ExpectInvalid("ipv6:1.2.3.4:5", "not a numeric IPv6 address");
  ExpectInvalid("dns://authority-only", "dns://authority/host:port");
  ExpectInvalid("unix:/tmp/socket", "not supported");
  ExpectInvalid("unix-abstract:name", "not supported");
}

TEST(Target_Resolve, UnresolvableNameIsUnavailable) {
  absl::StatusOr<std::vector<Address>> resolved = ResolveTarget("no-such-host.invalid:50051");
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(resolved.status().message()), HasSubstr("no-such-host.invalid"));
}

TEST(Target_Listen, WildcardsAndLoopback) {
  EXPECT_EQ(*ResolveListenAddress("0.0.0.0:50051"), A("0.0.0.0:50051"));
  EXPECT_EQ(*ResolveListenAddress("0.0.0.0:0"), A("0.0.0.0:0"));
  EXPECT_EQ(*ResolveListenAddress("[::]:50051"), A("[::]:50051"));
  EXPECT_TRUE(ResolveListenAddress("[::]:0")->is_v6());
  EXPECT_EQ(*ResolveListenAddress("localhost:0"), Address::Loopback4(0));
  EXPECT_EQ(*ResolveListenAddress("127.0.0.1:7"), Address::Loopback4(7));
  EXPECT_EQ(*ResolveListenAddress("[::1]:7"), Address::Loopback6(7));
  // An empty host listens on IPv4 any.
  EXPECT_EQ(*ResolveListenAddress(":50051"), A("0.0.0.0:50051"));
}

TEST(Target_Listen, SchemesAndLists) {
  EXPECT_EQ(*ResolveListenAddress("dns:///localhost:9"), Address::Loopback4(9));
  EXPECT_EQ(*ResolveListenAddress("homa://0.0.0.0:9"), A("0.0.0.0:9"));
  EXPECT_EQ(*ResolveListenAddress("ipv4:127.0.0.1:0"), Address::Loopback4(0));
  // Of several addresses, the first.
  EXPECT_EQ(*ResolveListenAddress("ipv6:[::1]:5,[::2]:6"), Address::Loopback6(5));
}

TEST(Target_Listen, Errors) {
  EXPECT_EQ(ResolveListenAddress("0.0.0.0").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveListenAddress("[::]:99999").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveListenAddress("unix:/tmp/x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveListenAddress("no-such-host.invalid:1").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(Target_PeerString, FormatsBothFamilies) {
  EXPECT_EQ(PeerString(A("127.0.0.1:50051")), "ipv4:127.0.0.1:50051");
  EXPECT_EQ(PeerString(A("[::1]:50051")), "ipv6:[::1]:50051");
  EXPECT_EQ(PeerString(A("[fd00::1:2]:1")), "ipv6:[fd00::1:2]:1");
  EXPECT_EQ(PeerString(Address()), "");
}

}  // namespace
}  // namespace homarpc::internal
