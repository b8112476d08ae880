// socket_util: the few loopback socket helpers the raw floors share.
//
// Thin wrappers over the socket API that turn errno into Status (via transport/errors.h, the
// project's one errno mapping) and close file descriptors on every path. Loopback only:
// nothing here can address another host. Any thread; an fd belongs to whoever holds its
// ScopedFd.
#ifndef HOMARPC_TOOLS_BENCH_SOCKET_UTIL_H_
#define HOMARPC_TOOLS_BENCH_SOCKET_UTIL_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace homarpc::bench {

// Owns a file descriptor and closes it when destroyed. Move-only.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();

  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Now, in nanoseconds on CLOCK_MONOTONIC.
int64_t NowNanos();

// A new IPv4 socket of `type` (SOCK_DGRAM or SOCK_STREAM) bound to 127.0.0.1:0.
absl::StatusOr<ScopedFd> BindLoopback(int type);
// The port the kernel picked for a bound socket.
absl::StatusOr<uint16_t> LocalPort(int fd);
// A new IPv4 socket of `type`, connected to 127.0.0.1:`port`. When `buffer_bytes` > 0 the
// socket buffers are set (SetSocketBuffers) before connecting, so TCP can scale its window.
absl::StatusOr<ScopedFd> ConnectLoopback(int type, uint16_t port, int buffer_bytes = 0);

// Sets SO_SNDBUF and SO_RCVBUF to `bytes`, using the *FORCE variants when allowed (root) so
// the sysctl caps do not apply, and the plain ones otherwise.
void SetSocketBuffers(int fd, int bytes);
// Makes blocking receives (and accept) on `fd` give up with EAGAIN after `millis`.
absl::Status SetReceiveTimeout(int fd, int64_t millis);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_SOCKET_UTIL_H_
