// load: the multi-client, open-loop side of homarpc-bench — the `unloaded`, `mixed`,
// `workload` and `cpu` scenarios of the testbed (issue 4).
//
// The RPC scenarios (rpc_scenarios.h) run one client process against one server process, each
// call made back to back. Load scenarios need more: several client processes on different
// testbed hosts at once, each running one or more *streams* of calls — open-loop Poisson or
// fixed-rate arrivals (the offered load does not slow down when the server does, as in the
// Homa papers), or closed-loop bulk fetches that keep a link busy — and the CPU time every
// process spent while they ran.
//
// Three pieces, each written once for both systems (gRPC C++ and homarpc):
//   - LoadSystem / LoadChannel: what a system supplies — a server that answers `Fetch`
//     (echo.proto: a response of the requested size) and a channel that starts one async call.
//   - DriveStreams() (load_driver.cc): runs a client process's streams over one LoadChannel and
//     records every call.
//   - RunLoadPoint() (load_harness.cc): forks the server process and the client processes into
//     their network namespaces, starts the clients' measuring phases together, reads every
//     process's CPU time around that phase, and gathers the reports.
// Scenarios (load_scenarios.h) build LoadPoints and turn LoadReports into tables.
//
// Threads: RunLoadPoint() is called from main()'s thread while the process has no other
// threads (fork). DriveStreams() runs in a client process; it creates one thread per open-loop
// stream; completions arrive on the system's threads.
#ifndef HOMARPC_TOOLS_BENCH_LOAD_H_
#define HOMARPC_TOOLS_BENCH_LOAD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/bench/system.h"

