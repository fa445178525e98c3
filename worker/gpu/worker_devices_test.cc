// What lockstepd registers, with a fake GPU probe: a GPU host registers its CPU devices and
// its GPUs, so it serves CPU jobs as well as GPU ones.
#include "worker/gpu/worker_devices.h"

#include "absl/strings/str_cat.h"
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

GpuProbe FourGpus() {
  return [] {
    std::vector<GpuInfo> gpus(4);
    for (int i = 0; i < 4; ++i) {
      gpus[i].ordinal = i;
      gpus[i].product = "NVIDIA H200";
      gpus[i].compute_major = 9;
      gpus[i].pci_bus_id = absl::StrCat("0000:", 10 + i, ":00.0");
    }
    return absl::StatusOr<std::vector<GpuInfo>>(gpus);
  };
}

// --gpus=1,3: the worker's /gpu:0 and /gpu:1 (registered GPU:0 and GPU:1, what the
// coordinator places replicas on) are CUDA devices 1 and 3, in the order listed; lockstepd
// builds its engine GPUs from `gpus`' ordinals (distribute:gpu_devices_test runs a job on
// such a set).
TEST(WorkerDevicesTest, ASubsetKeepsItsCudaOrdinalsUnderPositionalNames) {
  absl::StatusOr<WorkerDeviceSet> set = WorkerDevices(1, "1,3", FourGpus(), nullptr);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(Names(*set), (std::vector<std::string>{"CPU:0", "GPU:0", "GPU:1"}));
  EXPECT_EQ(set->registered[1].index(), 0);
  EXPECT_EQ(set->registered[2].index(), 1);
  EXPECT_EQ(set->registered[2].pci_bus_id(), "0000:13:00.0");
  ASSERT_EQ(set->gpus.size(), 2u);
  EXPECT_EQ(set->gpus[0].ordinal, 1);
  EXPECT_EQ(set->gpus[1].ordinal, 3);
  EXPECT_EQ(DescribeOffered(set->gpus),
            "/gpu:0 = CUDA device 1 (NVIDIA H200, 0000:11:00.0), "
            "/gpu:1 = CUDA device 3 (NVIDIA H200, 0000:13:00.0)");
  absl::StatusOr<WorkerDeviceSet> reversed = WorkerDevices(1, "3,1", FourGpus(), nullptr);
  ASSERT_TRUE(reversed.ok()) << reversed.status();
  EXPECT_EQ(reversed->gpus[0].ordinal, 3);
  // An ordinal the probe does not show: NOT_FOUND listing what it shows.
  absl::StatusOr<WorkerDeviceSet> missing = WorkerDevices(1, "1,4", FourGpus(), "0,1,2,3");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("--gpus: GPU 4 does not exist"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("this host shows 4 GPU(s): 0 "));
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("CUDA_VISIBLE_DEVICES=\"0,1,2,3\""));
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
