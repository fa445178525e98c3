#include "export/weights.h"

#include <limits>
#include <set>

#include "absl/strings/str_cat.h"

namespace lockstep::exporting {

size_t ElementSize(v1::DType dtype) {
  switch (dtype) {
    case v1::F32:
    case v1::I32:
      return 4;
    case v1::F64:
    case v1::I64:
      return 8;
    case v1::F16:
    case v1::BF16:
      return 2;
    default:
      return 0;
  }
}

int64_t NumElements(const v1::TensorShape& shape) {
  int64_t n = 1;
  for (int64_t d : shape.dims()) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

absl::Status CheckTensor(const v1::NamedTensor& tensor) {
  if (tensor.name().empty()) return absl::InvalidArgumentError("a tensor has no name");
  const v1::TensorProto& t = tensor.tensor();
  const size_t size = ElementSize(t.dtype());
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor.name(), ": unknown dtype ", v1::DType_Name(t.dtype())));
  }
  const int64_t n = NumElements(t.shape());
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor.name(), ": negative or overflowing shape dims"));
  }
  if (t.content().size() != static_cast<uint64_t>(n) * size) {
    return absl::InvalidArgumentError(absl::StrCat(tensor.name(), ": holds ", t.content().size(),
                                                   " bytes, its shape and dtype need ",
                                                   static_cast<uint64_t>(n) * size));
  }
  return absl::OkStatus();
}

absl::StatusOr<Weights> WeightsFromCheckpoint(const v1::Checkpoint& checkpoint,
                                              const WeightsOptions& options) {
  if (checkpoint.variables().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint of job \"", checkpoint.job_id(),
                                                   "\" at step ", checkpoint.global_step(),
                                                   " holds no variables"));
  }
  Weights w;
  std::set<std::string> names;
  auto add = [&](const v1::NamedTensor& t, absl::string_view what) -> absl::Status {
    if (absl::Status s = CheckTensor(t); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint ", what, " ", s.message()));
    }
    if (!names.insert(t.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", what, " ", t.name(), ": the name appears twice"));
    }
    w.tensors.push_back(t);
    return absl::OkStatus();
  };
  for (const v1::NamedTensor& t : checkpoint.variables()) {
    if (absl::Status s = add(t, "variable"); !s.ok()) return s;
  }
  if (options.with_optimizer_state) {
    for (const v1::NamedTensor& t : checkpoint.optimizer_slots()) {
      if (absl::Status s = add(t, "optimizer slot"); !s.ok()) return s;
    }
  }
  w.metadata["format"] = "lockstep";
  w.metadata["job_id"] = checkpoint.job_id();
  if (!checkpoint.job_uid().empty()) w.metadata["job_uid"] = checkpoint.job_uid();
  w.metadata["attempt"] = absl::StrCat(checkpoint.attempt());
  w.metadata["step"] = absl::StrCat(checkpoint.global_step());
  w.metadata["optimizer_state"] = options.with_optimizer_state ? "true" : "false";
  if (!options.spec_json.empty()) w.metadata["spec"] = options.spec_json;
  return w;
}

}  // namespace lockstep::exporting
