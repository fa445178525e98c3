// communication.implementation is decided once, by the lowering at submit
// (jobspec/lower.h, through the table in distribute/communication_backend.h), and the worker
// runs what the plan says. For each (replica kind, implementation), with a GPU host in the
// cluster and a worker whose NCCL is the multi-rank fake (standing for a --config=cuda
// build): either submit and the table accept, and the worker's Mirrored strategy built from
// the plan runs the backend the table chose (AUTO: NCCL for GPU replicas, Lockstep's
// collectives for CPU ones), or both refuse, naming the same field, and no plan exists for
// a worker to run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "distribute/communication_backend.h"
#include "jobspec/lower.h"
#include "jobspec/test_jobs.h"
#include "worker/job_strategy.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

// A Mirrored job on one worker, its batch splitting over its 2 CPU devices or 2 GPUs.
v1::JobSpec MirroredJob(bool gpus, v1::CommunicationSpec::Implementation implementation) {
  v1::JobSpec spec = jobspec::SmallCsvJob();
  spec.set_name("job-3");
  spec.set_strategy(v1::MIRRORED);
  spec.set_gpus(gpus);
  spec.set_global_batch_size(16);
  spec.mutable_communication()->set_implementation(implementation);
  spec.mutable_communication()->set_timeout_ms(20000);
  return spec;
}

TEST(CommunicationDecisionTest, SubmitTheTableAndTheWorkerAgree) {
  // The cluster: the GPU host first (it registers its 2 CPU devices too), then a CPU host.
  jobspec::ClusterFacts cluster;
  cluster.workers = {jobspec::WorkerFacts{2, 2}, jobspec::WorkerFacts{2, 0}};
  collectives::nccl::FakeNcclWorld world;
  collectives::nccl::FakeNcclApi api(&world);
  worker::JobStrategyOptions host;  // the GPU host's worker
  host.devices.num_cpu_devices = 2;
  host.devices.num_gpus = 2;
  host.nccl.api = &api;

  const std::vector<v1::CommunicationSpec::Implementation> implementations = {
      v1::CommunicationSpec::IMPLEMENTATION_UNSPECIFIED, v1::CommunicationSpec::AUTO,
      v1::CommunicationSpec::RING, v1::CommunicationSpec::NCCL};
  int rows = 0;
  int refused = 0;
  for (bool gpus : {false, true}) {
    for (v1::CommunicationSpec::Implementation implementation : implementations) {
      SCOPED_TRACE(absl::StrCat(gpus ? "GPU" : "CPU", " replicas, ",
                                v1::CommunicationSpec::Implementation_Name(implementation)));
      ++rows;
      const v1::JobSpec spec = MirroredJob(gpus, implementation);
      absl::StatusOr<distribute::CollectiveBackend> table = distribute::ResolveBackend(
          {distribute::ImplementationFromSpec(implementation),
           gpus ? distribute::ReplicaKind::kGpu : distribute::ReplicaKind::kCpu,
           /*built_with_cuda=*/true});
      absl::StatusOr<v1::JobPlan> plan = jobspec::LowerJobSpec(spec, cluster);
      EXPECT_EQ(plan.ok(), table.ok()) << plan.status();
      if (!table.ok()) {
        ++refused;
        const std::string field = absl::StrCat(
            "communication.implementation: ",
            distribute::ImplementationName(distribute::ImplementationFromSpec(implementation)));
        EXPECT_THAT(std::string(plan.status().message()), HasSubstr(field));
        EXPECT_THAT(std::string(table.status().message()), HasSubstr(field));
        continue;
      }
      ASSERT_TRUE(plan.ok());
      const bool nccl = *table == distribute::CollectiveBackend::kNccl;
      EXPECT_EQ(plan->communication().backend() == v1::CommunicationPlan::NCCL, nccl);
      v1::Partition partition;
      partition.set_job_id("job-3");
      worker::SetWorkerGroup({"127.0.0.1:2000"}, 0, &partition);
      *partition.mutable_spec() = spec;
      *partition.mutable_plan() = *plan;
      auto strategy = worker::MakeJobStrategy(partition, host);
      ASSERT_TRUE(strategy.ok()) << strategy.status();
      EXPECT_EQ((*strategy)->extended().cross_device_ops().kind(),
                nccl ? distribute::CrossDeviceOpsKind::kNcclAllReduce
                     : distribute::CrossDeviceOpsKind::kReduceToOneDevice);
      EXPECT_EQ((*strategy)->extended().worker_devices()[0].type(),
                gpus ? engine::Device::Type::kCuda : engine::Device::Type::kCpu);
    }
  }
  EXPECT_EQ(rows, 8);
  EXPECT_EQ(refused, 2);  // NCCL for CPU replicas, RING for GPU replicas
}

}  // namespace
}  // namespace lockstep
