// idle_peers: the idle-peers and inflight-rpcs scenarios and their homarpc system (see
// idle_peers.h).
//
// DESIGN NOTES
// Why raw sockets on the client: the point is N distinct peers as the server sees them, i.e. N
// source addresses. N homarpc Endpoints would cost N loop threads (or N inline loops to drive)
// and measure the client more than the server. A peer needs only a few packets of Homa, and
// wire.h encodes them exactly as the engine does, so the server cannot tell the difference.
//
// The client's conversation with the server, per peer (client RPC id 2, server id 3):
//   idle-peers:    DATA(64 B) ->            <- CUTOFFS (first contact), DATA(64 B)
//                  ACK ->                   the server ends the RPC; a tombstone remains for
//                                           2 x timeout_ticks, the peer for peer_idle_secs
//   inflight-rpcs: DATA(64 B), RESEND ->    <- CUTOFFS, BUSY ("I have it, in service")
// The RESEND in inflight-rpcs is only there to get a reply that proves the server holds the
// request: a request answered by nothing cannot be confirmed otherwise. Both packets go out
// back to back on one socket, so the server sees the DATA first.
// Loss recovery: a peer silent for kRetryNanos sends its DATA again (marked retransmit; the
// server suppresses a duplicate of a request it has) and a RESEND (which retransmits the
// response, answers BUSY, or RPC_UNKNOWN when the DATA never arrived — then the DATA goes again
// at once). NEED_ACK (our ACK was lost) is answered with another ACK, also during the idle hold,
// which is why the client keeps reading every socket until it returns. After kMaxTries the
// point fails: it would not measure N peers.
//
// Setup runs at most point.concurrency peers at once (opening each socket only when its turn
// comes), all sockets in one epoll set; the in-flight list is scanned for retries at most once
// per millisecond.
//
// Server accounting: EngineStats::peers is refreshed on the engine's 1 s peer GC tick, hence
// the client's hold of at least kMinHoldMillis. server_rss_growth_kb is the resident set at the
// end minus the resident set just before Ready(): it includes the receive buffers the loop first
// touches while serving, so it is an upper bound on what the peers themselves cost.
#include "tools/bench/idle_peers.h"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/bench/socket_util.h"
#include "transport/endpoint.h"
#include "transport/errors.h"
#include "transport/wire.h"

namespace homarpc::bench {
namespace {

using transport::Address;
using transport::Buffer;
using transport::Endpoint;
using transport::EndpointOptions;
using transport::ErrnoToStatus;
using transport::IncomingRequest;
using transport::IoKind;
namespace wire = transport::wire;

// Every client socket runs one RPC with this id; the server names it by (address, id ^ 1).
constexpr uint64_t kClientRpcId = 2;
constexpr uint64_t kServerRpcId = kClientRpcId ^ 1;
// A waiting peer retries after this much silence, at most kMaxTries times in all.
constexpr int64_t kRetryNanos = 20 * 1000 * 1000;
constexpr uint32_t kMaxTries = 25;
// File descriptors beyond the N sockets: stdio, the epoll fd, the harness's pipes.
constexpr uint64_t kFdSlack = 64;

// ---- Server ----

absl::StatusOr<EndpointOptions> ServerOptions(const Point& point) {
  EndpointOptions o;
  o.config.poll_usecs = static_cast<uint32_t>(point.settings.spin_us);
  o.config.SetMtuOrRoute(static_cast<uint32_t>(point.settings.mtu));
  o.config.link_mbps = 0;  // loopback has no NIC queue to protect
  // main.cc validated the name.
  o.io.kind = transport::ParseIoKind(point.settings.io_backend).value_or(IoKind::kAuto);
  o.io.bind_address = Address::Loopback4(0);
  if (absl::Status s = o.config.Validate(); !s.ok()) return s;
  return o;
}

// This process's resident set now, in KiB (0 if /proc cannot be read).
int64_t CurrentRssKb() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long size_pages = 0;
  long resident_pages = 0;
  const int read = std::fscanf(f, "%ld %ld", &size_pages, &resident_pages);
  std::fclose(f);
  if (read != 2) return 0;
  return static_cast<int64_t>(resident_pages) * sysconf(_SC_PAGESIZE) / 1024;
}

// Requests the inflight-rpcs server keeps unanswered, as an application holding them would.
// Touched only by the endpoint's loop thread while the endpoint lives, then by Serve().
struct HeldRequests {
  std::vector<IncomingRequest> requests;
};

// ---- Client ----

// Encodes the one request of a peer: DATA, offset 0, the whole kPeerMessageBytes message.
size_t EncodeRequest(uint16_t sport, uint16_t dport, bool retransmit, uint8_t* out) {
  wire::Packet p;
  p.type = wire::PacketType::kData;
  p.sport = sport;
  p.dport = dport;
  p.sender_id = kClientRpcId;
  p.data.message_length = static_cast<uint32_t>(kPeerMessageBytes);
  p.data.incoming = static_cast<uint32_t>(kPeerMessageBytes);
  p.data.retransmit = retransmit;
  p.data.offset = 0;
  const size_t header = wire::EncodeHeader(p, out);
  std::memset(out + header, 'p', kPeerMessageBytes);
  return header + kPeerMessageBytes;
}

// Encodes a RESEND for the whole response, or an ACK of our RPC.
size_t EncodeControl(wire::PacketType type, uint16_t sport, uint16_t dport, uint8_t* out) {
  wire::Packet p;
  p.type = type;
  p.sport = sport;
  p.dport = dport;
  p.sender_id = kClientRpcId;
  if (type == wire::PacketType::kResend) {
    p.resend.offset = 0;
    p.resend.length = wire::kResendAll;
  }
  return wire::EncodeHeader(p, out);
}

// Lets this process open `wanted` descriptors, raising the hard limit too when allowed (root).
absl::Status RaiseFdLimit(uint64_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return ErrnoToStatus(errno, "getrlimit");
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur >= wanted) return absl::OkStatus();
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted) limit.rlim_max = wanted;
  limit.rlim_cur = wanted;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot raise RLIMIT_NOFILE to ", wanted,
                     " for one socket per peer: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The client half: N sockets, one peer each. Single-threaded; lives inside RunClient().
