// Executor implementations: the worker pool and the inline executor (executor.h).
//
// DESIGN NOTES
// - One queue, one mutex. A sync handler takes microseconds at least, so the pool is never
//   limited by the lock; what matters is the hand-off from the loop thread to a worker, which
//   sits on every sync call's latency path. Per-worker queues with stealing were rejected: more
//   code, and on the small machines this runs on (2-16 cores) they buy nothing measurable.
// - An idle worker spins before sleeping, but only one at a time: it watches `queued_` (an
//   atomic mirror of the queue length), so Run() only takes the mutex and pushes: no futex
//   wake-up when a worker is spinning. The others sleep at once: on a 2-core machine several
//   spinning workers took the CPU the loops need to receive the next request, and one spinner
//   already catches the next task; a burst wakes sleepers (below). A worker that stops
//   spinning always re-checks the queue under the mutex before it sleeps, so no task is
//   missed whatever `spinners_` said.
// - Run() signals a sleeper only when the queue holds more tasks than there are spinners (a
//   spinner will take one); a worker that takes a task and leaves more behind passes the
//   signal on, so a burst wakes as many workers as it needs.
// - Spinning yields the CPU as transport::YieldPolicy says: every 16 pauses while another
//   thread has been seen wanting this CPU (on a 2-core machine the thread that will submit
//   the next task, a loop or a client, may need the core we are spinning on), otherwise once
//   a spin has lasted YieldPolicy::kProbeIdleNanos, and every as long again (or once spins
//   since the last look add up to its budget), to look. Before session 16 it yielded every
//   256 pauses whatever it had seen: a loopback 64 B call through the pool took 30-32 us in
//   its good placement against 21-24 us with every 16 when contended (docs/rpc-benchmarks.md,
//   session 16).
// - Shutdown: `stopping_` makes workers exit once the queue is empty (they drain it first);
//   Run() after that runs the task on the caller, so every task still runs exactly once.
//
// Lock order: shutdown_mu_ -> mu_.
#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "transport/sched.h"
#include "transport/clock.h"

namespace homarpc::internal {
namespace {

// An idle worker's spin checks the queue on every pause and, every kPausesPerRound pauses,
// the clock and whether to yield (transport::YieldPolicy).
constexpr uint32_t kPausesPerRound = 16;

class InlineExecutor final : public Executor {
 public:
  void Run(Task task) override { std::move(task)(); }
  void Shutdown() override {}
  int num_threads() const override { return 0; }
  int sleeping_threads() const override { return 0; }
};

class WorkerPool final : public Executor {
 public:
  WorkerPool(int threads, int64_t spin_nanos) : spin_nanos_(spin_nanos), num_threads_(threads) {
    threads_.reserve(threads);
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { WorkerMain(); });
  }
  ~WorkerPool() override { Shutdown(); }

  void Run(Task task) override {
    mu_.Lock();
    if (stopping_) {
      mu_.Unlock();
      std::move(task)();
      return;
    }
    queue_.push_back(std::move(task));
    queued_.store(queue_.size(), std::memory_order_release);
    NoteArrival();
    const bool wake =
        sleepers_ > 0 &&
        queue_.size() > static_cast<size_t>(spinners_.load(std::memory_order_acquire));
    mu_.Unlock();
    if (wake) cv_.Signal();
  }

  void Shutdown() override {
    absl::MutexLock shutdown_lock(&shutdown_mu_);
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      stop_spinning_.store(true, std::memory_order_release);
    }
    cv_.SignalAll();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  int num_threads() const override { return num_threads_; }

  int sleeping_threads() const override {
    absl::MutexLock lock(&mu_);
    return sleepers_;
  }

