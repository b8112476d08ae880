// io_backend_fixture: what the IoBackend test suites share (io_backend_test.cc,
// io_gather_test.cc): a fixture parameterised by backend kind and address family that skips
// what this machine cannot run (IPv6 loopback, io_uring) and builds backends on loopback, the
// environment override held off while it runs, and the test packets' parameter names.
// Test support, header-only; one test thread.
#ifndef HOMARPC_TESTS_TRANSPORT_IO_BACKEND_FIXTURE_H_
#define HOMARPC_TESTS_TRANSPORT_IO_BACKEND_FIXTURE_H_

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "transport/address.h"
#include "transport/io_backend.h"

namespace homarpc::transport::io_test {

inline bool Ipv6LoopbackWorks() {
  int fd = socket(AF_INET6, SOCK_DGRAM, 0);
  if (fd < 0) return false;
  Address a = Address::Loopback6(0);
  const bool ok = bind(fd, a.sockaddr_ptr(), a.sockaddr_len()) == 0;
  close(fd);
  return ok;
}

// Sets (or, with nullptr, clears) HOMARPC_IO_BACKEND for one scope and restores the previous
// value.
class ScopedBackendEnv {
 public:
  explicit ScopedBackendEnv(const char* value) {
    if (const char* old = std::getenv(kName); old != nullptr) old_ = old;
    had_old_ = std::getenv(kName) != nullptr;
    if (value == nullptr) {
      unsetenv(kName);
    } else {
      setenv(kName, value, 1);
    }
  }
  ~ScopedBackendEnv() {
    if (had_old_) {
      setenv(kName, old_.c_str(), 1);
    } else {
      unsetenv(kName);
    }
  }
  ScopedBackendEnv(const ScopedBackendEnv&) = delete;
  ScopedBackendEnv& operator=(const ScopedBackendEnv&) = delete;

 private:
  static constexpr const char* kName = "HOMARPC_IO_BACKEND";
  bool had_old_ = false;
  std::string old_;
};

inline bool UringAvailable() {
  ScopedBackendEnv env(nullptr);
  IoOptions options;
  options.kind = IoKind::kUring;
  return CreateIoBackend(options).ok();
}

struct IoParam {
  IoKind kind;
  int family;
};

inline std::string IoParamName(const ::testing::TestParamInfo<IoParam>& info) {
  return absl::StrCat(IoKindName(info.param.kind), info.param.family == AF_INET6 ? "IPv6" : "IPv4");
}

// Both backends, both families (INSTANTIATE_TEST_SUITE_P(..., kAllIoParams, IoParamName)).
inline const auto kAllIoParams =
    ::testing::Values(IoParam{IoKind::kUring, AF_INET}, IoParam{IoKind::kUring, AF_INET6},
                      IoParam{IoKind::kEpoll, AF_INET}, IoParam{IoKind::kEpoll, AF_INET6});

class IoBackendFixture : public ::testing::TestWithParam<IoParam> {
 protected:
  void SetUp() override {
    if (GetParam().family == AF_INET6 && !Ipv6LoopbackWorks()) {
      GTEST_SKIP() << "::1 cannot be bound here (IPv6 disabled in this kernel or namespace)";
    }
    if (GetParam().kind == IoKind::kUring && !UringAvailable()) {
      GTEST_SKIP() << "io_uring cannot be set up here (kernel < 6.0, or disabled by sysctl "
                      "or seccomp)";
    }
  }

  Address Loopback(uint16_t port = 0) const {
    return GetParam().family == AF_INET6 ? Address::Loopback6(port) : Address::Loopback4(port);
  }

  IoOptions Options() const {
    IoOptions options;
    options.kind = GetParam().kind;
    options.bind_address = Loopback();
    return options;
  }

  std::unique_ptr<IoBackend> Make(const IoOptions& options) {
    absl::StatusOr<std::unique_ptr<IoBackend>> backend = CreateIoBackend(options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    EXPECT_EQ((*backend)->kind(), GetParam().kind);
    return *std::move(backend);
  }
  std::unique_ptr<IoBackend> Make() { return Make(Options()); }

  // The environment must not pick the backend for the parameterised tests.
  ScopedBackendEnv env_{nullptr};
};

}  // namespace homarpc::transport::io_test

#endif  // HOMARPC_TESTS_TRANSPORT_IO_BACKEND_FIXTURE_H_
