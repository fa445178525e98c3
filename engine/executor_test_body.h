// One executor test body for every device type (device_test_env.h): the gradient-ready hook's
// order and values, the weights' gradient leaving before the input gradient is computed,
// in-place reduction of handed-out gradients, determinism across executors and steps, loss
// scaling, training and evaluation, empty batches and refusals, each with the variables and
// gradients on the device. Instantiated for "/cpu:0" and the fake "/gpu:0" (executor_test, CPU
// CI) and for a real GPU (executor_cuda_test, requires-gpu).
//
// What a hook does to a gradient or a variable it does the way a caller on that device would:
// on "/cpu:0" in host memory, on a GPU with a kernel on the device's stream (DoubleInPlace), so
// the step's later kernels see it in stream order. Values are compared as the CPU tests always
// did (bitwise where the same device computes the same thing twice).
#ifndef LOCKSTEP_ENGINE_EXECUTOR_TEST_BODY_H_
#define LOCKSTEP_ENGINE_EXECUTOR_TEST_BODY_H_

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/device_generic_test_body.h"
#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/variable_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {

inline v1::Initializer GlorotUniform() {
  v1::Initializer i;
  i.set_kind(v1::Initializer::GLOROT_UNIFORM);
  return i;
}

// features [b,6] -> dense 8 -> relu -> dropout(rate) -> dense 3 -> xent.
inline Graph SmallMlp(float dropout_rate = 0) {
  Graph g(5);
  int x = *g.Input("features", DType::kF32, Shape{-1, 6});
  int labels = *g.Input("labels", DType::kI64, Shape{-1});
  int w1 = *g.Variable("d0/kernel", DType::kF32, Shape{6, 8}, GlorotUniform(), 6, 8);
  int b1 = *g.Variable("d0/bias", DType::kF32, Shape{8}, v1::Initializer(), 6, 8);
  int h = *g.Op(v1::BIAS_ADD, {*g.Op(v1::MATMUL, {x, w1}), b1});
  h = *g.Op(v1::RELU, {h});
  if (dropout_rate > 0) h = *g.Dropout(h, dropout_rate);
  int w2 = *g.Variable("d1/kernel", DType::kF32, Shape{8, 3}, GlorotUniform(), 8, 3);
  int b2 = *g.Variable("d1/bias", DType::kF32, Shape{3}, v1::Initializer(), 8, 3);
  int logits = *g.Op(v1::BIAS_ADD, {*g.Op(v1::MATMUL, {h, w2}), b2});
  (void)g.SetLoss(*g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {logits, labels}));
  g.set_output(logits);
  g.set_accuracy(*g.Op(v1::ACCURACY, {logits, labels}));
  return g;
}

inline Feeds SmallMlpBatch(int64_t b, int64_t offset = 0) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = offset; i < offset + b; ++i) {
    for (int j = 0; j < 6; ++j) x.push_back(std::sin(0.7 * i + 1.3 * j));
    y.push_back(i % 3);
  }
  return {{"features", Tensor::FromVector(x, Shape{b, 6})},
          {"labels", Tensor::FromVector(y, Shape{b})}};
}

template <class Env>
class ExecutorTest : public DeviceTest<Env> {
 protected:
  using DeviceTest<Env>::env;

  ExecutorOptions Options() const {
    ExecutorOptions options;
    options.device = this->env_->device();
    options.gpu = this->env_->gpu();
    return options;
  }
  std::unique_ptr<Executor> MakeExecutor(const Graph& g) {
    absl::StatusOr<std::unique_ptr<Executor>> exec = Executor::Create(&g, Options());
    EXPECT_TRUE(exec.ok()) << exec.status();
    return exec.ok() ? *std::move(exec) : nullptr;
  }
  // `g`'s initial variables on the device.
  std::vector<Tensor> InitialVariables(const Graph& g) {
    absl::StatusOr<VariableSet> init = VariableSet::Initialize(g);
    EXPECT_TRUE(init.ok()) << init.status();
    if (!init.ok()) return {};
    return OnDevice(init->tensors());
  }
  std::vector<Tensor> OnDevice(const std::vector<Tensor>& host) {
    absl::StatusOr<std::vector<Tensor>> d = this->env_->ToDevice(host);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : std::vector<Tensor>();
  }
  std::vector<Tensor> Host(const std::vector<Tensor>& ts) {
    absl::StatusOr<std::vector<Tensor>> h = this->env_->ToHost(ts);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *h : std::vector<Tensor>();
  }
  Tensor Host(const Tensor& t) {
    absl::StatusOr<Tensor> h = this->env_->ToHost(t);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *h : Tensor();
  }
  // t *= 2 (f32) where a caller on this device would do it: in host memory on the CPU, by a
  // kernel on the device's stream on a GPU.
  void DoubleInPlace(Tensor& t) {
    const int64_t n = t.num_elements();
    if (this->env_->gpu() == nullptr) {
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] *= 2;
      return;
    }
    float* p = t.device_data<float>();
    const absl::Status s =
        this->env_->gpu()->kernels->Scale(p, 2.f, p, n, this->env_->gpu()->stream());
    EXPECT_TRUE(s.ok()) << s;
  }
};

