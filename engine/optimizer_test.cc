#include "engine/optimizer.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::testing::HasSubstr;

std::vector<VariableInfo> OneVariable() {
  return {VariableInfo{"w", Shape{2}, DType::kF64, true, 0}};
}

v1::OptimizerSpec Spec(const std::string& kind, double lr) {
  v1::OptimizerSpec spec;
  if (kind == "sgd") spec.mutable_sgd();
  if (kind == "momentum") spec.mutable_momentum()->set_momentum(0.5);
  if (kind == "nesterov") {
    spec.mutable_momentum()->set_momentum(0.5);
    spec.mutable_momentum()->set_nesterov(true);
  }
  if (kind == "adam") spec.mutable_adam();
  spec.mutable_learning_rate()->mutable_constant()->set_value(lr);
  return spec;
}

std::vector<double> RunSteps(const std::string& kind, int steps) {
  auto opt = *Optimizer::Create(Spec(kind, 0.1), OneVariable());
  std::vector<Tensor> w = {Tensor::FromVector<double>({1.0, -2.0}, Shape{2})};
  std::vector<Tensor> g = {Tensor::FromVector<double>({0.5, 1.0}, Shape{2})};
  for (int i = 0; i < steps; ++i) EXPECT_TRUE(opt->Apply(g, &w).ok());
  EXPECT_EQ(opt->iterations(), steps);
  return w[0].ToVector<double>();
}

TEST(Optimizer, UpdateRules) {
  EXPECT_DOUBLE_EQ(RunSteps("sgd", 2)[0], 1.0 - 2 * 0.1 * 0.5);
  // Momentum: v1 = -0.05, w = 0.95; v2 = -0.025 - 0.05 = -0.075, w = 0.875.
  EXPECT_DOUBLE_EQ(RunSteps("momentum", 2)[0], 0.875);
  // Nesterov: v1 = -0.05, w1 = 1 + 0.5*-0.05 - 0.05 = 0.925;
  //           v2 = -0.075, w2 = 0.925 + 0.5*-0.075 - 0.05 = 0.8375.
  EXPECT_DOUBLE_EQ(RunSteps("nesterov", 2)[0], 0.8375);
  // Adam's first steps move by about lr in the direction of -sign(g).
  std::vector<double> adam = RunSteps("adam", 1);
  EXPECT_NEAR(adam[0], 0.9, 1e-5);
  EXPECT_NEAR(adam[1], -2.1, 1e-5);
}

TEST(Optimizer, StateRoundTripContinuesBitwise) {
  auto a = *Optimizer::Create(Spec("adam", 0.01), OneVariable());
  std::vector<Tensor> w = {Tensor::FromVector<double>({1.0, -2.0}, Shape{2})};
  std::vector<Tensor> g = {Tensor::FromVector<double>({0.5, 1.0}, Shape{2})};
  ASSERT_TRUE(a->Apply(g, &w).ok());
  auto state = a->SaveState();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].name(), "w/adam_m");
  EXPECT_EQ(state[2].name(), "optimizer/iterations");
  EXPECT_EQ(a->num_slots(), 3);
  EXPECT_EQ(a->slot_name(1), "w/adam_v");
  EXPECT_EQ(a->slot(2).data<int64_t>()[0], 1);
  auto b = *Optimizer::Create(Spec("adam", 0.01), OneVariable());
  ASSERT_TRUE(b->RestoreState(state).ok());
  std::vector<Tensor> wb = {w[0].Clone()};
  ASSERT_TRUE(a->Apply(g, &w).ok());
  ASSERT_TRUE(b->Apply(g, &wb).ok());
  EXPECT_TRUE(w[0].BitwiseEquals(wb[0]));
  state.pop_back();
  const absl::Status short_state = b->RestoreState(state);
  EXPECT_EQ(short_state.code(), absl::StatusCode::kInvalidArgument) << short_state;
  EXPECT_THAT(std::string(short_state.message()),
              HasSubstr("slot \"optimizer/iterations\" is missing"));
}

