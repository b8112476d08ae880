// io_backend_test: the IoBackend conformance suite, run against both implementations
// (io_uring and epoll) over IPv4 and IPv6 loopback, plus the factory's choice of backend.
//
// Each test builds real backends on 127.0.0.1 / ::1 and moves real datagrams between them.
// Waiting is bounded only as a failure guard (seconds); nothing asserts how fast anything is.
#include "transport/io_backend.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/io_backend_fixture.h"
#include "transport/clock.h"
#include "transport/errors.h"
#include "transport/io_backend_internal.h"

namespace homarpc::transport {
namespace {

using ::testing::HasSubstr;
using io_test::ScopedBackendEnv;
using io_test::UringAvailable;
using ::testing::UnorderedElementsAreArray;

using Bytes = std::vector<uint8_t>;

constexpr int64_t kGuardNanos = 10 * kNanosPerSecond;  // failure guard, never a timing claim
constexpr size_t kHeaderLen = 16;

// The bytes of test packet `seq`: a 16-byte header naming seq and priority, then a payload
// whose every byte depends on seq and position, so a misplaced or mixed byte is noticed.
Bytes Header(uint32_t seq, uint8_t priority) {
  Bytes h(kHeaderLen, 0);
  std::memcpy(h.data(), &seq, sizeof(seq));
  h[4] = priority;
  std::memcpy(h.data() + 8, "HDR-TEST", 8);
  return h;
}
Bytes Payload(uint32_t seq, size_t len) {
  Bytes p(len);
  for (size_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(seq * 131 + i * 7 + 1);
  return p;
}
Bytes Datagram(uint32_t seq, uint8_t priority, size_t payload_len) {
  Bytes d = Header(seq, priority);
  Bytes p = Payload(seq, payload_len);
  d.insert(d.end(), p.begin(), p.end());
  return d;
}

// A batch of test packets whose payloads live here (the engine's role) until it is destroyed.
class Burst {
 public:
  void Add(const Address& dest, uint8_t priority, uint32_t seq, size_t payload_len) {
    payloads_.push_back(std::make_unique<Bytes>(Payload(seq, payload_len)));
    OutPacket p;
    p.dest = dest;
    p.priority = priority;
    Bytes h = Header(seq, priority);
    p.header_len = static_cast<uint8_t>(h.size());
    std::memcpy(p.header, h.data(), h.size());
    p.payload = absl::MakeConstSpan(*payloads_.back());
    packets_.push_back(p);
    expected_.push_back({dest, Datagram(seq, priority, payload_len)});
  }
  void SendAll(IoBackend& backend) const {
    for (const OutPacket& p : packets_) backend.Send(p);
  }
  // Overwrites every payload byte, as an engine reusing its buffers after Flush() would.
  void Scribble() {
    for (auto& p : payloads_) std::fill(p->begin(), p->end(), 0xEE);
  }
  std::vector<Bytes> ExpectedFor(const Address& dest) const {
    std::vector<Bytes> out;
    for (const auto& [d, bytes] : expected_) {
      if (d == dest) out.push_back(bytes);
    }
    return out;
  }
  size_t size() const { return packets_.size(); }

 private:
  std::vector<std::unique_ptr<Bytes>> payloads_;
  std::vector<OutPacket> packets_;
  std::vector<std::pair<Address, Bytes>> expected_;
};

struct Received {
  Address from;
  Bytes bytes;
};

// Polls until `count` datagrams from `sender` arrived (or the guard expires) and returns
// them. Datagrams from elsewhere are ignored: other test processes on this machine may send to
// a port they used before the kernel gave it to us.
std::vector<Received> ReceiveN(IoBackend& backend, size_t count, const Address& sender) {
  std::vector<Received> got;
  MonotonicClock clock;
  const int64_t deadline = clock.NowNanos() + kGuardNanos;
  while (got.size() < count && clock.NowNanos() < deadline) {
    backend.Poll([&](const Address& from, absl::Span<const uint8_t> bytes) {
      if (from == sender) got.push_back({from, Bytes(bytes.begin(), bytes.end())});
    });
    if (got.size() < count) backend.Wait(10 * kNanosPerMilli);
  }
  return got;
}

std::vector<Bytes> BytesOf(const std::vector<Received>& got) {
  std::vector<Bytes> out;
  for (const Received& r : got) out.push_back(r.bytes);
  return out;
}

// Sends one datagram of `payload_len` bytes from `from` to `to` and flushes: on loopback it is
// in `to`'s socket when this returns.
void SendOneAndFlush(IoBackend& from, const IoBackend& to, uint32_t seq, size_t payload_len) {
  Burst burst;
  burst.Add(to.local_address(), 0, seq, payload_len);
  burst.SendAll(from);
  from.Flush();
}

class IoBackendTest : public io_test::IoBackendFixture {};

TEST_P(IoBackendTest, SingleDatagramRoundTripKeepsBytesAndSender) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->local_address().family(), GetParam().family);
  ASSERT_NE(a->local_address().port(), 0) << "the kernel's chosen port is reported";

  // a -> b: one datagram of 16 header + 100 payload bytes.
  Burst request;
  request.Add(b->local_address(), 0, 1, 100);
  request.SendAll(*a);
  a->Flush();
  std::vector<Received> got = ReceiveN(*b, 1, a->local_address());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, Datagram(1, 0, 100));
  EXPECT_EQ(got[0].from, a->local_address()) << got[0].from.ToString();

