#include "tests/netns/netns_network.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "tests/test_util.h"

namespace lockstep {
namespace testing {
namespace {

constexpr char kPrefix[] = "lsnt";
constexpr char kPartitionTable[] = "lockstep_partition";
constexpr char kLossTable[] = "lockstep_loss";

std::string FirstExecutable(std::initializer_list<const char*> paths) {
  for (const char* p : paths) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

std::string NftTool() { return FirstExecutable({"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"}); }

// Deletes namespaces named lsnt<pid>-... whose creating process is gone (a crashed or
// timed-out earlier run), so that they do not pile up.
void DeleteStaleNamespaces(NetnsNetwork* net) {
  DIR* d = opendir("/run/netns");
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    absl::string_view name = e->d_name;
    if (!absl::ConsumePrefix(&name, kPrefix)) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(name.substr(0, name.find('-')), &pid)) continue;
    if (pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(e->d_name);
  }
  closedir(d);
  for (const std::string& ns : stale) net->Run({IpTool(), "netns", "delete", ns}).IgnoreError();
}

// True when `ip`'s output says it was not allowed to (missing capability, a read-only or
// unwritable /run/netns), rather than that something else went wrong.
bool IsRefusal(absl::string_view output) {
  for (absl::string_view refusal :
       {"Operation not permitted", "Permission denied", "Read-only file system"}) {
    if (absl::StrContains(output, refusal)) return true;
  }
  return false;
}

}  // namespace

std::string IpTool() {
  return FirstExecutable({"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"});
}

absl::StatusOr<std::unique_ptr<NetnsNetwork>> NetnsNetwork::Create(int hosts,
                                                                   const std::string& log_dir) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("network namespaces need root (euid is ", geteuid(),
                     "); run as root (CI does) to run the multi-host tier"));
  }
  if (IpTool().empty()) {
    return absl::FailedPreconditionError("no `ip` (iproute2) on this machine");
  }
  if (hosts < 1 || hosts > 200) return absl::InvalidArgumentError("hosts: 1..200");
  std::unique_ptr<NetnsNetwork> net(
      new NetnsNetwork(absl::StrCat(kPrefix, getpid(), "-"), log_dir + "/netns_commands.log"));
  DeleteStaleNamespaces(net.get());
  // A first namespace tells whether we may make them at all (a container without
  // CAP_SYS_ADMIN, or with /run/netns read-only, may not).
  net->bridge_ns_ = net->prefix_ + "br";
  // Only a refusal (no capability, /run/netns not writable) is FAILED_PRECONDITION, which a
  // test may skip on; any other failure stays INTERNAL and fails the test.
  absl::Status made = net->Run({IpTool(), "netns", "add", net->bridge_ns_});
  if (!made.ok()) {
    if (!IsRefusal(made.message())) return made;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a network namespace (needs CAP_SYS_ADMIN and CAP_NET_ADMIN): ",
                     made.message()));
  }
  net->namespaces_.push_back(net->bridge_ns_);
  LS_RETURN_IF_ERROR(net->Build(hosts));
  return net;
}

absl::Status NetnsNetwork::Build(int hosts) {
  const std::string ip = IpTool();
  LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "add", "br0", "type", "bridge"}));
  LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "set", "br0", "up"}));
  for (int i = 0; i < hosts; ++i) {
    const std::string ns = absl::StrCat(prefix_, "h", i);
    LS_RETURN_IF_ERROR(Run({ip, "netns", "add", ns}));
    namespaces_.push_back(ns);
    const std::string port = absl::StrCat("p", i);
    // Both ends are made inside the namespaces: the starting namespace never sees them.
    LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "add", port, "type", "veth", "peer",
                            "name", "eth0", "netns", ns}));
    LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "set", port, "master", "br0"}));
    LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "set", port, "up"}));
    LS_RETURN_IF_ERROR(Run({ip, "-n", ns, "link", "set", "lo", "up"}));
    LS_RETURN_IF_ERROR(Run({ip, "-n", ns, "addr", "add", Ipv4(i) + "/24", "dev", "eth0"}));
    // nodad: usable at once (duplicate address detection would hold it tentative ~1 s).
    LS_RETURN_IF_ERROR(Run({ip, "-n", ns, "addr", "add", Ipv6(i) + "/64", "dev", "eth0", "nodad"}));
    LS_RETURN_IF_ERROR(Run({ip, "-n", ns, "link", "set", "eth0", "up"}));
  }
  return absl::OkStatus();
}

NetnsNetwork::~NetnsNetwork() {
  for (const auto& [host, pid] : relays_) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
  // Deleting a namespace deletes its interfaces, and with them the veth peers.
  for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
    absl::Status s = Run({IpTool(), "netns", "delete", *it});
    if (!s.ok()) fprintf(stderr, "netns teardown: %s\n", s.ToString().c_str());
  }
}

std::string NetnsNetwork::Ipv4(int host) const { return absl::StrCat("10.77.0.", host + 1); }
std::string NetnsNetwork::Ipv6(int host) const { return absl::StrCat("fd00::", host + 1); }

// namespaces_[0] is the bridge's namespace.
const std::string& NetnsNetwork::ns(int host) const { return namespaces_[host + 1]; }
int NetnsNetwork::hosts() const { return static_cast<int>(namespaces_.size()) - 1; }

std::vector<std::string> NetnsNetwork::ExecPrefix(int host) const {
  return {IpTool(), "netns", "exec", ns(host)};
}

