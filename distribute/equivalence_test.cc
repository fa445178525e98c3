// The promise of synchronous data parallelism: 50 SGD steps of an MLP with global batch 16
// give the same weights (within 1e-5 relative) under OneDevice, Mirrored over 4 logical CPU
// devices, CentralStorage over 4, and MultiWorkerMirrored over 2 in-process workers x 2
// devices on the TCP transport (hierarchical and flat all-reduce), through both the
// overlapped (replica-context) and the cross-replica gradient paths.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "collectives/in_memory_store.h"
#include "distribute/central_storage_strategy.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/one_device_strategy.h"
#include "distribute/test_sources.h"
#include "distribute/trainer.h"
#include "engine/variable_set.h"

namespace lockstep::distribute {
namespace {

using engine::Shape;
using engine::Tensor;

constexpr int64_t kGlobalBatch = 16;
constexpr int kSteps = 50;

engine::Graph Mlp() {
  engine::Graph g(/*seed=*/7);
  v1::Initializer glorot;
  glorot.set_kind(v1::Initializer::GLOROT_UNIFORM);
  int x = *g.Input("features", DType::kF32, Shape{-1, 6});
  int labels = *g.Input("labels", DType::kI64, Shape{-1});
  int w1 = *g.Variable("d0/kernel", DType::kF32, Shape{6, 8}, glorot, 6, 8);
  int b1 = *g.Variable("d0/bias", DType::kF32, Shape{8}, v1::Initializer(), 6, 8);
  int h = *g.Op(v1::RELU, {*g.Op(v1::BIAS_ADD, {*g.Op(v1::MATMUL, {x, w1}), b1})});
  int w2 = *g.Variable("d1/kernel", DType::kF32, Shape{8, 3}, glorot, 8, 3);
  int b2 = *g.Variable("d1/bias", DType::kF32, Shape{3}, v1::Initializer(), 8, 3);
  int logits = *g.Op(v1::BIAS_ADD, {*g.Op(v1::MATMUL, {h, w2}), b2});
  EXPECT_TRUE(g.SetLoss(*g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {logits, labels})).ok());
  return g;
}

// Mlp with batch normalisation after the first layer: its moving statistics are
// non-trainable variables that every step updates. Synchronized: over the global batch.
engine::Graph BatchNormMlpWith(bool synchronized) {
  engine::Graph g(/*seed=*/7);
  v1::Initializer glorot, ones;
  glorot.set_kind(v1::Initializer::GLOROT_UNIFORM);
  ones.set_kind(v1::Initializer::CONSTANT);
  ones.set_value(1);
  int x = *g.Input("features", DType::kF32, Shape{-1, 6});
  int labels = *g.Input("labels", DType::kI64, Shape{-1});
  int w1 = *g.Variable("d0/kernel", DType::kF32, Shape{6, 8}, glorot, 6, 8);
  int h = *g.Op(v1::MATMUL, {x, w1});
  std::vector<int> bn = {h};
  bn.push_back(*g.Variable("bn/gamma", DType::kF32, Shape{8}, ones, 8, 8));
  bn.push_back(*g.Variable("bn/beta", DType::kF32, Shape{8}, v1::Initializer(), 8, 8));
  bn.push_back(*g.Variable("bn/moving_mean", DType::kF32, Shape{8}, v1::Initializer(), 8, 8,
                           /*trainable=*/false));
  bn.push_back(*g.Variable("bn/moving_variance", DType::kF32, Shape{8}, ones, 8, 8,
                           /*trainable=*/false));
  h = *g.Op(v1::RELU, {*g.BatchNorm(bn, 0.9f, 1e-3f, "bn", 0, synchronized)});
  int w2 = *g.Variable("d1/kernel", DType::kF32, Shape{8, 3}, glorot, 8, 3);
  int logits = *g.Op(v1::MATMUL, {h, w2});
  EXPECT_TRUE(g.SetLoss(*g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {logits, labels})).ok());
  return g;
}

