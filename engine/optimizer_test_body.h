// One optimizer test body for every device type (device_test_env.h): update rules, state
// round trips, clipping by the global norm, decoupled weight decay and refusals, on the device's
// variables. Instantiated for "/cpu:0" and the fake "/gpu:0" (optimizer_test, CPU CI) and for a
// real GPU (optimizer_cuda_test, requires-gpu).
//
// Variables are f64 on "/cpu:0" (the closed forms are checked to the double's last ulps) and f32
// on a GPU (GPUs train f32, Optimizer::Create), where the closed forms hold to float's 4 ulps and
// every result must also equal the CPU's f32 update of the same values: bit for bit where
// Env::kBitwise (the fake's kernels run kernel_bodies.h's arithmetic, as the CPU), and on a real
// GPU too (optimizer.h: the update kernels run kernel_bodies.h's fmaf chains in the CPU's
// order); only clipping, whose norm is a sum that a GPU may order differently, is compared within
// kRelTolerance on a real GPU.
#ifndef LOCKSTEP_ENGINE_OPTIMIZER_TEST_BODY_H_
#define LOCKSTEP_ENGINE_OPTIMIZER_TEST_BODY_H_

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/device_generic_test_body.h"
#include "engine/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {

inline v1::OptimizerSpec OptimizerSpecOf(const std::string& kind, double lr) {
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

// `values` as a host tensor of `dtype` (f64 or f32).
inline Tensor HostValues(DType dtype, const std::vector<double>& values, const Shape& shape) {
  if (dtype == DType::kF64) return Tensor::FromVector(values, shape);
  std::vector<float> f(values.begin(), values.end());
  return Tensor::FromVector(f, shape);
}

template <class Env>
class OptimizerTest : public DeviceTest<Env> {
 protected:
  using DeviceTest<Env>::env;
  bool on_gpu() const { return this->env_->gpu() != nullptr; }
  // The trainable dtype: f64 on the CPU, f32 on a GPU.
  DType dtype() const { return on_gpu() ? DType::kF32 : DType::kF64; }
  std::vector<VariableInfo> OneVariable() const {
    return {VariableInfo{"w", Shape{2}, dtype(), true, 0}};
  }

  // Host values on the device.
  Tensor On(DeviceEnv& e, DType dtype, const std::vector<double>& values, const Shape& shape) {
    absl::StatusOr<Tensor> t = e.ToDevice(HostValues(dtype, values, shape));
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : Tensor();
  }
  Tensor On(const std::vector<double>& values, const Shape& shape) {
    return On(env(), dtype(), values, shape);
  }
  // A device tensor's elements, on the host.
  std::vector<double> Values(DeviceEnv& e, const Tensor& t) {
    absl::StatusOr<Tensor> host = e.ToHost(t);
    EXPECT_TRUE(host.ok()) << host.status();
    std::vector<double> out;
    if (!host.ok()) return out;
    for (int64_t i = 0; i < host->num_elements(); ++i) out.push_back(host->AsDouble(i));
    return out;
  }
  std::vector<double> Values(const Tensor& t) { return Values(env(), t); }

  // got == want: to the double's 4 ulps in f64, to the float's in f32.
  void ExpectEq(double got, double want) {
    if (dtype() == DType::kF64) {
      EXPECT_DOUBLE_EQ(got, want);
    } else {
      EXPECT_FLOAT_EQ(static_cast<float>(got), static_cast<float>(want));
    }
  }

  // `steps` steps of `kind` at lr 0.1 from w = (1, -2), g = (0.5, 1) on `e` in `dtype`.
  std::vector<double> RunStepsOn(DeviceEnv& e, DType dtype, const std::string& kind, int steps) {
    std::vector<VariableInfo> vars = {VariableInfo{"w", Shape{2}, dtype, true, 0}};
    absl::StatusOr<std::unique_ptr<Optimizer>> opt =
        Optimizer::Create(OptimizerSpecOf(kind, 0.1), vars, e.gpu());
    EXPECT_TRUE(opt.ok()) << opt.status();
    if (!opt.ok()) return {};
    std::vector<Tensor> w = {On(e, dtype, {1.0, -2.0}, Shape{2})};
    std::vector<Tensor> g = {On(e, dtype, {0.5, 1.0}, Shape{2})};
    for (int i = 0; i < steps; ++i) EXPECT_TRUE((*opt)->Apply(g, &w).ok());
    EXPECT_EQ((*opt)->iterations(), steps);
    return Values(e, w[0]);
  }
  // The same on this test's device; on a GPU, also the CPU's f32 result, which it must equal
  // bit for bit (optimizer.h's promise, on the fake and on a real GPU).
  std::vector<double> RunSteps(const std::string& kind, int steps) {
    std::vector<double> got = RunStepsOn(env(), dtype(), kind, steps);
    if (on_gpu()) {
      CpuDeviceEnv cpu;
      EXPECT_EQ(got, RunStepsOn(cpu, DType::kF32, kind, steps)) << kind << " against /cpu:0";
    }
    return got;
  }
};

TYPED_TEST_SUITE_P(OptimizerTest);

TYPED_TEST_P(OptimizerTest, UpdateRules) {
  this->ExpectEq(this->RunSteps("sgd", 2)[0], 1.0 - 2 * 0.1 * 0.5);
  // Momentum: v1 = -0.05, w = 0.95; v2 = -0.025 - 0.05 = -0.075, w = 0.875.
  this->ExpectEq(this->RunSteps("momentum", 2)[0], 0.875);
  // Nesterov: v1 = -0.05, w1 = 1 + 0.5*-0.05 - 0.05 = 0.925;
  //           v2 = -0.075, w2 = 0.925 + 0.5*-0.075 - 0.05 = 0.8375.
  this->ExpectEq(this->RunSteps("nesterov", 2)[0], 0.8375);
  // Adam's first steps move by about lr in the direction of -sign(g).
  std::vector<double> adam = this->RunSteps("adam", 1);
  EXPECT_NEAR(adam[0], 0.9, 1e-5);
  EXPECT_NEAR(adam[1], -2.1, 1e-5);
}

TYPED_TEST_P(OptimizerTest, StateRoundTripContinuesBitwise) {
  const v1::OptimizerSpec spec = OptimizerSpecOf("adam", 0.01);
  const gpu::GpuDevice* gpu = this->env().gpu();
  std::unique_ptr<Optimizer> a = *Optimizer::Create(spec, this->OneVariable(), gpu);
  std::vector<Tensor> w = {this->On({1.0, -2.0}, Shape{2})};
  std::vector<Tensor> g = {this->On({0.5, 1.0}, Shape{2})};
  ASSERT_TRUE(a->Apply(g, &w).ok());
  auto state = a->SaveState();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].name(), "w/adam_m");
  EXPECT_EQ(state[2].name(), "optimizer/iterations");
  EXPECT_EQ(a->num_slots(), 3);
  EXPECT_EQ(a->slot_name(1), "w/adam_v");
  EXPECT_EQ(a->slot(2).data<int64_t>()[0], 1);  // on the host on every device
  std::unique_ptr<Optimizer> b = *Optimizer::Create(spec, this->OneVariable(), gpu);
  ASSERT_TRUE(b->RestoreState(state).ok());
  std::vector<Tensor> wb = {this->On(this->Values(w[0]), Shape{2})};
  ASSERT_TRUE(a->Apply(g, &w).ok());
  ASSERT_TRUE(b->Apply(g, &wb).ok());
  EXPECT_TRUE(this->env().ToHost(w[0])->BitwiseEquals(*this->env().ToHost(wb[0])));
  state.pop_back();
  const absl::Status short_state = b->RestoreState(state);
  EXPECT_EQ(short_state.code(), absl::StatusCode::kInvalidArgument) << short_state;
  EXPECT_THAT(std::string(short_state.message()),
              ::testing::HasSubstr("slot \"optimizer/iterations\" is missing"));
}

