// Tests for tools/bench/load_driver.cc: DriveStreams() over a fake in-process LoadChannel
// that completes calls on its own thread after a set delay (or inline, or never), fails or
// answers with the wrong size on request; and the ArrivalSchedule behind open-loop streams.
// Counts are checked against the arithmetic of the schedule (calls are never started before
// they are due), with bounds wide enough for a loaded machine.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/load.h"
#include "tools/bench/load_internal.h"
#include "tools/bench/workload.h"
#include "transport/clock.h"

namespace homarpc::bench {
namespace {

using load_internal::ArrivalSchedule;
using ::testing::HasSubstr;

constexpr int64_t kMs = 1000 * 1000;

int64_t NowNanos() { return transport::MonotonicClock::Get()->NowNanos(); }

// A LoadChannel without sockets. Every call gets `answer(n, request_bytes, response_bytes)`
// (n counts calls from 1; default: OK with response_bytes) — after `delay_ns` on the
// completer thread, inline inside StartCall when `complete_inline`, or never (until the
// channel is destroyed, then CANCELLED) when `hang(n)` says so.
class FakeChannel final : public LoadChannel {
 public:
  using Answer = std::function<absl::StatusOr<uint64_t>(uint64_t n, uint64_t request_bytes,
                                                        uint64_t response_bytes)>;
  struct Options {
    int64_t delay_ns = 0;
    bool complete_inline = false;
    Answer answer;
    std::function<bool(uint64_t n)> hang;

    static Options Delay(int64_t delay_ns) {
      Options options;
      options.delay_ns = delay_ns;
      return options;
    }
    static Options Answering(Answer answer, bool complete_inline = false) {
      Options options;
      options.answer = std::move(answer);
      options.complete_inline = complete_inline;
      return options;
    }
    static Options Hanging(std::function<bool(uint64_t n)> hang) {
      Options options;
      options.hang = std::move(hang);
      return options;
    }
  };

  explicit FakeChannel(Options options)
      : options_(std::move(options)), thread_([this] { Loop(); }) {}
  ~FakeChannel() override {
    std::vector<std::function<void(absl::StatusOr<uint64_t>)>> held;
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      held.swap(held_);
    }
    thread_.join();
    // Late completions, after DriveStreams returned: they must be harmless.
    for (auto& done : held) done(absl::CancelledError("channel destroyed"));
  }

  void StartCall(uint64_t request_bytes, uint64_t response_bytes, int64_t timeout_ns,
                 std::function<void(absl::StatusOr<uint64_t>)> done) override {
    uint64_t n = 0;
    {
      absl::MutexLock lock(&mu_);
      n = ++calls_;
      requests_.push_back(request_bytes);
      ++outstanding_;
      max_outstanding_ = std::max(max_outstanding_, outstanding_);
    }
    absl::StatusOr<uint64_t> result =
        options_.answer ? options_.answer(n, request_bytes, response_bytes) : response_bytes;
    if (options_.complete_inline) {
      {
        absl::MutexLock lock(&mu_);
        --outstanding_;
      }
      done(std::move(result));
      return;
    }
    absl::MutexLock lock(&mu_);
    if (options_.hang && options_.hang(n)) {
      held_.push_back(std::move(done));
    } else {
      queue_.push_back(Pending{NowNanos() + options_.delay_ns, std::move(done), std::move(result)});
    }
  }

  uint64_t calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int64_t max_outstanding() {
    absl::MutexLock lock(&mu_);
    return max_outstanding_;
  }
  std::vector<uint64_t> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  struct Pending {
    int64_t due_ns;
    std::function<void(absl::StatusOr<uint64_t>)> done;
    absl::StatusOr<uint64_t> result;
  };

  void Loop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&work));
      if (queue_.empty()) return;  // stopping
      const int64_t wait_ns = queue_.front().due_ns - NowNanos();
      if (wait_ns > 0) {
        mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Nanoseconds(wait_ns));
        continue;
      }
      Pending next = std::move(queue_.front());
      queue_.pop_front();
      --outstanding_;  // before done(): a restart inside it may start the next call
      mu_.Unlock();
      next.done(std::move(next.result));
      mu_.Lock();
    }
  }

  const Options options_;
  absl::Mutex mu_;
  uint64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> requests_ ABSL_GUARDED_BY(mu_);
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(absl::StatusOr<uint64_t>)>> held_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

