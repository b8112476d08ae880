// Loop: one thread that owns one IoBackend (a UDP socket) and one Engine, and drives them.
//
// Each iteration: run closures posted from other threads, deliver received datagrams to the
// engine, run the engine's timers when due, flush its packets to the kernel, then reap ended
// RPCs (only after the flush: packets point into their buffers). When an iteration finds no
// work the loop spins for Config::poll_usecs, then sleeps in IoBackend::Wait() until a
// datagram, a Post(), or the engine's next timer.
//
// Threading: Post() is thread-safe; everything else runs on the loop thread. The engine and
// backend are touched only there (checked with IsLoopThread() assertions in debug builds). In
// relay mode (EnableStandby) the loop thread is whichever of two threads drives it now.
// Owned by an Endpoint.
#ifndef HOMARPC_TRANSPORT_LOOP_H_
#define HOMARPC_TRANSPORT_LOOP_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <utility>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "transport/plain_sync.h"
#include "transport/sched.h"
#include "transport/endpoint.h"
#include "transport/engine.h"
#include "transport/io_backend.h"

namespace homarpc::transport {

// SpinPolicy: how long an idle loop busy-polls before it sleeps (Loop::RunUntil).
//
// Spinning buys latency with CPU: a wake-up through the kernel costs ~50 us here, a busy-polled
// round trip ~5 us. It pays only when work is about to arrive, so the policy spins
//   - busy_spin while a message is mid-transfer (the next grant or data packet is due within
//     microseconds), and just after a long request of ours has gone (its response is due once
//     the server has read it: Engine::MidTransfer);
//   - spin while this loop waits for responses to its own requests (one round trip away), or
//     when recent idle gaps were short: an exponential average (weight 1/8) of the idle time
//     before each piece of work, each gap counted as at most 2 x `spin`, is at most `spin`
//     (back-to-back calls);
//   - not at all otherwise: at a low, steady rate (a request every few hundred microseconds)
//     every spin would end in a sleep anyway, so its CPU time is pure waste.
// The loop reports each idle gap to the arrival of the datagram that ended it, where it slept
// (Loop::IdleGap): its own wake-up latency is not the peers' doing.
// Measured on a 2-core VM (homarpc-bench --scenario=cpu, 64 B calls at 5000/s): see
// docs/benchmarks.md. Loop thread only.
class SpinPolicy {
 public:
  SpinPolicy(int64_t spin_nanos, int64_t busy_spin_nanos)
      : spin_nanos_(spin_nanos), busy_spin_nanos_(busy_spin_nanos) {}

  // Records that work arrived after `idle_nanos` without any. A gap counts as at most twice
  // the spin time: one stall (a descheduled peer, a page fault) would otherwise lift the
  // average far above the threshold and leave a loop that serves back-to-back calls asleep,
  // paying a wake-up on each of the next ~8 calls. Sustained long gaps still stop the spinning
  // within ~5 of them.
  void OnWorkAfterIdle(int64_t idle_nanos) {
    const int64_t gap = std::min(idle_nanos, 2 * spin_nanos_);
    gap_average_nanos_ += (gap - gap_average_nanos_) / 8;
  }
  // How long to spin before sleeping, given what the engine is doing.
  int64_t Budget(bool mid_transfer, bool awaiting_responses) const {
    if (mid_transfer) return busy_spin_nanos_;
    if (awaiting_responses || gap_average_nanos_ <= spin_nanos_) return spin_nanos_;
    return 0;
  }
  int64_t gap_average_nanos() const { return gap_average_nanos_; }

 private:
  const int64_t spin_nanos_;
  const int64_t busy_spin_nanos_;
  int64_t gap_average_nanos_ = 0;
};

class Loop final : public EngineHandler {
 public:
  Loop(uint32_t index, const Config& config, std::unique_ptr<IoBackend> io,
       const Endpoint::RequestHandler* handler);
  ~Loop() override;

  // Relay mode (EndpointOptions::standby): Start() runs a second thread that stands by to take
  // the loop over from one held by a task of RunAfterRound() for `takeover_nanos` or more
  // (loop.cc, DESIGN NOTES). Before Start(); the backend must change owners (epoll).
  void EnableStandby(int64_t takeover_nanos);
  void Start();
  // Stops and joins the thread(s); before exiting, the loop fails every client RPC still in
  // flight with CANCELLED. Idempotent. In relay mode it waits for a running RunAfterRound()
  // task to return.
  void Stop();

