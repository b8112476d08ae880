// UdpTransport: the production MessageTransport, Homa over UDP through transport::Endpoint
// (message_transport.h). Owned by a ChannelImpl (client only) or by a server port; thread-safe
// because Endpoint is: every method is a direct forward, so the contract is Endpoint's.
#include <memory>
#include <utility>

#include "runtime/message_transport.h"
#include "transport/clock.h"

namespace homarpc::internal {
namespace {

class UdpTransport final : public MessageTransport {
 public:
  UdpTransport(std::unique_ptr<transport::Endpoint> endpoint, int64_t spin_nanos)
      : endpoint_(std::move(endpoint)), spin_nanos_(spin_nanos) {}

  transport::Address local_address() const override { return endpoint_->local_address(); }

  uint64_t SendRequest(const transport::Address& dest, transport::Buffer request,
                       ResponseCallback done, int64_t deadline_nanos) override {
    return endpoint_->SendRequest(dest, std::move(request), std::move(done), deadline_nanos);
  }

  void Abort(uint64_t id, absl::Status status) override { endpoint_->Abort(id, std::move(status)); }

  void Reply(const transport::IncomingRequest& request, transport::Buffer response) override {
    endpoint_->Reply(request, std::move(response));
  }

  int64_t spin_nanos() const override { return spin_nanos_; }

  uint64_t live_server_rpcs() const override { return endpoint_->stats().server_rpcs; }

 private:
  std::unique_ptr<transport::Endpoint> endpoint_;
  const int64_t spin_nanos_;
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
