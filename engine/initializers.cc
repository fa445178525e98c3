#include "engine/initializers.h"

#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "engine/philox.h"

namespace lockstep::engine {
namespace {

template <typename T, typename Fn>
void Fill(Tensor* t, Fn fn) {
  T* p = t->data<T>();
  for (int64_t i = 0; i < t->num_elements(); ++i) p[i] = static_cast<T>(fn(i));
}

}  // namespace

absl::Status Initialize(const v1::Initializer& init, uint64_t seed, absl::string_view name,
                        int64_t fan_in, int64_t fan_out, Tensor* tensor) {
  if (tensor->dtype() != DType::kF32 && tensor->dtype() != DType::kF64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable \"", name, "\": initializers fill f32 or f64, not ", DTypeName(tensor->dtype())));
  }
  const Philox rng(MixKey(seed, HashName(name)));
  std::function<double(int64_t)> value;
  switch (init.kind()) {
    case v1::Initializer::KIND_UNSPECIFIED:
    case v1::Initializer::ZEROS:
      value = [](int64_t) { return 0.0; };
      break;
    case v1::Initializer::CONSTANT:
      value = [v = init.value()](int64_t) { return v; };
      break;
    case v1::Initializer::GLOROT_UNIFORM: {
      if (fan_in + fan_out <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("variable \"", name, "\": glorot_uniform needs fan_in + fan_out > 0"));
      }
      const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
      value = [&rng, limit](int64_t i) { return (2.0 * rng.Uniform(i) - 1.0) * limit; };
      break;
    }
    case v1::Initializer::HE_NORMAL: {
      if (fan_in <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("variable \"", name, "\": he_normal needs fan_in > 0"));
      }
      // Keras: the truncated normal's stddev is corrected by 0.8796 (its shrink factor).
      const double stddev = std::sqrt(2.0 / static_cast<double>(fan_in)) / 0.87962566103423978;
      value = [&rng, stddev](int64_t i) {
        for (uint64_t attempt = 0;; ++attempt) {
          double z = rng.Normal(i, attempt);
          if (std::fabs(z) <= 2.0 || attempt == 64) return z * stddev;
        }
      };
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", name, "\": unknown initializer kind ", static_cast<int>(init.kind())));
  }
  if (tensor->dtype() == DType::kF32) {
    Fill<float>(tensor, value);
  } else {
    Fill<double>(tensor, value);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine
