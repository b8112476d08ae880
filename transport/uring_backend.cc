// UringBackend: IoBackend over one io_uring (liburing 2.3). See uring_backend.h.
//
// Owned by the loop that created it through CreateIoBackend(); every method but Notify() runs
// on that loop's thread, which is also the ring's single issuer.
//
// DESIGN NOTES
//
// Ring setup. IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN makes completions run only when this
// thread enters the kernel, on this thread: no IPIs and no task-work interruptions in the
// middle of protocol work; busy-polled round trips were about 4x faster than with a default
// ring on these machines. TASKRUN_FLAG makes the kernel raise IORING_SQ_TASKRUN when such
// work is pending, so Wait(0) enters the kernel only when there is some.
// The ring is created IORING_SETUP_R_DISABLED and enabled by the first Poll/Flush/Wait:
// SINGLE_ISSUER binds the ring to the thread that enables it, and the factory usually runs on
// another thread than the loop. (liburing 2.3 declares io_uring_enable_rings() but does not
// export it, hence the raw io_uring_register call.) A kernel that rejects these flags gets a
// plain ring and one WARNING line.
//
// Receive. Poll() reads the socket itself, with one recvmmsg (io_internal::RecvBatch, as the
// epoll backend does); the ring watches the socket only while the loop sleeps: Wait() arms a
// one-shot POLL_ADD(POLLIN) beside the eventfd read and waits for either. A poll that is still
// armed when the loop wakes for another reason (a timer, a Notify) stays armed until a datagram
// fires it; its completion only clears `poll_armed_`, and the datagram is read by the next
// Poll(). Poll() never enters the kernel for such a completion: a fired poll's task work
// waits for the next Wait(), whose io_uring_enter runs it and returns at once (one early
// return), so a wake-up that no datagram caused costs the next datagram only the queueing of
// that task work (~0.5 us in its sender's system call), once. Arming checks readiness at
// once, so a datagram that arrived after the loop's last Poll() ends the Wait() immediately:
// no wake-up is lost.
// Until session 15 the receive was one multishot RECVMSG over a ring of provided buffers,
// armed all the time. A per-call timeline of a 64 B unary call on this project's VMs (a null
// system call costs ~1.1 us here) showed what that cost a spinning loop: each datagram's
// arrival queued task work from the sender's system call (+0.5 us on the peer's send), and
// the loop then entered the kernel to run it (io_uring_get_events, 2.4 us, against ~1.2 us
// for a recvmmsg that finds a datagram). Reading directly took a traced unary 64 B call from
// 17.6-19.1 us to 15.0-15.2 us, and interleaved untraced runs from 17.4 to 14.4 us in a fast
// minute (docs/rpc-benchmarks.md, session 15), as fast as the epoll backend, with 1 MiB
// calls and 32-in-flight throughput unchanged.
//
// Send. Flush() hands the queued packets to io_internal::Sender: sendmmsg, as the epoll
// backend does. Until session 15 each GSO run or datagram was a SENDMSG SQE and Flush()
// waited for their completions; with the receive direct, that cost 0.6-1.3 us per small call
// more than sendmmsg (unary 64 B p50 19.0 -> 17.7 us, 6 of 6 interleaved pairs lower; 1 MiB,
// 16 MiB and 32-in-flight throughput equal or a little better), so the ring now carries only
// the waits. What it still gives: the sleep (poll, notify read and timeout in one
// io_uring_enter).
//
// Notify. A plain READ of an eventfd, armed by the first Wait() after each completion. The
// eventfd is created blocking so that the READ waits on every kernel (6.18 arms a poll either
// way; older kernels may complete reads of O_NONBLOCK files with -EAGAIN); Notify()'s write
// could block only at a counter of 2^64 - 2. Its completion ends a Wait(): a READ armed when
// Notify() lands completes as task work, which the next Wait()'s io_uring_enter runs before
// it sleeps, so it returns at once (a completion Poll() happens to reap sets
// notify_pending_, to the same effect). That closes the race "Notify() lands after the loop
// looked for work but before it waits". A Notify() while no READ is armed leaves the counter
// up, and the READ the next Wait() arms completes at once.
//
// Wait. Returns at once when a notification is pending or a completion is ready; otherwise
// arms what is not armed (the socket's poll, the eventfd read) and calls
// io_uring_submit_and_wait_timeout for one CQE (EXT_ARG timeout, no timeout SQE). A
// notification that ends a Wait() is consumed by it, so one Notify() ends one Wait(), not two.
// Called off the owning thread (-EEXIST) it aborts, as a programming error; a ring that cannot
// wait at all (never enabled) is logged once and replaced by sleeps of at most 1 ms.
//
// Teardown. io_uring_queue_exit() cancels the armed poll and read.
#include "transport/uring_backend.h"

#include <liburing.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
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

