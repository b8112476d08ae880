// PlainMutex, PlainCondVar and PlainNotification: a std::mutex carrying Abseil's thread-safety
// annotations, a condition variable for it, and a one-shot event with absl::Notification's
// contract, for the locks every RPC passes through: per-call state (a ClientContext's
// cancellation, a callback call's OnCancel protocol, a blocking call's outcome) and the short
// critical sections of long-lived objects that each call enters (a loop's posted tasks and
// direct-send routes, the lent-socket and message pools, a server's call table).
//
// Why not absl::Mutex and absl::Notification, as ../shared/STYLE.md asks: the distribution
// builds Abseil without NDEBUG, which turns its deadlock detector on for every absl::Mutex
// (an absl::Notification holds one). Each Lock() then takes a process-wide spinlock to look
// the mutex up in a lock graph, and each destructor takes it again to remove the mutex from
// the graph, locked or not. A blocking 64 B unary call took ~11 such locks and destroyed four
// such mutexes; creating a mutex and locking it inside another costs 160 ns here with the
// detector against 32 ns without, and the detector's spinlock is shared by every thread of
// the process. These critical sections are a few loads and stores (the lent-socket pool also
// creates a socket under its lock, once per socket) and never wait on a condition, so a plain
// futex lock is all they need. The server's call table (two locks a call) waits on
// conditions too, for its deadline timer and for a shutdown's drain, so it has PlainCondVar;
// unlike absl::Mutex::Await, a waiter there is woken only by an explicit Signal from the code
// that changed what it waits for. The worker pool's mutex and those off the call path stay
// absl::Mutex. Measured in docs/rpc-benchmarks.md (sessions 16 and 17).
//
// PlainMutex keeps the annotations, so ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED and
// the *Locked conventions read, and check under clang's -Wthread-safety, as with absl::Mutex.
#ifndef HOMARPC_TRANSPORT_PLAIN_SYNC_H_
#define HOMARPC_TRANSPORT_PLAIN_SYNC_H_

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace homarpc::transport {

class ABSL_LOCKABLE PlainMutex {
 public:
  PlainMutex() = default;
  PlainMutex(const PlainMutex&) = delete;
  PlainMutex& operator=(const PlainMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class PlainCondVar;
  std::mutex mu_;
};

// A condition variable for PlainMutex, shaped like absl::CondVar: the waiter holds `mu`, which
// is released while it sleeps and held again when it returns. Wakes may be spurious, so a
// waiter re-checks its condition in a loop.
class PlainCondVar {
 public:
  PlainCondVar() = default;
  PlainCondVar(const PlainCondVar&) = delete;
  PlainCondVar& operator=(const PlainCondVar&) = delete;

  void Wait(PlainMutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held, by the caller
  }
  // Returns true when the wait timed out (`nanos` on the monotonic clock; <= 0 returns at once),
  // as absl::CondVar::WaitWithTimeout does. Waits longer than kMaxWaitNanos (~36 years) are cut
  // to it: the library adds the timeout to the clock's reading unchecked.
  static constexpr int64_t kMaxWaitNanos = int64_t{1} << 60;
  bool WaitWithTimeout(PlainMutex* mu, int64_t nanos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (nanos <= 0) return true;
    if (nanos > kMaxWaitNanos) nanos = kMaxWaitNanos;
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out =
        cv_.wait_for(lock, std::chrono::nanoseconds(nanos)) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// Holds `mu` for the scope, like absl::MutexLock.
class ABSL_SCOPED_LOCKABLE PlainMutexLock {
 public:
  explicit PlainMutexLock(PlainMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~PlainMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  PlainMutexLock(const PlainMutexLock&) = delete;
  PlainMutexLock& operator=(const PlainMutexLock&) = delete;

 private:
  PlainMutex* const mu_;
};

// A one-shot event with absl::Notification's contract: Notify() once, from any thread;
// HasBeenNotified() is a single atomic load (fit for a spinning waiter); the object may be
// destroyed as soon as the waiter has seen the notification, even while Notify() is still
// returning (the destructor waits for it to leave).
class PlainNotification {
 public:
  PlainNotification() = default;
  PlainNotification(const PlainNotification&) = delete;
  PlainNotification& operator=(const PlainNotification&) = delete;
  ~PlainNotification() { std::lock_guard<std::mutex> wait_for_notify_to_leave(mu_); }

  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    assert(!notified_.load(std::memory_order_relaxed) && "PlainNotification notified twice");
    notified_.store(true, std::memory_order_release);
    cv_.notify_all();  // no system call when nobody sleeps
  }
  bool HasBeenNotified() const { return notified_.load(std::memory_order_acquire); }
  void WaitForNotification() {
    if (HasBeenNotified()) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_.load(std::memory_order_relaxed); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> notified_{false};
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_PLAIN_SYNC_H_
