#include "engine/model_builder.h"

#include <cmath>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/variable_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::testing::HasSubstr;

constexpr char kCnn[] = R"({
  "inputShape": [8, 8, 1], "seed": 3, "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
  "layers": [
    {"conv2d": {"filters": 4, "kernelSize": [3], "padding": "SAME"}},
    {"relu": {}},
    {"maxpool2d": {}},
    {"flatten": {}},
    {"dropout": {"rate": 0.1}},
    {"name": "logits", "dense": {"units": 10, "kernel_initializer": {"kind": "HE_NORMAL"}}}
  ]})";

std::string BuildError(const std::string& json) {
  absl::StatusOr<v1::ModelSpec> spec = ParseModelSpecJson(json);
  if (!spec.ok()) return std::string(spec.status().message());
  absl::StatusOr<Graph> g = BuildModel(*spec);
  return g.ok() ? "OK" : std::string(g.status().message());
}

TEST(ModelBuilder, BuildsACnnFromJson) {
  auto spec = ParseModelSpecJson(kCnn);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto g = BuildModel(*spec);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> names;
  for (const VariableInfo& v : g->Variables()) names.push_back(v.name);
  EXPECT_THAT(names, ::testing::ElementsAre("conv2d_0/kernel", "conv2d_0/bias", "logits/kernel",
                                            "logits/bias"));
  EXPECT_EQ(g->shape(g->output()), (Shape{-1, 10}));
  EXPECT_EQ(g->Variables()[2].shape, (Shape{64, 10}));
  // It runs, and the graph survives the trip through its proto.
  auto shipped = Graph::FromProto(g->proto());
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  auto vars = *VariableSet::Initialize(*shipped);
  auto exec = *Executor::Create(&*shipped);
  Feeds feeds = {{"features", Tensor::Zeros(DType::kF32, Shape{5, 8, 8, 1})},
                 {"labels", Tensor::FromVector<int64_t>({1, 2, 3, 4, 5}, Shape{5})}};
  std::vector<Tensor> grads;
  auto r = exec->ComputeGradients(vars.tensors(), feeds, {}, &grads);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(grads.size(), 4u);
}

