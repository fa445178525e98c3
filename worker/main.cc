// lockstepd: the per-machine worker daemon. Reads TF_CONFIG (--tf_config=FILE or the
// TF_CONFIG environment variable; neither: the coordinator assigns a task), registers with
// the coordinator (--coordinator or LOCKSTEP_COORDINATOR), heartbeats, and offers
// --cpu_devices logical CPU devices, and runs the partitions of jobs the coordinator pushes
// (worker/job_runner.h). SIGTERM/SIGINT abort its jobs, deregister and exit 0. A bad
// configuration exits 2 with the resolver's message. It reaches the coordinator over mutual
// TLS (--tls_ca, --tls_cert, --tls_key: its certificate from the cluster CA names it), or in
// plaintext with --insecure. --gpus picks the GPUs it offers beside its CPU devices, one replica
// each (worker/gpu/worker_devices.h): CPU jobs run on the CPUs, GPU jobs on the GPUs.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "collectives/communicator_factory.h"
#include "common/grpc_channel.h"
#include "common/incarnation.h"
#include "common/logging.h"
#include "common/monitoring.h"
#include "common/net.h"
#include "common/process.h"
#include "common/sched.h"
#include "common/signals.h"
#include "common/tf_config.h"
#include "common/tls_options.h"
#include "spdlog/spdlog.h"
#include "worker/agent.h"
#include "worker/checkpoint_upload.h"
#include "worker/file_roots.h"
#include "worker/gpu/gpu_probe.h"
#include "worker/gpu/gpu_selection.h"
#include "worker/gpu/worker_devices.h"
#include "worker/grpc_checkpoint_upload.h"
#ifdef LOCKSTEP_WITH_CUDA
#include "collectives/nccl/real_nccl_api.h"
#include "distribute/cuda_gpu_devices.h"
#endif
#include "worker/grpc_coordinator_client.h"
#include "worker/hostname_task.h"
#include "worker/job_runner.h"
#include "worker/test_hooks.h"
#include "worker/worker_metrics.h"

ABSL_FLAG(std::string, coordinator, "", "Coordinator host:port (default: $LOCKSTEP_COORDINATOR).");
ABSL_FLAG(std::string, tf_config, "", "File holding TF_CONFIG JSON (default: $TF_CONFIG).");
ABSL_FLAG(int, cpu_devices, 1, "Number of logical CPU devices this worker offers.");
ABSL_FLAG(std::string, gpus, "",
          "GPUs this worker offers, one replica each: all, none, or CUDA device numbers such as "
          "0,1 (counted after CUDA_VISIBLE_DEVICES). Default: every visible GPU in a "
          "--config=cuda build, none otherwise.");
ABSL_FLAG(std::string, address, "",
          "host:port this worker is reached at. Default: its address in TF_CONFIG, else a "
          "free port on --host, reserved for the data plane.");
ABSL_FLAG(std::string, host, "",
          "Host name reported with the reserved data-plane port when neither --address nor "
          "TF_CONFIG gives one. Default: 127.0.0.1 when the coordinator is on loopback, "
          "else this machine's host name.");
ABSL_FLAG(std::string, transport, "auto",
          "Collectives between workers: auto (shared memory when every worker is on this "
          "host, else TCP), tcp or shm.");
ABSL_FLAG(int, data_port, 0,
          "TCP port of the data plane (collectives between hosts) on this worker's host, for "
          "firewalls that declare it; a flat MultiWorkerMirrored job also uses the next port "
          "per local device. 0: an ephemeral port per job.");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warn or error.");
ABSL_FLAG(absl::Duration, preemption_grace, absl::Seconds(15),
          "On SIGTERM while a job runs: how long the worker waits for its group to stop after "
          "the next step with a checkpoint (the job then restarts from it without counting a "
          "restart) before it leaves anyway. Keep it below the supervisor's own grace "
          "(Kubernetes' terminationGracePeriodSeconds, systemd's TimeoutStopSec).");
