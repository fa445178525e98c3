// One test body for the sequence-model ops on every device type (device_generic_test_body.h's
// fixture and CheckOp): LAYER_NORM, SOFTMAX, SIGMOID, TANH, GELU, ADD, SUB, MUL, SUM, MEAN,
// CONCAT, ARGMAX, EMBEDDING, DROPOUT and SELF_ATTENTION, forward and every input gradient, each
// against the op's CPU kernel; then a small Transformer (embedding, position embedding, layer
// norms, causal self-attention, GELU feed-forward, dropout, residual adds) trained a few steps
// with momentum SGD and with Adam on the device against the same steps on "/cpu:0". Instantiated
// for "/cpu:0" and the fake "/gpu:0" (seq_ops_test: the grid emulator runs every GPU kernel) and
// for a real GPU (seq_ops_cuda_test, requires-gpu).
//
// Tolerances. Where Env::kBitwise (the CPU and the fake, whose kernels run the CPU's arithmetic
// with the host's expf/tanhf and whose GEMM is the CPU's), every op and the trained variables
// are the CPU's bits, with one exception: SOFTMAX's forward pass sums each row in a block's
// order (GpuKernels::SoftmaxRows), so it and its gradient are within kRelTolerance (1e-5,
// relative to the element with a floor of the tensor's mean magnitude). On a GPU every op is
// within kRelTolerance (CUDA's expf and tanhf are within 2 ulp of glibc's; cuBLAS's sums are
// ordered differently); the training's tolerances are at TinyTransformerTrainsLikeTheCpu.
#ifndef LOCKSTEP_ENGINE_SEQ_OPS_TEST_BODY_H_
#define LOCKSTEP_ENGINE_SEQ_OPS_TEST_BODY_H_

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/device_generic_test_body.h"
#include "engine/philox.h"

namespace lockstep::engine {

// The fixture's own suite is instantiated by device_generic_test(.cc) and its CUDA form; these
// binaries instantiate only SeqOpsTest.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

template <class Env>
class SeqOpsTest : public DeviceGenericTest<Env> {
 protected:
  // Runs `node` forward (training, with a dropout key) and backward on `e`: the output, then the
  // gradients of the needed inputs, as host tensors.
  std::vector<Tensor> RunTraining(
      DeviceEnv& e, const v1::NodeDef& node, const std::vector<Tensor>& host_in,
      const std::vector<bool>& need, const Tensor& host_d_out,
      v1::Precision::Mode precision = v1::Precision::PRECISION_UNSPECIFIED) {
    std::vector<Tensor> results;
    const Device::Type t = e.device().type();
    absl::StatusOr<std::unique_ptr<OpKernel>> k =
        this->registry_->CreateKernel(t, node, DType::kF32);
    EXPECT_TRUE(k.ok()) << k.status();
    if (!k.ok()) return results;
    KernelContext ctx;
    ctx.allocate = [&e](DType d, const Shape& s) { return e.Allocate(d, s); };
    ctx.gpu = e.gpu();
    ctx.training = true;
    ctx.dropout_key = 0x5eed;
    ctx.node_index = 7;
    ctx.precision = precision;
    std::vector<Tensor> in = *e.ToDevice(host_in);
    Tensor out;
    absl::Status s = (*k)->Forward(ctx, in, &out);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return results;
    std::vector<Tensor> d_in(in.size());
    Tensor d_out = *e.ToDevice(host_d_out);
    s = (*k)->Backward(ctx, in, out, d_out, need, &d_in);
    EXPECT_TRUE(s.ok()) << s;
    results.push_back(*e.ToHost(out));
    for (size_t i = 0; i < need.size(); ++i) {
      if (need[i]) results.push_back(*e.ToHost(d_in[i]));
    }
    return results;
  }

