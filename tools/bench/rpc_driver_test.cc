// Tests for tools/bench/rpc_driver.cc: the blocking and callback client loops, with fake
// callers and slots (no sockets): counts of warmup and measured calls, the number in flight,
// error and wrong-size handling.
#include "tools/bench/rpc_driver.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace homarpc::bench {
namespace {

using ::testing::Each;
using ::testing::Le;
using ::testing::HasSubstr;

Point MakePoint(int64_t concurrency, uint64_t warmup, uint64_t iterations) {
  Point point;
  point.scenario = "test";
  point.size = 64;
  point.request_bytes = 64;
  point.response_bytes = 64;
  point.concurrency = concurrency;
  point.warmup = warmup;
  point.iterations = iterations;
  point.duration_ns = int64_t{60} * 1000 * 1000 * 1000;
  return point;
}

// Answers every call with `response_bytes`, or fails the call numbered `fail_at` (1-based).
class FakeCaller final : public BlockingCaller {
 public:
  FakeCaller(std::atomic<uint64_t>* calls, uint64_t response_bytes, uint64_t fail_at = 0)
      : calls_(calls), response_bytes_(response_bytes), fail_at_(fail_at) {}
  absl::StatusOr<uint64_t> Call() override {
    const uint64_t n = calls_->fetch_add(1) + 1;
    if (n == fail_at_) return absl::UnavailableError("fake failure");
    return response_bytes_;
  }

 private:
  std::atomic<uint64_t>* const calls_;
  const uint64_t response_bytes_;
  const uint64_t fail_at_;
};

TEST(DriveBlocking, OneCallerMakesWarmupPlusIterationsCalls) {
  std::atomic<uint64_t> calls{0};
  const Point point = MakePoint(1, 10, 100);
  absl::StatusOr<ClientSamples> samples =
      DriveBlocking(point, [&] { return std::make_unique<FakeCaller>(&calls, 64); });
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(samples->latencies_ns.size(), 100u);
  EXPECT_EQ(calls.load(), 110u);
  EXPECT_EQ(samples->payload_bytes, 100u * 128);
  // The measuring phase spans its calls.
  EXPECT_GT(samples->elapsed_ns, 0);
  EXPECT_THAT(samples->latencies_ns, Each(Le(samples->elapsed_ns)));
}

TEST(DriveBlocking, SeveralCallersShareTheIterations) {
  std::atomic<uint64_t> calls{0};
  int made = 0;
  const Point point = MakePoint(4, 7, 1000);
  absl::StatusOr<ClientSamples> samples = DriveBlocking(point, [&] {
    ++made;
    return std::make_unique<FakeCaller>(&calls, 64);
  });
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(made, 4);
  EXPECT_EQ(samples->latencies_ns.size(), 1000u);
  EXPECT_EQ(calls.load(), 1007u);
}

TEST(DriveBlocking, CallErrorFailsThePoint) {
  std::atomic<uint64_t> calls{0};
  const Point point = MakePoint(2, 0, 1000);
  absl::StatusOr<ClientSamples> samples =
      DriveBlocking(point, [&] { return std::make_unique<FakeCaller>(&calls, 64, 50); });
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(calls.load(), 1000u);
}

TEST(DriveBlocking, WrongResponseSizeIsInternal) {
  std::atomic<uint64_t> calls{0};
  const Point point = MakePoint(1, 0, 10);
  absl::StatusOr<ClientSamples> samples =
      DriveBlocking(point, [&] { return std::make_unique<FakeCaller>(&calls, 63); });
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(samples.status().message(), HasSubstr("63"));
  EXPECT_EQ(calls.load(), 1u);
}

// Completes started calls on its own thread, in the order they were started, and records the
// most calls it ever saw in flight at once. With `first_batch` > 0 it completes nothing until
// that many calls are in flight (or it is destroyed), so a driver that keeps that many
// outstanding is seen doing so whatever the threads' timing.
class Completer {
 public:
  explicit Completer(size_t first_batch = 0)
      : first_batch_(first_batch), thread_([this] { Loop(); }) {}
  ~Completer() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    thread_.join();
  }
  void Started(CallbackDriver* driver, size_t index, absl::StatusOr<uint64_t> result) {
    absl::MutexLock lock(&mu_);
    queue_.push_back({driver, index, std::move(result)});
    max_in_flight_ = std::max(max_in_flight_, queue_.size());
  }
  size_t max_in_flight() {
    absl::MutexLock lock(&mu_);
    return max_in_flight_;
  }
  // Completions handed to a driver so far (counted as each is taken off the queue, before
  // Complete() runs, so a driver that has seen them all has seen this count).
  uint64_t delivered() {
    absl::MutexLock lock(&mu_);
    return delivered_;
  }

