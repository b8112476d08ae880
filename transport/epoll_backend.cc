// EpollBackend: IoBackend over epoll, recvmmsg and sendmmsg. See epoll_backend.h.
//
// Owned by the loop that created it through CreateIoBackend(); every method but Notify() runs
// on that loop's thread.
//
// DESIGN NOTES
//
// Receive. Poll() does not consult epoll at all but makes one RecvBatch call (one
// recvmmsg(MSG_DONTWAIT) into IoOptions::recv_buffer_count slots; io_backend_internal.h says
// why only one). (With 16 slots the UDP chaos test on epoll once failed
// 4 of ~100 runs under load: smaller batches made a client read a delayed RPC_UNKNOWN after
// its response had begun. That was a protocol gap, closed by RESEND rounds, PROTOCOL.md
// section 10; with it closed, 16 slots passed 80 of 80 runs.)
//
// Send. Flush() hands the queued packets to io_internal::Sender (sendmmsg, GSO, retries).
//
// The socket is in the epoll set while the loop may sleep: Wait() adds it, and the first Poll()
// that finds the socket empty IoOptions::unwatch_after_nanos (200 us, at least twice the loop's
// idle spin) or more after the Wait() ended removes it again. A socket in an epoll set makes
// every datagram's delivery run epoll's callback inside the sender's system call (+0.4-0.5 us per
// datagram on these VMs, docs/rpc-benchmarks.md, session 15), which a loop that is awake and
// reading does not need. But a loop that sleeps between calls (a few thousand a second) would pay
// two epoll_ctl calls per call for it, ~2.3 us of CPU, where its datagrams arrive while it sleeps
// anyway (and so run the callback either way): only a loop that stays awake longer than it spins
// between sparse calls takes the socket out. Adding it checks readiness, so a datagram that came
// after the last Poll() still ends the Wait() at once.
//
// Wait/Notify. Notify() writes the eventfd; the eventfd stays readable (level-triggered) until
// Wait() reads it, so a Notify() that lands between Poll() and Wait() still ends that Wait().
// Only Wait() resets the eventfd; Poll() never touches it. Wait() takes milliseconds from
// epoll_wait, rounding up, and uses epoll_pwait2 for timeouts that are not whole
// milliseconds, when the kernel has it (5.11+).
#include "transport/epoll_backend.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/clock.h"
#include "transport/errors.h"
#include "transport/io_backend_internal.h"
#include "transport/log.h"

namespace homarpc::transport {
namespace {

using io_internal::OwnerThread;
using io_internal::RecvBatch;
using io_internal::Sender;

class EpollBackend final : public IoBackend {
 public:
  EpollBackend(const IoOptions& options, int fd, int epoll_fd, int event_fd, Address local);
  ~EpollBackend() override;

  IoKind kind() const override { return IoKind::kEpoll; }
  Address local_address() const override { return local_; }
  void Send(const OutPacket& packet) override;
  void Flush() override;
  int Poll(RecvFn fn) override;
  void Wait(int64_t timeout_nanos) override;
  void Notify() override;
  bool SendDirect(const OutPacket& packet) override {
    return direct_.Send(fd_, local_.family(), packet);
  }
  bool ReleaseOwner() override {
    assert(owner_.IsOwner() && queue_.empty());  // nothing queued that the next owner would send
    owner_.Release();
    return true;
  }
  void ReadOneNext() override { recv_.ReadOneNext(); }
  int64_t LastArrivalNanos() override { return io_internal::LastArrivalNanos(fd_); }
  IoStats stats() const override {
    IoStats s = stats_;
    direct_.AddTo(&s);
    return s;
  }

 private:
  const int fd_;
  const int epoll_fd_;
  const int event_fd_;
  const Address local_;
  bool have_pwait2_ = true;
  const int64_t unwatch_after_nanos_;  // IoOptions::unwatch_after_nanos
  bool socket_watched_ = false;  // fd_ is in the epoll set (see DESIGN NOTES)
  int64_t woke_nanos_ = 0;       // when the last Wait() returned
  bool add_failed_logged_ = false;
  OwnerThread owner_;
  IoStats stats_;
  io_internal::DirectSendCounters direct_;  // SendDirect, any thread

  std::vector<OutPacket> queue_;
  Sender sender_;

