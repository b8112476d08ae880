// homarpc-demo: the transport's main job until the RPC runtime exists. An echo server process
// and a client process exchange messages of several sizes over Homa/UDP on loopback, and the
// client prints round-trip percentiles and goodput per size.
//
//   homarpc-demo                          # forks a server, runs the client against it
//   homarpc-demo --role=server --port=5000
//   homarpc-demo --role=client --server=127.0.0.1:5000 --sizes=64,1M
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "tools/bench/parse.h"
#include "tools/bench/stats.h"
#include "transport/clock.h"
#include "transport/endpoint.h"

ABSL_FLAG(std::string, role, "both", "both (fork a server and run the client), server, client");
ABSL_FLAG(std::string, server, "", "client: server address, e.g. 127.0.0.1:5000");
ABSL_FLAG(int, port, 0, "server: UDP port to bind (0 = any)");
ABSL_FLAG(std::string, bind, "127.0.0.1",
          "server: address to bind, e.g. 0.0.0.0 inside a testbed host (tools/testbed.sh)");
ABSL_FLAG(std::string, sizes, "64,1K,16K,64K,1M,16M", "message sizes (suffixes K, M)");
ABSL_FLAG(int, count, 200, "round trips per size (fewer for sizes over 1 MiB)");
ABSL_FLAG(int, spin_us, 50, "spin this long before sleeping (0 = block at once)");
ABSL_FLAG(std::string, io_backend, "auto", "auto, uring or epoll");
ABSL_FLAG(int, mtu, 0, "MTU the transport packetizes for; 0 = each peer's route MTU (max 9000)");
ABSL_FLAG(int, link_mbps, 0,
          "uplink rate to pace to in Mbit/s; 0 = no pacing (loopback). Match the testbed's "
          "link rate there (tools/testbed.sh --rate)");

namespace homarpc::transport {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "homarpc-demo: %s\n", message.c_str());
  std::exit(2);
}

EndpointOptions OptionsFromFlags() {
  EndpointOptions o;
  o.config.poll_usecs = static_cast<uint32_t>(absl::GetFlag(FLAGS_spin_us));
  if (absl::GetFlag(FLAGS_mtu) < 0) Die("--mtu must be 0 (the route's) or positive");
  o.config.SetMtuOrRoute(static_cast<uint32_t>(absl::GetFlag(FLAGS_mtu)));
  // Loopback has no NIC to protect from queueing (the default 0 sends as fast as granted);
  // on a shaped testbed link, pace to its rate.
  const int link_mbps = absl::GetFlag(FLAGS_link_mbps);
  if (link_mbps < 0) Die("--link_mbps must not be negative");
  o.config.link_mbps = static_cast<uint32_t>(link_mbps);
  o.config.FitToLink();  // slow links: later RESENDs, fewer bytes in flight
  const std::string io = absl::GetFlag(FLAGS_io_backend);
  const std::optional<IoKind> kind = transport::ParseIoKind(io);
  if (!kind.has_value()) {
    Die(absl::StrCat("--io_backend must be auto, uring or epoll, not '", io, "'"));
  }
  o.io.kind = *kind;
  if (absl::Status s = o.config.Validate(); !s.ok()) Die(std::string(s.message()));
  return o;
}

// Runs an echo server until killed. Writes the bound port to `port_fd` if >= 0.
int RunServer(int port_fd) {
  EndpointOptions o = OptionsFromFlags();
  absl::StatusOr<Address> bind =
      Address::Parse(absl::GetFlag(FLAGS_bind), static_cast<uint16_t>(absl::GetFlag(FLAGS_port)));
  if (!bind.ok()) Die(absl::StrCat("--bind: ", bind.status().message()));
  o.io.bind_address = *bind;
  auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
  auto ep = Endpoint::Create(o, [self](IncomingRequest r) {
    Buffer echo = std::move(r.payload);
    self->load()->Reply(r, std::move(echo));
  });
  if (!ep.ok()) Die(absl::StrCat("server: ", ep.status().ToString()));
  self->store(ep->get());
  const uint16_t port = (*ep)->local_address().port();
  if (port_fd >= 0) {
    if (write(port_fd, &port, sizeof(port)) != sizeof(port)) Die("server: cannot report port");
    close(port_fd);
  } else {
    std::printf("echo server on %s (%s)\n", (*ep)->local_address().ToString().c_str(),
                IoKindName((*ep)->io_kind()));
    std::fflush(stdout);
  }
  pause();  // until a signal ends the process
  return 0;
}

