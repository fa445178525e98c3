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
// GPU replicas (a device context given for the replica): the prefetch thread also puts each
// step's rows on the replica's GPU (engine/gpu/input_stager.h: one copy into pinned memory,
// the copy to the device on a copy stream), so a replica's inputs are device tensors whose
// copy ran while the previous step computed; Next() orders each GPU's compute stream after
// the copies it hands out. At most prefetch + 2 steps are staged or held per GPU (the queue,
// the step being made, the step the caller holds). Staging changes no value: the device
// tensors hold the bytes the host path would have copied in.
//
// The data position (steps_returned) counts the steps Next() handed out, never the ones
// prefetched behind them, so a checkpoint resumes at the first step not trained on.
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
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "distribute/auto_shard.h"
#include "distribute/distributed_values.h"
#include "engine/device.h"
#include "engine/gpu/device_context.h"
#include "engine/gpu/input_stager.h"
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
  // GPU replicas' batches are staged on their devices ahead of the steps (see
  // DistributedDataset); false: they stay host tensors, copied in by the executor.
  bool prefetch_to_device = true;
};

class DistributedDataset {
 public:
  enum class Mode { kSplitBatches, kOneBatchPerReplica };

  // `devices`: the local replicas' devices; `per_replica_batch` only for kSplitBatches.
  // Skips `start_step` steps (synchronously, before prefetching starts); an error there, or
  // in making the stagers, is returned by the first Next(). `stage_on`: per local replica,
  // the GPU context its batches are staged on, or null (host tensors); empty: none.
  DistributedDataset(std::unique_ptr<BatchIterator> input, Mode mode,
                     std::vector<engine::Device> devices, int64_t per_replica_batch, ShardPlan plan,
                     int prefetch, int64_t start_step = 0,
                     std::vector<engine::gpu::DeviceContext*> stage_on = {});
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

  // Steps made and waiting in the prefetch queue (tests).
  int prefetched();

 private:
  using Step = absl::StatusOr<std::optional<std::vector<DistributedValues>>>;
  // A made step and the staged slots (replica, slot) Next() must order the GPUs after.
  struct Made {
    Step step;
    std::vector<std::pair<int, int>> staged;
  };
  Made NextStep();
  Made Produce();
  Step SplitBatch(const Batch& batch, std::vector<std::pair<int, int>>* staged);
  // Replica r's part of `components`: rows [first, second) (clamped), or all of them
  // (nullopt); on its GPU when staged, where the slot goes to *staged.
  absl::StatusOr<std::vector<engine::Tensor>> Part(int r, const Batch& components,
                                                   std::optional<std::pair<int64_t, int64_t>> rows,
                                                   std::vector<std::pair<int, int>>* staged);
  void PrefetchLoop();

  const std::unique_ptr<BatchIterator> input_;
  const Mode mode_;
  const std::vector<engine::Device> devices_;
  const int64_t per_replica_batch_;
  const ShardPlan plan_;
  const int prefetch_;
  int64_t steps_returned_ = 0;  // Next()'s thread only
  absl::Status skip_error_;     // from skipping start_step steps, or making the stagers
  // Per local replica: its GPU's stager, or null (host tensors). Declared before the queue,
  // which goes first (its staged tensors give their slots back).
  std::vector<std::unique_ptr<engine::gpu::InputStager>> stagers_;

  absl::Mutex mu_;
  std::deque<Made> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool producer_done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread prefetcher_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_DISTRIBUTED_DATASET_H_
