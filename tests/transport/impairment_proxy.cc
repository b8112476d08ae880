// ImpairmentProxy: the relay thread, its fault decisions and its queues. See the header for
// the contract; this file is test support, owned by the test that creates the proxy.
//
// DESIGN NOTES
//
// One thread, ppoll(2) over: an eventfd (Stop() wakes it), the front socket (clients -> proxy)
// and one connected upstream socket per client (proxy <-> server). ppoll rather than epoll
// because its timeout is in nanoseconds: delays and reorder holds are tens of microseconds to
// milliseconds, and epoll_wait rounds up to whole milliseconds. The fd set is small (a few
// clients) and grows only when a client appears. Each ready socket gives at most kReadBatch
// datagrams per pass, read with one recvmmsg, so one busy client cannot starve the others or
// the timers. Throughput matters more than it seems: Homa has no congestion control for a
// slow middlebox, so a relay that falls behind its senders sees its socket buffers overflow
// and the retransmissions that follow make it fall further behind.
//
// Determinism. Each direction has its own std::mt19937_64 (not absl::random: its streams may
// change between releases, and a seed must reproduce across library versions, as in
// transport/fabric.h). Every datagram draws exactly seven values whether or not
// they end up used, so the k-th datagram's fate does not depend on what happened to the k-1
// before it. Uniform doubles are made by hand from the top 53 bits, because
// std::uniform_real_distribution's output is not pinned by the standard across libraries.
//
// Queues. Held (reorder) datagrams live in a deque scanned by path; there are only ever a few
// (each is released by the next datagram on its path), so a scan beats an index. Delayed
// datagrams live in a min-heap by (due time, arrival sequence); the sequence keeps equal due
// times in arrival order. Both count against one bound (max_queued_packets); past it a
// datagram is dropped, the way a full switch buffer behaves, rather than sent early (sending
// early would silently turn a requested fault into no fault).
//
// Rejected: a thread per direction (two threads would need locks around the per-client table
// and would make the interleaving, and so the fault stream, less reproducible); io_uring (the
// proxy must not share code or failure modes with the backends it is used to test).
//
// Locking: mu_ guards only the stats snapshot that other threads read. The relay thread counts
// into a private delta and publishes it under mu_ once per batch, so each datagram's
// effects (received and forwarded, or received and dropped) appear together. Nothing else is
// shared, so there is no lock order to keep.
#include "tests/transport/impairment_proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "transport/errors.h"
#include "transport/log.h"

namespace homarpc::transport::testing {
namespace {

// Largest UDP payload over IPv4 is 65507 and over IPv6 65527; one buffer of 64 KiB takes
// either (MSG_TRUNC reports anything longer, which only jumbograms could be).
constexpr size_t kMaxDatagram = 65536;
constexpr int kReadBatch = 64;
// The homarpc magic sits at bytes 14..17 of every packet's common header (wire.h: "at offset
// 14 of the common header"). Damaging one of them is the only corruption the proxy makes.
constexpr size_t kMagicOffset = 14;
constexpr size_t kMagicSize = 4;
// Smallest delay, so a delayed datagram always goes out on a later poll pass than one that
// arrives with it.
constexpr int64_t kMinDelayNanos = 1 * kNanosPerMicro;

enum Direction : int { kToServer = 0, kToClient = 1 };

bool ValidRate(double r) { return std::isfinite(r) && r >= 0 && r <= 1; }

void SetBuffer(int fd, int bytes) {
  // Forcing needs CAP_NET_ADMIN; otherwise the kernel clamps to rmem_max/wmem_max, which is
  // still better than the default.
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  }
}

// A non-blocking UDP socket bound to `bind`, with large buffers.
absl::StatusOr<int> OpenSocket(const Address& bind, int buffer_bytes) {
  int fd = socket(bind.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "proxy socket");
  SetBuffer(fd, buffer_bytes);
  if (::bind(fd, bind.sockaddr_ptr(), bind.sockaddr_len()) != 0) {
    absl::Status s = ErrnoToStatus(errno, absl::StrCat("proxy bind ", bind.ToString()));
    close(fd);
    return s;
  }
  return fd;
}

Address LocalAddress(int fd) {
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return Address();
  return Address::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

}  // namespace

class ImpairmentProxy::Relay {
 public:
  Relay(ImpairmentProxy* proxy, int front_fd)
      : proxy_(proxy), options_(proxy->options_), front_fd_(front_fd) {
    for (auto& b : bufs_) b.resize(kMaxDatagram);
    // Distinct, fixed streams per direction (the constant is the 64-bit golden ratio).
    rng_[kToServer].seed(options_.seed);
    rng_[kToClient].seed(options_.seed ^ 0x9E3779B97F4A7C15ull);
    pfds_.push_back({proxy->wake_fd_, POLLIN, 0});
    pfds_.push_back({front_fd_, POLLIN, 0});
  }