class PeerFleet {
 public:
  PeerFleet(PeerLoad load, uint16_t server_port, const Point& point)
      : load_(load),
        server_port_(server_port),
        count_(point.size),
        window_(static_cast<uint64_t>(std::max<int64_t>(point.concurrency, 1))),
        hold_ns_(std::max<int64_t>(point.duration_ns, kMinHoldMillis * 1000 * 1000)) {}

  absl::StatusOr<ClientSamples> Run();

 private:
  enum class State : uint8_t { kWaiting, kDone };
  struct PeerSocket {
    ScopedFd fd;
    uint16_t port = 0;
    State state = State::kWaiting;
    uint32_t tries = 0;
    int64_t first_send_ns = 0;
    int64_t last_send_ns = 0;
  };

  // Opens peer `index`'s socket and sends its first request.
  absl::Status Start(uint32_t index);
  // Sends the request (again, when `retransmit`), and for inflight-rpcs or a retry a RESEND.
  absl::Status SendRequest(PeerSocket& peer, bool retransmit);
  absl::Status SendControl(PeerSocket& peer, wire::PacketType type);
  absl::Status Send(PeerSocket& peer, const uint8_t* bytes, size_t length);
  // Waits up to `timeout_ms` for packets and handles them all.
  absl::Status PollOnce(int timeout_ms);
  absl::Status DrainSocket(uint32_t index);
  absl::Status HandlePacket(uint32_t index, absl::Span<const uint8_t> bytes);
  void Complete(PeerSocket& peer);
  // Retries the waiting peers that have been silent for kRetryNanos; drops finished ones from
  // the in-flight list.
  absl::Status CheckRetries();

  const PeerLoad load_;
  const uint16_t server_port_;
  const uint64_t count_;
  const uint64_t window_;
  const int64_t hold_ns_;

  ScopedFd epoll_;
  std::vector<PeerSocket> peers_;
  std::vector<uint32_t> in_flight_;  // indices of peers that may still be waiting
  uint64_t waiting_ = 0;
  int64_t last_retry_check_ns_ = 0;
  ClientSamples samples_;
  // Counters reported as extras.
  uint64_t retries_ = 0;
  uint64_t acks_sent_ = 0;
  uint64_t need_acks_ = 0;
  uint64_t send_errors_ = 0;
  uint64_t ignored_packets_ = 0;
};