TYPED_TEST_SUITE_P(ExecutorTest);

TYPED_TEST_P(ExecutorTest, GradientReadyHookFiresInReverseLayerOrderWithFinalValues) {
  Graph g = SmallMlp();
  std::vector<Tensor> vars = this->InitialVariables(g);
  auto exec = this->MakeExecutor(g);
  ASSERT_NE(exec, nullptr);
  std::vector<int> order;
  std::vector<Tensor> grads, at_hook(4);
  StepOptions options;
  options.on_gradient_ready = [&](int v) {
    order.push_back(v);
    at_hook[v] = this->Host(grads[v]).Clone();
  };
  ASSERT_TRUE(exec->ComputeGradients(vars, SmallMlpBatch(16), options, &grads).ok());
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1, 0}));
  for (int v = 0; v < 4; ++v) {
    EXPECT_TRUE(at_hook[v].BitwiseEquals(this->Host(grads[v]))) << v;
    // The caller's alone (plus the executor's pool, which never reuses a held buffer).
    EXPECT_LE(grads[v].use_count(), 2) << v;
  }
}

// A MatMul hands out its weights' gradient before it computes its input's gradient, so that
// the weights' all-reduce overlaps that GEMM. Seen from the layer below: doubling the second
// layer's weights when their gradient is handed out doubles the gradient that flows to the
// first layer (a caller must never change variables during the step; this test does, to
// observe the order).
TYPED_TEST_P(ExecutorTest, WeightsGradientLeavesBeforeTheInputGradientIsComputed) {
  Graph g = SmallMlp();
  std::vector<Tensor> vars = this->InitialVariables(g);
  auto exec = this->MakeExecutor(g);
  ASSERT_NE(exec, nullptr);
  std::vector<Tensor> reference, grads;
  ASSERT_TRUE(exec->ComputeGradients(vars, SmallMlpBatch(16), {}, &reference).ok());
  reference = this->Host(reference);
  std::vector<Tensor> host_w;
  for (const Tensor& t : this->Host(vars)) host_w.push_back(t.Clone());
  std::vector<Tensor> w = this->OnDevice(host_w);
  StepOptions options;
  options.on_gradient_ready = [&](int v) {
    if (v == 2) this->DoubleInPlace(w[2]);  // d1/kernel
  };
  ASSERT_TRUE(exec->ComputeGradients(w, SmallMlpBatch(16), options, &grads).ok());
  grads = this->Host(grads);
  EXPECT_TRUE(grads[2].BitwiseEquals(reference[2]));
  EXPECT_TRUE(grads[3].BitwiseEquals(reference[3]));
  for (int v : {0, 1}) {  // d0/kernel, d0/bias: below the doubled weights
    for (int64_t i = 0; i < grads[v].num_elements(); ++i) {
      ASSERT_EQ(grads[v].data<float>()[i], 2 * reference[v].data<float>()[i]) << v << " " << i;
    }
  }
}

