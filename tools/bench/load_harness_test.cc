// Tests for tools/bench/load_harness.cc: RunLoadPoint() with a fake LoadSystem whose server is
// a tiny UDP responder on 127.0.0.1 (no namespaces) and whose channel sends it datagrams, so
// the fork/pipe/barrier protocol runs for real with two client processes: reports and CPU
// samples come back, and a failing server or client ends the point with its error and leaves
// no child behind. Also the ClientReport encoding and the /proc parsing.
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/load.h"
#include "tools/bench/load_internal.h"
#include "tools/bench/socket_util.h"
#include "transport/clock.h"
#include "transport/errors.h"

namespace homarpc::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kMs = 1000 * 1000;
constexpr size_t kHeaderBytes = 16;            // request: call id, response size; response: call id
constexpr uint64_t kRefusedRequestBytes = 13;  // the fake channel fails calls of this size
// The fake server spends this much CPU on each request before answering, and the fake channel
// as much on each call before sending it: known work for the CPU samples to account for.
constexpr int64_t kBurnPerCallNanos = 200 * 1000;

// True when this process has no child left, reaped or not.
std::string Message(const absl::Status& status) { return std::string(status.message()); }

bool NoChildrenLeft() {
  errno = 0;
  return waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

int64_t ThreadCpuNanos() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

// Keeps the calling thread on the CPU until it has used `cpu_ns` more CPU time.
void BurnCpu(int64_t cpu_ns) {
  const int64_t until = ThreadCpuNanos() + cpu_ns;
  while (ThreadCpuNanos() < until) {
  }
}

// Answers every datagram [call id][response size][padding] with [call id][response size zero
// bytes], after kBurnPerCallNanos of CPU. With `fail_after` > 0 it returns an error when datagram
// fail_after + 1 arrives.
absl::Status ServeUdp(ServerEnv& env, uint64_t fail_after) {
  absl::StatusOr<ScopedFd> fd = BindLoopback(SOCK_DGRAM);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<uint16_t> port = LocalPort(fd->get());
  if (!port.ok()) return port.status();
  if (absl::Status timeout = SetReceiveTimeout(fd->get(), kStopCheckMillis); !timeout.ok()) {
    return timeout;
  }
  env.Ready(*port);
  std::vector<char> buffer(4096);
  uint64_t received = 0;
  while (!env.ShouldStop()) {
    sockaddr_storage from{};
    socklen_t from_length = sizeof(from);
    const ssize_t n = recvfrom(fd->get(), buffer.data(), buffer.size(), 0,
                               reinterpret_cast<sockaddr*>(&from), &from_length);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return transport::ErrnoToStatus(errno, "recvfrom");
    }
    if (static_cast<size_t>(n) < kHeaderBytes) continue;
    if (fail_after > 0 && ++received > fail_after) return absl::DataLossError("server broke");
    BurnCpu(kBurnPerCallNanos);
    uint64_t response_bytes = 0;
    std::memcpy(&response_bytes, buffer.data() + 8, sizeof(response_bytes));
    std::vector<char> reply(8 + std::min<uint64_t>(response_bytes, 2048), 0);
    std::memcpy(reply.data(), buffer.data(), 8);
    sendto(fd->get(), reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from),
           from_length);
  }
  return absl::OkStatus();
}

// Sends each call as one datagram, after kBurnPerCallNanos of CPU on the calling thread, and
// completes it when the reply comes back, on its receiver thread. Calls of kRefusedRequestBytes
// fail at once (inline).
class UdpChannel final : public LoadChannel {
 public:
  explicit UdpChannel(ScopedFd fd) : fd_(std::move(fd)), thread_([this] { Receive(); }) {}
  ~UdpChannel() override {
    stop_.store(true);
    thread_.join();
    std::map<uint64_t, std::function<void(absl::StatusOr<uint64_t>)>> left;
    {
      absl::MutexLock lock(&mu_);
      left.swap(pending_);
    }
    for (auto& [id, done] : left) done(absl::CancelledError("channel closed"));
  }

