// DeadlineHeap: a binary min-heap of objects by deadline, intrusive so that an object can be
// removed from the middle in O(log n) without searching (each object remembers its slot).
// The server's deadline timer keeps its live calls with a deadline in one (server.cc).
//
// T must provide `DeadlineHeapNode* deadline_node()`; the node belongs to the object and says
// where it sits. The heap never owns its objects. Not thread-safe: the owner's lock guards it.
#ifndef HOMARPC_RUNTIME_DEADLINE_HEAP_H_
#define HOMARPC_RUNTIME_DEADLINE_HEAP_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace homarpc::internal {

struct DeadlineHeapNode {
  static constexpr size_t kNotInHeap = std::numeric_limits<size_t>::max();
  int64_t deadline_nanos = INT64_MAX;
  size_t index = kNotInHeap;  // slot in the heap, kNotInHeap when in none
};

template <typename T>
class DeadlineHeap {
 public:
  bool empty() const { return slots_.empty(); }
  size_t size() const { return slots_.size(); }
  // The object with the earliest deadline; the heap must not be empty.
  T* top() const { return slots_.front(); }
  // INT64_MAX when empty.
  int64_t next_deadline() const {
    return slots_.empty() ? INT64_MAX : slots_.front()->deadline_node()->deadline_nanos;
  }
  static bool Contains(T* item) {
    return item->deadline_node()->index != DeadlineHeapNode::kNotInHeap;
  }

  // Adds `item` (not in any heap) at its node's deadline_nanos.
  void Push(T* item) {
    assert(!Contains(item));
    slots_.push_back(item);
    item->deadline_node()->index = slots_.size() - 1;
    SiftUp(slots_.size() - 1);
  }
  // Removes and returns the earliest; the heap must not be empty.
  T* Pop() {
    T* item = slots_.front();
    Erase(item);
    return item;
  }
  // Removes `item` if it is in this heap; does nothing when it is in none.
  void Erase(T* item) {
    DeadlineHeapNode* node = item->deadline_node();
    if (node->index == DeadlineHeapNode::kNotInHeap) return;
    const size_t i = node->index;
    assert(i < slots_.size() && slots_[i] == item);
    node->index = DeadlineHeapNode::kNotInHeap;
    T* last = slots_.back();
    slots_.pop_back();
    if (i == slots_.size()) return;  // it was the last slot
    Place(i, last);
    // The moved object may belong above or below its new slot.
    SiftUp(i);
    SiftDown(last->deadline_node()->index);
  }

 private:
  static int64_t Key(T* item) { return item->deadline_node()->deadline_nanos; }
  void Place(size_t i, T* item) {
    slots_[i] = item;
    item->deadline_node()->index = i;
  }
  void SiftUp(size_t i) {
    T* item = slots_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (Key(slots_[parent]) <= Key(item)) break;
      Place(i, slots_[parent]);
      i = parent;
    }
    Place(i, item);
  }
  void SiftDown(size_t i) {
    T* item = slots_[i];
    const size_t n = slots_.size();
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && Key(slots_[child + 1]) < Key(slots_[child])) ++child;
      if (Key(item) <= Key(slots_[child])) break;
      Place(i, slots_[child]);
      i = child;
    }
    Place(i, item);
  }

  std::vector<T*> slots_;
};

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_DEADLINE_HEAP_H_
