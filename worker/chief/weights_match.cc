#include "worker/chief/weights_match.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/tensor.h"

namespace lockstep::chief {

absl::Status WeightsMatch(const v1::Checkpoint& a, const v1::Checkpoint& b, double rel_tol,
                          std::string* summary) {
  if (a.variables_size() != b.variables_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoints of steps ", a.global_step(), " and ", b.global_step(),
                     " hold ", a.variables_size(), " and ", b.variables_size(), " variables"));
  }
  std::string mismatches;
  for (int v = 0; v < a.variables_size(); ++v) {
    const std::string& name = a.variables(v).name();
    if (b.variables(v).name() != name) {
      return absl::FailedPreconditionError(absl::StrCat("variable ", v, " is ", name,
                                                        " in one checkpoint, ",
                                                        b.variables(v).name(), " in the other"));
    }
    absl::StatusOr<engine::Tensor> x = engine::Tensor::FromProto(a.variables(v).tensor());
    absl::StatusOr<engine::Tensor> y = engine::Tensor::FromProto(b.variables(v).tensor());
    if (!x.ok() || !y.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "variable ", name, " cannot be read: ", (x.ok() ? y : x).status().message()));
    }
    if (x->dtype() != DType::kF32 || y->dtype() != DType::kF32 || x->shape() != y->shape()) {
      return absl::FailedPreconditionError(
          absl::StrCat("variable ", name, ": expected f32 tensors of one shape, got ",
                       x->DebugString(), " and ", y->DebugString()));
    }
    double diff2 = 0, norm2 = 0, max_diff = 0, max_abs = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < x->num_elements(); ++i) {
      const double p = x->data<float>()[i], q = y->data<float>()[i];
      const double d = std::fabs(p - q);
      diff2 += d * d;
      norm2 += p * p;
      max_abs = std::max(max_abs, std::fabs(p));
      if (d > max_diff) {
        max_diff = d;
        worst = i;
      }
    }
    // 0/0 (both all zero) is a match.
    const double rel_l2 = diff2 == 0 ? 0 : std::sqrt(diff2 / norm2);
    const double rel_max = max_diff == 0 ? 0 : max_diff / max_abs;
    const std::string line = absl::StrFormat(
        "%s: relative error %.3g (L2), %.3g (max norm); worst element %d: %.9g vs %.9g", name,
        rel_l2, rel_max, worst, x->data<float>()[worst], y->data<float>()[worst]);
    if (summary != nullptr) absl::StrAppend(summary, line, "\n");
    if (!(rel_l2 <= rel_tol && rel_max <= rel_tol)) absl::StrAppend(&mismatches, "\n  ", line);
  }
  if (!mismatches.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("the weights differ by more than ", rel_tol,
                                                      " relative (steps ", a.global_step(), " and ",
                                                      b.global_step(), "):", mismatches));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::chief