TEST(ModelBuilder, MseRegression) {
  auto g = BuildModel(*ParseModelSpecJson(
      R"({"input_shape": [3], "loss": "MSE", "layers": [{"dense": {"units": 2}}, {"tanh": {}}]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->shape(g->FindInput("labels")), (Shape{-1, 2}));
  EXPECT_EQ(g->accuracy(), -1);
}

TEST(ModelBuilder, RefusesBadSpecsNamingLayerAndField) {
  const std::string head =
      R"({"inputShape": [8, 8, 1], "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "layers": [)";
  EXPECT_THAT(BuildError(head + R"({"lstm": {"units": 3}}]})"),
              HasSubstr("layers[0]: unknown layer kind \"lstm\""));
  EXPECT_THAT(BuildError(head + R"({"flatten": {}}, {"dense": {"units": -5}}]})"),
              HasSubstr("layers[1].dense.units: -5 must be > 0"));
  EXPECT_THAT(BuildError(head + R"({"conv2d": {"filters": 2, "kernelSize": [9]}}]})"),
              HasSubstr("layers[0].conv2d"));
  EXPECT_THAT(BuildError(head + R"({"conv2d": {"filters": 2}}]})"),
              HasSubstr("layers[0].conv2d.kernel_size: is required"));
  EXPECT_THAT(BuildError(head + R"({"flatten": {}}, {"dropout": {"rate": 1.5}}]})"),
              HasSubstr("layers[1].dropout.rate"));
  EXPECT_THAT(BuildError(head + R"({"reshape": {"shape": [5, -1]}}]})"),
              HasSubstr("layers[0].reshape.shape: cannot reshape [?,8,8,1]"));
  EXPECT_THAT(BuildError(head + R"({"name": "a", "flatten": {}}, {"name": "a", "relu": {}}]})"),
              HasSubstr("layers[1].name: \"a\" is used twice"));
  EXPECT_THAT(BuildError(head + R"({"flatten": {}}, {"dense": {"units": 10}}, {"softmax": {}}]})"),
              HasSubstr("remove the final softmax"));
  EXPECT_THAT(BuildError(head + R"({}]})"), HasSubstr("layers[0]: no layer kind set"));
  EXPECT_THAT(BuildError(R"({"inputShape": [4, -2], "loss": "MSE", "layers": [{"relu": {}}]})"),
              HasSubstr("input_shape[1]: -2 must be > 0"));
  EXPECT_THAT(BuildError(R"({"inputShape": [4], "layers": [{"relu": {}}]})"), HasSubstr("loss"));
  EXPECT_THAT(BuildError(R"({"inputShape": [4], "bogus": 1})"), HasSubstr("bogus"));
  EXPECT_EQ(BuildError(head + R"({"reshape": {"shape": [-1]}}, {"dense": {"units": 10}}]})"), "OK");
}

// Sizes no worker could hold are refused by name, and computing them never overflows.
TEST(ModelBuilder, RefusesTensorsOfMoreThan2To32Elements) {
  const std::string loss = R"("loss": "SPARSE_CATEGORICAL_CROSSENTROPY", )";
  EXPECT_THAT(BuildError(R"({"inputShape": [9223372036854775807, 2], )" + loss +
                         R"("layers": [{"flatten": {}}]})"),
              HasSubstr("input_shape: one example [?,9223372036854775807,2] has more than 2^32"));
  EXPECT_THAT(BuildError(R"({"inputShape": [64], )" + loss +
                         R"("layers": [{"dense": {"units": 4611686018427387904}}]})"),
              HasSubstr("layers[0].dense.units: the kernel [64,4611686018427387904] has more"));
  EXPECT_THAT(BuildError(R"({"inputShape": [3, 3, 16777216], )" + loss +
                         R"("layers": [{"conv2d": {"filters": 4096, "kernelSize": [3]}}]})"),
              HasSubstr("layers[0].conv2d: the kernel [3,3,16777216,4096] has more"));
  EXPECT_THAT(BuildError(R"({"inputShape": [65536, 65536, 1], )" + loss +
                         R"("layers": [{"conv2d": {"filters": 2, "kernelSize": [1]}}]})"),
              HasSubstr("layers[0]: its output [?,65536,65536,2] has more than 2^32"));
  EXPECT_THAT(BuildError(R"({"inputShape": [64], )" + loss +
                         R"("layers": [{"reshape": {"shape": [4294967296, 4294967296]}}]})"),
              HasSubstr("layers[0].reshape.shape: the shape [?,4294967296,4294967296] has more"));
  EXPECT_EQ(BuildError(R"({"inputShape": [65536, 65536], )" + loss +
                       R"("layers": [{"flatten": {}}, {"dense": {"units": 1}}]})"),
            "OK");
}

// Layers that name their inputs make a graph: a residual block, a concatenation and two
// model inputs.
TEST(ModelBuilder, BuildsAGraphFromNamedInputs) {
  auto spec = ParseModelSpecJson(R"({
    "inputs": [{"name": "a", "shape": [4]}, {"name": "b", "shape": [2]}],
    "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "seed": 5,
    "layers": [
      {"name": "h", "dense": {"units": 4}, "inputs": ["a"]},
      {"name": "norm", "layer_norm": {}},
      {"gelu": {}},
      {"name": "res", "add": {}, "inputs": ["a", "gelu_2", "h"]},
      {"name": "cat", "concat": {}, "inputs": ["res", "b"]},
      {"dense": {"units": 3}}
    ]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto g = BuildModel(*spec);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->shape(g->FindInput("b")), (Shape{-1, 2}));
  EXPECT_EQ(g->shape(g->output()), (Shape{-1, 3}));
  std::vector<std::string> names;
  for (const VariableInfo& v : g->Variables()) names.push_back(v.name);
  EXPECT_THAT(names, ::testing::ElementsAre("h/kernel", "h/bias", "norm/gamma", "norm/beta",
                                            "dense_5/kernel", "dense_5/bias"));
  auto vars = *VariableSet::Initialize(*g);
  auto exec = *Executor::Create(&*g);
  Feeds feeds = {{"a", Tensor::FromVector<float>({1, 2, 3, 4, 0, 1, 0, 1}, Shape{2, 4})},
                 {"b", Tensor::FromVector<float>({1, 0, 0, 1}, Shape{2, 2})},
                 {"labels", Tensor::FromVector<int64_t>({0, 2}, Shape{2})}};
  std::vector<Tensor> grads;
  auto r = exec->ComputeGradients(vars.tensors(), feeds, {}, &grads);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(grads.size(), 6u);
  // The plain list still means a chain: an explicit chain builds the same graph.
  auto chain = BuildModel(*ParseModelSpecJson(
      R"({"inputShape": [3], "loss": "MSE", "layers": [{"dense": {"units": 2}}, {"tanh": {}}]})"));
  auto named = BuildModel(*ParseModelSpecJson(
      R"({"inputShape": [3], "loss": "MSE", "layers": [{"dense": {"units": 2},
          "inputs": ["features"]}, {"tanh": {}, "inputs": ["dense_0"]}]})"));
  ASSERT_TRUE(chain.ok() && named.ok());
  EXPECT_EQ(chain->proto().SerializeAsString(), named->proto().SerializeAsString());
}