  ~Relay() {
    close(front_fd_);
    for (const Upstream& u : upstreams_) close(u.fd);
  }

  // The thread's body: until Stop().
  void Run() {
    while (!proxy_->stop_.load(std::memory_order_acquire)) {
      ReleaseDue(MonotonicClock::Get()->NowNanos());
      const int64_t next = NextDue();
      timespec ts;
      timespec* timeout = nullptr;
      if (next != INT64_MAX) {
        const int64_t wait = std::max<int64_t>(0, next - MonotonicClock::Get()->NowNanos());
        ts.tv_sec = wait / kNanosPerSecond;
        ts.tv_nsec = wait % kNanosPerSecond;
        timeout = &ts;
      }
      for (pollfd& p : pfds_) p.revents = 0;
      const int n = ppoll(pfds_.data(), pfds_.size(), timeout, nullptr);
      if (n < 0) {
        if (errno == EINTR) continue;
        HOMARPC_LOG(ERROR) << "impairment proxy: ppoll: " << ErrnoToStatus(errno, "ppoll");
        return;
      }
      if (n == 0) continue;
      if (pfds_[0].revents != 0) {
        uint64_t v;
        (void)!read(proxy_->wake_fd_, &v, sizeof(v));
      }
      if (pfds_[1].revents != 0) DrainFront();
      // DrainFront may have appended clients (revents 0); index, do not hold references.
      for (size_t i = 2; i < pfds_.size(); ++i) {
        if (pfds_[i].revents != 0) DrainUpstream(static_cast<uint32_t>(i - 2));
      }
    }
    Publish();
    absl::MutexLock lock(&proxy_->mu_);
    proxy_->stats_.discarded_at_stop += held_.size() + delayed_.size();
    proxy_->stats_.queued = 0;
  }

 private:
  struct Upstream {
    int fd;
    Address client;
  };
  // A datagram waiting in a queue.
  struct Pending {
    int64_t due = 0;
    uint64_t seq = 0;  // arrival order, to keep the heap stable
    Direction dir = kToServer;
    uint32_t client = 0;
    int copies = 1;
    std::vector<uint8_t> bytes;
  };
  struct Later {  // heap order: earliest due first, then earliest arrival
    bool operator()(const Pending& a, const Pending& b) const {
      return a.due != b.due ? a.due > b.due : a.seq > b.seq;
    }
  };
  struct Decision {
    bool drop, corrupt, duplicate, reorder, delay;
    uint64_t delay_draw, corrupt_draw;
  };