  // Relay mode, on the loop thread inside a round (a request handler): runs `task` on this
  // thread once the round's packets have been sent, with the loop let go meanwhile; a task
  // that holds it `takeover_nanos` or more has the standby thread take the loop over, and this
  // thread then stands by in its place. So a short task runs without a hand-off to another
  // thread, and a long or blocking one delays the loop's other work by about the takeover
  // time, once. Returns false, and leaves `task` unrun, when the loop has no standby or its
  // standby is not ready (it is still running a task that was taken over from, as a blocked
  // one may be for long), when called off the loop thread, when a task is already queued
  // this round (one per round: the caller hands the rest to threads of its own), or when the
  // loop is stopping.
  bool RunAfterRound(absl::AnyInvocable<void() &&>& task);
  // How often the standby took the loop over, and whether a standby is ready now (relay mode;
  // false without one). Thread-safe.
  uint64_t takeovers() const { return takeovers_.load(std::memory_order_relaxed); }
  // How often a task's round woke a parked standby (relay mode). Thread-safe.
  uint64_t standby_wakes() const { return standby_wakes_.load(std::memory_order_relaxed); }
  bool standby_ready() const { return standby_ready_.load(); }
  // How often the loop moved itself to another CPU, having found it shared its own with
  // another spinning thread (loop.cc, DESIGN NOTES). Thread-safe.
  uint64_t cpu_moves() const { return cpu_moves_.load(std::memory_order_relaxed); }

  // Runs `fn` on the loop thread soon and returns true. Thread-safe. After Stop() it returns
  // false and `fn` is destroyed unrun. `wake` = false leaves a sleeping loop asleep (it runs
  // `fn` when it next wakes): for callers that arrange its wake-up themselves.
  bool Post(absl::AnyInvocable<void()> fn, bool wake = true);

  // ---- Direct sends (any thread; see DESIGN NOTES in loop.cc) ----
  // A one-packet message this thread sends itself instead of waking a sleeping loop.
  struct DirectPacket {
    RpcId id = 0;
    bool response = false;  // a server's response (else a client's request)
    OutPacket packet;       // payload in a thread-local copy, valid until this thread's next call
  };
  // Prepares `message` to `dest` for a direct send and returns true when it qualifies: the
  // message fits one packet, the loop knows the route to `dest` (it has exchanged RPCs with
  // it), and, for a request, the loop is asleep (an awake one sends it with no wake-up) and
  // requests have been sparse (SparseCalls). A response qualifies whether the loop is asleep
  // or not (loop.cc, DESIGN NOTES). A request
  // gets a fresh id (`response_to` 0): then post AdoptDirectRpc with `direct->id`, without
  // waking, and call SendDirect. A response to server RPC `response_to` (from `dest`): post
  // AdoptDirectResponse likewise.
  bool PrepareDirect(const Address& dest, const MessageBytes& message, DirectPacket* direct,
                     RpcId response_to = 0);
  // Sends the prepared packet, and wakes the loop only if it would otherwise sleep past the
  // RPC's first loss-recovery timer or its deadline, or the send failed.
  void SendDirect(const DirectPacket& direct, int64_t deadline_nanos);
  // Direct sends that had to wake the loop all the same (its timer or the RPC's deadline was
  // too far). Thread-safe.
  uint64_t direct_wakes() const { return direct_wakes_.load(std::memory_order_relaxed); }
  bool IsLoopThread() const { return std::this_thread::get_id() == thread_id_.load(); }

  // Loop-thread operations (call via Post from elsewhere).
  // `deadline_nanos` (MonotonicClock; INT64_MAX = none): abort with DEADLINE_EXCEEDED then.
  // `flush`: hand the request's packets to the kernel before the RPC's bookkeeping (an inline
  // endpoint's caller outside Poll(), whose request would otherwise wait for the next round).
  void StartClientRpc(uint64_t token, const Address& dest, MessageBytes request,
                      Endpoint::ResponseCallback done, int64_t deadline_nanos = INT64_MAX,
                      bool flush = false);
  // StartClientRpc for a request whose one packet another thread sent (PrepareDirect).
  void AdoptDirectRpc(uint64_t token, const Address& dest, RpcId id, MessageBytes request,
                      Endpoint::ResponseCallback done, int64_t deadline_nanos);
  void AbortClientRpc(uint64_t token, absl::Status status);
  void SendResponse(const ServerRpcHandle& rpc, MessageBytes response);
  // SendResponse for a response whose one packet another thread sent (PrepareDirect).
  void AdoptDirectResponse(const ServerRpcHandle& rpc, MessageBytes response);

