// Channel, ChannelArguments and channel creation (channel.h); ChannelImpl's construction,
// configuration and teardown (client_call.h). The call paths are in client_call.cc.
//
// A channel resolves its target once, at creation, and creates one client-only transport
// (a Homa endpoint: one UDP socket, one loop thread) bound to the wildcard address of the
// first resolved address's family, port 0. Binding the wildcard rather than loopback lets one
// channel reach local and remote servers alike. A socket has one family, so addresses of the
// other family in the resolution result are dropped (a name with A and AAAA records is served
// over the family getaddrinfo() preferred). Creation never fails: a target that does not
// resolve, a bad argument or a socket error leaves a channel whose every call fails
// UNAVAILABLE with the reason, as gRPC's channels do.
//
// Teardown: ~ChannelImpl marks the channel closing (so a concurrent TryCancel no longer
// touches the transport), runs the completions queued on its completion worker and joins it
// (ChannelImpl::TryOffload: large responses), then destroys the transport, which completes
// the calls still in flight with CANCELLED on its own thread. Channel::~Channel cannot do that
// synchronously when it runs on either thread (the last reference to the channel dropped
// inside one of its completion callbacks): it would join the thread it runs on. It hands the
// ChannelImpl to the Reaper, which destroys it on a thread of its own.
//
// DESIGN NOTES (the Reaper)
//
// Some other thread has to destroy such a ChannelImpl, and somebody has to join that thread.
// A detached thread was the first version; it can still be running when the process exits
// (main returns just after the last callback), and then it races the static destructors: the
// transport reads MonotonicClock's function-local static, the CANCELLED callbacks it runs are
// user code touching user statics. Posting the teardown to the transport itself is no better:
// its loop is the thread to be joined. The only owner that outlives every channel is the
// process, so the Reaper is process-wide, against STYLE.md's habit: it is created on first
// use (the first deferred teardown) and never destroyed (it stays usable during static
// destruction), and an atexit handler registered at that moment joins every teardown thread
// still running. Handlers registered with atexit run before the destructors of the statics
// that were constructed before them ([basic.start.term]), so whatever the teardown uses
// (constructed by the channel's earlier calls) is still alive while it is joined. Finished
// teardown threads are joined whenever a new one is handed over, so they do not pile up.
// After the exit handler ran, a teardown (one started by a callback that runs during another
// teardown) gets a detached thread, the only option left, and the process exit ends it.
#include "runtime/channel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "runtime/client_call.h"
#include "runtime/envelope.h"
#include "runtime/metadata.h"
#include "runtime/target.h"
#include "runtime/transport_args.h"
#include "transport/log.h"

namespace homarpc {

namespace {

class InsecureCredentials final : public ChannelCredentials {};

absl::Status BuildTransportOptions(const ChannelArguments& args, const transport::Address& first,
                                   const internal::ChannelLimits& limits,
                                   internal::UdpTransportOptions* options) {
  transport::EndpointOptions& endpoint = options->endpoint;
  transport::Config& config = endpoint.config;
  endpoint.num_loops = 1;
  config.max_message_length = limits.max_message_length;
  // Responses above the receive limit are refused on their first packet, before any of their
  // bytes are buffered (the call then fails RESOURCE_EXHAUSTED).
  config.max_incoming_message_length =
      internal::MessageLengthFor(limits.max_receive_bytes);

  if (absl::Status s = internal::ApplyTransportArgs(args, options); !s.ok()) return s;

  // One tick per millisecond. The default silence before UNAVAILABLE is 100 ms, longer on a
  // slow link (Config::FitToLink, applied with the link rate above).
  config.tick_usecs = 1000;
  const int timeout_ms = args.GetInt(
      kArgUnavailableTimeoutMs, static_cast<int>(std::max<uint32_t>(100, config.timeout_ticks)));
  if (timeout_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(kArgUnavailableTimeoutMs, " must be positive"));
  }
  // The transport needs the timeout to exceed the first resend.
  config.timeout_ticks = static_cast<uint32_t>(std::max(timeout_ms, 2));
  config.resend_ticks = std::min(config.resend_ticks, config.timeout_ticks - 1);
  config.resend_interval = std::min(config.resend_interval, config.resend_ticks);

