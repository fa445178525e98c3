// DistributedValues: one value per local replica, as tf.distribute has them.
//
//   PerReplica  values that differ between replicas (a replica's batch, its loss), what
//               Strategy::Run returns and what a distributed dataset yields;
//   Mirrored    values kept identical on every replica (all-reduced gradients, the copies
//               of a MirroredVariable).
//
// Only this worker's replicas are held (tf.distribute's multi-client model: each worker
// sees its own replicas; ExperimentalLocalResults returns them). Component i belongs to
// local replica i, on the strategy's worker_devices()[i].
//
// Also the small value types the strategies share: ReduceOp, ReduceAxis, ValueContext and
// InputContext (what DistributeValuesFromFunction and DistributeDatasetsFromFunction hand to
// the user's function).
//
// Value types: copying aliases the tensors (engine::Tensor semantics). Not synchronised.
#ifndef LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VALUES_H_
#define LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VALUES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/types.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

// tf.distribute.ReduceOp.
enum class ReduceOp { kSum, kMean };
const char* ReduceOpName(ReduceOp op);
// "SUM"/"sum", "MEAN"/"mean" as tf.distribute accepts them; INVALID_ARGUMENT otherwise.
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

// The `axis` argument of Strategy::Reduce: none (across replicas only) or a batch axis.
// Only axis 0 is supported; anything else is refused with INVALID_ARGUMENT.
using ReduceAxis = std::optional<int>;
inline constexpr ReduceAxis kNoAxis = std::nullopt;

class DistributedValues {
 public:
  enum class Kind { kPerReplica, kMirrored };

  DistributedValues() = default;
  static DistributedValues PerReplica(std::vector<engine::Tensor> values) {
    return DistributedValues(Kind::kPerReplica, std::move(values));
  }
  static DistributedValues Mirrored(std::vector<engine::Tensor> values) {
    return DistributedValues(Kind::kMirrored, std::move(values));
  }

  Kind kind() const { return kind_; }
  bool is_mirrored() const { return kind_ == Kind::kMirrored; }
  int num_components() const { return static_cast<int>(values_.size()); }
  const engine::Tensor& component(int local_replica) const { return values_[local_replica]; }
  engine::Tensor& component(int local_replica) { return values_[local_replica]; }
  const std::vector<engine::Tensor>& components() const { return values_; }

  // "PerReplica:{0: f32[1] [0], 1: f32[1] [1]}" (values printed up to 8 elements).
  std::string DebugString() const;

 private:
  DistributedValues(Kind kind, std::vector<engine::Tensor> values)
      : kind_(kind), values_(std::move(values)) {}
  Kind kind_ = Kind::kPerReplica;
  std::vector<engine::Tensor> values_;
};

// A Run argument: a plain tensor (given as is to every replica) or DistributedValues
// (each replica gets its own component).
class RunArg {
 public:
  RunArg(engine::Tensor t) : tensor_(std::move(t)) {}  // NOLINT: implicit by design
  RunArg(DistributedValues v) : values_(std::move(v)), distributed_(true) {}  // NOLINT
  bool distributed() const { return distributed_; }
  const engine::Tensor& tensor() const { return tensor_; }
  const DistributedValues& values() const { return values_; }

 private:
  engine::Tensor tensor_;
  DistributedValues values_;
  bool distributed_ = false;
};

// tf.distribute.experimental.ValueContext: handed to DistributeValuesFromFunction's
// function, once per local replica.
struct ValueContext {
  int replica_id_in_sync_group = 0;
  int num_replicas_in_sync = 1;
};

// tf.distribute.InputContext: handed to DistributeDatasetsFromFunction's function, once
// per worker (input pipeline).
class InputContext {
 public:
  InputContext(int num_input_pipelines, int input_pipeline_id, int num_replicas_in_sync)
      : num_input_pipelines_(num_input_pipelines),
        input_pipeline_id_(input_pipeline_id),
        num_replicas_in_sync_(num_replicas_in_sync) {}
  int num_input_pipelines() const { return num_input_pipelines_; }
  int input_pipeline_id() const { return input_pipeline_id_; }
  int num_replicas_in_sync() const { return num_replicas_in_sync_; }
  // global / num_replicas_in_sync; INVALID_ARGUMENT when it does not divide evenly.
  absl::StatusOr<int64_t> GetPerReplicaBatchSize(int64_t global_batch_size) const;

 private:
  int num_input_pipelines_;
  int input_pipeline_id_;
  int num_replicas_in_sync_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VALUES_H_
