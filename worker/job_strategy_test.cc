#include "worker/job_strategy.h"

#include "absl/strings/str_cat.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/lower.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {
namespace {

// A one-worker partition whose plan is what the coordinator lowers `kind` and `gpus` to.
v1::Partition OneWorkerJob(v1::StrategyKind kind, bool gpus) {
  v1::Partition p;
  p.set_job_id("job-7");
  SetWorkerGroup({"127.0.0.1:2000"}, 0, &p);
  p.mutable_spec()->set_strategy(kind);
  p.mutable_spec()->set_gpus(gpus);
  v1::JobPlan& plan = *p.mutable_plan();
  plan.set_version(jobspec::kPlanVersion);
  plan.set_strategy(kind);
  plan.set_workers(1);
  plan.mutable_devices()->set_kind(gpus ? v1::DevicePlan::GPU : v1::DevicePlan::CPU);
  plan.mutable_communication()->set_backend(gpus ? v1::CommunicationPlan::NCCL
                                                 : v1::CommunicationPlan::LOCKSTEP);
  plan.mutable_communication()->set_bytes_per_pack(4 << 20);
  plan.mutable_communication()->set_timeout_ms(20000);
  return p;
}

TEST(JobCommunicationOptionsTest, TheStrategiesGetThePlansDecisions) {
  v1::CommunicationPlan plan;
  plan.set_backend(v1::CommunicationPlan::LOCKSTEP_RING);
  plan.set_bytes_per_pack(1024);
  plan.set_timeout_ms(1500);
  plan.set_bf16_compression(true);
  plan.set_encrypt(true);
  distribute::CommunicationOptions o = JobCommunicationOptions(plan);
  EXPECT_EQ(o.backend, distribute::CollectiveBackend::kLockstep);
  EXPECT_EQ(o.implementation, distribute::Implementation::kRing);
  EXPECT_EQ(o.bytes_per_pack, 1024u);
  EXPECT_EQ(o.timeout, absl::Milliseconds(1500));
  EXPECT_EQ(o.compression, collectives::Compression::kBF16);
  EXPECT_TRUE(o.encrypt);
  plan.set_backend(v1::CommunicationPlan::NCCL);
  plan.set_bf16_compression(false);
  o = JobCommunicationOptions(plan);
  EXPECT_EQ(o.backend, distribute::CollectiveBackend::kNccl);
  EXPECT_EQ(o.compression, collectives::Compression::kNone);
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

// The GPUs the plan puts replicas on are a fact of this worker: checked, and said so.
TEST(MakeJobStrategyTest, GpuPlanOnAWorkerWithoutGpusIsAFactCheck) {
  JobStrategyOptions options;
  options.devices.num_cpu_devices = 2;
  auto s = MakeJobStrategy(OneWorkerJob(v1::ONE_DEVICE, true), options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()),
              ::testing::HasSubstr("a fact of this worker, not a rule of the job"));
}

// The worker never re-decides: plans the coordinator refuses to make (a one-worker strategy
// on two workers, BF16 compression on one worker, RING for GPU replicas) run as planned.
TEST(MakeJobStrategyTest, RunsAPlanTheCoordinatorWouldRefuseExactlyAsPlanned) {
  v1::Partition mirrored = OneWorkerJob(v1::MIRRORED, false);
  SetWorkerGroup({"127.0.0.1:2000", "127.0.0.1:2001"}, 0, &mirrored);
  mirrored.mutable_spec()->set_num_workers(2);
  mirrored.mutable_spec()->mutable_communication()->set_compression(v1::CommunicationSpec::BF16);
  mirrored.mutable_plan()->mutable_communication()->set_bf16_compression(true);
  jobspec::ClusterFacts two;
  two.workers = {jobspec::WorkerFacts{2, 0}, jobspec::WorkerFacts{2, 0}};
  absl::Status refused = jobspec::LowerJobSpec(mirrored.spec(), two).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  JobStrategyOptions options;
  options.devices.num_cpu_devices = 2;
  auto s = MakeJobStrategy(mirrored, options);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(DeviceNames(**s), (std::vector<std::string>{"/cpu:0", "/cpu:1"}));
  EXPECT_EQ((*s)->extended().cross_device_ops().kind(),
            distribute::CrossDeviceOpsKind::kReduceToOneDevice);
  // The spec says RING for CPU replicas; the plan (by hand) says NCCL on GPUs: the plan wins.
  collectives::nccl::FakeNcclWorld world;
  collectives::nccl::FakeNcclApi api(&world);
  options.devices.num_gpus = 2;
  options.nccl.api = &api;
  v1::Partition nccl = OneWorkerJob(v1::MIRRORED, true);
  nccl.mutable_spec()->set_gpus(false);
  nccl.mutable_spec()->mutable_communication()->set_implementation(v1::CommunicationSpec::RING);
  auto g = MakeJobStrategy(nccl, options);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(DeviceNames(**g), (std::vector<std::string>{"/gpu:0", "/gpu:1"}));
  EXPECT_EQ((*g)->extended().cross_device_ops().kind(),
            distribute::CrossDeviceOpsKind::kNcclAllReduce);
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
