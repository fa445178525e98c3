// The device-generic tests of the convolutional models' ops (device_generic_test_body.h's
// fixture and tolerances): CONV2D, MAX_POOL2D and BATCH_NORM forward and gradient on the device
// against "/cpu:0" over geometries that exercise padding, strides, overlapping windows, ties and
// virtual batches; BATCH_NORM's moving-statistics updates in training; the kernels' launch
// refusals; and a conv + batch norm + pool model training on the device like on the CPU.
// Instantiated for "/cpu:0", the fake "/gpu:0" with a full grid and with a grid of 2 blocks of
// 64 threads (every grid-stride loop turns) in device_generic_cnn_test, and for a real GPU in
// device_generic_cnn_cuda_test (requires-gpu).
//
// Tolerances: as device_generic_test_body.h (bit for bit where Env::kBitwise: the fake's GEMM is
// the CPU's and the kernels make the CPU's operations in its order; kRelTolerance otherwise,
// cuBLAS summing the products in another order). Training: the loss within 1e-6 (1e-4 on a
// GPU) of the CPU's at every step, the variables (the moving statistics included) bitwise on
// the fake and within 1e-3 on a GPU.
#ifndef LOCKSTEP_ENGINE_DEVICE_GENERIC_CNN_TEST_BODY_H_
#define LOCKSTEP_ENGINE_DEVICE_GENERIC_CNN_TEST_BODY_H_

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/device_generic_test_body.h"

namespace lockstep::engine {

template <class Env>
class DeviceGenericCnnTest : public DeviceGenericTest<Env> {
 protected:
  // BATCH_NORM's forward (and, training, its two state updates), then the gradients of x,
  // gamma and beta for a fixed d_out, on device type t.
  // Synchronized training: `sum` stands for the other replicas' cross_replica_sum, and
  // `phantom` marks a replica past the end of a partial batch.
  using ReplicaSum = std::function<absl::Status(Tensor*)>;
  void RunBatchNorm(Device::Type t, DeviceEnv& e, const v1::NodeDef& node,
                    const std::vector<Tensor>& host_in, bool training, std::vector<Tensor>* outs,
                    ReplicaSum sum = nullptr, bool phantom = false) {
    absl::StatusOr<std::unique_ptr<OpKernel>> k =
        this->registry_->CreateKernel(t, node, DType::kF32);
    ASSERT_TRUE(k.ok()) << k.status();
    KernelContext ctx;
    ctx.allocate = [&e](DType d, const Shape& s) { return e.Allocate(d, s); };
    ctx.gpu = e.gpu();
    ctx.training = training;
    ctx.cross_replica_sum = std::move(sum);
    ctx.phantom_batch = phantom;
    std::vector<Tensor> updates(host_in.size());
    ctx.update_state = [&updates](int input, Tensor delta) { updates[input] = std::move(delta); };
    absl::StatusOr<std::vector<Tensor>> in = e.ToDevice(host_in);
    ASSERT_TRUE(in.ok()) << in.status();
    Tensor out;
    absl::Status s = (*k)->Forward(ctx, *in, &out);
    ASSERT_TRUE(s.ok()) << s;
    outs->push_back(out);
    for (int i : {3, 4}) {
      ASSERT_EQ(updates[i].valid(), training) << "state update of input " << i;
      if (training) outs->push_back(updates[i]);
    }
    absl::StatusOr<Tensor> d_out = e.ToDevice(RandomTensor(out.shape(), 99));
    ASSERT_TRUE(d_out.ok());
    std::vector<Tensor> d_in(in->size());
    const std::vector<bool> need = {true, true, true, false, false};
    s = (*k)->Backward(ctx, *in, out, *d_out, need, &d_in);
    ASSERT_TRUE(s.ok()) << s;
    for (int i = 0; i < 3; ++i) outs->push_back(d_in[i]);
  }

