#include "engine/executor.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <thread>

#include "engine/optimizer.h"
#include "engine/variable_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::testing::HasSubstr;

v1::Initializer Glorot() {
  v1::Initializer i;
  i.set_kind(v1::Initializer::GLOROT_UNIFORM);
  return i;
}

// features [b,6] -> dense 8 -> relu -> dropout(rate) -> dense 3 -> xent.
Graph Mlp(float dropout_rate = 0) {
  Graph g(5);
  int x = *g.Input("features", DType::kF32, Shape{-1, 6});
  int labels = *g.Input("labels", DType::kI64, Shape{-1});
  int w1 = *g.Variable("d0/kernel", DType::kF32, Shape{6, 8}, Glorot(), 6, 8);
  int b1 = *g.Variable("d0/bias", DType::kF32, Shape{8}, v1::Initializer(), 6, 8);
  int h = *g.Op(v1::BIAS_ADD, {*g.Op(v1::MATMUL, {x, w1}), b1});
  h = *g.Op(v1::RELU, {h});
  if (dropout_rate > 0) h = *g.Dropout(h, dropout_rate);
  int w2 = *g.Variable("d1/kernel", DType::kF32, Shape{8, 3}, Glorot(), 8, 3);
  int b2 = *g.Variable("d1/bias", DType::kF32, Shape{3}, v1::Initializer(), 8, 3);
  int logits = *g.Op(v1::BIAS_ADD, {*g.Op(v1::MATMUL, {h, w2}), b2});
  (void)g.SetLoss(*g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {logits, labels}));
  g.set_output(logits);
  g.set_accuracy(*g.Op(v1::ACCURACY, {logits, labels}));
  return g;
}

Feeds Batch(int64_t b, int64_t offset = 0) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = offset; i < offset + b; ++i) {
    for (int j = 0; j < 6; ++j) x.push_back(std::sin(0.7 * i + 1.3 * j));
    y.push_back(i % 3);
  }
  return {{"features", Tensor::FromVector(x, Shape{b, 6})},
          {"labels", Tensor::FromVector(y, Shape{b})}};
}

TEST(Executor, GradientReadyHookFiresInReverseLayerOrderWithFinalValues) {
  Graph g = Mlp();
  auto vars = *VariableSet::Initialize(g);
  auto exec = *Executor::Create(&g);
  std::vector<int> order;
  std::vector<Tensor> grads, at_hook(4);
  StepOptions options;
  options.on_gradient_ready = [&](int v) {
    order.push_back(v);
    at_hook[v] = grads[v].Clone();
  };
  ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), Batch(16), options, &grads).ok());
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1, 0}));
  for (int v = 0; v < 4; ++v) {
    EXPECT_TRUE(at_hook[v].BitwiseEquals(grads[v])) << v;
    // The caller's alone (plus the executor's pool, which never reuses a held buffer).
    EXPECT_LE(grads[v].use_count(), 2) << v;
  }
}

// A MatMul hands out its weights' gradient before it computes its input's gradient, so that
// the weights' all-reduce overlaps that GEMM. Seen from the layer below: doubling the second
// layer's weights when their gradient is handed out doubles the gradient that flows to the
// first layer (a caller must never change variables during the step; this test does, to
// observe the order).
TEST(Executor, WeightsGradientLeavesBeforeTheInputGradientIsComputed) {
  Graph g = Mlp();
  auto vars = *VariableSet::Initialize(g);
  auto exec = *Executor::Create(&g);
  std::vector<Tensor> reference, grads, w;
  ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), Batch(16), {}, &reference).ok());
  for (const Tensor& t : vars.tensors()) w.push_back(t.Clone());
  StepOptions options;
  options.on_gradient_ready = [&](int v) {
    if (v != 2) return;  // d1/kernel
    for (int64_t i = 0; i < w[2].num_elements(); ++i) w[2].data<float>()[i] *= 2;
  };
  ASSERT_TRUE(exec->ComputeGradients(w, Batch(16), options, &grads).ok());
  EXPECT_TRUE(grads[2].BitwiseEquals(reference[2]));
  EXPECT_TRUE(grads[3].BitwiseEquals(reference[3]));
  for (int v : {0, 1}) {  // d0/kernel, d0/bias: below the doubled weights
    for (int64_t i = 0; i < grads[v].num_elements(); ++i) {
      ASSERT_EQ(grads[v].data<float>()[i], 2 * reference[v].data<float>()[i]) << v << " " << i;
    }
  }
}