  // Counting. The relay thread counts into delta_ and publishes it under the lock after each
  // batch of whole datagrams (and each timer pass), so a reader never sees a datagram
  // half-counted (received but not yet forwarded or dropped): tests wait on stats and then
  // rely on them balancing.
  ImpairmentCounters& Counters(Direction dir) {
    return dir == kToServer ? delta_.to_server : delta_.to_client;
  }
  template <typename Fn>
  void Count(Direction dir, Fn fn) {
    fn(Counters(dir));
  }
  void Publish() {
    absl::MutexLock lock(&proxy_->mu_);
    ImpairmentStats& s = proxy_->stats_;
    for (int d = 0; d < 2; ++d) {
      ImpairmentCounters& to = d == kToServer ? s.to_server : s.to_client;
      const ImpairmentCounters& from = d == kToServer ? delta_.to_server : delta_.to_client;
      to.received += from.received;
      to.forwarded += from.forwarded;
      to.dropped += from.dropped;
      to.corrupted += from.corrupted;
      to.duplicated += from.duplicated;
      to.reordered += from.reordered;
      to.delayed += from.delayed;
      to.queue_overflows += from.queue_overflows;
      to.send_errors += from.send_errors;
      to.truncated += from.truncated;
    }
    s.clients += delta_.clients;
    s.clients_refused += delta_.clients_refused;
    s.queued = held_.size() + delayed_.size();
    delta_ = ImpairmentStats();
  }

  // Exactly seven draws, always, in this order (see DESIGN NOTES).
  Decision Decide(Direction dir) {
    std::mt19937_64& rng = rng_[dir];
    auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
    Decision d;
    d.drop = uniform() < options_.drop_rate;
    d.corrupt = uniform() < options_.corrupt_rate;
    d.duplicate = uniform() < options_.duplicate_rate;
    d.reorder = uniform() < options_.reorder_rate;
    d.delay = uniform() < options_.delay_rate;
    d.delay_draw = rng();
    d.corrupt_draw = rng();
    return d;
  }

  static void Corrupt(uint64_t draw, uint8_t* data, size_t len) {
    if (len == 0) return;
    const uint8_t x = static_cast<uint8_t>(1 + (draw >> 8) % 255);  // never 0
    const size_t pos = len >= kMagicOffset + kMagicSize ? kMagicOffset + draw % kMagicSize
                                                        : draw % len;
    data[pos] ^= x;
  }

  // Reads up to kReadBatch datagrams from `fd` with one recvmmsg; returns how many (0 when
  // nothing was waiting, or after an error report such as ECONNREFUSED, which the read clears).
  int ReadBatch(int fd) {
    for (int i = 0; i < kReadBatch; ++i) {
      iovs_[i] = {bufs_[i].data(), bufs_[i].size()};
      msgs_[i] = {};
      msgs_[i].msg_hdr.msg_iov = &iovs_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
      msgs_[i].msg_hdr.msg_name = &names_[i];
      msgs_[i].msg_hdr.msg_namelen = sizeof(names_[i]);
    }
    const int n = recvmmsg(fd, msgs_, kReadBatch, MSG_DONTWAIT, nullptr);
    return n < 0 ? 0 : n;
  }
  // The real length of datagram i of the last batch (more than its buffer when truncated).
  size_t LengthOf(int i) const {
    return (msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) ? kMaxDatagram + 1 : msgs_[i].msg_len;
  }

  void DrainFront() {
    const int n = ReadBatch(front_fd_);
    for (int i = 0; i < n; ++i) {
      const Address from = Address::FromSockaddr(
          reinterpret_cast<const sockaddr*>(&names_[i]), msgs_[i].msg_hdr.msg_namelen);
      auto it = clients_.find(from);
      if (it == clients_.end()) {
        if (!AddClient(from)) continue;
        it = clients_.find(from);
      }
      Handle(kToServer, it->second, bufs_[i].data(), LengthOf(i));
    }
    Publish();
  }

  void DrainUpstream(uint32_t client) {
    // Connected to the server: only its datagrams arrive here.
    const int n = ReadBatch(upstreams_[client].fd);
    for (int i = 0; i < n; ++i) Handle(kToClient, client, bufs_[i].data(), LengthOf(i));
    Publish();
  }

