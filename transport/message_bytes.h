// MessageBytes: the bytes of one outgoing message, possibly gathered from several places.
//
// The usual message is one owned Buffer (MessageBytes converts from it implicitly, and then
// costs nothing more than the Buffer). A large one may also borrow memory it does not own --
// the serialized form of a protobuf whose big `bytes` fields stay where the application put
// them, so the payload is never copied in user space on its way out (the kernel's copy into
// the socket is the only one). Borrowed bytes must stay valid and unchanged until the
// MessageBytes is destroyed; whoever borrows arranges that with OnRelease(), which runs exactly
// once, when the transport no longer needs the bytes (the RPC has ended and no packet still
// points into them), on the thread that destroys the object: a transport loop thread, or the
// calling thread when the message is refused before it is sent.
//
// The engine reads a message packet by packet through Gather(): the bytes at an offset as at
// most two spans, so a DATA packet is one header plus one or two iovecs.
//
// Thread-compatible: one owner at a time; moves keep every span valid (owned Buffers keep
// their heap blocks when moved).
#ifndef HOMARPC_TRANSPORT_MESSAGE_BYTES_H_
#define HOMARPC_TRANSPORT_MESSAGE_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/types/span.h"
#include "transport/buffer.h"

namespace homarpc::transport {

class MessageBytes {
 public:
  MessageBytes() = default;
  // One owned segment: the common case, no allocation beyond the Buffer's own.
  MessageBytes(Buffer buffer) : head_(std::move(buffer)) {}  // NOLINT: implicit on purpose
  MessageBytes(MessageBytes&& other) noexcept = default;
  MessageBytes& operator=(MessageBytes&& other) noexcept;
  // Runs the release callback, if any.
  ~MessageBytes();

  // Appends bytes this object then owns. Empty buffers are ignored.
  void Append(Buffer buffer);
  // Appends bytes owned elsewhere (see the file comment). Empty spans are ignored.
  void AppendBorrowed(absl::Span<const uint8_t> bytes);
  // `fn` runs once when this object (or the one it was moved into) is destroyed or assigned
  // over. A second call replaces the first callback, which then never runs.
  void OnRelease(absl::AnyInvocable<void()> fn);

  size_t size() const { return extra_ == nullptr ? head_.size() : extra_->size; }
  bool empty() const { return size() == 0; }
  // Number of contiguous pieces (0 when empty).
  size_t segment_count() const;
  bool borrows() const { return extra_ != nullptr && extra_->borrowed > 0; }

  // The bytes at [offset, offset + max_len), or fewer: the first span starts at `offset` and
  // the second, when the first ends at a segment boundary, continues from there; bytes past
  // the second span are left for the next call. Returns the bytes covered (first.size() +
  // second.size()): 0 only when offset >= size() or max_len == 0.
  size_t Gather(size_t offset, size_t max_len, absl::Span<const uint8_t>* first,
                absl::Span<const uint8_t>* second) const;
  // A copy of all the bytes in one Buffer.
  Buffer Flatten() const;

 private:
  struct Segment {
    const uint8_t* data = nullptr;
    size_t size = 0;
    size_t start = 0;  // offset of its first byte in the message
  };
  // Present once a second segment, a borrowed one or a release callback is added.
  struct Extra {
    absl::InlinedVector<Segment, 4> segments;
    absl::InlinedVector<Buffer, 2> owned;  // every owned segment but head_
    absl::AnyInvocable<void()> on_release;
    size_t size = 0;
    size_t borrowed = 0;  // bytes borrowed
  };

  Extra& MakeExtra();
  void AddSegment(const uint8_t* data, size_t size);
  void Release();

  Buffer head_;
  std::unique_ptr<Extra> extra_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_MESSAGE_BYTES_H_
