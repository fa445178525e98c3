// MultiWorkerMirroredStrategy: synchronous training on every device of every worker
// (tf.distribute.MultiWorkerMirroredStrategy). Each worker process builds its own strategy
// from its TF_CONFIG (multi-client) and runs the same program; replicas are numbered in
// task order (the chief first, then workers by index), replica_id_in_sync_group =
// worker_rank * devices_per_worker + local index, so every worker must have the same number
// of devices. Variables are mirrored everywhere and start from the chief's values
// (broadcast at creation).
//
// All-reduce, per `hierarchical`:
//   true (default): the local replicas' tensors are summed on the host, then one
//     all-reduce per worker goes across workers (LocalReduceOps over the cross-worker group);
//   false (flat): every replica is a rank of one group spanning all workers (CollectiveOps).
// GPU replicas whose communication.implementation resolves to NCCL (AUTO or NCCL:
// communication_backend.h) use NcclAllReduce instead: one NCCL group of every replica of every
// worker ("<prefix>/nccl" in the store), whatever `hierarchical` says; the cross-worker group
// still carries host values. CPU replicas: AUTO (the collectives choose by size) or RING;
// NCCL is refused for them. bytes_per_pack fuses cross-worker all-reduces; timeout bounds
// every collective; compression kBF16 sends the gradient packs as bf16 (in both layouts: the
// cross-worker packs when hierarchical, every replica's packs when flat).
//
// Collective groups are formed through the rendezvous Store under `key_prefix` (scope it by
// job and attempt): "<prefix>/workers" (one rank per worker) and, when flat,
// "<prefix>/replicas".
// Errors from Create: FAILED_PRECONDITION for a task outside the training group (ps,
// evaluator); the factory's errors (DEADLINE_EXCEEDED when peers do not show up).
// Thread model: as Strategy; Create blocks until every worker has joined.
#ifndef LOCKSTEP_DISTRIBUTE_MULTI_WORKER_MIRRORED_STRATEGY_H_
#define LOCKSTEP_DISTRIBUTE_MULTI_WORKER_MIRRORED_STRATEGY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/collective_observer.h"
#include "collectives/store.h"
#include "collectives/types.h"
#include "common/tf_config.h"
#include "distribute/nccl_all_reduce.h"
#include "distribute/strategy.h"

namespace lockstep::distribute {

struct MultiWorkerMirroredStrategyOptions {
  // This worker's devices; empty: every GPU, else every logical CPU device of `available`.
  std::vector<std::string> devices;
  LocalDevices available;
  CommunicationOptions communication;
  NcclEnvironment nccl;  // GPU replicas over NCCL
  bool hierarchical = true;
  // Rendezvous (not owned; must outlive Create) and the groups' transport.
  collectives::Store* store = nullptr;
  std::string key_prefix = "distribute";
  std::string secret;  // the job's secret, for TCP
  collectives::TransportKind transport = collectives::TransportKind::kTcp;
  std::string listen_host = "127.0.0.1";
  // TCP: the port the worker group listens on (0: an ephemeral one); flat, local replica r
  // listens on data_port + 1 + r. `data_port_origin` names who chose it, in errors.
  int data_port = 0;
  std::string data_port_origin;
  absl::Duration connect_timeout = absl::Seconds(60);
  // Told what the groups' communicators run and move (metrics); optional, must outlive the
  // strategy.
  collectives::CollectiveObserver* observer = nullptr;
  // When set, the cross-worker group's communicator is told instead of `observer` (a flight
  // recorder numbers the collectives of one group; a CollectiveObserverList of it and
  // `observer` keeps the metrics); optional, must outlive the strategy.
  collectives::CollectiveObserver* cross_worker_observer = nullptr;
};

class MultiWorkerMirroredStrategy final : public Strategy {
 public:
  static absl::StatusOr<std::unique_ptr<MultiWorkerMirroredStrategy>> Create(
      const TfConfig& cluster, const MultiWorkerMirroredStrategyOptions& options);

 private:
  using Strategy::Strategy;
};

// This task's rank in the training group: the chief is 0, then workers by index.
// FAILED_PRECONDITION for ps and evaluator tasks.
absl::StatusOr<int> TrainingRank(const TfConfig& cluster);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_MULTI_WORKER_MIRRORED_STRATEGY_H_
