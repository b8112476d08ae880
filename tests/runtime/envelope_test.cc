// Tests of runtime/envelope.{h,cc}: the RPC envelope codec (proto/PROTOCOL.md §14).
//
// Round trips of every field through EncodeHeader and Decode, the wire pinned by golden bytes
// (the example of §14.5), every rejection of §14.6 on hand-built messages, each checked for
// its reason text, and the metadata limit Decode applies while decoding. Single-threaded.
#include "runtime/envelope.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace homarpc::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Bytes = std::vector<uint8_t>;

// ---- Helpers ----------------------------------------------------------------------------------

Bytes Encode(const Envelope& envelope, std::string_view payload = {}) {
  Bytes out(EncodedHeaderSize(envelope));
  EncodeHeader(envelope, absl::MakeSpan(out));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

absl::StatusOr<Envelope> DecodeBytes(const Bytes& bytes) {
  return Decode(absl::MakeConstSpan(bytes));
}

std::string_view PayloadOf(const Envelope& e) {
  return std::string_view(reinterpret_cast<const char*>(e.payload.data()), e.payload.size());
}

void Append(Bytes& out, std::string_view s) { out.insert(out.end(), s.begin(), s.end()); }
void Put16(Bytes& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}
void Put32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}
void Put64(Bytes& out, uint64_t v) {
  Put32(out, static_cast<uint32_t>(v >> 32));
  Put32(out, static_cast<uint32_t>(v));
}

// One section: type, length (the value's size unless given), value.
Bytes Section(uint8_t type, const Bytes& value, std::optional<uint32_t> length = std::nullopt) {
  Bytes out{type};
  Put32(out, length.value_or(static_cast<uint32_t>(value.size())));
  out.insert(out.end(), value.begin(), value.end());
  return out;
}
Bytes Section(SectionType type, const Bytes& value) {
  return Section(static_cast<uint8_t>(type), value);
}
Bytes Str(std::string_view s) { return Bytes(s.begin(), s.end()); }
Bytes U32(uint32_t v) {
  Bytes out;
  Put32(out, v);
  return out;
}
Bytes U64(uint64_t v) {
  Bytes out;
  Put64(out, v);
  return out;
}
// A metadata entry's value: key_len u16, key, value.
Bytes Entry(std::string_view key, std::string_view value) {
  Bytes out;
  Put16(out, static_cast<uint16_t>(key.size()));
  Append(out, key);
  Append(out, value);
  return out;
}
Bytes MethodSection(std::string_view method = "/pkg.Svc/M") {
  return Section(SectionType::kMethod, Str(method));
}

// A hand-built message: header fields, then sections and payload as given.
struct Raw {
  uint8_t version = 1;
  uint8_t kind = 1;
  uint16_t flags = kFlagEndOfStream;
  uint32_t stream_id = 0;
  uint32_t sequence = 0;
  uint64_t call_id = 7;
  std::optional<uint32_t> section_bytes;  // default: the sections' size
  std::vector<Bytes> sections;
  Bytes payload;

  Bytes Build() const {
    Bytes body;
    for (const Bytes& s : sections) body.insert(body.end(), s.begin(), s.end());
    Bytes out{version, kind};
    Put16(out, flags);
    Put32(out, stream_id);
    Put32(out, sequence);
    Put64(out, call_id);
    Put32(out, section_bytes.value_or(static_cast<uint32_t>(body.size())));
    out.insert(out.end(), body.begin(), body.end());
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  }
};

Raw Request(std::vector<Bytes> sections) {
  Raw raw;
  raw.kind = static_cast<uint8_t>(EnvelopeKind::kRequest);
  raw.sections = std::move(sections);
  return raw;
}
Raw Response(std::vector<Bytes> sections) {
  Raw raw;
  raw.kind = static_cast<uint8_t>(EnvelopeKind::kResponse);
  raw.sections = std::move(sections);
  return raw;
}
Raw Cancel(std::vector<Bytes> sections) {
  Raw raw;
  raw.kind = static_cast<uint8_t>(EnvelopeKind::kCancel);
  raw.flags = 0;
  raw.sections = std::move(sections);
  return raw;
}

void ExpectInvalid(const Bytes& message, std::string_view reason) {
  const absl::StatusOr<Envelope> decoded = DecodeBytes(message);
  ASSERT_FALSE(decoded.ok()) << "accepted; expected: " << reason;
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr(std::string(reason)));
}

// Decoded envelopes are views into their message, so DecodeOk() keeps every message it is
// given alive until the test binary exits (a few MiB in all).
const Bytes& KeepAlive(Bytes message) {
  static std::deque<Bytes>* const kept = new std::deque<Bytes>();
  kept->push_back(std::move(message));
  return kept->back();
}

