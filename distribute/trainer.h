// Trainer: one synchronous data-parallel SGD step of an engine Graph under any Strategy,
// the loop a worker's job executor runs for its partition:
//
//   per local replica (Strategy::Run, one thread each):
//     Executor::ComputeGradients on the replica's batch, loss scaled by
//       local_batch / global_batch so that SUM-all-reduced gradients are the global mean;
//     overlap (mirrored variables): each gradient's all-reduce starts from
//       StepOptions::on_gradient_ready while the backward pass goes on
//       (ReplicaContext::MakeGradientReducer, fused by bytes_per_pack), then the replica
//       applies the reduced gradients to its own copy with its own optimizer (mirrored
//       optimizer state);
//   no overlap, and always for CentralStorage: gradients come back as PerReplica values,
//     StrategyExtended::BatchReduceTo reduces them (to the host for central variables) and
//     StrategyExtended::Update applies them once per copy.
// Both paths give the same weights (within float rounding) under every strategy: the
// equivalence test checks OneDevice, Mirrored, CentralStorage and MultiWorkerMirrored.
//
// Gradient accumulation (optimizer.gradient_accumulation_steps K > 1): one step is K
// micro-batches. Each replica sums its gradients of the first K-1 where they lie (host memory,
// or on a GPU replica its device memory through the Add kernel: AddInto with the replica's
// GpuDevice; no collective), adds the sum into the last one's gradients as the backward pass
// finalises them, and only those are all-reduced and applied: one all-reduce and one update per K,
// with the loss scaled by local_batch / (global_batch * K), so a step equals one step on
// the K micro-batches concatenated (within float rounding). Micro-batch m of step s keys
// dropout as step s*K + m.
//
// Synchronized batch normalization: with several replicas in sync, the executor gets
// StepOptions::cross_replica_sum (ReplicaContext all-reduces, issued in graph order between
// the gradient reducer's packs, the same order on every replica), and a replica past the
// end of a partial global batch runs a phantom one-example batch so that it makes the same
// calls.
//
// GPU replicas (the strategy's LocalDevices::gpus): each replica's executor runs on its
// device (ExecutorOptions::gpu), its variable copy lives in that device's memory, its
// optimizer updates it there (one optimizer per copy, with that copy's device); host feeds are
// copied onto the device by the executor as they enter; the loss comes back as a host number.
// Over NCCL the gradients are all-reduced in place in device memory (overlapped); other
// cross-device ops stage them through the host (BatchReduceTo), without overlap.
// CentralStorage on GPU replicas (tf.distribute's semantics): the variables and the optimizer
// stay on the host; each step every replica reads them through
// StrategyExtended::ReadForReplica (one explicit host->device copy per variable into a device
// buffer the variable keeps for that replica), computes its gradients on its device, and
// BatchReduceTo brings each gradient back (one device->host copy per gradient and replica),
// sums them on the host in replica order, and Update applies them once with the host optimizer.
//
// Variables are created in the strategy's scope from VariableSet::Initialize(graph); with
// several workers the chief's values are broadcast, so every replica starts identical.
// Ownership: borrows the strategy and the graph (both must outlive it); owns executors,
// optimizers and variables. Thread model: Step() from one thread at a time.
#ifndef LOCKSTEP_DISTRIBUTE_TRAINER_H_
#define LOCKSTEP_DISTRIBUTE_TRAINER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "distribute/distributed_values.h"
#include "distribute/distributed_variable.h"
#include "distribute/strategy.h"
#include "engine/executor.h"
#include "engine/graph.h"
#include "engine/optimizer.h"
#include "lockstep/v1/checkpoint.pb.h"
#include "lockstep/v1/model.pb.h"

namespace lockstep::distribute {

// Where a step is, for a flight recorder (worker/flight_recorder.h).
enum class StepPhase { kCompute, kAllReduce, kApply };

struct TrainerOptions {
  v1::OptimizerSpec optimizer;
  int64_t global_batch_size = 0;
  // All-reduce gradients from the backward pass (replica context). Ignored (false) for
  // central variables.
  bool overlap_all_reduce = true;
  std::string features_key = "features";
  std::string labels_key = "labels";
  // Called as the step enters each phase (by the first local replica's thread, and by
  // Step's caller for the reductions after the replicas). Must be cheap; may be empty.
  std::function<void(StepPhase)> on_phase;
};

// Where one step's time went on this worker (each phase averaged over its local replicas). Shows
// whether a job is bound by compute or by communication the backward pass did not hide, and
// which worker the others wait for (its compute is longer and its wait shorter).
struct StepTimes {
  // Forward and backward passes, with the gradients' all-reduces in flight meanwhile.
  absl::Duration compute;
  // Blocked on collectives: after the backward pass until every gradient is reduced (without
  // overlap: the whole gradient reduction), then the loss's reduction.
  absl::Duration allreduce_wait;
  // The optimizer's update.
  absl::Duration apply;
  // The whole step, these three included.
  absl::Duration total;
  // Before the step, not in `total`: waiting for its input (set by whoever fetched it, the
  // job executor; zero from Trainer::Step).
  absl::Duration input_wait;

