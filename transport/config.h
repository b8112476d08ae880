// Config: every tunable of the Homa engine and its I/O, with the reference's defaults.
//
// Names follow the Homa module's sysctls (../shared/reference/homa-protocol.md §5.3) so the
// literature applies directly. One struct, passed by value at construction; an engine never
// changes its config afterwards. Validate() rejects combinations the engine cannot honour.
#ifndef HOMARPC_TRANSPORT_CONFIG_H_
#define HOMARPC_TRANSPORT_CONFIG_H_

#include <algorithm>
#include <array>
#include <cstdint>

#include "absl/status/status.h"

namespace homarpc::transport {

struct Config {
  // ---- Packets ----
  // Link MTU in bytes: decides the payload per DATA packet (1500 -> 1416 payload bytes over
  // IPv4/UDP, 1396 over IPv6/UDP) wherever the path's MTU is not used (below).
  uint32_t mtu = 1500;
  // Size each peer's packets for the MTU of the route to it, as the kernel reports it when the
  // peer is first seen (PacketSink::RouteTo: IP_MTU of the route), capped at max_path_mtu;
  // `mtu` where the sink cannot tell (the in-memory fabric). Loopback's 64 KiB MTU and a
  // jumbo-frame fabric's 9000 bytes then carry 6x fewer packets per byte than 1500 would, each
  // costing the kernel and the engine about the same whatever its size (measured: a 1 MiB
  // unary echo on loopback took 1589 us at MTU 1500, 1071 us at 9000, 1076 us at 65000).
  // The route's MTU is this host's, not the whole path's: after a peer loses larger packets
  // (a RESEND, a restart) it gets `mtu` from then on (EngineStats::path_mtu_fallbacks).
  // False: every peer gets `mtu` (for A/B measurement, and to mimic a NIC on loopback).
  bool use_path_mtu = true;
  // Cap on a path's MTU: jumbo frames. Larger packets (loopback's 64 KiB) saved nothing more in
  // that measurement and coarsen SRPT's preemption (one packet is sent whole).
  uint32_t max_path_mtu = 9000;
  // Largest message accepted or sent. The Homa module stops at 1,000,000; KV-cache blocks need
  // more. Hard ceiling: 1 GiB (offsets are 32-bit on the wire).
  uint32_t max_message_length = 64u << 20;
  // Largest message accepted from the network (requests on a server, responses on a client),
  // when it should be smaller than what we send: longer ones are refused on their first packet
  // (REFUSED kMessageTooLong), before any byte is buffered. 0 = max_message_length.
  uint32_t max_incoming_message_length = 0;

  // ---- Unscheduled data and priorities ----
  uint32_t unsched_bytes = 40000;
  uint32_t num_priorities = 8;
  // Entry i = largest message length sent unscheduled at priority i (non-increasing in i).
  std::array<uint32_t, 8> unsched_cutoffs = {0xffffffffu, 0, 0, 0, 1000000, 15000, 2800, 200};
  // When false, every packet goes out at priority 0 and no DSCP is set (for fabrics that do
  // not honour DSCP, and for A/B measurement).
  bool use_priorities = true;

  // ---- Receiver-driven grants ----
  uint32_t max_incoming = 400000;   // cap on granted-but-unreceived bytes, all messages
  uint32_t window = 0;              // per-message window; 0 = dynamic max_incoming/(active+1)
  uint32_t max_overcommit = 8;      // size of the active (granted) set, at most 8
  // A grant is sent only once it can raise the offset by this much (or finish the message), so
  // a receiver sends one GRANT per batch of packets rather than one per packet. 0 = a quarter
  // of the current window.
  uint32_t grant_increment = 0;
  uint32_t grant_fifo_fraction = 50;      // per mille of grant bandwidth for the oldest message
  uint32_t fifo_grant_increment = 50000;  // bytes per FIFO grant