engine::Graph BatchNormMlp() { return BatchNormMlpWith(false); }
engine::Graph SyncBatchNormMlp() { return BatchNormMlpWith(true); }

// kSteps global batches of a deterministic 3-class problem.
DatasetSource Data(int64_t n = kGlobalBatch * kSteps) {
  std::vector<float> features(n * 6);
  std::vector<int64_t> labels(n);
  uint64_t state = 12345;
  for (int64_t i = 0; i < n; ++i) {
    float best = -1e9;
    for (int j = 0; j < 6; ++j) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      float v = static_cast<float>((state >> 40) % 2000) / 1000.0f - 1.0f;
      features[i * 6 + j] = v;
      if (j < 3 && v > best) {
        best = v;
        labels[i] = j;
      }
    }
  }
  return TensorSliceSource({Tensor::FromVector<float>(features, Shape{n, 6}),
                            Tensor::FromVector<int64_t>(labels, Shape{n})});
}

// Trains kSteps steps and returns the final weights of the first copy; every step's loss
// goes to *losses when it is not null.
std::vector<Tensor> Train(Strategy* strategy, bool overlap, double* last_loss = nullptr,
                          int64_t rows = kGlobalBatch * kSteps, engine::Graph (*model)() = Mlp,
                          double clipnorm = 0, std::vector<double>* losses = nullptr) {
  engine::Graph graph = model();
  TrainerOptions options;
  options.optimizer.mutable_sgd();
  options.optimizer.mutable_learning_rate()->mutable_constant()->set_value(0.1);
  options.optimizer.set_global_clipnorm(clipnorm);
  options.global_batch_size = kGlobalBatch;
  options.overlap_all_reduce = overlap;
  auto trainer = Trainer::Create(strategy, &graph, options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  auto dataset = strategy->ExperimentalDistributeDataset(Data(rows), kGlobalBatch);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  int steps = 0;
  while (true) {
    auto inputs = (*dataset)->Next();
    EXPECT_TRUE(inputs.ok()) << inputs.status();
    if (!inputs.ok() || !inputs->has_value()) break;
    auto result = (*trainer)->Step(**inputs);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    if (last_loss != nullptr) *last_loss = result->loss;
    if (losses != nullptr) losses->push_back(result->loss);
    // The step's phases were timed, and they fit in the step.
    const StepTimes& t = result->times;
    EXPECT_GT(t.compute, absl::ZeroDuration());
    EXPECT_GT(t.apply, absl::ZeroDuration());
    EXPECT_GE(t.allreduce_wait, absl::ZeroDuration());
    EXPECT_LE(t.compute + t.allreduce_wait + t.apply, t.total);
    ++steps;
  }
  EXPECT_EQ(steps, (rows + kGlobalBatch - 1) / kGlobalBatch);
  std::vector<Tensor> weights;
  for (const DistributedVariable& v : (*trainer)->variables()) {
    // Mirrored copies must stay bitwise identical.
    for (const Tensor& c : v.copies()) EXPECT_TRUE(c.BitwiseEquals(v.copies()[0])) << v.name();
    weights.push_back(v.copies()[0].Clone());
  }
  return weights;
}

// The largest difference over all variables, relative to each variable's largest value.
double MaxRelativeDifference(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  double worst = 0;
  for (size_t v = 0; v < want.size() && v < got.size(); ++v) {
    double max_abs = 0, max_diff = 0;
    for (int64_t i = 0; i < want[v].num_elements(); ++i) {
      max_abs = std::max(max_abs, std::abs(want[v].AsDouble(i)));
      max_diff = std::max(max_diff, std::abs(got[v].AsDouble(i) - want[v].AsDouble(i)));
    }
    worst = std::max(worst, max_diff / std::max(max_abs, 1e-30));
  }
  return worst;
}

void ExpectClose(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                 const std::string& what, double tolerance = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t v = 0; v < want.size(); ++v) {
    double max_abs = 0, max_diff = 0;
    for (int64_t i = 0; i < want[v].num_elements(); ++i) {
      max_abs = std::max(max_abs, std::abs(want[v].AsDouble(i)));
      max_diff = std::max(max_diff, std::abs(got[v].AsDouble(i) - want[v].AsDouble(i)));
    }
    EXPECT_LE(max_diff, tolerance * max_abs) << what << ", variable " << v;
  }
}

