// Fuzz target for the RPC envelope codec's Decode (runtime/envelope.h, PROTOCOL.md §14), the
// first code that reads every request and response message the runtime receives.
//
// Arbitrary bytes go into Decode. A rejection must be INTERNAL and must simply not crash or
// read out of bounds (ASan/UBSan watch). When an input decodes, the promises of envelope.h
// and §14.6 are checked on the result (views inside the message, payload = the rest, only the
// fields of its kind set, values in range), then the envelope is re-encoded (EncodeHeader plus
// the payload) and decoded again: the two decodes must agree field by field, the canonical
// re-encoding can only be shorter than the input (it drops skippable sections and explicit
// defaults), and re-encoding it again must change nothing. A disagreement means the codec
// loses or invents information: a real finding, so the target aborts with a description.
// The metadata limit (Decode's second argument) is checked against the unlimited decode: at
// exactly the larger list's size the input decodes to the same envelope, one byte less
// fails RESOURCE_EXHAUSTED; an input rejected without a limit is rejected with any limit,
// either for the same reason or for the limit.
// Single-threaded; run by libFuzzer or by standalone_main.cc.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "runtime/envelope.h"
#include "runtime/metadata.h"

namespace homarpc::internal {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "envelope_fuzz: %s\n", what);
  std::abort();
}

void Check(bool ok, const char* what) {
  if (!ok) Fail(what);
}

bool Inside(std::string_view view, absl::Span<const uint8_t> message) {
  if (view.empty()) return true;
  const auto* p = reinterpret_cast<const uint8_t*>(view.data());
  return p >= message.data() && p + view.size() <= message.data() + message.size();
}

bool Inside(const std::vector<MetadataEntry>& entries, absl::Span<const uint8_t> message) {
  for (const auto& [key, value] : entries) {
    if (!Inside(key, message) || !Inside(value, message)) return false;
  }
  return true;
}

// The promises about an envelope Decode accepted from `message`.
void CheckAccepted(absl::Span<const uint8_t> message, const Envelope& e) {
  Check(message.size() >= kEnvelopeHeaderBytes, "accepted a message shorter than the header");
  Check(e.kind == EnvelopeKind::kRequest || e.kind == EnvelopeKind::kResponse ||
            e.kind == EnvelopeKind::kCancel,
        "accepted an unknown kind");
  Check((e.flags & ~kKnownFlags) == 0, "accepted an unknown flag");
  Check(e.payload.data() + e.payload.size() == message.data() + message.size(),
        "payload is not the end of the message");
  Check(e.payload.data() >= message.data() + kEnvelopeHeaderBytes, "payload overlaps the header");
  Check(Inside(e.method, message) && Inside(e.status_message, message) &&
            Inside(e.status_details, message) && Inside(e.metadata, message) &&
            Inside(e.trailing_metadata, message),
        "a view points outside the message");
  Check(e.timeout_micros >= -1, "timeout below -1");
  Check(e.status_code <= 16, "accepted a status code above 16");
  if (e.kind != EnvelopeKind::kRequest) {
    Check(e.method.empty() && e.timeout_micros == -1, "request section on a non-request");
  }
  if (e.kind != EnvelopeKind::kResponse) {
    Check(e.status_code == 0 && e.status_message.empty() && e.status_details.empty() &&
              e.trailing_metadata.empty(),
          "response section on a non-response");
  }
  if (e.kind == EnvelopeKind::kCancel) {
    Check(e.metadata.empty() && e.payload.empty(), "cancel with metadata or payload");
  }
}

