// Tests of runtime/executor.h: the worker pool and the inline executor.
#include "runtime/executor.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace homarpc::internal {
namespace {

constexpr absl::Duration kBound = absl::Seconds(30);

TEST(ExecutorTest, WorkerPool_EveryTaskRunsExactlyOnceFromManySubmitters) {
  constexpr int kSubmitters = 4;
  constexpr int kTasksEach = 2000;
  std::vector<std::atomic<int>> runs(kSubmitters * kTasksEach);
  std::unique_ptr<Executor> pool = NewWorkerPool(3, /*spin_nanos=*/20000);
  EXPECT_EQ(pool->num_threads(), 3);
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&, s] {
      for (int i = 0; i < kTasksEach; ++i) {
        pool->Run([&runs, index = s * kTasksEach + i] {
          runs[index].fetch_add(1, std::memory_order_relaxed);
        });
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  pool->Shutdown();  // drains the queue
  for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << "task " << i;
}

TEST(ExecutorTest, WorkerPool_ShutdownDrainsQueuedTasks) {
  std::unique_ptr<Executor> pool = NewWorkerPool(1, /*spin_nanos=*/0);
  absl::Notification blocker_running;
  absl::Notification unblock;
  std::atomic<int> ran{0};
  pool->Run([&] {
    blocker_running.Notify();
    ASSERT_TRUE(unblock.WaitForNotificationWithTimeout(kBound));
    ++ran;
  });
  ASSERT_TRUE(blocker_running.WaitForNotificationWithTimeout(kBound));
  for (int i = 0; i < 100; ++i) pool->Run([&] { ++ran; });  // queued behind the blocker
  EXPECT_EQ(ran.load(), 0);
  std::thread releaser([&] { unblock.Notify(); });
  pool->Shutdown();
  releaser.join();
  EXPECT_EQ(ran.load(), 101);
}

TEST(ExecutorTest, WorkerPool_RunAfterShutdownRunsOnTheCaller) {
  std::unique_ptr<Executor> pool = NewWorkerPool(2, /*spin_nanos=*/0);
  pool->Shutdown();
  pool->Shutdown();  // idempotent
  std::thread::id ran_on;
  pool->Run([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ExecutorTest, WorkerPool_BlockingTasksRunInParallel) {
  // Task A waits for task B: only possible when two workers run at once (a sleeping worker
  // must be woken for B while A blocks).
  std::unique_ptr<Executor> pool = NewWorkerPool(2, /*spin_nanos=*/0);
  absl::Notification b_ran;
  std::atomic<bool> a_saw_b{false};
  absl::Notification a_done;
  pool->Run([&] {
    a_saw_b = b_ran.WaitForNotificationWithTimeout(kBound);
    a_done.Notify();
  });
  pool->Run([&] { b_ran.Notify(); });
  ASSERT_TRUE(a_done.WaitForNotificationWithTimeout(kBound));
  EXPECT_TRUE(a_saw_b.load());
}

TEST(ExecutorTest, WorkerPool_SpinningWorkersPickUpTasks) {
  std::unique_ptr<Executor> pool = NewWorkerPool(2, /*spin_nanos=*/1'000'000);
  for (int i = 0; i < 200; ++i) {
    absl::Notification done;
    pool->Run([&] { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kBound)) << "task " << i;
  }
}

// Waits (bounded) until `n` idle workers of `pool` sleep.
bool WaitSleeping(const Executor& pool, int n) {
  const absl::Time give_up = absl::Now() + kBound;
  while (pool.sleeping_threads() != n && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return pool.sleeping_threads() == n;
}

TEST(ExecutorTest, WorkerPool_AtMostOneIdleWorkerSpins) {
  // A spin time far beyond the test: every idle worker but one must go to sleep at once.
  std::unique_ptr<Executor> pool = NewWorkerPool(4, /*spin_nanos=*/int64_t{600} * 1'000'000'000);
  ASSERT_TRUE(WaitSleeping(*pool, 3)) << pool->sleeping_threads() << " asleep";
  // The spinner takes a task without anyone being woken, then spins (or sleeps) again.
  for (int i = 0; i < 20; ++i) {
    absl::Notification done;
    pool->Run([&] { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kBound)) << "task " << i;
  }
  ASSERT_TRUE(WaitSleeping(*pool, 3)) << pool->sleeping_threads() << " asleep";
  pool->Shutdown();  // stops the spinner too
}

TEST(ExecutorTest, WorkerPool_BurstWakesSleepersWhileOneSpins) {
  // Four tasks that each wait for all four to have started: only possible when the sleepers
  // are woken for the tasks the one spinner cannot take.
  std::unique_ptr<Executor> pool = NewWorkerPool(4, /*spin_nanos=*/int64_t{600} * 1'000'000'000);
  ASSERT_TRUE(WaitSleeping(*pool, 3));
  absl::Mutex mu;
  int started = 0;
  int all_met = 0;
  for (int i = 0; i < 4; ++i) {
    pool->Run([&] {
      absl::MutexLock lock(&mu);
      ++started;
      if (mu.AwaitWithTimeout(absl::Condition(
                                  +[](int* n) { return *n == 4; }, &started),
                              kBound)) {
        ++all_met;
      }
    });
  }
  pool->Shutdown();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(all_met, 4);
}

// A blocking caller's pattern: each task runs 100 us, and the next comes 10 us after it ends.
// Counted between arrivals the gaps are 110 us, over the 50 us spin, and the worker would
// sleep after every task (and be woken for the next); counted from the end of the last task
// they are 10 us, and the worker spins through them. Checked by whether it sleeps 5 us after
// each task: a spinner only sleeps when the machine keeps it off its CPU past its spin.
// Returns how many of `tasks` tasks the worker slept after.
int SleepsBetweenLongTasks(int tasks) {
  std::unique_ptr<Executor> pool = NewWorkerPool(1, /*spin_nanos=*/50'000);
  const auto busy_for = [](absl::Duration d) {
    const absl::Time until = absl::Now() + d;
    while (absl::Now() < until) {
    }
  };
  int asleep = 0;
  for (int i = 0; i < tasks; ++i) {
    std::atomic<bool> done{false};
    pool->Run([&] {
      busy_for(absl::Microseconds(100));
      done.store(true, std::memory_order_release);
    });
    while (!done.load(std::memory_order_acquire)) {
    }
    busy_for(absl::Microseconds(5));
    if (pool->sleeping_threads() == 1) ++asleep;
    busy_for(absl::Microseconds(5));
  }
  return asleep;
}

TEST(ExecutorTest, WorkerPool_SpinsThroughShortIdleGapsBetweenLongTasks) {
  // This binary runs alone (tests/CMakeLists.txt), and a busy machine gets three tries: with
  // gaps measured between arrivals every try sleeps after ~all of the tasks.
  constexpr int kTasks = 300;
  int asleep = kTasks;
  for (int attempt = 0; attempt < 3 && asleep > kTasks / 4; ++attempt) {
    asleep = SleepsBetweenLongTasks(kTasks);
  }
  EXPECT_LE(asleep, kTasks / 4) << "the worker slept after " << asleep << " of " << kTasks
                                << " tasks";
}

TEST(ExecutorTest, WorkerPool_DefaultThreadCountIsAtLeastTwo) {
  std::unique_ptr<Executor> pool = NewWorkerPool(0, /*spin_nanos=*/0);
  EXPECT_GE(pool->num_threads(), 2);
}

TEST(ExecutorTest, Inline_RunsOnTheCallingThreadAtOnce) {
  std::unique_ptr<Executor> executor = NewInlineExecutor();
  EXPECT_EQ(executor->num_threads(), 0);
  EXPECT_EQ(executor->sleeping_threads(), 0);
  std::thread::id ran_on;
  executor->Run([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  executor->Shutdown();
}

}  // namespace
}  // namespace homarpc::internal