ABSL_FLAG(std::string, state_dir, "",
          "Where this worker keeps its own copy of every checkpoint of the jobs it runs "
          "(<state_dir>/checkpoints/<job>), so that a restarted job resumes with no shared "
          "file system. Default: $STATE_DIRECTORY (systemd's StateDirectory=), else "
          "/var/lib/lockstepd. A directory it cannot write costs a warning per job, not "
          "the job.");
ABSL_FLAG(int, retained_checkpoint_copies, 2,
          "When a job starts, the checkpoint copies under --state_dir of all but this many "
          "other jobs (the most recently written) are deleted: a job's copies follow its "
          "checkpoint.keep, and an ended job's go once this many later jobs wrote theirs. "
          "0: keep only the running job's.");
ABSL_FLAG(std::string, data_root, "",
          "Directories (comma-separated) jobs may read data files from; a relative path in a "
          "job is taken under them, and a path outside (symlinks resolved) fails the job "
          "naming its field. Default: <state_dir>/data.");
ABSL_FLAG(std::string, output_root, "",
          "Directories (comma-separated) under which jobs may write checkpoints and "
          "summaries (checkpoint.dir, summaries.dir). Default: <state_dir>/output.");
ABSL_FLAG(bool, insecure, false,
          "Plaintext gRPC to the coordinator, no certificate (the coordinator must run "
          "--insecure too). Default: mutual TLS with --tls_ca, --tls_cert, --tls_key.");
ABSL_FLAG(std::string, tls_ca, "", "PEM file: the cluster CA, which verifies the coordinator.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM file: this worker's certificate from the cluster CA (`lockstep certs issue "
          "--name=HOST`); its common name is the worker's identity. Re-read when it changes.");
ABSL_FLAG(std::string, tls_key, "", "PEM file: the private key of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "The name the coordinator's certificate must carry (default: the host of "
          "--coordinator).");
ABSL_FLAG(std::string, cpu_affinity, "",
          "CPUs this worker and all its threads run on, in Linux's list syntax (\"0-3,6\", as "
          "taskset -c and systemd's CPUAffinity=). Default: every CPU it is allowed. "
          "`lockstep local --pin_workers` gives each worker CPUs of its own.");
ABSL_FLAG(std::string, metrics_address, "",
          "HOST:PORT to serve Prometheus metrics on: plain HTTP, /metrics only (lockstep_worker_*; "
          "port 0: any free port, logged). Empty: no metrics.");
ABSL_FLAG(std::string, health_address, "",
          "HOST:PORT to serve the gRPC health service (grpc.health.v1.Health) on in plaintext, "
          "and nothing else, for Kubernetes' gRPC probes: SERVING once registered with a task, "
          "NOT_SERVING while starting and after SIGTERM (draining). Port 0: any free port, "
          "logged. Empty: none.");
ABSL_FLAG(bool, task_index_from_hostname, false,
          "Claim task worker/<N> where this host's name ends in -<N>: a Kubernetes "
          "StatefulSet pod's ordinal (lockstep-worker-2 -> worker/2), stable across crashes "
          "and rescheduling. Not with a TF_CONFIG.");

