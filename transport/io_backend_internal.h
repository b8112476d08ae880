// io_backend_internal: the pieces both UDP backends share, private to transport/*_backend.cc.
//
// Socket setup (OpenUdpSocket), the send planner that turns a Flush()'s queued OutPackets into
// msghdrs with UDP GSO and priority control messages (SendPlan), the receive-side splitter
// that turns one kernel buffer (possibly a UDP GRO batch) into datagrams (DeliverReceived), the
// receive call both backends' Poll() makes (RecvBatch), and the loop-thread check
// (OwnerThread). Implemented in io_backend.cc. Nothing outside the two
// backends and their tests should include this header.
//
// Threading: every type here belongs to one backend and is used on that backend's loop thread.
#ifndef HOMARPC_TRANSPORT_IO_BACKEND_INTERNAL_H_
#define HOMARPC_TRANSPORT_IO_BACKEND_INTERNAL_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "transport/address.h"
#include "transport/io_backend.h"
#include "transport/packet_sink.h"

namespace homarpc::transport::io_internal {

// At most this many datagrams go out in one GSO send. The kernel's UDP_MAX_SEGMENTS is 64 on
// older kernels and 128 on newer ones; 64 is accepted everywhere.
constexpr uint32_t kMaxGsoSegments = 64;
// At most this many UDP payload bytes go out in one GSO send: an IPv4 datagram carries at most
// 65535 - 20 - 8 = 65507 payload bytes and the kernel checks the whole GSO send against it.
// 65000 leaves room for IP options and extension headers.
constexpr size_t kMaxGsoBytes = 65000;
// How long one Flush() may wait, in total, for the socket to become writable again after the
// kernel said EAGAIN, before it drops what is left (counted in send_errors).
constexpr int kSendRetryBudgetMillis = 2;

// Checks the option values that do not depend on the kernel. INVALID_ARGUMENT when the bind
// address is unset or a receive buffer count/size is zero or absurd.
absl::Status ValidateOptions(const IoOptions& options);

// Creates, configures and binds the UDP socket for `options`: nonblocking, close-on-exec,
// IPV6_V6ONLY for IPv6, SO_REUSEPORT when asked, socket buffers (forced when permitted), DF
// on every datagram without local fragmentation (IP_PMTUDISC_PROBE, and IPV6_PMTUDISC_PROBE for
// IPv6), UDP_GRO when enabled. On success returns the fd (the caller owns it) and stores the
// bound address, with the port the kernel chose, in `*bound`. Errors come from ErrnoToStatus.
absl::StatusOr<int> OpenUdpSocket(const IoOptions& options, Address* bound);

// IoBackend::LastArrivalNanos for socket `fd` (OpenUdpSocket turned its timestamps on): the
// receive timestamp of the last datagram read from it, converted from CLOCK_REALTIME to
// MonotonicClock; 0 when it has none (the kernel then answers with the time of the ioctl
// itself, which this detects) or it is implausible (over a second old: the clock was
// stepped).
int64_t LastArrivalNanos(int fd);

// Sends `packet` (header, payload, payload2) as one datagram on `fd` with MSG_DONTWAIT, with
// the IP_TOS / IPV6_TCLASS of its priority. Thread-safe. Returns whether the kernel took it.
bool SendOneDatagram(int fd, int socket_family, const OutPacket& packet);

// DirectSendCounters: the atomics behind IoStats::direct_sends / direct_send_errors.
struct DirectSendCounters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> errors{0};
  bool Send(int fd, int socket_family, const OutPacket& packet) {
    const bool ok = SendOneDatagram(fd, socket_family, packet);
    (ok ? sent : errors).fetch_add(1, std::memory_order_relaxed);
    return ok;
  }
  void AddTo(IoStats* stats) const {
    stats->direct_sends = sent.load(std::memory_order_relaxed);
    stats->direct_send_errors = errors.load(std::memory_order_relaxed);
  }
};

