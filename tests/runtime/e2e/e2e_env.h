// E2eEnv: where the end-to-end suite runs Servers and Channels, so one set of cases covers
// every wire the runtime runs on (as tests/transport/conformance_env.h does for the transport):
//   fabric  the in-memory network (tests/runtime/fabric_transport.h), real time
//   uring   Homa over UDP on loopback, io_uring backend
//   epoll   Homa over UDP on loopback, epoll backend
// each over IPv4 or IPv6. Also E2eTest, the fixture the suites share: the two EchoService
// implementations, stubs, and calls through the blocking and the callback API.
//
// Threads: an env is created and used by the test thread; servers and channels it makes are
// thread-safe as the runtime's are. The env (for the fabric: the network) must outlive every
// server and channel it made.
#ifndef HOMARPC_TESTS_RUNTIME_E2E_E2E_ENV_H_
#define HOMARPC_TESTS_RUNTIME_E2E_E2E_ENV_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/include/homarpc/homarpc.h"
#include "tests/runtime/e2e/test_services.h"
#include "tests/runtime/fabric_transport.h"

namespace homarpc::e2e {

enum class Wire { kFabric, kUring, kEpoll };

struct EnvParam {
  Wire wire;
  bool ipv6;
};
// "fabric", "uring6", ... (test name suffixes).
std::string EnvName(const ::testing::TestParamInfo<EnvParam>& info);
// The same for gtest's messages (and the test names ctest lists).
void PrintTo(const EnvParam& param, std::ostream* os);

// Channel argument defaults of the suite: a long silence timeout (kArgUnavailableTimeoutMs),
// as a guard, so that a call on a loaded 2-core machine never fails UNAVAILABLE by accident.
// Tests that want UNAVAILABLE set a short one themselves.
ChannelArguments GuardedArgs();

class E2eEnv {
 public:
  // FAILED_PRECONDITION when the wire cannot run here (io_uring disabled, no IPv6 loopback):
  // the test skips.
  static absl::StatusOr<std::unique_ptr<E2eEnv>> Create(const EnvParam& param,
                                                        testing::FabricNetworkOptions fabric = {});
  ~E2eEnv();

  const EnvParam& param() const { return param_; }
  // Null on UDP wires.
  testing::FabricNetwork* network() { return network_.get(); }

  // Adds this env's listening port (loopback or fabric, port 0), I/O backend and guard
  // timeout to `builder`; `configure` may change anything after that.
  void ConfigureServer(ServerBuilder* builder, int* selected_port);
  // The channel a client of `target` gets on this wire. `args` as for CreateCustomChannel
  // (the env adds its I/O backend).
  std::shared_ptr<Channel> NewChannel(const std::string& target, ChannelArguments args);
  // An address on this wire where nothing listens, as a target ("ipv4:...").
  std::string UnusedTarget();
  // A regular expression every peer() string of a client on this wire matches.
  std::string ClientPeerPattern() const;

 private:
  explicit E2eEnv(const EnvParam& param) : param_(param) {}
  const char* BackendName() const;

  EnvParam param_;
  std::unique_ptr<testing::FabricNetwork> network_;
};

enum class ServerKind { kSync, kCallback };
enum class Api { kBlocking, kCallback };
inline constexpr ServerKind kServerKinds[] = {ServerKind::kSync, ServerKind::kCallback};
inline constexpr Api kApis[] = {Api::kBlocking, Api::kCallback};
const char* Name(ServerKind kind);
const char* Name(Api api);

// The fixture: SetUp creates the env (skipping when it cannot run here). Members are
// destroyed in the order that keeps every contract: servers (after the recorder let every
// held call go), then channels, then the env, then the services.
class E2eTest : public ::testing::TestWithParam<EnvParam> {
 public:
  // One call through `api`; waits for a callback call to complete (failing the test if it
  // completes twice or not within the guard).
  static Status Call(Api api, EchoService::Stub* stub, ClientContext* context,
                     const EchoRequest& request, EchoResponse* response);
  // The same through Channel's generic entry points, for hand-made methods and messages.
  static Status CallMethod(Api api, Channel* channel, const char* method, ClientContext* context,
                           const google::protobuf::MessageLite& request,
                           google::protobuf::MessageLite* response);

 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts a server with one EchoService of `kind` (the fixture's instance), configured by
  // the env and then by `configure`. Fails the test (returning null) when it does not start.
  Server* StartServer(ServerKind kind,
                      const std::function<void(ServerBuilder&)>& configure = nullptr);
  // The target naming `server` (its first listening address).
  static std::string TargetOf(Server* server);
  std::shared_ptr<Channel> NewChannel(const std::string& target,
                                      ChannelArguments args = GuardedArgs());
  std::unique_ptr<EchoService::Stub> NewStub(Server* server, ChannelArguments args = GuardedArgs());

  // A tag unique within the test, for the recorder.
  std::string NewTag(const std::string& what);

  Recorder recorder_;
  SyncEchoService sync_service_{&recorder_};
  CallbackEchoService callback_service_{&recorder_};
  std::unique_ptr<E2eEnv> env_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::shared_ptr<Channel>> channels_;
  int next_tag_ = 0;
};

// The INSTANTIATE_TEST_SUITE_P parameter lists.
std::vector<EnvParam> Ipv4Envs();
std::vector<EnvParam> Ipv6Envs();

// "CODE: message", for assertion messages.
std::string Describe(const Status& s);
// `size` bytes that differ between sizes, seeds and positions (xorshift).
std::string Pattern(size_t size, uint64_t seed);

}  // namespace homarpc::e2e

#endif  // HOMARPC_TESTS_RUNTIME_E2E_E2E_ENV_H_
