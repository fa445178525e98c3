#include "distribute/cross_device_ops.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {

const char* CrossDeviceOpsKindName(CrossDeviceOpsKind kind) {
  return kind == CrossDeviceOpsKind::kCollective ? "collective" : "reduce_to_one_device";
}

namespace {

absl::Status AllReduceBucket(collectives::Communicator* comm,
                             const std::vector<engine::Tensor*>& bucket, absl::Time deadline) {
  if (bucket.empty()) return absl::OkStatus();
  const engine::DType dtype = bucket[0]->dtype();
  if (bucket.size() == 1) {
    engine::Tensor* t = bucket[0];
    return comm->AllReduce(t->raw_data(), t->raw_data(), t->num_elements(),
                           ToCollectiveDType(dtype), collectives::ReduceOp::kSum, deadline);
  }
  size_t bytes = 0;
  int64_t elements = 0;
  for (const engine::Tensor* t : bucket) {
    bytes += t->num_bytes();
    elements += t->num_elements();
  }
  std::vector<char> pack(bytes);
  size_t offset = 0;
  for (const engine::Tensor* t : bucket) {
    if (t->num_bytes() > 0) std::memcpy(pack.data() + offset, t->raw_data(), t->num_bytes());
    offset += t->num_bytes();
  }
  LS_RETURN_IF_ERROR(comm->AllReduce(pack.data(), pack.data(), elements, ToCollectiveDType(dtype),
                                     collectives::ReduceOp::kSum, deadline));
  offset = 0;
  for (engine::Tensor* t : bucket) {
    if (t->num_bytes() > 0) std::memcpy(t->raw_data(), pack.data() + offset, t->num_bytes());
    offset += t->num_bytes();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FusedAllReduceSum(collectives::Communicator* comm,
                               const std::vector<engine::Tensor*>& values, size_t bytes_per_pack,
                               absl::Time deadline) {
  std::vector<engine::Tensor*> bucket;
  size_t bucket_bytes = 0;
  for (engine::Tensor* t : values) {
    const bool fits = !bucket.empty() && bucket[0]->dtype() == t->dtype() &&
                      (bytes_per_pack == 0 || bucket_bytes + t->num_bytes() <= bytes_per_pack);
    if (!bucket.empty() && !fits) {
      LS_RETURN_IF_ERROR(AllReduceBucket(comm, bucket, deadline));
      bucket.clear();
      bucket_bytes = 0;
    }
    bucket.push_back(t);
    bucket_bytes += t->num_bytes();
  }
  return AllReduceBucket(comm, bucket, deadline);
}

}  // namespace lockstep::distribute