Envelope DecodeOk(Bytes message) {
  absl::StatusOr<Envelope> decoded = DecodeBytes(KeepAlive(std::move(message)));
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *std::move(decoded) : Envelope{};
}

// Field-by-field equality of two envelopes (payload by bytes).
void ExpectSameFields(const Envelope& a, const Envelope& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.stream_id, b.stream_id);
  EXPECT_EQ(a.sequence, b.sequence);
  EXPECT_EQ(a.call_id, b.call_id);
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.timeout_micros, b.timeout_micros);
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.status_code, b.status_code);
  EXPECT_EQ(a.status_message, b.status_message);
  EXPECT_EQ(a.status_details, b.status_details);
  EXPECT_EQ(a.trailing_metadata, b.trailing_metadata);
  EXPECT_EQ(PayloadOf(a), PayloadOf(b));
}

// ---- Round trips ------------------------------------------------------------------------------

TEST(Envelope, RoundTrip_MinimalRequest) {
  Envelope e;
  e.kind = EnvelopeKind::kRequest;
  e.method = "/a.B/C";
  const Bytes bytes = Encode(e);
  // Header + METHOD only: no TIMEOUT (no deadline), no metadata, no payload.
  EXPECT_EQ(bytes.size(), kEnvelopeHeaderBytes + 5 + e.method.size());
  const Envelope d = DecodeOk(bytes);
  ExpectSameFields(d, e);
  EXPECT_EQ(d.timeout_micros, -1);
  EXPECT_TRUE(d.payload.empty());
}

TEST(Envelope, RoundTrip_RequestEveryField) {
  const std::string bin("\0\x01\xff\0zero\0", 9);
  Envelope e;
  e.kind = EnvelopeKind::kRequest;
  e.flags = kFlagEndOfStream | kFlagCompressed;
  e.stream_id = 0xDEADBEEF;
  e.sequence = 0xFFFFFFFF;
  e.call_id = std::numeric_limits<uint64_t>::max();
  e.method = "/helloworld.Greeter/SayHello";
  e.timeout_micros = 1234567;
  e.metadata = {{"tenant", "blue"}, {"trace-bin", bin}, {"empty", ""}, {"tenant", "red"}};
  const std::string payload("\x0a\x02hi\0", 5);
  const Bytes bytes = Encode(e, payload);
  const Envelope d = DecodeOk(bytes);
  e.payload = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(payload.data()), 5);
  ExpectSameFields(d, e);
  // A repeated key stays repeated, in order.
  EXPECT_THAT(d.metadata,
              ElementsAre(MetadataEntry{"tenant", "blue"}, MetadataEntry{"trace-bin", bin},
                          MetadataEntry{"empty", ""}, MetadataEntry{"tenant", "red"}));
}

TEST(Envelope, RoundTrip_Timeouts) {
  for (const int64_t timeout : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{250000},
                                int64_t{1} << 40, std::numeric_limits<int64_t>::max()}) {
    SCOPED_TRACE(timeout);
    Envelope e;
    e.kind = EnvelopeKind::kRequest;
    e.method = "/m";
    e.timeout_micros = timeout;
    const Bytes bytes = Encode(e);
    EXPECT_EQ(bytes.size(), kEnvelopeHeaderBytes + 5 + 2 + (timeout >= 0 ? 13 : 0));
    EXPECT_EQ(DecodeOk(bytes).timeout_micros, timeout);
  }
}

TEST(Envelope, Encode_NegativeTimeoutMeansNoDeadline) {
  Envelope e;
  e.kind = EnvelopeKind::kRequest;
  e.method = "/m";
  e.timeout_micros = -5;
  EXPECT_EQ(DecodeOk(Encode(e)).timeout_micros, -1);
}

TEST(Envelope, RoundTrip_LargeMetadataAndPayload) {
  std::vector<std::string> keys;
  std::vector<std::string> values;
  for (int i = 0; i < 2000; ++i) {
    keys.push_back("key-" + std::to_string(i) + (i % 2 ? "-bin" : ""));
    values.push_back(std::string(static_cast<size_t>(i % 300), static_cast<char>(i)));
  }
  keys.push_back(std::string(65535, 'k'));  // the longest key a u16 can carry
  values.push_back(std::string(100000, 'v'));
  Envelope e;
  e.kind = EnvelopeKind::kResponse;
  for (size_t i = 0; i < keys.size(); ++i) {
    e.metadata.emplace_back(keys[i], values[i]);
    e.trailing_metadata.emplace_back(keys[keys.size() - 1 - i], values[i]);
  }
  const std::string payload(3 << 20, 'p');
  const Envelope d = DecodeOk(Encode(e, payload));
  e.payload = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  ExpectSameFields(d, e);
}

