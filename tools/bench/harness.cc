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
// Blocking servers use a kStopCheckMillis receive timeout to look at it; a thread with nothing
// else to do sleeps on it as a futex (SharedControl::WaitForStop), woken once by the stop.
//
// Every wait on a child has a deadline; a child that overruns is killed (SIGKILL, by pid) and
// reaped, so a lost datagram or a hung system fails one point instead of the whole run.
// Children are forked by ForkChild (child_process.h): the kernel kills them when this process
// dies, so a crashed or interrupted run leaves no server or client behind.
//
// The plumbing (ForkChild, Child, Pipe, the report encoding, the server's stop flag, EnterNetns)
// lives in child_process.h, shared with load_harness.cc.
#include "tools/bench/harness.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/bench/child_process.h"
#include "tools/bench/machine_cpu.h"
#include "tools/bench/stats.h"
#include "transport/clock.h"
#include "transport/errors.h"

namespace homarpc::bench {
namespace {

using child_process::Child;
using child_process::EnterNetns;
using child_process::ForkChild;
using child_process::ForkServer;
using child_process::kUntilEof;
using child_process::Pipe;
using child_process::PipeServerEnv;
using child_process::PutString;
using child_process::PutU64;
using child_process::ReadFromChild;
using child_process::ReadServerPort;
using child_process::ReportReader;
using child_process::SharedControl;
using child_process::SharedControlPage;
using child_process::WriteAll;
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

// ---- The report a child sends when it is done ----

struct ChildReport {
  absl::Status status;
  SelfUsage usage;
  ClientSamples samples;  // a server report only uses `extras`
};

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
  if (summary.count > 0 && summary.p50_ns <= kStallMaxP50Nanos) {
    result.extras.push_back(Extra::Double(
        "stalled_pct", 100.0 * static_cast<double>(summary.stalled) /
                           static_cast<double>(summary.count)));
  }
  return result;
}

absl::StatusOr<Result> RunPoint(const System& system, const Point& point) {
  absl::StatusOr<SharedControlPage> page = SharedControlPage::Map();
  if (!page.ok()) return page.status();
  SharedControl* const control = page->get();

  Pipe server_pipe;
  absl::StatusOr<pid_t> server_pid = ForkServer(server_pipe, [&](int write_fd) {
    ServerChildMain(system, point, write_fd, control);
  });
  if (!server_pid.ok()) return server_pid.status();
  Child server(*server_pid);

  absl::StatusOr<uint16_t> started =
      ReadServerPort(server_pipe.read_fd(), NowNanos() + kServerGraceMillis * 1000000);
  if (!started.ok()) return started.status();
  const uint16_t port = *started;
  if (port == 0) {
    // Serve() failed before Ready(); its report says why.
    absl::StatusOr<ChildReport> report = CollectReport(
        server_pipe.read_fd(), NowNanos() + kServerGraceMillis * 1000000, server, "server");
    if (!report.ok()) return report.status();
    return absl::InternalError("server reported no port");
  }

  const StealMeter steal;  // from the client's start to its report, as context (machine_cpu.h)
  Pipe client_pipe;
  if (!client_pipe.ok()) return ErrnoToStatus(errno, "pipe");
  const pid_t client_pid = ForkChild();
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
  const std::optional<double> steal_fraction = steal.Fraction();
  control->RequestStop();
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
  AddStealExtra(steal_fraction, &result.extras);
  for (Extra& extra : server_report->samples.extras) result.extras.push_back(std::move(extra));
  return result;
}

}  // namespace homarpc::bench