  StepTimes& operator+=(const StepTimes& o) {
    input_wait += o.input_wait;
    compute += o.compute;
    allreduce_wait += o.allreduce_wait;
    apply += o.apply;
    total += o.total;
    return *this;
  }
};

struct TrainStepResult {
  double loss = 0;  // mean over the global batch
  int64_t examples = 0;
  StepTimes times;
  // Some worker asked, in this step, that every worker stop after it (Step's `request_stop`):
  // the same answer on every worker, in the same step.
  bool stop = false;
};

class Trainer {
 public:
  // INVALID_ARGUMENT for a bad optimizer spec or a non-positive global batch; errors of
  // variable creation (the chief's broadcast).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(Strategy* strategy,
                                                         const engine::Graph* graph,
                                                         TrainerOptions options);

  // One step on `inputs` = {features, labels}, as a DistributedDataset yields them.
  // `request_stop`: ask every worker to stop after this step (a preemption). The request
  // travels in the step's loss all-reduce (one more element), so it costs no extra
  // collective and every worker learns it in the same step (TrainStepResult::stop).
  absl::StatusOr<TrainStepResult> Step(const std::vector<DistributedValues>& inputs,
                                       bool request_stop = false);
  // One step on K = accumulation_steps() micro-batches, each {features, labels}.
  // INVALID_ARGUMENT unless there are exactly K.
  absl::StatusOr<TrainStepResult> Step(absl::Span<const std::vector<DistributedValues>> micro,
                                       bool request_stop = false);
  // Micro-batches per step: optimizer.gradient_accumulation_steps, or 1.
  int accumulation_steps() const { return accumulation_steps_; }

  // Makes this trainer continue from `checkpoint`: every local copy of every variable, every
  // copy's optimizer slots (the learning-rate schedule's position is the optimizer's
  // iterations), and the step count (it keys dropout), so the next Step() computes what
  // step global_step + 1 of an uninterrupted run computes. Local only: every worker calls
  // it with the same checkpoint. INVALID_ARGUMENT naming a variable or slot that is
  // missing or of another dtype or shape (nothing is half-restored for variables: they are
  // checked before any is written).
  absl::Status Restore(const v1::Checkpoint& checkpoint);

  // The variables; a GPU replica's copies are device tensors (read them with HostVariables).
  const std::vector<DistributedVariable>& variables() const { return variables_; }
  // Every variable's value (the first copy) on the host, in variables() order: the tensors
  // themselves on a CPU, host copies from a GPU (synchronises). For checkpoints, evaluation,
  // export.
  absl::StatusOr<std::vector<engine::Tensor>> HostVariables() const;
  int64_t steps() const { return steps_; }
  // The first copy's optimizer (every copy holds the same state): its learning rate and
  // slots, for progress reports and checkpoints. Valid while the trainer lives.
  const engine::Optimizer& optimizer() const { return *optimizers_.front(); }

 private:
  Trainer(Strategy* strategy, const engine::Graph* graph, TrainerOptions options)
      : strategy_(strategy),
        graph_(graph),
        options_(std::move(options)),
        accumulation_steps_(std::max(1, options_.optimizer.gradient_accumulation_steps())),
        sums_over_replicas_(graph->SumsOverReplicas()) {}
  absl::Status ProbeGradientOrder();
  // A one-example batch of zeros for the features and labels (the probe's, and the stand-in
  // batch of a replica with no examples in a model that sums over replicas).
  absl::StatusOr<engine::Feeds> ZeroBatch() const;
  absl::StatusOr<std::vector<engine::Tensor>> ReplicaStep(ReplicaContext& ctx,
                                                          const std::vector<engine::Tensor>& args,
                                                          bool overlap, bool request_stop);
  // options_.on_phase, when set and `replica` is the first local one.
  void EnterPhase(StepPhase phase, int replica = 0) const {
    if (replica == 0 && options_.on_phase) options_.on_phase(phase);
  }

  Strategy* const strategy_;
  const engine::Graph* const graph_;
  const TrainerOptions options_;
  const int accumulation_steps_;
  const bool sums_over_replicas_;  // graph_->SumsOverReplicas(), read every step
  std::vector<DistributedVariable> variables_;
  std::vector<std::unique_ptr<engine::Executor>> executors_;    // per local replica
  std::vector<std::unique_ptr<engine::Optimizer>> optimizers_;  // per variable copy
  // The order in which the backward pass finalises gradients (a property of the graph,
  // probed once in Create): a replica with an empty batch adds its zero gradients to the
  // all-reduce in this same order, as every replica must (unless the graph sums over the
  // replicas: it then runs a phantom batch, which makes the same collective calls).
  std::vector<int> gradient_order_;
  // Gradients are reduced where they lie (CPU replicas, or GPU replicas over NCCL); else they
  // are staged through host memory by BatchReduceTo, without overlap.
  bool device_reduction_ = true;
  // This step's phases, per local replica (each replica's thread writes its own).
  std::vector<StepTimes> replica_times_;
  int64_t steps_ = 0;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_TRAINER_H_
