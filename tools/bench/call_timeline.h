// CallTimeline: the trace points of a blocking ping-pong (transport/trace_points.h), caller's
// and server's, turned into the time each step of a call took (tools/call-timeline.sh).
//
// A call is the caller thread's stamps from kCallBegin to kCallEnd; the server request it
// made is the first one received at or after the caller's send began. The steps chain
// without overlap, so per call they add up to the whole call:
//   encode, start (to the send system call), request in flight (the caller's send, the
//   kernel's delivery, the server's receive returning), server engine (to dispatch), server
//   call (envelope, method, call object, request parsed), to the handler, handler, response
//   out (encoding, engine, to the send), response in flight, caller engine (to the waiting
//   call), return (decode and parse, back to the caller).
// Besides the chain, the two send system calls are timed on their own (each lies inside an
// "in flight" step).
// A call is stalled when it took stall margin or more over the median call; the step that
// holds its extra time is the one with the most time over that step's own median.
#ifndef HOMARPC_TOOLS_BENCH_CALL_TIMELINE_H_
#define HOMARPC_TOOLS_BENCH_CALL_TIMELINE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/trace_points.h"

namespace homarpc::bench {

struct TimelineStep {
  std::string name;
  bool in_chain = true;         // false: timed inside another step (the send system calls)
  std::vector<int64_t> nanos;   // one per matched call, in call order
  size_t stalls = 0;            // stalled calls whose extra time this step holds
};

struct Timeline {
  std::vector<TimelineStep> steps;  // the chain in call order, then the rest; total last
  size_t calls = 0;                 // calls matched with their server request
  size_t unmatched = 0;             // calls missing a stamp, or without a matching request
  size_t skipped = 0;               // the first calls, left out (warm-up)
  size_t stalled = 0;
  int64_t stall_margin_nanos = 0;
};

// `caller` and `server`: each process's records (ReadTraceFile). The caller's calls are those
// of the thread that made the first one, which must drive its own socket (a blocking call on
// a lent socket, the runtime's default): its receive stamps are taken from that thread only.
// Leaves out the first `skip_calls` matched calls. Errors: InvalidArgument when the caller's
// records hold no complete call, no call matched a server request, or all were left out.
absl::StatusOr<Timeline> BuildTimeline(const std::vector<transport::TraceRecord>& caller,
                                       const std::vector<transport::TraceRecord>& server,
                                       int64_t stall_margin_nanos, size_t skip_calls);

// A Markdown table (p50, p90, p99 in microseconds, and the stalled calls each step holds)
// and a line of totals.
std::string FormatTimeline(const Timeline& timeline);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_CALL_TIMELINE_H_
