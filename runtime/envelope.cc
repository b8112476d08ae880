// envelope: the codec for the RPC envelope inside each Homa message (see envelope.h and
// proto/PROTOCOL.md §14). Owned by the runtime; stateless functions, safe from any thread.
//
// Decode() runs once per received request and response. It reads each byte at most once and
// allocates nothing but the two metadata vectors (and a Status, on the error path only),
// whose size the caller's metadata limit bounds (checked before each entry is stored).
//
// DESIGN NOTES
// - Fields are read and written with explicit byte shifts on a byte pointer, as in
//   transport/wire.cc: the message may be unaligned, host order is irrelevant, and every read
//   is visibly inside a length already checked against what is left.
// - Lengths from the wire are u32 and are only ever compared with `left`, a size_t that is
//   already known to fit in the message; nothing adds two wire values, so nothing can wrap.
// - The order of checks is the table in PROTOCOL.md §14.6, and each error's text contains
//   that table's reason: tests match on it, and a server sends it back to the client.
// - EncodeHeader() writes the canonical form (§14.3): only the sections of the envelope's
//   kind, ascending type order, defaults omitted. Decode -> EncodeHeader -> Decode therefore
//   gives back the same fields and is a fixed point after one round; the fuzz target
//   (tests/fuzz/envelope_fuzz.cc) checks exactly that.
#include "runtime/envelope.h"

#include <cassert>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/metadata.h"
#include "transport/big_endian.h"

