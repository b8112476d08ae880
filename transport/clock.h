// Clock: the engine's only source of time, so protocol tests can run on a manual clock.
//
// Times are nanoseconds on an arbitrary monotonic origin (int64_t; wraps after 292 years).
// MonotonicClock reads CLOCK_MONOTONIC and is thread-safe. ManualClock is advanced by the test
// that owns it and must be touched from one thread only.
#ifndef HOMARPC_TRANSPORT_CLOCK_H_
#define HOMARPC_TRANSPORT_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace homarpc::transport {

constexpr int64_t kNanosPerMicro = 1000;
constexpr int64_t kNanosPerMilli = 1000 * 1000;
constexpr int64_t kNanosPerSecond = 1000 * 1000 * 1000;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNanos() const = 0;
};

class MonotonicClock final : public Clock {
 public:
  int64_t NowNanos() const override {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
  }
  // A process-wide instance; stateless, so sharing it is safe.
  static const MonotonicClock* Get() {
    static const MonotonicClock clock;
    return &clock;
  }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_nanos = 1'000'000'000) : now_(start_nanos) {}
  int64_t NowNanos() const override { return now_; }
  void Advance(int64_t nanos) { now_ += nanos; }
  void Set(int64_t nanos) { now_ = nanos; }

 private:
  int64_t now_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_CLOCK_H_
