#include "tests/netns/netns_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/local_cluster.h"
#include "common/net.h"
#include "common/status.h"
#include "common/tf_config.h"
#include "tests/test_util.h"

namespace lockstep {
namespace testing {
namespace {

std::string Millis(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), "ms"); }

}  // namespace

NetnsCluster::NetnsCluster(NetnsNetwork* net, NetnsClusterOptions options)
    : net_(net),
      options_(std::move(options)),
      workers_(options_.workers),
      worker_starts_(options_.workers, 0) {}

NetnsCluster::~NetnsCluster() { KillAll(); }

std::string NetnsCluster::Host(int host) const {
  return options_.ipv6 ? net_->Ipv6(host) : net_->Ipv4(host);
}

std::string NetnsCluster::coordinator_address() const {
  return HostPort{Host(0), kCoordinatorPort}.ToString();
}

std::string NetnsCluster::worker_address(int i) const {
  return HostPort{Host(i + 1), kWorkerPort}.ToString();
}

std::string NetnsCluster::worker_log_name(int i) const { return absl::StrCat("lockstepd.", i); }

std::string NetnsCluster::log(const std::string& name) const {
  return ReadFile(absl::StrCat(options_.work_dir, "/", name, ".log"));
}

absl::StatusOr<client::LocalCredentials*> NetnsCluster::Credentials() {
  if (credentials_ == nullptr) {
    LS_ASSIGN_OR_RETURN(client::LocalCredentials c,
                        client::LocalCredentials::Create(options_.work_dir + "/tls"));
    credentials_ = std::make_unique<client::LocalCredentials>(std::move(c));
  }
  return credentials_.get();
}

TlsOptions NetnsCluster::client_tls() const {
  TlsOptions tls = credentials_ != nullptr ? credentials_->Operator() : TlsOptions{};
  tls.server_name = "localhost";
  return tls;
}

absl::Status NetnsCluster::StartCoordinator() {
  if (coordinator_ != nullptr && coordinator_->running()) {
    return absl::FailedPreconditionError("the coordinator is running");
  }
  const std::string port_file = options_.work_dir + "/coordinator.port";
  unlink(port_file.c_str());
  SubprocessOptions sp;
  sp.argv = net_->ExecPrefix(0);
  // "::" listens on IPv6 and IPv4 alike; the fixed port lets a restarted coordinator be found.
  sp.argv.insert(
      sp.argv.end(),
      {options_.coordinator_bin, "--host=::", absl::StrCat("--port=", kCoordinatorPort),
       "--port_file=" + port_file, "--heartbeat_interval=" + Millis(options_.heartbeat_interval),
       "--heartbeat_timeout=" + Millis(options_.heartbeat_timeout),
       "--state_dir=" + options_.work_dir + "/state"});
  LS_ASSIGN_OR_RETURN(client::LocalCredentials * credentials, Credentials());
  for (std::string& f : credentials->CoordinatorFlags()) sp.argv.push_back(std::move(f));
  // Appends: a restarted coordinator's log follows the first one's.
  sp.log_file = options_.work_dir + "/coordinator.log";
  if (coordinator_starts_++ > 0) {
    sp.log_file = absl::StrCat(options_.work_dir, "/coordinator.", coordinator_starts_, ".log");
  }
  LS_ASSIGN_OR_RETURN(coordinator_, Subprocess::Start(sp));
  absl::StatusOr<int> port = WaitForPortFile(port_file, absl::Now() + absl::Seconds(10));
  if (!port.ok()) return Annotate(port.status(), "lockstep-coordinator (see " + sp.log_file + ")");
  return absl::OkStatus();
}

absl::Status NetnsCluster::StartWorker(int i) {
  if (workers_[i] != nullptr && workers_[i]->running()) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", i, " is running"));
  }
  ClusterMap cluster;
  for (int w = 0; w < options_.workers; ++w) cluster["worker"].push_back(worker_address(w));
  LS_ASSIGN_OR_RETURN(TfConfig tf, TfConfig::Create(cluster, TaskRef{"worker", i}));
  const std::string tf_path = absl::StrCat(options_.work_dir, "/tf_config.", i, ".json");
  std::ofstream(tf_path) << tf.ToJson();
  SubprocessOptions sp;
  sp.argv = net_->ExecPrefix(i + 1);
  sp.argv.insert(sp.argv.end(), {options_.lockstepd_bin, "--coordinator=" + coordinator_address(),
                                 "--tf_config=" + tf_path, "--transport=tcp", "--cpu_devices=1",
                                 absl::StrCat("--state_dir=", options_.work_dir, "/worker-", i)});
  LS_ASSIGN_OR_RETURN(client::LocalCredentials * credentials, Credentials());
  LS_ASSIGN_OR_RETURN(TlsOptions tls, credentials->Daemon(absl::StrCat("worker-", i)));
  for (std::string& f : client::LocalCredentials::Flags(tls)) sp.argv.push_back(std::move(f));
  // The name the throwaway coordinator certificate carries (it is reached at 10.77.0.1).
  sp.argv.push_back("--tls_server_name=localhost");
  for (std::string& f : client::LocalRootFlags(options_.work_dir)) sp.argv.push_back(std::move(f));
  sp.unset_env = {"TF_CONFIG", "LOCKSTEP_COORDINATOR"};
  sp.log_file = absl::StrCat(options_.work_dir, "/", worker_log_name(i), ".log");
  if (worker_starts_[i]++ > 0) {
    sp.log_file =
        absl::StrCat(options_.work_dir, "/", worker_log_name(i), ".", worker_starts_[i], ".log");
  }
  LS_ASSIGN_OR_RETURN(workers_[i], Subprocess::Start(sp));
  return absl::OkStatus();
}

absl::Status NetnsCluster::StartWorkers() {
  for (int i = 0; i < options_.workers; ++i) LS_RETURN_IF_ERROR(StartWorker(i));
  return absl::OkStatus();
}

std::vector<pid_t> NetnsCluster::Running() {
  std::vector<pid_t> pids;
  if (coordinator_ != nullptr && coordinator_->running()) pids.push_back(coordinator_->pid());
  for (auto& w : workers_) {
    if (w != nullptr && w->running()) pids.push_back(w->pid());
  }
  return pids;
}

void NetnsCluster::KillAll() {
  for (auto& w : workers_) {
    if (w == nullptr) continue;
    w->Signal(SIGCONT);
    w->Stop(absl::ZeroDuration());
  }
  if (coordinator_ != nullptr) coordinator_->Stop(absl::ZeroDuration());
}

}  // namespace testing
}  // namespace lockstep
