// lockstepd: the per-machine worker daemon. Reads TF_CONFIG (--tf_config=FILE or the
// TF_CONFIG environment variable; neither: the coordinator assigns a task), registers with
// the coordinator (--coordinator or LOCKSTEP_COORDINATOR), heartbeats, and offers
// --cpu_devices logical CPU devices, and runs the partitions of jobs the coordinator pushes
// (worker/job_runner.h). SIGTERM/SIGINT abort its jobs, deregister and exit 0. A bad
// configuration exits 2 with the resolver's message. It reaches the coordinator over mutual
// TLS (--tls_ca, --tls_cert, --tls_key: its certificate from the cluster CA names it), or in
// plaintext with --insecure. --gpus picks the GPUs it offers beside its CPU devices, one replica
// each (worker/gpu/worker_devices.h): CPU jobs run on the CPUs, GPU jobs on the GPUs.
// This file parses and wires: the flags both daemons share are common/daemon_flags.h's, and
// the configuration is resolved (defaults, TF_CONFIG, environment, rules) by
// worker/worker_config.h's ResolveWorkerConfig.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
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
#include "common/daemon_flags.h"
#include "common/grpc_channel.h"
#include "common/incarnation.h"
#include "common/logging.h"
#include "common/monitoring.h"
#include "common/net.h"
#include "common/process.h"
#include "common/sched.h"
#include "common/signals.h"
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
#include "worker/grpc_worker_service_client.h"
#include "worker/job_runner.h"
#include "worker/worker_config.h"
#include "worker/worker_metrics.h"

ABSL_FLAG(std::string, coordinator, "", "Coordinator host:port (default: $LOCKSTEP_COORDINATOR).");
ABSL_FLAG(std::string, tf_config, "", "File holding TF_CONFIG JSON (default: $TF_CONFIG).");
ABSL_FLAG(int, cpu_devices, 1, "Number of logical CPU devices this worker offers.");
ABSL_FLAG(std::string, gpus, "",
          "GPUs this worker offers, one replica each: all, none, or CUDA device numbers such as "
          "1,3 (counted after CUDA_VISIBLE_DEVICES); the i-th offered GPU is the worker's "
          "/gpu:i. Default: every visible GPU in a --config=cuda build, none otherwise.");
ABSL_FLAG(std::string, address, "",
          "host:port this worker is reached at. Default: its address in TF_CONFIG, else a "
          "free port on --host, reserved for the data plane.");
ABSL_FLAG(std::string, transport, "auto",
          "Collectives between workers: auto (shared memory when every worker is on this "
          "host, else TCP), tcp or shm.");
ABSL_FLAG(int, data_port, 0,
          "TCP port of the data plane (collectives between hosts) on this worker's host, for "
          "firewalls that declare it; a flat MultiWorkerMirrored job also uses the next port "
          "per local device. 0: an ephemeral port per job.");
ABSL_FLAG(absl::Duration, preemption_grace, absl::Seconds(15),
          "On SIGTERM while a job runs: how long the worker waits for its group to stop after "
          "the next step with a checkpoint (the job then restarts from it without counting a "
          "restart) before it leaves anyway. Keep it below the supervisor's own grace "
          "(Kubernetes' terminationGracePeriodSeconds, systemd's TimeoutStopSec).");
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
ABSL_FLAG(std::string, tls_server_name, "",
          "The name the coordinator's certificate must carry (default: the host of "
          "--coordinator).");
ABSL_FLAG(std::string, cpu_affinity, "",
          "CPUs this worker and all its threads run on, in Linux's list syntax (\"0-3,6\", as "
          "taskset -c and systemd's CPUAffinity=). Default: every CPU it is allowed. "
          "`lockstep local --pin_workers` gives each worker CPUs of its own.");
ABSL_FLAG(bool, task_index_from_hostname, false,
          "Claim task worker/<N> where this host's name ends in -<N>: a Kubernetes "
          "StatefulSet pod's ordinal (lockstep-worker-2 -> worker/2), stable across crashes "
          "and rescheduling. Not with a TF_CONFIG.");

