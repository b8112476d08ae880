// load_harness: RunLoadPoint() — one load point as a server process and N client processes,
// each in its network namespace, with a barrier that starts every client's measuring phase at
// once and CPU samples of every process around that phase (see load.h). Also the ClientReport
// wire format and the /proc parsing of load_internal.h.
//
// Called from main()'s thread while the process has no other threads (it forks); the children
// run LoadSystem::Serve or DriveStreams and leave with _exit().
//
// DESIGN NOTES
// Protocol. Server -> parent: its 2-byte port (0 when Serve() failed before Ready()), then,
// once Serve() returns, its status (code, message). Parent -> server: the stop flag in a
// MAP_SHARED page (child_process.h, as harness.cc). Client i -> parent, on its report pipe:
// single tag bytes 'R' (connected and warmed up; now blocked on its go pipe) and 'M' (its
// measuring phase is over; now draining), then 'D' followed by its encoded report up to EOF.
// A client that fails skips straight to 'D' with its error. Parent -> client i: one 'G' on its
// go pipe when every client has sent 'R'; EOF on it (the parent closes it) once the parent has
// sampled the client after its 'M'.
//
// The parent watches every pipe at once with poll(), so whichever child fails first — a client
// whose Connect() or warmup fails, a server whose Serve() returns mid-run, a child that dies
// (EOF without a report) — ends the point at once; every child is then killed and reaped by
// its Child guard (child_process.h) before RunLoadPoint returns. Each phase has a deadline.
// Children are forked by ForkChild (child_process.h), so they also die when this process does.
//
// CPU: sampled from /proc by the parent: every process when all clients are ready (just
// before 'G', all of them blocked); each client again as its own 'M' arrives, and the server
// when the last one does. Sampling a client at its own 'M' keeps its drain out of its share
// (clients are not started at exactly the same instant, and one may finish draining before
// another has finished measuring). A client sends 'M' before its open-loop sender threads exit
// (load_driver.cc), so their switch counts are still visible in /proc/<pid>/task, and after a
// successful report it waits for the parent to close its go pipe — done right after that
// client's second sample — before exiting, so the parent never samples a dead process.
// Clock-tick resolution (usually 10 ms) is enough for phases of seconds. The machine's steal
// (/proc/stat) is sampled around the same window, from just before the first sample to just
// after the server's last: the share of time the VM's CPUs were ready but not run, which on
// this VM explains more of a run-to-run difference in tails than anything in the systems.
//
// Reports carry up to millions of call records: they go as raw CallRecord arrays (plain data;
// both ends are this binary on this machine), through pipes enlarged to 1 MiB when the kernel
// allows, read in 1 MiB chunks. A client whose report is being read while others still measure
// just blocks on its pipe; nothing waits on the parent except the barrier.
//
// SIGPIPE: writing 'G' to a client that died between 'R' and 'G' would kill this process, so
// SIGPIPE is ignored while the go bytes are written (the dead client then shows up as EOF).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "tools/bench/child_process.h"
#include "tools/bench/harness.h"
#include "tools/bench/load.h"
#include "tools/bench/load_internal.h"
#include "tools/bench/machine_cpu.h"
#include "transport/clock.h"
#include "transport/errors.h"

