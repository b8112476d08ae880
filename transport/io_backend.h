// IoBackend: moves whole UDP datagrams between one socket and an engine's loop.
//
// Two implementations, both moving datagrams with recvmmsg/sendmmsg, UDP GSO and GRO, and
// differing in how their loop sleeps: UringBackend (liburing, SINGLE_ISSUER|DEFER_TASKRUN: a
// one-shot poll on the socket, the notify read and the timeout in one io_uring_enter) and
// EpollBackend (epoll; the socket joins the set only for the sleep). CreateIoBackend() picks
// io_uring and falls back to epoll (logging one line) when io_uring cannot be set up;
// HOMARPC_IO_BACKEND=epoll or =uring in the environment, or IoOptions::kind, override the
// choice.
//
// Threading: a backend belongs to one loop thread. Every method except Notify() and
// SendDirect() must be called from that thread (the first thread to call Poll/Flush/Wait
// becomes the owner; io_uring is set up SINGLE_ISSUER). Notify() and SendDirect() may be
// called from any thread. An epoll backend can change owners (ReleaseOwner); io_uring cannot.
#ifndef HOMARPC_TRANSPORT_IO_BACKEND_H_
#define HOMARPC_TRANSPORT_IO_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "transport/address.h"
#include "transport/clock.h"
#include "transport/packet_sink.h"

namespace homarpc::transport {

enum class IoKind { kAuto, kUring, kEpoll };
const char* IoKindName(IoKind kind);
// The inverse of IoKindName: "auto", "uring" or "epoll"; nullopt for anything else. The one
// parser of backend names (flags, channel arguments, HOMARPC_IO_BACKEND).
std::optional<IoKind> ParseIoKind(absl::string_view name);
// The backend asked for: `configured`, unless the environment variable HOMARPC_IO_BACKEND
// names another ("auto", "uring", "epoll"; empty counts as unset). INVALID_ARGUMENT when it
// names none of them. CreateIoBackend() applies it; owners that decide by the kind ask here.
absl::StatusOr<IoKind> RequestedIoKind(IoKind configured);

struct IoOptions {
  IoKind kind = IoKind::kAuto;
  // The backend will be handed between threads (ReleaseOwner): epoll, whatever `kind` and
  // HOMARPC_IO_BACKEND say.
  bool transferable = false;
  // Address to bind; port 0 picks one. IPv4 or IPv6. An IPv6 socket is v6-only, except one
  // bound to the wildcard "::", which also serves IPv4 peers (as v4-mapped addresses).
  Address bind_address = Address::Loopback4(0);
  // SO_REUSEPORT, so several loops can share one server port.
  bool reuse_port = false;
  bool enable_gso = true;  // UDP_SEGMENT for runs of equal-size packets to one destination
  bool enable_gro = true;  // UDP_GRO on receive
  // Kernel socket buffers (SO_RCVBUF/SO_SNDBUF, forced when running as root).
  int socket_buffer_bytes = 8 << 20;
  // Receive buffers: how many datagrams (or GRO batches) one receive call may take, and the
  // size of each buffer. With GRO one buffer holds many datagrams; 64 KiB fits the largest GRO
  // batch. Both backends read with recvmmsg into these slots, filled from the first at every
  // call (io_backend_internal.h, RecvBatch); past 32 the per-call saving is negligible and the
  // memory (slots x 64 KiB, touched only as bursts need it) is not.
  uint32_t recv_buffer_count = 32;
  uint32_t recv_buffer_size = 65536;
  // epoll: a loop awake this long since its last sleep takes its socket out of the epoll set
  // at its next empty poll (epoll_backend.cc, DESIGN NOTES). Endpoints make it at least twice
  // their loops' idle spin (Config::poll_usecs), so a loop that spins and sleeps between sparse
  // calls keeps it; a loop mid-transfer spins longer (busy_poll_usecs) and may take it out.
  int64_t unwatch_after_nanos = 200 * kNanosPerMicro;
};

struct IoStats {
  uint64_t datagrams_sent = 0;
  uint64_t send_calls = 0;       // messages handed to sendmmsg (a GSO batch counts once)
  uint64_t send_errors = 0;      // datagrams the kernel refused (counted, not retried)
  uint64_t datagrams_received = 0;
  uint64_t recv_batches = 0;     // receive buffers filled (a datagram, or a GRO batch)
  uint64_t recv_truncated = 0;   // datagrams dropped because they did not fit a buffer
  uint64_t direct_sends = 0;        // datagrams SendDirect handed to the kernel
  uint64_t direct_send_errors = 0;  // ... and the ones it refused
  uint64_t direct_send_wakes = 0;   // direct sends that woke their loop anyway (Endpoint only)
  uint64_t watch_changes = 0;       // epoll: times the socket entered or left the epoll set
};

// Remembers routes per IP address (any port: a server meets many client ports of one host),
// so the kernel is asked (LookupRoute, four system calls) once per host per `ttl`, not once per
// peer; and asks at most `max_lookups_per_second` times a second: beyond that (a flood of new
// source addresses, real or forged) the answer is {}, "unknown" (the engine uses Config::mtu
// and paces), and is not remembered. Bounded: at `max_entries` the cache starts afresh. Not
// thread-safe.
class RouteCache {
 public:
  using Lookup = std::function<Route(const Address&)>;
  struct Options {
    int64_t ttl_nanos = int64_t{60} * 1000 * 1000 * 1000;  // routes change; ask again after
    uint32_t max_lookups_per_second = 100;
    size_t max_entries = 4096;
  };
  RouteCache(const Clock* clock, Lookup lookup, Options options);
  Route Get(const Address& dest);
  uint64_t lookups() const { return lookups_; }

