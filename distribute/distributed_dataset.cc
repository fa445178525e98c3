#include "distribute/distributed_dataset.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {

DistributedDataset::DistributedDataset(std::unique_ptr<BatchIterator> input, Mode mode,
                                       std::vector<engine::Device> devices,
                                       int64_t per_replica_batch, ShardPlan plan, int prefetch,
                                       int64_t start_step,
                                       std::vector<engine::gpu::DeviceContext*> stage_on)
    : input_(std::move(input)),
      mode_(mode),
      devices_(std::move(devices)),
      per_replica_batch_(per_replica_batch),
      plan_(std::move(plan)),
      prefetch_(prefetch) {
  stagers_.resize(devices_.size());
  for (size_t r = 0; r < stage_on.size() && r < devices_.size(); ++r) {
    if (stage_on[r] == nullptr) continue;
    // The queue, the step being made and the one the caller holds (see the header).
    absl::StatusOr<std::unique_ptr<engine::gpu::InputStager>> stager =
        engine::gpu::InputStager::Create(stage_on[r], std::max(prefetch_, 0) + 2);
    if (!stager.ok()) {
      skip_error_ = Annotate(stager.status(), absl::StrCat("staging the input of replica ", r,
                                                           " on ", devices_[r].name()));
      return;
    }
    stagers_[r] = *std::move(stager);
  }
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
  // A producer waiting for a slot the caller still holds stops waiting.
  for (auto& stager : stagers_) {
    if (stager != nullptr) stager->Cancel();
  }
  if (prefetcher_.joinable()) prefetcher_.join();
}

absl::StatusOr<std::optional<std::vector<DistributedValues>>> DistributedDataset::Next() {
  if (!skip_error_.ok()) return skip_error_;
  Made made = NextStep();
  // Each GPU's compute stream waits for the copies of what it is handed, before any work
  // that reads them is enqueued.
  for (const auto& [replica, slot] : made.step.ok() ? made.staged : decltype(made.staged)()) {
    if (absl::Status s = stagers_[replica]->Ready(slot); !s.ok()) {
      return Annotate(
          s, absl::StrCat("the input of replica ", replica, " on ", devices_[replica].name()));
    }
  }
  if (made.step.ok() && made.step->has_value()) ++steps_returned_;
  return std::move(made.step);
}

int DistributedDataset::prefetched() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

DistributedDataset::Made DistributedDataset::NextStep() {
  if (prefetch_ <= 0 || !prefetcher_.joinable()) return Produce();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](DistributedDataset* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) {
        return !d->queue_.empty() || d->producer_done_;
      },
      this));
  if (queue_.empty()) return Made{std::optional<std::vector<DistributedValues>>(), {}};
  Made made = std::move(queue_.front());
  queue_.pop_front();
  return made;
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
    Made made = Produce();
    const bool last = !made.step.ok() || !made.step->has_value();
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(made));
    if (last) break;
  }
  absl::MutexLock lock(&mu_);
  producer_done_ = true;
}

DistributedDataset::Made DistributedDataset::Produce() {
  const int n = static_cast<int>(devices_.size());
  Made made;
  if (mode_ == Mode::kSplitBatches) {
    absl::StatusOr<std::optional<Batch>> batch = input_->Next();
    if (!batch.ok()) {
      made.step = batch.status();
    } else if (!batch->has_value()) {
      made.step = std::optional<std::vector<DistributedValues>>();
    } else {
      made.step = SplitBatch(**batch, &made.staged);
    }
    return made;
  }
  // One batch per replica.
  std::vector<Batch> batches;
  for (int r = 0; r < n; ++r) {
    absl::StatusOr<std::optional<Batch>> batch = input_->Next();
    if (!batch.ok()) return Made{batch.status(), {}};
    if (!batch->has_value()) break;
    batches.push_back(std::move(**batch));
  }
  if (batches.empty()) return Made{std::optional<std::vector<DistributedValues>>(), {}};
  for (size_t r = 1; r < batches.size(); ++r) {
    if (batches[r].size() != batches[0].size()) {
      return Made{absl::InvalidArgumentError(absl::StrCat(
                      "the input pipeline's batches differ in their number of components: batch ",
                      r, " has ", batches[r].size(), ", batch 0 has ", batches[0].size())),
                  {}};
    }
  }
  std::vector<std::vector<engine::Tensor>> parts(batches[0].size());
  for (int r = 0; r < n; ++r) {
    // A replica past the end of the pipeline gets an empty batch.
    const bool has = r < static_cast<int>(batches.size());
    absl::StatusOr<std::vector<engine::Tensor>> part =
        has ? Part(r, batches[r], std::nullopt, &made.staged)
            : Part(r, batches[0], std::make_pair(int64_t{0}, int64_t{0}), &made.staged);
    if (!part.ok()) return Made{part.status(), std::move(made.staged)};
    for (size_t c = 0; c < parts.size(); ++c) parts[c].push_back((*part)[c]);
  }
  std::vector<DistributedValues> out;
  for (auto& p : parts) out.push_back(DistributedValues::PerReplica(std::move(p)));
  made.step = std::optional<std::vector<DistributedValues>>(std::move(out));
  return made;
}

absl::StatusOr<std::vector<engine::Tensor>> DistributedDataset::Part(
    int r, const Batch& components, std::optional<std::pair<int64_t, int64_t>> rows,
    std::vector<std::pair<int, int>>* staged) {
  if (stagers_[r] != nullptr && !components.empty() && components[0].shape().rank() > 0) {
    const int64_t n = components[0].shape().dim(0);
    // Clamped as SliceAxis0 clamps: a replica past the end gets no rows.
    const int64_t end = rows.has_value() ? std::min(rows->second, n) : n;
    const int64_t begin = rows.has_value() ? std::min(rows->first, end) : 0;
    LS_ASSIGN_OR_RETURN(engine::gpu::InputStager::Staged s,
                        stagers_[r]->Stage(components, begin, end));
    staged->push_back({r, s.slot});
    return std::move(s.tensors);
  }
  std::vector<engine::Tensor> out;
  for (const engine::Tensor& t : components) {
    if (!rows.has_value()) {
      out.push_back(HostCopy(t, devices_[r]));
      continue;
    }
    LS_ASSIGN_OR_RETURN(engine::Tensor part, SliceAxis0(t, rows->first, rows->second));
    out.push_back(HostCopy(part, devices_[r]));
  }
  return out;
}

DistributedDataset::Step DistributedDataset::SplitBatch(const Batch& batch,
                                                        std::vector<std::pair<int, int>>* staged) {
  const int n = static_cast<int>(devices_.size());
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
  }
  std::vector<std::vector<engine::Tensor>> parts(batch.size());
  for (int r = 0; r < n; ++r) {
    LS_ASSIGN_OR_RETURN(
        std::vector<engine::Tensor> part,
        Part(r, batch, std::make_pair(r * per_replica_batch_, (r + 1) * per_replica_batch_),
             staged));
    for (size_t c = 0; c < parts.size(); ++c) parts[c].push_back(std::move(part[c]));
  }
  std::vector<DistributedValues> out;
  for (auto& p : parts) out.push_back(DistributedValues::PerReplica(std::move(p)));
  return std::optional<std::vector<DistributedValues>>(std::move(out));
}

}  // namespace lockstep::distribute
