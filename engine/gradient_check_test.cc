// Every op's gradient against central finite differences, in f64.
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "engine/executor.h"
#include "engine/philox.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

Tensor Random(Shape shape, uint64_t stream, double scale = 1.0) {
  Tensor t(DType::kF64, shape);
  Philox rng(MixKey(1234, stream));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data<double>()[i] = (2 * rng.Uniform(i) - 1) * scale;
  }
  return t;
}

// A graph under test: `build` adds the op(s) on variables it creates (shapes in
// `var_shapes`) and returns the node whose output is checked.
struct GradCase {
  std::vector<Shape> var_shapes;
  std::function<absl::StatusOr<int>(Graph*, const std::vector<int>&)> build;
  Feeds extra_feeds;
  StepOptions options;
};

void CheckGradients(const GradCase& c) {
  Graph g(7);
  std::vector<int> vars;
  for (size_t i = 0; i < c.var_shapes.size(); ++i) {
    vars.push_back(*g.Variable("v" + std::to_string(i), DType::kF64, c.var_shapes[i],
                               v1::Initializer(), 1, 1));
  }
  for (const auto& [name, t] : c.extra_feeds) ASSERT_TRUE(g.Input(name, t.dtype(), t.shape()).ok());
  absl::StatusOr<int> out = c.build(&g, vars);
  ASSERT_TRUE(out.ok()) << out.status();
  // loss = sum(out * r) with a random r, so every output element matters differently.
  Shape out_shape = g.shape(*out);
  ASSERT_TRUE(out_shape.fully_known()) << out_shape.ToString();
  int r = *g.Input("r", DType::kF64, out_shape);
  int prod = *g.Op(v1::MUL, {*out, r});
  int loss = *g.Sum(prod, {}, false);
  ASSERT_TRUE(g.SetLoss(loss).ok());

  Feeds feeds = c.extra_feeds;
  feeds.push_back({"r", Random(out_shape, 99)});
  std::vector<Tensor> values;
  for (size_t i = 0; i < c.var_shapes.size(); ++i) values.push_back(Random(c.var_shapes[i], i));

  auto exec = Executor::Create(&g);
  ASSERT_TRUE(exec.ok()) << exec.status();
  std::vector<Tensor> grads;
  std::vector<int> ready;
  StepOptions options = c.options;
  options.on_gradient_ready = [&](int v) { ready.push_back(v); };
  auto result = (*exec)->ComputeGradients(values, feeds, options, &grads);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ready.size(), values.size());

  const double eps = 1e-6;
  for (size_t v = 0; v < values.size(); ++v) {
    for (int64_t i = 0; i < values[v].num_elements(); ++i) {
      auto loss_at = [&](double delta) {
        std::vector<Tensor> shifted = values;
        shifted[v] = values[v].Clone();
        shifted[v].data<double>()[i] += delta;
        std::vector<Tensor> unused;
        StepOptions o = c.options;
        return (*exec)->ComputeGradients(shifted, feeds, o, &unused)->loss;
      };
      double numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
      double analytic = grads[v].data<double>()[i];
      EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::fabs(numeric)))
          << "variable " << v << " element " << i;
    }
  }
}

TEST(GradientCheck, MatMul) {
  CheckGradients({{Shape{3, 4}, Shape{4, 5}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::MATMUL, {v[0], v[1]});
                  }});
}

TEST(GradientCheck, AddSubMul) {
  for (v1::OpType op : {v1::ADD, v1::SUB, v1::MUL}) {
    SCOPED_TRACE(v1::OpType_Name(op));
    CheckGradients({{Shape{2, 3}, Shape{2, 3}}, [op](Graph* g, const std::vector<int>& v) {
                      return g->Op(op, {v[0], v[1]});
                    }});
  }
}

TEST(GradientCheck, SameInputTwice) {  // gradients from two consumers accumulate
  CheckGradients({{Shape{2, 3}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::MUL, {v[0], v[0]});
                  }});
}

TEST(GradientCheck, BiasAdd) {
  CheckGradients({{Shape{2, 3, 4}, Shape{4}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::BIAS_ADD, {v[0], v[1]});
                  }});
  // A bias over the last two axes (a position embedding [t, d] on [b, t, d]).
  CheckGradients({{Shape{2, 3, 4}, Shape{3, 4}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::BIAS_ADD, {v[0], v[1]});
                  }});
}

TEST(GradientCheck, Activations) {
  for (v1::OpType op : {v1::RELU, v1::SIGMOID, v1::TANH, v1::SOFTMAX, v1::GELU}) {
    SCOPED_TRACE(v1::OpType_Name(op));
    CheckGradients(
        {{Shape{3, 5}}, [op](Graph* g, const std::vector<int>& v) { return g->Op(op, {v[0]}); }});
  }
}