  // b -> a, answering the address the datagram came from.
  Burst reply;
  reply.Add(got[0].from, 0, 2, 0);
  reply.SendAll(*b);
  b->Flush();
  std::vector<Received> back = ReceiveN(*a, 1, b->local_address());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].bytes, Datagram(2, 0, 0));
  EXPECT_EQ(back[0].from, b->local_address());

  EXPECT_EQ(a->stats().datagrams_sent, 1u);
  EXPECT_EQ(b->stats().datagrams_received, 1u);
}

TEST_P(IoBackendTest, EqualSizeRunGoesOutAsOneGsoSendAndArrivesAsDatagrams) {
  for (bool gro : {true, false}) {
    SCOPED_TRACE(gro ? "receiver with GRO" : "receiver without GRO");
    auto a = Make();
    IoOptions receiver_options = Options();
    receiver_options.enable_gro = gro;
    auto b = Make(receiver_options);
    ASSERT_TRUE(a && b);

    // 40 packets of 1200 bytes and a shorter last one: one run, one GSO send.
    Burst burst;
    for (uint32_t seq = 0; seq < 40; ++seq) burst.Add(b->local_address(), 0, seq, 1184);
    burst.Add(b->local_address(), 0, 40, 500);
    burst.SendAll(*a);
    a->Flush();
    EXPECT_EQ(a->stats().send_calls, 1u);
    EXPECT_EQ(a->stats().datagrams_sent, 41u);

    // Expect: 41 datagrams with exact bytes, in order, however the kernel batched them.
    std::vector<Received> got = ReceiveN(*b, 41, a->local_address());
    EXPECT_EQ(BytesOf(got), burst.ExpectedFor(b->local_address()));
    EXPECT_EQ(b->stats().datagrams_received, 41u);
    for (const Received& r : got) EXPECT_EQ(r.from, a->local_address());
  }
}

// The receive slots' headers are restored only where the kernel wrote them (RecvBatch): a
// datagram without a GRO note leaves its slot's control length at 0, so a GRO batch that lands
// in that slot later must still get its note and be split, not delivered as one datagram.
TEST_P(IoBackendTest, GroBatchAfterPlainDatagramsAndEmptyPollsIsStillSplit) {
  auto a = Make();
  IoOptions receiver_options = Options();
  receiver_options.enable_gro = true;
  auto b = Make(receiver_options);
  ASSERT_TRUE(a && b);

  Burst plain;  // growing sizes: no two can be one GSO run (only the last may be shorter)
  plain.Add(b->local_address(), 0, 1, 100);
  plain.Add(b->local_address(), 0, 2, 200);
  plain.Add(b->local_address(), 0, 3, 300);
  plain.SendAll(*a);
  a->Flush();
  EXPECT_EQ(BytesOf(ReceiveN(*b, 3, a->local_address())), plain.ExpectedFor(b->local_address()));
  EXPECT_EQ(b->stats().recv_batches, 3u);
  for (int i = 0; i < 3; ++i) b->Poll([](const Address&, absl::Span<const uint8_t>) {});

  Burst run;  // 10 x 1200 bytes: one GSO send, one GRO batch where the receiver batches
  for (uint32_t seq = 10; seq < 20; ++seq) run.Add(b->local_address(), 0, seq, 1184);
  run.SendAll(*a);
  a->Flush();
  EXPECT_EQ(BytesOf(ReceiveN(*b, 10, a->local_address())), run.ExpectedFor(b->local_address()));
  EXPECT_EQ(b->stats().datagrams_received, 13u);
  EXPECT_EQ(b->stats().recv_truncated, 0u);
  // The subject needs the run to have come as a GRO batch (into slot 0, which a plain
  // datagram filled last); a kernel that delivered it datagram by datagram tested nothing.
  if (b->stats().recv_batches == 13) GTEST_SKIP() << "the kernel split the GSO run on receive";
}

TEST_P(IoBackendTest, LongRunsAreCutAtTheSegmentAndByteLimits) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);

  // 100 small packets: at most 64 segments per GSO send, so two sends.
  Burst small;
  for (uint32_t seq = 0; seq < 100; ++seq) small.Add(b->local_address(), 0, seq, 84);
  small.SendAll(*a);
  a->Flush();
  EXPECT_EQ(a->stats().send_calls, 2u);
  EXPECT_EQ(BytesOf(ReceiveN(*b, 100, a->local_address())), small.ExpectedFor(b->local_address()));

  // 150 packets of 1500 bytes: at most ~65000 bytes per send, so 43 per send, 4 sends.
  Burst large;
  for (uint32_t seq = 0; seq < 150; ++seq) large.Add(b->local_address(), 0, 1000 + seq, 1484);
  large.SendAll(*a);
  a->Flush();
  EXPECT_EQ(a->stats().send_calls, 2u + 4u);
  EXPECT_EQ(a->stats().datagrams_sent, 250u);
  EXPECT_EQ(BytesOf(ReceiveN(*b, 150, a->local_address())), large.ExpectedFor(b->local_address()));
}

TEST_P(IoBackendTest, WithoutGsoEveryDatagramIsItsOwnSend) {
  IoOptions options = Options();
  options.enable_gso = false;
  auto a = Make(options);
  auto b = Make();
  ASSERT_TRUE(a && b);
  Burst burst;
  for (uint32_t seq = 0; seq < 10; ++seq) burst.Add(b->local_address(), 0, seq, 1000);
  burst.SendAll(*a);
  a->Flush();
  EXPECT_EQ(a->stats().send_calls, 10u);
  EXPECT_EQ(BytesOf(ReceiveN(*b, 10, a->local_address())), burst.ExpectedFor(b->local_address()));
}

