// DESIGN NOTES
// Cross-thread handoff: Post() appends to a mutex-protected vector, bumps posted_count_, and
// writes the backend's eventfd only if the loop is asleep. The loop sets sleeping_ before it
// checks posted_count_ one last time and blocks; both sides use sequentially consistent
// atomics, so either the loop sees the post or the poster sees sleeping_ (no lost wake-up),
// and a busy loop costs posters no system call.
//
// Spin-then-sleep: a wake-up through the kernel costs ~50 us on these machines while a busy
// round trip costs ~5 us, so an idle loop keeps polling for up to poll_usecs (Homa's default
// 50 us) before it sleeps, when SpinPolicy (loop.h) expects work soon. poll_usecs = 0 sleeps
// at once (the "blocking" mode the benchmark reports).
// The idle time SpinPolicy learns from is measured to the arrival of the datagram that ended
// it, not to the moment the loop ran again (IdleGap): after a sleep, the second includes the
// wake-up's own latency (~50 us here, as long as the spin), so a loop that once stopped
// spinning saw every later gap as too long to spin through, even for calls 20 us apart, and
// slept and paid a wake-up on every one of them. On 2 CPUs that state was stable for tens of
// milliseconds at a time: `homarpc-bench unary` began in it in 5 runs of 16, the server's loop
// sleeping after each response and woken onto its caller's CPU for the next request (the
// kernel's wake-up chose the waker's CPU although the other one idled), up to 23% of the
// run's first 3000 calls over p50 + 10 us; with arrival times, 1 run of 16
// (docs/rpc-benchmarks.md, session 18). The arrival comes from the kernel's receive timestamp
// (IoBackend::LastArrivalNanos, one ioctl), asked only after a sleep, and only when the gap
// could change the policy's mind.
// Sharing a CPU: a loop that spins while another thread spins on the same CPU (YieldPolicy in
// sched.h says when a nap is due) moves itself to another CPU its affinity allows
// (MoveToAnotherCpu, sched.h) and spins on there; only where it cannot move does it nap, the
// usual sleep below cut to YieldPolicy::kNapNanos, so that its wake-up may place it on an idle
// CPU. A wake-up does not do that on every kernel: on these VMs (which pack busy threads onto
// few vCPUs) the loop woken from its nap landed on the CPU it left, and the caller and the
// server's loop took turns on one CPU for the rest of a run while the other idled, in 3-6 of
// 30-40 `homarpc-bench unary` runs (p99 60-98 us, the other runs' 36-54; docs/rpc-benchmarks.md,
// session 23). Moving ended that: none in 70 runs (none in 120 more of variants of it).
//
// Scheduler slice: a loop thread asks for a short one (transport/sched.h), so that a loop
// woken by a packet runs at once rather than after the slice of a thread doing batch work.
// It is also named "hrpc-loop<index>" there, for profiles and scheduling traces.
//
// Direct sends: a caller on another thread that finds the loop asleep sends a one-packet request
// itself (PrepareDirect + SendDirect) instead of waking the loop to send it; waking a sleeping
// thread costs more CPU here than the whole send, and the request leaves at once. The loop adopts
// the RPC later (AdoptDirectRpc, posted WITHOUT a wake-up), typically when the response wakes it. A
// server's worker thread answering with a one-packet response does the same (AdoptDirectResponse),
// and does so whether the loop sleeps or not: the loop adopts it at its next round, or at its next
// wake-up (its tick, or the client's next packet). Posting the response to an awake loop costs the
// worker no system call, but the response then waits until the loop next gets a CPU, and on a
// machine with fewer cores than spinning threads (a caller, the loop and a worker on 2 CPUs) that
// is a context switch on every call: a 64 B call through the worker pool took 27-79 us, 22-35 us
// with the worker sending (docs/rpc-benchmarks.md, session 17). The send costs the same system call
// either way, on the worker's CPU instead of the loop's. Such a packet passes the pacer (a loop
// that is transmitting a long message meanwhile does not wait for it), and is charged to it when
// the loop adopts it: at most one packet per response ahead of the pacer, as Homa lets messages
// under defer_min_bytes bypass its throttle. Ordering: the caller posts the adoption before it
// sends, and the loop runs pending posts before it hands any received packet to the engine, so the
// response always finds its RPC (the post happens before the send, which happens before the
// response can arrive). The packet's bytes are copied (one packet, at most an MTU) so the send
// cannot race with the adopted RPC being aborted and freed. The caller wakes the loop anyway when
// the loop would sleep past the RPC's first RESEND time or its deadline; if the send failed, the
// loop is asked (with a wake-up) to transmit the message itself.
// Requests go direct only while calls are sparse (SparseCalls: their average gap exceeds the
// spin time). When they come faster, waking the loop to send lets it spin for the response,
// which then needs no wake-up: measured on loopback, back-to-back blocking 64 B calls went
// from 10 us p50 to 66 us when every response had to wake a loop that direct sends let sleep
// (the loop never saw the calls, so SpinPolicy never learnt they were frequent).
// What the caller needs about the destination (cutoffs, the engine's view of the peer) is cached in
// routes_, refreshed by the loop on every client RPC it starts or adopts and on every request it
// delivers. Acks: a finished client RPC owes its server an ack, which rides on the next request to
// it. Direct requests carry one too: when the response to a direct request arrives the loop sets
// one owed ack aside in the route (StashAck) for the next caller to put in its packet (after a
// request the loop sent itself it leaves the ack in the engine, for the loop's next request: a
// stash taken back at once cost the caller ~750 instructions; so a switch from loop-sent to direct
// calls leaves that one ack to the tick, an ACK packet); one nobody took within a tick goes back to
// the engine and out as an ACK packet (the loop wakes for that: stash_deadline_nanos_), and one
// goes back at once before the loop itself sends a request there. Servers ask for missing acks only
// after three ticks (Config::request_ack_ticks), so a held ack never races their NEED_ACK. Without
// this every direct call left an ack for the tick to send alone: an extra packet, and a wake-up of
// the server.
//
// Relay mode (EnableStandby; the runtime's default sync server): a request handler may ask for its
// work to run on the loop's own thread once the round is over (RunAfterRound), instead of handing
// it to a worker thread. On 2 CPUs that hand-off was the whole difference between the default
// server and the inline one: a third spinning thread beside the caller and the loop, 64 B p50 21-24
// us and p99 107-142 us against 13-16 and 40-57 (docs/rpc-benchmarks.md, session 19). The task may
// block, though, so the loop is let go while it runs: the thread gives up the loop (thread_id_
// cleared, the epoll backend released; RunOnce has flushed), runs the task, and takes the loop back
// with one compare-and-swap on drive_state_ (a generation count, so that a standby never takes over
// a later let-go than the one it timed). A second thread, the standby, watches: a loop let go for
// takeover_nanos or more is taken over by the same compare-and-swap, and the standby drives it from
// then on; the displaced thread finds the swap failed when its task returns, touches nothing of the
// loop any more, and becomes the standby. So a blocking task stalls the loop's other work once, for
// about the takeover time, and a quick one costs no thread hand-off at all. Replies from a task
// take the path of a reply from another thread (direct sends, above), which is why the loop need
// not be held. The standby wakes every takeover_nanos while the loop is awake, and parks (no
// timeout) once the loop sleeps and no task has let it go for kParkAfterTakeovers takeover times;
// RunRoundTasks wakes a parked standby when it lets go (a system call on that call's path, and a
// context switch). Parking as soon as the loop slept made most calls of a moderate stream pay that
// wake-up (at 5000 calls/s the loop sleeps between calls): the default server took ~50 us of CPU
// per 64 B call, ~45 with this and the epoll set's churn (epoll_backend.cc) gone, against the
// inline server's 30-41 (`homarpc-bench --scenario=cpu`, docs/rpc-benchmarks.md, session 20). A
// watch costs one wake-up per takeover time instead, whatever the rate. Its waits while the loop is
// driven run with a timer slack of kWatchSlackNanos (4 ms), so the kernel ends them in an interrupt
// it takes anyway (the scheduler tick) rather than at a timer of their own: on the VMs measured
// each expiry of a timer of its own cost the CPU it landed on an exit to the host of ~30 us (a
// thread sleeping 1 ms at a time added ~850 such gaps a second to its CPU; folded into the tick,
// none), and those gaps fell on the spinning caller and loop: 64 B calls carrying one 4.1% -> 2.5%,
// p99 61 -> 50 us (session 21). A stuck task is thus taken over between the takeover time and ~4 ms
// after it; a let-go in progress is watched to its takeover time with the thread's own slack. Below
// about one task per two takeover times it costs a task its wake-up plus two or three watches. On
// stop it takes a let-go loop over at once, so the loop's Shutdown() does not wait for a task that
// may never return, and it stays until the loop has shut down (loop_finished_): a task queued just
// before the stop still lets the loop go once more. Stop() joins both threads, so the endpoint
// outlives every task. A task runs only while the standby is ready (standby_ready_): after a
// takeover the displaced thread may stay blocked in its task for long, and until it returns and
// stands by, RunAfterRound refuses (the runtime's workers take those requests), so two blocking
// tasks never leave the loop with nobody to drive it. One task per round: a second request read in
// the same round goes to the caller's own threads (RunAfterRound returns false), so a burst is not
// served one handler after another on one thread.
//
// Completion callbacks are looked up by a token the Endpoint chose (not the engine's id),
// because the caller needs a handle for Abort() before the loop has created the RPC.
#include "transport/loop.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/clock.h"
#include "transport/log.h"
#include "transport/sched.h"