TEST(Executor, GradientsMayBeReducedInPlaceDuringTheBackwardPass) {
  // Add's gradient flows to both inputs as the same tensor: each variable still gets its
  // own buffer, so an in-place all-reduce of one cannot corrupt the other.
  Graph g(1);
  int a = *g.Variable("a", DType::kF32, Shape{2, 3}, Glorot(), 2, 3);
  int b = *g.Variable("b", DType::kF32, Shape{2, 3}, Glorot(), 2, 3);
  int c = *g.Variable("c", DType::kF32, Shape{2, 3}, Glorot(), 2, 3);
  int h = *g.Op(v1::TANH, {*g.Op(v1::ADD, {a, b})});
  ASSERT_TRUE(g.SetLoss(*g.Sum(*g.Op(v1::MUL, {h, c}), {}, false)).ok());
  auto vars = *VariableSet::Initialize(g);
  auto exec = *Executor::Create(&g);
  std::vector<Tensor> expected, grads;
  ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), {}, {}, &expected).ok());
  StepOptions options;
  options.on_gradient_ready = [&](int v) {
    for (int64_t i = 0; i < grads[v].num_elements(); ++i) grads[v].data<float>()[i] *= 2;
  };
  ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), {}, options, &grads).ok());
  for (int v = 0; v < 3; ++v) {
    for (int64_t i = 0; i < 6; ++i) {
      EXPECT_EQ(grads[v].data<float>()[i], 2 * expected[v].data<float>()[i]) << v << " " << i;
    }
  }
}

TEST(Executor, BitwiseDeterministicAcrossExecutorsAndSteps) {
  Graph g = Mlp(0.25f);
  auto vars = *VariableSet::Initialize(g);
  auto a = *Executor::Create(&g);
  auto b = *Executor::Create(&g, ExecutorOptions{Device::Cpu(1), 1});
  StepOptions options;
  options.replica_id = 2;
  options.step = 9;
  std::vector<Tensor> ga, gb;
  auto ra = *a->ComputeGradients(vars.tensors(), Batch(32), options, &ga);
  (void)b->ComputeGradients(vars.tensors(), Batch(32, 5), options, &gb);  // other buffers first
  auto rb = *b->ComputeGradients(vars.tensors(), Batch(32), options, &gb);
  EXPECT_EQ(ra.loss, rb.loss);
  for (int v = 0; v < 4; ++v) EXPECT_TRUE(ga[v].BitwiseEquals(gb[v])) << v;
  // Another replica draws another dropout mask.
  options.replica_id = 3;
  auto rc = *b->ComputeGradients(vars.tensors(), Batch(32), options, &gb);
  EXPECT_NE(ra.loss, rc.loss);
}

TEST(Executor, ReplicaThreadsSharingGraphAndVariablesMatchASerialRun) {
  Graph g = Mlp(0.2f);
  auto vars = *VariableSet::Initialize(g);
  constexpr int kReplicas = 4;
  std::vector<std::vector<Tensor>> serial(kReplicas), threaded(kReplicas);
  auto step = [&](int r, std::vector<Tensor>* out) {
    auto exec = *Executor::Create(&g, ExecutorOptions{Device::Cpu(r), 1});
    StepOptions options;
    options.replica_id = r;
    ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), Batch(16, 16 * r), options, out).ok());
  };
  for (int r = 0; r < kReplicas; ++r) step(r, &serial[r]);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) threads.emplace_back(step, r, &threaded[r]);
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kReplicas; ++r) {
    for (int v = 0; v < 4; ++v) EXPECT_TRUE(serial[r][v].BitwiseEquals(threaded[r][v])) << r << v;
  }
}

