#include "client/local_cluster.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/status_format.h"
#include "common/net.h"
#include "common/sched.h"
#include "common/status.h"
#include "common/tf_config.h"

namespace lockstep {
namespace client {
namespace {

std::string Millis(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), "ms"); }

// realpath(3) of `path`, or "" when it does not exist.
std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : "";
}

void AddOnce(std::vector<std::string>* list, const std::string& item) {
  if (!item.empty() && std::find(list->begin(), list->end(), item) == list->end()) {
    list->push_back(item);
  }
}

}  // namespace

std::vector<std::string> BundledDataRoots() {
  std::vector<std::string> bases;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) bases.push_back(cwd);
  for (const char* var : {"BUILD_WORKSPACE_DIRECTORY", "TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') continue;
    bases.push_back(std::string(var) == "BUILD_WORKSPACE_DIRECTORY" ? v
                                                                    : absl::StrCat(v, "/lockstep"));
  }
  char self[PATH_MAX];
  if (const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1); n > 0) {
    bases.push_back(absl::StrCat(std::string(self, n), ".runfiles/lockstep"));
  }
  std::vector<std::string> roots;
  for (const std::string& base : bases) {
    const std::string dir = RealPath(absl::StrCat(base, "/examples/data"));
    if (dir.empty()) continue;
    AddOnce(&roots, dir);
    // Runfiles are symlinks into the source tree (digits) or Bazel's output tree (the
    // generated fortunes windows): the directories the data really is in.
    for (const char* name : {"digits.csv.gz", "fortunes-train.tfrecord"}) {
      const std::string file = RealPath(absl::StrCat(dir, "/", name));
      if (!file.empty()) AddOnce(&roots, file.substr(0, file.rfind('/')));
    }
  }
  return roots;
}

std::vector<std::string> LocalRootFlags(const std::string& work_dir,
                                        const std::vector<std::string>& extra) {
  std::string work = RealPath(work_dir);
  if (work.empty()) work = work_dir;
  std::vector<std::string> data = {work};
  for (const std::string& d : BundledDataRoots()) AddOnce(&data, d);
  for (const std::string& d : extra) AddOnce(&data, d);
  return {absl::StrCat("--data_root=", absl::StrJoin(data, ",")),
          absl::StrCat("--output_root=", work)};
}

absl::StatusOr<std::string> BazelBinOfSelf() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return absl::InternalError("cannot read /proc/self/exe");
  std::string exe(buf, n);
  // <bazel-bin>/client/lockstep -> <bazel-bin>
  for (int i = 0; i < 2; ++i) {
    size_t slash = exe.rfind('/');
    if (slash == std::string::npos) return absl::InternalError("unexpected executable path");
    exe.resize(slash);
  }
  return exe;
}

absl::Status LocalCluster::FillDefaults(LocalClusterOptions* options) {
  absl::StatusOr<std::string> bin = BazelBinOfSelf();
  // The daemons beside this executable (an installed or bundled bin/, as the GPU bundle's),
  // else in bazel-bin's layout.
  auto locate = [&](const char* name, const char* bazel_path) {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
      std::string dir(self, n);
      dir.resize(dir.rfind('/'));
      const std::string beside = absl::StrCat(dir, "/", name);
      if (access(beside.c_str(), X_OK) == 0) return beside;
    }
    return bin.ok() ? absl::StrCat(*bin, "/", bazel_path) : std::string();
  };
  if (options->coordinator_bin.empty()) {
    options->coordinator_bin = locate("lockstep-coordinator", "coordinator/lockstep-coordinator");
  }
  if (options->lockstepd_bin.empty()) {
    options->lockstepd_bin = locate("lockstepd", "worker/lockstepd");
  }
  if (options->work_dir.empty()) {
    std::string tmpl = "/tmp/lockstep-cluster-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create ", tmpl, ": ", strerror(errno)));
    }
    options->work_dir = tmpl;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::StartCoordinator(
    LocalClusterOptions options) {
  LS_RETURN_IF_ERROR(FillDefaults(&options));
  std::unique_ptr<LocalCluster> c(new LocalCluster(std::move(options)));
  const LocalClusterOptions& o = c->options_;
  std::string port_file = absl::StrCat(o.work_dir, "/coordinator.port");
  unlink(port_file.c_str());
  SubprocessOptions sp;
  sp.new_process_group = true;  // Ctrl-C is for `lockstep local`, which stops us in order
  sp.argv = {o.coordinator_bin, "--host=127.0.0.1", absl::StrCat("--port=", o.coordinator_port),
             absl::StrCat("--port_file=", port_file),
             absl::StrCat("--heartbeat_interval=", Millis(o.heartbeat_interval)),
             absl::StrCat("--heartbeat_timeout=", Millis(o.heartbeat_timeout)),
             // Its own job store: a coordinator started again on this work_dir finds its jobs.
             absl::StrCat("--state_dir=", o.work_dir, "/state")};
  if (o.insecure) {
    sp.argv.push_back("--insecure");
  } else {
    LS_ASSIGN_OR_RETURN(LocalCredentials credentials,
                        LocalCredentials::Create(absl::StrCat(o.work_dir, "/tls")));
    c->credentials_ = std::make_unique<LocalCredentials>(std::move(credentials));
    for (std::string& f : c->credentials_->CoordinatorFlags()) sp.argv.push_back(std::move(f));
  }
  if (o.log_to_files) sp.log_file = absl::StrCat(o.work_dir, "/coordinator.log");
  LS_ASSIGN_OR_RETURN(c->coordinator_, Subprocess::Start(sp));
  absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Now() + absl::Seconds(10));
  if (!port.ok()) {
    return Annotate(port.status(), absl::StrCat("lockstep-coordinator (see ", sp.log_file, ")"));
  }
  c->coordinator_address_ = absl::StrCat("127.0.0.1:", *port);
  LS_ASSIGN_OR_RETURN(c->client_,
                      JobServiceClient::Create(c->coordinator_address_, c->client_tls()));
  c->workers_.resize(o.workers + (o.evaluator ? 1 : 0));
  if (o.pin_workers) c->worker_cpus_ = CpusPerWorker(o.workers, o.cpu_devices, AllowedCpus());
  return c;
}

