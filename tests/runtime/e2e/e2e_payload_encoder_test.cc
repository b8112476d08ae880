// Tests of EncodeBorrowing (runtime/payload_encoder.h), the zero-copy serializer: its output
// is always the envelope header followed by exactly message.SerializeAsString(); string and
// bytes fields of at least kMinBorrowBytes -- top-level, nested, repeated -- are borrowed (a
// segment of the MessageBytes IS the field's storage), shorter ones copied, and the owned
// chunks stay below kMinBorrowBytes; the header buffer is used in place; a payload size that
// does not match what serialization produces fails. Uses the e2e suite's generated messages
// (protos/echo_test.proto), which is why it lives here. Single-threaded.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "runtime/payload_encoder.h"
#include "tests/runtime/e2e/protos/echo_test.pb.h"
#include "tests/transport/gathered_message.h"
#include "transport/buffer.h"
#include "transport/message_bytes.h"

namespace homarpc::e2e {
namespace {

using internal::EncodeBorrowing;
using internal::kMinBorrowBytes;
using internal::kZeroCopyHeadScratch;
using transport::Buffer;
using transport::MessageBytes;
using Span = absl::Span<const uint8_t>;

// A stand-in for an envelope header (any bytes; the encoder does not read them).
const std::string kHeader = "ENVELOPE-HEADER-24-BYTES";

std::string Pattern(size_t n, uint32_t seed) { return transport::testing::PatternBytes(n, seed); }
// Printable bytes, for proto3 `string` fields (which must be UTF-8).
std::string Text(size_t n, uint32_t seed) {
  std::string s = Pattern(n, seed);
  for (char& c : s) c = static_cast<char>('a' + static_cast<uint8_t>(c) % 26);
  return s;
}

struct Encoded {
  bool ok = false;
  MessageBytes bytes;
  const uint8_t* header_data = nullptr;  // where the header buffer's bytes were
};

// Encodes `message` after kHeader, with `payload_bytes` (default: the true size).
Encoded Encode(const google::protobuf::MessageLite& message, size_t payload_bytes = SIZE_MAX) {
  const size_t size = message.ByteSizeLong();
  if (payload_bytes == SIZE_MAX) payload_bytes = size;
  Buffer head(kHeader.size() + kZeroCopyHeadScratch);
  std::memcpy(head.data(), kHeader.data(), kHeader.size());
  Encoded e;
  e.header_data = head.data();
  e.ok = EncodeBorrowing(message, payload_bytes, std::move(head), kHeader.size(), &e.bytes);
  return e;
}

// Each segment as Gather() reports it (from a segment's start, the first span is all of it),
// with its offset in the message.
struct Segment {
  Span span;
  size_t offset;
};
std::vector<Segment> Segments(const MessageBytes& m) {
  std::vector<Segment> out;
  size_t offset = 0;
  Span a, b;
  while (m.Gather(offset, std::numeric_limits<size_t>::max(), &a, &b) > 0) {
    out.push_back({a, offset});
    offset += a.size();
  }
  return out;
}

// The segment that is `field`'s own storage, or null.
const Segment* Borrowed(const std::vector<Segment>& segments, const std::string& field) {
  for (const Segment& s : segments) {
    if (s.span.data() == reinterpret_cast<const uint8_t*>(field.data())) return &s;
  }
  return nullptr;
}

// Whether `p` points into `field`'s storage.
bool Inside(const uint8_t* p, const std::string& field) {
  const auto* begin = reinterpret_cast<const uint8_t*>(field.data());
  return p >= begin && p < begin + field.size();
}

// Checks the output against header + SerializeAsString, that every borrowed segment is a whole
// field of at least kMinBorrowBytes and every owned one is shorter than that (the header
// chunk aside), given every string/bytes field of the message in `fields`.
void ExpectWellFormed(const Encoded& e, const google::protobuf::MessageLite& message,
                      const std::vector<const std::string*>& fields) {
  ASSERT_TRUE(e.ok);
  const std::string want = kHeader + message.SerializeAsString();
  EXPECT_EQ(e.bytes.size(), want.size());
  const Buffer flat = e.bytes.Flatten();
  EXPECT_TRUE(flat.view() == want) << "the output is not header + SerializeAsString()";
  const std::vector<Segment> segments = Segments(e.bytes);
  ASSERT_FALSE(segments.empty());
  EXPECT_EQ(segments[0].span.data(), e.header_data) << "the header buffer is used in place";
  size_t borrowed = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    const std::string* owner = nullptr;
    for (const std::string* f : fields) {
      if (!f->empty() && Inside(s.span.data(), *f)) owner = f;
    }
    if (owner != nullptr) {
      ++borrowed;
      EXPECT_EQ(s.span.data(), reinterpret_cast<const uint8_t*>(owner->data()))
          << "segment " << i << " borrows part of a field";
      EXPECT_EQ(s.span.size(), owner->size()) << "segment " << i;
      EXPECT_GE(s.span.size(), kMinBorrowBytes) << "segment " << i << " borrows a short field";
    } else if (i > 0) {
      EXPECT_LT(s.span.size(), kMinBorrowBytes) << "owned chunk " << i << " is too long";
    }
  }
  EXPECT_EQ(e.bytes.borrows(), borrowed > 0);
}

TEST(PayloadEncoderTest, PayloadEncoder_SmallMessageIsHeaderPlusSerialization) {
  EchoRequest request;
  request.set_payload("small");
  request.set_call_id(42);
  request.set_tag("tag");
  Encoded e = Encode(request);
  ExpectWellFormed(e, request, {&request.payload(), &request.tag()});
  EXPECT_FALSE(e.bytes.borrows());
  EXPECT_EQ(e.bytes.segment_count(), 1u) << "fits the header's scratch";

  EchoRequest empty;
  Encoded none = Encode(empty);
  ASSERT_TRUE(none.ok);
  EXPECT_EQ(none.bytes.Flatten().view(), kHeader);
}

TEST(PayloadEncoderTest, PayloadEncoder_LargeBytesFieldIsBorrowedAtItsOffset) {
  EchoRequest request;
  request.set_payload(Pattern(1 << 20, 1));
  request.set_call_id(7);
  request.set_status_message("after the payload");
  Encoded e = Encode(request);
  ExpectWellFormed(e, request, {&request.payload(), &request.status_message()});
  EXPECT_TRUE(e.bytes.borrows());
  const std::vector<Segment> segments = Segments(e.bytes);
  const Segment* s = Borrowed(segments, request.payload());
  ASSERT_NE(s, nullptr) << "no segment is the payload's storage";
  EXPECT_EQ(s->span.size(), request.payload().size());
  // It sits where the serialization puts the field's bytes.
  const std::string serialized = request.SerializeAsString();
  EXPECT_EQ(s->offset, kHeader.size() + serialized.find(request.payload()));

  // Borrowed, not copied: a change to the field's bytes (in place) shows in the output.
  request.mutable_payload()->data()[1000] ^= 0x5a;
  const Buffer flat = e.bytes.Flatten();
  EXPECT_EQ(flat.data()[s->offset + 1000], static_cast<uint8_t>(request.payload()[1000]));
}

TEST(PayloadEncoderTest, PayloadEncoder_BorrowThresholdIsMinBorrowBytes) {
  for (size_t size : {kMinBorrowBytes - 1, kMinBorrowBytes, kMinBorrowBytes + 1}) {
    SCOPED_TRACE(absl::StrCat("field of ", size, " bytes"));
    EchoRequest request;
    request.set_call_id(1);
    request.set_payload(Pattern(size, static_cast<uint32_t>(size)));
    Encoded e = Encode(request);
    ExpectWellFormed(e, request, {&request.payload()});
    const bool borrowed = Borrowed(Segments(e.bytes), request.payload()) != nullptr;
    EXPECT_EQ(borrowed, size >= kMinBorrowBytes);
    EXPECT_EQ(e.bytes.borrows(), size >= kMinBorrowBytes);
  }
}

TEST(PayloadEncoderTest, PayloadEncoder_ManyFieldsBelowTheThresholdAreCopied) {
  // 1.5 MB made only of fields just under the threshold (and ones that straddle chunk ends):
  // nothing is borrowed, and no owned chunk reaches kMinBorrowBytes.
  EchoRequest request;
  std::vector<const std::string*> fields;
  for (int i = 0; i < 100; ++i) {
    Entry* entry = request.add_initial_metadata();
    entry->set_key(Text(static_cast<size_t>(i % 7) * 100 + 1, i));
    entry->set_value(Pattern(kMinBorrowBytes - 1 - static_cast<size_t>(i) * 37, i + 500));
  }
  for (const Entry& entry : request.initial_metadata()) {
    fields.push_back(&entry.key());
    fields.push_back(&entry.value());
  }
  Encoded e = Encode(request);
  ASSERT_GE(e.bytes.size(), 1000000u);
  ExpectWellFormed(e, request, fields);
  EXPECT_FALSE(e.bytes.borrows());
}

TEST(PayloadEncoderTest, PayloadEncoder_LargeFieldsAnywhereAreBorrowed) {
  // Top-level bytes and string fields, a nested message's field, repeated nested messages'
  // fields, between small fields of every kind.
  EchoRequest request;
  request.set_payload(Pattern(1 << 20, 2));
  request.set_call_id(99);
  request.set_tag(Text(20000, 3));
  request.set_status_code(5);
  request.set_status_message("small message");
  request.set_status_details(Pattern(100000, 4));
  for (int i = 0; i < 5; ++i) {
    Entry* entry = request.add_initial_metadata();
    entry->set_key(Text(10, 10 + i));
    // Alternately large (borrowed) and small (copied).
    entry->set_value(i % 2 == 0 ? Pattern(kMinBorrowBytes + 1000 * i, 20 + i)
                                : Pattern(100 + i, 20 + i));
  }
  Entry* trailing = request.add_trailing_metadata();
  trailing->set_key("k-bin");
  trailing->set_value(Pattern(3 * kMinBorrowBytes, 30));
  request.mutable_probe()->set_key("probe");
  request.mutable_probe()->set_value(Pattern(50000, 31));
  request.set_response_bytes(12345);

  std::vector<const std::string*> fields = {&request.payload(),        &request.tag(),
                                            &request.status_message(), &request.status_details(),
                                            &request.probe().key(),    &request.probe().value(),
                                            &trailing->key(),          &trailing->value()};
  for (const Entry& entry : request.initial_metadata()) {
    fields.push_back(&entry.key());
    fields.push_back(&entry.value());
  }
  Encoded e = Encode(request);
  ExpectWellFormed(e, request, fields);
  const std::vector<Segment> segments = Segments(e.bytes);
  for (const std::string* large :
       {&request.payload(), &request.tag(), &request.status_details(), &request.probe().value(),
        &trailing->value(), &request.initial_metadata(0).value(),
        &request.initial_metadata(2).value(), &request.initial_metadata(4).value()}) {
    EXPECT_NE(Borrowed(segments, *large), nullptr)
        << "a field of " << large->size() << " bytes was not borrowed";
  }
  for (const std::string* small :
       {&request.initial_metadata(1).value(), &request.initial_metadata(3).value(),
        &request.status_message()}) {
    EXPECT_EQ(Borrowed(segments, *small), nullptr);
  }

  // The response type too: repeated nested fields after a large payload.
  EchoResponse response;
  response.set_payload(Pattern(3 * (1 << 20) + 17, 40));
  response.set_call_id(1);
  for (int i = 0; i < 3; ++i) {
    Entry* e2 = response.add_client_metadata();
    e2->set_key(Text(5, 41 + i));
    e2->set_value(Pattern(kMinBorrowBytes * (i + 1), 50 + i));
  }
  response.set_peer("ipv4:127.0.0.1:1");
  std::vector<const std::string*> response_fields = {&response.payload(), &response.peer()};
  for (const Entry& entry : response.client_metadata()) {
    response_fields.push_back(&entry.key());
    response_fields.push_back(&entry.value());
  }
  Encoded r = Encode(response);
  ExpectWellFormed(r, response, response_fields);
  EXPECT_NE(Borrowed(Segments(r.bytes), response.payload()), nullptr);
  for (const Entry& entry : response.client_metadata()) {
    EXPECT_NE(Borrowed(Segments(r.bytes), entry.value()), nullptr);
  }
}

TEST(PayloadEncoderTest, PayloadEncoder_WrongPayloadSizeFails) {
  EchoRequest request;
  request.set_payload(Pattern(200000, 5));
  request.set_call_id(3);
  const size_t size = request.ByteSizeLong();
  EXPECT_TRUE(Encode(request, size).ok);
  EXPECT_FALSE(Encode(request, size + 1).ok) << "one byte more than serialization produces";
  EXPECT_FALSE(Encode(request, size - 1).ok) << "one byte less";
  EXPECT_FALSE(Encode(request, 0).ok);

  // A small message too (no borrowing at all).
  EchoRequest small;
  small.set_tag("x");
  EXPECT_FALSE(Encode(small, small.ByteSizeLong() + 10).ok);

  // The message changed after its size was computed: the cached sizes no longer match.
  EchoRequest changed;
  changed.set_payload(Pattern(100000, 6));
  const size_t before = changed.ByteSizeLong();
  changed.set_payload(Pattern(120000, 6));
  Buffer head(kHeader.size() + kZeroCopyHeadScratch);
  MessageBytes out;
  EXPECT_FALSE(EncodeBorrowing(changed, before, std::move(head), kHeader.size(), &out));
}

TEST(PayloadEncoderTest, PayloadEncoder_OutputIsResetFirst) {
  // `*out` may hold an earlier message: it is replaced (and released), not appended to.
  int released = 0;
  MessageBytes out(Buffer::CopyOf("stale bytes"));
  out.OnRelease([&released] { ++released; });
  EchoRequest request;
  request.set_payload(Pattern(70000, 7));
  Buffer head(kHeader.size() + kZeroCopyHeadScratch);
  std::memcpy(head.data(), kHeader.data(), kHeader.size());
  ASSERT_TRUE(
      EncodeBorrowing(request, request.ByteSizeLong(), std::move(head), kHeader.size(), &out));
  EXPECT_EQ(released, 1);
  EXPECT_TRUE(out.Flatten().view() == kHeader + request.SerializeAsString());
}

}  // namespace
}  // namespace homarpc::e2e
