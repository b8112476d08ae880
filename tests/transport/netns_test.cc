// Endpoint across a real link: two network namespaces joined by a veth pair with a 1500-byte
// MTU, for each I/O backend. Loopback (endpoint_test.cc) has a 64 KiB MTU, so it cannot show
// that DATA packets really fit a 1500-byte link; here the kernel refuses any datagram that
// does not (counted in IoStats::send_errors): homarpc sends with DF and never has it fragmented
// (io_backend.cc, OpenUdpSocket), and /proc/net/snmp's fragment counters show that none was.
//
// Needs root and network namespaces; skips with the reason otherwise, or when
// HOMARPC_NETNS_TEST=0 is set. Every test builds its own namespaces, named after the process
// (ctest runs each test in its own process), and the fixture deletes them on every path. No
// traffic leaves the two namespaces: the veth pair is created inside them and the host
// namespace never holds either end.
//
// How code enters a namespace: the server Endpoint is created on a thread that has setns()'d
// into namespace A, the client on one in namespace B (NetNamespace::RunInside). An Endpoint
// creates its socket inside Create(), and a socket stays in the namespace it was created in,
// so the loop threads and the test's main thread (host namespace) may use them freely. The
// test checks that assumption: each endpoint's bound address is its namespace's veth address
// (bind() would fail with EADDRNOTAVAIL elsewhere) and the veth's byte counters carry the
// payload. fork() + setns() was rejected: stats and byte comparisons would need IPC.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/transport/engine_harness.h"
#include "tests/transport/netns_util.h"
#include "transport/endpoint.h"
#include "transport/io_backend.h"
#include "transport/wire.h"

namespace homarpc::transport {
namespace {

using homarpc::testing::CheckNetnsPrerequisites;
using homarpc::testing::ConnectVeth;
using homarpc::testing::NetNamespace;
using homarpc::testing::VethLink;
using homarpc::testing::VethOptions;
using testing::Bytes;

constexpr int kMtu = 1500;
constexpr uint8_t kData = static_cast<uint8_t>(wire::PacketType::kData);

// Packets a message of `size` bytes takes on first transmission (an empty message is one).
uint64_t DataPackets(size_t size, bool ipv6) {
  Config c;
  c.mtu = kMtu;
  const uint64_t per = c.PayloadPerPacket(ipv6);
  return size == 0 ? 1 : (size + per - 1) / per;
}

// The counters that explain a failed RPC, for failure messages.
std::string Describe(const Endpoint& ep) {
  const EngineStats s = ep.stats();
  const IoStats io = ep.io_stats();
  std::string out = absl::StrCat(ep.local_address().ToString(), " packets sent/received:");
  for (int t = 0; t < 256; ++t) {
    if (s.packets_sent[t] == 0 && s.packets_received[t] == 0) continue;
    absl::StrAppend(&out, " ", wire::PacketTypeName(static_cast<wire::PacketType>(t)), " ",
                    s.packets_sent[t], "/", s.packets_received[t]);
  }
  absl::StrAppend(&out, "; dropped:");
  for (int e = 0; e < static_cast<int>(wire::DecodeError::kCount); ++e) {
    if (s.packets_dropped[e] != 0) {
      absl::StrAppend(&out, " ", wire::DecodeErrorName(static_cast<wire::DecodeError>(e)), " ",
                      s.packets_dropped[e]);
    }
  }
  absl::StrAppend(&out, " semantic ", s.packets_dropped_semantic, "; retransmitted ",
                  s.retransmitted_packets, ", restarts ", s.restarts, ", client timeouts ",
                  s.client_timeouts, ", server RPCs abandoned ", s.server_rpcs_abandoned,
                  ", refused ", s.refused_messages, ", requests/responses delivered ",
                  s.requests_delivered, "/", s.responses_delivered, ", live client/server RPCs ",
                  s.client_rpcs, "/", s.server_rpcs, ", rx bytes held ", s.rx_bytes_held,
                  "; datagrams sent/received ", io.datagrams_sent, "/", io.datagrams_received,
                  ", send errors ", io.send_errors, ", truncated ", io.recv_truncated);
  return out;
}

class NetnsTest : public ::testing::TestWithParam<IoKind> {
 protected:
  void SetUp() override {
    if (absl::Status s = CheckNetnsPrerequisites(); !s.ok()) {
      GTEST_SKIP() << "network namespace test skipped: " << s.message();
    }
    auto a = NetNamespace::Create(NetNamespace::UniqueName("hrpc-a"));
    if (a.status().code() == absl::StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << "network namespace test skipped: " << a.status().message();
    }
    ASSERT_TRUE(a.ok()) << a.status();
    ns_a_ = std::move(*a);
    auto b = NetNamespace::Create(NetNamespace::UniqueName("hrpc-b"));
    ASSERT_TRUE(b.ok()) << b.status();
    ns_b_ = std::move(*b);

    const int pid = static_cast<int>(getpid());
    VethOptions v;
    v.mtu = kMtu;
    v.ipv4_prefix = absl::StrCat("10.213.", pid % 250);
    v.ipv6_prefix = absl::StrFormat("fd00:213:%x:0", pid & 0xffff);
    auto link = ConnectVeth(*ns_a_, *ns_b_, v);
    if (link.status().code() == absl::StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << "network namespace test skipped: " << link.status().message();
    }
    ASSERT_TRUE(link.ok()) << link.status();
    link_ = std::move(*link);
  }

