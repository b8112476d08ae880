// OutMessage and InMessage: one direction of an RPC's bytes, as its sender and receiver see it.
//
// OutMessage owns the bytes being sent and tracks how far they have been transmitted and
// granted. InMessage owns the buffer being filled and reassembles it by offset: packets may
// arrive out of order, duplicated, overlapping or never; what is missing is a short list of
// gaps below the highest byte seen (Homa's approach). Both are plain data owned by their Rpc
// and touched only from the engine's thread.
#ifndef HOMARPC_TRANSPORT_MESSAGE_H_
#define HOMARPC_TRANSPORT_MESSAGE_H_

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "transport/buffer.h"
#include "transport/message_bytes.h"

namespace homarpc::transport {

struct ByteRange {
  uint32_t start = 0;
  uint32_t end = 0;  // exclusive
  uint32_t size() const { return end - start; }
};

struct OutMessage {
  MessageBytes bytes;
  uint32_t length = 0;
  uint32_t next_xmit = 0;    // first byte never transmitted
  uint32_t granted = 0;      // may transmit bytes below this
  uint32_t unscheduled = 0;  // bytes sent without grants (min(unsched_bytes, length))
  uint8_t sched_priority = 0;
  bool active = false;       // a message is being sent (false before the app supplies one)
  bool sent_empty = false;   // the one DATA packet of a zero-length message went out

  uint32_t remaining() const { return length - next_xmit; }
  // Bytes that may go out now (granted but not yet sent).
  bool HasSendable() const { return active && next_xmit < granted && next_xmit < length; }
  // A zero-length message still needs its one empty DATA packet.
  bool NeedsEmptyPacket() const { return active && length == 0 && next_xmit == 0 && !sent_empty; }
  bool FullySent() const { return active && next_xmit >= length && (length > 0 || sent_empty); }
};

class InMessage {
 public:
  // Starts receiving a message of `length` bytes (allocates the buffer).
  void Start(uint32_t length, uint32_t initial_granted);
  bool started() const { return started_; }
  uint32_t length() const { return length_; }
  uint32_t received() const { return received_; }
  uint32_t unreceived() const { return length_ - received_; }
  bool complete() const { return started_ && received_ == length_; }
  uint32_t granted() const { return granted_; }
  void set_granted(uint32_t granted) { granted_ = granted; }
  // Highest offset seen + 1; everything below it is received except the gaps.
  uint32_t recv_end() const { return recv_end_; }
  absl::Span<const ByteRange> gaps() const { return gaps_; }

  // Copies the parts of [offset, offset+data.size()) not yet received into the buffer.
  // Returns the number of new bytes. The caller has checked offset+size <= length. A packet
  // that would take the gap list past kMaxGaps is dropped whole (returns 0): a hostile sender
  // must not make every later packet walk an ever longer list.
  uint32_t Receive(uint32_t offset, absl::Span<const uint8_t> data);
  static constexpr size_t kMaxGaps = 1024;

  // Hands the buffer over (after complete()). The message becomes empty.
  Buffer Release();
  // Forgets everything (restart).
  void Reset();

 private:
  Buffer buffer_;
  uint32_t length_ = 0;
  uint32_t received_ = 0;
  uint32_t recv_end_ = 0;
  uint32_t granted_ = 0;
  bool started_ = false;
  absl::InlinedVector<ByteRange, 2> gaps_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_MESSAGE_H_
