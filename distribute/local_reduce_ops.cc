#include "distribute/local_reduce_ops.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {

class LocalReduceOps::Pending final : public PendingAllReduce {
 public:
  Pending(LocalReduceOps* ops, int64_t seq, absl::Time deadline, absl::Status early)
      : ops_(ops), seq_(seq), deadline_(deadline), early_(std::move(early)) {}
  absl::Status Wait() override {
    if (!early_.ok()) return early_;
    return ops_->Wait(seq_, deadline_);
  }

 private:
  LocalReduceOps* ops_;
  int64_t seq_;
  absl::Time deadline_;
  absl::Status early_;
};

LocalReduceOps::LocalReduceOps(int num_local_replicas, int num_replicas_in_sync,
                               collectives::CollectiveCommunicator* cross_worker,
                               size_t bytes_per_pack, collectives::Compression compression)
    : num_local_(num_local_replicas),
      num_in_sync_(num_replicas_in_sync),
      cross_worker_(cross_worker),
      bytes_per_pack_(bytes_per_pack),
      hierarchical_(cross_worker == nullptr ? nullptr
                                            : std::make_unique<HierarchicalReducer>(
                                                  num_local_replicas, num_replicas_in_sync,
                                                  cross_worker, bytes_per_pack, compression)),
      next_seq_(num_local_replicas, 0) {}

namespace {

class HierarchicalStep final : public GradientReducer {
 public:
  HierarchicalStep(HierarchicalReducer* reducer, int local_replica, ReduceOp op,
                   absl::Time deadline)
      : reducer_(reducer), local_replica_(local_replica), op_(op), deadline_(deadline) {}
  ~HierarchicalStep() override {
    if (!finished_) (void)Finish();
  }
  void Add(engine::Tensor* value) override { reducer_->Add(local_replica_, op_, value, deadline_); }
  absl::Status Finish() override {
    finished_ = true;
    return reducer_->Finish(local_replica_, deadline_);
  }

 private:
  HierarchicalReducer* const reducer_;
  const int local_replica_;
  const ReduceOp op_;
  const absl::Time deadline_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<GradientReducer> LocalReduceOps::MakeGradientReducer(int local_replica, ReduceOp op,
                                                                     absl::Time deadline) {
  if (hierarchical_ == nullptr || local_replica < 0 || local_replica >= num_local_) {
    return CrossDeviceOps::MakeGradientReducer(local_replica, op, deadline);
  }
  return std::make_unique<HierarchicalStep>(hierarchical_.get(), local_replica, op, deadline);
}

std::unique_ptr<PendingAllReduce> LocalReduceOps::AllReduceAsync(int local_replica, ReduceOp op,
                                                                 engine::Tensor* value,
                                                                 absl::Time deadline) {
  std::shared_ptr<Slot> slot;
  int64_t seq;
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) {
      return std::make_unique<Pending>(this, 0, deadline, failed_);
    }
    if (local_replica < 0 || local_replica >= num_local_ || value == nullptr) {
      return std::make_unique<Pending>(
          this, 0, deadline,
          absl::InvalidArgumentError(absl::StrCat("all-reduce from local replica ", local_replica,
                                                  " of ", num_local_, " (or a null tensor)")));
    }
    seq = next_seq_[local_replica]++;
    std::shared_ptr<Slot>& s = slots_[seq];
    if (s == nullptr) {
      s = std::make_shared<Slot>();
      s->inputs.assign(num_local_, nullptr);
      s->ops.assign(num_local_, op);
    }
    s->inputs[local_replica] = value;
    s->ops[local_replica] = op;
    if (++s->arrived < num_local_) {
      return std::make_unique<Pending>(this, seq, deadline, absl::OkStatus());
    }
    slot = s;
  }
  // The last replica to arrive does the work, outside the lock.
  absl::Status status = Combine(slot.get(), deadline);
  {
    absl::MutexLock lock(&mu_);
    slot->status = status;
    slot->done = true;
    if (!status.ok() && failed_.ok()) failed_ = status;
  }
  return std::make_unique<Pending>(this, seq, deadline, absl::OkStatus());
}