TEST(GradientCheck, SparseSoftmaxCrossEntropy) {
  CheckGradients({{Shape{4, 5}},
                  [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {v[0], g->FindInput("labels")});
                  },
                  {{"labels", Tensor::FromVector<int64_t>({0, 4, 2, 2}, Shape{4})}}});
}

// Label smoothing: targets (1 - eps) * one_hot + eps / classes.
TEST(GradientCheck, SparseSoftmaxCrossEntropyWithLabelSmoothing) {
  CheckGradients({{Shape{4, 5}},
                  [](Graph* g, const std::vector<int>& v) {
                    return g->SparseSoftmaxCrossEntropy(v[0], g->FindInput("labels"), 0.2f);
                  },
                  {{"labels", Tensor::FromVector<int64_t>({0, 4, 2, 2}, Shape{4})}}});
}

// A sequence's logits [b, t, c] with a label per position [b, t] (a language model).
TEST(GradientCheck, SparseSoftmaxCrossEntropyPerPosition) {
  CheckGradients({{Shape{2, 3, 4}},
                  [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {v[0], g->FindInput("labels")});
                  },
                  {{"labels", Tensor::FromVector<int64_t>({0, 3, 2, 2, 1, 3}, Shape{2, 3})}}});
}

TEST(GradientCheck, MeanSquaredError) {
  CheckGradients({{Shape{3, 4}, Shape{3, 4}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::MEAN_SQUARED_ERROR, {v[0], v[1]});
                  }});
}

TEST(GradientCheck, SumAndMean) {
  CheckGradients({{Shape{2, 3, 4}},
                  [](Graph* g, const std::vector<int>& v) { return g->Sum(v[0], {1}, false); }});
  CheckGradients({{Shape{2, 3, 4}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Mean(v[0], {0, -1}, true);
                  }});
  CheckGradients({{Shape{2, 3}},
                  [](Graph* g, const std::vector<int>& v) { return g->Mean(v[0], {}, false); }});
}

TEST(GradientCheck, ReshapeAndFlatten) {
  CheckGradients({{Shape{2, 6}}, [](Graph* g, const std::vector<int>& v) -> absl::StatusOr<int> {
                    auto r = g->Reshape(v[0], {3, -1});
                    if (!r.ok()) return r;
                    return g->Op(v1::TANH, {*r});
                  }});
  CheckGradients({{Shape{2, 2, 3}}, [](Graph* g, const std::vector<int>& v) -> absl::StatusOr<int> {
                    auto f = g->Op(v1::FLATTEN, {v[0]});
                    if (!f.ok()) return f;
                    return g->Op(v1::SIGMOID, {*f});
                  }});
}

TEST(GradientCheck, Conv2D) {
  struct Geometry {
    std::vector<int> strides;
    v1::Padding padding;
  };
  for (const Geometry& geo :
       {Geometry{{1, 1}, v1::SAME}, Geometry{{2, 2}, v1::VALID}, Geometry{{2, 1}, v1::SAME}}) {
    SCOPED_TRACE(geo.strides[0] * 10 + geo.padding);
    CheckGradients(
        {{Shape{2, 5, 5, 3}, Shape{3, 3, 3, 4}}, [geo](Graph* g, const std::vector<int>& v) {
           return g->Conv2D(v[0], v[1], geo.strides, geo.padding);
         }});
  }
}

TEST(GradientCheck, MaxPool2D) {
  CheckGradients({{Shape{2, 4, 4, 3}}, [](Graph* g, const std::vector<int>& v) {
                    return g->MaxPool2D(v[0], {2, 2}, {2, 2}, v1::VALID);
                  }});
  CheckGradients({{Shape{1, 5, 5, 2}}, [](Graph* g, const std::vector<int>& v) {
                    return g->MaxPool2D(v[0], {3, 3}, {2, 2}, v1::SAME);
                  }});
}

TEST(GradientCheck, DropoutInTraining) {
  GradCase c{{Shape{4, 6}},
             [](Graph* g, const std::vector<int>& v) { return g->Dropout(v[0], 0.5f); }};
  c.options.training = true;
  c.options.replica_id = 1;
  c.options.step = 3;
  CheckGradients(c);
}

TEST(GradientCheck, Concat) {
  CheckGradients({{Shape{2, 3}, Shape{2, 1}, Shape{2, 4}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Concat({v[0], v[1], v[2]}, 1);
                  }});
  CheckGradients({{Shape{2, 3, 2}, Shape{2, 1, 2}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Concat({v[0], v[1]}, -2);
                  }});
  CheckGradients({{Shape{2, 3}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Concat({v[0], v[0]}, 0);  // one input twice
                  }});
}

TEST(GradientCheck, GlobalAveragePooling) {  // the layer is a MEAN over the inner axes
  CheckGradients({{Shape{2, 3, 3, 4}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Mean(v[0], {1, 2}, false);
                  }});
}

