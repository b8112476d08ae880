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
// work is pending, so an idle Poll() reads one shared word instead of making a system call.
// The ring is created IORING_SETUP_R_DISABLED and enabled by the first Poll/Flush/Wait:
// SINGLE_ISSUER binds the ring to the thread that enables it, and the factory usually runs on
// another thread than the loop. (liburing 2.3 declares io_uring_enable_rings() but does not
// export it, hence the raw io_uring_register call.) A kernel that rejects these flags gets a
// plain ring and one WARNING line.
//
// Receive. One multishot RECVMSG with IOSQE_BUFFER_SELECT over a provided-buffer ring that we
// mmap ourselves (liburing 2.3 has no io_uring_setup_buf_ring). Each buffer is laid out by the
// kernel as io_uring_recvmsg_out | name (kRecvNameSpace) | control (kRecvControlSpace) |
// payload; the name space is 32 rather than sizeof(sockaddr_in6) = 28 so that the cmsghdrs
// and the payload that follow are 8- and 16-byte aligned. A buffer goes back to the ring right
// after its datagrams were handed to the callback. When the ring runs dry the kernel ends the
// multishot with -ENOBUFS (counted as recv_no_buffers); the datagrams stay queued in the
// socket, and the receive is re-armed once buffers are back. Any CQE without
// IORING_CQE_F_MORE re-arms too.
//
// Send. Flush() queues one SENDMSG per SendPlan message (GSO run or datagram) with
// MSG_DONTWAIT, so a full socket buffer completes with -EAGAIN instead of parking the request
// on an unbounded internal poll (checked on 6.18: without the flag the SQE stays pending even
// on an O_NONBLOCK socket); we then wait for POLLOUT within the SendRetryBudget and
// resubmit. Flush() submits and waits until every send has completed: the kernel copies
// payload bytes into skbs before completing a UDP send, so the caller may then reuse them,
// and the msghdrs, iovecs and control messages in plan_ stay alive until then. Receive or
// notify completions reaped while Flush() waits cannot be delivered there (there is no
// callback), so they are parked in deferred_ and handled by the next Poll()/Wait().
//
// Notify. A plain READ of an eventfd, re-armed after each completion. The eventfd is created
// blocking so that the READ waits on every kernel (6.18 arms a poll either way; older kernels
// may complete reads of O_NONBLOCK files with -EAGAIN); Notify()'s write could block only at a
// counter of 2^64 - 2. Its completion ends a Wait(); a completion reaped by Poll() sets
// notify_pending_, so the next Wait() returns at once. That closes the race "Notify() lands
// after the loop looked for work but before it waits": Poll() runs in between and must not
// swallow the wakeup.
//
// Wait. Returns at once when a completion or notification is already waiting; otherwise
// io_uring_submit_and_wait_timeout for one CQE (EXT_ARG timeout, no timeout SQE). The CQEs it
// woke for are moved to deferred_ (notifications consumed), so that one Notify() ends one
// Wait(), not two.
//
// Teardown. io_uring_queue_exit() cancels the armed receive and read; the kernel keeps the
// buffer ring's pages pinned until it has, so the buffers can be unmapped right after.
#include "transport/uring_backend.h"

#include <liburing.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cstdlib>
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
using io_internal::SendPlan;
using io_internal::SendRetryBudget;

// user_data: the top two bits say what completed; sends carry their SendPlan index below.
constexpr uint64_t kTagShift = 62;
constexpr uint64_t kTagRecv = 1ull << kTagShift;
constexpr uint64_t kTagNotify = 2ull << kTagShift;
constexpr uint64_t kTagSend = 3ull << kTagShift;
constexpr uint64_t kTagMask = 3ull << kTagShift;

constexpr unsigned kSqEntries = 256;
constexpr uint16_t kBufferGroup = 0;
constexpr unsigned kRecvNameSpace = 32;     // >= sizeof(sockaddr_in6), keeps alignment
constexpr unsigned kRecvControlSpace = 64;  // one UDP_GRO message needs CMSG_SPACE(4) = 24
constexpr size_t kRecvHeadroom = sizeof(io_uring_recvmsg_out) + kRecvNameSpace + kRecvControlSpace;
// One reap round per Poll(): the loop flushes what a batch produced (GRANTs above all) before
// it reads the next batch; 8 rounds made 1 MiB one-way transfers ~1.6x slower.
constexpr int kMaxPollRounds = 1;
constexpr size_t kReapBatch = 64;

struct Completion {
  uint64_t user_data;
  int32_t res;
  uint32_t flags;
};


size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

class UringBackend final : public IoBackend {
 public:
  explicit UringBackend(const IoOptions& options);
  ~UringBackend() override;