namespace homarpc::bench {

// ---- What a point asks for ----

// How a stream's calls arrive.
enum class Arrival {
  kPoisson,     // open loop: exponential gaps with mean 1/rate_per_sec (seeded, reproducible)
  kFixedRate,   // open loop: one call every 1/rate_per_sec
  kClosedLoop,  // `in_flight` calls always outstanding; each completion starts the next
};

// Draws request sizes. Implemented by workload.h (a W1-W5 distribution) or FixedSize below.
// Used by one thread at a time.
class SizeSource {
 public:
  virtual ~SizeSource() = default;
  virtual uint64_t Next() = 0;
};

// One stream of calls inside a client process.
struct StreamSpec {
  std::string name;  // "small", "bulk", "w3", ...: the report's row label (unique per point)
  Arrival arrival = Arrival::kClosedLoop;
  double rate_per_sec = 0;  // kPoisson, kFixedRate: calls started per second (> 0)
  int in_flight = 1;        // kClosedLoop: calls kept outstanding (>= 1)
  // Request payload sizes: a fixed size, or (when `workload` is not empty) drawn from the named
  // distribution ("w1".."w5", workload.h) with `seed`.
  uint64_t request_bytes = 64;
  std::string workload;
  uint64_t seed = 1;
  uint64_t response_bytes = 64;  // payload the server answers with (Fetch)
};

// One client process: where it runs and the streams it runs over ONE channel (two streams in
// one process share the channel — the head-of-line-blocking variant of `mixed`).
struct ClientSpec {
  std::string netns;  // "" = stay in the current namespace
  std::vector<StreamSpec> streams;
};

struct LoadPoint {
  std::string scenario;  // "mixed", "workload", ...
  std::string label;     // what distinguishes this point within the scenario ("w3 80%", ...)
  std::vector<ClientSpec> clients;
  // Each client connects, makes `warmup_calls` calls of each stream's first request size
  // (closed loop, one at a time, not recorded), then waits; the harness then starts every
  // client's measuring phase at once. Streams start calls for `duration_ns`, then stop starting
  // and wait up to `drain_ns` for calls still in flight (those that have not completed by then
  // count as `unfinished`).
  int warmup_calls = 20;
  int64_t duration_ns = 0;
  int64_t drain_ns = int64_t{10} * 1000 * 1000 * 1000;
  // Per-call deadline both systems set (0 = none). A call that fails counts as `failed` with
  // its first error kept; it does not end the point.
  int64_t call_timeout_ns = int64_t{30} * 1000 * 1000 * 1000;
  // The largest request or response payload any stream uses: both systems' send and receive
  // limits are set to at least this plus framing.
  uint64_t max_message_bytes = 64;
  RunSettings settings;  // transport knobs, server_netns and server_host; client_netns unused
};

// ---- What a system supplies ----

// One client's connection to the server. Thread-safe: StartCall() may be called from several
// threads at once and from inside a completion.
class LoadChannel {
 public:
  virtual ~LoadChannel() = default;
  // Starts one Fetch call: a request of `request_bytes` payload asking for `response_bytes`
  // back, with `timeout_ns` as its deadline (0 = none). `done` runs exactly once, on any thread
  // (possibly inside StartCall), with OK and the response payload size, or the call's error.
  virtual void StartCall(uint64_t request_bytes, uint64_t response_bytes, int64_t timeout_ns,
                         std::function<void(absl::StatusOr<uint64_t>)> done) = 0;
};

class LoadSystem {
 public:
  virtual ~LoadSystem() = default;
  virtual std::string name() const = 0;  // "grpc" or "homarpc"
  // Runs in the server process (already inside settings.server_netns): serve Fetch (and Echo)
  // on settings.server_host, port chosen by the kernel, call env.Ready(port), serve until
  // env.ShouldStop().
  virtual absl::Status Serve(const LoadPoint& point, ServerEnv& env) const = 0;
  // Runs in a client process (already inside its namespace): a channel to
  // settings.server_host:port with the point's limits and transport settings.
  virtual absl::StatusOr<std::unique_ptr<LoadChannel>> Connect(const LoadPoint& point,
                                                               uint16_t port) const = 0;
};

// ---- What a run gives back ----

// One measured call.
struct CallRecord {
  int64_t start_ns = 0;    // when StartCall was called, relative to the measuring start
  int64_t latency_ns = 0;  // StartCall -> done
  uint64_t request_bytes = 0;
  uint64_t response_bytes = 0;
};

struct StreamReport {
  std::string name;
  std::vector<CallRecord> calls;  // completed OK during the measuring phase (or its drain)
  uint64_t started = 0;           // calls started in the measuring phase
  uint64_t failed = 0;            // completed with an error
  uint64_t unfinished = 0;        // still in flight when the drain ended
  std::string first_error;        // the first failure's status, "" if none
  // Open-loop streams: calls whose start fell more than 1 ms behind their scheduled time (the
  // client could not keep up with the offered rate; the report flags the point).
  uint64_t late_starts = 0;
};

struct ClientReport {
  std::vector<StreamReport> streams;  // in ClientSpec order
  int64_t measure_ns = 0;             // length of the measuring phase (start to last start)
};

// CPU time a process spent (all its threads, user + system) during the measuring phase: for a
// client from the barrier to the end of its own measuring phase (its drain excluded), for the
// server from the barrier to the end of the last client's.
struct ProcessCpu {
  std::string role;  // "server", "client0", "client1", ...
  int64_t cpu_ns = 0;
  int64_t involuntary_switches = 0;
};

struct LoadReport {
  std::string system;
  LoadPoint point;
  std::vector<ClientReport> clients;  // in LoadPoint::clients order
  std::vector<ProcessCpu> cpu;        // server first, then the clients in order
  // The whole machine's steal over the measuring phase (/proc/stat): the share of time the VM's
  // CPUs were ready to run but the host did not run them (machine_cpu.h). Unset where
  // /proc/stat could not be read.
  std::optional<double> steal_fraction;
};

// ---- The pieces ----

// Runs `client`'s streams over `channel` (see LoadPoint for the phases). `start_measuring` is
// called after warmup and blocks until every client of the point is ready (the harness's
// barrier; tests pass a no-op). `measuring_done` (may be empty) is called once the measuring
// phase is over — every stream has stopped starting calls — and before the drain (the
// harness samples CPU time there). Both run on the calling thread. Warmup uses the first size
// each stream's SizeSource draws; the measured calls then draw from a fresh source with the
// same seed, so a workload stream's measured sizes do not depend on warmup_calls.
// Errors: a warmup call that fails or returns the wrong size (the point cannot run), or
// INVALID_ARGUMENT for a malformed point or StreamSpec (see load_internal.h's ValidateClient:
// rate <= 0 for open loop, in_flight < 1, unknown workload, repeated name, duration <= 0, ...).
// Failures during measuring are counted, not returned; so is a response whose payload size is
// not the stream's response_bytes (INTERNAL in first_error).
// `channel` must outlive the call; DriveStreams makes no StartCall() after it returns, but
// completions of unfinished calls may still arrive later (they touch only state DriveStreams
// keeps alive itself and are not counted).
absl::StatusOr<ClientReport> DriveStreams(const LoadPoint& point, const ClientSpec& client,
                                          LoadChannel& channel,
                                          const std::function<void()>& start_measuring,
                                          const std::function<void()>& measuring_done = {});

// Forks the server (in point.settings.server_netns) and one process per client (each in its
// ClientSpec::netns), runs DriveStreams in each with a barrier across all clients, samples
// every child's CPU time (from /proc/<pid>/stat, all threads) when the barrier opens and again
// when each client finishes its measuring phase (the server: when the last client does), and
// returns the reports. Errors: the server or a client failed (its status, prefixed "server: "
// or "client<i>: "), a child overran its time (DEADLINE_EXCEEDED), or died without a report
// (INTERNAL); INVALID_ARGUMENT before anything is forked for a point DriveStreams would
// reject, no clients, or a stream name used twice in the point. The server must announce its port within kServerGraceMillis (harness.h) and
// return from Serve() that long after being told to stop; a client gets kClientGraceMillis to
// connect and warm up, and as long again beyond duration_ns + drain_ns to report. On any error
// every child is killed and reaped before RunLoadPoint returns. Called with no other threads
// in the process.
absl::StatusOr<LoadReport> RunLoadPoint(const LoadSystem& system, const LoadPoint& point);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_LOAD_H_
