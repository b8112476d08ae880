// Metadata rules, as gRPC applies them (../shared/reference/grpc-api.md B.4, B.9).
//
// Keys are lowercase ASCII [0-9a-z_.-]; a key ending in "-bin" carries arbitrary bytes, any
// other key carries printable ASCII (0x20-0x7E). Keys are at most 65535 bytes (the wire's
// key length is 16 bits). Keys starting with "grpc-" or ":" are
// reserved for the library. The total size of one side's metadata (sum of key and value
// lengths, plus 32 bytes per entry as HTTP/2 counts it) is limited, by default to 8 KiB as in
// gRPC (GRPC_ARG_MAX_METADATA_SIZE).
#ifndef HOMARPC_RUNTIME_METADATA_H_
#define HOMARPC_RUNTIME_METADATA_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace homarpc {

// grpc::string_ref: a view of metadata bytes owned by the call (valid while the context is).
using string_ref = std::string_view;

namespace internal {

inline constexpr size_t kDefaultMaxMetadataBytes = 8 * 1024;
inline constexpr size_t kMetadataEntryOverhead = 32;

// INTERNAL with a one-line reason when the key or value breaks the rules above (a reserved
// key is refused only when `user_added`).
absl::Status ValidateMetadata(std::string_view key, std::string_view value, bool user_added);
// Size of one entry as counted against the limit.
inline size_t MetadataEntrySize(std::string_view key, std::string_view value) {
  return key.size() + value.size() + kMetadataEntryOverhead;
}

}  // namespace internal
}  // namespace homarpc

#endif  // HOMARPC_RUNTIME_METADATA_H_
