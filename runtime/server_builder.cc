// ServerBuilder (server_builder.h): turns the builder's settings into a started ServerImpl.
// One thread builds; nothing here is shared.
//
// Limits and the transport's message ceiling:
// - receive limit: SetMaxReceiveMessageSize / kArgMaxReceiveMessageLength (whichever was set
//   last), default 4 MiB; -1 (or any negative) = 64 MiB, the transport's default ceiling.
// - send limit: SetMaxSendMessageSize / kArgMaxSendMessageLength, default -1 = 64 MiB.
// - metadata: kArgMaxMetadataSize, default 8 KiB, per side (requests over it are answered
//   RESOURCE_EXHAUSTED; so are responses whose metadata is over it). 0 or negative = 0 bytes,
//   i.e. no metadata at all, as the channel reads the same argument (channel.cc).
// - live calls: SetMaxConcurrentCalls / kArgMaxConcurrentCalls, default 100000; 0 or
//   negative = no bound.
// - transport Config::max_message_length = max(receive, send) + 64 KiB for the envelope
//   header, capped at 1 GiB (the wire's ceiling), and max_incoming_message_length = receive +
//   64 KiB: a request above that is refused by the transport on its first packet, before any
//   byte is buffered, which the client also sees as RESOURCE_EXHAUSTED.
// Other arguments: kArgSpinMicros (loop poll time and worker spin, default 50),
// kArgMtu, kArgIoBackend ("auto" | "uring" | "epoll"), kArgServerLoops (loops per port,
// also SetNumLoops; whichever was set last).
#include "runtime/server_builder.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "runtime/executor.h"
#include "runtime/metadata.h"
#include "runtime/server_impl.h"
#include "runtime/target.h"
#include "runtime/transport_args.h"
#include "transport/clock.h"
#include "transport/log.h"