// Mirrored over four logical CPU devices.
std::unique_ptr<Strategy> MirroredOverFour(
    CrossDeviceOpsKind kind = CrossDeviceOpsKind::kReduceToOneDevice, size_t bytes_per_pack = 0) {
  MirroredStrategyOptions options;
  options.available.num_cpu_devices = 4;
  options.cross_device_ops = kind;
  options.communication.bytes_per_pack = bytes_per_pack;
  auto mirrored = MirroredStrategy::Create(options);
  EXPECT_TRUE(mirrored.ok()) << mirrored.status();
  return mirrored.ok() ? std::move(*mirrored) : nullptr;
}

class EquivalenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto one = OneDeviceStrategy::Create();
    ASSERT_TRUE(one.ok());
    double loss0 = 0;
    reference_ = new std::vector<Tensor>(Train(one->get(), /*overlap=*/false, &loss0));
    // Training did something: the weights moved from their initial values.
    engine::Graph g = Mlp();
    auto init = engine::VariableSet::Initialize(g);
    ASSERT_TRUE(init.ok());
    ASSERT_FALSE(init->tensor(0).BitwiseEquals((*reference_)[0]));
  }
  static void TearDownTestSuite() { delete reference_; }
  static std::vector<Tensor>* reference_;
};
std::vector<Tensor>* EquivalenceTest::reference_ = nullptr;

TEST_F(EquivalenceTest, OneDeviceOverlappedPathMatches) {
  auto one = OneDeviceStrategy::Create();
  ExpectClose(Train(one->get(), true), *reference_, "OneDevice, overlapped");
}

TEST_F(EquivalenceTest, MirroredOverFourDevices) {
  for (CrossDeviceOpsKind kind :
       {CrossDeviceOpsKind::kReduceToOneDevice, CrossDeviceOpsKind::kCollective}) {
    for (bool overlap : {true, false}) {
      std::unique_ptr<Strategy> mirrored = MirroredOverFour(kind);
      ASSERT_NE(mirrored, nullptr);
      ExpectClose(Train(mirrored.get(), overlap), *reference_,
                  std::string("Mirrored, ") + CrossDeviceOpsKindName(kind) +
                      (overlap ? ", overlapped" : ", cross-replica"));
    }
  }
}

TEST_F(EquivalenceTest, CentralStorageOverFourDevices) {
  CentralStorageStrategyOptions options;
  options.available.num_cpu_devices = 4;
  auto central = CentralStorageStrategy::Create(options);
  ASSERT_TRUE(central.ok());
  ExpectClose(Train(central->get(), true), *reference_, "CentralStorage");
}

// Batch norm's moving statistics are all-reduced like gradients (their updates are the
// replicas' mean), so mirrored copies stay bitwise identical (Train checks) under every
// path; the statistics moved.
TEST_F(EquivalenceTest, BatchNormMovingStatisticsStayMirrored) {
  for (bool overlap : {true, false}) {
    std::unique_ptr<Strategy> mirrored = MirroredOverFour();
    ASSERT_NE(mirrored, nullptr);
    std::vector<Tensor> w =
        Train(mirrored.get(), overlap, nullptr, kGlobalBatch * kSteps, BatchNormMlp);
    ASSERT_EQ(w.size(), 6u);
    EXPECT_NE(w[3].AsDouble(0), 0.0) << "moving_mean, overlap " << overlap;
    EXPECT_NE(w[4].AsDouble(0), 1.0) << "moving_variance, overlap " << overlap;
  }
}

