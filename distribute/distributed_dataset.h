// DistributedDataset: the per-replica inputs of each step (tf.distribute.DistributedDataset).
//
// Made by a strategy in one of two ways:
//   - ExperimentalDistributeDataset: this worker's pipeline (after auto-sharding, see
//     auto_shard.h) yields batches of global_batch / num_workers elements; each is split
//     among the local replicas, replica r taking rows [r*p, (r+1)*p) with
//     p = global_batch / num_replicas_in_sync. A last partial batch is split the same way:
//     a batch of 6 with p = 4 gives [0,1,2,3] / [4,5] (and a replica past the end gets an
//     empty batch), so Strategy::Reduce(MEAN, axis 0) divides by the true 6.
//   - DistributeDatasetsFromFunction: the user's pipeline already yields per-replica batches;
//     each local replica dequeues one per step (an exhausted pipeline mid-step gives the
//     remaining replicas empty batches).
// Steps are prefetched on a background thread (`prefetch` steps ahead; 0 = none).
//
// BatchIterator and DatasetSource are the seam with data/: any batched dataset iterator
// can be adapted to them.
//
// Ownership: owns its iterator and prefetch thread. Thread model: Next() from one thread at
// a time; the destructor stops and joins the prefetch thread.
#ifndef LOCKSTEP_DISTRIBUTE_DISTRIBUTED_DATASET_H_
#define LOCKSTEP_DISTRIBUTE_DISTRIBUTED_DATASET_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "distribute/auto_shard.h"
#include "distribute/distributed_values.h"
#include "engine/device.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

// One batch: its components (e.g. features, labels), each with the batch along axis 0.
using Batch = std::vector<engine::Tensor>;

// An iterator over a batched dataset.
class BatchIterator {
 public:
  virtual ~BatchIterator() = default;
  // The next batch, or nullopt at the end of the data.
  virtual absl::StatusOr<std::optional<Batch>> Next() = 0;
  // Skips up to n batches; returns how many (fewer only at the end of the data). The
  // default builds and drops them; iterators that can skip without building batches
  // override it, so that resuming at a data position costs no pass over the data.
  virtual absl::StatusOr<int64_t> Skip(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      absl::StatusOr<std::optional<Batch>> batch = Next();
      if (!batch.ok()) return batch.status();
      if (!batch->has_value()) return i;
    }
    return n;
  }
};

// A dataset a strategy can shard: its input files (empty when not read from files; or
// only their count, num_files) and how to build one worker's pipeline from a ShardSpec,
// batched by `batch_size`. DataDatasetSource (data_source.h) adapts a data::Dataset.
struct DatasetSource {
  std::vector<std::string> files;
  int num_files = -1;  // -1: files.size()
  std::function<absl::StatusOr<std::unique_ptr<BatchIterator>>(const ShardSpec& spec,
                                                               int64_t batch_size)>
      make;
};

// tf.distribute.InputOptions / tf.data.experimental.DistributeOptions, merged.
struct DistributeOptions {
  AutoShardPolicy auto_shard_policy = AutoShardPolicy::kAuto;
  // Steps prefetched ahead; -1: the number of local replicas (tf.distribute's default).
  int prefetch = -1;
  // Resume after a checkpoint: skip this many steps (the steps_returned() saved with it).
  int64_t start_step = 0;
};

class DistributedDataset {
 public:
  enum class Mode { kSplitBatches, kOneBatchPerReplica };

  // `devices`: the local replicas' devices; `per_replica_batch` only for kSplitBatches.
  // Skips `start_step` steps (synchronously, before prefetching starts); an error there is
  // returned by the first Next().
  DistributedDataset(std::unique_ptr<BatchIterator> input, Mode mode,
                     std::vector<engine::Device> devices, int64_t per_replica_batch, ShardPlan plan,
                     int prefetch, int64_t start_step = 0);
  ~DistributedDataset();
  DistributedDataset(const DistributedDataset&) = delete;
  DistributedDataset& operator=(const DistributedDataset&) = delete;

  // The next step's inputs: one PerReplica value per batch component; nullopt at the end.
  absl::StatusOr<std::optional<std::vector<DistributedValues>>> Next();

  // Steps handed out by Next(), counting the ones skipped by start_step: the data position
  // to save in a checkpoint.
  int64_t steps_returned() const { return steps_returned_; }

  // How this worker's input was sharded (policy, files, data shard, AUTO's reason).
  const ShardPlan& shard_plan() const { return plan_; }

 private:
  using Step = absl::StatusOr<std::optional<std::vector<DistributedValues>>>;
  Step NextStep();
  Step Produce();
  Step SplitBatch(const Batch& batch);
  void PrefetchLoop();

  const std::unique_ptr<BatchIterator> input_;
  const Mode mode_;
  const std::vector<engine::Device> devices_;
  const int64_t per_replica_batch_;
  const ShardPlan plan_;
  const int prefetch_;
  int64_t steps_returned_ = 0;  // Next()'s thread only
  absl::Status skip_error_;     // from skipping start_step steps

  absl::Mutex mu_;
  std::deque<Step> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool producer_done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread prefetcher_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_DISTRIBUTED_DATASET_H_
