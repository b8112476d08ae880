// The end-to-end suite's servers: EchoService (protos/echo_test.proto) implemented twice, as a
// sync Service and as a CallbackService, with the same behaviour (EchoRequest says what to
// do), plus the Recorder where both write what they saw for the tests to wait on.
//
// Threads: handlers run on the server's threads (workers or loops); the callback service
// finishes held calls from helper threads it owns and joins in its destructor. Recorder is
// thread-safe. Both services and the recorder must outlive the servers they are registered
// with; call Recorder::StopAll() before shutting a server down, so nothing stays held.
#ifndef HOMARPC_TESTS_RUNTIME_E2E_TEST_SERVICES_H_
#define HOMARPC_TESTS_RUNTIME_E2E_TEST_SERVICES_H_

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/runtime/e2e/protos/echo_test.homarpc.pb.h"
#include "tests/runtime/e2e/protos/echo_test.pb.h"

namespace homarpc::e2e {

// A failure guard for waits on the server's behaviour, never a timing assertion.
inline constexpr absl::Duration kGuard = absl::Seconds(30);

// What servers saw, by EchoRequest::tag: a list of events ("ran", "started", "cancelled",
// "on_cancel", "done", ...), plus how many times each call_id reached a handler.
class Recorder {
 public:
  void Add(const std::string& tag, const std::string& event);
  // Waits (up to `guard`) until `event` was recorded `count` times for `tag` (or, with
  // `or_stopped`, StopAll() was called). Returns whether it was.
  bool WaitFor(const std::string& tag, const std::string& event, int count = 1,
               absl::Duration guard = kGuard, bool or_stopped = false);
  int Count(const std::string& tag, const std::string& event);
  std::vector<std::string> Events(const std::string& tag);

  void CountCall(uint64_t call_id);
  int CallCount(uint64_t call_id);

  // Lets the calls held under `tag` (hold_until_released) answer.
  void Release(const std::string& tag);
  // Ends every hold now and in future (the test is ending).
  void StopAll();

  // Server side: holds the call until `until_released` and Release(tag) was called, or
  // `context` reports IsCancelled(), or StopAll(), or the guard runs out. Returns whether the
  // call was released.
  bool Hold(const std::string& tag, const ServerContextBase& context, bool until_released);

 private:
  absl::Mutex mu_;
  std::map<std::string, std::vector<std::string>> events_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, int> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool> released_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// The behaviour both services share: fills `response` as `request` asks, adds the metadata it
// asks for, and returns the status to finish with. Records "ran" (and the call id) first; for
// wait_for_cancel / hold_until_released it holds the call (see Recorder::Hold), recording
// "started" when it begins to wait and "cancelled" or "not_cancelled" after.
Status Serve(Recorder* recorder, ServerContextBase* context, const EchoRequest& request,
             EchoResponse* response);

class SyncEchoService final : public EchoService::Service {
 public:
  explicit SyncEchoService(Recorder* recorder) : recorder_(recorder) {}
  Status Echo(ServerContext* context, const EchoRequest* request, EchoResponse* response) override;

 private:
  Recorder* const recorder_;
};

class CallbackEchoService final : public EchoService::CallbackService {
 public:
  explicit CallbackEchoService(Recorder* recorder) : recorder_(recorder) {}
  ~CallbackEchoService() override;  // joins the helper threads
  ServerUnaryReactor* Echo(CallbackServerContext* context, const EchoRequest* request,
                           EchoResponse* response) override;

 private:
  Recorder* const recorder_;
  absl::Mutex mu_;
  std::vector<std::thread> helpers_ ABSL_GUARDED_BY(mu_);  // finish held calls
};

}  // namespace homarpc::e2e

#endif  // HOMARPC_TESTS_RUNTIME_E2E_TEST_SERVICES_H_
