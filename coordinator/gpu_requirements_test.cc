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

v1::JobSpec Job(v1::CommunicationSpec::Implementation implementation, bool gpus = false) {
  v1::JobSpec spec;
  spec.mutable_communication()->set_implementation(implementation);
  spec.set_gpus(gpus);
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
  // A GPU host in the cluster does not make a CPU job's replicas GPUs.
  std::vector<v1::TaskStatus> mixed = {Worker(v1::Device::CPU), Worker(v1::Device::GPU)};
  absl::Status cpu_job = CheckGpuRequirements(Job(v1::CommunicationSpec::NCCL), mixed);
  EXPECT_EQ(cpu_job.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cpu_job.message()), HasSubstr("set `gpus: true`"));
}

TEST(GpuRequirementsTest, GpuJobsNeedAGpuWorker) {
  std::vector<v1::TaskStatus> cpus = {Worker(v1::Device::CPU)};
  absl::Status s = CheckGpuRequirements(Job(v1::CommunicationSpec::AUTO, true), cpus);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("gpus: the job asks for GPU replicas"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("none of the 1 ALIVE training worker(s)"));
}

TEST(GpuRequirementsTest, NcclAndAutoOnGpusAndCpuImplementationsPass) {
  std::vector<v1::TaskStatus> mixed = {Worker(v1::Device::CPU), Worker(v1::Device::GPU)};
  EXPECT_TRUE(CheckGpuRequirements(Job(v1::CommunicationSpec::NCCL, true), mixed).ok());
  EXPECT_TRUE(CheckGpuRequirements(Job(v1::CommunicationSpec::AUTO, true), mixed).ok());
  std::vector<v1::TaskStatus> cpus = {Worker(v1::Device::CPU)};
  EXPECT_TRUE(CheckGpuRequirements(Job(v1::CommunicationSpec::AUTO), cpus).ok());
  EXPECT_TRUE(CheckGpuRequirements(Job(v1::CommunicationSpec::RING), cpus).ok());
  EXPECT_TRUE(
      CheckGpuRequirements(Job(v1::CommunicationSpec::IMPLEMENTATION_UNSPECIFIED), {}).ok());
  // RING runs host collectives: refused for GPU replicas, naming the field.
  absl::Status ring = CheckGpuRequirements(Job(v1::CommunicationSpec::RING, true), mixed);
  EXPECT_EQ(ring.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ring.message()), StartsWith("communication.implementation: RING"));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
