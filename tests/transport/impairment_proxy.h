// ImpairmentProxy: a UDP relay on loopback that sits between clients and one server and
// damages the traffic on purpose — drop, duplicate, reorder, delay, corrupt — so tests can run
// the real transport (Endpoint over io_uring or epoll) through a bad network.
//
// Clients send to address(); the proxy forwards each datagram to the server from an upstream
// socket of its own, one per client address (created the first time that client is seen), so
// the server sees as many distinct peers as there are clients. Whatever the server sends to an
// upstream socket goes back to that socket's client, from address(). The same faults apply in
// both directions, each direction with its own random stream.
//
// Faults are deterministic for a seed: each datagram draws the same number of random values
// from its direction's stream whatever happens to it, so the fate of the k-th datagram
// received in a direction depends only on (seed, direction, k). Traffic that reaches the proxy
// in the same order therefore meets the same faults (the proxy cannot control the order in
// which the kernel hands it datagrams from several senders).
//
// Test support, loopback only: plain sockets and ppoll(2), one thread, no sleeps in the data
// path except its own poll timeouts. Not a production component.
//
// Ownership and threads: the test owns the proxy. Start(), Stop() and the destructor must be
// called from the owning thread; stats() and WaitFor() from any thread. Between Start() and
// Stop() the proxy's own thread owns every socket and queue.
#ifndef HOMARPC_TESTS_TRANSPORT_IMPAIRMENT_PROXY_H_
#define HOMARPC_TESTS_TRANSPORT_IMPAIRMENT_PROXY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transport/address.h"
#include "transport/clock.h"

namespace homarpc::transport::testing {

struct ImpairmentOptions {
  // Where client datagrams go. Must be set (loopback).
  Address server;
  // The proxy's front address, which clients send to; port 0 lets the kernel choose.
  Address listen = Address::Loopback4(0);
  uint64_t seed = 1;

  // Probabilities in [0, 1], drawn independently per datagram, in this order of precedence:
  //   drop       the datagram vanishes; nothing else applies.
  //   corrupt    one byte of the homarpc magic (bytes 14..17 of the common header, see
  //              transport/wire.h) is XORed with a non-zero value, so wire::Decode rejects the
  //              datagram as kBadMagic. Real networks have UDP checksums: random bit flips in
  //              the payload are discarded by the receiving kernel and look like loss. What
  //              does reach an application is a datagram that is intact as UDP but not a valid
  //              packet (a stray sender, version skew), and that is what this models; it never
  //              hands the engine a well-formed packet with wrong contents. Datagrams shorter
  //              than 18 bytes get one random byte damaged instead; empty ones are left alone.
  //   duplicate  the datagram goes out twice, back to back, whenever it goes out.
  //   reorder    the datagram is held back and released right after the next datagram that
  //              goes out on its path (same client, same direction), so the two swap places;
  //              if none follows within reorder_hold_nanos it goes out then, in order.
  //   delay      the datagram goes out after a delay drawn from [1 us, max_delay_nanos]; later
  //              datagrams may overtake it. (A datagram chosen for reorder is not also delayed.)
  double drop_rate = 0;
  double corrupt_rate = 0;
  double duplicate_rate = 0;
  double reorder_rate = 0;
  double delay_rate = 0;
  int64_t reorder_hold_nanos = 1 * kNanosPerMilli;
  int64_t max_delay_nanos = 2 * kNanosPerMilli;

  // Bounds. Held and delayed datagrams together never exceed max_queued_packets; one that
  // would is dropped and counted as a queue overflow, as a full switch buffer would. Datagrams
  // from clients beyond max_clients are dropped and counted.
  size_t max_queued_packets = 4096;
  size_t max_clients = 256;
  // SO_RCVBUF/SO_SNDBUF of every proxy socket (forced when running as root), so bursts from
  // many clients are not lost in the kernel before the proxy sees them.
  int socket_buffer_bytes = 8 << 20;
};

// What the proxy did to the datagrams of one direction. After the queues drain, and without
// overflows or send errors: forwarded == received - dropped - truncated + duplicated.
struct ImpairmentCounters {
  uint64_t received = 0;         // datagrams read from the sending side
  uint64_t forwarded = 0;        // datagrams handed to the kernel (each duplicate copy counts)
  uint64_t dropped = 0;          // by drop_rate
  uint64_t corrupted = 0;
  uint64_t duplicated = 0;       // datagrams sent twice
  uint64_t reordered = 0;        // datagrams held back for reordering
  uint64_t delayed = 0;
  uint64_t queue_overflows = 0;  // dropped because the queues were full
  uint64_t send_errors = 0;      // datagrams (copies) the kernel refused
  uint64_t truncated = 0;        // larger than the proxy's 64 KiB buffer; dropped
};

struct ImpairmentStats {
  ImpairmentCounters to_server;
  ImpairmentCounters to_client;
  uint64_t clients = 0;           // upstream sockets created
  uint64_t clients_refused = 0;   // datagrams dropped because max_clients was reached
  uint64_t queued = 0;            // gauge: datagrams held or delayed right now
  uint64_t discarded_at_stop = 0; // datagrams still queued when Stop() ran
};

class ImpairmentProxy {
 public:
  explicit ImpairmentProxy(const ImpairmentOptions& options);
  // Stops the proxy if it is running.
  ~ImpairmentProxy();
  ImpairmentProxy(const ImpairmentProxy&) = delete;
  ImpairmentProxy& operator=(const ImpairmentProxy&) = delete;

  // Binds the front socket and starts the proxy thread. Once. Errors: INVALID_ARGUMENT (a rate
  // outside [0, 1], an unset address, a zero bound), FAILED_PRECONDITION (already started),
  // socket errors via ErrnoToStatus.
  absl::Status Start();
  // Stops the thread and closes every socket; datagrams still held or delayed are discarded
  // (counted in discarded_at_stop). Idempotent. stats() stays readable afterwards.
  void Stop();

  // The front address clients send to, with the port the kernel chose. Valid after Start().
  Address address() const { return address_; }

  // A snapshot of the counters. Thread-safe.
  ImpairmentStats stats() const;
  // Blocks until `done(stats)` holds or `timeout` passes (a failure guard, not a timer);
  // returns whether it held. `done` runs under the proxy's stats lock: keep it short, and do
  // not call back into the proxy. Thread-safe.
  bool WaitFor(const std::function<bool(const ImpairmentStats&)>& done,
               absl::Duration timeout) const;

 private:
  class Relay;  // the proxy thread's state: sockets, random streams, queues

  const ImpairmentOptions options_;
  Address address_;
  std::unique_ptr<Relay> relay_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  int wake_fd_ = -1;  // eventfd: Stop() wakes the thread through it
  bool started_ = false;

  mutable absl::Mutex mu_;
  ImpairmentStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace homarpc::transport::testing

#endif  // HOMARPC_TESTS_TRANSPORT_IMPAIRMENT_PROXY_H_