  EndpointOptions Options(const Address& bind) {
    EndpointOptions o;
    o.config.mtu = kMtu;
    // 10 s of silence before an RPC fails (the default is 100 ms): a failure guard for a
    // loaded 2-core machine, where ASan-built loop threads can be descheduled for longer than
    // 100 ms. What this test checks is delivery and packetisation, not timeouts.
    o.config.timeout_ticks = 10000;
    o.io.kind = GetParam();
    o.io.bind_address = bind;
    return o;
  }

  // An echo server whose socket lives in namespace A.
  std::unique_ptr<Endpoint> ServerInA(const Address& bind) {
    std::unique_ptr<Endpoint> server;
    auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
    absl::Status entered = ns_a_->RunInside([&] {
      auto ep = Endpoint::Create(Options(bind), [self](IncomingRequest r) {
        Buffer copy = std::move(r.payload);
        self->load()->Reply(r, std::move(copy));
      });
      EXPECT_TRUE(ep.ok()) << ep.status();
      if (ep.ok()) server = std::move(*ep);
    });
    EXPECT_TRUE(entered.ok()) << entered;
    if (server) self->store(server.get());
    return server;
  }

  // A client whose socket lives in namespace B; `adjust` may change its options first.
  std::unique_ptr<Endpoint> ClientInB(
      const Address& bind, const std::function<void(EndpointOptions*)>& adjust = nullptr) {
    std::unique_ptr<Endpoint> client;
    absl::Status entered = ns_b_->RunInside([&] {
      EndpointOptions options = Options(bind);
      if (adjust) adjust(&options);
      auto ep = Endpoint::Create(options);
      EXPECT_TRUE(ep.ok()) << ep.status();
      if (ep.ok()) client = std::move(*ep);
    });
    EXPECT_TRUE(entered.ok()) << entered;
    return client;
  }

  // Echoes each size from B to A and back; checks bytes, and that each message went out as
  // exactly as many DATA packets as the 1500-byte MTU requires.
  void EchoSizes(Endpoint& client, Endpoint& server, std::initializer_list<size_t> sizes,
                 bool ipv6) {
    for (size_t size : sizes) {
      SCOPED_TRACE(absl::StrCat("size ", size, ipv6 ? " over IPv6" : " over IPv4"));
      const EngineStats c0 = client.stats(), s0 = server.stats();
      Buffer req = Bytes(size, static_cast<uint8_t>(size * 31 + 7));
      const std::string expect(req.view());
      absl::StatusOr<Buffer> resp = client.Call(server.local_address(), std::move(req));
      ASSERT_TRUE(resp.ok()) << resp.status() << "\nclient: " << Describe(client)
                             << "\nserver: " << Describe(server) << "\n"
                             << KernelDrops();
      ASSERT_EQ(resp->size(), size);
      EXPECT_TRUE(resp->view() == expect) << "response bytes differ from the request";

      const EngineStats c1 = client.stats(), s1 = server.stats();
      // First transmissions only; a lost packet's retransmission is counted separately.
      const uint64_t request_packets = (c1.packets_sent[kData] - c0.packets_sent[kData]) -
                                       (c1.retransmitted_packets - c0.retransmitted_packets);
      const uint64_t response_packets = (s1.packets_sent[kData] - s0.packets_sent[kData]) -
                                        (s1.retransmitted_packets - s0.retransmitted_packets);
      // Expect: ceil(size / 1416) packets over IPv4, ceil(size / 1396) over IPv6.
      EXPECT_EQ(request_packets, DataPackets(size, ipv6));
      EXPECT_EQ(response_packets, DataPackets(size, ipv6));
      EXPECT_GE(s1.packets_received[kData] - s0.packets_received[kData], request_packets);
      EXPECT_GE(c1.packets_received[kData] - c0.packets_received[kData], response_packets);
    }
  }

