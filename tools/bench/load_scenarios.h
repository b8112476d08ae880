// load_scenarios: homarpc-bench's load scenarios — `unloaded`, `mixed`, `workload`, `cpu` —
// homarpc against gRPC C++ on the same Echo service (echo.proto's Fetch), the same offered
// load, in one run; meant for the namespace testbed (tools/testbed.sh) but runnable on
// loopback.
//
//   unloaded   one client host, one call at a time: round-trip latency by request size
//              (--sizes, default 64 B .. 8 MiB by powers of 4 and 8 MiB), 64 B responses. The
//              denominators of slowdown, and a table of their own.
//   mixed      server on host 0. Client host 1: `bulk`, closed loop, --bulk_in_flight calls
//              each fetching a --bulk_bytes response (default 8 MiB, 2 in flight) that keep the
//              server's link busy. Client host 2: `small`, 64 B calls at a fixed
//              --small_rate (default 1000/s). Variant `mixed-shared`: both streams from host 1
//              over one channel (HTTP/2's head-of-line blocking). Reports small p50/p99/p99.9
//              and bulk goodput. Needs 3 hosts (2 on loopback is fine: all "hosts" are one).
//   workload   for each of --workloads (default w3,w4) and --loads (default 0.5,0.8): Poisson
//              arrivals from every client host (hosts 1..N-1) to host 0, request sizes drawn
//              from the distribution, 64 B responses, offered load = load x link rate in
//              request payload. First an unloaded calibration per system at
//              CalibrationSizes(); then slowdown per decile bucket (workload.h). Slowdown is
//              latency / the unloaded latency of the same size, with one reference for
//              both systems (the faster system's, homarpc's, so the columns compare
//              latencies); the table also shows gRPC's p99 against its own unloaded latency.
//   cpu        64 B calls at a fixed --cpu_rate (default 5000/s) from one client host: CPU time
//              per RPC of the client process, the server process and both (ProcessCpu),
//              homarpc vs gRPC.
//
// Output: Markdown tables (default) or JSON lines (--json), to stdout; the JSON lines also to
// LoadOptions::json_out when set (--json_out); and with --data_dir=DIR
// the files tools/bench-report.sh plots with gnuplot, whitespace-separated, `#` header line:
//   DIR/unloaded-<system>.dat            size_bytes p50_us p99_us
//   DIR/mixed[-shared]-<system>.cdf      latency_us cumulative_fraction   (small calls, every
//                                        sample, or at most 2000 evenly spaced ranks)
//   DIR/workload-<w>-<load%>-<system>.dat  bucket_upper_bytes p50_slowdown p99_slowdown calls
// and with --calls_dir=DIR every completed call of every point (CallsData in load_report.h):
//   DIR/<scenario>-<label>-<system>.calls  client stream start_us latency_us request_bytes
//                                          response_bytes
//
// Called from main()'s thread (fork inside, see load.h).
#ifndef HOMARPC_TOOLS_BENCH_LOAD_SCENARIOS_H_
#define HOMARPC_TOOLS_BENCH_LOAD_SCENARIOS_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/bench/load.h"
#include "tools/bench/system.h"

namespace homarpc::bench {

// True for unloaded, mixed, workload, cpu.
bool IsLoadScenario(absl::string_view scenario);
std::vector<std::string> LoadScenarioNames();
// One paragraph for --list and the Markdown report; "" for other names.
std::string LoadScenarioDescription(absl::string_view scenario);

struct LoadOptions {
  std::string scenario;
  std::vector<std::string> systems;  // empty = both ("grpc", "homarpc")
  std::vector<uint64_t> sizes;       // unloaded; empty = its default
  int64_t duration_ms = 10000;       // measuring phase per point
  int warmup_calls = 20;
  std::vector<std::string> workloads = {"w3", "w4"};
  std::vector<double> loads = {0.5, 0.8};
  double small_rate = 1000;
  uint64_t bulk_bytes = uint64_t{8} << 20;
  int bulk_in_flight = 2;
  double cpu_rate = 5000;
  // homarpc's server runs its sync handlers on the loop thread (--executor=inline) instead of
  // its default worker pool: one thread hand-off less per call, for handlers that never block.
  bool homarpc_inline_handlers = false;
  // Both systems' servers answer Fetch with the callback API (Echo::CallbackService, finished
  // through the context's default reactor on the thread that received the call: gRPC's
  // callback threads, homarpc's loop) instead of the sync one (--server_api=callback). The
  // executor then only takes homarpc's large responses.
  bool callback_handlers = false;
  // Client hosts: the testbed's hosts 1..hosts-1 (namespace names from settings and
  // HOMARPC_TESTBED_*), or {"", ""} on loopback (two client processes here; empty means the
  // same).
  std::vector<std::string> client_netns;
  bool json = false;
  // Not owned; null = none. Every JSON line is also appended here (--json_out), whatever `json`.
  std::FILE* json_out = nullptr;
  std::string data_dir;  // "" = no data files
  std::string calls_dir;  // "" = none; else every point's calls (CallsData, load_report.h)
  RunSettings settings;
};

// Runs the scenario for every selected system and prints its tables or JSON lines; writes data
// files. Returns 0, or 1 when a point failed (reported, the run goes on), as main() does.
int RunLoadScenario(const LoadOptions& options);

// The systems, for tests and listing. `inline_handlers`: LoadOptions::homarpc_inline_handlers;
// `callback_handlers`: LoadOptions::callback_handlers.
std::unique_ptr<LoadSystem> MakeGrpcLoadSystem(bool callback_handlers = false);
std::unique_ptr<LoadSystem> MakeHomarpcLoadSystem(bool inline_handlers = false,
                                                  bool callback_handlers = false);

// The message size limit both systems set for `point`, on client and server, for send and
// receive: MessageLimitFor() (rpc_scenarios.h) of point.max_message_bytes — that plus 64 KiB
// of framing, never below the 4 MiB both default to.
int LoadMessageLimit(const LoadPoint& point);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_LOAD_SCENARIOS_H_