namespace {

constexpr int kExitBadConfig = 2;

lockstep::worker::WorkerFlags ReadFlags() {
  lockstep::worker::WorkerFlags f;
  f.daemon = lockstep::ReadDaemonFlags();
  f.coordinator = absl::GetFlag(FLAGS_coordinator);
  f.tf_config = absl::GetFlag(FLAGS_tf_config);
  f.cpu_devices = absl::GetFlag(FLAGS_cpu_devices);
  f.gpus = absl::GetFlag(FLAGS_gpus);
  f.address = absl::GetFlag(FLAGS_address);
  f.transport = absl::GetFlag(FLAGS_transport);
  f.data_port = absl::GetFlag(FLAGS_data_port);
  f.preemption_grace = absl::GetFlag(FLAGS_preemption_grace);
  f.retained_checkpoint_copies = absl::GetFlag(FLAGS_retained_checkpoint_copies);
  f.data_root = absl::GetFlag(FLAGS_data_root);
  f.output_root = absl::GetFlag(FLAGS_output_root);
  f.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  f.task_index_from_hostname = absl::GetFlag(FLAGS_task_index_from_hostname);
  return f;
}

// The file roots, their default directories made when they can be (a job names its paths
// relative to them; one outside is refused naming the flag).
absl::StatusOr<std::shared_ptr<const lockstep::worker::FileRoots>> MakeFileRoots(
    const lockstep::worker::WorkerConfig& config) {
  if (config.data_roots_defaulted || config.output_roots_defaulted) {
    mkdir(config.state_dir.c_str(), 0755);
  }
  if (config.data_roots_defaulted) mkdir(config.data_roots.front().c_str(), 0755);
  if (config.output_roots_defaulted) mkdir(config.output_roots.front().c_str(), 0755);
  absl::StatusOr<lockstep::worker::FileRoots> roots =
      lockstep::worker::FileRoots::Create(config.data_roots, config.output_roots);
  if (!roots.ok()) return roots.status();
  spdlog::info("jobs read data under {} (--data_root) and write outputs under {} (--output_root)",
               absl::StrJoin(roots->data(), ","), absl::StrJoin(roots->output(), ","));
  return std::make_shared<const lockstep::worker::FileRoots>(*std::move(roots));
}

#ifdef LOCKSTEP_WITH_CUDA
// The engine's GPUs and NCCL for GPU jobs, built once for every job this worker runs.
struct CudaJobResources {
  std::unique_ptr<lockstep::collectives::nccl::RealNcclApi> nccl;
};

// NCCL for GPU jobs' collectives (distribute/nccl_all_reduce.h), loaded once, and each GPU
// replica's context, CUDA kernels and cuBLASLt handle (distribute/gpu_devices.h). Without
// NCCL, GPU jobs whose communication resolves to NCCL fail naming libnccl.so.2. The worker's
// /gpu:N is the N-th GPU --gpus selects, on its own CUDA ordinal (GpuDeviceSet::Create).
void SetUpCuda(const std::vector<lockstep::worker::GpuInfo>& gpus, CudaJobResources* resources,
               lockstep::worker::JobExecutorOptions* job_options) {
  if (gpus.empty()) return;
  absl::StatusOr<std::unique_ptr<lockstep::collectives::nccl::RealNcclApi>> loaded =
      lockstep::collectives::nccl::RealNcclApi::Load();
  if (loaded.ok()) {
    resources->nccl = *std::move(loaded);
  } else {
    spdlog::warn("GPU jobs cannot use NCCL: {}", std::string(loaded.status().message()));
  }
  job_options->nccl.api = resources->nccl.get();
  std::vector<int> ordinals;
  for (const lockstep::worker::GpuInfo& g : gpus) ordinals.push_back(g.ordinal);
  absl::StatusOr<std::shared_ptr<lockstep::distribute::GpuDeviceSet>> engine_gpus =
      lockstep::distribute::MakeCudaGpus(ordinals);
  if (engine_gpus.ok()) {
    job_options->devices.gpus = *std::move(engine_gpus);
  } else {
    spdlog::warn("GPU jobs cannot run: {}", std::string(engine_gpus.status().message()));
  }
}
#endif

// Waits for SIGTERM/SIGINT (or SIGUSR1: the agent ended by itself) and stops the worker:
// on SIGTERM the running jobs stop after their next step with a checkpoint (up to
// `preemption_grace`) before the agent leaves. Returns the agent's result.
absl::Status RunUntilSignalled(sigset_t signals, lockstep::worker::Agent* agent,
                               lockstep::worker::JobRunner* jobs, lockstep::HealthServer* health,
                               absl::Duration preemption_grace) {
  // This thread, which called BlockSignals, stays the one that takes the signals: a SIGTERM
  // that reaches one of OpenBLAS's threads is handed on to it at once. (Moving that role to
  // a new thread left a window in which a signal was handed to this thread and never taken:
  // a worker stopped right after it registered ignored SIGTERM and was killed.)
  const pthread_t waiter = pthread_self();
  absl::Status result;
  std::thread runner([&] {
    result = agent->Run();
    pthread_kill(waiter, SIGUSR1);  // Run() ended by itself (permanent error): wake the waiter
  });
  int sig = 0;
  sigwait(&signals, &sig);
  if (sig != SIGUSR1) {
    if (health != nullptr) health->Drain();
    if (sig == SIGTERM) {
      // A preemption (Kubernetes eviction, systemctl stop): the group checkpoints first. The
      // coordinator learns we are leaving before our PREEMPTED report, so it does not give us
      // the job's next attempt.
      agent->SetLeaving();
      const int preempted = jobs->PreemptAll("lockstepd received SIGTERM");
      if (preempted > 0) {
        spdlog::info("SIGTERM: {} job(s) stop after their next step with a checkpoint (up to {})",
                     preempted, absl::FormatDuration(preemption_grace));
        if (!jobs->WaitReported(absl::Now() + preemption_grace)) {
          spdlog::warn("the jobs did not stop within --preemption_grace={}: leaving anyway",
                       absl::FormatDuration(preemption_grace));
        }
      }
    }
    spdlog::info("{} received: leaving the cluster", strsignal(sig));
    agent->Stop();
  }
  runner.join();
  return result;
}

int Run(sigset_t signals) {
  absl::StatusOr<lockstep::worker::WorkerConfig> resolved = lockstep::worker::ResolveWorkerConfig(
      ReadFlags(), lockstep::worker::WorkerEnvironment::Real());
  if (!resolved.ok()) {
    spdlog::error("{}", std::string(resolved.status().message()));
    return kExitBadConfig;
  }
  lockstep::worker::WorkerConfig& config = *resolved;
  lockstep::worker::AgentOptions options;
  options.task = config.task;

  // Its CPU devices and its GPUs (worker/gpu), one replica each: a GPU host serves CPU jobs on
  // its CPUs and GPU jobs (JobSpec.gpus) on its GPUs.
  absl::StatusOr<lockstep::worker::WorkerDeviceSet> devices =
      lockstep::worker::WorkerDevices(config.cpu_devices, config.gpus, lockstep::worker::ProbeGpus,
                                      std::getenv("CUDA_VISIBLE_DEVICES"));
  if (!devices.ok()) {
    spdlog::error("{}", std::string(devices.status().message()));
    return kExitBadConfig;
  }
  if (!devices->warning.empty()) spdlog::warn("{}", devices->warning);
  if (!devices->gpus.empty()) {
    spdlog::info("lockstepd offers {}: {}", lockstep::worker::DescribeGpus(devices->gpus),
                 lockstep::worker::DescribeOffered(devices->gpus));
  }
  for (const lockstep::v1::Device& d : devices->registered) options.devices.push_back(d);

  // The data-plane port reserved now (kept open) when neither --address nor TF_CONFIG gave one.
  std::unique_ptr<lockstep::ReservedPort> reserved;
  options.address = config.address;
  if (config.reserve_port) {
    auto port = lockstep::ReservedPort::Create(config.reserve_on, 0);
    if (!port.ok()) {
      spdlog::error("cannot reserve a data-plane port: {}", std::string(port.status().message()));
      return kExitBadConfig;
    }
    reserved = *std::move(port);
    options.address = lockstep::worker::ReservedAddress(config, reserved->port());
  }

  if (absl::Status s = lockstep::CheckTlsOptions(config.tls, /*need_identity=*/true); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return kExitBadConfig;
  }
  if (config.tls.insecure) {
    spdlog::warn(
        "--insecure: talking to the coordinator in plaintext, unauthenticated; anyone on the "
        "network can read and forge this worker's traffic");
  }
  auto client = lockstep::worker::GrpcWorkerServiceClient::Create(config.coordinator, config.tls);
  if (!client.ok()) {
    spdlog::error("--coordinator: {}", std::string(client.status().message()));
    return kExitBadConfig;
  }
  options.incarnation = lockstep::NewIncarnation();
  spdlog::info(
      "lockstepd starting: {} incarnation {}, address {}, {} CPU device(s), "
      "coordinator {}",
      options.task.has_value() ? options.task->ToString() : "dynamic task",
      lockstep::ShortIncarnation(options.incarnation), options.address, config.cpu_devices,
      config.coordinator);

  lockstep::worker::JobExecutorOptions job_options;
  job_options.client = client->get();
  job_options.devices.num_cpu_devices = config.cpu_devices;
  job_options.devices.num_gpus = static_cast<int>(devices->gpus.size());
#ifdef LOCKSTEP_WITH_CUDA
  CudaJobResources cuda;
  SetUpCuda(devices->gpus, &cuda, &job_options);
#endif
  job_options.transport = config.transport;
  job_options.listen_host = config.reported_host;
  job_options.data_port = config.data_port;
  if (absl::Status s =
          lockstep::collectives::CheckListenPort(job_options.listen_host, job_options.data_port);
      !s.ok()) {
    spdlog::error("--data_port={}: {}", job_options.data_port, std::string(s.message()));
    return kExitBadConfig;
  }
  // Faults for the hang-verdict tests only (worker/test_hooks.h).
  if (config.test_hooks.has_value()) {
    spdlog::warn("LOCKSTEP_TEST_HOOKS={}: this worker injects faults into its jobs",
                 std::getenv("LOCKSTEP_TEST_HOOKS"));
    job_options.test_hooks = *config.test_hooks;
  }
  job_options.state_dir = config.state_dir;
  job_options.retained_checkpoint_copies = config.retained_checkpoint_copies;
  absl::StatusOr<std::shared_ptr<const lockstep::worker::FileRoots>> roots = MakeFileRoots(config);
  if (!roots.ok()) {
    spdlog::error("{}", std::string(roots.status().message()));
    return kExitBadConfig;
  }
  job_options.file_roots = *std::move(roots);
  // Monitoring: metrics, and the health port (NOT_SERVING until the agent is ALIVE, and for
  // good once draining). Both outlive the jobs and the agent, which report to them.
  lockstep::MetricsRegistry registry;
  lockstep::worker::WorkerMetrics metrics(&registry);
  absl::StatusOr<std::unique_ptr<lockstep::HealthServer>> health =
      lockstep::ServeMonitoring(config.metrics_address, config.health_address, &registry);
  if (!health.ok()) {
    spdlog::error("{}", std::string(health.status().message()));
    return kExitBadConfig;
  }
  if (!config.metrics_address.empty()) job_options.metrics = &metrics;
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
      lockstep::CoordinatorChannel(config.coordinator, config.tls);
  if (!upload_channel.ok()) {
    spdlog::error("{}", std::string(upload_channel.status().message()));
    return kExitBadConfig;
  }
  lockstep::worker::CheckpointUploader uploads(
      &jobs, lockstep::worker::GrpcUploadOpener(*upload_channel),
      {.state_dir = job_options.state_dir, .file_roots = job_options.file_roots});
  options.jobs = &uploads;

  lockstep::worker::Agent agent(options, client->get(), lockstep::Clock::Real());
  absl::Status result =
      RunUntilSignalled(signals, &agent, &jobs, health->get(), config.preemption_grace);
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
  absl::Status logging = lockstep::InitLogging("lockstepd", lockstep::ReadDaemonFlags().log_level);
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