TEST(ModelBuilder, NewLayersBuild) {
  auto g = BuildModel(*ParseModelSpecJson(
      R"({"inputShape": [6, 6, 2], "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "layers": [
          {"conv2d": {"filters": 3, "kernelSize": [3], "padding": "SAME"}},
          {"gelu": {}}, {"global_average_pooling": {}}, {"layer_norm": {"epsilon": 0.01}},
          {"dense": {"units": 2}}]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->shape(g->output()), (Shape{-1, 2}));
}

// label_smoothing (Keras'): the loss is the cross-entropy against (1 - eps) * one_hot +
// eps / classes; it is refused outside [0, 1] and with MSE.
TEST(ModelBuilder, LabelSmoothingSmoothsTheTargets) {
  auto g = BuildModel(*ParseModelSpecJson(
      R"({"inputShape": [2], "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "f64": true,
          "labelSmoothing": 0.1, "seed": 3, "layers": [{"dense": {"units": 3}}]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  auto vars = *VariableSet::Initialize(*g);
  auto exec = *Executor::Create(&*g);
  Feeds feeds = {{"features", Tensor::FromVector<double>({1, -2}, Shape{1, 2})},
                 {"labels", Tensor::FromVector<int64_t>({2}, Shape{1})}};
  Tensor logits;
  auto r = exec->Evaluate(vars.tensors(), feeds, &logits);
  ASSERT_TRUE(r.ok()) << r.status();
  const double* z = logits.data<double>();
  const double lse = std::log(std::exp(z[0]) + std::exp(z[1]) + std::exp(z[2]));
  double want = 0;
  for (int j = 0; j < 3; ++j) want -= ((j == 2 ? 0.9 : 0) + 0.1 / 3) * (z[j] - lse);
  EXPECT_NEAR(r->loss, want, 1e-8);  // label_smoothing is a float: 0.1f
  EXPECT_THAT(BuildError(R"({"inputShape": [2], "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
                             "labelSmoothing": 1.5, "layers": [{"dense": {"units": 3}}]})"),
              HasSubstr("label_smoothing: 1.5 is not in [0, 1]"));
  EXPECT_THAT(BuildError(R"({"inputShape": [2], "loss": "MSE", "labelSmoothing": 0.1,
                             "layers": [{"dense": {"units": 3}}]})"),
              HasSubstr("label_smoothing: only for loss SPARSE_CATEGORICAL_CROSSENTROPY"));
}

// Dense works on the last axis (Keras): logits [batch, t, classes] take a label per
// position, [batch, t] (a language model's next tokens); the loss is their mean.
TEST(ModelBuilder, SequenceLogitsTakeALabelPerPosition) {
  auto g = BuildModel(*ParseModelSpecJson(
      R"({"inputShape": [3], "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "seed": 2, "layers": [
          {"embedding": {"inputDim": 4, "outputDim": 2}}, {"dense": {"units": 4}}]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->shape(g->FindInput("labels")), (Shape{-1, 3}));
  auto vars = *VariableSet::Initialize(*g);
  auto exec = *Executor::Create(&*g);
  Feeds feeds = {{"features", Tensor::FromVector<float>({0, 1, 2, 3, 3, 1}, Shape{2, 3})},
                 {"labels", Tensor::FromVector<int64_t>({1, 2, 3, 3, 1, 0}, Shape{2, 3})}};
  std::vector<Tensor> grads;
  auto r = exec->ComputeGradients(vars.tensors(), feeds, {}, &grads);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->loss, 0);
  feeds[1].second = Tensor::FromVector<int64_t>({1, 2, 3, 3, 1, 4}, Shape{2, 3});
  EXPECT_THAT(exec->ComputeGradients(vars.tensors(), feeds, {}, &grads).status().message(),
              HasSubstr("label 4 at flattened position 5 is outside [0, 4)"));
}

// position_embedding adds a learned [time, features] table to every example.
TEST(ModelBuilder, PositionEmbeddingAddsATablePerPosition) {
  auto g = BuildModel(*ParseModelSpecJson(
      R"({"inputShape": [3], "loss": "MSE", "seed": 2, "layers": [
          {"embedding": {"inputDim": 4, "outputDim": 2}},
          {"name": "pos", "positionEmbedding": {}}]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->Variables()[1].name, "pos/embeddings");
  EXPECT_EQ(g->Variables()[1].shape, (Shape{3, 2}));
  auto vars = *VariableSet::Initialize(*g);
  auto exec = *Executor::Create(&*g);
  Tensor out;
  ASSERT_TRUE(
      exec->Evaluate(vars.tensors(),
                     {{"features", Tensor::FromVector<float>({0, 0, 0, 0, 0, 0}, Shape{2, 3})}},
                     &out)
          .ok());
  const float* y = out.data<float>();
  const float* table = vars.tensors()[0].data<float>();
  const float* pos = vars.tensors()[1].data<float>();
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 3; ++t) {
      for (int d = 0; d < 2; ++d) EXPECT_EQ(y[(b * 3 + t) * 2 + d], table[d] + pos[t * 2 + d]);
    }
  }
  EXPECT_THAT(
      BuildError(R"({"inputShape": [3], "loss": "MSE", "layers": [
                             {"positionEmbedding": {}}]})"),
      HasSubstr("layers[0].position_embedding: input [?,3] is not [batch, time, features]"));
}

