// result: Result helpers and the JSON line writer (see result.h).
#include "tools/bench/result.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace homarpc::bench {

Extra Extra::Int(absl::string_view key, int64_t value) {
  return Extra{std::string(key), absl::StrCat(value), false};
}

Extra Extra::Double(absl::string_view key, double value) {
  // JSON has no NaN or infinity.
  if (!std::isfinite(value)) return Extra{std::string(key), "null", false};
  return Extra{std::string(key), absl::StrFormat("%.3f", value), false};
}

Extra Extra::String(absl::string_view key, absl::string_view value) {
  return Extra{std::string(key), std::string(value), true};
}

const Extra* Result::FindExtra(absl::string_view key) const {
  for (const Extra& extra : extras) {
    if (extra.key == key) return &extra;
  }
  return nullptr;
}

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

std::string ToJsonLine(const Result& result) {
  std::string out = absl::StrFormat(
      "{\"scenario\":%s,\"system\":%s,\"size\":%d,\"concurrency\":%d,\"p50_us\":%.3f,"
      "\"p99_us\":%.3f,\"p999_us\":%.3f,\"rps\":%.1f,\"goodput_gbps\":%.4f,\"samples\":%d",
      JsonQuote(result.scenario), JsonQuote(result.system), result.size, result.concurrency,
      result.p50_us, result.p99_us, result.p999_us, result.rps, result.goodput_gbps,
      result.samples);
  for (const Extra& extra : result.extras) {
    absl::StrAppend(&out, ",", JsonQuote(extra.key), ":",
                    extra.is_string ? JsonQuote(extra.text) : extra.text);
  }
  out += "}";
  return out;
}

}  // namespace homarpc::bench
