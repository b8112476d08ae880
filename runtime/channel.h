// Channel: a client's handle on a service at a target, shaped like grpc::Channel.
//
//   auto channel = homarpc::CreateChannel("localhost:50051",
//                                         homarpc::InsecureChannelCredentials());
//   auto stub = helloworld::Greeter::NewStub(channel);
//
// A channel owns one Homa endpoint (a UDP socket and a loop thread) and the addresses its
// target resolved to; calls go to them round-robin. Homa has no connections, so there is
// nothing to connect or reconnect: the first call sends its request at once. Channels and
// stubs are thread-safe and meant to be shared; a channel lives as long as any stub holds it.
// Calls still in flight when the last reference goes fail CANCELLED: their callbacks run
// before the destructor returns. The last reference may also be dropped inside one of the
// channel's own completion callbacks (on its loop thread or its completion worker); the
// channel is then destroyed (its other calls cancelled) on a thread of homarpc's own after
// that callback returns, and a process that exits meanwhile first waits for that, from an
// atexit handler (so a callback that calls exit() while such a teardown is waiting for it
// deadlocks).
//
// Targets (resolved once, when the channel is created):
//   host:port, [v6addr]:port          DNS or numeric, like gRPC's default scheme
//   dns:///host:port, dns:host:port   the same
//   ipv4:1.2.3.4:5000,1.2.3.5:5000    a literal list
//   ipv6:[::1]:5000,[::2]:5000        a literal list
//   homa://host:port, homa:///host:port   (homarpc's own spelling)
// A target that does not parse or resolve does not fail CreateChannel (as in gRPC): every call
// on the channel fails UNAVAILABLE with the reason.
#ifndef HOMARPC_RUNTIME_CHANNEL_H_
#define HOMARPC_RUNTIME_CHANNEL_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>

#include "runtime/client_context.h"
#include "runtime/message_transport.h"
#include "runtime/status.h"

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace homarpc {

// Channel argument keys. gRPC's own names are accepted where the meaning is the same.
inline constexpr char kArgMaxReceiveMessageLength[] = "grpc.max_receive_message_length";
inline constexpr char kArgMaxSendMessageLength[] = "grpc.max_send_message_length";
// Bytes of metadata per list (key + value + 32 per entry), each side; default 8 KiB; 0 or
// negative = 0 bytes: no metadata at all (channels and servers read it the same way).
inline constexpr char kArgMaxMetadataSize[] = "grpc.max_metadata_size";
inline constexpr char kArgLoadBalancingPolicy[] = "grpc.lb_policy_name";
// homarpc's own: microseconds a waiting thread or idle loop spins before sleeping (default 50).
inline constexpr char kArgSpinMicros[] = "homarpc.spin_us";
// MTU the transport packetises for. 0 (default): each peer's route MTU as the kernel reports
// it, at most 9000 (jumbo frames; loopback's 64 KiB gets 9000, a 1500-byte NIC 1500:
// transport::Config::use_path_mtu); a positive value: that MTU for every peer (576 to 65000).
inline constexpr char kArgMtu[] = "homarpc.mtu";
// Uplink rate in Mbit/s the sender paces its data to (default 25000, a 25 Gbit/s NIC);
// 0 = no pacing (loopback, or a NIC that paces itself). On a slow link (below ~200 Mbit/s)
// it also stretches the loss-recovery timers (transport::Config::FitToLink): RESENDs wait for
// a switch queue's drain time, and the default UNAVAILABLE timeout grows with it; the bytes
// this end lets in at once (max_incoming, below 3.2 Gbit/s) and sends before a grant
// (unsched_bytes, below 320 Mbit/s) shrink to 1 ms of the link.
inline constexpr char kArgLinkMbps[] = "homarpc.link_mbps";
// "auto" (default), "uring" or "epoll".
inline constexpr char kArgIoBackend[] = "homarpc.io_backend";
// 1 (default): a one-packet request made on the caller's thread while the transport's loop
// sleeps is sent by the caller itself, without waking the loop (transport::Config::
// direct_send); 0: every request goes through the loop thread.
inline constexpr char kArgDirectSend[] = "homarpc.direct_send";
// 0 (default): data to a peer on this host (a loopback address, or one of this host's own)
// goes out as soon as it is granted: it never reaches a NIC, so pacing it at
// kArgLinkMbps would only cap same-host transfers at that rate. 1: paced like any other
// (transport::Config::pace_local).
inline constexpr char kArgPaceLocal[] = "homarpc.pace_local";
// Blocking calls driven by their caller's thread (default 4; 0 = none): a channel lends up
// to this many blocking callers at once a socket of their own, which the caller's thread
// drives while it waits (sends, polls for the response, runs the timers), so no loop thread
// is woken or kept spinning for the call. Each socket is made on first need (epoll, whatever
// kArgIoBackend says) and kept with the channel, holding three file descriptors (socket,
// epoll, eventfd) and up to 2 MiB of receive slots; only as many are made as blocking calls
// on the channel ever overlapped. Blocking calls beyond this many at once, all callback
// calls, and every call once a socket could not be made (out of descriptors: logged once),
// go through the channel's loop thread.
inline constexpr char kArgCallerSockets[] = "homarpc.caller_sockets";
// Milliseconds of silence from the server after which a call fails UNAVAILABLE (default 100,
// or ten RESEND intervals on a slow link, see kArgLinkMbps; this is how long a call to an
// address where nothing listens takes to fail).
inline constexpr char kArgUnavailableTimeoutMs[] = "homarpc.unavailable_timeout_ms";
// Loop threads of a server (ServerBuilder::AddChannelArgument), default 1.
inline constexpr char kArgServerLoops[] = "homarpc.server_loops";
// Live calls a server holds at once; beyond it RESOURCE_EXHAUSTED (ServerBuilder::
// SetMaxConcurrentCalls). Default 100000; 0 or negative = no bound.
inline constexpr char kArgMaxConcurrentCalls[] = "homarpc.max_concurrent_calls";
// Microseconds a sync handler may hold the loop thread that received its request before the
// loop's standby thread takes the socket over (ServerExecutor::kWorkerPool, server_builder.h).
// Default 1000; at least 100 (the standby looks this often while the loop is busy).
inline constexpr char kArgLoopTakeoverMicros[] = "homarpc.loop_takeover_us";

}  // namespace homarpc