TEST(Envelope, RoundTrip_ResponseEveryField) {
  const std::string details("\x08\x05\x12\0\x01", 5);
  Envelope e;
  e.kind = EnvelopeKind::kResponse;
  e.call_id = 99;
  e.metadata = {{"initial", "1"}};
  e.status_code = 16;  // UNAUTHENTICATED, the largest code
  e.status_message = "who are you? \xc3\xa9";
  e.status_details = details;
  e.trailing_metadata = {{"cost-bin", std::string_view("\0\0", 2)}, {"x", "y"}};
  const Envelope d = DecodeOk(Encode(e));
  ExpectSameFields(d, e);
}

TEST(Envelope, RoundTrip_OkResponseIsHeaderAndPayloadOnly) {
  Envelope e;
  e.kind = EnvelopeKind::kResponse;
  e.call_id = 3;
  EXPECT_EQ(EncodedHeaderSize(e), kEnvelopeHeaderBytes);
  const Envelope d = DecodeOk(Encode(e));
  ExpectSameFields(d, e);
  EXPECT_EQ(d.status_code, 0u);
}

TEST(Envelope, RoundTrip_EmptyPayloadAndEmptyMetadataValue) {
  Envelope e;
  e.kind = EnvelopeKind::kResponse;
  e.metadata = {{"k", ""}};
  e.trailing_metadata = {{"t-bin", ""}};
  const Envelope d = DecodeOk(Encode(e, ""));
  ExpectSameFields(d, e);
  EXPECT_TRUE(d.payload.empty());
}

TEST(Envelope, RoundTrip_CancelIsHeaderOnly) {
  Envelope e;
  e.kind = EnvelopeKind::kCancel;
  e.flags = 0;
  e.call_id = 0x0102030405060708;
  EXPECT_EQ(EncodedHeaderSize(e), kEnvelopeHeaderBytes);
  const Envelope d = DecodeOk(Encode(e));
  ExpectSameFields(d, e);
}

TEST(Envelope, Encode_WritesOnlyTheSectionsOfItsKind) {
  Envelope request;
  request.kind = EnvelopeKind::kRequest;
  request.method = "/m";
  request.status_code = 5;
  request.status_message = "ignored";
  request.status_details = "ignored";
  request.trailing_metadata = {{"ignored", "x"}};
  const Envelope d = DecodeOk(Encode(request));
  EXPECT_EQ(d.status_code, 0u);
  EXPECT_TRUE(d.status_message.empty());
  EXPECT_TRUE(d.status_details.empty());
  EXPECT_TRUE(d.trailing_metadata.empty());

  Envelope cancel = request;
  cancel.kind = EnvelopeKind::kCancel;
  cancel.timeout_micros = 10;
  cancel.metadata = {{"ignored", "x"}};
  EXPECT_EQ(EncodedHeaderSize(cancel), kEnvelopeHeaderBytes);
  const Envelope c = DecodeOk(Encode(cancel));
  EXPECT_TRUE(c.method.empty());
  EXPECT_EQ(c.timeout_micros, -1);
  EXPECT_TRUE(c.metadata.empty());

  Envelope response;
  response.kind = EnvelopeKind::kResponse;
  response.method = "/ignored";
  response.timeout_micros = 10;
  const Envelope r = DecodeOk(Encode(response));
  EXPECT_TRUE(r.method.empty());
  EXPECT_EQ(r.timeout_micros, -1);
}

