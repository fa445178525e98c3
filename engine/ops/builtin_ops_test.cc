// Forward values of the builtin ops' CPU kernels on small hand-checked inputs (the
// gradients are checked against finite differences in gradient_check_test.cc).
#include "engine/ops/builtin_ops.h"

#include <cmath>
#include <functional>

#include "engine/executor.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

// Runs `build` on input "x" (and "y" when given) and returns the graph output.
Tensor RunOne(const Tensor& x, const std::function<int(Graph*, int)>& build) {
  Graph g;
  int in = *g.Input("x", x.dtype(), x.shape());
  g.set_output(build(&g, in));
  auto exec = *Executor::Create(&g);
  Tensor out;
  auto r = exec->Evaluate({}, {{"x", x}}, &out);
  EXPECT_TRUE(r.ok()) << r.status();
  return out;
}

TEST(BuiltinOps, SoftmaxArgmaxAndActivations) {
  Tensor x = Tensor::FromVector<float>({1, 3, 2, -1, -1, 0}, Shape{2, 3});
  Tensor s = RunOne(x, [](Graph* g, int in) { return *g->Op(v1::SOFTMAX, {in}); });
  EXPECT_NEAR(s.data<float>()[0] + s.data<float>()[1] + s.data<float>()[2], 1.0, 1e-6);
  EXPECT_NEAR(s.data<float>()[1] / s.data<float>()[2], std::exp(1.0), 1e-5);
  Tensor a = RunOne(x, [](Graph* g, int in) { return *g->Op(v1::ARGMAX, {in}); });
  EXPECT_EQ(a.ToVector<int64_t>(), (std::vector<int64_t>{1, 2}));
  Tensor r = RunOne(x, [](Graph* g, int in) { return *g->Op(v1::RELU, {in}); });
  EXPECT_EQ(r.ToVector<float>(), (std::vector<float>{1, 3, 2, 0, 0, 0}));
  Tensor m = RunOne(x, [](Graph* g, int in) { return *g->Mean(in, {0}, false); });
  EXPECT_EQ(m.ToVector<float>(), (std::vector<float>{0, 1, 1}));
}

// GELU's f32 gradient (its exp and erf are polynomial approximations) against the exact
// Phi(x) + x phi(x) in f64, over [-12, 12].
TEST(BuiltinOps, GeluGradientInF32MatchesTheExactOne) {
  std::vector<float> xs;
  for (int i = -1200; i <= 1200; ++i) xs.push_back(i / 100.f);
  const int64_t n = xs.size();
  Graph g;
  int v = *g.Variable("v", DType::kF32, Shape{n}, v1::Initializer(), 1, 1);
  ASSERT_TRUE(g.SetLoss(*g.Sum(*g.Op(v1::GELU, {v}), {}, false)).ok());
  auto exec = *Executor::Create(&g);
  std::vector<Tensor> grads;
  ASSERT_TRUE(
      exec->ComputeGradients({Tensor::FromVector<float>(xs, Shape{n})}, {}, {}, &grads).ok());
  for (int64_t i = 0; i < n; ++i) {
    const double x = xs[i];
    const double want =
        0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    EXPECT_NEAR(grads[0].data<float>()[i], want, 2e-6) << "x = " << x;
  }
}