  bool AddClient(const Address& from) {
    if (!from.is_set() || upstreams_.size() >= options_.max_clients) {
      ++delta_.clients_refused;
      return false;
    }
    const Address bind = options_.server.is_v6() ? Address::Loopback6(0) : Address::Loopback4(0);
    absl::StatusOr<int> fd = OpenSocket(bind, options_.socket_buffer_bytes);
    if (fd.ok() && connect(*fd, options_.server.sockaddr_ptr(), options_.server.sockaddr_len()) !=
                       0) {
      fd = ErrnoToStatus(errno, "proxy connect");
    }
    if (!fd.ok()) {
      HOMARPC_LOG(ERROR) << "impairment proxy: no upstream for " << from.ToString() << ": "
                         << fd.status();
      ++delta_.clients_refused;
      return false;
    }
    clients_.emplace(from, static_cast<uint32_t>(upstreams_.size()));
    upstreams_.push_back({*fd, from});
    pfds_.push_back({*fd, POLLIN, 0});
    ++delta_.clients;  // published with the client's first datagram
    return true;
  }

  // One datagram of `len` bytes at `data` (a receive buffer, ours to damage); `len` exceeds
  // kMaxDatagram when the datagram was truncated.
  void Handle(Direction dir, uint32_t client, uint8_t* data, size_t len) {
    const Decision d = Decide(dir);
    if (len > kMaxDatagram) {
      Count(dir, [](ImpairmentCounters& c) {
        ++c.received;
        ++c.truncated;
      });
      return;
    }
    if (d.drop) {
      Count(dir, [](ImpairmentCounters& c) {
        ++c.received;
        ++c.dropped;
      });
      return;
    }
    const bool corrupt = d.corrupt && len > 0;
    if (corrupt) Corrupt(d.corrupt_draw, data, len);
    const int copies = d.duplicate ? 2 : 1;
    Count(dir, [&](ImpairmentCounters& c) {
      ++c.received;
      c.corrupted += corrupt;
      c.duplicated += d.duplicate;
    });
    if (d.reorder || d.delay) {
      if (held_.size() + delayed_.size() >= options_.max_queued_packets) {
        Count(dir, [](ImpairmentCounters& c) { ++c.queue_overflows; });
        return;
      }
      const int64_t now = MonotonicClock::Get()->NowNanos();
      Pending p;
      p.seq = next_seq_++;
      p.dir = dir;
      p.client = client;
      p.copies = copies;
      p.bytes.assign(data, data + len);
      if (d.reorder) {
        p.due = now + options_.reorder_hold_nanos;
        held_.push_back(std::move(p));
        Count(dir, [](ImpairmentCounters& c) { ++c.reordered; });
      } else {
        const int64_t span = std::max<int64_t>(options_.max_delay_nanos - kMinDelayNanos, 0);
        p.due = now + kMinDelayNanos +
                static_cast<int64_t>(d.delay_draw % static_cast<uint64_t>(span + 1));
        delayed_.push_back(std::move(p));
        std::push_heap(delayed_.begin(), delayed_.end(), Later());
        Count(dir, [](ImpairmentCounters& c) { ++c.delayed; });
      }
      return;
    }
    Transmit(dir, client, data, len, copies);
    ReleaseHeld(dir, client);
  }

  // Sends `copies` copies toward the datagram's destination.
  void Transmit(Direction dir, uint32_t client, const uint8_t* data, size_t len, int copies) {
    const Upstream& u = upstreams_[client];
    int sent = 0, failed = 0;
    for (int i = 0; i < copies; ++i) {
      const ssize_t n =
          dir == kToServer
              ? send(u.fd, data, len, 0)
              : sendto(front_fd_, data, len, 0, u.client.sockaddr_ptr(), u.client.sockaddr_len());
      if (n == static_cast<ssize_t>(len)) {
        ++sent;
      } else {
        ++failed;
      }
    }
    Count(dir, [&](ImpairmentCounters& c) {
      c.forwarded += sent;
      c.send_errors += failed;
    });
  }

  // Lets every datagram held on the path go out, in the order they were held: something
  // later on the path has just gone out ahead of them.
  void ReleaseHeld(Direction dir, uint32_t client) {
    if (held_.empty()) return;
    std::deque<Pending> keep;
    for (Pending& p : held_) {
      if (p.dir == dir && p.client == client) {
        Transmit(p.dir, p.client, p.bytes.data(), p.bytes.size(), p.copies);
      } else {
        keep.push_back(std::move(p));
      }
    }
    held_.swap(keep);
  }