namespace {

constexpr int kExitBadConfig = 2;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("--tf_config: cannot read ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// --data_root and --output_root, or their defaults in the state directory (made when they
// can be: a job names its paths relative to them; one outside is refused naming the flag).
absl::StatusOr<std::shared_ptr<const lockstep::worker::FileRoots>> MakeFileRoots(
    const std::string& state_dir) {
  std::vector<std::string> data = lockstep::worker::SplitRoots(absl::GetFlag(FLAGS_data_root));
  std::vector<std::string> output = lockstep::worker::SplitRoots(absl::GetFlag(FLAGS_output_root));
  for (auto [roots, name] : {std::pair{&data, "data"}, std::pair{&output, "output"}}) {
    if (!roots->empty()) continue;
    roots->push_back(absl::StrCat(state_dir, "/", name));
    mkdir(state_dir.c_str(), 0755);
    mkdir(roots->back().c_str(), 0755);
  }
  absl::StatusOr<lockstep::worker::FileRoots> roots =
      lockstep::worker::FileRoots::Create(std::move(data), std::move(output));
  if (!roots.ok()) return roots.status();
  spdlog::info("jobs read data under {} (--data_root) and write outputs under {} (--output_root)",
               absl::StrJoin(roots->data(), ","), absl::StrJoin(roots->output(), ","));
  return std::make_shared<const lockstep::worker::FileRoots>(*std::move(roots));
}

int Run(sigset_t signals) {
  using lockstep::worker::Agent;
  lockstep::worker::AgentOptions options;

  // TF_CONFIG: --tf_config file, else the environment, else dynamic registration.
  std::string tf_text;
  std::string tf_source;
  if (!absl::GetFlag(FLAGS_tf_config).empty()) {
    absl::StatusOr<std::string> text = ReadFile(absl::GetFlag(FLAGS_tf_config));
    if (!text.ok()) {
      spdlog::error("{}", std::string(text.status().message()));
      return kExitBadConfig;
    }
    tf_text = *text;
    tf_source = absl::GetFlag(FLAGS_tf_config);
  } else {
    tf_text = Env("TF_CONFIG");
    tf_source = "$TF_CONFIG";
  }
  if (!tf_text.empty()) {
    absl::StatusOr<lockstep::TfConfig> tf = lockstep::TfConfig::Parse(tf_text);
    if (!tf.ok()) {
      spdlog::error("{} ({})", std::string(tf.status().message()), tf_source);
      return kExitBadConfig;
    }
    options.task = tf->task();
    options.address = tf->address();
  }
  if (absl::GetFlag(FLAGS_task_index_from_hostname)) {
    char name[256] = {0};
    if (gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
    absl::StatusOr<lockstep::TaskRef> task = lockstep::worker::TaskFromHostname(name);
    if (options.task.has_value()) {
      task = absl::InvalidArgumentError(
          absl::StrCat("--task_index_from_hostname: not with a TF_CONFIG (", tf_source,
                       "), which names the task"));
    }
    if (!task.ok()) {
      spdlog::error("{}", std::string(task.status().message()));
      return kExitBadConfig;
    }
    options.task = *task;
  }

  std::string coordinator = absl::GetFlag(FLAGS_coordinator);
  if (coordinator.empty()) coordinator = Env("LOCKSTEP_COORDINATOR");
  if (coordinator.empty()) {
    spdlog::error("no coordinator: pass --coordinator=HOST:PORT or set LOCKSTEP_COORDINATOR");
    return kExitBadConfig;
  }
  const int cpu_devices = absl::GetFlag(FLAGS_cpu_devices);
  // Its CPU devices and its GPUs (worker/gpu), one replica each: a GPU host serves CPU jobs on
  // its CPUs and GPU jobs (JobSpec.gpus) on its GPUs.
  const std::string gpus_flag = absl::GetFlag(FLAGS_gpus);
  absl::StatusOr<lockstep::worker::WorkerDeviceSet> devices = lockstep::worker::WorkerDevices(
      cpu_devices, gpus_flag, lockstep::worker::ProbeGpus, std::getenv("CUDA_VISIBLE_DEVICES"));
  if (!devices.ok()) {
    spdlog::error("{}", std::string(devices.status().message()));
    return kExitBadConfig;
  }
  if (!devices->warning.empty()) spdlog::warn("{}", devices->warning);
  if (!devices->gpus.empty()) {
    spdlog::info("lockstepd offers {}", lockstep::worker::DescribeGpus(devices->gpus));
  }
  for (const lockstep::v1::Device& d : devices->registered) options.devices.push_back(d);

  // Address: --address, else TF_CONFIG's, else a port reserved now (kept open).
  std::unique_ptr<lockstep::ReservedPort> reserved;
  if (!absl::GetFlag(FLAGS_address).empty()) options.address = absl::GetFlag(FLAGS_address);
  if (options.address.empty()) {
    // On loopback, listen on loopback only; otherwise on every interface, reporting a name
    // the other machines can resolve.
    absl::StatusOr<lockstep::HostPort> coord = lockstep::ParseHostPort(coordinator);
    const bool loopback = coord.ok() && (coord->host == "127.0.0.1" || coord->host == "localhost" ||
                                         coord->host == "::1");
    std::string host = absl::GetFlag(FLAGS_host);
    if (host.empty()) {
      char name[256] = {0};
      host = loopback || gethostname(name, sizeof(name) - 1) != 0 ? "127.0.0.1" : name;
    }
    auto port = lockstep::ReservedPort::Create(loopback ? "127.0.0.1" : "", 0);
    if (!port.ok()) {
      spdlog::error("cannot reserve a data-plane port: {}", std::string(port.status().message()));
      return kExitBadConfig;
    }
    reserved = *std::move(port);
    options.address = lockstep::HostPort{host, reserved->port()}.ToString();
  }
  if (absl::Status s = lockstep::ParseHostPort(options.address).status(); !s.ok()) {
    spdlog::error("--address: {}", std::string(s.message()));
    return kExitBadConfig;
  }

  lockstep::TlsOptions tls;
  tls.insecure = absl::GetFlag(FLAGS_insecure);
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  tls.key_file = absl::GetFlag(FLAGS_tls_key);
  tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  if (absl::Status s = lockstep::CheckTlsOptions(tls, /*need_identity=*/true); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return kExitBadConfig;
  }
  if (tls.insecure) {
    spdlog::warn(
        "--insecure: talking to the coordinator in plaintext, unauthenticated; anyone on the "
        "network can read and forge this worker's traffic");
  }
  auto client = lockstep::worker::GrpcCoordinatorClient::Create(coordinator, tls);
  if (!client.ok()) {
    spdlog::error("--coordinator: {}", std::string(client.status().message()));
    return kExitBadConfig;
  }
  options.incarnation = lockstep::NewIncarnation();
  spdlog::info(
      "lockstepd starting: {} incarnation {}, address {}, {} CPU device(s), "
      "coordinator {}",
      options.task.has_value() ? options.task->ToString() : "dynamic task",
      lockstep::ShortIncarnation(options.incarnation), options.address, cpu_devices, coordinator);

  lockstep::worker::JobExecutorOptions job_options;
  job_options.client = client->get();
  job_options.devices.num_cpu_devices = cpu_devices;
  job_options.devices.num_gpus = static_cast<int>(devices->gpus.size());
#ifdef LOCKSTEP_WITH_CUDA
  // NCCL for GPU jobs' collectives (distribute/nccl_all_reduce.h), loaded once. Without it
  // GPU jobs whose communication resolves to NCCL fail naming libnccl.so.2.
  std::unique_ptr<lockstep::collectives::nccl::RealNcclApi> nccl;
  if (!devices->gpus.empty()) {
    absl::StatusOr<std::unique_ptr<lockstep::collectives::nccl::RealNcclApi>> loaded =
        lockstep::collectives::nccl::RealNcclApi::Load();
    if (loaded.ok()) {
      nccl = *std::move(loaded);
    } else {
      spdlog::warn("GPU jobs cannot use NCCL: {}", std::string(loaded.status().message()));
    }
  }
  job_options.nccl.api = nccl.get();
  // The engine's GPUs (distribute/gpu_devices.h): each GPU replica's context, CUDA kernels and
  // cuBLASLt handle, built once for every job this worker runs. The worker's /gpu:N is CUDA
  // device N, so --gpus must select 0..n-1 (narrow with CUDA_VISIBLE_DEVICES otherwise).
  if (!devices->gpus.empty()) {
    std::vector<int> ordinals;
    for (const lockstep::worker::GpuInfo& g : devices->gpus) ordinals.push_back(g.ordinal);
    bool dense = true;
    for (size_t i = 0; i < ordinals.size(); ++i)
      dense = dense && ordinals[i] == static_cast<int>(i);
    if (!dense) {
      spdlog::warn(
          "GPU jobs cannot run: --gpus selects CUDA devices {} but the replicas' /gpu:N "
          "are CUDA devices 0..{}; select them with CUDA_VISIBLE_DEVICES instead",
          absl::StrJoin(ordinals, ","), ordinals.size() - 1);
    } else {
      absl::StatusOr<std::shared_ptr<lockstep::distribute::GpuDeviceSet>> engine_gpus =
          lockstep::distribute::MakeCudaGpus(ordinals);
      if (engine_gpus.ok()) {
        job_options.devices.gpus = *std::move(engine_gpus);
      } else {
        spdlog::warn("GPU jobs cannot run: {}", std::string(engine_gpus.status().message()));
      }
    }
  }
#endif
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport == "auto") {
    job_options.transport = lockstep::collectives::TransportKind::kAuto;
  } else if (transport == "tcp") {
    job_options.transport = lockstep::collectives::TransportKind::kTcp;
  } else if (transport == "shm") {
    job_options.transport = lockstep::collectives::TransportKind::kShm;
  } else {
    spdlog::error("--transport: expected auto, tcp or shm, got '{}'", transport);
    return kExitBadConfig;
  }
  job_options.listen_host = lockstep::ParseHostPort(options.address)->host;
  job_options.data_port = absl::GetFlag(FLAGS_data_port);
  if (absl::Status s =
          lockstep::collectives::CheckListenPort(job_options.listen_host, job_options.data_port);
      !s.ok()) {
    spdlog::error("--data_port={}: {}", job_options.data_port, std::string(s.message()));
    return kExitBadConfig;
  }
  // Faults for the hang-verdict tests only (worker/test_hooks.h).
  if (const std::string hooks = Env("LOCKSTEP_TEST_HOOKS"); !hooks.empty()) {
    absl::StatusOr<lockstep::worker::TestHooks> parsed = lockstep::worker::ParseTestHooks(hooks);
    if (!parsed.ok()) {
      spdlog::error("{}", std::string(parsed.status().message()));
      return kExitBadConfig;
    }
    spdlog::warn("LOCKSTEP_TEST_HOOKS={}: this worker injects faults into its jobs", hooks);
    job_options.test_hooks = *parsed;
  }
  job_options.state_dir = absl::GetFlag(FLAGS_state_dir);
  if (job_options.state_dir.empty()) {
    job_options.state_dir = Env("STATE_DIRECTORY");
    // systemd passes a colon-separated list when a unit names several.
    job_options.state_dir = job_options.state_dir.substr(0, job_options.state_dir.find(':'));
  }
  if (job_options.state_dir.empty()) job_options.state_dir = "/var/lib/lockstepd";
  job_options.retained_checkpoint_copies = absl::GetFlag(FLAGS_retained_checkpoint_copies);
  if (job_options.retained_checkpoint_copies < 0) {
    spdlog::error("--retained_checkpoint_copies={}: must be 0 or more",
                  job_options.retained_checkpoint_copies);
    return kExitBadConfig;
  }
  absl::StatusOr<std::shared_ptr<const lockstep::worker::FileRoots>> roots =
      MakeFileRoots(job_options.state_dir);
  if (!roots.ok()) {
    spdlog::error("{}", std::string(roots.status().message()));
    return kExitBadConfig;
  }
  job_options.file_roots = *std::move(roots);
  // Monitoring: metrics, and the health port (NOT_SERVING until the agent is ALIVE, and for
  // good once draining). Both outlive the jobs and the agent, which report to them.
  lockstep::MetricsRegistry registry;
  lockstep::worker::WorkerMetrics metrics(&registry);
  absl::StatusOr<std::unique_ptr<lockstep::HealthServer>> health = lockstep::ServeMonitoring(
      absl::GetFlag(FLAGS_metrics_address), absl::GetFlag(FLAGS_health_address), &registry);
  if (!health.ok()) {
    spdlog::error("{}", std::string(health.status().message()));
    return kExitBadConfig;
  }
  if (!absl::GetFlag(FLAGS_metrics_address).empty()) job_options.metrics = &metrics;
  // SERVING while registered (ALIVE) and not drained by an operator.
  struct Serving {
    lockstep::HealthServer* health;
    std::atomic<bool> alive{false}, drained{false};
    void Update() { health->SetServing(alive.load() && !drained.load()); }
  };
  Serving serving{health->get()};
  if (*health != nullptr) {
    options.on_alive = [&serving](bool alive) {
      serving.alive.store(alive);
      serving.Update();
    };
    options.on_drained = [&serving](bool drained) {
      serving.drained.store(drained);
      serving.Update();
    };
  }
  lockstep::worker::JobRunner jobs(job_options);
  // Checkpoint fetches (`lockstep export JOB`): the coordinator's upload directives are taken
  // here, every other assignment goes on to the jobs (worker/checkpoint_upload.h).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> upload_channel =
      lockstep::CoordinatorChannel(coordinator, tls);
  if (!upload_channel.ok()) {
    spdlog::error("{}", std::string(upload_channel.status().message()));
    return kExitBadConfig;
  }
  lockstep::worker::CheckpointUploader uploads(
      &jobs, lockstep::worker::GrpcUploadOpener(*upload_channel),
      {.state_dir = job_options.state_dir, .file_roots = job_options.file_roots});
  options.jobs = &uploads;

  Agent agent(options, client->get(), lockstep::Clock::Real());
  // This thread, which called BlockSignals, stays the one that takes the signals: a SIGTERM
  // that reaches one of OpenBLAS's threads is handed on to it at once. (Moving that role to
  // a new thread left a window in which a signal was handed to this thread and never taken:
  // a worker stopped right after it registered ignored SIGTERM and was killed.)
  const pthread_t waiter = pthread_self();
  absl::Status result;
  std::thread runner([&] {
    result = agent.Run();
    pthread_kill(waiter, SIGUSR1);  // Run() ended by itself (permanent error): wake the waiter
  });
  int sig = 0;
  sigwait(&signals, &sig);
  if (sig != SIGUSR1) {
    if (*health != nullptr) (*health)->Drain();
    if (sig == SIGTERM) {
      // A preemption (Kubernetes eviction, systemctl stop): the group checkpoints first. The
      // coordinator learns we are leaving before our PREEMPTED report, so it does not give us
      // the job's next attempt.
      agent.SetLeaving();
      const int preempted = jobs.PreemptAll("lockstepd received SIGTERM");
      if (preempted > 0) {
        const absl::Duration grace = absl::GetFlag(FLAGS_preemption_grace);
        spdlog::info("SIGTERM: {} job(s) stop after their next step with a checkpoint (up to {})",
                     preempted, absl::FormatDuration(grace));
        if (!jobs.WaitReported(absl::Now() + grace)) {
          spdlog::warn("the jobs did not stop within --preemption_grace={}: leaving anyway",
                       absl::FormatDuration(grace));
        }
      }
    }
    spdlog::info("{} received: leaving the cluster", strsignal(sig));
    agent.Stop();
  }
  runner.join();
  if (!result.ok()) {
    spdlog::error("{}", result.ToString());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  lockstep::InitProcess();
  // Signals go to the waiter thread in Run(); block them before any thread starts (gRPC
  // starts its own as soon as a channel exists, and they would inherit an open mask).
  // SIGUSR1 is internal: it wakes the waiter when Run() ends by itself.
  const sigset_t signals = lockstep::BlockSignals({SIGTERM, SIGINT, SIGUSR1});

  absl::SetProgramUsageMessage(
      "lockstepd --coordinator=HOST:PORT [--tf_config=FILE] [--cpu_devices=N] [--gpus=0,1] "
      "[--cpu_affinity=LIST]");
  absl::ParseCommandLine(argc, argv);
  absl::Status logging = lockstep::InitLogging("lockstepd", absl::GetFlag(FLAGS_log_level));
  if (!logging.ok()) {
    fprintf(stderr, "%s\n", logging.ToString().c_str());
    return kExitBadConfig;
  }
  // Before any thread starts (gRPC's, the job's), so that every one of them inherits it.
  if (const std::string list = absl::GetFlag(FLAGS_cpu_affinity); !list.empty()) {
    absl::StatusOr<std::vector<int>> cpus = lockstep::ParseCpuList(list, "--cpu_affinity");
    if (!cpus.ok()) {
      spdlog::error("{}", std::string(cpus.status().message()));  // names the flag
      return kExitBadConfig;
    }
    if (absl::Status pinned = lockstep::SetCpuAffinity(*cpus); !pinned.ok()) {
      spdlog::error("--cpu_affinity: {}", std::string(pinned.message()));
      return kExitBadConfig;
    }
    spdlog::info("running on CPU(s) {}", lockstep::FormatCpuList(*cpus));
  }
  return Run(signals);
}
