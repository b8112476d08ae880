#include "runtime/status.h"

#include "absl/strings/str_cat.h"

namespace homarpc {
namespace {

const Status& OkStatus() {
  static const Status* const status = new Status();
  return *status;
}
const Status& CancelledStatus() {
  static const Status* const status = new Status(StatusCode::CANCELLED, "");
  return *status;
}

}  // namespace

const Status& Status::OK = OkStatus();
const Status& Status::CANCELLED = CancelledStatus();

std::string StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::OK: return "OK";
    case StatusCode::CANCELLED: return "CANCELLED";
    case StatusCode::UNKNOWN: return "UNKNOWN";
    case StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case StatusCode::NOT_FOUND: return "NOT_FOUND";
    case StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    case StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case StatusCode::ABORTED: return "ABORTED";
    case StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case StatusCode::INTERNAL: return "INTERNAL";
    case StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case StatusCode::DATA_LOSS: return "DATA_LOSS";
    case StatusCode::DO_NOT_USE: break;
  }
  return absl::StrCat("CODE(", static_cast<int>(code), ")");
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return absl::StrCat(StatusCodeName(code_), ": ", error_message_);
}

Status FromAbsl(const absl::Status& status) {
  if (status.ok()) return Status();
  return Status(static_cast<StatusCode>(status.raw_code()), std::string(status.message()));
}

absl::Status ToAbsl(const Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace homarpc
