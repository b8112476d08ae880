// Tests for tools/bench/harness.cc: RunPoint() with fake systems that need no sockets, so each
// step of the fork/pipe protocol (port announcement, client samples, server extras, errors
// from either side) is checked on its own; and the stop flag's futex wait (child_process.h).
#include "tools/bench/harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/child_process.h"
#include "transport/clock.h"

namespace homarpc::bench {
namespace {

using ::testing::HasSubstr;

constexpr uint16_t kFakePort = 4242;

// Serves nothing: announces a made-up port and sleeps until the stop, as the real servers'
// main threads do (a point whose stop did not wake it would overrun and fail).
absl::Status ServeUntilStopped(ServerEnv& env) {
  env.Ready(kFakePort);
  env.AddExtra(Extra::Int("server_counter", 7));
  env.WaitForStop();
  return absl::OkStatus();
}

// The scheduler state of process `pid` ('S' = asleep), from /proc/<pid>/stat; '?' if unread.
char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}

class FakeSystem : public System {
 public:
  enum class Fault { kNone, kServeFailsBeforeReady, kServeNeverReady, kClientFails };
  // `client_nanos`: how long RunClient takes (the fake measures nothing in that time).
  explicit FakeSystem(Fault fault, int64_t client_nanos = 0)
      : fault_(fault), client_nanos_(client_nanos) {}

  std::string name() const override { return "fake"; }
  bool is_floor() const override { return false; }
  absl::Status Serve(const Point& point, ServerEnv& env) const override {
    if (fault_ == Fault::kServeFailsBeforeReady) return absl::UnavailableError("no socket");
    if (fault_ == Fault::kServeNeverReady) return absl::OkStatus();
    return ServeUntilStopped(env);
  }
  absl::StatusOr<ClientSamples> RunClient(const Point& point, uint16_t server_port) const override {
    if (fault_ == Fault::kClientFails) return absl::InvalidArgumentError("client gave up");
    if (server_port != kFakePort) return absl::InternalError("wrong port");
    if (client_nanos_ > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(client_nanos_));
    ClientSamples samples;
    samples.latencies_ns = {3000, 1000, 2000};
    samples.payload_bytes = 3 * (point.request_bytes + point.response_bytes);
    samples.elapsed_ns = 1'000'000;
    samples.extras.push_back(Extra::Int("client_counter", 5));
    return samples;
  }

 private:
  const Fault fault_;
  const int64_t client_nanos_;
};

Point SmallPoint() {
  Point point;
  point.scenario = "transport-echo";
  point.size = 100;
  point.request_bytes = 100;
  point.response_bytes = 100;
  point.iterations = 3;
  point.duration_ns = 1'000'000'000;
  return point;
}

TEST(Harness, StealIsReportedForAPointThatSpansClockTicks) {
  // /proc/stat counts every CPU's time, idle included, in clock ticks (usually 10 ms): a client
  // that takes 100 ms spans several on any machine, so the steal over the point is known.
  absl::StatusOr<Result> result =
      RunPoint(FakeSystem(FakeSystem::Fault::kNone, 100'000'000), SmallPoint());
  ASSERT_TRUE(result.ok()) << result.status();
  const Extra* steal = result->FindExtra("steal_pct");
  ASSERT_NE(steal, nullptr);
  double percent = -1;
  ASSERT_TRUE(absl::SimpleAtod(steal->text, &percent)) << steal->text;
  EXPECT_GE(percent, 0.0);
  EXPECT_LE(percent, 100.0);
}

TEST(Harness, ClientSamplesTravelBackThroughThePipe) {
  // Expect: the client saw the server's announced port, its 3 samples arrive sorted into
  // percentiles, and both sides' extras plus peak RSS are attached.
  absl::StatusOr<Result> result = RunPoint(FakeSystem(FakeSystem::Fault::kNone), SmallPoint());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->system, "fake");
  EXPECT_EQ(result->samples, 3u);
  EXPECT_DOUBLE_EQ(result->p50_us, 2.0);
  EXPECT_DOUBLE_EQ(result->p999_us, 3.0);
  EXPECT_DOUBLE_EQ(result->rps, 3000);             // 3 RPCs in 1 ms
  EXPECT_DOUBLE_EQ(result->goodput_gbps, 0.0048);  // 600 bytes * 8 / 1e6 ns
  ASSERT_NE(result->FindExtra("client_counter"), nullptr);
  ASSERT_NE(result->FindExtra("server_counter"), nullptr);
  EXPECT_EQ(result->FindExtra("server_counter")->text, "7");
  ASSERT_NE(result->FindExtra("client_peak_rss_kb"), nullptr);
  ASSERT_NE(result->FindExtra("server_peak_rss_kb"), nullptr);
  EXPECT_NE(result->FindExtra("server_peak_rss_kb")->text, "0");
}