TEST(Envelope, Decode_ViewsPointIntoTheMessage) {
  Envelope e;
  e.kind = EnvelopeKind::kRequest;
  e.method = "/m";
  e.metadata = {{"k", "v"}};
  const Bytes bytes = Encode(e, "xyz");
  const absl::StatusOr<Envelope> decoded = DecodeBytes(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const Envelope& d = *decoded;
  const char* begin = reinterpret_cast<const char*>(bytes.data());
  const char* end = begin + bytes.size();
  EXPECT_GE(d.method.data(), begin);
  EXPECT_LE(d.method.data() + d.method.size(), end);
  EXPECT_GE(d.metadata[0].second.data(), begin);
  EXPECT_EQ(d.payload.data(), bytes.data() + bytes.size() - 3);
  EXPECT_EQ(d.payload.size(), 3u);
}

// ---- The wire, pinned -------------------------------------------------------------------------

// PROTOCOL.md §14.5, byte for byte.
TEST(Envelope, Golden_SmallRequest) {
  Envelope e;
  e.kind = EnvelopeKind::kRequest;
  e.call_id = 7;
  e.method = "/pkg.Echo/Ping";
  e.timeout_micros = 250000;
  e.metadata = {{"tenant", "blue"}};
  // clang-format off
  const Bytes expected = {
      0x01, 0x01, 0x00, 0x01,                          // version 1, REQUEST, END_OF_STREAM
      0x00, 0x00, 0x00, 0x00,                          // stream_id 0
      0x00, 0x00, 0x00, 0x00,                          // sequence 0
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07,  // call_id 7
      0x00, 0x00, 0x00, 0x31,                          // section_bytes 49
      // METHOD, 14 bytes: "/pkg.Echo/Ping"
      0x01, 0x00, 0x00, 0x00, 0x0E, '/', 'p', 'k', 'g', '.', 'E', 'c', 'h', 'o', '/', 'P', 'i',
      'n', 'g',
      // TIMEOUT, 8 bytes: 250000 us
      0x02, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xD0, 0x90,
      // METADATA, 12 bytes: key_len 6, "tenant", "blue"
      0x03, 0x00, 0x00, 0x00, 0x0C, 0x00, 0x06, 't', 'e', 'n', 'a', 'n', 't', 'b', 'l', 'u',
      'e',
      // payload
      0x0A, 0x02, 'h', 'i'};
  // clang-format on
  ASSERT_EQ(expected.size(), 77u);
  EXPECT_EQ(Encode(e, "\x0a\x02hi"), expected);

  const Envelope d = DecodeOk(expected);
  EXPECT_EQ(d.method, "/pkg.Echo/Ping");
  EXPECT_EQ(d.timeout_micros, 250000);
  EXPECT_THAT(d.metadata, ElementsAre(MetadataEntry{"tenant", "blue"}));
  EXPECT_EQ(PayloadOf(d), "\x0a\x02hi");
}

TEST(Envelope, Golden_OkResponse) {
  Envelope e;
  e.kind = EnvelopeKind::kResponse;
  e.call_id = 7;
  // PROTOCOL.md §14.5: 01 02 0001 00000000 00000000 0000000000000007 00000000 0A026869.
  // clang-format off
  const Bytes expected = {0x01, 0x02, 0x00, 0x01,                          // RESPONSE, EOS
                          0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // stream, sequence
                          0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07,  // call_id 7
                          0x00, 0x00, 0x00, 0x00,                          // no sections
                          0x0A, 0x02, 'h', 'i'};                           // payload
  // clang-format on
  EXPECT_EQ(Encode(e, "\x0a\x02hi"), expected);
}

TEST(Envelope, Golden_ErrorResponseAndCancel) {
  Envelope e;
  e.kind = EnvelopeKind::kResponse;
  e.call_id = 1;
  e.status_code = 5;
  e.status_message = "no";
  Raw raw = Response(
      {Section(SectionType::kStatusCode, U32(5)), Section(SectionType::kStatusMessage, Str("no"))});
  raw.call_id = 1;
  const Bytes expected = raw.Build();
  EXPECT_EQ(Encode(e), expected);

  Envelope cancel;
  cancel.kind = EnvelopeKind::kCancel;
  cancel.flags = 0;
  cancel.call_id = 1;
  // clang-format off
  const Bytes expected_cancel = {0x01, 0x03, 0x00, 0x00,   // version 1, CANCEL, flags 0
                                 0, 0, 0, 0, 0, 0, 0, 0,   // stream_id, sequence
                                 0, 0, 0, 0, 0, 0, 0, 1,   // call_id 1
                                 0, 0, 0, 0};              // section_bytes 0
  // clang-format on
  EXPECT_EQ(Encode(cancel), expected_cancel);
}

// ---- What Decode accepts beyond the canonical form --------------------------------------------

TEST(Envelope, Decode_SectionsInAnyOrder) {
  const Bytes message = Request({Section(SectionType::kMetadata, Entry("a", "1")),
                                 Section(SectionType::kTimeout, U64(9)), MethodSection("/x"),
                                 Section(SectionType::kMetadata, Entry("b", "2"))})
                            .Build();
  const Envelope d = DecodeOk(message);
  EXPECT_EQ(d.method, "/x");
  EXPECT_EQ(d.timeout_micros, 9);
  EXPECT_THAT(d.metadata, ElementsAre(MetadataEntry{"a", "1"}, MetadataEntry{"b", "2"}));
}

TEST(Envelope, Decode_ExplicitDefaultsAreAccepted) {
  // STATUS_CODE 0 and empty STATUS_MESSAGE / STATUS_DETAILS are legal, if not canonical.
  const Bytes message =
      Response({Section(SectionType::kStatusCode, U32(0)), Section(SectionType::kStatusMessage, {}),
                Section(SectionType::kStatusDetails, {})})
          .Build();
  const Envelope d = DecodeOk(message);
  EXPECT_EQ(d.status_code, 0u);
  EXPECT_EQ(Encode(d).size(), kEnvelopeHeaderBytes);  // canonical: all omitted
}

TEST(Envelope, Decode_EmptyMethodIsTheDispatchersProblem) {
  const Envelope d = DecodeOk(Request({MethodSection("")}).Build());
  EXPECT_TRUE(d.method.empty());
}

TEST(Envelope, Decode_KnownFlagsAccepted) {
  for (const uint16_t flags : {0, 1, 2, 3}) {
    Raw raw = Request({MethodSection()});
    raw.flags = flags;
    EXPECT_EQ(DecodeOk(raw.Build()).flags, flags);
  }
}

TEST(Envelope, Decode_SkippableSectionsIgnoredOnEveryKind) {
  for (const uint8_t type : {0x80, 0x81, 0xC7, 0xFF}) {
    SCOPED_TRACE(int{type});
    const Bytes unknown = Section(type, Str(std::string_view("future\0stuff", 12)));
    const Bytes empty_unknown = Section(type, {});
    const Envelope r = DecodeOk(Request({unknown, MethodSection("/m"), empty_unknown}).Build());
    EXPECT_EQ(r.method, "/m");
    const Envelope s =
        DecodeOk(Response({unknown, Section(SectionType::kStatusCode, U32(2))}).Build());
    EXPECT_EQ(s.status_code, 2u);
    const Envelope c = DecodeOk(Cancel({unknown}).Build());
    EXPECT_EQ(c.kind, EnvelopeKind::kCancel);
  }
}

TEST(Envelope, Decode_MetadataKeyFillingTheWholeSection) {
  const Envelope d = DecodeOk(
      Request({MethodSection(), Section(SectionType::kMetadata, Entry("only-key", ""))}).Build());
  EXPECT_THAT(d.metadata, ElementsAre(MetadataEntry{"only-key", ""}));
  // key_len 0: an empty key is structurally fine (ValidateMetadata is the sender's check).
  const Envelope e =
      DecodeOk(Request({MethodSection(), Section(SectionType::kMetadata, Entry("", "v"))}).Build());
  EXPECT_THAT(e.metadata, ElementsAre(MetadataEntry{"", "v"}));
}

// ---- Rejections (§14.6, in order) -------------------------------------------------------------

TEST(EnvelopeError, ShorterThanHeader) {
  const Bytes full = Cancel({}).Build();
  for (size_t n = 0; n < kEnvelopeHeaderBytes; ++n) {
    SCOPED_TRACE(n);
    ExpectInvalid(Bytes(full.begin(), full.begin() + n), "shorter than the 24-byte header");
  }
  EXPECT_TRUE(DecodeBytes(full).ok());
}

TEST(EnvelopeError, TruncatedAtEveryLength) {
  Envelope e;
  e.kind = EnvelopeKind::kRequest;
  e.method = "/pkg.Svc/Method";
  e.timeout_micros = 5;
  e.metadata = {{"a", "1"}, {"b-bin", std::string_view("\0", 1)}};
  const Bytes full = Encode(e);  // no payload: every prefix loses section bytes
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_FALSE(DecodeBytes(Bytes(full.begin(), full.begin() + n)).ok());
  }
  EXPECT_TRUE(DecodeBytes(full).ok());
}

