// rpc_driver: blocking and callback client loops for the RPC scenarios (see rpc_driver.h).
//
// DESIGN NOTES
// Blocking: each caller thread keeps its own latency vector, so the measured loop shares only
// one atomic counter (claiming an iteration) between threads; vectors are merged after join.
// Measuring starts once every caller has finished its warmup share (a mutex-and-condition
// rendezvous; the measuring start time is taken by the last one to arrive), so no caller's
// warmup overlaps another's measured calls.
//
// Callback: the completion path takes one mutex (the driver's) to record the sample and
// decide whether to restart; the restart (the system's Start(), which makes the next call)
// runs after the mutex is released, so a system that completes a call inside Start() does not
// deadlock, and a slow Start() does not serialise other slots' completions. Both systems pay
// this same cost per call. The end of the run is an absl::Notification: the last completion
// notifies it and touches nothing of the driver afterwards, and Notification's contract lets
// the waiter destroy it as soon as it observes the notification.
//
// Rejected: a dispatcher thread that issues calls from a queue of free slots — on two cores it
// competes with the systems' own threads, and it is not how callback clients are written.
#include "tools/bench/rpc_driver.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "transport/clock.h"

namespace homarpc::bench {
namespace {

int64_t NowNanos() { return transport::MonotonicClock::Get()->NowNanos(); }

absl::Status WrongSize(uint64_t got, uint64_t want) {
  return absl::InternalError(
      absl::StrCat("response carried ", got, " payload bytes, expected ", want));
}

// What the blocking callers share.
struct BlockingRun {
  explicit BlockingRun(const Point& p) : point(p) {}

  const Point point;
  std::atomic<uint64_t> claimed{0};  // measured iterations handed out
  std::atomic<bool> stop{false};     // a caller failed

  absl::Mutex mu;
  size_t warmed_up ABSL_GUARDED_BY(mu) = 0;  // callers done with their warmup share
  bool measuring ABSL_GUARDED_BY(mu) = false;
  int64_t measure_start_ns ABSL_GUARDED_BY(mu) = 0;
  absl::Status failure ABSL_GUARDED_BY(mu);

  void Fail(absl::Status status) {
    absl::MutexLock lock(&mu);
    if (failure.ok()) failure = std::move(status);
    stop.store(true, std::memory_order_relaxed);
  }
};

// What one caller thread measured.
struct CallerResult {
  std::vector<int64_t> latencies_ns;
  int64_t last_end_ns = 0;
};

// Checks one call's outcome; false (after failing the run) when it is not the expected echo.
bool CallSucceeded(BlockingRun& run, const absl::StatusOr<uint64_t>& result) {
  if (!result.ok()) {
    run.Fail(result.status());
    return false;
  }
  if (*result != run.point.response_bytes) {
    run.Fail(WrongSize(*result, run.point.response_bytes));
    return false;
  }
  return true;
}

void RunCaller(BlockingRun& run, BlockingCaller& caller, uint64_t warmup_share,
               size_t callers, CallerResult& out) {
  for (uint64_t i = 0; i < warmup_share && !run.stop.load(std::memory_order_relaxed); ++i) {
    if (!CallSucceeded(run, caller.Call())) break;
  }
  int64_t measure_start = 0;
  {
    absl::MutexLock lock(&run.mu);
    if (++run.warmed_up == callers) {
      run.measure_start_ns = NowNanos();
      run.measuring = true;
    }
    run.mu.Await(absl::Condition(&run.measuring));
    measure_start = run.measure_start_ns;
  }
  const Point& point = run.point;
  out.latencies_ns.reserve(std::min<uint64_t>(point.iterations / callers + 1, 10000000));
  out.last_end_ns = measure_start;
  while (!run.stop.load(std::memory_order_relaxed) &&
         run.claimed.fetch_add(1, std::memory_order_relaxed) < point.iterations) {
    const int64_t start = NowNanos();
    absl::StatusOr<uint64_t> result = caller.Call();
    const int64_t end = NowNanos();
    if (!CallSucceeded(run, result)) break;
    out.latencies_ns.push_back(end - start);
    out.last_end_ns = end;
    if (end - measure_start >= point.duration_ns) break;
  }
}

}  // namespace

absl::StatusOr<ClientSamples> DriveBlocking(
    const Point& point, const std::function<std::unique_ptr<BlockingCaller>()>& new_caller) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(point.concurrency, 1));
  std::vector<std::unique_ptr<BlockingCaller>> callers;
  for (size_t i = 0; i < n; ++i) {
    callers.push_back(new_caller());
    if (callers.back() == nullptr) return absl::InternalError("no caller for the client");
  }
  BlockingRun run(point);
  std::vector<CallerResult> results(n);
  auto share = [&](size_t i) { return point.warmup / n + (i < point.warmup % n ? 1 : 0); };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) {
    threads.emplace_back(
        [&, i] { RunCaller(run, *callers[i], share(i), n, results[i]); });
  }
  RunCaller(run, *callers[0], share(0), n, results[0]);
  for (std::thread& thread : threads) thread.join();

  absl::MutexLock lock(&run.mu);
  if (!run.failure.ok()) return run.failure;
  ClientSamples samples;
  int64_t end = run.measure_start_ns;
  for (CallerResult& result : results) {
    samples.latencies_ns.insert(samples.latencies_ns.end(), result.latencies_ns.begin(),
                                result.latencies_ns.end());
    end = std::max(end, result.last_end_ns);
  }
  samples.elapsed_ns = end - run.measure_start_ns;
  samples.payload_bytes =
      samples.latencies_ns.size() * (point.request_bytes + point.response_bytes);
  return samples;
}

