// LocalCluster: a coordinator and N lockstepd on this machine's loopback, as child
// processes. Used by `lockstep local`, by the multi-process tests and by the cluster
// formation benchmark.
//
// The coordinator is started with --port=0 and --port_file, so no port is guessed. Workers
// either register dynamically (the default: the coordinator assigns indexes and each
// worker reserves a free data-plane port) or, with `static_tf_config`, each gets a
// TF_CONFIG file naming its task (so a restarted worker claims the same task).
// Unless `insecure`, the cluster runs TLS with throwaway material in work_dir/tls
// (LocalCredentials): the coordinator's certificate, one per worker ("worker-<i>", its
// identity), and an operator token that client() (the coordinator's JobService) and
// client_tls() use. No child is given a secret on its command line (where `ps` shows it):
// daemons get paths to their keys, clients a config file (cli_flags()).
// Every child dies with this process (PR_SET_PDEATHSIG); Stop() and the destructor stop
// workers first (SIGTERM: they deregister), then the coordinator, and reap them all.
//
// Ownership: owns the child processes and a coordinator client.
// Thread model: one owner thread (the one that must outlive the children).
#ifndef LOCKSTEP_CLIENT_LOCAL_CLUSTER_H_
#define LOCKSTEP_CLIENT_LOCAL_CLUSTER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/job_service_client.h"
#include "client/local_credentials.h"
#include "common/subprocess.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace client {

struct LocalClusterOptions {
  // Paths to lockstep-coordinator and lockstepd; empty: the ones beside this executable
  // in bazel-bin (BazelBinOfSelf()).
  std::string coordinator_bin;
  std::string lockstepd_bin;
  int workers = 3;
  int cpu_devices = 1;
  // Holds the port file, TF_CONFIG files, one log file per process and the coordinator's
  // job store (state/). Must exist; empty: a new directory /tmp/lockstep-cluster-XXXXXX.
  std::string work_dir;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  bool static_tf_config = false;
  // Also an evaluator task (TF_CONFIG's evaluator/0, always with a TF_CONFIG file): worker
  // index `workers` of StartWorker()/worker(), started by StartWorkers().
  bool evaluator = false;
  // Children's logs go to work_dir/<name>.log unless false (then to this stderr).
  bool log_to_files = true;
  // Gives each worker CPUs of its own (lockstepd --cpu_affinity, CpusPerWorker) when there
  // are enough (`lockstep local --pin_workers`).
  bool pin_workers = false;
  // Plaintext and no authorization (every process started with --insecure).
  bool insecure = false;
  // lockstepd's --data_root and --output_root: work_dir is both, the bundled example data
  // (LocalDataRoots) and these are data roots too. Absolute directories.
  std::vector<std::string> data_roots;
  // The coordinator's port; 0: a free one. A coordinator started again for workers that are
  // still running takes the port they know.
  int coordinator_port = 0;
  // lockstepd --gpus for every worker (`lockstep local --gpus`: "all"); empty: lockstepd's
  // default. With GPUs, worker i also gets NCCL_HOSTID=lockstep-local-<i>: the workers share
  // this host's GPUs, and NCCL refuses two ranks of one group on one GPU of one host, so each
  // worker process is its own NCCL "host" (NCCL then goes through its network transport).
  std::string gpus;
  // Extra environment of worker i (tests: LOCKSTEP_TEST_HOOKS, worker/test_hooks.h).
  std::map<int, std::vector<std::pair<std::string, std::string>>> worker_env;
};

class LocalCluster {
 public:
  // Starts the coordinator and waits (up to 10 s) for its port. Workers are started by
  // StartWorkers()/StartWorker().
  static absl::StatusOr<std::unique_ptr<LocalCluster>> StartCoordinator(
      LocalClusterOptions options);
  ~LocalCluster();

  // Starts every worker not running (indexes 0..workers-1, and the evaluator).
  absl::Status StartWorkers();
  // Starts (or restarts, after it exited) worker `i`.
  absl::Status StartWorker(int i);
  Subprocess* worker(int i) { return workers_[i].get(); }
  Subprocess* coordinator() { return coordinator_.get(); }
  // The options in use, with the defaults filled in (binaries, work_dir).
  const LocalClusterOptions& options() const { return options_; }
  std::string coordinator_address() const { return coordinator_address_; }
  // An operator's client of the coordinator (thread-safe).
  JobServiceClient* client() { return client_.get(); }
  // How a client reaches the coordinator as an operator (CA and token), or insecure.
  TlsOptions client_tls() const;
  // The same as `lockstep` CLI flags: --config=<tls>/operator.config (the CA and the
  // token, mode 0600: no token on a command line), or --insecure.
  std::vector<std::string> cli_flags() const;
  // The TLS material; null when insecure.
  const LocalCredentials* credentials() const { return credentials_.get(); }

  absl::StatusOr<v1::GetClusterStatusResponse> Status();
  // Polls the status (every `poll`) until `done` holds or the deadline passes;
  // DEADLINE_EXCEEDED carries the last status table.
  absl::StatusOr<v1::GetClusterStatusResponse> WaitFor(
      const std::function<bool(const v1::GetClusterStatusResponse&)>& done, absl::Time deadline,
      absl::Duration poll = absl::Milliseconds(5));
  // Waits until `n` tasks are ALIVE.
  absl::StatusOr<v1::GetClusterStatusResponse> WaitForAlive(int n, absl::Time deadline);

  // Stops every worker (SIGTERM: they deregister; SIGKILL after 3 s) and reaps them.
  void StopWorkers();
  // StopWorkers(), then the coordinator.
  void Stop();

 private:
  explicit LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {}
  // Fills what the caller left empty (see LocalClusterOptions).
  static absl::Status FillDefaults(LocalClusterOptions* options);
  std::string StaticTfConfig(int i) const;

  const LocalClusterOptions options_;
  std::unique_ptr<Subprocess> coordinator_;
  std::string coordinator_address_;
  std::unique_ptr<LocalCredentials> credentials_;  // null when insecure
  std::vector<std::vector<int>> worker_cpus_;      // CpusPerWorker(), when pin_workers
  std::unique_ptr<JobServiceClient> client_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
};

// Where the bundled example data (examples/data) is on this machine, as real paths: under
// the current directory, `bazel run`'s workspace, the test's or this executable's runfiles,
// and the directory its files really are in (runfiles hold symlinks to them).
std::vector<std::string> BundledDataRoots();

// lockstepd's --data_root and --output_root flags for a cluster on this machine: the work
// dir (outputs, and data put there) and the bundled example data, plus `extra` data roots.
std::vector<std::string> LocalRootFlags(const std::string& work_dir,
                                        const std::vector<std::string>& extra = {});

// The directory of this executable's bazel-bin tree: for <bazel-bin>/client/lockstep
// it is <bazel-bin>. Used to find lockstep-coordinator and lockstepd beside it.
absl::StatusOr<std::string> BazelBinOfSelf();

}  // namespace client
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_LOCAL_CLUSTER_H_
