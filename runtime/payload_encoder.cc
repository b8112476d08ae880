// EncodeBorrowing (payload_encoder.h).
//
// DESIGN NOTES
// GatherStream is a ZeroCopyOutputStream that builds a MessageBytes. Protobuf's
// EpsCopyOutputStream calls WriteAliasedRaw() for a string or bytes field only when aliasing
// is enabled, the stream allows it, and the field does not fit the space left in the current
// chunk; so chunks are kept below kMinBorrowBytes and every field at least that long is
// borrowed. A shorter field that merely did not fit is copied into a fresh chunk instead of
// being borrowed: tiny borrowed segments would cut packets short.
// Chunks are owned Buffers handed out whole by Next(); BackUp() returns the unused tail; a
// chunk is appended to the MessageBytes (shrunk to what was written) when the stream moves
// past it. The first chunk is the caller's header buffer, after its used bytes. Chunk sizes
// double from 1 KiB, and restart at 128 bytes after each borrowed field.
#include "runtime/payload_encoder.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/message_lite.h"

namespace homarpc::internal {
namespace {

// Owned chunks grow from 1 KiB and stay below kMinBorrowBytes (see DESIGN NOTES).
constexpr size_t kFirstChunkBytes = 1024;
constexpr size_t kAfterBorrowChunkBytes = 128;
constexpr size_t kMaxChunkBytes = kMinBorrowBytes - 1024;

class GatherStream final : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  GatherStream(transport::MessageBytes* out, transport::Buffer first, size_t first_used,
               size_t payload_bytes)
      : out_(out), chunk_(std::move(first)), chunk_used_(first_used), left_(payload_bytes) {}

  bool Next(void** data, int* size) override {
    if (chunk_used_ == chunk_.size()) NewChunk(0);
    *data = chunk_.data() + chunk_used_;
    const size_t n = chunk_.size() - chunk_used_;
    *size = static_cast<int>(n);
    chunk_used_ = chunk_.size();
    Count(n);
    return true;
  }

  void BackUp(int count) override {
    chunk_used_ -= static_cast<size_t>(count);
    Uncount(static_cast<size_t>(count));
  }

  int64_t ByteCount() const override { return static_cast<int64_t>(written_); }

  bool AllowsAliasing() const override { return true; }

  bool WriteAliasedRaw(const void* data, int size) override {
    const size_t n = static_cast<size_t>(size);
    const auto* bytes = static_cast<const uint8_t*>(data);
    if (n < kMinBorrowBytes) {
      // Did not fit the current chunk: copy it into a new one big enough.
      NewChunk(n);
      std::memcpy(chunk_.data(), bytes, n);
      chunk_used_ = n;
    } else {
      CommitChunk();
      out_->AppendBorrowed(absl::Span<const uint8_t>(bytes, n));
      // What follows a borrowed field is often just the next field's tag and length (a
      // repeated bytes field): start small again rather than allocate a large chunk for it.
      next_chunk_bytes_ = kAfterBorrowChunkBytes / 2;
    }
    Count(n);
    return true;
  }

  // Appends the last chunk. Call after the CodedOutputStream is gone (it backs up on exit).
  void Finish() { CommitChunk(); }
  size_t written() const { return written_; }

 private:
  void Count(size_t n) {
    written_ += n;
    left_ -= std::min(left_, n);
  }
  void Uncount(size_t n) {
    written_ -= n;
    left_ += n;
  }

  void CommitChunk() {
    chunk_.Shrink(chunk_used_);
    out_->Append(std::move(chunk_));
    chunk_ = transport::Buffer();
    chunk_used_ = 0;
  }

  // Replaces the current chunk by a new one of at least `min_bytes`, sized to what is left.
  void NewChunk(size_t min_bytes) {
    CommitChunk();
    next_chunk_bytes_ = std::min(next_chunk_bytes_ * 2, kMaxChunkBytes);
    const size_t want = std::max<size_t>(std::min(left_, next_chunk_bytes_), 64);
    chunk_ = transport::Buffer(std::max(want, min_bytes));
  }

  transport::MessageBytes* const out_;
  transport::Buffer chunk_;
  size_t chunk_used_ = 0;
  size_t left_ = 0;  // payload bytes not yet written (a hint for chunk sizes)
  size_t written_ = 0;
  size_t next_chunk_bytes_ = kFirstChunkBytes / 2;
};

}  // namespace

bool EncodeBorrowing(const google::protobuf::MessageLite& message, size_t payload_bytes,
                     transport::Buffer header, size_t header_used, transport::MessageBytes* out) {
  *out = transport::MessageBytes();
  GatherStream stream(out, std::move(header), header_used, payload_bytes);
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.EnableAliasing(true);
    message.SerializeWithCachedSizes(&coded);
    if (coded.HadError()) return false;
  }
  stream.Finish();
  return stream.written() == payload_bytes;
}

}  // namespace homarpc::internal
