#include "distribute/cross_device_ops.h"

#include "absl/strings/str_cat.h"
#include "collectives/fused_all_reduce.h"
#include "common/status.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {

CrossDeviceOps::AllReduceStats StatsOf(const collectives::CollectiveCommunicator* comm) {
  if (comm == nullptr) return {};
  return {comm->size(), comm->async_all_reduce_totals()};
}

engine::BufferAllocator HeapAllocator(std::shared_ptr<collectives::TransportHeap> heap) {
  if (heap == nullptr) return nullptr;
  return [heap](size_t bytes) { return collectives::AllocateShared(heap, bytes); };
}

const char* CrossDeviceOpsKindName(CrossDeviceOpsKind kind) {
  switch (kind) {
    case CrossDeviceOpsKind::kCollective:
      return "collective";
    case CrossDeviceOpsKind::kNcclAllReduce:
      return "nccl_all_reduce";
    case CrossDeviceOpsKind::kReduceToOneDevice:
      break;
  }
  return "reduce_to_one_device";
}

namespace {

class PerTensorReducer final : public GradientReducer {
 public:
  PerTensorReducer(CrossDeviceOps* ops, int local_replica, ReduceOp op, absl::Time deadline)
      : ops_(ops), local_replica_(local_replica), op_(op), deadline_(deadline) {}
  ~PerTensorReducer() override { (void)Finish(); }
  void Add(engine::Tensor* value) override {
    pending_.push_back(ops_->AllReduceAsync(local_replica_, op_, value, deadline_));
  }
  absl::Status Finish() override {
    absl::Status first;
    for (auto& p : pending_) first.Update(p->Wait());
    pending_.clear();
    return first;
  }

 private:
  CrossDeviceOps* const ops_;
  const int local_replica_;
  const ReduceOp op_;
  const absl::Time deadline_;
  std::vector<std::unique_ptr<PendingAllReduce>> pending_;
};

}  // namespace

std::unique_ptr<GradientReducer> CrossDeviceOps::MakeGradientReducer(int local_replica, ReduceOp op,
                                                                     absl::Time deadline) {
  return std::make_unique<PerTensorReducer>(this, local_replica, op, deadline);
}

absl::Status FusedAllReduceSum(collectives::CollectiveCommunicator* comm,
                               const std::vector<engine::Tensor*>& values, size_t bytes_per_pack,
                               absl::Time deadline) {
  collectives::FusedAllReduce fused(
      comm, collectives::ReduceOp::kSum,
      bytes_per_pack == 0 ? collectives::kDefaultBytesPerPack : bytes_per_pack);
  for (engine::Tensor* t : values) {
    fused.Add(t->raw_data(), t->num_elements(), t->dtype(), deadline);
  }
  return fused.Finish();
}

}  // namespace lockstep::distribute
