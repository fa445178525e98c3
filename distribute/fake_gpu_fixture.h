// A gtest fixture for strategy tests on two fake GPUs (fake_gpu_devices.h) with the multi-rank
// fake NCCL reading and writing their device memory: what gpu_strategy_test and
// gpu_central_accumulation_test share. Test-only. Thread model: gtest's (the test's thread;
// the strategies' replica threads use the fakes, which are thread-safe).
#ifndef LOCKSTEP_DISTRIBUTE_FAKE_GPU_FIXTURE_H_
#define LOCKSTEP_DISTRIBUTE_FAKE_GPU_FIXTURE_H_

#include <gtest/gtest.h>

#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "distribute/fake_gpu_devices.h"
#include "distribute/strategy.h"

namespace lockstep::distribute {

class TwoFakeGpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<FakeGpus> gpus = MakeFakeGpus(2);
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    gpus_ = *std::move(gpus);
    world_.UseDeviceMemory(gpus_.api.get());
  }

  // The worker's devices: /gpu:0 and /gpu:1, with their fake engine devices.
  LocalDevices Gpus() const {
    LocalDevices d;
    d.num_gpus = 2;
    d.gpus = gpus_.devices;
    return d;
  }

  FakeGpus gpus_;
  collectives::nccl::FakeNcclWorld world_;
  collectives::nccl::FakeNcclApi nccl_{&world_};
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_FAKE_GPU_FIXTURE_H_
