// parse: turns homarpc-bench's flag text into values, with one-line errors.
//
// Every value flag of homarpc-bench is declared as a string and parsed here rather than as an
// absl integer flag: absl exits with status 1 on a malformed integer, while the tool promises
// status 2 and one line naming the flag for every bad value. Pure functions, any thread.
// Errors are INVALID_ARGUMENT with a message meant to follow "--flag: ".
#ifndef HOMARPC_TOOLS_BENCH_PARSE_H_
#define HOMARPC_TOOLS_BENCH_PARSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace homarpc::bench {

// Largest message size accepted (Homa offsets are 32-bit; the transport stops at 1 GiB).
inline constexpr uint64_t kMaxSizeBytes = uint64_t{1} << 30;

// A byte count: decimal digits with an optional binary suffix K, M, G, KiB, MiB or GiB (any
// case; K = KiB = 1024). "64", "16K", "1MiB". Must be in [1, kMaxSizeBytes].
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// A comma list of byte counts, at least one, order kept ("64,1K,16MiB").
absl::StatusOr<std::vector<uint64_t>> ParseByteSizeList(absl::string_view text);

// A plain decimal integer in [min, max].
absl::StatusOr<int64_t> ParseBoundedInt(absl::string_view text, int64_t min, int64_t max);

// A comma list of plain decimal integers, each in [min, max], at least one.
absl::StatusOr<std::vector<int64_t>> ParseBoundedIntList(absl::string_view text, int64_t min,
                                                         int64_t max);

// A comma list of names with surrounding spaces and empty items dropped ("a, b,,c").
std::vector<std::string> SplitNames(absl::string_view text);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_PARSE_H_