TEST_P(IoBackendTest, FlushLargerThanTheSubmissionQueueSendsEverything) {
  // 1000 messages in one Flush: more than the io_uring SQ (256) and CQ hold at once.
  IoOptions options = Options();
  options.enable_gso = false;
  auto a = Make(options);
  auto b = Make();
  ASSERT_TRUE(a && b);
  Burst burst;
  for (uint32_t seq = 0; seq < 1000; ++seq) burst.Add(b->local_address(), 0, seq, 64);
  burst.SendAll(*a);
  a->Flush();
  EXPECT_EQ(a->stats().send_calls, 1000u);
  EXPECT_EQ(a->stats().datagrams_sent, 1000u);
  EXPECT_THAT(BytesOf(ReceiveN(*b, 1000, a->local_address())),
              UnorderedElementsAreArray(burst.ExpectedFor(b->local_address())));
}

TEST_P(IoBackendTest, MixedDestinationsSizesAndPrioritiesInOneFlush) {
  auto a = Make();
  auto b = Make();
  auto c = Make();
  ASSERT_TRUE(a && b && c);
  const Address to_b = b->local_address();
  const Address to_c = c->local_address();

  Burst burst;
  uint32_t seq = 0;
  for (int i = 0; i < 3; ++i) burst.Add(to_b, 0, seq++, 1000);  // a GSO run to b
  for (int i = 0; i < 2; ++i) burst.Add(to_c, 3, seq++, 500);   // a run to c at priority 3
  burst.Add(to_b, 5, seq++, 1000);                              // same size, other priority
  burst.Add(to_b, 5, seq++, 1200);                              // larger: a new run
  burst.Add(to_c, 0, seq++, 0);                                 // header only
  burst.Add(to_b, 0, seq++, 10);
  burst.Add(to_c, 3, seq++, 500);
  burst.SendAll(*a);
  a->Flush();
  EXPECT_EQ(a->stats().datagrams_sent, burst.size());
  EXPECT_EQ(a->stats().send_errors, 0u);

  const std::vector<Bytes> for_b = burst.ExpectedFor(to_b);
  const std::vector<Bytes> for_c = burst.ExpectedFor(to_c);
  EXPECT_THAT(BytesOf(ReceiveN(*b, for_b.size(), a->local_address())),
              UnorderedElementsAreArray(for_b));
  EXPECT_THAT(BytesOf(ReceiveN(*c, for_c.size(), a->local_address())),
              UnorderedElementsAreArray(for_c));
}

TEST_P(IoBackendTest, PayloadMemoryMayBeReusedRightAfterFlush) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  Burst burst;
  for (uint32_t seq = 0; seq < 20; ++seq) burst.Add(b->local_address(), 0, seq, 1000);
  for (uint32_t seq = 20; seq < 25; ++seq) burst.Add(b->local_address(), 2, seq, 300);
  burst.SendAll(*a);
  a->Flush();
  // The engine reuses its buffers once Flush() has returned; the receiver must not notice.
  burst.Scribble();
  std::vector<Bytes> expected;
  for (uint32_t seq = 0; seq < 20; ++seq) expected.push_back(Datagram(seq, 0, 1000));
  for (uint32_t seq = 20; seq < 25; ++seq) expected.push_back(Datagram(seq, 2, 300));
  EXPECT_THAT(BytesOf(ReceiveN(*b, 25, a->local_address())), UnorderedElementsAreArray(expected));
}

TEST_P(IoBackendTest, PriorityArrivesAsTosOrTrafficClass) {
  auto a = Make();
  ASSERT_TRUE(a);
  // A plain socket that reports the TOS byte / traffic class of each datagram.
  const bool v6 = GetParam().family == AF_INET6;
  int fd = socket(GetParam().family, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  Address bound = Loopback();
  ASSERT_EQ(bind(fd, bound.sockaddr_ptr(), bound.sockaddr_len()), 0);
  socklen_t len = sizeof(sockaddr_in6);
  ASSERT_EQ(getsockname(fd, bound.mutable_sockaddr_ptr(), &len), 0);
  int one = 1;
  ASSERT_EQ(v6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one))
               : setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)),
            0);
  timeval guard{10, 0};
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard)), 0);

  // One datagram per priority, then a GSO run of three at priority 6.
  Burst burst;
  for (uint8_t prio = 0; prio < 8; ++prio) burst.Add(bound, prio, prio, 100 + prio);
  for (uint32_t seq = 8; seq < 11; ++seq) burst.Add(bound, 6, seq, 700);
  burst.SendAll(*a);
  a->Flush();

  for (size_t i = 0; i < burst.size(); ++i) {
    uint8_t data[2048];
    alignas(cmsghdr) unsigned char control[128];
    iovec iov{data, sizeof(data)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(fd, &msg, 0);
    ASSERT_GE(n, static_cast<ssize_t>(kHeaderLen)) << "datagram " << i << " did not arrive";
    const uint8_t priority = data[4];  // the header names the priority it was sent with
    int tos = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (!v6 && c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
        tos = *CMSG_DATA(c);
      } else if (v6 && c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        std::memcpy(&tos, CMSG_DATA(c), sizeof(tos));
      }
    }
    EXPECT_EQ(tos, priority << 5) << "datagram with priority " << int{priority};
  }
  close(fd);
}

TEST_P(IoBackendTest, NotifyFromAnotherThreadWakesABlockedWait) {
  auto b = Make();
  ASSERT_TRUE(b);
  std::promise<void> owning;
  std::promise<void> woke;
  std::future<void> woke_future = woke.get_future();
  std::thread loop([&] {
    b->Poll([](const Address&, absl::Span<const uint8_t>) {});  // this thread owns b now
    owning.set_value();
    b->Wait(-1);
    woke.set_value();
  });
  owning.get_future().wait();
  b->Notify();
  const bool returned = woke_future.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(returned) << "Wait(-1) did not return after Notify()";
  if (!returned) {
    // Unblock the loop with a datagram so that the test can end and report.
    int fd = socket(GetParam().family, SOCK_DGRAM, 0);
    const Address dest = b->local_address();
    (void)sendto(fd, "x", 1, 0, dest.sockaddr_ptr(), dest.sockaddr_len());
    close(fd);
  }
  loop.join();
}

