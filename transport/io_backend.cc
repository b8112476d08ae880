// io_backend: CreateIoBackend() (the choice between io_uring and epoll) and the pieces both
// backends share (io_backend_internal.h): socket setup, the GSO send planner and sender
// (SendPlan, Sender), the receive call (RecvBatch) and its GRO splitter. Everything here runs
// on the thread that calls it; nothing is shared.
//
// DESIGN NOTES
//
// Send batching (SendPlan). Homa sends a message as a burst of MTU-sized DATA packets to one
// peer at one priority, so a Flush() usually holds runs of equal-size packets with the same
// destination. Each run becomes ONE sendmsg with UDP_SEGMENT = that size and an iovec list
// [header_0, payload_0, payload2_0, header_1, ...] (payload2 is the rest of a packet that spans
// two pieces of a gathered message, usually empty); the kernel cuts the concatenation into
// datagrams of gso_size bytes, so segment boundaries fall exactly on packet boundaries as long
// as every packet but the last has that size. That is the run rule: same destination, same
// priority, size equal to the first packet's (a shorter packet may end the run). A run stops
// at kMaxGsoSegments datagrams (the kernel's UDP_MAX_SEGMENTS is 64 on older kernels, 128 on
// 6.x; we stay at 64) and at kMaxGsoBytes in total (the whole run must fit one IP datagram's
// length field before segmentation). Three iovecs per packet keep a run at 192 iovecs, far
// under UIO_MAXIOV (1024). A run of one packet carries no UDP_SEGMENT: a plain datagram is cheaper.
// Rejected: copying headers and payloads into one contiguous buffer per run (one copy of every
// payload byte, which GSO exists to avoid).
//
// Priority. The IP TOS byte (IPv4) or traffic class (IPv6) is priority << 5, set per sendmsg
// with an IP_TOS / IPV6_TCLASS control message, and only when priority != 0: the socket's own
// TOS is 0, so for priority 0 the control message would restate the default, and leaving it
// out keeps the common control-packet path to at most one control message. The message costs
// a send ~0.1 us (docs/rpc-benchmarks.md, session 22; an earlier busy-polled round trip could
// not tell it from noise), so the engine gives DATA to a peer on this host priority 0
// (Config::pace_local). Rejected: a setsockopt per priority change (a system call, and it
// would split a Flush into calls).
//
// Errors. Homa recovers lost packets, so a datagram the kernel refuses is counted in
// send_errors and dropped. EAGAIN is the exception: the socket buffer is full because we are
// sending faster than the device drains, and dropping locally would only turn into a RESEND
// round trip later. The backends wait for POLLOUT, bounded by kSendRetryBudgetMillis per
// Flush(), then retry; what still does not fit is dropped and counted. IP_RECVERR is not set:
// an unconnected UDP socket without it ignores ICMP errors, so ECONNREFUSED never shows up on
// sends or receives, and there is no error queue to drain. Homa notices dead
// peers by silence anyway.
//
// The backend choice. HOMARPC_IO_BACKEND (uring|epoll) overrides IoOptions::kind so that a
// deployment can switch without rebuilding; an empty value counts as unset. A transferable
// backend is epoll whatever either says. The factory opens
// and binds the socket itself, then wraps it: socket errors (EADDRINUSE maps to
// FAILED_PRECONDITION, like an unusable io_uring) are returned as they are, and only a failure
// to build the ring around a good socket makes kAuto fall back to epoll, with one WARNING line,
// on the same socket (no second bind, no window in which the port is free).
#include "transport/io_backend.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/clock.h"
#include "transport/epoll_backend.h"
#include "transport/errors.h"
#include "transport/io_backend_internal.h"
#include "transport/log.h"
#include "transport/trace_points.h"
#include "transport/uring_backend.h"

namespace homarpc::transport {

const char* IoKindName(IoKind kind) {
  switch (kind) {
    case IoKind::kAuto:
      return "auto";
    case IoKind::kUring:
      return "uring";
    case IoKind::kEpoll:
      return "epoll";
  }
  return "unknown";
}

std::optional<IoKind> ParseIoKind(absl::string_view name) {
  for (IoKind kind : {IoKind::kAuto, IoKind::kUring, IoKind::kEpoll}) {
    if (name == IoKindName(kind)) return kind;
  }
  return std::nullopt;
}

absl::StatusOr<IoKind> RequestedIoKind(IoKind configured) {
  const char* env = std::getenv("HOMARPC_IO_BACKEND");
  if (env == nullptr || *env == '\0') return configured;
  const std::optional<IoKind> forced = ParseIoKind(env);
  if (!forced.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HOMARPC_IO_BACKEND=\"", env, "\": expected \"auto\", \"uring\" or \"epoll\""));
  }
  return *forced;
}

