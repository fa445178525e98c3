// One gradient-check body for every device type (device_test_env.h): each op's gradient, computed
// by the device's executor, against central finite differences of the loss in f64 on "/cpu:0"
// (loss = sum(out * r) with a random r, so every output element matters differently).
// Instantiated for "/cpu:0" and the fake "/gpu:0" (gradient_check_test, CPU CI) and for a real
// GPU (gradient_check_cuda_test, requires-gpu).
//
// On "/cpu:0" the graph is f64 and the analytic gradient must be within 1e-6 (relative, with a
// floor of 1) of the finite differences. CUDA kernels compute in f32 (gpu_op_kernel.h), so on a
// GPU the graph is f32: its variables' values are rounded to f32 and the differences taken in
// f64 at those rounded values; the device's f32 gradient must be within kF32GradientTolerance of
// them, and also equal the CPU's f32 gradient of the same graph: bit for bit where Env::kBitwise
// (the fake, which runs the CPU's arithmetic), within kRelTolerance on a real GPU. Cases whose
// GPU kernels sum rows in another order (SOFTMAX, GpuKernels::SoftmaxRows) say so with
// GradCase::bitwise = false and are compared within kRelTolerance.
//
// An Env type provides `static constexpr bool kBitwise` and `Make()` (device_test_env.h).
#ifndef LOCKSTEP_ENGINE_GRADIENT_CHECK_TEST_BODY_H_
#define LOCKSTEP_ENGINE_GRADIENT_CHECK_TEST_BODY_H_

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/device_generic_test_body.h"
#include "engine/executor.h"
#include "engine/philox.h"
#include "gtest/gtest.h"

namespace lockstep::engine {

// The analytic gradient's tolerance against f64 finite differences, by the dtype it is computed
// in (relative to the difference, with a floor of 1). Every f32 case on the fake is within 2e-6
// (measured by tightening this); 1e-5 leaves a real GPU's expf and sum order room.
inline constexpr double kF64GradientTolerance = 1e-6;
inline constexpr double kF32GradientTolerance = 1e-5;

inline Tensor GradCheckRandom(Shape shape, uint64_t stream, double scale = 1.0) {
  Tensor t(DType::kF64, shape);
  Philox rng(MixKey(1234, stream));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data<double>()[i] = (2 * rng.Uniform(i) - 1) * scale;
  }
  return t;
}

// `t` in `dtype` when it is a float tensor (f64 or f32); other tensors (labels, ids) as they are.
inline Tensor AsFloatType(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype || (t.dtype() != DType::kF64 && t.dtype() != DType::kF32)) return t;
  Tensor out(dtype, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kF32) {
      out.data<float>()[i] = static_cast<float>(t.AsDouble(i));
    } else {
      out.data<double>()[i] = t.AsDouble(i);
    }
  }
  return out;
}

// A graph under test: `build` adds the op(s) on variables it creates (shapes in
// `var_shapes`) and returns the node whose output is checked.
struct GradCase {
  std::vector<Shape> var_shapes;
  std::function<absl::StatusOr<int>(Graph*, const std::vector<int>&)> build;
  Feeds extra_feeds;
  StepOptions options;
  // False where the fake GPU's kernels sum in another order than the CPU's (see above).
  bool bitwise = true;
};