TYPED_TEST_P(OptimizerTest, RefusesBadSpecsAndShapes) {
  const gpu::GpuDevice* gpu = this->env().gpu();
  v1::OptimizerSpec none;
  none.mutable_learning_rate()->mutable_constant()->set_value(0.1);
  EXPECT_THAT(Optimizer::Create(none, this->OneVariable(), gpu).status().message(),
              ::testing::HasSubstr("optimizer.kind"));
  v1::OptimizerSpec m = OptimizerSpecOf("momentum", 0.1);
  m.mutable_momentum()->set_momentum(1.5);
  EXPECT_THAT(Optimizer::Create(m, this->OneVariable(), gpu).status().message(),
              ::testing::HasSubstr("momentum.momentum"));
  v1::OptimizerSpec no_lr;
  no_lr.mutable_sgd();
  const absl::Status no_lr_status = Optimizer::Create(no_lr, this->OneVariable(), gpu).status();
  EXPECT_EQ(no_lr_status.message().find("optimizer.learning_rate.schedule: "), 0u) << no_lr_status;
  std::unique_ptr<Optimizer> opt =
      *Optimizer::Create(OptimizerSpecOf("sgd", 0.1), this->OneVariable(), gpu);
  std::vector<Tensor> w = {this->On({0, 0}, Shape{2})};
  std::vector<Tensor> g = {this->On({0, 0, 0}, Shape{3})};
  const absl::Status mismatch = opt->Apply(g, &w);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument) << mismatch;
  EXPECT_THAT(std::string(mismatch.message()),
              ::testing::HasSubstr("optimizer: gradient of \"w\" is"));
  EXPECT_EQ(opt->iterations(), 0);
  if (gpu != nullptr) {  // a GPU trains f32 variables only
    const absl::Status f64 =
        Optimizer::Create(OptimizerSpecOf("sgd", 0.1),
                          {VariableInfo{"w", Shape{2}, DType::kF64, true, 0}}, gpu)
            .status();
    EXPECT_EQ(f64.code(), absl::StatusCode::kInvalidArgument) << f64;
    EXPECT_THAT(std::string(f64.message()),
                ::testing::HasSubstr("optimizer on " + this->env().device().name() +
                                     ": variable \"w\" is f64; GPUs train f32"));
  }
}

