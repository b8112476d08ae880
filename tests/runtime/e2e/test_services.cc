// The e2e suite's EchoService implementations and Recorder (test_services.h).
//
// DESIGN NOTES
// Held calls wait on the recorder's mutex with a short timeout and re-check IsCancelled()
// between waits: the runtime offers no notification for cancellation on a sync context, and
// polling every millisecond is cheap next to the guard. A callback handler must not block its
// loop thread, so it hands a held call to a helper thread that waits the same way and then
// finishes the reactor; the service joins those threads when it is destroyed (after the
// server, which outlives no service).
#include "tests/runtime/e2e/test_services.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>

namespace homarpc::e2e {

void Recorder::Add(const std::string& tag, const std::string& event) {
  if (tag.empty()) return;
  absl::MutexLock lock(&mu_);
  events_[tag].push_back(event);
}

bool Recorder::WaitFor(const std::string& tag, const std::string& event, int count,
                       absl::Duration guard, bool or_stopped) {
  absl::MutexLock lock(&mu_);
  auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (or_stopped && stopped_) return true;
    auto it = events_.find(tag);
    if (it == events_.end()) return false;
    return std::count(it->second.begin(), it->second.end(), event) >= count;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&seen), guard);
}

int Recorder::Count(const std::string& tag, const std::string& event) {
  absl::MutexLock lock(&mu_);
  auto it = events_.find(tag);
  if (it == events_.end()) return 0;
  return static_cast<int>(std::count(it->second.begin(), it->second.end(), event));
}

std::vector<std::string> Recorder::Events(const std::string& tag) {
  absl::MutexLock lock(&mu_);
  auto it = events_.find(tag);
  return it == events_.end() ? std::vector<std::string>() : it->second;
}

void Recorder::CountCall(uint64_t call_id) {
  absl::MutexLock lock(&mu_);
  ++calls_[call_id];
}

int Recorder::CallCount(uint64_t call_id) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(call_id);
  return it == calls_.end() ? 0 : it->second;
}

void Recorder::Release(const std::string& tag) {
  absl::MutexLock lock(&mu_);
  released_[tag] = true;
}

void Recorder::StopAll() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

bool Recorder::Hold(const std::string& tag, const ServerContextBase& context, bool until_released) {
  const absl::Time guard = absl::Now() + kGuard;
  absl::MutexLock lock(&mu_);
  auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || (until_released && released_[tag]);
  };
  while (!released() && !context.IsCancelled() && absl::Now() < guard) {
    mu_.AwaitWithTimeout(absl::Condition(&released), absl::Milliseconds(1));
  }
  return until_released && released_[tag];
}

Status Serve(Recorder* recorder, ServerContextBase* context, const EchoRequest& request,
             EchoResponse* response) {
  const std::string& tag = request.tag();
  recorder->Add(tag, "ran");
  recorder->CountCall(request.call_id());
  if (request.wait_for_cancel() || request.finish_on_cancel() || request.hold_until_released()) {
    recorder->Add(tag, "started");
    const bool released = recorder->Hold(tag, *context, request.hold_until_released());
    const bool cancelled = context->IsCancelled();
    recorder->Add(tag, cancelled ? "cancelled" : "not_cancelled");
    if (!released) return Status(StatusCode::CANCELLED, "the handler saw the call cancelled");
  }
  if (request.server_try_cancel()) {
    context->TryCancel();
    recorder->Add(tag, context->IsCancelled() ? "cancelled" : "not_cancelled");
  }
  for (const Entry& e : request.initial_metadata()) {
    context->AddInitialMetadata(e.key(), e.value());
  }
  for (const Entry& e : request.trailing_metadata()) {
    context->AddTrailingMetadata(e.key(), e.value());
  }
  if (request.echo_metadata()) {
    for (const auto& [key, value] : context->client_metadata()) {
      Entry* e = response->add_client_metadata();
      e->set_key(std::string(key));
      e->set_value(std::string(value));
    }
  }
  if (request.empty_response()) {
    response->Clear();
    return Status::OK;
  }
  if (request.response_bytes() > 0) {
    response->set_payload(std::string(request.response_bytes(), 'r'));
  } else {
    response->set_payload(request.payload());
  }
  response->set_call_id(request.call_id());
  response->set_peer(context->peer());
  response->set_method(context->method());
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    response->set_has_deadline(true);
    response->set_deadline_remaining_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::system_clock::now())
                                            .count());
  }
  return Status(static_cast<StatusCode>(request.status_code()), request.status_message(),
                request.status_details());
}