// The case's graph in `dtype` (variables, the extra feeds' inputs, loss = sum(out * r)) into
// `g`; its feeds, float ones in `dtype`, into `feeds`.
inline void BuildGradCase(const GradCase& c, DType dtype, Graph* g, Feeds* feeds) {
  std::vector<int> vars;
  for (size_t i = 0; i < c.var_shapes.size(); ++i) {
    vars.push_back(
        *g->Variable("v" + std::to_string(i), dtype, c.var_shapes[i], v1::Initializer(), 1, 1));
  }
  for (const auto& [name, t] : c.extra_feeds) {
    feeds->push_back({name, AsFloatType(t, dtype)});
    ASSERT_TRUE(g->Input(name, feeds->back().second.dtype(), t.shape()).ok());
  }
  absl::StatusOr<int> out = c.build(g, vars);
  ASSERT_TRUE(out.ok()) << out.status();
  Shape out_shape = g->shape(*out);
  ASSERT_TRUE(out_shape.fully_known()) << out_shape.ToString();
  int r = *g->Input("r", dtype, out_shape);
  int prod = *g->Op(v1::MUL, {*out, r});
  int loss = *g->Sum(prod, {}, false);
  ASSERT_TRUE(g->SetLoss(loss).ok());
  feeds->push_back({"r", AsFloatType(GradCheckRandom(out_shape, 99), dtype)});
}

// The gradients of `g`'s loss by an executor on `e` at `values` (host tensors), as host tensors;
// every variable's gradient-ready hook must fire.
inline std::vector<Tensor> DeviceGradients(DeviceEnv& e, const Graph& g,
                                           const std::vector<Tensor>& values, const Feeds& feeds,
                                           const StepOptions& step) {
  ExecutorOptions options;
  options.device = e.device();
  options.gpu = e.gpu();
  absl::StatusOr<std::unique_ptr<Executor>> exec = Executor::Create(&g, options);
  EXPECT_TRUE(exec.ok()) << exec.status();
  if (!exec.ok()) return {};
  absl::StatusOr<std::vector<Tensor>> vars = e.ToDevice(values);
  EXPECT_TRUE(vars.ok()) << vars.status();
  if (!vars.ok()) return {};
  std::vector<Tensor> grads;
  std::vector<int> ready;
  StepOptions o = step;
  o.on_gradient_ready = [&](int v) { ready.push_back(v); };
  absl::StatusOr<StepResult> result = (*exec)->ComputeGradients(*vars, feeds, o, &grads);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  EXPECT_EQ(ready.size(), values.size());
  absl::StatusOr<std::vector<Tensor>> host = e.ToHost(grads);
  EXPECT_TRUE(host.ok()) << host.status();
  return host.ok() ? *host : std::vector<Tensor>();
}

// The case on `e` (see the file comment); `bitwise`: the device must give the CPU's f32 bits.
inline void CheckGradientsOn(DeviceEnv& e, bool bitwise, const GradCase& c) {
  const DType dtype = e.gpu() != nullptr ? DType::kF32 : DType::kF64;
  Graph g(7), g64(7);
  Feeds feeds, feeds64;
  ASSERT_NO_FATAL_FAILURE(BuildGradCase(c, dtype, &g, &feeds));
  ASSERT_NO_FATAL_FAILURE(BuildGradCase(c, DType::kF64, &g64, &feeds64));
  // The point, in the device's dtype, and the same values in f64.
  std::vector<Tensor> values, values64;
  for (size_t i = 0; i < c.var_shapes.size(); ++i) {
    values.push_back(AsFloatType(GradCheckRandom(c.var_shapes[i], i), dtype));
    values64.push_back(AsFloatType(values.back(), DType::kF64));
  }
  const std::vector<Tensor> grads = DeviceGradients(e, g, values, feeds, c.options);
  ASSERT_EQ(grads.size(), values.size());
  if (dtype != DType::kF64) {  // the CPU's gradient of the same graph
    CpuDeviceEnv cpu;
    const std::vector<Tensor> want = DeviceGradients(cpu, g, values, feeds, c.options);
    ASSERT_EQ(want.size(), grads.size());
    for (size_t v = 0; v < want.size(); ++v) {
      EXPECT_TRUE(Close(grads[v], want[v], bitwise && c.bitwise))
          << "variable " << v << ": " << e.device().name() << " against /cpu:0 in f32";
    }
  }

  absl::StatusOr<std::unique_ptr<Executor>> exec64 = Executor::Create(&g64);
  ASSERT_TRUE(exec64.ok()) << exec64.status();
  const double tolerance = dtype == DType::kF64 ? kF64GradientTolerance : kF32GradientTolerance;
  const double eps = 1e-6;
  for (size_t v = 0; v < values64.size(); ++v) {
    for (int64_t i = 0; i < values64[v].num_elements(); ++i) {
      auto loss_at = [&](double delta) {
        std::vector<Tensor> shifted = values64;
        shifted[v] = values64[v].Clone();
        shifted[v].data<double>()[i] += delta;
        std::vector<Tensor> unused;
        StepOptions o = c.options;
        return (*exec64)->ComputeGradients(shifted, feeds64, o, &unused)->loss;
      };
      const double numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
      const double analytic = grads[v].AsDouble(i);
      EXPECT_NEAR(analytic, numeric, tolerance * std::max(1.0, std::fabs(numeric)))
          << "variable " << v << " element " << i << " on " << e.device().name();
    }
  }
}