int RunClient(const Address& server) {
  // The benchmark's size parser (suffixes, range checks); the demo also allows 0-byte messages.
  std::vector<size_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    if (s == "0") {
      sizes.push_back(0);
      continue;
    }
    absl::StatusOr<uint64_t> n = bench::ParseByteSize(s);
    if (!n.ok()) Die(absl::StrCat("--sizes: ", n.status().message()));
    sizes.push_back(static_cast<size_t>(*n));
  }
  const int count = absl::GetFlag(FLAGS_count);
  if (count < 1) Die("--count must be at least 1");
  EndpointOptions options = OptionsFromFlags();
  options.inline_loop = true;  // this thread drives the client's loop: no hand-off per call
  // Any local address of the server's family, so a server on another host (a testbed
  // namespace) is reachable, not only one on loopback.
  options.io.bind_address = Address::Parse(server.is_v6() ? "[::]:0" : "0.0.0.0:0").value();
  auto ep = Endpoint::Create(options);
  if (!ep.ok()) Die(absl::StrCat("client: ", ep.status().ToString()));
  const std::string mtu = absl::GetFlag(FLAGS_mtu) > 0 ? absl::StrCat(absl::GetFlag(FLAGS_mtu))
                                                       : std::string("the route's (max 9000)");
  std::printf("Homa/UDP echo to %s, backend %s, MTU %s, spin %d us\n\n",
              server.ToString().c_str(), IoKindName((*ep)->io_kind()), mtu.c_str(),
              absl::GetFlag(FLAGS_spin_us));
  std::printf("| size | round trips | p50 us | p99 us | goodput Gbit/s |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  const Clock* clock = MonotonicClock::Get();
  for (size_t size : sizes) {
    const int n = size > (1u << 20) ? std::max(count / 10, 5) : count;
    Buffer payload(size);
    for (size_t i = 0; i < size; ++i) payload.data()[i] = static_cast<uint8_t>(i * 13);
    std::vector<int64_t> rtts;
    int64_t total = 0;
    for (int i = 0; i < n + 3; ++i) {  // 3 warm-up round trips
      Buffer req = Buffer::CopyOf(payload.view());
      const int64_t start = clock->NowNanos();
      absl::StatusOr<Buffer> resp = (*ep)->Call(server, std::move(req));
      const int64_t rtt = clock->NowNanos() - start;
      if (!resp.ok()) Die(absl::StrCat("size ", size, ": ", resp.status().ToString()));
      if (resp->view() != payload.view()) Die(absl::StrCat("size ", size, ": echo corrupted"));
      if (i >= 3) {
        rtts.push_back(rtt);
        total += rtt;
      }
    }
    // Goodput counts the bytes moved in both directions.
    const double gbps = 2.0 * static_cast<double>(size) * n * 8 / static_cast<double>(total);
    const bench::LatencySummary summary = bench::Summarize(std::move(rtts));
    std::printf("| %zu | %d | %.1f | %.1f | %.2f |\n", size, n, summary.p50_ns / 1000.0,
                summary.p99_ns / 1000.0, gbps);
    std::fflush(stdout);
  }
  const EngineStats st = (*ep)->stats();
  const IoStats io = (*ep)->io_stats();
  std::printf(
      "\nclient: %llu DATA packets sent, %llu retransmitted, %llu RESENDs sent, %llu restarts, "
      "%llu timeouts, %llu datagrams received (%llu per receive batch)\n",
      static_cast<unsigned long long>(st.packets_sent[static_cast<int>(wire::PacketType::kData)]),
      static_cast<unsigned long long>(st.retransmitted_packets),
      static_cast<unsigned long long>(st.resends_sent),
      static_cast<unsigned long long>(st.restarts),
      static_cast<unsigned long long>(st.client_timeouts),
      static_cast<unsigned long long>(io.datagrams_received),
      static_cast<unsigned long long>(io.recv_batches ? io.datagrams_received / io.recv_batches
                                                      : 0));
  return 0;
}

int RunBoth() {
  int fds[2];
  if (pipe(fds) != 0) Die("pipe failed");
  pid_t child = fork();
  if (child < 0) Die("fork failed");
  if (child == 0) {
    // The server goes when the client does, even if the client is killed.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1) _exit(0);
    close(fds[0]);
    return RunServer(fds[1]);
  }
  close(fds[1]);
  uint16_t port = 0;
  if (read(fds[0], &port, sizeof(port)) != sizeof(port)) Die("the server process did not start");
  close(fds[0]);
  int rc = RunClient(Address::Loopback4(port));
  kill(child, SIGTERM);
  waitpid(child, nullptr, 0);
  return rc;
}

}  // namespace
}  // namespace homarpc::transport

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Homa/UDP echo demo: round-trip percentiles and goodput by size");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "homarpc-demo: unexpected argument '%s'\n", rest[1]);
    return 2;
  }
  using namespace homarpc::transport;
  const std::string role = absl::GetFlag(FLAGS_role);
  if (role == "both") return RunBoth();
  if (role == "server") return RunServer(-1);
  if (role == "client") {
    absl::StatusOr<Address> server = Address::Parse(absl::GetFlag(FLAGS_server));
    if (!server.ok()) {
      std::fprintf(stderr, "homarpc-demo: --server: %s\n",
                   std::string(server.status().message()).c_str());
      return 2;
    }
    return RunClient(*server);
  }
  std::fprintf(stderr, "homarpc-demo: --role must be both, server or client, not '%s'\n",
               role.c_str());
  return 2;
}