  // Runs BATCH_NORM on "/cpu:0" and on the device, and compares every output. With
  // `other_replicas` (synchronized training): each cross_replica_sum call's values become
  // other_replicas(call, values), the same on both sides, and the values each side handed over
  // (its partial sums) must match too.
  using OtherReplicas = std::function<void(int call, Tensor* values)>;
  void CheckBatchNorm(const v1::NodeDef& node, const std::vector<Tensor>& host_in, bool training,
                      OtherReplicas other_replicas = nullptr, bool phantom = false) {
    SCOPED_TRACE(absl::StrCat(
        "virtual_batch_size ", node.virtual_batch_size(), training ? ", training" : ", inference",
        other_replicas ? ", synchronized over replicas" : "", phantom ? ", phantom batch" : ""));
    CpuDeviceEnv cpu;
    std::vector<Tensor> want, got;
    std::vector<Tensor> want_partials, got_partials;
    auto recording = [&other_replicas](std::vector<Tensor>* partials) -> ReplicaSum {
      if (!other_replicas) return nullptr;
      return [&other_replicas, partials](Tensor* values) {
        EXPECT_TRUE(values->on_host()) << "cross_replica_sum takes host tensors";
        partials->push_back(values->Clone());
        other_replicas(static_cast<int>(partials->size()) - 1, values);
        return absl::OkStatus();
      };
    };
    ASSERT_NO_FATAL_FAILURE(RunBatchNorm(Device::Type::kCpu, cpu, node, host_in, training, &want,
                                         recording(&want_partials), phantom));
    ASSERT_NO_FATAL_FAILURE(RunBatchNorm(this->type(), this->env(), node, host_in, training, &got,
                                         recording(&got_partials), phantom));
    ASSERT_EQ(got_partials.size(), want_partials.size());
    for (size_t i = 0; i < want_partials.size(); ++i) {
      EXPECT_TRUE(Close(got_partials[i], want_partials[i], Env::kBitwise))
          << "cross_replica_sum call " << i << " (sum x and rows, squares, sum dy and dy * xhat)";
    }
    ASSERT_EQ(got.size(), want.size());
    absl::StatusOr<std::vector<Tensor>> host = this->env().ToHost(got);
    ASSERT_TRUE(host.ok()) << host.status();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(Close((*host)[i], want[i], Env::kBitwise))
          << "output " << i << " (y, [delta mean, delta variance,] dx, dgamma, dbeta)";
    }
  }
};

TYPED_TEST_SUITE_P(DeviceGenericCnnTest);

inline v1::NodeDef WindowNode(v1::OpType op, v1::Padding padding, std::vector<int> strides,
                              std::vector<int> window = {}) {
  v1::NodeDef n = OpNode(op);
  n.set_padding(padding);
  for (int s : strides) n.add_strides(s);
  for (int w : window) n.add_window(w);
  return n;
}

// Values on a grid of 0.25 in [-2, 2]: many ties for max pooling's "first maximum".
inline Tensor TiedTensor(const Shape& shape, uint64_t seed) {
  Tensor t = RandomTensor(shape, seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data<float>()[i] = std::round(t.data<float>()[i] * 4.f) / 4.f;
  }
  return t;
}

TYPED_TEST_P(DeviceGenericCnnTest, Conv2DMatchesTheCpuForwardAndGradient) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  struct Case {
    v1::Padding padding;
    std::vector<int> strides;
    int64_t kh, kw;
  };
  const Case cases[] = {
      {v1::SAME, {}, 3, 3},      {v1::VALID, {}, 3, 3},    {v1::SAME, {2, 2}, 3, 3},
      {v1::VALID, {2, 1}, 2, 3}, {v1::SAME, {1, 2}, 4, 2}, {v1::SAME, {3, 3}, 1, 1},
  };
  int checked = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(v1::Padding_Name(c.padding), " ", c.kh, "x", c.kw, " strides ",
                              c.strides.empty() ? 1 : c.strides[0], "x",
                              c.strides.empty() ? 1 : c.strides.back()));
    const Tensor x = RandomTensor(Shape{3, 7, 6, 3}, 20 + checked);
    const Tensor f = RandomTensor(Shape{c.kh, c.kw, 3, 4}, 40 + checked);
    this->CheckOp(WindowNode(v1::CONV2D, c.padding, c.strides), {x, f}, {true, true}, kBitwise);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

