// JobDeviceMemory on a fake GPU: what a job reports (describe, the gauges, the chief's scalar)
// includes its input slots (engine/gpu/InputStager, counted in the device allocator's
// statistics), as torch's max_memory_allocated includes the batch it trains on.
#include "worker/job_device_memory.h"

#include <numeric>
#include <vector>

#include "distribute/fake_gpu_devices.h"
#include "distribute/one_device_strategy.h"
#include "engine/gpu/input_stager.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

TEST(JobDeviceMemoryTest, TheReportedPeakGrowsByTheInputSlotBytes) {
  absl::StatusOr<distribute::FakeGpus> gpus = distribute::MakeFakeGpus(1);
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  distribute::LocalDevices devices;
  devices.num_gpus = 1;
  devices.gpus = gpus->devices;
  auto strategy = distribute::OneDeviceStrategy::Create("/gpu:0", devices);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  absl::StatusOr<JobDeviceMemory> memory = JobDeviceMemory::Start(**strategy);
  ASSERT_TRUE(memory.ok()) << memory.status();
  const std::vector<v1::DeviceMemory> before = memory->Read();
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].device(), "/gpu:0");

  engine::gpu::DeviceContext* context = gpus->devices->Find(0)->context;
  auto stager = engine::gpu::InputStager::Create(context, 2);
  ASSERT_TRUE(stager.ok()) << stager.status();
  std::vector<float> rows(256 * 64);
  std::iota(rows.begin(), rows.end(), 0.0f);
  const engine::Tensor batch = engine::Tensor::FromVector(rows, engine::Shape{256, 64});
  absl::StatusOr<engine::gpu::InputStager::Staged> staged = (*stager)->Stage({batch}, 0, 128);
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_TRUE((*stager)->Ready(staged->slot).ok());
  const std::vector<v1::DeviceMemory> after = memory->Read();
  ASSERT_EQ(after.size(), 1u);
  // Both slots, made at the first batch.
  EXPECT_EQ(after[0].peak_bytes() - before[0].peak_bytes(), 2u * 128 * 64 * 4);
  EXPECT_EQ(after[0].reserved_bytes() - before[0].reserved_bytes(), 2u * 128 * 64 * 4);
  *staged = engine::gpu::InputStager::Staged();
  stager->reset();
}

}  // namespace
}  // namespace lockstep::worker
