// homarpc-bench: side-by-side measurements of homarpc against raw-socket floors and against
// gRPC C++, one run at a time.
//
// main() parses the flags (every value flag is parsed by parse.h so that any bad value ends
// the program with one line on stderr and exit status 2), fills the Registry, and runs each
// point — every (size, concurrency, system) of the chosen scenario — through RunPoint(), which
// forks a server and a client process per point. Output: a Markdown table (default) or one
// JSON object per line (--json) on stdout; progress, skips and errors on stderr. With
// --json_out=FILE every JSON line is also appended to FILE, whatever stdout shows.
// The load scenarios (load_scenarios.h: unloaded, mixed, workload, cpu) take another path:
// ParseLoadOptions() turns the flags into LoadOptions and RunLoadScenario() runs them.
// Exit status: 0 all points ran, 1 some point failed, 2 bad command line. (Flags absl itself
// rejects — an unknown flag, --json=maybe — end with absl's own message and status 1.)
// Single-threaded: RunPoint() and RunLoadPoint() fork, so the parent never starts threads.
#include <sys/utsname.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/bench/harness.h"
#include "tools/bench/homarpc_systems.h"
#include "tools/bench/load_scenarios.h"
#include "tools/bench/machine_cpu.h"
#include "tools/bench/parse.h"
#include "tools/bench/report.h"
#include "tools/bench/result.h"
#include "tools/bench/rpc_report.h"
#include "tools/bench/rpc_scenarios.h"
#include "tools/bench/system.h"
#include "tools/bench/transport_echo.h"
#include "tools/bench/workload.h"
#include "transport/io_backend.h"

ABSL_FLAG(std::string, scenario, "transport-echo", "Scenario to run (--list shows them).");
ABSL_FLAG(std::string, systems, "",
          "Comma list of systems to run; empty = every system of the scenario.");
ABSL_FLAG(std::string, sizes, "",
          "Comma list of request sizes in bytes, at most 1G; suffixes K, M, G, KiB, MiB, GiB "
          "(binary). Empty = the scenario's default: 64,1K,16K,1M for unary, 64 for "
          "throughput, 64,1K,16K,64K,1M,16M otherwise.");
ABSL_FLAG(std::string, concurrency, "",
          "Comma list of RPCs kept in flight (1..1024). Empty = the scenario's default: "
          "1,8,32,128 for throughput, 1 otherwise.");
ABSL_FLAG(std::string, iterations, "100000",
          "Measured RPCs per point, at most (1..10000000); see --duration_ms.");
ABSL_FLAG(std::string, duration_ms, "",
          "Measuring time per point, at most (1..600000); whichever of this and --iterations "
          "comes first ends the point. Empty = 1000, or 10000 for the load scenarios (which "
          "measure for exactly this long).");
ABSL_FLAG(std::string, warmup, "",
          "Unrecorded RPCs before measuring (0..1000000). Empty = 100, or 20 per stream for "
          "the load scenarios.");
ABSL_FLAG(bool, json, false, "Write one JSON object per line instead of a Markdown table.");
ABSL_FLAG(std::string, json_out, "",
          "Also append every JSON line (those --json prints) to this file, created if missing; "
          "stdout still shows what --json selects. Empty = none.");
ABSL_FLAG(std::string, io_backend, "auto", "homarpc's UDP I/O: auto, uring or epoll.");
ABSL_FLAG(std::string, spin_us, "50",
          "homarpc: busy-poll this long before sleeping (0..1000000; 0 = always block).");
ABSL_FLAG(std::string, mtu, "0",
          "homarpc: MTU to packetise for, 576..65000; 0 = each peer's route MTU, at most 9000.");
ABSL_FLAG(std::string, direct_send, "1",
          "homarpc: 1 = callers send one-packet requests themselves while the transport's loop "
          "sleeps; 0 = every request goes through the loop thread.");
ABSL_FLAG(std::string, floor_work_ns, "3500",
          "udp-floor-work (unary; run only when --systems names it): busy work per call added "
          "to the raw UDP ping-pong, in ns (0..1000000): what an RPC system whose own code "
          "takes that long could reach on this machine.");