  // The error the device's kernel of `node` gives for `host_in` (forward).
  absl::Status ForwardError(const v1::NodeDef& node, const std::vector<Tensor>& host_in) {
    absl::StatusOr<std::unique_ptr<OpKernel>> k =
        this->registry_->CreateKernel(this->type(), node, DType::kF32);
    if (!k.ok()) return k.status();
    KernelContext ctx;
    DeviceEnv& e = this->env();
    ctx.allocate = [&e](DType d, const Shape& s) { return e.Allocate(d, s); };
    ctx.gpu = e.gpu();
    LS_ASSIGN_OR_RETURN(std::vector<Tensor> in, e.ToDevice(host_in));
    Tensor out;
    return (*k)->Forward(ctx, in, &out);
  }
};

TYPED_TEST_SUITE_P(SeqOpsTest);

inline v1::NodeDef SeqNode(v1::OpType op) { return OpNode(op); }

TYPED_TEST_P(SeqOpsTest, ActivationsMatchTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  // Past GELU's clamps (|x / sqrt 2| > 4, exp's argument below -88), zeros and odd sizes.
  Tensor x = RandomTensor(Shape{3, 37}, 11, -6.f, 6.f);
  float* v = x.data<float>();
  v[0] = 0.f;
  v[1] = -0.f;
  v[2] = 15.f;
  v[3] = -15.f;
  v[4] = 1e-8f;
  for (v1::OpType op : {v1::SIGMOID, v1::TANH, v1::GELU}) {
    this->CheckOp(SeqNode(op), {x}, {true}, kBitwise);
  }
  this->CheckOp(SeqNode(v1::GELU), {RandomTensor(Shape{5}, 12)}, {true}, kBitwise);
}

TYPED_TEST_P(SeqOpsTest, ElementwiseOpsMatchTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  const Tensor a = RandomTensor(Shape{4, 3, 7}, 21), b = RandomTensor(Shape{4, 3, 7}, 22);
  for (v1::OpType op : {v1::ADD, v1::SUB, v1::MUL}) {
    this->CheckOp(SeqNode(op), {a, b}, {true, true}, kBitwise);
    this->CheckOp(SeqNode(op), {a, b}, {false, true}, kBitwise);
  }
}

TYPED_TEST_P(SeqOpsTest, SoftmaxMatchesTheCpu) {
  // Rows shorter and longer than a block (256 threads), and one of a single column.
  for (const Shape& s : {Shape{6, 10}, Shape{2, 3, 300}, Shape{4, 1}}) {
    SCOPED_TRACE(s.ToString());
    this->CheckOp(SeqNode(v1::SOFTMAX), {RandomTensor(s, 31, -8.f, 8.f)}, {true},
                  /*bitwise=*/false);
  }
}

TYPED_TEST_P(SeqOpsTest, LayerNormMatchesTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  v1::NodeDef ln = SeqNode(v1::LAYER_NORM);
  ln.set_epsilon(1e-5);
  for (const Shape& s : {Shape{7, 33}, Shape{2, 5, 16}}) {
    SCOPED_TRACE(s.ToString());
    const int64_t c = s[-1];
    const Tensor x = RandomTensor(s, 41, -3.f, 5.f), gamma = RandomTensor(Shape{c}, 42, 0.5f, 1.5f),
                 beta = RandomTensor(Shape{c}, 43);
    this->CheckOp(ln, {x, gamma, beta}, {true, true, true}, kBitwise);
    this->CheckOp(ln, {x, gamma, beta}, {false, true, false}, kBitwise);
    this->CheckOp(ln, {x, gamma, beta}, {true, false, false}, kBitwise);
  }
  // No rows: the parameters' gradients are zeros.
  this->CheckOp(
      ln,
      {Tensor(DType::kF32, Shape{0, 4}), RandomTensor(Shape{4}, 44), RandomTensor(Shape{4}, 45)},
      {true, true, true}, kBitwise);
}

TYPED_TEST_P(SeqOpsTest, ReductionsMatchTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  const Tensor x = RandomTensor(Shape{3, 4, 5}, 51);
  const std::vector<std::vector<int64_t>> axes = {{}, {1}, {0, 2}, {-1}, {0, 1, 2}};
  int checked = 0;
  for (v1::OpType op : {v1::SUM, v1::MEAN}) {
    for (const auto& a : axes) {
      for (bool keep : {false, true}) {
        v1::NodeDef node = SeqNode(op);
        for (int64_t axis : a) node.add_axes(axis);
        node.set_keep_dims(keep);
        SCOPED_TRACE(node.ShortDebugString());
        this->CheckOp(node, {x}, {true}, kBitwise);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 20);
  if (this->env().gpu() == nullptr) return;
  // Past the reduction plan's rank: refused, naming the node.
  const Tensor deep = RandomTensor(Shape(std::vector<int64_t>(gpu::kMaxRank + 1, 1)), 52);
  absl::Status s = this->ForwardError(SeqNode(v1::SUM), {deep});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("n_SUM: the CUDA kernel of SUM takes rank <= 8"));
}

TYPED_TEST_P(SeqOpsTest, ConcatMatchesTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  for (int64_t axis : {0, 1, -1}) {
    v1::NodeDef node = SeqNode(v1::CONCAT);
    node.set_axis(axis);
    SCOPED_TRACE(axis);
    std::vector<Tensor> in;
    for (int k = 0; k < 3; ++k) {
      std::vector<int64_t> dims = {2, 3, 4};
      dims[axis < 0 ? 2 : axis] = k + 1;
      in.push_back(RandomTensor(Shape(dims), 60 + k));
    }
    this->CheckOp(node, in, {true, false, true}, kBitwise);
  }
  if (this->env().gpu() == nullptr) return;
  // More inputs than one launch takes: refused, naming the node.
  v1::NodeDef wide = SeqNode(v1::CONCAT);
  wide.set_axis(0);
  std::vector<Tensor> many(gpu::kMaxConcatInputs + 1, RandomTensor(Shape{1, 2}, 65));
  absl::Status s = this->ForwardError(wide, many);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("n_CONCAT: the CUDA kernel of CONCAT joins"));
}

TYPED_TEST_P(SeqOpsTest, ArgmaxMatchesTheCpu) {
  Tensor x = RandomTensor(Shape{6, 9}, 71);
  float* v = x.data<float>();
  v[3] = v[7] = 9.f;  // a tie: the first wins
  for (int j = 0; j < 9; ++j) v[9 + j] = 1.f;
  this->CheckOp(SeqNode(v1::ARGMAX), {x}, {false}, /*bitwise=*/true);
}

TYPED_TEST_P(SeqOpsTest, EmbeddingMatchesTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  const Tensor table = RandomTensor(Shape{11, 6}, 81);
  // Repeated ids (their gradient rows add up), ids never used (zero rows).
  const std::vector<int64_t> ids = {3, 0, 3, 10, 7, 3, 0, 2, 9, 3, 5, 1};
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  std::vector<float> idsf(ids.begin(), ids.end());
  this->CheckOp(SeqNode(v1::EMBEDDING), {Tensor::FromVector(ids, Shape{3, 4}), table},
                {false, true}, kBitwise);
  this->CheckOp(SeqNode(v1::EMBEDDING), {Tensor::FromVector(ids32, Shape{12}), table},
                {false, true}, kBitwise);
  this->CheckOp(SeqNode(v1::EMBEDDING), {Tensor::FromVector(idsf, Shape{2, 6}), table},
                {true, true}, kBitwise);
  // An id outside the table, or a fractional one, is refused on every device.
  for (float bad : {11.f, -1.f, 2.5f}) {
    std::vector<float> b = idsf;
    b[4] = bad;
    absl::Status s =
        this->ForwardError(SeqNode(v1::EMBEDDING), {Tensor::FromVector(b, Shape{12}), table});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), ::testing::HasSubstr("at position 4 is not an integer in [0, 11)"));
  }
}

