// Fabric: an in-memory network that connects protocol engines inside one process.
//
// Tests (and later a simulator of many hosts) attach nodes to a Fabric, each under a fake
// Address, and drive everything from one ManualClock: Step() jumps the clock to the next
// packet delivery or node timer and runs what is due. Nothing touches a socket or sleeps, and
// a run is fully deterministic for a given FabricOptions::seed.
//
// The model, per packet (all stages optional except the latency):
//   sender uplink      FIFO, serializes at the sender's link rate (a NIC)
//   network            one-way base latency + jitter; drop / duplicate / reorder / corrupt
//                      faults, decided by rules first, then at random; per-path FIFO unless a
//                      packet is reordered or delayed on purpose
//   receiver downlink  a switch egress port: 8 strict-priority queues (OutPacket::priority,
//                      7 highest), tail drop at a byte limit, serializes at the receiver's
//                      link rate, then FabricNode::Deliver
//
// The fabric does not know the engine (nodes are FabricNode adapters) and does not parse
// packets: rules that need to look inside decode the bytes with transport/wire.h themselves.
//
// Ownership and threads: a Fabric, its sinks and everything it calls belong to one thread (the
// test's). The caller owns the ManualClock and the nodes, which must outlive the Fabric or be
// detached first. The fabric owns the sinks it hands out and every packet copy in flight.
#ifndef HOMARPC_TRANSPORT_FABRIC_H_
#define HOMARPC_TRANSPORT_FABRIC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "transport/address.h"
#include "transport/clock.h"
#include "transport/packet_sink.h"

namespace homarpc::transport {

// A host on the fabric: usually an adapter around an Engine. Every method is called from the
// thread that drives the Fabric, from inside Step()/RunUntil()/RunFor(). Each may send through
// the node's sink synchronously (replies from Deliver are normal).
class FabricNode {
 public:
  virtual ~FabricNode() = default;
  // One datagram from `from`. `bytes` is valid only during the call.
  virtual void Deliver(const Address& from, absl::Span<const uint8_t> bytes) = 0;
  // When the node next wants OnTimer, in clock nanoseconds; INT64_MAX = nothing scheduled.
  // Read by the fabric before and after every step, so it must be cheap.
  virtual int64_t NextTimerNanos() const = 0;
  // Called once the clock has reached NextTimerNanos(). At most once per step. A node that
  // still reports a due time right after OnTimer is "stale" (see FabricOptions).
  virtual void OnTimer() = 0;
  // Called on every attached node at the end of every step, after deliveries and timers
  // (engines Reap here: the fabric copied every packet at Send time).
  virtual void AfterStep() {}
};

// Network-wide behaviour. Rates are probabilities in [0, 1], drawn per packet.
struct FabricOptions {
  uint64_t seed = 1;
  // One-way propagation delay from a sender's uplink to the receiver's switch port. Clamped to
  // at least 1 ns: a packet is never delivered in the step that sent it (this is what makes
  // every Step() finite, even for nodes that reply to everything at once).
  int64_t base_latency_nanos = 2 * kNanosPerMicro;
  // Extra delay drawn uniformly from [0, jitter_nanos] per packet. Jitter alone never reorders
  // packets between one pair of hosts (a path stays FIFO), it only spaces them.
  int64_t jitter_nanos = 0;
  double drop_rate = 0;
  // A duplicated packet arrives twice (each copy then meets corruption/reorder on its own).
  double duplicate_rate = 0;
  // A reordered packet is held back an extra delay drawn from [1, reorder_max_delay_nanos] and
  // leaves its path's FIFO order, so later packets may overtake it.
  double reorder_rate = 0;
  int64_t reorder_max_delay_nanos = 20 * kNanosPerMicro;
  // A corrupted packet has one byte XORed with a random non-zero value: bytes change, the
  // length does not. Empty packets are never corrupted.
  double corrupt_rate = 0;
  // Bytes added to each packet's size for serialization and buffer accounting only (e.g. 28
  // for IPv4+UDP headers, 66 with Ethernet framing too). 0 = count the UDP payload only.
  uint32_t wire_overhead_bytes = 0;
  // Progress guard: when a node still reports NextTimerNanos() <= now right after OnTimer (a
  // timer in the past it did not clear), its timer is not fired again before now + this much.
  // Counted in FabricStats::stale_timers. At least 1 ns.
  int64_t stale_timer_retry_nanos = 1 * kNanosPerMicro;
};

// One host's link to the fabric's switch.
struct LinkOptions {
  // Rate of both the host's uplink and the switch port in front of it, in Gbit/s; 0 = infinite
  // (no serialization delay, no queueing, never a buffer drop).
  double gbps = 0;
  // Byte limit of the switch port's queues (all 8 together, including the packet being
  // serialized); a packet that does not fit is tail-dropped. 0 = unlimited.
  uint64_t buffer_bytes = 0;
};

// Why the fabric dropped a packet.
enum class DropCause : int {
  kRule = 0,         // a rule said Drop
  kRandom = 1,       // FabricOptions::drop_rate
  kBufferFull = 2,   // tail drop at the receiver's switch port
  kUnreachable = 3,  // no node attached at the destination (or the sender was detached)
  kCount = 4,
};
const char* DropCauseName(DropCause cause);

struct FabricStats {
  uint64_t packets_sent = 0;  // Send() calls, whatever became of them
  uint64_t bytes_sent = 0;
  uint64_t packets_delivered = 0;  // FabricNode::Deliver calls (duplicates count twice)
  uint64_t bytes_delivered = 0;
  uint64_t dropped[static_cast<int>(DropCause::kCount)] = {};
  uint64_t duplicated = 0;            // extra copies made (rule or random)
  uint64_t corrupted = 0;             // copies with a byte changed (rule or random)
  uint64_t reordered = 0;             // copies held back by the random reorder fault
  uint64_t delayed = 0;               // copies held back by a Delay rule
  uint64_t stale_timers = 0;          // see FabricOptions::stale_timer_retry_nanos
  uint64_t max_port_queue_bytes = 0;  // the deepest any switch port's queues have been