// gRPC's macros for the channel argument keys a migrated program most often sets, spelled as
// gRPC spells them (grpc/impl/codegen/grpc_types.h), so that code naming them compiles after
// the three replacements, which do not touch macros. The keys homarpc reads mean what they
// mean in gRPC; the others (keepalive, retries, reconnect backoff, authority, user agent,
// service config, stream limits) are accepted and ignored (docs/migrating-from-grpc.md).
// Each is defined only if gRPC's header has not defined it already.
#ifndef GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH
#define GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH "grpc.max_receive_message_length"
#endif
#ifndef GRPC_ARG_MAX_SEND_MESSAGE_LENGTH
#define GRPC_ARG_MAX_SEND_MESSAGE_LENGTH "grpc.max_send_message_length"
#endif
#ifndef GRPC_ARG_MAX_METADATA_SIZE
#define GRPC_ARG_MAX_METADATA_SIZE "grpc.max_metadata_size"
#endif
#ifndef GRPC_ARG_LB_POLICY_NAME
#define GRPC_ARG_LB_POLICY_NAME "grpc.lb_policy_name"
#endif
#ifndef GRPC_ARG_KEEPALIVE_TIME_MS
#define GRPC_ARG_KEEPALIVE_TIME_MS "grpc.keepalive_time_ms"
#endif
#ifndef GRPC_ARG_KEEPALIVE_TIMEOUT_MS
#define GRPC_ARG_KEEPALIVE_TIMEOUT_MS "grpc.keepalive_timeout_ms"
#endif
#ifndef GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS
#define GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS "grpc.keepalive_permit_without_calls"
#endif
#ifndef GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA
#define GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA "grpc.http2.max_pings_without_data"
#endif
#ifndef GRPC_ARG_ENABLE_RETRIES
#define GRPC_ARG_ENABLE_RETRIES "grpc.enable_retries"
#endif
#ifndef GRPC_ARG_DEFAULT_AUTHORITY
#define GRPC_ARG_DEFAULT_AUTHORITY "grpc.default_authority"
#endif
#ifndef GRPC_ARG_PRIMARY_USER_AGENT_STRING
#define GRPC_ARG_PRIMARY_USER_AGENT_STRING "grpc.primary_user_agent"
#endif
#ifndef GRPC_ARG_SECONDARY_USER_AGENT_STRING
#define GRPC_ARG_SECONDARY_USER_AGENT_STRING "grpc.secondary_user_agent"
#endif
#ifndef GRPC_ARG_MAX_CONCURRENT_STREAMS
#define GRPC_ARG_MAX_CONCURRENT_STREAMS "grpc.max_concurrent_streams"
#endif
#ifndef GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS
#define GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS "grpc.initial_reconnect_backoff_ms"
#endif
#ifndef GRPC_ARG_MIN_RECONNECT_BACKOFF_MS
#define GRPC_ARG_MIN_RECONNECT_BACKOFF_MS "grpc.min_reconnect_backoff_ms"
#endif
#ifndef GRPC_ARG_MAX_RECONNECT_BACKOFF_MS
#define GRPC_ARG_MAX_RECONNECT_BACKOFF_MS "grpc.max_reconnect_backoff_ms"
#endif
#ifndef GRPC_ARG_SERVICE_CONFIG
#define GRPC_ARG_SERVICE_CONFIG "grpc.service_config"
#endif

