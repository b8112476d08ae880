// load_driver: DriveStreams() — a client process's streams of calls over one LoadChannel,
// open-loop or closed-loop, every measured call recorded (see load.h). Also the arrival
// schedule and spec validation of load_internal.h.
//
// Threads: DriveStreams() runs on the caller's thread (warmup, the barrier, closed-loop
// streams' first calls, the wait for the end and the drain). Each open-loop stream gets one
// sender thread for the measuring phase. Completions arrive on the system's threads (or inline
// in StartCall) and restart closed-loop streams from there.
//
// DESIGN NOTES
// Open loop: a sender thread walks its stream's ArrivalSchedule in absolute time — it sleeps
// with clock_nanosleep(TIMER_ABSTIME) on CLOCK_MONOTONIC (timer slack cut to 1 us for the
// thread) when the next call is at least 50 us away, and spins below that — so a slow wake-up
// or a slow StartCall delays one call, never the calls after it: the offered load does not
// bend to the system. A start more than 1 ms behind its due time counts as a late start. It
// does not sleep-then-spin before every call: in the `cpu` scenario the client's CPU time is
// measured, and spinning would be charged to the system under test.
// Closed loop: `in_flight` calls are started by DriveStreams' thread; every completion that
// arrives before the end of the measuring phase starts the next one from the completing
// thread, like rpc_driver's CallbackDriver — no dispatcher thread competing for the two cores.
//
// Recording: one absl::Mutex per stream guards its counters and its records (a std::deque, so
// a million records never cost one big reallocation under the lock). A call takes that mutex
// twice at its start (reserve; done issuing) and once at its completion; streams never share
// a lock. Closed-loop streams draw their next size under the same mutex (a SizeSource is used
// by one thread at a time).
//
// StartCall may complete inline: a restart from inside StartCall would recurse once per call
// (a channel failing every call before sending would overflow the stack within the run). So
// starts go through a per-thread trampoline: a start requested while this thread is already
// issuing further up its stack is queued and issued when the outer StartCall returns, first in
// first out. The closed-loop streams' first calls are queued as one batch, so with a channel
// that completes inline the streams take turns on DriveStreams' thread.
// A reserved call whose StartCall would begin at or after the end of the measuring phase (a
// restart decided just before it, or queued behind inline completions) is not made and its
// reservation is undone: every started call began inside the phase.
//
// Lifetimes: each call's completion holds a shared_ptr to its stream's state, so completions
// that arrive after the drain (counted `unfinished`) find it alive; once the drain ends the
// stream is `closed` and such completions change nothing. DriveStreams does not return until
// no thread is inside StartCall for its streams (`issuing`), so the channel is never used
// after it returns, as load.h promises.
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tools/bench/load.h"
#include "tools/bench/load_internal.h"
#include "tools/bench/workload.h"
#include "transport/clock.h"
#include "transport/sched.h"