LoadPoint MakePoint(int64_t duration_ms, int warmup_calls = 3) {
  LoadPoint point;
  point.scenario = "test";
  point.warmup_calls = warmup_calls;
  point.duration_ns = duration_ms * kMs;
  point.drain_ns = 5000 * kMs;
  return point;
}

StreamSpec ClosedLoop(const std::string& name, int in_flight) {
  StreamSpec stream;
  stream.name = name;
  stream.arrival = Arrival::kClosedLoop;
  stream.in_flight = in_flight;
  stream.request_bytes = 100;
  stream.response_bytes = 64;
  return stream;
}

StreamSpec OpenLoop(const std::string& name, Arrival arrival, double rate) {
  StreamSpec stream = ClosedLoop(name, 1);
  stream.arrival = arrival;
  stream.rate_per_sec = rate;
  return stream;
}

ClientSpec OneStream(StreamSpec stream) {
  ClientSpec client;
  client.streams.push_back(std::move(stream));
  return client;
}

// Every started call is accounted for exactly once, and the records match the stream.
void ExpectConsistent(const StreamReport& stream, const StreamSpec& spec, const LoadPoint& point) {
  EXPECT_EQ(stream.name, spec.name);
  EXPECT_EQ(stream.calls.size() + stream.failed + stream.unfinished, stream.started);
  for (const CallRecord& call : stream.calls) {
    EXPECT_GE(call.start_ns, 0);
    EXPECT_LT(call.start_ns, point.duration_ns);
    EXPECT_GE(call.latency_ns, 0);
    EXPECT_EQ(call.response_bytes, spec.response_bytes);
  }
}

// ---- ArrivalSchedule ----

TEST(ArrivalSchedule, FixedRateIsEvenlySpacedWithoutDrift) {
  ArrivalSchedule every_ms(Arrival::kFixedRate, 1000, 1);
  for (int64_t k = 1; k <= 5; ++k) EXPECT_EQ(every_ms.NextOffsetNanos(), k * kMs);
  // A period of 333333333.3 ns: the offsets do not accumulate the rounding.
  ArrivalSchedule thirds(Arrival::kFixedRate, 3, 1);
  thirds.NextOffsetNanos();
  thirds.NextOffsetNanos();
  EXPECT_EQ(thirds.NextOffsetNanos(), 1000 * kMs);
  for (int i = 0; i < 2999996; ++i) thirds.NextOffsetNanos();
  EXPECT_EQ(thirds.NextOffsetNanos(), int64_t{1000000} * 1000 * kMs);  // the 3,000,000th
}

TEST(ArrivalSchedule, PoissonIsReproducibleFromItsSeed) {
  ArrivalSchedule a(Arrival::kPoisson, 1000, 42);
  ArrivalSchedule b(Arrival::kPoisson, 1000, 42);
  ArrivalSchedule c(Arrival::kPoisson, 1000, 43);
  int same_as_c = 0;
  int64_t previous = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t offset = a.NextOffsetNanos();
    EXPECT_EQ(offset, b.NextOffsetNanos());
    if (offset == c.NextOffsetNanos()) ++same_as_c;
    EXPECT_GE(offset, previous);
    previous = offset;
  }
  EXPECT_LT(same_as_c, 10);
}

TEST(ArrivalSchedule, PoissonGapsAreExponentialWithTheRatesMean) {
  // Deterministic for a fixed seed: mean and standard deviation of an exponential are both
  // 1 / rate; 200000 draws land well within 2% and 3%.
  ArrivalSchedule schedule(Arrival::kPoisson, 5000, 7);
  constexpr int kDraws = 200000;
  double sum = 0;
  double sum_squares = 0;
  int64_t previous = 0;
  for (int i = 0; i < kDraws; ++i) {
    const int64_t offset = schedule.NextOffsetNanos();
    const double gap = static_cast<double>(offset - previous);
    previous = offset;
    sum += gap;
    sum_squares += gap * gap;
  }
  const double mean = sum / kDraws;
  const double stddev = std::sqrt(sum_squares / kDraws - mean * mean);
  EXPECT_NEAR(mean, 200000, 200000 * 0.02);
  EXPECT_NEAR(stddev, 200000, 200000 * 0.03);
}