ABSL_FLAG(std::string, executor, "",
          "homarpc: where the server's sync handlers run: inline (on the loop thread), pool "
          "(homarpc's default: quick ones on the loop thread with a standby thread, the rest "
          "on workers) or pool-only (every one on a worker; the unary scenario only). Empty = "
          "pool.");
ABSL_FLAG(std::string, server_api, "sync",
          "Load scenarios: the API both systems' servers answer Fetch with, sync "
          "(Echo::Service) or callback (Echo::CallbackService, finished on the thread that "
          "received the call).");
ABSL_FLAG(std::string, link_mbps, "",
          "homarpc: pacing rate in Mbit/s (0..10000000; 0 = no pacing). Empty = homarpc's "
          "default (25000, which does not pace data to this host) on loopback, the testbed's "
          "link rate with --testbed.");
ABSL_FLAG(std::string, pace_local, "0",
          "homarpc: 1 = pace data to peers on this host (loopback) at --link_mbps too, as if "
          "it crossed a NIC; 0 = send it as soon as it is granted.");
ABSL_FLAG(bool, testbed, false,
          "Run inside tools/testbed.sh (from `testbed.sh run -- homarpc-bench ...`): the server "
          "in host 0, the client in host 1, over the shaped links. Loopback-only systems skip.");
ABSL_FLAG(std::string, workloads, "w3,w4",
          "workload scenario: comma list of the size distributions to run (w1..w5).");
ABSL_FLAG(std::string, loads, "0.5,0.8",
          "workload scenario: comma list of offered loads, fractions of the link rate in (0, 1].");
ABSL_FLAG(std::string, small_rate, "1000",
          "mixed scenario: calls per second of the small 64 B stream (0 < rate <= 1000000).");
ABSL_FLAG(std::string, bulk_bytes, "8M",
          "mixed scenario: response payload of each bulk fetch, at most 1G (suffixes as "
          "--sizes).");
ABSL_FLAG(std::string, bulk_in_flight, "2", "mixed scenario: bulk fetches kept in flight (1..64).");
ABSL_FLAG(std::string, cpu_rate, "5000",
          "cpu scenario: calls per second of 64 B (0 < rate <= 1000000).");
ABSL_FLAG(std::string, data_dir, "",
          "Load scenarios: also write the data files tools/bench-report.sh plots into this "
          "folder (created if needed). Empty = none.");
ABSL_FLAG(std::string, calls_dir, "",
          "Load scenarios: also write every completed call of every point (client, stream, "
          "start, latency, sizes) into this folder, one file per point and system, for "
          "looking at a tail. Empty = none.");
ABSL_FLAG(bool, list, false, "List scenarios and their systems, then exit.");
ABSL_FLAG(std::string, cpu_probe_ms, "",
          "Before the points (not the load scenarios): spin one thread per CPU this long and "
          "report how often, and for how long, the machine took the CPU away (0..10000; 0 = "
          "skip). Empty = 300.");