// Adds one to the eventfd `fd` (a backend's Notify()). Thread-safe. Cannot fail short of a
// saturated counter, which means a wake-up is already pending, so errors are ignored.
void SignalEventFd(int fd);

// SendRetryBudget: bounds the time one Flush() spends waiting, after EAGAIN, for the socket
// buffer to drain (kSendRetryBudgetMillis in total, counted from the first wait).
class SendRetryBudget {
 public:
  // Waits for `fd` to become writable within what is left of the budget. Returns true when the
  // caller should retry, false when the budget is spent (the caller drops and counts).
  bool WaitWritable(int fd);

 private:
  int64_t deadline_nanos_ = -1;
};

// SendPlan: the msghdrs for one Flush().
//
// Build() groups consecutive packets with the same destination, the same priority and the
// same size (the last of a group may be shorter) into one message with a UDP_SEGMENT control
// message and an iovec list of header_i, payload_i, payload2_i (often empty: the kernel skips
// empty iovecs): the payload is never copied. A
// packet with priority p != 0 carries an IP_TOS (IPv4) or IPV6_TCLASS (IPv6) control message
// with p << 5. The packets, their headers and their payloads must stay where they are until
// Clear(): the msghdrs point into them.
class SendPlan {
 public:
  struct Info {
    uint32_t first = 0;     // index of the first packet in the Build() span
    uint32_t count = 0;     // packets (datagrams) in this message
    uint16_t gso_size = 0;  // segment size when this message carries UDP_SEGMENT, else 0
  };

  // Prepares the messages for `packets`. `socket_family` picks IP_TOS or IPV6_TCLASS.
  void Build(absl::Span<const OutPacket> packets, int socket_family, bool use_gso);
  // Appends one message per packet of GSO message `index` (used when the kernel refuses GSO)
  // and returns the [begin, end) range of the new messages. Never moves existing messages.
  std::pair<size_t, size_t> SplitIntoSingles(size_t index);
  void Clear();

  size_t size() const { return msgs_.size(); }
  mmsghdr* msgs() { return msgs_.data(); }
  msghdr* msg(size_t i) { return &msgs_[i].msg_hdr; }
  const Info& info(size_t i) const { return infos_[i].info; }
  // Packet `k` of the Build() span.
  const OutPacket& packet(size_t k) const { return packets_[k]; }

 private:
  // Control space for one UDP_SEGMENT (uint16_t) and one IP_TOS/IPV6_TCLASS (int) message.
  static constexpr size_t kControlSpace = CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(int));
  struct Entry {
    Info info;
    alignas(cmsghdr) unsigned char control[kControlSpace];
  };

  void Append(uint32_t first, uint32_t count, uint16_t gso_size, size_t iov_index);

  absl::Span<const OutPacket> packets_;
  int family_ = AF_INET;
  // Reserved for the worst case in Build() (every packet alone, plus every packet split
  // again), so pointers handed to the kernel stay valid while messages are appended.
  std::vector<mmsghdr> msgs_;
  std::vector<Entry> infos_;
  static constexpr size_t kIovsPerPacket = 3;  // header, payload, payload2
  std::vector<iovec> iovs_;
};

// Sender: sends a Flush()'s queued packets with sendmmsg, both backends' send path. One
// SendPlan per Flush(); sendmmsg stops at the first message that fails and reports how many
// went, and calling it again from that message yields the error itself, which is how each
// failure is attributed to its message. EAGAIN waits for POLLOUT within the Flush's
// SendRetryBudget, then retries; EIO/EINVAL on a GSO message before any GSO send has
// succeeded means this kernel or device refuses UDP_SEGMENT: GSO is switched off for good (one
// WARNING line) and that message is re-sent one datagram per packet. Every other error drops
// the message's datagrams into send_errors. send_calls counts messages (one per GSO run or
// datagram), not sendmmsg calls.
class Sender {
 public:
  Sender(int socket_family, bool enable_gso) : family_(socket_family), gso_enabled_(enable_gso) {}

