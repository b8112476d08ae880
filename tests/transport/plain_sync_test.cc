// Tests for PlainMutex and PlainNotification (transport/plain_sync.h).
#include "transport/plain_sync.h"

#include <atomic>
#include <cstdint>
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
