// gathered_message: test messages made of many pieces (transport/message_bytes.h), some owned,
// some borrowed from heap strings that the message's release frees, so that a read after the
// release is a heap-use-after-free under ASan. Shared by engine_gather_test.cc and
// io_gather_test.cc. Test support, header-only; thread-compatible.
#ifndef HOMARPC_TESTS_TRANSPORT_GATHERED_MESSAGE_H_
#define HOMARPC_TESTS_TRANSPORT_GATHERED_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "transport/buffer.h"
#include "transport/message_bytes.h"

namespace homarpc::transport::testing {

// `n` bytes that differ by position and seed.
inline std::string PatternBytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

// One piece of a gathered message: its length and whether it is borrowed or owned.
struct Piece {
  size_t size;
  bool borrowed;
};

// A message of `pieces` (piece i filled with PatternBytes(size, seed * 1000 + i)), whose bytes
// are also appended to `*reference`. Its release runs `on_release` (if set), then frees the
// borrowed pieces.
inline MessageBytes BuildGathered(const std::vector<Piece>& pieces, uint32_t seed,
                                  std::string* reference, std::function<void()> on_release) {
  MessageBytes m;
  auto lent = std::make_unique<std::vector<std::unique_ptr<std::string>>>();
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string bytes = PatternBytes(pieces[i].size, seed * 1000 + static_cast<uint32_t>(i));
    *reference += bytes;
    if (pieces[i].borrowed) {
      lent->push_back(std::make_unique<std::string>(std::move(bytes)));
      const std::string& s = *lent->back();
      m.AppendBorrowed(
          absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
    } else {
      m.Append(Buffer::CopyOf(bytes));
    }
  }
  m.OnRelease([on_release = std::move(on_release), lent = std::move(lent)]() mutable {
    if (on_release) on_release();
    lent.reset();
  });
  return m;
}

}  // namespace homarpc::transport::testing

#endif  // HOMARPC_TESTS_TRANSPORT_GATHERED_MESSAGE_H_
