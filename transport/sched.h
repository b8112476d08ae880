// sched: how the threads that carry RPCs (transport loops, the runtime's handler workers and
// timers) present themselves to the kernel: a scheduler hint, a name and a timer slack; when
// a spinning one gives its CPU away (YieldPolicy, below), and how one leaves a CPU it shares
// (MoveToAnotherCpu).
//
// RequestShortSlice() asks the kernel for a short scheduler slice for the calling thread. Such
// a thread runs briefly and then waits, and what it does next (pass a request on, complete a
// response) is what callers are waiting for. Under Linux's EEVDF scheduler (6.6+) a woken
// thread runs ahead of the one holding the core only if its deadline, wake-up time plus slice,
// is earlier; with the default slice (~1.4 ms on 2 CPUs) a loop woken by a packet can wait
// that long behind a thread doing batch work -- a handler copying megabytes, a bulk receiver
// -- which on a busy 2-core machine put milliseconds into small calls' p99 (measured with the
// testbed's `mixed` scenario, docs/benchmarks.md). With a short slice it runs at once. The
// thread's share of the CPU does not change, only how finely it is cut. Linux honours the
// request for SCHED_OTHER since 6.12 (sched_attr.sched_runtime); older kernels ignore it.
// Failure is harmless and ignored. Any thread; affects only the calling thread.
//
// NameThisThread() gives the calling thread a name that top -H, ps -L, perf and gdb show
// (/proc/<pid>/task/<tid>/comm): homarpc's long-lived threads are "hrpc-loop<N>" (a transport
// loop, N its index in the endpoint), "hrpc-worker" (a sync handler) and "hrpc-deadline" (a
// server's deadline timer), so a profile or a scheduling trace says which of them ran or waited
// instead of showing every thread as the program. Linux keeps 15 bytes; longer names are cut.
#ifndef HOMARPC_TRANSPORT_SCHED_H_
#define HOMARPC_TRANSPORT_SCHED_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace homarpc::transport {

inline constexpr uint64_t kShortSliceNanos = 100 * 1000;

// Returns whether the kernel accepted the request (false on kernels without the call).
bool RequestShortSlice(uint64_t slice_nanos = kShortSliceNanos);
// The calling thread's slice as the kernel reports it (sched_getattr's sched_runtime; for a
// SCHED_OTHER thread on Linux 6.12+ the slice it runs with), 0 when the kernel cannot say.
uint64_t ThisThreadsSliceNanos();

inline constexpr size_t kMaxThreadNameBytes = 15;  // the kernel's TASK_COMM_LEN - 1

// Returns whether the kernel took the name (the first kMaxThreadNameBytes bytes of it).
bool NameThisThread(absl::string_view name);

// The calling thread's timer slack (prctl PR_GET/SET_TIMERSLACK): how late the kernel may end
// its timed waits, so that it can end them in an interrupt it takes anyway (the scheduler tick)
// instead of programming a timer of their own. Linux's default is 50 us. SetTimerSlack returns
// whether the kernel took the value; any thread, affects only the calling thread.
uint64_t ThisThreadsTimerSlackNanos();
bool SetTimerSlack(uint64_t slack_nanos);

// MoveToAnotherCpu() moves the calling thread off the CPU it runs on, to another one its
// affinity allows: it narrows the thread's affinity to the others for a moment (the kernel
// migrates a running thread at once when its CPU leaves the mask, to one it picks, not
// necessarily an idle one) and then sets the mask it read back, so the thread stays where it
// landed until the scheduler moves it again. Returns whether the thread moved and its mask was
// restored; false, changing nothing, when the thread may run on one CPU only or the kernel
// refuses the narrowing (and false, with one WARNING line, should the restore be refused: the
// thread then keeps the narrowed mask). The mask read back is the one in effect then: CPUs
// offline at that moment, or ones a cpuset adds later, are not in it. An affinity set by
// another thread between the two calls is overwritten. Loops call it on the threads that drive
// them, which for an inline or lent endpoint (endpoint.h) is the application's.
bool MoveToAnotherCpu();