namespace homarpc::bench {

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

namespace load_internal {

static_assert(std::is_trivially_copyable_v<CallRecord>, "CallRecord travels as raw bytes");

std::string EncodeClientReport(const absl::StatusOr<ClientReport>& report) {
  std::string out;
  const absl::Status status = report.status();
  PutU64(&out, static_cast<uint64_t>(status.code()));
  PutString(&out, status.message());
  if (!report.ok()) return out;
  size_t size = out.size() + 64;
  for (const StreamReport& stream : report->streams) {
    size += 128 + stream.name.size() + stream.first_error.size() +
            stream.calls.size() * sizeof(CallRecord);
  }
  out.reserve(size);
  PutU64(&out, static_cast<uint64_t>(report->measure_ns));
  PutU64(&out, report->streams.size());
  for (const StreamReport& stream : report->streams) {
    PutString(&out, stream.name);
    PutU64(&out, stream.started);
    PutU64(&out, stream.failed);
    PutU64(&out, stream.unfinished);
    PutU64(&out, stream.late_starts);
    PutString(&out, stream.first_error);
    PutU64(&out, stream.calls.size());
    out.append(reinterpret_cast<const char*>(stream.calls.data()),
               stream.calls.size() * sizeof(CallRecord));
  }
  return out;
}

absl::StatusOr<ClientReport> DecodeClientReport(absl::string_view bytes) {
  const absl::Status truncated = absl::InternalError("truncated or garbled client report");
  ReportReader reader(bytes);
  const uint64_t code = reader.U64();
  const std::string message = reader.String();
  if (!reader.ok() || code > static_cast<uint64_t>(absl::StatusCode::kUnauthenticated)) {
    return truncated;
  }
  if (code != 0) return absl::Status(static_cast<absl::StatusCode>(code), message);
  ClientReport report;
  report.measure_ns = static_cast<int64_t>(reader.U64());
  const uint64_t streams = reader.U64();
  for (uint64_t i = 0; i < streams && reader.ok(); ++i) {
    StreamReport stream;
    stream.name = reader.String();
    stream.started = reader.U64();
    stream.failed = reader.U64();
    stream.unfinished = reader.U64();
    stream.late_starts = reader.U64();
    stream.first_error = reader.String();
    const uint64_t calls = reader.U64();
    if (calls > bytes.size() / sizeof(CallRecord)) return truncated;  // before multiplying
    const absl::string_view raw = reader.Raw(calls * sizeof(CallRecord));
    if (!reader.ok()) return truncated;
    stream.calls.resize(calls);
    if (calls > 0) std::memcpy(stream.calls.data(), raw.data(), raw.size());
    report.streams.push_back(std::move(stream));
  }
  if (!reader.ok()) return truncated;
  return report;
}

absl::StatusOr<int64_t> ParseStatCpuTicks(absl::string_view stat) {
  // The command name (field 2) is in parentheses and may hold anything, ')' included: the
  // fields resume after the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == absl::string_view::npos) return absl::InternalError("no ')' in /proc stat");
  const std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(paren + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state), so field n is fields[n - 3].
  constexpr size_t kUtime = 14 - 3;
  constexpr size_t kStime = 15 - 3;
  int64_t utime = 0;
  int64_t stime = 0;
  if (fields.size() <= kStime || !absl::SimpleAtoi(fields[kUtime], &utime) ||
      !absl::SimpleAtoi(fields[kStime], &stime)) {
    return absl::InternalError("malformed /proc stat");
  }
  return utime + stime;
}

absl::StatusOr<int64_t> ParseInvoluntarySwitches(absl::string_view status) {
  constexpr absl::string_view kKey = "nonvoluntary_ctxt_switches:";
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, kKey)) continue;
    int64_t value = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &value)) break;
    return value;
  }
  return absl::InternalError("no nonvoluntary_ctxt_switches in /proc status");
}

namespace {

absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoToStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace

absl::StatusOr<CpuSample> SampleProcessCpu(int pid) {
  const std::string dir = absl::StrCat("/proc/", pid);
  absl::StatusOr<std::string> stat = ReadProcFile(dir + "/stat");
  if (!stat.ok()) return stat.status();
  absl::StatusOr<int64_t> ticks = ParseStatCpuTicks(*stat);
  if (!ticks.ok()) return ticks.status();
  const int64_t ticks_per_second = sysconf(_SC_CLK_TCK);
  if (ticks_per_second <= 0) return absl::InternalError("sysconf(_SC_CLK_TCK) failed");
  CpuSample sample;
  sample.cpu_ns = *ticks * (transport::kNanosPerSecond / ticks_per_second);

  DIR* tasks = opendir((dir + "/task").c_str());
  if (tasks == nullptr) return ErrnoToStatus(errno, absl::StrCat("opendir ", dir, "/task"));
  while (const dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    // A thread may exit between readdir and open: skip it.
    absl::StatusOr<std::string> status =
        ReadProcFile(absl::StrCat(dir, "/task/", entry->d_name, "/status"));
    if (!status.ok()) continue;
    absl::StatusOr<int64_t> switches = ParseInvoluntarySwitches(*status);
    if (switches.ok()) sample.involuntary_switches += *switches;
  }
  closedir(tasks);
  return sample;
}

}  // namespace load_internal