// CONV2D under BF16_MIXED (engine/ops/products.h): forward and gradients on the device as on
// "/cpu:0", and the forward is the f32 convolution of the input and the filter rounded to bf16
// (im2col only copies values), which the unrounded one misses by far more (the control).
TYPED_TEST_P(DeviceGenericCnnTest, Conv2DUnderBf16MixedConvolvesRoundedOperands) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  const v1::NodeDef node = WindowNode(v1::CONV2D, v1::SAME, {2, 1});
  const Tensor x = RandomTensor(Shape{3, 7, 6, 3}, 60), f = RandomTensor(Shape{3, 3, 3, 4}, 61);
  this->CheckOp(node, {x, f}, {true, true}, kBitwise, kRelTolerance, v1::Precision::BF16_MIXED);
  this->ExpectMixedIsF32OfRoundedOperands(node, x, f, kBitwise);
}

TYPED_TEST_P(DeviceGenericCnnTest, MaxPool2DMatchesTheCpuForwardAndGradient) {
  constexpr bool kBitwise = TypeParam::kBitwise;
  struct Case {
    v1::Padding padding;
    std::vector<int> strides, window;
  };
  const Case cases[] = {
      {v1::VALID, {}, {2, 2}},      // the default: strides = window
      {v1::SAME, {}, {2, 2}},       // odd sizes: a padded last window
      {v1::VALID, {1, 1}, {3, 3}},  // overlapping windows: an input feeds several
      {v1::SAME, {2, 1}, {3, 2}},
  };
  int checked = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("case ", checked));
    this->CheckOp(WindowNode(v1::MAX_POOL2D, c.padding, c.strides, c.window),
                  {TiedTensor(Shape{2, 7, 5, 3}, 60 + checked)}, {true}, kBitwise);
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