absl::Status LocalReduceOps::Combine(Slot* slot, absl::Time deadline) {
  const engine::Tensor& first = *slot->inputs[0];
  for (int r = 1; r < num_local_; ++r) {
    const engine::Tensor& t = *slot->inputs[r];
    if (t.dtype() != first.dtype() || t.shape() != first.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replicas disagree in an all-reduce: local replica ", r, " has ", t.DebugString(),
          " but local replica 0 has ", first.DebugString(),
          "; every replica must all-reduce tensors of one dtype and shape, in the same order"));
    }
    if (slot->ops[r] != slot->ops[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replicas disagree in an all-reduce: local replica ", r, " asks for ",
          ReduceOpName(slot->ops[r]), ", local replica 0 for ", ReduceOpName(slot->ops[0])));
    }
  }
  // The result is written into every replica's tensor, so the sum accumulates in local
  // replica 0's own (no copy at all for one replica on one worker), unless a later replica's
  // tensor shares its memory: then in a scratch copy.
  engine::Tensor* sum = slot->inputs[0];
  engine::Tensor scratch;
  const char* begin = static_cast<const char*>(first.raw_data());
  for (int r = 1; r < num_local_; ++r) {
    const char* other = static_cast<const char*>(slot->inputs[r]->raw_data());
    if (first.num_bytes() > 0 && other < begin + first.num_bytes() &&
        begin < other + first.num_bytes()) {
      scratch = first.Clone();
      sum = &scratch;
      break;
    }
  }
  for (int r = 1; r < num_local_; ++r) LS_RETURN_IF_ERROR(AddInto(*slot->inputs[r], sum));
  if (cross_worker_ != nullptr) {
    LS_RETURN_IF_ERROR(FusedAllReduceSum(cross_worker_, {sum}, bytes_per_pack_, deadline));
  }
  if (slot->ops[0] == ReduceOp::kMean && num_in_sync_ > 1) {
    LS_RETURN_IF_ERROR(DivideBy(num_in_sync_, sum));
  }
  for (engine::Tensor* t : slot->inputs) {
    if (sum->num_bytes() > 0 && t->raw_data() != sum->raw_data()) {
      std::memcpy(t->raw_data(), sum->raw_data(), sum->num_bytes());
    }
  }
  return absl::OkStatus();
}

absl::Status LocalReduceOps::Wait(int64_t seq, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(seq);
  if (it == slots_.end()) return absl::InternalError("all-reduce waited on twice");
  std::shared_ptr<Slot> slot = it->second;
  auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return slot->done || !failed_.ok(); };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    failed_ = absl::DeadlineExceededError(absl::StrCat(
        "all-reduce #", seq, ": only ", slot->arrived, " of ", num_local_,
        " local replicas arrived before the deadline; check that every replica calls the same "
        "all-reduces in the same order"));
  }
  absl::Status result = slot->done ? slot->status : failed_;
  if (++slot->waited == num_local_) slots_.erase(seq);
  return result;
}

absl::Status LocalReduceOps::CrossWorkerSum(const std::vector<engine::Tensor*>& values,
                                            absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
  }
  if (cross_worker_ == nullptr) return absl::OkStatus();
  absl::Status s = FusedAllReduceSum(cross_worker_, values, bytes_per_pack_, deadline);
  if (!s.ok()) {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) failed_ = s;
  }
  return s;
}

void LocalReduceOps::Abort() {
  {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) failed_ = absl::AbortedError("the strategy's all-reduces were aborted");
  }
  if (hierarchical_ != nullptr) hierarchical_->Abort();
  if (cross_worker_ != nullptr) cross_worker_->Abort();
}

}  // namespace lockstep::distribute