TYPED_TEST_P(ExecutorTest, GradientsMayBeReducedInPlaceDuringTheBackwardPass) {
  // Add's gradient flows to both inputs as the same tensor: each variable still gets its
  // own buffer, so an in-place all-reduce of one cannot corrupt the other.
  Graph g(1);
  int a = *g.Variable("a", DType::kF32, Shape{2, 3}, GlorotUniform(), 2, 3);
  int b = *g.Variable("b", DType::kF32, Shape{2, 3}, GlorotUniform(), 2, 3);
  int c = *g.Variable("c", DType::kF32, Shape{2, 3}, GlorotUniform(), 2, 3);
  int h = *g.Op(v1::TANH, {*g.Op(v1::ADD, {a, b})});
  ASSERT_TRUE(g.SetLoss(*g.Sum(*g.Op(v1::MUL, {h, c}), {}, false)).ok());
  std::vector<Tensor> vars = this->InitialVariables(g);
  auto exec = this->MakeExecutor(g);
  ASSERT_NE(exec, nullptr);
  std::vector<Tensor> expected, grads;
  ASSERT_TRUE(exec->ComputeGradients(vars, {}, {}, &expected).ok());
  expected = this->Host(expected);
  StepOptions options;
  options.on_gradient_ready = [&](int v) { this->DoubleInPlace(grads[v]); };
  ASSERT_TRUE(exec->ComputeGradients(vars, {}, options, &grads).ok());
  grads = this->Host(grads);
  for (int v = 0; v < 3; ++v) {
    for (int64_t i = 0; i < 6; ++i) {
      EXPECT_EQ(grads[v].data<float>()[i], 2 * expected[v].data<float>()[i]) << v << " " << i;
    }
  }
}

TYPED_TEST_P(ExecutorTest, BitwiseDeterministicAcrossExecutorsAndSteps) {
  Graph g = SmallMlp(0.25f);
  std::vector<Tensor> vars = this->InitialVariables(g);
  auto a = this->MakeExecutor(g);
  auto b = this->MakeExecutor(g);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  StepOptions options;
  options.replica_id = 2;
  options.step = 9;
  std::vector<Tensor> ga, gb;
  auto ra = *a->ComputeGradients(vars, SmallMlpBatch(32), options, &ga);
  ga = this->Host(ga);
  (void)b->ComputeGradients(vars, SmallMlpBatch(32, 5), options, &gb);  // other buffers first
  auto rb = *b->ComputeGradients(vars, SmallMlpBatch(32), options, &gb);
  gb = this->Host(gb);
  EXPECT_EQ(ra.loss, rb.loss);
  for (int v = 0; v < 4; ++v) EXPECT_TRUE(ga[v].BitwiseEquals(gb[v])) << v;
  // Another replica draws another dropout mask.
  options.replica_id = 3;
  auto rc = *b->ComputeGradients(vars, SmallMlpBatch(32), options, &gb);
  EXPECT_NE(ra.loss, rc.loss);
}

TYPED_TEST_P(ExecutorTest, LossScaleSumsHalfBatchesToTheFullBatchGradient) {
  Graph g = SmallMlp();
  std::vector<Tensor> vars = this->InitialVariables(g);
  auto exec = this->MakeExecutor(g);
  ASSERT_NE(exec, nullptr);
  std::vector<Tensor> full, h0, h1;
  ASSERT_TRUE(exec->ComputeGradients(vars, SmallMlpBatch(20), {}, &full).ok());
  full = this->Host(full);
  StepOptions half;
  half.loss_scale = 0.5;
  ASSERT_TRUE(exec->ComputeGradients(vars, SmallMlpBatch(10, 0), half, &h0).ok());
  h0 = this->Host(h0);
  ASSERT_TRUE(exec->ComputeGradients(vars, SmallMlpBatch(10, 10), half, &h1).ok());
  h1 = this->Host(h1);
  for (int v = 0; v < 4; ++v) {
    for (int64_t i = 0; i < full[v].num_elements(); ++i) {
      EXPECT_NEAR(full[v].data<float>()[i], h0[v].data<float>()[i] + h1[v].data<float>()[i], 1e-6);
    }
  }
}