namespace homarpc::transport {

Loop::Loop(uint32_t index, const Config& config, std::unique_ptr<IoBackend> io,
           const Endpoint::RequestHandler* handler)
    : index_(index),
      spin_nanos_(int64_t{config.poll_usecs} * kNanosPerMicro),
      spin_policy_(spin_nanos_,
                   config.poll_usecs == 0
                       ? 0
                       : int64_t{std::max(config.poll_usecs, config.busy_poll_usecs)} *
                             kNanosPerMicro),
      io_(std::move(io)),
      handler_(handler),
      direct_send_(config.direct_send),
      first_resend_nanos_(int64_t{config.resend_ticks} * config.tick_usecs * kNanosPerMicro),
      ack_hold_nanos_(int64_t{config.tick_usecs} * kNanosPerMicro) {
  const Address local = io_->local_address();
  engine_ = std::make_unique<Engine>(config, MonotonicClock::Get(), io_.get(), this, local.port(),
                                     local.is_v6());
}

Loop::~Loop() { Stop(); }

void Loop::EnableStandby(int64_t takeover_nanos) {
  assert(!thread_.joinable() && takeover_nanos > 0);
  takeover_nanos_ = takeover_nanos;
}

void Loop::Start() {
  if (takeover_nanos_ == 0) {
    thread_ = std::thread([this] { Run(); });
    return;
  }
  // The driving thread claims the loop before either runs: the standby must not see a loop
  // that nobody drives as "let go". The standby counts as ready from the start: a loop let go
  // before it first looks is found let go when it does.
  drive_state_.store(0);
  standby_ready_.store(true);
  thread_ = std::thread([this] { Relay(/*driving=*/true); });
  standby_thread_ = std::thread([this] { Relay(/*driving=*/false); });
}

void Loop::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_.store(true);
  io_->Notify();
  if (takeover_nanos_ > 0) WakeStandby();
  if (thread_.joinable()) thread_.join();
  if (standby_thread_.joinable()) standby_thread_.join();
}

