#include "distribute/replica_context.h"

#include "absl/strings/str_cat.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {

absl::StatusOr<engine::Tensor> ReplicaContext::AllReduce(ReduceOp op, const engine::Tensor& value) {
  if (!value.on_host()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplicaContext::AllReduce takes a host tensor (got ", value.DebugString(),
                     "); all-reduce a device tensor in place with AllReduceAsync"));
  }
  engine::Tensor out = HostCopy(value, device_);
  absl::Status s = AllReduceAsync(op, &out)->Wait();
  if (!s.ok()) return s;
  return out;
}

std::unique_ptr<PendingAllReduce> ReplicaContext::AllReduceAsync(ReduceOp op,
                                                                 engine::Tensor* value) {
  return ops_->AllReduceAsync(local_id_, op, value, absl::Now() + timeout_);
}

std::unique_ptr<GradientReducer> ReplicaContext::MakeGradientReducer(ReduceOp op) {
  return ops_->MakeGradientReducer(local_id_, op, absl::Now() + timeout_);
}

absl::Status ReplicaContext::BatchAllReduce(ReduceOp op,
                                            const std::vector<engine::Tensor*>& values) {
  std::vector<std::unique_ptr<PendingAllReduce>> pending;
  pending.reserve(values.size());
  for (engine::Tensor* v : values) pending.push_back(AllReduceAsync(op, v));
  absl::Status first;
  for (auto& p : pending) first.Update(p->Wait());
  return first;
}

}  // namespace lockstep::distribute