namespace homarpc::bench {
namespace {

// The defaults of --sizes and --concurrency for scenarios without their own.
constexpr char kDefaultSizes[] = "64,1024,16384,65536,1048576,16777216";
constexpr char kDefaultConcurrency[] = "1";
// A gap in a thread spinning on the clock longer than this is the machine's (machine_cpu.h):
// an uninterrupted spin step takes ~30 ns here.
constexpr int64_t kInterruptionThresholdNanos = 2000;

// A tc rate ("1gbit", "500mbit", "12.5mbps" = bytes per second) in Mbit/s.
absl::StatusOr<int64_t> TcRateMbps(const std::string& rate) {
  static const std::regex kRate(R"(^([0-9]+(\.[0-9]+)?)([kmgt]?)(bit|bps)$)");
  std::smatch m;
  if (!std::regex_match(rate, m, kRate)) {
    return absl::InvalidArgumentError(absl::StrCat("'", rate, "' is not a tc rate"));
  }
  double value = std::stod(m[1].str());
  const std::string unit = m[3].str();
  const double per_unit = unit.empty() ? 1e-6 : unit == "k" ? 1e-3 : unit == "m" ? 1 : unit == "g" ? 1e3 : 1e6;
  value *= per_unit * (m[4].str() == "bps" ? 8 : 1);
  return static_cast<int64_t>(value + 0.5);
}

// --testbed: the halves go into tools/testbed.sh's hosts 0 (server) and 1 (client), which the
// script describes in the environment of the command it runs.
absl::Status ApplyTestbed(RunSettings* settings) {
  const char* prefix = std::getenv("HOMARPC_TESTBED_PREFIX");
  const char* addr = std::getenv("HOMARPC_TESTBED_ADDR_0");
  const char* rate = std::getenv("HOMARPC_TESTBED_RATE");
  if (prefix == nullptr || addr == nullptr || rate == nullptr) {
    return absl::FailedPreconditionError(
        "not inside a testbed; run as: tools/testbed.sh run -- homarpc-bench --testbed ...");
  }
  settings->server_netns = absl::StrCat(prefix, "-h0");
  settings->client_netns = absl::StrCat(prefix, "-h1");
  settings->server_host = addr;
  absl::StatusOr<int64_t> mbps = TcRateMbps(rate);
  if (!mbps.ok()) return mbps.status();
  settings->link_mbps = *mbps;
  return absl::OkStatus();
}

// Prefixes a parse error with its flag's name.
absl::Status FlagError(absl::string_view flag, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", status.message()));
}

// The flags every scenario shares that set RunSettings: --io_backend, --spin_us, --mtu,
// --direct_send, --pace_local, --floor_work_ns, --testbed, --link_mbps.
absl::Status ParseSettings(RunSettings* settings) {
  settings->io_backend = absl::GetFlag(FLAGS_io_backend);
  if (!transport::ParseIoKind(settings->io_backend).has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("--io_backend: '", settings->io_backend,
                                                   "' is not one of auto, uring, epoll"));
  }
  absl::StatusOr<int64_t> spin_us = ParseBoundedInt(absl::GetFlag(FLAGS_spin_us), 0, 1000000);
  if (!spin_us.ok()) return FlagError("spin_us", spin_us.status());
  settings->spin_us = *spin_us;
  absl::StatusOr<int64_t> mtu = ParseBoundedInt(absl::GetFlag(FLAGS_mtu), 0, 65000);
  if (mtu.ok() && *mtu > 0 && *mtu < 576) {
    mtu = absl::InvalidArgumentError(absl::StrCat(*mtu, " is neither 0 nor in [576, 65000]"));
  }
  if (!mtu.ok()) return FlagError("mtu", mtu.status());
  settings->mtu = *mtu;
  absl::StatusOr<int64_t> direct = ParseBoundedInt(absl::GetFlag(FLAGS_direct_send), 0, 1);
  if (!direct.ok()) return FlagError("direct_send", direct.status());
  settings->direct_send = *direct == 1;
  absl::StatusOr<int64_t> pace_local = ParseBoundedInt(absl::GetFlag(FLAGS_pace_local), 0, 1);
  if (!pace_local.ok()) return FlagError("pace_local", pace_local.status());
  settings->pace_local = *pace_local == 1;
  absl::StatusOr<int64_t> work = ParseBoundedInt(absl::GetFlag(FLAGS_floor_work_ns), 0, 1000000);
  if (!work.ok()) return FlagError("floor_work_ns", work.status());
  settings->floor_work_ns = *work;
  if (absl::GetFlag(FLAGS_testbed)) {
    absl::Status s = ApplyTestbed(settings);
    if (!s.ok()) return FlagError("testbed", s);
  }
  if (const std::string link = absl::GetFlag(FLAGS_link_mbps); !link.empty()) {
    absl::StatusOr<int64_t> mbps = ParseBoundedInt(link, 0, 10000000);
    if (!mbps.ok()) return FlagError("link_mbps", mbps.status());
    settings->link_mbps = *mbps;
  }
  return absl::OkStatus();
}

// --duration_ms and --warmup, with `default_*` when the flag is left empty.
absl::StatusOr<int64_t> ParseDurationMs(int64_t default_ms) {
  const std::string text = absl::GetFlag(FLAGS_duration_ms);
  if (text.empty()) return default_ms;
  absl::StatusOr<int64_t> duration_ms = ParseBoundedInt(text, 1, 600000);
  if (!duration_ms.ok()) return FlagError("duration_ms", duration_ms.status());
  return *duration_ms;
}

absl::StatusOr<int64_t> ParseWarmup(int64_t default_calls) {
  const std::string text = absl::GetFlag(FLAGS_warmup);
  if (text.empty()) return default_calls;
  absl::StatusOr<int64_t> warmup = ParseBoundedInt(text, 0, 1000000);
  if (!warmup.ok()) return FlagError("warmup", warmup.status());
  return *warmup;
}

// Every scenario name, for the error that lists them.
std::vector<std::string> AllScenarioNames(const Registry& registry) {
  std::vector<std::string> names = registry.ScenarioNames();
  for (std::string& name : LoadScenarioNames()) names.push_back(std::move(name));
  return names;
}

// Everything the flags decide, validated.
struct Options {
  const Scenario* scenario = nullptr;
  std::vector<const System*> systems;
  std::vector<uint64_t> sizes;
  std::vector<int64_t> concurrencies;
  uint64_t iterations = 0;
  int64_t duration_ms = 0;
  uint64_t warmup = 0;
  bool json = false;
  std::FILE* json_out = nullptr;  // --json_out, opened by main(); not owned
  RunSettings settings;
  int64_t cpu_probe_ms = 0;  // --cpu_probe_ms
};

absl::StatusOr<Options> ParseOptions(const Registry& registry) {
  Options options;
  const std::string scenario_name = absl::GetFlag(FLAGS_scenario);
  options.scenario = registry.Find(scenario_name);
  if (options.scenario == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--scenario: unknown scenario '", scenario_name,
                     "' (known: ", absl::StrJoin(AllScenarioNames(registry), ", "), ")"));
  }
  const std::vector<std::string> names = SplitNames(absl::GetFlag(FLAGS_systems));
  if (names.empty()) {
    for (const auto& system : options.scenario->systems) {
      if (system->in_default_run()) options.systems.push_back(system.get());
    }
  }
  for (const std::string& name : names) {
    const System* system = options.scenario->FindSystem(name);
    if (system == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--systems: unknown system '", name, "' for ", scenario_name,
                       " (known: ", absl::StrJoin(options.scenario->SystemNames(), ", "), ")"));
    }
    options.systems.push_back(system);
  }
  if (absl::GetFlag(FLAGS_server_api) != "sync") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--server_api: only the load scenarios (unloaded, mixed, workload, cpu) take it, not ",
        scenario_name));
  }

  std::string sizes_text = absl::GetFlag(FLAGS_sizes);
  if (sizes_text.empty()) sizes_text = DefaultSizes(scenario_name);
  if (sizes_text.empty()) sizes_text = kDefaultSizes;
  absl::StatusOr<std::vector<uint64_t>> sizes = ParseByteSizeList(sizes_text);
  if (!sizes.ok()) return FlagError("sizes", sizes.status());
  options.sizes = *sizes;
  std::string concurrency_text = absl::GetFlag(FLAGS_concurrency);
  if (concurrency_text.empty()) concurrency_text = DefaultConcurrency(scenario_name);
  if (concurrency_text.empty()) concurrency_text = kDefaultConcurrency;
  absl::StatusOr<std::vector<int64_t>> concurrencies =
      ParseBoundedIntList(concurrency_text, 1, 1024);
  if (!concurrencies.ok()) return FlagError("concurrency", concurrencies.status());
  options.concurrencies = *concurrencies;

  absl::StatusOr<int64_t> iterations =
      ParseBoundedInt(absl::GetFlag(FLAGS_iterations), 1, 10000000);
  if (!iterations.ok()) return FlagError("iterations", iterations.status());
  options.iterations = static_cast<uint64_t>(*iterations);
  absl::StatusOr<int64_t> duration_ms = ParseDurationMs(1000);
  if (!duration_ms.ok()) return duration_ms.status();
  options.duration_ms = *duration_ms;
  absl::StatusOr<int64_t> warmup = ParseWarmup(100);
  if (!warmup.ok()) return warmup.status();
  options.warmup = static_cast<uint64_t>(*warmup);
  if (absl::Status s = ParseSettings(&options.settings); !s.ok()) return s;
  options.json = absl::GetFlag(FLAGS_json);
  const std::string probe_text = absl::GetFlag(FLAGS_cpu_probe_ms);
  absl::StatusOr<int64_t> probe_ms = ParseBoundedInt(probe_text.empty() ? "300" : probe_text, 0,
                                                     10000);
  if (!probe_ms.ok()) return FlagError("cpu_probe_ms", probe_ms.status());
  options.cpu_probe_ms = *probe_ms;
  return options;
}