// Two variables; gradients (3, 0) and (0, 4): global norm 5. Clipped to 1, SGD at lr 1 moves w
// by g / 5 (each variable by its share, not by its own norm). On the CPU the first variable is
// f64 and the second f32 (one norm across dtypes); on a GPU both are f32.
TYPED_TEST_P(OptimizerTest, GlobalClipnormScalesEveryGradientByTheNormOverAllVariables) {
  const gpu::GpuDevice* gpu = this->env().gpu();
  const DType first = this->dtype();
  std::vector<VariableInfo> vars = {VariableInfo{"a", Shape{2}, first, true, 0},
                                    VariableInfo{"b", Shape{2}, DType::kF32, true, 0}};
  v1::OptimizerSpec spec = OptimizerSpecOf("sgd", 1.0);
  auto run = [&](DeviceEnv& e, DType a_dtype, double clipnorm, double* norm) {
    spec.set_global_clipnorm(clipnorm);
    vars[0].dtype = a_dtype;
    std::unique_ptr<Optimizer> opt = *Optimizer::Create(spec, vars, e.gpu());
    std::vector<Tensor> w = {this->On(e, a_dtype, {0, 0}, Shape{2}),
                             this->On(e, DType::kF32, {0, 0}, Shape{2})};
    std::vector<Tensor> g = {this->On(e, a_dtype, {3, 0}, Shape{2}),
                             this->On(e, DType::kF32, {0, 4}, Shape{2})};
    EXPECT_TRUE(opt->Apply(g, &w).ok());
    if (norm != nullptr) *norm = opt->last_gradient_norm();
    return std::vector<std::vector<double>>{this->Values(e, w[0]), this->Values(e, w[1])};
  };
  double norm = 0;
  const auto clipped = run(this->env(), first, 1.0, &norm);
  EXPECT_DOUBLE_EQ(norm, 5.0);
  this->ExpectEq(clipped[0][0], -0.6);
  EXPECT_FLOAT_EQ(static_cast<float>(clipped[1][1]), -0.8f);
  // Under the threshold nothing is scaled.
  const auto loose = run(this->env(), first, 10.0, nullptr);
  this->ExpectEq(loose[0][0], -3.0);
  EXPECT_FLOAT_EQ(static_cast<float>(loose[1][1]), -4.0f);
  if (gpu != nullptr) {  // the CPU's f32 updates
    CpuDeviceEnv cpu;
    const auto want = run(cpu, DType::kF32, 1.0, nullptr);
    for (int v = 0; v < 2; ++v) {
      for (int i = 0; i < 2; ++i) {
        if (TypeParam::kBitwise) {
          EXPECT_EQ(clipped[v][i], want[v][i]) << v << " " << i;
        } else {
          EXPECT_NEAR(clipped[v][i], want[v][i], kRelTolerance * std::fabs(want[v][i]));
        }
      }
    }
  }
}