namespace homarpc::bench {
namespace load_internal {

namespace {

// SplitMix64's finaliser: a different, well-mixed seed for the arrivals. WorkloadSizes seeds
// the same generator with the stream's seed and draws u the same way; with one seed for both,
// the k-th gap and the k-th size would come from the same u, so long gaps would go with large
// requests.
uint64_t ArrivalSeed(uint64_t seed) {
  uint64_t z = seed + 0x9e3779b97f4a7c15;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

}  // namespace

ArrivalSchedule::ArrivalSchedule(Arrival arrival, double rate_per_sec, uint64_t seed)
    : poisson_(arrival == Arrival::kPoisson),
      mean_gap_ns_(1e9 / rate_per_sec),
      rng_(ArrivalSeed(seed)) {}

int64_t ArrivalSchedule::NextOffsetNanos() {
  if (poisson_) {
    // u uniform in [0, 1) from the top 53 bits; -log(1 - u) is exponential with mean 1.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    offset_ns_ += -std::log1p(-u) * mean_gap_ns_;
    return std::llround(offset_ns_);
  }
  ++count_;
  return std::llround(static_cast<double>(count_) * mean_gap_ns_);  // k / rate: no drift
}

absl::Status ValidateClient(const LoadPoint& point, const ClientSpec& client) {
  if (point.duration_ns <= 0) return absl::InvalidArgumentError("duration_ns must be > 0");
  if (point.drain_ns < 0) return absl::InvalidArgumentError("drain_ns must be >= 0");
  if (point.warmup_calls < 0) return absl::InvalidArgumentError("warmup_calls must be >= 0");
  if (point.call_timeout_ns < 0) {
    return absl::InvalidArgumentError("call_timeout_ns must be >= 0");
  }
  if (client.streams.empty()) return absl::InvalidArgumentError("a client without streams");
  std::set<std::string> names;
  for (const StreamSpec& stream : client.streams) {
    if (stream.name.empty()) return absl::InvalidArgumentError("a stream without a name");
    if (!names.insert(stream.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("stream name '", stream.name, "' repeated"));
    }
    const std::string where = absl::StrCat("stream '", stream.name, "': ");
    if (stream.arrival == Arrival::kClosedLoop) {
      if (stream.in_flight < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "in_flight must be >= 1, not ", stream.in_flight));
      }
    } else if (!(stream.rate_per_sec > 0) || !std::isfinite(stream.rate_per_sec)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "an open-loop stream needs rate_per_sec > 0, not ", stream.rate_per_sec));
    }
    absl::StatusOr<std::unique_ptr<SizeSource>> sizes = MakeSizeSource(stream);
    if (!sizes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, sizes.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace load_internal

namespace {

using load_internal::ArrivalSchedule;

constexpr int64_t kSpinNanos = 50 * transport::kNanosPerMicro;  // below this, spin, not sleep
constexpr int64_t kLateNanos = transport::kNanosPerMilli;       // a start this late is late
constexpr int64_t kTimerSlackNanos = 1000;
// How long ONE warmup call may take beyond the point's call timeout before the client gives up
// on it. The limit is per call: harness.h's kClientGraceMillis bounds the client's whole
// connect and warmup, so (with LoadPoint's default 30 s call timeout) one stuck call is
// reported by the client, but several slow ones in a row can still outlast that grace and get
// the client killed without a report.
constexpr int64_t kWarmupGraceNanos = int64_t{60} * transport::kNanosPerSecond;

int64_t NowNanos() { return transport::MonotonicClock::Get()->NowNanos(); }

// Returns at `deadline_ns` (MonotonicClock), or just after.
void SleepUntil(int64_t deadline_ns) {
  while (true) {
    const int64_t left_ns = deadline_ns - NowNanos();
    if (left_ns <= 0) return;
    if (left_ns < kSpinNanos) continue;  // spin: a sleep this short overshoots
    timespec until{};
    until.tv_sec = static_cast<time_t>(deadline_ns / transport::kNanosPerSecond);
    until.tv_nsec = static_cast<long>(deadline_ns % transport::kNanosPerSecond);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);  // EINTR: loop again
  }
}

absl::Status WrongSize(uint64_t got, uint64_t want) {
  return absl::InternalError(
      absl::StrCat("response carried ", got, " payload bytes, expected ", want));
}

// One stream's state for the measuring phase and its drain. Shared by DriveStreams' thread,
// the stream's sender thread (open loop) and every call's completion.
struct StreamRun {
  StreamRun(const StreamSpec& s, LoadChannel* c, int64_t timeout_ns,
            std::unique_ptr<SizeSource> size_source)
      : spec(s), channel(c), call_timeout_ns(timeout_ns), sizes(std::move(size_source)) {}

  const StreamSpec spec;
  LoadChannel* const channel;  // outlives the run: see `issuing`
  const int64_t call_timeout_ns;
  // Set before the stream's first call; read-only afterwards.
  int64_t measure_start_ns = 0;
  int64_t measure_end_ns = 0;
  // Open loop: used by the sender thread only. Closed loop: under `mu`.
  const std::unique_ptr<SizeSource> sizes;

  absl::Mutex mu;
  std::deque<CallRecord> calls ABSL_GUARDED_BY(mu);
  uint64_t started ABSL_GUARDED_BY(mu) = 0;
  uint64_t failed ABSL_GUARDED_BY(mu) = 0;
  uint64_t outstanding ABSL_GUARDED_BY(mu) = 0;  // started, not completed
  uint64_t issuing ABSL_GUARDED_BY(mu) = 0;      // reserved, StartCall not yet returned
  uint64_t late_starts ABSL_GUARDED_BY(mu) = 0;
  int64_t last_start_ns ABSL_GUARDED_BY(mu) = 0;
  std::string first_error ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;  // the drain is over: completions are ignored

  bool DrainedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return outstanding == 0; }
  bool IssuedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return issuing == 0; }

  // Counts one more call as started (at `now`) before it is issued.
  void ReserveLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++started;
    ++outstanding;
    ++issuing;
    last_start_ns = std::max(last_start_ns, now);
  }
};

void Launch(std::shared_ptr<StreamRun> run, uint64_t request_bytes);