namespace homarpc {

// Only insecure credentials exist: homarpc is for trusted datacenter fabrics (no TLS yet).
class ChannelCredentials {
 public:
  virtual ~ChannelCredentials() = default;
};
std::shared_ptr<ChannelCredentials> InsecureChannelCredentials();

class ChannelArguments {
 public:
  // -1 = unlimited. Defaults: receive 4 MiB, send unlimited (as in gRPC).
  void SetMaxReceiveMessageSize(int size) { SetInt(kArgMaxReceiveMessageLength, size); }
  void SetMaxSendMessageSize(int size) { SetInt(kArgMaxSendMessageLength, size); }
  // "pick_first" (the first resolved address only) or "round_robin" (homarpc's default:
  // Homa has no connection that would make sticking to one address cheaper).
  void SetLoadBalancingPolicyName(const std::string& name) {
    SetString(kArgLoadBalancingPolicy, name);
  }
  void SetInt(const std::string& key, int value) { args_[key] = value; }
  void SetString(const std::string& key, const std::string& value) { args_[key] = value; }

  // nullptr / -1 when absent or of the other type.
  const std::string* GetString(const std::string& key) const;
  int GetInt(const std::string& key, int default_value) const;

 private:
  std::map<std::string, std::variant<int, std::string>> args_;
};

// Stub construction options (accepted for source compatibility; nothing to set yet).
class StubOptions {};

namespace internal {
class ChannelImpl;
enum class RpcType { NORMAL_RPC, CLIENT_STREAMING, SERVER_STREAMING, BIDI_STREAMING };
// A method as generated stubs name it: "/package.Service/Method".
struct RpcMethod {
  const char* name;
  RpcType type;
};
}  // namespace internal

class Channel final {
 public:
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Homa needs no connection: true at once when the target resolved, false otherwise (after
  // `deadline`, for gRPC's signature).
  template <typename T>
  bool WaitForConnected(T deadline) {
    return resolved();
  }
  bool resolved() const;
  // The resolved addresses, "ipv4:127.0.0.1:50051" etc.; the error text when resolution
  // failed.
  std::string DebugTarget() const;

  // Used by generated stubs. `request` is read before the call returns (blocking) or before
  // AsyncUnaryCall returns (its bytes are serialized then); `response` and `context` must
  // live until the call completes.
  //
  // `on_done` runs exactly once, normally on the channel's thread (do not block in it); for a
  // response larger than 256 KiB (kOffloadBytes) on the channel's completion worker, a thread
  // of its own started on first use, so that the loop does not parse megabytes while the
  // channel's other calls wait (a blocking call made there is allowed, but blocks the other
  // large completions meanwhile). It runs inline instead, on the calling thread and before
  // AsyncUnaryCall returns, when the call fails before anything is sent: the target did not
  // resolve, metadata or request is invalid or over a limit, the deadline has passed, the
  // context was cancelled or is in use by another call. So a caller must not hold, across AsyncUnaryCall, a lock that on_done
  // takes. That includes AsyncUnaryCall called from a completion callback on the channel's
  // own thread: on_done then runs nested inside that callback, and there also when the
  // transport fails the send at once (e.g. CANCELLED while the channel is being destroyed).
  //
  // BlockingUnaryCall from a completion callback of the same channel on the channel's thread
  // fails FAILED_PRECONDITION at once (it would wait for its own thread).
  Status BlockingUnaryCall(const internal::RpcMethod& method, ClientContext* context,
                           const google::protobuf::MessageLite& request,
                           google::protobuf::MessageLite* response);
  void AsyncUnaryCall(const internal::RpcMethod& method, ClientContext* context,
                      const google::protobuf::MessageLite* request,
                      google::protobuf::MessageLite* response,
                      std::function<void(Status)> on_done);

 private:
  friend std::shared_ptr<Channel> CreateCustomChannel(const std::string&,
                                                      const std::shared_ptr<ChannelCredentials>&,
                                                      const ChannelArguments&);
  friend class internal::ChannelImpl;
  explicit Channel(std::unique_ptr<internal::ChannelImpl> impl);
  std::unique_ptr<internal::ChannelImpl> impl_;
};

// Generated stubs take the channel through this name, as gRPC's take ChannelInterface.
using ChannelInterface = Channel;

std::shared_ptr<Channel> CreateChannel(const std::string& target,
                                       const std::shared_ptr<ChannelCredentials>& creds);
std::shared_ptr<Channel> CreateCustomChannel(const std::string& target,
                                             const std::shared_ptr<ChannelCredentials>& creds,
                                             const ChannelArguments& args);

namespace internal {
// A channel whose transport comes from `factory` (tests: the in-memory fabric). The target is
// resolved as usual; numeric addresses name fabric nodes.
std::shared_ptr<Channel> CreateChannelWithTransport(const std::string& target,
                                                    const ChannelArguments& args,
                                                    const TransportFactory& factory);
}  // namespace internal

}  // namespace homarpc

#endif  // HOMARPC_RUNTIME_CHANNEL_H_