TEST(ArrivalSchedule, PoissonGapsDoNotReuseTheSizeGeneratorsDraws) {
  // WorkloadSizes draws u from mt19937_64(seed); the arrivals must use other numbers.
  std::mt19937_64 sizes_rng(5);
  ArrivalSchedule schedule(Arrival::kPoisson, 1e9 / 1000.0, 5);  // mean gap 1000 ns
  double previous = 0;
  int equal = 0;
  for (int i = 0; i < 100; ++i) {
    const double u = static_cast<double>(sizes_rng() >> 11) * 0x1.0p-53;
    const double offset = static_cast<double>(schedule.NextOffsetNanos());
    const double same_u_gap = -std::log1p(-u) * 1000;
    if (std::abs((offset - previous) - same_u_gap) < 2) ++equal;
    previous = offset;
  }
  EXPECT_LT(equal, 10);
}

// ---- DriveStreams ----

TEST(DriveStreams, ClosedLoopKeepsExactlyInFlightCallsOutstanding) {
  FakeChannel channel(FakeChannel::Options::Delay(1 * kMs));
  const LoadPoint point = MakePoint(200, 5);
  const StreamSpec spec = ClosedLoop("bulk", 4);
  uint64_t warmup_seen = 0;
  absl::StatusOr<ClientReport> report =
      DriveStreams(point, OneStream(spec), channel, [&] { warmup_seen = channel.calls(); });
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->streams.size(), 1u);
  const StreamReport& stream = report->streams[0];
  ExpectConsistent(stream, spec, point);
  // Expect: warmup was one call at a time; then 4 in flight, never more, restarted by
  // completions (200 ms of 1 ms calls make far more than the first 4).
  EXPECT_EQ(warmup_seen, 5u);
  EXPECT_EQ(channel.max_outstanding(), 4);
  EXPECT_GT(stream.started, 4u);
  EXPECT_EQ(channel.calls(), 5 + stream.started);
  EXPECT_EQ(stream.failed, 0u);
  EXPECT_EQ(stream.unfinished, 0u);
  EXPECT_EQ(stream.late_starts, 0u);
  EXPECT_EQ(stream.calls.size(), stream.started);
  for (const CallRecord& call : stream.calls) {
    EXPECT_GE(call.latency_ns, 1 * kMs);  // the fake never answers before its delay
    EXPECT_EQ(call.request_bytes, 100u);
  }
  EXPECT_GT(report->measure_ns, 0);
  EXPECT_LE(report->measure_ns, point.duration_ns);
}

TEST(DriveStreams, FixedRateStartsRateTimesDurationCallsNeverEarly) {
  FakeChannel channel({});
  const LoadPoint point = MakePoint(300);
  const StreamSpec spec = OpenLoop("small", Arrival::kFixedRate, 1000);
  uint64_t at_measuring_done = 0;
  absl::StatusOr<ClientReport> report = DriveStreams(
      point, OneStream(spec), channel, [] {}, [&] { at_measuring_done = channel.calls(); });
  ASSERT_TRUE(report.ok()) << report.status();
  const StreamReport& stream = report->streams[0];
  ExpectConsistent(stream, spec, point);
  // 300 ms at 1000/s: 299 calls are due (the 300th falls on the end). The schedule is
  // absolute, so a slow machine starts late calls back to back rather than dropping them; the
  // lower bound only says the stream ran (a sanitized build on busy cores may start far fewer).
  EXPECT_GE(stream.started, 30u);
  EXPECT_LE(stream.started, 299u);
  EXPECT_EQ(stream.calls.size(), stream.started);
  // The k-th call (from 0) is due at (k + 1) ms and never starts before that.
  std::vector<int64_t> starts;
  for (const CallRecord& call : stream.calls) starts.push_back(call.start_ns);
  std::sort(starts.begin(), starts.end());
  for (size_t k = 0; k < starts.size(); ++k) {
    EXPECT_GE(starts[k], static_cast<int64_t>(k + 1) * kMs) << "call " << k;
  }
  // Open-loop streams stop starting before measuring_done runs.
  EXPECT_EQ(at_measuring_done, channel.calls());
  // It runs from the measuring start to the last start, which was due at `started` ms.
  EXPECT_GE(report->measure_ns, static_cast<int64_t>(stream.started) * kMs);
}

