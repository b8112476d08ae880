// harness: one point = one server process + one client process (see harness.h).
//
// DESIGN NOTES
// Why processes, not threads: peak RSS is per process (getrusage(RUSAGE_SELF)), and the point
// of reporting memory is to compare what a homarpc client or server holds against a raw-socket
// one. A fresh child per point also keeps one point's allocations out of the next point's peak.
// A child starts with the pages it inherited from this small parent, so its peak includes them
// (a few MiB, the same for every system).
//
// Child -> parent: one pipe per child. The server first writes its 2-byte port (0 if Serve()
// failed before calling Ready), then, like the client, one report when it is done: status,
// peak RSS, samples, extras, in host byte order (both ends are this binary on this machine).
// Children leave with _exit() so that they never run the parent's atexit handlers or flush
// its stdio buffers a second time.
//
// Parent -> server: a stop flag in a MAP_SHARED page. A busy-polling server reads it on every
// iteration for the price of one load; a signal or a pipe would need a system call there.
// Blocking servers use a kStopCheckMillis receive timeout to look at it.
//
// Every wait on a child has a deadline; a child that overruns is killed (SIGKILL, by pid) and
// reaped, so a lost datagram or a hung system fails one point instead of the whole run.
#include "tools/bench/harness.h"

#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/bench/stats.h"
#include "transport/clock.h"
#include "transport/errors.h"