// A small causal Transformer block over token ids: embedding, layer norm, self-attention
// and a feed-forward block (dense over the last axis), each with a residual connection,
// pooling and a classifier. One training step runs; an id
// outside the vocabulary is refused naming the layer.
TEST(ModelBuilder, BuildsAndRunsATransformerBlock) {
  auto spec = ParseModelSpecJson(R"({
    "inputShape": [5], "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "seed": 9,
    "layers": [
      {"name": "tok", "embedding": {"inputDim": 10, "outputDim": 8}},
      {"name": "ln", "layerNorm": {}},
      {"name": "att", "self_attention": {"numHeads": 2, "causal": true}},
      {"name": "res", "add": {}, "inputs": ["tok", "att"]},
      {"name": "ff", "dense": {"units": 16}},
      {"gelu": {}},
      {"name": "ff2", "dense": {"units": 8}},
      {"name": "res2", "add": {}, "inputs": ["res", "ff2"]},
      {"global_average_pooling": {}},
      {"dense": {"units": 3}}
    ]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto g = BuildModel(*spec);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> names;
  for (const VariableInfo& v : g->Variables()) names.push_back(v.name);
  EXPECT_THAT(names, ::testing::ElementsAre("tok/embeddings", "ln/gamma", "ln/beta", "att/qkv",
                                            "att/output", "ff/kernel", "ff/bias", "ff2/kernel",
                                            "ff2/bias", "dense_9/kernel", "dense_9/bias"));
  EXPECT_EQ(g->Variables()[5].shape, (Shape{8, 16}));  // dense over the last axis
  auto vars = *VariableSet::Initialize(*g);
  auto exec = *Executor::Create(&*g);
  Feeds feeds = {
      {"features", Tensor::FromVector<float>({1, 2, 3, 4, 5, 9, 9, 0, 0, 1}, Shape{2, 5})},
      {"labels", Tensor::FromVector<int64_t>({0, 2}, Shape{2})}};
  std::vector<Tensor> grads;
  auto r = exec->ComputeGradients(vars.tensors(), feeds, {}, &grads);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(grads.size(), 11u);
  feeds[0].second.data<float>()[3] = 10;
  r = exec->ComputeGradients(vars.tensors(), feeds, {}, &grads);
  EXPECT_THAT(r.status().message(),
              HasSubstr("tok: id 10 at position 3 is not an integer in [0, 10)"));
  EXPECT_THAT(
      BuildError(R"({"inputShape": [5, 6], "loss": "MSE",
                             "layers": [{"self_attention": {"numHeads": 4}}]})"),
      HasSubstr("layers[0].self_attention.num_heads: 4 does not divide the feature size 6"));
  EXPECT_THAT(BuildError(R"({"inputShape": [6], "loss": "MSE",
                             "layers": [{"self_attention": {"numHeads": 1}}]})"),
              HasSubstr("layers[0].self_attention: input [?,6] is not [batch, time, features]"));
  EXPECT_THAT(BuildError(R"({"inputShape": [6], "loss": "MSE",
                             "layers": [{"embedding": {"inputDim": 0, "outputDim": 2}}]})"),
              HasSubstr("layers[0].embedding.input_dim: 0 must be > 0"));
}