TEST(Executor, LossScaleSumsHalfBatchesToTheFullBatchGradient) {
  Graph g = Mlp();
  auto vars = *VariableSet::Initialize(g);
  auto exec = *Executor::Create(&g);
  std::vector<Tensor> full, h0, h1;
  ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), Batch(20), {}, &full).ok());
  StepOptions half;
  half.loss_scale = 0.5;
  ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), Batch(10, 0), half, &h0).ok());
  ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), Batch(10, 10), half, &h1).ok());
  for (int v = 0; v < 4; ++v) {
    for (int64_t i = 0; i < full[v].num_elements(); ++i) {
      EXPECT_NEAR(full[v].data<float>()[i], h0[v].data<float>()[i] + h1[v].data<float>()[i], 1e-6);
    }
  }
}

TEST(Executor, TrainsAndEvaluates) {
  Graph g = Mlp();
  auto vars = *VariableSet::Initialize(g);
  auto exec = *Executor::Create(&g);
  v1::OptimizerSpec spec;
  spec.mutable_momentum()->set_momentum(0.9);
  spec.mutable_learning_rate()->mutable_constant()->set_value(0.1);
  auto opt = *Optimizer::Create(spec, g.Variables());
  double first = 0, last = 0;
  std::vector<Tensor> grads;
  for (int step = 0; step < 100; ++step) {
    auto r = *exec->ComputeGradients(vars.tensors(), Batch(30), {}, &grads);
    if (step == 0) first = r.loss;
    last = r.loss;
    ASSERT_TRUE(opt->Apply(grads, &vars.tensors()).ok());
  }
  EXPECT_LT(last, first * 0.5);
  Tensor logits;
  auto eval = *exec->Evaluate(vars.tensors(), Batch(30), &logits);
  EXPECT_EQ(logits.shape(), (Shape{30, 3}));
  EXPECT_GT(eval.accuracy, 0.5);
  EXPECT_EQ(eval.batch_size, 30);
  // Without labels: only the output.
  Feeds features_only = {Batch(4)[0]};
  EXPECT_TRUE(exec->Evaluate(vars.tensors(), features_only, &logits).ok());
}

TEST(Executor, AnEmptyBatchGivesZeroGradients) {
  // A replica whose share of a last partial batch is empty still takes part in the step.
  Graph g = Mlp();
  auto vars = *VariableSet::Initialize(g);
  auto exec = *Executor::Create(&g);
  std::vector<Tensor> grads;
  auto r = exec->ComputeGradients(vars.tensors(), Batch(0), {}, &grads);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->loss, 0);
  EXPECT_EQ(r->batch_size, 0);
  for (const Tensor& t : grads) {
    for (int64_t i = 0; i < t.num_elements(); ++i) ASSERT_EQ(t.data<float>()[i], 0.0f);
  }
}

TEST(Executor, RefusesBadFeedsAndVariables) {
  Graph g = Mlp();
  auto vars = *VariableSet::Initialize(g);
  auto exec = *Executor::Create(&g);
  std::vector<Tensor> grads;
  auto missing = exec->ComputeGradients(vars.tensors(), {Batch(4)[0]}, {}, &grads);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("no tensor fed for input \"labels\""));
  Feeds wrong = Batch(4);
  wrong[0].second = Tensor::Zeros(DType::kF32, Shape{4, 5});
  auto shape = exec->ComputeGradients(vars.tensors(), wrong, {}, &grads);
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr("f32[4,5]"));
  Feeds bad_label = Batch(4);
  bad_label[1].second.data<int64_t>()[2] = 7;
  auto label = exec->ComputeGradients(vars.tensors(), bad_label, {}, &grads);
  EXPECT_THAT(std::string(label.status().message()), HasSubstr("label 7 at batch row 2"));
  std::vector<Tensor> short_vars = vars.tensors();
  short_vars[1] = Tensor::Zeros(DType::kF32, Shape{9});
  auto var = exec->ComputeGradients(short_vars, Batch(4), {}, &grads);
  EXPECT_THAT(std::string(var.status().message()), HasSubstr("\"d0/bias\""));
}

}  // namespace
}  // namespace lockstep::engine

