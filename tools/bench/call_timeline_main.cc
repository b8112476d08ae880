// homarpc-call-timeline: prints the per-step table of a traced ping-pong (call_timeline.h) from
// the trace files a HOMARPC_TRACE_POINTS build wrote into DIR (tools/call-timeline.sh runs it).
//
//   homarpc-call-timeline [--skip=N] [--margin_us=N] DIR
//
// DIR must hold two trace files: the caller's (it made blocking calls) and the server's.
// Exit status 0, 1 when the files cannot be read or matched, 2 for bad options.
#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "tools/bench/call_timeline.h"
#include "transport/trace_points.h"

namespace {

int Usage(const std::string& why) {
  std::fprintf(stderr, "homarpc-call-timeline: %s (usage: homarpc-call-timeline [--skip=N] "
               "[--margin_us=N] DIR)\n", why.c_str());
  return 2;
}

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
  size_t skip = 200;
  int64_t margin_us = 20;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--skip=")) {
      if (!absl::SimpleAtoi(arg.substr(7), &skip)) return Usage("--skip: not a count: " + arg);
    } else if (absl::StartsWith(arg, "--margin_us=")) {
      if (!absl::SimpleAtoi(arg.substr(12), &margin_us) || margin_us <= 0) {
        return Usage("--margin_us: not a positive number: " + arg);
      }
    } else if (absl::StartsWith(arg, "-")) {
      return Usage("unknown option '" + arg + "'");
    } else if (dir.empty()) {
      dir = arg;
    } else {
      return Usage("one directory only");
    }
  }
  if (dir.empty()) return Usage("no directory given");

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
  auto timeline = homarpc::bench::BuildTimeline(caller, server, margin_us * 1000, skip);
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