  void StartCall(uint64_t request_bytes, uint64_t response_bytes, int64_t timeout_ns,
                 std::function<void(absl::StatusOr<uint64_t>)> done) override {
    if (request_bytes == kRefusedRequestBytes) {
      done(absl::FailedPreconditionError("the fake refuses 13-byte requests"));
      return;
    }
    std::vector<char> request(kHeaderBytes + std::min<uint64_t>(request_bytes, 1024), 0);
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      id = ++next_id_;
      pending_.emplace(id, std::move(done));
    }
    std::memcpy(request.data(), &id, 8);
    std::memcpy(request.data() + 8, &response_bytes, 8);
    BurnCpu(kBurnPerCallNanos);
    send(fd_.get(), request.data(), request.size(), 0);
  }

 private:
  void Receive() {
    std::vector<char> buffer(4096);
    while (!stop_.load()) {
      const ssize_t n = recv(fd_.get(), buffer.data(), buffer.size(), 0);
      if (n < 8) continue;  // timeout (kStopCheckMillis) or a runt
      uint64_t id = 0;
      std::memcpy(&id, buffer.data(), 8);
      std::function<void(absl::StatusOr<uint64_t>)> done;
      {
        absl::MutexLock lock(&mu_);
        auto it = pending_.find(id);
        if (it == pending_.end()) continue;
        done = std::move(it->second);
        pending_.erase(it);
      }
      done(static_cast<uint64_t>(n - 8));
    }
  }

  const ScopedFd fd_;
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, std::function<void(absl::StatusOr<uint64_t>)>> pending_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class FakeLoadSystem final : public LoadSystem {
 public:
  enum class Fault { kNone, kServeFailsBeforeReady, kServeFailsMidRun, kClientDies };
  explicit FakeLoadSystem(Fault fault = Fault::kNone) : fault_(fault) {}

  std::string name() const override { return "fake"; }
  absl::Status Serve(const LoadPoint& point, ServerEnv& env) const override {
    if (fault_ == Fault::kServeFailsBeforeReady) return absl::UnavailableError("no socket");
    // Mid-run: after every client's warmup (warmup_calls per stream), at the first measured call.
    uint64_t fail_after = 0;
    if (fault_ == Fault::kServeFailsMidRun) {
      for (const ClientSpec& client : point.clients) {
        fail_after += client.streams.size() * static_cast<uint64_t>(point.warmup_calls);
      }
    }
    return ServeUdp(env, fail_after);
  }
  absl::StatusOr<std::unique_ptr<LoadChannel>> Connect(const LoadPoint& point,
                                                       uint16_t port) const override {
    if (fault_ == Fault::kClientDies) _exit(3);
    absl::StatusOr<ScopedFd> fd = ConnectLoopback(SOCK_DGRAM, port);
    if (!fd.ok()) return fd.status();
    if (absl::Status timeout = SetReceiveTimeout(fd->get(), kStopCheckMillis); !timeout.ok()) {
      return timeout;
    }
    return std::make_unique<UdpChannel>(*std::move(fd));
  }

 private:
  const Fault fault_;
};

// Two client processes: client0 runs Poisson "small" calls, client1 a closed-loop "bulk".
LoadPoint TwoClientPoint(int64_t duration_ms) {
  LoadPoint point;
  point.scenario = "test";
  point.label = "two clients";
  point.warmup_calls = 3;
  point.duration_ns = duration_ms * kMs;
  point.drain_ns = 2000 * kMs;
  point.max_message_bytes = 2048;
  StreamSpec small;
  small.name = "small";
  small.arrival = Arrival::kPoisson;
  small.rate_per_sec = 300;
  small.request_bytes = 64;
  small.response_bytes = 64;
  StreamSpec bulk;
  bulk.name = "bulk";
  bulk.arrival = Arrival::kClosedLoop;
  bulk.in_flight = 2;
  bulk.request_bytes = 100;
  bulk.response_bytes = 2000;
  point.clients.push_back(ClientSpec{"", {small}});
  point.clients.push_back(ClientSpec{"", {bulk}});
  return point;
}

