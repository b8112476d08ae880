// sched: scheduler hints for the threads that carry RPCs (transport loops, the runtime's
// handler workers).
//
// RequestShortSlice() asks the kernel for a short scheduler slice for the calling thread. Such
// a thread runs briefly and then waits, and what it does next (pass a request on, complete a
// response) is what callers are waiting for. Under Linux's EEVDF scheduler (6.6+) a woken
// thread runs ahead of the one holding the core only if its deadline, wake-up time plus slice,
// is earlier; with the default slice (~1.4 ms on 2 CPUs) a loop woken by a packet can wait
// that long behind a thread doing batch work -- a handler copying megabytes, a bulk receiver
// -- which on a busy 2-core machine put milliseconds into small calls' p99 (measured with the
// testbed's `mixed` scenario, docs/benchmarks.md). With a short slice it runs at once. The
// thread's share of the CPU does not change, only how finely it is cut. Linux honours the
// request for SCHED_OTHER since 6.12 (sched_attr.sched_runtime); older kernels ignore it.
// Failure is harmless and ignored. Any thread; affects only the calling thread.
#ifndef HOMARPC_TRANSPORT_SCHED_H_
#define HOMARPC_TRANSPORT_SCHED_H_

#include <cstdint>

namespace homarpc::transport {

inline constexpr uint64_t kShortSliceNanos = 100 * 1000;

// Returns whether the kernel accepted the request (false on kernels without the call).
bool RequestShortSlice(uint64_t slice_nanos = kShortSliceNanos);

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_SCHED_H_
