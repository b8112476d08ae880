// Tests of runtime/deadline_heap.h: the intrusive min-heap behind the server's deadline timer.
// Pops come out in deadline order, erasing from the middle keeps the heap valid, and an object
// knows whether it is in the heap; a seeded random sequence checks it against a std::multiset.
#include "runtime/deadline_heap.h"

#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace homarpc::internal {
namespace {

struct Item {
  explicit Item(int64_t deadline) { node.deadline_nanos = deadline; }
  DeadlineHeapNode* deadline_node() { return &node; }
  DeadlineHeapNode node;
};

TEST(DeadlineHeapTest, DeadlineHeap_PopsInDeadlineOrder) {
  std::vector<std::unique_ptr<Item>> items;
  DeadlineHeap<Item> heap;
  EXPECT_TRUE(heap.empty());
  EXPECT_EQ(heap.next_deadline(), INT64_MAX);
  for (int64_t d : {50, 10, 40, 10, 30, 20}) {
    items.push_back(std::make_unique<Item>(d));
    heap.Push(items.back().get());
  }
  EXPECT_EQ(heap.size(), 6u);
  std::vector<int64_t> popped;
  while (!heap.empty()) {
    EXPECT_EQ(heap.next_deadline(), heap.top()->node.deadline_nanos);
    Item* item = heap.Pop();
    EXPECT_FALSE(DeadlineHeap<Item>::Contains(item));
    popped.push_back(item->node.deadline_nanos);
  }
  EXPECT_EQ(popped, (std::vector<int64_t>{10, 10, 20, 30, 40, 50}));
}

TEST(DeadlineHeapTest, DeadlineHeap_EraseFromTheMiddleAndTwiceIsSafe) {
  Item a(30), b(10), c(20), d(40);
  DeadlineHeap<Item> heap;
  for (Item* item : {&a, &b, &c, &d}) heap.Push(item);
  EXPECT_TRUE(DeadlineHeap<Item>::Contains(&c));
  heap.Erase(&c);
  EXPECT_FALSE(DeadlineHeap<Item>::Contains(&c));
  heap.Erase(&c);  // not in the heap: nothing happens
  heap.Erase(&b);  // the top
  EXPECT_EQ(heap.top(), &a);
  heap.Erase(&d);  // the last slot
  EXPECT_EQ(heap.Pop(), &a);
  EXPECT_TRUE(heap.empty());
}

TEST(DeadlineHeapTest, DeadlineHeap_RandomOperationsMatchAMultiset) {
  std::mt19937_64 rng(12345);
  std::vector<std::unique_ptr<Item>> items;
  for (int i = 0; i < 500; ++i) items.push_back(std::make_unique<Item>(0));
  DeadlineHeap<Item> heap;
  std::multiset<std::pair<int64_t, Item*>> model;
  for (int step = 0; step < 20000; ++step) {
    Item* item = items[rng() % items.size()].get();
    switch (rng() % 3) {
      case 0:  // push (if not in)
        if (!DeadlineHeap<Item>::Contains(item)) {
          item->node.deadline_nanos = static_cast<int64_t>(rng() % 1000);
          heap.Push(item);
          model.emplace(item->node.deadline_nanos, item);
        }
        break;
      case 1:  // erase (in or not)
        if (DeadlineHeap<Item>::Contains(item)) {
          model.erase(model.find({item->node.deadline_nanos, item}));
        }
        heap.Erase(item);
        break;
      case 2:  // pop
        if (!heap.empty()) {
          ASSERT_EQ(heap.next_deadline(), model.begin()->first);
          Item* top = heap.Pop();
          ASSERT_EQ(top->node.deadline_nanos, model.begin()->first);
          model.erase(model.find({top->node.deadline_nanos, top}));
        }
        break;
    }
    ASSERT_EQ(heap.size(), model.size());
    ASSERT_EQ(heap.next_deadline(), model.empty() ? INT64_MAX : model.begin()->first);
  }
}

}  // namespace
}  // namespace homarpc::internal
