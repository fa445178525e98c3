// communication.implementation is decided once (distribute/communication_backend.h) and its
// three callers agree: submit (coordinator/gpu_requirements), the strategies
// (distribute/devices.cc through the worker's MakeJobStrategy) and the table itself. For each
// (replica kind, implementation), with a GPU host in the cluster and a worker whose NCCL is
// the multi-rank fake (standing for a --config=cuda build): either all accept, and the
// worker's Mirrored strategy runs the backend the table chose, or all refuse, naming the
// same field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "coordinator/gpu_requirements.h"
#include "distribute/communication_backend.h"
#include "worker/job_strategy.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

v1::Partition MirroredJob(bool gpus, v1::CommunicationSpec::Implementation implementation) {
  v1::Partition p;
  p.set_job_id("job-3");
  worker::SetWorkerGroup({"127.0.0.1:2000"}, 0, &p);
  p.mutable_spec()->set_strategy(v1::MIRRORED);
  p.mutable_spec()->set_gpus(gpus);
  p.mutable_spec()->mutable_communication()->set_implementation(implementation);
  p.mutable_spec()->mutable_communication()->set_timeout_ms(20000);
  return p;
}

TEST(CommunicationDecisionTest, SubmitStrategiesAndTheTableAgree) {
  // The cluster: a CPU host and a GPU host (which registers its CPU too).
  std::vector<v1::TaskStatus> alive(2);
  alive[0].add_devices()->set_kind(v1::Device::CPU);
  alive[1].add_devices()->set_kind(v1::Device::CPU);
  alive[1].add_devices()->set_kind(v1::Device::GPU);
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
      const v1::Partition job = MirroredJob(gpus, implementation);
      absl::StatusOr<distribute::CollectiveBackend> table = distribute::ResolveBackend(
          {distribute::ImplementationFromSpec(implementation),
           gpus ? distribute::ReplicaKind::kGpu : distribute::ReplicaKind::kCpu,
           /*built_with_cuda=*/true});
      absl::Status submit = coordinator::CheckGpuRequirements(job.spec(), alive);
      auto strategy = worker::MakeJobStrategy(job, host);
      EXPECT_EQ(submit.ok(), table.ok()) << submit;
      EXPECT_EQ(strategy.ok(), table.ok()) << strategy.status();
      if (!table.ok()) {
        ++refused;
        const std::string field = absl::StrCat(
            "communication.implementation: ",
            distribute::ImplementationName(distribute::ImplementationFromSpec(implementation)));
        EXPECT_THAT(std::string(submit.message()), HasSubstr(field));
        EXPECT_THAT(std::string(strategy.status().message()), HasSubstr(field));
        continue;
      }
      ASSERT_TRUE(strategy.ok());
      EXPECT_EQ((*strategy)->extended().cross_device_ops().kind(),
                *table == distribute::CollectiveBackend::kNccl
                    ? distribute::CrossDeviceOpsKind::kNcclAllReduce
                    : distribute::CrossDeviceOpsKind::kReduceToOneDevice);
    }
  }
  EXPECT_EQ(rows, 8);
  EXPECT_EQ(refused, 2);  // NCCL for CPU replicas, RING for GPU replicas
}

}  // namespace
}  // namespace lockstep