void OnComplete(const std::shared_ptr<StreamRun>& run, int64_t start_ns, uint64_t request_bytes,
                const absl::StatusOr<uint64_t>& result) {
  const int64_t now = NowNanos();
  uint64_t next_bytes = 0;
  bool restart = false;
  {
    absl::MutexLock lock(&run->mu);
    if (run->closed) return;  // counted as unfinished when the drain ended
    --run->outstanding;
    if (!result.ok()) {
      ++run->failed;
      if (run->first_error.empty()) run->first_error = result.status().ToString();
    } else if (*result != run->spec.response_bytes) {
      ++run->failed;
      if (run->first_error.empty()) {
        run->first_error = WrongSize(*result, run->spec.response_bytes).ToString();
      }
    } else {
      run->calls.push_back(
          CallRecord{start_ns - run->measure_start_ns, now - start_ns, request_bytes, *result});
    }
    if (run->spec.arrival == Arrival::kClosedLoop && now < run->measure_end_ns) {
      next_bytes = run->sizes->Next();
      run->ReserveLocked(now);
      restart = true;
    }
  }
  if (restart) Launch(run, next_bytes);
}

// Makes the StartCall for a call already reserved (ReserveLocked) — unless the measuring
// phase ended in between (a restart decided just before the end, or a start queued behind
// inline completions): then the reservation is undone, so that every started call began
// inside the phase.
void Issue(const std::shared_ptr<StreamRun>& run, uint64_t request_bytes) {
  const int64_t start_ns = NowNanos();
  if (start_ns >= run->measure_end_ns) {
    absl::MutexLock lock(&run->mu);
    --run->started;
    --run->outstanding;
    --run->issuing;
    return;
  }
  run->channel->StartCall(request_bytes, run->spec.response_bytes, run->call_timeout_ns,
                          [run, start_ns, request_bytes](absl::StatusOr<uint64_t> result) {
                            OnComplete(run, start_ns, request_bytes, result);
                          });
  absl::MutexLock lock(&run->mu);
  --run->issuing;
}

// The trampoline (DESIGN NOTES): the starts this thread has yet to issue, first in, first
// out (so that streams restarted from inline completions take turns), and whether it is
// already issuing them further up its stack. Reused, so a start allocates nothing here.
struct PendingStart {
  std::shared_ptr<StreamRun> run;
  uint64_t request_bytes;
};
struct Trampoline {
  std::vector<PendingStart> queue;
  bool active = false;
};
thread_local Trampoline t_trampoline;

// Issues the starts queued on this thread (already reserved), and any that their inline
// completions queue meanwhile; returns at once when an outer call is already doing so.
void IssueQueued() {
  Trampoline& trampoline = t_trampoline;
  if (trampoline.active) return;
  trampoline.active = true;
  for (size_t i = 0; i < trampoline.queue.size(); ++i) {
    PendingStart next = std::move(trampoline.queue[i]);  // Issue() may grow the queue
    Issue(next.run, next.request_bytes);
  }
  trampoline.queue.clear();
  trampoline.active = false;
}

void Launch(std::shared_ptr<StreamRun> run, uint64_t request_bytes) {
  t_trampoline.queue.push_back(PendingStart{std::move(run), request_bytes});
  IssueQueued();
}

// An open-loop stream's sender thread: starts calls on schedule until the measuring phase
// ends, says so, and waits for `release` (so that it is still alive — its involuntary context
// switches still counted in /proc — when the harness samples CPU at the end of measuring).
void RunSender(const std::shared_ptr<StreamRun>& run, absl::Notification* done_starting,
               const absl::Notification* release) {
  prctl(PR_SET_TIMERSLACK, kTimerSlackNanos, 0, 0, 0);
  transport::NameThisThread("bench-sender");  // apart from homarpc's hrpc-* threads
  ArrivalSchedule schedule(run->spec.arrival, run->spec.rate_per_sec, run->spec.seed);
  while (true) {
    const int64_t due = run->measure_start_ns + schedule.NextOffsetNanos();
    if (due >= run->measure_end_ns) break;
    SleepUntil(due);
    const int64_t now = NowNanos();
    if (now >= run->measure_end_ns) break;
    const uint64_t request_bytes = run->sizes->Next();
    {
      absl::MutexLock lock(&run->mu);
      if (now - due > kLateNanos) ++run->late_starts;
      run->ReserveLocked(now);
    }
    Launch(run, request_bytes);
  }
  done_starting->Notify();
  release->WaitForNotification();
}

