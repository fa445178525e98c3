// What lockstepd registers, with a fake GPU probe: a GPU host registers its CPU devices and
// its GPUs, so it serves CPU jobs as well as GPU ones.
#include "worker/gpu/worker_devices.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::testing::HasSubstr;

GpuProbe TwoGpus() {
  return [] {
    std::vector<GpuInfo> gpus(2);
    for (int i = 0; i < 2; ++i) {
      gpus[i].ordinal = i;
      gpus[i].product = "NVIDIA H100 80GB HBM3";
      gpus[i].compute_major = 9;
      gpus[i].pci_bus_id = i == 0 ? "0000:18:00.0" : "0000:2a:00.0";
    }
    return absl::StatusOr<std::vector<GpuInfo>>(gpus);
  };
}

std::vector<std::string> Names(const WorkerDeviceSet& set) {
  std::vector<std::string> names;
  for (const v1::Device& d : set.registered) names.push_back(d.name());
  return names;
}

TEST(WorkerDevicesTest, AGpuHostRegistersItsCpusAndItsGpus) {
  absl::StatusOr<WorkerDeviceSet> set = WorkerDevices(2, "", TwoGpus(), nullptr);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(Names(*set), (std::vector<std::string>{"CPU:0", "CPU:1", "GPU:0", "GPU:1"}));
  ASSERT_EQ(set->registered.size(), 4u);
  EXPECT_EQ(set->registered[0].kind(), v1::Device::CPU);
  EXPECT_EQ(set->registered[3].kind(), v1::Device::GPU);
  EXPECT_EQ(set->registered[3].index(), 1);
  EXPECT_EQ(set->gpus.size(), 2u);
  EXPECT_EQ(set->num_cpu_devices, 2);
  // --gpus picks among them; "none" never probes.
  absl::StatusOr<WorkerDeviceSet> one = WorkerDevices(1, "1", TwoGpus(), nullptr);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(Names(*one), (std::vector<std::string>{"CPU:0", "GPU:0"}));
  EXPECT_EQ(one->gpus[0].pci_bus_id, "0000:2a:00.0");
  bool probed = false;
  absl::StatusOr<WorkerDeviceSet> none = WorkerDevices(
      1, "none",
      [&] {
        probed = true;
        return absl::StatusOr<std::vector<GpuInfo>>(std::vector<GpuInfo>());
      },
      nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(probed);
  EXPECT_EQ(Names(*none), (std::vector<std::string>{"CPU:0"}));
}

TEST(WorkerDevicesTest, ACpuHostAndBadFlagsAreReportedClearly) {
  GpuProbe no_cuda = [] {
    return absl::StatusOr<std::vector<GpuInfo>>(absl::UnimplementedError("this build has no CUDA"));
  };
  absl::StatusOr<WorkerDeviceSet> cpu = WorkerDevices(3, "", no_cuda, nullptr);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(Names(*cpu), (std::vector<std::string>{"CPU:0", "CPU:1", "CPU:2"}));
  EXPECT_TRUE(cpu->warning.empty());
  absl::StatusOr<WorkerDeviceSet> zero = WorkerDevices(0, "", TwoGpus(), nullptr);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("--cpu_devices"));
  absl::StatusOr<WorkerDeviceSet> missing = WorkerDevices(1, "5", TwoGpus(), nullptr);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("--gpus: GPU 5 does not exist"));
}

}  // namespace
}  // namespace lockstep::worker