TEST(DriveStreams, PoissonStreamWithTheSameSeedDrawsTheSameSizes) {
  // A W3 Poisson stream: the measured calls' sizes are the stream's WorkloadSizes sequence
  // from its first draw (warmup used that first size and a separate source).
  StreamSpec spec = OpenLoop("w3", Arrival::kPoisson, 2000);
  spec.workload = "w3";
  spec.seed = 99;
  const LoadPoint point = MakePoint(100, 4);
  std::vector<std::vector<uint64_t>> measured;
  for (int run = 0; run < 2; ++run) {
    FakeChannel channel({});
    absl::StatusOr<ClientReport> report = DriveStreams(point, OneStream(spec), channel, [] {});
    ASSERT_TRUE(report.ok()) << report.status();
    ExpectConsistent(report->streams[0], spec, point);
    EXPECT_GT(report->streams[0].started, 0u);
    std::vector<uint64_t> requests = channel.requests();
    ASSERT_EQ(requests.size(), 4 + report->streams[0].started);
    measured.emplace_back(requests.begin() + 4, requests.end());
    absl::StatusOr<std::unique_ptr<SizeSource>> expected = MakeSizeSource(spec);
    ASSERT_TRUE(expected.ok());
    const uint64_t first = (*expected)->Next();
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(requests[i], first);
    EXPECT_EQ(measured.back()[0], first);
    for (size_t i = 1; i < measured.back().size(); ++i) {
      EXPECT_EQ(measured.back()[i], (*expected)->Next()) << "call " << i;
    }
  }
  const size_t common = std::min(measured[0].size(), measured[1].size());
  EXPECT_TRUE(std::equal(measured[0].begin(), measured[0].begin() + common, measured[1].begin()));
}

TEST(DriveStreams, CallsStillInFlightAfterTheDrainAreUnfinished) {
  LoadPoint point = MakePoint(100, 2);
  point.drain_ns = 50 * kMs;
  ClientSpec client = OneStream(OpenLoop("open", Arrival::kFixedRate, 200));
  client.streams.push_back(ClosedLoop("closed", 3));
  // Warmup: calls 1..4 (2 per stream) are answered; every measured call hangs until the
  // channel is destroyed.
  auto channel = std::make_unique<FakeChannel>(
      FakeChannel::Options::Hanging([](uint64_t n) { return n > 4; }));
  absl::StatusOr<ClientReport> report = DriveStreams(point, client, *channel, [] {});
  ASSERT_TRUE(report.ok()) << report.status();
  const StreamReport& opened = report->streams[0];
  const StreamReport& closed = report->streams[1];
  ExpectConsistent(opened, client.streams[0], point);
  ExpectConsistent(closed, client.streams[1], point);
  EXPECT_GT(opened.started, 0u);
  EXPECT_EQ(opened.unfinished, opened.started);
  EXPECT_TRUE(opened.calls.empty());
  EXPECT_EQ(closed.started, 3u);  // nothing completed, so nothing restarted
  EXPECT_EQ(closed.unfinished, 3u);
  // The held completions now run (CANCELLED) against the finished run: no effect, no crash.
  channel.reset();
}