// Batch norm's moving statistics are non-trainable variables: a training step hands out
// their update, scaled like the gradients; the optimizer adds it; they are saved with the
// other variables; evaluation normalises with them.
TEST(ModelBuilder, BatchNormMovesItsStatisticsAndEvaluatesWithThem) {
  auto g = BuildModel(*ParseModelSpecJson(
      R"({"inputShape": [2], "loss": "MSE", "f64": true, "layers": [
          {"name": "bn", "batchNorm": {"momentum": 0.75}}]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> names;
  std::vector<bool> trainable;
  for (const VariableInfo& v : g->Variables()) {
    names.push_back(v.name);
    trainable.push_back(v.trainable);
  }
  EXPECT_THAT(
      names, ::testing::ElementsAre("bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance"));
  EXPECT_EQ(trainable, (std::vector<bool>{true, true, false, false}));
  auto vars = *VariableSet::Initialize(*g);
  auto exec = *Executor::Create(&*g);
  v1::OptimizerSpec sgd;
  sgd.mutable_sgd();
  sgd.mutable_learning_rate()->mutable_constant()->set_value(0);
  auto opt = *Optimizer::Create(sgd, g->Variables());
  // Channel 0: 1, 3 (mean 2, variance 1); channel 1: 4, 4 (mean 4, variance 0).
  Tensor x = Tensor::FromVector<double>({1, 4, 3, 4}, Shape{2, 2});
  Feeds feeds = {{"features", x}, {"labels", Tensor::Zeros(DType::kF64, Shape{2, 2})}};
  std::vector<Tensor> grads;
  std::vector<int> ready;
  StepOptions step;
  step.loss_scale = 0.5;  // one of two replicas' halves
  step.on_gradient_ready = [&](int v) { ready.push_back(v); };
  ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), feeds, step, &grads).ok());
  EXPECT_EQ(ready.back(), 3);
  EXPECT_EQ(ready.size(), 4u);
  // (1 - momentum) * (batch - moving) * loss_scale
  EXPECT_EQ(grads[2].ToVector<double>(), (std::vector<double>{0.25 * 2 * 0.5, 0.25 * 4 * 0.5}));
  EXPECT_EQ(grads[3].ToVector<double>(), (std::vector<double>{0, 0.25 * -1 * 0.5}));
  ASSERT_TRUE(opt->Apply(grads, &vars.tensors()).ok());
  EXPECT_EQ(vars.tensors()[vars.Find("bn/moving_mean")].ToVector<double>(),
            (std::vector<double>{0.25, 0.5}));
  EXPECT_EQ(vars.tensors()[vars.Find("bn/moving_variance")].ToVector<double>(),
            (std::vector<double>{1, 0.875}));
  bool saved = false;
  for (const v1::NamedTensor& t : vars.ToProtos()) saved |= t.name() == "bn/moving_variance";
  EXPECT_TRUE(saved);
  Tensor out;
  ASSERT_TRUE(exec->Evaluate(vars.tensors(), {{"features", x}}, &out).ok());
  EXPECT_NEAR(out.data<double>()[0], (1 - 0.25) / std::sqrt(1 + 1e-3), 1e-6);
  EXPECT_NEAR(out.data<double>()[1], (4 - 0.5) / std::sqrt(0.875 + 1e-3), 1e-6);
  EXPECT_THAT(BuildError(R"({"inputShape": [2], "loss": "MSE",
                             "layers": [{"batch_norm": {"momentum": 1.5}}]})"),
              HasSubstr("layers[0].batch_norm.momentum: 1.5 is not in (0, 1)"));
}

