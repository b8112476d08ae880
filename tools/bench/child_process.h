// child_process: the fork/pipe plumbing homarpc-bench's harnesses share — harness.cc (one
// server + one client process per point) and load_harness.cc (one server + N client processes
// per load point).
//
// ForkChild forks a child that dies with its parent; a Child is killed and reaped unless it
// was reaped already; Pipe owns both ends of a pipe;
// WriteAll/ReadFromChild move bytes with a deadline on the parent's side; PutU64/PutString and
// ReportReader are the host-byte-order encoding of the reports children send back (both ends
// are this binary on this machine); SharedControl + PipeServerEnv are the server child's side
// of the stop flag and port announcement; EnterNetns moves a freshly forked child into a
// testbed host's network namespace.
//
// Internal to tools/bench (not a public contract of homarpc-bench). Used by the one thread of
// a parent that has no other threads, and by the children it forks.
#ifndef HOMARPC_TOOLS_BENCH_CHILD_PROCESS_H_
#define HOMARPC_TOOLS_BENCH_CHILD_PROCESS_H_

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tools/bench/system.h"
#include "transport/clock.h"
#include "transport/errors.h"

namespace homarpc::bench::child_process {

// ---- Forking ----

// fork() for the harnesses. Flushes stdio first, so text buffered in the parent is not printed
// twice. In the child, asks the kernel to SIGKILL it when the parent dies (PR_SET_PDEATHSIG):
// a crashed or killed homarpc-bench leaves no server or client behind, holding ports and CPUs.
// A parent that died between fork() and the prctl() would not trigger the signal, so the child
// then exits at once (its parent pid is no longer the one from before the fork). Returns what
// fork() returns.
inline pid_t ForkChild() {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
  }
  return pid;
}

// ---- A child process that is killed and reaped unless it was reaped already. ----

class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Reap();
    }
  }

  // The child's pid; -1 once reaped.
  pid_t pid() const { return pid_; }

  // Waits for the child to exit; returns a description of how it ended.
  std::string Reap() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
    return absl::StrCat("exit status ", WEXITSTATUS(status));
  }

 private:
  pid_t pid_;
};

// ---- Pipes ----

