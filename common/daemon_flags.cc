#include "common/daemon_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, host, "",
          "This daemon's host. lockstep-coordinator listens on it (default 0.0.0.0; "
          "\"127.0.0.1\" for loopback). lockstepd reports it with the data-plane port it "
          "reserves when neither --address nor TF_CONFIG gives one (default 127.0.0.1 when the "
          "coordinator is on loopback, else this machine's host name).");
ABSL_FLAG(std::string, state_dir, "",
          "This daemon's state directory (created if missing). lockstep-coordinator: its job "
          "store (jobs.sqlite3) and port file, one coordinator per directory; default "
          "$XDG_STATE_HOME/lockstep, else $HOME/.local/state/lockstep, else "
          "/tmp/lockstep-state-$UID. lockstepd: its own copy of every checkpoint of the jobs it "
          "runs (<state_dir>/checkpoints/<job>), so that a restarted job resumes with no shared "
          "file system; default $STATE_DIRECTORY (systemd's StateDirectory=), else "
          "/var/lib/lockstepd; a directory it cannot write costs a warning per job, not the job.");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warn or error.");
ABSL_FLAG(std::string, metrics_address, "",
          "HOST:PORT to serve Prometheus metrics on: plain HTTP, /metrics only "
          "(lockstep_coordinator_* or lockstep_worker_*; port 0: any free port, logged). Empty: "
          "no metrics.");
ABSL_FLAG(std::string, health_address, "",
          "HOST:PORT to serve the gRPC health service (grpc.health.v1.Health) on in plaintext, "
          "and nothing else, for Kubernetes' gRPC probes. lockstep-coordinator: NOT_SERVING "
          "while the job store loads and once shutting down (its main port serves it too, over "
          "TLS). lockstepd: SERVING once registered with a task, NOT_SERVING while starting and "
          "after SIGTERM (draining). Port 0: any free port, logged. Empty: none.");
ABSL_FLAG(bool, insecure, false,
          "Plaintext gRPC with no authentication and no authorization (the coordinator and "
          "its workers must all run --insecure): anyone who can reach the coordinator's port "
          "may do anything. Default: TLS with --tls_ca, --tls_cert, --tls_key (mutual between "
          "the daemons).");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM file: the cluster CA. It signs every daemon's certificate (and clients'); each "
          "daemon verifies its peers against it.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM file: this daemon's certificate from the cluster CA (`lockstep certs issue "
          "--name=HOST`). The coordinator's names the host workers and clients dial; a "
          "worker's common name is its identity. Re-read when it changes (rotation without "
          "restart).");
ABSL_FLAG(std::string, tls_key, "", "PEM file: the private key of --tls_cert.");

namespace lockstep {

DaemonFlags ReadDaemonFlags() {
  DaemonFlags f;
  f.host = absl::GetFlag(FLAGS_host);
  f.state_dir = absl::GetFlag(FLAGS_state_dir);
  f.log_level = absl::GetFlag(FLAGS_log_level);
  f.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  f.health_address = absl::GetFlag(FLAGS_health_address);
  f.tls.insecure = absl::GetFlag(FLAGS_insecure);
  f.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  f.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  f.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  return f;
}

}  // namespace lockstep