  absl::StatusOr<transport::Address> wildcard =
      transport::Address::Parse(first.is_v6() ? "[::]:0" : "0.0.0.0:0");
  endpoint.io.bind_address = *wildcard;
  return absl::OkStatus();
}

std::shared_ptr<Channel> NewChannel(const std::string& target, const ChannelArguments& args,
                                    const internal::TransportFactory* factory) {
  internal::ChannelLimits limits;
  const int max_send = args.GetInt(kArgMaxSendMessageLength, -1);
  const int max_receive = args.GetInt(kArgMaxReceiveMessageLength, 4 * 1024 * 1024);
  limits.max_send_bytes = max_send < 0 ? -1 : max_send;
  limits.max_receive_bytes = max_receive < 0 ? -1 : max_receive;
  const int max_metadata =
      args.GetInt(kArgMaxMetadataSize, static_cast<int>(internal::kDefaultMaxMetadataBytes));
  limits.max_metadata_bytes = static_cast<size_t>(std::max(max_metadata, 0));
  limits.max_message_length = static_cast<uint32_t>(std::max(
      internal::MessageLengthFor(limits.max_send_bytes), internal::MessageLengthFor(limits.max_receive_bytes)));

  bool round_robin = true;
  if (const std::string* lb = args.GetString(kArgLoadBalancingPolicy); lb != nullptr) {
    if (*lb == "pick_first") {
      round_robin = false;
    } else if (*lb != "round_robin") {
      HOMARPC_LOG(WARNING) << "channel " << target << ": unknown load-balancing policy '" << *lb
                           << "', using round_robin";
    }
  }

  absl::Status error;
  std::vector<transport::Address> addresses;
  std::unique_ptr<internal::MessageTransport> transport;
  absl::StatusOr<std::vector<transport::Address>> resolved = internal::ResolveTarget(target);
  if (!resolved.ok()) {
    error = absl::UnavailableError(resolved.status().message());
  } else {
    const int family = resolved->front().family();
    for (const transport::Address& a : *resolved) {
      if (a.family() == family) addresses.push_back(a);
    }
    internal::UdpTransportOptions options;
    error = BuildTransportOptions(args, addresses.front(), limits, &options);
    if (error.ok()) {
      absl::StatusOr<std::unique_ptr<internal::MessageTransport>> created =
          factory != nullptr ? (*factory)(options, nullptr)
                             : internal::CreateUdpTransport(options, nullptr);
      if (created.ok()) {
        transport = std::move(*created);
      } else {
        error = created.status();
      }
    }
    if (!error.ok()) {
      error = absl::UnavailableError(
          absl::StrCat("channel to '", target, "' has no transport: ", error.message()));
    }
  }
  if (!error.ok()) HOMARPC_LOG(WARNING) << error.message();
  return internal::ChannelImpl::MakeChannel(std::make_unique<internal::ChannelImpl>(
      std::move(addresses), std::move(transport), limits, round_robin, std::move(error)));
}

// Destroys channels on threads of their own and joins those threads (see DESIGN NOTES).
class Reaper {
 public:
  // The process's one Reaper: created on first use, never destroyed.
  static Reaper& Get() {
    static Reaper* const reaper = [] {
      auto* created = new Reaper();
      std::atexit([] { Get().JoinAll(); });
      return created;
    }();
    return *reaper;
  }

  // Destroys `impl` on a new thread; returns at once.
  void Destroy(std::unique_ptr<internal::ChannelImpl> impl) {
    absl::MutexLock lock(&mu_);
    JoinFinishedLocked();
    if (exiting_) {
      std::thread([impl = std::move(impl)]() mutable { impl.reset(); }).detach();
      return;
    }
    Job& job = jobs_.emplace_back();
    // `job` keeps its address in the list until the thread has been joined.
    job.thread = std::thread([impl = std::move(impl), &job]() mutable {
      impl.reset();
      job.done.store(true, std::memory_order_release);
    });
  }

 private:
  struct Job {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  Reaper() = default;

  void JoinFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (!it->done.load(std::memory_order_acquire)) {
        ++it;
        continue;
      }
      it->thread.join();  // its function has returned: the thread is ending
      it = jobs_.erase(it);
    }
  }

  // At exit. The lock is not held while joining: a teardown runs user callbacks, which may
  // hand another channel over (it then gets a detached thread).
  void JoinAll() {
    std::list<Job> jobs;
    {
      absl::MutexLock lock(&mu_);
      exiting_ = true;
      jobs.swap(jobs_);  // nodes keep their addresses
    }
    for (Job& job : jobs) {
      if (job.thread.get_id() == std::this_thread::get_id()) {
        job.thread.detach();  // exit() called by a teardown itself
      } else {
        job.thread.join();
      }
    }
  }