absl::StatusOr<std::unique_ptr<IoBackend>> CreateIoBackend(const IoOptions& options) {
  absl::StatusOr<IoKind> requested = RequestedIoKind(options.kind);
  if (!requested.ok()) return requested.status();
  IoKind kind = *requested;
  if (options.transferable) kind = IoKind::kEpoll;  // only epoll can change threads
  if (absl::Status s = io_internal::ValidateOptions(options); !s.ok()) return s;
  // The socket comes first and is shared by both attempts: its errors (a port in use) are the
  // caller's and must not look like "io_uring unavailable".
  Address local;
  absl::StatusOr<int> fd = io_internal::OpenUdpSocket(options, &local);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<std::unique_ptr<IoBackend>> backend;
  if (kind != IoKind::kEpoll) {
    backend = CreateUringBackend(options, *fd, local);
    if (!backend.ok() && kind == IoKind::kAuto) {
      HOMARPC_LOG(WARNING) << "io_uring unavailable (" << backend.status().message()
                           << "); using the epoll backend";
    }
  }
  if (kind == IoKind::kEpoll || (kind == IoKind::kAuto && !backend.ok())) {
    backend = CreateEpollBackend(options, *fd, local);
  }
  if (!backend.ok()) close(*fd);
  return backend;
}

RouteCache::RouteCache(const Clock* clock, Lookup lookup, Options options)
    : clock_(clock), lookup_(std::move(lookup)), options_(options) {}

Route RouteCache::Get(const Address& dest) {
  Address host = dest;
  host.set_port(0);
  const int64_t now = clock_->NowNanos();
  auto it = entries_.find(host);
  if (it != entries_.end() && it->second.expires_nanos > now) return it->second.route;
  if (window_start_nanos_ == INT64_MIN || now - window_start_nanos_ >= kNanosPerSecond) {
    window_start_nanos_ = now;
    window_lookups_ = 0;
  }
  if (window_lookups_ >= options_.max_lookups_per_second) return {};  // unknown, not cached
  ++window_lookups_;
  ++lookups_;
  const Route route = lookup_(dest);
  if (it == entries_.end() && entries_.size() >= options_.max_entries) entries_.clear();
  entries_.insert_or_assign(host, Entry{route, now + options_.ttl_nanos});
  return route;
}

Route IoBackend::RouteTo(const Address& dest) {
  if (routes_ == nullptr) {
    routes_ =
        std::make_unique<RouteCache>(MonotonicClock::Get(), LookupRoute, RouteCache::Options());
  }
  return routes_->Get(dest);
}

Route LookupRoute(const Address& dest) {
  if (!dest.is_set()) return {};
  const int family = dest.is_v6() ? AF_INET6 : AF_INET;
  const int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  Route route;
  int mtu = 0;
  socklen_t len = sizeof(mtu);
  if (connect(fd, dest.sockaddr_ptr(), dest.sockaddr_len()) == 0) {
    if (getsockopt(fd, dest.is_v6() ? IPPROTO_IPV6 : IPPROTO_IP,
                   dest.is_v6() ? IPV6_MTU : IP_MTU, &mtu, &len) == 0 &&
        mtu > 0) {
      route.mtu = static_cast<uint32_t>(mtu);
    }
    // A local route's source is the destination itself (or, for 127/8, 127.0.0.1).
    sockaddr_storage source{};
    socklen_t source_len = sizeof(source);
    Address self;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&source), &source_len) == 0) {
      self = Address::FromSockaddr(reinterpret_cast<const sockaddr*>(&source), source_len);
      self.set_port(dest.port());
    }
    route.local = dest.is_loopback() || (self.is_set() && self == dest);
  }
  close(fd);
  return route;
}