TEST(Optimizer, RefusesBadSpecsAndShapes) {
  v1::OptimizerSpec none;
  none.mutable_learning_rate()->mutable_constant()->set_value(0.1);
  EXPECT_NE(Optimizer::Create(none, OneVariable()).status().message().find("optimizer.kind"),
            std::string::npos);
  v1::OptimizerSpec m = Spec("momentum", 0.1);
  m.mutable_momentum()->set_momentum(1.5);
  EXPECT_NE(Optimizer::Create(m, OneVariable()).status().message().find("momentum.momentum"),
            std::string::npos);
  v1::OptimizerSpec no_lr;
  no_lr.mutable_sgd();
  const absl::Status no_lr_status = Optimizer::Create(no_lr, OneVariable()).status();
  EXPECT_EQ(no_lr_status.message().find("optimizer.learning_rate.schedule: "), 0u) << no_lr_status;
  auto opt = *Optimizer::Create(Spec("sgd", 0.1), OneVariable());
  std::vector<Tensor> w = {Tensor::Zeros(DType::kF64, Shape{2})};
  std::vector<Tensor> g = {Tensor::Zeros(DType::kF64, Shape{3})};
  const absl::Status mismatch = opt->Apply(g, &w);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument) << mismatch;
  EXPECT_THAT(std::string(mismatch.message()), HasSubstr("optimizer: gradient of \"w\" is"));
  EXPECT_EQ(opt->iterations(), 0);
}

TEST(Optimizer, GlobalClipnormScalesEveryGradientByTheNormOverAllVariables) {
  // Two variables; gradients (3, 0) and (0, 4): global norm 5. Clipped to 1, SGD at lr 1
  // moves w by g / 5 (each variable by its share, not by its own norm).
  std::vector<VariableInfo> vars = {VariableInfo{"a", Shape{2}, DType::kF64, true, 0},
                                    VariableInfo{"b", Shape{2}, DType::kF32, true, 0}};
  v1::OptimizerSpec spec = Spec("sgd", 1.0);
  spec.set_global_clipnorm(1.0);
  auto opt = *Optimizer::Create(spec, vars);
  std::vector<Tensor> w = {Tensor::Zeros(DType::kF64, Shape{2}),
                           Tensor::Zeros(DType::kF32, Shape{2})};
  std::vector<Tensor> g = {Tensor::FromVector<double>({3.0, 0.0}, Shape{2}),
                           Tensor::FromVector<float>({0.0f, 4.0f}, Shape{2})};
  ASSERT_TRUE(opt->Apply(g, &w).ok());
  EXPECT_DOUBLE_EQ(opt->last_gradient_norm(), 5.0);
  EXPECT_DOUBLE_EQ(w[0].ToVector<double>()[0], -0.6);
  EXPECT_FLOAT_EQ(w[1].ToVector<float>()[1], -0.8f);
  // Under the threshold nothing is scaled.
  spec.set_global_clipnorm(10.0);
  auto loose = *Optimizer::Create(spec, vars);
  std::vector<Tensor> w2 = {Tensor::Zeros(DType::kF64, Shape{2}),
                            Tensor::Zeros(DType::kF32, Shape{2})};
  ASSERT_TRUE(loose->Apply(g, &w2).ok());
  EXPECT_DOUBLE_EQ(w2[0].ToVector<double>()[0], -3.0);
  EXPECT_FLOAT_EQ(w2[1].ToVector<float>()[1], -4.0f);
}