  uint64_t dropped_by(DropCause cause) const { return dropped[static_cast<int>(cause)]; }
  uint64_t dropped_total() const;
};

// What a rule decides for one sent packet.
struct Verdict {
  enum class Kind {
    kPass,     // no opinion: ask the next rule, then the random faults
    kDeliver,  // deliver exactly once, untouched by random faults
    kDrop,
    kDuplicate,  // deliver twice
    kDelay,      // deliver after delay_nanos more than usual (out of path order)
    kCorrupt,    // deliver once with one byte changed
  };
  Kind kind = Kind::kPass;
  int64_t delay_nanos = 0;

  static Verdict Pass() { return {}; }
  static Verdict Deliver() { return {Kind::kDeliver, 0}; }
  static Verdict Drop() { return {Kind::kDrop, 0}; }
  static Verdict Duplicate() { return {Kind::kDuplicate, 0}; }
  static Verdict Delay(int64_t nanos) { return {Kind::kDelay, nanos}; }
  static Verdict Corrupt() { return {Kind::kCorrupt, 0}; }
};

// Judges one packet at Send time. `bytes` is the whole packet (header + payload), valid only
// during the call. A rule must not call back into the Fabric except stats() (where
// stats().packets_sent is the 1-based number of the packet being judged).
using Rule =
    std::function<Verdict(const Address& from, const Address& to, absl::Span<const uint8_t> bytes)>;
using RuleId = uint64_t;

class Fabric {
 public:
  // `clock` must outlive the Fabric; the fabric sets it forward (never back) as it runs, and the
  // test may also advance it between calls.
  Fabric(ManualClock* clock, FabricOptions options = {});
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  // Connects `node` at `address` and returns the sink its engine sends into. The sink is owned
  // by the fabric and stays valid for the fabric's life (after Detach, what it sends is
  // dropped as kUnreachable). Send() copies the whole packet, so the caller may free the
  // payload as soon as Send returns. `address` must not already be attached (aborts: a test
  // bug). `node` must outlive its attachment. May be called from inside node callbacks.
  PacketSink* Attach(const Address& address, FabricNode* node, LinkOptions link = {});
  // Disconnects the node at `address` (a host that vanished): it gets no more calls, and
  // packets to it, whether in flight now or sent later, are dropped as kUnreachable. Packets
  // it already sent stay in flight. Re-attaching the address later makes a new host that
  // receives the packets that arrive after it was attached. Returns false if nothing was
  // attached there. May be called from inside node callbacks (even the node's own).
  bool Detach(const Address& address);