  // Inline mode (no loop thread): the calling thread becomes the loop's thread and drives it
  // with RunOnce()/RunUntil(); it must call Shutdown() before the loop is destroyed.
  void AdoptCurrentThread();
  // No thread is the loop's until the next AdoptCurrentThread() (an endpoint handed between
  // threads, Endpoint::Release): Post() and the rest see a foreign thread and queue.
  void ReleaseThread();
  // One iteration: posted closures, a flush, a reap of what the last round ended, received
  // datagrams, due timers and deadlines, a flush (and a reap when nothing happened). Returns
  // whether anything happened. Loop thread only.
  bool RunOnce();
  // Iterates until `done()` is true, spinning (SpinPolicy) and then sleeping when idle (never
  // past `wake_by_nanos`, so a caller's deadline is seen). Not re-entrant: a callback running
  // inside it must not call it again.
  // Returns false only in relay mode, when the standby took the loop over while this thread
  // ran a RunAfterRound() task: the loop is no longer this thread's.
  bool RunUntil(absl::FunctionRef<bool()> done, int64_t wake_by_nanos = INT64_MAX);
  // Whether RunUntil is on the stack (its callbacks are running).
  bool running() const { return running_; }
  // Refuses further posts, runs queued ones and fails client RPCs still in flight with
  // CANCELLED. Loop thread only; idempotent. The loop thread calls it when it stops.
  void Shutdown();

  Engine& engine() { return *engine_; }
  IoBackend& io() { return *io_; }
  uint32_t index() const { return index_; }

  // EngineHandler (loop thread).
  void OnRequest(const ServerRpcHandle& rpc, Buffer request) override;
  void OnResponse(RpcId id, uint64_t cookie, absl::StatusOr<Buffer> response) override;

 private:
  void Run();
  // Relay mode: the body of both threads; `driving` says whether this one starts as the loop.
  void Relay(bool driving);
  // Runs the round's RunAfterRound() tasks with the loop let go, then takes it back; false
  // when the standby took it over meanwhile (then nothing of the loop may be touched).
  bool RunRoundTasks();
  // The standby's wait: true once it has taken the loop over, false when the loop stops.
  bool StandBy();
  void WakeStandby();
  bool RunPosted();
  // Aborts client RPCs whose deadline has passed; returns whether any was due.
  bool RunDeadlines(int64_t now);
  int64_t NextWakeNanos() const;
  void PruneDeadlines();
  // Records a request from another thread; true when such requests have been coming further
  // apart than the spin time on average (then they may go direct: see loop.cc).
  bool SparseCalls();
  // Updates routes_[dest] from the engine (direct sends).
  void RefreshRoute(const Address& dest);
  // A client RPC to `dest` that was sent directly finished: set one of the acks the engine
  // owes `dest` aside for the next direct request (if it has a route and nothing is set aside
  // yet). After an RPC the loop sent, the next one most likely goes through the loop too, and
  // the engine's own request carries the ack without the detour.
  void StashAck(const Address& dest);
  // Gives back to the engine, and sends at once, the set-aside acks no direct request took
  // within ack_hold_nanos_ (all of them with `all`); or the one for `dest`, before the loop
  // sends a request there itself, which then carries it.
  void ReturnStashedAcks(int64_t now, bool all);
  void ReturnStashedAck(const Address& dest);
  // Registers a started client RPC (pending_, deadlines_) and refreshes the direct route.
  void TrackClientRpc(uint64_t token, const Address& dest, RpcId id, bool direct,
                      Endpoint::ResponseCallback done, int64_t deadline_nanos);
  void FailAllClientRpcs();
  // The idle time before work found at `now`, the last work having been at `last_work`: for a
  // loop that slept and woke to datagrams, measured to their arrival (SpinPolicy, DESIGN
  // NOTES).
  int64_t IdleGap(int64_t now, int64_t last_work, bool slept);
  // IdleGap dates a sleep's end only for gaps up to this many spin times: those SpinPolicy
  // counts in full (2 x spin, the cap) plus one spin's worth of wake-up latency.
  static constexpr int64_t kDatedGapSpins = 3;