  // The kernel's UDP drop counters in both namespaces, for failure messages.
  std::string KernelDrops() const {
    std::string out;
    for (const NetNamespace* ns : {ns_a_.get(), ns_b_.get()}) {
      absl::StrAppend(&out, ns->name(), ":");
      for (const char* counter : {"InErrors", "RcvbufErrors", "SndbufErrors"}) {
        auto v = ns->ProcNetCounter("snmp", "Udp", counter);
        absl::StrAppend(&out, " Udp ", counter, " ",
                        v.ok() ? absl::StrCat(*v) : std::string(v.status().message()));
      }
      absl::StrAppend(&out, "; ");
    }
    return out;
  }

  // Nothing was refused, truncated or fragmented, and the payload really crossed the veth.
  void ExpectCleanTransfer(const Endpoint& client, const Endpoint& server, bool ipv6) {
    for (const Endpoint* ep : {&client, &server}) {
      const IoStats io = ep->io_stats();
      EXPECT_EQ(io.send_errors, 0u) << ep->local_address().ToString();
      EXPECT_EQ(io.recv_truncated, 0u) << ep->local_address().ToString();
      EXPECT_GT(io.datagrams_sent, 0u) << ep->local_address().ToString();
    }
    for (const NetNamespace* ns : {ns_a_.get(), ns_b_.get()}) {
      // homarpc's datagrams carry DF (OpenUdpSocket): the kernel never fragments them.
      auto frags = ipv6 ? ns->ProcNetCounter("snmp6", "", "Ip6FragCreates")
                        : ns->ProcNetCounter("snmp", "Ip", "FragCreates");
      ASSERT_TRUE(frags.ok()) << frags.status();
      EXPECT_EQ(*frags, 0) << "IP fragments were created in " << ns->name();
    }
    // The veth's byte counters include every payload byte each side sent (plus headers): the
    // sockets were in the namespaces and the traffic went over the link, not a loopback.
    auto a = ns_a_->Counters(link_.ifname_a);
    auto b = ns_b_->Counters(link_.ifname_b);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_GE(static_cast<uint64_t>(a->tx_bytes), server.stats().data_bytes_sent);
    EXPECT_GE(static_cast<uint64_t>(b->tx_bytes), client.stats().data_bytes_sent);
    EXPECT_GE(static_cast<uint64_t>(a->rx_bytes), client.stats().data_bytes_sent);
  }

