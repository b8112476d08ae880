// E2eEnv and E2eTest (e2e_env.h).
//
// Callback calls are waited for on a Completion shared with the on_done closure: on_done runs
// on a channel thread, possibly after the waiting test thread gave up, and a second on_done
// (a runtime bug) must still find live state to report itself on.
#include "tests/runtime/e2e/e2e_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transport/address.h"
#include "transport/endpoint.h"
#include "transport/io_backend.h"

namespace homarpc::e2e {

namespace {
std::string ParamName(const EnvParam& param) {
  const char* wire = param.wire == Wire::kFabric  ? "fabric"
                     : param.wire == Wire::kUring ? "uring"
                                                  : "epoll";
  return absl::StrCat(wire, param.ipv6 ? "6" : "");
}
}  // namespace

std::string EnvName(const ::testing::TestParamInfo<EnvParam>& info) {
  return ParamName(info.param);
}
void PrintTo(const EnvParam& param, std::ostream* os) { *os << ParamName(param); }

std::vector<EnvParam> Ipv4Envs() {
  return {{Wire::kFabric, false}, {Wire::kUring, false}, {Wire::kEpoll, false}};
}
std::vector<EnvParam> Ipv6Envs() {
  return {{Wire::kFabric, true}, {Wire::kUring, true}, {Wire::kEpoll, true}};
}

std::string Describe(const Status& s) {
  return absl::StrCat(StatusCodeName(s.error_code()), ": ", s.error_message());
}

std::string Pattern(size_t size, uint64_t seed) {
  std::string s(size, '\0');
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s[i] = static_cast<char>(x);
  }
  return s;
}

const char* Name(ServerKind kind) {
  return kind == ServerKind::kSync ? "sync server" : "callback server";
}
const char* Name(Api api) { return api == Api::kBlocking ? "blocking stub" : "callback stub"; }

ChannelArguments GuardedArgs() {
  ChannelArguments args;
  args.SetInt(kArgUnavailableTimeoutMs, 10000);
  return args;
}

absl::StatusOr<std::unique_ptr<E2eEnv>> E2eEnv::Create(const EnvParam& param,
                                                       testing::FabricNetworkOptions fabric) {
  std::unique_ptr<E2eEnv> env(new E2eEnv(param));
  if (param.wire == Wire::kFabric) {
    env->network_ = std::make_unique<testing::FabricNetwork>(std::move(fabric));
    return env;
  }
  // Probe the wire with a bare endpoint: the runtime would only log why a server failed.
  transport::EndpointOptions probe;
  probe.io.kind =
      param.wire == Wire::kUring ? transport::IoKind::kUring : transport::IoKind::kEpoll;
  probe.io.bind_address =
      param.ipv6 ? transport::Address::Loopback6(0) : transport::Address::Loopback4(0);
  absl::StatusOr<std::unique_ptr<transport::Endpoint>> endpoint =
      transport::Endpoint::Create(probe);
  if (!endpoint.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(env->BackendName(), param.ipv6 ? " over IPv6" : "",
                     " is not available here: ", endpoint.status().ToString()));
  }
  if ((*endpoint)->io_kind() != probe.io.kind) {
    return absl::FailedPreconditionError(absl::StrCat(
        "asked for ", env->BackendName(), ", got ", transport::IoKindName((*endpoint)->io_kind())));
  }
  return env;
}

E2eEnv::~E2eEnv() = default;

const char* E2eEnv::BackendName() const {
  return param_.wire == Wire::kUring ? "uring" : param_.wire == Wire::kEpoll ? "epoll" : "fabric";
}

void E2eEnv::ConfigureServer(ServerBuilder* builder, int* selected_port) {
  if (network_ != nullptr) {
    builder->SetTransportFactoryForTesting(network_->factory());
    builder->AddListeningPort(param_.ipv6 ? "[::]:0" : "0.0.0.0:0", InsecureServerCredentials(),
                              selected_port);
  } else {
    builder->AddListeningPort(param_.ipv6 ? "[::1]:0" : "127.0.0.1:0", InsecureServerCredentials(),
                              selected_port);
    builder->AddChannelArgument(kArgIoBackend, BackendName());
  }
  builder->AddChannelArgument(kArgUnavailableTimeoutMs, 10000);
}

std::shared_ptr<Channel> E2eEnv::NewChannel(const std::string& target, ChannelArguments args) {
  if (network_ != nullptr) {
    return internal::CreateChannelWithTransport(target, args, network_->factory());
  }
  args.SetString(kArgIoBackend, BackendName());
  return CreateCustomChannel(target, InsecureChannelCredentials(), args);
}

std::string E2eEnv::UnusedTarget() {
  if (network_ != nullptr) {
    return param_.ipv6 ? "ipv6:[fd00::ffff:1]:1" : "ipv4:10.255.0.1:1";
  }
  // A port the kernel just handed out and took back: nothing listens there.
  const int fd = socket(param_.ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
  transport::Address any =
      param_.ipv6 ? transport::Address::Loopback6(0) : transport::Address::Loopback4(0);
  uint16_t port = 9;  // discard, if anything below fails
  if (fd >= 0 && bind(fd, any.sockaddr_ptr(), any.sockaddr_len()) == 0) {
    sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
      port = transport::Address::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len).port();
    }
  }
  if (fd >= 0) close(fd);
  return param_.ipv6 ? absl::StrCat("ipv6:[::1]:", port) : absl::StrCat("ipv4:127.0.0.1:", port);
}

