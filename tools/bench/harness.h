// harness: runs one point of one system as a pair of processes and summarises it.
//
// RunPoint() forks a server process (System::Serve), waits for it to announce its port, forks
// a client process (System::RunClient), collects the client's samples, tells the server to
// stop, and collects the server's report. Each child measures its own peak RSS with
// getrusage(RUSAGE_SELF) and sends it back through a pipe; the Result carries them as the
// extras client_peak_rss_kb and server_peak_rss_kb, followed by client_involuntary_switches
// and server_involuntary_switches (preemptions; high counts mean the cores were contended),
// steal_pct (the hypervisor's steal from the client's start to its report, machine_cpu.h;
// left out when /proc/stat cannot be read or no clock tick passed), then the server's own
// extras.
//
// Called from main()'s thread only, while the process has no other threads (fork() would copy
// just the calling thread). Writes nothing to stdout; stdout and stderr are flushed before each
// fork so buffered text is not printed twice.
#ifndef HOMARPC_TOOLS_BENCH_HARNESS_H_
#define HOMARPC_TOOLS_BENCH_HARNESS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/bench/result.h"
#include "tools/bench/system.h"

namespace homarpc::bench {

// Time a server gets to call ServerEnv::Ready(), and to return from Serve() once told to stop.
inline constexpr int64_t kServerGraceMillis = 10000;
// Time a client gets beyond point.duration_ns (start-up, warmup, draining) before the point
// fails with DEADLINE_EXCEEDED and both children are killed.
inline constexpr int64_t kClientGraceMillis = 120000;

// Runs `point` on `system` (see above). Errors: whatever Serve() or RunClient() returned,
// DEADLINE_EXCEEDED when a child overran its time, INTERNAL when a child died without a report
// or the client returned no samples.
absl::StatusOr<Result> RunPoint(const System& system, const Point& point);

// The Result for `samples` measured at `point`: nearest-rank percentiles over every latency,
// rps = samples / elapsed, goodput = payload bits / elapsed. Extras are copied from `samples`.
Result BuildResult(const Point& point, absl::string_view system_name, bool is_floor,
                   ClientSamples samples);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_HARNESS_H_
