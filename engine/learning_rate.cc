#include "engine/learning_rate.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("learning_rate.", field, ": ", what));
}

}  // namespace

absl::StatusOr<LearningRateSchedule> LearningRateSchedule::Create(const v1::LearningRate& spec) {
  switch (spec.schedule_case()) {
    case v1::LearningRate::kConstant:
      if (!(spec.constant().value() >= 0)) return Bad("constant.value", "must be >= 0");
      break;
    case v1::LearningRate::kStepDecay: {
      const auto& s = spec.step_decay();
      if (!(s.initial() >= 0)) return Bad("step_decay.initial", "must be >= 0");
      if (!(s.decay_rate() > 0)) return Bad("step_decay.decay_rate", "must be > 0");
      if (s.decay_steps() <= 0) return Bad("step_decay.decay_steps", "must be > 0");
      break;
    }
    case v1::LearningRate::kWarmupCosine: {
      const auto& s = spec.warmup_cosine();
      if (!(s.peak() >= 0)) return Bad("warmup_cosine.peak", "must be >= 0");
      if (s.warmup_steps() < 0) return Bad("warmup_cosine.warmup_steps", "must be >= 0");
      if (s.decay_steps() <= 0) return Bad("warmup_cosine.decay_steps", "must be > 0");
      if (!(s.final_fraction() >= 0 && s.final_fraction() <= 1)) {
        return Bad("warmup_cosine.final_fraction", "must be in [0, 1]");
      }
      break;
    }
    default:
      return Bad("schedule", "set one of constant, step_decay, warmup_cosine");
  }
  return LearningRateSchedule(spec);
}

double LearningRateSchedule::At(int64_t step) const {
  switch (spec_.schedule_case()) {
    case v1::LearningRate::kConstant:
      return spec_.constant().value();
    case v1::LearningRate::kStepDecay: {
      const auto& s = spec_.step_decay();
      return s.initial() * std::pow(s.decay_rate(), static_cast<double>(step / s.decay_steps()));
    }
    case v1::LearningRate::kWarmupCosine: {
      const auto& s = spec_.warmup_cosine();
      if (step < s.warmup_steps()) {
        return s.peak() * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps());
      }
      double t = std::min(
          1.0, static_cast<double>(step - s.warmup_steps()) / static_cast<double>(s.decay_steps()));
      double cosine = 0.5 * (1.0 + std::cos(M_PI * t));
      return s.peak() * (s.final_fraction() + (1.0 - s.final_fraction()) * cosine);
    }
    default:
      return 0;
  }
}

}  // namespace lockstep::engine
