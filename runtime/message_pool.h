// MessagePool: cleared protobuf messages that keep their fields' storage, for the next call
// of the same method (server side; responses only, service.h says why).
//
// A bulk response (a KV-cache block of megabytes) is a `bytes` field whose std::string the
// handler fills with set_payload(): with a fresh response object per call, that is a fresh
// multi-megabyte allocation per call, which glibc serves from newly mapped pages and unmaps
// again when the call is freed. Measured on the project's VM (tools/testbed.sh, `mixed`,
// 8 MiB responses): half of all page faults of the run were in that one set_payload(), and
// each unmap interrupts the process's other threads; the 64 B calls sharing the server waited
// behind it (p99 of several milliseconds). protobuf's Clear() keeps a string's capacity, so a
// message that was used once and cleared takes the next payload of that size without
// allocating or faulting, when the bytes are copied into the field's own string
// (mutable_payload()->assign(data, size), set_payload(const std::string&)).
// set_payload(data, size) ends in the same storage, but protobuf 3.21 (Debian 12) first builds
// a temporary std::string of the bytes (ArenaStringPtr::SetBytes): a fresh allocation and a
// second copy per call (the testbed `mixed` run's page faults fell from 0.52-0.66 M to
// 0.34-0.38 M when the benchmark's handlers switched to assign()). Moving a std::string into
// the field replaces the storage.
//
// Put() is told what a message holds: the size of the payload it just carried or, for a
// pooled one that then carried a small payload, what it was kept with before. Messages that
// hold less than kMinBytes are not kept (malloc's own caches serve small objects well). The
// pool is bounded: at most kMaxMessages messages and kMaxBytes bytes per pool, and
// kMaxTotalBytes in all pools of the process. Thread-safe.
#ifndef HOMARPC_RUNTIME_MESSAGE_POOL_H_
#define HOMARPC_RUNTIME_MESSAGE_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "transport/plain_sync.h"
#include "google/protobuf/message_lite.h"

namespace homarpc::internal {

// Bytes held in all pools of the process now (kMaxTotalBytes bounds it).
uint64_t PooledBytes();

class MessagePool {
 public:
  static constexpr size_t kMinBytes = 64 * 1024;
  static constexpr size_t kMaxBytes = size_t{64} << 20;
  static constexpr size_t kMaxMessages = 4;
  static constexpr size_t kMaxTotalBytes = size_t{256} << 20;

  MessagePool();
  MessagePool(const MessagePool&) = delete;
  MessagePool& operator=(const MessagePool&) = delete;
  ~MessagePool();

  struct Kept {
    std::unique_ptr<google::protobuf::MessageLite> message;  // null: the pool was empty
    size_t bytes = 0;                                        // what it holds, as Put() was told
  };
  // The last message kept, cleared.
  Kept Take();
  // Keeps `message` (clearing it) when `bytes`, what it holds (see above), is at least
  // kMinBytes and the bounds leave room; otherwise destroys it.
  void Put(std::unique_ptr<google::protobuf::MessageLite> message, size_t bytes);

  size_t size() const;
  size_t bytes() const;
  uint64_t taken() const;  // messages Take() has handed out, ever

 private:
  // Mirrors kept_.size() (written under mu_): an empty pool's Take(), on every call of every
  // method, costs one relaxed load, no lock. A stale read misses one reuse at worst.
  std::atomic<size_t> count_{0};
  mutable transport::PlainMutex mu_;
  std::vector<std::pair<std::unique_ptr<google::protobuf::MessageLite>, size_t>> kept_
      ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_MESSAGE_POOL_H_
