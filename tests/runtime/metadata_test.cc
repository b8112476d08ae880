// Tests of runtime/metadata.{h,cc}: gRPC's rules for metadata keys and values
// (../shared/reference/grpc-api.md B.4, B.9; PROTOCOL.md §14.9). Single-threaded.
#include "runtime/metadata.h"

#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace homarpc::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

void ExpectValid(std::string_view key, std::string_view value, bool user_added = true) {
  const absl::Status status = ValidateMetadata(key, value, user_added);
  EXPECT_TRUE(status.ok()) << "key \"" << key << "\": " << status;
}

// Returns the rejection's message (empty if it was accepted, which fails the test).
std::string ExpectRejected(std::string_view key, std::string_view value, bool user_added = true) {
  const absl::Status status = ValidateMetadata(key, value, user_added);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << "key \"" << key << "\"";
  return std::string(status.message());
}

bool IsKeyChar(int c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

TEST(Metadata, ValidKeysAndValues) {
  ExpectValid("a", "b");
  ExpectValid("x-user_id.v2", "Bearer abc/def+ghi=~");
  ExpectValid("0", "");
  ExpectValid("grpc", "not reserved: no dash");
  ExpectValid("my-grpc-key", "reserved only as a prefix");
  ExpectValid("k", " !\"#$%&'()*+,-./0123456789:;<=>?@AZ[\\]^_`az{|}~");
}

TEST(Metadata, EveryKeyCharacter) {
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const std::string key = std::string("k") + static_cast<char>(c);
    const absl::Status status = ValidateMetadata(key, "v", true);
    EXPECT_EQ(status.ok(), IsKeyChar(c)) << status;
  }
}

TEST(Metadata, UppercaseAndOtherKeysRejected) {
  EXPECT_THAT(ExpectRejected("Authorization", "x"), HasSubstr("outside [0-9a-z_.-] at 0"));
  EXPECT_THAT(ExpectRejected("x-Bin", "x"), HasSubstr("at 2"));
  ExpectRejected("a b", "x");
  ExpectRejected("a/b", "x");
  ExpectRejected("a:b", "x", /*user_added=*/false);  // ':' only in front, library keys only
  ExpectRejected(std::string_view("a\0b", 3), "x");
  ExpectRejected("caf\xc3\xa9", "x");
}

TEST(Metadata, EmptyKeyRejected) {
  EXPECT_THAT(ExpectRejected("", "v"), HasSubstr("empty"));
  ExpectRejected("", "v", /*user_added=*/false);
}

TEST(Metadata, ReservedKeysRefusedOnlyFromUsers) {
  EXPECT_THAT(ExpectRejected("grpc-timeout", "1S"), HasSubstr("reserved"));
  EXPECT_THAT(ExpectRejected("grpc-status-details-bin", "x"), HasSubstr("reserved"));
  EXPECT_THAT(ExpectRejected(":authority", "host"), HasSubstr("reserved"));
  ExpectValid("grpc-timeout", "1S", /*user_added=*/false);
  ExpectValid(":authority", "host", /*user_added=*/false);
  // A pseudo-header still needs a valid name after the ':'.
  ExpectRejected(":", "x", /*user_added=*/false);
  ExpectRejected(":Path", "x", /*user_added=*/false);
  ExpectRejected("::path", "x", /*user_added=*/false);
}

TEST(Metadata, TextValuesArePrintableAscii) {
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const std::string value = std::string("ab") + static_cast<char>(c) + "cd";
    const absl::Status status = ValidateMetadata("text", value, true);
    EXPECT_EQ(status.ok(), c >= 0x20 && c <= 0x7E) << status;
    if (!status.ok()) {
      EXPECT_THAT(std::string(status.message()), HasSubstr("non-printable byte at 2"));
    }
  }
}

TEST(Metadata, BinaryValuesCarryAnyByte) {
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte.push_back(static_cast<char>(c));
  ExpectValid("trace-bin", every_byte);
  ExpectValid("trace-bin", std::string_view("\0\0\0", 3));
  ExpectValid("-bin", every_byte);  // the suffix alone is a key ending in -bin
  ExpectValid("x-bin", "");
  // Not binary without the dash, nor with another case.
  ExpectRejected("xbin", std::string_view("\0", 1));
  ExpectRejected("x-bin2", std::string_view("\0", 1));
}

TEST(Metadata, KeyLengthFitsTheEnvelope) {
  ExpectValid(std::string(65535, 'k'), "v");
  EXPECT_THAT(ExpectRejected(std::string(65536, 'k'), "v"), HasSubstr("longer than 65535"));
}

TEST(Metadata, MessagesQuoteKeysSafely) {
  // A key with control bytes is escaped, and a long one is shortened, in the message.
  const std::string message = ExpectRejected(std::string_view("bad\0\nkey", 8), "v");
  EXPECT_THAT(message, HasSubstr("bad\\x00\\nkey"));
  EXPECT_THAT(message, Not(HasSubstr(std::string(1, '\0'))));
  const std::string long_key = std::string(1000, 'a') + "B";
  const std::string long_message = ExpectRejected(long_key, "v");
  EXPECT_THAT(long_message, HasSubstr("...\""));
  EXPECT_LT(long_message.size(), 200u);
}

TEST(Metadata, EntrySizeAsHttp2CountsIt) {
  EXPECT_EQ(kDefaultMaxMetadataBytes, 8192u);
  EXPECT_EQ(MetadataEntrySize("ab", "cde"), 2u + 3u + 32u);
  EXPECT_EQ(MetadataEntrySize("", ""), kMetadataEntryOverhead);
}

}  // namespace
}  // namespace homarpc::internal
