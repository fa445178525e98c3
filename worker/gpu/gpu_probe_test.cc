// Runs in both builds: without CUDA, ProbeGpus refuses saying how to build with CUDA; with
// CUDA it lists the visible GPUs, or answers UNAVAILABLE (no driver) naming what to check.
#include "worker/gpu/gpu_probe.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::testing::HasSubstr;

TEST(GpuProbeTest, AnswersForThisBuild) {
  absl::StatusOr<std::vector<GpuInfo>> gpus = ProbeGpus();
#ifdef LOCKSTEP_WITH_CUDA
  if (gpus.ok()) {
    for (const GpuInfo& g : *gpus) {
      EXPECT_FALSE(g.product.empty());
      EXPECT_GT(g.memory_bytes, 0);
      EXPECT_FALSE(g.pci_bus_id.empty());
    }
  } else {
    EXPECT_EQ(gpus.status().code(), absl::StatusCode::kUnavailable) << gpus.status();
    EXPECT_THAT(std::string(gpus.status().message()), HasSubstr("NVIDIA driver"));
  }
#else
  ASSERT_EQ(gpus.status().code(), absl::StatusCode::kUnimplemented) << gpus.status();
  EXPECT_THAT(std::string(gpus.status().message()), HasSubstr("built without CUDA"));
  EXPECT_THAT(std::string(gpus.status().message()), HasSubstr("--config=cuda"));
#endif
}

}  // namespace
}  // namespace lockstep::worker
