// Strategy: the tf.distribute API in C++ (OneDevice, Mirrored, CentralStorage and
// MultiWorkerMirrored are its kinds; see their headers). A strategy owns this worker's
// replicas (one per device in worker_devices()), the CrossDeviceOps that combine their
// values, and, with several workers, the cross-worker communicator.
//
//   auto strategy = MirroredStrategy::Create({.devices = {"/cpu:0", "/cpu:1"}});
//   StrategyScope scope = (*strategy)->Scope();
//   DistributedVariable w = *scope.CreateVariable("w", init);      // MirroredVariable
//   auto dataset = (*strategy)->ExperimentalDistributeDataset(source, /*global_batch=*/64);
//   while (auto step = *(*dataset)->Next()) {
//     auto loss = (*strategy)->Run(step_fn, {(**step)[0], (**step)[1]});   // PerReplica
//     auto mean = (*strategy)->Reduce(ReduceOp::kMean, *loss, /*axis=*/0);
//   }
//
// Contexts, as in tf.distribute: Run calls `fn` once per local replica, each on its own
// thread, under a ReplicaContext (replica id, AllReduce); everything else is called in
// cross-replica context, from one thread, never while a Run is in flight.
//
// Multi-worker (multi-client, like TensorFlow's MultiWorkerMirroredStrategy): every worker
// builds its own strategy and runs the same program; Reduce, BatchReduceTo and variable
// creation are collective across workers, and a worker only sees its own replicas'
// values (ExperimentalLocalResults).
//
// Errors: INVALID_ARGUMENT for misuse (mismatched per-replica arguments, shapes that cannot
// be reduced without an axis, a global batch not divisible by the replicas); the
// CrossDeviceOps errors (DEADLINE_EXCEEDED, UNAVAILABLE, ABORTED) for failed reductions,
// after which the strategy is failed and must be rebuilt (Abort() forces that, e.g. when a
// peer worker is lost).
// Thread model: one cross-replica caller thread; ReplicaContexts on the replica threads.
#ifndef LOCKSTEP_DISTRIBUTE_STRATEGY_H_
#define LOCKSTEP_DISTRIBUTE_STRATEGY_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/blob_broadcast.h"
#include "collectives/collective_communicator.h"
#include "common/tf_config.h"
#include "distribute/communication_backend.h"
#include "distribute/cross_device_ops.h"
#include "distribute/distributed_dataset.h"
#include "distribute/distributed_values.h"
#include "distribute/distributed_variable.h"
#include "distribute/gpu_devices.h"
#include "distribute/replica_context.h"
#include "distribute/replica_threads.h"
#include "engine/device.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

class Strategy;

// tf.distribute.experimental.CommunicationOptions.
struct CommunicationOptions {
  // Resolved per replica kind by ResolveBackend (communication_backend.h), unless `backend`
  // is given. kRing also keeps Lockstep's collectives on the ring algorithm.
  using Implementation = distribute::Implementation;
  Implementation implementation = Implementation::kAuto;
  // The backend a job's plan decided (jobspec/lower.h, worker/job_strategy.h): the strategy
  // takes it as given and checks only the facts of this worker (NCCL in its build), never
  // the choice. Unset (a strategy built directly): `implementation` is resolved.
  std::optional<CollectiveBackend> backend;
  // Cross-worker fusion: tensors are packed into all-reduces of at most this many bytes
  // (0: the collectives' default pack size, 4 MiB).
  size_t bytes_per_pack = 0;
  // Bound on every collective; tf.distribute's "no timeout" is not offered (nothing may
  // hang forever): the default is 5 minutes.
  absl::Duration timeout = absl::Minutes(5);
  // Shared-memory transport: bytes each rank reserves as the communicator's zero-copy heap,
  // where the trainer places the gradients so that peers read them in place (0: none). Jobs
  // size it from the model (worker/job_executor.cc); too little room only costs the copy.
  size_t shm_heap_bytes = 0;
  // TCP transport: encrypt and authenticate the traffic between workers (AES-256-GCM).
  bool encrypt = false;
  // MultiWorkerMirrored: how the gradient packs (GradientReducer: the Trainer's overlapped
  // path, which jobs run) travel. kBF16: each replica's f32 gradients are rounded to bf16 for
  // the all-reduce and widened back before the optimizer applies them
  // (collectives::FusedAllReduce); variables and optimizer state stay f32. Losses, metrics,
  // ReplicaContext::AllReduce and CrossWorkerSum (so the Trainer's path without overlap)
  // stay f32. Mirrored over NCCL compresses its GPUs' packs too (on the device:
  // DeviceBf16Codec); the other strategies of one worker ignore it (a job's lowering refuses
  // BF16 for one-worker jobs: jobspec/rules.h).
  collectives::Compression compression = collectives::Compression::kNone;
};