void Loop::Relay(bool driving) {
  NameThisThread(absl::StrCat("hrpc-loop", index_));
  RequestShortSlice();
  if (driving) thread_id_.store(std::this_thread::get_id());
  for (;;) {
    if (driving) {
      if (RunUntil([this] { return stop_.load(std::memory_order_relaxed); })) {
        Shutdown();
        PlainMutexLock lock(&standby_mu_);
        loop_finished_ = true;  // the standby, waiting out the stop, may leave
        standby_woken_ = true;
        standby_cv_.Signal();
        return;
      }
      // The standby took the loop over while this thread ran a task: stand by in its place.
    }
    if (!StandBy()) return;
    driving = true;
  }
}

bool Loop::RunAfterRound(absl::AnyInvocable<void() &&>& task) {
  if (takeover_nanos_ == 0 || !IsLoopThread() || !round_tasks_.empty() || shutting_down_ ||
      stop_.load(std::memory_order_relaxed) || !standby_ready_.load()) {
    return false;
  }
  round_tasks_.push_back(std::move(task));
  return true;
}

bool Loop::RunRoundTasks() {
  // The vector keeps its capacity: it comes back to round_tasks_ when the loop does.
  std::vector<absl::AnyInvocable<void() &&>> tasks;
  tasks.swap(round_tasks_);
  // Let go. RunOnce flushed, so the backend has nothing queued for the next owner to send.
  thread_id_.store(std::thread::id());
  const bool released = io_->ReleaseOwner();
  assert(released);  // EnableStandby: the epoll backend
  (void)released;
  const uint64_t let_go = drive_state_.load() + 1;  // odd
  let_go_nanos_.store(MonotonicClock::Get()->NowNanos());
  drive_state_.store(let_go);  // seq_cst: against StandBy() parking (Dekker's pattern)
  // A parked standby needs the wake; so does one waiting out a stop (it takes over at once).
  if (standby_parked_.load()) {
    standby_wakes_.fetch_add(1, std::memory_order_relaxed);
    WakeStandby();
  } else if (stop_.load()) {
    WakeStandby();
  }
  for (auto& task : tasks) std::move(task)();
  tasks.clear();
  uint64_t expected = let_go;
  if (!drive_state_.compare_exchange_strong(expected, let_go + 1)) return false;  // taken over
  thread_id_.store(std::this_thread::get_id());
  round_tasks_.swap(tasks);
  return true;
}

namespace {

// The standing-by thread's timer slack: `relaxed_nanos` (Loop::kWatchSlackNanos) for the
// watches of a driven loop, the thread's own for every other wait and again when it leaves
// StandBy().
class WatchSlack {
 public:
  explicit WatchSlack(uint64_t relaxed_nanos)
      : relaxed_nanos_(relaxed_nanos), own_(ThisThreadsTimerSlackNanos()) {}
  ~WatchSlack() { Relax(false); }
  WatchSlack(const WatchSlack&) = delete;
  WatchSlack& operator=(const WatchSlack&) = delete;