TEST(EnvelopeError, SectionsCutAtEveryLength) {
  // The same sections, cut after k bytes with section_bytes = k: a cut that falls between two
  // sections (after METHOD) is a valid shorter request, any other cut must be rejected.
  const std::vector<Bytes> sections = {MethodSection("/pkg.Svc/Method"),
                                       Section(SectionType::kTimeout, U64(5)),
                                       Section(SectionType::kMetadata, Entry("key", "value"))};
  std::vector<size_t> boundaries;
  size_t total = 0;
  for (const Bytes& s : sections) boundaries.push_back(total += s.size());
  Raw whole = Request(sections);
  const Bytes full = whole.Build();
  for (size_t k = 0; k <= total; ++k) {
    SCOPED_TRACE(k);
    Raw raw = whole;
    raw.section_bytes = static_cast<uint32_t>(k);
    Bytes message = raw.Build();
    message.resize(kEnvelopeHeaderBytes + k);
    const bool at_boundary = std::find(boundaries.begin(), boundaries.end(), k) != boundaries.end();
    const absl::StatusOr<Envelope> decoded = DecodeBytes(message);
    EXPECT_EQ(decoded.ok(), at_boundary) << decoded.status();
    if (!decoded.ok()) {
      EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInternal);
    }
  }
  // The cuts inside a section header and inside a value give their own reasons.
  Raw raw = whole;
  raw.section_bytes = static_cast<uint32_t>(boundaries[0] + 3);
  Bytes message = raw.Build();
  message.resize(kEnvelopeHeaderBytes + boundaries[0] + 3);
  ExpectInvalid(message, "truncated section header");
  raw.section_bytes = static_cast<uint32_t>(boundaries[0] + 7);
  message = raw.Build();
  message.resize(kEnvelopeHeaderBytes + boundaries[0] + 7);
  ExpectInvalid(message, "section overruns the sections");
}