namespace homarpc::internal {
namespace {

// Header offsets (§14.1).
constexpr size_t kOffVersion = 0;
constexpr size_t kOffKind = 1;
constexpr size_t kOffFlags = 2;
constexpr size_t kOffStreamId = 4;
constexpr size_t kOffSequence = 8;
constexpr size_t kOffCallId = 12;
constexpr size_t kOffSectionBytes = 20;
static_assert(kOffSectionBytes + 4 == kEnvelopeHeaderBytes);

// Section framing (§14.3): type u8, length u32, value.
constexpr size_t kSectionHeaderBytes = 5;
constexpr size_t kKeyLenBytes = 2;  // metadata entry: key_len u16, key, value
constexpr size_t kTimeoutBytes = 8;
constexpr size_t kStatusCodeBytes = 4;
constexpr uint32_t kMaxStatusCode = 16;  // UNAUTHENTICATED
constexpr uint8_t kSkippableBit = 0x80;

using transport::Load16;
using transport::Load32;
using transport::Load64;
using transport::Store16;
using transport::Store32;
using transport::Store64;

const char* KindName(EnvelopeKind kind) {
  switch (kind) {
    case EnvelopeKind::kRequest:
      return "REQUEST";
    case EnvelopeKind::kResponse:
      return "RESPONSE";
    case EnvelopeKind::kCancel:
      return "CANCEL";
  }
  return "?";
}

bool IsKnownKind(uint8_t kind) {
  switch (static_cast<EnvelopeKind>(kind)) {
    case EnvelopeKind::kRequest:
    case EnvelopeKind::kResponse:
    case EnvelopeKind::kCancel:
      return true;
  }
  return false;
}

// nullptr for a type this version does not know.
const char* SectionName(uint8_t type) {
  switch (static_cast<SectionType>(type)) {
    case SectionType::kMethod:
      return "METHOD";
    case SectionType::kTimeout:
      return "TIMEOUT";
    case SectionType::kMetadata:
      return "METADATA";
    case SectionType::kStatusCode:
      return "STATUS_CODE";
    case SectionType::kStatusMessage:
      return "STATUS_MESSAGE";
    case SectionType::kStatusDetails:
      return "STATUS_DETAILS";
    case SectionType::kTrailingMetadata:
      return "TRAILING_METADATA";
  }
  return nullptr;
}

// Table §14.3, column "On". Only called with known types.
bool AllowedOn(SectionType type, EnvelopeKind kind) {
  switch (kind) {
    case EnvelopeKind::kRequest:
      return type == SectionType::kMethod || type == SectionType::kTimeout ||
             type == SectionType::kMetadata;
    case EnvelopeKind::kResponse:
      return type == SectionType::kMetadata || type == SectionType::kStatusCode ||
             type == SectionType::kStatusMessage || type == SectionType::kStatusDetails ||
             type == SectionType::kTrailingMetadata;
    case EnvelopeKind::kCancel:
      return false;
  }
  return false;
}

// Sections that may appear at most once (METHOD exactly once on a request).
bool IsSingle(SectionType type) {
  return type != SectionType::kMetadata && type != SectionType::kTrailingMetadata;
}

std::string_view View(const uint8_t* p, size_t n) {
  return std::string_view(reinterpret_cast<const char*>(p), n);
}

size_t MetadataSectionsSize(const std::vector<MetadataEntry>& entries) {
  size_t n = 0;
  for (const auto& [key, value] : entries) {
    n += kSectionHeaderBytes + kKeyLenBytes + key.size() + value.size();
  }
  return n;
}

uint8_t* PutSectionHeader(uint8_t* p, SectionType type, size_t length) {
  p[0] = static_cast<uint8_t>(type);
  Store32(p + 1, static_cast<uint32_t>(length));
  return p + kSectionHeaderBytes;
}

uint8_t* PutBytes(uint8_t* p, std::string_view bytes) {
  // memcpy from an empty view's nullptr is undefined even for 0 bytes.
  if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
  return p + bytes.size();
}

uint8_t* PutBytesSection(uint8_t* p, SectionType type, std::string_view bytes) {
  return PutBytes(PutSectionHeader(p, type, bytes.size()), bytes);
}

// Key lengths above 65535 cannot be encoded; ValidateMetadata() refuses them before any
// envelope is built (metadata.h), so here it is an invariant.
uint8_t* PutMetadata(uint8_t* p, SectionType type, const std::vector<MetadataEntry>& entries) {
  for (const auto& [key, value] : entries) {
    assert(key.size() <= std::numeric_limits<uint16_t>::max());
    p = PutSectionHeader(p, type, kKeyLenBytes + key.size() + value.size());
    Store16(p, static_cast<uint16_t>(key.size()));
    p = PutBytes(p + kKeyLenBytes, key);
    p = PutBytes(p, value);
  }
  return p;
}

absl::Status Invalid(std::string reason) { return absl::InternalError(std::move(reason)); }

absl::Status Malformed(const char* section, const std::string& what) {
  return Invalid(absl::StrCat("malformed section value: ", section, " ", what));
}

}  // namespace

size_t EncodedHeaderSize(const Envelope& envelope) {
  size_t n = kEnvelopeHeaderBytes;
  switch (envelope.kind) {
    case EnvelopeKind::kRequest:
      n += kSectionHeaderBytes + envelope.method.size();
      if (envelope.timeout_micros >= 0) n += kSectionHeaderBytes + kTimeoutBytes;
      n += MetadataSectionsSize(envelope.metadata);
      break;
    case EnvelopeKind::kResponse:
      n += MetadataSectionsSize(envelope.metadata);
      if (envelope.status_code != 0) n += kSectionHeaderBytes + kStatusCodeBytes;
      if (!envelope.status_message.empty()) {
        n += kSectionHeaderBytes + envelope.status_message.size();
      }
      if (!envelope.status_details.empty()) {
        n += kSectionHeaderBytes + envelope.status_details.size();
      }
      n += MetadataSectionsSize(envelope.trailing_metadata);
      break;
    case EnvelopeKind::kCancel:
      break;
  }
  return n;
}

void EncodeHeader(const Envelope& envelope, absl::Span<uint8_t> out) {
  assert(out.size() == EncodedHeaderSize(envelope));
  uint8_t* const start = out.data();
  uint8_t* p = start + kEnvelopeHeaderBytes;
  switch (envelope.kind) {
    case EnvelopeKind::kRequest:
      p = PutBytesSection(p, SectionType::kMethod, envelope.method);
      if (envelope.timeout_micros >= 0) {
        p = PutSectionHeader(p, SectionType::kTimeout, kTimeoutBytes);
        Store64(p, static_cast<uint64_t>(envelope.timeout_micros));
        p += kTimeoutBytes;
      }
      p = PutMetadata(p, SectionType::kMetadata, envelope.metadata);
      break;
    case EnvelopeKind::kResponse:
      p = PutMetadata(p, SectionType::kMetadata, envelope.metadata);
      if (envelope.status_code != 0) {
        p = PutSectionHeader(p, SectionType::kStatusCode, kStatusCodeBytes);
        Store32(p, envelope.status_code);
        p += kStatusCodeBytes;
      }
      if (!envelope.status_message.empty()) {
        p = PutBytesSection(p, SectionType::kStatusMessage, envelope.status_message);
      }
      if (!envelope.status_details.empty()) {
        p = PutBytesSection(p, SectionType::kStatusDetails, envelope.status_details);
      }
      p = PutMetadata(p, SectionType::kTrailingMetadata, envelope.trailing_metadata);
      break;
    case EnvelopeKind::kCancel:
      break;
  }
  assert(p == start + out.size());

  start[kOffVersion] = kEnvelopeVersion;
  start[kOffKind] = static_cast<uint8_t>(envelope.kind);
  Store16(start + kOffFlags, envelope.flags);
  Store32(start + kOffStreamId, envelope.stream_id);
  Store32(start + kOffSequence, envelope.sequence);
  Store64(start + kOffCallId, envelope.call_id);
  Store32(start + kOffSectionBytes, static_cast<uint32_t>(p - start - kEnvelopeHeaderBytes));
}

absl::StatusOr<Envelope> Decode(absl::Span<const uint8_t> message, size_t max_metadata_bytes) {
  const size_t size = message.size();
  const uint8_t* const m = message.data();

  // §14.6 checks 1-5: the header.
  if (size < kEnvelopeHeaderBytes) {
    return Invalid(absl::StrCat("envelope of ", size, " bytes is shorter than the ",
                                kEnvelopeHeaderBytes, "-byte header"));
  }
  if (m[kOffVersion] != kEnvelopeVersion) {
    return Invalid(absl::StrCat("unsupported envelope version ", m[kOffVersion]));
  }
  if (!IsKnownKind(m[kOffKind])) {
    return Invalid(absl::StrCat("unknown envelope kind ", m[kOffKind]));
  }
  const uint16_t flags = Load16(m + kOffFlags);
  if ((flags & ~kKnownFlags) != 0) {
    return Invalid(absl::StrCat("unknown envelope flags 0x",
                                absl::Hex(flags & ~kKnownFlags, absl::kZeroPad4)));
  }
  const uint32_t section_bytes = Load32(m + kOffSectionBytes);
  if (section_bytes > size - kEnvelopeHeaderBytes) {
    return Invalid(absl::StrCat("envelope sections overrun the message: section_bytes ",
                                section_bytes, ", ", size - kEnvelopeHeaderBytes,
                                " bytes after the header"));
  }

  Envelope envelope;
  envelope.kind = static_cast<EnvelopeKind>(m[kOffKind]);
  envelope.flags = flags;
  envelope.stream_id = Load32(m + kOffStreamId);
  envelope.sequence = Load32(m + kOffSequence);
  envelope.call_id = Load64(m + kOffCallId);

  // Checks 6-11: the sections, in order.
  const size_t sections_end = kEnvelopeHeaderBytes + section_bytes;
  uint32_t seen = 0;  // bit t: a single-use section of type t was seen
  // MetadataEntrySize sums of the two lists, checked against max_metadata_bytes.
  size_t metadata_bytes = 0;
  size_t trailing_bytes = 0;
  size_t offset = kEnvelopeHeaderBytes;
  while (offset < sections_end) {
    const size_t start = offset;
    size_t left = sections_end - start;
    if (left < kSectionHeaderBytes) {
      return Invalid(
          absl::StrCat("truncated section header at offset ", start, " (", left, " bytes left)"));
    }
    const uint8_t type = m[start];
    const uint32_t length = Load32(m + start + 1);
    left -= kSectionHeaderBytes;
    if (length > left) {
      return Invalid(absl::StrCat("section overruns the sections: type ", type, " at offset ",
                                  start, ", length ", length, ", ", left, " bytes left"));
    }
    const uint8_t* const value = m + start + kSectionHeaderBytes;
    offset = start + kSectionHeaderBytes + length;

    const char* const name = SectionName(type);
    if (name == nullptr) {
      if ((type & kSkippableBit) != 0) continue;
      return Invalid(absl::StrCat("unknown section type ", type, " at offset ", start));
    }
    const auto section = static_cast<SectionType>(type);
    if (!AllowedOn(section, envelope.kind)) {
      return Invalid(absl::StrCat("section not allowed on this kind: ", name, " on a ",
                                  KindName(envelope.kind)));
    }
    if (IsSingle(section)) {
      const uint32_t bit = uint32_t{1} << type;
      if ((seen & bit) != 0) return Invalid(absl::StrCat("repeated section ", name));
      seen |= bit;
    }

    switch (section) {
      case SectionType::kMethod:
        envelope.method = View(value, length);
        break;
      case SectionType::kTimeout: {
        if (length != kTimeoutBytes) {
          return Malformed(name, absl::StrCat("of ", length, " bytes, expected ", kTimeoutBytes));
        }
        const uint64_t micros = Load64(value);
        if (micros > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Malformed(name, absl::StrCat(micros, " microseconds is out of range"));
        }
        envelope.timeout_micros = static_cast<int64_t>(micros);
        break;
      }
      case SectionType::kStatusCode: {
        if (length != kStatusCodeBytes) {
          return Malformed(name,
                           absl::StrCat("of ", length, " bytes, expected ", kStatusCodeBytes));
        }
        const uint32_t code = Load32(value);
        if (code > kMaxStatusCode) {
          return Malformed(name, absl::StrCat(code, " is out of range"));
        }
        envelope.status_code = code;
        break;
      }
      case SectionType::kStatusMessage:
        envelope.status_message = View(value, length);
        break;
      case SectionType::kStatusDetails:
        envelope.status_details = View(value, length);
        break;
      case SectionType::kMetadata:
      case SectionType::kTrailingMetadata: {
        if (length < kKeyLenBytes) {
          return Malformed(name, absl::StrCat("of ", length, " bytes has no key length"));
        }
        const size_t key_len = Load16(value);
        if (key_len > length - kKeyLenBytes) {
          return Malformed(name, absl::StrCat("key length ", key_len, " overruns its section (",
                                              length - kKeyLenBytes, " bytes)"));
        }
        MetadataEntry entry(View(value + kKeyLenBytes, key_len),
                            View(value + kKeyLenBytes + key_len, length - kKeyLenBytes - key_len));
        // Counted before it is stored. No overflow: each entry adds at most its section's
        // length + 32, and the sections fit in the message.
        const bool trailing = section == SectionType::kTrailingMetadata;
        size_t& bytes = trailing ? trailing_bytes : metadata_bytes;
        bytes += MetadataEntrySize(entry.first, entry.second);
        if (bytes > max_metadata_bytes) {
          return absl::ResourceExhaustedError(
              absl::StrCat(trailing ? "trailing " : "", "metadata of at least ", bytes,
                           " bytes exceeds the limit of ", max_metadata_bytes));
        }
        (trailing ? envelope.trailing_metadata : envelope.metadata).push_back(entry);
        break;
      }
    }
  }

  // Checks 12-13: the whole message.
  const uint32_t method_bit = uint32_t{1} << static_cast<uint8_t>(SectionType::kMethod);
  if (envelope.kind == EnvelopeKind::kRequest && (seen & method_bit) == 0) {
    return Invalid("request without a method section");
  }
  envelope.payload = message.subspan(sections_end);
  if (envelope.kind == EnvelopeKind::kCancel && !envelope.payload.empty()) {
    return Invalid(absl::StrCat("cancel with a payload of ", envelope.payload.size(), " bytes"));
  }
  return envelope;
}

std::optional<uint64_t> PeekCallId(absl::Span<const uint8_t> message) {
  if (message.size() < kEnvelopeHeaderBytes) return std::nullopt;
  return Load64(message.data() + kOffCallId);
}

}  // namespace homarpc::internal
