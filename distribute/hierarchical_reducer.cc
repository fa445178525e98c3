#include "distribute/hierarchical_reducer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {

HierarchicalReducer::HierarchicalReducer(int num_local_replicas, int num_replicas_in_sync,
                                         collectives::CollectiveCommunicator* cross_worker,
                                         size_t bytes_per_pack,
                                         collectives::Compression compression)
    : num_local_(num_local_replicas),
      num_in_sync_(num_replicas_in_sync),
      comm_(cross_worker),
      bytes_per_pack_(bytes_per_pack == 0 ? collectives::kDefaultBytesPerPack : bytes_per_pack),
      compression_(compression),
      step_of_(num_local_replicas, 0) {}

std::shared_ptr<HierarchicalReducer::Step> HierarchicalReducer::CurrentStep(int local_replica) {
  std::shared_ptr<Step>& step = steps_[step_of_[local_replica]];
  if (step == nullptr) {
    step = std::make_shared<Step>();
    step->next.assign(num_local_, 0);
    step->fused = std::make_unique<collectives::FusedAllReduce>(comm_, collectives::ReduceOp::kSum,
                                                                bytes_per_pack_, compression_);
  }
  return step;
}

void HierarchicalReducer::Add(int local_replica, ReduceOp op, engine::Tensor* value,
                              absl::Time deadline) {
  std::shared_ptr<Step> step;
  int k;
  std::vector<engine::Tensor*> in;  // a copy: other replicas may grow step->inputs meanwhile
  {
    absl::MutexLock lock(&mu_);
    step = CurrentStep(local_replica);
    k = step->next[local_replica]++;
    if (static_cast<int>(step->inputs.size()) <= k) {
      step->inputs.resize(k + 1, std::vector<engine::Tensor*>(num_local_, nullptr));
      step->arrived.resize(k + 1, 0);
      step->sums.resize(k + 1);
    }
    step->inputs[k][local_replica] = value;
    step->op = op;
    if (++step->arrived[k] < num_local_) return;
    in = step->inputs[k];
  }
  // The last replica to produce gradient k sums it and hands it to the cross-worker packs.
  // The sum accumulates in local replica 0's own gradient (the executor hands out gradient
  // buffers nothing else aliases, and every replica's gradient is overwritten by the result
  // in Complete): with one replica per worker the all-reduce runs in place, with no copy.
  engine::Tensor sum = *in[0];
  absl::Status s;
  for (int r = 1; r < num_local_ && s.ok(); ++r) {
    s = AddInto(*in[r], &sum);
    if (!s.ok()) {
      s = absl::InvalidArgumentError(absl::StrCat("gradient #", k, ": local replica ", r, " has ",
                                                  in[r]->DebugString(), ", local replica 0 ",
                                                  in[0]->DebugString()));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    step->sums[k] = sum;
    if (!s.ok() && step->status.ok()) step->status = s;
  }
  if (s.ok()) {
    step->fused->Add(sum.raw_data(), sum.num_elements(), sum.dtype(), deadline);
  }
}

absl::Status HierarchicalReducer::Complete(Step* step) {
  // Always finish the packs already started (they write into `sums`).
  absl::Status s = step->fused->Finish();
  if (!step->status.ok()) return step->status;
  if (!s.ok()) return s;
  for (size_t k = 0; k < step->inputs.size(); ++k) {
    if (step->arrived[k] != num_local_) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient #", k, " was added by ", step->arrived[k], " of ", num_local_,
                       " local replicas; every replica must add the same gradients"));
    }
    engine::Tensor& sum = step->sums[k];
    if (step->op == ReduceOp::kMean) {
      absl::Status d = DivideBy(num_in_sync_, &sum);
      if (!d.ok()) return d;
    }
    for (engine::Tensor* t : step->inputs[k]) {
      if (sum.num_bytes() > 0 && t->raw_data() != sum.raw_data()) {
        std::memcpy(t->raw_data(), sum.raw_data(), sum.num_bytes());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status HierarchicalReducer::Finish(int local_replica, absl::Time deadline) {
  std::shared_ptr<Step> step;
  int64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
    id = step_of_[local_replica]++;
    step = steps_[id];
    if (step == nullptr) {  // this replica added nothing this step
      step_of_[local_replica] = id;
      step = CurrentStep(local_replica);
      step_of_[local_replica] = id + 1;
    }
    if (++step->finished == num_local_) {
      mu_.Unlock();
      absl::Status s = Complete(step.get());
      mu_.Lock();
      step->status = s;
      step->done = true;
      if (!s.ok() && failed_.ok()) failed_ = s;
    } else {
      auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return step->done || !failed_.ok(); };
      if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline) && failed_.ok()) {
        failed_ = absl::DeadlineExceededError(
            absl::StrCat("gradient all-reduce: only ", step->finished, " of ", num_local_,
                         " local replicas finished their step before the deadline"));
      }
    }
    absl::Status result = step->done ? step->status : failed_;
    if (++step->waited == num_local_) steps_.erase(id);
    return result;
  }
}

void HierarchicalReducer::Abort() {
  absl::MutexLock lock(&mu_);
  if (failed_.ok()) failed_ = absl::AbortedError("the strategy's all-reduces were aborted");
}

}  // namespace lockstep::distribute