TEST(DriveStreams, FailedCallsAreCountedWithTheFirstError) {
  std::atomic<bool> measuring{false};
  FakeChannel channel(FakeChannel::Options::Answering(
      [&](uint64_t n, uint64_t, uint64_t response_bytes) -> absl::StatusOr<uint64_t> {
        if (measuring.load() && n % 2 == 0) return absl::UnavailableError("fake failure");
        return response_bytes;
      }));
  const LoadPoint point = MakePoint(100);
  const StreamSpec spec = ClosedLoop("flaky", 2);
  absl::StatusOr<ClientReport> report =
      DriveStreams(point, OneStream(spec), channel, [&] { measuring = true; });
  ASSERT_TRUE(report.ok()) << report.status();  // failures during measuring do not end it
  const StreamReport& stream = report->streams[0];
  ExpectConsistent(stream, spec, point);
  EXPECT_GT(stream.failed, 0u);
  EXPECT_GT(stream.calls.size(), 0u);
  EXPECT_THAT(stream.first_error, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(stream.first_error, HasSubstr("fake failure"));
}

TEST(DriveStreams, WrongResponseSizeCountsAsFailedInternal) {
  std::atomic<bool> measuring{false};
  FakeChannel channel(FakeChannel::Options::Answering(
      [&](uint64_t, uint64_t, uint64_t response_bytes) -> absl::StatusOr<uint64_t> {
        return measuring.load() ? response_bytes + 1 : response_bytes;
      }));
  const LoadPoint point = MakePoint(50);
  const StreamSpec spec = OpenLoop("small", Arrival::kFixedRate, 500);
  absl::StatusOr<ClientReport> report =
      DriveStreams(point, OneStream(spec), channel, [&] { measuring = true; });
  ASSERT_TRUE(report.ok()) << report.status();
  const StreamReport& stream = report->streams[0];
  ExpectConsistent(stream, spec, point);
  EXPECT_GT(stream.started, 0u);
  EXPECT_EQ(stream.failed, stream.started);
  EXPECT_THAT(stream.first_error, HasSubstr("INTERNAL"));
  EXPECT_THAT(stream.first_error, HasSubstr("65 payload bytes, expected 64"));
}

TEST(DriveStreams, InlineCompletionsDoNotRecurse) {
  // Every measured call fails inside StartCall, and each completion restarts the stream: the
  // trampoline keeps the stack flat however many calls the run makes.
  std::atomic<bool> measuring{false};
  FakeChannel channel(FakeChannel::Options::Answering(
      [&](uint64_t, uint64_t, uint64_t response_bytes) -> absl::StatusOr<uint64_t> {
        if (measuring.load()) return absl::ResourceExhaustedError("too big");
        return response_bytes;
      },
      /*complete_inline=*/true));
  const LoadPoint point = MakePoint(100);
  ClientSpec client = OneStream(ClosedLoop("a", 2));
  client.streams.push_back(ClosedLoop("b", 1));
  absl::StatusOr<ClientReport> report =
      DriveStreams(point, client, channel, [&] { measuring = true; });
  ASSERT_TRUE(report.ok()) << report.status();
  for (size_t i = 0; i < 2; ++i) {
    const StreamReport& stream = report->streams[i];
    ExpectConsistent(stream, client.streams[i], point);
    EXPECT_GT(stream.started, 100u);  // far more than any stack of frames per call allows
    EXPECT_EQ(stream.failed, stream.started);
    EXPECT_THAT(stream.first_error, HasSubstr("too big"));
  }
}

TEST(DriveStreams, MixedStreamsShareTheChannel) {
  FakeChannel channel(FakeChannel::Options::Delay(200 * 1000));
  const LoadPoint point = MakePoint(150);
  ClientSpec client = OneStream(ClosedLoop("bulk", 2));
  client.streams[0].response_bytes = 8192;
  client.streams.push_back(OpenLoop("small", Arrival::kPoisson, 500));
  absl::StatusOr<ClientReport> report = DriveStreams(point, client, channel, [] {});
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->streams.size(), 2u);
  EXPECT_EQ(report->streams[0].name, "bulk");
  EXPECT_EQ(report->streams[1].name, "small");
  for (size_t i = 0; i < 2; ++i) {
    ExpectConsistent(report->streams[i], client.streams[i], point);
    EXPECT_GT(report->streams[i].started, 0u);
    EXPECT_EQ(report->streams[i].failed, 0u);
  }
  EXPECT_EQ(channel.calls(), 2 * 3 + report->streams[0].started + report->streams[1].started);
}

