// errors: the one place where errno values become Status codes (gRPC's codes, via absl).
//
// ECONNREFUSED/EHOSTUNREACH/ENETUNREACH/ENOTCONN -> UNAVAILABLE, ETIMEDOUT -> DEADLINE_EXCEEDED,
// ENOMEM/ENOBUFS/EMFILE/ENFILE -> RESOURCE_EXHAUSTED, EINVAL/EAFNOSUPPORT -> INVALID_ARGUMENT,
// EPERM/EACCES -> PERMISSION_DENIED, EADDRINUSE -> ALREADY_EXISTS... the table is in errors.cc.
#ifndef HOMARPC_TRANSPORT_ERRORS_H_
#define HOMARPC_TRANSPORT_ERRORS_H_

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace homarpc::transport {

// Returns a Status whose message is "<what>: <strerror(err)>". err == 0 yields OK.
absl::Status ErrnoToStatus(int err, absl::string_view what);

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_ERRORS_H_
