// Variable initializers (zeros, constant, glorot uniform, he normal) drawn from the
// counter-based Philox generator: element i of variable `name` is a function of
// (seed, name, i) only, so initial weights never depend on thread or replica count, and
// every replica that initialises the same graph gets bitwise the same values. Stateless.
#ifndef LOCKSTEP_ENGINE_INITIALIZERS_H_
#define LOCKSTEP_ENGINE_INITIALIZERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/tensor.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine {

// Fills `tensor` (f32 or f64). glorot uniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out));
// he normal: normal with stddev sqrt(2 / fan_in) truncated at two stddevs (redrawn from
// the next counter word), as Keras. KIND_UNSPECIFIED means zeros.
// INVALID_ARGUMENT for another dtype or a non-positive fan where one is needed.
absl::Status Initialize(const v1::Initializer& init, uint64_t seed, absl::string_view name,
                        int64_t fan_in, int64_t fan_out, Tensor* tensor);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_INITIALIZERS_H_
