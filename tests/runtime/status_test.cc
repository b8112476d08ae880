// Tests of runtime/status.{h,cc}: gRPC's 17 codes with gRPC's numbers and names, Status's
// grpc::Status-shaped API, and the absl::Status conversions at the public boundary.
//
// The numbers are checked at compile time against gRPC's own enum (a header-only include of
// the installed gRPC; nothing of gRPC is linked) and against absl::StatusCode. Single-threaded.
#include "runtime/status.h"

#include <grpcpp/support/status_code_enum.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace homarpc {
namespace {

// Same number as grpc::StatusCode and absl::StatusCode, for every code.
#define HOMARPC_SAME_CODE(name, absl_name)                                                       \
  static_assert(static_cast<int>(StatusCode::name) == static_cast<int>(grpc::StatusCode::name)); \
  static_assert(static_cast<int>(StatusCode::name) == static_cast<int>(absl::StatusCode::absl_name))
HOMARPC_SAME_CODE(OK, kOk);
HOMARPC_SAME_CODE(CANCELLED, kCancelled);
HOMARPC_SAME_CODE(UNKNOWN, kUnknown);
HOMARPC_SAME_CODE(INVALID_ARGUMENT, kInvalidArgument);
HOMARPC_SAME_CODE(DEADLINE_EXCEEDED, kDeadlineExceeded);
HOMARPC_SAME_CODE(NOT_FOUND, kNotFound);
HOMARPC_SAME_CODE(ALREADY_EXISTS, kAlreadyExists);
HOMARPC_SAME_CODE(PERMISSION_DENIED, kPermissionDenied);
HOMARPC_SAME_CODE(UNAUTHENTICATED, kUnauthenticated);
HOMARPC_SAME_CODE(RESOURCE_EXHAUSTED, kResourceExhausted);
HOMARPC_SAME_CODE(FAILED_PRECONDITION, kFailedPrecondition);
HOMARPC_SAME_CODE(ABORTED, kAborted);
HOMARPC_SAME_CODE(OUT_OF_RANGE, kOutOfRange);
HOMARPC_SAME_CODE(UNIMPLEMENTED, kUnimplemented);
HOMARPC_SAME_CODE(INTERNAL, kInternal);
HOMARPC_SAME_CODE(UNAVAILABLE, kUnavailable);
HOMARPC_SAME_CODE(DATA_LOSS, kDataLoss);
#undef HOMARPC_SAME_CODE
static_assert(static_cast<int>(StatusCode::DO_NOT_USE) ==
              static_cast<int>(grpc::StatusCode::DO_NOT_USE));

struct NamedCode {
  StatusCode code;
  int number;
  const char* name;
};

// grpc/grpc:doc/statuscodes.md.
const std::vector<NamedCode>& AllCodes() {
  static const auto* const codes = new std::vector<NamedCode>{
      {OK, 0, "OK"},
      {CANCELLED, 1, "CANCELLED"},
      {UNKNOWN, 2, "UNKNOWN"},
      {INVALID_ARGUMENT, 3, "INVALID_ARGUMENT"},
      {DEADLINE_EXCEEDED, 4, "DEADLINE_EXCEEDED"},
      {NOT_FOUND, 5, "NOT_FOUND"},
      {ALREADY_EXISTS, 6, "ALREADY_EXISTS"},
      {PERMISSION_DENIED, 7, "PERMISSION_DENIED"},
      {RESOURCE_EXHAUSTED, 8, "RESOURCE_EXHAUSTED"},
      {FAILED_PRECONDITION, 9, "FAILED_PRECONDITION"},
      {ABORTED, 10, "ABORTED"},
      {OUT_OF_RANGE, 11, "OUT_OF_RANGE"},
      {UNIMPLEMENTED, 12, "UNIMPLEMENTED"},
      {INTERNAL, 13, "INTERNAL"},
      {UNAVAILABLE, 14, "UNAVAILABLE"},
      {DATA_LOSS, 15, "DATA_LOSS"},
      {UNAUTHENTICATED, 16, "UNAUTHENTICATED"},
  };
  return *codes;
}

TEST(StatusCode, SeventeenCodesNumberedAsGrpc) {
  ASSERT_EQ(AllCodes().size(), 17u);
  for (int i = 0; i < 17; ++i) {
    EXPECT_EQ(static_cast<int>(AllCodes()[i].code), i);
    EXPECT_EQ(AllCodes()[i].number, i);
  }
}

TEST(StatusCode, NamesAsGrpc) {
  for (const NamedCode& c : AllCodes()) {
    EXPECT_EQ(StatusCodeName(c.code), c.name) << c.number;
    // absl's names are the same words.
    EXPECT_EQ(absl::StatusCodeToString(static_cast<absl::StatusCode>(c.number)), c.name);
  }
}

TEST(StatusCode, NameOfANumberOutsideTheCodes) {
  // Not a real code: a text with the number that matches no code's name.
  for (const int number : {17, 31, -1}) {
    const std::string name = StatusCodeName(static_cast<StatusCode>(number));
    EXPECT_NE(name.find(std::to_string(number)), std::string::npos) << name;
    for (const NamedCode& c : AllCodes()) EXPECT_NE(name, c.name);
  }
}

TEST(Status, DefaultIsOk) {
  const Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.error_code(), StatusCode::OK);
  EXPECT_EQ(status.error_message(), "");
  EXPECT_EQ(status.error_details(), "");
  EXPECT_EQ(status, Status::OK);
  status.IgnoreError();
}