// Virtual batches (ghost batch norm): one step on 4 examples with virtual batches of 2 gives
// the gradients and moving-statistics updates of two replicas' halves (loss_scale 0.5 each,
// summed as the all-reduce does), so a job's weights do not depend on its number of workers.
TEST(ModelBuilder, BatchNormVirtualBatchesEqualPerReplicaHalves) {
  auto g = BuildModel(*ParseModelSpecJson(
      R"({"inputShape": [3], "loss": "MSE", "f64": true, "seed": 4, "layers": [
          {"dense": {"units": 2}}, {"name": "bn", "batchNorm": {"virtualBatchSize": 2}},
          {"tanh": {}}]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  auto vars = *VariableSet::Initialize(*g);
  auto exec = *Executor::Create(&*g);
  const std::vector<double> x = {1, 2, 0, -1, 4, 2, 3, 3, -2, 0.5, 1, 7};
  const std::vector<double> y = {0.5, -1, 0, 1, 2, 0.25, -0.5, 1};
  auto step = [&](int64_t begin, int64_t rows, double scale, std::vector<Tensor>* grads) {
    Feeds feeds = {
        {"features", Tensor::FromVector<double>(
                         std::vector<double>(x.begin() + 3 * begin, x.begin() + 3 * (begin + rows)),
                         Shape{rows, 3})},
        {"labels", Tensor::FromVector<double>(
                       std::vector<double>(y.begin() + 2 * begin, y.begin() + 2 * (begin + rows)),
                       Shape{rows, 2})}};
    StepOptions o;
    o.loss_scale = scale;
    ASSERT_TRUE(exec->ComputeGradients(vars.tensors(), feeds, o, grads).ok());
  };
  std::vector<Tensor> whole, first, second;
  step(0, 4, 1.0, &whole);
  step(0, 2, 0.5, &first);
  step(2, 2, 0.5, &second);
  ASSERT_EQ(whole.size(), 6u);  // kernel, bias, gamma, beta, moving mean and variance
  for (size_t v = 0; v < whole.size(); ++v) {
    for (int64_t i = 0; i < whole[v].num_elements(); ++i) {
      EXPECT_NEAR(whole[v].data<double>()[i],
                  first[v].data<double>()[i] + second[v].data<double>()[i], 1e-12)
          << g->Variables()[v].name << " element " << i;
    }
  }
  EXPECT_THAT(BuildError(R"({"inputShape": [2], "loss": "MSE",
                             "layers": [{"batch_norm": {"virtualBatchSize": -1}}]})"),
              HasSubstr("layers[0].batch_norm.virtual_batch_size: -1 must be >= 0"));
  EXPECT_THAT(
      BuildError(R"({"inputShape": [2], "loss": "MSE",
                     "layers": [{"batch_norm": {"virtualBatchSize": 2, "synchronized": true}}]})"),
      HasSubstr("layers[0].batch_norm.synchronized: statistics over the global batch exclude"));
  // Alone, `synchronized` builds: a node that sums over the replicas when it trains in a
  // sync group (one replica alone computes what the plain layer does).
  auto sync = BuildModel(*ParseModelSpecJson(R"({"inputShape": [2], "loss": "MSE",
      "layers": [{"batch_norm": {"synchronized": true}}]})"));
  ASSERT_TRUE(sync.ok()) << sync.status();
  bool found = false;
  for (int i = 0; i < sync->num_nodes(); ++i) {
    if (sync->node(i).op() == v1::BATCH_NORM) found = sync->node(i).synchronized();
  }
  EXPECT_TRUE(found);
}