// SyncBatchNorm: four replicas with synchronized statistics compute what one replica
// computes on the whole batch (gamma, beta, the moving statistics and the other layers
// within 1e-5), under both kinds of CrossDeviceOps and both gradient paths; per-replica
// statistics (Keras' default) do not.
TEST_F(EquivalenceTest, SyncBatchNormOverFourReplicasMatchesOneReplicaOnTheWholeBatch) {
  auto one = OneDeviceStrategy::Create();
  const std::vector<Tensor> want =
      Train(one->get(), false, nullptr, kGlobalBatch * kSteps, SyncBatchNormMlp);
  ASSERT_EQ(want.size(), 6u);
  for (CrossDeviceOpsKind kind :
       {CrossDeviceOpsKind::kReduceToOneDevice, CrossDeviceOpsKind::kCollective}) {
    for (bool overlap : {true, false}) {
      std::unique_ptr<Strategy> mirrored = MirroredOverFour(kind, 100);
      ASSERT_NE(mirrored, nullptr);
      ExpectClose(Train(mirrored.get(), overlap, nullptr, kGlobalBatch * kSteps, SyncBatchNormMlp),
                  want,
                  std::string("SyncBatchNorm, ") + CrossDeviceOpsKindName(kind) +
                      (overlap ? ", overlapped" : ", cross-replica"));
    }
  }
  // Each replica's own statistics (batches of 4) train a different model.
  std::unique_ptr<Strategy> mirrored = MirroredOverFour();
  ASSERT_NE(mirrored, nullptr);
  const std::vector<Tensor> local =
      Train(mirrored.get(), true, nullptr, kGlobalBatch * kSteps, BatchNormMlp);
  EXPECT_GT(MaxRelativeDifference(local, want), 1e-3);
}

// A last partial batch of 2 leaves two of four replicas with no examples: they run a phantom
// batch that makes the same synchronized sums, contributing nothing.
TEST_F(EquivalenceTest, SyncBatchNormWithEmptyReplicasMatchesOneReplica) {
  const int64_t rows = kGlobalBatch * 3 + 2;
  auto one = OneDeviceStrategy::Create();
  const std::vector<Tensor> want = Train(one->get(), false, nullptr, rows, SyncBatchNormMlp);
  for (CrossDeviceOpsKind kind :
       {CrossDeviceOpsKind::kReduceToOneDevice, CrossDeviceOpsKind::kCollective}) {
    std::unique_ptr<Strategy> mirrored = MirroredOverFour(kind);
    ASSERT_NE(mirrored, nullptr);
    ExpectClose(Train(mirrored.get(), true, nullptr, rows, SyncBatchNormMlp), want,
                std::string("SyncBatchNorm, partial batch, ") + CrossDeviceOpsKindName(kind));
  }
}

// A last partial batch of 2 leaves three of four replicas with empty batches: they still
// take part in every (fused) all-reduce, with zero gradients, in the graph's order.
TEST_F(EquivalenceTest, PartialLastBatchWithEmptyReplicas) {
  const int64_t rows = kGlobalBatch * 3 + 2;
  auto one = OneDeviceStrategy::Create();
  std::vector<Tensor> want = Train(one->get(), false, nullptr, rows);
  for (CrossDeviceOpsKind kind :
       {CrossDeviceOpsKind::kReduceToOneDevice, CrossDeviceOpsKind::kCollective}) {
    std::unique_ptr<Strategy> mirrored = MirroredOverFour(kind, 100);
    ASSERT_NE(mirrored, nullptr);
    ExpectClose(Train(mirrored.get(), true, nullptr, rows), want,
                std::string("partial batch, ") + CrossDeviceOpsKindName(kind));
  }
}

