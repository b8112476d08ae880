// ConformanceEnv: one echo server and N clients on some implementation of the transport, so a
// single conformance suite (conformance_test.cc) runs unchanged against each of them:
//   FabricEnv  protocol engines on the in-memory Fabric, driven by a ManualClock
//   SocketEnv  Endpoints over real UDP sockets on loopback, with one I/O backend (io_uring or
//              epoll): a threaded echo server, and inline-loop clients that the test thread
//              drives round-robin with Endpoint::Poll
// Also here: Pattern() and Mismatch(), payloads whose every 8-byte word depends on its offset
// and the message's seed, so a misplaced, duplicated or foreign block is caught wherever it
// lands (a short periodic pattern would let a block shifted by the period pass).
//
// Ownership and threads: the test owns the env and calls it from one thread only. Response
// callbacks run on that thread, inside Send() (a request refused before sending) or inside
// RunUntil(); never after the env has begun to be destroyed, so they may capture the test's
// locals by reference.
#ifndef HOMARPC_TESTS_TRANSPORT_CONFORMANCE_ENV_H_
#define HOMARPC_TESTS_TRANSPORT_CONFORMANCE_ENV_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tests/transport/fabric_engine.h"
#include "transport/address.h"
#include "transport/buffer.h"
#include "transport/clock.h"
#include "transport/config.h"
#include "transport/endpoint.h"
#include "transport/engine.h"
#include "transport/fabric.h"
#include "transport/io_backend.h"

namespace homarpc::transport::testing {

using ResponseCallback = std::function<void(absl::StatusOr<Buffer> response)>;

class ConformanceEnv {
 public:
  virtual ~ConformanceEnv() = default;

  // Adds `n` clients, numbered after the existing ones from 0; each is a separate peer (its
  // own address) to the server. Errors: whatever creating a socket returned.
  virtual absl::Status AddClients(int n) = 0;
  virtual int num_clients() const = 0;

  // Starts an RPC from client `client` to the echo server carrying `request`. `done` fires
  // exactly once (see the file comment for where) with the echoed bytes or an error.
  virtual void Send(int client, Buffer request, ResponseCallback done) = 0;

  // Drives servers, clients and the network until `finished()` is true (checked first and
  // between rounds of work) or a failure guard runs out: virtual time on the fabric, wall-clock
  // time on sockets, in either case far longer than a passing case needs. Returns finished().
  virtual bool RunUntil(absl::FunctionRef<bool()> finished) = 0;

  // The server engine's counters, read now.
  virtual EngineStats ServerStats() = 0;

 protected:
  // Wraps `done` so that it runs at most once (a second completion is a test failure) and not
  // at all once Close() was called. Derived destructors call Close() before tearing anything
  // down: an Endpoint fails its in-flight RPCs as it is destroyed, and their callbacks may point
  // into a test body that has already returned.
  ResponseCallback Guard(ResponseCallback done) {
    return [open = open_, fired = std::make_shared<bool>(false),
            done = std::move(done)](absl::StatusOr<Buffer> response) {
      if (!*open) return;
      if (*fired) {
        ADD_FAILURE() << "an RPC completed twice; second outcome: "
                      << (response.ok() ? absl::StrCat(response->size(), " bytes")
                                        : response.status().ToString());
        return;
      }
      *fired = true;
      done(std::move(response));
    };
  }
  void Close() { *open_ = false; }

 private:
  std::shared_ptr<bool> open_ = std::make_shared<bool>(true);
};

// ---------------------------------------------------------------------------------------------
// The in-memory fabric.

// A client engine on the fabric that routes each completion to the callback of its RPC.
class FabricClient : public FabricEngineNode {
 public:
  using FabricEngineNode::FabricEngineNode;

  void Start(const Address& server, Buffer request, ResponseCallback done) {
    const uint64_t cookie = next_cookie_++;
    pending_.emplace(cookie, std::move(done));
    absl::StatusOr<RpcId> id = engine().SendRequest(server, std::move(request), cookie);
    if (!id.ok()) {  // refused before sending: the engine reports no completion
      ResponseCallback cb = std::move(pending_[cookie]);
      pending_.erase(cookie);
      cb(id.status());
    }
  }