std::string E2eEnv::ClientPeerPattern() const {
  if (network_ != nullptr) {
    return param_.ipv6 ? R"(ipv6:\[fd00::[0-9a-f:]+\]:[0-9]+)"
                       : R"(ipv4:10\.0\.[0-9]+\.[0-9]+:[0-9]+)";
  }
  return param_.ipv6 ? R"(ipv6:\[::1\]:[0-9]+)" : R"(ipv4:127\.0\.0\.1:[0-9]+)";
}

// ---------------------------------------------------------------------------------------------
// E2eTest

void E2eTest::SetUp() {
  absl::StatusOr<std::unique_ptr<E2eEnv>> env = E2eEnv::Create(GetParam());
  if (absl::IsFailedPrecondition(env.status())) GTEST_SKIP() << env.status();
  ASSERT_TRUE(env.ok()) << env.status();
  env_ = std::move(*env);
}

void E2eTest::TearDown() {
  recorder_.StopAll();  // nothing stays held: servers can drain
  // Servers before channels: a client acknowledges its last responses on its next tick, and
  // a server that is draining waits for those acknowledgements (up to a second when the
  // client has gone).
  servers_.clear();
  channels_.clear();
  env_.reset();
}

Server* E2eTest::StartServer(ServerKind kind,
                             const std::function<void(ServerBuilder&)>& configure) {
  ServerBuilder builder;
  int port = 0;
  env_->ConfigureServer(&builder, &port);
  if (kind == ServerKind::kSync) {
    builder.RegisterService(&sync_service_);
    // Tests hold a few sync calls at once; the default pool on 2 cores has 2 workers.
    builder.SetExecutor(ServerExecutor::kWorkerPool, 8);
  } else {
    builder.RegisterService(&callback_service_);
  }
  if (configure) configure(builder);
  std::unique_ptr<Server> server = builder.BuildAndStart();
  EXPECT_NE(server, nullptr) << "the server did not start";
  if (server == nullptr) return nullptr;
  EXPECT_NE(port, 0);
  EXPECT_EQ(server->listening_addresses().size(), 1u);
  servers_.push_back(std::move(server));
  return servers_.back().get();
}

std::string E2eTest::TargetOf(Server* server) { return server->listening_addresses().at(0); }

std::shared_ptr<Channel> E2eTest::NewChannel(const std::string& target, ChannelArguments args) {
  channels_.push_back(env_->NewChannel(target, std::move(args)));
  return channels_.back();
}

std::unique_ptr<EchoService::Stub> E2eTest::NewStub(Server* server, ChannelArguments args) {
  return EchoService::NewStub(NewChannel(TargetOf(server), std::move(args)));
}

namespace {

// Waits for a callback call's on_done; fails the test if it never runs or runs twice.
class Completion {
 public:
  std::function<void(Status)> Callback() {
    return [this](Status s) {
      absl::MutexLock lock(&mu_);
      if (++calls_ > 1) {
        ADD_FAILURE() << "on_done ran twice; second status " << s.error_code() << " "
                      << s.error_message();
        return;
      }
      status_ = std::move(s);
    };
  }
  Status Wait() {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_ > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), kGuard)) {
      ADD_FAILURE() << "a callback call did not complete within the guard";
      // The call still points at the caller's objects; nothing safe is left to do.
      std::abort();
    }
    return status_;
  }

 private:
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

Status E2eTest::Call(Api api, EchoService::Stub* stub, ClientContext* context,
                     const EchoRequest& request, EchoResponse* response) {
  if (api == Api::kBlocking) return stub->Echo(context, request, response);
  // Shared with the callback, so that a second, late on_done would still find it alive.
  auto completion = std::make_shared<Completion>();
  std::function<void(Status)> done = completion->Callback();
  stub->async()->Echo(context, &request, response,
                      [completion, done](Status s) { done(std::move(s)); });
  return completion->Wait();
}

Status E2eTest::CallMethod(Api api, Channel* channel, const char* method, ClientContext* context,
                           const google::protobuf::MessageLite& request,
                           google::protobuf::MessageLite* response) {
  const internal::RpcMethod rpc_method{method, internal::RpcType::NORMAL_RPC};
  if (api == Api::kBlocking) {
    return channel->BlockingUnaryCall(rpc_method, context, request, response);
  }
  auto completion = std::make_shared<Completion>();
  std::function<void(Status)> done = completion->Callback();
  channel->AsyncUnaryCall(rpc_method, context, &request, response,
                          [completion, done](Status s) { done(std::move(s)); });
  return completion->Wait();
}

std::string E2eTest::NewTag(const std::string& what) {
  return absl::StrCat(what, "#", next_tag_++);
}

}  // namespace homarpc::e2e
