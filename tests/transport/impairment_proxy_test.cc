// Tests of the ImpairmentProxy itself, with plain UDP sockets on loopback: it relays
// byte-exact both ways when told to do nothing, its faults do what they say, and a seed
// reproduces them. Datagrams carry a sequence number in their first 4 bytes so the receiver
// can tell which ones arrived, how often and in what order.
#include "tests/transport/impairment_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "transport/wire.h"

namespace homarpc::transport::testing {
namespace {

// A failure guard, not a timing assertion.
constexpr absl::Duration kGuard = absl::Seconds(30);

// A plain blocking-on-demand UDP socket bound to IPv4 loopback.
class UdpSocket {
 public:
  UdpSocket() {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    // Large enough that a test's whole burst waits in the kernel until it is read.
    int bytes = 8 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes));
    Address a = Address::Loopback4(0);
    if (bind(fd_, a.sockaddr_ptr(), a.sockaddr_len()) != 0) std::abort();
    sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len);
    address_ = Address::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  }
  ~UdpSocket() { close(fd_); }
  const Address& address() const { return address_; }

  void SendTo(const Address& to, const std::string& bytes) {
    ASSERT_EQ(sendto(fd_, bytes.data(), bytes.size(), 0, to.sockaddr_ptr(), to.sockaddr_len()),
                     static_cast<ssize_t>(bytes.size()));
  }
  // The next datagram, waiting at most `timeout`; nullopt if none came.
  std::optional<std::pair<Address, std::string>> Receive(absl::Duration timeout = kGuard) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) {
      return std::nullopt;
    }
    std::string buf(65536, '\0');
    sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    ssize_t n = recvfrom(fd_, buf.data(), buf.size(), MSG_DONTWAIT,
                         reinterpret_cast<sockaddr*>(&ss), &len);
    if (n < 0) return std::nullopt;
    buf.resize(static_cast<size_t>(n));
    return std::make_pair(Address::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len),
                          std::move(buf));
  }
  // True if a datagram is waiting right now.
  bool HasPending() {
    char c;
    return recv(fd_, &c, 1, MSG_DONTWAIT | MSG_PEEK) >= 0;
  }

 private:
  int fd_ = -1;
  Address address_;
};

// `size` bytes: a 4-byte big-endian sequence number (when it fits), then a pattern of `seq`.
std::string Datagram(uint32_t seq, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>(seq * 31 + i * 7 + (i >> 8));
  uint32_t be = htonl(seq);
  std::memcpy(s.data(), &be, std::min<size_t>(4, size));
  return s;
}
uint32_t SeqOf(const std::string& d) {
  uint32_t be = 0;
  std::memcpy(&be, d.data(), 4);
  return ntohl(be);
}

std::unique_ptr<ImpairmentProxy> StartProxy(const ImpairmentOptions& o) {
  auto proxy = std::make_unique<ImpairmentProxy>(o);
  absl::Status s = proxy->Start();
  EXPECT_TRUE(s.ok()) << s;
  return proxy;
}

TEST(ImpairmentProxyTest, ImpairmentProxy_RelaysByteExactBothWaysAtRateZero) {
  UdpSocket server, client_a, client_b;
  ImpairmentOptions o;
  o.server = server.address();
  auto proxy = StartProxy(o);
  const std::vector<size_t> sizes = {0, 1, 28, 1500, 9000, 65507};  // 65507: IPv4's largest
  Address peer_a, peer_b;
  for (UdpSocket* client : {&client_a, &client_b}) {
    Address& peer = client == &client_a ? peer_a : peer_b;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::string out = Datagram(static_cast<uint32_t>(i + 100 * (client == &client_b)),
                                       sizes[i]);
      // Client -> proxy -> server, unchanged, from the client's own upstream socket.
      client->SendTo(proxy->address(), out);
      auto at_server = server.Receive();
      ASSERT_TRUE(at_server.has_value()) << "size " << sizes[i] << " never reached the server";
      EXPECT_EQ(at_server->second, out) << "size " << sizes[i];
      if (i == 0) peer = at_server->first;
      EXPECT_EQ(at_server->first, peer) << "one client must keep one upstream address";
      // Server -> that peer -> proxy -> the right client, unchanged, from the proxy's address.
      const std::string back = Datagram(static_cast<uint32_t>(i + 1000), sizes[i]);
      server.SendTo(at_server->first, back);
      auto at_client = client->Receive();
      ASSERT_TRUE(at_client.has_value()) << "size " << sizes[i] << " never came back";
      EXPECT_EQ(at_client->second, back) << "size " << sizes[i];
      EXPECT_EQ(at_client->first, proxy->address());
    }
  }
  // The server saw two distinct peers, neither of them a client's own address.
  EXPECT_NE(peer_a, peer_b);
  EXPECT_NE(peer_a, client_a.address());
  EXPECT_NE(peer_b, client_b.address());
  // The relay publishes its counts after each batch, which may be just after the last reply
  // reached the client.
  ASSERT_TRUE(proxy->WaitFor([&](const ImpairmentStats& st) {
    return st.to_client.received == 2 * sizes.size();
  }, kGuard)) << "the proxy counted only " << proxy->stats().to_client.received << " replies";
  ImpairmentStats s = proxy->stats();
  EXPECT_EQ(s.clients, 2u);
  for (const ImpairmentCounters* c : {&s.to_server, &s.to_client}) {
    EXPECT_EQ(c->received, 2 * sizes.size());
    EXPECT_EQ(c->forwarded, 2 * sizes.size());
    EXPECT_EQ(c->dropped + c->corrupted + c->duplicated + c->reordered + c->delayed +
                  c->queue_overflows + c->send_errors + c->truncated,
              0u);
  }
}