// The devices this worker may place replicas on (the worker's --cpu_devices=N logical CPU
// devices; its GPUs).
struct LocalDevices {
  int num_cpu_devices = 1;
  int num_gpus = 0;
  // The GPUs' engine devices (gpu_devices.h): what a GPU replica's variables, executor and
  // optimizer run on. Null: none built (a strategy may still place replicas on /gpu:N for
  // replica-context collectives on host values, but variables and training there fail with
  // FAILED_PRECONDITION naming the device).
  std::shared_ptr<GpuDeviceSet> gpus;
};

// Where a cross-replica reduction puts its result.
enum class Destination {
  kReplicas,  // a Mirrored value, one copy per local replica device
  kHost,      // one tensor on the host CPU (CentralStorage's variables live there)
};

// Returned by Strategy::Scope(): while alive, the strategy is in its scope and variables
// created through it are distributed (tf.variable_creator_scope). Movable, not copyable.
class StrategyScope {
 public:
  explicit StrategyScope(Strategy* strategy);
  ~StrategyScope();
  StrategyScope(StrategyScope&& other) noexcept;
  StrategyScope(const StrategyScope&) = delete;
  StrategyScope& operator=(const StrategyScope&) = delete;
  StrategyScope& operator=(StrategyScope&&) = delete;

  // A MirroredVariable (copies on every local device) or a central variable (one copy on
  // the host), per the strategy. Multi-worker: collective; every worker's copies start from
  // the chief's `initial` (broadcast). FAILED_PRECONDITION after the scope was moved from.
  absl::StatusOr<DistributedVariable> CreateVariable(std::string name,
                                                     const engine::Tensor& initial);

 private:
  Strategy* strategy_;
};

// tf.distribute.StrategyExtended: the lower-level cross-replica operations.
class StrategyExtended {
 public:
  explicit StrategyExtended(Strategy* strategy) : strategy_(strategy) {}

  // The local replicas' devices, in local replica order.
  const std::vector<engine::Device>& worker_devices() const;
  // The engine handles of local replica `local_replica`'s device: null for a CPU device;
  // FAILED_PRECONDITION naming a GPU the strategy was given no device for.
  absl::StatusOr<const engine::gpu::GpuDevice*> replica_gpu(int local_replica) const;
  // The handles of the device that variable copy `copy` lives on (as replica_gpu for mirrored
  // copies; null for CentralStorage's host copy).
  absl::StatusOr<const engine::gpu::GpuDevice*> copy_gpu(int copy) const;
  CrossDeviceOps& cross_device_ops();

  // Reduces `value` (PerReplica or Mirrored, one component per local replica) over every
  // replica of every worker. kReplicas: a Mirrored value; kHost: one component.
  absl::StatusOr<DistributedValues> ReduceTo(ReduceOp op, const DistributedValues& value,
                                             Destination destination);
  // Several values at once; the cross-worker part is fused by bytes_per_pack.
  absl::StatusOr<std::vector<DistributedValues>> BatchReduceTo(
      ReduceOp op, const std::vector<DistributedValues>& values, Destination destination);
  // Where updates to this strategy's variables must be reduced to.
  Destination variable_destination() const;

  // What local replica `local_replica` computes with, in its device's memory, in `variables`'
  // order: a mirrored variable's own copy; a central variable's host copy on a CPU replica.
  // On a GPU replica a central variable's current host value is copied (one explicit
  // host->device copy per variable, then one synchronisation) into the variable's buffer for
  // that replica (DistributedVariable::replica_buffer: allocated on the first read, reused by
  // every later one, so no allocation per step). Call it from the replica's thread once per
  // step, after the previous update (tf.distribute's read of a central variable on a compute
  // device). FAILED_PRECONDITION naming a GPU without device handles; the device's errors.
  absl::StatusOr<std::vector<engine::Tensor>> ReadForReplica(
      const std::vector<DistributedVariable>& variables, int local_replica) const;