  void Relax(bool relaxed) {
    if (relaxed == relaxed_ || own_ == 0) return;  // 0: the kernel did not say; leave it
    if (SetTimerSlack(relaxed ? relaxed_nanos_ : own_)) relaxed_ = relaxed;
  }

 private:
  const uint64_t relaxed_nanos_;
  const uint64_t own_;
  bool relaxed_ = false;
};

}  // namespace

bool Loop::StandBy() {
  const Clock* clock = MonotonicClock::Get();
  WatchSlack slack(kWatchSlackNanos);
  PlainMutexLock lock(&standby_mu_);
  // Whoever drives the loop sees this before it next lets go (the store is sequentially
  // consistent, and the driver's RunAfterRound reads it on the loop thread it holds).
  standby_ready_.store(true);
  for (;;) {
    standby_woken_ = false;
    const bool stopping = stop_.load();
    int64_t wait = takeover_nanos_;
    const uint64_t state = drive_state_.load();
    if (state % 2 == 1) {  // let go
      const int64_t held = clock->NowNanos() - let_go_nanos_.load();
      // On stop, too: the loop's Shutdown() must not wait for a task that may never return.
      if (stopping || held >= takeover_nanos_) {
        uint64_t expected = state;
        if (drive_state_.compare_exchange_strong(expected, state + 1)) {
          standby_ready_.store(false);  // until the thread taken over from stands by
          thread_id_.store(std::this_thread::get_id());
          running_ = false;  // the displaced thread left RunUntil without clearing it
          takeovers_.fetch_add(1, std::memory_order_relaxed);
          return true;
        }
        continue;  // that task ended just now (its thread took the loop back), or another began
      }
      wait = takeover_nanos_ - held;
    } else if (stopping) {
      if (loop_finished_) {
        standby_ready_.store(false);
        return false;
      }
      // The driver shuts the loop down, unless it lets go once more first (a task queued
      // before the stop): watch until one or the other.
    } else if (sleeping_.load() &&
               clock->NowNanos() - let_go_nanos_.load() >= kParkAfterTakeovers * takeover_nanos_) {
      // An idle loop needs no watch: park until the next RunRoundTasks() lets it go. Not while
      // tasks came lately, though the loop sleeps between them: waking a parked standby costs
      // the task a system call and this thread a context switch, every task, where a watch
      // costs one wake-up per takeover time whatever the rate (DESIGN NOTES, "Relay mode").
      standby_parked_.store(true);  // seq_cst, then re-check: RunRoundTasks' side of Dekker
      if (drive_state_.load() % 2 == 0 && !stop_.load()) {
        while (!standby_woken_) standby_cv_.Wait(&standby_mu_);
      }
      standby_parked_.store(false);
      continue;
    }
    // A driven loop that is awake or ran a task lately, or one let go less than the takeover
    // time ago: look again then. The former may be looked at late, in the next tick.
    slack.Relax(/*relaxed=*/state % 2 == 0 && !stopping);
    if (!standby_woken_) standby_cv_.WaitWithTimeout(&standby_mu_, wait);
  }
}

void Loop::WakeStandby() {
  PlainMutexLock lock(&standby_mu_);
  standby_woken_ = true;
  standby_cv_.Signal();
}

bool Loop::Post(absl::AnyInvocable<void()> fn, bool wake) {
  {
    PlainMutexLock lock(&mu_);
    if (!accepting_posts_) return false;
    posted_.push_back(std::move(fn));
    posted_count_.fetch_add(1);
  }
  if (wake && sleeping_.load()) io_->Notify();
  return true;
}

bool Loop::PrepareDirect(const Address& dest, const MessageBytes& request, DirectPacket* direct,
                         RpcId response_to) {
  if (!direct_send_) return false;
  // A request only while calls are sparse and the loop sleeps (SparseCalls must see every
  // request); a response whether the loop sleeps or not (DESIGN NOTES).
  if (response_to == 0 && (!SparseCalls() || !sleeping_.load())) return false;
  if (request.size() > engine_->direct_max_bytes()) return false;
  Engine::DirectRoute route;
  wire::AckEntry ack;
  bool with_ack = false;
  {
    PlainMutexLock lock(&routes_mu_);
    auto it = routes_.find(dest);
    if (it == routes_.end()) return false;
    route = it->second.route;
    if (response_to == 0 && it->second.has_ack) {  // only requests carry acks
      ack = it->second.ack;
      with_ack = true;
      it->second.has_ack = false;
      --stashed_acks_;
    }
  }
  // The copy (see DESIGN NOTES) lives in this thread's scratch until its next direct send.
  thread_local std::vector<uint8_t> scratch;
  const size_t size = request.size();
  if (scratch.size() < size) scratch.resize(size);
  absl::Span<const uint8_t> a, b;
  for (size_t at = 0; at < size;) {  // all the pieces: Gather yields two at a time
    const size_t n = request.Gather(at, size - at, &a, &b);
    std::memcpy(scratch.data() + at, a.data(), a.size());
    if (!b.empty()) std::memcpy(scratch.data() + at + a.size(), b.data(), b.size());
    at += n;
  }
  direct->id = response_to != 0 ? response_to : engine_->ReserveClientId();
  direct->response = response_to != 0;
  engine_->BuildDirectPacket(dest, route, direct->id, static_cast<uint32_t>(size),
                             &direct->packet, with_ack ? &ack : nullptr);
  direct->packet.payload = absl::Span<const uint8_t>(scratch.data(), size);
  return true;
}

