// metadata: gRPC's rules for metadata keys and values (see metadata.h, PROTOCOL.md §14.9).
// Owned by the runtime; stateless, safe from any thread.
//
// ValidateMetadata() runs for every entry a client or a handler adds, so the common case (a
// valid entry) is one pass over the key and one over a non-binary value, with no allocation;
// only a rejection builds a message. Beyond gRPC's rules, a key must fit the envelope's u16
// key length (65535 bytes): EncodeHeader() relies on that (envelope.h).
#include "runtime/metadata.h"

#include <cstdint>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace homarpc::internal {
namespace {

constexpr size_t kMaxKeyBytes = std::numeric_limits<uint16_t>::max();
// Keys are quoted in error messages up to this many bytes (then "...").
constexpr size_t kMaxQuotedKeyBytes = 64;

// This Abseil's string_view is not std::string_view.
absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

bool IsPrintable(char c) { return c >= 0x20 && c <= 0x7E; }

// The key as it appears in a message: C-escaped (it may hold any byte) and shortened.
std::string Quoted(std::string_view key) {
  const bool cut = key.size() > kMaxQuotedKeyBytes;
  return absl::StrCat("\"", absl::CHexEscape(ToAbsl(key.substr(0, kMaxQuotedKeyBytes))),
                      cut ? "...\"" : "\"");
}

}  // namespace

absl::Status ValidateMetadata(std::string_view key, std::string_view value, bool user_added) {
  if (key.empty()) return absl::InternalError("metadata key is empty");
  if (key.size() > kMaxKeyBytes) {
    return absl::InternalError(
        absl::StrCat("metadata key of ", key.size(), " bytes is longer than ", kMaxKeyBytes));
  }
  const bool pseudo = key[0] == ':';
  if (pseudo && key.size() == 1) return absl::InternalError("metadata key \":\" has no name");
  if (user_added && (pseudo || key.starts_with("grpc-"))) {
    return absl::InternalError(
        absl::StrCat("metadata key ", Quoted(key), " is reserved for the library"));
  }
  // A library-added key may be an HTTP/2-style pseudo-header (":authority"): the ':' is
  // allowed in front only, and what follows obeys the usual rule.
  for (size_t i = pseudo ? 1 : 0; i < key.size(); ++i) {
    if (!IsKeyChar(key[i])) {
      return absl::InternalError(absl::StrCat("metadata key ", Quoted(key),
                                              " has a character outside [0-9a-z_.-] at ", i));
    }
  }
  if (key.ends_with("-bin")) return absl::OkStatus();  // any bytes
  for (size_t i = 0; i < value.size(); ++i) {
    if (!IsPrintable(value[i])) {
      return absl::InternalError(absl::StrCat("metadata value of key ", Quoted(key),
                                              " has a non-printable byte at ", i,
                                              " (only keys ending in -bin carry binary values)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace homarpc::internal
