#include "worker/worker_config.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/status.h"
#include "worker/file_roots.h"
#include "worker/hostname_task.h"

namespace lockstep {
namespace worker {
namespace {

// TF_CONFIG's task and address: --tf_config's file, else $TF_CONFIG; neither: none.
absl::Status ApplyTfConfig(const WorkerFlags& flags, const WorkerEnvironment& environment,
                           WorkerConfig* config, std::string* source) {
  std::string text;
  if (!flags.tf_config.empty()) {
    absl::StatusOr<std::string> read = environment.read_file(flags.tf_config);
    if (!read.ok()) {
      return absl::NotFoundError(absl::StrCat("--tf_config: cannot read ", flags.tf_config));
    }
    text = *std::move(read);
    *source = flags.tf_config;
  } else {
    text = environment.env("TF_CONFIG");
    *source = "$TF_CONFIG";
  }
  if (text.empty()) return absl::OkStatus();
  absl::StatusOr<TfConfig> tf = TfConfig::Parse(text);
  if (!tf.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(tf.status().message(), " (", *source, ")"));
  }
  config->task = tf->task();
  config->address = tf->address();
  return absl::OkStatus();
}

// --address, else TF_CONFIG's (already in config->address), else a port to reserve.
absl::Status ResolveAddress(const WorkerFlags& flags, const WorkerEnvironment& environment,
                            WorkerConfig* config) {
  if (!flags.address.empty()) config->address = flags.address;
  if (config->address.empty()) {
    // On loopback, listen on loopback only; otherwise on every interface, reporting a name
    // the other machines can resolve.
    absl::StatusOr<HostPort> coordinator = ParseHostPort(config->coordinator);
    const bool loopback =
        coordinator.ok() && (coordinator->host == "127.0.0.1" || coordinator->host == "localhost" ||
                             coordinator->host == "::1");
    config->reported_host = flags.daemon.host;
    if (config->reported_host.empty()) {
      config->reported_host =
          loopback || environment.hostname.empty() ? "127.0.0.1" : environment.hostname;
    }
    config->reserve_port = true;
    config->reserve_on = loopback ? "127.0.0.1" : "";
    return absl::OkStatus();
  }
  absl::StatusOr<HostPort> address = ParseHostPort(config->address);
  if (!address.ok()) return Annotate(address.status(), "--address");
  config->reported_host = address->host;
  return absl::OkStatus();
}

absl::StatusOr<collectives::TransportKind> ParseTransport(const std::string& transport) {
  if (transport == "auto") return collectives::TransportKind::kAuto;
  if (transport == "tcp") return collectives::TransportKind::kTcp;
  if (transport == "shm") return collectives::TransportKind::kShm;
  return absl::InvalidArgumentError(
      absl::StrCat("--transport: expected auto, tcp or shm, got '", transport, "'"));
}

}  // namespace

WorkerEnvironment WorkerEnvironment::Real() {
  WorkerEnvironment e;
  e.env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  e.read_file = [](const std::string& path) -> absl::StatusOr<std::string> {
    std::ifstream f(path);
    if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) == 0) e.hostname = name;
  return e;
}

absl::StatusOr<WorkerConfig> ResolveWorkerConfig(const WorkerFlags& flags,
                                                 const WorkerEnvironment& environment) {
  WorkerConfig config;
  std::string tf_source;
  LS_RETURN_IF_ERROR(ApplyTfConfig(flags, environment, &config, &tf_source));
  if (flags.task_index_from_hostname) {
    if (config.task.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--task_index_from_hostname: not with a TF_CONFIG (", tf_source,
                       "), which names the task"));
    }
    LS_ASSIGN_OR_RETURN(config.task, TaskFromHostname(environment.hostname));
  }

  config.coordinator = flags.coordinator;
  if (config.coordinator.empty()) config.coordinator = environment.env("LOCKSTEP_COORDINATOR");
  if (config.coordinator.empty()) {
    return absl::InvalidArgumentError(
        "no coordinator: pass --coordinator=HOST:PORT or set LOCKSTEP_COORDINATOR");
  }
  LS_RETURN_IF_ERROR(ResolveAddress(flags, environment, &config));

  config.cpu_devices = flags.cpu_devices;
  config.gpus = flags.gpus;
  LS_ASSIGN_OR_RETURN(config.transport, ParseTransport(flags.transport));
  config.data_port = flags.data_port;  // main checks it can listen there (CheckListenPort)
  config.preemption_grace = flags.preemption_grace;

  config.tls = flags.daemon.tls;
  config.tls.server_name = flags.tls_server_name;

  if (const std::string hooks = environment.env("LOCKSTEP_TEST_HOOKS"); !hooks.empty()) {
    LS_ASSIGN_OR_RETURN(config.test_hooks, ParseTestHooks(hooks));
  }

  config.state_dir = flags.daemon.state_dir;
  if (config.state_dir.empty()) {
    // systemd passes a colon-separated list when a unit names several.
    const std::string systemd = environment.env("STATE_DIRECTORY");
    config.state_dir = systemd.substr(0, systemd.find(':'));
  }
  if (config.state_dir.empty()) config.state_dir = "/var/lib/lockstepd";
  config.retained_checkpoint_copies = flags.retained_checkpoint_copies;
  if (config.retained_checkpoint_copies < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--retained_checkpoint_copies=", config.retained_checkpoint_copies, ": must be 0 or more"));
  }
  config.data_roots = SplitRoots(flags.data_root);
  config.output_roots = SplitRoots(flags.output_root);
  config.data_roots_defaulted = config.data_roots.empty();
  config.output_roots_defaulted = config.output_roots.empty();
  if (config.data_roots_defaulted) config.data_roots = {absl::StrCat(config.state_dir, "/data")};
  if (config.output_roots_defaulted) {
    config.output_roots = {absl::StrCat(config.state_dir, "/output")};
  }
  config.metrics_address = flags.daemon.metrics_address;
  config.health_address = flags.daemon.health_address;
  return config;
}

std::string ReservedAddress(const WorkerConfig& config, int port) {
  return HostPort{config.reported_host, port}.ToString();
}

}  // namespace worker
}  // namespace lockstep
