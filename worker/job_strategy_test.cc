#include "worker/job_strategy.h"

#include "absl/strings/str_cat.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {
namespace {

TEST(JobCommunicationOptionsTest, CompressionFollowsTheSpec) {
  v1::JobSpec spec;
  EXPECT_EQ(JobCommunicationOptions(spec).compression, collectives::Compression::kNone);
  spec.mutable_communication()->set_compression(v1::CommunicationSpec::NONE);
  EXPECT_EQ(JobCommunicationOptions(spec).compression, collectives::Compression::kNone);
  spec.mutable_communication()->set_compression(v1::CommunicationSpec::BF16);
  EXPECT_EQ(JobCommunicationOptions(spec).compression, collectives::Compression::kBF16);
}

v1::Partition OneWorkerJob(v1::StrategyKind kind, bool gpus) {
  v1::Partition p;
  p.set_job_id("job-7");
  SetWorkerGroup({"127.0.0.1:2000"}, 0, &p);
  p.mutable_spec()->set_strategy(kind);
  p.mutable_spec()->set_gpus(gpus);
  p.mutable_spec()->mutable_communication()->set_timeout_ms(20000);
  return p;
}

std::vector<std::string> DeviceNames(distribute::Strategy& s) {
  std::vector<std::string> names;
  for (const engine::Device& d : s.extended().worker_devices()) {
    names.push_back(d.name());
  }
  return names;
}

// A host with 2 GPUs and 2 CPU devices serves CPU jobs on its CPUs, GPU jobs on its GPUs.
TEST(MakeJobStrategyTest, EachJobLandsOnTheDeviceKindItAskedFor) {
  collectives::nccl::FakeNcclWorld world;
  collectives::nccl::FakeNcclApi api(&world);
  JobStrategyOptions options;
  options.devices.num_cpu_devices = 2;
  options.devices.num_gpus = 2;
  options.nccl.api = &api;
  struct Case {
    v1::StrategyKind kind;
    bool gpus;
    std::vector<std::string> devices;
  };
  const std::vector<Case> cases = {
      {v1::ONE_DEVICE, false, {"/cpu:0"}},
      {v1::ONE_DEVICE, true, {"/gpu:0"}},
      {v1::MIRRORED, false, {"/cpu:0", "/cpu:1"}},
      {v1::MIRRORED, true, {"/gpu:0", "/gpu:1"}},
      {v1::CENTRAL_STORAGE, false, {"/cpu:0", "/cpu:1"}},
  };
  ASSERT_EQ(cases.size(), 5u);
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(v1::StrategyKind_Name(c.kind), c.gpus ? " gpus" : " cpus"));
    auto s = MakeJobStrategy(OneWorkerJob(c.kind, c.gpus), options);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(DeviceNames(**s), c.devices);
  }
  // Mirrored on GPUs defaults to NCCL; on the same host's CPUs to the host reduction.
  auto gpu = MakeJobStrategy(OneWorkerJob(v1::MIRRORED, true), options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->extended().cross_device_ops().kind(),
            distribute::CrossDeviceOpsKind::kNcclAllReduce);
  auto cpu = MakeJobStrategy(OneWorkerJob(v1::MIRRORED, false), options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->extended().cross_device_ops().kind(),
            distribute::CrossDeviceOpsKind::kReduceToOneDevice);
}

TEST(MakeJobStrategyTest, GpuJobOnAWorkerWithoutGpusIsRefusedNamingTheField) {
  JobStrategyOptions options;
  options.devices.num_cpu_devices = 2;
  auto s = MakeJobStrategy(OneWorkerJob(v1::ONE_DEVICE, true), options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()),
              ::testing::StartsWith("gpus: the job asks for GPU replicas"));
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