  absl::Mutex mu_;
  std::list<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool exiting_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

// ---- ChannelArguments, credentials, creation ----

const std::string* ChannelArguments::GetString(const std::string& key) const {
  auto it = args_.find(key);
  if (it == args_.end()) return nullptr;
  return std::get_if<std::string>(&it->second);
}

int ChannelArguments::GetInt(const std::string& key, int default_value) const {
  auto it = args_.find(key);
  if (it == args_.end()) return default_value;
  const int* value = std::get_if<int>(&it->second);
  return value != nullptr ? *value : default_value;
}

std::shared_ptr<ChannelCredentials> InsecureChannelCredentials() {
  return std::make_shared<InsecureCredentials>();
}

std::shared_ptr<Channel> CreateChannel(const std::string& target,
                                       const std::shared_ptr<ChannelCredentials>& creds) {
  return CreateCustomChannel(target, creds, ChannelArguments());
}

std::shared_ptr<Channel> CreateCustomChannel(const std::string& target,
                                             const std::shared_ptr<ChannelCredentials>& creds,
                                             const ChannelArguments& args) {
  return NewChannel(target, args, nullptr);
}

namespace internal {
std::shared_ptr<Channel> CreateChannelWithTransport(const std::string& target,
                                                    const ChannelArguments& args,
                                                    const TransportFactory& factory) {
  return NewChannel(target, args, &factory);
}
}  // namespace internal

// ---- Channel ----

Channel::Channel(std::unique_ptr<internal::ChannelImpl> impl) : impl_(std::move(impl)) {}

Channel::~Channel() {
  if (impl_ != nullptr && (impl_->InCallbackThread() || impl_->InCompletionWorker())) {
    // On the channel's own transport thread or completion worker (see the file comment),
    // which its destruction joins: destroy it elsewhere.
    Reaper::Get().Destroy(std::move(impl_));
  }
}

bool Channel::resolved() const { return impl_->resolved(); }

std::string Channel::DebugTarget() const { return impl_->DebugTarget(); }

Status Channel::BlockingUnaryCall(const internal::RpcMethod& method, ClientContext* context,
                                  const google::protobuf::MessageLite& request,
                                  google::protobuf::MessageLite* response) {
  return impl_->BlockingUnaryCall(method, context, request, response);
}

void Channel::AsyncUnaryCall(const internal::RpcMethod& method, ClientContext* context,
                             const google::protobuf::MessageLite* request,
                             google::protobuf::MessageLite* response,
                             std::function<void(Status)> on_done) {
  impl_->AsyncUnaryCall(method, context, request, response, std::move(on_done));
}

// ---- ChannelImpl ----

namespace internal {

std::atomic<uint64_t> ChannelImpl::next_id_{1};

ChannelImpl::ChannelImpl(std::vector<transport::Address> addresses,
                         std::unique_ptr<MessageTransport> transport, ChannelLimits limits,
                         bool round_robin, absl::Status error)
    : id_(next_id_.fetch_add(1, std::memory_order_relaxed)),
      addresses_(std::move(addresses)),
      limits_(limits),
      round_robin_(round_robin && addresses_.size() > 1),
      error_(std::move(error)),
      spin_nanos_(transport != nullptr ? transport->spin_nanos() : 0),
      transport_(std::move(transport)) {}

ChannelImpl::~ChannelImpl() {
  {
    absl::MutexLock lock(&close_mu_);
    closing_ = true;
  }
  // Completions already handed to the worker run (they read limits_ and the rest) and the
  // worker is joined; later ones, from the transport's teardown below, run on its thread.
  std::unique_ptr<Executor> offload;
  {
    absl::MutexLock lock(&offload_mu_);
    offload_closed_ = true;
    offload = std::move(offload_executor_);
  }
  if (offload != nullptr) offload->Shutdown();
  // Completes the calls in flight (CANCELLED) on the transport's thread; they still read
  // limits_ and the rest, so this comes before any other member goes.
  transport_.reset();
}

std::shared_ptr<Channel> ChannelImpl::MakeChannel(std::unique_ptr<ChannelImpl> impl) {
  return std::shared_ptr<Channel>(new Channel(std::move(impl)));
}

std::string ChannelImpl::DebugTarget() const {
  if (!error_.ok()) return std::string(error_.message());
  return absl::StrJoin(addresses_, ",", [](std::string* out, const transport::Address& a) {
    out->append(PeerString(a));
  });
}

const transport::Address& ChannelImpl::PickAddress() {
  if (!round_robin_) return addresses_.front();
  const uint32_t n = next_address_.fetch_add(1, std::memory_order_relaxed);
  return addresses_[n % addresses_.size()];
}

void ChannelImpl::CancelRpc(uint64_t rpc_id, transport::Address dest, uint64_t call_id) {
  Envelope cancel;
  cancel.kind = EnvelopeKind::kCancel;
  cancel.call_id = call_id;
  transport::Buffer message(EncodedHeaderSize(cancel));
  EncodeHeader(cancel, absl::Span<uint8_t>(message.data(), message.size()));
  auto send_and_abort = [&](MessageTransport* transport) {
    // The server answers a cancel (it may know the call or not); nobody needs the answer.
    // From the socket that carries the call: the server knows calls by client address and id.
    transport->SendRequestBeside(
        rpc_id, dest, std::move(message), [](absl::StatusOr<transport::Buffer>) {}, INT64_MAX);
    // Last: on the transport's thread this completes the call inline (see the contract).
    transport->Abort(rpc_id, absl::CancelledError("Cancelled"));
  };
  if (InCallbackThread()) {
    // On the transport's own thread its destructor cannot run to the end meanwhile (it joins
    // this thread first), so the lock is not held across the inline completion, whose user
    // code could come back here.
    MessageTransport* transport;
    {
      absl::ReaderMutexLock lock(&close_mu_);
      if (closing_ || transport_ == nullptr) return;
      transport = transport_.get();
    }
    send_and_abort(transport);
    return;
  }
  // Elsewhere, the destructor must wait until we are done with the transport.
  absl::ReaderMutexLock lock(&close_mu_);
  if (closing_ || transport_ == nullptr) return;
  send_and_abort(transport_.get());
}

}  // namespace internal
}  // namespace homarpc