TEST(EnvelopeError, BadVersion) {
  for (const uint8_t version : {0, 2, 255}) {
    Raw raw = Request({MethodSection()});
    raw.version = version;
    ExpectInvalid(raw.Build(), "unsupported envelope version " + std::to_string(version));
  }
}

TEST(EnvelopeError, UnknownKind) {
  for (const uint8_t kind : {0, 4, 255}) {
    Raw raw = Request({MethodSection()});
    raw.kind = kind;
    ExpectInvalid(raw.Build(), "unknown envelope kind " + std::to_string(kind));
  }
}

TEST(EnvelopeError, UnknownFlag) {
  for (int bit = 2; bit < 16; ++bit) {
    SCOPED_TRACE(bit);
    Raw raw = Request({MethodSection()});
    raw.flags = static_cast<uint16_t>(kFlagEndOfStream | (1u << bit));
    ExpectInvalid(raw.Build(), "unknown envelope flags");
  }
  Raw raw = Request({MethodSection()});
  raw.flags = 0xFFFF;
  ExpectInvalid(raw.Build(), "unknown envelope flags 0xfffc");
}

TEST(EnvelopeError, SectionsOverrunTheMessage) {
  for (const uint32_t delta : {1u, 1000u}) {
    Raw raw = Request({MethodSection()});
    raw.payload = Str("pay");
    raw.section_bytes = static_cast<uint32_t>(MethodSection().size() + 3 + delta);
    ExpectInvalid(raw.Build(), "sections overrun the message");
  }
  Raw raw = Request({MethodSection()});
  raw.section_bytes = 0xFFFFFFFF;
  ExpectInvalid(raw.Build(), "sections overrun the message");
}

TEST(EnvelopeError, TruncatedSectionHeader) {
  for (size_t left = 1; left < 5; ++left) {
    SCOPED_TRACE(left);
    Raw raw = Request({MethodSection(), Bytes(left, 0x03)});
    raw.payload = Str("payload bytes that must not be read as a section");
    ExpectInvalid(raw.Build(), "truncated section header");
  }
}