  // EngineHandler
  void OnRequest(const ServerRpcHandle& rpc, Buffer request) override {
    ADD_FAILURE() << "client " << address().ToString() << " was sent a request";
  }
  void OnResponse(RpcId id, uint64_t cookie, absl::StatusOr<Buffer> response) override {
    auto it = pending_.find(cookie);
    if (it == pending_.end()) {
      ADD_FAILURE() << "completion for an RPC that is not pending (cookie " << cookie << ")";
      return;
    }
    ResponseCallback cb = std::move(it->second);
    pending_.erase(it);
    cb(std::move(response));
  }

 private:
  uint64_t next_cookie_ = 1;
  absl::flat_hash_map<uint64_t, ResponseCallback> pending_;
};

class FabricEnv final : public ConformanceEnv {
 public:
  FabricEnv() : fabric_(&clock_, FabricOptions{}) {
    // Pacing off: the fabric's links are infinitely fast, so the pacer would only add steps.
    config_.link_mbps = 0;
    server_ = std::make_unique<FabricHost>(&fabric_, &clock_,
                                           Address::Parse("10.0.0.100:5000").value(), config_,
                                           /*echo=*/true);
  }
  ~FabricEnv() override {
    Close();
    // Nodes must not outlive their attachment (fabric.h).
    for (auto& c : clients_) fabric_.Detach(c->address());
    fabric_.Detach(server_->address());
  }

  absl::Status AddClients(int n) override {
    for (int k = 0; k < n; ++k) {
      const int i = num_clients();
      const std::string addr = absl::StrCat("10.1.", i / 250, ".", i % 250 + 1, ":40000");
      clients_.push_back(
          std::make_unique<FabricClient>(&fabric_, &clock_, Address::Parse(addr).value(), config_));
    }
    return absl::OkStatus();
  }
  int num_clients() const override { return static_cast<int>(clients_.size()); }

  void Send(int client, Buffer request, ResponseCallback done) override {
    clients_.at(client)->Start(server_->address(), std::move(request), Guard(std::move(done)));
  }

  bool RunUntil(absl::FunctionRef<bool()> finished) override {
    // Virtual time: a 64 MiB echo needs a few ms of it, a client gives up after
    // config_.timeout_ticks (100 ms), and the server forgets answered RPCs a tick after the ACK.
    return fabric_.RunUntil(finished, 10 * kNanosPerSecond);
  }

  EngineStats ServerStats() override { return server_->engine().stats(); }

 private:
  ManualClock clock_;
  Fabric fabric_;
  Config config_;
  std::unique_ptr<FabricHost> server_;
  std::vector<std::unique_ptr<FabricClient>> clients_;
};

// ---------------------------------------------------------------------------------------------
// Real sockets on loopback.

class SocketEnv final : public ConformanceEnv {
 public:
  // Errors: creating the server's socket or I/O backend failed (FAILED_PRECONDITION when the
  // kernel lacks what the backend needs, e.g. io_uring); INTERNAL if it came up on another
  // backend than `kind`.
  static absl::StatusOr<std::unique_ptr<ConformanceEnv>> Create(IoKind kind) {
    std::unique_ptr<SocketEnv> env(new SocketEnv(kind));
    // The handler needs the endpoint it belongs to; no request can arrive before Create
    // returns, because nobody knows the port yet. It runs on the server's loop thread.
    auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
    auto server = Endpoint::Create(env->Options(), [self](IncomingRequest r) {
      Buffer echo = std::move(r.payload);
      self->load()->Reply(r, std::move(echo));
    });
    if (!server.ok()) return server.status();
    if ((*server)->io_kind() != kind) {  // the suite must run on the backend it names
      return absl::InternalError(absl::StrCat("asked for ", IoKindName(kind), ", got ",
                                              IoKindName((*server)->io_kind())));
    }
    self->store(server->get());
    env->server_ = std::move(*server);
    return std::unique_ptr<ConformanceEnv>(std::move(env));
  }
  ~SocketEnv() override {
    Close();
    clients_.clear();  // before the server, so no client waits on a vanished peer
  }

