// UdpTransport: the production MessageTransport, Homa over UDP through transport::Endpoint
// (message_transport.h). Owned by a ChannelImpl (client only) or by a server port; thread-safe
// because Endpoint is: every method forwards to it, so the contract is Endpoint's, plus Stop().
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
#include <atomic>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "runtime/message_transport.h"
#include "transport/clock.h"

namespace homarpc::internal {
namespace {

class UdpTransport final : public MessageTransport {
 public:
  UdpTransport(std::unique_ptr<transport::Endpoint> endpoint, int64_t spin_nanos)
      : local_address_(endpoint->local_address()),
        endpoint_(std::move(endpoint)),
        spin_nanos_(spin_nanos) {}
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
    if (gate.open()) endpoint_->Abort(id, std::move(status));
  }

  void Reply(const transport::IncomingRequest& request, transport::MessageBytes response) override {
    Gate gate(this);
    if (gate.open()) endpoint_->Reply(request, std::move(response));
  }

  int64_t spin_nanos() const override { return spin_nanos_; }

  uint64_t live_server_rpcs() const override {
    Gate gate(this);
    return gate.open() ? endpoint_->stats().server_rpcs : 0;
  }

  void Stop() override {
    absl::MutexLock lock(&stop_mu_);
    if (stopped_) return;
    stopping_.store(true, std::memory_order_seq_cst);
    while (active_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    // Loops still running may call our handler, whose Reply() is now dropped by the gate.
    endpoint_.reset();
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

  const transport::Address local_address_;
  // Destroyed by Stop(); only read through an open Gate, which Stop() waits out.
  std::unique_ptr<transport::Endpoint> endpoint_;
  const int64_t spin_nanos_;
  mutable std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MessageTransport>> CreateUdpTransport(
    const UdpTransportOptions& options, MessageTransport::RequestHandler handler) {
  absl::StatusOr<std::unique_ptr<transport::Endpoint>> endpoint =
      transport::Endpoint::Create(options.endpoint, std::move(handler));
  if (!endpoint.ok()) return endpoint.status();
  const int64_t spin = int64_t{options.endpoint.config.poll_usecs} * transport::kNanosPerMicro;
  return std::unique_ptr<MessageTransport>(new UdpTransport(std::move(*endpoint), spin));
}

}  // namespace homarpc::internal
