// udp_floor: one-datagram ping-pong over loopback, busy-polled or blocking (see udp_floor.h).
//
// DESIGN NOTES
// The client keeps `concurrency` slots, each with one request in flight, on one socket and one
// thread: every reply is matched to its slot by the echoed tag, timed, and answered with the
// slot's next request. One thread rather than one per slot, because on a 2-core machine
// several busy-polling threads would time-share the cores and measure the scheduler instead.
// The server is a single loop: receive, send the first response_bytes of the buffer back
// (the tag comes first, so it is echoed).
//
// Busy-poll mode uses MSG_DONTWAIT on a blocking socket rather than O_NONBLOCK so that sends
// still block when the socket buffer is full instead of failing. Blocking mode uses a receive
// timeout (kStopCheckMillis) so the server can see the stop flag and the client can resend
// overdue requests; neither timeout is on the measured path of a reply that arrives.
#include "tools/bench/udp_floor.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/bench/socket_util.h"
#include "transport/errors.h"

namespace homarpc::bench {
namespace {

using transport::ErrnoToStatus;

constexpr int kSocketBufferBytes = 8 << 20;

bool IsRetryable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

// DF on every datagram, as homarpc's sockets have (transport/io_backend.cc): with the kernel's
// default an unconnected socket's datagram takes an IP ID from a shared generator, a cost
// homarpc does not pay, which a floor must not pay either.
void SendWithDontFragment(int fd) {
  int probe = IP_PMTUDISC_PROBE;
  (void)setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &probe, sizeof(probe));
}

// Keeps this thread busy for `nanos` (udp-floor-work's stand-in for an RPC system's own code).
void BusyWork(int64_t nanos) {
  if (nanos <= 0) return;
  const int64_t until = NowNanos() + nanos;
  while (NowNanos() < until) {
  }
}

struct Tag {
  uint32_t slot;
  uint32_t sequence;
};
static_assert(sizeof(Tag) == kUdpTagBytes);

}  // namespace

std::string UdpFloor::name() const {
  if (with_work_) return "udp-floor-work";
  return wait_ == Wait::kBusyPoll ? "udp-floor" : "udp-floor-blocking";
}

std::string UdpFloor::SkipReason(const Point& point) const {
  if (point.settings.server_host != "127.0.0.1") return "the floors run on loopback only";
  if (point.request_bytes > kMaxUdpFloorBytes || point.response_bytes > kMaxUdpFloorBytes) {
    return absl::StrCat("one datagram per message carries at most ", kMaxUdpFloorBytes,
                        " bytes; bigger messages need segmentation, which is homarpc's work");
  }
  if (point.request_bytes < kUdpTagBytes || point.response_bytes < kUdpTagBytes) {
    return absl::StrCat("each message needs ", kUdpTagBytes, " bytes for its tag");
  }
  return "";
}

