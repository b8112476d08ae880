// UdpTransport: the production MessageTransport, Homa over UDP through transport::Endpoint
// (message_transport.h). Owned by a ChannelImpl (client only) or by a server port; thread-safe
// because Endpoint is: every method forwards to it (or to a lent socket's Endpoint), so the
// contract is Endpoint's, plus Stop() and the lending of sockets to blocking callers.
//
// DESIGN NOTES
// - Stop() destroys the Endpoint (which stops and joins its loops; it has no Stop of its own),
//   so the Endpoint must not be in use by another thread while that happens. Every forwarding
//   method passes a gate: it counts itself in `active_`, then checks `stopping_`; Stop() sets
//   `stopping_`, then waits for `active_` to drain before destroying the Endpoint. Both sides
//   are sequentially consistent, so either the caller sees `stopping_` and backs off, or Stop()
//   sees the caller counted and waits for it (Dekker's pattern). The wait is short: every
//   gated call either posts to a loop or runs inline on one, and none waits for Stop().
//   stats() does wait for the loops, which are still running at that point.
// - A mutex per call was rejected: Reply() is on every server call's path, and loop threads
//   calling Reply() from inside a handler while Stop() held that mutex to join them would
//   deadlock. A shared_mutex has the same problem.
// - Callbacks running on the loops during Stop() may call Reply(); it is dropped (the client
//   sees its RPC time out, as if nothing listened), which is what a stopping server wants.
// - Caller-driven sockets (BorrowDriver, message_transport.h). A client transport may lend
//   blocking callers up to `caller_sockets` extra endpoints in hand-over mode
//   (EndpointOptions::handed_over: inline, epoll, driven by whichever thread adopted it),
//   created on first need and kept until Stop(). Idle ones sit on a LIFO stack, so a thread
//   calling back to back gets the socket it used last, whose peer state (route, acks owed to
//   the server, which ride on its next request) is warm. A lent socket counts in `active_`
//   like a gated call, so Stop() waits for it; Stop() first aborts the RPC each lent socket is
//   driving (each publishes its RPC id, then checks `stopping_`: Dekker's pattern again).
// - RPC ids say which socket carries the RPC, for Abort() and SendRequestBeside() from other
//   threads: the loop endpoint's ids are its own tokens (never near 2^48), a lent socket's are
//   its token plus (slot + 1) << 48. Slots are fixed at construction and filled once (Stop()
//   empties them behind the shut gate), so a reader needs no lock: the id it holds was made
//   after its slot was filled.
// - Between two borrowers nobody drives an idle socket: acknowledgements it owes wait for its
//   next request, or for the server to ask (NEED_ACK, with back-off; engine_timer.cc).
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "transport/plain_sync.h"
#include "runtime/message_transport.h"
#include "transport/clock.h"
#include "transport/log.h"

namespace homarpc::internal {
namespace {

constexpr int kDriverShift = 48;
constexpr uint64_t kTokenMask = (uint64_t{1} << kDriverShift) - 1;

class UdpTransport final : public MessageTransport {
 public:
  UdpTransport(std::unique_ptr<transport::Endpoint> endpoint, int64_t spin_nanos,
               const UdpTransportOptions& options)
      : local_address_(endpoint->local_address()),
        endpoint_(std::move(endpoint)),
        spin_nanos_(spin_nanos),
        driver_options_(DriverOptions(options)),
        lent_socket_factory_(options.lent_socket_factory),
        driver_slots_(options.caller_sockets),
        slots_(new std::atomic<Driver*>[options.caller_sockets]) {
    for (uint32_t i = 0; i < driver_slots_; ++i) slots_[i].store(nullptr);
  }
  ~UdpTransport() override { Stop(); }

  transport::Address local_address() const override { return local_address_; }

  uint64_t SendRequest(const transport::Address& dest, transport::MessageBytes request,
                       ResponseCallback done, int64_t deadline_nanos) override {
    Gate gate(this);
    if (!gate.open()) {
      done(absl::CancelledError("transport stopped"));
      return 0;
    }
    return endpoint_->SendRequest(dest, std::move(request), std::move(done), deadline_nanos);
  }

  void Abort(uint64_t id, absl::Status status) override {
    Gate gate(this);
    if (!gate.open()) return;
    if (Driver* driver = DriverOf(id); driver != nullptr) {
      driver->endpoint->Abort(id & kTokenMask, std::move(status));
      return;
    }
    endpoint_->Abort(id, std::move(status));
  }