// Also when the Notify() completes an eventfd read that an earlier Wait() armed (uring): the
// completion then waits as task work for the next Wait().
TEST_P(IoBackendTest, NotifyBeforeWaitIsNotLostByAnInterveningPoll) {
  for (bool read_armed : {false, true}) {
    SCOPED_TRACE(read_armed ? "eventfd read armed by an earlier Wait()" : "nothing armed");
    auto b = Make();
    ASSERT_TRUE(b);
    b->Poll([](const Address&, absl::Span<const uint8_t>) {});
    if (read_armed) b->Wait(kNanosPerMilli);  // arms the read (uring) and times out
    // Notify lands after the loop looked for work; the loop still polls once before it waits.
    b->Notify();
    EXPECT_EQ(b->Poll([](const Address&, absl::Span<const uint8_t>) {}), 0);
    MonotonicClock clock;
    const int64_t start = clock.NowNanos();
    b->Wait(kGuardNanos);
    EXPECT_LT(clock.NowNanos() - start, kGuardNanos / 2) << "the Notify() was lost";
  }
}

// Both backends stop watching the socket while the loop is awake (uring: a poll that fired is
// not re-armed until Wait(); epoll: an empty Poll() 200 us or more after a Wait() takes the
// socket out of the set)
// and watch it again in Wait(). A datagram that lands in between must still end that Wait()
// at once, whether the Wait() before ended by its timeout (uring: poll still armed) or by a
// datagram (uring: poll consumed, armed afresh on a readable socket).
TEST_P(IoBackendTest, DatagramThatArrivedAfterTheLastPollEndsTheNextWait) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  size_t seen = 0;
  const auto count = [&seen](const Address&, absl::Span<const uint8_t>) { ++seen; };
  MonotonicClock clock;
  uint32_t seq = 0;
  // Sends one datagram to b, then checks that Wait() ends at once and Poll() reads it.
  const auto send_then_wait = [&] {
    SendOneAndFlush(*a, *b, seq++, 50);
    const int64_t start = clock.NowNanos();
    b->Wait(kGuardNanos);
    EXPECT_LT(clock.NowNanos() - start, kGuardNanos / 2) << "the datagram did not end Wait()";
    EXPECT_EQ(b->Poll(count), 1);  // it is in the socket whatever ended the Wait()
  };
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    b->Poll(count);                // awake, socket empty (epoll: still watched so soon after)
    b->Wait(kNanosPerMilli);       // watched for a moment; ends by its timeout
    EXPECT_EQ(b->Poll(count), 0);  // empty again
    send_then_wait();              // after a Wait() that timed out
    send_then_wait();              // after a Wait() that a datagram ended
  }
  EXPECT_EQ(seen, 6u);
}

// epoll: a loop that sleeps between sparse datagrams keeps its socket in the epoll set (taking
// it out and back costs two system calls per datagram, and a datagram that arrives while the
// loop sleeps pays epoll's callback either way); one that stays awake past 200 us takes it
// out. Seen through IoStats::watch_changes.
TEST_P(IoBackendTest, EpollKeepsWatchingThroughShortWakesAndStopsForLongOnes) {
  if (GetParam().kind != IoKind::kEpoll) GTEST_SKIP() << "an epoll backend's watch";
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  size_t seen = 0;
  const auto count = [&seen](const Address&, absl::Span<const uint8_t>) { ++seen; };
  constexpr int kDatagrams = 10;
  for (int i = 0; i < kDatagrams; ++i) {
    SendOneAndFlush(*a, *b, static_cast<uint32_t>(i), 50);
    b->Wait(kGuardNanos);  // watched from here on
    EXPECT_EQ(b->Poll(count), 1);
    EXPECT_EQ(b->Poll(count), 0);  // empty right after the wake: still watched
  }
  EXPECT_EQ(seen, static_cast<size_t>(kDatagrams));
  // One add at the first Wait(), then none; a stall over 200 us between a Wait() and the
  // Poll() after it costs a removal and an add: the bound allows two. Removing the socket at
  // every empty Poll() made 2 x kDatagrams.
  const uint64_t changes = b->stats().watch_changes;
  EXPECT_GE(changes, 1u);
  EXPECT_LE(changes, 5u);
  // Awake and reading for 1 ms: the socket leaves the set, once.
  MonotonicClock clock;
  const int64_t until = clock.NowNanos() + kNanosPerMilli;
  do {
    b->Poll(count);
  } while (clock.NowNanos() < until);
  b->Poll(count);  // at least one empty poll over 200 us after the wake, however preempted
  EXPECT_EQ(b->stats().watch_changes, changes + (changes % 2 == 1 ? 1 : 0));
  EXPECT_EQ(b->stats().watch_changes % 2, 0u) << "out of the set";
  // A datagram that lands while it is out still ends the next Wait() at once: adding the
  // socket back checks readiness.
  SendOneAndFlush(*a, *b, kDatagrams, 50);
  const int64_t start = clock.NowNanos();
  b->Wait(kGuardNanos);
  EXPECT_LT(clock.NowNanos() - start, kGuardNanos / 2) << "the datagram did not end Wait()";
  EXPECT_EQ(b->stats().watch_changes % 2, 1u) << "in the set again";
  EXPECT_EQ(b->Poll(count), 1);
}

