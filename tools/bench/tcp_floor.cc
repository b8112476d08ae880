// tcp_floor: bulk request over loopback TCP, answered by a small ack (transport-echo) or by an
// echo of the same size (unary); see tcp_floor.h.
//
// DESIGN NOTES
// Threads: the server's main thread accepts exactly `concurrency` connections and starts one
// thread per connection; the client starts one thread per connection. Nothing is shared
// between connection threads except, on the client, an atomic count of claimed iterations
// (so the total stays at --iterations however the threads interleave) and a latch that ends
// everyone's warmup before anyone measures. Each client thread measures its own interval; the
// run's elapsed time is from the earliest start to the latest end.
//
// Stopping: server reads use a kStopCheckMillis receive timeout so a connection thread
// notices ServerEnv::ShouldStop(); normally it ends earlier, when the client closes its
// connection and recv returns 0.
#include "tools/bench/tcp_floor.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <latch>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/bench/socket_util.h"
#include "transport/errors.h"

namespace homarpc::bench {
namespace {

using transport::ErrnoToStatus;

constexpr int kSocketBufferBytes = 8 << 20;

absl::Status SetNoDelay(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return ErrnoToStatus(errno, "setsockopt TCP_NODELAY");
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const char* data, size_t length) {
  while (length > 0) {
    const ssize_t n = send(fd, data, length, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "tcp send");
    }
    data += n;
    length -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads exactly `length` bytes. Returns CANCELLED when the peer closed the connection before
// the first byte or `env` (when given) says stop; a receive timeout just retries.
absl::Status ReadExact(int fd, char* data, size_t length, const ServerEnv* env) {
  size_t got = 0;
  while (got < length) {
    const ssize_t n = recv(fd, data + got, length - got, 0);
    if (n == 0) {
      if (got == 0) return absl::CancelledError("connection closed");
      return absl::UnavailableError("connection closed in the middle of a message");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        if (env != nullptr && env->ShouldStop()) return absl::CancelledError("stopped");
        continue;
      }
      return ErrnoToStatus(errno, "tcp recv");
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ServeConnection(ScopedFd fd, const Point& point, const ServerEnv& env) {
  std::vector<char> request(point.request_bytes);
  std::vector<char> response(point.response_bytes, 'r');
  while (true) {
    absl::Status read = ReadExact(fd.get(), request.data(), request.size(), &env);
    if (absl::IsCancelled(read)) return absl::OkStatus();  // client done, or told to stop
    if (!read.ok()) return read;
    absl::Status written = WriteAll(fd.get(), response.data(), response.size());
    if (!written.ok()) return written;
  }
}

// What one client connection thread measured.
struct ConnectionRun {
  absl::Status status;
  std::vector<int64_t> latencies_ns;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

void RunConnection(int fd, const Point& point, uint64_t warmup, std::latch& warmed,
                   std::atomic<uint64_t>& claimed, ConnectionRun& run) {
  std::vector<char> request(point.request_bytes, 'q');
  std::vector<char> response(point.response_bytes);
  auto round_trip = [&]() -> absl::Status {
    absl::Status written = WriteAll(fd, request.data(), request.size());
    if (!written.ok()) return written;
    return ReadExact(fd, response.data(), response.size(), nullptr);
  };
  for (uint64_t i = 0; i < warmup && run.status.ok(); ++i) run.status = round_trip();
  warmed.arrive_and_wait();
  if (!run.status.ok()) return;
  run.start_ns = NowNanos();
  run.end_ns = run.start_ns;
  while (run.end_ns - run.start_ns < point.duration_ns &&
         claimed.fetch_add(1, std::memory_order_relaxed) < point.iterations) {
    const int64_t sent_ns = NowNanos();
    run.status = round_trip();
    run.end_ns = NowNanos();
    if (!run.status.ok()) return;
    run.latencies_ns.push_back(run.end_ns - sent_ns);
  }
}

}  // namespace

std::string TcpFloor::SkipReason(const Point& point) const {
  if (point.settings.server_host != "127.0.0.1") return "the floors run on loopback only";
  if (point.request_bytes < kMinTcpFloorBytes) {
    return absl::StrCat("measures bulk transfer from ", kMinTcpFloorBytes,
                        " bytes up; the UDP floors cover smaller messages");
  }
  return "";
}

absl::Status TcpFloor::Serve(const Point& point, ServerEnv& env) const {
  absl::StatusOr<ScopedFd> listener = BindLoopback(SOCK_STREAM);
  if (!listener.ok()) return listener.status();
  // Accepted sockets inherit these, including the window scale they allow.
  SetSocketBuffers(listener->get(), kSocketBufferBytes);
  if (listen(listener->get(), 128) != 0) return ErrnoToStatus(errno, "listen");
  absl::StatusOr<uint16_t> port = LocalPort(listener->get());
  if (!port.ok()) return port.status();
  env.Ready(*port);

  const size_t connections = static_cast<size_t>(point.concurrency);
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(connections);
  absl::Status status;
  while (threads.size() < connections && !env.ShouldStop()) {
    pollfd pfd{listener->get(), POLLIN, 0};
    const int ready = poll(&pfd, 1, kStopCheckMillis);
    if (ready < 0 && errno != EINTR) {
      status = ErrnoToStatus(errno, "poll on listener");
      break;
    }
    if (ready <= 0) continue;
    ScopedFd connection(accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (connection.get() < 0) {
      status = ErrnoToStatus(errno, "accept");
      break;
    }
    status = SetNoDelay(connection.get());
    if (status.ok()) status = SetReceiveTimeout(connection.get(), kStopCheckMillis);
    if (!status.ok()) break;
    const size_t index = threads.size();
    threads.emplace_back([&results, &point, &env, index, fd = std::move(connection)]() mutable {
      results[index] = ServeConnection(std::move(fd), point, env);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& result : results) {
    if (status.ok() && !result.ok()) status = result;
  }
  return status;
}

absl::StatusOr<ClientSamples> TcpFloor::RunClient(const Point& point, uint16_t server_port) const {
  const size_t connections = static_cast<size_t>(point.concurrency);
  std::vector<ScopedFd> fds;
  for (size_t i = 0; i < connections; ++i) {
    absl::StatusOr<ScopedFd> fd = ConnectLoopback(SOCK_STREAM, server_port, kSocketBufferBytes);
    if (!fd.ok()) return fd.status();
    absl::Status nodelay = SetNoDelay(fd->get());
    if (!nodelay.ok()) return nodelay;
    fds.push_back(*std::move(fd));
  }

  // Warmup RPCs are split across connections, rounding up.
  const uint64_t warmup_each = (point.warmup + connections - 1) / connections;
  std::latch warmed(static_cast<std::ptrdiff_t>(connections));
  std::atomic<uint64_t> claimed{0};
  std::vector<ConnectionRun> runs(connections);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < connections; ++i) {
    threads.emplace_back(RunConnection, fds[i].get(), std::cref(point), warmup_each,
                         std::ref(warmed), std::ref(claimed), std::ref(runs[i]));
  }
  for (std::thread& thread : threads) thread.join();

  ClientSamples samples;
  int64_t start_ns = runs[0].start_ns;
  int64_t end_ns = runs[0].end_ns;
  for (ConnectionRun& run : runs) {
    if (!run.status.ok()) return run.status;
    start_ns = std::min(start_ns, run.start_ns);
    end_ns = std::max(end_ns, run.end_ns);
    samples.latencies_ns.insert(samples.latencies_ns.end(), run.latencies_ns.begin(),
                                run.latencies_ns.end());
  }
  samples.elapsed_ns = end_ns - start_ns;
  samples.payload_bytes =
      samples.latencies_ns.size() * (point.request_bytes + point.response_bytes);
  return samples;
}

}  // namespace homarpc::bench
