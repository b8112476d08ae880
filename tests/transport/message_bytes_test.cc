// Tests of MessageBytes (transport/message_bytes.h), the bytes of one outgoing message: a
// single owned Buffer behaves as before; a message gathered from owned and borrowed segments
// hands out exactly the right bytes at every offset through Gather() (at most two spans, the
// second only across a segment boundary, pointing into the segments themselves, never a
// copy); empty pieces are ignored; Flatten() is the concatenation; the release callback runs
// exactly once, when the last owner goes, and takes its captures with it; moves keep every
// span where it was. Single-threaded.
#include "transport/message_bytes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "transport/buffer.h"

namespace homarpc::transport {
namespace {

using Span = absl::Span<const uint8_t>;

// `n` bytes that differ by position and seed, so a misplaced byte is noticed.
std::string Pattern(size_t n, uint8_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed * 31 + i * 7 + (i >> 8));
  return s;
}

std::string Str(Span span) {
  return std::string(reinterpret_cast<const char*>(span.data()), span.size());
}

Span SpanOf(const std::string& s) {
  return Span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// A message built from owned and borrowed segments, with the test's own record of where each
// segment's bytes live, so Gather() can be checked against it.
class Gathered {
 public:
  void AddOwned(size_t n, uint8_t seed) {
    Buffer b = Buffer::CopyOf(Pattern(n, seed));
    pieces_.push_back({b.data(), n, reference_.size()});
    reference_ += std::string(b.view());
    bytes_.Append(std::move(b));
  }
  void AddBorrowed(size_t n, uint8_t seed) {
    borrowed_.push_back(std::make_unique<std::string>(Pattern(n, seed)));
    const std::string& s = *borrowed_.back();
    pieces_.push_back({reinterpret_cast<const uint8_t*>(s.data()), n, reference_.size()});
    reference_ += s;
    bytes_.AppendBorrowed(SpanOf(s));
  }

  struct Piece {
    const uint8_t* data;
    size_t size;
    size_t start;
  };
  // The index of the piece holding byte `offset` (offset < size).
  size_t PieceAt(size_t offset) const {
    size_t i = 0;
    while (pieces_[i].start + pieces_[i].size <= offset) ++i;
    return i;
  }

  MessageBytes& bytes() { return bytes_; }
  const std::string& reference() const { return reference_; }
  const std::vector<Piece>& pieces() const { return pieces_; }

 private:
  std::vector<std::unique_ptr<std::string>> borrowed_;  // outlive bytes_ (declared first)
  MessageBytes bytes_;
  std::vector<Piece> pieces_;
  std::string reference_;
};

// Every segment as Gather() reports it: starting at each segment's first byte, the first span
// is that whole segment.
std::vector<Span> Segments(const MessageBytes& m) {
  std::vector<Span> out;
  size_t offset = 0;
  Span a, b;
  while (m.Gather(offset, std::numeric_limits<size_t>::max(), &a, &b) > 0) {
    out.push_back(a);
    offset += a.size();
  }
  return out;
}

TEST(MessageBytesTest, MessageBytes_EmptyHasNothingToGather) {
  MessageBytes m;
  EXPECT_EQ(m.size(), 0u);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.segment_count(), 0u);
  EXPECT_FALSE(m.borrows());
  Span a = SpanOf("x"), b = SpanOf("y");
  EXPECT_EQ(m.Gather(0, 100, &a, &b), 0u);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(m.Flatten().size(), 0u);
}

TEST(MessageBytesTest, MessageBytes_SingleBufferIsOneSpanOverTheBuffer) {
  Buffer buffer = Buffer::CopyOf("hello, gathered world");
  const uint8_t* data = buffer.data();
  MessageBytes m(std::move(buffer));  // implicit conversion, as callers use it
  EXPECT_EQ(m.size(), 21u);
  EXPECT_FALSE(m.empty());
  EXPECT_EQ(m.segment_count(), 1u);
  EXPECT_FALSE(m.borrows());

  Span a, b;
  EXPECT_EQ(m.Gather(0, 1000, &a, &b), 21u);
  EXPECT_EQ(a.data(), data) << "the Buffer's own bytes, not a copy";
  EXPECT_EQ(a.size(), 21u);
  EXPECT_TRUE(b.empty());

  EXPECT_EQ(m.Gather(7, 8, &a, &b), 8u);
  EXPECT_EQ(a.data(), data + 7);
  EXPECT_EQ(Str(a), "gathered");
  EXPECT_TRUE(b.empty());

  EXPECT_EQ(m.Gather(20, 8, &a, &b), 1u);
  EXPECT_EQ(Str(a), "d");
  EXPECT_EQ(m.Gather(21, 8, &a, &b), 0u);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(m.Gather(5000, 8, &a, &b), 0u);
  EXPECT_EQ(m.Gather(0, 0, &a, &b), 0u);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(m.Flatten().view(), "hello, gathered world");
}

TEST(MessageBytesTest, MessageBytes_GatherAtEveryOffsetMatchesTheReference) {
  // Tiny segments between large ones, owned and borrowed, so every case of Gather occurs: a
  // span inside one segment, two spans across a boundary, a second span cut by max_len, a
  // 1-byte segment as the first or the second span, the last segment alone.
  Gathered g;
  g.AddOwned(1000, 1);
  g.AddBorrowed(3, 2);
  g.AddOwned(1, 3);
  g.AddBorrowed(2500, 4);
  g.AddBorrowed(3, 5);
  g.AddOwned(7, 6);
  g.AddBorrowed(1416, 7);
  g.AddOwned(1, 8);
  const MessageBytes& m = g.bytes();
  const std::string& ref = g.reference();
  ASSERT_EQ(m.size(), ref.size());
  ASSERT_EQ(m.segment_count(), g.pieces().size());
  EXPECT_TRUE(m.borrows());
  const auto& pieces = g.pieces();

  const size_t max_lens[] = {0, 1,    2,    3,    4,    5,
                             8, 1415, 1416, 1417, 3000, std::numeric_limits<size_t>::max()};
  for (size_t offset = 0; offset <= ref.size() + 2; ++offset) {
    for (size_t max_len : max_lens) {
      SCOPED_TRACE(absl::StrCat("offset ", offset, " max_len ", max_len));
      Span a = SpanOf("stale"), b = SpanOf("stale");
      const size_t n = m.Gather(offset, max_len, &a, &b);
      if (offset >= ref.size() || max_len == 0) {
        ASSERT_EQ(n, 0u);
        ASSERT_TRUE(a.empty());
        ASSERT_TRUE(b.empty());
        continue;
      }
      // Expect: the bytes up to the end of the segment after the one holding `offset`.
      const size_t k = g.PieceAt(offset);
      const size_t end_k = pieces[k].start + pieces[k].size;
      const size_t reach = k + 1 < pieces.size() ? end_k + pieces[k + 1].size : end_k;
      const size_t want = std::min(max_len, reach - offset);
      ASSERT_EQ(n, want);
      ASSERT_EQ(n, a.size() + b.size());
      ASSERT_EQ(Str(a) + Str(b), ref.substr(offset, n));
      // The spans point into the segments themselves.
      ASSERT_EQ(a.data(), pieces[k].data + (offset - pieces[k].start));
      ASSERT_LE(offset + a.size(), end_k);
      if (!b.empty()) {
        ASSERT_EQ(offset + a.size(), end_k) << "a second span only across a segment boundary";
        ASSERT_EQ(b.data(), pieces[k + 1].data);
      } else {
        ASSERT_TRUE(offset + a.size() < end_k || a.size() == max_len || k + 1 == pieces.size());
      }
    }
  }
}

TEST(MessageBytesTest, MessageBytes_PacketSizedWalkCoversTheMessageOnce) {
  // The engine's use: consecutive Gather(offset, payload) calls, each advancing by what it got.
  Gathered g;
  for (int i = 0; i < 20; ++i) {
    if (i % 3 == 0) g.AddOwned(3, static_cast<uint8_t>(i));
    if (i % 2 == 0) {
      g.AddBorrowed(2000 + i * 37, static_cast<uint8_t>(i + 50));
    } else {
      g.AddOwned(1500 + i, static_cast<uint8_t>(i + 100));
    }
  }
  std::string walked;
  size_t offset = 0;
  Span a, b;
  while (size_t n = g.bytes().Gather(offset, 1416, &a, &b)) {
    ASSERT_LE(n, 1416u);
    walked += Str(a) + Str(b);
    offset += n;
  }
  EXPECT_EQ(offset, g.reference().size());
  EXPECT_EQ(walked, g.reference());
}

TEST(MessageBytesTest, MessageBytes_EmptyPiecesAreIgnored) {
  MessageBytes m;
  m.Append(Buffer());
  m.AppendBorrowed(Span());
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.segment_count(), 0u);
  EXPECT_FALSE(m.borrows()) << "an empty borrow borrows nothing";

