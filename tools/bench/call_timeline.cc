// CallTimeline: see call_timeline.h.
#include "tools/bench/call_timeline.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/stats.h"

namespace homarpc::bench {
namespace {

using transport::TracePoint;
using transport::TraceRecord;

bool Is(const TraceRecord& r, TracePoint p) { return r.point == static_cast<uint32_t>(p); }

// One blocking call's stamps on the caller's thread.
struct CallStamps {
  int64_t begin = 0, encoded = 0, send_begin = 0, send_end = 0, received = 0, delivered = 0,
          end = 0;
};

// One request's stamps on the server (any of its threads).
struct RequestStamps {
  int64_t received = 0, dispatched = 0, created = 0, handler_begin = 0, handler_end = 0,
          send_begin = 0, send_end = 0;
};

// The calls on the thread that made the first one, complete ones only (`*incomplete` counts
// the rest).
std::vector<CallStamps> CallerCalls(const std::vector<TraceRecord>& records,
                                    size_t* incomplete) {
  std::vector<CallStamps> calls;
  std::optional<uint32_t> thread;
  for (const TraceRecord& r : records) {
    if (Is(r, TracePoint::kCallBegin)) {
      thread = r.thread;
      break;
    }
  }
  if (!thread) return calls;
  std::optional<CallStamps> call;
  int64_t last_received = 0;
  for (const TraceRecord& r : records) {
    if (r.thread != *thread) continue;
    const int64_t t = r.nanos;
    if (Is(r, TracePoint::kCallBegin)) {
      if (call) ++*incomplete;  // began again without ending (cannot happen on one thread)
      call = CallStamps{};
      call->begin = t;
      last_received = 0;
      continue;
    }
    if (!call) continue;
    if (Is(r, TracePoint::kCallEncoded) && call->encoded == 0) {
      call->encoded = t;
    } else if (Is(r, TracePoint::kSendBegin) && call->encoded != 0 && call->send_begin == 0) {
      call->send_begin = t;
    } else if (Is(r, TracePoint::kSendEnd) && call->send_begin != 0 && call->send_end == 0) {
      call->send_end = t;
    } else if (Is(r, TracePoint::kReceived) && call->send_end != 0) {
      last_received = t;
    } else if (Is(r, TracePoint::kResponseDelivered) && call->delivered == 0) {
      call->delivered = t;
      call->received = last_received;
    } else if (Is(r, TracePoint::kCallEnd)) {
      call->end = t;
      if (call->send_end != 0 && call->received != 0 && call->delivered != 0) {
        calls.push_back(*call);
      } else {
        ++*incomplete;
      }
      call.reset();
    }
  }
  if (call) ++*incomplete;
  return calls;
}

// The server's requests from dispatch to their response's send, in order (a ping-pong: one
// at a time). A request whose steps are cut short by the next one is left out.
std::vector<RequestStamps> ServerRequests(std::vector<TraceRecord> records) {
  std::stable_sort(records.begin(), records.end(),
                   [](const TraceRecord& a, const TraceRecord& b) { return a.nanos < b.nanos; });
  std::vector<RequestStamps> requests;
  std::map<uint32_t, int64_t> last_received;  // per thread
  std::optional<RequestStamps> req;
  uint32_t send_thread = 0;
  for (const TraceRecord& r : records) {
    const int64_t t = r.nanos;
    if (Is(r, TracePoint::kReceived)) {
      last_received[r.thread] = t;
    } else if (Is(r, TracePoint::kRequestDispatched)) {
      auto it = last_received.find(r.thread);
      req.reset();
      if (it == last_received.end()) continue;
      req = RequestStamps{};
      req->received = it->second;
      req->dispatched = t;
    } else if (!req) {
      continue;
    } else if (Is(r, TracePoint::kCallCreated) && req->created == 0) {
      req->created = t;
    } else if (Is(r, TracePoint::kHandlerBegin) && req->created != 0 && req->handler_begin == 0) {
      req->handler_begin = t;
    } else if (Is(r, TracePoint::kHandlerEnd) && req->handler_begin != 0 &&
               req->handler_end == 0) {
      req->handler_end = t;
    } else if (Is(r, TracePoint::kSendBegin) && req->handler_end != 0 && req->send_begin == 0) {
      req->send_begin = t;
      send_thread = r.thread;
    } else if (Is(r, TracePoint::kSendEnd) && req->send_begin != 0 && r.thread == send_thread) {
      req->send_end = t;
      requests.push_back(*req);
      req.reset();
    }
  }
  // In the order they arrived (with several server loops, requests need not finish in order).
  std::stable_sort(requests.begin(), requests.end(),
                   [](const RequestStamps& a, const RequestStamps& b) {
                     return a.received < b.received;
                   });
  return requests;
}

// The steps in the order printed: the chain (its links add up to the call), the two send
// system calls (each inside an "in flight" link), and the whole call, which must stay last.
struct StepSpec {
  const char* name;
  bool in_chain;
  int64_t (*nanos)(const CallStamps& c, const RequestStamps& r);
};
using C = const CallStamps&;
using R = const RequestStamps&;
constexpr StepSpec kSteps[] = {
    {"encode", true, [](C c, R) { return c.encoded - c.begin; }},
    {"start, to the send", true, [](C c, R) { return c.send_begin - c.encoded; }},
    {"request in flight", true, [](C c, R r) { return r.received - c.send_begin; }},
    {"server: engine, to dispatch", true, [](C, R r) { return r.dispatched - r.received; }},
    {"server: call made, request parsed", true, [](C, R r) { return r.created - r.dispatched; }},
    {"server: to the handler", true, [](C, R r) { return r.handler_begin - r.created; }},
    {"server: handler", true, [](C, R r) { return r.handler_end - r.handler_begin; }},
    {"server: response out, to the send", true,
     [](C, R r) { return r.send_begin - r.handler_end; }},
    {"response in flight", true, [](C c, R r) { return c.received - r.send_begin; }},
    {"caller: engine, to the call", true, [](C c, R) { return c.delivered - c.received; }},
    {"caller: decode, return", true, [](C c, R) { return c.end - c.delivered; }},
    {"caller's send (system call)", false, [](C c, R) { return c.send_end - c.send_begin; }},
    {"server's send (system call)", false, [](C, R r) { return r.send_end - r.send_begin; }},
    {"whole call", true, [](C c, R) { return c.end - c.begin; }},
};

constexpr uint32_t kP90 = 900000;  // parts per million, as stats.h's kP50/kP99

// The nearest-rank percentile (stats.h, as homarpc-bench reports them) of unsorted `v`.
int64_t Percentile(std::vector<int64_t> v, uint32_t parts_per_million) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return NearestRank(v, parts_per_million);
}

}  // namespace

