// Fabric: the in-memory network. See fabric.h for the contract and the packet model.
//
// DESIGN NOTES
//
// Events. Everything that happens to a packet after Send is one of two events in a binary
// min-heap ordered by (time, seq), seq being a counter stamped when the event is queued:
//   kArrive       the packet reaches the switch port of its destination address
//   kTransmitted  the port has finished serializing it; deliver it to the node
// (with an infinite downlink, kArrive delivers at once). The seq tie-break makes the order of
// simultaneous events the order in which they were created, which is a function of the seed
// and of what the nodes did, so a run is reproducible bit for bit. The sender's uplink needs no
// event: it is FIFO with no priorities, so a packet's departure time is known at Send time
// (max(now, uplink free) + serialization) and the uplink just remembers when it is next free.
//
// Progress. Step() jumps to min(earliest event, earliest node timer) and drains every event due
// by then. Nothing created during a step is due in that same step: arrival >= departure +
// base latency, and base latency is clamped to >= 1 ns; a port schedules kTransmitted at least
// 1 ns ahead. So the drain loop ends even if nodes answer every packet with another packet. Each
// node's OnTimer runs at most once per step; a node that is still due right after its OnTimer
// (a timer in the past it never clears) gets a floor of now + stale_timer_retry_nanos below
// which its timer is ignored, so such a node slows a run down but cannot pin the clock. A
// rejected alternative was a cap on steps per clock value: it hides the bug instead of
// counting it (FabricStats::stale_timers) and makes results depend on the cap.
//
// Re-entrancy. Nodes call Send (and even Attach/Detach) from inside Deliver/OnTimer. Every
// packet is moved out of the heap or port queue before a node is called, hosts live behind
// unique_ptrs in a vector that only grows (ids stay valid in queued events), and loops over
// hosts re-read the size each iteration, so callbacks can add to any structure freely.
//
// Switch ports. Non-preemptive strict priority: when the port is free it takes the head of
// the highest non-empty queue (7 first) and serializes it; a packet already being serialized
// is never interrupted, as on a real switch port. The byte limit covers all 8 queues plus the
// packet on the wire, and a packet that would exceed it is dropped on arrival (tail drop),
// whatever its priority. A detached host's port keeps draining, into drops.
//
// Randomness. Each fault has its own std::mt19937_64 stream seeded from (seed, fault), and a
// stream is drawn from only when its rate is strictly between 0 and 1, so turning on
// duplication does not change which packets are dropped. Probabilities and bounded integers
// are computed here from the raw 64-bit output rather than with absl::BitGen or
// std::*_distribution: absl's generators are documented as not stable across releases and the
// std distributions are implementation-defined, while mt19937_64's output is fixed by the
// standard, so a seed reproduces the same run with any compiler and library.
//
// Detach and re-attach. Destinations are resolved by address when a packet reaches the switch,
// not at Send, so a host re-attached at an address (a restarted server) gets the packets that
// arrive after it came back, as on a real network; packets already queued in the old host's
// port are dropped as kUnreachable.
#include "transport/fabric.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <deque>

#include "transport/log.h"