// DROPOUT in training: the device keeps exactly the CPU's elements (the same Philox mask), in
// the forward pass and the gradient; at rate 0.3 about 70% survive. Not training: identity.
TYPED_TEST_P(SeqOpsTest, DropoutDrawsTheCpuMask) {
  v1::NodeDef node = SeqNode(v1::DROPOUT);
  node.set_rate(0.3);
  const Shape s{3, 1001};  // not a multiple of Philox's four words
  const Tensor x = RandomTensor(s, 91, 0.5f, 2.f), dy = RandomTensor(s, 92, 0.5f, 2.f);
  CpuDeviceEnv cpu;
  const std::vector<Tensor> want = this->RunTraining(cpu, node, {x}, {true}, dy);
  const std::vector<Tensor> got = this->RunTraining(this->env(), node, {x}, {true}, dy);
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(got[i].BitwiseEquals(want[i])) << "output " << i;
  int64_t kept = 0;
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    const bool fwd = got[0].data<float>()[i] != 0.f, bwd = got[1].data<float>()[i] != 0.f;
    EXPECT_EQ(fwd, bwd) << "element " << i << ": the gradient's mask is not the forward's";
    kept += fwd;
  }
  EXPECT_NEAR(double(kept) / s.num_elements(), 0.7, 0.03);
  this->CheckOp(node, {x}, {true}, /*bitwise=*/true);  // not training: the identity
}

TYPED_TEST_P(SeqOpsTest, SelfAttentionMatchesTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  const int64_t d = 8;
  const Tensor x = RandomTensor(Shape{2, 5, d}, 101),
               wqkv = RandomTensor(Shape{d, 3 * d}, 102, -.5f, .5f),
               wo = RandomTensor(Shape{d, d}, 103, -.5f, .5f);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    v1::NodeDef node = SeqNode(v1::SELF_ATTENTION);
    node.set_num_heads(2);
    node.set_causal(causal);
    this->CheckOp(node, {x, wqkv, wo}, {true, true, true}, kBitwise);
    this->CheckOp(node, {x, wqkv, wo}, {false, false, true}, kBitwise);
  }
}