  // Sends what is due: delayed datagrams (each may release datagrams held on its path), and
  // held ones whose hold expired with nothing behind them.
  void ReleaseDue(int64_t now) {
    bool changed = false;
    while (!delayed_.empty() && delayed_.front().due <= now) {
      std::pop_heap(delayed_.begin(), delayed_.end(), Later());
      Pending p = std::move(delayed_.back());
      delayed_.pop_back();
      Transmit(p.dir, p.client, p.bytes.data(), p.bytes.size(), p.copies);
      ReleaseHeld(p.dir, p.client);
      changed = true;
    }
    while (!held_.empty() && held_.front().due <= now) {  // held_ is in due order
      Pending p = std::move(held_.front());
      held_.pop_front();
      Transmit(p.dir, p.client, p.bytes.data(), p.bytes.size(), p.copies);
      changed = true;
    }
    if (changed) Publish();
  }

  int64_t NextDue() const {
    int64_t next = INT64_MAX;
    if (!delayed_.empty()) next = delayed_.front().due;
    if (!held_.empty()) next = std::min(next, held_.front().due);
    return next;
  }

  ImpairmentProxy* const proxy_;
  const ImpairmentOptions& options_;
  const int front_fd_;
  // recvmmsg state for one batch; a batch is handled before the next read reuses it.
  std::vector<uint8_t> bufs_[kReadBatch];
  iovec iovs_[kReadBatch];
  mmsghdr msgs_[kReadBatch];
  sockaddr_storage names_[kReadBatch];
  std::mt19937_64 rng_[2];
  std::vector<pollfd> pfds_;  // [0] wake eventfd, [1] front, [2 + i] upstreams_[i]
  std::vector<Upstream> upstreams_;
  absl::flat_hash_map<Address, uint32_t> clients_;  // client address -> upstreams_ index
  std::deque<Pending> held_;       // reorder holds, in arrival (= due) order
  std::vector<Pending> delayed_;   // min-heap by Later
  uint64_t next_seq_ = 0;
  ImpairmentStats delta_;  // counted, not yet published (see Publish)
};

ImpairmentProxy::ImpairmentProxy(const ImpairmentOptions& options) : options_(options) {}

ImpairmentProxy::~ImpairmentProxy() { Stop(); }

absl::Status ImpairmentProxy::Start() {
  if (started_) return absl::FailedPreconditionError("impairment proxy already started");
  const ImpairmentOptions& o = options_;
  for (double r : {o.drop_rate, o.corrupt_rate, o.duplicate_rate, o.reorder_rate, o.delay_rate}) {
    if (!ValidRate(r)) return absl::InvalidArgumentError(absl::StrCat("bad rate ", r));
  }
  if (!o.server.is_set() || !o.listen.is_set()) {
    return absl::InvalidArgumentError("server and listen addresses must be set");
  }
  if (o.max_queued_packets == 0 || o.max_clients == 0 || o.reorder_hold_nanos < 0 ||
      o.max_delay_nanos < kMinDelayNanos) {
    return absl::InvalidArgumentError("zero bound or negative time in ImpairmentOptions");
  }
  absl::StatusOr<int> front = OpenSocket(o.listen, o.socket_buffer_bytes);
  if (!front.ok()) return front.status();
  address_ = LocalAddress(*front);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    absl::Status s = ErrnoToStatus(errno, "proxy eventfd");
    close(*front);
    return s;
  }
  started_ = true;
  relay_ = std::make_unique<Relay>(this, *front);
  thread_ = std::thread([this] { relay_->Run(); });
  return absl::OkStatus();
}

void ImpairmentProxy::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  relay_.reset();  // closes the sockets
  close(wake_fd_);
  wake_fd_ = -1;
}

ImpairmentStats ImpairmentProxy::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool ImpairmentProxy::WaitFor(const std::function<bool(const ImpairmentStats&)>& done,
                              absl::Duration timeout) const {
  auto holds = [&] { return done(stats_); };  // runs with mu_ held
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
}

}  // namespace homarpc::transport::testing
