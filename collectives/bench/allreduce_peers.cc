#include "collectives/bench/allreduce_peers.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace bench {

std::vector<PeerSpec> PeersFor(const std::string& transport, const std::string& which) {
  std::vector<PeerSpec> all;
  if (transport == "shm") {
    all.push_back({"mpi_vader", "mpi_allreduce", {"--btl", "vader"}});
  } else {
    all.push_back({"mpi_tcp", "mpi_allreduce", {"--btl", "tcp"}});
  }
  all.push_back({"gloo_ring_chunked", "gloo_allreduce", {"--algorithm", "ring_chunked"}});
  all.push_back({"gloo_halving_doubling", "gloo_allreduce", {"--algorithm", "halving_doubling"}});
  std::vector<PeerSpec> out;
  for (auto& p : all) {
    if (which == "all" || (which == "mpi" && p.program == "mpi_allreduce") ||
        (which == "gloo" && p.program == "gloo_allreduce")) {
      out.push_back(p);
    }
  }
  return out;
}

std::string DefaultPeersDir() {
  char buf[PATH_MAX];
  if (realpath("/proc/self/exe", buf) == nullptr) return "bench/peers";
  std::string exe(buf);
  for (int i = 0; i < 2; ++i) exe = exe.substr(0, exe.rfind('/'));
  return exe + "/bench/peers";
}

absl::StatusOr<std::map<uint64_t, PeerRow>> RunPeer(const std::string& dir, const PeerSpec& peer,
                                                    absl::Duration timeout) {
  const std::string path = absl::StrCat(dir, "/", peer.program);
  if (access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(path, " not found; build //bench/peers:", peer.program,
                                            " or pass --peers_dir"));
  }
  int out[2];
  char err_path[] = "/tmp/lockstep-peer-stderr.XXXXXX";
  int err_fd = mkstemp(err_path);
  if (pipe(out) != 0 || err_fd < 0) return absl::InternalError("pipe/mkstemp failed");
  unlink(err_path);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setpgid(0, 0);  // its own process group: a timeout kills every rank it started
    dup2(out[1], 1);
    dup2(err_fd, 2);
    close(out[0]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(path.c_str()));
    for (auto& a : peer.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  char buf[4096];
  while (true) {
    pollfd p{out[0], POLLIN, 0};
    int left =
        static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    int rc = poll(&p, 1, std::min(left, 1000));
    if (rc > 0) {
      ssize_t n = read(out[0], buf, sizeof(buf));
      if (n <= 0) break;
      text.append(buf, n);
    } else if (absl::Now() >= deadline) {
      timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::string err;
  lseek(err_fd, 0, SEEK_SET);
  ssize_t n;
  while ((n = read(err_fd, buf, sizeof(buf))) > 0) err.append(buf, n);
  close(err_fd);
  if (err.size() > 600) err = err.substr(err.size() - 600);
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(peer.impl, timed_out ? " timed out" : " failed",
                                               " (status ", status, "): ", err));
  }
  std::map<uint64_t, PeerRow> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("bytes")) continue;
    PeerRow row;
    row.time_us_p50 = j.value("time_us_p50", 0.0);
    row.busbw_gbps = j.value("busbw_gbps", 0.0);
    row.correct = j.value("correct", false);
    rows[j["bytes"].get<uint64_t>()] = row;
  }
  if (rows.empty()) return absl::UnavailableError(absl::StrCat(peer.impl, " printed no rows"));
  return rows;
}

}  // namespace bench
}  // namespace lockstep
