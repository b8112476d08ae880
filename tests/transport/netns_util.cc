// netns_util: see netns_util.h. Shell-outs to `ip`, setns() threads and /proc parsing.
//
// DESIGN NOTES
// - Entering a namespace: a fresh std::thread calls setns(CLONE_NEWNET) and runs the caller's
//   function, then exits. setns on one thread of a multi-threaded process is allowed for network
//   namespaces (unlike user or mount namespaces) and changes only that thread, so the gtest main
//   thread, the sanitizer's threads and every other thread stay in the host namespace. The
//   rejected alternative, fork() + setns() in a child, would put the endpoints in another
//   process and make byte comparisons and stats go through IPC; a child of a threaded
//   process may also only call async-signal-safe functions before exec.
// - Threads started by that thread (an Endpoint's loop threads) inherit its namespace; it does
//   not matter, since a socket's namespace is fixed at socket() time.
// - Reading /proc/net from inside: /proc/self/net follows the *thread-group leader's*
//   namespace, /proc/thread-self/net follows the calling thread's, so ReadProcNet reads the
//   latter from a RunInside() thread.
// - Commands run through posix_spawnp (no shell, so names cannot be re-parsed), which is safe
//   in a threaded process: the child execs at once. Stdout and stderr are drained with poll()
//   so neither pipe can fill and stall the child.
#include "tests/transport/netns_util.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "transport/errors.h"
#include "transport/log.h"

extern char** environ;

namespace homarpc::testing {
namespace {

using transport::Address;
using transport::ErrnoToStatus;

// Closes the descriptors it holds on every return path.
struct Fds {
  int fd[4] = {-1, -1, -1, -1};
  ~Fds() {
    for (int f : fd) {
      if (f >= 0) close(f);
    }
  }
  void Close(int i) {
    if (fd[i] >= 0) close(fd[i]);
    fd[i] = -1;
  }
};

absl::Status MakeFailedPrecondition(const absl::Status& s, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", s.message()));
}

}  // namespace

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("RunCommand: empty argv");
  const std::string cmdline = absl::StrJoin(argv, " ");
  // fd[0]/fd[1]: stdout read/write ends; fd[2]/fd[3]: stderr read/write ends.
  Fds fds;
  if (pipe2(&fds.fd[0], O_CLOEXEC) != 0 || pipe2(&fds.fd[2], O_CLOEXEC) != 0) {
    return ErrnoToStatus(errno, "pipe2");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds.fd[1], 1);  // dup2 clears O_CLOEXEC
  posix_spawn_file_actions_adddup2(&actions, fds.fd[3], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err == ENOENT) return absl::NotFoundError(absl::StrCat(argv[0], ": not found in PATH"));
  if (err != 0) return ErrnoToStatus(err, absl::StrCat("posix_spawnp ", cmdline));
  fds.Close(1);
  fds.Close(3);