  // Sends every packet of `queue` on `fd` and empties it; the packets' bytes may be reused
  // when it returns (the kernel has copied them).
  void Flush(int fd, std::vector<OutPacket>* queue, IoStats* stats);

 private:
  // Sends plan_ messages [begin, end).
  void SendRange(int fd, size_t begin, size_t end, SendRetryBudget* budget, IoStats* stats);

  const int family_;
  bool gso_enabled_;
  bool gso_verified_ = false;  // a GSO send has succeeded: later EINVALs are not about GSO
  SendPlan plan_;
};

// Splits one received buffer into datagrams and hands each to `fn`.
//
// `data` holds the `copied` bytes the kernel wrote; `full_length` is what the kernel had (more
// than `copied` when the buffer was too small); `gro_segment` is the UDP_GRO segment size, or
// 0 when the buffer holds one datagram. Every datagram that lies wholly inside `copied` is
// delivered; the rest are counted in stats->recv_truncated. Updates datagrams_received and
// recv_batches. Returns the number delivered.
int DeliverReceived(const Address& from, const uint8_t* data, size_t copied, size_t full_length,
                    int gro_segment, IoBackend::RecvFn fn, IoStats* stats);

// RecvBatch: one recvmmsg(MSG_DONTWAIT | MSG_TRUNC) into `slots` buffers of `slot_size` bytes,
// each buffer's datagrams handed on by DeliverReceived. MSG_TRUNC makes msg_len the datagram's
// real length, so one larger than its slot is counted (recv_truncated), not delivered cut
// short. Every call fills the slots from the first, so a call that reads one datagram touches
// one buffer: the memory cycled through is what a burst needs, not all of it. Both backends
// make one call per Poll(), even when it fills every slot: the loop then flushes what the
// batch produced (GRANTs above all) before it reads the next, because a sender waiting for a
// grant stalls while we keep reading (8 batches per Poll() made 1 MiB one-way transfers
// ~1.6x slower).
class RecvBatch {
 public:
  RecvBatch(uint32_t slots, uint32_t slot_size);
  RecvBatch(const RecvBatch&) = delete;
  RecvBatch& operator=(const RecvBatch&) = delete;

  // Reads what `fd` has, up to the slots (retrying on EINTR), and returns the datagrams
  // delivered to `fn`; after ReadOneNext(), the first call that finds anything reads one
  // receive buffer only (one datagram, or one GRO batch).
  int Receive(int fd, IoBackend::RecvFn fn, IoStats* stats);
  // IoBackend::ReadOneNext for the backends that receive through this batch.
  void ReadOneNext() { one_next_ = true; }

 private:
  static constexpr size_t kControlSpace = 64;  // one UDP_GRO message needs CMSG_SPACE(4) = 24
  struct alignas(cmsghdr) Control {
    unsigned char bytes[kControlSpace];
  };

  const uint32_t slot_size_;
  bool one_next_ = false;
  unsigned filled_ = 0;  // slots the last recvmmsg filled (their headers need restoring)
  std::unique_ptr<uint8_t[]> memory_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  std::vector<sockaddr_in6> names_;
  std::vector<Control> controls_;
};

// OwnerThread: remembers the loop thread of a backend. Claim() is called by the first
// Poll/Flush/Wait; IsOwner() backs the debug assertions in the other methods.
class OwnerThread {
 public:
  // Returns true the first time (on the thread that becomes the owner).
  bool Claim() {
    if (claimed_) return false;
    claimed_ = true;
    owner_ = std::this_thread::get_id();
    return true;
  }
  bool IsOwner() const { return !claimed_ || owner_ == std::this_thread::get_id(); }
  // The next Claim() takes ownership afresh (the backend is being handed to another thread).
  void Release() { claimed_ = false; }

 private:
  bool claimed_ = false;
  std::thread::id owner_;
};

}  // namespace homarpc::transport::io_internal

#endif  // HOMARPC_TRANSPORT_IO_BACKEND_INTERNAL_H_