// A rate flag: calls per second, 0 < rate <= 10^6.
absl::StatusOr<double> ParseRate(absl::string_view flag, const std::string& text) {
  double rate = 0;
  if (!absl::SimpleAtod(text, &rate) || !(rate > 0) || rate > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": '", text, "' is not a rate in calls per second in (0, 1000000]"));
  }
  return rate;
}

// The load scenarios' flags (load_scenarios.h). --concurrency and --iterations do not apply to
// them and are ignored.
absl::StatusOr<LoadOptions> ParseLoadOptions(const std::string& scenario) {
  LoadOptions options;
  options.scenario = scenario;
  if (!absl::GetFlag(FLAGS_cpu_probe_ms).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cpu_probe_ms: the load scenarios (unloaded, mixed, workload, cpu) do not take it, "
        "not ", scenario));
  }
  for (const std::string& name : SplitNames(absl::GetFlag(FLAGS_systems))) {
    if (name != kGrpcSystem && name != kHomarpcSystem) {
      return absl::InvalidArgumentError(absl::StrCat("--systems: unknown system '", name, "' for ",
                                                     scenario, " (known: ", kGrpcSystem, ", ",
                                                     kHomarpcSystem, ")"));
    }
    options.systems.push_back(name);
  }
  if (const std::string sizes_text = absl::GetFlag(FLAGS_sizes); !sizes_text.empty()) {
    absl::StatusOr<std::vector<uint64_t>> sizes = ParseByteSizeList(sizes_text);
    if (!sizes.ok()) return FlagError("sizes", sizes.status());
    options.sizes = *sizes;
  }
  absl::StatusOr<int64_t> duration_ms = ParseDurationMs(10000);
  if (!duration_ms.ok()) return duration_ms.status();
  options.duration_ms = *duration_ms;
  absl::StatusOr<int64_t> warmup = ParseWarmup(20);
  if (!warmup.ok()) return warmup.status();
  options.warmup_calls = static_cast<int>(*warmup);

  options.workloads = SplitNames(absl::GetFlag(FLAGS_workloads));
  if (options.workloads.empty()) {
    return absl::InvalidArgumentError("--workloads: empty (name at least one of w1..w5)");
  }
  for (const std::string& name : options.workloads) {
    absl::StatusOr<Workload> workload = Workload::BuiltIn(name);
    if (!workload.ok()) return FlagError("workloads", workload.status());
  }
  options.loads.clear();
  for (const std::string& text : SplitNames(absl::GetFlag(FLAGS_loads))) {
    double load = 0;
    if (!absl::SimpleAtod(text, &load) || !(load > 0) || load > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--loads: '", text, "' is not a fraction of the link rate in (0, 1]"));
    }
    options.loads.push_back(load);
  }
  if (options.loads.empty()) {
    return absl::InvalidArgumentError("--loads: empty (e.g. --loads=0.5,0.8)");
  }
  absl::StatusOr<double> small_rate = ParseRate("small_rate", absl::GetFlag(FLAGS_small_rate));
  if (!small_rate.ok()) return small_rate.status();
  options.small_rate = *small_rate;
  absl::StatusOr<uint64_t> bulk_bytes = ParseByteSize(absl::GetFlag(FLAGS_bulk_bytes));
  if (!bulk_bytes.ok()) return FlagError("bulk_bytes", bulk_bytes.status());
  options.bulk_bytes = *bulk_bytes;
  absl::StatusOr<int64_t> bulk_in_flight =
      ParseBoundedInt(absl::GetFlag(FLAGS_bulk_in_flight), 1, 64);
  if (!bulk_in_flight.ok()) return FlagError("bulk_in_flight", bulk_in_flight.status());
  options.bulk_in_flight = static_cast<int>(*bulk_in_flight);
  absl::StatusOr<double> cpu_rate = ParseRate("cpu_rate", absl::GetFlag(FLAGS_cpu_rate));
  if (!cpu_rate.ok()) return cpu_rate.status();
  options.cpu_rate = *cpu_rate;
  // Validated in main() with the unary scenario's use of it; empty = homarpc's default pool.
  options.homarpc_inline_handlers = absl::GetFlag(FLAGS_executor) == "inline";
  const std::string server_api = absl::GetFlag(FLAGS_server_api);
  if (server_api != "sync" && server_api != "callback") {
    return absl::InvalidArgumentError(
        absl::StrCat("--server_api: '", server_api, "' is not sync or callback"));
  }
  options.callback_handlers = server_api == "callback";
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.calls_dir = absl::GetFlag(FLAGS_calls_dir);
  options.json = absl::GetFlag(FLAGS_json);

  if (absl::Status s = ParseSettings(&options.settings); !s.ok()) return s;
  if (absl::GetFlag(FLAGS_testbed)) {
    // Client hosts: every testbed host but the server's (host 0).
    const char* hosts_text = std::getenv("HOMARPC_TESTBED_HOSTS");
    int hosts = 0;
    if (hosts_text == nullptr || !absl::SimpleAtoi(hosts_text, &hosts) || hosts < 2) {
      return absl::InvalidArgumentError(
          "--testbed: HOMARPC_TESTBED_HOSTS is missing or below 2 (run under tools/testbed.sh)");
    }
    const char* prefix = std::getenv("HOMARPC_TESTBED_PREFIX");  // set: ApplyTestbed checked
    for (int host = 1; host < hosts; ++host) {
      options.client_netns.push_back(absl::StrCat(prefix, "-h", host));
    }
  } else {
    options.client_netns = {"", ""};  // loopback: two client processes, both here
  }
  if (scenario == "workload" && options.settings.link_mbps <= 0) {
    return absl::InvalidArgumentError(
        "--link_mbps: the workload scenario offers a fraction of a link rate; give one "
        "(e.g. --link_mbps=1000) or run with --testbed");
  }
  return options;
}

