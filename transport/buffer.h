// Buffer: an owned, move-only, uninitialised byte array holding one whole message.
//
// Messages are handed to the transport as a Buffer (ownership passes to it until the RPC
// ends) and handed back to the application as a Buffer (ownership passes to the application).
// Unlike std::string, allocating a Buffer does not zero it, which matters for 64 MiB messages.
#ifndef HOMARPC_TRANSPORT_BUFFER_H_
#define HOMARPC_TRANSPORT_BUFFER_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include "absl/strings/string_view.h"

#include "absl/types/span.h"

namespace homarpc::transport {

class Buffer {
 public:
  Buffer() = default;
  // `size` uninitialised bytes. Allocation failure aborts, as with operator new.
  explicit Buffer(size_t size)
      : data_(size ? new uint8_t[size] : nullptr), size_(size) {}
  static Buffer CopyOf(absl::string_view bytes) {
    Buffer b(bytes.size());
    if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
    return b;
  }

  Buffer(Buffer&& other) noexcept : data_(std::move(other.data_)), size_(other.size_) {
    other.size_ = 0;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = other.size_;
    other.size_ = 0;
    return *this;
  }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  absl::Span<const uint8_t> span() const { return {data_.get(), size_}; }
  absl::string_view view() const {
    return {reinterpret_cast<const char*>(data_.get()), size_};
  }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_BUFFER_H_