// Training with one group and with virtual batches (10 examples in groups of 4, 4 and 2), and
// inference (the moving statistics), on [10, 3, 2, 5] (the statistics over 60 or 24 rows).
TYPED_TEST_P(DeviceGenericCnnTest, BatchNormMatchesTheCpuForwardGradientAndUpdates) {
  const Shape x_shape{10, 3, 2, 5};
  const std::vector<Tensor> in = {
      RandomTensor(x_shape, 80, -3.f, 5.f), RandomTensor(Shape{5}, 81, 0.5f, 1.5f),
      RandomTensor(Shape{5}, 82), RandomTensor(Shape{5}, 83, -0.5f, 0.5f),
      RandomTensor(Shape{5}, 84, 0.5f, 2.f)};
  int checked = 0;
  for (int64_t v : {0, 4, 10}) {
    v1::NodeDef node = OpNode(v1::BATCH_NORM);
    node.set_epsilon(1e-3f);
    node.set_momentum(0.9f);
    node.set_virtual_batch_size(v);
    for (bool training : {true, false}) {
      ASSERT_NO_FATAL_FAILURE(this->CheckBatchNorm(node, in, training));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6);
}

// Synchronized statistics, on every device: inference; training alone (the replica's batch);
// training among other replicas (a cross_replica_sum that adds their sums), where the partial
// sums handed over and every output match the CPU's; a phantom batch (no examples of its own:
// y from the others' statistics, zero gradients); and the refusals: no examples in the whole
// sync group, a gradient without a forward pass, a gradient for the moving statistics.
TYPED_TEST_P(DeviceGenericCnnTest, SynchronizedBatchNormMatchesTheCpu) {
  v1::NodeDef node = OpNode(v1::BATCH_NORM);
  node.set_epsilon(1e-3f);
  node.set_momentum(0.9f);
  node.set_synchronized(true);
  // Other replicas' sums: 7 more rows, and per call values that are not this replica's.
  auto others = [](int call, Tensor* values) {
    double* v = values->data<double>();
    const int64_t n = values->num_elements();
    for (int64_t i = 0; i < n; ++i) {
      const bool rows = call == 0 && i == n - 1;  // the first call's row count
      v[i] += rows ? 7 : 0.75 * v[i] + 0.125 * (i + 1) + call;
    }
  };
  // Values of both signs away from 0 (their f64 sums are not all exact, the squared
  // deviations never are): 12 rows of 5 channels, and 4 rows of 130 channels (more channels
  // and elements than a grid of 2 blocks of 64 threads: every grid-stride loop turns).
  std::vector<Tensor> host_in;
  for (const Shape& shape : {Shape{3, 2, 2, 5}, Shape{4, 130}}) {
    SCOPED_TRACE(shape.ToString());
    const int64_t c = shape[-1];
    host_in = {RandomTensor(shape, 90, -3.f, 5.f), RandomTensor(Shape{c}, 91, 0.5f, 1.5f),
               RandomTensor(Shape{c}, 92), RandomTensor(Shape{c}, 93, -0.5f, 0.5f),
               RandomTensor(Shape{c}, 94, 0.5f, 2.f)};
    ASSERT_NO_FATAL_FAILURE(this->CheckBatchNorm(node, host_in, /*training=*/false));
    ASSERT_NO_FATAL_FAILURE(this->CheckBatchNorm(node, host_in, /*training=*/true));
    ASSERT_NO_FATAL_FAILURE(this->CheckBatchNorm(node, host_in, true, others));
    ASSERT_NO_FATAL_FAILURE(this->CheckBatchNorm(node, host_in, true, others, /*phantom=*/true));
  }

  std::unique_ptr<OpKernel> k = *this->registry_->CreateKernel(this->type(), node, DType::kF32);
  KernelContext ctx;
  ctx.allocate = [this](DType d, const Shape& s) { return this->env().Allocate(d, s); };
  ctx.gpu = this->env().gpu();
  ctx.training = true;
  std::vector<Tensor> in = *this->env().ToDevice(host_in);
  std::vector<Tensor> d_in(5);
  absl::Status s = k->Backward(ctx, in, in[0], in[0], {true, true, true, false, false}, &d_in);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("without a forward pass"));
  // A phantom batch alone: the sync group has no examples.
  ctx.phantom_batch = true;
  Tensor out;
  s = k->Forward(ctx, in, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr(node.name() + ": no replica of the sync group"));
  // The moving statistics take no gradient, on every device.
  ctx.training = false;
  s = k->Backward(ctx, in, in[0], in[0], {true, false, false, true, false}, &d_in);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("take no gradient"));
}