// LastArrivalNanos: the kernel's receive timestamp of the last datagram read. After
// ReadOneNext() the first Poll() reads one datagram, so the stamp then dates the one that
// ended the sleep, not the latest of a batch (Loop::IdleGap judges its idle time by it).
TEST_P(IoBackendTest, AfterReadOneNextAPollReadsOneDatagramAndLastArrivalDatesIt) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  MonotonicClock clock;
  size_t seen = 0;
  const auto count = [&seen](const Address&, absl::Span<const uint8_t>) { ++seen; };
  uint32_t seq = 0;
  const auto send = [&] { SendOneAndFlush(*a, *b, seq++, 40); };
  // The kernel starts stamping from a work item after the first socket asks: until a datagram
  // read comes back stamped, LastArrivalNanos() says 0.
  const int64_t give_up = clock.NowNanos() + kNanosPerSecond;
  bool stamped = false;
  while (!stamped && clock.NowNanos() < give_up) {
    send();
    ASSERT_EQ(b->Poll(count), 1);
    stamped = b->LastArrivalNanos() != 0;
  }
  if (!stamped) GTEST_SKIP() << "this kernel gave no receive timestamp within a second";
  seen = 0;

  const int64_t before_first = clock.NowNanos();
  send();
  const int64_t after_first = clock.NowNanos();
  // Later than the first by more than the timestamps' conversion error, without a sleep:
  // spin until 2 ms have passed.
  while (clock.NowNanos() - after_first < 2 * kNanosPerMilli) {
  }
  send();
  send();

  b->ReadOneNext();
  b->Wait(kGuardNanos);  // ends at once: datagrams are waiting
  ASSERT_EQ(b->Poll(count), 1) << "the first poll after ReadOneNext reads one datagram";
  const int64_t first_arrival = b->LastArrivalNanos();
  ASSERT_NE(first_arrival, 0) << "no receive timestamp";
  // The first datagram's own arrival (conversion slack: 0.5 ms).
  EXPECT_GE(first_arrival, before_first - kNanosPerMilli / 2);
  EXPECT_LE(first_arrival, after_first + kNanosPerMilli / 2);

  EXPECT_EQ(b->Poll(count), 2) << "after it, polls read whole batches again";
  const int64_t last_arrival = b->LastArrivalNanos();
  EXPECT_GE(last_arrival, first_arrival + kNanosPerMilli);
  EXPECT_EQ(seen, 3u);
}

// Datagrams leave with DF and are never fragmented by this host (io_backend_internal.h): the
// socket's path-MTU discovery mode is PROBE, for IPv4 and, on an IPv6 socket, for both
// families (a dual-stack "::" socket sends to IPv4 peers through the IPv4 stack).
// netns_test shows what it means on a real link.
TEST(OpenUdpSocketTest, EveryDatagramIsSentWithDontFragmentAndNoLocalFragmentation) {
  sockaddr_in6 any6{};
  any6.sin6_family = AF_INET6;
  any6.sin6_addr = in6addr_any;
  const Address dual_stack =
      Address::FromSockaddr(reinterpret_cast<const sockaddr*>(&any6), sizeof(any6));
  for (const Address& bind : {Address::Loopback4(0), Address::Loopback6(0), dual_stack}) {
    SCOPED_TRACE(bind.ToString());
    IoOptions options;
    options.bind_address = bind;
    Address bound;
    absl::StatusOr<int> fd = io_internal::OpenUdpSocket(options, &bound);
    if (!fd.ok() && bind.is_v6()) GTEST_SKIP() << "no IPv6 loopback: " << fd.status();
    ASSERT_TRUE(fd.ok()) << fd.status();
    int mode = -1;
    socklen_t len = sizeof(mode);
    ASSERT_EQ(getsockopt(*fd, IPPROTO_IP, IP_MTU_DISCOVER, &mode, &len), 0);
    EXPECT_EQ(mode, IP_PMTUDISC_PROBE);
    if (bind.is_v6()) {
      len = sizeof(mode);
      ASSERT_EQ(getsockopt(*fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &mode, &len), 0);
      EXPECT_EQ(mode, IPV6_PMTUDISC_PROBE);
    }
    close(*fd);
  }
}

TEST_P(IoBackendTest, DatagramWakesABlockedWait) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  std::promise<void> waiting;
  std::promise<void> woke;
  std::future<void> woke_future = woke.get_future();
  int received = 0;
  std::thread loop([&] {
    b->Poll([](const Address&, absl::Span<const uint8_t>) {});  // this thread owns b now
    waiting.set_value();
    b->Wait(-1);
    woke.set_value();
    received = b->Poll([](const Address&, absl::Span<const uint8_t>) {});
  });
  waiting.get_future().wait();
  Burst burst;
  burst.Add(b->local_address(), 0, 7, 20);
  burst.SendAll(*a);
  a->Flush();
  const bool returned = woke_future.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(returned) << "Wait(-1) did not return when a datagram arrived";
  if (!returned) b->Notify();  // let the loop end so that the test can report
  loop.join();
  if (returned) EXPECT_EQ(received, 1);
}