  std::string out, errtext;
  pollfd pfd[2] = {{fds.fd[0], POLLIN, 0}, {fds.fd[2], POLLIN, 0}};
  int open_pipes = 2;
  while (open_pipes > 0) {
    if (poll(pfd, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;  // cannot happen with valid fds; waitpid below still reaps the child
    }
    for (int i = 0; i < 2; ++i) {
      if (pfd[i].fd < 0 || pfd[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = read(pfd[i].fd, buf, sizeof(buf));
      if (n > 0) {
        (i == 0 ? out : errtext).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        pfd[i].fd = -1;  // poll ignores negative fds
        --open_pipes;
      }
    }
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, absl::StrCat("waitpid ", cmdline));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    const std::string how = WIFEXITED(wstatus) ? absl::StrCat("exit status ", WEXITSTATUS(wstatus))
                                               : absl::StrCat("signal ", WTERMSIG(wstatus));
    return absl::InternalError(
        absl::StrCat("`", cmdline, "` failed (", how, "): ", absl::StripAsciiWhitespace(errtext)));
  }
  return out;
}

absl::Status CheckNetnsPrerequisites() {
  if (const char* env = std::getenv("HOMARPC_NETNS_TEST"); env && std::string(env) == "0") {
    return absl::FailedPreconditionError("HOMARPC_NETNS_TEST=0 in the environment");
  }
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "needs root to create network namespaces (effective uid is not 0)");
  }
  absl::StatusOr<std::string> version = RunCommand({"ip", "-V"});
  if (!version.ok()) {
    return MakeFailedPrecondition(version.status(), "iproute2's `ip` is unusable");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// NetNamespace

std::string NetNamespace::UniqueName(absl::string_view prefix) {
  return absl::StrCat(prefix, "-", getpid());
}

absl::StatusOr<std::unique_ptr<NetNamespace>> NetNamespace::Create(std::string name) {
  struct stat st;
  if (stat(absl::StrCat("/var/run/netns/", name).c_str(), &st) == 0) {
    // Names carry our pid, so this is a leftover of a dead process that had the same pid.
    HOMARPC_LOG(WARNING) << "deleting stale network namespace " << name;
    (void)RunCommand({"ip", "netns", "del", name});
  }
  if (absl::StatusOr<std::string> r = RunCommand({"ip", "netns", "add", name}); !r.ok()) {
    return MakeFailedPrecondition(r.status(), "cannot create a network namespace");
  }
  // From here on the destructor deletes it, whatever fails next.
  std::unique_ptr<NetNamespace> ns(new NetNamespace(std::move(name)));
  if (absl::StatusOr<std::string> r = ns->Ip({"link", "set", "lo", "up"}); !r.ok()) {
    return r.status();
  }
  return ns;
}

NetNamespace::~NetNamespace() {
  absl::StatusOr<std::string> r = RunCommand({"ip", "netns", "del", name_});
  if (!r.ok()) {
    HOMARPC_LOG(ERROR) << "network namespace " << name_ << " left behind: " << r.status();
  }
}

absl::Status NetNamespace::RunInside(absl::FunctionRef<void()> fn) const {
  absl::Status status;
  std::thread t([&] {
    const std::string path = absl::StrCat("/var/run/netns/", name_);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      status = ErrnoToStatus(errno, absl::StrCat("open ", path));
      return;
    }
    if (setns(fd, CLONE_NEWNET) != 0) {
      status = ErrnoToStatus(errno, absl::StrCat("setns ", path));
      close(fd);
      return;
    }
    close(fd);
    fn();
  });
  t.join();
  return status;
}

absl::StatusOr<std::string> NetNamespace::Ip(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"ip", "-n", name_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

absl::StatusOr<int> NetNamespace::LinkMtu(absl::string_view ifname) const {
  absl::StatusOr<std::string> out = Ip({"-o", "link", "show", "dev", std::string(ifname)});
  if (!out.ok()) return out.status();
  // "7: hveth-a@if6: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP ..."
  std::vector<absl::string_view> words = absl::StrSplit(*out, ' ', absl::SkipEmpty());
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    int mtu = 0;
    if (words[i] == "mtu" && absl::SimpleAtoi(words[i + 1], &mtu)) return mtu;
  }
  return absl::NotFoundError(absl::StrCat("no mtu in `ip link show` output: ", *out));
}

absl::StatusOr<std::string> NetNamespace::ReadProcNet(absl::string_view file) const {
  absl::StatusOr<std::string> content;
  absl::Status entered = RunInside([&] {
    const std::string path = absl::StrCat("/proc/thread-self/net/", file);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      content = ErrnoToStatus(errno, absl::StrCat("open ", path));
      return;
    }
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    if (n < 0) {
      content = ErrnoToStatus(errno, absl::StrCat("read ", path));
    } else {
      content = std::move(text);
    }
    close(fd);
  });
  if (!entered.ok()) return entered;
  return content;
}

absl::StatusOr<int64_t> NetNamespace::ProcNetCounter(absl::string_view file,
                                                     absl::string_view group,
                                                     absl::string_view name) const {
  absl::StatusOr<std::string> text = ReadProcNet(file);
  if (!text.ok()) return text.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<absl::string_view> words = absl::StrSplit(lines[i], ' ', absl::SkipWhitespace());
    if (group.empty()) {
      // snmp6: "Ip6FragCreates                  0"
      int64_t v = 0;
      if (words.size() == 2 && words[0] == name && absl::SimpleAtoi(words[1], &v)) return v;
      continue;
    }
    // snmp: a header line and a value line, both starting with "<group>:".
    if (words.empty() || words[0] != absl::StrCat(group, ":") || i + 1 >= lines.size()) continue;
    std::vector<absl::string_view> values =
        absl::StrSplit(lines[i + 1], ' ', absl::SkipWhitespace());
    if (values.size() != words.size() || values[0] != words[0]) continue;
    for (size_t k = 1; k < words.size(); ++k) {
      int64_t v = 0;
      if (words[k] == name && absl::SimpleAtoi(values[k], &v)) return v;
    }
  }
  return absl::NotFoundError(absl::StrCat("no counter ", group, " ", name, " in /proc/net/", file,
                                          " of namespace ", name_));
}

absl::StatusOr<NetNamespace::LinkCounters> NetNamespace::Counters(absl::string_view ifname) const {
  absl::StatusOr<std::string> text = ReadProcNet("dev");
  if (!text.ok()) return text.status();
  // "  hveth-a: <rx bytes> <rx packets> errs drop fifo frame compressed multicast
  //             <tx bytes> <tx packets> ..."
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ':');
    if (absl::StripAsciiWhitespace(kv.first) != ifname) continue;
    std::vector<absl::string_view> f = absl::StrSplit(kv.second, ' ', absl::SkipWhitespace());
    LinkCounters c;
    if (f.size() < 10 || !absl::SimpleAtoi(f[0], &c.rx_bytes) ||
        !absl::SimpleAtoi(f[1], &c.rx_packets) || !absl::SimpleAtoi(f[8], &c.tx_bytes) ||
        !absl::SimpleAtoi(f[9], &c.tx_packets)) {
      return absl::InternalError(absl::StrCat("unparsable /proc/net/dev line: ", line));
    }
    return c;
  }
  return absl::NotFoundError(absl::StrCat("no interface ", ifname, " in namespace ", name_));
}