std::string SettingsLine(const Options& options, const RpcOptions& rpc_options) {
  utsname host{};
  uname(&host);
  std::string executor;
  if (options.scenario->name == kUnary) {
    executor = absl::StrCat(" executor=", ExecutorName(rpc_options.executor));
  }
  return absl::StrFormat(
      "Per point: at most %d RPCs or %d ms after %d warmup RPCs. homarpc: %s%s. %s, %d CPUs, "
      "%s %s.",
      options.iterations, options.duration_ms, options.warmup,
      DescribeHomarpcSettings(options.settings), executor,
      options.settings.server_netns.empty()
          ? std::string("Loopback")
          : absl::StrCat("Testbed: server in ", options.settings.server_netns, " at ",
                         options.settings.server_host, ", client in ",
                         options.settings.client_netns, " (tools/testbed.sh, rate ",
                         std::getenv("HOMARPC_TESTBED_RATE"), ")"),
      std::thread::hardware_concurrency(), host.sysname, host.release);
}

void PrintList(const Registry& registry) {
  for (const std::string& name : registry.ScenarioNames()) {
    const Scenario* scenario = registry.Find(name);
    std::vector<std::string> systems;
    for (const auto& system : scenario->systems) {
      systems.push_back(system->in_default_run() ? system->name()
                                                 : system->name() + " (only when named)");
    }
    std::printf("%s: %s\n  systems: %s\n", name.c_str(), scenario->description.c_str(),
                absl::StrJoin(systems, ", ").c_str());
  }
  for (const std::string& name : LoadScenarioNames()) {
    std::printf("%s: %s\n  systems: %s, %s\n", name.c_str(), LoadScenarioDescription(name).c_str(),
                kGrpcSystem, kHomarpcSystem);
  }
}