TEST(ImpairmentProxyTest, ImpairmentProxy_DropAllDropsEverything) {
  UdpSocket server, client;
  ImpairmentOptions o;
  o.server = server.address();
  o.drop_rate = 1.0;
  auto proxy = StartProxy(o);
  constexpr int kCount = 200;
  for (int i = 0; i < kCount; ++i) client.SendTo(proxy->address(), Datagram(i, 100));
  // Once the proxy has read every datagram, nothing it forwarded can still be in flight.
  ASSERT_TRUE(proxy->WaitFor(
      [](const ImpairmentStats& s) { return s.to_server.received == kCount; }, kGuard))
      << "the proxy read only " << proxy->stats().to_server.received;
  EXPECT_FALSE(server.HasPending()) << "a datagram got through drop_rate = 1";
  ImpairmentStats s = proxy->stats();
  EXPECT_EQ(s.to_server.dropped, static_cast<uint64_t>(kCount));
  EXPECT_EQ(s.to_server.forwarded, 0u);
}

// Sends kCount sequenced datagrams through a proxy with every fault at 10%, receives all that
// come out, and returns the counters and the sequence numbers in arrival order.
struct FaultRun {
  ImpairmentCounters counters;
  std::vector<uint32_t> arrived;
  int corrupted_arrivals = 0;
};
FaultRun RunFaults(uint64_t seed) {
  constexpr int kCount = 1000;
  UdpSocket server, client;
  ImpairmentOptions o;
  o.server = server.address();
  o.seed = seed;
  o.drop_rate = o.corrupt_rate = o.duplicate_rate = o.reorder_rate = o.delay_rate = 0.1;
  o.max_delay_nanos = 200 * kNanosPerMicro;
  auto proxy = StartProxy(o);
  for (int i = 0; i < kCount; ++i) client.SendTo(proxy->address(), Datagram(i, 64));
  // Wait for the proxy to read everything and empty its queues.
  const bool drained = proxy->WaitFor(
      [](const ImpairmentStats& s) { return s.to_server.received == kCount && s.queued == 0; },
      kGuard);
  EXPECT_TRUE(drained) << "proxy read " << proxy->stats().to_server.received;
  FaultRun run;
  run.counters = proxy->stats().to_server;
  for (uint64_t i = 0; i < run.counters.forwarded; ++i) {
    auto d = server.Receive();
    if (!d.has_value()) {
      ADD_FAILURE() << "only " << i << " of " << run.counters.forwarded << " arrived";
      break;
    }
    // Corruption touches bytes 14..17 only, so the sequence number survives.
    run.arrived.push_back(SeqOf(d->second));
    run.corrupted_arrivals += d->second != Datagram(SeqOf(d->second), 64);
  }
  EXPECT_FALSE(server.HasPending()) << "more datagrams arrived than the proxy forwarded";
  return run;
}