namespace lockstep::engine {
namespace {

// Hands out 64-byte-aligned buffers and remembers them; `fail` makes it return null.
struct RecordingAllocator {
  std::set<const void*> live;
  int allocations = 0;
  bool fail = false;
  BufferAllocator Get() {
    return [this](size_t bytes) -> std::shared_ptr<char> {
      if (fail) return nullptr;
      ++allocations;
      char* p = static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64));
      live.insert(p);
      return std::shared_ptr<char>(p, [this](char* q) {
        live.erase(q);
        std::free(q);
      });
    };
  }
};

// One step of `g` on a batch of `batch`, by `placed` (its gradients in other memory) and by a
// plain executor: the gradients must be bitwise equal. Returns placed's.
std::vector<Tensor> PlacedGradients(const Graph& g, int batch, Executor* placed) {
  auto vars = *VariableSet::Initialize(g);
  auto plain = *Executor::Create(&g);
  std::vector<Tensor> a, b;
  EXPECT_TRUE(placed->ComputeGradients(vars.tensors(), Batch(batch), {}, &a).ok());
  EXPECT_TRUE(plain->ComputeGradients(vars.tensors(), Batch(batch), {}, &b).ok());
  EXPECT_EQ(a.size(), b.size());
  for (size_t v = 0; v < a.size() && v < b.size(); ++v) {
    EXPECT_TRUE(a[v].BitwiseEquals(b[v])) << "gradient " << v;
  }
  return a;
}

std::unique_ptr<Executor> PlacedExecutor(const Graph& g, RecordingAllocator& memory) {
  ExecutorOptions options;
  options.gradient_allocator = memory.Get();
  return *Executor::Create(&g, options);
}

TEST(Executor, GradientsOfVariablesComeFromTheGradientAllocatorAndArePooled) {
  Graph g = Mlp();
  RecordingAllocator memory;
  auto placed = PlacedExecutor(g, memory);
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> a = PlacedGradients(g, 16, placed.get());
    ASSERT_EQ(a.size(), 4u);
    for (int v = 0; v < 4; ++v) {
      EXPECT_EQ(memory.live.count(a[v].raw_data()), 1u) << "gradient " << v << " step " << step;
    }
    // Only the four gradients (no activation) came from it, once: later steps reuse them.
    EXPECT_EQ(memory.allocations, 4) << "step " << step;
  }
}

TEST(Executor, GradientsFallBackToOrdinaryMemoryWhenTheAllocatorIsFull) {
  Graph g = Mlp();
  RecordingAllocator memory;
  memory.fail = true;
  auto placed = PlacedExecutor(g, memory);
  EXPECT_EQ(PlacedGradients(g, 16, placed.get()).size(), 4u);
  EXPECT_EQ(memory.allocations, 0);
}

// A variable read by two nodes: its gradient is the sum of two, made in gradient memory too.
TEST(Executor, SummedGradientOfASharedVariableComesFromTheGradientAllocator) {
  Graph g(3);
  int x = *g.Input("features", DType::kF32, Shape{-1, 6});
  int labels = *g.Input("labels", DType::kI64, Shape{-1});
  int w = *g.Variable("w", DType::kF32, Shape{6, 6}, Glorot(), 6, 6);
  int w_out = *g.Variable("out", DType::kF32, Shape{6, 3}, Glorot(), 6, 3);
  int h = *g.Op(v1::MATMUL, {*g.Op(v1::MATMUL, {x, w}), w});
  (void)g.SetLoss(*g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {*g.Op(v1::MATMUL, {h, w_out}), labels}));
  RecordingAllocator memory;
  auto placed = PlacedExecutor(g, memory);
  std::vector<Tensor> a = PlacedGradients(g, 8, placed.get());
  ASSERT_EQ(a.size(), 2u);
  for (int v = 0; v < 2; ++v) EXPECT_EQ(memory.live.count(a[v].raw_data()), 1u) << v;
}

}  // namespace
}  // namespace lockstep::engine