template <class Env>
class GradientCheck : public DeviceTest<Env> {
 protected:
  using DeviceTest<Env>::env;
  void Check(const GradCase& c) { CheckGradientsOn(*this->env_, Env::kBitwise, c); }
};

TYPED_TEST_SUITE_P(GradientCheck);

TYPED_TEST_P(GradientCheck, MatMul) {
  this->Check({{Shape{3, 4}, Shape{4, 5}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Op(v1::MATMUL, {v[0], v[1]});
               }});
}

TYPED_TEST_P(GradientCheck, AddSubMul) {
  for (v1::OpType op : {v1::ADD, v1::SUB, v1::MUL}) {
    SCOPED_TRACE(v1::OpType_Name(op));
    this->Check({{Shape{2, 3}, Shape{2, 3}}, [op](Graph* g, const std::vector<int>& v) {
                   return g->Op(op, {v[0], v[1]});
                 }});
  }
}

TYPED_TEST_P(GradientCheck, SameInputTwice) {  // gradients from two consumers accumulate
  this->Check({{Shape{2, 3}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Op(v1::MUL, {v[0], v[0]});
               }});
}

TYPED_TEST_P(GradientCheck, BiasAdd) {
  this->Check({{Shape{2, 3, 4}, Shape{4}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Op(v1::BIAS_ADD, {v[0], v[1]});
               }});
  // A bias over the last two axes (a position embedding [t, d] on [b, t, d]).
  this->Check({{Shape{2, 3, 4}, Shape{3, 4}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Op(v1::BIAS_ADD, {v[0], v[1]});
               }});
}

TYPED_TEST_P(GradientCheck, Activations) {
  for (v1::OpType op : {v1::RELU, v1::SIGMOID, v1::TANH, v1::SOFTMAX, v1::GELU}) {
    SCOPED_TRACE(v1::OpType_Name(op));
    GradCase c{{Shape{3, 5}},
               [op](Graph* g, const std::vector<int>& v) { return g->Op(op, {v[0]}); }};
    c.bitwise = op != v1::SOFTMAX;  // its rows are summed in a block's order on a GPU
    this->Check(c);
  }
}

TYPED_TEST_P(GradientCheck, SparseSoftmaxCrossEntropy) {
  this->Check({{Shape{4, 5}},
               [](Graph* g, const std::vector<int>& v) {
                 return g->Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {v[0], g->FindInput("labels")});
               },
               {{"labels", Tensor::FromVector<int64_t>({0, 4, 2, 2}, Shape{4})}}});
}

// Label smoothing: targets (1 - eps) * one_hot + eps / classes.
TYPED_TEST_P(GradientCheck, SparseSoftmaxCrossEntropyWithLabelSmoothing) {
  this->Check({{Shape{4, 5}},
               [](Graph* g, const std::vector<int>& v) {
                 return g->SparseSoftmaxCrossEntropy(v[0], g->FindInput("labels"), 0.2f);
               },
               {{"labels", Tensor::FromVector<int64_t>({0, 4, 2, 2}, Shape{4})}}});
}

