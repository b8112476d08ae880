#include "transport/errors.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace homarpc::transport {

absl::Status ErrnoToStatus(int err, absl::string_view what) {
  if (err == 0) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENOTCONN:
    case ECONNRESET:
    case ENETDOWN:
    case EHOSTDOWN:
      return absl::UnavailableError(message);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(message);
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
    case EMSGSIZE:
      return absl::ResourceExhaustedError(message);
    case EINVAL:
    case EAFNOSUPPORT:
    case EADDRNOTAVAIL:
      return absl::InvalidArgumentError(message);
    case EPERM:
    case EACCES:
      return absl::PermissionDeniedError(message);
    case EADDRINUSE:
      return absl::AlreadyExistsError(message);
    case ENOSYS:
    case EOPNOTSUPP:
      return absl::UnimplementedError(message);
    case EAGAIN:
    case EINTR:
      return absl::UnavailableError(message);
    case ECANCELED:
      return absl::CancelledError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace homarpc::transport
