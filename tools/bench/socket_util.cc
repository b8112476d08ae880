// socket_util: loopback socket helpers (see socket_util.h).
#include "tools/bench/socket_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>

#include "transport/clock.h"
#include "transport/errors.h"

namespace homarpc::bench {
namespace {

using transport::ErrnoToStatus;

sockaddr_in LoopbackAddress(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

}  // namespace

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) close(fd_);
}

int64_t NowNanos() { return transport::MonotonicClock::Get()->NowNanos(); }

absl::StatusOr<ScopedFd> BindLoopback(int type) {
  ScopedFd fd(socket(AF_INET, type | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return ErrnoToStatus(errno, "socket");
  const sockaddr_in address = LoopbackAddress(0);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return ErrnoToStatus(errno, "bind 127.0.0.1:0");
  }
  return fd;
}

absl::StatusOr<uint16_t> LocalPort(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return ErrnoToStatus(errno, "getsockname");
  }
  return ntohs(address.sin_port);
}

absl::StatusOr<ScopedFd> ConnectLoopback(int type, uint16_t port, int buffer_bytes) {
  ScopedFd fd(socket(AF_INET, type | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return ErrnoToStatus(errno, "socket");
  if (buffer_bytes > 0) SetSocketBuffers(fd.get(), buffer_bytes);
  const sockaddr_in address = LoopbackAddress(port);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return ErrnoToStatus(errno, "connect 127.0.0.1");
  }
  return fd;
}

void SetSocketBuffers(int fd, int bytes) {
  // Failures only leave the default sizes in place; the run still measures something valid.
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  }
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
}

absl::Status SetReceiveTimeout(int fd, int64_t millis) {
  timeval timeout{};
  timeout.tv_sec = millis / 1000;
  timeout.tv_usec = (millis % 1000) * 1000;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0) {
    return ErrnoToStatus(errno, "setsockopt SO_RCVTIMEO");
  }
  return absl::OkStatus();
}

}  // namespace homarpc::bench