TEST(RunLoadPoint, TwoClientsReportTheirStreamsAndEveryProcessesCpu) {
  const LoadPoint point = TwoClientPoint(300);
  absl::StatusOr<LoadReport> report = RunLoadPoint(FakeLoadSystem(), point);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(NoChildrenLeft());
  EXPECT_EQ(report->system, "fake");
  EXPECT_EQ(report->point.label, "two clients");
  ASSERT_EQ(report->clients.size(), 2u);
  const char* const names[] = {"small", "bulk"};
  for (size_t i = 0; i < 2; ++i) {
    const ClientReport& client = report->clients[i];
    ASSERT_EQ(client.streams.size(), 1u);
    const StreamReport& stream = client.streams[0];
    EXPECT_EQ(stream.name, names[i]);
    EXPECT_GT(stream.started, 0u);
    EXPECT_EQ(stream.calls.size() + stream.failed + stream.unfinished, stream.started);
    EXPECT_EQ(stream.failed, 0u) << stream.first_error;
    EXPECT_GT(stream.calls.size(), 0u);
    for (const CallRecord& call : stream.calls) {
      EXPECT_EQ(call.response_bytes, point.clients[i].streams[0].response_bytes);
    }
    // From the measuring start to the last start: a stream that started calls ran for a while.
    EXPECT_GT(client.measure_ns, 0);
    EXPECT_LE(client.measure_ns, point.duration_ns);
  }
  // Expect: CPU of the server, then each client, sampled around the measuring phase.
  ASSERT_EQ(report->cpu.size(), 3u);
  EXPECT_EQ(report->cpu[0].role, "server");
  EXPECT_EQ(report->cpu[1].role, "client0");
  EXPECT_EQ(report->cpu[2].role, "client1");
  // Each call that completed by its client's measure_ns was sent (client burn) and answered
  // (server burn) inside every sampled window: after the barrier opened and before that client's
  // (and so the server's) second sample. The samples count clock ticks, so each window may lose
  // up to two ticks.
  const int64_t tick_ns = 1000000000 / sysconf(_SC_CLK_TCK);
  int64_t server_burn_ns = 0;
  for (size_t i = 0; i < 2; ++i) {
    const ClientReport& client = report->clients[i];
    int64_t inside = 0;
    for (const CallRecord& call : client.streams[0].calls) {
      if (call.start_ns + call.latency_ns <= client.measure_ns) ++inside;
    }
    server_burn_ns += inside * kBurnPerCallNanos;
    EXPECT_GE(report->cpu[1 + i].cpu_ns, inside * kBurnPerCallNanos - 2 * tick_ns)
        << "client" << i << ": " << inside << " calls";
  }
  EXPECT_GE(report->cpu[0].cpu_ns, server_burn_ns - 2 * tick_ns);
  // The closed-loop stream keeps the server busy: its window cannot be empty.
  EXPECT_GT(report->cpu[0].cpu_ns, 0);
  // The machine's steal over the same window: /proc/stat is readable here, and the window
  // held busy CPU time, so the fraction is known and a fraction.
  ASSERT_TRUE(report->steal_fraction.has_value());
  EXPECT_GE(*report->steal_fraction, 0.0);
  EXPECT_LE(*report->steal_fraction, 1.0);
}

