// Synchronized batch normalization on GPU replicas, on CPU machines: a dense + synchronized
// batch norm + ReLU + dense model on the digits data (gpu_strategy_test_util.h) trains under
// Mirrored over 2 fake GPUs (fake_gpu_devices.h: FakeCudaApi, the grid emulator's kernels,
// FakeBlasApi; the multi-rank fake NCCL on device memory) to the weights, moving statistics
// included, of Mirrored over 2 CPU devices, bit for bit: the device computes each replica's
// f64 partial sums in the CPU kernel's order, the trainer's cross_replica_sum adds the host
// copies as it does for CPU replicas, and the rest is the CPU's float operations in its order.
// The last step is a partial batch that leaves replica 1 no examples: its phantom batch makes
// the same synchronized sums on the GPU, contributing nothing. A control shows the comparison
// can fail: per-replica statistics (no synchronization) train other weights, the replicas'
// halves of each batch being different examples.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "distribute/fake_gpu_devices.h"
#include "distribute/gpu_strategy_test_util.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/tensor_math.h"
#include "engine/model_builder.h"

namespace lockstep::distribute {
namespace {

using collectives::nccl::FakeNcclApi;
using collectives::nccl::FakeNcclWorld;
using engine::Tensor;

constexpr int kFullSteps = 6;
constexpr int64_t kPartialRows = 5;  // the last step's batch: all of it replica 0's

// The model, its batch norm synchronized or not (SYNC below).
constexpr char kModel[] = R"({
    "inputShape": [64], "seed": 13, "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
    "layers": [
      {"name": "hidden", "dense": {"units": 12}},
      {"name": "bn", "batch_norm": {"momentum": 0.8, "synchronized": SYNC}},
      {"relu": {}},
      {"name": "logits", "dense": {"units": 10}}
    ]})";

engine::Graph SyncBatchNormGraph(bool synchronized) {
  std::string json = kModel;
  json.replace(json.find("SYNC"), 4, synchronized ? "true" : "false");
  absl::StatusOr<v1::ModelSpec> spec = engine::ParseModelSpecJson(json);
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<engine::Graph> graph = engine::BuildModel(*spec);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// kFullSteps steps of kDigitsGlobalBatch examples split in halves over the two replicas, then
// one of kPartialRows examples, all on replica 0 (replica 1 runs a phantom batch). The
// trainer's variables on the host (the moving statistics among them) and the losses.
TrainedRun Train(Strategy& strategy, bool synchronized) {
  TrainedRun run;
  engine::Graph graph = SyncBatchNormGraph(synchronized);
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(&strategy, &graph, DigitsTrainerOptions(0.1, /*momentum=*/true));
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return run;
  const std::vector<engine::Device>& devices = strategy.extended().worker_devices();
  EXPECT_EQ(devices.size(), 2u);
  for (int step = 0; step <= kFullSteps; ++step) {
    const bool partial = step == kFullSteps;
    const int64_t rows = partial ? kPartialRows : kDigitsGlobalBatch;
    const int64_t split = partial ? rows : rows / 2;  // replica 0's rows
    std::vector<DistributedValues> inputs;
    for (const Tensor& t : DigitsBatch(rows, step)) {
      absl::StatusOr<Tensor> first = SliceAxis0(t, 0, split);
      absl::StatusOr<Tensor> second = SliceAxis0(t, split, rows);
      EXPECT_TRUE(first.ok() && second.ok());
      if (!first.ok() || !second.ok()) return {};
      inputs.push_back(DistributedValues::PerReplica(
          {HostCopy(*first, devices[0]), HostCopy(*second, devices[1])}));
    }
    absl::StatusOr<TrainStepResult> result = (*trainer)->Step(inputs);
    EXPECT_TRUE(result.ok()) << "step " << step << ": " << result.status();
    if (!result.ok()) return {};
    run.losses.push_back(result->loss);
  }
  absl::StatusOr<std::vector<Tensor>> weights = (*trainer)->HostVariables();
  EXPECT_TRUE(weights.ok()) << weights.status();
  if (weights.ok()) run.weights = *std::move(weights);
  return run;
}

class SyncBatchNormGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<FakeGpus> gpus = MakeFakeGpus(2);
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    gpus_ = *std::move(gpus);
    world_.UseDeviceMemory(gpus_.api.get());
  }

  std::unique_ptr<Strategy> MirroredOverGpus(CrossDeviceOpsKind kind) {
    MirroredStrategyOptions o;
    o.available.num_gpus = 2;
    o.available.gpus = gpus_.devices;
    o.nccl.api = &nccl_;
    o.cross_device_ops = kind;
    o.communication.timeout = absl::Seconds(20);
    absl::StatusOr<std::unique_ptr<Strategy>> s = MirroredStrategy::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  FakeGpus gpus_;
  FakeNcclWorld world_;
  FakeNcclApi nccl_{&world_};
};

TEST_F(SyncBatchNormGpuTest, MirroredOverTwoGpusMatchesTwoCpuDevicesBitForBit) {
  MirroredStrategyOptions cpu_options;
  cpu_options.available.num_cpu_devices = 2;
  absl::StatusOr<std::unique_ptr<Strategy>> cpu = MirroredStrategy::Create(cpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const TrainedRun want = Train(**cpu, /*synchronized=*/true);
  ASSERT_FALSE(want.weights.empty());
  ASSERT_EQ(want.losses.size(), kFullSteps + 1u);
  EXPECT_LT(want.losses[kFullSteps - 1], want.losses[0]);  // it trains

  for (CrossDeviceOpsKind kind :
       {CrossDeviceOpsKind::kNcclAllReduce, CrossDeviceOpsKind::kReduceToOneDevice}) {
    SCOPED_TRACE(CrossDeviceOpsKindName(kind));
    std::unique_ptr<Strategy> gpu = MirroredOverGpus(kind);
    ASSERT_NE(gpu, nullptr);
    ASSERT_EQ(gpu->extended().worker_devices()[1].name(), "/gpu:1");
    const TrainedRun got = Train(*gpu, /*synchronized=*/true);
    EXPECT_TRUE(SameWeights(got.weights, want.weights, /*rel=*/0));
    EXPECT_EQ(got.losses, want.losses);
  }

  // Control: each replica's own statistics over its half train other weights, which the
  // comparison sees (on the GPUs as on the CPUs).
  std::unique_ptr<Strategy> gpu = MirroredOverGpus(CrossDeviceOpsKind::kNcclAllReduce);
  ASSERT_NE(gpu, nullptr);
  const TrainedRun local = Train(*gpu, /*synchronized=*/false);
  ASSERT_FALSE(local.weights.empty());
  EXPECT_FALSE(SameWeights(local.weights, want.weights, /*rel=*/1e-4));
  const TrainedRun local_cpu = Train(**cpu, /*synchronized=*/false);
  EXPECT_TRUE(SameWeights(local.weights, local_cpu.weights, /*rel=*/0));
}

}  // namespace
}  // namespace lockstep::distribute
