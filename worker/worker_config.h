// WorkerConfig: lockstepd's startup configuration, resolved once from its flags, TF_CONFIG
// and its environment by ResolveWorkerConfig, a function without side effects (the
// environment, files and the host name come in through WorkerEnvironment) and with a unit
// test per rule (worker_config_test.cc). worker/main.cc parses the flags, calls it, and
// wires what it returns: the data-plane port it reserves, the devices it probes, the file
// roots it makes, the client, the agent and the job runner. Every error is
// INVALID_ARGUMENT (NOT_FOUND for a --tf_config file it cannot read) naming the flag or the
// variable at fault; main exits 2 (a bad configuration) with its message.
//
// Where each setting comes from, first match wins:
//   task         TF_CONFIG (--tf_config=FILE, else $TF_CONFIG), else the host name's ordinal
//                (--task_index_from_hostname; not with a TF_CONFIG), else none: the
//                coordinator assigns one when the worker registers.
//   coordinator  --coordinator, else $LOCKSTEP_COORDINATOR; required.
//   address      --address, else TF_CONFIG's, else a port reserved at start (reserve_port)
//                on loopback when the coordinator is on loopback, else on every interface,
//                reported under --host, else 127.0.0.1 (loopback) or the host name.
//   state_dir    --state_dir, else $STATE_DIRECTORY (its first entry), else
//                /var/lib/lockstepd; --data_root / --output_root default under it.
// Thread model: a value type and a pure function.
#ifndef LOCKSTEP_WORKER_WORKER_CONFIG_H_
#define LOCKSTEP_WORKER_WORKER_CONFIG_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/types.h"
#include "common/daemon_flags.h"
#include "common/tf_config.h"
#include "common/tls_options.h"
#include "worker/test_hooks.h"

namespace lockstep {
namespace worker {

// lockstepd's flags as parsed, before any default or rule is applied.
struct WorkerFlags {
  DaemonFlags daemon;  // the flags both daemons define (common/daemon_flags.h)
  std::string coordinator;
  std::string tf_config;  // a file name
  int cpu_devices = 1;
  std::string gpus;
  std::string address;
  std::string transport = "auto";
  int data_port = 0;
  absl::Duration preemption_grace = absl::Seconds(15);
  int retained_checkpoint_copies = 2;
  std::string data_root;    // comma-separated
  std::string output_root;  // comma-separated
  std::string tls_server_name;
  bool task_index_from_hostname = false;
};

// What the resolver may look at besides the flags. Tests give fakes.
struct WorkerEnvironment {
  std::function<std::string(const char* name)> env;  // "" when unset
  std::function<absl::StatusOr<std::string>(const std::string& path)> read_file;
  std::string hostname;  // gethostname(); "" when unknown

  // The process's environment, files and host name.
  static WorkerEnvironment Real();
};

struct WorkerConfig {
  std::string coordinator;      // host:port
  std::optional<TaskRef> task;  // none: the coordinator assigns one
  // host:port this worker is reached at; when `reserve_port`, the host only is known and
  // main reserves a port on `reserve_on` (kept open for the data plane) to complete it.
  std::string address;
  bool reserve_port = false;
  std::string reserve_on;  // "127.0.0.1" (coordinator on loopback) or "" (every interface)
  std::string reported_host;
  int cpu_devices = 1;
  std::string gpus;  // --gpus as given: worker/gpu/worker_devices.h resolves it
  collectives::TransportKind transport = collectives::TransportKind::kAuto;
  int data_port = 0;
  absl::Duration preemption_grace;
  std::string state_dir;
  int retained_checkpoint_copies = 2;
  // The file roots jobs may read from and write under. `*_defaulted`: the default under
  // state_dir, which main creates when it can.
  std::vector<std::string> data_roots;
  std::vector<std::string> output_roots;
  bool data_roots_defaulted = false;
  bool output_roots_defaulted = false;
  TlsOptions tls;                       // checked by main (CheckTlsOptions reads the files)
  std::optional<TestHooks> test_hooks;  // from $LOCKSTEP_TEST_HOOKS (fault-injection tests)
  std::string metrics_address;
  std::string health_address;
};

absl::StatusOr<WorkerConfig> ResolveWorkerConfig(const WorkerFlags& flags,
                                                 const WorkerEnvironment& environment);

// The data-plane address once main has reserved `port` (config.reserve_port).
std::string ReservedAddress(const WorkerConfig& config, int port);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_WORKER_CONFIG_H_