// Clipping by global norm reads the all-reduced gradients, the same on every replica: a
// tight norm (it clips most steps) gives the same weights under Mirrored as under OneDevice,
// and different ones from unclipped training.
TEST_F(EquivalenceTest, GlobalClipnormOverReducedGradientsMatches) {
  constexpr double kClip = 0.05;
  auto one = OneDeviceStrategy::Create();
  const std::vector<Tensor> want =
      Train(one->get(), false, nullptr, kGlobalBatch * kSteps, Mlp, kClip);
  ASSERT_FALSE(want.empty());
  EXPECT_FALSE(want[0].BitwiseEquals((*reference_)[0]));
  for (bool overlap : {true, false}) {
    std::unique_ptr<Strategy> mirrored = MirroredOverFour();
    ASSERT_NE(mirrored, nullptr);
    ExpectClose(Train(mirrored.get(), overlap, nullptr, kGlobalBatch * kSteps, Mlp, kClip), want,
                overlap ? "clipped, overlapped" : "clipped, cross-replica");
  }
}

// Gradient accumulation: 2 micro-batches of 8 per step give the weights of one batch of 16,
// under OneDevice and Mirrored over 4 devices (micro-batches of 2 per replica), through the
// overlapped and the cross-replica paths; 1 x 16 is the reference.
TEST_F(EquivalenceTest, AccumulatingTwoMicroBatchesMatchesOneDoubleBatch) {
  for (bool mirrored : {false, true}) {
    for (bool overlap : {true, false}) {
      std::unique_ptr<Strategy> strategy;
      if (mirrored) {
        MirroredStrategyOptions options;
        options.available.num_cpu_devices = 4;
        strategy = *MirroredStrategy::Create(options);
      } else {
        strategy = *OneDeviceStrategy::Create();
      }
      engine::Graph graph = Mlp();
      TrainerOptions options;
      options.optimizer.mutable_sgd();
      options.optimizer.mutable_learning_rate()->mutable_constant()->set_value(0.1);
      options.optimizer.set_gradient_accumulation_steps(2);
      options.global_batch_size = kGlobalBatch / 2;
      options.overlap_all_reduce = overlap;
      auto trainer = Trainer::Create(strategy.get(), &graph, options);
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      EXPECT_EQ((*trainer)->accumulation_steps(), 2);
      auto dataset = strategy->ExperimentalDistributeDataset(Data(), kGlobalBatch / 2);
      ASSERT_TRUE(dataset.ok()) << dataset.status();
      int steps = 0;
      while (true) {
        std::vector<std::vector<DistributedValues>> micro;
        for (int m = 0; m < 2; ++m) {
          auto inputs = (*dataset)->Next();
          ASSERT_TRUE(inputs.ok()) << inputs.status();
          if (!inputs->has_value()) break;
          micro.push_back(**inputs);
        }
        if (micro.empty()) break;
        ASSERT_EQ(micro.size(), 2u);
        // One micro-batch where the trainer wants two: refused, nothing applied.
        if (steps == 0) {
          EXPECT_EQ((*trainer)->Step(micro[0]).status().code(), absl::StatusCode::kInvalidArgument);
        }
        auto result = (*trainer)->Step(absl::MakeConstSpan(micro));
        ASSERT_TRUE(result.ok()) << result.status();
        EXPECT_EQ(result->examples, kGlobalBatch);
        ++steps;
      }
      EXPECT_EQ(steps, kSteps);
      EXPECT_EQ((*trainer)->steps(), kSteps);
      std::vector<Tensor> weights;
      for (const DistributedVariable& v : (*trainer)->variables()) {
        for (const Tensor& c : v.copies()) EXPECT_TRUE(c.BitwiseEquals(v.copies()[0])) << v.name();
        weights.push_back(v.copies()[0].Clone());
      }
      ExpectClose(weights, *reference_,
                  absl::StrCat("2 x 8 accumulated, ", mirrored ? "Mirrored" : "OneDevice",
                               overlap ? ", overlapped" : ", cross-replica"));
    }
  }
}