class Pipe {
 public:
  Pipe() {
    if (pipe(fds_) != 0) fds_[0] = fds_[1] = -1;
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  bool ok() const { return fds_[0] >= 0; }
  int read_fd() const { return fds_[0]; }
  int write_fd() const { return fds_[1]; }
  void CloseRead() { CloseFd(fds_[0]); }
  void CloseWrite() { CloseFd(fds_[1]); }

 private:
  static void CloseFd(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  int fds_[2];
};

inline void WriteAll(int fd, const void* data, size_t length) {
  const char* bytes = static_cast<const char*>(data);
  while (length > 0) {
    ssize_t n = write(fd, bytes, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone; nothing useful left to do
    bytes += n;
    length -= static_cast<size_t>(n);
  }
}

// Appends bytes from `fd` to `out` until `want` bytes were read (or EOF, when `want` is
// kUntilEof). Fails with DEADLINE_EXCEEDED at `deadline_ns` (MonotonicClock), INTERNAL on an
// early EOF.
inline constexpr size_t kUntilEof = ~size_t{0};
inline absl::Status ReadFromChild(int fd, size_t want, int64_t deadline_ns, std::string* out) {
  char buffer[1 << 16];
  while (out->size() < want) {
    const int64_t left_ns = deadline_ns - transport::MonotonicClock::Get()->NowNanos();
    if (left_ns <= 0) return absl::DeadlineExceededError("child process overran its time");
    pollfd pfd{fd, POLLIN, 0};
    const int ready =
        poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ns / 1000000 + 1, 1000)));
    if (ready < 0 && errno != EINTR) {
      return transport::ErrnoToStatus(errno, "poll on child pipe");
    }
    if (ready <= 0) continue;
    const size_t chunk = std::min(sizeof(buffer), want - out->size());
    const ssize_t n = read(fd, buffer, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return transport::ErrnoToStatus(errno, "read from child pipe");
    }
    if (n == 0) {
      if (want == kUntilEof) return absl::OkStatus();
      return absl::InternalError("child process closed its pipe early");
    }
    out->append(buffer, static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Forks the server child: it runs `server_main(write_fd)` (which must not return) with the
// write end of `pipe`; the parent keeps the read end. Returns the child's pid.
template <typename ServerMain>
absl::StatusOr<pid_t> ForkServer(Pipe& pipe, ServerMain server_main) {
  if (!pipe.ok()) return transport::ErrnoToStatus(errno, "pipe");
  const pid_t pid = ForkChild();
  if (pid < 0) return transport::ErrnoToStatus(errno, "fork for the server");
  if (pid == 0) {
    pipe.CloseRead();
    server_main(pipe.write_fd());
    _exit(1);  // not reached: the server's main exits
  }
  pipe.CloseWrite();
  return pid;
}

// The port a server child announces on its pipe (PipeServerEnv::Ready) by `deadline_ns`: 0
// when it failed before listening (its report then says why). Errors are prefixed "server
// start-up".
inline absl::StatusOr<uint16_t> ReadServerPort(int fd, int64_t deadline_ns) {
  std::string bytes;
  absl::Status read = ReadFromChild(fd, sizeof(uint16_t), deadline_ns, &bytes);
  if (!read.ok()) {
    return absl::Status(read.code(), absl::StrCat("server start-up: ", read.message()));
  }
  uint16_t port = 0;
  std::memcpy(&port, bytes.data(), sizeof(port));
  return port;
}

// ---- Report encoding (host byte order) ----

inline void PutU64(std::string* out, uint64_t value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}
inline void PutString(std::string* out, absl::string_view text) {
  PutU64(out, text.size());
  out->append(text.data(), text.size());
}

// Reads what PutU64/PutString wrote; `ok` turns false on a short or inconsistent input.
class ReportReader {
 public:
  explicit ReportReader(absl::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  uint64_t U64() {
    uint64_t value = 0;
    if (in_.size() < sizeof(value)) {
      ok_ = false;
      return 0;
    }
    std::memcpy(&value, in_.data(), sizeof(value));
    in_.remove_prefix(sizeof(value));
    return value;
  }
  std::string Bytes(uint64_t length) { return std::string(Raw(length)); }
  std::string String() { return Bytes(U64()); }
  // The next `length` bytes, without a copy (a view into the input); empty and !ok() when
  // fewer are left.
  absl::string_view Raw(uint64_t length) {
    if (in_.size() < length) {
      ok_ = false;
      return absl::string_view();
    }
    absl::string_view out = in_.substr(0, length);
    in_.remove_prefix(length);
    return out;
  }

 private:
  absl::string_view in_;
  bool ok_ = true;
};

// ---- The server child ----

// The stop flag, in a page shared by the parent and the server child. A server thread that has
// nothing else to do sleeps on it as a futex and wakes once, at the stop (a thread that looked
// every few milliseconds took a core from a spinning server loop each time, for both systems).
// The futex is a shared one (not FUTEX_PRIVATE_FLAG, nor std::atomic::wait, which uses private
// futexes): the waiter and the waker are different processes mapping the same page.
struct SharedControl {
  std::atomic<int> stop{0};
  static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free);

  // The parent: sets the flag, then wakes every waiter.
  void RequestStop() {
    stop.store(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<int*>(&stop), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
  // The server child: returns once the flag is set. The kernel compares the flag with 0 under
  // the futex's lock, so a RequestStop() between the load and the sleep is not missed; a signal
  // or a spurious wake-up only makes it look again.
  void WaitForStop() const {
    int* const word = const_cast<int*>(reinterpret_cast<const int*>(&stop));
    while (stop.load(std::memory_order_seq_cst) == 0) {
      syscall(SYS_futex, word, FUTEX_WAIT, 0, nullptr, nullptr, 0);
    }
  }
};

// The parent's mapping of that page: mapped before the fork (the child inherits it), unmapped
// when the parent's point is over. Move-only.
class SharedControlPage {
 public:
  static absl::StatusOr<SharedControlPage> Map() {
    void* page = mmap(nullptr, sizeof(SharedControl), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return transport::ErrnoToStatus(errno, "mmap for the stop flag");
    return SharedControlPage(new (page) SharedControl);
  }
  SharedControlPage(SharedControlPage&& other) noexcept
      : control_(std::exchange(other.control_, nullptr)) {}
  SharedControlPage& operator=(SharedControlPage&&) = delete;
  ~SharedControlPage() {
    if (control_ != nullptr) munmap(control_, sizeof(SharedControl));
  }
  SharedControl* get() const { return control_; }

 private:
  explicit SharedControlPage(SharedControl* control) : control_(control) {}
  SharedControl* control_;
};

class PipeServerEnv final : public ServerEnv {
 public:
  PipeServerEnv(int fd, const SharedControl* control) : fd_(fd), control_(control) {}

  void Ready(uint16_t port) override {
    if (ready_sent_) return;
    ready_sent_ = true;
    WriteAll(fd_, &port, sizeof(port));
  }
  bool ShouldStop() const override { return control_->stop.load(std::memory_order_relaxed) != 0; }
  void WaitForStop() const override { control_->WaitForStop(); }
  void AddExtra(Extra extra) override { extras_.push_back(std::move(extra)); }

  bool ready_sent() const { return ready_sent_; }
  std::vector<Extra>& extras() { return extras_; }

 private:
  const int fd_;
  const SharedControl* const control_;
  bool ready_sent_ = false;
  std::vector<Extra> extras_;
};

// Moves this (single-threaded, just forked) process into network namespace `name`, as
// `ip netns exec` does; sockets and threads created afterwards live there. "" = stay.
inline absl::Status EnterNetns(const std::string& name) {
  if (name.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat("/var/run/netns/", name);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return transport::ErrnoToStatus(errno, absl::StrCat("open ", path));
  const int rc = setns(fd, CLONE_NEWNET);
  const int err = errno;
  close(fd);
  if (rc != 0) return transport::ErrnoToStatus(err, absl::StrCat("setns into ", name));
  return absl::OkStatus();
}

}  // namespace homarpc::bench::child_process

#endif  // HOMARPC_TOOLS_BENCH_CHILD_PROCESS_H_