TEST_P(IoBackendTest, WaitWithNothingPendingLastsAboutTheTimeout) {
  auto b = Make();
  ASSERT_TRUE(b);
  b->Poll([](const Address&, absl::Span<const uint8_t>) {});
  MonotonicClock clock;
  for (int64_t timeout : {30 * kNanosPerMilli, 2 * kNanosPerMilli + 500 * kNanosPerMicro}) {
    // A stray datagram (another process's traffic to a port we reused) may end a Wait early,
    // as the contract allows; such an attempt does not count, but Poll() must show it.
    bool clean = false;
    for (int attempt = 0; attempt < 5 && !clean; ++attempt) {
      const int64_t start = clock.NowNanos();
      b->Wait(timeout);
      const int64_t elapsed = clock.NowNanos() - start;
      if (b->Poll([](const Address&, absl::Span<const uint8_t>) {}) > 0) continue;
      clean = true;
      // Only a loose lower bound: a loaded machine may wake us late, never much early.
      EXPECT_GE(elapsed, timeout * 8 / 10) << "timeout " << timeout << " ns";
    }
    EXPECT_TRUE(clean) << "every attempt was cut short by stray datagrams";
  }
}

TEST_P(IoBackendTest, BurstLargerThanTheReceiveBuffersArrivesIntact) {
  auto a = Make();
  IoOptions options = Options();
  options.recv_buffer_count = 4;
  options.recv_buffer_size = 2048;
  options.enable_gro = false;
  auto b = Make(options);
  ASSERT_TRUE(a && b);

  // 64 datagrams wait in b's socket before b reads: one receive call (4 buffers) cannot take
  // them all.
  Burst burst;
  for (uint32_t seq = 0; seq < 64; ++seq) burst.Add(b->local_address(), 0, seq, 1000);
  burst.SendAll(*a);
  a->Flush();
  std::vector<Received> got = ReceiveN(*b, 64, a->local_address());

  // The socket buffer (8 MiB) holds them all, so nothing may be lost, and counts add up.
  EXPECT_THAT(BytesOf(got), UnorderedElementsAreArray(burst.ExpectedFor(b->local_address())));
  const IoStats stats = b->stats();
  EXPECT_EQ(stats.datagrams_received, 64u);
  EXPECT_EQ(stats.recv_truncated, 0u);
  EXPECT_EQ(stats.recv_batches, 64u);  // GRO off: a buffer per datagram
}

TEST_P(IoBackendTest, DatagramLargerThanAReceiveBufferIsCountedNotDelivered) {
  for (bool gro : {true, false}) {
    SCOPED_TRACE(gro ? "receiver with GRO" : "receiver without GRO");
    auto a = Make();
    IoOptions options = Options();
    options.recv_buffer_size = 1024;
    options.enable_gro = gro;
    auto b = Make(options);
    ASSERT_TRUE(a && b);

    // One 2000-byte datagram, then (separately flushed) a small one that fits.
    Burst big;
    big.Add(b->local_address(), 0, 1, 2000 - kHeaderLen);
    big.SendAll(*a);
    a->Flush();
    Burst small;
    small.Add(b->local_address(), 0, 2, 100);
    small.SendAll(*a);
    a->Flush();

    std::vector<Received> got = ReceiveN(*b, 1, a->local_address());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].bytes, Datagram(2, 0, 100)) << "the oversized datagram was delivered";
    EXPECT_EQ(b->stats().recv_truncated, 1u);
    EXPECT_EQ(b->stats().datagrams_received, 1u);
  }
}

TEST_P(IoBackendTest, GroBatchLargerThanABufferDeliversWhatFitsAndCountsTheRest) {
  auto a = Make();
  IoOptions options = Options();
  options.recv_buffer_size = 1024;
  auto b = Make(options);
  ASSERT_TRUE(a && b);
  // Ten 300-byte datagrams in one GSO send: a GRO receiver may get them as one 3000-byte batch.
  Burst burst;
  for (uint32_t seq = 0; seq < 10; ++seq) burst.Add(b->local_address(), 0, seq, 284);
  burst.SendAll(*a);
  a->Flush();
  Burst marker;
  marker.Add(b->local_address(), 1, 99, 10);
  marker.SendAll(*a);
  a->Flush();

  std::vector<Received> got;
  MonotonicClock clock;
  const int64_t deadline = clock.NowNanos() + kGuardNanos;
  bool marker_seen = false;
  while (!marker_seen && clock.NowNanos() < deadline) {
    b->Poll([&](const Address& from, absl::Span<const uint8_t> bytes) {
      if (from != a->local_address()) return;  // stray traffic from another process
      Bytes copy(bytes.begin(), bytes.end());
      if (copy == Datagram(99, 1, 10)) {
        marker_seen = true;
      } else {
        got.push_back({from, copy});
      }
    });
    if (!marker_seen) b->Wait(10 * kNanosPerMilli);
  }
  ASSERT_TRUE(marker_seen);
  // Every delivered datagram is whole and in order; the others are counted as truncated.
  const std::vector<Bytes> expected = burst.ExpectedFor(b->local_address());
  ASSERT_LE(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].bytes, expected[i]) << i;
  EXPECT_EQ(got.size() + b->stats().recv_truncated, expected.size());
}

TEST_P(IoBackendTest, SendingToAClosedPortIsHarmless) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  // A port that was bound and released: nobody listens there.
  int fd = socket(GetParam().family, SOCK_DGRAM, 0);
  Address closed = Loopback();
  ASSERT_EQ(bind(fd, closed.sockaddr_ptr(), closed.sockaddr_len()), 0);
  socklen_t len = sizeof(sockaddr_in6);
  ASSERT_EQ(getsockname(fd, closed.mutable_sockaddr_ptr(), &len), 0);
  close(fd);

  for (int round = 0; round < 2; ++round) {  // the second round meets any ICMP of the first
    Burst burst;
    for (uint32_t seq = 0; seq < 3; ++seq) burst.Add(closed, 0, seq, 100);
    burst.Add(b->local_address(), 0, 10 + round, 100);
    burst.SendAll(*a);
    a->Flush();
    std::vector<Received> got = ReceiveN(*b, 1, a->local_address());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].bytes, Datagram(10 + round, 0, 100));
    EXPECT_EQ(a->Poll([](const Address&, absl::Span<const uint8_t>) {}), 0);
  }
  const IoStats stats = a->stats();
  EXPECT_EQ(stats.datagrams_sent + stats.send_errors, 8u);
}