// A sequence's logits [b, t, c] with a label per position [b, t] (a language model).
TYPED_TEST_P(GradientCheck, SparseSoftmaxCrossEntropyPerPosition) {
  this->Check({{Shape{2, 3, 4}},
               [](Graph* g, const std::vector<int>& v) {
                 return g->Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {v[0], g->FindInput("labels")});
               },
               {{"labels", Tensor::FromVector<int64_t>({0, 3, 2, 2, 1, 3}, Shape{2, 3})}}});
}

TYPED_TEST_P(GradientCheck, SumAndMean) {
  this->Check({{Shape{2, 3, 4}},
               [](Graph* g, const std::vector<int>& v) { return g->Sum(v[0], {1}, false); }});
  this->Check({{Shape{2, 3, 4}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Mean(v[0], {0, -1}, true);
               }});
  this->Check({{Shape{2, 3}},
               [](Graph* g, const std::vector<int>& v) { return g->Mean(v[0], {}, false); }});
}

TYPED_TEST_P(GradientCheck, ReshapeAndFlatten) {
  this->Check({{Shape{2, 6}}, [](Graph* g, const std::vector<int>& v) -> absl::StatusOr<int> {
                 auto r = g->Reshape(v[0], {3, -1});
                 if (!r.ok()) return r;
                 return g->Op(v1::TANH, {*r});
               }});
  this->Check({{Shape{2, 2, 3}}, [](Graph* g, const std::vector<int>& v) -> absl::StatusOr<int> {
                 auto f = g->Op(v1::FLATTEN, {v[0]});
                 if (!f.ok()) return f;
                 return g->Op(v1::SIGMOID, {*f});
               }});
}

TYPED_TEST_P(GradientCheck, Conv2D) {
  struct Geometry {
    std::vector<int> strides;
    v1::Padding padding;
  };
  for (const Geometry& geo :
       {Geometry{{1, 1}, v1::SAME}, Geometry{{2, 2}, v1::VALID}, Geometry{{2, 1}, v1::SAME}}) {
    SCOPED_TRACE(geo.strides[0] * 10 + geo.padding);
    this->Check(
        {{Shape{2, 5, 5, 3}, Shape{3, 3, 3, 4}}, [geo](Graph* g, const std::vector<int>& v) {
           return g->Conv2D(v[0], v[1], geo.strides, geo.padding);
         }});
  }
}

TYPED_TEST_P(GradientCheck, MaxPool2D) {
  this->Check({{Shape{2, 4, 4, 3}}, [](Graph* g, const std::vector<int>& v) {
                 return g->MaxPool2D(v[0], {2, 2}, {2, 2}, v1::VALID);
               }});
  this->Check({{Shape{1, 5, 5, 2}}, [](Graph* g, const std::vector<int>& v) {
                 return g->MaxPool2D(v[0], {3, 3}, {2, 2}, v1::SAME);
               }});
}

TYPED_TEST_P(GradientCheck, DropoutInTraining) {
  GradCase c{{Shape{4, 6}},
             [](Graph* g, const std::vector<int>& v) { return g->Dropout(v[0], 0.5f); }};
  c.options.training = true;
  c.options.replica_id = 1;
  c.options.step = 3;
  this->Check(c);
}

TYPED_TEST_P(GradientCheck, Concat) {
  this->Check({{Shape{2, 3}, Shape{2, 1}, Shape{2, 4}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Concat({v[0], v[1], v[2]}, 1);
               }});
  this->Check({{Shape{2, 3, 2}, Shape{2, 1, 2}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Concat({v[0], v[1]}, -2);
               }});
  this->Check({{Shape{2, 3}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Concat({v[0], v[0]}, 0);  // one input twice
               }});
}

TYPED_TEST_P(GradientCheck, GlobalAveragePooling) {  // the layer is a MEAN over the inner axes
  this->Check({{Shape{2, 3, 3, 4}}, [](Graph* g, const std::vector<int>& v) {
                 return g->Mean(v[0], {1, 2}, false);
               }});
}

