// NetnsCluster: a real Lockstep cluster across the hosts of a NetnsNetwork, as on separate
// machines: `lockstep-coordinator` in host 0 and one `lockstepd` per host 1..N, each started
// with `ip netns exec`, the workers with --transport=tcp, a TF_CONFIG naming every worker by
// its host's address (IPv4, or bracketed IPv6 with `ipv6`) and a --state_dir of its own.
// The coordinator listens on a fixed port of host 0 (kCoordinatorPort: the namespace is
// ours alone, so nothing else can hold it), so a coordinator started again is found by the
// workers at the same address.
//
// Faults are the caller's: SIGKILL/SIGSTOP/SIGCONT through worker(i)->Signal(),
// coordinator()->Signal(); StartWorker(i) / StartCoordinator() start one again after it
// exited; the network's Partition()/Loss()/Delay() act on hosts. The destructor kills (SIGCONT,
// then SIGKILL) and reaps every process; the network outlives it (it is the caller's).
//
// Ownership: owns the processes, borrows the network. Thread model: one owner thread, which
// must outlive the processes (PR_SET_PDEATHSIG), and which, to reach the coordinator, is in
// host 0's namespace (NetnsNetwork::EnterHost(0)).
#ifndef LOCKSTEP_TESTS_NETNS_NETNS_CLUSTER_H_
#define LOCKSTEP_TESTS_NETNS_NETNS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/local_credentials.h"
#include "common/subprocess.h"
#include "tests/netns/netns_network.h"

namespace lockstep {
namespace testing {

struct NetnsClusterOptions {
  std::string coordinator_bin;
  std::string lockstepd_bin;
  int workers = 2;  // on hosts 1..workers; the network needs workers + 1 hosts
  // Holds the port file, TF_CONFIG files, logs (<name>.log), the coordinator's state and
  // the workers' state directories (worker-<i>). Must exist.
  std::string work_dir;
  absl::Duration heartbeat_interval = absl::Milliseconds(150);
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  bool ipv6 = false;  // addresses in TF_CONFIG and --coordinator: IPv6 ("[fd00::2]:2222")
};

class NetnsCluster {
 public:
  static constexpr int kCoordinatorPort = 7000;
  static constexpr int kWorkerPort = 2222;

  // Starts nothing yet.
  NetnsCluster(NetnsNetwork* net, NetnsClusterOptions options);
  ~NetnsCluster();
  NetnsCluster(const NetnsCluster&) = delete;
  NetnsCluster& operator=(const NetnsCluster&) = delete;

  // Starts (or starts again, after it exited) the coordinator; waits up to 10 s for it to
  // listen.
  absl::Status StartCoordinator();
  // Starts (or starts again) worker `i`, on host i + 1.
  absl::Status StartWorker(int i);
  absl::Status StartWorkers();

  Subprocess* coordinator() { return coordinator_.get(); }
  Subprocess* worker(int i) { return workers_[i].get(); }
  // host:port of the coordinator on host 0 ("10.77.0.1:7000", "[fd00::1]:7000").
  std::string coordinator_address() const;
  std::string worker_address(int i) const;
  const NetnsClusterOptions& options() const { return options_; }
  std::string log(const std::string& name) const;  // the text of <work_dir>/<name>.log
  std::string worker_log_name(int i) const;        // "lockstepd.<i>"
  // Pids of every process started so far that has not been reaped.
  std::vector<pid_t> Running();
  // Kills (SIGCONT first, for stopped ones, then SIGKILL) and reaps every process.
  void KillAll();
  // An operator's TLS options for the test's own clients (the cluster runs mutual TLS with
  // throwaway material in <work_dir>/tls, as `lockstep local` does; the coordinator's
  // certificate names "localhost", which every client asks for).
  TlsOptions client_tls() const;

 private:
  std::string Host(int host) const;
  // The material, made on first use.
  absl::StatusOr<client::LocalCredentials*> Credentials();
  std::unique_ptr<client::LocalCredentials> credentials_;

  NetnsNetwork* const net_;
  const NetnsClusterOptions options_;
  std::unique_ptr<Subprocess> coordinator_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
  int coordinator_starts_ = 0;
  std::vector<int> worker_starts_;
};

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_NETNS_NETNS_CLUSTER_H_