absl::StatusOr<ClientSamples> PeerFleet::Run() {
  if (absl::Status s = RaiseFdLimit(count_ + kFdSlack); !s.ok()) return s;
  epoll_ = ScopedFd(epoll_create1(EPOLL_CLOEXEC));
  if (epoll_.get() < 0) return ErrnoToStatus(errno, "epoll_create1");
  peers_.resize(count_);
  samples_.latencies_ns.reserve(count_);

  // Setup: keep up to window_ peers waiting until every peer has had its answer.
  const int64_t setup_start = NowNanos();
  uint64_t next = 0;
  while (next < count_ || waiting_ > 0) {
    while (next < count_ && waiting_ < window_) {
      if (absl::Status s = Start(static_cast<uint32_t>(next)); !s.ok()) return s;
      ++next;
    }
    if (absl::Status s = PollOnce(1); !s.ok()) return s;
    if (absl::Status s = CheckRetries(); !s.ok()) return s;
  }
  samples_.elapsed_ns = NowNanos() - setup_start;

  // Hold: every peer idle (or waiting on its unanswered request); still answer NEED_ACKs.
  const int64_t hold_start = NowNanos();
  const int64_t hold_end = hold_start + hold_ns_;
  for (int64_t now = hold_start; now < hold_end; now = NowNanos()) {
    const int64_t left_ms = (hold_end - now) / 1000000 + 1;
    if (absl::Status s = PollOnce(static_cast<int>(std::min<int64_t>(left_ms, 100))); !s.ok()) {
      return s;
    }
  }

  const uint64_t per_rpc = load_ == PeerLoad::kIdle ? 2 * kPeerMessageBytes : kPeerMessageBytes;
  samples_.payload_bytes = count_ * per_rpc;
  auto add = [&](const char* key, int64_t value) {
    samples_.extras.push_back(Extra::Int(key, value));
  };
  add("peers", static_cast<int64_t>(count_));
  add("client_setup_ms", samples_.elapsed_ns / 1000000);
  add("client_hold_ms", (NowNanos() - hold_start) / 1000000);
  add("client_retries", static_cast<int64_t>(retries_));
  add("client_acks_sent", static_cast<int64_t>(acks_sent_));
  add("client_need_acks", static_cast<int64_t>(need_acks_));
  add("client_send_errors", static_cast<int64_t>(send_errors_));
  add("client_ignored_packets", static_cast<int64_t>(ignored_packets_));
  return std::move(samples_);
}

absl::Status PeerFleet::Start(uint32_t index) {
  PeerSocket& peer = peers_[index];
  absl::StatusOr<ScopedFd> fd = ConnectLoopback(SOCK_DGRAM, server_port_);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<uint16_t> port = LocalPort(fd->get());
  if (!port.ok()) return port.status();
  peer.fd = *std::move(fd);
  peer.port = *port;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u32 = index;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, peer.fd.get(), &event) != 0) {
    return ErrnoToStatus(errno, "epoll_ctl ADD");
  }
  peer.first_send_ns = NowNanos();
  in_flight_.push_back(index);
  ++waiting_;
  return SendRequest(peer, /*retransmit=*/false);
}

absl::Status PeerFleet::SendRequest(PeerSocket& peer, bool retransmit) {
  uint8_t packet[wire::kMaxHeaderSize + kPeerMessageBytes];
  ++peer.tries;
  peer.last_send_ns = NowNanos();
  const size_t length = EncodeRequest(peer.port, server_port_, retransmit, packet);
  if (absl::Status s = Send(peer, packet, length); !s.ok()) return s;
  if (load_ == PeerLoad::kInFlight || retransmit) {
    return SendControl(peer, wire::PacketType::kResend);
  }
  return absl::OkStatus();
}

absl::Status PeerFleet::SendControl(PeerSocket& peer, wire::PacketType type) {
  uint8_t packet[wire::kMaxHeaderSize];
  const size_t length = EncodeControl(type, peer.port, server_port_, packet);
  if (type == wire::PacketType::kAck) ++acks_sent_;
  return Send(peer, packet, length);
}

absl::Status PeerFleet::Send(PeerSocket& peer, const uint8_t* bytes, size_t length) {
  while (send(peer.fd.get(), bytes, length, 0) < 0) {
    if (errno == EINTR) continue;
    if (errno == ECONNREFUSED) {
      return absl::UnavailableError("the server's port is closed (ICMP port unreachable)");
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      ++send_errors_;  // as a lost packet: the retry timer covers it
      return absl::OkStatus();
    }
    return ErrnoToStatus(errno, "send to the server");
  }
  return absl::OkStatus();
}

