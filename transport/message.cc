#include "transport/message.h"

#include <algorithm>
#include <cstring>

namespace homarpc::transport {

void InMessage::Start(uint32_t length, uint32_t initial_granted) {
  buffer_ = Buffer(length);
  length_ = length;
  received_ = 0;
  recv_end_ = 0;
  granted_ = std::min(initial_granted, length);
  started_ = true;
  gaps_.clear();
}

uint32_t InMessage::Receive(uint32_t offset, absl::Span<const uint8_t> data) {
  const uint32_t start = offset;
  const uint32_t end = offset + static_cast<uint32_t>(data.size());
  if (gaps_.size() >= kMaxGaps) {
    // Only packets that cannot add a gap: ones that start at a gap's start or at recv_end_.
    const bool at_gap_start =
        start == recv_end_ ||
        std::any_of(gaps_.begin(), gaps_.end(), [start](const ByteRange& g) { return g.start == start; });
    if (!at_gap_start) return 0;
  }
  uint32_t fresh = 0;
  auto copy = [&](uint32_t from, uint32_t to) {
    if (to <= from) return;
    std::memcpy(buffer_.data() + from, data.data() + (from - start), to - from);
    fresh += to - from;
  };
  // Part below recv_end_: only bytes inside gaps are new. Walk the gaps, splitting them.
  if (start < recv_end_) {
    const uint32_t limit = std::min(end, recv_end_);
    for (size_t i = 0; i < gaps_.size();) {
      ByteRange gap = gaps_[i];
      uint32_t lo = std::max(gap.start, start);
      uint32_t hi = std::min(gap.end, limit);
      if (lo >= hi) {
        ++i;
        continue;
      }
      copy(lo, hi);
      // Replace the gap by what remains of it on either side.
      ByteRange left{gap.start, lo};
      ByteRange right{hi, gap.end};
      if (left.size() > 0 && right.size() > 0) {
        gaps_[i] = left;
        gaps_.insert(gaps_.begin() + static_cast<ptrdiff_t>(i) + 1, right);
        i += 2;
      } else if (left.size() > 0) {
        gaps_[i] = left;
        ++i;
      } else if (right.size() > 0) {
        gaps_[i] = right;
        ++i;
      } else {
        gaps_.erase(gaps_.begin() + static_cast<ptrdiff_t>(i));
      }
    }
  }
  // Part at or beyond recv_end_: all new; a jump leaves a gap.
  if (end > recv_end_) {
    uint32_t from = std::max(start, recv_end_);
    if (from > recv_end_) gaps_.push_back({recv_end_, from});
    copy(from, end);
    recv_end_ = end;
  }
  received_ += fresh;
  return fresh;
}

Buffer InMessage::Release() {
  Buffer out = std::move(buffer_);
  Reset();
  return out;
}

void InMessage::Reset() {
  buffer_ = Buffer();
  length_ = received_ = recv_end_ = granted_ = 0;
  started_ = false;
  gaps_.clear();
}

}  // namespace homarpc::transport