  // ---- Sender pacing ----
  // Uplink speed the pacer assumes. 0 disables pacing (all data goes out as soon as granted).
  uint32_t link_mbps = 25000;
  // Whether data to a peer on this host (PacketSink::RouteTo's `local`: a loopback address or
  // one of this host's own) is paced too. Such packets never reach a NIC: the kernel hands
  // them to the receiving socket in the sending call, so there is no queue to keep short, and
  // pacing them at link_mbps only caps same-host transfers at that rate (measured: a 1 MiB
  // unary echo on loopback took 1.40-1.46 ms paced at 25 Gbit/s, 0.89-0.91 ms unpaced; see
  // docs/tuning.md). False: they go out as soon as they are granted and are not counted in
  // the pacer's NIC backlog. Nor do they carry a priority mark (IP TOS / traffic class): no
  // switch or NIC queue will read it, and the control message that sets it costs each send
  // ~0.1-0.15 us on these VMs (docs/rpc-benchmarks.md, session 22). True: paced and marked
  // like any other (to mimic a NIC on loopback, and for A/B measurement). Control packets
  // (GRANT, RESEND, ...) are marked either way.
  bool pace_local = false;
  uint32_t max_nic_est_backlog_usecs = 5;  // estimated NIC queue allowed before throttling
  // ...but never less than the time this many bytes take at link_mbps, up to
  // kMaxBacklogFloorUsecs. On a slow link 5 us is less than one packet (a 1500-byte frame
  // takes 12 us at 1 Gbit/s), so every packet waited for the one before it to leave and the
  // link idled whenever the sending thread ran late; ~100 us of queue absorbs that (measured
  // on the 1 Gbit/s testbed: bulk goodput 0.70 -> 0.86 Gbit/s). The cap keeps a slower link's
  // queue from holding milliseconds ahead of short messages on a NIC with one FIFO (12000
  // bytes are 640 us at 150 Mbit/s). At 25 Gbit/s and above the 5 us governs, as in Homa.
  uint32_t min_nic_est_backlog_bytes = 12000;
  static constexpr uint64_t kMaxBacklogFloorUsecs = 100;
  // Once the backlog has reached that limit, the pacer holds paced data back until the estimate
  // has drained by this share (percent) of the limit, then tops it up again in one go: one GSO
  // send of several packets per wake-up instead of one packet each time a packet's worth has
  // left. The queue never exceeds the limit; on average it is shorter. Each send costs the
  // kernel a whole pass down the stack (and through a software switch, such as the testbed's
  // bridge and qdiscs), so this cuts CPU per byte: on the 1 Gbit/s testbed (`mixed`, --spin_us=0,
  // perf sched over 3 s) the server's loop went from 95% to 68% of a core and the bulk client's
  // from 79% to 67%, goodput unchanged within noise (0.85-0.88 Gbit/s either way); at 67 the
  // goodput fell ~2% (too little queue left to cover a late loop). 0 = top up packet by packet.
  uint32_t pacer_refill_percent = 50;
  uint32_t defer_min_bytes = 1000;         // messages with fewer bytes left bypass the pacer
  uint32_t pacer_fifo_fraction = 50;       // per mille of pacer picks that take the oldest

  // ---- Reliability (times in ticks of `tick_usecs`) ----
  uint32_t tick_usecs = 1000;
  uint32_t resend_ticks = 5;        // silence before the first RESEND
  uint32_t resend_interval = 5;     // ticks between RESENDs for one RPC
  uint32_t timeout_ticks = 100;     // silence that aborts an RPC
  // Wait before a server sends NEED_ACK. Three ticks: a client holds an owed ack for up to one
  // tick for a request to carry it (transport/loop.cc), then sends it alone; the server must not
  // ask before that.
  uint32_t request_ack_ticks = 3;
  // A server RPC whose response was fully sent but never acknowledged is freed after this
  // many ticks (the Homa module polls forever; we give up, see PROTOCOL.md).
  uint32_t need_ack_give_up_ticks = 1000;

  // Whether this endpoint serves requests. When false, request DATA is answered with REFUSED
  // (kNotServer) and the client's RPC fails UNAVAILABLE, as if nothing listened there.
  bool accept_requests = true;

  // ---- Resource limits (past a limit new work is refused visibly, see PROTOCOL.md) ----
  uint64_t max_rx_bytes_held = 1ull << 30;  // bytes of partially received messages
  uint32_t max_rpcs_per_peer = 10000;       // live server RPCs from one client address
  uint32_t max_peers = 100000;              // peers known at once
  uint32_t peer_idle_secs = 120;            // idle peers are forgotten after this