  // Rules are evaluated in the order added, at Send time, before the random faults; the first
  // that does not Pass decides, and then no random fault touches that packet.
  RuleId AddRule(Rule rule);
  bool RemoveRule(RuleId id);
  void ClearRules();
  // Helpers: act on the k-th packet sent through the fabric (1-based, counting every Send).
  RuleId DropNth(uint64_t k);
  RuleId DuplicateNth(uint64_t k);
  RuleId DelayNth(uint64_t k, int64_t nanos);
  RuleId CorruptNth(uint64_t k);

  // Advances the clock to the earliest pending event (packet delivery or node timer; a timer
  // already in the past runs at the current time), then runs everything due at that time:
  // packet events in (time, creation order) order, then due node timers in attach order, then
  // AfterStep on every attached node. Returns false, without touching anything, when there is
  // nothing pending at all. Step, RunUntil and RunFor must not be called from inside node
  // callbacks or rules.
  //
  // Progress: a step always does something, and no node can pin the clock. Packets sent
  // during a step are due at least 1 ns later (never in the same step), each node's OnTimer
  // runs at most once per step, and a node still due right after its own OnTimer is not fired
  // again before now + stale_timer_retry_nanos. So the next step is at a later time unless a
  // timer was moved back from outside its node (by the test, or by another node's callback).
  bool Step();
  // Steps until done() is true (checked before the first step and after each) or the next step
  // would pass now + max_nanos (or nothing is pending at all); in that case the clock is left
  // at exactly now + max_nanos (unless that is INT64_MAX, "no limit": then it stays put).
  // Returns whether done() became true.
  bool RunUntil(absl::FunctionRef<bool()> done, int64_t max_nanos);
  // Runs every step due within `nanos`, then leaves the clock at exactly now + nanos.
  void RunFor(int64_t nanos);

  // When the next step would run (clamped to now for a past-due timer); INT64_MAX if none.
  int64_t NextEventNanos() const;
  // True when no packet is in flight (node timers do not count).
  bool Idle() const;
  // Packet copies on the wire or waiting in switch ports.
  size_t PacketsInFlight() const;
  // Bytes waiting in (or being serialized by) the switch port in front of `address`.
  uint64_t PortQueueBytes(const Address& address) const;

  const FabricStats& stats() const { return stats_; }
  const FabricOptions& options() const { return options_; }

 private:
  class HostSink;
  struct Host;
  struct Packet;
  struct Event;
  // One independent, reproducible random stream per fault, so changing one rate does not
  // change which packets another fault picks.
  class Stream {
   public:
    explicit Stream(uint64_t seed) : engine_(seed) {}
    bool Chance(double rate);        // true with probability rate; draws only if 0 < rate < 1
    uint64_t Below(uint64_t bound);  // uniform in [0, bound); bound > 0

   private:
    std::mt19937_64 engine_;
  };

  void SendFrom(uint32_t host_id, const OutPacket& packet);
  void LaunchWithRandomFaults(Packet packet, int64_t depart);
  void Launch(Packet packet, int64_t depart, bool keep_path_order, int64_t extra_delay);
  void ArriveAtPort(Packet packet);
  void StartTransmit(Host& host);
  void FinishTransmit(Packet packet);
  void DeliverTo(Host& host, Packet& packet);
  void Corrupt(Packet& packet);
  void Drop(DropCause cause) { ++stats_.dropped[static_cast<int>(cause)]; }
  void PushEvent(Event event);
  int64_t TimerDue(const Host& host) const;
  int64_t SerializeNanos(const Host& host, size_t bytes) const;
  RuleId AddNthRule(uint64_t k, Verdict verdict);

  ManualClock* const clock_;
  const FabricOptions options_;
  FabricStats stats_;
  // Hosts are never erased (ids index this vector and stay valid in queued events); a detached
  // host has node == nullptr.
  std::vector<std::unique_ptr<Host>> hosts_;
  absl::flat_hash_map<Address, uint32_t> attached_;  // address -> host id
  // Latest arrival time at the destination port per (sender id, destination): keeps paths FIFO.
  absl::flat_hash_map<std::pair<uint32_t, Address>, int64_t> path_last_arrival_;
  std::vector<std::pair<RuleId, Rule>> rules_;
  RuleId next_rule_id_ = 1;
  std::vector<Event> events_;  // a binary min-heap on (time, seq)
  uint64_t next_event_seq_ = 0;
  size_t queued_packets_ = 0;  // packets waiting in port queues (not in events_)
  Stream drop_stream_, duplicate_stream_, reorder_stream_, corrupt_stream_, jitter_stream_,
      mutate_stream_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_FABRIC_H_