// --json_out: appends `line` and a newline to `out` and flushes it (so that nothing is left
// buffered when the harness forks); false when the write failed.
bool AppendLine(std::FILE* out, const std::string& line) {
  std::fprintf(out, "%s\n", line.c_str());
  return std::fflush(out) == 0 && !std::ferror(out);
}

// Opens --json_out for appending (creating it); null when the flag is empty. The error names
// the flag, for the one-line exit-2 message.
absl::StatusOr<std::FILE*> OpenJsonOut() {
  const std::string path = absl::GetFlag(FLAGS_json_out);
  if (path.empty()) return nullptr;
  std::FILE* out = std::fopen(path.c_str(), "a");
  if (out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--json_out: cannot open '", path, "': ", std::strerror(errno)));
  }
  return out;
}

// The extras every point of a run carries from the CPU probe (machine_cpu.h): the mean rate
// and lost share over the CPUs, and the longest of their median gaps.
std::vector<Extra> ProbeExtras(const std::vector<CpuInterruptions>& cpus) {
  if (cpus.empty()) return {};
  double rate = 0;
  double lost = 0;
  int64_t median = 0;
  for (const CpuInterruptions& c : cpus) {
    rate += c.per_second();
    lost += c.lost_fraction();
    median = std::max(median, c.median_nanos);
  }
  const double n = static_cast<double>(cpus.size());
  return {Extra::Double("cpu_interruptions_per_s", rate / n),
          Extra::Double("cpu_interruption_median_us", static_cast<double>(median) / 1e3),
          Extra::Double("cpu_interrupted_pct", lost / n * 100)};
}

