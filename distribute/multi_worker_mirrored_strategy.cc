#include "distribute/multi_worker_mirrored_strategy.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "collectives/communicator_factory.h"
#include "common/status.h"
#include "distribute/collective_ops.h"
#include "distribute/devices.h"
#include "distribute/local_reduce_ops.h"
#include "distribute/nccl_all_reduce.h"

namespace lockstep::distribute {

absl::StatusOr<int> TrainingRank(const TfConfig& cluster) {
  const std::string& type = cluster.task_type();
  const bool has_chief = cluster.cluster().count("chief") > 0;
  if (type == "chief") return 0;
  if (type == "worker") return cluster.task_index() + (has_chief ? 1 : 0);
  return absl::FailedPreconditionError(
      absl::StrCat("task ", cluster.task().ToString(),
                   " is not part of the training group (only chief and worker tasks train with "
                   "MultiWorkerMirroredStrategy)"));
}

absl::StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>> MultiWorkerMirroredStrategy::Create(
    const TfConfig& cluster, const MultiWorkerMirroredStrategyOptions& options) {
  StrategyConfig config;
  config.name = "MultiWorkerMirroredStrategy";
  LS_ASSIGN_OR_RETURN(config.worker_index, TrainingRank(cluster));
  config.num_workers = cluster.num_workers();
  LS_ASSIGN_OR_RETURN(config.devices, ResolveDevices(options.devices, options.available));
  config.gpus = options.available.gpus;
  LS_ASSIGN_OR_RETURN(
      const CollectiveBackend backend,
      CheckBackend(options.communication, config.devices, HasNccl(options.nccl), config.name));
  config.communication = options.communication;
  config.cluster_resolver = cluster;
  if (config.num_workers > 1 && options.store == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(config.name, " with ", config.num_workers,
                                                   " workers needs a rendezvous Store"));
  }

  collectives::CommunicatorConfig base;
  base.transport = options.transport;
  base.secret = options.secret;
  base.listen_host = options.listen_host;
  base.tcp.listen_port = options.data_port;
  base.tcp.listen_port_origin = options.data_port_origin;
  base.tcp.encrypt = options.communication.encrypt;
  base.connect_timeout = options.connect_timeout;
  base.observer = options.observer;
  if (options.communication.implementation == CommunicationOptions::Implementation::kRing) {
    base.algorithms.algorithm = collectives::AllReduceAlgorithm::kRing;
  }
  const int n = static_cast<int>(config.devices.size());
  const int in_sync = n * config.num_workers;
  // A worker rank keeps its replicas' compute threads busy beside its communicator's thread
  // (a replica rank, flat: one of each). Over shared memory, when those threads outnumber the
  // cores, a rank waiting for a peer sleeps at once instead of spinning or yielding to its
  // own compute thread (ShmOptions). The communicator's thread always asks for the shortest
  // scheduler slice (harmless on idle cores), so a peer's wake-up preempts a compute thread
  // and the gradient all-reduce really overlaps the backward pass (bench/train_throughput,
  // 2 workers on 2 cores: the all-reduce started mid-backward took 3.1-3.4 ms, now
  // 0.5-1.2 ms; the examples/s did not change, as both cores were already busy).
  base.shm.busy_threads_per_rank = n + 1;
  base.shm.heap_bytes = options.communication.shm_heap_bytes;
  base.algorithms.progress_thread_slice = absl::Microseconds(100);
  const std::string who = absl::StrCat(config.name, " worker ", config.worker_index, " (",
                                       cluster.task().ToString(), ")");

  if (config.num_workers > 1) {
    collectives::CommunicatorConfig c = base;
    c.rank = config.worker_index;
    c.world_size = config.num_workers;
    c.key_prefix = absl::StrCat(options.key_prefix, "/workers");
    if (options.cross_worker_observer != nullptr) c.observer = options.cross_worker_observer;
    if (c.transport == collectives::TransportKind::kInProc) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": workers are separate processes; use the TCP or shm transport"));
    }
    absl::StatusOr<std::unique_ptr<collectives::CollectiveCommunicator>> comm =
        collectives::CreateCommunicator(c, options.store);
    if (!comm.ok()) return Annotate(comm.status(), absl::StrCat(who, ": joining the worker group"));
    config.cross_worker = std::move(*comm);
  }

  if (backend == CollectiveBackend::kNccl) {
    // Every GPU replica of every worker is a rank of one NCCL group (NCCL arranges rings and
    // trees across hosts itself, so `hierarchical` does not apply); the cross-worker group
    // above still carries host values (losses, metrics, the initial broadcast).
    NcclAllReduceOptions o;
    o.env = options.nccl;
    o.devices = config.devices;
    o.gpus = config.gpus;
    o.first_rank = config.worker_index * n;
    o.num_replicas_in_sync = in_sync;
    o.store = options.store;
    o.key = absl::StrCat(options.key_prefix, "/nccl");
    o.cross_worker = config.cross_worker.get();
    o.communication = options.communication;
    absl::StatusOr<std::unique_ptr<NcclAllReduce>> ops = NcclAllReduce::Create(o);
    if (!ops.ok()) return Annotate(ops.status(), absl::StrCat(who, ": joining the NCCL group"));
    config.cross_device_ops = *std::move(ops);
  } else if (options.hierarchical || config.num_workers == 1) {
    config.cross_device_ops = std::make_unique<LocalReduceOps>(
        n, in_sync, config.cross_worker.get(), options.communication.bytes_per_pack,
        options.communication.compression);
  } else {
    // Flat: every local replica joins the all-replica group; they must connect concurrently.
    std::vector<absl::StatusOr<std::unique_ptr<collectives::CollectiveCommunicator>>> comms(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        collectives::CommunicatorConfig c = base;
        c.rank = config.worker_index * n + r;
        c.world_size = in_sync;
        c.key_prefix = absl::StrCat(options.key_prefix, "/replicas");
        c.shm.busy_threads_per_rank = 2;
        if (options.data_port != 0) c.tcp.listen_port = options.data_port + 1 + r;
        comms[r] = collectives::CreateCommunicator(c, options.store);
      });
    }
    for (std::thread& t : threads) t.join();
    std::vector<std::unique_ptr<collectives::CollectiveCommunicator>> owned;
    for (int r = 0; r < n; ++r) {
      if (!comms[r].ok()) {
        return Annotate(comms[r].status(),
                        absl::StrCat(who, ": joining the replica group as replica ",
                                     config.worker_index * n + r));
      }
      owned.push_back(std::move(*comms[r]));
    }
    config.cross_device_ops = std::make_unique<CollectiveOps>(
        std::move(owned), in_sync, config.cross_worker.get(), options.communication.bytes_per_pack,
        options.communication.compression);
  }
  return std::unique_ptr<MultiWorkerMirroredStrategy>(
      new MultiWorkerMirroredStrategy(std::move(config)));
}

}  // namespace lockstep::distribute
