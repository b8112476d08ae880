// Status: the outcome of an RPC, with gRPC's 17 codes and their numbers.
//
// Shaped like grpc::Status so migrated code compiles unchanged: Status(code, message[,
// details]), ok(), error_code(), error_message(), error_details(), Status::OK and
// Status::CANCELLED. A value type; thread-compatible.
//
// Inside homarpc, absl::Status (whose codes are gRPC's, number for number) is the error
// model; FromAbsl()/ToAbsl() convert at the public boundary.
#ifndef HOMARPC_RUNTIME_STATUS_H_
#define HOMARPC_RUNTIME_STATUS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"

namespace homarpc {

// Same names and numbers as grpc::StatusCode.
enum StatusCode {
  OK = 0,
  CANCELLED = 1,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  DEADLINE_EXCEEDED = 4,
  NOT_FOUND = 5,
  ALREADY_EXISTS = 6,
  PERMISSION_DENIED = 7,
  UNAUTHENTICATED = 16,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  ABORTED = 10,
  OUT_OF_RANGE = 11,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
  UNAVAILABLE = 14,
  DATA_LOSS = 15,
  // Not a real code; force users to include a default branch.
  DO_NOT_USE = -1
};

// "OK", "CANCELLED", ... ; "CODE(n)" for numbers outside 0..16.
std::string StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string error_message)
      : code_(code), error_message_(std::move(error_message)) {}
  // `error_details`: arbitrary bytes (by convention a serialized google.rpc.Status), delivered
  // to the caller unchanged.
  Status(StatusCode code, std::string error_message, std::string error_details)
      : code_(code),
        error_message_(std::move(error_message)),
        binary_error_details_(std::move(error_details)) {}

  static const Status& OK;
  static const Status& CANCELLED;

  StatusCode error_code() const { return code_; }
  const std::string& error_message() const { return error_message_; }
  const std::string& error_details() const { return binary_error_details_; }
  bool ok() const { return code_ == StatusCode::OK; }
  // Let Status be used where gRPC code calls IgnoreError().
  void IgnoreError() const {}

  // "OK" or "CODE: message".
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.error_message_ == b.error_message_ &&
           a.binary_error_details_ == b.binary_error_details_;
  }
  friend bool operator!=(const Status& a, const Status& b) { return !(a == b); }

 private:
  StatusCode code_ = StatusCode::OK;
  std::string error_message_;
  std::string binary_error_details_;
};

// absl::Status <-> Status. Codes map number for number; details are not carried by absl here.
Status FromAbsl(const absl::Status& status);
absl::Status ToAbsl(const Status& status);

}  // namespace homarpc

#endif  // HOMARPC_RUNTIME_STATUS_H_