TEST(RunLoadPoint, ClientErrorIsThePointsErrorAndNoChildStays) {
  // client1's warmup fails; client0 is then waiting at the barrier and is killed.
  LoadPoint point = TwoClientPoint(300);
  point.clients[1].streams[0].request_bytes = kRefusedRequestBytes;
  absl::StatusOr<LoadReport> report = RunLoadPoint(FakeLoadSystem(), point);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(report.status()), StartsWith("client1: "));
  EXPECT_THAT(report.status().message(), HasSubstr("warmup call of stream 'bulk'"));
  EXPECT_THAT(report.status().message(), HasSubstr("refuses 13-byte requests"));
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(RunLoadPoint, ClientDyingWithoutAReportIsInternal) {
  absl::StatusOr<LoadReport> report =
      RunLoadPoint(FakeLoadSystem(FakeLoadSystem::Fault::kClientDies), TwoClientPoint(300));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(report.status().message(), HasSubstr("died without a report (exit status 3)"));
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(RunLoadPoint, ServerErrorBeforeReadyIsThePointsError) {
  absl::StatusOr<LoadReport> report = RunLoadPoint(
      FakeLoadSystem(FakeLoadSystem::Fault::kServeFailsBeforeReady), TwoClientPoint(300));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(report.status().message(), HasSubstr("server: no socket"));
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(RunLoadPoint, ServerErrorMidRunEndsThePointAtOnce) {
  // A 60 s measuring phase that the server's failure at its first measured call cuts short:
  // RunLoadPoint returns the server's error long before the clients would have finished.
  const int64_t begin = transport::MonotonicClock::Get()->NowNanos();
  absl::StatusOr<LoadReport> report =
      RunLoadPoint(FakeLoadSystem(FakeLoadSystem::Fault::kServeFailsMidRun), TwoClientPoint(60000));
  const int64_t elapsed = transport::MonotonicClock::Get()->NowNanos() - begin;
  EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(report.status().message(), HasSubstr("server: server broke"));
  EXPECT_LT(elapsed, 30000 * kMs);
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(RunLoadPoint, MalformedPointsAreRejectedBeforeForking) {
  LoadPoint repeated = TwoClientPoint(100);
  repeated.clients[1].streams[0].name = "small";
  absl::StatusOr<LoadReport> report = RunLoadPoint(FakeLoadSystem(), repeated);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("'small' used twice"));

  LoadPoint no_rate = TwoClientPoint(100);
  no_rate.clients[0].streams[0].rate_per_sec = 0;
  report = RunLoadPoint(FakeLoadSystem(), no_rate);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(report.status()), StartsWith("client0: stream 'small'"));

  LoadPoint no_clients = TwoClientPoint(100);
  no_clients.clients.clear();
  EXPECT_EQ(RunLoadPoint(FakeLoadSystem(), no_clients).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(NoChildrenLeft());
}

// ---- The report encoding ----

TEST(ClientReportEncoding, RoundTripsEveryField) {
  ClientReport report;
  report.measure_ns = 123456789;
  StreamReport a;
  a.name = "small";
  a.started = 5;
  a.failed = 1;
  a.unfinished = 2;
  a.late_starts = 3;
  a.first_error = "UNAVAILABLE: gone";
  a.calls = {{10, 2000, 64, 64}, {20, 3000, 64, 64}};
  StreamReport b;
  b.name = "bulk";
  report.streams = {a, b};
  absl::StatusOr<ClientReport> decoded =
      load_internal::DecodeClientReport(load_internal::EncodeClientReport(report));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->measure_ns, 123456789);
  ASSERT_EQ(decoded->streams.size(), 2u);
  const StreamReport& got = decoded->streams[0];
  EXPECT_EQ(got.name, "small");
  EXPECT_EQ(got.started, 5u);
  EXPECT_EQ(got.failed, 1u);
  EXPECT_EQ(got.unfinished, 2u);
  EXPECT_EQ(got.late_starts, 3u);
  EXPECT_EQ(got.first_error, "UNAVAILABLE: gone");
  ASSERT_EQ(got.calls.size(), 2u);
  EXPECT_EQ(got.calls[1].start_ns, 20);
  EXPECT_EQ(got.calls[1].latency_ns, 3000);
  EXPECT_EQ(got.calls[1].request_bytes, 64u);
  EXPECT_EQ(decoded->streams[1].name, "bulk");
  EXPECT_TRUE(decoded->streams[1].calls.empty());
}

TEST(ClientReportEncoding, CarriesAnErrorAndRejectsTruncatedInput) {
  absl::StatusOr<ClientReport> error = load_internal::DecodeClientReport(
      load_internal::EncodeClientReport(absl::AbortedError("stopped")));
  EXPECT_EQ(error.status(), absl::AbortedError("stopped"));

  ClientReport report;
  StreamReport stream;
  stream.name = "s";
  stream.calls.resize(10);
  report.streams.push_back(stream);
  const std::string bytes = load_internal::EncodeClientReport(report);
  for (size_t cut : {size_t{0}, size_t{5}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_EQ(load_internal::DecodeClientReport(bytes.substr(0, cut)).status().code(),
              absl::StatusCode::kInternal)
        << "cut at " << cut;
  }
}

// ---- /proc ----

TEST(ProcCpu, ParsesStatAfterTheLastParenthesis) {
  // The command name may hold spaces and ')'; utime and stime are fields 14 and 15.
  const std::string stat =
      "4242 (a) b (c)) S 1 2 3 0 -1 4194304 101 0 0 0 700 55 0 0 20 0 3 0 1742235 3133440 418";
  absl::StatusOr<int64_t> ticks = load_internal::ParseStatCpuTicks(stat);
  ASSERT_TRUE(ticks.ok()) << ticks.status();
  EXPECT_EQ(*ticks, 755);
  EXPECT_FALSE(load_internal::ParseStatCpuTicks("4242 (x) S 1 2").ok());
  EXPECT_FALSE(load_internal::ParseStatCpuTicks("no parenthesis").ok());
}

TEST(ProcCpu, ParsesInvoluntarySwitches) {
  absl::StatusOr<int64_t> switches = load_internal::ParseInvoluntarySwitches(
      "Name:\tx\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t42\n");
  ASSERT_TRUE(switches.ok()) << switches.status();
  EXPECT_EQ(*switches, 42);
  EXPECT_FALSE(load_internal::ParseInvoluntarySwitches("voluntary_ctxt_switches:\t1\n").ok());
}

TEST(ProcCpu, SamplesThisProcessWithAllItsThreads) {
  // A second thread uses 100 ms of CPU and exits between the samples: the process's total
  // still counts it (dead threads included), give or take the samples' clock ticks.
  absl::StatusOr<load_internal::CpuSample> before = load_internal::SampleProcessCpu(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  std::thread burner([] { BurnCpu(100 * kMs); });
  burner.join();
  absl::StatusOr<load_internal::CpuSample> after = load_internal::SampleProcessCpu(getpid());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->cpu_ns - before->cpu_ns, 50 * kMs);
  EXPECT_FALSE(load_internal::SampleProcessCpu(-1).ok());
}

}  // namespace
}  // namespace homarpc::bench