bool Loop::SparseCalls() {
  if (spin_nanos_ == 0) return true;  // the loop never spins for responses: always sleep
  // Racy on purpose: concurrent callers may lose an update; the average stays a fair estimate.
  // Gaps count up to twice the spin time, so one stall among back-to-back calls does not make
  // them look sparse; about five gaps that long in a row do.
  const int64_t now = MonotonicClock::Get()->NowNanos();
  const int64_t gap = now - last_call_nanos_.exchange(now, std::memory_order_relaxed);
  int64_t average = call_gap_average_nanos_.load(std::memory_order_relaxed);
  average += (std::min(gap, 2 * spin_nanos_ + 1) - average) / 8;
  call_gap_average_nanos_.store(average, std::memory_order_relaxed);
  return average > spin_nanos_;
}

void Loop::SendDirect(const DirectPacket& direct, int64_t deadline_nanos) {
  if (!io_->SendDirect(direct.packet)) {
    // The kernel refused it (socket buffer full): the loop transmits it itself, right after
    // the adoption posted before.
    Post([this, dest = direct.packet.dest, id = direct.id, response = direct.response] {
      engine_->RetransmitDirect(dest, id, response);
    });
    return;
  }
  if (!sleeping_.load()) return;  // awake: it runs the adoption next
  const int64_t by =
      std::min(MonotonicClock::Get()->NowNanos() + first_resend_nanos_, deadline_nanos);
  if (wake_at_nanos_.load() > by) {
    direct_wakes_.fetch_add(1, std::memory_order_relaxed);
    io_->Notify();
  }
}

bool Loop::RunPosted() {
  if (posted_count_.load() == 0) return false;
  // Two vectors trade places so neither loses its capacity: a Post() after a drain does not
  // allocate. (A nested RunPosted, from Shutdown() inside a posted closure, finds spare_
  // empty and merely allocates.)
  std::vector<absl::AnyInvocable<void()>> batch;
  batch.swap(spare_posted_);
  {
    PlainMutexLock lock(&mu_);
    batch.swap(posted_);
    posted_count_.store(0);
  }
  for (auto& fn : batch) fn();
  const bool any = !batch.empty();
  batch.clear();
  spare_posted_.swap(batch);
  return any;
}

void Loop::Run() {
  thread_id_.store(std::this_thread::get_id());
  NameThisThread(absl::StrCat("hrpc-loop", index_));
  RequestShortSlice();
  RunUntil([this] { return stop_.load(std::memory_order_relaxed); });
  Shutdown();
}