 private:
  struct Pending {
    CallbackDriver* driver;
    size_t index;
    absl::StatusOr<uint64_t> result;
  };
  void Loop() {
    while (true) {
      Pending next{nullptr, 0, 0};
      {
        absl::MutexLock lock(&mu_);
        auto batch = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return done_ || queue_.size() >= first_batch_;
        };
        // A failure guard, not a timer: a driver that never reaches the batch fails the test
        // (max_in_flight) instead of hanging it.
        if (delivered_ == 0) mu_.AwaitWithTimeout(absl::Condition(&batch), absl::Seconds(60));
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return done_ || !queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;
        next = std::move(queue_.front());
        queue_.pop_front();
        ++delivered_;
      }
      next.driver->Complete(next.index, std::move(next.result));
    }
  }

  const size_t first_batch_;
  absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  size_t max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class FakeSlot final : public AsyncSlot {
 public:
  FakeSlot(Completer* completer, CallbackDriver* driver, size_t index,
           std::atomic<uint64_t>* starts, uint64_t response_bytes, uint64_t fail_at)
      : completer_(completer),
        driver_(driver),
        index_(index),
        starts_(starts),
        response_bytes_(response_bytes),
        fail_at_(fail_at) {}
  void Start() override {
    const uint64_t n = starts_->fetch_add(1) + 1;
    if (n == fail_at_) {
      completer_->Started(driver_, index_, absl::UnavailableError("fake failure"));
    } else {
      completer_->Started(driver_, index_, response_bytes_);
    }
  }

 private:
  Completer* const completer_;
  CallbackDriver* const driver_;
  const size_t index_;
  std::atomic<uint64_t>* const starts_;
  const uint64_t response_bytes_;
  const uint64_t fail_at_;
};

TEST(DriveCallbacks, KeepsConcurrencyCallsInFlightAndRecordsIterations) {
  Completer completer(/*first_batch=*/8);
  std::atomic<uint64_t> starts{0};
  auto keep_alive = std::make_shared<int>(7);
  std::weak_ptr<int> watch = keep_alive;
  const Point point = MakePoint(8, 20, 500);
  absl::StatusOr<ClientSamples> samples =
      DriveCallbacks(point, std::move(keep_alive), [&](CallbackDriver* driver, size_t index) {
        return std::make_unique<FakeSlot>(&completer, driver, index, &starts, 64, 0);
      });
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(samples->latencies_ns.size(), 500u);
  EXPECT_EQ(samples->payload_bytes, 500u * 128);
  // Every slot restarts until the run stops: warmup + measured, plus at most one call per
  // slot that was in flight when the run stopped.
  EXPECT_GE(starts.load(), 520u);
  EXPECT_LE(starts.load(), 520u + 8);
  EXPECT_EQ(completer.max_in_flight(), 8u);
  EXPECT_TRUE(watch.expired()) << "keep_alive is released after the run";
}

TEST(DriveCallbacks, CallErrorFailsThePointAndDrains) {
  Completer completer;
  std::atomic<uint64_t> starts{0};
  const Point point = MakePoint(4, 0, 100000);
  absl::StatusOr<ClientSamples> samples =
      DriveCallbacks(point, nullptr, [&](CallbackDriver* driver, size_t index) {
        return std::make_unique<FakeSlot>(&completer, driver, index, &starts, 64, 30);
      });
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(starts.load(), 100u);
  // Drained: every call that was started had completed before DriveCallbacks returned.
  EXPECT_EQ(completer.delivered(), starts.load());
}

TEST(DriveCallbacks, WrongResponseSizeIsInternal) {
  Completer completer;
  std::atomic<uint64_t> starts{0};
  const Point point = MakePoint(2, 0, 10);
  absl::StatusOr<ClientSamples> samples =
      DriveCallbacks(point, nullptr, [&](CallbackDriver* driver, size_t index) {
        return std::make_unique<FakeSlot>(&completer, driver, index, &starts, 65, 0);
      });
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInternal);
}

// A slot that completes inside Start(), as a system does when a call fails before it is sent.
class InlineFailingSlot final : public AsyncSlot {
 public:
  InlineFailingSlot(CallbackDriver* driver, size_t index) : driver_(driver), index_(index) {}
  void Start() override { driver_->Complete(index_, absl::InternalError("not sent")); }

 private:
  CallbackDriver* const driver_;
  const size_t index_;
};

TEST(DriveCallbacks, CompletionInsideStartDoesNotDeadlock) {
  const Point point = MakePoint(3, 0, 10);
  absl::StatusOr<ClientSamples> samples =
      DriveCallbacks(point, nullptr, [&](CallbackDriver* driver, size_t index) {
        return std::make_unique<InlineFailingSlot>(driver, index);
      });
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(samples.status().message(), HasSubstr("not sent"));
}

}  // namespace
}  // namespace homarpc::bench
