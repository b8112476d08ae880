// EpollBackend: the epoll implementation of IoBackend, for kernels or sandboxes without
// io_uring and as a second implementation to test the contract against.
//
// epoll watches an eventfd (Notify) and, while the loop sleeps (and for a while after it
// wakes: epoll_backend.cc, DESIGN NOTES), the UDP socket. Poll() drains
// the socket with recvmmsg into recv_buffer_count buffers of recv_buffer_size bytes per call;
// Flush() hands the whole batch to sendmmsg, one message per GSO run or datagram. The class
// itself is private to epoll_backend.cc.
//
// Threading: as IoBackend (everything but Notify() on the owning loop thread).
#ifndef HOMARPC_TRANSPORT_EPOLL_BACKEND_H_
#define HOMARPC_TRANSPORT_EPOLL_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "transport/address.h"
#include "transport/io_backend.h"

namespace homarpc::transport {

// Wraps `fd`, a UDP socket already configured and bound to `local` (io_internal::
// OpenUdpSocket), in an epoll backend; `options.kind` and `bind_address` are not consulted.
// On success the backend owns `fd`; on failure the caller still does. Errors: epoll and
// eventfd failures through ErrnoToStatus. Most callers want CreateIoBackend().
absl::StatusOr<std::unique_ptr<IoBackend>> CreateEpollBackend(const IoOptions& options, int fd,
                                                              const Address& local);

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_EPOLL_BACKEND_H_