absl::Status PeerFleet::PollOnce(int timeout_ms) {
  epoll_event events[256];
  const int ready = epoll_wait(epoll_.get(), events, 256, timeout_ms);
  if (ready < 0) {
    if (errno == EINTR) return absl::OkStatus();
    return ErrnoToStatus(errno, "epoll_wait");
  }
  for (int i = 0; i < ready; ++i) {
    if (absl::Status s = DrainSocket(events[i].data.u32); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PeerFleet::DrainSocket(uint32_t index) {
  uint8_t buffer[2048];
  while (true) {
    const ssize_t n = recv(peers_[index].fd.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return absl::OkStatus();
      if (errno == EINTR) continue;
      if (errno == ECONNREFUSED) {
        return absl::UnavailableError("the server's port is closed (ICMP port unreachable)");
      }
      return ErrnoToStatus(errno, "recv from the server");
    }
    if (absl::Status s = HandlePacket(index, absl::MakeConstSpan(buffer, static_cast<size_t>(n)));
        !s.ok()) {
      return s;
    }
  }
}

absl::Status PeerFleet::HandlePacket(uint32_t index, absl::Span<const uint8_t> bytes) {
  PeerSocket& peer = peers_[index];
  wire::Packet p;
  if (wire::Decode(bytes, &p) != wire::DecodeError::kOk) {
    ++ignored_packets_;
    return absl::OkStatus();
  }
  // The server's priority cutoffs, sent on first contact: nothing to do with them (this
  // client sends one-packet messages, always at priority 0). They name no RPC.
  if (p.type == wire::PacketType::kCutoffs) return absl::OkStatus();
  if (p.sender_id != kServerRpcId) {
    ++ignored_packets_;
    return absl::OkStatus();
  }
  const bool waiting = peer.state == State::kWaiting;
  switch (p.type) {
    case wire::PacketType::kData:
      if (load_ != PeerLoad::kIdle) break;
      if (waiting) {
        if (p.data.offset != 0 || p.payload.size() != p.data.message_length) {
          // The response fits one packet; anything else is not what this scenario sends.
          ++ignored_packets_;
          return absl::OkStatus();
        }
        Complete(peer);
      }
      // First response: acknowledge it. A repeat means our ACK was lost: again.
      return SendControl(peer, wire::PacketType::kAck);
    case wire::PacketType::kBusy:
      if (load_ == PeerLoad::kInFlight && waiting) Complete(peer);
      return absl::OkStatus();
    case wire::PacketType::kNeedAck:
      ++need_acks_;
      // Done: the ACK was lost. Waiting: the response was lost; ask for it.
      return SendControl(peer, waiting ? wire::PacketType::kResend : wire::PacketType::kAck);
    case wire::PacketType::kRpcUnknown:
      // The request never arrived: send it again now rather than at the next retry.
      if (waiting) {
        ++retries_;
        if (peer.tries >= kMaxTries) break;  // CheckRetries() reports it
        return SendRequest(peer, /*retransmit=*/false);
      }
      return absl::OkStatus();
    case wire::PacketType::kRefused:
      return absl::ResourceExhaustedError(absl::StrCat("the server refused peer ", index,
                                                       "'s request (reason ",
                                                       static_cast<int>(p.refused.reason), ")"));
    default:
      break;  // GRANT: nothing to do for a one-packet message
  }
  return absl::OkStatus();
}

void PeerFleet::Complete(PeerSocket& peer) {
  peer.state = State::kDone;
  --waiting_;
  samples_.latencies_ns.push_back(NowNanos() - peer.first_send_ns);
}

absl::Status PeerFleet::CheckRetries() {
  const int64_t now = NowNanos();
  if (now - last_retry_check_ns_ < 1000000) return absl::OkStatus();
  last_retry_check_ns_ = now;
  for (size_t i = 0; i < in_flight_.size();) {
    PeerSocket& peer = peers_[in_flight_[i]];
    if (peer.state == State::kDone) {
      in_flight_[i] = in_flight_.back();
      in_flight_.pop_back();
      continue;
    }
    if (now - peer.last_send_ns >= kRetryNanos) {
      if (peer.tries >= kMaxTries) {
        return absl::DeadlineExceededError(absl::StrCat("peer ", in_flight_[i], " (port ",
                                                        peer.port, ") got no answer after ",
                                                        peer.tries, " tries"));
      }
      ++retries_;
      if (absl::Status s = SendRequest(peer, /*retransmit=*/true); !s.ok()) return s;
    }
    ++i;
  }
  return absl::OkStatus();
}

}  // namespace

std::string HomarpcPeers::SkipReason(const Point& point) const {
  if (point.settings.server_host != "127.0.0.1") return "memory scenarios run on loopback only";
  if (point.size == 0) return "the size is the number of peers; 0 peers measure nothing";
  if (point.size > kMaxPeers) {
    return absl::StrCat("the size is the number of peers; at most ", kMaxPeers,
                        " (one ephemeral port each)");
  }
  return "";
}

absl::Status HomarpcPeers::Serve(const Point& point, ServerEnv& env) const {
  absl::StatusOr<EndpointOptions> options = ServerOptions(point);
  if (!options.ok()) return options.status();
  auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
  auto held = std::make_shared<HeldRequests>();
  Endpoint::RequestHandler handler;
  if (load_ == PeerLoad::kIdle) {
    handler = [self](IncomingRequest r) {
      Buffer echo = std::move(r.payload);
      self->load()->Reply(r, std::move(echo));
    };
  } else {
    handler = [held](IncomingRequest r) { held->requests.push_back(std::move(r)); };
  }
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(*options, std::move(handler));
  if (!ep.ok()) return ep.status();
  self->store(ep->get());
  const int64_t rss_at_ready_kb = CurrentRssKb();
  env.Ready((*ep)->local_address().port());
  // The loop thread does the work; this thread sleeps until the stop.
  env.WaitForStop();

  const int64_t rss_growth_kb = CurrentRssKb() - rss_at_ready_kb;
  const transport::EngineStats stats = (*ep)->stats();
  const transport::EngineMemory memory = (*ep)->memory();
  const transport::IoStats io = (*ep)->io_stats();
  const std::string io_kind = transport::IoKindName((*ep)->io_kind());
  ep->reset();  // joins the loop thread: `held` is ours from here on

  auto add = [&](const char* key, uint64_t value) {
    env.AddExtra(Extra::Int(key, static_cast<int64_t>(value)));
  };
  add("server_peers", stats.peers);
  add("server_rpcs", stats.server_rpcs);
  add("server_state_bytes_per_peer", memory.bytes_per_peer);
  add("server_state_bytes_per_server_rpc", memory.bytes_per_server_rpc);
  add("server_state_total_bytes", memory.total_state_bytes);
  add("server_rss_growth_kb", static_cast<uint64_t>(std::max<int64_t>(rss_growth_kb, 0)));
  add("server_rss_growth_bytes_per_peer",
      static_cast<uint64_t>(std::max<int64_t>(rss_growth_kb, 0)) * 1024 /
          std::max<uint64_t>(point.size, 1));
  add("server_requests_delivered", stats.requests_delivered);
  add("server_requests_held", held->requests.size());
  add("server_duplicate_requests", stats.duplicate_requests_suppressed);
  add("server_rpcs_abandoned", stats.server_rpcs_abandoned);
  add("server_refused_messages", stats.refused_messages);
  add("server_recv_truncated", io.recv_truncated);
  add("server_send_errors", io.send_errors);
  env.AddExtra(Extra::String("server_io", io_kind));
  return absl::OkStatus();
}

absl::StatusOr<ClientSamples> HomarpcPeers::RunClient(const Point& point,
                                                      uint16_t server_port) const {
  PeerFleet fleet(load_, server_port, point);
  return fleet.Run();
}

void RegisterPeerScenarios(Registry& registry) {
  const auto message_bytes = [](uint64_t) { return kPeerMessageBytes; };
  registry.AddScenario(kIdlePeers,
                       "Server memory with `size` idle peers: each client socket completes one "
                       "64-byte RPC (request, response, ACK), then stays silent.",
                       message_bytes);
  registry.AddScenario(kInflightRpcs,
                       "Server memory with `size` peers each holding one 64-byte request in "
                       "service, never answered.",
                       message_bytes);
  registry.AddSystem(kIdlePeers, std::make_unique<HomarpcPeers>(PeerLoad::kIdle));
  registry.AddSystem(kInflightRpcs, std::make_unique<HomarpcPeers>(PeerLoad::kInFlight));
}

}  // namespace homarpc::bench
