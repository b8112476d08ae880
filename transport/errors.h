// errors: where errno values become Status codes (gRPC's codes, via absl).
//
// Abseil already maps errno to canonical codes (ECONNREFUSED -> UNAVAILABLE, ETIMEDOUT ->
// DEADLINE_EXCEEDED, ENOMEM -> RESOURCE_EXHAUSTED, EINVAL -> INVALID_ARGUMENT, ...), so the
// project uses that one function everywhere rather than a table of its own:
//   return ErrnoToStatus(errno, "bind 127.0.0.1:5000");
// yields "bind 127.0.0.1:5000: Address already in use" with the mapped code.
#ifndef HOMARPC_TRANSPORT_ERRORS_H_
#define HOMARPC_TRANSPORT_ERRORS_H_

#include "absl/status/status.h"

namespace homarpc::transport {

using absl::ErrnoToStatus;

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_ERRORS_H_