  // Sets up the ring, buffers and eventfd around the bound socket `fd`, which the backend
  // owns only once Init() has succeeded.
  absl::Status Init(const IoOptions& options, int fd, Address local);

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
  // Queues SQEs for the receive and the eventfd read if they are not armed.
  void Rearm();
  // Submits queued SQEs and runs deferred task work when the kernel says there is some.
  void EnterIfNeeded();
  // Copies up to `max` ready CQEs into `out` and consumes them.
  size_t Reap(Completion* out, size_t max);
  // Handles a receive or notify completion; returns datagrams delivered.
  int Dispatch(const Completion& c, RecvFn fn);
  int HandleRecv(const Completion& c, RecvFn fn);
  void RecycleBuffer(uint16_t bid);
  void HandleSendResult(uint32_t index, int res);

  int fd_ = -1;
  int event_fd_ = -1;
  Address local_;
  io_uring ring_{};
  bool ring_ready_ = false;
  bool needs_enable_ = false;
  bool gso_enabled_;
  bool gso_verified_ = false;  // a GSO send has succeeded: later EINVALs are not about GSO

  // Provided buffers.
  io_uring_buf_ring* buf_ring_ = nullptr;
  size_t buf_ring_bytes_ = 0;
  uint32_t buf_ring_entries_ = 0;
  uint8_t* buffers_ = nullptr;
  size_t buffers_bytes_ = 0;
  size_t stride_ = 0;
  msghdr recv_msg_{};  // the multishot receive's template: name and control sizes

  uint64_t notify_value_ = 0;  // the eventfd read's target
  bool recv_armed_ = false;
  bool notify_armed_ = false;
  bool notify_pending_ = false;
  std::vector<Completion> deferred_;
  std::vector<Completion> dispatching_;  // Poll()'s batch of deferred_, kept for its capacity

  std::vector<OutPacket> queue_;
  SendPlan plan_;
  std::vector<uint32_t> to_submit_;
  std::vector<uint32_t> resubmit_;  // GSO messages split into datagrams: send at once
  std::vector<uint32_t> again_;     // -EAGAIN: send after POLLOUT, within the budget

  OwnerThread owner_;
  IoStats stats_;
  io_internal::DirectSendCounters direct_;  // SendDirect, any thread
};

UringBackend::UringBackend(const IoOptions& options) : gso_enabled_(options.enable_gso) {}

UringBackend::~UringBackend() {
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (buffers_ != nullptr) munmap(buffers_, buffers_bytes_);
  if (buf_ring_ != nullptr) munmap(buf_ring_, buf_ring_bytes_);
  if (event_fd_ >= 0) close(event_fd_);
  if (fd_ >= 0) close(fd_);
}

