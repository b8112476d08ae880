// End-to-end tests of response recycling (runtime/message_pool.h) on every wire (e2e_env.h),
// against a sync Service and a CallbackService: a method's large responses give their
// storage to its next calls, and nothing of an earlier call shows in a later one, neither
// bytes past a shorter payload nor a field only the earlier call set.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/message_pool.h"
#include "tests/runtime/e2e/e2e_env.h"

namespace homarpc::e2e {
namespace {

using internal::MessagePool;

// The pool of `service`'s Echo responses.
std::shared_ptr<MessagePool> ResponsePool(const Service& service) {
  for (const internal::ServiceMethod& method : service.methods()) {
    if (method.name == "/homarpc.e2e.EchoService/Echo") return method.handler->response_pool();
  }
  return nullptr;
}

// Waits (within the guard) until `pool` holds a message: a large response goes there when the
// transport lets go of it, once the client has acknowledged it, which may be well after the
// client has it.
bool WaitForKept(const MessagePool& pool) {
  const absl::Time deadline = absl::Now() + kGuard;
  while (pool.size() == 0) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

class MessagePoolE2e : public E2eTest {};

INSTANTIATE_TEST_SUITE_P(Wires, MessagePoolE2e, ::testing::ValuesIn(Ipv4Envs()), EnvName);

TEST_P(MessagePoolE2e, LargeMessagesAreRecycledAndCarryNothingOver) {
  // Large and small in turn (a small call frees the storage it was given), each size echoed.
  const size_t sizes[] = {1 << 20, 200000, (1 << 20) + 5, MessagePool::kMinBytes + 100, 100,
                          300000,  2 << 20};
  for (ServerKind kind : kServerKinds) {
    for (Api api : {Api::kBlocking, Api::kCallback}) {
      Server* server = StartServer(kind);
      ASSERT_NE(server, nullptr);
      const std::shared_ptr<MessagePool> pool =
          ResponsePool(kind == ServerKind::kSync ? static_cast<const Service&>(sync_service_)
                                                : callback_service_);
      ASSERT_NE(pool, nullptr);
      auto stub = NewStub(server);
      uint64_t id = 0;
      bool previous_was_large = false;
      for (size_t size : sizes) {
        ++id;
        SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api), ", call ", id, " of ", size,
                                  " bytes"));
        ClientContext context;
        context.AddMetadata("odd-call", "yes");
        EchoRequest request;
        request.set_call_id(id);
        request.set_payload(Pattern(size, id));
        // Only odd calls ask for their metadata back: an even call must not see any.
        request.set_echo_metadata(id % 2 == 1);
        EchoResponse response;
        const uint64_t taken_before = pool->taken();
        Status s = Call(api, stub.get(), &context, request, &response);
        ASSERT_TRUE(s.ok()) << Describe(s);
        EXPECT_TRUE(response.payload() == request.payload())
            << "payload of " << response.payload().size() << " bytes, want " << size;
        EXPECT_EQ(response.call_id(), id);
        EXPECT_EQ(response.client_metadata_size() > 0, id % 2 == 1);
        EXPECT_EQ(response.method(), "/homarpc.e2e.EchoService/Echo");
        // The previous large response was pooled: this call's response got its storage (and
        // the checks above saw nothing of it).
        if (previous_was_large) {
          EXPECT_EQ(pool->taken(), taken_before + 1);
        }
        previous_was_large = size >= MessagePool::kMinBytes;
        if (previous_was_large) {
          ASSERT_TRUE(WaitForKept(*pool));
        }
      }
    }
  }
}

}  // namespace
}  // namespace homarpc::e2e