  std::unique_ptr<NetNamespace> ns_a_, ns_b_;  // destroyed after the test body's endpoints
  VethLink link_;
};

TEST_P(NetnsTest, Netns_LinkHas1500MtuAndSocketsLiveInTheirNamespaces) {
  // Expect: both veth ends report "mtu 1500" in `ip link show`.
  auto mtu_a = ns_a_->LinkMtu(link_.ifname_a);
  auto mtu_b = ns_b_->LinkMtu(link_.ifname_b);
  ASSERT_TRUE(mtu_a.ok()) << mtu_a.status();
  ASSERT_TRUE(mtu_b.ok()) << mtu_b.status();
  EXPECT_EQ(*mtu_a, kMtu);
  EXPECT_EQ(*mtu_b, kMtu);

  // Expect: the sockets bound the namespace-only addresses (only possible inside them).
  auto server = ServerInA(link_.ipv4_a);
  auto client = ClientInB(link_.ipv4_b);
  ASSERT_TRUE(server && client);
  Address want_a = link_.ipv4_a, want_b = link_.ipv4_b;
  want_a.set_port(server->local_address().port());
  want_b.set_port(client->local_address().port());
  EXPECT_NE(server->local_address().port(), 0);
  EXPECT_EQ(server->local_address(), want_a);
  EXPECT_EQ(client->local_address(), want_b);
  EXPECT_EQ(server->io_kind(), GetParam());
  EXPECT_EQ(client->io_kind(), GetParam());

  // Expect: an RPC crosses the link, and the link's counters show it.
  auto before = ns_a_->Counters(link_.ifname_a);
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<Buffer> r = client->Call(server->local_address(), Bytes(3000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 3000u);
  auto after = ns_a_->Counters(link_.ifname_a);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->rx_bytes - before->rx_bytes, 3000);
  EXPECT_GE(after->tx_bytes - before->tx_bytes, 3000);
}

TEST_P(NetnsTest, Netns_RouteToTheOtherHostIsNotLocalAndItsOwnAddressIs) {
  // The testbed's hosts pace their data to each other (their veth is the "NIC"): the route
  // from B to A must not count as local, while B's own address does (Config::pace_local).
  Route to_a, to_self;
  absl::Status entered = ns_b_->RunInside([&] {
    Address a = link_.ipv4_a, b = link_.ipv4_b;
    a.set_port(9);
    b.set_port(9);
    to_a = LookupRoute(a);
    to_self = LookupRoute(b);
  });
  ASSERT_TRUE(entered.ok()) << entered;
  EXPECT_EQ(to_a.mtu, kMtu);
  EXPECT_FALSE(to_a.local);
  EXPECT_TRUE(to_self.local);
}

TEST_P(NetnsTest, Netns_EchoSizesByteExactOver1500MtuVeth) {
  auto server = ServerInA(link_.ipv4_a);
  auto client = ClientInB(link_.ipv4_b);
  ASSERT_TRUE(server && client);
  // 1416 = one full IPv4 packet, 1417 = the first that needs two.
  EchoSizes(*client, *server, {0, 1, 1416, 1417, 100 * 1000, size_t{1} << 20, size_t{16} << 20},
            /*ipv6=*/false);
  EXPECT_EQ(server->stats().requests_delivered, 7u);
  EXPECT_EQ(client->stats().client_timeouts, 0u);
  ExpectCleanTransfer(*client, *server, /*ipv6=*/false);
}

// A configured MTU above the link's (9000 on a 1500-byte veth, the route's MTU not used): the
// request's 4000-byte datagram is refused by the sender's kernel (send_errors), never
// fragmented, and the call fails instead of crossing the link in IP fragments.
TEST_P(NetnsTest, Netns_AnMtuAboveTheLinksIsRefusedNotFragmented) {
  auto server = ServerInA(link_.ipv4_a);
  auto client = ClientInB(link_.ipv4_b, [](EndpointOptions* o) {
    o->config.SetMtuOrRoute(9000);
    o->config.timeout_ticks = 100;  // the call fails after ~100 ms of silence
  });
  ASSERT_TRUE(server && client);
  absl::StatusOr<Buffer> resp = client->Call(server->local_address(), Bytes(4000, 5));
  EXPECT_FALSE(resp.ok()) << "a 4000-byte datagram crossed a 1500-byte link";
  const IoStats io = client->io_stats();
  EXPECT_GT(io.send_errors + io.direct_send_errors, 0u);
  EXPECT_EQ(server->stats().requests_delivered, 0u);
  auto frags = ns_b_->ProcNetCounter("snmp", "Ip", "FragCreates");
  ASSERT_TRUE(frags.ok()) << frags.status();
  EXPECT_EQ(*frags, 0) << "the client's kernel fragmented a datagram";
}

TEST_P(NetnsTest, Netns_Ipv6EchoOver1500MtuVeth) {
  if (!link_.ipv6_a.is_set()) {
    GTEST_SKIP() << "IPv6 could not be configured on the veth: " << link_.ipv6_error;
  }
  auto server = ServerInA(link_.ipv6_a);
  auto client = ClientInB(link_.ipv6_b);
  ASSERT_TRUE(server && client);
  EXPECT_TRUE(server->local_address().is_v6());
  // 1396 = one full IPv6 packet, 1397 = the first that needs two.
  EchoSizes(*client, *server, {0, 1396, 1397, 100 * 1000, size_t{1} << 20}, /*ipv6=*/true);
  ExpectCleanTransfer(*client, *server, /*ipv6=*/true);
}

INSTANTIATE_TEST_SUITE_P(Backends, NetnsTest, ::testing::Values(IoKind::kUring, IoKind::kEpoll),
                         [](const auto& info) { return std::string(IoKindName(info.param)); });

}  // namespace
}  // namespace homarpc::transport
