#include "distribute/cross_device_ops.h"

#include "absl/strings/str_cat.h"
#include "collectives/fused_all_reduce.h"
#include "common/status.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {

const char* CrossDeviceOpsKindName(CrossDeviceOpsKind kind) {
  return kind == CrossDeviceOpsKind::kCollective ? "collective" : "reduce_to_one_device";
}

absl::Status FusedAllReduceSum(collectives::Communicator* comm,
                               const std::vector<engine::Tensor*>& values, size_t bytes_per_pack,
                               absl::Time deadline) {
  collectives::FusedAllReduce fused(
      comm, collectives::ReduceOp::kSum,
      bytes_per_pack == 0 ? collectives::kDefaultBytesPerPack : bytes_per_pack);
  for (engine::Tensor* t : values) {
    fused.Add(t->raw_data(), t->num_elements(), ToCollectiveDType(t->dtype()), deadline);
  }
  return fused.Finish();
}

}  // namespace lockstep::distribute