int Run(const Options& options, const RpcOptions& rpc_options) {
  // Before any point, while nothing of ours runs: what the machine takes from a spinning
  // thread is the floor under every tail measured after it (machine_cpu.h).
  std::vector<CpuInterruptions> probe;
  if (options.cpu_probe_ms > 0) {
    probe = ProbeCpuInterruptions(options.cpu_probe_ms * 1000000, kInterruptionThresholdNanos);
    std::fprintf(stderr, "homarpc-bench: CPU interruptions: %s\n",
                 FormatInterruptions(probe).c_str());
  }
  const std::vector<Extra> probe_extras = ProbeExtras(probe);
  std::vector<Result> results;
  std::vector<PointNote> skipped;
  std::vector<PointNote> failed;
  bool json_out_ok = true;
  for (uint64_t size : options.sizes) {
    for (int64_t concurrency : options.concurrencies) {
      for (const System* system : options.systems) {
        Point point;
        point.scenario = options.scenario->name;
        point.size = size;
        point.request_bytes = size;
        point.response_bytes = options.scenario->response_bytes(size);
        point.concurrency = concurrency;
        point.warmup = options.warmup;
        point.iterations = options.iterations;
        point.duration_ns = options.duration_ms * 1000000;
        point.settings = options.settings;
        const std::string where =
            absl::StrCat(system->name(), " at ", FormatSize(size), " x", concurrency);

        const std::string skip = system->SkipReason(point);
        if (!skip.empty()) {
          skipped.push_back({system->name(), size, concurrency, skip});
          if (options.json)
            std::fprintf(stderr, "homarpc-bench: skip %s: %s\n", where.c_str(), skip.c_str());
          continue;
        }
        std::fprintf(stderr, "homarpc-bench: running %s\n", where.c_str());
        absl::StatusOr<Result> result = RunPoint(*system, point);
        if (!result.ok()) {
          const std::string error = result.status().ToString();
          std::fprintf(stderr, "homarpc-bench: FAILED %s: %s\n", where.c_str(), error.c_str());
          failed.push_back({system->name(), size, concurrency, error});
          continue;
        }
        // The probe's extras go to JSON only: the Markdown report says them once, above.
        Result with_probe = *result;
        with_probe.extras.insert(with_probe.extras.end(), probe_extras.begin(), probe_extras.end());
        const std::string line = ToJsonLine(with_probe);
        if (options.json) {
          std::printf("%s\n", line.c_str());
          std::fflush(stdout);
        }
        if (options.json_out != nullptr && json_out_ok && !AppendLine(options.json_out, line)) {
          json_out_ok = false;  // said once; the run goes on, its exit status is 1
          std::fprintf(stderr, "homarpc-bench: FAILED writing --json_out: %s\n",
                       std::strerror(errno));
        }
        results.push_back(*std::move(result));
      }
    }
  }
  if (!options.json) {
    std::string settings = SettingsLine(options, rpc_options);
    if (options.cpu_probe_ms > 0) {
      absl::StrAppend(&settings, " CPU interruptions (gaps over ",
                      kInterruptionThresholdNanos / 1000,
                      " us seen by a thread spinning on each CPU for ", options.cpu_probe_ms,
                      " ms before the points): ", FormatInterruptions(probe), ".");
    }
    std::string report = MarkdownReport(options.scenario->name, options.scenario->description,
                                        settings, results, skipped, failed);
    if (IsRpcScenario(options.scenario->name)) {
      report += RatioTable(results, kHomarpcSystem, kGrpcSystem);
      // The raw-UDP floor against gRPC: how low any ratio could go on this machine today.
      report += RatioTable(results, "udp-floor", kGrpcSystem);
      // And the raw-TCP floor, for the sizes it runs (64 KiB and up).
      report += RatioTable(results, "tcp-floor", kGrpcSystem);
    }
    std::printf("%s", report.c_str());
  }
  return failed.empty() && json_out_ok ? 0 : 1;
}

}  // namespace
}  // namespace homarpc::bench