TEST_P(IoBackendTest, PeerOfTheOtherFamilyIsCountedAsASendError) {
  auto a = Make();
  ASSERT_TRUE(a);
  Burst burst;
  burst.Add(GetParam().family == AF_INET6 ? Address::Loopback4(9) : Address::Loopback6(9), 0, 1,
            10);
  burst.SendAll(*a);
  a->Flush();
  EXPECT_EQ(a->stats().send_errors, 1u);
  EXPECT_EQ(a->stats().datagrams_sent, 0u);
}

TEST_P(IoBackendTest, ReusePortLetsTwoBackendsShareAPort) {
  IoOptions options = Options();
  options.reuse_port = true;
  auto first = Make(options);
  ASSERT_TRUE(first);
  options.bind_address = first->local_address();
  auto second = Make(options);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->local_address(), first->local_address());

  // Without SO_REUSEPORT the port is taken: EADDRINUSE, through ErrnoToStatus.
  IoOptions exclusive = Options();
  exclusive.bind_address = first->local_address();
  absl::StatusOr<std::unique_ptr<IoBackend>> third = CreateIoBackend(exclusive);
  EXPECT_EQ(third.status().code(), ErrnoToStatus(EADDRINUSE, "").code()) << third.status();
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("bind"));

  // Traffic to the port reaches one of the two, and none is lost.
  auto a = Make();
  ASSERT_TRUE(a);
  Burst burst;
  for (uint32_t seq = 0; seq < 20; ++seq) burst.Add(first->local_address(), 0, seq, 50);
  burst.SendAll(*a);
  a->Flush();
  size_t received = 0;
  const auto count = [&](const Address& from, absl::Span<const uint8_t>) {
    if (from == a->local_address()) ++received;
  };
  MonotonicClock clock;
  const int64_t deadline = clock.NowNanos() + kGuardNanos;
  while (received < 20 && clock.NowNanos() < deadline) {
    first->Poll(count);
    second->Poll(count);
    if (received < 20) first->Wait(kNanosPerMilli);
  }
  EXPECT_EQ(received, 20u);
}

INSTANTIATE_TEST_SUITE_P(Backends, IoBackendTest, io_test::kAllIoParams, io_test::IoParamName);

// The factory: IoOptions::kind, the HOMARPC_IO_BACKEND override and its bad values.
TEST(CreateIoBackendTest, EnvironmentOverridesTheConfiguredKind) {
  IoOptions options;
  options.kind = IoKind::kUring;
  {
    ScopedBackendEnv env("epoll");
    absl::StatusOr<std::unique_ptr<IoBackend>> backend = CreateIoBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->kind(), IoKind::kEpoll);
  }
  options.kind = IoKind::kEpoll;
  if (UringAvailable()) {
    ScopedBackendEnv env("uring");
    absl::StatusOr<std::unique_ptr<IoBackend>> backend = CreateIoBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->kind(), IoKind::kUring);
  }
  {
    ScopedBackendEnv env(nullptr);
    absl::StatusOr<std::unique_ptr<IoBackend>> backend = CreateIoBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->kind(), IoKind::kEpoll) << "without the variable, options decide";
  }
}

TEST(CreateIoBackendTest, BadEnvironmentValueIsAnErrorNamingIt) {
  ScopedBackendEnv env("io_urin");
  absl::StatusOr<std::unique_ptr<IoBackend>> backend = CreateIoBackend(IoOptions{});
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(backend.status().message()), HasSubstr("io_urin"));
}

TEST(CreateIoBackendTest, AutoPrefersIoUring) {
  ScopedBackendEnv env(nullptr);
  absl::StatusOr<std::unique_ptr<IoBackend>> backend = CreateIoBackend(IoOptions{});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->kind(), UringAvailable() ? IoKind::kUring : IoKind::kEpoll);
}

TEST(CreateIoBackendTest, RejectsAnUnsetAddressAndReceiveBufferCountsOutOfRange) {
  ScopedBackendEnv env(nullptr);
  IoOptions options;
  options.bind_address = Address();
  EXPECT_EQ(CreateIoBackend(options).status().code(), absl::StatusCode::kInvalidArgument);
  for (uint32_t count : {0u, 1025u}) {  // recvmmsg takes at most 1024 messages
    options = IoOptions{};
    options.recv_buffer_count = count;
    EXPECT_EQ(CreateIoBackend(options).status().code(), absl::StatusCode::kInvalidArgument)
        << count;
  }
  options = IoOptions{};
  options.recv_buffer_count = 1024;
  EXPECT_TRUE(CreateIoBackend(options).ok());
}

TEST(CreateIoBackendTest, KindNames) {
  EXPECT_STREQ(IoKindName(IoKind::kAuto), "auto");
  EXPECT_STREQ(IoKindName(IoKind::kUring), "uring");
  EXPECT_STREQ(IoKindName(IoKind::kEpoll), "epoll");
}