// Two workers as threads of this process, each with `devices` logical CPU devices, joined
// over `transport` (TCP on loopback, or shared memory) through an in-memory rendezvous store.
// `reference` null: the workers are only compared with each other. Returns worker 0's final
// weights; its losses go to *losses when it is not null.
std::vector<Tensor> RunTwoWorkers(
    bool hierarchical, CommunicationOptions comm, const std::string& prefix,
    std::vector<Tensor>* reference, engine::Graph (*model)() = Mlp,
    collectives::TransportKind transport = collectives::TransportKind::kTcp, int devices = 2,
    std::vector<double>* losses = nullptr) {
  collectives::InMemoryStore store;
  std::vector<std::vector<Tensor>> weights(2);
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      auto cluster = TfConfig::Create({{"worker", {"127.0.0.1:1111", "127.0.0.1:2222"}}},
                                      TaskRef{"worker", w});
      ASSERT_TRUE(cluster.ok()) << cluster.status();
      MultiWorkerMirroredStrategyOptions options;
      options.available.num_cpu_devices = devices;
      options.communication = comm;
      options.transport = transport;
      options.hierarchical = hierarchical;
      options.store = &store;
      options.key_prefix = prefix;
      options.secret = "job-secret";
      options.connect_timeout = absl::Seconds(20);
      auto strategy = MultiWorkerMirroredStrategy::Create(*cluster, options);
      ASSERT_TRUE(strategy.ok()) << strategy.status();
      EXPECT_EQ((*strategy)->num_replicas_in_sync(), 2 * devices);
      EXPECT_EQ((*strategy)->worker_index(), w);
      ASSERT_TRUE((*strategy)->cluster_resolver().has_value());
      weights[w] = Train(strategy->get(), /*overlap=*/true, nullptr, kGlobalBatch * kSteps, model,
                         /*clipnorm=*/0, w == 0 ? losses : nullptr);
    });
  }
  for (std::thread& t : workers) t.join();
  if (reference != nullptr) ExpectClose(weights[0], *reference, prefix + " worker 0");
  EXPECT_EQ(weights[1].size(), weights[0].size());
  for (size_t v = 0; v < weights[0].size() && v < weights[1].size(); ++v) {
    EXPECT_TRUE(weights[1][v].BitwiseEquals(weights[0][v])) << "workers diverged, variable " << v;
  }
  return weights[0];
}

TEST_F(EquivalenceTest, MultiWorkerMirroredHierarchicalOverTcp) {
  CommunicationOptions comm;
  comm.bytes_per_pack = 100;  // several cross-worker packs per step
  comm.timeout = absl::Seconds(30);
  RunTwoWorkers(/*hierarchical=*/true, comm, "hierarchical", reference_);
}

TEST_F(EquivalenceTest, MultiWorkerMirroredFlatRingWithFusionOverTcp) {
  CommunicationOptions comm;
  comm.implementation = CommunicationOptions::Implementation::kRing;
  comm.bytes_per_pack = 64;  // several packs for the cross-worker reductions
  comm.timeout = absl::Seconds(30);
  RunTwoWorkers(/*hierarchical=*/false, comm, "flat", reference_);
}

// Batch norm's moving statistics, all-reduced with the gradients across workers (hierarchical:
// local sums first), keep every copy on both workers identical.
TEST_F(EquivalenceTest, MultiWorkerMirroredBatchNormStaysMirrored) {
  CommunicationOptions comm;
  comm.bytes_per_pack = 100;
  comm.timeout = absl::Seconds(30);
  RunTwoWorkers(/*hierarchical=*/true, comm, "batch_norm", nullptr, BatchNormMlp);
}