// One warmup call, waited for. The state is shared with the completion, which may come after
// a timeout here.
absl::Status WarmupCall(LoadChannel& channel, const StreamSpec& stream, uint64_t request_bytes,
                        int64_t call_timeout_ns) {
  struct Call {
    absl::Notification done;
    absl::StatusOr<uint64_t> result;
  };
  auto call = std::make_shared<Call>();
  channel.StartCall(request_bytes, stream.response_bytes, call_timeout_ns,
                    [call](absl::StatusOr<uint64_t> result) {
                      call->result = std::move(result);
                      call->done.Notify();
                    });
  if (!call->done.WaitForNotificationWithTimeout(
          absl::Nanoseconds(call_timeout_ns + kWarmupGraceNanos))) {
    return absl::DeadlineExceededError("a warmup call did not complete");
  }
  if (!call->result.ok()) return call->result.status();
  if (*call->result != stream.response_bytes) {
    return WrongSize(*call->result, stream.response_bytes);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClientReport> DriveStreams(const LoadPoint& point, const ClientSpec& client,
                                          LoadChannel& channel,
                                          const std::function<void()>& start_measuring,
                                          const std::function<void()>& measuring_done) {
  if (absl::Status valid = load_internal::ValidateClient(point, client); !valid.ok()) {
    return valid;
  }

  // Warmup: one call at a time per stream, its first size, not recorded.
  for (const StreamSpec& stream : client.streams) {
    absl::StatusOr<std::unique_ptr<SizeSource>> sizes = MakeSizeSource(stream);
    if (!sizes.ok()) return sizes.status();
    const uint64_t request_bytes = (*sizes)->Next();
    for (int i = 0; i < point.warmup_calls; ++i) {
      absl::Status warm = WarmupCall(channel, stream, request_bytes, point.call_timeout_ns);
      if (!warm.ok()) {
        return absl::Status(warm.code(), absl::StrCat("warmup call of stream '", stream.name,
                                                      "': ", warm.message()));
      }
    }
  }

  std::vector<std::shared_ptr<StreamRun>> runs;
  for (const StreamSpec& stream : client.streams) {
    absl::StatusOr<std::unique_ptr<SizeSource>> sizes = MakeSizeSource(stream);
    if (!sizes.ok()) return sizes.status();
    runs.push_back(
        std::make_shared<StreamRun>(stream, &channel, point.call_timeout_ns, *std::move(sizes)));
  }

  start_measuring();
  const int64_t measure_start = NowNanos();
  const int64_t measure_end = measure_start + point.duration_ns;
  for (const auto& run : runs) {
    run->measure_start_ns = measure_start;
    run->measure_end_ns = measure_end;
    absl::MutexLock lock(&run->mu);
    run->last_start_ns = measure_start;
  }

  absl::Notification release_senders;
  std::vector<std::unique_ptr<absl::Notification>> senders_done;
  std::vector<std::thread> senders;
  for (const auto& run : runs) {
    if (run->spec.arrival == Arrival::kClosedLoop) continue;
    senders_done.push_back(std::make_unique<absl::Notification>());
    senders.emplace_back(RunSender, run, senders_done.back().get(), &release_senders);
  }
  // Closed-loop streams' first calls, as one batch: with a channel that completes inline, the
  // streams then take turns on this thread instead of the first one keeping it to itself.
  for (const auto& run : runs) {
    if (run->spec.arrival != Arrival::kClosedLoop) continue;
    absl::MutexLock lock(&run->mu);
    for (int i = 0; i < run->spec.in_flight; ++i) {
      t_trampoline.queue.push_back(PendingStart{run, run->sizes->Next()});
      run->ReserveLocked(NowNanos());
    }
  }
  IssueQueued();

  SleepUntil(measure_end);
  for (const auto& done : senders_done) done->WaitForNotification();
  ClientReport report;
  for (const auto& run : runs) {
    absl::MutexLock lock(&run->mu);
    report.measure_ns = std::max(report.measure_ns, run->last_start_ns - measure_start);
  }
  if (measuring_done) measuring_done();
  release_senders.Notify();
  for (std::thread& sender : senders) sender.join();

  const absl::Time drain_deadline = absl::Now() + absl::Nanoseconds(point.drain_ns);
  for (const auto& run : runs) {
    absl::MutexLock lock(&run->mu);
    run->mu.AwaitWithDeadline(absl::Condition(run.get(), &StreamRun::DrainedLocked),
                              drain_deadline);
    run->closed = true;
    // No StartCall may still be running when we return (the channel may go away then).
    run->mu.Await(absl::Condition(run.get(), &StreamRun::IssuedLocked));

    StreamReport stream;
    stream.name = run->spec.name;
    stream.calls.assign(run->calls.begin(), run->calls.end());
    run->calls.clear();
    stream.started = run->started;
    stream.failed = run->failed;
    stream.unfinished = run->outstanding;
    stream.first_error = run->first_error;
    stream.late_starts = run->late_starts;
    report.streams.push_back(std::move(stream));
  }
  return report;
}

}  // namespace homarpc::bench
