// Tests for transport/fabric.{h,cc}: the in-memory network used by protocol tests.
//
// Every test drives a ManualClock through the Fabric and uses small fake nodes (no engine)
// that record what they receive, with the clock time, and can send tagged packets: an 8-byte
// header whose first 4 bytes are a big-endian tag, then a payload derived from the tag.
#include "transport/fabric.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/address.h"
#include "transport/clock.h"
#include "transport/packet_sink.h"

namespace homarpc::transport {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr int64_t kStart = 1'000'000'000;  // ManualClock's default origin
constexpr int64_t kUs = kNanosPerMicro;
constexpr size_t kHeaderLen = 8;

Address Addr(const char* text) {
  auto address = Address::Parse(text);
  EXPECT_TRUE(address.ok()) << text;
  return *address;
}

const Address kA = Addr("10.0.0.1:1000");
const Address kB = Addr("10.0.0.2:1000");
const Address kC = Addr("10.0.0.3:1000");

uint32_t TagOf(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < 4) return 0xffffffffu;
  return uint32_t{bytes[0]} << 24 | uint32_t{bytes[1]} << 16 | uint32_t{bytes[2]} << 8 |
         uint32_t{bytes[3]};
}

// The bytes a tagged packet of `size` bytes carries (header then payload), as sent.
std::vector<uint8_t> TaggedBytes(uint32_t tag, size_t size) {
  std::vector<uint8_t> bytes(std::max(size, kHeaderLen));
  bytes[0] = tag >> 24;
  bytes[1] = tag >> 16;
  bytes[2] = tag >> 8;
  bytes[3] = tag;
  for (size_t i = 4; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(tag * 7 + i);
  return bytes;
}

struct Received {
  int64_t time;
  Address from;
  uint32_t tag;
  std::vector<uint8_t> bytes;
};

// A host that records deliveries and timer firings, and sends tagged packets on request.
class FakeNode : public FabricNode {
 public:
  explicit FakeNode(const ManualClock* clock) : clock_(clock) {}

  void Deliver(const Address& from, absl::Span<const uint8_t> bytes) override {
    received.push_back({clock_->NowNanos(), from, TagOf(bytes), {bytes.begin(), bytes.end()}});
    if (on_deliver) on_deliver(from, bytes);
  }
  int64_t NextTimerNanos() const override { return timer; }
  void OnTimer() override {
    fired.push_back(clock_->NowNanos());
    if (on_timer) {
      on_timer();
    } else {
      timer = INT64_MAX;
    }
  }
  void AfterStep() override { ++after_steps; }

  // Sends a tagged packet of `size` bytes (>= 8). The payload lives in a local buffer that is
  // scribbled over right after Send, so a fabric that kept the span would deliver garbage.
  void Send(const Address& dest, uint32_t tag, size_t size = 100, uint8_t priority = 0) {
    std::vector<uint8_t> bytes = TaggedBytes(tag, size);
    OutPacket packet;
    packet.dest = dest;
    packet.priority = priority;
    packet.header_len = kHeaderLen;
    std::copy(bytes.begin(), bytes.begin() + kHeaderLen, packet.header);
    std::vector<uint8_t> payload(bytes.begin() + kHeaderLen, bytes.end());
    packet.payload = payload;
    sink->Send(packet);
    std::fill(payload.begin(), payload.end(), 0xEE);
  }

  std::vector<uint32_t> tags() const {
    std::vector<uint32_t> out;
    for (const auto& r : received) out.push_back(r.tag);
    return out;
  }

  PacketSink* sink = nullptr;
  std::vector<Received> received;
  std::vector<int64_t> fired;
  int after_steps = 0;
  int64_t timer = INT64_MAX;
  std::function<void(const Address&, absl::Span<const uint8_t>)> on_deliver;
  std::function<void()> on_timer;

 private:
  const ManualClock* clock_;
};

// Three hosts A, B, C on one fabric.
struct Net {
  explicit Net(FabricOptions options = {}, LinkOptions link_a = {}, LinkOptions link_b = {},
               LinkOptions link_c = {})
      : fabric(&clock, options) {
    a.sink = fabric.Attach(kA, &a, link_a);
    b.sink = fabric.Attach(kB, &b, link_b);
    c.sink = fabric.Attach(kC, &c, link_c);
  }
  ManualClock clock;
  Fabric fabric;
  FakeNode a{&clock}, b{&clock}, c{&clock};
};

// ---- Delivery and latency ----

TEST(Fabric, DeliversAfterBaseLatencyAndCopiesAtSend) {
  Net net;  // default base latency: 2 us, no faults, infinite links
  // A sends one 1000-byte packet to B at kStart; FakeNode::Send scribbles its payload buffer
  // right after Send returns.
  net.a.Send(kB, 42, 1000);
  EXPECT_FALSE(net.fabric.Idle());
  EXPECT_EQ(net.fabric.PacketsInFlight(), 1u);
  EXPECT_EQ(net.fabric.NextEventNanos(), kStart + 2 * kUs);
  EXPECT_TRUE(net.b.received.empty());

  // Expect: one step moves the clock to kStart + 2 us and delivers the original bytes.
  EXPECT_TRUE(net.fabric.Step());
  EXPECT_EQ(net.clock.NowNanos(), kStart + 2 * kUs);
  ASSERT_EQ(net.b.received.size(), 1u);
  EXPECT_EQ(net.b.received[0].time, kStart + 2 * kUs);
  EXPECT_EQ(net.b.received[0].from, kA);
  EXPECT_EQ(net.b.received[0].bytes, TaggedBytes(42, 1000));
  EXPECT_TRUE(net.a.received.empty());
  EXPECT_TRUE(net.c.received.empty());
  // Every attached node saw the end of the step.
  EXPECT_EQ(net.a.after_steps, 1);
  EXPECT_EQ(net.b.after_steps, 1);

  // Expect: nothing left; the next step does nothing and leaves the clock alone.
  EXPECT_TRUE(net.fabric.Idle());
  EXPECT_FALSE(net.fabric.Step());
  EXPECT_EQ(net.clock.NowNanos(), kStart + 2 * kUs);
  EXPECT_EQ(net.fabric.stats().packets_sent, 1u);
  EXPECT_EQ(net.fabric.stats().packets_delivered, 1u);
  EXPECT_EQ(net.fabric.stats().bytes_sent, 1000u);
  EXPECT_EQ(net.fabric.stats().bytes_delivered, 1000u);
  EXPECT_EQ(net.fabric.stats().dropped_total(), 0u);
}

TEST(Fabric, SimultaneousDeliveriesRunInSendOrderWithinOneStep) {
  FabricOptions options;
  options.base_latency_nanos = 5 * kUs;
  Net net(options);
  // A sends tags 1, 2 to B and C sends 3 to B, all at kStart: they all arrive at kStart + 5 us.
  net.a.Send(kB, 1);
  net.a.Send(kB, 2);
  net.c.Send(kB, 3);
  // Expect: one step delivers all three in send order.
  EXPECT_TRUE(net.fabric.Step());
  EXPECT_EQ(net.clock.NowNanos(), kStart + 5 * kUs);
  EXPECT_THAT(net.b.tags(), ElementsAre(1, 2, 3));
  EXPECT_EQ(net.b.received[2].from, kC);
  EXPECT_EQ(net.b.after_steps, 1);
}

TEST(Fabric, NodeRepliesFromInsideDeliver) {
  Net net;
  // B echoes every packet back to its sender with tag + 1000, synchronously from Deliver.
  net.b.on_deliver = [&](const Address& from, absl::Span<const uint8_t> bytes) {
    net.b.Send(from, TagOf(bytes) + 1000);
  };
  net.a.Send(kB, 7);
  // Expect: A gets the echo one round trip (2 x 2 us) after it sent.
  EXPECT_TRUE(net.fabric.RunUntil([&] { return !net.a.received.empty(); }, 1 * kNanosPerMilli));
  EXPECT_EQ(net.clock.NowNanos(), kStart + 4 * kUs);
  ASSERT_EQ(net.a.received.size(), 1u);
  EXPECT_EQ(net.a.received[0].tag, 1007u);
  EXPECT_EQ(net.a.received[0].from, kB);
}

TEST(Fabric, ZeroLatencyPingPongStillAdvancesTheClock) {
  // Base latency 0 is clamped to 1 ns, so a pair of nodes that answer every packet at once
  // cannot pin the clock: each hop is a new step, 1 ns later.
  FabricOptions options;
  options.base_latency_nanos = 0;
  Net net(options);
  int bounces = 0;
  net.a.on_deliver = [&](const Address& from, absl::Span<const uint8_t>) {
    ++bounces;
    net.a.Send(from, bounces);
  };
  net.b.on_deliver = [&](const Address& from, absl::Span<const uint8_t>) {
    ++bounces;
    net.b.Send(from, bounces);
  };
  net.a.Send(kB, 0);
  // Expect: 100 bounces take exactly 100 steps and 100 ns; an endless exchange still stops at
  // RunUntil's limit.
  int steps = 0;
  while (bounces < 100) {
    ASSERT_TRUE(net.fabric.Step());
    ++steps;
  }
  EXPECT_EQ(steps, 100);
  EXPECT_EQ(net.clock.NowNanos(), kStart + 100);
  EXPECT_FALSE(net.fabric.RunUntil([] { return false; }, 1 * kUs));
  EXPECT_EQ(net.clock.NowNanos(), kStart + 100 + kUs);
  EXPECT_EQ(bounces, 1100);
}

// ---- Timers ----

TEST(Fabric, TimersFireAtTheirTimeAfterDeliveriesOfTheSameStep) {
  Net net;
  std::vector<std::string> order;
  net.b.on_deliver = [&](const Address&, absl::Span<const uint8_t>) { order.push_back("deliver"); };
  net.b.on_timer = [&] {
    order.push_back("timer");
    net.b.timer = INT64_MAX;
  };
  // B's timer is due at kStart + 2 us, the same time A's packet arrives; A's at kStart + 5 us.
  net.b.timer = kStart + 2 * kUs;
  net.a.timer = kStart + 5 * kUs;
  net.a.Send(kB, 1);

  // Expect: step 1 at kStart + 2 us delivers first, then fires B's timer.
  EXPECT_TRUE(net.fabric.Step());
  EXPECT_EQ(net.clock.NowNanos(), kStart + 2 * kUs);
  EXPECT_THAT(order, ElementsAre("deliver", "timer"));
  EXPECT_THAT(net.b.fired, ElementsAre(kStart + 2 * kUs));
  EXPECT_TRUE(net.a.fired.empty());
  // Expect: step 2 jumps to kStart + 5 us for A's timer, with no packet in flight.
  EXPECT_EQ(net.fabric.NextEventNanos(), kStart + 5 * kUs);
  EXPECT_TRUE(net.fabric.Step());
  EXPECT_EQ(net.clock.NowNanos(), kStart + 5 * kUs);
  EXPECT_THAT(net.a.fired, ElementsAre(kStart + 5 * kUs));
  // Expect: both timers cleared themselves; nothing is left.
  EXPECT_EQ(net.fabric.NextEventNanos(), INT64_MAX);
  EXPECT_FALSE(net.fabric.Step());
  EXPECT_EQ(net.a.after_steps, 2);
}

TEST(Fabric, PeriodicTimerSendsFromOnTimer) {
  Net net;
  // A ticks every 10 us and sends B a packet on each tick.
  uint32_t ticks = 0;
  net.a.timer = kStart + 10 * kUs;
  net.a.on_timer = [&] {
    net.a.Send(kB, ++ticks);
    net.a.timer += 10 * kUs;
  };
  // Expect: over 35 us, ticks at 10, 20, 30 us; B gets each 2 us later.
  net.fabric.RunFor(35 * kUs);
  EXPECT_EQ(net.clock.NowNanos(), kStart + 35 * kUs);
  EXPECT_THAT(net.a.fired, ElementsAre(kStart + 10 * kUs, kStart + 20 * kUs, kStart + 30 * kUs));
  ASSERT_EQ(net.b.received.size(), 3u);
  EXPECT_EQ(net.b.received[2].time, kStart + 32 * kUs);
  EXPECT_EQ(net.fabric.stats().stale_timers, 0u);
}

TEST(Fabric, StaleTimerCannotPinTheClock) {
  FabricOptions options;
  options.stale_timer_retry_nanos = 1 * kUs;
  Net net(options);
  // A's timer is in the past and its OnTimer does not clear it (a buggy engine).
  net.a.timer = kStart - 5 * kUs;
  net.a.on_timer = [] {};
  // Expect: RunFor terminates; A fires once per retry interval (kStart, +1 us, ..., +10 us),
  // each firing is counted as stale, and the clock ends exactly at the limit.
  net.fabric.RunFor(10 * kUs);
  EXPECT_EQ(net.clock.NowNanos(), kStart + 10 * kUs);
  ASSERT_EQ(net.a.fired.size(), 11u);
  for (size_t i = 0; i < net.a.fired.size(); ++i) {
    EXPECT_EQ(net.a.fired[i], kStart + static_cast<int64_t>(i) * kUs);
  }
  EXPECT_EQ(net.fabric.stats().stale_timers, 11u);
  // Expect: once A behaves, its timer runs at its own time again.
  net.a.timer = kStart + 15 * kUs + 1;
  net.a.on_timer = nullptr;
  EXPECT_TRUE(net.fabric.Step());
  EXPECT_EQ(net.clock.NowNanos(), kStart + 15 * kUs + 1);
  EXPECT_EQ(net.fabric.stats().stale_timers, 11u);
}

// ---- Running ----

TEST(Fabric, RunUntilStopsAtTheTimeLimit) {
  Net net;
  // A packet A -> B is due at kStart + 2 us.
  net.a.Send(kB, 1);
  // Expect: with a 1 us limit, done() never becomes true, nothing is delivered, and the clock
  // is left exactly at the limit.
  EXPECT_FALSE(net.fabric.RunUntil([&] { return !net.b.received.empty(); }, 1 * kUs));
  EXPECT_EQ(net.clock.NowNanos(), kStart + 1 * kUs);
  EXPECT_TRUE(net.b.received.empty());
  // Expect: with more time, it stops at the delivery, not at the limit.
  EXPECT_TRUE(net.fabric.RunUntil([&] { return !net.b.received.empty(); }, 1 * kNanosPerMilli));
  EXPECT_EQ(net.clock.NowNanos(), kStart + 2 * kUs);
  // Expect: done() already true: no step at all.
  EXPECT_TRUE(net.fabric.RunUntil([] { return true; }, 1 * kNanosPerMilli));
  EXPECT_EQ(net.clock.NowNanos(), kStart + 2 * kUs);
  // Expect: nothing pending: false, clock at the limit.
  EXPECT_FALSE(net.fabric.RunUntil([] { return false; }, 7));
  EXPECT_EQ(net.clock.NowNanos(), kStart + 2 * kUs + 7);
}

// ---- Determinism ----

// A busy three-host exchange with every random fault and jitter on. Returns every delivery as
// (time, receiver, sender, bytes).
using Trace = std::vector<std::tuple<int64_t, int, Address, std::vector<uint8_t>>>;
Trace RunChaos(uint64_t seed) {
  FabricOptions options;
  options.seed = seed;
  options.jitter_nanos = 3 * kUs;
  options.drop_rate = 0.1;
  options.duplicate_rate = 0.1;
  options.reorder_rate = 0.1;
  options.corrupt_rate = 0.1;
  LinkOptions link{.gbps = 10, .buffer_bytes = 20'000};
  Net net(options, link, link, link);
  Trace trace;
  FakeNode* nodes[] = {&net.a, &net.b, &net.c};
  const Address addresses[] = {kA, kB, kC};
  for (int i = 0; i < 3; ++i) {
    // Each node answers every packet whose tag is below 10000 to its sender.
    nodes[i]->on_deliver = [&, i](const Address& from, absl::Span<const uint8_t> bytes) {
      trace.emplace_back(net.clock.NowNanos(), i, from,
                         std::vector<uint8_t>(bytes.begin(), bytes.end()));
      if (TagOf(bytes) < 10000) nodes[i]->Send(from, TagOf(bytes) + 10000, 600);
    };
  }
  for (uint32_t tag = 0; tag < 300; ++tag) {
    nodes[tag % 3]->Send(addresses[(tag + 1) % 3], tag, 200 + tag * 7 % 1300,
                         static_cast<uint8_t>(tag % 8));
    net.fabric.RunFor(500);
  }
  net.fabric.RunFor(1 * kNanosPerMilli);
  EXPECT_TRUE(net.fabric.Idle());
  return trace;
}

TEST(Fabric, SameSeedSameRunDifferentSeedDifferentRun) {
  const Trace first = RunChaos(1);
  const Trace again = RunChaos(1);
  const Trace other = RunChaos(2);
  // Expect: plenty happened (replies included), identically for the same seed.
  EXPECT_GT(first.size(), 400u);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
}

// ---- Random faults ----

// Sends `count` tagged packets A -> B, one every microsecond, then lets everything land.
struct FaultRun {
  FabricStats stats;
  std::vector<Received> received;
};
FaultRun RunFaults(FabricOptions options, int count) {
  Net net(options);
  for (int i = 0; i < count; ++i) {
    net.a.Send(kB, i, 100);
    net.fabric.RunFor(1 * kUs);
  }
  net.fabric.RunFor(1 * kNanosPerMilli);
  EXPECT_TRUE(net.fabric.Idle());
  return {net.fabric.stats(), std::move(net.b.received)};
}

FabricOptions WithRate(double FabricOptions::*rate, double value) {
  FabricOptions options;
  options.*rate = value;
  return options;
}

TEST(Fabric, DropRateOneDropsEverything) {
  const FaultRun run = RunFaults(WithRate(&FabricOptions::drop_rate, 1.0), 100);
  EXPECT_TRUE(run.received.empty());
  EXPECT_EQ(run.stats.dropped_by(DropCause::kRandom), 100u);
  EXPECT_EQ(run.stats.packets_delivered, 0u);
}

TEST(Fabric, DropRateFivePercentIsNearExpectedAndReproducible) {
  const FaultRun run = RunFaults(WithRate(&FabricOptions::drop_rate, 0.05), 10'000);
  const uint64_t dropped = run.stats.dropped_by(DropCause::kRandom);
  // Expect about 500 (binomial sd ~22): a wide bound, then the exact same count again.
  EXPECT_GT(dropped, 400u);
  EXPECT_LT(dropped, 600u);
  EXPECT_EQ(run.stats.packets_delivered, 10'000 - dropped);
  EXPECT_EQ(run.received.size(), 10'000 - dropped);
  EXPECT_EQ(RunFaults(WithRate(&FabricOptions::drop_rate, 0.05), 10'000)
                .stats.dropped_by(DropCause::kRandom),
            dropped);
}

TEST(Fabric, DuplicateRateOneDeliversEverythingTwice) {
  const FaultRun run = RunFaults(WithRate(&FabricOptions::duplicate_rate, 1.0), 100);
  EXPECT_EQ(run.stats.duplicated, 100u);
  ASSERT_EQ(run.received.size(), 200u);
  // Both copies land together, in order: 0, 0, 1, 1, ...
  for (size_t i = 0; i < run.received.size(); ++i) {
    EXPECT_EQ(run.received[i].tag, i / 2);
    EXPECT_EQ(run.received[i].bytes, TaggedBytes(i / 2, 100));
  }
}

TEST(Fabric, DuplicateRateFivePercentIsNearExpectedAndReproducible) {
  const FaultRun run = RunFaults(WithRate(&FabricOptions::duplicate_rate, 0.05), 10'000);
  const uint64_t duplicated = run.stats.duplicated;
  EXPECT_GT(duplicated, 400u);
  EXPECT_LT(duplicated, 600u);
  EXPECT_EQ(run.received.size(), 10'000 + duplicated);
  EXPECT_EQ(RunFaults(WithRate(&FabricOptions::duplicate_rate, 0.05), 10'000).stats.duplicated,
            duplicated);
}

// Counts received packets that differ from what was sent; checks lengths never change.
uint64_t CountCorrupted(const std::vector<Received>& received) {
  uint64_t changed = 0;
  for (size_t i = 0; i < received.size(); ++i) {
    const std::vector<uint8_t> sent = TaggedBytes(i, 100);  // no drops/reorder: i-th is tag i
    EXPECT_EQ(received[i].bytes.size(), sent.size());
    size_t differing = 0;
    for (size_t j = 0; j < sent.size(); ++j) differing += received[i].bytes[j] != sent[j];
    EXPECT_LE(differing, 1u);  // exactly one byte changes in a corrupted packet
    changed += differing;
  }
  return changed;
}

TEST(Fabric, CorruptRateOneChangesOneByteOfEveryPacketAndKeepsLength) {
  const FaultRun run = RunFaults(WithRate(&FabricOptions::corrupt_rate, 1.0), 100);
  ASSERT_EQ(run.received.size(), 100u);
  EXPECT_EQ(run.stats.corrupted, 100u);
  EXPECT_EQ(CountCorrupted(run.received), 100u);
}

TEST(Fabric, CorruptRateFivePercentIsNearExpectedAndReproducible) {
  const FaultRun run = RunFaults(WithRate(&FabricOptions::corrupt_rate, 0.05), 10'000);
  ASSERT_EQ(run.received.size(), 10'000u);
  const uint64_t corrupted = run.stats.corrupted;
  EXPECT_GT(corrupted, 400u);
  EXPECT_LT(corrupted, 600u);
  EXPECT_EQ(CountCorrupted(run.received), corrupted);
  EXPECT_EQ(RunFaults(WithRate(&FabricOptions::corrupt_rate, 0.05), 10'000).stats.corrupted,
            corrupted);
}

// Number of received packets whose tag is lower than one received before it.
int CountOvertaken(const std::vector<Received>& received) {
  int overtaken = 0;
  uint32_t highest = 0;
  for (size_t i = 0; i < received.size(); ++i) {
    if (i > 0 && received[i].tag < highest) ++overtaken;
    highest = std::max(highest, received[i].tag);
  }
  return overtaken;
}

TEST(Fabric, ReorderRateOneReallyReorders) {
  // Packets leave 1 us apart and each is held back up to 20 us: order must break.
  const FaultRun run = RunFaults(WithRate(&FabricOptions::reorder_rate, 1.0), 100);
  EXPECT_EQ(run.stats.reordered, 100u);
  ASSERT_EQ(run.received.size(), 100u);
  EXPECT_GT(CountOvertaken(run.received), 20);
  // Nothing lost or duplicated: the tags are a permutation of 0..99.
  std::vector<uint32_t> tags;
  for (const auto& r : run.received) tags.push_back(r.tag);
  std::sort(tags.begin(), tags.end());
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(tags[i], i);
}

TEST(Fabric, ReorderRateFivePercentIsNearExpectedAndReproducible) {
  const FaultRun run = RunFaults(WithRate(&FabricOptions::reorder_rate, 0.05), 10'000);
  const uint64_t reordered = run.stats.reordered;
  EXPECT_GT(reordered, 400u);
  EXPECT_LT(reordered, 600u);
  EXPECT_EQ(run.received.size(), 10'000u);
  // Each held-back packet is overtaken by up to ~20 followers; at least one by some.
  EXPECT_GT(CountOvertaken(run.received), 0);
  EXPECT_EQ(RunFaults(WithRate(&FabricOptions::reorder_rate, 0.05), 10'000).stats.reordered,
            reordered);
}

TEST(Fabric, JitterSpacesPacketsButKeepsAPathInOrder) {
  FabricOptions options;
  options.jitter_nanos = 10 * kUs;  // far more than the 1 us spacing
  const FaultRun run = RunFaults(options, 1000);
  ASSERT_EQ(run.received.size(), 1000u);
  EXPECT_EQ(CountOvertaken(run.received), 0);
  // Expect: jitter really delays: some packet took longer than the base latency.
  bool delayed = false;
  for (size_t i = 0; i < run.received.size(); ++i) {
    delayed |= run.received[i].time > kStart + static_cast<int64_t>(i) * kUs + 2 * kUs;
  }
  EXPECT_TRUE(delayed);
}

TEST(Fabric, FaultStreamsAreIndependentOfEachOther) {
  // Turning duplication on must not change which packets are dropped (separate streams).
  FabricOptions drop_only = WithRate(&FabricOptions::drop_rate, 0.05);
  FabricOptions drop_and_dup = drop_only;
  drop_and_dup.duplicate_rate = 0.3;
  EXPECT_EQ(RunFaults(drop_only, 2000).stats.dropped_by(DropCause::kRandom),
            RunFaults(drop_and_dup, 2000).stats.dropped_by(DropCause::kRandom));
}

TEST(Fabric, SeedPinsTheSameFaultsOnEveryBuild) {
  // mt19937_64's output is fixed by the C++ standard and the fabric derives its decisions from
  // it by hand, so these counts hold for any compiler or standard library. If this fails after
  // a deliberate change to how streams are drawn, update the numbers; otherwise a seed no
  // longer reproduces a failure seen elsewhere.
  FabricOptions options;
  options.seed = 12345;
  options.drop_rate = 0.05;
  options.duplicate_rate = 0.05;
  options.reorder_rate = 0.05;
  options.corrupt_rate = 0.05;
  const FaultRun run = RunFaults(options, 10'000);
  EXPECT_EQ(run.stats.dropped_by(DropCause::kRandom), 515u);
  EXPECT_EQ(run.stats.duplicated, 484u);
  EXPECT_EQ(run.stats.reordered, 500u);
  EXPECT_EQ(run.stats.corrupted, 502u);
}

// ---- Rules ----

TEST(Fabric, DropNthDropsOnlyThatPacket) {
  Net net;
  net.fabric.DropNth(3);
  for (uint32_t tag = 1; tag <= 5; ++tag) net.a.Send(kB, tag);
  net.fabric.RunFor(10 * kUs);
  // Expect: the 3rd packet sent through the fabric is gone, counted as a rule drop.
  EXPECT_THAT(net.b.tags(), ElementsAre(1, 2, 4, 5));
  EXPECT_EQ(net.fabric.stats().dropped_by(DropCause::kRule), 1u);
  EXPECT_EQ(net.fabric.stats().dropped_total(), 1u);
}

TEST(Fabric, RulesDecideBeforeRandomFaults) {
  FabricOptions options;
  options.drop_rate = 1.0;  // everything the rules leave alone is dropped
  Net net(options);
  // A rule that reads the packet (as engine tests decode wire.h headers): deliver even tags.
  const RuleId even = net.fabric.AddRule(
      [](const Address& from, const Address& to, absl::Span<const uint8_t> bytes) {
        return TagOf(bytes) % 2 == 0 ? Verdict::Deliver() : Verdict::Pass();
      });
  for (uint32_t tag = 0; tag < 6; ++tag) net.a.Send(kB, tag);
  net.fabric.RunFor(10 * kUs);
  EXPECT_THAT(net.b.tags(), ElementsAre(0, 2, 4));
  EXPECT_EQ(net.fabric.stats().dropped_by(DropCause::kRandom), 3u);
  // Expect: after RemoveRule the random drop applies to everything again.
  EXPECT_TRUE(net.fabric.RemoveRule(even));
  EXPECT_FALSE(net.fabric.RemoveRule(even));
  net.a.Send(kB, 8);
  net.fabric.RunFor(10 * kUs);
  EXPECT_THAT(net.b.tags(), ElementsAre(0, 2, 4));
}

TEST(Fabric, FirstRuleThatDecidesWins) {
  Net net;
  net.fabric.AddRule([](const Address&, const Address& to, absl::Span<const uint8_t>) {
    return to == kC ? Verdict::Drop() : Verdict::Pass();
  });
  net.fabric.AddRule([](const Address&, const Address&, absl::Span<const uint8_t>) {
    return Verdict::Duplicate();
  });
  net.a.Send(kC, 1);  // first rule: dropped
  net.a.Send(kB, 2);  // second rule: duplicated
  net.fabric.RunFor(10 * kUs);
  EXPECT_TRUE(net.c.received.empty());
  EXPECT_THAT(net.b.tags(), ElementsAre(2, 2));
  EXPECT_EQ(net.fabric.stats().dropped_by(DropCause::kRule), 1u);
  EXPECT_EQ(net.fabric.stats().duplicated, 1u);
  net.fabric.ClearRules();
  net.a.Send(kC, 3);
  net.fabric.RunFor(10 * kUs);
  EXPECT_THAT(net.c.tags(), ElementsAre(3));
}

TEST(Fabric, DelayNthLetsLaterPacketsOvertake) {
  Net net;
  net.fabric.DelayNth(1, 10 * kUs);
  net.a.Send(kB, 1);
  net.a.Send(kB, 2);
  net.a.Send(kB, 3);
  net.fabric.RunFor(20 * kUs);
  // Expect: 2 and 3 at kStart + 2 us, then 1 at kStart + 12 us.
  EXPECT_THAT(net.b.tags(), ElementsAre(2, 3, 1));
  EXPECT_EQ(net.b.received[0].time, kStart + 2 * kUs);
  EXPECT_EQ(net.b.received[2].time, kStart + 12 * kUs);
  EXPECT_EQ(net.fabric.stats().delayed, 1u);
}

TEST(Fabric, DuplicateNthAndCorruptNth) {
  Net net;
  net.fabric.DuplicateNth(1);
  net.fabric.CorruptNth(2);
  net.a.Send(kB, 1, 300);
  net.a.Send(kB, 2, 300);
  net.fabric.RunFor(10 * kUs);
  ASSERT_THAT(net.b.tags().size(), 3u);
  EXPECT_EQ(net.b.received[0].bytes, TaggedBytes(1, 300));
  EXPECT_EQ(net.b.received[1].bytes, TaggedBytes(1, 300));
  // The corrupted one keeps its length but not its bytes.
  EXPECT_EQ(net.b.received[2].bytes.size(), 300u);
  EXPECT_NE(net.b.received[2].bytes, TaggedBytes(2, 300));
  EXPECT_EQ(net.fabric.stats().duplicated, 1u);
  EXPECT_EQ(net.fabric.stats().corrupted, 1u);
}

// ---- Links, priorities, buffers ----

TEST(Fabric, UplinkRateSerializesPackets) {
  // A's uplink runs at 1 Gbit/s: a 1500-byte packet takes 1500 * 8 / 1 = 12,000 ns.
  Net net({}, LinkOptions{.gbps = 1});
  for (uint32_t tag = 0; tag < 10; ++tag) net.a.Send(kB, tag, 1500);
  net.fabric.RunFor(1 * kNanosPerMilli);
  // Expect: packet i leaves at kStart + 12 us * (i + 1) and lands 2 us later, 12 us apart.
  ASSERT_EQ(net.b.received.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(net.b.received[i].time, kStart + 12 * kUs * (i + 1) + 2 * kUs) << i;
    EXPECT_EQ(net.b.received[i].tag, static_cast<uint32_t>(i));
  }
}

TEST(Fabric, DownlinkRateSerializesPacketsAtTheSwitchPort) {
  // A's uplink is infinite, B's port runs at 1 Gbit/s: all ten reach the port at kStart + 2 us
  // and queue there.
  Net net({}, LinkOptions{}, LinkOptions{.gbps = 1});
  for (uint32_t tag = 0; tag < 10; ++tag) net.a.Send(kB, tag, 1500);
  net.fabric.RunFor(3 * kUs);
  EXPECT_EQ(net.fabric.PortQueueBytes(kB), 15'000u);
  net.fabric.RunFor(1 * kNanosPerMilli);
  ASSERT_EQ(net.b.received.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(net.b.received[i].time, kStart + 2 * kUs + 12 * kUs * (i + 1)) << i;
  }
  EXPECT_EQ(net.fabric.PortQueueBytes(kB), 0u);
  EXPECT_EQ(net.fabric.stats().max_port_queue_bytes, 15'000u);
}

TEST(Fabric, WireOverheadCountsTowardsSerialization) {
  FabricOptions options;
  options.wire_overhead_bytes = 28;  // IPv4 + UDP
  Net net(options, LinkOptions{.gbps = 1});
  net.a.Send(kB, 0, 1472);  // 1500 bytes on the wire: 12 us
  net.fabric.RunFor(1 * kNanosPerMilli);
  ASSERT_EQ(net.b.received.size(), 1u);
  EXPECT_EQ(net.b.received[0].time, kStart + 12 * kUs + 2 * kUs);
  EXPECT_EQ(net.fabric.stats().bytes_delivered, 1472u);
}

TEST(Fabric, StrictPriorityServesHighPriorityFirst) {
  // B's port runs at 1 Gbit/s (12 us per 1500-byte packet).
  Net net({}, LinkOptions{}, LinkOptions{.gbps = 1});
  // A queues 20 priority-0 packets (tags 0..19): they reach B's port at kStart + 2 us; tag 0
  // starts serializing at once and the rest wait.
  for (uint32_t tag = 0; tag < 20; ++tag) net.a.Send(kB, tag, 1500, /*priority=*/0);
  net.fabric.RunFor(5 * kUs);
  // C sends one priority-7 packet (tag 100) at kStart + 5 us; it reaches the port at +7 us,
  // behind 19 waiting priority-0 packets.
  net.c.Send(kB, 100, 1500, /*priority=*/7);
  net.fabric.RunFor(1 * kNanosPerMilli);
  // Expect: tag 0 is not preempted (done at +14 us); tag 100 goes next (done at +26 us), ahead
  // of every waiting priority-0 packet.
  ASSERT_EQ(net.b.received.size(), 21u);
  EXPECT_EQ(net.b.received[0].tag, 0u);
  EXPECT_EQ(net.b.received[1].tag, 100u);
  EXPECT_EQ(net.b.received[1].from, kC);
  EXPECT_EQ(net.b.received[1].time, kStart + 26 * kUs);
  EXPECT_EQ(net.b.received[2].tag, 1u);
  EXPECT_EQ(net.b.received[20].tag, 19u);
}

TEST(Fabric, MiddlePrioritiesAreServedInOrder) {
  Net net({}, LinkOptions{}, LinkOptions{.gbps = 1});
  // A blocker (tag 9) occupies the port; behind it arrive priorities 1, 5, 3, 5 (tags 1..4).
  net.a.Send(kB, 9, 1500, 0);
  net.a.Send(kB, 1, 1500, 1);
  net.a.Send(kB, 2, 1500, 5);
  net.a.Send(kB, 3, 1500, 3);
  net.a.Send(kB, 4, 1500, 5);
  net.fabric.RunFor(1 * kNanosPerMilli);
  // Expect: the blocker, then by priority (FIFO within one): 2, 4 (p5), 3 (p3), 1 (p1).
  EXPECT_THAT(net.b.tags(), ElementsAre(9, 2, 4, 3, 1));
}

TEST(Fabric, PortBufferTailDropsAndCounts) {
  // B's port: 1 Gbit/s with room for 10 packets of 1500 bytes (including the one on the wire).
  Net net({}, LinkOptions{}, LinkOptions{.gbps = 1, .buffer_bytes = 15'000});
  // A bursts 15 packets at once; the high-priority last one is dropped too (tail drop looks at
  // bytes, not priority).
  for (uint32_t tag = 0; tag < 14; ++tag) net.a.Send(kB, tag, 1500);
  net.a.Send(kB, 14, 1500, 7);
  net.fabric.RunFor(1 * kNanosPerMilli);
  // Expect: the first 10 delivered in order, the last 5 dropped as buffer-full.
  EXPECT_THAT(net.b.tags(), ElementsAreArray({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(net.fabric.stats().dropped_by(DropCause::kBufferFull), 5u);
  EXPECT_EQ(net.fabric.stats().max_port_queue_bytes, 15'000u);
  // Expect: once drained, the port takes packets again.
  net.a.Send(kB, 99, 1500);
  net.fabric.RunFor(1 * kNanosPerMilli);
  EXPECT_EQ(net.b.received.back().tag, 99u);
}

// ---- Detach ----

TEST(Fabric, DetachDropsPacketsToTheVanishedHost) {
  Net net;
  // A packet to B is in flight when B vanishes.
  net.a.Send(kB, 1);
  EXPECT_TRUE(net.fabric.Detach(kB));
  EXPECT_FALSE(net.fabric.Detach(kB));
  net.fabric.RunFor(10 * kUs);
  // Expect: dropped as unreachable; B got nothing and no more calls.
  EXPECT_TRUE(net.b.received.empty());
  EXPECT_EQ(net.fabric.stats().dropped_by(DropCause::kUnreachable), 1u);
  const int b_steps = net.b.after_steps;
  // Later packets to B, packets to an address nobody ever had, and packets B's old sink sends
  // are all dropped and counted too.
  net.a.Send(kB, 2);
  net.a.Send(Addr("10.9.9.9:1"), 3);
  net.b.Send(kA, 4);
  net.fabric.RunFor(10 * kUs);
  EXPECT_TRUE(net.a.received.empty());
  EXPECT_EQ(net.b.after_steps, b_steps);
  EXPECT_EQ(net.fabric.stats().dropped_by(DropCause::kUnreachable), 4u);
  EXPECT_EQ(net.fabric.stats().packets_delivered, 0u);

  // A restarted B (a new node at the same address) gets packets sent after it came back.
  FakeNode b2(&net.clock);
  b2.sink = net.fabric.Attach(kB, &b2);
  net.a.Send(kB, 5);
  net.fabric.RunFor(10 * kUs);
  EXPECT_THAT(b2.tags(), ElementsAre(5));
  EXPECT_TRUE(net.b.received.empty());
}

TEST(Fabric, DetachDropsWhatWaitsInTheSwitchPort) {
  Net net({}, LinkOptions{}, LinkOptions{.gbps = 1});
  for (uint32_t tag = 0; tag < 5; ++tag) net.a.Send(kB, tag, 1500);
  // At kStart + 15 us tag 0 has landed (at +14 us) and the rest sit in B's port.
  net.fabric.RunFor(15 * kUs);
  EXPECT_THAT(net.b.tags(), ElementsAre(0));
  EXPECT_TRUE(net.fabric.Detach(kB));
  net.fabric.RunFor(1 * kNanosPerMilli);
  EXPECT_THAT(net.b.tags(), ElementsAre(0));
  EXPECT_EQ(net.fabric.stats().dropped_by(DropCause::kUnreachable), 4u);
  EXPECT_TRUE(net.fabric.Idle());
}

TEST(Fabric, AttachFromInsideACallback) {
  Net net;
  FakeNode d(&net.clock);
  const Address kD = Addr("10.0.0.4:1000");
  // When B receives anything, a new host D joins and B sends to it at once.
  net.b.on_deliver = [&](const Address&, absl::Span<const uint8_t>) {
    if (d.sink == nullptr) d.sink = net.fabric.Attach(kD, &d);
    net.b.Send(kD, 77);
  };
  net.a.Send(kB, 1);
  EXPECT_TRUE(net.fabric.RunUntil([&] { return !d.received.empty(); }, 1 * kNanosPerMilli));
  EXPECT_THAT(d.tags(), ElementsAre(77));
  EXPECT_EQ(net.clock.NowNanos(), kStart + 4 * kUs);
}

}  // namespace
}  // namespace homarpc::transport