  // Applies reduced gradients to variables: fn(copy, variables, gradients) is called once
  // per copy of the variables (each local replica's copy for mirrored variables, the one
  // central copy for CentralStorage), with `variables` aliasing that copy's tensors and
  // `gradients` the reduced values on that copy's device. Keep one optimizer per copy.
  // Makes every worker's values the chief's (worker 0's): after a checkpoint restore on the
  // chief, or for optimizer state. Collective across workers (a no-op with one worker);
  // for variables, copy 0 is broadcast and then copied into the local copies.
  absl::Status BroadcastFromChief(const std::vector<engine::Tensor*>& tensors);
  absl::Status BroadcastFromChief(const std::vector<DistributedVariable*>& variables);
  // Makes `*bytes` worker `root`'s on every worker: a checkpoint that only some worker
  // holds, at a restart. Bounded and authenticated (collectives/blob_broadcast.h: a length
  // over options.max_bytes is refused before allocating, RESOURCE_EXHAUSTED; bytes that fail
  // the MAC keyed from options.secret are DATA_LOSS; both name the root). Collective across
  // workers (a no-op with one worker); INVALID_ARGUMENT for a root that is not a worker's
  // rank.
  absl::Status BroadcastBytes(std::string* bytes, int root,
                              const collectives::BlobOptions& options);

  using UpdateFn = std::function<absl::Status(int copy, std::vector<engine::Tensor>& variables,
                                              const std::vector<engine::Tensor>& gradients)>;
  absl::Status Update(const std::vector<DistributedVariable*>& variables,
                      const std::vector<DistributedValues>& reduced_gradients, const UpdateFn& fn);

 private:
  // BroadcastFromChief of a variable whose copies are device tensors.
  absl::Status BroadcastDeviceVariable(DistributedVariable* v);

  Strategy* strategy_;
};

// Everything a concrete strategy decides; made by the kinds' Create functions.
struct StrategyConfig {
  std::string name;                     // "MirroredStrategy"
  std::vector<engine::Device> devices;  // the local replicas
  // The GPU replicas' engine devices (LocalDevices::gpus); may be null.
  std::shared_ptr<GpuDeviceSet> gpus;
  int worker_index = 0;  // this worker's rank in the training group
  int num_workers = 1;
  DistributedVariable::Kind variable_kind = DistributedVariable::Kind::kMirrored;
  CommunicationOptions communication;
  std::optional<TfConfig> cluster_resolver;
  // Cross-worker group (one rank per worker); null with one worker. Owned.
  std::unique_ptr<collectives::CollectiveCommunicator> cross_worker;
  // Built last: may point at `cross_worker`.
  std::unique_ptr<CrossDeviceOps> cross_device_ops;
};

class Strategy {
 public:
  // A replica's function: its context and its arguments (plain tensors as given, this
  // replica's component of DistributedValues), returning its outputs.
  using ReplicaFn = std::function<absl::StatusOr<std::vector<engine::Tensor>>(
      ReplicaContext& ctx, const std::vector<engine::Tensor>& args)>;
  using SingleOutputFn = std::function<absl::StatusOr<engine::Tensor>(
      ReplicaContext& ctx, const std::vector<engine::Tensor>& args)>;

  explicit Strategy(StrategyConfig config);
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  const std::string& name() const { return config_.name; }
  int num_replicas_in_sync() const {
    return static_cast<int>(config_.devices.size()) * config_.num_workers;
  }
  int num_local_replicas() const { return static_cast<int>(config_.devices.size()); }
  int worker_index() const { return config_.worker_index; }
  int num_workers() const { return config_.num_workers; }
  // TF_CONFIG of a multi-worker strategy; nullopt for single-worker ones.
  const std::optional<TfConfig>& cluster_resolver() const { return config_.cluster_resolver; }
  const CommunicationOptions& communication_options() const { return config_.communication; }
  StrategyExtended& extended() { return extended_; }

  StrategyScope Scope() { return StrategyScope(this); }
  bool in_scope() const { return scope_depth_.load() > 0; }