TEST(ImpairmentProxyTest, ImpairmentProxy_SameSeedSameFaults) {
  FaultRun a = RunFaults(7);
  FaultRun b = RunFaults(7);
  FaultRun c = RunFaults(8);
  // Every kind of fault happened, and the books balance.
  for (const FaultRun* r : {&a, &c}) {
    const ImpairmentCounters& k = r->counters;
    EXPECT_GT(k.dropped, 0u);
    EXPECT_GT(k.corrupted, 0u);
    EXPECT_GT(k.duplicated, 0u);
    EXPECT_GT(k.reordered, 0u);
    EXPECT_GT(k.delayed, 0u);
    EXPECT_EQ(k.queue_overflows + k.send_errors + k.truncated, 0u);
    EXPECT_EQ(k.forwarded, k.received - k.dropped + k.duplicated);
    // Each corrupted datagram arrives damaged (twice if it was also duplicated).
    EXPECT_GE(r->corrupted_arrivals, static_cast<int>(k.corrupted));
  }
  // Same seed: the same counts, and the same datagrams lost, duplicated and damaged (the
  // arrival order may differ where a delay races a later datagram).
  EXPECT_EQ(a.counters.dropped, b.counters.dropped);
  EXPECT_EQ(a.counters.corrupted, b.counters.corrupted);
  EXPECT_EQ(a.counters.duplicated, b.counters.duplicated);
  EXPECT_EQ(a.counters.reordered, b.counters.reordered);
  EXPECT_EQ(a.counters.delayed, b.counters.delayed);
  EXPECT_EQ(a.counters.forwarded, b.counters.forwarded);
  EXPECT_EQ(a.corrupted_arrivals, b.corrupted_arrivals);
  std::vector<uint32_t> sa = a.arrived, sb = b.arrived, sc = c.arrived;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  std::sort(sc.begin(), sc.end());
  EXPECT_EQ(sa, sb);
  // Another seed: other datagrams meet the faults.
  EXPECT_NE(sa, sc);
}

int Inversions(const std::vector<uint32_t>& seqs) {
  int n = 0;
  for (size_t i = 1; i < seqs.size(); ++i) n += seqs[i] < seqs[i - 1];
  return n;
}

std::vector<uint32_t> SendSequence(double reorder_rate, ImpairmentCounters* counters) {
  constexpr int kCount = 500;
  UdpSocket server, client;
  ImpairmentOptions o;
  o.server = server.address();
  o.reorder_rate = reorder_rate;
  o.seed = 3;
  auto proxy = StartProxy(o);
  for (int i = 0; i < kCount; ++i) client.SendTo(proxy->address(), Datagram(i, 32));
  std::vector<uint32_t> seqs;
  for (int i = 0; i < kCount; ++i) {
    auto d = server.Receive();
    if (!d.has_value()) {
      ADD_FAILURE() << "only " << i << " of " << kCount << " arrived";
      break;
    }
    seqs.push_back(SeqOf(d->second));
  }
  // Counts are published after each batch, possibly just after the last datagram went out.
  EXPECT_TRUE(proxy->WaitFor(
      [&](const ImpairmentStats& st) { return st.to_server.received == uint64_t{kCount}; },
      kGuard));
  *counters = proxy->stats().to_server;
  return seqs;
}

TEST(ImpairmentProxyTest, ImpairmentProxy_ReorderChangesOrder) {
  // Control: without reordering, one client's datagrams arrive in the order sent.
  ImpairmentCounters counters;
  std::vector<uint32_t> in_order = SendSequence(0, &counters);
  ASSERT_EQ(in_order.size(), 500u);
  EXPECT_EQ(Inversions(in_order), 0);
  // With 20% reordering every datagram still arrives exactly once, but not in order.
  std::vector<uint32_t> seqs = SendSequence(0.2, &counters);
  ASSERT_EQ(seqs.size(), 500u);
  EXPECT_GT(counters.reordered, 0u);
  EXPECT_GT(Inversions(seqs), 0) << "reordering left every datagram in place";
  std::vector<uint32_t> sorted = seqs;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
}