TYPED_TEST_P(OptimizerTest, WeightDecayIsDecoupledAndSkipsExcludedVariables) {
  const gpu::GpuDevice* gpu = this->env().gpu();
  const DType dtype = this->dtype();
  std::vector<VariableInfo> vars = {VariableInfo{"dense/kernel", Shape{1}, dtype, true, 0},
                                    VariableInfo{"dense/bias", Shape{1}, dtype, true, 0}};
  v1::OptimizerSpec spec = OptimizerSpecOf("adam", 0.1);
  spec.set_weight_decay(0.5);
  spec.add_weight_decay_exclude("bias");
  std::unique_ptr<Optimizer> opt = *Optimizer::Create(spec, vars, gpu);
  std::vector<Tensor> w = {this->On({2.0}, Shape{1}), this->On({2.0}, Shape{1})};
  // A zero gradient leaves Adam's step at 0: only the decay moves the kernel,
  // w = 2 - 0.1 * 0.5 * 2 = 1.9; the bias stays.
  std::vector<Tensor> g = {this->On({0.0}, Shape{1}), this->On({0.0}, Shape{1})};
  ASSERT_TRUE(opt->Apply(g, &w).ok());
  this->ExpectEq(this->Values(w[0])[0], 1.9);
  this->ExpectEq(this->Values(w[1])[0], 2.0);
  // With a gradient, the Adam step is the same as without decay, applied to the decayed w.
  std::unique_ptr<Optimizer> plain =
      *Optimizer::Create(OptimizerSpecOf("adam", 0.1), {vars[0]}, gpu);
  std::vector<Tensor> wp = {this->On({1.9 * (1 - 0.05)}, Shape{1})};
  std::vector<Tensor> gp = {this->On({1.0}, Shape{1})};
  ASSERT_TRUE(plain->Apply(gp, &wp).ok());
  std::unique_ptr<Optimizer> fresh = *Optimizer::Create(spec, {vars[0]}, gpu);
  std::vector<Tensor> wd = {this->On({1.9}, Shape{1})};
  ASSERT_TRUE(fresh->Apply(gp, &wd).ok());
  this->ExpectEq(this->Values(wd[0])[0], this->Values(wp[0])[0]);
}

TYPED_TEST_P(OptimizerTest, RefusesBadClippingAndDecayNamingTheField) {
  const gpu::GpuDevice* gpu = this->env().gpu();
  v1::OptimizerSpec clip = OptimizerSpecOf("sgd", 0.1);
  clip.set_global_clipnorm(-1);
  EXPECT_THAT(Optimizer::Create(clip, this->OneVariable(), gpu).status().message(),
              ::testing::HasSubstr("optimizer.global_clipnorm"));
  v1::OptimizerSpec decay = OptimizerSpecOf("adam", 0.1);
  decay.set_weight_decay(1.5);
  EXPECT_THAT(Optimizer::Create(decay, this->OneVariable(), gpu).status().message(),
              ::testing::HasSubstr("optimizer.weight_decay"));
  v1::OptimizerSpec empty = OptimizerSpecOf("adam", 0.1);
  empty.add_weight_decay_exclude("");
  EXPECT_THAT(Optimizer::Create(empty, this->OneVariable(), gpu).status().message(),
              ::testing::HasSubstr("optimizer.weight_decay_exclude[0]"));
}

REGISTER_TYPED_TEST_SUITE_P(OptimizerTest, UpdateRules, StateRoundTripContinuesBitwise,
                            RefusesBadSpecsAndShapes,
                            GlobalClipnormScalesEveryGradientByTheNormOverAllVariables,
                            WeightDecayIsDecoupledAndSkipsExcludedVariables,
                            RefusesBadClippingAndDecayNamingTheField);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_OPTIMIZER_TEST_BODY_H_