bool Loop::RunUntil(absl::FunctionRef<bool()> done, int64_t wake_by_nanos) {
  assert(!running_);  // a callback must not drive the loop it runs on (see endpoint.h)
  running_ = true;
  const Clock* clock = MonotonicClock::Get();
  int64_t idle_since = clock->NowNanos();  // restarts the spin budget (work, or a wake-up)
  int64_t last_work = idle_since;
  // When the loop last became idle: the first idle round after work, or a wake-up. Unlike
  // idle_since it leaves out the working round itself (a relay handler and its response's send
  // among it), which YieldPolicy must not take for idle time.
  int64_t probe_since = idle_since;
  bool idle = false;
  bool slept = false;  // since the last work
  while (!done()) {
    const int64_t now = clock->NowNanos();
    if (RunOnce()) {
      // Relay mode: the round's tasks run now, the loop let go; nothing of it may be touched
      // once the standby has taken it over.
      if (!round_tasks_.empty() && !RunRoundTasks()) return false;
      if (idle) spin_policy_.OnWorkAfterIdle(IdleGap(now, last_work, slept));
      idle = slept = false;
      idle_since = last_work = now;
      continue;
    }
    if (!idle) probe_since = now;
    idle = true;
    const int64_t spin = spin_policy_.Budget(engine_->MidTransfer(), !pending_.empty());
    const bool spinning = now - idle_since < spin;
    if (spinning && !yield_policy_.nap_due()) {
      // Spin politely: when more threads want to run than there are cores (a blocking caller,
      // this loop and a server loop on 2 cores), a spinning thread that keeps its core until
      // its budget runs out delays the one that has work by that much on every call. But a
      // yield is a system call on the path of the next datagram, so only as often as
      // YieldPolicy finds somebody else wants this CPU.
      yield_policy_.MaybeYield(now, probe_since);
      continue;
    }
    const int64_t next_wake = NextWakeNanos();
    // A timer due within the spin time (the pacer releasing the next packets, typically) is
    // waited for by spinning: a sleep that short costs a wake-up, or a whole millisecond where
    // the kernel's timeout granularity is coarse.
    const bool timer_soon = spin_nanos_ > 0 && next_wake - now <= spin_nanos_;
    int64_t wake_at = std::min(next_wake, wake_by_nanos);
    if (spinning) {
      // YieldPolicy keeps finding another thread on this CPU: move to another one (DESIGN
      // NOTES, "Sharing a CPU"), or where that is not possible nap, the sleep below cut to
      // kNapNanos; unless a timer is due first (the rule above).
      if (timer_soon || !yield_policy_.TakeNap(now)) {
        yield_policy_.MaybeYield(now, probe_since);
        continue;
      }
      if (MoveToAnotherCpu()) {
        yield_policy_.OnMoved();
        cpu_moves_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      wake_at = std::min(wake_at, now + YieldPolicy::kNapNanos);
    } else if (timer_soon) {
      continue;
    }
    // Sleep until a datagram, a Post() or the next timer (or the nap's end).
    wake_at_nanos_.store(wake_at);  // before sleeping_: a direct sender reads it after
    sleeping_.store(true);
    if (posted_count_.load() == 0 && !done()) {
      const int64_t before = clock->NowNanos();
      // The datagram that ends this sleep is dated (IdleGap) only where its date can matter.
      if (spin_nanos_ > 0 && before - last_work <= kDatedGapSpins * spin_nanos_) {
        io_->ReadOneNext();
      }
      const int64_t timeout = wake_at - before;
      io_->Wait(timeout > 0 ? timeout : 0);
      slept = true;
    }
    sleeping_.store(false);
    idle_since = probe_since = clock->NowNanos();
  }
  running_ = false;
  return true;
}

int64_t Loop::IdleGap(int64_t now, int64_t last_work, bool slept) {
  const int64_t gap = now - last_work;
  // Only where the answer can change SpinPolicy's mind: a gap it counts in full (at most
  // 2 x spin) plus one spin's worth of wake-up latency. A slower stream of calls is not worth
  // the system call (~3 us; RunOnce has answered the datagram already, so it delays only the
  // next poll): at 5000 calls/s (200 us apart) the server does not ask, and its CPU per call
  // in `homarpc-bench --scenario=cpu` stayed within noise (4 pairs).
  if (!slept || last_received_ == 0 || gap > kDatedGapSpins * spin_nanos_) return gap;
  const int64_t arrived = io_->LastArrivalNanos();
  // A stamp from before the last work, or none (0), says nothing about this wake-up.
  if (arrived <= last_work) return gap;
  return std::min(gap, arrived - last_work);
}

bool Loop::RunOnce() {
  assert(IsLoopThread());
  bool work = RunPosted();
  // What the posted closures queued (a request started from another thread, a response from a
  // worker), or an inline endpoint's caller between rounds, leaves now, not after the receive
  // poll: that poll is a system call on the path.
  io_->Flush();
  // Then the last round's ended RPCs, and the server RPCs its requests acknowledged, are
  // settled: at that round's end the work sat between a request and its response, or between
  // a response and the caller it wakes. (Flushed first: Reap()'s contract.)
  engine_->Reap();
  const int received = io_->Poll([this](const Address& from, absl::Span<const uint8_t> bytes) {
    // A directly sent request's adoption was posted before its packet left: run it before the
    // response is looked up (DESIGN NOTES).
    if (posted_count_.load() != 0 && !shutting_down_) RunPosted();
    engine_->HandlePacket(from, bytes);
  });
  last_received_ = received;
  work |= received > 0;
  const int64_t now = MonotonicClock::Get()->NowNanos();
  ReturnStashedAcks(now, /*all=*/false);  // what no direct request took within a tick
  if (now >= engine_->NextTimerNanos()) engine_->OnTimer();
  work |= RunDeadlines(now);
  io_->Flush();
  // A round without work may still have ended RPCs (the tick gives up on silent ones), and the
  // loop may sleep next: free them now. A caller whose large request the transport borrowed
  // waits for exactly that (ClientCall::Wait).
  if (!work) engine_->Reap();
  return work;
}

bool Loop::RunDeadlines(int64_t now) {
  bool any = false;
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    const uint64_t token = deadlines_.top().second;
    deadlines_.pop();
    // Entries of RPCs that finished in time are not work (counting them would restart the
    // idle spin for nothing).
    if (!pending_.contains(token)) continue;
    any = true;
    AbortClientRpc(token, absl::DeadlineExceededError("deadline exceeded"));
  }
  return any;
}