  const std::string def = "def";
  m.Append(Buffer::CopyOf("abc"));
  m.AppendBorrowed(Span());
  m.Append(Buffer());
  m.AppendBorrowed(SpanOf(def));
  m.Append(Buffer());
  EXPECT_EQ(m.size(), 6u);
  EXPECT_EQ(m.segment_count(), 2u);
  // Expect: "abc" then "def" as two spans; an empty segment between them would end the
  // gather after "abc" with an empty second span.
  Span a, b;
  EXPECT_EQ(m.Gather(0, 6, &a, &b), 6u);
  EXPECT_EQ(Str(a), "abc");
  EXPECT_EQ(Str(b), "def");
  EXPECT_EQ(b.data(), reinterpret_cast<const uint8_t*>(def.data()));
  EXPECT_EQ(m.Flatten().view(), "abcdef");
}

TEST(MessageBytesTest, MessageBytes_FirstAppendedBufferIsTheHead) {
  // Append() on an empty message is the single-Buffer case (no segment table needed).
  Buffer buffer = Buffer::CopyOf("only");
  const uint8_t* data = buffer.data();
  MessageBytes m;
  m.Append(std::move(buffer));
  EXPECT_EQ(m.segment_count(), 1u);
  EXPECT_FALSE(m.borrows());
  Span a, b;
  EXPECT_EQ(m.Gather(1, 10, &a, &b), 3u);
  EXPECT_EQ(a.data(), data + 1);
  EXPECT_TRUE(b.empty());
}