  const uint32_t index_;
  const int64_t spin_nanos_;
  SpinPolicy spin_policy_;
  YieldPolicy yield_policy_;
  std::atomic<uint64_t> cpu_moves_{0};
  std::unique_ptr<IoBackend> io_;
  std::unique_ptr<Engine> engine_;
  const Endpoint::RequestHandler* handler_;

  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  // Relay mode (0 = off): the standby thread, the tasks of this round, and who drives.
  int64_t takeover_nanos_ = 0;
  // The standby parks once the loop sleeps and no task has let it go for this many takeover
  // times; until then it keeps watching (StandBy()).
  static constexpr int64_t kParkAfterTakeovers = 2;
  // The timer slack of the standby's watches of a driven loop (DESIGN NOTES, "Relay mode").
  static constexpr uint64_t kWatchSlackNanos = 4'000'000;
  std::thread standby_thread_;
  std::vector<absl::AnyInvocable<void() &&>> round_tasks_;  // loop thread
  // A generation count: even while a thread drives the loop, odd while it is let go; every
  // change adds one, so a standby's compare-and-swap takes over only the let-go it timed.
  std::atomic<uint64_t> drive_state_{0};
  std::atomic<int64_t> let_go_nanos_{0};  // when the loop was last let go
  std::atomic<bool> standby_parked_{false};  // waiting without a timeout (the loop sleeps)
  // A thread waits in StandBy(), ready to take over: not so while the thread that was taken
  // over from still runs its task (then RunAfterRound refuses).
  std::atomic<bool> standby_ready_{false};
  std::atomic<uint64_t> takeovers_{0};
  std::atomic<uint64_t> standby_wakes_{0};
  PlainMutex standby_mu_;
  PlainCondVar standby_cv_;
  bool standby_woken_ ABSL_GUARDED_BY(standby_mu_) = false;
  // The loop has stopped and shut down: a standby waiting out a stop may leave.
  bool loop_finished_ ABSL_GUARDED_BY(standby_mu_) = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  // While sleeping_: when the loop will wake by itself (its next timer or deadline).
  std::atomic<int64_t> wake_at_nanos_{0};
  // Requests from other threads: when the last came, and the average gap (SparseCalls).
  std::atomic<int64_t> last_call_nanos_{0};
  std::atomic<int64_t> call_gap_average_nanos_{0};
  std::atomic<uint64_t> direct_wakes_{0};
  const bool direct_send_;
  const int64_t first_resend_nanos_;  // silence before a client RPC's first RESEND
  std::atomic<uint64_t> posted_count_{0};
  bool stopped_ = false;
  bool running_ = false;        // RunUntil is on the stack (loop thread only)
  int last_received_ = 0;       // datagrams the last RunOnce() read (loop thread only)
  bool shutting_down_ = false;  // Shutdown() began: new client RPCs fail at once

  PlainMutex mu_;
  std::vector<absl::AnyInvocable<void()>> posted_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::AnyInvocable<void()>> spare_posted_;  // loop thread: RunPosted's batch
  bool accepting_posts_ ABSL_GUARDED_BY(mu_) = true;

  // Direct-send routes: what PrepareDirect needs about each destination this loop has sent a
  // request to (written on the loop thread, read by callers). Bounded: cleared when full.
  static constexpr size_t kMaxDirectRoutes = 256;
  struct Route {
    Engine::DirectRoute route;
    // One acknowledgement the engine owed this server, set aside for the next direct request
    // to carry (StashAck); given back to the engine before its next tick if none took it.
    bool has_ack = false;
    wire::AckEntry ack;
    int64_t stashed_nanos = 0;  // when it was set aside
  };
  PlainMutex routes_mu_;
  absl::flat_hash_map<Address, Route> routes_ ABSL_GUARDED_BY(routes_mu_);
  int stashed_acks_ ABSL_GUARDED_BY(routes_mu_) = 0;
  // Loop thread: the cutoff version last written to routes_ per destination (RefreshRoute
  // skips the lock when nothing changed). Cleared with routes_.
  absl::flat_hash_map<Address, uint16_t> published_versions_;
  // Loop thread: the destination RefreshRoute last found published, and the engine's
  // route_epoch() then; while neither changes it needs no lookup (every RPC of a client with
  // one server, every request of a server with one client: ~200 instructions each).
  Address last_route_dest_;
  uint64_t last_route_epoch_ = UINT64_MAX;
  // Loop thread: when the oldest set-aside ack has waited long enough (INT64_MAX: none), and
  // how long that is (one tick).
  int64_t stash_deadline_nanos_ = INT64_MAX;
  const int64_t ack_hold_nanos_;

  // Client RPCs in flight on this loop: the caller's token -> engine id and callback.
  struct Pending {
    RpcId id = 0;
    Address dest;
    bool direct = false;  // its request was sent by the caller (AdoptDirectRpc)
    Endpoint::ResponseCallback done;
  };
  absl::flat_hash_map<uint64_t, Pending> pending_;
  // Deadlines of client RPCs as (deadline, token), earliest on top. Entries of RPCs that
  // finished first stay until due and are then ignored (their token is gone from pending_).
  std::priority_queue<std::pair<int64_t, uint64_t>, std::vector<std::pair<int64_t, uint64_t>>,
                      std::greater<>>
      deadlines_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_LOOP_H_
