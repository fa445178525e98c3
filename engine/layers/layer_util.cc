#include "engine/layers/layer_util.h"

#include "absl/strings/str_cat.h"
#include "engine/shape.h"

namespace lockstep::engine {

absl::Status FieldError(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

std::optional<int64_t> Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) continue;
    if (d > 0 && n > kMaxElements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

absl::Status CheckElements(const std::vector<int64_t>& dims, absl::string_view where,
                           absl::string_view what) {
  if (Elements(dims).has_value()) return absl::OkStatus();
  return FieldError(where, absl::StrCat(what, " ", Shape(dims).ToString(),
                                        " has more than 2^32 elements; no worker could hold it"));
}

v1::Initializer OrDefault(const v1::Initializer& init, v1::Initializer::Kind kind) {
  if (init.kind() != v1::Initializer::KIND_UNSPECIFIED) return init;
  v1::Initializer d;
  d.set_kind(kind);
  return d;
}

v1::Initializer Constant(float value) {
  v1::Initializer init;
  init.set_kind(v1::Initializer::CONSTANT);
  init.set_value(value);
  return init;
}

absl::StatusOr<std::vector<int>> Pair(const google::protobuf::RepeatedField<int32_t>& v,
                                      absl::string_view where, int fallback) {
  if (v.empty()) return std::vector<int>{fallback, fallback};
  if (v.size() > 2) return FieldError(where, "give [k] or [h, w]");
  for (int x : v) {
    if (x <= 0) return FieldError(where, absl::StrCat(x, " must be > 0"));
  }
  return std::vector<int>{v[0], v[v.size() - 1]};
}

}  // namespace lockstep::engine