absl::Status UringBackend::Init(const IoOptions& options, int fd, Address local) {
  local_ = local;

  // Completions outstanding at once: one per provided buffer, one per send in a submission
  // batch, the eventfd read and an -ENOBUFS. Beyond that the kernel buffers overflow itself.
  io_uring_params params{};
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                 IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE;
  params.cq_entries = std::bit_ceil(options.recv_buffer_count + 2 * kSqEntries);
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

  buf_ring_entries_ = std::bit_ceil(options.recv_buffer_count);
  buf_ring_bytes_ = RoundUp(buf_ring_entries_ * sizeof(io_uring_buf), 4096);
  void* ring_mem =
      mmap(nullptr, buf_ring_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (ring_mem == MAP_FAILED) return ErrnoToStatus(errno, "mmap(buffer ring)");
  buf_ring_ = static_cast<io_uring_buf_ring*>(ring_mem);
  io_uring_buf_ring_init(buf_ring_);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(buf_ring_);
  reg.ring_entries = buf_ring_entries_;
  reg.bgid = kBufferGroup;
  r = io_uring_register_buf_ring(&ring_, &reg, 0);
  if (r < 0) {
    // Provided-buffer rings arrived in 5.19; without them there is no multishot receive.
    return absl::FailedPreconditionError(ErrnoToStatus(-r, "io_uring_register_buf_ring").message());
  }

  stride_ = RoundUp(kRecvHeadroom + options.recv_buffer_size, 64);
  buffers_bytes_ = stride_ * options.recv_buffer_count;
  void* mem =
      // MAP_POPULATE: the ring hands out buffers in rotation, so without it each of the first
      // recv_buffer_count receives page-faults a fresh buffer (measured: the first few hundred
      // round trips of a new endpoint took ~80 us instead of ~6 us).
      mmap(nullptr, buffers_bytes_, PROT_READ | PROT_WRITE,
           MAP_ANONYMOUS | MAP_PRIVATE | MAP_POPULATE, -1, 0);
  if (mem == MAP_FAILED) {
    buffers_ = nullptr;
    return ErrnoToStatus(errno, "mmap(receive buffers)");
  }
  buffers_ = static_cast<uint8_t*>(mem);
  const int mask = io_uring_buf_ring_mask(buf_ring_entries_);
  for (uint32_t i = 0; i < options.recv_buffer_count; ++i) {
    io_uring_buf_ring_add(buf_ring_, buffers_ + i * stride_, static_cast<unsigned>(stride_),
                          static_cast<unsigned short>(i), mask, static_cast<int>(i));
  }
  io_uring_buf_ring_advance(buf_ring_, static_cast<int>(options.recv_buffer_count));

  recv_msg_.msg_namelen = kRecvNameSpace;
  recv_msg_.msg_controllen = kRecvControlSpace;

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
  Rearm();
  io_uring_submit(&ring_);
}

io_uring_sqe* UringBackend::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);  // the SQ is full: hand it over, which frees every slot
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void UringBackend::Rearm() {
  if (!recv_armed_) {
    io_uring_sqe* sqe = GetSqe();
    // MSG_TRUNC: payloadlen reports the datagram's real length, so an oversized one is seen.
    io_uring_prep_recvmsg_multishot(sqe, fd_, &recv_msg_, MSG_TRUNC);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(sqe, kTagRecv);
    recv_armed_ = true;
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

size_t UringBackend::Reap(Completion* out, size_t max) {
  unsigned head;
  io_uring_cqe* cqe;
  size_t n = 0;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    if (n == max) break;
    out[n++] = Completion{cqe->user_data, cqe->res, cqe->flags};
  }
  io_uring_cq_advance(&ring_, static_cast<unsigned>(n));
  return n;
}

int UringBackend::Dispatch(const Completion& c, RecvFn fn) {
  switch (c.user_data & kTagMask) {
    case kTagRecv:
      return HandleRecv(c, fn);
    case kTagNotify:
      notify_armed_ = false;
      notify_pending_ = true;
      return 0;
    default:
      return 0;  // sends complete inside Flush()
  }
}

int UringBackend::HandleRecv(const Completion& c, RecvFn fn) {
  if ((c.flags & IORING_CQE_F_MORE) == 0) recv_armed_ = false;
  if (c.res < 0) {
    if (c.res == -ENOBUFS) ++stats_.recv_no_buffers;
    // Other errors (-EINTR, -ECANCELED) only end the multishot; it is re-armed.
    return 0;
  }
  if ((c.flags & IORING_CQE_F_BUFFER) == 0) return 0;
  const uint16_t bid = static_cast<uint16_t>(c.flags >> IORING_CQE_BUFFER_SHIFT);
  uint8_t* buffer = buffers_ + bid * stride_;
  int delivered = 0;
  io_uring_recvmsg_out* out = io_uring_recvmsg_validate(buffer, c.res, &recv_msg_);
  if (out != nullptr) {
    int gro_segment = 0;
    for (cmsghdr* cm = io_uring_recvmsg_cmsg_firsthdr(out, &recv_msg_); cm != nullptr;
         cm = io_uring_recvmsg_cmsg_nexthdr(out, &recv_msg_, cm)) {
      if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO) {
        std::memcpy(&gro_segment, CMSG_DATA(cm), sizeof(gro_segment));
      }
    }
    const Address from =
        Address::FromSockaddr(static_cast<const sockaddr*>(io_uring_recvmsg_name(out)),
                              std::min<socklen_t>(out->namelen, kRecvNameSpace));
    const uint8_t* payload = static_cast<const uint8_t*>(io_uring_recvmsg_payload(out, &recv_msg_));
    const size_t copied = io_uring_recvmsg_payload_length(out, c.res, &recv_msg_);
    // payloadlen is what the kernel had (the receive passes MSG_TRUNC); more than copied when
    // the buffer was too small. Should a kernel report only the copied length, the MSG_TRUNC
    // flag still marks the tail as missing.
    size_t full_length = std::max<size_t>(out->payloadlen, copied);
    if ((out->flags & MSG_TRUNC) != 0 && full_length <= copied) full_length = copied + 1;
    delivered =
        io_internal::DeliverReceived(from, payload, copied, full_length, gro_segment, fn, &stats_);
  }
  RecycleBuffer(bid);
  return delivered;
}

