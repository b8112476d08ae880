// Tests for runtime/message_pool.cc: what is kept, what comes back (cleared, with its storage),
// and the bounds.
#include "runtime/message_pool.h"

#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/wrappers.pb.h"
#include "gtest/gtest.h"

namespace homarpc::internal {
namespace {

using google::protobuf::BytesValue;

std::unique_ptr<BytesValue> Filled(size_t bytes, char c = 'x') {
  auto message = std::make_unique<BytesValue>();
  message->set_value(std::string(bytes, c));
  return message;
}

TEST(MessagePool, MessagePool_GivesBackAKeptMessageClearedWithItsStorage) {
  MessagePool pool;
  EXPECT_EQ(pool.Take().message, nullptr);
  std::unique_ptr<BytesValue> message = Filled(1 << 20);
  const char* storage = message->value().data();
  pool.Put(std::move(message), 1 << 20);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool.bytes(), size_t{1} << 20);

  MessagePool::Kept back = pool.Take();
  ASSERT_NE(back.message, nullptr);
  EXPECT_EQ(back.bytes, size_t{1} << 20);
  auto* value = static_cast<BytesValue*>(back.message.get());
  EXPECT_TRUE(value->value().empty());  // cleared: serializes as a default message
  EXPECT_EQ(value->ByteSizeLong(), 0u);
  EXPECT_GE(value->value().capacity(), size_t{1} << 20);
  // The next payload of that size copied into the field's string (mutable_value()->assign, or
  // a parse) lands in the same storage: no allocation. (set_value(data, size) lands there too,
  // but through a temporary std::string in protobuf 3.21; moving a std::string in replaces the
  // storage.)
  const std::string next(1 << 20, 'y');
  value->mutable_value()->assign(next.data(), next.size());
  EXPECT_EQ(value->value().data(), storage);
  EXPECT_EQ(value->value(), next);
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(pool.bytes(), 0u);
  EXPECT_EQ(pool.Take().message, nullptr);
  EXPECT_EQ(pool.taken(), 1u);
}

TEST(MessagePool, MessagePool_KeepsNeitherSmallNorOversizedMessages) {
  MessagePool pool;
  pool.Put(Filled(100), 100);
  pool.Put(Filled(1000), MessagePool::kMinBytes - 1);
  pool.Put(Filled(1000), MessagePool::kMaxBytes + 1);
  pool.Put(nullptr, MessagePool::kMinBytes);
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(pool.Take().message, nullptr);
  pool.Put(Filled(10), MessagePool::kMinBytes);  // by the size the caller says it had
  EXPECT_EQ(pool.size(), 1u);
}

TEST(MessagePool, MessagePool_HoldsAtMostMaxMessagesAndMaxBytes) {
  MessagePool pool;
  for (size_t i = 0; i < MessagePool::kMaxMessages + 2; ++i) {
    pool.Put(Filled(16), MessagePool::kMinBytes);
  }
  EXPECT_EQ(pool.size(), MessagePool::kMaxMessages);
  EXPECT_EQ(pool.bytes(), MessagePool::kMaxMessages * MessagePool::kMinBytes);
  while (pool.Take().message != nullptr) {
  }
  // By bytes: a message that would take the total past kMaxBytes is not kept.
  pool.Put(Filled(16), MessagePool::kMaxBytes - MessagePool::kMinBytes);
  pool.Put(Filled(16), MessagePool::kMinBytes);
  pool.Put(Filled(16), MessagePool::kMinBytes);
  EXPECT_EQ(pool.size(), 2u);
  EXPECT_EQ(pool.bytes(), MessagePool::kMaxBytes);
  // Taking one makes room again.
  ASSERT_NE(pool.Take().message, nullptr);
  pool.Put(Filled(16), MessagePool::kMinBytes);
  EXPECT_EQ(pool.size(), 2u);
}

TEST(MessagePool, MessagePool_AllPoolsTogetherHoldAtMostMaxTotalBytes) {
  ASSERT_EQ(PooledBytes(), 0u);  // every pool of this test binary is empty between tests
  // One pool more than the process-wide bound has room for, each offered kMaxBytes.
  constexpr size_t kFit = MessagePool::kMaxTotalBytes / MessagePool::kMaxBytes;
  std::vector<std::unique_ptr<MessagePool>> pools;
  for (size_t i = 0; i <= kFit; ++i) {
    pools.push_back(std::make_unique<MessagePool>());
    pools.back()->Put(Filled(16), MessagePool::kMaxBytes);
    EXPECT_EQ(pools.back()->size(), i < kFit ? 1u : 0u) << "pool " << i;
  }
  EXPECT_EQ(PooledBytes(), MessagePool::kMaxTotalBytes);
  // A pool that goes gives its share back, and the last one now has room.
  pools.front().reset();
  EXPECT_EQ(PooledBytes(), MessagePool::kMaxTotalBytes - MessagePool::kMaxBytes);
  pools.back()->Put(Filled(16), MessagePool::kMaxBytes);
  EXPECT_EQ(pools.back()->size(), 1u);
  pools.clear();
  EXPECT_EQ(PooledBytes(), 0u);
}

}  // namespace
}  // namespace homarpc::internal
