#include "collectives/bench/allreduce_peers.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace bench {

namespace {

// The whole file at `path` ("" when it cannot be read).
std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

}  // namespace

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
  char tmp[] = "/tmp/lockstep-peer-XXXXXX";
  if (mkdtemp(tmp) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  const std::string out_dir = tmp;
  struct RemoveDir {
    const std::string& dir;
    ~RemoveDir() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove_dir{out_dir};
  SubprocessOptions options;
  options.argv = {path};
  options.argv.insert(options.argv.end(), peer.args.begin(), peer.args.end());
  options.stdout_file = out_dir + "/stdout";  // its JSON lines
  options.stderr_file = out_dir + "/stderr";  // its messages, for an error
  options.parent_death_signal = SIGKILL;
  options.new_process_group = true;  // a timeout kills every rank it started
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> child, Subprocess::Start(options));
  absl::StatusOr<int> status = child->Wait(absl::Now() + timeout);
  const bool timed_out = !status.ok();
  if (timed_out || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    // The launcher's ranks too, whether it timed out or failed.
    child->SignalGroup(SIGKILL);
    if (timed_out) status = child->Wait(absl::Now() + absl::Seconds(10));
    std::string err = ReadAll(options.stderr_file);
    if (err.size() > 600) err = err.substr(err.size() - 600);
    return absl::UnavailableError(absl::StrCat(
        peer.impl, timed_out ? " timed out" : " failed", " (",
        status.ok() ? DescribeWaitStatus(*status) : status.status().ToString(), "): ", err));
  }
  const std::string text = ReadAll(options.stdout_file);
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
