// rpc_driver: the client loops of homarpc-bench's RPC scenarios (`unary`, `throughput`),
// written once and shared by every system that runs them (gRPC C++ and homarpc), so both sides
// are timed by the same code.
//
// A system supplies only "make one call": a BlockingCaller (unary) or an AsyncSlot
// (throughput). The driver does warmup, timing, stopping and the samples:
//   - DriveBlocking: point.concurrency caller threads (the first one is the thread that calls
//     DriveBlocking, so concurrency 1 adds no thread), each making blocking calls back to back.
//   - DriveCallbacks: point.concurrency slots, each with one call in flight; the completion of
//     a slot's call (on whatever thread the system completes it) records the latency and starts
//     the slot's next call, so the number in flight stays constant without a dispatcher thread.
// Latency is taken per call from just before the call is started to the moment its completion
// is seen (blocking: the call returned; callback: the completion reached the driver).
//
// Both run in homarpc-bench's client process (System::RunClient), one at a time.
#ifndef HOMARPC_TOOLS_BENCH_RPC_DRIVER_H_
#define HOMARPC_TOOLS_BENCH_RPC_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "tools/bench/system.h"

namespace homarpc::bench {

// Extra time a driver allows beyond point.duration_ns (warmup, draining) before it gives up
// with DEADLINE_EXCEEDED. Below the harness's kClientGraceMillis, so the client reports the
// failure itself rather than being killed.
inline constexpr int64_t kDriverGraceNanos = int64_t{60} * 1000 * 1000 * 1000;

// One caller thread's way of making a call. Each caller is used by one thread only.
class BlockingCaller {
 public:
  virtual ~BlockingCaller() = default;
  // Makes one call of point.request_bytes and waits for it. Returns the response's payload
  // size, or the call's error (the point then fails with it).
  virtual absl::StatusOr<uint64_t> Call() = 0;
};

// Runs the blocking client loop: `new_caller` is called point.concurrency times, on the
// calling thread, before any call is made; caller i runs on thread i (0 = the calling thread).
// Warmup calls are shared out among the callers; measuring starts when all of them are done
// with theirs. Fails with the first call error, or INTERNAL when a response does not have
// point.response_bytes or `new_caller` returns null. A call that never returns is not timed
// out here (that would need a deadline on every measured call): the harness kills a client
// process that overruns its time.
absl::StatusOr<ClientSamples> DriveBlocking(
    const Point& point, const std::function<std::unique_ptr<BlockingCaller>()>& new_caller);

class CallbackDriver;

// One call in flight at a time. Start() begins a call; when it completes, the slot calls
// driver->Complete(index, result) exactly once, from any thread (also from inside Start()).
// Start() is called again only after that, possibly from inside Complete() (a slot that
// completes inside Start() therefore recurses; systems do so only for calls that fail before
// being sent, which ends the run). After calling Complete() the slot must not touch its own
// members: the driver may destroy it at once.
class AsyncSlot {
 public:
  virtual ~AsyncSlot() = default;
  virtual void Start() = 0;
};

// Builds slot `index` of `driver`.
using AsyncSlotFactory =
    std::function<std::unique_ptr<AsyncSlot>(CallbackDriver* driver, size_t index)>;

// Runs the callback client loop (see the top of the file). `keep_alive` is whatever the slots'
// calls need (channel, stub): it is released after every slot has been destroyed. Errors as
// DriveBlocking's. When the run times out with calls still in flight, the driver, the slots
// and `keep_alive` are deliberately leaked (a late completion must find them alive); the
// client process exits right after.
absl::StatusOr<ClientSamples> DriveCallbacks(const Point& point, std::shared_ptr<void> keep_alive,
                                             const AsyncSlotFactory& new_slot);

// The state of one DriveCallbacks() run; slots only call Complete().
class CallbackDriver {
 public:
  explicit CallbackDriver(const Point& point);
  CallbackDriver(const CallbackDriver&) = delete;
  CallbackDriver& operator=(const CallbackDriver&) = delete;

  // Slot `index`'s call finished with `response_bytes` (the response payload size) or an
  // error. Records it and restarts the slot, unless the run is over. Any thread.
  void Complete(size_t index, absl::StatusOr<uint64_t> response_bytes);

 private:
  friend absl::StatusOr<ClientSamples> DriveCallbacks(const Point&, std::shared_ptr<void>,
                                                      const AsyncSlotFactory&);
  void StartSlot(size_t index);
  static int64_t Now();

  const Point point_;
  std::vector<std::unique_ptr<AsyncSlot>> slots_;  // filled before the first Start()
  std::vector<int64_t> start_ns_;                  // per slot; written before its Start()
  absl::Notification drained_;                     // stop decided and nothing in flight

  absl::Mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;  // warmup included
  bool measuring_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t measure_start_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_completion_ns_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  ClientSamples samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_RPC_DRIVER_H_