  uint64_t SendRequestBeside(uint64_t rpc_id, const transport::Address& dest,
                             transport::MessageBytes request, ResponseCallback done,
                             int64_t deadline_nanos) override {
    Gate gate(this);
    if (!gate.open()) {
      done(absl::CancelledError("transport stopped"));
      return 0;
    }
    if (Driver* driver = DriverOf(rpc_id); driver != nullptr) {
      // From another thread this posts to the socket's current driver, or waits for its next.
      return driver->Tag(
          driver->endpoint->SendRequest(dest, std::move(request), std::move(done), deadline_nanos));
    }
    return endpoint_->SendRequest(dest, std::move(request), std::move(done), deadline_nanos);
  }

  CallDriver* BorrowDriver() override {
    if (driver_slots_ == 0) return nullptr;
    active_.fetch_add(1, std::memory_order_seq_cst);  // held until ReturnDriver (DESIGN NOTES)
    if (stopping_.load(std::memory_order_seq_cst)) {
      active_.fetch_sub(1, std::memory_order_release);
      return nullptr;
    }
    Driver* driver = nullptr;
    {
      transport::PlainMutexLock lock(&pool_mu_);
      if (!idle_.empty()) {
        driver = idle_.back();
        idle_.pop_back();
      } else if (owned_drivers_.size() < driver_slots_ && !driver_failed_) {
        absl::StatusOr<std::unique_ptr<transport::Endpoint>> endpoint =
            lent_socket_factory_ ? lent_socket_factory_(driver_options_)
                                 : transport::Endpoint::Create(driver_options_);
        if (endpoint.ok()) {
          const auto slot = static_cast<uint32_t>(owned_drivers_.size());
          owned_drivers_.push_back(std::make_unique<Driver>(this, slot, std::move(*endpoint)));
          driver = owned_drivers_.back().get();
          slots_[slot].store(driver, std::memory_order_release);
        } else {
          // Out of sockets or memory: calls go through the loop thread from now on.
          driver_failed_ = true;
          HOMARPC_LOG(WARNING) << "no socket for caller-driven calls ("
                               << endpoint.status().message() << "); using the loop thread";
        }
      }
    }
    if (driver == nullptr) {
      active_.fetch_sub(1, std::memory_order_release);
      return nullptr;
    }
    driver->endpoint->Adopt();
    return driver;
  }

  void ReturnDriver(CallDriver* lent) override {
    auto* driver = static_cast<Driver*>(lent);
    driver->current_id.store(0, std::memory_order_relaxed);
    driver->endpoint->Release();
    {
      transport::PlainMutexLock lock(&pool_mu_);
      idle_.push_back(driver);
    }
    active_.fetch_sub(1, std::memory_order_release);
  }

  void Reply(const transport::IncomingRequest& request, transport::MessageBytes response) override {
    Gate gate(this);
    if (gate.open()) endpoint_->Reply(request, std::move(response));
  }

  int64_t spin_nanos() const override { return spin_nanos_; }

  bool RunAfterRound(const transport::IncomingRequest& request,
                     absl::AnyInvocable<void() &&>& task) override {
    Gate gate(this);
    return gate.open() && endpoint_->RunAfterRound(request, task);
  }

  uint64_t live_server_rpcs() const override {
    Gate gate(this);
    return gate.open() ? endpoint_->stats().server_rpcs : 0;
  }

