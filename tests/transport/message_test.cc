// InMessage reassembly: out of order, duplicates, overlaps, and the bound on the gap list.
#include "transport/message.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace homarpc::transport {
namespace {

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + 7);
  return v;
}

TEST(Message, Message_OutOfOrderDuplicatesAndOverlapsReassembleExactly) {
  const std::vector<uint8_t> src = Pattern(10000);
  InMessage m;
  m.Start(10000, 0);
  auto feed = [&](uint32_t off, uint32_t len) {
    return m.Receive(off, absl::MakeConstSpan(src.data() + off, len));
  };
  EXPECT_EQ(feed(5000, 1000), 1000u);  // leaves gap [0, 5000)
  EXPECT_EQ(m.gaps().size(), 1u);
  EXPECT_EQ(feed(1000, 1000), 1000u);  // splits it into [0,1000) and [2000,5000)
  EXPECT_EQ(m.gaps().size(), 2u);
  EXPECT_EQ(feed(1000, 1000), 0u) << "a duplicate adds nothing";
  EXPECT_EQ(feed(1500, 1000), 500u) << "an overlap adds only its new part";
  EXPECT_EQ(feed(0, 1000), 1000u);
  EXPECT_EQ(feed(2500, 4000), 3000u);  // fills [2500,5000) and [6000,6500)
  EXPECT_EQ(feed(6500, 3500), 3500u);
  ASSERT_TRUE(m.complete());
  EXPECT_TRUE(m.gaps().empty());
  Buffer out = m.Release();
  ASSERT_EQ(out.size(), src.size());
  EXPECT_EQ(0, std::memcmp(out.data(), src.data(), src.size()));
}

TEST(Message, Message_GapListIsBounded) {
  // A hostile sender sends one byte at every other offset: each would open a new gap.
  const uint32_t length = 4 * InMessage::kMaxGaps + 100;
  const std::vector<uint8_t> src = Pattern(length);
  InMessage m;
  m.Start(length, 0);
  uint32_t accepted = 0;
  for (uint32_t off = 1; off < length; off += 2) {
    accepted += m.Receive(off, absl::MakeConstSpan(src.data() + off, 1));
  }
  EXPECT_EQ(m.gaps().size(), InMessage::kMaxGaps);
  EXPECT_EQ(accepted, InMessage::kMaxGaps);
  // Packets that cannot add a gap are still taken: the start of a gap, and at recv_end.
  const uint32_t first_gap = m.gaps().front().start;
  EXPECT_EQ(m.Receive(first_gap, absl::MakeConstSpan(src.data() + first_gap, 1)), 1u);
  EXPECT_EQ(m.gaps().size(), InMessage::kMaxGaps - 1);
  const uint32_t end = m.recv_end();
  EXPECT_EQ(m.Receive(end, absl::MakeConstSpan(src.data() + end, 10)), 10u);
}

}  // namespace
}  // namespace homarpc::transport