LocalCluster::~LocalCluster() { Stop(); }

TlsOptions LocalCluster::client_tls() const {
  if (credentials_ == nullptr) return TlsOptions{.insecure = true};
  return credentials_->Operator();
}

std::vector<std::string> LocalCluster::cli_flags() const {
  if (credentials_ == nullptr) return {"--insecure"};
  return credentials_->OperatorFlags();
}

std::string LocalCluster::StaticTfConfig(int i) const {
  // Addresses are labels the coordinator checks for uniqueness; lockstepd does not bind
  // its TF_CONFIG address yet (the data plane will).
  ClusterMap cluster;
  for (int w = 0; w < options_.workers; ++w) {
    cluster["worker"].push_back(absl::StrCat("127.0.0.1:", 20000 + w));
  }
  if (options_.evaluator) {
    cluster["evaluator"].push_back(absl::StrCat("127.0.0.1:", 20000 + options_.workers));
  }
  const TaskRef task = i < options_.workers ? TaskRef{"worker", i} : TaskRef{"evaluator", 0};
  return TfConfig::Create(cluster, task).value().ToJson();
}

absl::Status LocalCluster::StartWorker(int i) {
  if (i < 0 || i >= static_cast<int>(workers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", i, " out of range"));
  }
  if (workers_[i] != nullptr && workers_[i]->running()) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", i, " is running"));
  }
  SubprocessOptions sp;
  sp.new_process_group = true;  // Ctrl-C is for `lockstep local`, which stops us in order
  sp.argv = {options_.lockstepd_bin, absl::StrCat("--coordinator=", coordinator_address_),
             absl::StrCat("--cpu_devices=", options_.cpu_devices),
             absl::StrCat("--state_dir=", options_.work_dir, "/worker-", i)};
  if (!worker_cpus_.empty()) {
    sp.argv.push_back(absl::StrCat("--cpu_affinity=", FormatCpuList(worker_cpus_[i])));
  }
  for (std::string& f : LocalRootFlags(options_.work_dir, options_.data_roots)) {
    sp.argv.push_back(std::move(f));
  }
  TlsOptions tls{.insecure = true};
  if (credentials_ != nullptr) {
    const bool evaluator = i == options_.workers;
    LS_ASSIGN_OR_RETURN(tls, credentials_->Daemon(evaluator ? std::string("evaluator-0")
                                                            : absl::StrCat("worker-", i)));
  }
  for (std::string& f : LocalCredentials::Flags(tls)) sp.argv.push_back(std::move(f));
  sp.unset_env = {"TF_CONFIG", "LOCKSTEP_COORDINATOR"};
  if (auto env = options_.worker_env.find(i); env != options_.worker_env.end()) {
    sp.env = env->second;
  }
  if (!options_.gpus.empty()) {
    sp.argv.push_back(absl::StrCat("--gpus=", options_.gpus));
    sp.env.emplace_back("NCCL_HOSTID", absl::StrCat("lockstep-local-", i));
  }
  if (options_.static_tf_config || i == options_.workers) {
    std::string path = absl::StrCat(options_.work_dir, "/tf_config.", i, ".json");
    std::ofstream(path) << StaticTfConfig(i);
    sp.argv.push_back(absl::StrCat("--tf_config=", path));
  }
  if (options_.log_to_files) {
    sp.log_file = absl::StrCat(options_.work_dir, "/lockstepd.", i, ".log");
  }
  LS_ASSIGN_OR_RETURN(workers_[i], Subprocess::Start(sp));
  return absl::OkStatus();
}

absl::Status LocalCluster::StartWorkers() {
  for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
    if (workers_[i] == nullptr || !workers_[i]->running()) LS_RETURN_IF_ERROR(StartWorker(i));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::GetClusterStatusResponse> LocalCluster::Status() {
  return client_->GetClusterStatus();
}

absl::StatusOr<v1::GetClusterStatusResponse> LocalCluster::WaitFor(
    const std::function<bool(const v1::GetClusterStatusResponse&)>& done, absl::Time deadline,
    absl::Duration poll) {
  absl::StatusOr<v1::GetClusterStatusResponse> last;
  while (true) {
    last = Status();
    if (last.ok() && done(*last)) return last;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the cluster did not reach the expected state in time; last status:\n",
                       last.ok() ? FormatStatusTable(*last) : last.status().ToString(),
                       "logs are in ", options_.work_dir));
    }
    absl::SleepFor(poll);
  }
}

absl::StatusOr<v1::GetClusterStatusResponse> LocalCluster::WaitForAlive(int n,
                                                                        absl::Time deadline) {
  return WaitFor(
      [n](const v1::GetClusterStatusResponse& s) { return CountInState(s, v1::ALIVE) >= n; },
      deadline);
}

void LocalCluster::StopWorkers() {
  for (auto& w : workers_) {
    if (w == nullptr) continue;
    w->Signal(SIGTERM);
    w->Signal(SIGCONT);  // a stopped (SIGSTOP) worker must run to exit
  }
  for (auto& w : workers_) {
    if (w != nullptr) w->Stop(absl::Seconds(3));
  }
}

void LocalCluster::Stop() {
  StopWorkers();
  if (coordinator_ != nullptr) coordinator_->Stop(absl::Seconds(3));
}

}  // namespace client
}  // namespace lockstep
