// lockstep-coordinator: forms the cluster (membership, heartbeats), serves the key-value
// store and barriers, accepts, schedules and tracks jobs (stored under --state_dir), and
// answers `lockstep status` and the job commands. SIGTERM or SIGINT shuts it down
// cleanly: pending waits are answered, the port is closed, the process exits 0.
// It serves TLS (--tls_ca, --tls_cert, --tls_key): workers present certificates from the
// cluster CA, clients bearer tokens from --tokens_file (reloaded on SIGHUP; certificate
// files are re-read as they change); --insecure serves plaintext and authorizes everyone.
// The flags both daemons share are common/daemon_flags.h's; defaults and rules on the flags
// are coordinator/coordinator_config.h's.
#include <signal.h>
#include <unistd.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/daemon_flags.h"
#include "common/file_util.h"
#include "common/incarnation.h"
#include "common/logging.h"
#include "common/monitoring.h"
#include "common/net.h"
#include "common/process.h"
#include "common/signals.h"
#include "coordinator/coordinator_config.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/grpc_server.h"
#include "coordinator/revoked_certificates.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(int, port, 7000, "Port to listen on; 0 picks any free port (see --port_file).");
ABSL_FLAG(std::string, port_file, "",
          "If set, the bound port is written to this file once the server is ready.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "How often workers are told to heartbeat.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(3),
          "A worker silent for longer than this is marked LOST.");
ABSL_FLAG(std::string, tokens_file, "",
          "Clients' bearer tokens, one per line: `<token> <role> <name>`, role viewer "
          "(status, jobs, describe, watch) or operator (also submit, cancel, drain, release). "
          "SIGHUP reloads it.");
ABSL_FLAG(std::string, revoked_certificates_file, "",
          "Certificate names (CNs) refused although the cluster CA signed them, one per line "
          "('#' comments): a stolen worker or client certificate. Their calls are "
          "UNAUTHENTICATED and their open streams end within seconds. SIGHUP reloads it.");

// Limits on what callers control (RESOURCE_EXHAUSTED past one, naming the flag).
ABSL_FLAG(int, max_message_bytes, 4 << 20, "Largest gRPC request accepted, in bytes.");
ABSL_FLAG(int, max_pending_jobs, 1000, "Jobs queued (PENDING or RESTARTING) at once.");
ABSL_FLAG(int, retained_jobs, 1000,
          "Ended jobs kept (GetJob, ListJobs); older ones are deleted from the store and "
          "memory. 0 keeps every one.");