absl::Status NetnsNetwork::EnterHost(int host) {
  const std::string path = "/run/netns/" + ns(host);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  int rc = setns(fd, CLONE_NEWNET);
  int err = errno;
  close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("setns ", path, ": ", std::strerror(err)));
  return absl::OkStatus();
}

absl::Status NetnsNetwork::AddNftTable(int host, const std::string& table,
                                       const std::string& in_rule, const std::string& out_rule) {
  const std::string nft = NftTool();
  if (nft.empty()) {
    return absl::FailedPreconditionError("no `nft` (Debian package nftables; tools/bootstrap.sh)");
  }
  // Priority -300 (raw): before connection tracking and every other filter.
  const std::string rules = absl::StrCat(
      "table inet ", table, " {\n", "  chain in { type filter hook input priority -300; ", in_rule,
      " }\n", "  chain out { type filter hook output priority -300; ", out_rule, " }\n}\n");
  const std::string file = absl::StrCat(log_, ".", table, ".nft");
  std::ofstream(file) << rules;
  std::vector<std::string> argv = ExecPrefix(host);
  argv.insert(argv.end(), {nft, "-f", file});
  return Run(argv);
}

absl::Status NetnsNetwork::DeleteNftTable(int host, const std::string& table) {
  std::vector<std::string> argv = ExecPrefix(host);
  argv.insert(argv.end(), {NftTool(), "delete", "table", "inet", table});
  return Run(argv);
}

absl::Status NetnsNetwork::Partition(int host) {
  return AddNftTable(host, kPartitionTable, "policy drop; iif lo accept;",
                     "policy drop; oif lo accept;");
}

absl::Status NetnsNetwork::Heal(int host) { return DeleteNftTable(host, kPartitionTable); }

absl::Status NetnsNetwork::Loss(int host, int percent) {
  return AddNftTable(
      host, kLossTable,
      absl::StrCat("policy accept; iif != lo numgen random mod 100 < ", percent, " drop;"),
      absl::StrCat("policy accept; oif != lo numgen random mod 100 < ", percent, " drop;"));
}

absl::Status NetnsNetwork::ClearLoss(int host) { return DeleteNftTable(host, kLossTable); }

absl::Status NetnsNetwork::Delay(int host, absl::Duration delay, int loss_percent, uint32_t seed,
                                 const std::string& relay_bin) {
  if (relays_.count(host) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("host ", host, " is already delayed"));
  }
  if (access(relay_bin.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("relay_bin: no program at ", relay_bin));
  }
  const std::string ip = IpTool();
  const std::string port = absl::StrCat("p", host);     // the host's veth peer, a bridge port
  const std::string relay = absl::StrCat("r", host);    // the relay's end of a new pair ...
  const std::string bridged = absl::StrCat("q", host);  // ... whose other end joins the bridge
  LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "set", port, "nomaster"}));
  LS_RETURN_IF_ERROR(
      Run({ip, "-n", bridge_ns_, "link", "add", relay, "type", "veth", "peer", "name", bridged}));
  LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "set", bridged, "master", "br0"}));
  LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "set", bridged, "up"}));
  LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "set", relay, "up"}));
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  const std::vector<std::string> args = {
      relay_bin,
      port,
      relay,
      absl::StrCat("--delay_ms=", absl::ToInt64Milliseconds(delay)),
      absl::StrCat("--loss_percent=", loss_percent),
      absl::StrCat("--seed=", seed)};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string ns_path = "/run/netns/" + bridge_ns_;
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    const int fd = open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(127);
    dup2(ready[1], STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(ready[1]);
  relays_[host] = pid;
  // The relay prints "relaying" once both of its sockets are bound.
  char got[16] = {};
  pollfd p{ready[0], POLLIN, 0};
  const bool up = poll(&p, 1, 10000) == 1 && read(ready[0], got, sizeof(got) - 1) > 0 &&
                  absl::StartsWith(got, "relaying");
  close(ready[0]);
  if (!up) {
    ClearDelay(host).IgnoreError();
    return absl::InternalError(absl::StrCat(relay_bin, " did not start relaying ", port, " <-> ",
                                            relay, " in ", bridge_ns_));
  }
  return absl::OkStatus();
}

absl::Status NetnsNetwork::ClearDelay(int host) {
  auto it = relays_.find(host);
  if (it == relays_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("host ", host, " is not delayed"));
  }
  kill(it->second, SIGTERM);
  waitpid(it->second, nullptr, 0);
  relays_.erase(it);
  const std::string ip = IpTool();
  LS_RETURN_IF_ERROR(Run({ip, "-n", bridge_ns_, "link", "del", absl::StrCat("r", host)}));
  return Run({ip, "-n", bridge_ns_, "link", "set", absl::StrCat("p", host), "master", "br0"});
}

absl::Status NetnsNetwork::Run(const std::vector<std::string>& argv) {
  const std::string out = log_ + ".last";
  Result r = RunTool(argv, out, {}, absl::Seconds(30));
  std::ofstream(log_, std::ios::app) << "$ " << absl::StrJoin(argv, " ") << "\n"
                                     << r.output << "-> exit " << r.exit_code << "\n";
  if (r.exit_code != 0) {
    return absl::InternalError(
        absl::StrCat("`", absl::StrJoin(argv, " "), "` exited ", r.exit_code, ": ", r.output));
  }
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace lockstep
