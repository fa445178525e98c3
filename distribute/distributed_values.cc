#include "distribute/distributed_values.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockstep::distribute {

const char* ReduceOpName(ReduceOp op) { return op == ReduceOp::kSum ? "SUM" : "MEAN"; }

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(name);
  if (upper == "SUM") return ReduceOp::kSum;
  if (upper == "MEAN") return ReduceOp::kMean;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduce op \"", name, "\": expected \"SUM\" or \"MEAN\""));
}

std::string DistributedValues::DebugString() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < values_.size(); ++i) {
    const engine::Tensor& t = values_[i];
    std::string s = absl::StrCat(i, ": ", t.valid() ? t.DebugString() : "null");
    if (t.valid() && t.dtype() != DType::kF16 && t.dtype() != DType::kBF16) {
      std::vector<std::string> elems;
      for (int64_t j = 0; j < std::min<int64_t>(t.num_elements(), 8); ++j) {
        elems.push_back(absl::StrCat(t.AsDouble(j)));
      }
      absl::StrAppend(&s, " [", absl::StrJoin(elems, ", "), t.num_elements() > 8 ? ", ..." : "",
                      "]");
    }
    parts.push_back(std::move(s));
  }
  return absl::StrCat(kind_ == Kind::kMirrored ? "Mirrored" : "PerReplica", ":{",
                      absl::StrJoin(parts, ", "), "}");
}

absl::StatusOr<int64_t> InputContext::GetPerReplicaBatchSize(int64_t global_batch_size) const {
  if (global_batch_size <= 0 || global_batch_size % num_replicas_in_sync_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the global batch size (", global_batch_size,
        ") is not divisible by the number of replicas in sync (", num_replicas_in_sync_,
        "); choose a global batch size that is a multiple of ", num_replicas_in_sync_));
  }
  return global_batch_size / num_replicas_in_sync_;
}

}  // namespace lockstep::distribute
