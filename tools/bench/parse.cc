// parse: flag text to values (see parse.h).
#include "tools/bench/parse.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace homarpc::bench {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < trimmed.size() && absl::ascii_isdigit(trimmed[digits])) ++digits;
  const absl::string_view number = trimmed.substr(0, digits);
  const std::string suffix = absl::AsciiStrToLower(trimmed.substr(digits));
  uint64_t multiplier = 0;
  if (suffix.empty()) {
    multiplier = 1;
  } else if (suffix == "k" || suffix == "kib") {
    multiplier = uint64_t{1} << 10;
  } else if (suffix == "m" || suffix == "mib") {
    multiplier = uint64_t{1} << 20;
  } else if (suffix == "g" || suffix == "gib") {
    multiplier = uint64_t{1} << 30;
  }
  uint64_t value = 0;
  // At most 10 digits keeps value * multiplier far from overflow before the range check.
  if (multiplier == 0 || number.empty() || number.size() > 10 ||
      !absl::SimpleAtoi(number, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad size '", text, "' (want a number with an optional K, M, G, KiB, MiB or GiB suffix)"));
  }
  value *= multiplier;
  if (value < 1 || value > kMaxSizeBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is outside [1, ", kMaxSizeBytes, "] bytes"));
  }
  return value;
}

absl::StatusOr<std::vector<uint64_t>> ParseByteSizeList(absl::string_view text) {
  std::vector<uint64_t> sizes;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    absl::StatusOr<uint64_t> size = ParseByteSize(item);
    if (!size.ok()) return size.status();
    sizes.push_back(*size);
  }
  return sizes;
}

absl::StatusOr<int64_t> ParseBoundedInt(absl::string_view text, int64_t min, int64_t max) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an integer"));
  }
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(value, " is outside [", min, ", ", max, "]"));
  }
  return value;
}

absl::StatusOr<std::vector<int64_t>> ParseBoundedIntList(absl::string_view text, int64_t min,
                                                         int64_t max) {
  std::vector<int64_t> values;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    absl::StatusOr<int64_t> value = ParseBoundedInt(item, min, max);
    if (!value.ok()) return value.status();
    values.push_back(*value);
  }
  return values;
}

std::vector<std::string> SplitNames(absl::string_view text) {
  std::vector<std::string> names;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) names.emplace_back(item);
  }
  return names;
}

}  // namespace homarpc::bench
