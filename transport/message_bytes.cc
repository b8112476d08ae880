// MessageBytes (message_bytes.h). No threads of its own.
#include "transport/message_bytes.h"

#include <algorithm>
#include <cstring>

namespace homarpc::transport {

MessageBytes& MessageBytes::operator=(MessageBytes&& other) noexcept {
  if (this != &other) {
    Release();
    head_ = std::move(other.head_);
    extra_ = std::move(other.extra_);
  }
  return *this;
}

MessageBytes::~MessageBytes() { Release(); }

void MessageBytes::Release() {
  if (extra_ == nullptr || !extra_->on_release) return;
  absl::AnyInvocable<void()> fn = std::move(extra_->on_release);
  extra_->on_release = nullptr;
  fn();
}

MessageBytes::Extra& MessageBytes::MakeExtra() {
  if (extra_ == nullptr) {
    extra_ = std::make_unique<Extra>();
    if (!head_.empty()) {
      extra_->segments.push_back(Segment{head_.data(), head_.size(), 0});
      extra_->size = head_.size();
    }
  }
  return *extra_;
}

void MessageBytes::AddSegment(const uint8_t* data, size_t size) {
  Extra& extra = MakeExtra();
  extra.segments.push_back(Segment{data, size, extra.size});
  extra.size += size;
}

void MessageBytes::Append(Buffer buffer) {
  if (buffer.empty()) return;
  if (extra_ == nullptr && head_.empty()) {
    head_ = std::move(buffer);
    return;
  }
  Extra& extra = MakeExtra();
  const uint8_t* data = buffer.data();  // stays put when the Buffer moves
  const size_t size = buffer.size();
  extra.owned.push_back(std::move(buffer));
  AddSegment(data, size);
}

void MessageBytes::AppendBorrowed(absl::Span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  AddSegment(bytes.data(), bytes.size());
  extra_->borrowed += bytes.size();
}

void MessageBytes::OnRelease(absl::AnyInvocable<void()> fn) {
  MakeExtra().on_release = std::move(fn);
}

size_t MessageBytes::segment_count() const {
  if (extra_ == nullptr) return head_.empty() ? 0 : 1;
  return extra_->segments.size();
}

size_t MessageBytes::Gather(size_t offset, size_t max_len, absl::Span<const uint8_t>* first,
                            absl::Span<const uint8_t>* second) const {
  *first = {};
  *second = {};
  if (offset >= size() || max_len == 0) return 0;
  if (extra_ == nullptr) {
    const size_t len = std::min(max_len, head_.size() - offset);
    *first = absl::Span<const uint8_t>(head_.data() + offset, len);
    return len;
  }
  const auto& segments = extra_->segments;
  // The last segment starting at or before `offset` (segments are never empty, so it holds it).
  auto it = std::upper_bound(segments.begin(), segments.end(), offset,
                             [](size_t off, const Segment& s) { return off < s.start; });
  --it;
  const size_t skip = offset - it->start;
  const size_t len = std::min(max_len, it->size - skip);
  *first = absl::Span<const uint8_t>(it->data + skip, len);
  if (len == max_len || ++it == segments.end()) return len;
  const size_t more = std::min(max_len - len, it->size);
  *second = absl::Span<const uint8_t>(it->data, more);
  return len + more;
}

Buffer MessageBytes::Flatten() const {
  Buffer out(size());
  size_t at = 0;
  absl::Span<const uint8_t> a, b;
  while (at < out.size()) {
    const size_t n = Gather(at, out.size() - at, &a, &b);
    std::memcpy(out.data() + at, a.data(), a.size());
    if (!b.empty()) std::memcpy(out.data() + at + a.size(), b.data(), b.size());
    at += n;
  }
  return out;
}

}  // namespace homarpc::transport