absl::StatusOr<Timeline> BuildTimeline(const std::vector<TraceRecord>& caller,
                                       const std::vector<TraceRecord>& server,
                                       int64_t stall_margin_nanos, size_t skip_calls) {
  Timeline timeline;
  timeline.stall_margin_nanos = stall_margin_nanos;
  const std::vector<CallStamps> calls = CallerCalls(caller, &timeline.unmatched);
  if (calls.empty()) {
    return absl::InvalidArgumentError("the caller's trace holds no complete blocking call");
  }
  const std::vector<RequestStamps> requests = ServerRequests(server);
  for (const StepSpec& spec : kSteps) {
    timeline.steps.push_back(TimelineStep{spec.name, spec.in_chain, {}, 0});
  }

  size_t matched = 0;
  for (const CallStamps& c : calls) {
    // The request this call made: the first received at or after its send began.
    auto it = std::lower_bound(
        requests.begin(), requests.end(), c.send_begin,
        [](const RequestStamps& r, int64_t t) { return r.received < t; });
    if (it == requests.end() || it->received > c.received || it->send_begin > c.received) {
      ++timeline.unmatched;
      continue;
    }
    if (matched++ < skip_calls) {
      ++timeline.skipped;
      continue;
    }
    for (size_t i = 0; i < std::size(kSteps); ++i) {
      timeline.steps[i].nanos.push_back(kSteps[i].nanos(c, *it));
    }
  }
  timeline.calls = timeline.steps.back().nanos.size();
  if (matched == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "none of the caller's ", calls.size(),
        " calls matched a server request: the server's trace holds ", requests.size()));
  }
  if (timeline.calls == 0) {
    return absl::InvalidArgumentError(absl::StrCat("all ", matched,
                                                   " matched calls were left out (skip ",
                                                   skip_calls, ")"));
  }

  std::vector<int64_t> medians;
  for (const TimelineStep& s : timeline.steps) medians.push_back(Percentile(s.nanos, kP50));
  const int64_t stalled_from = medians.back() + stall_margin_nanos;
  for (size_t call = 0; call < timeline.calls; ++call) {
    if (timeline.steps.back().nanos[call] < stalled_from) continue;
    ++timeline.stalled;
    size_t worst = 0;
    for (size_t i = 1; i + 1 < timeline.steps.size(); ++i) {  // the chain: not the whole call
      if (!timeline.steps[i].in_chain) continue;
      if (timeline.steps[i].nanos[call] - medians[i] >
          timeline.steps[worst].nanos[call] - medians[worst]) {
        worst = i;
      }
    }
    ++timeline.steps[worst].stalls;
  }
  return timeline;
}

std::string FormatTimeline(const Timeline& timeline) {
  std::string out =
      "| step | p50 us | p90 us | p99 us | stalled calls it holds |\n|---|---:|---:|---:|---:|\n";
  const auto us = [](int64_t nanos) { return absl::StrFormat("%.2f", nanos / 1000.0); };
  for (const TimelineStep& s : timeline.steps) {
    const bool whole = &s == &timeline.steps.back();
    absl::StrAppend(&out, "| ", s.in_chain ? s.name : absl::StrCat("(", s.name, ")"), " | ",
                    us(Percentile(s.nanos, kP50)), " | ", us(Percentile(s.nanos, kP90)), " | ",
                    us(Percentile(s.nanos, kP99)), " | ",
                    whole        ? absl::StrCat(timeline.stalled)
                    : s.in_chain ? absl::StrCat(s.stalls)
                                 : std::string("-"),
                    " |\n");
  }
  absl::StrAppend(
      &out, "\n", timeline.calls, " calls (", timeline.skipped, " before them left out, ",
      timeline.unmatched, " unmatched); ", timeline.stalled, " stalled (",
      absl::StrFormat("%.2f", 100.0 * static_cast<double>(timeline.stalled) /
                                  static_cast<double>(timeline.calls)),
      "%): at least the median call + ", us(timeline.stall_margin_nanos), " us\n");
  return out;
}

}  // namespace homarpc::bench