namespace io_internal {

absl::Status ValidateOptions(const IoOptions& options) {
  if (!options.bind_address.is_set()) {
    return absl::InvalidArgumentError("IoOptions.bind_address is unset");
  }
  if (options.recv_buffer_count == 0 || options.recv_buffer_count > 1024) {
    // 1024: UIO_MAXIOV, the most messages one recvmmsg takes.
    return absl::InvalidArgumentError(absl::StrCat(
        "IoOptions.recv_buffer_count must be 1..1024, not ", options.recv_buffer_count));
  }
  if (options.recv_buffer_size < 64 || options.recv_buffer_size > (1u << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IoOptions.recv_buffer_size must be 64..1048576, not ", options.recv_buffer_size));
  }
  return absl::OkStatus();
}

namespace {

// Sets a socket buffer size, forced past net.core.*mem_max when we may (root, or
// CAP_NET_ADMIN), else capped by the kernel. Failures are ignored: the default still works.
void SetBufferSize(int fd, int force_option, int option, int bytes) {
  if (geteuid() == 0 && setsockopt(fd, SOL_SOCKET, force_option, &bytes, sizeof(bytes)) == 0) {
    return;
  }
  (void)setsockopt(fd, SOL_SOCKET, option, &bytes, sizeof(bytes));
}

// One WARNING line, the first time a send fails because the datagram is larger than the
// route allows (EMSGSIZE): homarpc sets DF and never fragments (OpenUdpSocket).
void NoteSendError(int err, size_t bytes, const Address& dest) {
  if (err != EMSGSIZE) return;
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  HOMARPC_LOG(WARNING) << "a datagram of " << bytes << " bytes to " << dest.ToString()
                       << " is larger than the route's MTU and is dropped: homarpc does not "
                          "fragment (set homarpc.mtu to the path's MTU; logged once)";
}

}  // namespace

void SignalEventFd(int fd) {
  const uint64_t one = 1;
  if (write(fd, &one, sizeof(one)) < 0) {
    // EAGAIN: the counter is saturated, so a wake-up is already pending.
  }
}

absl::StatusOr<int> OpenUdpSocket(const IoOptions& options, Address* bound) {
  const Address& addr = options.bind_address;
  int fd = socket(addr.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
  if (fd < 0) return ErrnoToStatus(errno, "socket(SOCK_DGRAM)");
  auto fail = [fd](absl::string_view what) {
    int err = errno;
    close(fd);
    return ErrnoToStatus(err, what);
  };
  int one = 1;
  if (addr.is_v6()) {
    // The IPv6 wildcard "::" is dual-stack, as gRPC's "[::]:port" listens on both families:
    // IPv4 peers then appear as v4-mapped addresses (::ffff:a.b.c.d). Any other IPv6 address
    // is v6-only.
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(addr.sockaddr_ptr());
    int v6only = IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr) ? 0 : 1;
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) != 0) {
      return fail("setsockopt(IPV6_V6ONLY)");
    }
  }
  if (options.reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    return fail("setsockopt(SO_REUSEPORT)");
  }
  if (options.socket_buffer_bytes > 0) {
    SetBufferSize(fd, SO_RCVBUFFORCE, SO_RCVBUF, options.socket_buffer_bytes);
    SetBufferSize(fd, SO_SNDBUFFORCE, SO_SNDBUF, options.socket_buffer_bytes);
  }
  // Every datagram leaves with DF and is never fragmented by this host: packets are sized for
  // the route's MTU, and a hop further on that is smaller costs one recovery round down to the
  // configured `mtu` (PROTOCOL.md section 2); a path narrower still, or a configured `mtu` above
  // the route's, fails sends with EMSGSIZE (logged once, Sender/SendOneDatagram) instead of
  // being fragmented. PROBE rather than the default WANT, which lets the kernel fragment (each
  // skb ignore_df): an unconnected socket's datagram that may be fragmented takes an IP ID from
  // the kernel's shared generator (__ip_select_ident: a hash and an atomic), ~0.24 us of each
  // send on these VMs (a perf profile of a 64 B ping-pong: 1.35% of both CPUs at 56000 calls/s),
  // one with DF gets ID 0 (docs/rpc-benchmarks.md, session 23). The IPv4 option is set on IPv6
  // sockets too: a dual-stack one sends to IPv4 peers (v4-mapped) through the IPv4 stack. IPv6
  // itself has no per-datagram ID; its option keeps the same rule.
  {
    int probe = IP_PMTUDISC_PROBE;
    if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &probe, sizeof(probe)) != 0) {
      HOMARPC_LOG(INFO) << "IP_PMTUDISC_PROBE unavailable: "
                        << ErrnoToStatus(errno, "setsockopt").message();
    }
    int probe6 = IPV6_PMTUDISC_PROBE;
    if (addr.is_v6() &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &probe6, sizeof(probe6)) != 0) {
      HOMARPC_LOG(INFO) << "IPV6_PMTUDISC_PROBE unavailable: "
                        << ErrnoToStatus(errno, "setsockopt").message();
    }
  }
  if (options.enable_gro && setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) != 0) {
    // Kernels before 5.0: datagrams simply arrive one by one.
    HOMARPC_LOG(INFO) << "UDP_GRO unavailable: " << ErrnoToStatus(errno, "setsockopt").message();
  }
  if (bind(fd, addr.sockaddr_ptr(), addr.sockaddr_len()) != 0) {
    return fail(absl::StrCat("bind(", addr.ToString(), ")"));
  }
  // The first SIOCGSTAMPNS turns on the socket's receive timestamps (SOCK_TIMESTAMP: the
  // kernel stamps each datagram on arrival and keeps the last one read, without a control
  // message per datagram) and fails with ENOENT: nothing read yet. LastArrivalNanos().
  timespec stamp;
  (void)ioctl(fd, SIOCGSTAMPNS, &stamp);
  Address local;
  socklen_t len = sizeof(sockaddr_in6);
  if (getsockname(fd, local.mutable_sockaddr_ptr(), &len) != 0) return fail("getsockname");
  *bound = Address::FromSockaddr(local.sockaddr_ptr(), len);
  return fd;
}