// user_data: what completed.
constexpr uint64_t kTagPoll = 1;
constexpr uint64_t kTagNotify = 2;

constexpr unsigned kSqEntries = 8;  // at most the socket's poll and the eventfd read


class UringBackend final : public IoBackend {
 public:
  UringBackend(const IoOptions& options, Address local);
  ~UringBackend() override;

  // Sets up the ring and the eventfd around the bound socket `fd`, which the backend
  // owns only once Init() has succeeded.
  absl::Status Init(int fd);

  IoKind kind() const override { return IoKind::kUring; }
  Address local_address() const override { return local_; }
  void Send(const OutPacket& packet) override;
  void Flush() override;
  int Poll(RecvFn fn) override;
  void Wait(int64_t timeout_nanos) override;
  void Notify() override;
  bool SendDirect(const OutPacket& packet) override {
    return direct_.Send(fd_, local_.family(), packet);
  }
  void ReadOneNext() override { recv_.ReadOneNext(); }
  int64_t LastArrivalNanos() override { return io_internal::LastArrivalNanos(fd_); }
  IoStats stats() const override {
    IoStats s = stats_;
    direct_.AddTo(&s);
    return s;
  }

 private:
  // Called at the top of Poll/Flush/Wait: the first caller becomes the owner and issuer.
  void StartOnce() {
    if (owner_.Claim()) Start();
    assert(owner_.IsOwner());
  }
  void Start();
  io_uring_sqe* GetSqe();
  // Queues SQEs for the socket's poll and the eventfd read if they are not armed (Wait()).
  void Arm();
  // Submits queued SQEs and runs deferred task work when the kernel says there is some.
  void EnterIfNeeded();
  // Notes every completion already posted (no system call).
  void ReapEvents();
  // Notes a poll or notify completion outside Wait(): what is no longer armed, and a pending
  // notification.
  void NoteEvent(uint64_t user_data);

  int fd_ = -1;
  int event_fd_ = -1;
  Address local_;
  io_uring ring_{};
  bool ring_ready_ = false;
  bool needs_enable_ = false;

  RecvBatch recv_;
  uint64_t notify_value_ = 0;  // the eventfd read's target
  bool poll_armed_ = false;
  bool notify_armed_ = false;
  bool notify_pending_ = false;
  bool wait_failed_logged_ = false;

  std::vector<OutPacket> queue_;
  Sender sender_;

  OwnerThread owner_;
  IoStats stats_;
  io_internal::DirectSendCounters direct_;  // SendDirect, any thread
};

UringBackend::UringBackend(const IoOptions& options, Address local)
    : local_(local),
      recv_(options.recv_buffer_count, options.recv_buffer_size),
      sender_(local.family(), options.enable_gso) {}

UringBackend::~UringBackend() {
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (event_fd_ >= 0) close(event_fd_);
  if (fd_ >= 0) close(fd_);
}

absl::Status UringBackend::Init(int fd) {
  // Completions outstanding at once: the socket's poll and the eventfd read.
  io_uring_params params{};
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                 IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE;
  params.cq_entries = 2 * kSqEntries;
  int r = io_uring_queue_init_params(kSqEntries, &ring_, &params);
  if (r == -EINVAL) {
    HOMARPC_LOG(WARNING) << "io_uring rejected SINGLE_ISSUER|DEFER_TASKRUN (kernel < 6.1?); "
                            "using a default ring, expect slower round trips";
    const unsigned cq_entries = params.cq_entries;
    params = io_uring_params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = cq_entries;
    r = io_uring_queue_init_params(kSqEntries, &ring_, &params);
  } else if (r == 0) {
    needs_enable_ = true;
  }
  if (r < 0) {
    return absl::FailedPreconditionError(ErrnoToStatus(-r, "io_uring_queue_init").message());
  }
  ring_ready_ = true;

  event_fd_ = eventfd(0, EFD_CLOEXEC);  // blocking on purpose: see DESIGN NOTES
  if (event_fd_ < 0) return ErrnoToStatus(errno, "eventfd");
  fd_ = fd;
  return absl::OkStatus();
}

void UringBackend::Start() {
  if (needs_enable_) {
    const long r =
        syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
    if (r < 0) {
      HOMARPC_LOG(ERROR) << ErrnoToStatus(errno, "IORING_REGISTER_ENABLE_RINGS").message();
    }
  }
}

io_uring_sqe* UringBackend::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);  // the SQ is full: hand it over, which frees every slot
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void UringBackend::Arm() {
  if (!poll_armed_) {
    io_uring_sqe* sqe = GetSqe();
    io_uring_prep_poll_add(sqe, fd_, POLLIN);  // one-shot: gone once it fires
    io_uring_sqe_set_data64(sqe, kTagPoll);
    poll_armed_ = true;
  }
  if (!notify_armed_) {
    io_uring_sqe* sqe = GetSqe();
    io_uring_prep_read(sqe, event_fd_, &notify_value_, sizeof(notify_value_), 0);
    io_uring_sqe_set_data64(sqe, kTagNotify);
    notify_armed_ = true;
  }
}