TEST(DriveStreams, MalformedSpecsAreRejectedBeforeAnyCall) {
  struct Case {
    const char* what;
    std::function<void(LoadPoint&, ClientSpec&)> spoil;
  };
  const std::vector<Case> cases = {
      {"rate 0", [](LoadPoint&, ClientSpec& c) { c.streams[0].rate_per_sec = 0; }},
      {"negative rate", [](LoadPoint&, ClientSpec& c) { c.streams[0].rate_per_sec = -5; }},
      {"NaN rate",
       [](LoadPoint&, ClientSpec& c) {
         c.streams[0].rate_per_sec = std::numeric_limits<double>::quiet_NaN();
       }},
      {"in_flight 0", [](LoadPoint&, ClientSpec& c) { c.streams[1].in_flight = 0; }},
      {"unknown workload", [](LoadPoint&, ClientSpec& c) { c.streams[0].workload = "w9"; }},
      {"repeated name", [](LoadPoint&, ClientSpec& c) { c.streams[1].name = "open"; }},
      {"empty name", [](LoadPoint&, ClientSpec& c) { c.streams[1].name = ""; }},
      {"no streams", [](LoadPoint&, ClientSpec& c) { c.streams.clear(); }},
      {"no duration", [](LoadPoint& p, ClientSpec&) { p.duration_ns = 0; }},
      {"negative drain", [](LoadPoint& p, ClientSpec&) { p.drain_ns = -1; }},
      {"negative warmup", [](LoadPoint& p, ClientSpec&) { p.warmup_calls = -1; }},
  };
  for (const Case& c : cases) {
    FakeChannel channel({});
    LoadPoint point = MakePoint(10);
    ClientSpec client = OneStream(OpenLoop("open", Arrival::kPoisson, 100));
    client.streams.push_back(ClosedLoop("closed", 1));
    c.spoil(point, client);
    bool barrier = false;
    absl::StatusOr<ClientReport> report =
        DriveStreams(point, client, channel, [&] { barrier = true; });
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_FALSE(barrier) << c.what;
    EXPECT_EQ(channel.calls(), 0u) << c.what;
  }
}

TEST(DriveStreams, UnknownWorkloadNamesTheStream) {
  FakeChannel channel({});
  StreamSpec spec = OpenLoop("sizes", Arrival::kPoisson, 100);
  spec.workload = "w9";
  absl::StatusOr<ClientReport> report =
      DriveStreams(MakePoint(10), OneStream(spec), channel, [] {});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("'sizes'"));
  EXPECT_THAT(report.status().message(), HasSubstr("w9"));
}

TEST(DriveStreams, WarmupFailureIsReturnedAndNothingIsMeasured) {
  FakeChannel channel(FakeChannel::Options::Answering(
      [](uint64_t n, uint64_t, uint64_t) -> absl::StatusOr<uint64_t> {
        if (n == 2) return absl::UnavailableError("server gone");
        return 64;
      }));
  bool barrier = false;
  absl::StatusOr<ClientReport> report = DriveStreams(
      MakePoint(10, 5), OneStream(ClosedLoop("bulk", 1)), channel, [&] { barrier = true; });
  EXPECT_EQ(report.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(report.status().message(), HasSubstr("warmup"));
  EXPECT_THAT(report.status().message(), HasSubstr("server gone"));
  EXPECT_FALSE(barrier);
  EXPECT_EQ(channel.calls(), 2u);  // one at a time: the failure stops the warmup
}

TEST(DriveStreams, WarmupWithTheWrongSizeIsInternal) {
  FakeChannel channel(FakeChannel::Options::Answering(
      [](uint64_t, uint64_t, uint64_t) -> absl::StatusOr<uint64_t> { return 10; }));
  absl::StatusOr<ClientReport> report =
      DriveStreams(MakePoint(10), OneStream(ClosedLoop("bulk", 1)), channel, [] {});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(report.status().message(), HasSubstr("expected 64"));
}

}  // namespace
}  // namespace homarpc::bench
