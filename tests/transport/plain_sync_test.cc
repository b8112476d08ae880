// Tests for PlainMutex, PlainCondVar and PlainNotification (transport/plain_sync.h).
#include "transport/plain_sync.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace homarpc::transport {
namespace {

TEST(PlainMutexTest, ExcludesOtherThreads) {
  PlainMutex mu;
  // Two fields updated non-atomically: a lock that let two threads in would lose increments
  // or let a reader see them differ.
  int64_t a = 0;
  int64_t b = 0;
  bool torn = false;
  constexpr int kThreads = 4;
  constexpr int kRounds = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        PlainMutexLock lock(&mu);
        if (a != b) torn = true;
        ++a;
        ++b;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(a, int64_t{kThreads} * kRounds);
  EXPECT_EQ(b, a);
  EXPECT_FALSE(torn);
}

// A producer hands values one at a time to a consumer that waits for each under the mutex: a
// Wait() that did not release the mutex would deadlock (the producer could never set the
// slot), and one that returned without the mutex held would race on it (TSan/ASan builds) or
// lose a value.
TEST(PlainCondVarTest, WaitReleasesTheMutexAndReturnsWithItHeld) {
  PlainMutex mu;
  PlainCondVar cv;
  int64_t slot = 0;  // 0: empty
  int64_t sum = 0;
  constexpr int kValues = 2000;
  std::thread consumer([&] {
    for (int i = 0; i < kValues; ++i) {
      PlainMutexLock lock(&mu);
      while (slot == 0) cv.Wait(&mu);
      sum += slot;
      slot = 0;
      cv.SignalAll();
    }
  });
  for (int i = 1; i <= kValues; ++i) {
    PlainMutexLock lock(&mu);
    while (slot != 0) cv.Wait(&mu);
    slot = i;
    cv.SignalAll();
  }
  consumer.join();
  EXPECT_EQ(sum, int64_t{kValues} * (kValues + 1) / 2);
}

TEST(PlainCondVarTest, WaitWithTimeoutTimesOutWhenNobodySignals) {
  PlainMutex mu;
  PlainCondVar cv;
  PlainMutexLock lock(&mu);
  EXPECT_TRUE(cv.WaitWithTimeout(&mu, 0));
  EXPECT_TRUE(cv.WaitWithTimeout(&mu, -5));
  const auto start = std::chrono::steady_clock::now();
  // Spurious wake-ups may end a wait early; a timed-out one has waited its time.
  bool timed_out = false;
  for (int i = 0; i < 100 && !timed_out; ++i) timed_out = cv.WaitWithTimeout(&mu, 2000000);
  EXPECT_TRUE(timed_out);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2));
}

TEST(PlainCondVarTest, WaitWithTimeoutReturnsFalseWhenSignalled) {
  PlainMutex mu;
  PlainCondVar cv;
  bool waiting = false;
  bool ready = false;
  bool timed_out = true;
  std::thread waiter([&] {
    PlainMutexLock lock(&mu);
    waiting = true;  // the mutex is held from here until the wait releases it
    // Forever (the longest timeout there is, which the clock arithmetic must not overflow
    // into a wait that ends at once): only the signal ends it.
    while (!ready) timed_out = cv.WaitWithTimeout(&mu, std::numeric_limits<int64_t>::max());
  });
  for (bool signalled = false; !signalled;) {
    {
      PlainMutexLock lock(&mu);
      if (waiting) {  // so the waiter is inside WaitWithTimeout
        ready = true;
        cv.Signal();
        signalled = true;
      }
    }
    std::this_thread::yield();
  }
  waiter.join();
  EXPECT_FALSE(timed_out);
}

TEST(PlainNotificationTest, StartsUnnotifiedAndStaysNotified) {
  PlainNotification n;
  EXPECT_FALSE(n.HasBeenNotified());
  n.Notify();
  EXPECT_TRUE(n.HasBeenNotified());
  n.WaitForNotification();  // returns at once
  EXPECT_TRUE(n.HasBeenNotified());
}

// The waiter is told to wait before the value is written: a WaitForNotification() that did
// not wait would read it before the notifier wrote it.
TEST(PlainNotificationTest, WaitForNotificationWaitsForNotify) {
  for (int round = 0; round < 200; ++round) {
    PlainNotification n;
    std::atomic<bool> waiting{false};
    int64_t value = 0;  // plain: ordered only by the notification
    int64_t seen = -1;
    std::thread waiter([&] {
      waiting.store(true, std::memory_order_release);
      n.WaitForNotification();
      seen = value;
    });
    while (!waiting.load(std::memory_order_acquire)) std::this_thread::yield();
    value = round + 1;
    n.Notify();
    waiter.join();
    ASSERT_EQ(seen, round + 1) << "round " << round;
  }
}

TEST(PlainNotificationDeathTest, NotifyingTwiceIsABug) {
#ifdef NDEBUG
  GTEST_SKIP() << "the check is an assert, compiled out with NDEBUG";
#else
  PlainNotification n;
  n.Notify();
  EXPECT_DEATH(n.Notify(), "notified twice");
#endif
}

}  // namespace
}  // namespace homarpc::transport
