#include "coordinator/gpu_requirements.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

v1::TaskStatus Worker(v1::Device::Kind kind) {
  v1::TaskStatus t;
  t.add_devices()->set_kind(v1::Device::CPU);
  if (kind == v1::Device::GPU) t.add_devices()->set_kind(v1::Device::GPU);
  return t;
}

v1::JobSpec Job(v1::CommunicationSpec::Implementation implementation) {
  v1::JobSpec spec;
  spec.mutable_communication()->set_implementation(implementation);
  return spec;
}

TEST(GpuRequirementsTest, NcclOnCpuReplicasIsRefusedNamingTheField) {
  std::vector<v1::TaskStatus> cpus = {Worker(v1::Device::CPU), Worker(v1::Device::CPU)};
  absl::Status s = CheckGpuRequirements(Job(v1::CommunicationSpec::NCCL), cpus);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("communication.implementation: NCCL needs GPU"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("none of the 2 ALIVE training worker(s)"));
  EXPECT_EQ(CheckGpuRequirements(Job(v1::CommunicationSpec::NCCL), {}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GpuRequirementsTest, NcclWithAGpuWorkerAndCpuImplementationsPass) {
  std::vector<v1::TaskStatus> mixed = {Worker(v1::Device::CPU), Worker(v1::Device::GPU)};
  EXPECT_TRUE(CheckGpuRequirements(Job(v1::CommunicationSpec::NCCL), mixed).ok());
  std::vector<v1::TaskStatus> cpus = {Worker(v1::Device::CPU)};
  EXPECT_TRUE(CheckGpuRequirements(Job(v1::CommunicationSpec::AUTO), cpus).ok());
  EXPECT_TRUE(CheckGpuRequirements(Job(v1::CommunicationSpec::RING), cpus).ok());
  EXPECT_TRUE(
      CheckGpuRequirements(Job(v1::CommunicationSpec::IMPLEMENTATION_UNSPECIFIED), {}).ok());
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
