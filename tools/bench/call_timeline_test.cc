// Tests of CallTimeline: a synthetic ping-pong's stamps give each step's time, match each call
// to its request, count what does not match, and charge a stalled call to the step that took
// the extra time. (The trace file itself: tests/transport/trace_points_test.cc.)
#include "tools/bench/call_timeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "transport/trace_points.h"

namespace homarpc::bench {
namespace {

using testing::HasSubstr;
using transport::TracePoint;
using transport::TraceRecord;

// A synthetic ping-pong: every call's steps take `step` ns each, but the handler takes
// `handler` ns. Times in ns; the caller is thread 1, the server's loop thread 2.
struct PingPong {
  std::vector<TraceRecord> caller, server;
  int64_t now = 1'000'000;

  void Caller(TracePoint p) { caller.push_back({now, static_cast<uint32_t>(p), 1}); }
  void Server(TracePoint p) { server.push_back({now, static_cast<uint32_t>(p), 2}); }

  void Call(int64_t step, int64_t handler, bool server_answers = true) {
    Caller(TracePoint::kCallBegin);
    now += step;
    Caller(TracePoint::kCallEncoded);
    now += step;
    Caller(TracePoint::kSendBegin);
    now += step / 2;
    if (server_answers) Server(TracePoint::kReceived);  // inside the caller's send
    now += step / 2;
    Caller(TracePoint::kSendEnd);
    if (server_answers) {
      for (TracePoint p : {TracePoint::kRequestDispatched, TracePoint::kCallCreated,
                           TracePoint::kHandlerBegin}) {
        now += step;
        Server(p);
      }
      now += handler;
      Server(TracePoint::kHandlerEnd);
      now += step;
      Server(TracePoint::kSendBegin);
      now += step;
      Server(TracePoint::kSendEnd);
    }
    now += step;
    Caller(TracePoint::kReceived);
    now += step;
    if (server_answers) Caller(TracePoint::kResponseDelivered);
    now += step;
    Caller(TracePoint::kCallEnd);
    now += 5000;  // between calls
  }
};

int64_t Median(const TimelineStep& s) {
  std::vector<int64_t> v = s.nanos;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

const TimelineStep& Step(const Timeline& t, const std::string& name) {
  for (const TimelineStep& s : t.steps) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no step " << name;
  return t.steps.back();
}

TEST(CallTimelineTest, StepsOfEachCallAddUpAndAStallIsChargedWhereItHappened) {
  PingPong p;
  for (int i = 0; i < 9; ++i) p.Call(1000, 2000);
  p.Call(1000, 2000 + 50000);  // one call whose handler took 50 us more
  absl::StatusOr<Timeline> t = BuildTimeline(p.caller, p.server, 20000, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->calls, 10u);
  EXPECT_EQ(t->unmatched, 0u);
  EXPECT_EQ(Median(Step(*t, "encode")), 1000);
  EXPECT_EQ(Median(Step(*t, "request in flight")), 500);  // the server read it mid-send
  EXPECT_EQ(Median(Step(*t, "server: engine, to dispatch")), 1500);
  EXPECT_EQ(Median(Step(*t, "server: handler")), 2000);
  EXPECT_EQ(Median(Step(*t, "caller's send (system call)")), 1000);
  EXPECT_EQ(Median(Step(*t, "whole call")), 13000);
  for (size_t call = 0; call < t->calls; ++call) {
    int64_t sum = 0;
    for (const TimelineStep& s : t->steps) {
      if (s.in_chain && &s != &t->steps.back()) sum += s.nanos[call];
    }
    EXPECT_EQ(sum, t->steps.back().nanos[call]) << call;
  }
  EXPECT_EQ(t->stalled, 1u);
  EXPECT_EQ(Step(*t, "server: handler").stalls, 1u);
  EXPECT_EQ(Step(*t, "encode").stalls, 0u);
  const std::string table = FormatTimeline(*t);
  // Nearest-rank percentiles, as homarpc-bench's: p99 of ten calls is the slowest.
  EXPECT_THAT(table, HasSubstr("| server: handler | 2.00 | 2.00 | 52.00 | 1 |"));
  EXPECT_THAT(table, HasSubstr("| (caller's send (system call)) | 1.00 |"));
  EXPECT_THAT(table, HasSubstr("| whole call | 13.00 |"));
  EXPECT_THAT(table, HasSubstr("10 calls (0 before them left out, 0 unmatched); 1 stalled"));
}

TEST(CallTimelineTest, CallsWithoutARequestAreUnmatchedAndTheFirstCanBeLeftOut) {
  PingPong p;
  p.Call(1000, 2000);
  p.Call(1000, 2000, /*server_answers=*/false);  // no request, no response: incomplete
  for (int i = 0; i < 4; ++i) p.Call(1000, 2000);
  absl::StatusOr<Timeline> t = BuildTimeline(p.caller, p.server, 20000, /*skip_calls=*/2);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->unmatched, 1u);
  EXPECT_EQ(t->skipped, 2u);
  EXPECT_EQ(t->calls, 3u);
}

TEST(CallTimelineTest, TracesWithoutCallsOrRequestsAreRefused) {
  PingPong p;
  p.Call(1000, 2000);
  EXPECT_EQ(BuildTimeline({}, p.server, 20000, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Timeline> no_server = BuildTimeline(p.caller, {}, 20000, 0);
  EXPECT_EQ(no_server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_server.status().message(), HasSubstr("matched a server request"));
  absl::StatusOr<Timeline> all_skipped = BuildTimeline(p.caller, p.server, 20000, 1);
  EXPECT_EQ(all_skipped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(all_skipped.status().message(), HasSubstr("all 1 matched calls were left out"));
}

}  // namespace
}  // namespace homarpc::bench