 private:
  void WorkerMain() {
    // Handlers are mostly short, and a request waiting for a worker waits on the scheduler: a
    // short slice lets a woken worker run ahead of a long handler (transport/sched.h).
    transport::RequestShortSlice();
    transport::NameThisThread("hrpc-worker");
    transport::YieldPolicy yield_policy;  // this worker's, across its spins
    for (;;) {
      if (spin_nanos_ > 0 && queued_.load(std::memory_order_acquire) == 0) {
        MaybeSpin(&yield_policy);
      }
      mu_.Lock();
      while (queue_.empty() && !stopping_) {
        ++sleepers_;
        cv_.Wait(&mu_);
        --sleepers_;
      }
      if (queue_.empty()) {  // stopping, and nothing left to drain
        mu_.Unlock();
        return;
      }
      Task task = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(queue_.size(), std::memory_order_release);
      const bool pass_on =
          sleepers_ > 0 &&
          queue_.size() > static_cast<size_t>(spinners_.load(std::memory_order_acquire));
      mu_.Unlock();
      if (pass_on) cv_.Signal();
      std::move(task)();
      last_done_nanos_.store(transport::MonotonicClock::Get()->NowNanos(),
                             std::memory_order_relaxed);
    }
  }

  // Keeps the average idle time before each submitted task (weight 1/8), and whether it is
  // short enough for an idle worker's spin to catch the next task: at a low, steady rate (a
  // task every few hundred microseconds) every spin would end in a sleep, and its CPU time is
  // pure waste (the same rule as the transport loops' SpinPolicy, transport/loop.h). The idle
  // time runs from the later of the previous task's arrival and a worker's last finished task,
  // so neither a handler's own run time nor a worker's wake-up counts: measured between
  // arrivals alone, a blocking caller's next request came one whole call later, wake-up
  // included, and a pool whose calls had once passed 50 us stopped spinning and stayed
  // stopped, each call paying a wake-up (docs/rpc-benchmarks.md, sessions 17 and 18). Each
  // gap counts as at most twice the spin time, as in SpinPolicy: one long pause must not keep
  // the pool asleep through the next burst.
  void NoteArrival() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t now = transport::MonotonicClock::Get()->NowNanos();
    if (last_arrival_nanos_ != 0) {
      const int64_t since =
          std::max(last_arrival_nanos_, last_done_nanos_.load(std::memory_order_relaxed));
      const int64_t gap = std::clamp<int64_t>(now - since, 0, 2 * spin_nanos_);
      gap_average_nanos_ += (gap - gap_average_nanos_) / 8;
    }
    last_arrival_nanos_ = now;
    spin_pays_.store(gap_average_nanos_ <= spin_nanos_, std::memory_order_relaxed);
  }

  // Unless another worker spins already, or tasks come too far apart for a spin to pay:
  // returns when a task may be queued, the spin time is up, or the pool is stopping.
  void MaybeSpin(transport::YieldPolicy* yield_policy) {
    if (!spin_pays_.load(std::memory_order_relaxed)) return;
    int none = 0;
    if (!spinners_.compare_exchange_strong(none, 1, std::memory_order_acq_rel)) return;
    const transport::MonotonicClock* clock = transport::MonotonicClock::Get();
    const int64_t spin_start = clock->NowNanos();
    const int64_t deadline = spin_start + spin_nanos_;
    uint32_t pauses = 0;
    while (queued_.load(std::memory_order_acquire) == 0 &&
           !stop_spinning_.load(std::memory_order_acquire)) {
      CpuRelax();
      if (++pauses % kPausesPerRound != 0) continue;
      const int64_t now = clock->NowNanos();
      if (now >= deadline) break;
      yield_policy->MaybeYield(now, spin_start);
    }
    spinners_.fetch_sub(1, std::memory_order_acq_rel);
  }

  const int64_t spin_nanos_;
  const int num_threads_;
  std::vector<std::thread> threads_;  // written only by the constructor and Shutdown()

  absl::Mutex shutdown_mu_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t last_arrival_nanos_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t gap_average_nanos_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> spin_pays_{true};  // NoteArrival's verdict, read by idle workers
  std::atomic<int64_t> last_done_nanos_{0};  // when a worker last finished a task
  // Read by spinners without the mutex.
  std::atomic<size_t> queued_{0};
  std::atomic<int> spinners_{0};  // 0 or 1
  std::atomic<bool> stop_spinning_{false};
};

}  // namespace

std::unique_ptr<Executor> NewInlineExecutor() { return std::make_unique<InlineExecutor>(); }

std::unique_ptr<Executor> NewWorkerPool(int threads, int64_t spin_nanos) {
  if (threads <= 0) {
    threads = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  }
  return std::make_unique<WorkerPool>(threads, spin_nanos);
}

}  // namespace homarpc::internal