Status SyncEchoService::Echo(ServerContext* context, const EchoRequest* request,
                             EchoResponse* response) {
  if (request->throw_exception()) {
    recorder_->Add(request->tag(), "ran");
    throw std::runtime_error("the handler threw, as asked");
  }
  return Serve(recorder_, context, *request, response);
}

namespace {

// Records OnCancel and OnDone under the call's tag, then deletes itself (gRPC's pattern for
// reactors: the runtime calls OnDone last).
class RecordingReactor final : public ServerUnaryReactor {
 public:
  RecordingReactor(Recorder* recorder, std::string tag)
      : recorder_(recorder), tag_(std::move(tag)) {}
  void OnCancel() override { recorder_->Add(tag_, "on_cancel"); }
  void OnDone() override {
    recorder_->Add(tag_, "done");
    delete this;
  }

 private:
  Recorder* const recorder_;
  const std::string tag_;
};

// Finished only from OnCancel(), or by the service's watchdog when OnCancel never comes (so a
// broken runtime fails the test instead of hanging its server's shutdown). Whoever sets
// `finished` first calls Finish(), outside the lock (OnDone may run inside Finish); OnDone
// comes only after Finish, so the reactor is alive until then.
class FinishOnCancelReactor final : public ServerUnaryReactor {
 public:
  struct State {
    absl::Mutex mu;
    bool finished ABSL_GUARDED_BY(mu) = false;
    bool TryClaim() {
      absl::MutexLock lock(&mu);
      if (finished) return false;
      finished = true;
      return true;
    }
  };

  FinishOnCancelReactor(Recorder* recorder, std::string tag, const ServerContextBase* context)
      : recorder_(recorder), tag_(std::move(tag)), context_(context) {}
  void OnCancel() override {
    recorder_->Add(tag_, "on_cancel");
    recorder_->Add(tag_, context_->IsCancelled() ? "cancelled" : "not_cancelled");
    if (state_->TryClaim()) Finish(Status(StatusCode::CANCELLED, "finished from OnCancel"));
  }
  void OnDone() override {
    recorder_->Add(tag_, "done");
    delete this;
  }
  std::shared_ptr<State> state() const { return state_; }

 private:
  Recorder* const recorder_;
  const std::string tag_;
  const ServerContextBase* const context_;
  const std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace

CallbackEchoService::~CallbackEchoService() {
  std::vector<std::thread> helpers;
  {
    absl::MutexLock lock(&mu_);
    helpers.swap(helpers_);
  }
  for (std::thread& t : helpers) t.join();
}

ServerUnaryReactor* CallbackEchoService::Echo(CallbackServerContext* context,
                                              const EchoRequest* request, EchoResponse* response) {
  if (request->throw_exception()) {
    recorder_->Add(request->tag(), "ran");
    throw std::runtime_error("the handler threw, as asked");
  }
  if (request->finish_on_cancel()) {
    recorder_->Add(request->tag(), "ran");
    recorder_->CountCall(request->call_id());
    recorder_->Add(request->tag(), "started");
    auto* reactor = new FinishOnCancelReactor(recorder_, request->tag(), context);
    absl::MutexLock lock(&mu_);
    helpers_.emplace_back([this, reactor, state = reactor->state(), tag = request->tag()] {
      recorder_->WaitFor(tag, "on_cancel", 1, kGuard, /*or_stopped=*/true);
      if (state->TryClaim()) reactor->Finish(Status(StatusCode::ABORTED, "OnCancel never ran"));
    });
    return reactor;
  }
  auto* reactor = new RecordingReactor(recorder_, request->tag());
  if (request->wait_for_cancel() || request->hold_until_released()) {
    // Holding would block the loop thread: a helper thread waits and finishes the call.
    absl::MutexLock lock(&mu_);
    helpers_.emplace_back([this, context, request, response, reactor] {
      reactor->Finish(Serve(recorder_, context, *request, response));
    });
    return reactor;
  }
  reactor->Finish(Serve(recorder_, context, *request, response));
  return reactor;
}

}  // namespace homarpc::e2e
