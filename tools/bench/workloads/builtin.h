// builtin: the text of the W1-W5 CDF files, compiled into the binary (workloads.cmake writes
// the definition into a generated .cc in the build tree from w1.cdf .. w5.cdf).
//
// Internal to tools/bench/workload.cc, which parses these texts (Workload::BuiltIn); owned by
// the workload code. The texts are constants: any thread may read them.
#ifndef HOMARPC_TOOLS_BENCH_WORKLOADS_BUILTIN_H_
#define HOMARPC_TOOLS_BENCH_WORKLOADS_BUILTIN_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace homarpc::bench::workloads_internal {

struct BuiltInCdf {
  absl::string_view name;  // "w1" .. "w5", lower case
  absl::string_view text;  // the whole .cdf file, comments included
};

// The built-in CDFs in order w1 .. w5. Static storage: the views stay valid forever.
absl::Span<const BuiltInCdf> BuiltInCdfs();

}  // namespace homarpc::bench::workloads_internal

#endif  // HOMARPC_TOOLS_BENCH_WORKLOADS_BUILTIN_H_