// ---------------------------------------------------------------------------------------------
// veth

namespace {

// `ip link set up` returns before the link can carry packets: the kernel's linkwatch work
// attaches the real qdisc and sets the operational state later (it is rate-limited, and under
// load can lag by a second). Until then the device has the "noop" qdisc, which drops every
// packet, so the first ARP request would vanish and the first RPC would wait a whole ARP
// retransmit interval (1 s). Wait for "state UP" with a real qdisc. Polling, because the only
// event source is an rtnetlink subscription; this is setup, not a timed assertion, and the 10 s
// limit only turns a hang into an error.
absl::Status WaitUntilOperational(const NetNamespace& ns, const std::string& ifname) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::string last;
  while (true) {
    absl::StatusOr<std::string> out = ns.Ip({"-o", "link", "show", "dev", ifname});
    if (!out.ok()) return out.status();
    if (absl::StrContains(*out, " state UP ") && !absl::StrContains(*out, " qdisc noop ")) {
      return absl::OkStatus();
    }
    last = std::move(*out);
    if (absl::Now() > deadline) {
      return absl::InternalError(absl::StrCat(
          ifname, " in ", ns.name(),
          " did not become operational within 10 s: ", absl::StripAsciiWhitespace(last)));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
}

}  // namespace

absl::StatusOr<VethLink> ConnectVeth(const NetNamespace& a, const NetNamespace& b,
                                     const VethOptions& options) {
  VethLink link;
  link.ifname_a = options.ifname_a;
  link.ifname_b = options.ifname_b;
  // Created from inside `a` with its peer moved straight into `b`: the host namespace never
  // holds either end, even for a moment.
  if (absl::StatusOr<std::string> r = a.Ip({"link", "add", options.ifname_a, "type", "veth", "peer",
                                            "name", options.ifname_b, "netns", b.name()});
      !r.ok()) {
    return MakeFailedPrecondition(r.status(), "cannot create a veth pair");
  }
  const std::string mtu = absl::StrCat(options.mtu);
  const std::string v4_a = absl::StrCat(options.ipv4_prefix, ".1");
  const std::string v4_b = absl::StrCat(options.ipv4_prefix, ".2");
  struct Step {
    const NetNamespace* ns;
    std::vector<std::string> args;
  };
  const Step steps[] = {
      {&a, {"link", "set", "dev", options.ifname_a, "mtu", mtu}},
      {&b, {"link", "set", "dev", options.ifname_b, "mtu", mtu}},
      {&a, {"addr", "add", v4_a + "/24", "dev", options.ifname_a}},
      {&b, {"addr", "add", v4_b + "/24", "dev", options.ifname_b}},
  };
  for (const Step& s : steps) {
    if (absl::StatusOr<std::string> r = s.ns->Ip(s.args); !r.ok()) return r.status();
  }
  absl::StatusOr<Address> addr_a = Address::Parse(v4_a);
  absl::StatusOr<Address> addr_b = Address::Parse(v4_b);
  if (!addr_a.ok()) return addr_a.status();
  if (!addr_b.ok()) return addr_b.status();
  link.ipv4_a = *addr_a;
  link.ipv4_b = *addr_b;

  if (!options.ipv6_prefix.empty()) {
    // nodad: the addresses are usable at once instead of "tentative" for about a second.
    const std::string v6_a = absl::StrCat(options.ipv6_prefix, "::1");
    const std::string v6_b = absl::StrCat(options.ipv6_prefix, "::2");
    absl::StatusOr<std::string> r =
        a.Ip({"-6", "addr", "add", v6_a + "/64", "dev", options.ifname_a, "nodad"});
    if (r.ok()) r = b.Ip({"-6", "addr", "add", v6_b + "/64", "dev", options.ifname_b, "nodad"});
    absl::StatusOr<Address> p6_a = Address::Parse(v6_a);
    absl::StatusOr<Address> p6_b = Address::Parse(v6_b);
    if (!r.ok()) {
      link.ipv6_error = std::string(r.status().message());
    } else if (!p6_a.ok() || !p6_b.ok()) {
      link.ipv6_error = "bad ipv6_prefix " + options.ipv6_prefix;
    } else {
      link.ipv6_a = *p6_a;
      link.ipv6_b = *p6_b;
    }
  }

  for (const Step& s : {Step{&a, {"link", "set", "dev", options.ifname_a, "up"}},
                        Step{&b, {"link", "set", "dev", options.ifname_b, "up"}}}) {
    if (absl::StatusOr<std::string> r = s.ns->Ip(s.args); !r.ok()) return r.status();
  }
  if (absl::Status s = WaitUntilOperational(a, options.ifname_a); !s.ok()) return s;
  if (absl::Status s = WaitUntilOperational(b, options.ifname_b); !s.ok()) return s;
  return link;
}

}  // namespace homarpc::testing
