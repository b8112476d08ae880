// system: the seam between homarpc-bench's harness and the things it measures.
//
// A Scenario is a named workload shape (how big the response is for a given request size). A
// System is one implementation of a scenario — a raw-socket floor or homarpc itself — split
// into a server half and a client half. For every point (size, concurrency) the harness
// (harness.h) forks a server process that calls Serve(), waits for it to announce its port,
// forks a client process that calls RunClient(), and turns the client's samples into a Result.
// Each half therefore runs alone in its own process: it may create threads, and its peak RSS is
// measured with getrusage(RUSAGE_SELF) without the other half mixed in.
//
// The Registry owns every Scenario and System; main() fills it once at start-up (one
// Register... function per file that defines systems) and it is read-only afterwards.
// Adding a system to an existing scenario means writing a System subclass and one AddSystem()
// call; the harness, flags and reports need no change (homarpc_systems.cc is the place for
// homarpc's own systems).
#ifndef HOMARPC_TOOLS_BENCH_SYSTEM_H_
#define HOMARPC_TOOLS_BENCH_SYSTEM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/bench/result.h"

namespace homarpc::bench {

// Knobs from the command line that every point carries. Floors ignore them; homarpc systems map
// them onto the transport's configuration.
struct RunSettings {
  std::string io_backend = "auto";  // "auto", "uring" or "epoll"
  int64_t spin_us = 50;             // busy-poll this long before sleeping; 0 = always block
  int64_t mtu = 0;  // MTU the transport packetises for; 0 = each peer's route MTU (kArgMtu)
  // homarpc's pacing rate in Mbit/s; 0 = no pacing; -1 = the transport's default (25 Gbit/s,
  // which does not pace data to this host: loopback). On a shaped testbed link, its rate (a
  // faster pacer overruns the switch queue).
  int64_t link_mbps = -1;
  // homarpc: pace data to peers on this host too (transport::Config::pace_local).
  bool pace_local = false;
  // homarpc: callers send one-packet requests themselves while the loop sleeps.
  bool direct_send = true;
  // udp-floor-work: busy work per call added to the raw UDP ping-pong (udp_floor.h).
  int64_t floor_work_ns = 3500;
  // Where the halves run. Network namespaces the server and client processes enter before
  // anything else ("" = stay in this one; tools/testbed.sh hosts), and the address servers
  // bind and clients dial. Systems that only work on loopback (the floors) skip other hosts.
  std::string server_netns;
  std::string client_netns;
  std::string server_host = "127.0.0.1";
};

// homarpc's settings as the reports print them: "io_backend=auto spin_us=50 mtu=0
// link_mbps=25000 pace_local=0 direct_send=1" (link_mbps -1 shows the transport's default).
std::string DescribeHomarpcSettings(const RunSettings& settings);

// One measured point. The harness fills it; systems only read it.
struct Point {
  std::string scenario;
  uint64_t size = 0;            // the size axis of the report
  uint64_t request_bytes = 0;   // payload bytes the client sends per RPC (= size)
  uint64_t response_bytes = 0;  // payload bytes the server answers with (the scenario's shape)
  int64_t concurrency = 1;      // RPCs kept in flight by the client
  uint64_t warmup = 0;          // RPCs completed before measuring starts (not recorded)
  uint64_t iterations = 0;      // measuring stops after this many RPCs ...
  int64_t duration_ns = 0;      // ... or after this long, whichever comes first
  RunSettings settings;
};

// How long a server may go without looking at ServerEnv::ShouldStop(). Blocking servers use it
// as their receive timeout.
inline constexpr int64_t kStopCheckMillis = 20;

// What a server half may tell the harness. Implemented by the harness; used from the server
// process, on any one thread at a time.
class ServerEnv {
 public:
  virtual ~ServerEnv() = default;
  // Announces that the server now answers on settings.server_host:`port`. Call exactly once, after the
  // socket is bound (and listening, for TCP); the client process starts only after this.
  virtual void Ready(uint16_t port) = 0;
  // True once the client half has finished; Serve() should then return promptly (within
  // about kStopCheckMillis). Cheap enough to call on every iteration of a busy-poll loop.
  virtual bool ShouldStop() const = 0;
  // Blocks until ShouldStop() is true, without waking before then: for a server whose own
  // threads serve, so that its main thread never takes a core from them.
  virtual void WaitForStop() const = 0;
  // Adds a value to the point's Result (e.g. a server-side counter).
  virtual void AddExtra(Extra extra) = 0;
};

// What a client half hands back. Latencies are per completed RPC of the measuring phase.
struct ClientSamples {
  std::vector<int64_t> latencies_ns;
  uint64_t payload_bytes = 0;  // request + response payload bytes of the measured RPCs
  int64_t elapsed_ns = 0;      // wall time of the measuring phase
  std::vector<Extra> extras;
};

class System {
 public:
  virtual ~System() = default;

  // Unique within its scenario; the --systems flag and the reports use it.
  virtual std::string name() const = 0;
  // Floors are raw-socket baselines; reports divide every row by the best floor at its point.
  virtual bool is_floor() const = 0;
  // False for a system that runs only when --systems names it (an analysis aid, not a
  // baseline or a contender).
  virtual bool in_default_run() const { return true; }
  // Empty when this system can run `point`; otherwise one sentence saying why not (printed
  // with the report, so skipped points are visible rather than silently missing).
  virtual std::string SkipReason(const Point& point) const { return ""; }

  // Runs in the server process: bind a socket on point.settings.server_host, call
  // env.Ready(port), answer requests
  // until env.ShouldStop(). A non-OK status fails the point.
  virtual absl::Status Serve(const Point& point, ServerEnv& env) const = 0;
  // Runs in the client process: talk to settings.server_host:`server_port` following `point` (warmup,
  // then measure until iterations or duration is reached) and return the samples.
  virtual absl::StatusOr<ClientSamples> RunClient(const Point& point,
                                                  uint16_t server_port) const = 0;
};

struct Scenario {
  std::string name;
  std::string description;  // one line, for --help-like listings and the report
  // The response size the server sends for a request of `size` bytes.
  std::function<uint64_t(uint64_t size)> response_bytes;
  std::vector<std::unique_ptr<System>> systems;  // in registration order

  // The system named `name`, or nullptr.
  const System* FindSystem(absl::string_view name) const;
  std::vector<std::string> SystemNames() const;
};

class Registry {
 public:
  // Adds a scenario; the name must be new (checked with an assertion).
  Scenario& AddScenario(absl::string_view name, absl::string_view description,
                        std::function<uint64_t(uint64_t size)> response_bytes);
  // Adds `system` to the existing scenario `scenario`; its name must be new there (asserted).
  void AddSystem(absl::string_view scenario, std::unique_ptr<System> system);

  // The scenario named `name`, or nullptr.
  const Scenario* Find(absl::string_view name) const;
  std::vector<std::string> ScenarioNames() const;

 private:
  Scenario* FindMutable(absl::string_view name);

  std::vector<std::unique_ptr<Scenario>> scenarios_;  // in registration order
};

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_SYSTEM_H_