TEST(MessageBytesTest, MessageBytes_FlattenIsTheConcatenation) {
  Gathered g;
  g.AddBorrowed(5000, 1);
  g.AddOwned(1, 2);
  g.AddOwned(70000, 3);
  g.AddBorrowed(2, 4);
  g.AddBorrowed(16384, 5);
  Buffer flat = g.bytes().Flatten();
  EXPECT_EQ(flat.size(), g.reference().size());
  EXPECT_TRUE(flat.view() == g.reference());
  // A copy: the message is unchanged and still gathers from its segments.
  EXPECT_EQ(g.bytes().size(), g.reference().size());
  EXPECT_EQ(Segments(g.bytes()).size(), 5u);
}

TEST(MessageBytesTest, MessageBytes_BorrowsReflectsBorrowedBytes) {
  MessageBytes owned_only;
  owned_only.Append(Buffer::CopyOf("a"));
  owned_only.Append(Buffer::CopyOf("b"));
  EXPECT_EQ(owned_only.segment_count(), 2u);
  EXPECT_FALSE(owned_only.borrows());

  MessageBytes with_callback(Buffer::CopyOf("abc"));
  with_callback.OnRelease([] {});
  EXPECT_FALSE(with_callback.borrows()) << "a release callback alone borrows nothing";
  EXPECT_EQ(with_callback.segment_count(), 1u);

  const std::string lent = "lent";
  MessageBytes borrowed_only;
  borrowed_only.AppendBorrowed(SpanOf(lent));
  EXPECT_TRUE(borrowed_only.borrows());
  EXPECT_EQ(borrowed_only.size(), 4u);
  owned_only.AppendBorrowed(SpanOf(lent));
  EXPECT_TRUE(owned_only.borrows());
  EXPECT_EQ(owned_only.Flatten().view(), "ablent");
}

TEST(MessageBytesTest, MessageBytes_ReleaseRunsOnceOnDestruction) {
  int runs = 0;
  {
    MessageBytes m(Buffer::CopyOf("abc"));
    m.OnRelease([&runs] { ++runs; });
    // Gathering and flattening do not release.
    Span a, b;
    EXPECT_EQ(m.Gather(0, 3, &a, &b), 3u);
    EXPECT_EQ(m.Flatten().view(), "abc");
    EXPECT_EQ(runs, 0);
  }
  EXPECT_EQ(runs, 1);

  int empty_runs = 0;
  {
    MessageBytes m;
    m.OnRelease([&empty_runs] { ++empty_runs; });
  }
  EXPECT_EQ(empty_runs, 1) << "an empty message releases too";
}

TEST(MessageBytesTest, MessageBytes_ReleaseFreesWhatTheCallbackCaptured) {
  // The server hands the response message to the callback and relies on its destruction.
  auto owned = std::make_unique<std::string>(Pattern(100, 9));
  std::weak_ptr<int> watch;
  {
    auto sentinel = std::make_shared<int>(7);
    watch = sentinel;
    MessageBytes m;
    m.AppendBorrowed(SpanOf(*owned));
    m.OnRelease([sentinel = std::move(sentinel), owned = std::move(owned)] {});
    EXPECT_FALSE(watch.expired()) << "held while the message lives";
  }
  EXPECT_TRUE(watch.expired()) << "the captures are gone once the message is released";
}

TEST(MessageBytesTest, MessageBytes_MoveConstructionTransfersTheRelease) {
  int runs = 0;
  auto first = std::make_unique<MessageBytes>(Buffer::CopyOf("abc"));
  first->OnRelease([&runs] { ++runs; });
  auto second = std::make_unique<MessageBytes>(std::move(*first));
  first.reset();
  EXPECT_EQ(runs, 0) << "the moved-from object does not release";
  EXPECT_EQ(second->Flatten().view(), "abc");
  second.reset();
  EXPECT_EQ(runs, 1);
}