TEST(LookupRouteTest, LoopbackRouteHasLoopbacksMtuAndIsLocal) {
  // The loopback device's MTU is 65536 on Linux; IPv4 reports it capped at its largest packet.
  const Route v4 = LookupRoute(Address::Loopback4(9));
  EXPECT_TRUE(v4.mtu == 65535u || v4.mtu == 65536u) << v4.mtu;
  EXPECT_TRUE(v4.local);
  // Another 127/8 address: the kernel picks 127.0.0.1 as the source, still this host.
  EXPECT_TRUE(LookupRoute(Address::Parse("127.0.0.2:9").value()).local);
  const int v6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (v6 >= 0) {
    close(v6);
    const Route route = LookupRoute(Address::Loopback6(9));
    // {} where IPv6 is compiled in but disabled on lo (no route); otherwise lo's MTU, local.
    EXPECT_TRUE(route.mtu == 0 || route.mtu >= 65535u) << route.mtu;
    if (route.mtu != 0) EXPECT_TRUE(route.local);
  }
}

TEST(LookupRouteTest, OwnNonLoopbackAddressIsLocal) {
  // An address of one of this host's interfaces other than lo: the kernel routes it through
  // lo (the local table), and LookupRoute must say so. Skipped where there is none.
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  Address own;
  for (ifaddrs* i = list; i != nullptr && !own.is_set(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET ||
        (i->ifa_flags & IFF_LOOPBACK) != 0 || (i->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    own = Address::FromSockaddr(i->ifa_addr, sizeof(sockaddr_in));
  }
  freeifaddrs(list);
  if (!own.is_set()) GTEST_SKIP() << "no IPv4 address on an interface other than lo";
  own.set_port(9);
  ASSERT_FALSE(own.is_loopback());
  EXPECT_TRUE(LookupRoute(own).local) << own.ToString();
}

// RouteCache on a manual clock with a counting lookup that answers an MTU of 1000 + the
// address's last byte, local for odd last bytes.
struct RouteCacheTest : ::testing::Test {
  RouteCache Make(RouteCache::Options o = RouteCache::Options()) {
    return RouteCache(
        &clock,
        [this](const Address& a) {
          ++asked;
          const uint32_t last =
              ntohl(reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr())->sin_addr.s_addr) &
              0xff;
          return Route{1000u + last, last % 2 == 1};
        },
        o);
  }
  static uint32_t Get(RouteCache& cache, const char* address) {
    return cache.Get(Address::Parse(address).value()).mtu;
  }
  ManualClock clock;
  int asked = 0;
};

TEST_F(RouteCacheTest, OneLookupPerHostWhateverThePort) {
  RouteCache cache = Make();
  EXPECT_EQ(Get(cache, "10.0.0.1:1000"), 1001u);
  EXPECT_EQ(Get(cache, "10.0.0.1:2000"), 1001u);
  EXPECT_EQ(Get(cache, "10.0.0.2:1000"), 1002u);
  EXPECT_EQ(asked, 2);
  // The whole route is remembered, not just its MTU.
  EXPECT_TRUE(cache.Get(Address::Parse("10.0.0.1:3000").value()).local);
  EXPECT_FALSE(cache.Get(Address::Parse("10.0.0.2:3000").value()).local);
  EXPECT_EQ(asked, 2);
}

TEST_F(RouteCacheTest, EntriesExpireAfterTheTtl) {
  RouteCache::Options o;
  o.ttl_nanos = 1000;
  RouteCache cache = Make(o);
  Get(cache, "10.0.0.1:1");
  clock.Advance(999);
  Get(cache, "10.0.0.1:1");
  EXPECT_EQ(asked, 1);
  clock.Advance(1);
  Get(cache, "10.0.0.1:1");
  EXPECT_EQ(asked, 2);  // the route may have changed: asked again
}

TEST_F(RouteCacheTest, LookupsAreRateLimitedAndUnknownBeyond) {
  RouteCache::Options o;
  o.max_lookups_per_second = 3;
  RouteCache cache = Make(o);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_NE(Get(cache, absl::StrCat("10.0.0.", i, ":1").c_str()), 0u);
  }
  // A fourth new host within the second: unknown (the engine falls back to Config::mtu and
  // paces it), and not remembered as unknown.
  const Route unknown = cache.Get(Address::Parse("10.0.0.5:1").value());
  EXPECT_EQ(unknown.mtu, 0u);
  EXPECT_FALSE(unknown.local);
  EXPECT_EQ(Get(cache, "10.0.0.1:9"), 1001u);  // cached hosts still fine
  EXPECT_EQ(asked, 3);
  clock.Advance(kNanosPerSecond);
  EXPECT_EQ(Get(cache, "10.0.0.5:1"), 1005u);
  EXPECT_EQ(asked, 4);
}

TEST_F(RouteCacheTest, IsBoundedByMaxEntries) {
  RouteCache::Options o;
  o.max_entries = 2;
  RouteCache cache = Make(o);
  Get(cache, "10.0.0.1:1");
  Get(cache, "10.0.0.2:1");
  Get(cache, "10.0.0.3:1");  // full: starts afresh, keeps only this one
  EXPECT_EQ(asked, 3);
  Get(cache, "10.0.0.3:1");
  EXPECT_EQ(asked, 3);
  Get(cache, "10.0.0.1:1");
  EXPECT_EQ(asked, 4);
}

TEST(LookupRouteTest, UnknownWhenThereIsNoRouteOrAddress) {
  const Route unset = LookupRoute(Address());
  EXPECT_EQ(unset.mtu, 0u);
  EXPECT_FALSE(unset.local);
  // A reserved address (240/4): with no route connect() fails and the answer is {}; a machine
  // with a default route gives that route's MTU, which is never below IPv4's minimum. Either
  // way it is not this host.
  const Route route = LookupRoute(Address::Parse("240.0.0.1:9").value());
  EXPECT_TRUE(route.mtu == 0 || route.mtu >= 576u) << route.mtu;
  EXPECT_FALSE(route.local);
}

}  // namespace
}  // namespace homarpc::transport