ABSL_FLAG(int64_t, max_model_parameters, 1'000'000'000, "Parameters of one job's model.");
ABSL_FLAG(int64_t, max_model_bytes, int64_t{16} << 30,
          "Bytes one replica holds for the model: variables, gradients, optimizer slots.");
ABSL_FLAG(int64_t, max_batch_bytes, int64_t{16} << 30,
          "Bytes of activations of one replica's share of the global batch (forward and "
          "backward).");
ABSL_FLAG(int64_t, max_kv_entries_per_job, 10000, "Key-value entries one job may hold.");
ABSL_FLAG(int64_t, max_kv_bytes_per_job, int64_t{64} << 20,
          "Bytes of keys and values one job may hold in the key-value store.");
ABSL_FLAG(int64_t, max_kv_value_bytes, 1 << 20, "Largest key-value value, in bytes.");
ABSL_FLAG(int64_t, max_barriers_per_job, 10000, "Barriers one job may hold.");
ABSL_FLAG(int, max_waiting_calls_per_job, 1024,
          "GetKey calls waiting for a key, and Barrier calls waiting at a barrier, at once in "
          "one job (or in the workers' common area), each kind.");
ABSL_FLAG(int, max_waiting_calls_per_caller, 64,
          "GetKey and Barrier calls (each kind) one worker identity may have waiting at once.");
ABSL_FLAG(int64_t, max_wait_ms, 600000,
          "Longest wait of one GetKey or Barrier call; a longer timeout is cut to this (the "
          "call answers DEADLINE_EXCEEDED saying so, and the worker asks again).");
ABSL_FLAG(int, max_streams_per_identity, 32,
          "Server streams (watch, assignments, logs) one identity (a worker certificate, a "
          "token's or client certificate's name) may have open at once.");
ABSL_FLAG(int, max_server_threads, 2048,
          "Threads of the coordinator's gRPC server (a resource quota); calls past it are "
          "answered RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_job_watches, 256, "WatchJob streams open at once (all clients).");
ABSL_FLAG(int, max_assignment_watches_per_task, 4, "WatchAssignments streams per worker task.");
ABSL_FLAG(int, max_task_index, 4096,
          "Task indexes are 0..N-1 (worker/N-1 at most, static or dynamic registration).");
ABSL_FLAG(int, max_tasks_per_identity, 8,
          "Tasks one worker certificate identity may hold (registered, LOST ones included, "
          "until deregistered or released with `lockstep release`).");

namespace {

// The limits flags, into `options`.
void SetLimits(lockstep::coordinator::CoordinatorServerOptions* options) {
  options->max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options->jobs.max_pending_jobs = absl::GetFlag(FLAGS_max_pending_jobs);
  options->jobs.retained_jobs = absl::GetFlag(FLAGS_retained_jobs);
  options->jobs.limits.max_model_parameters = absl::GetFlag(FLAGS_max_model_parameters);
  options->jobs.limits.max_model_bytes = absl::GetFlag(FLAGS_max_model_bytes);
  options->jobs.limits.max_batch_bytes = absl::GetFlag(FLAGS_max_batch_bytes);
  options->jobs.watches.max_job_watches = absl::GetFlag(FLAGS_max_job_watches);
  options->jobs.watches.max_assignment_watches_per_task =
      absl::GetFlag(FLAGS_max_assignment_watches_per_task);
  options->kv.max_entries_per_job = absl::GetFlag(FLAGS_max_kv_entries_per_job);
  options->kv.max_bytes_per_job = absl::GetFlag(FLAGS_max_kv_bytes_per_job);
  options->kv.max_value_bytes = absl::GetFlag(FLAGS_max_kv_value_bytes);
  options->barriers.max_barriers_per_job = absl::GetFlag(FLAGS_max_barriers_per_job);
  const lockstep::coordinator::WaitLimitOptions waits{
      .max_per_job = absl::GetFlag(FLAGS_max_waiting_calls_per_job),
      .max_per_caller = absl::GetFlag(FLAGS_max_waiting_calls_per_caller),
      .max_wait = absl::Milliseconds(absl::GetFlag(FLAGS_max_wait_ms))};
  options->kv.waits = waits;
  options->barriers.waits = waits;
  options->jobs.watches.max_streams_per_identity = absl::GetFlag(FLAGS_max_streams_per_identity);
  options->max_server_threads = absl::GetFlag(FLAGS_max_server_threads);
  options->membership.max_task_index = absl::GetFlag(FLAGS_max_task_index);
  options->membership.max_tasks_per_identity = absl::GetFlag(FLAGS_max_tasks_per_identity);
}

int Run(sigset_t signals) {
  using lockstep::coordinator::CoordinatorServer;
  const lockstep::DaemonFlags daemon = lockstep::ReadDaemonFlags();
  lockstep::coordinator::CoordinatorServerOptions options;
  options.port = absl::GetFlag(FLAGS_port);
  SetLimits(&options);
  options.membership.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.membership.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  if (absl::Status s = lockstep::coordinator::ResolveCoordinatorConfig(
          daemon, lockstep::coordinator::CoordinatorEnvironment::Real(), &options);
      !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  if (options.tls.insecure) {
    spdlog::warn(
        "--insecure: serving plaintext gRPC with authentication and authorization OFF: "
        "anyone who reaches port {} can register workers, read the key-value store, submit "
        "and cancel jobs. Use it only on a trusted network.",
        options.port);
  } else if (const std::string tokens = absl::GetFlag(FLAGS_tokens_file); !tokens.empty()) {
    absl::StatusOr<lockstep::coordinator::TokenTable> table =
        lockstep::coordinator::TokenTable::Load(tokens);
    if (!table.ok()) {
      spdlog::error("{}", std::string(table.status().message()));
      return 2;
    }
    spdlog::info("{} client token(s) from {}", table->size(), tokens);
    options.tokens = std::move(*table);
  } else {
    spdlog::warn("no --tokens_file: no client can call the coordinator (only workers)");
  }
  if (const std::string revoked = absl::GetFlag(FLAGS_revoked_certificates_file);
      !revoked.empty()) {
    absl::StatusOr<lockstep::coordinator::RevokedCertificates> names =
        lockstep::coordinator::RevokedCertificates::Load(revoked);
    if (!names.ok()) {
      spdlog::error("{}", std::string(names.status().message()));
      return 2;
    }
    spdlog::info("{} revoked certificate name(s) from {}", names->size(), revoked);
    options.revoked = std::move(*names);
  }

  const std::string state_dir = options.state_dir;
  if (const absl::Status made = lockstep::MakeDirs(state_dir); !made.ok()) {
    spdlog::error("--state_dir: {}", std::string(made.message()));
    return 1;
  }

  // Monitoring: metrics, and the health port, NOT_SERVING until the job store is loaded and
  // the main port open. Both outlive the server.
  lockstep::MetricsRegistry registry;
  lockstep::coordinator::CoordinatorMetrics metrics(&registry);
  absl::StatusOr<std::unique_ptr<lockstep::HealthServer>> health =
      lockstep::ServeMonitoring(daemon.metrics_address, daemon.health_address, &registry);
  if (!health.ok()) {
    spdlog::error("{}", std::string(health.status().message()));
    return 2;
  }
  if (!daemon.metrics_address.empty()) options.metrics = &metrics;

  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Create(options);
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    // A bad flag or a key others can read: a restart cannot fix either.
    const absl::StatusCode code = server.status().code();
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kPermissionDenied
               ? 2
               : 1;
  }
  const int port = (*server)->port();
  {
    absl::Status s = lockstep::WritePortFile(absl::StrCat(state_dir, "/port"), port);
    if (!s.ok()) spdlog::warn("--state_dir: {}", s.ToString());
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    absl::Status s = lockstep::WritePortFile(port_file, port);
    if (!s.ok()) {
      spdlog::error("--port_file: {}", s.ToString());
      return 1;
    }
  }
  spdlog::info(
      "coordinator listening on {}:{} ({}), incarnation {}, heartbeat every {}, LOST after {}, "
      "failure grace {}, jobs in {}",
      options.host, port, options.tls.insecure ? "plaintext, INSECURE" : "TLS",
      lockstep::ShortIncarnation((*server)->incarnation()),
      absl::FormatDuration(options.membership.heartbeat_interval),
      absl::FormatDuration(options.membership.heartbeat_timeout),
      absl::FormatDuration((*server)->jobs()->failure_grace()), state_dir);
  if (*health != nullptr) (*health)->SetServing(true);

  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    if (const std::string revoked = absl::GetFlag(FLAGS_revoked_certificates_file);
        !revoked.empty()) {
      absl::StatusOr<lockstep::coordinator::RevokedCertificates> names =
          lockstep::coordinator::RevokedCertificates::Load(revoked);
      if (names.ok()) {
        spdlog::info("SIGHUP: {} revoked certificate name(s) reloaded from {}", names->size(),
                     revoked);
        (*server)->SetRevoked(std::move(*names));
      } else {
        spdlog::error("SIGHUP: {}; the revoked names in use are kept",
                      std::string(names.status().message()));
      }
    }
    const std::string tokens = absl::GetFlag(FLAGS_tokens_file);
    if (options.tls.insecure || tokens.empty()) {
      spdlog::info("SIGHUP received: no --tokens_file to reload");
      continue;
    }
    absl::StatusOr<lockstep::coordinator::TokenTable> table =
        lockstep::coordinator::TokenTable::Load(tokens);
    if (!table.ok()) {
      spdlog::error("SIGHUP: {}; the tokens in use are kept",
                    std::string(table.status().message()));
      continue;
    }
    spdlog::info("SIGHUP: {} client token(s) reloaded from {}", table->size(), tokens);
    (*server)->SetTokens(std::move(*table));
  }
  spdlog::info("{} received: shutting down", strsignal(sig));
  if (*health != nullptr) (*health)->Drain();
  (*server)->Shutdown();
  spdlog::info("coordinator stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  lockstep::InitProcess();
  // Signals are taken by sigwait in Run(); block them before any thread starts.
  // SIGHUP reloads --tokens_file.
  const sigset_t signals = lockstep::BlockSignals({SIGTERM, SIGINT, SIGHUP});

  absl::SetProgramUsageMessage(
      "lockstep-coordinator --tls_ca=CA --tls_cert=CERT --tls_key=KEY --tokens_file=FILE "
      "[--port=7000] [--port_file=PATH] [--heartbeat_timeout=3s] | --insecure");
  absl::ParseCommandLine(argc, argv);
  absl::Status logging =
      lockstep::InitLogging("coordinator", lockstep::ReadDaemonFlags().log_level);
  if (!logging.ok()) {
    fprintf(stderr, "%s\n", logging.ToString().c_str());
    return 2;
  }
  return Run(signals);
}