TEST(Harness, ServerErrorBeforeReadyFailsThePoint) {
  absl::StatusOr<Result> result =
      RunPoint(FakeSystem(FakeSystem::Fault::kServeFailsBeforeReady), SmallPoint());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("server: no socket"));
}

TEST(Harness, ServeReturningWithoutReadyIsAnError) {
  absl::StatusOr<Result> result =
      RunPoint(FakeSystem(FakeSystem::Fault::kServeNeverReady), SmallPoint());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("without calling Ready"));
}

TEST(Harness, ClientErrorFailsThePointAndStopsTheServer) {
  // The server is still told to stop and reaped; RunPoint returns the client's error.
  absl::StatusOr<Result> result =
      RunPoint(FakeSystem(FakeSystem::Fault::kClientFails), SmallPoint());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("client: client gave up"));
}

// The waiting child sleeps in the kernel (no polling) until the parent's RequestStop wakes it,
// across the process boundary (a private futex would never be woken there).
TEST(SharedControl, WaitForStopSleepsUntilTheParentStops) {
  absl::StatusOr<child_process::SharedControlPage> page = child_process::SharedControlPage::Map();
  ASSERT_TRUE(page.ok()) << page.status();
  child_process::SharedControl* const control = page->get();
  const pid_t pid = child_process::ForkChild();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    control->WaitForStop();
    _exit(control->stop.load() != 0 ? 7 : 1);
  }
  child_process::Child child(pid);  // killed and reaped if an assertion ends the test early
  const transport::Clock* clock = transport::MonotonicClock::Get();
  const int64_t give_up = clock->NowNanos() + 10 * transport::kNanosPerSecond;
  // Asleep: state S. The loop ends as soon as the child has reached the futex.
  while (ProcessState(pid) != 'S' && clock->NowNanos() < give_up) std::this_thread::yield();
  ASSERT_EQ(ProcessState(pid), 'S');
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0) << "the child returned before the stop";
  control->RequestStop();
  // Bounded, so that a stop that wakes nobody fails here instead of hanging the test.
  const int64_t woken_by = clock->NowNanos() + 10 * transport::kNanosPerSecond;
  while (ProcessState(pid) == 'S' && clock->NowNanos() < woken_by) std::this_thread::yield();
  ASSERT_NE(ProcessState(pid), 'S') << "RequestStop did not wake the waiting child";
  EXPECT_EQ(child.Reap(), "exit status 7");
}

// A stop requested before the wait: the wait returns at once.
TEST(SharedControl, WaitForStopAfterTheStopReturnsAtOnce) {
  absl::StatusOr<child_process::SharedControlPage> page = child_process::SharedControlPage::Map();
  ASSERT_TRUE(page.ok()) << page.status();
  page->get()->RequestStop();
  page->get()->WaitForStop();
  EXPECT_NE(page->get()->stop.load(), 0);
}

}  // namespace
}  // namespace homarpc::bench