namespace homarpc::bench {
namespace {

using transport::ErrnoToStatus;

int64_t NowNanos() { return transport::MonotonicClock::Get()->NowNanos(); }

// What a child measures about itself when it is done.
struct SelfUsage {
  int64_t peak_rss_kb = 0;
  // Times the kernel took the CPU away from a runnable thread of this process. Busy-polling
  // floors need a core per side; a large count means other work competed for the cores and
  // the latencies measured the scheduler.
  int64_t involuntary_switches = 0;
};

SelfUsage MeasureSelf() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return SelfUsage{usage.ru_maxrss, usage.ru_nivcsw};  // ru_maxrss is in kilobytes on Linux
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

void WriteAll(int fd, const void* data, size_t length) {
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
// kUntilEof). Fails with DEADLINE_EXCEEDED at `deadline_ns`, INTERNAL on an early EOF.
constexpr size_t kUntilEof = ~size_t{0};
absl::Status ReadFromChild(int fd, size_t want, int64_t deadline_ns, std::string* out) {
  char buffer[1 << 16];
  while (out->size() < want) {
    const int64_t left_ns = deadline_ns - NowNanos();
    if (left_ns <= 0) return absl::DeadlineExceededError("child process overran its time");
    pollfd pfd{fd, POLLIN, 0};
    const int ready =
        poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ns / 1000000 + 1, 1000)));
    if (ready < 0 && errno != EINTR) return ErrnoToStatus(errno, "poll on child pipe");
    if (ready <= 0) continue;
    const size_t chunk = std::min(sizeof(buffer), want - out->size());
    const ssize_t n = read(fd, buffer, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "read from child pipe");
    }
    if (n == 0) {
      if (want == kUntilEof) return absl::OkStatus();
      return absl::InternalError("child process closed its pipe early");
    }
    out->append(buffer, static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// ---- The report a child sends when it is done ----

struct ChildReport {
  absl::Status status;
  SelfUsage usage;
  ClientSamples samples;  // a server report only uses `extras`
};

void PutU64(std::string* out, uint64_t value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}
void PutString(std::string* out, absl::string_view text) {
  PutU64(out, text.size());
  out->append(text.data(), text.size());
}

std::string EncodeReport(const ChildReport& report) {
  std::string out;
  PutU64(&out, static_cast<uint64_t>(report.status.code()));
  PutString(&out, report.status.message());
  PutU64(&out, static_cast<uint64_t>(report.usage.peak_rss_kb));
  PutU64(&out, static_cast<uint64_t>(report.usage.involuntary_switches));
  PutU64(&out, report.samples.payload_bytes);
  PutU64(&out, static_cast<uint64_t>(report.samples.elapsed_ns));
  PutU64(&out, report.samples.latencies_ns.size());
  out.append(reinterpret_cast<const char*>(report.samples.latencies_ns.data()),
             report.samples.latencies_ns.size() * sizeof(int64_t));
  PutU64(&out, report.samples.extras.size());
  for (const Extra& extra : report.samples.extras) {
    PutString(&out, extra.key);
    PutString(&out, extra.text);
    PutU64(&out, extra.is_string ? 1 : 0);
  }
  return out;
}

// Reads what EncodeReport wrote; `ok` turns false on a short or inconsistent input.
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
  std::string Bytes(uint64_t length) {
    if (in_.size() < length) {
      ok_ = false;
      return "";
    }
    std::string out(in_.substr(0, length));
    in_.remove_prefix(length);
    return out;
  }
  std::string String() { return Bytes(U64()); }

 private:
  absl::string_view in_;
  bool ok_ = true;
};

absl::StatusOr<ChildReport> DecodeReport(absl::string_view bytes) {
  ReportReader reader(bytes);
  ChildReport report;
  const auto code = static_cast<absl::StatusCode>(reader.U64());
  const std::string message = reader.String();
  report.status = absl::Status(code, message);
  report.usage.peak_rss_kb = static_cast<int64_t>(reader.U64());
  report.usage.involuntary_switches = static_cast<int64_t>(reader.U64());
  report.samples.payload_bytes = reader.U64();
  report.samples.elapsed_ns = static_cast<int64_t>(reader.U64());
  const uint64_t count = reader.U64();
  const std::string latencies = reader.Bytes(count * sizeof(int64_t));
  if (reader.ok() && count > 0) {
    report.samples.latencies_ns.resize(count);
    std::memcpy(report.samples.latencies_ns.data(), latencies.data(), latencies.size());
  }
  const uint64_t extras = reader.U64();
  for (uint64_t i = 0; i < extras && reader.ok(); ++i) {
    Extra extra;
    extra.key = reader.String();
    extra.text = reader.String();
    extra.is_string = reader.U64() != 0;
    report.samples.extras.push_back(std::move(extra));
  }
  if (!reader.ok()) return absl::InternalError("truncated report from child process");
  return report;
}

// ---- The server child ----

// The stop flag, in a page shared by the parent and the server child.
struct SharedControl {
  std::atomic<int> stop{0};
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
absl::Status EnterNetns(const std::string& name) {
  if (name.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat("/var/run/netns/", name);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  const int rc = setns(fd, CLONE_NEWNET);
  const int err = errno;
  close(fd);
  if (rc != 0) return ErrnoToStatus(err, absl::StrCat("setns into ", name));
  return absl::OkStatus();
}

[[noreturn]] void ServerChildMain(const System& system, const Point& point, int fd,
                                  const SharedControl* control) {
  PipeServerEnv env(fd, control);
  ChildReport report;
  report.status = EnterNetns(point.settings.server_netns);
  if (report.status.ok()) report.status = system.Serve(point, env);
  if (!env.ready_sent()) {
    env.Ready(0);
    if (report.status.ok()) {
      report.status = absl::InternalError("Serve() returned without calling Ready()");
    }
  }
  report.samples.extras = std::move(env.extras());
  report.usage = MeasureSelf();
  const std::string bytes = EncodeReport(report);
  WriteAll(fd, bytes.data(), bytes.size());
  _exit(0);
}

[[noreturn]] void ClientChildMain(const System& system, const Point& point, uint16_t port, int fd) {
  ChildReport report;
  absl::Status entered = EnterNetns(point.settings.client_netns);
  absl::StatusOr<ClientSamples> samples =
      entered.ok() ? system.RunClient(point, port) : absl::StatusOr<ClientSamples>(entered);
  if (samples.ok()) {
    report.samples = *std::move(samples);
  } else {
    report.status = samples.status();
  }
  report.usage = MeasureSelf();
  const std::string bytes = EncodeReport(report);
  WriteAll(fd, bytes.data(), bytes.size());
  _exit(0);
}

// Reads a child's final report; `who` names it in errors.
absl::StatusOr<ChildReport> CollectReport(int fd, int64_t deadline_ns, Child& child,
                                          absl::string_view who) {
  std::string bytes;
  absl::Status read = ReadFromChild(fd, kUntilEof, deadline_ns, &bytes);
  if (!read.ok()) {
    return absl::Status(read.code(), absl::StrCat(who, ": ", read.message()));
  }
  const std::string ended = child.Reap();
  absl::StatusOr<ChildReport> report = DecodeReport(bytes);
  if (!report.ok()) {
    return absl::InternalError(absl::StrCat(who, " process died without a report (", ended, ")"));
  }
  if (!report->status.ok()) {
    return absl::Status(report->status.code(), absl::StrCat(who, ": ", report->status.message()));
  }
  return report;
}

}  // namespace

Result BuildResult(const Point& point, absl::string_view system_name, bool is_floor,
                   ClientSamples samples) {
  Result result;
  result.scenario = point.scenario;
  result.system = std::string(system_name);
  result.is_floor = is_floor;
  result.size = point.size;
  result.concurrency = point.concurrency;
  const LatencySummary summary = Summarize(std::move(samples.latencies_ns));
  result.samples = summary.count;
  result.p50_us = static_cast<double>(summary.p50_ns) / 1e3;
  result.p99_us = static_cast<double>(summary.p99_ns) / 1e3;
  result.p999_us = static_cast<double>(summary.p999_ns) / 1e3;
  if (samples.elapsed_ns > 0) {
    const double elapsed_ns = static_cast<double>(samples.elapsed_ns);
    result.rps = static_cast<double>(summary.count) * 1e9 / elapsed_ns;
    result.goodput_gbps = static_cast<double>(samples.payload_bytes) * 8 / elapsed_ns;
  }
  result.extras = std::move(samples.extras);
  return result;
}

absl::StatusOr<Result> RunPoint(const System& system, const Point& point) {
  void* page = mmap(nullptr, sizeof(SharedControl), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return ErrnoToStatus(errno, "mmap for the stop flag");
  auto* control = new (page) SharedControl;
  struct Unmap {
    void* page;
    ~Unmap() { munmap(page, sizeof(SharedControl)); }
  } unmap{page};

  Pipe server_pipe;
  if (!server_pipe.ok()) return ErrnoToStatus(errno, "pipe");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t server_pid = fork();
  if (server_pid < 0) return ErrnoToStatus(errno, "fork for the server");
  if (server_pid == 0) {
    server_pipe.CloseRead();
    ServerChildMain(system, point, server_pipe.write_fd(), control);
  }
  Child server(server_pid);
  server_pipe.CloseWrite();

  std::string port_bytes;
  absl::Status started = ReadFromChild(server_pipe.read_fd(), sizeof(uint16_t),
                                       NowNanos() + kServerGraceMillis * 1000000, &port_bytes);
  if (!started.ok()) {
    return absl::Status(started.code(), absl::StrCat("server start-up: ", started.message()));
  }
  uint16_t port = 0;
  std::memcpy(&port, port_bytes.data(), sizeof(port));
  if (port == 0) {
    // Serve() failed before Ready(); its report says why.
    absl::StatusOr<ChildReport> report = CollectReport(
        server_pipe.read_fd(), NowNanos() + kServerGraceMillis * 1000000, server, "server");
    if (!report.ok()) return report.status();
    return absl::InternalError("server reported no port");
  }

  Pipe client_pipe;
  if (!client_pipe.ok()) return ErrnoToStatus(errno, "pipe");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t client_pid = fork();
  if (client_pid < 0) return ErrnoToStatus(errno, "fork for the client");
  if (client_pid == 0) {
    server_pipe.CloseRead();
    client_pipe.CloseRead();
    ClientChildMain(system, point, port, client_pipe.write_fd());
  }
  Child client(client_pid);
  client_pipe.CloseWrite();

  absl::StatusOr<ChildReport> client_report = CollectReport(
      client_pipe.read_fd(), NowNanos() + point.duration_ns + kClientGraceMillis * 1000000, client,
      "client");
  control->stop.store(1, std::memory_order_relaxed);
  absl::StatusOr<ChildReport> server_report = CollectReport(
      server_pipe.read_fd(), NowNanos() + kServerGraceMillis * 1000000, server, "server");
  if (!client_report.ok()) return client_report.status();
  if (!server_report.ok()) return server_report.status();

  if (client_report->samples.latencies_ns.empty()) {
    return absl::InternalError("client completed no RPCs in the measuring phase");
  }
  Result result =
      BuildResult(point, system.name(), system.is_floor(), std::move(client_report->samples));
  result.extras.push_back(Extra::Int("client_peak_rss_kb", client_report->usage.peak_rss_kb));
  result.extras.push_back(Extra::Int("server_peak_rss_kb", server_report->usage.peak_rss_kb));
  result.extras.push_back(
      Extra::Int("client_involuntary_switches", client_report->usage.involuntary_switches));
  result.extras.push_back(
      Extra::Int("server_involuntary_switches", server_report->usage.involuntary_switches));
  for (Extra& extra : server_report->samples.extras) result.extras.push_back(std::move(extra));
  return result;
}

}  // namespace homarpc::bench