namespace homarpc {
namespace {

// A payload limit as the server applies it (-1 = unlimited = what the transport carries).
size_t ResolveLimit(int value) {
  if (value < 0) return internal::kUnlimitedPayloadBytes;
  return std::min(static_cast<size_t>(value),
                  internal::MessageLengthFor(value) - internal::kEnvelopeRoom);
}

}  // namespace

ServerBuilder::ServerBuilder() = default;
ServerBuilder::~ServerBuilder() = default;

ServerBuilder& ServerBuilder::AddListeningPort(const std::string& addr_uri,
                                               std::shared_ptr<ServerCredentials> creds,
                                               int* selected_port) {
  ports_.push_back(Port{addr_uri, selected_port});
  return *this;
}

ServerBuilder& ServerBuilder::RegisterService(Service* service) {
  services_.push_back(service);
  return *this;
}

ServerBuilder& ServerBuilder::SetMaxReceiveMessageSize(int max_receive_message_size) {
  max_receive_message_size_ = max_receive_message_size;
  args_.SetInt(kArgMaxReceiveMessageLength, max_receive_message_size);
  return *this;
}

ServerBuilder& ServerBuilder::SetMaxSendMessageSize(int max_send_message_size) {
  max_send_message_size_ = max_send_message_size;
  args_.SetInt(kArgMaxSendMessageLength, max_send_message_size);
  return *this;
}

ServerBuilder& ServerBuilder::AddChannelArgument(const std::string& arg, int value) {
  args_.SetInt(arg, value);
  return *this;
}

ServerBuilder& ServerBuilder::AddChannelArgument(const std::string& arg, const std::string& value) {
  args_.SetString(arg, value);
  return *this;
}

ServerBuilder& ServerBuilder::SetNumLoops(int loops) {
  num_loops_ = loops;
  args_.SetInt(kArgServerLoops, loops);
  return *this;
}

ServerBuilder& ServerBuilder::SetMaxConcurrentCalls(int max_calls) {
  max_concurrent_calls_ = max_calls;
  args_.SetInt(kArgMaxConcurrentCalls, max_calls);
  return *this;
}

ServerBuilder& ServerBuilder::SetExecutor(ServerExecutor executor, int worker_threads) {
  executor_ = executor;
  worker_threads_ = worker_threads;
  return *this;
}

void ServerBuilder::SetTransportFactoryForTesting(internal::TransportFactory factory) {
  transport_factory_ = std::move(factory);
}

std::unique_ptr<Server> ServerBuilder::BuildAndStart() {
  for (const Port& port : ports_) {
    if (port.selected_port != nullptr) *port.selected_port = 0;
  }

  internal::ServerImpl::MethodMap methods;
  for (const Service* service : services_) {
    for (const internal::ServiceMethod& method : service->methods()) {
      if (!methods.try_emplace(method.name, method.handler.get()).second) {
        HOMARPC_LOG(ERROR) << "BuildAndStart: method " << method.name
                           << " is registered twice (a service registered twice, or two "
                              "services with the same name)";
        return nullptr;
      }
    }
  }

  internal::ServerLimits limits;
  limits.max_receive_message =
      ResolveLimit(args_.GetInt(kArgMaxReceiveMessageLength, max_receive_message_size_));
  limits.max_send_message =
      ResolveLimit(args_.GetInt(kArgMaxSendMessageLength, max_send_message_size_));
  const int metadata_limit =
      args_.GetInt(kArgMaxMetadataSize, static_cast<int>(internal::kDefaultMaxMetadataBytes));
  limits.max_metadata = static_cast<size_t>(std::max(metadata_limit, 0));
  const int max_calls = args_.GetInt(kArgMaxConcurrentCalls, max_concurrent_calls_);
  limits.max_concurrent_calls = max_calls > 0 ? static_cast<size_t>(max_calls) : SIZE_MAX;
  limits.max_message = std::max(internal::MessageLengthFor(limits.max_receive_message),
                                internal::MessageLengthFor(limits.max_send_message));

  internal::UdpTransportOptions options;
  transport::Config& config = options.endpoint.config;
  config.max_message_length = static_cast<uint32_t>(limits.max_message);
  // Requests above the receive limit (plus the envelope's room) are refused by the transport
  // on their first packet, before any byte is buffered; the client sees RESOURCE_EXHAUSTED.
  // Those within the room but above the limit are answered RESOURCE_EXHAUSTED by the call.
  config.max_incoming_message_length = internal::MessageLengthFor(limits.max_receive_message);
  if (absl::Status s = internal::ApplyTransportArgs(args_, &options); !s.ok()) {
    HOMARPC_LOG(ERROR) << "BuildAndStart: " << s.message();
    return nullptr;
  }
  const int64_t spin_micros = config.poll_usecs;
  // Quick sync handlers run on the loop that read their request, a standby thread ready to
  // take the socket over (ServerExecutor::kWorkerPool); the loop then changes threads, which
  // needs the epoll backend: a server told to use io_uring keeps every handler on the workers.
  const int takeover_us = args_.GetInt(kArgLoopTakeoverMicros, 1000);
  // The standby looks every takeover time while the loop is busy: below 100 us that is more
  // wake-ups than calls on most servers.
  if (takeover_us < 100) {
    HOMARPC_LOG(ERROR) << "BuildAndStart: " << kArgLoopTakeoverMicros
                       << " must be at least 100, not " << takeover_us;
    return nullptr;
  }
  // (HOMARPC_IO_BACKEND, which overrides the channel argument, likewise; a bad value fails
  // when the port's backend is made.)
  const transport::IoKind io_kind =
      transport::RequestedIoKind(options.endpoint.io.kind).value_or(options.endpoint.io.kind);
  options.endpoint.standby =
      executor_ == ServerExecutor::kWorkerPool && io_kind != transport::IoKind::kUring;
  options.endpoint.takeover_nanos = int64_t{takeover_us} * transport::kNanosPerMicro;
  options.endpoint.num_loops = args_.GetInt(kArgServerLoops, num_loops_);
  if (options.endpoint.num_loops < 1) {
    HOMARPC_LOG(ERROR) << "BuildAndStart: the number of loops must be at least 1, not "
                       << options.endpoint.num_loops;
    return nullptr;
  }

  std::unique_ptr<internal::Executor> executor =
      executor_ == ServerExecutor::kInline
          ? internal::NewInlineExecutor()
          : internal::NewWorkerPool(worker_threads_,
                                    int64_t{spin_micros} * transport::kNanosPerMicro);
  auto impl =
      std::make_unique<internal::ServerImpl>(limits, std::move(methods), std::move(executor));
  for (const Port& port : ports_) {
    absl::StatusOr<transport::Address> address = internal::ResolveListenAddress(port.addr_uri);
    absl::Status status = address.status();
    if (status.ok()) {
      internal::UdpTransportOptions port_options = options;
      port_options.endpoint.io.bind_address = *address;
      status = impl->AddPort(port_options, transport_factory_);
    }
    if (!status.ok()) {
      HOMARPC_LOG(ERROR) << "BuildAndStart: cannot listen on " << port.addr_uri << ": "
                         << status.ToString();
      impl->AbortStart();
      return nullptr;
    }
  }
  impl->Start();
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i].selected_port != nullptr) {
      *ports_[i].selected_port = impl->ports()[i]->address.port();
    }
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

}  // namespace homarpc