TEST(ImpairmentProxyTest, ImpairmentProxy_CorruptDamagesOnlyTheMagic) {
  UdpSocket server, client;
  ImpairmentOptions o;
  o.server = server.address();
  o.corrupt_rate = 1.0;
  auto proxy = StartProxy(o);
  // A valid GRANT packet, as the engine would send it.
  wire::Packet p;
  p.type = wire::PacketType::kGrant;
  p.sport = 1;
  p.dport = 2;
  p.sender_id = 42;
  p.grant.offset = 10000;
  uint8_t header[wire::kMaxHeaderSize];
  const size_t len = wire::EncodeHeader(p, header);
  wire::Packet decoded;
  ASSERT_EQ(wire::Decode(absl::MakeConstSpan(header, len), &decoded), wire::DecodeError::kOk);
  const std::string sent(reinterpret_cast<const char*>(header), len);
  for (int i = 0; i < 20; ++i) {
    client.SendTo(proxy->address(), sent);
    auto d = server.Receive();
    ASSERT_TRUE(d.has_value());
    ASSERT_EQ(d->second.size(), sent.size());
    // Exactly one byte differs, inside the magic, and Decode rejects the packet.
    int differing = 0;
    for (size_t b = 0; b < sent.size(); ++b) {
      if (d->second[b] != sent[b]) {
        ++differing;
        EXPECT_TRUE(b >= 14 && b < 18) << "byte " << b << " outside the magic was damaged";
      }
    }
    EXPECT_EQ(differing, 1);
    EXPECT_EQ(wire::Decode(absl::MakeConstSpan(
                               reinterpret_cast<const uint8_t*>(d->second.data()), len),
                           &decoded),
              wire::DecodeError::kBadMagic);
  }
  // Counts are published after each batch, possibly just after the last datagram went out.
  ASSERT_TRUE(proxy->WaitFor(
      [](const ImpairmentStats& st) { return st.to_server.received == 20u; }, kGuard));
  EXPECT_EQ(proxy->stats().to_server.corrupted, 20u);
}

TEST(ImpairmentProxyTest, ImpairmentProxy_DelayDeliversEverythingLater) {
  UdpSocket server, client;
  ImpairmentOptions o;
  o.server = server.address();
  o.delay_rate = 1.0;
  o.max_delay_nanos = 500 * kNanosPerMicro;
  auto proxy = StartProxy(o);
  for (int i = 0; i < 100; ++i) client.SendTo(proxy->address(), Datagram(i, 32));
  std::vector<uint32_t> seqs;
  for (int i = 0; i < 100; ++i) {
    auto d = server.Receive();
    ASSERT_TRUE(d.has_value()) << "only " << i << " of 100 arrived";
    seqs.push_back(SeqOf(d->second));
  }
  std::sort(seqs.begin(), seqs.end());
  for (uint32_t i = 0; i < 100; ++i) ASSERT_EQ(seqs[i], i);
  // Counts are published after each timer pass, possibly just after the last datagram left.
  ASSERT_TRUE(proxy->WaitFor(
      [](const ImpairmentStats& st) { return st.to_server.forwarded == 100u; }, kGuard));
  ImpairmentStats s = proxy->stats();
  EXPECT_EQ(s.to_server.delayed, 100u);
  EXPECT_EQ(s.to_server.forwarded, 100u);
  EXPECT_EQ(s.queued, 0u);
}

TEST(ImpairmentProxyTest, ImpairmentProxy_QueuesAreBounded) {
  UdpSocket server, client;
  ImpairmentOptions o;
  o.server = server.address();
  o.reorder_rate = 1.0;                      // hold every datagram...
  o.reorder_hold_nanos = 600 * kNanosPerSecond;  // ...for longer than the test runs
  o.max_queued_packets = 10;
  auto proxy = StartProxy(o);
  for (int i = 0; i < 50; ++i) client.SendTo(proxy->address(), Datagram(i, 32));
  ASSERT_TRUE(proxy->WaitFor(
      [](const ImpairmentStats& s) { return s.to_server.received == 50; }, kGuard));
  ImpairmentStats s = proxy->stats();
  EXPECT_EQ(s.queued, 10u);
  EXPECT_EQ(s.to_server.reordered, 10u);
  EXPECT_EQ(s.to_server.queue_overflows, 40u);
  EXPECT_FALSE(server.HasPending());
  proxy->Stop();
  EXPECT_EQ(proxy->stats().discarded_at_stop, 10u);
}

TEST(ImpairmentProxyTest, ImpairmentProxy_RejectsBadOptions) {
  ImpairmentOptions o;
  o.server = Address::Loopback4(9);
  o.drop_rate = 1.5;
  EXPECT_EQ(ImpairmentProxy(o).Start().code(), absl::StatusCode::kInvalidArgument);
  o.drop_rate = 0;
  o.server = Address();
  EXPECT_EQ(ImpairmentProxy(o).Start().code(), absl::StatusCode::kInvalidArgument);
  o.server = Address::Loopback4(9);
  ImpairmentProxy proxy(o);
  ASSERT_TRUE(proxy.Start().ok());
  EXPECT_EQ(proxy.Start().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace homarpc::transport::testing