void CheckSame(const Envelope& a, const Envelope& b) {
  Check(a.kind == b.kind, "kind changed in re-encoding");
  Check(a.flags == b.flags, "flags changed in re-encoding");
  Check(a.stream_id == b.stream_id, "stream_id changed in re-encoding");
  Check(a.sequence == b.sequence, "sequence changed in re-encoding");
  Check(a.call_id == b.call_id, "call_id changed in re-encoding");
  Check(a.method == b.method, "method changed in re-encoding");
  Check(a.timeout_micros == b.timeout_micros, "timeout changed in re-encoding");
  Check(a.metadata == b.metadata, "metadata changed in re-encoding");
  Check(a.status_code == b.status_code, "status code changed in re-encoding");
  Check(a.status_message == b.status_message, "status message changed in re-encoding");
  Check(a.status_details == b.status_details, "status details changed in re-encoding");
  Check(a.trailing_metadata == b.trailing_metadata, "trailing metadata changed in re-encoding");
  Check(a.payload.size() == b.payload.size(), "payload size changed in re-encoding");
  if (!a.payload.empty()) {
    Check(std::memcmp(a.payload.data(), b.payload.data(), a.payload.size()) == 0,
          "payload bytes changed in re-encoding");
  }
}

size_t MetadataBytes(const std::vector<MetadataEntry>& entries) {
  size_t n = 0;
  for (const auto& [key, value] : entries) n += MetadataEntrySize(key, value);
  return n;
}

bool IsLimitError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         status.message().find("metadata of at least ") != std::string_view::npos;
}

// Decode's metadata limit against the unlimited decode of the same input (`unlimited`).
void CheckLimit(absl::Span<const uint8_t> input, const absl::StatusOr<Envelope>& unlimited) {
  if (!unlimited.ok()) {
    // The limit can only stop the decoder earlier.
    for (size_t limit : {size_t{0}, size_t{64}, kDefaultMaxMetadataBytes}) {
      const absl::StatusOr<Envelope> limited = Decode(input, limit);
      Check(!limited.ok(), "a limit made a rejected input decode");
      Check(limited.status() == unlimited.status() || IsLimitError(limited.status()),
            "a limit changed the reason of a rejection into something else");
    }
    return;
  }
  const size_t most =
      std::max(MetadataBytes(unlimited->metadata), MetadataBytes(unlimited->trailing_metadata));
  const absl::StatusOr<Envelope> at_limit = Decode(input, most);
  Check(at_limit.ok(), "metadata exactly at the limit is rejected");
  CheckSame(*unlimited, *at_limit);
  if (most > 0) {
    const absl::StatusOr<Envelope> over = Decode(input, most - 1);
    Check(!over.ok() && IsLimitError(over.status()),
          "metadata one byte over the limit is not RESOURCE_EXHAUSTED");
  }
}

std::vector<uint8_t> Reencode(const Envelope& e) {
  std::vector<uint8_t> out(EncodedHeaderSize(e));
  EncodeHeader(e, absl::MakeSpan(out));
  out.insert(out.end(), e.payload.begin(), e.payload.end());
  return out;
}

}  // namespace
}  // namespace homarpc::internal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace homarpc::internal;
  const absl::Span<const uint8_t> input(data, size);
  const absl::StatusOr<Envelope> first = Decode(input);
  CheckLimit(input, first);
  if (!first.ok()) {
    Check(first.status().code() == absl::StatusCode::kInternal, "rejection is not INTERNAL");
    Check(!first.status().message().empty(), "rejection without a reason");
    return 0;
  }
  CheckAccepted(input, *first);

  const std::vector<uint8_t> encoded = Reencode(*first);
  Check(encoded.size() <= size, "canonical re-encoding is longer than the input");
  const absl::StatusOr<Envelope> second = Decode(absl::MakeConstSpan(encoded));
  if (!second.ok()) {
    std::fprintf(stderr, "envelope_fuzz: re-encoded envelope does not decode: %s\n",
                 std::string(second.status().message()).c_str());
    std::abort();
  }
  CheckAccepted(absl::MakeConstSpan(encoded), *second);
  CheckSame(*first, *second);
  // Canonical form: encoding what was decoded from a canonical message changes nothing.
  Check(Reencode(*second) == encoded, "re-encoding is not a fixed point");
  return 0;
}