absl::Status UdpFloor::Serve(const Point& point, ServerEnv& env) const {
  absl::StatusOr<ScopedFd> fd = BindLoopback(SOCK_DGRAM);
  if (!fd.ok()) return fd.status();
  SetSocketBuffers(fd->get(), kSocketBufferBytes);
  SendWithDontFragment(fd->get());
  const bool busy_poll = wait_ == Wait::kBusyPoll;
  if (!busy_poll) {
    absl::Status timeout = SetReceiveTimeout(fd->get(), kStopCheckMillis);
    if (!timeout.ok()) return timeout;
  }
  absl::StatusOr<uint16_t> port = LocalPort(fd->get());
  if (!port.ok()) return port.status();
  env.Ready(*port);

  // One byte more than the largest expected request, so an oversized datagram is visible.
  std::vector<char> buffer(std::max(point.request_bytes, point.response_bytes) + 1);
  const int flags = busy_poll ? MSG_DONTWAIT : 0;
  const int64_t work_ns = with_work_ ? point.settings.floor_work_ns / 2 : 0;
  while (!env.ShouldStop()) {
    sockaddr_in from{};
    socklen_t from_length = sizeof(from);
    const ssize_t n = recvfrom(fd->get(), buffer.data(), buffer.size(), flags,
                               reinterpret_cast<sockaddr*>(&from), &from_length);
    if (n < 0) {
      if (IsRetryable(errno)) continue;
      return ErrnoToStatus(errno, "server recvfrom");
    }
    if (static_cast<uint64_t>(n) != point.request_bytes) continue;  // not one of ours
    BusyWork(work_ns);
    if (sendto(fd->get(), buffer.data(), point.response_bytes, 0,
               reinterpret_cast<const sockaddr*>(&from), from_length) < 0) {
      return ErrnoToStatus(errno, "server sendto");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ClientSamples> UdpFloor::RunClient(const Point& point, uint16_t server_port) const {
  absl::StatusOr<ScopedFd> fd = ConnectLoopback(SOCK_DGRAM, server_port);
  if (!fd.ok()) return fd.status();
  SetSocketBuffers(fd->get(), kSocketBufferBytes);
  SendWithDontFragment(fd->get());
  const bool busy_poll = wait_ == Wait::kBusyPoll;
  if (!busy_poll) {
    absl::Status timeout = SetReceiveTimeout(fd->get(), kStopCheckMillis);
    if (!timeout.ok()) return timeout;
  }

  struct Slot {
    uint32_t sequence = 0;
    int64_t sent_ns = 0;
  };
  std::vector<Slot> slots(static_cast<size_t>(point.concurrency));
  std::vector<char> request(point.request_bytes, 'q');
  std::vector<char> reply(std::max(point.request_bytes, point.response_bytes) + 1);
  // A quarter of the work before each send and a quarter after each reply, both timed.
  const int64_t work_ns = with_work_ ? point.settings.floor_work_ns / 4 : 0;

  auto send_slot = [&](uint32_t index) -> absl::Status {
    Slot& slot = slots[index];
    ++slot.sequence;
    const Tag tag{index, slot.sequence};
    std::memcpy(request.data(), &tag, sizeof(tag));
    slot.sent_ns = NowNanos();
    BusyWork(work_ns);
    if (send(fd->get(), request.data(), request.size(), 0) < 0) {
      return ErrnoToStatus(errno, "client send");
    }
    return absl::OkStatus();
  };

  ClientSamples samples;
  samples.latencies_ns.reserve(std::min<uint64_t>(point.iterations, uint64_t{1} << 22));
  for (uint32_t i = 0; i < slots.size(); ++i) {
    absl::Status sent = send_slot(i);
    if (!sent.ok()) return sent;
  }
  const int64_t resend_after_ns = kUdpResendMillis * 1000000;
  const int flags = busy_poll ? MSG_DONTWAIT : 0;
  uint64_t warmup_left = point.warmup;
  bool measuring = warmup_left == 0;
  int64_t start_ns = NowNanos();
  int64_t now_ns = start_ns;
  int64_t next_overdue_check_ns = start_ns + resend_after_ns;
  int64_t lost = 0;
  int64_t stale = 0;
  while (true) {
    const ssize_t n = recv(fd->get(), reply.data(), reply.size(), flags);
    const int recv_errno = errno;
    now_ns = NowNanos();
    if (now_ns >= next_overdue_check_ns) {
      // Checked on every path, not only when recv finds nothing: with several slots, replies
      // to the others may keep arriving while one slot's reply is gone.
      next_overdue_check_ns = now_ns + resend_after_ns / 4;
      for (uint32_t i = 0; i < slots.size(); ++i) {
        if (now_ns - slots[i].sent_ns < resend_after_ns) continue;
        ++lost;
        absl::Status sent = send_slot(i);
        if (!sent.ok()) return sent;
      }
    }
    if (n < 0) {
      if (!IsRetryable(recv_errno)) return ErrnoToStatus(recv_errno, "client recv");
      if (measuring && now_ns - start_ns >= point.duration_ns) break;
      continue;
    }
    Tag tag{};
    const bool right_size = static_cast<uint64_t>(n) == point.response_bytes;
    if (right_size) std::memcpy(&tag, reply.data(), sizeof(tag));
    if (!right_size || tag.slot >= slots.size() || tag.sequence != slots[tag.slot].sequence) {
      ++stale;  // a reply to a request that was already resent, or a foreign datagram
      continue;
    }
    if (work_ns > 0) {
      BusyWork(work_ns);
      now_ns = NowNanos();
    }
    if (measuring) {
      samples.latencies_ns.push_back(now_ns - slots[tag.slot].sent_ns);
      samples.payload_bytes += point.request_bytes + point.response_bytes;
    } else if (--warmup_left == 0) {
      measuring = true;
      start_ns = now_ns;
    }
    if (measuring && (samples.latencies_ns.size() >= point.iterations ||
                      now_ns - start_ns >= point.duration_ns)) {
      break;
    }
    absl::Status sent = send_slot(tag.slot);
    if (!sent.ok()) return sent;
  }
  samples.elapsed_ns = now_ns - start_ns;
  samples.extras.push_back(Extra::Int("lost_replies", lost));
  samples.extras.push_back(Extra::Int("stale_replies", stale));
  if (with_work_) {
    samples.extras.push_back(Extra::Int("floor_work_ns", point.settings.floor_work_ns));
  }
  return samples;
}

}  // namespace homarpc::bench