// SELF_ATTENTION under BF16_MIXED: every product (projections, scores, P V, and the gradient's)
// with bf16 operands. Forward and every gradient on the device as on "/cpu:0": bit for bit on the
// fake; within 1e-2 on a GPU, where an f32 sum in another order can carry an intermediate (Q, K,
// V, the probabilities) across a bf16 rounding boundary, a 2^-8 step of that operand. The f32
// forward differs by more than 1e-4 (the control).
TYPED_TEST_P(SeqOpsTest, SelfAttentionUnderBf16MixedMatchesTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  const int64_t d = 8;
  const Tensor x = RandomTensor(Shape{2, 5, d}, 111),
               wqkv = RandomTensor(Shape{d, 3 * d}, 112, -.5f, .5f),
               wo = RandomTensor(Shape{d, d}, 113, -.5f, .5f);
  v1::NodeDef node = SeqNode(v1::SELF_ATTENTION);
  node.set_num_heads(2);
  node.set_causal(true);
  const Tensor d_out = RandomTensor(Shape{2, 5, d}, 114);
  const std::vector<bool> need = {true, true, true};
  CpuDeviceEnv cpu;
  const std::vector<Tensor> want =
      this->RunTraining(cpu, node, {x, wqkv, wo}, need, d_out, v1::Precision::BF16_MIXED);
  const std::vector<Tensor> got =
      this->RunTraining(this->env(), node, {x, wqkv, wo}, need, d_out, v1::Precision::BF16_MIXED);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_EQ(want.size(), 4u);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(Close(got[i], want[i], kBitwise, kBitwise ? kRelTolerance : 1e-2))
        << "output " << i << " (0: forward, then the input gradients)";
  }
  const std::vector<Tensor> f32 = this->RunTraining(cpu, node, {x, wqkv, wo}, need, d_out);
  ASSERT_EQ(f32.size(), 4u);
  EXPECT_FALSE(Close(f32[0], want[0], /*bitwise=*/false, 1e-4))
      << "BF16_MIXED attention computed f32: the control cannot fail";
}

inline constexpr int kTransformerSteps = 8;
inline constexpr int64_t kVocab = 13, kTime = 6;

// The char Transformer's layers (examples/jobs/char_transformer.json), one block, small.
inline constexpr char kTinyTransformer[] = R"({
  "inputShape": [6], "seed": 5, "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
  "layers": [
    {"name": "tok", "embedding": {"inputDim": 13, "outputDim": 8}},
    {"name": "pos", "positionEmbedding": {}},
    {"name": "ln1", "layerNorm": {}},
    {"name": "att", "selfAttention": {"numHeads": 2, "causal": true}},
    {"name": "drop", "dropout": {"rate": 0.1}},
    {"name": "res", "add": {}, "inputs": ["pos", "drop"]},
    {"name": "ln2", "layerNorm": {}},
    {"name": "ff", "dense": {"units": 16}},
    {"name": "ff_act", "gelu": {}},
    {"name": "ff_out", "dense": {"units": 8}},
    {"name": "res_ff", "add": {}, "inputs": ["res", "ff_out"]},
    {"name": "ln_out", "layerNorm": {}},
    {"name": "logits", "dense": {"units": 13}}
  ]})";

// Token windows of a repeating pattern and the token that follows each (learnable).
inline Feeds TokenBatch(int64_t batch, uint64_t seed) {
  std::vector<float> x(batch * kTime);
  std::vector<int64_t> y(batch * kTime);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = (b * 5 + seed) % kVocab;
    for (int64_t t = 0; t < kTime; ++t) {
      x[b * kTime + t] = float((start + 3 * t) % kVocab);
      y[b * kTime + t] = (start + 3 * (t + 1)) % kVocab;
    }
  }
  return {{"features", Tensor::FromVector(x, Shape{batch, kTime})},
          {"labels", Tensor::FromVector(y, Shape{batch, kTime})}};
}