int64_t LastArrivalNanos(int fd) {
  // Both clocks read before the ioctl: for a datagram without a stamp the kernel returns (and
  // keeps) the current time, which is then not earlier than `real_before`.
  timespec real_before;
  clock_gettime(CLOCK_REALTIME, &real_before);
  const int64_t mono_before = MonotonicClock::Get()->NowNanos();
  timespec stamp;
  if (ioctl(fd, SIOCGSTAMPNS, &stamp) != 0) return 0;
  const int64_t age = (real_before.tv_sec - stamp.tv_sec) * kNanosPerSecond +
                      (real_before.tv_nsec - stamp.tv_nsec);
  if (age <= 0 || age > kNanosPerSecond) return 0;
  return mono_before - age;
}

bool SendOneDatagram(int fd, int socket_family, const OutPacket& packet) {
  if (packet.dest.family() != socket_family) return false;
  iovec iov[3] = {
      {const_cast<uint8_t*>(packet.header), packet.header_len},
      {const_cast<uint8_t*>(packet.payload.data()), packet.payload.size()},
      {const_cast<uint8_t*>(packet.payload2.data()), packet.payload2.size()},
  };
  msghdr m{};
  m.msg_name = const_cast<sockaddr*>(packet.dest.sockaddr_ptr());
  m.msg_namelen = packet.dest.sockaddr_len();
  m.msg_iov = iov;
  m.msg_iovlen = 3;
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int))] = {};
  if (packet.priority != 0) {
    const int tos = (packet.priority & 7) << 5;
    m.msg_control = control;
    m.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = socket_family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
    c->cmsg_type = socket_family == AF_INET6 ? IPV6_TCLASS : IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &tos, sizeof(int));
  }
  ssize_t n;
  HOMARPC_TRACE_POINT(kSendBegin);
  do {
    n = sendmsg(fd, &m, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  HOMARPC_TRACE_POINT(kSendEnd);
  if (n < 0) NoteSendError(errno, packet.size(), packet.dest);
  return n >= 0;
}

bool SendRetryBudget::WaitWritable(int fd) {
  MonotonicClock clock;
  const int64_t now = clock.NowNanos();
  if (deadline_nanos_ < 0) deadline_nanos_ = now + kSendRetryBudgetMillis * kNanosPerMilli;
  const int64_t left = deadline_nanos_ - now;
  if (left <= 0) return false;
  pollfd p{fd, POLLOUT, 0};
  const int millis = static_cast<int>((left + kNanosPerMilli - 1) / kNanosPerMilli);
  int n;
  do {
    n = poll(&p, 1, millis);
  } while (n < 0 && errno == EINTR);
  return n > 0 && (p.revents & POLLOUT) != 0;
}

void SendPlan::Build(absl::Span<const OutPacket> packets, int socket_family, bool use_gso) {
  Clear();
  packets_ = packets;
  family_ = socket_family;
  const size_t n = packets.size();
  msgs_.reserve(2 * n);
  infos_.reserve(2 * n);
  iovs_.resize(kIovsPerPacket * n);
  for (size_t i = 0; i < n; ++i) {
    const OutPacket& p = packets[i];
    iovec* iov = &iovs_[kIovsPerPacket * i];
    iov[0] = iovec{const_cast<uint8_t*>(p.header), p.header_len};
    iov[1] = iovec{const_cast<uint8_t*>(p.payload.data()), p.payload.size()};
    iov[2] = iovec{const_cast<uint8_t*>(p.payload2.data()), p.payload2.size()};
  }
  size_t i = 0;
  while (i < n) {
    const OutPacket& p = packets[i];
    const size_t size = p.size();
    uint32_t count = 1;
    if (use_gso && size > 0) {
      size_t total = size;
      while (i + count < n && count < kMaxGsoSegments) {
        const OutPacket& q = packets[i + count];
        const size_t q_size = q.size();
        if (q_size == 0 || q_size > size || total + q_size > kMaxGsoBytes ||
            q.priority != p.priority || q.dest != p.dest) {
          break;
        }
        ++count;
        total += q_size;
        if (q_size < size) break;  // only the last segment may be short
      }
    }
    Append(static_cast<uint32_t>(i), count, count > 1 ? static_cast<uint16_t>(size) : 0,
           kIovsPerPacket * i);
    i += count;
  }
}

std::pair<size_t, size_t> SendPlan::SplitIntoSingles(size_t index) {
  const Info info = infos_[index].info;
  const size_t begin = msgs_.size();
  for (uint32_t k = 0; k < info.count; ++k) {
    Append(info.first + k, 1, 0, kIovsPerPacket * (info.first + k));
  }
  return {begin, msgs_.size()};
}

void SendPlan::Clear() {
  packets_ = {};
  msgs_.clear();
  infos_.clear();
  iovs_.clear();
}

void SendPlan::Append(uint32_t first, uint32_t count, uint16_t gso_size, size_t iov_index) {
  // Build() reserved room for every append: the kernel may hold pointers to earlier entries.
  Entry& entry = infos_.emplace_back();
  entry.info = Info{first, count, gso_size};
  std::memset(entry.control, 0, sizeof(entry.control));
  mmsghdr& m = msgs_.emplace_back();
  std::memset(&m, 0, sizeof(m));
  const OutPacket& p = packets_[first];
  m.msg_hdr.msg_name = const_cast<sockaddr*>(p.dest.sockaddr_ptr());
  m.msg_hdr.msg_namelen = p.dest.sockaddr_len();
  m.msg_hdr.msg_iov = &iovs_[iov_index];
  m.msg_hdr.msg_iovlen = kIovsPerPacket * count;

  size_t used = 0;
  auto add = [&](int level, int type, const void* data, size_t len) {
    cmsghdr* c = reinterpret_cast<cmsghdr*>(entry.control + used);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(len);
    std::memcpy(CMSG_DATA(c), data, len);
    used += CMSG_SPACE(len);
  };
  if (gso_size != 0) add(IPPROTO_UDP, UDP_SEGMENT, &gso_size, sizeof(gso_size));
  if (p.priority != 0) {
    const int tos = (p.priority & 7) << 5;
    if (family_ == AF_INET6) {
      add(IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
    } else {
      add(IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
    }
  }
  if (used != 0) {
    m.msg_hdr.msg_control = entry.control;
    m.msg_hdr.msg_controllen = used;
  }
}

int DeliverReceived(const Address& from, const uint8_t* data, size_t copied, size_t full_length,
                    int gro_segment, IoBackend::RecvFn fn, IoStats* stats) {
  ++stats->recv_batches;
  if (gro_segment <= 0 || full_length <= static_cast<size_t>(gro_segment)) {
    if (copied < full_length) {
      ++stats->recv_truncated;
      return 0;
    }
    fn(from, absl::Span<const uint8_t>(data, full_length));
    ++stats->datagrams_received;
    return 1;
  }
  // A GRO batch: datagrams of gro_segment bytes, the last possibly shorter. A buffer too small
  // for the batch still holds its first datagrams whole; deliver those.
  const size_t segment = static_cast<size_t>(gro_segment);
  int delivered = 0;
  for (size_t offset = 0; offset < full_length; offset += segment) {
    const size_t len = std::min(segment, full_length - offset);
    if (offset + len > copied) {
      stats->recv_truncated += (full_length - offset + segment - 1) / segment;
      break;
    }
    fn(from, absl::Span<const uint8_t>(data + offset, len));
    ++delivered;
  }
  stats->datagrams_received += delivered;
  return delivered;
}

void Sender::Flush(int fd, std::vector<OutPacket>* queue, IoStats* stats) {
  if (queue->empty()) return;
  plan_.Build(*queue, family_, gso_enabled_);
  SendRetryBudget budget;
  SendRange(fd, 0, plan_.size(), &budget, stats);
  plan_.Clear();
  queue->clear();
}

void Sender::SendRange(int fd, size_t begin, size_t end, SendRetryBudget* budget,
                       IoStats* stats) {
  size_t i = begin;
  while (i < end) {
    HOMARPC_TRACE_POINT(kSendBegin);
    const int sent = sendmmsg(fd, plan_.msgs() + i, static_cast<unsigned>(end - i), MSG_DONTWAIT);
    HOMARPC_TRACE_POINT(kSendEnd);
    if (sent > 0) {
      for (size_t k = i; k < i + static_cast<size_t>(sent); ++k) {
        stats->datagrams_sent += plan_.info(k).count;
        if (plan_.info(k).gso_size != 0) gso_verified_ = true;
      }
      stats->send_calls += sent;
      i += sent;
      continue;
    }
    const int err = sent < 0 ? errno : EIO;
    if (err == EINTR) continue;
    const SendPlan::Info info = plan_.info(i);
    if (err == EAGAIN || err == EWOULDBLOCK) {
      if (budget->WaitWritable(fd)) continue;
    } else if ((err == EIO || err == EINVAL) && info.gso_size != 0 && !gso_verified_) {
      HOMARPC_LOG(WARNING) << "UDP GSO refused ("
                           << ErrnoToStatus(err, "sendmsg(UDP_SEGMENT)").message()
                           << "); sending one datagram per packet from now on";
      gso_enabled_ = false;
      ++stats->send_calls;
      const auto [single_begin, single_end] = plan_.SplitIntoSingles(i);
      SendRange(fd, single_begin, single_end, budget, stats);
      ++i;
      continue;
    }
    const OutPacket& first = plan_.packet(info.first);
    NoteSendError(err, first.size(), first.dest);
    ++stats->send_calls;
    stats->send_errors += info.count;
    ++i;
  }
}

RecvBatch::RecvBatch(uint32_t slots, uint32_t slot_size)
    : slot_size_(slot_size),
      memory_(new uint8_t[static_cast<size_t>(slots) * slot_size]),
      msgs_(slots),
      iovs_(slots),
      names_(slots),
      controls_(slots) {
  for (uint32_t i = 0; i < slots; ++i) {
    iovs_[i] = iovec{memory_.get() + static_cast<size_t>(i) * slot_size_, slot_size_};
    std::memset(&msgs_[i], 0, sizeof(mmsghdr));
    msghdr& h = msgs_[i].msg_hdr;
    h.msg_iov = &iovs_[i];
    h.msg_iovlen = 1;
    h.msg_name = &names_[i];
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_control = controls_[i].bytes;
    h.msg_controllen = kControlSpace;
  }
}

int RecvBatch::Receive(int fd, IoBackend::RecvFn fn, IoStats* stats) {
  const unsigned slots = one_next_ ? 1 : static_cast<unsigned>(msgs_.size());
  // The kernel rewrites the lengths and flags of the slots it fills, and only those: restore
  // the ones the last call filled (a spinning loop's empty polls then restore none; all 32
  // on each cost ~200 instructions).
  for (unsigned i = 0; i < filled_; ++i) {
    msghdr& h = msgs_[i].msg_hdr;
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_controllen = kControlSpace;
    h.msg_flags = 0;
  }
  filled_ = 0;
  int n;
  do {
    n = recvmmsg(fd, msgs_.data(), slots, MSG_DONTWAIT | MSG_TRUNC, nullptr);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return 0;  // EAGAIN: drained. Nothing else is expected without IP_RECVERR.
  HOMARPC_TRACE_POINT(kReceived);
  filled_ = static_cast<unsigned>(n);
  one_next_ = false;
  int delivered = 0;
  for (int i = 0; i < n; ++i) {
    msghdr& h = msgs_[i].msg_hdr;
    int gro_segment = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
        std::memcpy(&gro_segment, CMSG_DATA(c), sizeof(gro_segment));
      }
    }
    const Address from =
        Address::FromSockaddr(static_cast<const sockaddr*>(h.msg_name), h.msg_namelen);
    const size_t full_length = msgs_[i].msg_len;
    const size_t copied = std::min<size_t>(full_length, slot_size_);
    delivered += DeliverReceived(from, static_cast<const uint8_t*>(iovs_[i].iov_base), copied,
                                 full_length, gro_segment, fn, stats);
  }
  return delivered;
}

}  // namespace io_internal
}  // namespace homarpc::transport
