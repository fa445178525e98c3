// GpuDeviceSet's names: a worker's GPUs are /gpu:0.. by position, each on its own CUDA ordinal
// (lockstepd --gpus=1,3: /gpu:0 is CUDA device 1, /gpu:1 CUDA device 3, as TensorFlow maps
// its device ids onto the platform's). On a fake host of four GPUs: the contexts, the tensors'
// names, the memory each replica's work lands in, NCCL's device, and Mirrored over NCCL on
// such a subset training as on the first GPUs, bit for bit.
#include "distribute/gpu_devices.h"

#include <algorithm>
#include <string>
#include <vector>

#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "distribute/fake_gpu_devices.h"
#include "distribute/gpu_strategy_test_util.h"
#include "distribute/mirrored_strategy.h"
#include "engine/gpu/device_tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::distribute {
namespace {

using collectives::nccl::FakeNcclApi;
using collectives::nccl::FakeNcclWorld;
using ::testing::HasSubstr;

TEST(GpuDeviceSetTest, NamesGpusByPositionOnTheirCudaOrdinals) {
  absl::StatusOr<FakeGpus> gpus = MakeFakeGpusAt(4, {3, 1});
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  const GpuDeviceSet& set = *gpus->devices;
  EXPECT_EQ(set.ordinals(), (std::vector<int>{3, 1}));
  ASSERT_NE(set.Find(0), nullptr);
  ASSERT_NE(set.Find(1), nullptr);
  EXPECT_EQ(set.Find(2), nullptr);
  EXPECT_EQ(set.Find(3), nullptr);  // CUDA device 3 is /gpu:0 here, not /gpu:3
  EXPECT_EQ(set.Find(0)->context->device(), 3);
  EXPECT_EQ(set.Find(1)->context->device(), 1);
  EXPECT_EQ(set.Find(0)->device().name(), "/gpu:0");
  EXPECT_EQ(set.Find(1)->device().name(), "/gpu:1");

  // A tensor copied to /gpu:0 is named /gpu:0 and lives in CUDA device 3's memory.
  std::vector<float> values(1024);
  for (int i = 0; i < 1024; ++i) values[i] = static_cast<float>(i);
  const engine::Tensor host = engine::Tensor::FromVector(values, engine::Shape{1024});
  absl::StatusOr<engine::Tensor> on0 = engine::gpu::CopyToDevice(*set.Find(0)->context, host);
  ASSERT_TRUE(on0.ok()) << on0.status();
  EXPECT_EQ(on0->device().name(), "/gpu:0");
  for (int ordinal : {0, 1, 2, 3}) {
    absl::StatusOr<PoolStats> stats = gpus->api->GetPoolStats(ordinal);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->bytes_in_use > 0, ordinal == 3) << "CUDA device " << ordinal;
  }
  absl::StatusOr<engine::Tensor> back = engine::gpu::CopyToHost(*set.Find(0)->context, *on0);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data<float>()[1023], 1023.0f);
  // The set's errors name the CUDA device.
  engine::Tensor wrong = *on0;
  absl::Status elsewhere = engine::gpu::CopyToHost(*set.Find(1)->context, wrong).status();
  EXPECT_THAT(std::string(elsewhere.message()), HasSubstr("is on /gpu:0"));
}

TEST(GpuDeviceSetTest, RefusesAnOrdinalTheHostLacksOrOneGivenTwice) {
  absl::StatusOr<FakeGpus> missing = MakeFakeGpusAt(4, {1, 4});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("building /gpu:1 (CUDA device 4"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no GPU 4 (4 visible"));
  absl::StatusOr<FakeGpus> twice = MakeFakeGpusAt(4, {1, 1});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("CUDA device 1 given twice"));
}

// Mirrored over NCCL on fake GPUs `gpus` (two of them), with its own fake NCCL.
TrainedRun TrainMirroredOverNccl(const FakeGpus& gpus, std::vector<std::string>* nccl_calls) {
  FakeNcclWorld world;
  world.UseDeviceMemory(gpus.api.get());
  FakeNcclApi nccl(&world);
  MirroredStrategyOptions o;
  o.available.num_gpus = 2;
  o.available.gpus = gpus.devices;
  o.nccl.api = &nccl;
  o.cross_device_ops = CrossDeviceOpsKind::kNcclAllReduce;
  o.communication.timeout = absl::Seconds(20);
  auto strategy = MirroredStrategy::Create(o);
  EXPECT_TRUE(strategy.ok()) << strategy.status();
  if (!strategy.ok()) return {};
  EXPECT_EQ((*strategy)->extended().worker_devices()[1].name(), "/gpu:1");
  TrainedRun run = TrainDigits(**strategy, kDigitsSteps);
  *nccl_calls = nccl.calls();
  return run;
}

// The same job on CUDA devices 1 and 3 of four as on 0 and 1 of two (which
// gpu_strategy_test compares with the CPU): bit for bit.
TEST(GpuDeviceSetTest, MirroredOverNcclOnASubsetTrainsAsOnTheFirstGpus) {
  absl::StatusOr<FakeGpus> first = MakeFakeGpus(2);
  ASSERT_TRUE(first.ok()) << first.status();
  std::vector<std::string> calls;
  const TrainedRun want = TrainMirroredOverNccl(*first, &calls);
  ASSERT_FALSE(want.weights.empty());

  absl::StatusOr<FakeGpus> subset = MakeFakeGpusAt(4, {1, 3});
  ASSERT_TRUE(subset.ok()) << subset.status();
  const TrainedRun got = TrainMirroredOverNccl(*subset, &calls);
  EXPECT_TRUE(SameWeights(got.weights, want.weights, /*rel=*/0));
  EXPECT_EQ(got.losses, want.losses);
  EXPECT_LT(got.losses.back(), got.losses.front());
  // The replicas' memory is CUDA devices 1 and 3's; NCCL ran on those ordinals.
  for (int ordinal : {0, 1, 2, 3}) {
    absl::StatusOr<PoolStats> stats = subset->api->GetPoolStats(ordinal);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->peak_bytes_in_use > 0, ordinal == 1 || ordinal == 3)
        << "CUDA device " << ordinal;
  }
  for (const char* want_call : {"device 1", "device 3"}) {
    EXPECT_NE(std::find(calls.begin(), calls.end(), want_call), calls.end()) << want_call;
  }
  EXPECT_EQ(std::find(calls.begin(), calls.end(), "device 0"), calls.end());
}

}  // namespace
}  // namespace lockstep::distribute
