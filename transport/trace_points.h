// Trace points: when each step of a call happened, for tools/call-timeline.sh.
//
// A diagnostic build (cmake -DHOMARPC_TRACE_POINTS=ON) stamps a small call's steps on both
// sides -- the caller's encoding, every send and receive system call, the server's dispatch,
// handler and response -- and tools/call-timeline.sh turns the stamps of a 64 B ping-pong into
// a table: how long each step takes, and which step holds the extra time of the calls that
// took 20 us more than the median. Without the option HOMARPC_TRACE_POINT() compiles to
// nothing, so normal builds pay nothing.
//
// In a build with the option, a process records only when its environment's
// HOMARPC_TRACE_DIR names a directory: the first trace point it passes creates
// DIR/trace.<pid>, maps it, and each point appends one TraceRecord (CLOCK_MONOTONIC
// nanoseconds, comparable across processes, ~25 ns a stamp on these VMs). The file holds
// kMaxTraceRecords (~300000 calls' stamps); later stamps are counted as dropped. Its pages are
// written once when it is created, so that no stamp takes a page fault (~9 us here, as long
// as the steps it would time). Any thread. The file is opened once per process: a process
// that stamps and then forks leaves its children writing into its own file (the benchmark's
// parent stamps nothing before it forks the client and the server).
#ifndef HOMARPC_TRANSPORT_TRACE_POINTS_H_
#define HOMARPC_TRANSPORT_TRACE_POINTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace homarpc::transport {

enum class TracePoint : uint32_t {
  // The caller (a blocking unary call, runtime/client_call.cc).
  kCallBegin = 1,      // ClientCall::Blocking entered
  kCallEncoded,        // envelope and request encoded; the call starts next
  kResponseDelivered,  // the transport handed the response to the waiting call
  kCallEnd,            // ClientCall::Blocking returns
  // The server (runtime/server.cc, runtime/server_call.cc).
  kRequestDispatched,  // ServerImpl::ProcessRequest entered (the engine delivered a request)
  kCallCreated,        // envelope decoded, method found, the call made and its request parsed
  kHandlerBegin,       // the handler is called
  kHandlerEnd,         // the handler returned; the response is encoded and handed over next
  // Both sides (transport/io_backend.cc).
  kSendBegin,  // a sendmmsg or sendmsg is made
  kSendEnd,    // ...and returned
  kReceived,   // a recvmmsg returned one or more datagrams
};
inline constexpr uint32_t kMaxTracePoint = static_cast<uint32_t>(TracePoint::kReceived);

struct TraceRecord {
  int64_t nanos = 0;   // CLOCK_MONOTONIC
  uint32_t point = 0;  // a TracePoint
  uint32_t thread = 0;  // the recording thread's id (gettid), for telling threads apart
};
static_assert(sizeof(TraceRecord) == 16);

inline constexpr uint64_t kMaxTraceRecords = uint64_t{1} << 21;  // 32 MiB a process

// Records `point` now (see the file comment). Defined in every build; only the
// HOMARPC_TRACE_POINT macros call it, and only in builds with HOMARPC_TRACE_POINTS.
void RecordTracePoint(TracePoint point);

// Stamps `point` when the enclosing scope exits (HOMARPC_TRACE_POINT_AT_EXIT).
class TracePointAtExit {
 public:
  explicit TracePointAtExit(TracePoint point) : point_(point) {}
  ~TracePointAtExit() { RecordTracePoint(point_); }
  TracePointAtExit(const TracePointAtExit&) = delete;
  TracePointAtExit& operator=(const TracePointAtExit&) = delete;

 private:
  const TracePoint point_;
};

// A trace file written by RecordTracePoint: its records in the order they were taken, and
// the stamps it had no room for.
struct TraceFile {
  std::vector<TraceRecord> records;
  uint64_t dropped = 0;
};
// Errors: NotFound/PermissionDenied (cannot open), DataLoss (not a trace file, or cut short).
absl::StatusOr<TraceFile> ReadTraceFile(const std::string& path);

}  // namespace homarpc::transport

// HOMARPC_TRACE_POINT(kCallBegin) stamps now; HOMARPC_TRACE_POINT_AT_EXIT(kCallEnd) when the
// enclosing scope exits (one per scope).
#ifdef HOMARPC_TRACE_POINTS
#define HOMARPC_TRACE_POINT(point) \
  ::homarpc::transport::RecordTracePoint(::homarpc::transport::TracePoint::point)
#define HOMARPC_TRACE_POINT_AT_EXIT(point)                                   \
  const ::homarpc::transport::TracePointAtExit homarpc_trace_point_at_exit_( \
      ::homarpc::transport::TracePoint::point)
#else
// Nothing, but the point's name is still checked (a typo fails here, not in a trace build).
#define HOMARPC_TRACE_POINT(point) \
  static_assert(sizeof(::homarpc::transport::TracePoint::point) > 0)
#define HOMARPC_TRACE_POINT_AT_EXIT(point) \
  static_assert(sizeof(::homarpc::transport::TracePoint::point) > 0)
#endif

#endif  // HOMARPC_TRANSPORT_TRACE_POINTS_H_