int64_t Loop::NextWakeNanos() const {
  const int64_t timer = std::min(engine_->NextTimerNanos(), stash_deadline_nanos_);
  return deadlines_.empty() ? timer : std::min(timer, deadlines_.top().first);
}

void Loop::AdoptCurrentThread() { thread_id_.store(std::this_thread::get_id()); }

void Loop::ReleaseThread() { thread_id_.store(std::thread::id()); }

void Loop::Shutdown() {
  // On the loop's thread (io_uring is single-issuer): refuse new posts, run the ones already
  // queued, and fail whatever is still in flight.
  {
    PlainMutexLock lock(&mu_);
    if (!accepting_posts_) return;
    accepting_posts_ = false;
  }
  shutting_down_ = true;
  RunPosted();
  FailAllClientRpcs();
  // Servers we called would otherwise keep our answered RPCs until they give up asking.
  ReturnStashedAcks(MonotonicClock::Get()->NowNanos(), /*all=*/true);
  engine_->FlushAcks();
  io_->Flush();
  engine_->Reap();
}

void Loop::StartClientRpc(uint64_t token, const Address& dest, MessageBytes request,
                          Endpoint::ResponseCallback done, int64_t deadline_nanos, bool flush) {
  assert(IsLoopThread());
  if (shutting_down_) {
    done(absl::CancelledError("endpoint shut down"));
    return;
  }
  ReturnStashedAck(dest);  // this request can carry it
  absl::StatusOr<RpcId> id = engine_->SendRequest(dest, std::move(request), token);
  if (!id.ok()) {
    done(id.status());
    return;
  }
  // Nothing can answer before this thread polls, so the request need not wait for this.
  if (flush) io_->Flush();
  TrackClientRpc(token, dest, *id, /*direct=*/false, std::move(done), deadline_nanos);
}

void Loop::AdoptDirectRpc(uint64_t token, const Address& dest, RpcId id, MessageBytes request,
                          Endpoint::ResponseCallback done, int64_t deadline_nanos) {
  assert(IsLoopThread());
  if (shutting_down_) {
    done(absl::CancelledError("endpoint shut down"));
    return;
  }
  absl::Status adopted = engine_->AdoptSentRequest(dest, id, std::move(request), token);
  if (!adopted.ok()) {
    // The packet has left (or is leaving): the server may run the request, so the caller must
    // not read this as "nothing sent" (RESOURCE_EXHAUSTED would invite a retry).
    done(absl::UnknownError(
        absl::StrCat("request sent but its response cannot be awaited: ", adopted.message())));
    return;
  }
  TrackClientRpc(token, dest, id, /*direct=*/true, std::move(done), deadline_nanos);
}

void Loop::RefreshRoute(const Address& dest) {
  if (!direct_send_) return;
  const uint64_t epoch = engine_->route_epoch();
  if (epoch == last_route_epoch_ && dest == last_route_dest_) return;
  Engine::DirectRoute route;
  if (!engine_->GetDirectRoute(dest, &route)) return;
  last_route_dest_ = dest;
  last_route_epoch_ = epoch;
  // Called for every RPC: take the lock only when the published route is missing or stale
  // (the loop's own copy of what it published says; routes change when CUTOFFS arrive).
  auto published = published_versions_.find(dest);
  if (published != published_versions_.end() && published->second == route.cutoff_version) {
    return;
  }
  PlainMutexLock lock(&routes_mu_);
  if (routes_.size() >= kMaxDirectRoutes && !routes_.contains(dest)) {
    for (auto& [address, r] : routes_) {
      if (r.has_ack) engine_->PutAck(address, r.ack);
    }
    routes_.clear();
    published_versions_.clear();
    stashed_acks_ = 0;
  }
  routes_[dest].route = route;
  published_versions_[dest] = route.cutoff_version;
}

void Loop::StashAck(const Address& dest) {
  if (!direct_send_) return;
  PlainMutexLock lock(&routes_mu_);
  auto it = routes_.find(dest);
  if (it == routes_.end() || it->second.has_ack) return;
  if (!engine_->TakeAck(dest, &it->second.ack)) return;
  it->second.has_ack = true;
  it->second.stashed_nanos = MonotonicClock::Get()->NowNanos();
  stash_deadline_nanos_ =
      std::min(stash_deadline_nanos_, it->second.stashed_nanos + ack_hold_nanos_);
  ++stashed_acks_;
}