TEST(Status, StaticOkAndCancelled) {
  EXPECT_TRUE(Status::OK.ok());
  EXPECT_EQ(Status::OK.error_code(), StatusCode::OK);
  EXPECT_FALSE(Status::CANCELLED.ok());
  EXPECT_EQ(Status::CANCELLED.error_code(), StatusCode::CANCELLED);
  EXPECT_EQ(Status::CANCELLED.error_message(), "");
}

TEST(Status, CodeMessageAndBinaryDetails) {
  const std::string details("\x08\x05\x12\0\xff", 5);
  const Status status(StatusCode::NOT_FOUND, "no such key", details);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "no such key");
  EXPECT_EQ(status.error_details(), details);
  EXPECT_EQ(status.error_details().size(), 5u);

  const Status no_details(StatusCode::NOT_FOUND, "no such key");
  EXPECT_EQ(no_details.error_details(), "");
}

TEST(Status, EqualityComparesCodeMessageAndDetails) {
  const Status a(StatusCode::ABORTED, "m", "d");
  EXPECT_EQ(a, Status(StatusCode::ABORTED, "m", "d"));
  EXPECT_NE(a, Status(StatusCode::INTERNAL, "m", "d"));
  EXPECT_NE(a, Status(StatusCode::ABORTED, "other", "d"));
  EXPECT_NE(a, Status(StatusCode::ABORTED, "m", "other"));
  EXPECT_NE(a, Status(StatusCode::ABORTED, "m"));
}

TEST(Status, ToString) {
  EXPECT_EQ(Status().ToString(), "OK");
  EXPECT_EQ(Status::OK.ToString(), "OK");
  EXPECT_EQ(Status(StatusCode::NOT_FOUND, "no such key").ToString(), "NOT_FOUND: no such key");
  EXPECT_EQ(Status(StatusCode::UNAUTHENTICATED, "who?", "details").ToString(),
            "UNAUTHENTICATED: who?");
  EXPECT_EQ(Status::CANCELLED.ToString(), "CANCELLED: ");
}

TEST(Status, FromAbslAndBackKeepCodeAndMessage) {
  for (const NamedCode& c : AllCodes()) {
    SCOPED_TRACE(c.name);
    const absl::Status original(static_cast<absl::StatusCode>(c.number), "message of the call");
    const Status status = FromAbsl(original);
    EXPECT_EQ(status.error_code(), c.code);
    if (c.code == StatusCode::OK) {
      // absl::Status drops the message of an OK status, and so does the conversion.
      EXPECT_TRUE(status.ok());
      EXPECT_EQ(status.error_message(), "");
    } else {
      EXPECT_EQ(status.error_message(), "message of the call");
    }
    EXPECT_EQ(ToAbsl(status), original);
  }
}

TEST(Status, ToAbslAndBackKeepCodeAndMessage) {
  for (const NamedCode& c : AllCodes()) {
    if (c.code == StatusCode::OK) continue;
    SCOPED_TRACE(c.name);
    const Status status(c.code, "handler said so");
    const absl::Status converted = ToAbsl(status);
    EXPECT_EQ(static_cast<int>(converted.code()), c.number);
    EXPECT_EQ(converted.message(), "handler said so");
    EXPECT_EQ(FromAbsl(converted), status);
  }
  EXPECT_TRUE(ToAbsl(Status::OK).ok());
  EXPECT_EQ(FromAbsl(absl::OkStatus()), Status::OK);
}

TEST(Status, ToAbslDropsDetails) {
  // status.h: details are not carried by absl here.
  const Status status(StatusCode::INTERNAL, "m", "details");
  const Status back = FromAbsl(ToAbsl(status));
  EXPECT_EQ(back.error_code(), StatusCode::INTERNAL);
  EXPECT_EQ(back.error_message(), "m");
  EXPECT_EQ(back.error_details(), "");
}

}  // namespace
}  // namespace homarpc
