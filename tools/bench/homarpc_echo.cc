#include "tools/bench/homarpc_echo.h"


#include <atomic>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/clock.h"
#include "transport/endpoint.h"

namespace homarpc::bench {
namespace {

using transport::Address;
using transport::Buffer;
using transport::Endpoint;
using transport::EndpointOptions;
using transport::IncomingRequest;
using transport::IoKind;
using transport::MonotonicClock;

// `server`: bind point.settings.server_host; otherwise the client's side: loopback when the
// server is there, else any address.
absl::StatusOr<EndpointOptions> OptionsFor(const Point& point, bool server) {
  EndpointOptions o;
  o.config.poll_usecs = static_cast<uint32_t>(point.settings.spin_us);
  o.config.SetMtuOrRoute(static_cast<uint32_t>(point.settings.mtu));
  if (point.settings.link_mbps >= 0) {
    o.config.link_mbps = static_cast<uint32_t>(point.settings.link_mbps);
  }
  o.config.pace_local = point.settings.pace_local;
  o.config.FitToLink();  // as the runtime does with homarpc.link_mbps
  if (point.request_bytes > o.config.max_message_length ||
      point.response_bytes > o.config.max_message_length) {
    o.config.max_message_length = static_cast<uint32_t>(
        std::max(point.request_bytes, point.response_bytes));
  }
  // main.cc validated the name.
  o.io.kind = transport::ParseIoKind(point.settings.io_backend).value_or(IoKind::kAuto);
  const bool loopback = point.settings.server_host == "127.0.0.1";
  absl::StatusOr<Address> bind = server     ? Address::Parse(point.settings.server_host, 0)
                                 : loopback ? Address::Parse("127.0.0.1:0")
                                            : Address::Parse("0.0.0.0:0");
  if (!bind.ok()) return bind.status();
  o.io.bind_address = *bind;
  if (absl::Status s = o.config.Validate(); !s.ok()) return s;
  return o;
}

void AddEngineExtras(const Endpoint& ep, absl::string_view side, std::vector<Extra>* extras) {
  const transport::EngineStats s = ep.stats();
  const transport::EngineMemory m = ep.memory();
  extras->push_back(Extra::Int(absl::StrCat(side, "_retransmitted_packets"),
                               static_cast<int64_t>(s.retransmitted_packets)));
  extras->push_back(Extra::Int(absl::StrCat(side, "_resends"), static_cast<int64_t>(s.resends_sent)));
  extras->push_back(Extra::Int(absl::StrCat(side, "_max_grantable"),
                               static_cast<int64_t>(s.max_grantable_messages)));
  extras->push_back(Extra::Int(absl::StrCat(side, "_state_bytes_per_client_rpc"),
                               static_cast<int64_t>(m.bytes_per_client_rpc)));
  extras->push_back(Extra::Int(absl::StrCat(side, "_state_bytes_per_server_rpc"),
                               static_cast<int64_t>(m.bytes_per_server_rpc)));
  extras->push_back(Extra::Int(absl::StrCat(side, "_state_bytes_per_peer"),
                               static_cast<int64_t>(m.bytes_per_peer)));
  extras->push_back(Extra::String(absl::StrCat(side, "_io"), transport::IoKindName(ep.io_kind())));
  const transport::IoStats io = ep.io_stats();
  extras->push_back(Extra::Int(absl::StrCat(side, "_send_errors"), static_cast<int64_t>(io.send_errors)));
  extras->push_back(Extra::Int(absl::StrCat(side, "_recv_truncated"),
                               static_cast<int64_t>(io.recv_truncated)));
  extras->push_back(Extra::Int(absl::StrCat(side, "_datagrams_per_send_call"),
                               static_cast<int64_t>(io.send_calls ? io.datagrams_sent / io.send_calls : 0)));
  extras->push_back(Extra::Int(absl::StrCat(side, "_datagrams_per_recv_batch"),
                               static_cast<int64_t>(io.recv_batches ? io.datagrams_received / io.recv_batches : 0)));
}

}  // namespace

absl::Status HomarpcEcho::Serve(const Point& point, ServerEnv& env) const {
  absl::StatusOr<EndpointOptions> options = OptionsFor(point, /*server=*/true);
  if (!options.ok()) return options.status();
  const uint64_t response_bytes = point.response_bytes;
  auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
  absl::StatusOr<std::unique_ptr<Endpoint>> ep =
      Endpoint::Create(*options, [self, response_bytes](IncomingRequest r) {
        Buffer response = r.payload.size() == response_bytes ? std::move(r.payload)
                                                             : Buffer(response_bytes);
        self->load()->Reply(r, std::move(response));
      });
  if (!ep.ok()) return ep.status();
  self->store(ep->get());
  env.Ready((*ep)->local_address().port());
  // The loop thread does the work; this thread sleeps until the stop (on 2 cores each wake-up
  // would preempt a spinning loop).
  env.WaitForStop();
  std::vector<Extra> extras;
  AddEngineExtras(**ep, "server", &extras);
  for (Extra& e : extras) env.AddExtra(std::move(e));
  return absl::OkStatus();
}

absl::StatusOr<ClientSamples> HomarpcEcho::RunClient(const Point& point,
                                                     uint16_t server_port) const {
  absl::StatusOr<EndpointOptions> options = OptionsFor(point, /*server=*/false);
  if (!options.ok()) return options.status();
  options->inline_loop = true;
  absl::StatusOr<std::unique_ptr<Endpoint>> created = Endpoint::Create(*options);
  if (!created.ok()) return created.status();
  Endpoint& ep = **created;
  absl::StatusOr<Address> server_address =
      Address::Parse(point.settings.server_host, server_port);
  if (!server_address.ok()) return server_address.status();
  const Address server = *server_address;
  const transport::Clock* clock = MonotonicClock::Get();

  ClientSamples samples;
  samples.latencies_ns.reserve(point.iterations);
  uint64_t completed = 0;   // all RPCs, warm-up included
  uint64_t in_flight = 0;
  absl::Status failure;
  int64_t measure_start = 0;
  bool measuring = point.warmup == 0;
  if (measuring) measure_start = clock->NowNanos();
  bool stop_issuing = false;

  // Each completion records its latency and issues the slot's next RPC.
  std::function<void()> issue = [&] {
    const int64_t start = clock->NowNanos();
    ++in_flight;
    ep.SendRequest(server, Buffer(point.request_bytes),
                   [&, start](absl::StatusOr<Buffer> r) {
                     --in_flight;
                     const int64_t now = clock->NowNanos();
                     if (!r.ok()) {
                       if (failure.ok()) failure = r.status();
                       stop_issuing = true;
                       return;
                     }
                     ++completed;
                     if (measuring) {
                       samples.latencies_ns.push_back(now - start);
                       samples.payload_bytes += point.request_bytes + r->size();
                     } else if (completed >= point.warmup) {
                       measuring = true;
                       measure_start = now;
                     }
                     if (measuring && (samples.latencies_ns.size() >= point.iterations ||
                                       now - measure_start >= point.duration_ns)) {
                       stop_issuing = true;
                     }
                     if (!stop_issuing) issue();
                   });
  };
  for (int64_t i = 0; i < point.concurrency; ++i) issue();
  const int64_t deadline = clock->NowNanos() + point.duration_ns + 60 * transport::kNanosPerSecond;
  ep.Poll(deadline, [&] { return stop_issuing && in_flight == 0; });
  samples.elapsed_ns = clock->NowNanos() - measure_start;
  if (!failure.ok()) return failure;
  if (in_flight != 0) return absl::DeadlineExceededError("RPCs still in flight at the deadline");
  AddEngineExtras(ep, "client", &samples.extras);
  return samples;
}

}  // namespace homarpc::bench
