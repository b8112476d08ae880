// homarpc-call-timeline: prints the per-step table of a traced ping-pong (call_timeline.h) from
// the trace files a HOMARPC_TRACE_POINTS build wrote into DIR (tools/call-timeline.sh runs it).
//
//   homarpc-call-timeline [--skip=N] [--margin_us=N] DIR
//
// DIR must hold two trace files: the caller's (it made blocking calls) and the server's.
// Exit status 0, 1 when the files cannot be read or matched, 2 for an out-of-range value or a
// missing or extra argument (an unknown flag, or a value absl cannot parse: absl's message,
// exit status 1).
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "tools/bench/call_timeline.h"
#include "tools/bench/stats.h"
#include "transport/trace_points.h"

ABSL_FLAG(int64_t, skip, 200, "matched calls left out at the start (the warm-up)");
ABSL_FLAG(int64_t, margin_us, homarpc::bench::kStallMarginNanos / 1000,
          "a call this many microseconds or more over the median call is stalled (1-1000000; "
          "the default is homarpc-bench's stalled_pct margin)");

namespace {

bool HasPoint(const std::vector<homarpc::transport::TraceRecord>& records,
              homarpc::transport::TracePoint point) {
  for (const auto& r : records) {
    if (r.point == static_cast<uint32_t>(point)) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using homarpc::transport::TracePoint;
  absl::SetProgramUsageMessage(
      "Prints the per-step table of a traced ping-pong from the trace files in DIR.\n"
      "  homarpc-call-timeline [--skip=N] [--margin_us=N] DIR\n"
      "See tools/call-timeline.sh.");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() != 2) {
    std::fprintf(stderr, "homarpc-call-timeline: want one directory, got %zu arguments\n",
                 positional.size() - 1);
    return 2;
  }
  const std::string dir = positional[1];
  const int64_t skip = absl::GetFlag(FLAGS_skip);
  const int64_t margin_us = absl::GetFlag(FLAGS_margin_us);
  if (skip < 0) {
    std::fprintf(stderr, "homarpc-call-timeline: --skip: %lld is negative\n",
                 static_cast<long long>(skip));
    return 2;
  }
  if (margin_us < 1 || margin_us > 1000000) {
    std::fprintf(stderr, "homarpc-call-timeline: --margin_us: %lld is not in 1-1000000\n",
                 static_cast<long long>(margin_us));
    return 2;
  }

  std::vector<std::string> paths;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (absl::StartsWith(e->d_name, "trace.")) paths.push_back(dir + "/" + e->d_name);
    }
    closedir(d);
  } else {
    std::fprintf(stderr, "homarpc-call-timeline: cannot read directory %s\n", dir.c_str());
    return 1;
  }
  std::vector<homarpc::transport::TraceRecord> caller, server;
  int callers = 0, servers = 0;
  uint64_t dropped = 0;
  for (const std::string& path : paths) {
    auto file = homarpc::transport::ReadTraceFile(path);
    if (!file.ok()) {
      std::fprintf(stderr, "homarpc-call-timeline: %s\n", file.status().ToString().c_str());
      return 1;
    }
    dropped += file->dropped;
    if (HasPoint(file->records, TracePoint::kCallBegin)) {
      ++callers;
      caller = std::move(file->records);
    } else if (HasPoint(file->records, TracePoint::kRequestDispatched)) {
      ++servers;
      server = std::move(file->records);
    }
  }
  if (callers != 1 || servers != 1) {
    std::fprintf(stderr,
                 "homarpc-call-timeline: %s: want one caller's and one server's trace, found %d "
                 "and %d\n",
                 dir.c_str(), callers, servers);
    return 1;
  }
  auto timeline = homarpc::bench::BuildTimeline(caller, server, margin_us * 1000,
                                                static_cast<size_t>(skip));
  if (!timeline.ok()) {
    std::fprintf(stderr, "homarpc-call-timeline: %s\n", timeline.status().ToString().c_str());
    return 1;
  }
  std::fputs(homarpc::bench::FormatTimeline(*timeline).c_str(), stdout);
  if (dropped > 0) {
    std::printf("%llu stamps dropped (trace files full): the last calls are missing\n",
                static_cast<unsigned long long>(dropped));
  }
  return 0;
}