TEST(BuiltinOps, ConcatGeluAndLayerNorm) {
  Graph g;
  int a = *g.Input("a", DType::kF32, Shape{2, 1});
  int b = *g.Input("b", DType::kF32, Shape{2, 2});
  g.set_output(*g.Concat({a, b}, 1));
  auto exec = *Executor::Create(&g);
  Tensor out;
  ASSERT_TRUE(exec->Evaluate({},
                             {{"a", Tensor::FromVector<float>({1, 2}, Shape{2, 1})},
                              {"b", Tensor::FromVector<float>({3, 4, 5, 6}, Shape{2, 2})}},
                             &out)
                  .ok());
  EXPECT_EQ(out.ToVector<float>(), (std::vector<float>{1, 3, 4, 2, 5, 6}));

  Tensor x = Tensor::FromVector<float>({-1, 0, 1, 3}, Shape{1, 4});
  Tensor gelu = RunOne(x, [](Graph* g, int in) { return *g->Op(v1::GELU, {in}); });
  EXPECT_NEAR(gelu.data<float>()[0], -0.15865525, 1e-6);
  EXPECT_EQ(gelu.data<float>()[1], 0.f);
  EXPECT_NEAR(gelu.data<float>()[2], 0.84134475, 1e-6);
  EXPECT_NEAR(gelu.data<float>()[3], 2.99595031, 1e-6);

  Graph ln;
  int in = *ln.Input("x", DType::kF32, Shape{1, 4});
  int gamma = *ln.Input("gamma", DType::kF32, Shape{4});
  int beta = *ln.Input("beta", DType::kF32, Shape{4});
  ln.set_output(*ln.LayerNorm(in, gamma, beta, 1e-5f));
  auto ln_exec = *Executor::Create(&ln);
  ASSERT_TRUE(ln_exec
                  ->Evaluate({},
                             {{"x", x},
                              {"gamma", Tensor::FromVector<float>({1, 1, 2, 1}, Shape{4})},
                              {"beta", Tensor::FromVector<float>({0, 0, 0, 1}, Shape{4})}},
                             &out)
                  .ok());
  // mean 0.75, variance 2.1875.
  const double sd = std::sqrt(2.1875 + 1e-5);
  EXPECT_NEAR(out.data<float>()[0], -1.75 / sd, 1e-5);
  EXPECT_NEAR(out.data<float>()[2], 2 * 0.25 / sd, 1e-5);
  EXPECT_NEAR(out.data<float>()[3], 2.25 / sd + 1, 1e-5);
}

TEST(BuiltinOps, ConvAndPoolOnAKnownImage) {
  // A 1x3x3x1 image 1..9; an all-ones 2x2 filter sums each window.
  Tensor img = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, Shape{1, 3, 3, 1});
  Graph g;
  int in = *g.Input("x", DType::kF32, Shape{1, 3, 3, 1});
  int f = *g.Input("f", DType::kF32, Shape{2, 2, 1, 1});
  g.set_output(*g.Conv2D(in, f, {1, 1}, v1::SAME));
  auto exec = *Executor::Create(&g);
  Tensor out;
  ASSERT_TRUE(
      exec->Evaluate(
              {}, {{"x", img}, {"f", Tensor::FromVector<float>({1, 1, 1, 1}, Shape{2, 2, 1, 1})}},
              &out)
          .ok());
  // SAME with an even window pads after: window (0,0) covers 1,2,4,5.
  EXPECT_EQ(out.ToVector<float>(), (std::vector<float>{12, 16, 9, 24, 28, 15, 15, 17, 9}));
  Tensor pool = RunOne(img, [](Graph* g, int in) {
    return *g->MaxPool2D(in, {2, 2}, {2, 2}, v1::SAME);
  });
  EXPECT_EQ(pool.shape(), (Shape{1, 2, 2, 1}));
  EXPECT_EQ(pool.ToVector<float>(), (std::vector<float>{5, 6, 8, 9}));
}

TEST(BuiltinOps, AccuracyAndLosses) {
  Graph g;
  int logits = *g.Input("x", DType::kF32, Shape{3, 2});
  int labels = *g.Input("labels", DType::kI64, Shape{3});
  int acc = *g.Op(v1::ACCURACY, {logits, labels});
  int loss = *g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {logits, labels});
  ASSERT_TRUE(g.SetLoss(loss).ok());
  g.set_accuracy(acc);
  g.set_output(logits);
  auto exec = *Executor::Create(&g);
  auto r = exec->Evaluate({}, {{"x", Tensor::FromVector<float>({0, 0, 2, 1, 0, 5}, Shape{3, 2})},
                               {"labels", Tensor::FromVector<int64_t>({1, 0, 0}, Shape{3})}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->accuracy, 1.0 / 3, 1e-6);  // row 0 is a tie: the first maximum (class 0) wins
  const double expected =
      (std::log(2.0) + std::log(1 + std::exp(-1.0)) + std::log(1 + std::exp(5.0))) / 3;
  EXPECT_NEAR(r->loss, expected, 1e-5);
}

TEST(BuiltinOps, BuiltinRegistrationOfADuplicateAborts) {
  EXPECT_DEATH(
      {
        OpRegistry r;
        RegisterMatMul(&r);
        RegisterMatMul(&r);
      },
      "engine op registry: op MATMUL is registered twice");
}

}  // namespace
}  // namespace lockstep::engine