TYPED_TEST_P(GradientCheck, LayerNorm) {
  this->Check({{Shape{3, 5}, Shape{5}, Shape{5}}, [](Graph* g, const std::vector<int>& v) {
                 return g->LayerNorm(v[0], v[1], v[2], 1e-3f);
               }});
  this->Check({{Shape{2, 2, 4}, Shape{4}, Shape{4}}, [](Graph* g, const std::vector<int>& v) {
                 return g->LayerNorm(v[0], v[1], v[2], 0.5f);
               }});
}

// Batch statistics when training, moving ones otherwise; with virtual batches of 2
// examples (groups 2, 2, 1), each group's own.
TYPED_TEST_P(GradientCheck, BatchNorm) {
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
      this->Check(c);
    }
  }
}

TYPED_TEST_P(GradientCheck, Embedding) {  // ids fed as floats, one repeated: its rows' dy add up
  this->Check({{Shape{5, 3}},
               [](Graph* g, const std::vector<int>& v) {
                 return g->Op(v1::EMBEDDING, {g->FindInput("ids"), v[0]});
               },
               {{"ids", Tensor::FromVector<double>({4, 0, 2, 4}, Shape{2, 2})}}});
  this->Check({{Shape{3, 2}},
               [](Graph* g, const std::vector<int>& v) {
                 return g->Op(v1::EMBEDDING, {g->FindInput("ids"), v[0]});
               },
               {{"ids", Tensor::FromVector<int64_t>({1, 1, 2}, Shape{3})}}});
}

TYPED_TEST_P(GradientCheck, SelfAttention) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    this->Check({{Shape{2, 3, 4}, Shape{4, 12}, Shape{4, 4}},
                 [causal](Graph* g, const std::vector<int>& v) {
                   return g->SelfAttention(v[0], v[1], v[2], 2, causal);
                 }});
  }
}

TYPED_TEST_P(GradientCheck, ResidualBlock) {  // x + dense(gelu(layer_norm(x)))
  this->Check({{Shape{3, 4}, Shape{4}, Shape{4}, Shape{4, 4}},
               [](Graph* g, const std::vector<int>& v) -> absl::StatusOr<int> {
                 int h = *g->LayerNorm(v[0], v[1], v[2], 1e-3f);
                 h = *g->Op(v1::GELU, {h});
                 h = *g->Op(v1::MATMUL, {h, v[3]});
                 return g->Op(v1::ADD, {v[0], h});
               }});
}

TYPED_TEST_P(GradientCheck, DenseReluSoftmaxNetwork) {
  this->Check({{Shape{3, 4}, Shape{4, 6}, Shape{6}, Shape{6, 3}},
               [](Graph* g, const std::vector<int>& v) -> absl::StatusOr<int> {
                 int h = *g->Op(v1::MATMUL, {v[0], v[1]});
                 h = *g->Op(v1::BIAS_ADD, {h, v[2]});
                 h = *g->Op(v1::RELU, {h});
                 h = *g->Op(v1::MATMUL, {h, v[3]});
                 return g->Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {h, g->FindInput("labels")});
               },
               {{"labels", Tensor::FromVector<int64_t>({2, 0, 1}, Shape{3})}}});
}

REGISTER_TYPED_TEST_SUITE_P(GradientCheck, MatMul, AddSubMul, SameInputTwice, BiasAdd, Activations,
                            SparseSoftmaxCrossEntropy, SparseSoftmaxCrossEntropyWithLabelSmoothing,
                            SparseSoftmaxCrossEntropyPerPosition, SumAndMean, ReshapeAndFlatten,
                            Conv2D, MaxPool2D, DropoutInTraining, Concat, GlobalAveragePooling,
                            LayerNorm, BatchNorm, Embedding, SelfAttention, ResidualBlock,
                            DenseReluSoftmaxNetwork);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_GRADIENT_CHECK_TEST_BODY_H_