namespace homarpc::transport {
namespace {

constexpr int kNumPriorities = 8;

// a + b for b >= 0, saturating at INT64_MAX.
int64_t SaturatingAdd(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

// SplitMix64's finalizer: spreads (seed, stream index) into unrelated 64-bit seeds.
uint64_t MixSeed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

FabricOptions Sanitize(FabricOptions options) {
  options.base_latency_nanos = std::max<int64_t>(options.base_latency_nanos, 1);
  options.jitter_nanos = std::max<int64_t>(options.jitter_nanos, 0);
  options.reorder_max_delay_nanos = std::max<int64_t>(options.reorder_max_delay_nanos, 1);
  options.stale_timer_retry_nanos = std::max<int64_t>(options.stale_timer_retry_nanos, 1);
  return options;
}

}  // namespace

const char* DropCauseName(DropCause cause) {
  switch (cause) {
    case DropCause::kRule:
      return "rule";
    case DropCause::kRandom:
      return "random";
    case DropCause::kBufferFull:
      return "buffer_full";
    case DropCause::kUnreachable:
      return "unreachable";
    case DropCause::kCount:
      break;
  }
  return "unknown";
}

uint64_t FabricStats::dropped_total() const {
  uint64_t total = 0;
  for (uint64_t n : dropped) total += n;
  return total;
}

// ---- Internal types ----

struct Fabric::Packet {
  uint32_t src_host = 0;
  uint32_t port_host = 0;  // the host whose switch port holds it (set on arrival)
  Address from;
  Address to;
  uint8_t priority = 0;
  std::vector<uint8_t> bytes;
};

struct Fabric::Event {
  enum class Kind : uint8_t { kArrive, kTransmitted };
  int64_t time = 0;
  uint64_t seq = 0;
  Kind kind = Kind::kArrive;
  Packet packet;
};

namespace {
// Heap order for std::push_heap/pop_heap (a max-heap): "a after b" puts the earliest on top.
struct EventAfter {
  template <typename E>
  bool operator()(const E& a, const E& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};
}  // namespace

class Fabric::HostSink final : public PacketSink {
 public:
  HostSink(Fabric* fabric, uint32_t host_id) : fabric_(fabric), host_id_(host_id) {}
  void Send(const OutPacket& packet) override { fabric_->SendFrom(host_id_, packet); }

