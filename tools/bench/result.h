// result: one measured point of homarpc-bench and its JSON form.
//
// A Result is what the harness makes of one (scenario, system, size, concurrency) run: latency
// percentiles over every sample, throughput, and free-form extras (peak RSS of each side,
// losses, system-specific counters). Plain values, any thread.
//
// JSON form (one object per line, keys in this order):
//   {"scenario":"transport-echo","system":"udp-floor","size":64,"concurrency":1,
//    "p50_us":4.9,"p99_us":7.1,"p999_us":12.0,"rps":198000.0,"goodput_gbps":0.101,
//    "samples":100000, <extras...>}
#ifndef HOMARPC_TOOLS_BENCH_RESULT_H_
#define HOMARPC_TOOLS_BENCH_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace homarpc::bench {

// A named extra value: a number (written bare in JSON) or a string (quoted).
struct Extra {
  std::string key;
  std::string text;  // the number as text, or the string itself
  bool is_string = false;

  static Extra Int(absl::string_view key, int64_t value);
  static Extra Double(absl::string_view key, double value);
  static Extra String(absl::string_view key, absl::string_view value);
};

struct Result {
  std::string scenario;
  std::string system;
  bool is_floor = false;  // not written to JSON; floors are named "*-floor*"
  uint64_t size = 0;
  int64_t concurrency = 0;
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double rps = 0;           // measured RPCs completed per second
  double goodput_gbps = 0;  // application payload bits per nanosecond, both directions
  uint64_t samples = 0;     // measured RPCs (latency samples)
  std::vector<Extra> extras;

  // The extra named `key`, or nullptr.
  const Extra* FindExtra(absl::string_view key) const;
};

// One JSON object, no trailing newline. Extras follow the fixed keys in the order added; an
// extra whose key repeats a fixed key is still written (callers should not do that).
std::string ToJsonLine(const Result& result);

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_RESULT_H_