int main(int argc, char** argv) {
  namespace bench = homarpc::bench;
  absl::SetProgramUsageMessage(
      "Measures homarpc against raw-socket floors and gRPC C++, on loopback or the testbed.\n"
      "  homarpc-bench [--scenario=transport-echo|unary|throughput|unloaded|mixed|...]\n"
      "                [--systems=a,b]\n"
      "                [--sizes=64,1M] [--concurrency=1,32] [--json]\n"
      "See tools/bench/README.md.");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr, "homarpc-bench: unexpected argument '%s' (flags only)\n", positional[1]);
    return 2;
  }
  // --executor is read before the registry is filled: the unary homarpc system is built with it.
  const std::string executor_flag = absl::GetFlag(FLAGS_executor);
  absl::StatusOr<bench::HomarpcExecutor> executor =
      bench::ParseExecutor(executor_flag.empty() ? "pool" : executor_flag);
  if (!executor.ok()) {
    std::fprintf(stderr, "homarpc-bench: --executor: %s\n",
                 std::string(executor.status().message()).c_str());
    return 2;
  }
  bench::RpcOptions rpc_options;
  rpc_options.executor = *executor;
  bench::Registry registry;
  bench::RegisterTransportEcho(registry);
  bench::RegisterHomarpcSystems(registry);
  bench::RegisterRpcScenarios(registry, rpc_options);
  if (absl::GetFlag(FLAGS_list)) {
    bench::PrintList(registry);
    return 0;
  }
  if (const std::string scenario = absl::GetFlag(FLAGS_scenario); bench::IsLoadScenario(scenario)) {
    absl::StatusOr<bench::LoadOptions> load_options = bench::ParseLoadOptions(scenario);
    absl::StatusOr<std::FILE*> json_out =
        load_options.ok() ? bench::OpenJsonOut() : load_options.status();
    if (!json_out.ok()) {
      std::fprintf(stderr, "homarpc-bench: %s\n", std::string(json_out.status().message()).c_str());
      return 2;
    }
    load_options->json_out = *json_out;
    const int status = bench::RunLoadScenario(*load_options);
    if (*json_out != nullptr) std::fclose(*json_out);
    return status;
  }
  absl::StatusOr<bench::Options> options = bench::ParseOptions(registry);
  absl::StatusOr<std::FILE*> json_out = options.ok() ? bench::OpenJsonOut() : options.status();
  if (!json_out.ok()) {
    std::fprintf(stderr, "homarpc-bench: %s\n", std::string(json_out.status().message()).c_str());
    return 2;
  }
  options->json_out = *json_out;
  const int status = bench::Run(*options, rpc_options);
  if (*json_out != nullptr) std::fclose(*json_out);
  return status;
}
