// UringBackend: the io_uring implementation of IoBackend (liburing).
//
// One ring per backend, set up IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN (and
// created disabled, so the loop thread that first calls Poll/Flush/Wait becomes the single
// issuer, not the thread that called the factory). The ring carries the loop's sleep: Wait()
// arms a one-shot poll on the socket and a read of the eventfd Notify() writes, and waits for
// either, or the timeout, in one io_uring_enter. Datagrams move as in the epoll backend:
// Poll() reads with recvmmsg (IoOptions::recv_buffer_count buffers of recv_buffer_size bytes)
// and Flush() sends with sendmmsg, which measured faster on this project's VMs than a
// multishot receive and SENDMSG SQEs (uring_backend.cc, DESIGN NOTES). The class itself is
// private to uring_backend.cc.
//
// Threading: as IoBackend (everything but Notify() on the owning loop thread).
#ifndef HOMARPC_TRANSPORT_URING_BACKEND_H_
#define HOMARPC_TRANSPORT_URING_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "transport/address.h"
#include "transport/io_backend.h"

namespace homarpc::transport {

// Wraps `fd`, a UDP socket already configured and bound to `local` (io_internal::
// OpenUdpSocket), in an io_uring backend; `options.kind` and `bind_address` are not consulted.
// On success the backend owns `fd`; on failure the caller still does, so that it can hand the
// same socket to the epoll backend. Errors: FAILED_PRECONDITION when this kernel or sandbox
// cannot set up the ring. Most callers want CreateIoBackend().
absl::StatusOr<std::unique_ptr<IoBackend>> CreateUringBackend(const IoOptions& options, int fd,
                                                              const Address& local);

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_URING_BACKEND_H_