// YieldPolicy: when a spinning thread gives its CPU away with sched_yield (an idle transport
// loop, Loop::RunUntil; an idle handler worker, runtime/executor.cc), and when it leaves its
// CPU (a loop moves, or naps where it cannot).
//
// A yield is a system call (~1.1 us on these VMs), and a datagram that lands during one waits
// for it to return: yielding on every idle round cost a 64 B call ~1.1 us (12.1 -> 10.9 us
// without, docs/rpc-benchmarks.md, session 16). But when more threads spin than there are
// cores (a blocking caller, a server loop and a worker on 2 cores), the one with work may be
// queued behind a spinner, and only a yield lets it run. So the policy yields on every round
// (a loop's idle round; 16 pauses of a worker) only while it has seen contention, and
// otherwise probes for it once one wait has lasted kProbeIdleNanos (and every kProbeIdleNanos
// while it goes on), or once shorter waits since the last probe add up to
// kProbeIdleBudgetNanos: a yield that kept this thread off the CPU for over kContendedNanos
// ran somebody else here, and starts (or extends) kHoldNanos of yielding on every round. A
// hypervisor's stolen slice during a probe also looks like contention; it costs one hold.
// Why idle time and not a count of rounds: it probed every 16 idle rounds before (~20 us of
// polling), and a 64 B ping-pong, whose loops idle ~8-10 us between packets, then yielded on
// about one call in two; a datagram that lands during the yield waits for it, and calls with a
// yield near the response's arrival took 1.4 us more at p50 (docs/rpc-benchmarks.md, session
// 22). A thread whose work is queued behind this one mostly shows as a wait that does not end,
// and is found as fast as before; the budget finds one whose waits something else ends (a
// loop taking a bulk transfer's packets every few microseconds while a worker waits for its
// CPU), and costs a ping-pong one yield in ~20 calls. The waits are the caller's: it passes
// when the current one began (a loop's first idle round after work, or its wake-up).
//
// Naps. Two spinners that share a CPU while another CPU idles stay that way for tens of
// milliseconds: each runs only when the other yields, so both look cache-hot to the kernel's
// load balancer, which will not move a hot thread. This happens whenever a sleeping loop is
// woken onto its waker's CPU (the kernel's wake-up places it there when it finds no idle CPU
// in a quick search), and `homarpc-bench unary` hit it at the start of 5 runs in 12: up to 87%
// of the first 3000 calls took over p50 + 10 us, and the run's p99 went from ~47 to 78-91 us
// (docs/rpc-benchmarks.md, session 18). Yielding never ends it. So once yields that ran
// somebody else have kept the thread off its CPU for kNapOffCpuNanos in all, in at least
// kNapMinLongYields of them within kNapWindowNanos, TakeNap() says the thread should leave
// its CPU: a loop moves to another one (MoveToAnotherCpu, above), and naps, sleeping at most
// kNapNanos, only where it cannot move. A sleep alone worked where a thread woken from it is
// placed afresh, on an idle CPU if there is one (two spinners started on one CPU were apart
// 20 ms later in 8-9 trials of 20 by yielding alone, in 20 of 20 when one of them slept 50 us
// once); on VMs whose kernel packs busy threads onto few vCPUs the woken loop landed on the
// CPU it left, every time (session 23). A quarter of the window lost to others is the
// threshold, whether to a spinner that yields back every few microseconds or to a thread that
// keeps the CPU for a whole slice; a hypervisor's ~25 us interruptions, ~1400 a second here,
// lose a few percent. Where no CPU is free (three spinners on two cores) neither cures
// anything: naps wanted again within twice the current interval double the interval before
// the next one may be taken (kMinNapIntervalNanos up to kMaxNapIntervalNanos), so such a
// thread naps (or moves) about once a second, and one whose naps work naps again as soon as
// it needs to.
// One per spinning thread; not thread-safe.
class YieldPolicy {
 public:
  static constexpr int64_t kProbeIdleNanos = 20000;
  static constexpr int64_t kProbeIdleBudgetNanos = 200000;
  static constexpr int64_t kContendedNanos = 5000;
  static constexpr int64_t kHoldNanos = 500000;
  static constexpr int64_t kNapWindowNanos = 4000000;
  static constexpr int64_t kNapOffCpuNanos = 1000000;
  static constexpr uint32_t kNapMinLongYields = 2;
  static constexpr int64_t kNapNanos = 50000;
  static constexpr int64_t kMinNapIntervalNanos = 4000000;
  static constexpr int64_t kMaxNapIntervalNanos = 1000000000;

  // Whether the idle round at `now` yields, the thread's current wait having begun at
  // `idle_since` (both MonotonicClock; a different `idle_since` is a new wait).
  bool ShouldYield(int64_t now, int64_t idle_since);
  // The idle round at `now` (idle since `idle_since`): yields if ShouldYield says so, and
  // learns from how long the yield took. What the spinning threads call; the two below are
  // its parts.
  void MaybeYield(int64_t now, int64_t idle_since);

  // A yield began at `before` and returned at `after`.
  void OnYield(int64_t before, int64_t after);
  bool contended(int64_t now) const { return now < contended_until_; }
  // The thread moved to another CPU (MoveToAnotherCpu): the contention it saw was the old
  // CPU's, so its rounds stop yielding until a probe finds some here.
  void OnMoved() { contended_until_ = 0; }

  // Whether the thread should nap now (for at most kNapNanos, then spin on): true once per
  // nap, which it records as taken at `now`. The caller sleeps however suits it (a loop waits
  // for its socket with a timeout, a worker sleeps).
  bool TakeNap(int64_t now);
  // Whether TakeNap() would consider a nap now (a cheap check for the spin loop).
  bool nap_due() const { return nap_due_; }
  uint64_t naps() const { return naps_; }
  int64_t nap_interval_nanos() const { return nap_interval_; }

 private:
  // Far enough back that `now - last_probe_` cannot overflow; the three start equal, so the
  // first wait banks nothing.
  int64_t last_probe_ = INT64_MIN / 2;
  int64_t wait_since_ = INT64_MIN / 2;  // the current wait's beginning (idle_since)
  int64_t last_round_ = INT64_MIN / 2;  // the last idle round seen
  int64_t idle_banked_ = 0;  // idle time of the earlier waits since the last probe
  int64_t contended_until_ = 0;
  // Yields that ran somebody else, and the time they kept this thread off its CPU, counted
  // from the end of the first of them until kNapWindowNanos later.
  uint32_t long_yields_ = 0;
  int64_t off_cpu_nanos_ = 0;
  int64_t long_yields_since_ = 0;
  bool nap_due_ = false;
  int64_t nap_due_since_ = 0;  // a nap not taken within kNapWindowNanos is dropped
  uint64_t naps_ = 0;
  int64_t last_nap_ = 0;  // 0: never
  int64_t nap_interval_ = kMinNapIntervalNanos;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_SCHED_H_