// What the kernels refuse at launch, each naming the kernel (nothing is enqueued).
TYPED_TEST_P(DeviceGenericCnnTest, CnnKernelsRefuseBadLaunches) {
  if (this->env().gpu() == nullptr) GTEST_SKIP() << "device kernels only";
  gpu::GpuKernels& k = *this->env().gpu()->kernels;
  const CudaStream s = this->env().gpu()->stream();
  Tensor x = this->env().Allocate(DType::kF32, Shape{2, 4, 4, 3});
  Tensor y = this->env().Allocate(DType::kF32, Shape{2, 2, 2, 3});
  gpu::WindowGeometry w;
  w.n = 2, w.h = 4, w.w = 4, w.c = 3, w.kh = 2, w.kw = 2, w.sh = 2, w.sw = 2, w.oh = 2, w.ow = 2;
  float* xp = x.device_data<float>();
  float* yp = y.device_data<float>();
  ASSERT_TRUE(k.MaxPool(xp, w, yp, s).ok());

  gpu::WindowGeometry bad = w;
  bad.sh = 0;
  absl::Status st = k.MaxPool(xp, bad, yp, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("MaxPool: window geometry"));
  bad = w;
  bad.n = -1;
  st = k.Im2Col(xp, bad, yp, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("Im2Col: window geometry"));
  st = k.Col2Im(nullptr, w, xp, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("Col2Im: buffer 0 is null"));
  st = k.MaxPoolGrad(xp, w, yp, nullptr, s);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("MaxPoolGrad: buffer 1 is null"));

  Tensor p = this->env().Allocate(DType::kF32, Shape{3 * 3});
  float* pp = p.device_data<float>();
  gpu::BatchNormDims d;
  d.rows = 32, d.c = 3, d.group_rows = 8, d.groups = 3;  // 24 of the 32 rows
  st = k.BatchNorm(xp, pp, pp, pp, pp, d, true, 1e-3f, pp, xp, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("BatchNorm: 32 rows of 3 channels are not 3"));
  d.groups = 4;
  st = k.BatchNormGrad(xp, xp, pp, pp, pp, d, true, 1e-3f, pp, nullptr, pp, pp, xp, s);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("BatchNormGrad: buffer 1 is null"));
  st = k.BatchNormMovingUpdates(pp, pp, pp, d, 0.9f, pp, nullptr, s);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("BatchNormMovingUpdates: buffer 3 is null"));
  st = k.SyncBatchNormSum(xp, nullptr, 32, 3, nullptr, s);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("SyncBatchNormSum: buffer 0 is null"));
  st = k.SyncBatchNormGradSums(xp, xp, pp, -1, 3, nullptr, pp, pp, s);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("SyncBatchNormGradSums: negative element count"));
  st = k.SyncBatchNormInput(xp, xp, pp, pp, nullptr, 32, 3, xp, s);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("SyncBatchNormInput: buffer 2 is null"));
  st = k.BatchNormApply(xp, pp, pp, pp, 32, 3, nullptr, s);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("BatchNormApply: buffer 1 is null"));
  // The device is still usable: a good launch runs after the refused ones.
  ASSERT_TRUE(k.MaxPool(xp, w, yp, s).ok());
  EXPECT_TRUE(this->env().ToHost(y).ok());
}

// A conv + batch norm + pool model (reshape to 8x8x1; conv 3x3 SAME without bias, batch norm
// with virtual batches of 8, ReLU; conv 3x3 VALID with bias; max pool 2x2; dense 10) trains
// kSteps steps of Adam on the device and ends where "/cpu:0" ends (tolerances above), with no
// device allocation after the first step. The residual form adds a skip connection (ADD) around a
// second conv + batch norm.
inline constexpr char kConvBnPool[] = R"({
  "inputShape": [64], "seed": 5, "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
  "layers": [
    {"reshape": {"shape": [8, 8, 1]}},
    {"name": "c0", "conv2d": {"filters": 6, "kernelSize": [3], "padding": "SAME", "noBias": true}},
    {"name": "c0_bn", "batchNorm": {"virtualBatchSize": 8}},
    {"name": "c0_act", "relu": {}},
    {"name": "c1", "conv2d": {"filters": 4, "kernelSize": [3], "padding": "VALID"}},
    {"name": "pool", "maxpool2d": {"poolSize": [2]}},
    {"flatten": {}},
    {"name": "logits", "dense": {"units": 10}}
  ]})";