TEST(GradientCheck, LayerNorm) {
  CheckGradients({{Shape{3, 5}, Shape{5}, Shape{5}}, [](Graph* g, const std::vector<int>& v) {
                    return g->LayerNorm(v[0], v[1], v[2], 1e-3f);
                  }});
  CheckGradients({{Shape{2, 2, 4}, Shape{4}, Shape{4}}, [](Graph* g, const std::vector<int>& v) {
                    return g->LayerNorm(v[0], v[1], v[2], 0.5f);
                  }});
}

// Batch statistics when training, moving ones otherwise; with virtual batches of 2
// examples (groups 2, 2, 1), each group's own.
TEST(GradientCheck, BatchNorm) {
  for (int64_t virtual_batch : {0, 2}) {
    for (bool training : {true, false}) {
      SCOPED_TRACE(absl::StrCat("training ", training, ", virtual batch ", virtual_batch));
      GradCase c{{Shape{5, 2, 3}, Shape{3}, Shape{3}},
                 [virtual_batch](Graph* g, const std::vector<int>& v) {
                   return g->BatchNorm({v[0], v[1], v[2], g->FindInput("mm"), g->FindInput("mv")},
                                       0.9f, 1e-3f, "", virtual_batch);
                 },
                 {{"mm", Tensor::FromVector<double>({0.1, -0.2, 0.3}, Shape{3})},
                  {"mv", Tensor::FromVector<double>({0.5, 1.0, 2.0}, Shape{3})}}};
      c.options.training = training;
      CheckGradients(c);
    }
  }
}

// Synchronized batch norm in a sync group of one (the sum over replicas is the identity):
// its own forward and backward code, two sums forward and one backward per step.
TEST(GradientCheck, SynchronizedBatchNorm) {
  int sums = 0;
  GradCase c{{Shape{5, 2, 3}, Shape{3}, Shape{3}},
             [](Graph* g, const std::vector<int>& v) {
               return g->BatchNorm({v[0], v[1], v[2], g->FindInput("mm"), g->FindInput("mv")}, 0.9f,
                                   1e-3f, "", 0, /*synchronized=*/true);
             },
             {{"mm", Tensor::FromVector<double>({0.1, -0.2, 0.3}, Shape{3})},
              {"mv", Tensor::FromVector<double>({0.5, 1.0, 2.0}, Shape{3})}}};
  c.options.cross_replica_sum = [&sums](Tensor*) {
    ++sums;
    return absl::OkStatus();
  };
  CheckGradients(c);
  // One step with gradients, then two forward-and-backward steps per element of the 36.
  EXPECT_EQ(sums, 3 * (1 + 2 * 36));
}

TEST(GradientCheck, Embedding) {  // ids fed as floats, one repeated: its rows' dy add up
  CheckGradients({{Shape{5, 3}},
                  [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::EMBEDDING, {g->FindInput("ids"), v[0]});
                  },
                  {{"ids", Tensor::FromVector<double>({4, 0, 2, 4}, Shape{2, 2})}}});
  CheckGradients({{Shape{3, 2}},
                  [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::EMBEDDING, {g->FindInput("ids"), v[0]});
                  },
                  {{"ids", Tensor::FromVector<int64_t>({1, 1, 2}, Shape{3})}}});
}

TEST(GradientCheck, SelfAttention) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    CheckGradients({{Shape{2, 3, 4}, Shape{4, 12}, Shape{4, 4}},
                    [causal](Graph* g, const std::vector<int>& v) {
                      return g->SelfAttention(v[0], v[1], v[2], 2, causal);
                    }});
  }
}

TEST(GradientCheck, ResidualBlock) {  // x + dense(gelu(layer_norm(x)))
  CheckGradients({{Shape{3, 4}, Shape{4}, Shape{4}, Shape{4, 4}},
                  [](Graph* g, const std::vector<int>& v) -> absl::StatusOr<int> {
                    int h = *g->LayerNorm(v[0], v[1], v[2], 1e-3f);
                    h = *g->Op(v1::GELU, {h});
                    h = *g->Op(v1::MATMUL, {h, v[3]});
                    return g->Op(v1::ADD, {v[0], h});
                  }});
}

TEST(GradientCheck, DenseReluSoftmaxNetwork) {
  CheckGradients({{Shape{3, 4}, Shape{4, 6}, Shape{6}, Shape{6, 3}},
                  [](Graph* g, const std::vector<int>& v) -> absl::StatusOr<int> {
                    int h = *g->Op(v1::MATMUL, {v[0], v[1]});
                    h = *g->Op(v1::BIAS_ADD, {h, v[2]});
                    h = *g->Op(v1::RELU, {h});
                    h = *g->Op(v1::MATMUL, {h, v[3]});
                    return g->Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {h, g->FindInput("labels")});
                  },
                  {{"labels", Tensor::FromVector<int64_t>({2, 0, 1}, Shape{3})}}});
}

}  // namespace
}  // namespace lockstep::engine