TEST(ModelBuilder, RefusesBadGraphsNamingTheField) {
  const std::string head = R"({"inputShape": [4], "loss": "MSE", "layers": [)";
  EXPECT_THAT(BuildError(head + R"({"relu": {}}, {"add": {}, "inputs": ["relu_0", "x"]}]})"),
              HasSubstr("layers[1].inputs[1]: no layer or model input named 'x' before it"));
  // A later layer cannot be an input: so there are no cycles.
  EXPECT_THAT(BuildError(head + R"({"name": "a", "relu": {}, "inputs": ["b"]},
                                   {"name": "b", "relu": {}, "inputs": ["a"]}]})"),
              HasSubstr("layers[0].inputs[0]: no layer or model input named 'b' before it"));
  EXPECT_THAT(BuildError(head + R"({"name": "a", "relu": {}, "inputs": ["a"]}]})"),
              HasSubstr("layers[0].inputs[0]: no layer or model input named 'a'"));
  EXPECT_THAT(BuildError(head + R"({"add": {}}]})"),
              HasSubstr("layers[0].inputs: add joins two or more inputs"));
  EXPECT_THAT(
      BuildError(head + R"({"relu": {}}, {"tanh": {}, "inputs": ["relu_0", "features"]}]})"),
      HasSubstr("layers[1].inputs: tanh takes one input, got 2"));
  EXPECT_THAT(BuildError(head + R"({"dense": {"units": 3}},
                                   {"add": {}, "inputs": ["features", "dense_0"]}]})"),
              HasSubstr("layers[1].add: ADD node"));
  EXPECT_THAT(BuildError(head + R"({"concat": {"axis": 3}, "inputs": ["features", "features"]}]})"),
              HasSubstr("layers[0].concat.axis: 3 is out of range"));
  EXPECT_THAT(BuildError(head + R"({"global_average_pooling": {}}]})"),
              HasSubstr("layers[0].global_average_pooling: input [?,4]"));
  EXPECT_THAT(BuildError(head + R"({"layer_norm": {"epsilon": -1}}]})"),
              HasSubstr("layers[0].layer_norm.epsilon"));
  EXPECT_THAT(BuildError(head + R"({"name": "features", "relu": {}}]})"),
              HasSubstr("layers[0].name: \"features\" is used twice"));
  EXPECT_THAT(BuildError(R"({"inputShape": [4], "inputs": [{"name": "a", "shape": [4]}],
                             "loss": "MSE", "layers": [{"relu": {}}]})"),
              HasSubstr("input_shape: give input_shape or inputs, not both"));
  EXPECT_THAT(BuildError(R"({"inputs": [{"name": "a", "shape": [4]}, {"name": "a", "shape": [2]}],
                             "loss": "MSE", "layers": [{"relu": {}}]})"),
              HasSubstr("inputs[1].name: \"a\" is used twice"));
  EXPECT_THAT(BuildError(R"({"inputs": [{"name": "labels", "shape": [4]}],
                             "loss": "MSE", "layers": [{"relu": {}}]})"),
              HasSubstr("inputs[0].name"));
  EXPECT_THAT(BuildError(R"({"inputs": [{"name": "a", "shape": [0]}],
                             "loss": "MSE", "layers": [{"relu": {}}]})"),
              HasSubstr("inputs[0].shape[0]: 0 must be > 0"));
}