  // Calls fn once per local replica (each on its replica's own long-lived thread, under its
  // ReplicaContext). Returns one PerReplica value per output. FAILED_PRECONDITION when
  // called from inside a replica function; INVALID_ARGUMENT when a DistributedValues
  // argument has not one component per local replica, or replicas return different
  // numbers of outputs; a replica's error is returned (naming the replica) after the
  // strategy's reductions are aborted so that no other replica waits for it.
  absl::StatusOr<std::vector<DistributedValues>> RunMulti(const ReplicaFn& fn,
                                                          const std::vector<RunArg>& args);
  absl::StatusOr<DistributedValues> Run(const SingleOutputFn& fn,
                                        const std::vector<RunArg>& args = {});

  // tf.distribute.Strategy.reduce: the value reduced over every replica, on the host.
  // axis none: element-wise across replicas (every component must have one shape); axis 0:
  // also over the batch dimension, MEAN dividing by the true number of elements. A plain
  // tensor is taken as the same value on every replica: MEAN gives it back, SUM is refused
  // with more than one replica.
  absl::StatusOr<engine::Tensor> Reduce(ReduceOp op, const RunArg& value, ReduceAxis axis);

  // This worker's components ((value) for a plain tensor).
  std::vector<engine::Tensor> ExperimentalLocalResults(const DistributedValues& value) const;
  std::vector<engine::Tensor> ExperimentalLocalResults(const DistributedVariable& value) const;
  std::vector<engine::Tensor> ExperimentalLocalResults(const engine::Tensor& value) const;

  // fn called once per local replica with its ValueContext; a PerReplica value.
  absl::StatusOr<DistributedValues> DistributeValuesFromFunction(
      const std::function<absl::StatusOr<engine::Tensor>(const ValueContext&)>& fn);

  // Auto-shards `source` across workers, batches this worker's pipeline by
  // global_batch_size / num_workers and splits each batch among the local replicas.
  // INVALID_ARGUMENT when global_batch_size is not a positive multiple of
  // num_replicas_in_sync; FAILED_PRECONDITION for FILE sharding with too few files.
  absl::StatusOr<std::unique_ptr<DistributedDataset>> ExperimentalDistributeDataset(
      const DatasetSource& source, int64_t global_batch_size, DistributeOptions options = {});
  // fn called once for this worker (input pipeline) with its InputContext; its iterator
  // must yield per-replica batches.
  absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributeDatasetsFromFunction(
      const std::function<absl::StatusOr<std::unique_ptr<BatchIterator>>(const InputContext&)>& fn,
      DistributeOptions options = {});

  // Ends every pending and later reduction with ABORTED (a lost peer, a cancelled job).
  void Abort();
  // The coordinator reports worker `rank` (Partition.worker_rank) lost: every pending and
  // later reduction fails; over NCCL with UNAVAILABLE naming `rank` (CrossDeviceOps::PeerLost).
  void PeerLost(int rank, const std::string& reason);

 protected:
  friend class StrategyScope;
  friend class StrategyExtended;

  absl::Time Deadline() const { return absl::Now() + config_.communication.timeout; }
  absl::StatusOr<DistributedValues> CheckLocal(const RunArg& value, const char* what) const;
  // Broadcasts `t` from worker 0 to every worker (no-op with one worker); a device tensor
  // goes through host memory.
  absl::Status BroadcastFromChief(engine::Tensor* t);
  // Local replica `local_replica`'s value `t` on the host (itself when it is there).
  absl::StatusOr<engine::Tensor> OnHost(const engine::Tensor& t, int local_replica) const;
  // Per local replica, the GPU context a distributed dataset stages its batches on (null: a
  // CPU replica, one without device handles, or options.prefetch_to_device off).
  std::vector<engine::gpu::DeviceContext*> StagingContexts(const DistributeOptions& options) const;

  StrategyConfig config_;
  StrategyExtended extended_{this};
  std::atomic<int> scope_depth_{0};
  std::atomic<bool> running_{false};  // a Run is in flight
  // One long-lived thread per local replica (none with one replica: Run calls fn inline).
  std::unique_ptr<ReplicaThreads> replica_threads_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_STRATEGY_H_