TEST(EnvelopeError, SectionOverrunsTheSections) {
  // The length runs past section_bytes even though the message (payload) has the bytes.
  for (const uint32_t length : {6u, 100u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(length);
    Raw raw = Request({MethodSection(), Section(static_cast<uint8_t>(SectionType::kMetadata),
                                                Entry("k", "v"), length)});
    raw.payload = Bytes(200, 'p');
    ExpectInvalid(raw.Build(), "section overruns the sections");
  }
  // Also a method whose length is one past the end.
  ExpectInvalid(Request({Section(1, Str("/m"), 3)}).Build(), "section overruns the sections");
}

TEST(EnvelopeError, UnknownNonSkippableType) {
  for (const uint8_t type : {0, 8, 9, 0x40, 0x7F}) {
    SCOPED_TRACE(int{type});
    ExpectInvalid(Request({MethodSection(), Section(type, Str("x"))}).Build(),
                  "unknown section type " + std::to_string(type));
    ExpectInvalid(Cancel({Section(type, {})}).Build(), "unknown section type");
  }
}

TEST(EnvelopeError, SectionOnTheWrongKind) {
  struct Case {
    Raw raw;
    std::string reason;
  };
  const Bytes code = Section(SectionType::kStatusCode, U32(1));
  const std::vector<Case> cases = {
      {Response({MethodSection()}), "METHOD on a RESPONSE"},
      {Response({Section(SectionType::kTimeout, U64(1))}), "TIMEOUT on a RESPONSE"},
      {Request({MethodSection(), code}), "STATUS_CODE on a REQUEST"},
      {Request({MethodSection(), Section(SectionType::kStatusMessage, Str("m"))}),
       "STATUS_MESSAGE on a REQUEST"},
      {Request({MethodSection(), Section(SectionType::kStatusDetails, Str("d"))}),
       "STATUS_DETAILS on a REQUEST"},
      {Request({MethodSection(), Section(SectionType::kTrailingMetadata, Entry("k", "v"))}),
       "TRAILING_METADATA on a REQUEST"},
      {Cancel({MethodSection()}), "METHOD on a CANCEL"},
      {Cancel({Section(SectionType::kTimeout, U64(1))}), "TIMEOUT on a CANCEL"},
      {Cancel({Section(SectionType::kMetadata, Entry("k", "v"))}), "METADATA on a CANCEL"},
      {Cancel({code}), "STATUS_CODE on a CANCEL"},
      {Cancel({Section(SectionType::kTrailingMetadata, Entry("k", "v"))}),
       "TRAILING_METADATA on a CANCEL"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    ExpectInvalid(c.raw.Build(), "section not allowed on this kind: " + c.reason);
  }
}

TEST(EnvelopeError, RepeatedSingleSection) {
  ExpectInvalid(Request({MethodSection("/a"), MethodSection("/b")}).Build(),
                "repeated section METHOD");
  const Bytes timeout = Section(SectionType::kTimeout, U64(1));
  ExpectInvalid(Request({MethodSection(), timeout, timeout}).Build(), "repeated section TIMEOUT");
  const Bytes code = Section(SectionType::kStatusCode, U32(1));
  ExpectInvalid(Response({code, code}).Build(), "repeated section STATUS_CODE");
  const Bytes message = Section(SectionType::kStatusMessage, {});
  ExpectInvalid(Response({message, message}).Build(), "repeated section STATUS_MESSAGE");
  const Bytes details = Section(SectionType::kStatusDetails, Str("d"));
  ExpectInvalid(Response({details, code, details}).Build(), "repeated section STATUS_DETAILS");
  // Metadata sections repeat freely.
  const Bytes entry = Section(SectionType::kMetadata, Entry("k", "v"));
  EXPECT_EQ(DecodeOk(Response({entry, entry, entry}).Build()).metadata.size(), 3u);
}

TEST(EnvelopeError, MissingMethodOnRequest) {
  ExpectInvalid(Request({}).Build(), "request without a method");
  ExpectInvalid(Request({Section(SectionType::kTimeout, U64(1)),
                         Section(SectionType::kMetadata, Entry("k", "v"))})
                    .Build(),
                "request without a method");
}

TEST(EnvelopeError, TimeoutOfWrongLength) {
  for (const size_t n : {0, 1, 4, 7, 9, 16}) {
    SCOPED_TRACE(n);
    ExpectInvalid(
        Request({MethodSection(), Section(SectionType::kTimeout, Bytes(n, 0))}).Build(),
        "malformed section value: TIMEOUT of " + std::to_string(n) + " bytes, expected 8");
  }
}

TEST(EnvelopeError, TimeoutOutOfRange) {
  for (const uint64_t micros : {uint64_t{1} << 63, std::numeric_limits<uint64_t>::max()}) {
    ExpectInvalid(Request({MethodSection(), Section(SectionType::kTimeout, U64(micros))}).Build(),
                  "malformed section value: TIMEOUT " + std::to_string(micros));
  }
}

TEST(EnvelopeError, StatusCodeMalformed) {
  ExpectInvalid(Response({Section(SectionType::kStatusCode, Bytes(3, 0))}).Build(),
                "malformed section value: STATUS_CODE of 3 bytes, expected 4");
  ExpectInvalid(Response({Section(SectionType::kStatusCode, U64(1))}).Build(),
                "malformed section value: STATUS_CODE of 8 bytes");
  ExpectInvalid(Response({Section(SectionType::kStatusCode, U32(17))}).Build(),
                "malformed section value: STATUS_CODE 17 is out of range");
  ExpectInvalid(Response({Section(SectionType::kStatusCode, U32(0xFFFFFFFF))}).Build(),
                "out of range");
}

TEST(EnvelopeError, MetadataKeyLengthPastItsSection) {
  for (const SectionType type : {SectionType::kMetadata, SectionType::kTrailingMetadata}) {
    // key_len 5 but only 4 bytes after it; the payload behind must not be read as key.
    Bytes value;
    Put16(value, 5);
    Append(value, "abcd");
    Raw raw = type == SectionType::kMetadata ? Request({MethodSection(), Section(type, value)})
                                             : Response({Section(type, value)});
    raw.payload = Str("XXXXXXXX");
    ExpectInvalid(raw.Build(), "key length 5 overruns its section (4 bytes)");
    // key_len 0xFFFF in an otherwise empty entry.
    Bytes huge;
    Put16(huge, 0xFFFF);
    raw.sections.back() = Section(type, huge);
    ExpectInvalid(raw.Build(), "key length 65535 overruns its section (0 bytes)");
    // Fewer than the two bytes of key_len.
    raw.sections.back() = Section(type, Bytes{0x00});
    ExpectInvalid(raw.Build(), "of 1 bytes has no key length");
    raw.sections.back() = Section(type, {});
    ExpectInvalid(raw.Build(), "of 0 bytes has no key length");
  }
}

TEST(EnvelopeError, CancelWithPayload) {
  Raw raw = Cancel({});
  raw.payload = Str("x");
  ExpectInvalid(raw.Build(), "cancel with a payload of 1 bytes");
}

TEST(EnvelopeError, FirstFailingCheckDecides) {
  // Bad version and unknown kind: the version is reported (§14.6 order).
  Raw raw = Request({});
  raw.version = 9;
  raw.kind = 9;
  raw.flags = 0x8000;
  ExpectInvalid(raw.Build(), "unsupported envelope version 9");
  raw.version = 1;
  ExpectInvalid(raw.Build(), "unknown envelope kind 9");
  raw.kind = 1;
  ExpectInvalid(raw.Build(), "unknown envelope flags");
  // An unknown type is reported before the missing method; a wrong kind before a repeat.
  raw.flags = 1;
  raw.sections = {Section(0x10, {})};
  ExpectInvalid(raw.Build(), "unknown section type 16");
  ExpectInvalid(Response({Section(SectionType::kStatusCode, U32(99)),
                          Section(SectionType::kStatusCode, U32(1))})
                    .Build(),
                "STATUS_CODE 99 is out of range");
}

// ---- Metadata limit (Decode's max_metadata_bytes) ----------------------------------------------

// `n` METADATA (or TRAILING_METADATA) sections of one empty entry each: 7 bytes on the wire,
// 32 bytes as metadata.h counts them.
std::vector<Bytes> EmptyEntries(SectionType type, size_t n) {
  return std::vector<Bytes>(n, Section(type, Entry("", "")));
}

void ExpectOverLimit(const Bytes& message, size_t limit, std::string_view reason) {
  const absl::StatusOr<Envelope> decoded = Decode(absl::MakeConstSpan(message), limit);
  ASSERT_FALSE(decoded.ok()) << "accepted; expected: " << reason;
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr(std::string(reason)));
}

TEST(EnvelopeLimit, ManyTinyEntriesStopAtTheFirstOneOverTheLimit) {
  // 100,000 empty entries: 700 KB of message, 3.2 MB as metadata. Without a limit Decode keeps
  // them all; with 8 KiB it stops at entry 257 (257 * 32 = 8224 > 8192), before storing it.
  std::vector<Bytes> sections = EmptyEntries(SectionType::kMetadata, 100'000);
  sections.insert(sections.begin(), MethodSection());
  const Bytes message = Request(sections).Build();
  const absl::StatusOr<Envelope> unlimited = DecodeBytes(message);
  ASSERT_TRUE(unlimited.ok()) << unlimited.status();
  EXPECT_EQ(unlimited->metadata.size(), 100'000u);
  ExpectOverLimit(message, 8192, "metadata of at least 8224 bytes exceeds the limit of 8192");
  ExpectOverLimit(message, 0, "metadata of at least 32 bytes exceeds the limit of 0");
}

TEST(EnvelopeLimit, TrailersAreCountedAndNamed) {
  const Bytes message = Response(EmptyEntries(SectionType::kTrailingMetadata, 300)).Build();
  ExpectOverLimit(message, 8192,
                  "trailing metadata of at least 8224 bytes exceeds the limit of 8192");
}

TEST(EnvelopeLimit, ExactlyAtTheLimitDecodes) {
  // Key and value bytes count too: 256 entries of "k" = "vv" are 256 * 35 bytes.
  std::vector<Bytes> sections(256, Section(SectionType::kMetadata, Entry("k", "vv")));
  sections.insert(sections.begin(), MethodSection());
  const Bytes message = Request(sections).Build();
  const absl::StatusOr<Envelope> decoded = Decode(absl::MakeConstSpan(message), 256 * 35);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->metadata.size(), 256u);
  ExpectOverLimit(message, 256 * 35 - 1, "metadata of at least 8960 bytes exceeds the limit");
}

TEST(EnvelopeLimit, EachListHasTheWholeLimit) {
  // 200 initial and 200 trailing entries: 6400 bytes each, 12800 together, under 8 KiB each.
  std::vector<Bytes> sections = EmptyEntries(SectionType::kMetadata, 200);
  for (Bytes& s : EmptyEntries(SectionType::kTrailingMetadata, 200)) sections.push_back(s);
  const Bytes message = Response(sections).Build();
  const absl::StatusOr<Envelope> decoded = Decode(absl::MakeConstSpan(message), 8192);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->metadata.size(), 200u);
  EXPECT_EQ(decoded->trailing_metadata.size(), 200u);
}

TEST(EnvelopeLimit, CheckedInMessageOrder) {
  // Over the limit, then a malformed section: the limit is what the receiver hears about.
  std::vector<Bytes> sections = EmptyEntries(SectionType::kMetadata, 3);
  sections.insert(sections.begin(), MethodSection());
  sections.push_back(Section(SectionType::kTimeout, U32(1)));  // 4 bytes, not 8
  const Bytes message = Request(sections).Build();
  ExpectOverLimit(message, 64, "metadata of at least 96 bytes exceeds the limit of 64");
  // Under the limit, the malformed section is found as before.
  const absl::StatusOr<Envelope> decoded = Decode(absl::MakeConstSpan(message), 96);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr("TIMEOUT of 4 bytes"));
}

}  // namespace
}  // namespace homarpc::internal