// Trained with momentum SGD and with Adam (clipped by global norm). Where Env::kBitwise the
// losses are within 1e-6 (summed in double in another grouping) and the variables the CPU's
// bits. On a GPU: SGD's losses within 1e-4 and variables within 1e-3; Adam's losses within
// 1e-3 and no variable check (Adam's update m / sqrt(v) turns a rounding difference in a
// gradient near zero into a full step of either sign).
TYPED_TEST_P(SeqOpsTest, TinyTransformerTrainsLikeTheCpu) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  absl::StatusOr<v1::ModelSpec> spec = ParseModelSpecJson(kTinyTransformer);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<Graph> graph = BuildModel(*spec);
  ASSERT_TRUE(graph.ok()) << graph.status();
  struct Case {
    const char* optimizer;
    double loss_rel;
    double var_rel;  // 0: not compared
  };
  const std::vector<Case> cases = {
      {R"({"momentum": {"momentum": 0.9}, "learningRate": {"constant": {"value": 0.1}}})",
       kBitwise ? 1e-6 : 1e-4, kBitwise ? kRelTolerance : 1e-3},
      {R"({"adam": {}, "learningRate": {"constant": {"value": 0.01}}, "globalClipnorm": 1.0})",
       kBitwise ? 1e-6 : 1e-3, kBitwise ? kRelTolerance : 0},
  };
  struct Run {
    std::vector<double> losses;
    std::vector<Tensor> variables;
  };
  int trained = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.optimizer);
    absl::StatusOr<v1::OptimizerSpec> ospec = ParseOptimizerSpecJson(c.optimizer);
    ASSERT_TRUE(ospec.ok()) << ospec.status();
    auto train = [&](DeviceEnv& e, Run* out) {
      ExecutorOptions options;
      options.device = e.device();
      options.gpu = e.gpu();
      absl::StatusOr<std::unique_ptr<Executor>> exec = Executor::Create(&*graph, options);
      ASSERT_TRUE(exec.ok()) << exec.status();
      absl::StatusOr<VariableSet> init = VariableSet::Initialize(*graph);
      ASSERT_TRUE(init.ok()) << init.status();
      absl::StatusOr<std::vector<Tensor>> vars = e.ToDevice(init->tensors());
      ASSERT_TRUE(vars.ok()) << vars.status();
      absl::StatusOr<std::unique_ptr<Optimizer>> opt =
          Optimizer::Create(*ospec, graph->Variables(), e.gpu());
      ASSERT_TRUE(opt.ok()) << opt.status();
      for (int step = 0; step < kTransformerSteps; ++step) {
        std::vector<Tensor> grads;
        StepOptions so;
        so.step = step;
        absl::StatusOr<StepResult> r =
            (*exec)->ComputeGradients(*vars, TokenBatch(8, step % 3), so, &grads);
        ASSERT_TRUE(r.ok()) << r.status();
        out->losses.push_back(r->loss);
        absl::Status s = (*opt)->Apply(grads, &*vars);
        ASSERT_TRUE(s.ok()) << s;
      }
      absl::StatusOr<std::vector<Tensor>> host = e.ToHost(*vars);
      ASSERT_TRUE(host.ok()) << host.status();
      out->variables = *host;
    };
    CpuDeviceEnv cpu;
    Run want, got;
    ASSERT_NO_FATAL_FAILURE(train(cpu, &want));
    ASSERT_NO_FATAL_FAILURE(train(this->env(), &got));
    ASSERT_EQ(got.losses.size(), static_cast<size_t>(kTransformerSteps));
    for (int s = 0; s < kTransformerSteps; ++s) {
      EXPECT_NEAR(got.losses[s], want.losses[s], c.loss_rel * std::fabs(want.losses[s]))
          << "step " << s;
    }
    EXPECT_LT(want.losses.back(), 0.9 * want.losses.front()) << "the model did not train";
    ASSERT_EQ(got.variables.size(), want.variables.size());
    for (size_t v = 0; c.var_rel > 0 && v < want.variables.size(); ++v) {
      EXPECT_TRUE(Close(got.variables[v], want.variables[v], kBitwise, c.var_rel))
          << graph->Variables()[v].name;
    }
    ++trained;
  }
  EXPECT_EQ(trained, 2);
}

REGISTER_TYPED_TEST_SUITE_P(SeqOpsTest, ActivationsMatchTheCpu, ElementwiseOpsMatchTheCpu,
                            SoftmaxMatchesTheCpu, LayerNormMatchesTheCpu, ReductionsMatchTheCpu,
                            ConcatMatchesTheCpu, ArgmaxMatchesTheCpu, EmbeddingMatchesTheCpu,
                            DropoutDrawsTheCpuMask, SelfAttentionMatchesTheCpu,
                            SelfAttentionUnderBf16MixedMatchesTheCpu,
                            TinyTransformerTrainsLikeTheCpu);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_SEQ_OPS_TEST_BODY_H_