  RecvBatch recv_;
};

EpollBackend::EpollBackend(const IoOptions& options, int fd, int epoll_fd, int event_fd,
                           Address local)
    : fd_(fd),
      epoll_fd_(epoll_fd),
      event_fd_(event_fd),
      local_(local),
      unwatch_after_nanos_(options.unwatch_after_nanos),
      sender_(local.family(), options.enable_gso),
      recv_(options.recv_buffer_count, options.recv_buffer_size) {}

EpollBackend::~EpollBackend() {
  close(event_fd_);
  close(epoll_fd_);
  close(fd_);
}

void EpollBackend::Send(const OutPacket& packet) {
  assert(owner_.IsOwner());
  if (packet.dest.family() != local_.family()) {
    ++stats_.send_errors;  // an IPv4 peer on an IPv6 socket or the reverse: cannot be sent
    return;
  }
  queue_.push_back(packet);
}

void EpollBackend::Flush() {
  owner_.Claim();
  assert(owner_.IsOwner());
  sender_.Flush(fd_, &queue_, &stats_);
}

int EpollBackend::Poll(RecvFn fn) {
  owner_.Claim();
  assert(owner_.IsOwner());
  const int delivered = recv_.Receive(fd_, fn, &stats_);
  if (socket_watched_ && delivered == 0 &&
      MonotonicClock().NowNanos() - woke_nanos_ >= unwatch_after_nanos_) {
    // Awake a while and the socket is empty: stop paying epoll's callback on every datagram.
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_, nullptr) == 0) {
      socket_watched_ = false;
      ++stats_.watch_changes;
    }
  }
  return delivered;
}

void EpollBackend::Wait(int64_t timeout_nanos) {
  owner_.Claim();
  assert(owner_.IsOwner());
  epoll_event events[2];
  const auto whole_millis = [](int64_t nanos) {
    return static_cast<int>(
        std::min<int64_t>((nanos + kNanosPerMilli - 1) / kNanosPerMilli, INT_MAX));
  };
  if (!socket_watched_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd_;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd_, &ev) != 0) {
      // Only ENOMEM/ENOSPC can get here: wait on the eventfd alone, at most 1 ms, so that
      // the loop polls the socket every millisecond instead of spinning or missing it.
      if (!add_failed_logged_) {
        add_failed_logged_ = true;
        HOMARPC_LOG(ERROR) << ErrnoToStatus(errno, "epoll_ctl(EPOLL_CTL_ADD)").message()
                           << "; the loop polls every millisecond while this lasts";
      }
      if (timeout_nanos < 0 || timeout_nanos > kNanosPerMilli) timeout_nanos = kNanosPerMilli;
    } else {
      socket_watched_ = true;
      ++stats_.watch_changes;
    }
  }
  MonotonicClock clock;
  const int64_t deadline = timeout_nanos < 0 ? -1 : clock.NowNanos() + timeout_nanos;
  int64_t left = timeout_nanos;
  int n;
  while (true) {
    if (left < 0) {
      n = epoll_wait(epoll_fd_, events, 2, -1);
    } else if (left % kNanosPerMilli == 0 || !have_pwait2_) {
      n = epoll_wait(epoll_fd_, events, 2, whole_millis(left));
    } else {
      timespec ts{static_cast<time_t>(left / kNanosPerSecond),
                  static_cast<long>(left % kNanosPerSecond)};
      n = epoll_pwait2(epoll_fd_, events, 2, &ts, nullptr);
      if (n < 0 && errno == ENOSYS) {
        have_pwait2_ = false;
        continue;
      }
    }
    // EINTR is common in a process that also runs io_uring rings: task work queued to this
    // thread (e.g. by a ring being torn down) interrupts blocking calls. Keep waiting.
    if (n >= 0 || errno != EINTR) break;
    if (deadline >= 0) {
      left = deadline - clock.NowNanos();
      if (left <= 0) {
        n = 0;  // timed out while interrupted
        break;
      }
    }
  }
  woke_nanos_ = clock.NowNanos();
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd == event_fd_) {
      uint64_t value;
      if (read(event_fd_, &value, sizeof(value)) < 0) {
        // EAGAIN: another Wait already took it. Nothing to do.
      }
    }
  }
}

void EpollBackend::Notify() { io_internal::SignalEventFd(event_fd_); }

}  // namespace

absl::StatusOr<std::unique_ptr<IoBackend>> CreateEpollBackend(const IoOptions& options, int fd,
                                                              const Address& local) {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return ErrnoToStatus(errno, "epoll_create1");
  const int event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd < 0) {
    const int err = errno;
    close(epoll_fd);
    return ErrnoToStatus(err, "eventfd");
  }
  // The eventfd is watched for good; the socket from a Wait() until an empty Poll() a while
  // after it (DESIGN NOTES).
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = event_fd;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, event_fd, &ev) != 0) {
    const int err = errno;
    close(event_fd);
    close(epoll_fd);
    return ErrnoToStatus(err, "epoll_ctl(EPOLL_CTL_ADD)");
  }
  return std::unique_ptr<IoBackend>(new EpollBackend(options, fd, epoll_fd, event_fd, local));
}

}  // namespace homarpc::transport