inline constexpr char kResidualCnn[] = R"({
  "inputShape": [64], "seed": 7, "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
  "layers": [
    {"reshape": {"shape": [8, 8, 1]}},
    {"name": "stem", "conv2d": {"filters": 6, "kernelSize": [3], "padding": "SAME", "noBias": true}},
    {"name": "stem_bn", "batchNorm": {"virtualBatchSize": 8}},
    {"name": "stem_act", "relu": {}},
    {"name": "c1", "conv2d": {"filters": 6, "kernelSize": [3], "padding": "SAME", "noBias": true}},
    {"name": "c1_bn", "batchNorm": {"virtualBatchSize": 8}},
    {"name": "res", "add": {}, "inputs": ["stem_act", "c1_bn"]},
    {"name": "res_act", "relu": {}},
    {"name": "pool", "maxpool2d": {"poolSize": [2]}},
    {"flatten": {}},
    {"name": "logits", "dense": {"units": 10}}
  ]})";

// Trains `model_json` kSteps Adam steps on the device and on "/cpu:0" and compares them.
template <class Env>
void ExpectTrainsLikeTheCpu(DeviceEnv& device, const char* model_json) {
  constexpr bool kBitwise = Env::kBitwise;
  constexpr int kSteps = 8;
  const double loss_rel = kBitwise ? 1e-6 : 1e-4, var_rel = kBitwise ? kRelTolerance : 1e-3;
  absl::StatusOr<v1::ModelSpec> spec = ParseModelSpecJson(model_json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<Graph> graph = BuildModel(*spec);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<v1::OptimizerSpec> ospec =
      ParseOptimizerSpecJson(R"({"adam": {}, "learningRate": {"constant": {"value": 0.01}}})");
  ASSERT_TRUE(ospec.ok()) << ospec.status();
  std::vector<Feeds> batches;
  for (int i = 0; i < 3; ++i) batches.push_back(DigitsBatch(20, 200 + i));  // groups 8, 8, 4
  CpuDeviceEnv cpu;
  TrainingRun want, got;
  ASSERT_NO_FATAL_FAILURE(TrainDigits(cpu, *graph, *ospec, kSteps, &want, batches));
  ASSERT_NO_FATAL_FAILURE(TrainDigits(device, *graph, *ospec, kSteps, &got, batches));
  ASSERT_EQ(got.losses.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_NEAR(got.losses[s], want.losses[s], loss_rel * std::fabs(want.losses[s]))
        << "step " << s;
  }
  // Steps 0 and 6 see the same batch.
  EXPECT_LT(want.losses[6], want.losses[0]) << "the model did not train";
  ASSERT_EQ(got.variables.size(), want.variables.size());
  int moving = 0;
  for (size_t v = 0; v < want.variables.size(); ++v) {
    const std::string name = graph->Variables()[v].name;
    if (name.find("moving") != std::string::npos) ++moving;
    EXPECT_TRUE(Close(got.variables[v], want.variables[v], kBitwise, var_rel)) << name;
  }
  EXPECT_GE(moving, 2) << "the batch norm's moving statistics were not compared";
}

TYPED_TEST_P(DeviceGenericCnnTest, ConvBatchNormPoolModelTrainsLikeTheCpu) {
  ExpectTrainsLikeTheCpu<TypeParam>(this->env(), kConvBnPool);
}

// The residual CNN: convolutions, batch norms, the skip connection's ADD and the global
// average pool (MEAN over the spatial axes), every one of them on the device.
TYPED_TEST_P(DeviceGenericCnnTest, ResidualCnnTrainsLikeTheCpu) {
  ExpectTrainsLikeTheCpu<TypeParam>(this->env(), kResidualCnn);
}

REGISTER_TYPED_TEST_SUITE_P(DeviceGenericCnnTest, Conv2DMatchesTheCpuForwardAndGradient,
                            Conv2DUnderBf16MixedConvolvesRoundedOperands,
                            MaxPool2DMatchesTheCpuForwardAndGradient,
                            BatchNormMatchesTheCpuForwardGradientAndUpdates,
                            SynchronizedBatchNormMatchesTheCpu, CnnKernelsRefuseBadLaunches,
                            ConvBatchNormPoolModelTrainsLikeTheCpu, ResidualCnnTrainsLikeTheCpu);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_DEVICE_GENERIC_CNN_TEST_BODY_H_