// SyncBatchNorm across two workers of two replicas each (hierarchical and flat): the same
// weights as one replica on the whole batch.
TEST_F(EquivalenceTest, MultiWorkerMirroredSyncBatchNormMatchesOneReplica) {
  auto one = OneDeviceStrategy::Create();
  std::vector<Tensor> want =
      Train(one->get(), false, nullptr, kGlobalBatch * kSteps, SyncBatchNormMlp);
  CommunicationOptions comm;
  comm.bytes_per_pack = 100;
  comm.timeout = absl::Seconds(30);
  RunTwoWorkers(/*hierarchical=*/true, comm, "sync_bn_hierarchical", &want, SyncBatchNormMlp);
  RunTwoWorkers(/*hierarchical=*/false, comm, "sync_bn_flat", &want, SyncBatchNormMlp);
}

// communication.compression BF16: the gradient packs travel as bf16. Every replica receives
// the same rounded sums, so the copies on both workers stay bitwise identical; the weights
// follow the same job uncompressed within bf16 rounding, but not bitwise (the rounding is
// real: an uncompressed run of one configuration is bitwise reproducible), and the loss
// falls. Two replicas (one per worker) over TCP and over shared memory with the gradients in
// the zero-copy heap, 2 x 2 hierarchical (the local sums' packs) and 2 x 2 flat (every
// replica's packs).
void ExpectBf16TrainingTracksF32(bool hierarchical, collectives::TransportKind transport,
                                 int devices, const std::string& prefix) {
  CommunicationOptions comm;
  comm.bytes_per_pack = 100;  // several packs per step
  comm.timeout = absl::Seconds(30);
  if (transport == collectives::TransportKind::kShm) comm.shm_heap_bytes = 1 << 20;
  const std::vector<Tensor> uncompressed =
      RunTwoWorkers(hierarchical, comm, prefix + "_f32", nullptr, Mlp, transport, devices);
  comm.compression = collectives::Compression::kBF16;
  std::vector<double> losses;
  const std::vector<Tensor> weights =
      RunTwoWorkers(hierarchical, comm, prefix, nullptr, Mlp, transport, devices, &losses);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps));
  double first = 0, last = 0;  // means of the first and the last ten steps
  for (int s = 0; s < 10; ++s) {
    first += losses[s] / 10;
    last += losses[kSteps - 1 - s] / 10;
  }
  EXPECT_LT(last, 0.8 * first) << prefix << ": the loss did not fall";
  ExpectClose(weights, uncompressed, prefix + " against f32", /*tolerance=*/2e-2);
  bool any_differs = false;
  for (size_t v = 0; v < weights.size() && v < uncompressed.size(); ++v) {
    any_differs = any_differs || !weights[v].BitwiseEquals(uncompressed[v]);
  }
  EXPECT_TRUE(any_differs) << prefix << ": bitwise the f32 weights; were the gradients compressed?";
}

TEST_F(EquivalenceTest, Bf16CompressedGradientsTwoReplicasOverTcp) {
  ExpectBf16TrainingTracksF32(/*hierarchical=*/true, collectives::TransportKind::kTcp, 1,
                              "bf16_tcp");
}

TEST_F(EquivalenceTest, Bf16CompressedGradientsTwoReplicasOverShmHeap) {
  ExpectBf16TrainingTracksF32(/*hierarchical=*/true, collectives::TransportKind::kShm, 1,
                              absl::StrCat("bf16_shm_", getpid()));
}

// Two local replicas per worker: their local sum (in local replica 0's gradient) is what is
// compressed, and every local copy receives the widened result.
TEST_F(EquivalenceTest, Bf16CompressedGradientsHierarchicalTwoByTwo) {
  ExpectBf16TrainingTracksF32(/*hierarchical=*/true, collectives::TransportKind::kTcp, 2,
                              "bf16_hierarchical");
}

TEST_F(EquivalenceTest, Bf16CompressedGradientsFlatTwoByTwo) {
  ExpectBf16TrainingTracksF32(/*hierarchical=*/false, collectives::TransportKind::kTcp, 2,
                              "bf16_flat");
}

}  // namespace
}  // namespace lockstep::distribute