 private:
  struct Entry {
    Route route;
    int64_t expires_nanos;
  };
  const Clock* clock_;
  Lookup lookup_;
  Options options_;
  absl::flat_hash_map<Address, Entry> entries_;
  int64_t window_start_nanos_ = INT64_MIN;
  uint32_t window_lookups_ = 0;
  uint64_t lookups_ = 0;
};

class IoBackend : public PacketSink {
 public:
  ~IoBackend() override = default;

  virtual IoKind kind() const = 0;
  // The bound address, with the port the kernel chose.
  virtual Address local_address() const = 0;

  // PacketSink: queues a datagram. The header is copied; the payload span must stay valid
  // until the next Flush() returns.
  void Send(const OutPacket& packet) override = 0;
  // Hands every queued datagram to the kernel and returns when the kernel no longer needs
  // the payload memory. Consecutive packets to one destination with equal priority and equal
  // size (the last may be shorter) go out as one GSO send when enabled.
  virtual void Flush() = 0;

  // Delivers every datagram that has already arrived, without blocking, to `fn` (GRO batches
  // are split into their datagrams); after ReadOneNext(), the first Poll() that finds
  // anything delivers one receive buffer only (one datagram, or one GRO batch), and the next
  // Poll() the rest. `bytes` is valid only during the call. Returns the number of datagrams
  // delivered.
  using RecvFn = absl::FunctionRef<void(const Address& from, absl::Span<const uint8_t> bytes)>;
  virtual int Poll(RecvFn fn) = 0;

  // Blocks until a datagram may be readable, Notify() is called, or `timeout_nanos` passes
  // (negative = no limit). Spurious returns are allowed; callers Poll() afterwards.
  virtual void Wait(int64_t timeout_nanos) = 0;
  // Makes a concurrent or the next Wait() return promptly. Thread-safe, async-signal-unsafe.
  virtual void Notify() = 0;
  // Sends one datagram at once with one system call, bypassing the queue (the caller's own
  // thread sends, so a sleeping loop need not be woken to send it). Thread-safe. Returns
  // false when the kernel did not take it (socket buffer full, wrong address family, an
  // error); counted in IoStats either way.
  virtual bool SendDirect(const OutPacket& packet) = 0;
  // Lets the next thread that calls Send/Flush/Poll/Wait become the owner: for a backend that
  // its user hands from thread to thread (serializing them itself; Endpoint's hand-over mode).
  // Returns false when the backend stays bound to its first thread (io_uring's SINGLE_ISSUER
  // ring); the epoll backend returns true.
  virtual bool ReleaseOwner() { return false; }

  // Makes the next Poll() that finds anything deliver one receive buffer only (see Poll), so
  // that LastArrivalNanos() right after it dates what ended a sleep rather than the latest of
  // a batch. A loop calls it before it sleeps, when it will want that date. Owner thread only.
  virtual void ReadOneNext() {}
  // When the last receive buffer that Poll() delivered reached this socket (a GRO batch: when
  // the batch did), on MonotonicClock's scale, by the kernel's receive timestamp
  // (SIOCGSTAMPNS, enabled when the socket is opened); 0 when the kernel has none for it (it
  // arrived before the kernel began stamping) or the stamp is implausible. One system call
  // (~3 us here): a loop asks after a wake-up, once the datagram it woke for has been
  // answered, to learn how long its peers really left it idle, without the wake-up's own
  // latency (Loop::IdleGap, SpinPolicy). Owner thread only.
  virtual int64_t LastArrivalNanos() { return 0; }

  // PacketSink: the kernel's route to `dest` (LookupRoute, through a RouteCache). Engine
  // thread only, like Send.
  Route RouteTo(const Address& dest) override;

  virtual IoStats stats() const = 0;

 private:
  std::unique_ptr<RouteCache> routes_;  // created on first use
};

// The kernel's route to `dest`, read from a UDP socket connected to it (nothing is sent):
// its MTU (IP_MTU / IPV6_MTU), e.g. 65536 to a loopback address; and whether `dest` is this
// host -- a loopback address (127/8, ::1, ::ffff:127/104), or an address the kernel picks as
// its own source for it (a local route's). {} when the kernel cannot tell (no route, an unset
// address). About four system calls: callers cache it (per peer).
Route LookupRoute(const Address& dest);

// Creates a backend per `options`. Errors: INVALID_ARGUMENT (unset bind address),
// UNAVAILABLE / INTERNAL from the socket calls (errno mapped by ErrnoToStatus), and
// FAILED_PRECONDITION when kind == kUring was demanded and io_uring cannot be set up.
absl::StatusOr<std::unique_ptr<IoBackend>> CreateIoBackend(const IoOptions& options);

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_IO_BACKEND_H_
