// What several layer kinds' files share: errors that name a field, the bound on tensor
// sizes every builder checks, default initializers and [k] / [h, w] pairs. Stateless.
#ifndef LOCKSTEP_ENGINE_LAYERS_LAYER_UTIL_H_
#define LOCKSTEP_ENGINE_LAYERS_LAYER_UTIL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_field.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine {

// INVALID_ARGUMENT "<where>: <what>".
absl::Status FieldError(absl::string_view where, absl::string_view what);

// The most elements a variable or one example's activation may have (2^32: 16 GiB of f32).
// No worker could hold more, and with every count below it the builder's products of sizes
// never overflow int64.
inline constexpr int64_t kMaxElements = int64_t{1} << 32;

// Elements in `dims`, the batch's -1 left out; nullopt past kMaxElements.
std::optional<int64_t> Elements(const std::vector<int64_t>& dims);

// INVALID_ARGUMENT "<where>: <what> [dims] has more than 2^32 elements; ..." past
// kMaxElements.
absl::Status CheckElements(const std::vector<int64_t>& dims, absl::string_view where,
                           absl::string_view what);

// `init`, or an initializer of `kind` when the spec leaves it unset.
v1::Initializer OrDefault(const v1::Initializer& init, v1::Initializer::Kind kind);
// CONSTANT `value`.
v1::Initializer Constant(float value);

// A window or stride given as [k] or [h, w] (positive); [fallback, fallback] when empty.
absl::StatusOr<std::vector<int>> Pair(const google::protobuf::RepeatedField<int32_t>& v,
                                      absl::string_view where, int fallback);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_LAYERS_LAYER_UTIL_H_
