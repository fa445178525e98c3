// The strategies on the real /gpu:0 (requires-gpu; run from the GPU bundle by
// tools/gpu_check.sh): 50 SGD steps of the digits MLP through OneDeviceStrategy on /gpu:0
// (RealCudaApi, the CUDA kernels, cuBLASLt with TF32 off) against OneDeviceStrategy on
// /cpu:0: every weight within 1e-4 relative (products and sums round differently on a GPU;
// training 50 steps at this learning rate does not amplify that past 1e-4), the losses
// within 1e-4. CentralStorage and gradient accumulation (K = 2) on /gpu:0 against /cpu:0 within
// 1e-4 too. A checkpoint from the GPU restores bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "distribute/central_storage_strategy.h"
#include "distribute/cuda_gpu_devices.h"
#include "distribute/gpu_strategy_test_util.h"
#include "distribute/one_device_strategy.h"

namespace lockstep::distribute {
namespace {

constexpr int kSteps = 50;

// This machine's /gpu:0 as a worker offers it (RealCudaApi, the CUDA kernels, cuBLASLt).
absl::StatusOr<LocalDevices> RealGpu0() {
  absl::StatusOr<std::shared_ptr<GpuDeviceSet>> gpus = MakeCudaGpus({0});
  if (!gpus.ok()) return gpus.status();
  LocalDevices devices;
  devices.num_gpus = 1;
  devices.gpus = *std::move(gpus);
  return devices;
}

// `got` trained as `want` did: every weight and every step's loss within 1e-4 relative.
void ExpectCloseRuns(const TrainedRun& got, const TrainedRun& want) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  EXPECT_TRUE(SameWeights(got.weights, want.weights, /*rel=*/1e-4));
  for (size_t i = 0; i < want.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], want.losses[i], 1e-4 * std::fabs(want.losses[i])) << "step " << i;
  }
  EXPECT_LT(got.losses.back(), got.losses.front());
}

TEST(GpuStrategyCudaTest, FiftySgdStepsOnGpu0MatchTheCpuEngine) {
  absl::StatusOr<LocalDevices> real = RealGpu0();
  ASSERT_TRUE(real.ok()) << real.status();
  const LocalDevices& devices = *real;
  auto gpu = OneDeviceStrategy::Create("/gpu:0", devices);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = OneDeviceStrategy::Create("/cpu:0");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const TrainedRun want = TrainDigits(**cpu, kSteps);
  const TrainedRun got = TrainDigits(**gpu, kSteps);
  ExpectCloseRuns(got, want);
  std::printf(
      "gpu_strategy_cuda_test: 50 steps on %s, final loss %.6f (cpu %.6f), peak device "
      "bytes %llu\n",
      devices.gpus->Find(0)->context->properties().name.c_str(), got.losses.back(),
      want.losses.back(),
      static_cast<unsigned long long>(
          devices.gpus->Find(0)->context->allocator_stats().peak_bytes_in_use));
}

// CentralStorage on /gpu:0 (variables and SGD on the host, the replica's buffers refreshed by
// one host->device copy per variable and step) and gradient accumulation (K = 2, summed by the
// Add kernel) on /gpu:0, each against the same job on /cpu:0 within 1e-4 relative.
TEST(GpuStrategyCudaTest, CentralStorageAndAccumulationOnGpu0MatchTheCpuEngine) {
  absl::StatusOr<LocalDevices> real = RealGpu0();
  ASSERT_TRUE(real.ok()) << real.status();
  const LocalDevices& devices = *real;
  CentralStorageStrategyOptions on_gpu;
  on_gpu.devices = {"/gpu:0"};
  on_gpu.available = devices;
  auto central_gpu = CentralStorageStrategy::Create(on_gpu);
  ASSERT_TRUE(central_gpu.ok()) << central_gpu.status();
  CentralStorageStrategyOptions on_cpu;
  on_cpu.devices = {"/cpu:0"};
  auto central_cpu = CentralStorageStrategy::Create(on_cpu);
  ASSERT_TRUE(central_cpu.ok()) << central_cpu.status();
  const TrainedRun want = TrainDigits(**central_cpu, kSteps);
  const TrainedRun got = TrainDigits(**central_gpu, kSteps);
  ExpectCloseRuns(got, want);

  auto gpu = OneDeviceStrategy::Create("/gpu:0", devices);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = OneDeviceStrategy::Create("/cpu:0");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const TrainedRun want_k2 = TrainDigits(**cpu, kSteps / 2, 0.1, kDigitsGlobalBatch, 2);
  const TrainedRun got_k2 = TrainDigits(**gpu, kSteps / 2, 0.1, kDigitsGlobalBatch, 2);
  ExpectCloseRuns(got_k2, want_k2);
}

TEST(GpuStrategyCudaTest, CheckpointFromTheGpuRestoresBitForBit) {
  absl::StatusOr<LocalDevices> real = RealGpu0();
  ASSERT_TRUE(real.ok()) << real.status();
  const LocalDevices& devices = *real;
  auto gpu = OneDeviceStrategy::Create("/gpu:0", devices);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  engine::Graph graph = DigitsGraph();
  const TrainerOptions options = DigitsTrainerOptions(0.1, /*momentum=*/true);
  auto trainer = Trainer::Create(gpu->get(), &graph, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE(TrainSteps(**gpu, **trainer, 0, 5).ok());
  auto checkpoint = MakeCheckpoint(**trainer);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto restored = Trainer::Create(gpu->get(), &graph, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE((*restored)->Restore(*checkpoint).ok());
  auto again = MakeCheckpoint(**restored);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), checkpoint->SerializeAsString());
}

}  // namespace
}  // namespace lockstep::distribute