  // ---- Loop and waiting ----
  uint32_t poll_usecs = 50;  // spin this long before sleeping; 0 = always sleep
  // Spin this long instead while a message is mid-transfer (we are sending one, or granted
  // bytes are on their way to us, or a request of ours that needed grants has just gone and
  // its response has not started: Engine::MidTransfer): the next packet is due within
  // microseconds, and sleeping through the gap costs a wake-up each time (measured: a 16 MiB
  // one-way transfer on io_uring ran 2.6x faster with 200 than with 50). Ignored when
  // poll_usecs is 0.
  uint32_t busy_poll_usecs = 200;
  // A one-packet request started on a thread other than the loop's, while the loop sleeps, is
  // sent by that thread itself (one sendmsg) and handed to the loop without waking it: the
  // request leaves at once and the loop is woken once per call (by the response) instead of
  // twice. A one-packet response from a thread other than the loop's (a worker) is sent by
  // that thread too, whether the loop sleeps or not (loop.cc, DESIGN NOTES). False: every
  // request and response goes through the loop thread (for A/B measurement).
  bool direct_send = true;

  // Returns INVALID_ARGUMENT naming the first bad field.
  absl::Status Validate() const;

  // Fits the defaults, which assume a 25 Gbit/s datacenter link, to a slower link_mbps (no
  // change at 0). Timers only grow and byte limits only shrink: a setting already past what
  // the link needs stays. Call after setting link_mbps. Needs tick_usecs > 0.
  //
  // Timers (link_mbps below ~200 Mbit/s): a RESEND after 5 ms of silence and abort after
  // 100 ms are too early where a switch port's queue holds far more time (kSlowLinkQueueBytes
  // drains in 105 ms at 10 Mbit/s): RESENDs sent meanwhile are pure extra load on the
  // saturated link, and the abort fails calls that would have completed (measured on the
  // testbed at 10 Mbit/s: 99% of calls failed UNAVAILABLE). So resend_ticks and
  // resend_interval become at least the queue's drain time, timeout_ticks ten times that.
  //
  // Bytes in flight (link_mbps below 3.2 Gbit/s): max_incoming (400 KB) and unsched_bytes
  // (40 KB) are ~130 us and ~13 us of a 25 Gbit/s link, but 3.2 ms and 0.3 ms at 1 Gbit/s and
  // 21 ms and 2 ms at 150 Mbit/s, so the bytes a receiver let in overflowed its switch port's
  // queue: measured on the testbed at 150 Mbit/s (W3, 50% load), 18659 drops in 15 s, some of
  // them short messages in the top queue, and at 1 Gbit/s (W4, 80% load) 45580. Both become at
  // most kLinkWindowUsecs of the link (still well above the bandwidth-delay product of a
  // software round trip of a few hundred microseconds), with at least one packet unscheduled
  // and four incoming (and one of max_path_mtu): drops 0-5 and 637-1508 in the same runs
  // (repeated). fifo_grant_increment becomes at most half of max_incoming, so a FIFO grant
  // stays within it. These limits are per engine: a host with several (server loops,
  // channels) lets in that many times as much. A peer on a jumbo route still gets whole
  // packets (up to max_path_mtu) where a grant ends inside one.
  void FitToLink();
  static constexpr uint64_t kSlowLinkQueueBytes = 128 * 1024;
  static constexpr uint64_t kLinkWindowUsecs = 1000;

  // Bytes of retransmission asked for (receiver) or sent (sender) per RESEND round: at least
  // max_incoming, and at least kSlowLinkQueueBytes, which a slow link drains in one of the
  // resend intervals FitToLink chose, so that shrinking max_incoming does not slow recovery.
  uint32_t ResendBudget() const {
    return std::max(max_incoming, static_cast<uint32_t>(kSlowLinkQueueBytes));
  }

  // The limit on incoming messages: max_incoming_message_length, or max_message_length.
  uint32_t IncomingLimit() const {
    return max_incoming_message_length != 0 ? max_incoming_message_length : max_message_length;
  }

  // What a user's MTU setting means: 0 = each peer's route MTU (use_path_mtu), anything else
  // that MTU for every peer. (Validate() checks the range.)
  void SetMtuOrRoute(uint32_t mtu_or_zero) {
    use_path_mtu = mtu_or_zero == 0;
    if (mtu_or_zero != 0) mtu = mtu_or_zero;
  }

  // Payload bytes in one DATA packet for `mtu` and this address family.
  uint32_t PayloadPerPacket(bool ipv6) const { return PayloadPerPacketAt(mtu, ipv6); }
  // The same for another MTU (at least 576).
  static uint32_t PayloadPerPacketAt(uint32_t mtu, bool ipv6);
  // The MTU a peer's packets are sized for, given what the sink reported for its route
  // (0 = unknown): `mtu` unless use_path_mtu, else the path's clamped to [576, max_path_mtu].
  uint32_t MtuForPath(uint32_t path_mtu) const;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_CONFIG_H_