TYPED_TEST_P(ExecutorTest, TrainsAndEvaluates) {
  Graph g = SmallMlp();
  std::vector<Tensor> vars = this->InitialVariables(g);
  auto exec = this->MakeExecutor(g);
  ASSERT_NE(exec, nullptr);
  v1::OptimizerSpec spec;
  spec.mutable_momentum()->set_momentum(0.9);
  spec.mutable_learning_rate()->mutable_constant()->set_value(0.1);
  std::unique_ptr<Optimizer> opt = *Optimizer::Create(spec, g.Variables(), this->env().gpu());
  double first = 0, last = 0;
  std::vector<Tensor> grads;
  for (int step = 0; step < 100; ++step) {
    auto r = *exec->ComputeGradients(vars, SmallMlpBatch(30), {}, &grads);
    if (step == 0) first = r.loss;
    last = r.loss;
    ASSERT_TRUE(opt->Apply(grads, &vars).ok());
  }
  EXPECT_LT(last, first * 0.5);
  Tensor logits;
  auto eval = *exec->Evaluate(vars, SmallMlpBatch(30), &logits);
  EXPECT_TRUE(logits.on_host());
  EXPECT_EQ(logits.shape(), (Shape{30, 3}));
  EXPECT_GT(eval.accuracy, 0.5);
  EXPECT_EQ(eval.batch_size, 30);
  // Without labels: only the output.
  Feeds features_only = {SmallMlpBatch(4)[0]};
  EXPECT_TRUE(exec->Evaluate(vars, features_only, &logits).ok());
}

TYPED_TEST_P(ExecutorTest, AnEmptyBatchGivesZeroGradients) {
  // A replica whose share of a last partial batch is empty still takes part in the step.
  Graph g = SmallMlp();
  std::vector<Tensor> vars = this->InitialVariables(g);
  auto exec = this->MakeExecutor(g);
  ASSERT_NE(exec, nullptr);
  std::vector<Tensor> grads;
  auto r = exec->ComputeGradients(vars, SmallMlpBatch(0), {}, &grads);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->loss, 0);
  EXPECT_EQ(r->batch_size, 0);
  ASSERT_EQ(grads.size(), 4u);
  for (const Tensor& t : this->Host(grads)) {
    for (int64_t i = 0; i < t.num_elements(); ++i) ASSERT_EQ(t.data<float>()[i], 0.0f);
  }
}

TYPED_TEST_P(ExecutorTest, RefusesBadFeedsAndVariables) {
  using ::testing::HasSubstr;
  Graph g = SmallMlp();
  std::vector<Tensor> vars = this->InitialVariables(g);
  auto exec = this->MakeExecutor(g);
  ASSERT_NE(exec, nullptr);
  std::vector<Tensor> grads;
  auto missing = exec->ComputeGradients(vars, {SmallMlpBatch(4)[0]}, {}, &grads);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("no tensor fed for input \"labels\""));
  Feeds wrong = SmallMlpBatch(4);
  wrong[0].second = Tensor::Zeros(DType::kF32, Shape{4, 5});
  auto shape = exec->ComputeGradients(vars, wrong, {}, &grads);
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr("f32[4,5]"));
  Feeds bad_label = SmallMlpBatch(4);
  bad_label[1].second.data<int64_t>()[2] = 7;
  auto label = exec->ComputeGradients(vars, bad_label, {}, &grads);
  EXPECT_THAT(std::string(label.status().message()), HasSubstr("label 7 at batch row 2"));
  std::vector<Tensor> short_vars = vars;
  short_vars[1] = this->OnDevice({Tensor::Zeros(DType::kF32, Shape{9})})[0];
  auto var = exec->ComputeGradients(short_vars, SmallMlpBatch(4), {}, &grads);
  EXPECT_THAT(std::string(var.status().message()), HasSubstr("\"d0/bias\""));
  // The device is still usable after the refused steps.
  EXPECT_TRUE(exec->ComputeGradients(vars, SmallMlpBatch(4), {}, &grads).ok());
}

REGISTER_TYPED_TEST_SUITE_P(ExecutorTest, GradientReadyHookFiresInReverseLayerOrderWithFinalValues,
                            WeightsGradientLeavesBeforeTheInputGradientIsComputed,
                            GradientsMayBeReducedInPlaceDuringTheBackwardPass,
                            BitwiseDeterministicAcrossExecutorsAndSteps,
                            LossScaleSumsHalfBatchesToTheFullBatchGradient, TrainsAndEvaluates,
                            AnEmptyBatchGivesZeroGradients, RefusesBadFeedsAndVariables);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_EXECUTOR_TEST_BODY_H_
