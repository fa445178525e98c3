#include "distribute/collective_ops.h"

#include "absl/strings/str_cat.h"
#include "collectives/fused_all_reduce.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {
namespace {

class CollectivePending final : public PendingAllReduce {
 public:
  CollectivePending(collectives::Handle handle, engine::Tensor* value, ReduceOp op, int num_in_sync,
                    absl::Status early)
      : handle_(std::move(handle)),
        value_(value),
        op_(op),
        num_in_sync_(num_in_sync),
        early_(std::move(early)) {}
  absl::Status Wait() override {
    if (!early_.ok()) return early_;
    absl::Status s = handle_->Wait();
    if (!s.ok()) return s;
    return op_ == ReduceOp::kMean ? DivideBy(num_in_sync_, value_) : absl::OkStatus();
  }

 private:
  collectives::Handle handle_;
  engine::Tensor* value_;
  ReduceOp op_;
  int num_in_sync_;
  absl::Status early_;
};

class FusedReducer final : public GradientReducer {
 public:
  FusedReducer(collectives::CollectiveCommunicator* comm, size_t bytes_per_pack,
               collectives::Compression compression, collectives::Bf16Codec* codec, ReduceOp op,
               int num_in_sync, absl::Time deadline)
      : fused_(comm, collectives::ReduceOp::kSum,
               bytes_per_pack == 0 ? collectives::kDefaultBytesPerPack : bytes_per_pack,
               compression, codec),
        op_(op),
        num_in_sync_(num_in_sync),
        deadline_(deadline) {}
  void Add(engine::Tensor* value) override {
    added_.push_back(value);
    fused_.Add(CollectiveBuffer(*value), value->num_elements(), value->dtype(), deadline_);
  }
  absl::Status Finish() override {
    absl::Status s = fused_.Finish();
    if (s.ok() && op_ == ReduceOp::kMean) {
      for (engine::Tensor* t : added_) s.Update(DivideBy(num_in_sync_, t));
    }
    added_.clear();
    return s;
  }

 private:
  collectives::FusedAllReduce fused_;
  const ReduceOp op_;
  const int num_in_sync_;
  const absl::Time deadline_;
  std::vector<engine::Tensor*> added_;
};

}  // namespace

CollectiveOps::CollectiveOps(
    std::vector<std::unique_ptr<collectives::CollectiveCommunicator>> replica_comms,
    int num_replicas_in_sync, collectives::CollectiveCommunicator* cross_worker,
    size_t bytes_per_pack, collectives::Compression compression,
    std::vector<std::unique_ptr<collectives::Bf16Codec>> codecs)
    : comms_(std::move(replica_comms)),
      num_in_sync_(num_replicas_in_sync),
      cross_worker_(cross_worker),
      bytes_per_pack_(bytes_per_pack),
      compression_(compression),
      codecs_(std::move(codecs)) {}

std::unique_ptr<PendingAllReduce> CollectiveOps::AllReduceAsync(int local_replica, ReduceOp op,
                                                                engine::Tensor* value,
                                                                absl::Time deadline) {
  if (local_replica < 0 || local_replica >= static_cast<int>(comms_.size()) || value == nullptr) {
    return std::make_unique<CollectivePending>(
        nullptr, value, op, num_in_sync_,
        absl::InvalidArgumentError(absl::StrCat("all-reduce from local replica ", local_replica,
                                                " of ", comms_.size(), " (or a null tensor)")));
  }
  // SUM on the wire and the division here, so that MEAN means the same for every dtype and
  // every kind of CrossDeviceOps.
  collectives::Handle h = comms_[local_replica]->AllReduceAsync(
      CollectiveBuffer(*value), CollectiveBuffer(*value), value->num_elements(), value->dtype(),
      collectives::ReduceOp::kSum, deadline);
  return std::make_unique<CollectivePending>(std::move(h), value, op, num_in_sync_,
                                             absl::OkStatus());
}

std::unique_ptr<GradientReducer> CollectiveOps::MakeGradientReducer(int local_replica, ReduceOp op,
                                                                    absl::Time deadline) {
  if (local_replica < 0 || local_replica >= static_cast<int>(comms_.size())) {
    return CrossDeviceOps::MakeGradientReducer(local_replica, op, deadline);  // reports it
  }
  collectives::Bf16Codec* codec =
      local_replica < static_cast<int>(codecs_.size()) ? codecs_[local_replica].get() : nullptr;
  return std::make_unique<FusedReducer>(comms_[local_replica].get(), bytes_per_pack_, compression_,
                                        codec, op, num_in_sync_, deadline);
}

absl::Status CollectiveOps::CrossWorkerSum(const std::vector<engine::Tensor*>& values,
                                           absl::Time deadline) {
  if (cross_worker_ == nullptr) return absl::OkStatus();
  return FusedAllReduceSum(cross_worker_, values, bytes_per_pack_, deadline);
}

void CollectiveOps::Abort() {
  for (const auto& c : comms_) c->Abort();
  if (cross_worker_ != nullptr) cross_worker_->Abort();
}

}  // namespace lockstep::distribute