 private:
  Fabric* const fabric_;
  const uint32_t host_id_;
};

struct Fabric::Host {
  Address address;
  FabricNode* node = nullptr;  // nullptr once detached
  LinkOptions link;
  std::unique_ptr<HostSink> sink;
  int64_t uplink_free_at = INT64_MIN;
  int64_t timer_floor = INT64_MIN;  // stale-timer guard (see DESIGN NOTES)
  bool warned_stale = false;
  // The switch port in front of this host.
  std::array<std::deque<Packet>, kNumPriorities> queues;
  uint64_t port_bytes = 0;  // queued + being serialized, wire bytes
  bool transmitting = false;
};

// ---- Random streams ----

bool Fabric::Stream::Chance(double rate) {
  if (rate <= 0) return false;
  if (rate >= 1) return true;
  // 53 random bits -> a double uniform in [0, 1).
  const double u = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  return u < rate;
}

uint64_t Fabric::Stream::Below(uint64_t bound) {
  // Lemire's multiply-shift: maps 64 random bits onto [0, bound) with negligible bias.
  return static_cast<uint64_t>((static_cast<unsigned __int128>(engine_()) * bound) >> 64);
}

// ---- Construction and attachment ----

Fabric::Fabric(ManualClock* clock, FabricOptions options)
    : clock_(clock),
      options_(Sanitize(options)),
      drop_stream_(MixSeed(options.seed, 0)),
      duplicate_stream_(MixSeed(options.seed, 1)),
      reorder_stream_(MixSeed(options.seed, 2)),
      corrupt_stream_(MixSeed(options.seed, 3)),
      jitter_stream_(MixSeed(options.seed, 4)),
      mutate_stream_(MixSeed(options.seed, 5)) {}

Fabric::~Fabric() = default;

PacketSink* Fabric::Attach(const Address& address, FabricNode* node, LinkOptions link) {
  if (attached_.contains(address) || node == nullptr) {
    HOMARPC_LOG(ERROR) << "Fabric::Attach: " << address.ToString()
                       << (node == nullptr ? " with a null node" : " is already attached");
    std::abort();
  }
  const uint32_t id = static_cast<uint32_t>(hosts_.size());
  auto host = std::make_unique<Host>();
  host->address = address;
  host->node = node;
  host->link = link;
  host->sink = std::make_unique<HostSink>(this, id);
  PacketSink* sink = host->sink.get();
  hosts_.push_back(std::move(host));
  attached_[address] = id;
  return sink;
}

bool Fabric::Detach(const Address& address) {
  auto it = attached_.find(address);
  if (it == attached_.end()) return false;
  hosts_[it->second]->node = nullptr;
  attached_.erase(it);
  return true;
}

// ---- Rules ----

RuleId Fabric::AddRule(Rule rule) {
  const RuleId id = next_rule_id_++;
  rules_.emplace_back(id, std::move(rule));
  return id;
}

bool Fabric::RemoveRule(RuleId id) {
  auto it = std::find_if(rules_.begin(), rules_.end(),
                         [id](const auto& entry) { return entry.first == id; });
  if (it == rules_.end()) return false;
  rules_.erase(it);
  return true;
}

void Fabric::ClearRules() { rules_.clear(); }

RuleId Fabric::AddNthRule(uint64_t k, Verdict verdict) {
  return AddRule([this, k, verdict](const Address&, const Address&, absl::Span<const uint8_t>) {
    return stats_.packets_sent == k ? verdict : Verdict::Pass();
  });
}

RuleId Fabric::DropNth(uint64_t k) { return AddNthRule(k, Verdict::Drop()); }
RuleId Fabric::DuplicateNth(uint64_t k) { return AddNthRule(k, Verdict::Duplicate()); }
RuleId Fabric::DelayNth(uint64_t k, int64_t nanos) { return AddNthRule(k, Verdict::Delay(nanos)); }
RuleId Fabric::CorruptNth(uint64_t k) { return AddNthRule(k, Verdict::Corrupt()); }

// ---- Sending ----

int64_t Fabric::SerializeNanos(const Host& host, size_t bytes) const {
  if (host.link.gbps <= 0) return 0;
  // Gbit/s is bits per nanosecond. Round up, and never 0: see "Progress" in DESIGN NOTES.
  const double bits = 8.0 * static_cast<double>(bytes + options_.wire_overhead_bytes);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(bits / host.link.gbps)));
}

void Fabric::SendFrom(uint32_t host_id, const OutPacket& out) {
  ++stats_.packets_sent;
  stats_.bytes_sent += out.size();
  Host& src = *hosts_[host_id];
  if (src.node == nullptr) {  // a vanished host sends nothing
    Drop(DropCause::kUnreachable);
    return;
  }

  // Copy now: the engine may free or reuse the payload as soon as Send returns.
  Packet packet;
  packet.src_host = host_id;
  packet.from = src.address;
  packet.to = out.dest;
  packet.priority = std::min<uint8_t>(out.priority, kNumPriorities - 1);
  packet.bytes.reserve(out.size());
  packet.bytes.assign(out.header, out.header + out.header_len);
  packet.bytes.insert(packet.bytes.end(), out.payload.begin(), out.payload.end());
  packet.bytes.insert(packet.bytes.end(), out.payload2.begin(), out.payload2.end());

  // The uplink transmits every packet, whatever the network does to it afterwards.
  const int64_t now = clock_->NowNanos();
  int64_t depart = now;
  if (src.link.gbps > 0) {
    depart = std::max(now, src.uplink_free_at) + SerializeNanos(src, packet.bytes.size());
    src.uplink_free_at = depart;
  }

  Verdict verdict = Verdict::Pass();
  for (const auto& [id, rule] : rules_) {
    verdict = rule(packet.from, packet.to, packet.bytes);
    if (verdict.kind != Verdict::Kind::kPass) break;
  }
  switch (verdict.kind) {
    case Verdict::Kind::kDrop:
      Drop(DropCause::kRule);
      return;
    case Verdict::Kind::kDeliver:
      Launch(std::move(packet), depart, /*keep_path_order=*/true, 0);
      return;
    case Verdict::Kind::kDuplicate: {
      ++stats_.duplicated;
      Packet copy = packet;
      Launch(std::move(packet), depart, true, 0);
      Launch(std::move(copy), depart, true, 0);
      return;
    }
    case Verdict::Kind::kDelay:
      ++stats_.delayed;
      Launch(std::move(packet), depart, /*keep_path_order=*/false,
             std::max<int64_t>(verdict.delay_nanos, 0));
      return;
    case Verdict::Kind::kCorrupt:
      Corrupt(packet);
      Launch(std::move(packet), depart, true, 0);
      return;
    case Verdict::Kind::kPass:
      break;
  }

  // Random faults, each from its own stream (see DESIGN NOTES).
  if (drop_stream_.Chance(options_.drop_rate)) {
    Drop(DropCause::kRandom);
    return;
  }
  if (duplicate_stream_.Chance(options_.duplicate_rate)) {
    ++stats_.duplicated;
    LaunchWithRandomFaults(Packet(packet), depart);
  }
  LaunchWithRandomFaults(std::move(packet), depart);
}

void Fabric::LaunchWithRandomFaults(Packet packet, int64_t depart) {
  if (corrupt_stream_.Chance(options_.corrupt_rate)) Corrupt(packet);
  const int64_t jitter = options_.jitter_nanos > 0
                             ? static_cast<int64_t>(jitter_stream_.Below(options_.jitter_nanos + 1))
                             : 0;
  if (reorder_stream_.Chance(options_.reorder_rate)) {
    ++stats_.reordered;
    const int64_t hold =
        1 + static_cast<int64_t>(reorder_stream_.Below(options_.reorder_max_delay_nanos));
    Launch(std::move(packet), depart, /*keep_path_order=*/false, jitter + hold);
  } else {
    Launch(std::move(packet), depart, /*keep_path_order=*/true, jitter);
  }
}

void Fabric::Corrupt(Packet& packet) {
  if (packet.bytes.empty()) return;
  const uint64_t index = mutate_stream_.Below(packet.bytes.size());
  const uint8_t mask = static_cast<uint8_t>(1 + mutate_stream_.Below(255));  // never 0
  packet.bytes[index] ^= mask;
  ++stats_.corrupted;
}

void Fabric::Launch(Packet packet, int64_t depart, bool keep_path_order, int64_t extra_delay) {
  int64_t arrival = SaturatingAdd(SaturatingAdd(depart, options_.base_latency_nanos), extra_delay);
  if (keep_path_order) {
    auto [it, inserted] = path_last_arrival_.try_emplace({packet.src_host, packet.to}, arrival);
    if (!inserted) {
      arrival = std::max(arrival, it->second);
      it->second = arrival;
    }
  }
  PushEvent(Event{arrival, 0, Event::Kind::kArrive, std::move(packet)});
}

void Fabric::PushEvent(Event event) {
  event.seq = next_event_seq_++;
  events_.push_back(std::move(event));
  std::push_heap(events_.begin(), events_.end(), EventAfter());
}

// ---- Switch ports and delivery ----

void Fabric::ArriveAtPort(Packet packet) {
  auto it = attached_.find(packet.to);
  if (it == attached_.end()) {
    Drop(DropCause::kUnreachable);
    return;
  }
  Host& host = *hosts_[it->second];
  if (host.link.gbps <= 0) {  // infinite downlink: no queue
    DeliverTo(host, packet);
    return;
  }
  const uint64_t size = packet.bytes.size() + options_.wire_overhead_bytes;
  if (host.link.buffer_bytes > 0 && host.port_bytes + size > host.link.buffer_bytes) {
    Drop(DropCause::kBufferFull);
    return;
  }
  host.port_bytes += size;
  stats_.max_port_queue_bytes = std::max(stats_.max_port_queue_bytes, host.port_bytes);
  packet.port_host = it->second;
  host.queues[packet.priority].push_back(std::move(packet));
  ++queued_packets_;
  if (!host.transmitting) StartTransmit(host);
}

void Fabric::StartTransmit(Host& host) {
  for (int p = kNumPriorities - 1; p >= 0; --p) {
    auto& queue = host.queues[p];
    if (queue.empty()) continue;
    Packet packet = std::move(queue.front());
    queue.pop_front();
    --queued_packets_;
    host.transmitting = true;
    const int64_t done = clock_->NowNanos() + SerializeNanos(host, packet.bytes.size());
    PushEvent(Event{done, 0, Event::Kind::kTransmitted, std::move(packet)});
    return;
  }
}

void Fabric::FinishTransmit(Packet packet) {
  Host& host = *hosts_[packet.port_host];
  host.port_bytes -= packet.bytes.size() + options_.wire_overhead_bytes;
  host.transmitting = false;
  StartTransmit(host);  // before Deliver: whatever the node sends cannot affect this port now
  if (host.node == nullptr) {
    Drop(DropCause::kUnreachable);
    return;
  }
  DeliverTo(host, packet);
}

void Fabric::DeliverTo(Host& host, Packet& packet) {
  ++stats_.packets_delivered;
  stats_.bytes_delivered += packet.bytes.size();
  host.node->Deliver(packet.from, packet.bytes);
}

// ---- Running ----

int64_t Fabric::TimerDue(const Host& host) const {
  return std::max(host.node->NextTimerNanos(), host.timer_floor);
}

int64_t Fabric::NextEventNanos() const {
  int64_t next = events_.empty() ? INT64_MAX : events_.front().time;
  for (const auto& host : hosts_) {
    if (host->node != nullptr) next = std::min(next, TimerDue(*host));
  }
  return next == INT64_MAX ? next : std::max(next, clock_->NowNanos());
}

bool Fabric::Step() {
  const int64_t next = NextEventNanos();
  if (next == INT64_MAX) return false;
  if (next > clock_->NowNanos()) clock_->Set(next);
  const int64_t now = clock_->NowNanos();

  // 1. Packet events due by now, earliest first, ties in creation order. Events created here
  //    are due after now (DESIGN NOTES), so this loop ends.
  while (!events_.empty() && events_.front().time <= now) {
    std::pop_heap(events_.begin(), events_.end(), EventAfter());
    Event event = std::move(events_.back());
    events_.pop_back();
    if (event.kind == Event::Kind::kArrive) {
      ArriveAtPort(std::move(event.packet));
    } else {
      FinishTransmit(std::move(event.packet));
    }
  }

  // 2. Due timers, in attach order, at most once per node.
  for (size_t i = 0; i < hosts_.size(); ++i) {
    Host& host = *hosts_[i];
    if (host.node == nullptr || TimerDue(host) > now) continue;
    host.node->OnTimer();
    if (host.node != nullptr && host.node->NextTimerNanos() <= now) {
      ++stats_.stale_timers;
      host.timer_floor = SaturatingAdd(now, options_.stale_timer_retry_nanos);
      if (!host.warned_stale) {
        host.warned_stale = true;
        HOMARPC_LOG(WARNING) << "fabric: node " << host.address.ToString()
                             << " is still due after OnTimer; next try in "
                             << options_.stale_timer_retry_nanos << " ns (warned once)";
      }
    }
  }

  // 3. End of step.
  for (size_t i = 0; i < hosts_.size(); ++i) {
    Host& host = *hosts_[i];
    if (host.node != nullptr) host.node->AfterStep();
  }
  return true;
}

bool Fabric::RunUntil(absl::FunctionRef<bool()> done, int64_t max_nanos) {
  const int64_t deadline = SaturatingAdd(clock_->NowNanos(), std::max<int64_t>(max_nanos, 0));
  while (!done()) {
    const int64_t next = NextEventNanos();
    if (next == INT64_MAX || next > deadline) {  // nothing more happens by the deadline
      if (deadline != INT64_MAX && clock_->NowNanos() < deadline) clock_->Set(deadline);
      return false;
    }
    Step();
  }
  return true;
}

void Fabric::RunFor(int64_t nanos) {
  RunUntil([] { return false; }, nanos);
}

bool Fabric::Idle() const { return events_.empty() && queued_packets_ == 0; }

size_t Fabric::PacketsInFlight() const { return events_.size() + queued_packets_; }

uint64_t Fabric::PortQueueBytes(const Address& address) const {
  auto it = attached_.find(address);
  return it == attached_.end() ? 0 : hosts_[it->second]->port_bytes;
}

}  // namespace homarpc::transport