  absl::Status AddClients(int n) override {
    EndpointOptions o = Options();
    o.inline_loop = true;         // driven by RunUntil on the test thread
    o.io.recv_buffer_count = 16;  // keeps many clients' receive buffers small
    for (int k = 0; k < n; ++k) {
      absl::StatusOr<std::unique_ptr<Endpoint>> c = Endpoint::Create(o);
      if (!c.ok()) return c.status();
      clients_.push_back(std::move(*c));
    }
    return absl::OkStatus();
  }
  int num_clients() const override { return static_cast<int>(clients_.size()); }

  void Send(int client, Buffer request, ResponseCallback done) override {
    clients_.at(client)->SendRequest(server_->local_address(), std::move(request),
                                     Guard(std::move(done)));
  }

  bool RunUntil(absl::FunctionRef<bool()> finished) override {
    // A failure guard, not a timing assertion: generous for two sanitized test binaries
    // sharing two cores. `finished` is checked between rounds, not inside Poll, because it may
    // be ServerStats(), a round trip to the server's loop thread.
    const MonotonicClock* clock = MonotonicClock::Get();
    const int64_t guard = clock->NowNanos() + 60 * kNanosPerSecond;
    while (!finished()) {
      if (clock->NowNanos() >= guard) return false;
      for (auto& c : clients_) c->Poll(clock->NowNanos() + 20 * kNanosPerMicro);
    }
    return true;
  }

  EngineStats ServerStats() override { return server_->stats(); }

 private:
  explicit SocketEnv(IoKind kind) : kind_(kind) {}
  EndpointOptions Options() const {
    EndpointOptions o;
    // A failure guard, not the subject: on a loaded 2-core machine a loop can be descheduled
    // for longer than the default 100 ms of silence that aborts an RPC.
    o.config.timeout_ticks = 5000;
    // Likewise the server's wait for an ACK (1 s by default): the inline clients are driven by
    // the test thread, which stops polling while it builds and checks a 64 MiB payload (over a
    // second under ASan), and an unanswered server gives up and counts the RPC abandoned.
    o.config.need_ack_give_up_ticks = 20000;
    o.io.kind = kind_;
    o.io.bind_address = Address::Loopback4(0);
    return o;
  }

  IoKind kind_;
  std::unique_ptr<Endpoint> server_;
  std::vector<std::unique_ptr<Endpoint>> clients_;
};

// ---------------------------------------------------------------------------------------------
// Payloads.

// `size` bytes in which each 8-byte word is a hash of (seed, word index): distinct across a
// 64 MiB message and between messages with different seeds (seed < 2^32).
inline Buffer Pattern(size_t size, uint64_t seed) {
  Buffer b(size);
  for (size_t off = 0; off < size; off += 8) {
    uint64_t z = (seed << 32) ^ (off / 8);  // splitmix64's finalizer
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(b.data() + off, &z, std::min<size_t>(8, size - off));
  }
  return b;
}

// Empty when `got` is exactly Pattern(size, seed); otherwise a short description of the first
// difference (never the bytes themselves: a 64 MiB diff helps nobody).
inline std::string Mismatch(const absl::StatusOr<Buffer>& got, size_t size, uint64_t seed) {
  if (!got.ok()) return got.status().ToString();
  if (got->size() != size) return absl::StrCat("got ", got->size(), " bytes, sent ", size);
  if (size == 0) return "";
  const Buffer want = Pattern(size, seed);
  if (std::memcmp(got->data(), want.data(), size) == 0) return "";
  const size_t at = static_cast<size_t>(
      std::mismatch(want.data(), want.data() + size, got->data()).first - want.data());
  return absl::StrCat("first wrong byte at offset ", at, " of ", size, " (packet ",
                      at / Config().PayloadPerPacket(/*ipv6=*/false), " on IPv4)");
}

}  // namespace homarpc::transport::testing

#endif  // HOMARPC_TESTS_TRANSPORT_CONFORMANCE_ENV_H_