  void Stop() override {
    absl::MutexLock lock(&stop_mu_);
    if (stopped_) return;
    stopping_.store(true, std::memory_order_seq_cst);
    // Lent sockets end their calls (CANCELLED) so that their borrowers give them back.
    for (uint32_t i = 0; i < driver_slots_; ++i) {
      Driver* driver = slots_[i].load(std::memory_order_acquire);
      if (driver == nullptr) continue;
      if (const uint64_t id = driver->current_id.load(std::memory_order_seq_cst); id != 0) {
        driver->AbortForStop(id);
      }
    }
    while (active_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    // Loops still running may call our handler, whose Reply() is now dropped by the gate.
    endpoint_.reset();
    std::vector<std::unique_ptr<Driver>> drivers;
    {
      transport::PlainMutexLock pool_lock(&pool_mu_);
      idle_.clear();
      drivers.swap(owned_drivers_);
    }
    // Outside the lock (their RPCs' callbacks run as they close). Each adopts and shuts down on
    // this thread, flushing the acks it owes. The gate is shut, so nothing reads the slots.
    for (uint32_t i = 0; i < driver_slots_; ++i) slots_[i].store(nullptr);
    drivers.clear();
    stopped_ = true;
  }

 private:
  // Admits a call to the Endpoint unless Stop() has begun (see DESIGN NOTES).
  class Gate {
   public:
    explicit Gate(const UdpTransport* t) : t_(t) {
      t_->active_.fetch_add(1, std::memory_order_seq_cst);
      open_ = !t_->stopping_.load(std::memory_order_seq_cst);
    }
    ~Gate() { t_->active_.fetch_sub(1, std::memory_order_release); }
    Gate(const Gate&) = delete;
    Gate& operator=(const Gate&) = delete;
    bool open() const { return open_; }

   private:
    const UdpTransport* const t_;
    bool open_;
  };

  // A lent socket (DESIGN NOTES).
  struct Driver final : CallDriver {
    Driver(UdpTransport* owner, uint32_t slot, std::unique_ptr<transport::Endpoint> e)
        : transport(owner), tag(uint64_t{slot + 1} << kDriverShift), endpoint(std::move(e)) {}

    uint64_t Tag(uint64_t token) const { return token == 0 ? 0 : (token | tag); }

    uint64_t SendRequest(const transport::Address& dest, transport::MessageBytes request,
                         ResponseCallback done, int64_t deadline_nanos) override {
      const uint64_t id = Tag(
          endpoint->SendRequest(dest, std::move(request), std::move(done), deadline_nanos));
      current_id.store(id, std::memory_order_seq_cst);
      // Stop() began before it could see `current_id`: end the call ourselves.
      if (transport->stopping_.load(std::memory_order_seq_cst)) AbortForStop(id);
      return id;
    }
    void AbortForStop(uint64_t id) {
      endpoint->Abort(id & kTokenMask, absl::CancelledError("channel closed"));
    }
    void Drive(absl::FunctionRef<bool()> until) override {
      endpoint->Poll(INT64_MAX, [until] { return until(); });
    }

    UdpTransport* const transport;
    const uint64_t tag;
    const std::unique_ptr<transport::Endpoint> endpoint;
    std::atomic<uint64_t> current_id{0};  // the RPC its borrower drives, for Stop()
  };

  static transport::EndpointOptions DriverOptions(const UdpTransportOptions& options) {
    transport::EndpointOptions o = options.endpoint;
    o.num_loops = 1;
    o.inline_loop = true;
    o.handed_over = true;
    o.standby = false;  // a lent socket has no loop thread to stand by for
    o.io.reuse_port = false;
    transport::Address bind = o.io.bind_address;
    bind.set_port(0);
    o.io.bind_address = bind;
    return o;
  }

  // The lent socket that carries RPC `id`, or nullptr for the loop endpoint's.
  Driver* DriverOf(uint64_t id) const {
    const uint64_t slot = id >> kDriverShift;
    if (slot == 0 || slot > driver_slots_) return nullptr;
    return slots_[slot - 1].load(std::memory_order_acquire);
  }

  const transport::Address local_address_;
  // Destroyed by Stop(); only read through an open Gate, which Stop() waits out.
  std::unique_ptr<transport::Endpoint> endpoint_;
  const int64_t spin_nanos_;
  mutable std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;

  const transport::EndpointOptions driver_options_;
  const std::function<absl::StatusOr<std::unique_ptr<transport::Endpoint>>(
      const transport::EndpointOptions&)>
      lent_socket_factory_;  // empty: transport::Endpoint::Create
  const uint32_t driver_slots_;
  // Filled once each (emptied only by Stop(), behind the shut gate).
  const std::unique_ptr<std::atomic<Driver*>[]> slots_;
  transport::PlainMutex pool_mu_;
  std::vector<std::unique_ptr<Driver>> owned_drivers_ ABSL_GUARDED_BY(pool_mu_);
  std::vector<Driver*> idle_ ABSL_GUARDED_BY(pool_mu_);  // LIFO: the warmest on top
  bool driver_failed_ ABSL_GUARDED_BY(pool_mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MessageTransport>> CreateUdpTransport(
    const UdpTransportOptions& options, MessageTransport::RequestHandler handler) {
  // Lent sockets only for a client: a server's handlers answer through Reply().
  UdpTransportOptions own = options;
  if (handler) own.caller_sockets = 0;
  absl::StatusOr<std::unique_ptr<transport::Endpoint>> endpoint =
      transport::Endpoint::Create(options.endpoint, std::move(handler));
  if (!endpoint.ok()) return endpoint.status();
  const int64_t spin = int64_t{options.endpoint.config.poll_usecs} * transport::kNanosPerMicro;
  return std::unique_ptr<MessageTransport>(new UdpTransport(std::move(*endpoint), spin, own));
}

}  // namespace homarpc::internal