void Loop::ReturnStashedAck(const Address& dest) {
  PlainMutexLock lock(&routes_mu_);
  if (stashed_acks_ == 0) return;
  auto it = routes_.find(dest);
  if (it == routes_.end() || !it->second.has_ack) return;
  engine_->PutAck(dest, it->second.ack);
  it->second.has_ack = false;
  --stashed_acks_;
}

void Loop::ReturnStashedAcks(int64_t now, bool all) {
  if (!all && now < stash_deadline_nanos_) return;
  stash_deadline_nanos_ = INT64_MAX;
  bool returned = false;
  {
    PlainMutexLock lock(&routes_mu_);
    if (stashed_acks_ == 0) return;
    for (auto& [address, r] : routes_) {
      if (!r.has_ack) continue;
      if (!all && now - r.stashed_nanos < ack_hold_nanos_) {
        stash_deadline_nanos_ = std::min(stash_deadline_nanos_, r.stashed_nanos + ack_hold_nanos_);
        continue;
      }
      engine_->PutAck(address, r.ack);
      r.has_ack = false;
      --stashed_acks_;
      returned = true;
    }
  }
  // Sent now, not at the next tick: the server asks for them (NEED_ACK) request_ack_ticks
  // after its response, and they have waited a tick already.
  if (returned) engine_->FlushAcks();
}

void Loop::TrackClientRpc(uint64_t token, const Address& dest, RpcId id, bool direct,
                          Endpoint::ResponseCallback done, int64_t deadline_nanos) {
  RefreshRoute(dest);
  pending_.emplace(token, Pending{id, dest, direct, std::move(done)});
  if (deadline_nanos != INT64_MAX) {
    deadlines_.emplace(deadline_nanos, token);
    // Entries of finished RPCs linger until due; with long deadlines and a high call rate
    // they would pile up, so drop them once they outnumber the live RPCs.
    if (deadlines_.size() > 1024 && deadlines_.size() > 2 * pending_.size()) PruneDeadlines();
  }
}

void Loop::PruneDeadlines() {
  std::vector<std::pair<int64_t, uint64_t>> live;
  live.reserve(pending_.size());
  while (!deadlines_.empty()) {
    if (pending_.contains(deadlines_.top().second)) live.push_back(deadlines_.top());
    deadlines_.pop();
  }
  for (auto& entry : live) deadlines_.push(entry);
}

void Loop::AbortClientRpc(uint64_t token, absl::Status status) {
  assert(IsLoopThread());
  auto it = pending_.find(token);
  if (it == pending_.end()) return;
  engine_->AbortClientRpc(it->second.id, std::move(status));  // fires OnResponse
}

void Loop::SendResponse(const ServerRpcHandle& rpc, MessageBytes response) {
  assert(IsLoopThread());
  absl::Status s = engine_->SendResponse(rpc, std::move(response));
  if (!s.ok()) HOMARPC_LOG(INFO) << "response not sent: " << s.ToString();
}

void Loop::AdoptDirectResponse(const ServerRpcHandle& rpc, MessageBytes response) {
  assert(IsLoopThread());
  absl::Status s = engine_->AdoptSentResponse(rpc, std::move(response));
  if (!s.ok()) HOMARPC_LOG(INFO) << "direct response not adopted: " << s.ToString();
}

void Loop::OnRequest(const ServerRpcHandle& rpc, Buffer request) {
  // Endpoints without a handler run their engine with accept_requests = false, so requests
  // are refused on the wire and never reach this point.
  assert(handler_ != nullptr && *handler_);
  RefreshRoute(rpc.client);  // so a worker thread may send the response directly
  IncomingRequest in;
  in.peer = rpc.client;
  in.payload = std::move(request);
  in.loop_index = index_;
  in.rpc = rpc;
  (*handler_)(std::move(in));
}

void Loop::OnResponse(RpcId id, uint64_t cookie, absl::StatusOr<Buffer> response) {
  auto it = pending_.find(cookie);
  if (it == pending_.end()) return;  // cannot happen: every engine RPC was started here
  Endpoint::ResponseCallback done = std::move(it->second.done);
  // The engine owes its server an ack now.
  if (response.ok() && it->second.direct) StashAck(it->second.dest);
  pending_.erase(it);
  done(std::move(response));
}

void Loop::FailAllClientRpcs() {
  // One pass: a callback that starts a new RPC cannot add to pending_ now (on this thread
  // StartClientRpc fails it at once, shutting_down_; from another, Post() is refused).
  std::vector<uint64_t> tokens;
  tokens.reserve(pending_.size());
  for (auto& [token, pending] : pending_) tokens.push_back(token);
  for (uint64_t token : tokens) AbortClientRpc(token, absl::CancelledError("endpoint shut down"));
  assert(pending_.empty());
}

}  // namespace homarpc::transport
