#include "distribute/distributed_dataset.h"

#include "absl/strings/str_cat.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {

DistributedDataset::DistributedDataset(std::unique_ptr<BatchIterator> input, Mode mode,
                                       std::vector<engine::Device> devices,
                                       int64_t per_replica_batch, ShardPlan plan, int prefetch,
                                       int64_t start_step)
    : input_(std::move(input)),
      mode_(mode),
      devices_(std::move(devices)),
      per_replica_batch_(per_replica_batch),
      plan_(std::move(plan)),
      prefetch_(prefetch) {
  // A step takes one batch (split over the replicas) or one per replica; skipping them
  // builds no step (and, for data/ pipelines, no batch: DataBatchIterator::Skip).
  const int64_t batches_per_step =
      mode_ == Mode::kSplitBatches ? 1 : static_cast<int64_t>(devices_.size());
  if (start_step > 0) {
    absl::StatusOr<int64_t> skipped = input_->Skip(start_step * batches_per_step);
    if (!skipped.ok()) {
      skip_error_ = skipped.status();
      return;
    }
    steps_returned_ = (*skipped + batches_per_step - 1) / batches_per_step;
  }
  if (prefetch_ > 0) prefetcher_ = std::thread([this] { PrefetchLoop(); });
}

DistributedDataset::~DistributedDataset() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (prefetcher_.joinable()) prefetcher_.join();
}

absl::StatusOr<std::optional<std::vector<DistributedValues>>> DistributedDataset::Next() {
  if (!skip_error_.ok()) return skip_error_;
  Step step = NextStep();
  if (step.ok() && step->has_value()) ++steps_returned_;
  return step;
}

DistributedDataset::Step DistributedDataset::NextStep() {
  if (prefetch_ <= 0 || !prefetcher_.joinable()) return Produce();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](DistributedDataset* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) {
        return !d->queue_.empty() || d->producer_done_;
      },
      this));
  if (queue_.empty()) return std::optional<std::vector<DistributedValues>>();
  Step step = std::move(queue_.front());
  queue_.pop_front();
  return step;
}

void DistributedDataset::PrefetchLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](DistributedDataset* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) {
            return d->stopping_ || static_cast<int>(d->queue_.size()) < d->prefetch_;
          },
          this));
      if (stopping_) break;
    }
    Step step = Produce();
    const bool last = !step.ok() || !step->has_value();
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(step));
    if (last) break;
  }
  absl::MutexLock lock(&mu_);
  producer_done_ = true;
}

DistributedDataset::Step DistributedDataset::Produce() {
  const int n = static_cast<int>(devices_.size());
  if (mode_ == Mode::kSplitBatches) {
    absl::StatusOr<std::optional<Batch>> batch = input_->Next();
    if (!batch.ok()) return batch.status();
    if (!batch->has_value()) return std::optional<std::vector<DistributedValues>>();
    return SplitBatch(**batch);
  }
  // One batch per replica.
  std::vector<Batch> batches;
  for (int r = 0; r < n; ++r) {
    absl::StatusOr<std::optional<Batch>> batch = input_->Next();
    if (!batch.ok()) return batch.status();
    if (!batch->has_value()) break;
    batches.push_back(std::move(**batch));
  }
  if (batches.empty()) return std::optional<std::vector<DistributedValues>>();
  std::vector<DistributedValues> out;
  for (size_t c = 0; c < batches[0].size(); ++c) {
    std::vector<engine::Tensor> parts;
    for (int r = 0; r < n; ++r) {
      if (r < static_cast<int>(batches.size())) {
        if (c >= batches[r].size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the input pipeline's batches differ in their number of components: batch ", r,
              " has ", batches[r].size(), ", batch 0 has ", batches[0].size()));
        }
        parts.push_back(HostCopy(batches[r][c], devices_[r]));
      } else {
        absl::StatusOr<engine::Tensor> empty = SliceAxis0(batches[0][c], 0, 0);
        if (!empty.ok()) return empty.status();
        parts.push_back(HostCopy(*empty, devices_[r]));
      }
    }
    out.push_back(DistributedValues::PerReplica(std::move(parts)));
  }
  return std::optional<std::vector<DistributedValues>>(std::move(out));
}

DistributedDataset::Step DistributedDataset::SplitBatch(const Batch& batch) {
  const int n = static_cast<int>(devices_.size());
  std::vector<DistributedValues> out;
  for (size_t c = 0; c < batch.size(); ++c) {
    const engine::Tensor& t = batch[c];
    if (t.shape().rank() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("component ", c, " of the input batch is a scalar (", t.DebugString(),
                       "): ExperimentalDistributeDataset needs a batched dataset"));
    }
    if (t.shape().dim(0) > per_replica_batch_ * n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "component ", c, " of an input batch has ", t.shape().dim(0),
          " elements, more than this worker's share of the global batch (", per_replica_batch_ * n,
          "); batch the dataset by the global batch size divided by the number of workers"));
    }
    std::vector<engine::Tensor> parts;
    for (int r = 0; r < n; ++r) {
      absl::StatusOr<engine::Tensor> part =
          SliceAxis0(t, r * per_replica_batch_, (r + 1) * per_replica_batch_);
      if (!part.ok()) return part.status();
      parts.push_back(HostCopy(*part, devices_[r]));
    }
    out.push_back(DistributedValues::PerReplica(std::move(parts)));
  }
  return std::optional<std::vector<DistributedValues>>(std::move(out));
}

}  // namespace lockstep::distribute