TEST(Optimizer, WeightDecayIsDecoupledAndSkipsExcludedVariables) {
  std::vector<VariableInfo> vars = {VariableInfo{"dense/kernel", Shape{1}, DType::kF64, true, 0},
                                    VariableInfo{"dense/bias", Shape{1}, DType::kF64, true, 0}};
  v1::OptimizerSpec spec = Spec("adam", 0.1);
  spec.set_weight_decay(0.5);
  spec.add_weight_decay_exclude("bias");
  auto opt = *Optimizer::Create(spec, vars);
  std::vector<Tensor> w = {Tensor::FromVector<double>({2.0}, Shape{1}),
                           Tensor::FromVector<double>({2.0}, Shape{1})};
  // A zero gradient leaves Adam's step at 0: only the decay moves the kernel,
  // w = 2 - 0.1 * 0.5 * 2 = 1.9; the bias stays.
  std::vector<Tensor> g = {Tensor::Zeros(DType::kF64, Shape{1}),
                           Tensor::Zeros(DType::kF64, Shape{1})};
  ASSERT_TRUE(opt->Apply(g, &w).ok());
  EXPECT_DOUBLE_EQ(w[0].ToVector<double>()[0], 1.9);
  EXPECT_DOUBLE_EQ(w[1].ToVector<double>()[0], 2.0);
  // With a gradient, the Adam step is the same as without decay, applied to the decayed w.
  auto plain = *Optimizer::Create(Spec("adam", 0.1), {vars[0]});
  std::vector<Tensor> wp = {Tensor::FromVector<double>({1.9 * (1 - 0.05)}, Shape{1})};
  std::vector<Tensor> gp = {Tensor::FromVector<double>({1.0}, Shape{1})};
  ASSERT_TRUE(plain->Apply(gp, &wp).ok());
  auto fresh = *Optimizer::Create(spec, {vars[0]});
  std::vector<Tensor> wd = {Tensor::FromVector<double>({1.9}, Shape{1})};
  ASSERT_TRUE(fresh->Apply(gp, &wd).ok());
  EXPECT_DOUBLE_EQ(wd[0].ToVector<double>()[0], wp[0].ToVector<double>()[0]);
}

TEST(Optimizer, RefusesBadClippingAndDecayNamingTheField) {
  v1::OptimizerSpec clip = Spec("sgd", 0.1);
  clip.set_global_clipnorm(-1);
  EXPECT_NE(
      Optimizer::Create(clip, OneVariable()).status().message().find("optimizer.global_clipnorm"),
      std::string::npos);
  v1::OptimizerSpec decay = Spec("adam", 0.1);
  decay.set_weight_decay(1.5);
  EXPECT_NE(
      Optimizer::Create(decay, OneVariable()).status().message().find("optimizer.weight_decay"),
      std::string::npos);
  v1::OptimizerSpec empty = Spec("adam", 0.1);
  empty.add_weight_decay_exclude("");
  EXPECT_NE(Optimizer::Create(empty, OneVariable())
                .status()
                .message()
                .find("optimizer.weight_decay_exclude[0]"),
            std::string::npos);
}

TEST(LearningRate, Schedules) {
  v1::LearningRate step;
  step.mutable_step_decay()->set_initial(1.0);
  step.mutable_step_decay()->set_decay_rate(0.5);
  step.mutable_step_decay()->set_decay_steps(10);
  auto s = *LearningRateSchedule::Create(step);
  EXPECT_DOUBLE_EQ(s.At(9), 1.0);
  EXPECT_DOUBLE_EQ(s.At(10), 0.5);
  EXPECT_DOUBLE_EQ(s.At(25), 0.25);

  v1::LearningRate wc;
  auto* w = wc.mutable_warmup_cosine();
  w->set_peak(1.0);
  w->set_warmup_steps(4);
  w->set_decay_steps(10);
  w->set_final_fraction(0.1);
  auto c = *LearningRateSchedule::Create(wc);
  EXPECT_DOUBLE_EQ(c.At(0), 0.25);
  EXPECT_DOUBLE_EQ(c.At(3), 1.0);
  EXPECT_DOUBLE_EQ(c.At(4), 1.0);
  EXPECT_NEAR(c.At(9), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_NEAR(c.At(14), 0.1, 1e-12);
  EXPECT_NEAR(c.At(1000), 0.1, 1e-12);

  w->set_decay_steps(0);
  EXPECT_NE(LearningRateSchedule::Create(wc).status().message().find("warmup_cosine.decay_steps"),
            std::string::npos);
}

}  // namespace
}  // namespace lockstep::engine