// "precision" reaches the graph (and its proto, which FromProto keeps); BF16_MIXED on an f64
// model, an unknown name and an unknown value are refused naming the field.
TEST(ModelBuilder, PrecisionReachesTheGraphAndIsCheckedAgainstItsDType) {
  const std::string head =
      R"({"inputShape": [4], "loss": "MSE", "layers": [{"dense": {"units": 3}}])";
  absl::StatusOr<v1::ModelSpec> spec = ParseModelSpecJson(head + R"(, "precision": "BF16_MIXED"})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<Graph> g = BuildModel(*spec);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->precision(), v1::Precision::BF16_MIXED);
  absl::StatusOr<Graph> copy = Graph::FromProto(g->proto());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->precision(), v1::Precision::BF16_MIXED);
  EXPECT_EQ(BuildModel(*ParseModelSpecJson(head + "}"))->precision(),
            v1::Precision::PRECISION_UNSPECIFIED);
  EXPECT_EQ(BuildError(head + R"(, "precision": "F32"})"), "OK");
  EXPECT_THAT(BuildError(head + R"(, "precision": "BF16_MIXED", "f64": true})"),
              HasSubstr("precision: BF16_MIXED rounds f32 operands, but node 0 (\"features\") is "
                        "f64; it is for f32 models"));
  EXPECT_THAT(BuildError(head + R"(, "precision": "TF32", "f64": true})"),
              HasSubstr("precision: TF32 rounds f32 operands, but node 0"));
  EXPECT_EQ(BuildError(head + R"(, "precision": "TF32"})"), "OK");
  EXPECT_EQ(BuildError(head + R"(, "f64": true, "precision": "PRECISION_UNSPECIFIED"})"), "OK");
  EXPECT_THAT(BuildError(head + R"(, "precision": "BF16"})"), HasSubstr("precision"));
  v1::GraphDef bad = g->proto();
  bad.set_precision(static_cast<v1::Precision::Mode>(9));
  EXPECT_EQ(Graph::FromProto(bad).status().message(),
            "precision: 9 is not a precision (F32, TF32 or BF16_MIXED)");
}

TEST(ModelBuilder, ParsesOptimizerSpecs) {
  auto spec = ParseOptimizerSpecJson(
      R"({"momentum": {"momentum": 0.9, "nesterov": true},
          "learningRate": {"warmupCosine": {"peak": 0.1, "warmupSteps": 10, "decaySteps": 100}}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->momentum().nesterov());
  EXPECT_EQ(spec->learning_rate().warmup_cosine().decay_steps(), 100);
  auto unknown = ParseOptimizerSpecJson(R"({"rmsprop": {}})");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << unknown.status();
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("optimizer spec: "));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("rmsprop"));
}

}  // namespace
}  // namespace lockstep::engine