void UringBackend::EnterIfNeeded() {
  if (io_uring_sq_ready(&ring_) > 0) io_uring_submit(&ring_);
  const unsigned flags = IO_URING_READ_ONCE(*ring_.sq.kflags);
  if ((flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0) io_uring_get_events(&ring_);
}

void UringBackend::ReapEvents() {
  unsigned head;
  io_uring_cqe* cqe;
  unsigned n = 0;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    NoteEvent(cqe->user_data);
    ++n;
  }
  io_uring_cq_advance(&ring_, n);
}

void UringBackend::NoteEvent(uint64_t user_data) {
  switch (user_data) {
    case kTagPoll:
      poll_armed_ = false;  // the datagram that fired it is read by Poll()
      return;
    case kTagNotify:
      notify_armed_ = false;
      notify_pending_ = true;
      return;
    default:
      return;
  }
}

void UringBackend::Send(const OutPacket& packet) {
  assert(owner_.IsOwner());
  if (packet.dest.family() != local_.family()) {
    ++stats_.send_errors;  // an IPv4 peer on an IPv6 socket or the reverse: cannot be sent
    return;
  }
  queue_.push_back(packet);
}

void UringBackend::Flush() {
  StartOnce();
  sender_.Flush(fd_, &queue_, &stats_);
}

int UringBackend::Poll(RecvFn fn) {
  StartOnce();
  // The ring holds only poll and notify completions, and an awake loop needs neither: this
  // reads the ones already posted (shared memory) and never enters the kernel for one that
  // fired since (its task work waits for the next Wait(), whose io_uring_enter runs it first
  // and returns at once). Entering here would cost ~2.4 us on the first datagram after any
  // wake-up that no datagram caused.
  ReapEvents();
  return recv_.Receive(fd_, fn, &stats_);
}

void UringBackend::Wait(int64_t timeout_nanos) {
  StartOnce();
  if (notify_pending_) {
    notify_pending_ = false;
    return;
  }
  if (io_uring_cq_ready(&ring_) > 0) {
    // A poll or notify that fired after the last Poll(): there is work. (With DEFER_TASKRUN
    // completions are posted only inside our own io_uring_enter calls, each followed by
    // ReapEvents(); this is for the plain ring a kernel without it gets.)
    ReapEvents();
    notify_pending_ = false;
    return;
  }
  Arm();
  if (timeout_nanos == 0) {
    EnterIfNeeded();
  } else {
    MonotonicClock clock;
    const int64_t deadline = timeout_nanos < 0 ? -1 : clock.NowNanos() + timeout_nanos;
    int64_t left = timeout_nanos;
    while (true) {
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec ts{};
      ts.tv_sec = left / kNanosPerSecond;
      ts.tv_nsec = left % kNanosPerSecond;
      const int r =
          io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, left > 0 ? &ts : nullptr, nullptr);
      if (r == -EEXIST) {
        // SINGLE_ISSUER: this is not the owning thread. Waiting would never work.
        HOMARPC_LOG(ERROR) << "UringBackend::Wait called off its loop thread";
        std::abort();
      }
      if (r < 0 && r != -ETIME && r != -EINTR) {
        // The ring cannot wait (it was never enabled, or the kernel refuses): sleep a little
        // instead, so that the loop polls at most every millisecond rather than spinning.
        if (!wait_failed_logged_) {
          wait_failed_logged_ = true;
          HOMARPC_LOG(ERROR) << ErrnoToStatus(-r, "io_uring_submit_and_wait_timeout").message()
                             << "; the loop polls every millisecond instead of sleeping";
        }
        std::this_thread::sleep_for(std::chrono::nanoseconds(
            left < 0 ? kNanosPerMilli : std::min<int64_t>(left, kNanosPerMilli)));
        break;
      }
      // -ETIME ends the wait; -EINTR (a signal, or task work from another ring) does not.
      if (r != -EINTR) break;
      if (deadline >= 0) {
        left = deadline - clock.NowNanos();
        if (left <= 0) break;
      }
    }
  }
  // A notification has done its job by ending this Wait(); a fired poll means Poll() has
  // datagrams to read.
  ReapEvents();
  notify_pending_ = false;
}

void UringBackend::Notify() { io_internal::SignalEventFd(event_fd_); }

}  // namespace

absl::StatusOr<std::unique_ptr<IoBackend>> CreateUringBackend(const IoOptions& options, int fd,
                                                              const Address& local) {
  auto backend = std::make_unique<UringBackend>(options, local);
  if (absl::Status s = backend->Init(fd); !s.ok()) return s;
  return std::unique_ptr<IoBackend>(std::move(backend));
}

}  // namespace homarpc::transport
