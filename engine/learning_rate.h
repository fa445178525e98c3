// Learning-rate schedules from a lockstep.v1.LearningRate: constant, step decay, linear
// warmup + cosine decay. A value type; At() is a pure function of the step.
#ifndef LOCKSTEP_ENGINE_LEARNING_RATE_H_
#define LOCKSTEP_ENGINE_LEARNING_RATE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "lockstep/v1/model.pb.h"

namespace lockstep::engine {

class LearningRateSchedule {
 public:
  // INVALID_ARGUMENT naming the field for a negative rate, decay_steps <= 0, ...
  // An unset schedule is refused (a learning rate must be chosen).
  static absl::StatusOr<LearningRateSchedule> Create(const v1::LearningRate& spec);
  // The learning rate for step `step` (0-based: the first update uses At(0)).
  double At(int64_t step) const;

 private:
  explicit LearningRateSchedule(v1::LearningRate spec) : spec_(std::move(spec)) {}
  v1::LearningRate spec_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_LEARNING_RATE_H_
