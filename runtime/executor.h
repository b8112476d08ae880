// Executor: where a server runs sync handlers. Owned by the server (ServerImpl); tasks are
// submitted from transport loop threads (and, rarely, from any thread).
//
// Two kinds:
// - WorkerPool: N threads sharing one FIFO queue. Handlers may block. One idle worker at a
//   time spins (CPU pause, yielding now and then) for `spin_nanos` before sleeping on a
//   condition variable, so a request that arrives within that window is picked up in well
//   under a microsecond instead of paying a futex wake-up (~50 us on a loaded machine); the
//   other idle workers sleep at once, leaving the cores to the loops.
// - Inline: runs the task on the submitting thread (the loop), for handlers that never block.
//
// Contract: Run() is thread-safe and every task submitted runs exactly once: on a worker,
// or, once Shutdown() has begun, on the submitting thread. Shutdown() runs every queued task,
// joins the workers, and must not be called from a task; it is idempotent. Destruction calls
// Shutdown().
#ifndef HOMARPC_RUNTIME_EXECUTOR_H_
#define HOMARPC_RUNTIME_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"

namespace homarpc::internal {

class Executor {
 public:
  using Task = absl::AnyInvocable<void() &&>;
  virtual ~Executor() = default;
  virtual void Run(Task task) = 0;
  virtual void Shutdown() = 0;
  // Threads owned by the executor (0 for inline).
  virtual int num_threads() const = 0;
  // Idle threads asleep (not spinning) right now; 0 for inline. For tests and stats.
  virtual int sleeping_threads() const = 0;
};

// Runs each task on the calling thread, at once.
std::unique_ptr<Executor> NewInlineExecutor();

// `threads` <= 0: max(2, hardware concurrency). `spin_nanos` <= 0: never spin, sleep at once.
std::unique_ptr<Executor> NewWorkerPool(int threads, int64_t spin_nanos);

// Messages larger than this are not (de)serialized on a transport loop thread where a worker
// can do it: on a server (whose executor has threads) a request this large is parsed and
// handled on a worker, and a response this large that a handler finishes on the loop is
// serialized on a worker; on a client, the response of an asynchronous call this large is
// parsed, and its callback run, on the channel's completion worker (client_call.h). A loop
// serves every call of its socket, and copying megabytes there (~100 us per MiB here) stalled
// the small calls behind it for milliseconds (the testbed's `mixed` and `workload`
// scenarios, docs/benchmarks.md). Below it, the hand-off would cost more than the copy.
inline constexpr size_t kOffloadBytes = 256 * 1024;

// The CPU's spin-wait hint (x86 PAUSE, Arm YIELD): every busy-wait loop in the runtime
// (idle workers here, blocked callers in client_call.cc) calls it between checks.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_EXECUTOR_H_