namespace {

using load_internal::CpuSample;
using load_internal::SampleProcessCpu;

constexpr char kTagReady = 'R';
constexpr char kTagMeasured = 'M';
constexpr char kTagReport = 'D';
constexpr char kTagGo = 'G';
constexpr int kPipeBytes = 1 << 20;

int64_t NowNanos() { return transport::MonotonicClock::Get()->NowNanos(); }

absl::Status Prefixed(absl::string_view who, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(who, ": ", status.message()));
}

// ---- The server child ----

std::string EncodeStatus(const absl::Status& status) {
  std::string out;
  PutU64(&out, static_cast<uint64_t>(status.code()));
  PutString(&out, status.message());
  return out;
}

absl::Status DecodeStatus(absl::string_view bytes) {
  ReportReader reader(bytes);
  const uint64_t code = reader.U64();
  const std::string message = reader.String();
  if (!reader.ok() || code > static_cast<uint64_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError("truncated or garbled server report");
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

[[noreturn]] void ServerChildMain(const LoadSystem& system, const LoadPoint& point, int fd,
                                  const SharedControl* control) {
  PipeServerEnv env(fd, control);
  absl::Status status = EnterNetns(point.settings.server_netns);
  if (status.ok()) status = system.Serve(point, env);
  if (!env.ready_sent()) {
    env.Ready(0);
    if (status.ok()) status = absl::InternalError("Serve() returned without calling Ready()");
  }
  const std::string bytes = EncodeStatus(status);
  WriteAll(fd, bytes.data(), bytes.size());
  _exit(0);
}

// The server process as the parent sees it.
struct ServerProcess {
  explicit ServerProcess(pid_t pid) : child(pid) {}
  Pipe* pipe = nullptr;  // read end: the port, then the final status
  Child child;
  bool stop_requested = false;
};

// Reads the server's final status (it has returned from Serve(), or is about to).
absl::Status CollectServer(ServerProcess& server) {
  std::string bytes;
  absl::Status read = ReadFromChild(server.pipe->read_fd(), kUntilEof,
                                    NowNanos() + kServerGraceMillis * 1000000, &bytes);
  if (!read.ok()) return Prefixed("server", read);
  const std::string ended = server.child.Reap();
  if (bytes.empty()) {
    return absl::InternalError(absl::StrCat("server process died without a report (", ended, ")"));
  }
  absl::Status status = DecodeStatus(bytes);
  if (!status.ok()) return Prefixed("server", status);
  if (!server.stop_requested) {
    return absl::InternalError("server: Serve() returned before the point ended");
  }
  return absl::OkStatus();
}

// ---- The client children ----

absl::StatusOr<ClientReport> RunClient(const LoadSystem& system, const LoadPoint& point,
                                       const ClientSpec& client, uint16_t port, int report_fd,
                                       int go_fd) {
  if (absl::Status entered = EnterNetns(client.netns); !entered.ok()) return entered;
  absl::StatusOr<std::unique_ptr<LoadChannel>> channel = system.Connect(point, port);
  if (!channel.ok()) return channel.status();
  if (*channel == nullptr) return absl::InternalError("Connect() returned no channel");
  auto start_measuring = [report_fd, go_fd] {
    WriteAll(report_fd, &kTagReady, 1);
    char go = 0;
    ssize_t n = 0;
    do {
      n = read(go_fd, &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1 || go != kTagGo) _exit(1);  // the parent gave up on the point
  };
  auto measuring_done = [report_fd] { WriteAll(report_fd, &kTagMeasured, 1); };
  absl::StatusOr<ClientReport> report =
      DriveStreams(point, client, **channel, start_measuring, measuring_done);
  // Unfinished calls may still complete on the system's threads: the channel stays alive until
  // the process exits, right after the report is written.
  static_cast<void>(channel->release());
  return report;
}

[[noreturn]] void ClientChildMain(const LoadSystem& system, const LoadPoint& point,
                                  const ClientSpec& client, uint16_t port, int report_fd,
                                  int go_fd) {
  absl::StatusOr<ClientReport> report = RunClient(system, point, client, port, report_fd, go_fd);
  std::string bytes(1, kTagReport);
  bytes += load_internal::EncodeClientReport(report);
  WriteAll(report_fd, bytes.data(), bytes.size());
  // After a measuring phase, stay alive (with every thread) until the parent has read this
  // process's CPU time: it closes the go pipe then (or dies). A failed client has no phase.
  if (report.ok()) {
    char ignored = 0;
    while (read(go_fd, &ignored, 1) < 0 && errno == EINTR) {
    }
  }
  _exit(0);
}

// A client process as the parent sees it.
struct ClientProcess {
  explicit ClientProcess(size_t i) : index(i), name(absl::StrCat("client", i)) {}
  const size_t index;
  const std::string name;
  Pipe report_pipe;  // child -> parent
  Pipe go_pipe;      // parent -> child
  std::unique_ptr<Child> child;
  bool ready = false;
  bool measured = false;
  bool reporting = false;  // 'D' seen: the rest of the pipe is the report
  bool done = false;       // report decoded (OK)
  std::string report_bytes;
  ClientReport report;
  CpuSample before;  // when the barrier opened
  CpuSample after;   // when its 'M' arrived
};

using Clients = std::vector<std::unique_ptr<ClientProcess>>;

// Takes `bytes` just read from `client`'s report pipe.
absl::Status Consume(ClientProcess& client, absl::string_view bytes) {
  while (!bytes.empty() && !client.reporting) {
    const char tag = bytes.front();
    bytes.remove_prefix(1);
    if (tag == kTagReady && !client.ready) {
      client.ready = true;
    } else if (tag == kTagMeasured && client.ready && !client.measured) {
      client.measured = true;
      absl::StatusOr<CpuSample> after = SampleProcessCpu(client.child->pid());
      if (!after.ok()) return Prefixed(client.name, after.status());
      client.after = *after;
      client.go_pipe.CloseWrite();  // it may exit once it has reported
    } else if (tag == kTagReport) {
      client.reporting = true;
    } else {
      return absl::InternalError(
          absl::StrCat(client.name, ": unexpected byte ", static_cast<int>(tag), " on its pipe"));
    }
  }
  client.report_bytes.append(bytes.data(), bytes.size());
  return absl::OkStatus();
}

// `client`'s report pipe reached EOF: it has exited (or is exiting).
absl::Status Finish(ClientProcess& client) {
  const std::string ended = client.child->Reap();
  if (!client.reporting) {
    return absl::InternalError(
        absl::StrCat(client.name, " process died without a report (", ended, ")"));
  }
  absl::StatusOr<ClientReport> report = load_internal::DecodeClientReport(client.report_bytes);
  client.report_bytes.clear();
  client.report_bytes.shrink_to_fit();
  if (!report.ok()) return Prefixed(client.name, report.status());
  if (!client.measured) {
    return absl::InternalError(absl::StrCat(client.name, " reported before measuring"));
  }
  client.report = *std::move(report);
  client.done = true;
  return absl::OkStatus();
}

// Reads every child's pipe until every client has `flag` set, or a child fails (its error),
// or `deadline_ns` passes (DEADLINE_EXCEEDED naming `phase` and the clients it waited for).
absl::Status Pump(Clients& clients, ServerProcess& server, int64_t deadline_ns,
                  absl::string_view phase, bool ClientProcess::*flag) {
  auto reached = [&clients, flag] {
    return std::all_of(clients.begin(), clients.end(),
                       [flag](const auto& client) { return (*client).*flag; });
  };
  std::vector<char> buffer(kPipeBytes);
  std::vector<pollfd> fds;
  std::vector<ClientProcess*> owners;  // parallel to fds; nullptr = the server
  while (!reached()) {
    const int64_t left_ns = deadline_ns - NowNanos();
    if (left_ns <= 0) {
      std::string late;
      for (const auto& client : clients) {
        if (!((*client).*flag)) absl::StrAppend(&late, late.empty() ? "" : ", ", client->name);
      }
      return absl::DeadlineExceededError(
          absl::StrCat(phase, ": overran its time (still waiting for ", late, ")"));
    }
    fds.clear();
    owners.clear();
    fds.push_back(pollfd{server.pipe->read_fd(), POLLIN, 0});
    owners.push_back(nullptr);
    for (const auto& client : clients) {
      if (client->done) continue;
      fds.push_back(pollfd{client->report_pipe.read_fd(), POLLIN, 0});
      owners.push_back(client.get());
    }
    const int ready = poll(fds.data(), fds.size(),
                           static_cast<int>(std::min<int64_t>(left_ns / 1000000 + 1, 1000)));
    if (ready < 0 && errno != EINTR) return ErrnoToStatus(errno, "poll on child pipes");
    if (ready <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      if (owners[i] == nullptr) {
        // The server writes nothing more until Serve() returns: it stopped before its time
        // (CollectServer says so when its status is OK).
        return CollectServer(server);
      }
      ClientProcess& client = *owners[i];
      const ssize_t n = read(fds[i].fd, buffer.data(), buffer.size());
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return ErrnoToStatus(errno, absl::StrCat("read from ", client.name));
      }
      absl::Status status =
          n == 0 ? Finish(client)
                 : Consume(client, absl::string_view(buffer.data(), static_cast<size_t>(n)));
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePoint(const LoadPoint& point) {
  if (point.clients.empty()) return absl::InvalidArgumentError("a load point without clients");
  std::set<std::string> names;
  for (size_t i = 0; i < point.clients.size(); ++i) {
    const ClientSpec& client = point.clients[i];
    absl::Status valid = load_internal::ValidateClient(point, client);
    if (!valid.ok()) return Prefixed(absl::StrCat("client", i), valid);
    for (const StreamSpec& stream : client.streams) {
      if (!names.insert(stream.name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("stream name '", stream.name, "' used twice in the point"));
      }
    }
  }
  return absl::OkStatus();
}

// Writes 'G' to every client with SIGPIPE ignored (see DESIGN NOTES).
void SendGo(const Clients& clients) {
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &previous);
  for (const auto& client : clients) WriteAll(client->go_pipe.write_fd(), &kTagGo, 1);
  sigaction(SIGPIPE, &previous, nullptr);
}

}  // namespace

absl::StatusOr<LoadReport> RunLoadPoint(const LoadSystem& system, const LoadPoint& point) {
  if (absl::Status valid = ValidatePoint(point); !valid.ok()) return valid;

  absl::StatusOr<SharedControlPage> page = SharedControlPage::Map();
  if (!page.ok()) return page.status();
  SharedControl* const control = page->get();

  // ---- The server ----
  Pipe server_pipe;
  absl::StatusOr<pid_t> server_pid = ForkServer(server_pipe, [&](int write_fd) {
    ServerChildMain(system, point, write_fd, control);
  });
  if (!server_pid.ok()) return server_pid.status();
  // Declared after `page` and the pipes, so destroyed (killed, reaped) before them.
  ServerProcess server(*server_pid);
  server.pipe = &server_pipe;

  absl::StatusOr<uint16_t> started =
      ReadServerPort(server_pipe.read_fd(), NowNanos() + kServerGraceMillis * 1000000);
  if (!started.ok()) return started.status();
  const uint16_t port = *started;
  if (port == 0) {
    absl::Status status = CollectServer(server);  // Serve() failed before Ready(): it says why
    return status.ok() ? absl::InternalError("server reported no port") : status;
  }

  // ---- The clients ----
  Clients clients;
  for (size_t i = 0; i < point.clients.size(); ++i) {
    clients.push_back(std::make_unique<ClientProcess>(i));
    ClientProcess& client = *clients.back();
    if (!client.report_pipe.ok() || !client.go_pipe.ok()) return ErrnoToStatus(errno, "pipe");
    fcntl(client.report_pipe.read_fd(), F_SETPIPE_SZ, kPipeBytes);  // best effort
    const pid_t pid = ForkChild();
    if (pid < 0) return ErrnoToStatus(errno, "fork for a client");
    if (pid == 0) {
      // Keep only this client's ends: an inherited write end of another client's pipe would
      // hide that client's EOF from the parent.
      server_pipe.CloseRead();
      for (size_t j = 0; j < i; ++j) {
        clients[j]->report_pipe.CloseRead();
        clients[j]->go_pipe.CloseWrite();
      }
      client.report_pipe.CloseRead();
      client.go_pipe.CloseWrite();
      ClientChildMain(system, point, point.clients[i], port, client.report_pipe.write_fd(),
                      client.go_pipe.read_fd());
    }
    client.child = std::make_unique<Child>(pid);
    client.report_pipe.CloseWrite();
    client.go_pipe.CloseRead();
  }
  // Until the end, an early return destroys `clients` (each Child kills and reaps its process)
  // and then `server`.

  absl::Status ready = Pump(clients, server, NowNanos() + kClientGraceMillis * 1000000,
                            "client start-up", &ClientProcess::ready);
  if (!ready.ok()) return ready;

  // The machine's steal is context for the reader, not a measurement the point needs: a
  // failed read leaves it unknown.
  const StealMeter steal;
  absl::StatusOr<CpuSample> server_before = SampleProcessCpu(server.child.pid());
  if (!server_before.ok()) return Prefixed("server", server_before.status());
  for (auto& client : clients) {
    absl::StatusOr<CpuSample> before = SampleProcessCpu(client->child->pid());
    if (!before.ok()) return Prefixed(client->name, before.status());
    client->before = *before;
  }
  const int64_t go_ns = NowNanos();
  SendGo(clients);

  // Each client's CPU is read as its 'M' arrives (Consume); the server's after the last one.
  const int64_t report_deadline =
      go_ns + point.duration_ns + point.drain_ns + kClientGraceMillis * 1000000;
  absl::Status measured =
      Pump(clients, server, report_deadline, "measuring phase", &ClientProcess::measured);
  if (!measured.ok()) return measured;
  absl::StatusOr<CpuSample> server_after = SampleProcessCpu(server.child.pid());
  if (!server_after.ok()) return Prefixed("server", server_after.status());
  const std::optional<double> steal_fraction = steal.Fraction();

  absl::Status reported =
      Pump(clients, server, report_deadline, "client reports", &ClientProcess::done);
  if (!reported.ok()) return reported;

  control->RequestStop();
  server.stop_requested = true;
  if (absl::Status stopped = CollectServer(server); !stopped.ok()) return stopped;

  LoadReport report;
  report.system = system.name();
  report.point = point;
  auto add_cpu = [&report](std::string role, const CpuSample& before, const CpuSample& after) {
    ProcessCpu cpu;
    cpu.role = std::move(role);
    cpu.cpu_ns = std::max<int64_t>(after.cpu_ns - before.cpu_ns, 0);
    cpu.involuntary_switches =
        std::max<int64_t>(after.involuntary_switches - before.involuntary_switches, 0);
    report.cpu.push_back(std::move(cpu));
  };
  add_cpu("server", *server_before, *server_after);
  for (const auto& client : clients) add_cpu(client->name, client->before, client->after);
  for (auto& client : clients) report.clients.push_back(std::move(client->report));
  report.steal_fraction = steal_fraction;
  return report;
}

}  // namespace homarpc::bench