TEST(MessageBytesTest, MessageBytes_MoveAssignmentReleasesTheOverwrittenOne) {
  int runs_a = 0;
  int runs_b = 0;
  auto a = std::make_unique<MessageBytes>(Buffer::CopyOf("aaa"));
  a->OnRelease([&runs_a] { ++runs_a; });
  auto b = std::make_unique<MessageBytes>(Buffer::CopyOf("bbbb"));
  b->OnRelease([&runs_b] { ++runs_b; });

  *a = std::move(*b);
  EXPECT_EQ(runs_a, 1) << "assigned over: released at once";
  EXPECT_EQ(runs_b, 0);
  EXPECT_EQ(a->Flatten().view(), "bbbb");
  b.reset();
  EXPECT_EQ(runs_b, 0) << "the moved-from object does not release";
  a.reset();
  EXPECT_EQ(runs_a, 1);
  EXPECT_EQ(runs_b, 1);

  // Assigning a plain Buffer over a message with a callback releases it as well.
  int runs_c = 0;
  MessageBytes c(Buffer::CopyOf("c"));
  c.OnRelease([&runs_c] { ++runs_c; });
  c = Buffer::CopyOf("dd");
  EXPECT_EQ(runs_c, 1);
  EXPECT_EQ(c.Flatten().view(), "dd");
}

TEST(MessageBytesTest, MessageBytes_SelfMoveAssignmentKeepsEverything) {
  int runs = 0;
  {
    const std::string lent = Pattern(50, 3);
    MessageBytes m(Buffer::CopyOf("head"));
    m.AppendBorrowed(SpanOf(lent));
    m.OnRelease([&runs] { ++runs; });
    MessageBytes& alias = m;
    m = std::move(alias);
    EXPECT_EQ(runs, 0);
    EXPECT_EQ(m.size(), 54u);
    EXPECT_EQ(m.Flatten().view(), "head" + lent);
  }
  EXPECT_EQ(runs, 1);
}

TEST(MessageBytesTest, MessageBytes_ReplacedCallbackNeverRuns) {
  int first = 0;
  int second = 0;
  {
    MessageBytes m(Buffer::CopyOf("x"));
    m.OnRelease([&first] { ++first; });
    m.OnRelease([&second] { ++second; });
    EXPECT_EQ(first, 0) << "replacing is not releasing";
  }
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
}

TEST(MessageBytesTest, MessageBytes_MovedFromIsEmpty) {
  const std::string lent = Pattern(40, 1);
  MessageBytes m(Buffer::CopyOf("abc"));
  m.AppendBorrowed(SpanOf(lent));
  MessageBytes n(std::move(m));
  EXPECT_EQ(n.size(), 43u);
  EXPECT_EQ(m.size(), 0u);  // NOLINT(bugprone-use-after-move): the state is what is tested
  EXPECT_EQ(m.segment_count(), 0u);
  Span a, b;
  EXPECT_EQ(m.Gather(0, 10, &a, &b), 0u);

  MessageBytes single(Buffer::CopyOf("abc"));
  MessageBytes taken(std::move(single));
  EXPECT_EQ(single.size(), 0u);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(single.Gather(0, 10, &a, &b), 0u);
}

TEST(MessageBytesTest, MessageBytes_MovesKeepEverySpanInPlace) {
  // The engine may move a message (into its RPC, between containers) after packets were cut
  // from it; owned segments must not move with it, borrowed ones never do.
  Gathered g;
  g.AddOwned(900, 1);
  g.AddBorrowed(20000, 2);
  g.AddOwned(3, 3);
  g.AddBorrowed(1, 4);
  g.AddOwned(5000, 5);
  const std::vector<Span> before = Segments(g.bytes());
  ASSERT_EQ(before.size(), 5u);

  MessageBytes moved(std::move(g.bytes()));
  MessageBytes assigned(Buffer::CopyOf("to be replaced"));
  assigned = std::move(moved);
  const std::vector<Span> after = Segments(assigned);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].data(), before[i].data()) << "segment " << i;
    EXPECT_EQ(after[i].size(), before[i].size()) << "segment " << i;
  }
  EXPECT_TRUE(assigned.Flatten().view() == g.reference());

  // The single-Buffer form too.
  MessageBytes single(Buffer::CopyOf(Pattern(3000, 6)));
  Span a, b;
  single.Gather(100, 10, &a, &b);
  const uint8_t* at = a.data();
  MessageBytes single_moved(std::move(single));
  single_moved.Gather(100, 10, &a, &b);
  EXPECT_EQ(a.data(), at);
}

}  // namespace
}  // namespace homarpc::transport