CallbackDriver::CallbackDriver(const Point& point) : point_(point) {}

int64_t CallbackDriver::Now() { return NowNanos(); }

void CallbackDriver::StartSlot(size_t index) {
  start_ns_[index] = Now();
  slots_[index]->Start();
}

void CallbackDriver::Complete(size_t index, absl::StatusOr<uint64_t> response_bytes) {
  const int64_t now = Now();
  bool restart = false;
  bool drained = false;
  {
    absl::MutexLock lock(&mu_);
    if (!response_bytes.ok() || *response_bytes != point_.response_bytes) {
      if (failure_.ok()) {
        failure_ = response_bytes.ok() ? WrongSize(*response_bytes, point_.response_bytes)
                                       : response_bytes.status();
      }
      stopping_ = true;
    } else if (!stopping_) {
      ++completed_;
      if (measuring_) {
        samples_.latencies_ns.push_back(now - start_ns_[index]);
        last_completion_ns_ = now;
        if (samples_.latencies_ns.size() >= point_.iterations ||
            now - measure_start_ns_ >= point_.duration_ns) {
          stopping_ = true;
        }
      } else if (completed_ >= point_.warmup) {
        measuring_ = true;
        measure_start_ns_ = now;
        last_completion_ns_ = now;
      }
    }
    restart = !stopping_;
    if (!restart) drained = --in_flight_ == 0;
  }
  if (restart) {
    StartSlot(index);
  } else if (drained) {
    drained_.Notify();  // the last touch of this driver: the waiter may destroy it now
  }
}

absl::StatusOr<ClientSamples> DriveCallbacks(const Point& point, std::shared_ptr<void> keep_alive,
                                             const AsyncSlotFactory& new_slot) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(point.concurrency, 1));
  auto driver = std::make_unique<CallbackDriver>(point);
  for (size_t i = 0; i < n; ++i) {
    driver->slots_.push_back(new_slot(driver.get(), i));
    if (driver->slots_.back() == nullptr) return absl::InternalError("no slot for the client");
  }
  driver->start_ns_.assign(n, 0);
  {
    absl::MutexLock lock(&driver->mu_);
    driver->in_flight_ = static_cast<int64_t>(n);
    driver->samples_.latencies_ns.reserve(std::min<uint64_t>(point.iterations, 10000000));
    if (point.warmup == 0) {
      driver->measuring_ = true;
      driver->measure_start_ns_ = CallbackDriver::Now();
      driver->last_completion_ns_ = driver->measure_start_ns_;
    }
  }
  for (size_t i = 0; i < n; ++i) driver->StartSlot(i);

  if (!driver->drained_.WaitForNotificationWithTimeout(
          absl::Nanoseconds(point.duration_ns + kDriverGraceNanos))) {
    // Calls are still in flight and may complete at any time: leave everything they touch
    // alive (see rpc_driver.h). The client process exits once the failure is reported.
    static_cast<void>(driver.release());
    static_cast<void>(new std::shared_ptr<void>(std::move(keep_alive)));
    return absl::DeadlineExceededError("callback calls still in flight at the deadline");
  }
  absl::Status failure;
  ClientSamples samples;
  {
    absl::MutexLock lock(&driver->mu_);
    failure = driver->failure_;
    samples = std::move(driver->samples_);
    samples.elapsed_ns = driver->last_completion_ns_ - driver->measure_start_ns_;
  }
  samples.payload_bytes =
      samples.latencies_ns.size() * (point.request_bytes + point.response_bytes);
  driver->slots_.clear();
  driver.reset();
  keep_alive.reset();
  if (!failure.ok()) return failure;
  return samples;
}

}  // namespace homarpc::bench