void UringBackend::RecycleBuffer(uint16_t bid) {
  io_uring_buf_ring_add(buf_ring_, buffers_ + bid * stride_, static_cast<unsigned>(stride_), bid,
                        io_uring_buf_ring_mask(buf_ring_entries_), 0);
  io_uring_buf_ring_advance(buf_ring_, 1);
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
  if (queue_.empty()) return;
  plan_.Build(queue_, local_.family(), gso_enabled_);
  to_submit_.clear();
  for (size_t i = 0; i < plan_.size(); ++i) to_submit_.push_back(static_cast<uint32_t>(i));
  SendRetryBudget budget;
  Completion batch[kReapBatch];
  while (!to_submit_.empty()) {
    size_t in_flight = 0;
    for (uint32_t index : to_submit_) {
      io_uring_sqe* sqe = GetSqe();
      io_uring_prep_sendmsg(sqe, fd_, plan_.msg(index), MSG_DONTWAIT);
      io_uring_sqe_set_data64(sqe, kTagSend | index);
      ++in_flight;
      ++stats_.send_calls;
    }
    resubmit_.clear();
    again_.clear();
    while (in_flight > 0) {
      const int r = io_uring_submit_and_wait(&ring_, 1);
      if (r == -EEXIST) {
        // SINGLE_ISSUER: this is not the owning thread. Waiting would never end.
        HOMARPC_LOG(ERROR) << "UringBackend::Flush called off its loop thread";
        std::abort();
      }
      const size_t n = Reap(batch, kReapBatch);
      for (size_t i = 0; i < n; ++i) {
        const Completion& c = batch[i];
        if ((c.user_data & kTagMask) == kTagSend) {
          --in_flight;
          HandleSendResult(static_cast<uint32_t>(c.user_data & ~kTagMask), c.res);
        } else {
          deferred_.push_back(c);
        }
      }
    }
    if (!again_.empty()) {
      if (budget.WaitWritable(fd_)) {
        resubmit_.insert(resubmit_.end(), again_.begin(), again_.end());
      } else {
        for (uint32_t index : again_) stats_.send_errors += plan_.info(index).count;
      }
    }
    to_submit_.swap(resubmit_);
  }
  plan_.Clear();
  queue_.clear();
}

void UringBackend::HandleSendResult(uint32_t index, int res) {
  const SendPlan::Info info = plan_.info(index);
  if (res >= 0) {
    stats_.datagrams_sent += info.count;
    if (info.gso_size != 0) gso_verified_ = true;
    return;
  }
  if (res == -EAGAIN) {
    again_.push_back(index);
    return;
  }
  if ((res == -EIO || res == -EINVAL) && info.gso_size != 0 && !gso_verified_) {
    if (gso_enabled_) {
      HOMARPC_LOG(WARNING) << "UDP GSO refused ("
                           << ErrnoToStatus(-res, "sendmsg(UDP_SEGMENT)").message()
                           << "); sending one datagram per packet from now on";
      gso_enabled_ = false;
    }
    // Safe while other sends are in flight: SplitIntoSingles never moves existing messages.
    const auto [begin, end] = plan_.SplitIntoSingles(index);
    for (size_t i = begin; i < end; ++i) resubmit_.push_back(static_cast<uint32_t>(i));
    return;
  }
  stats_.send_errors += info.count;
}

int UringBackend::Poll(RecvFn fn) {
  StartOnce();
  int delivered = 0;
  if (!deferred_.empty()) {
    // Swapped with a spare so neither vector loses its capacity: completions are parked on
    // most busy wake-ups, and a fresh vector would allocate each time.
    dispatching_.swap(deferred_);
    for (const Completion& c : dispatching_) delivered += Dispatch(c, fn);
    dispatching_.clear();
  }
  Completion batch[kReapBatch];
  for (int round = 0; round < kMaxPollRounds; ++round) {
    Rearm();
    EnterIfNeeded();
    const size_t n = Reap(batch, kReapBatch);
    if (n == 0) break;
    for (size_t i = 0; i < n; ++i) delivered += Dispatch(batch[i], fn);
  }
  return delivered;
}

void UringBackend::Wait(int64_t timeout_nanos) {
  StartOnce();
  if (notify_pending_) {
    notify_pending_ = false;
    return;
  }
  if (!deferred_.empty() || io_uring_cq_ready(&ring_) > 0) return;
  Rearm();
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
      // -ETIME ends the wait; -EINTR (a signal, or task work from another ring) does not.
      if (r != -EINTR) break;
      if (deadline >= 0) {
        left = deadline - clock.NowNanos();
        if (left <= 0) break;
      }
    }
  }
  // Park what woke us for Poll(); a notification has done its job by ending this Wait().
  Completion batch[kReapBatch];
  size_t n;
  while ((n = Reap(batch, kReapBatch)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      if ((batch[i].user_data & kTagMask) == kTagNotify) {
        notify_armed_ = false;
      } else {
        deferred_.push_back(batch[i]);
      }
    }
  }
}

void UringBackend::Notify() { io_internal::SignalEventFd(event_fd_); }

}  // namespace

absl::StatusOr<std::unique_ptr<IoBackend>> CreateUringBackend(const IoOptions& options, int fd,
                                                              const Address& local) {
  auto backend = std::make_unique<UringBackend>(options);
  if (absl::Status s = backend->Init(options, fd, local); !s.ok()) return s;
  return std::unique_ptr<IoBackend>(std::move(backend));
}

}  // namespace homarpc::transport
