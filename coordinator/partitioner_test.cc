#include "coordinator/partitioner.h"

#include "common/cluster_proto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A plan with replicas on every CPU device of a worker.
v1::JobPlan Plan() {
  v1::JobPlan plan;
  plan.set_version(2);
  plan.set_strategy(v1::MULTI_WORKER_MIRRORED);
  plan.mutable_devices()->set_kind(v1::DevicePlan::CPU);
  return plan;
}

std::vector<WorkerSlot> Workers() {
  return {{TaskRef{"worker", 3}, "10.0.0.3:2222", 2}, {TaskRef{"worker", 5}, "10.0.0.5:2222", 2}};
}

TEST(PartitionerTest, ReplicasInTaskOrderChiefFirstTypedGroup) {
  v1::JobSpec spec;
  spec.set_global_batch_size(8);
  auto parts = MakePartitions("job-000007", 2, spec, Plan(), Workers(), "ab12");
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  const v1::Partition& p1 = (*parts)[1];
  EXPECT_THAT((*parts)[0].replica_ids(), ElementsAre(0, 1));
  EXPECT_THAT(p1.replica_ids(), ElementsAre(2, 3));
  EXPECT_EQ(p1.num_replicas_in_sync(), 4);
  // Its task in the job's group (rank 1), not its cluster id worker/5; rank 0 is the chief.
  EXPECT_EQ(FromProto((*parts)[0].task()), (TaskRef{"worker", 0}));
  EXPECT_EQ(FromProto(p1.task()), (TaskRef{"worker", 1}));
  EXPECT_EQ(p1.rendezvous_prefix(), "jobs/job-000007/2");
  EXPECT_EQ(p1.secret(), "ab12");
  for (const v1::Partition& p : *parts) {
    EXPECT_EQ(FromProto(p.cluster()), (ClusterMap{{"worker", {"10.0.0.3:2222", "10.0.0.5:2222"}}}));
    EXPECT_EQ(p.plan().SerializeAsString(), Plan().SerializeAsString());
  }
  absl::StatusOr<TfConfig> tf = TfConfigFromProto(p1.cluster(), p1.task());
  ASSERT_TRUE(tf.ok()) << tf.status();
  EXPECT_FALSE(tf->is_chief());
  EXPECT_EQ(tf->num_workers(), 2);
  EXPECT_EQ(tf->address(), "10.0.0.5:2222");
}

// The evaluator's partition comes last: the chief's spec, prefix and secret as task
// evaluator/0, no replicas and no shard; every partition's group lists it.
TEST(PartitionerTest, TheEvaluatorIsInTheGroupAndGetsTheLastPartition) {
  v1::JobSpec spec;
  spec.set_global_batch_size(8);
  const WorkerSlot evaluator{TaskRef{"evaluator", 4}, "10.0.0.9:2222", 1};
  auto parts = MakePartitions("job-000007", 1, spec, Plan(), Workers(), "ab12", evaluator);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  const v1::Partition& e = parts->back();
  EXPECT_EQ(FromProto(e.task()), (TaskRef{"evaluator", 0}));
  EXPECT_EQ(e.replica_ids_size(), 0);
  EXPECT_EQ(e.num_shards(), 0);
  EXPECT_EQ(e.secret(), "ab12");
  EXPECT_EQ(e.rendezvous_prefix(), (*parts)[0].rendezvous_prefix());
  const ClusterMap group = {{"worker", {"10.0.0.3:2222", "10.0.0.5:2222"}},
                            {"evaluator", {"10.0.0.9:2222"}}};
  for (const v1::Partition& p : *parts) EXPECT_EQ(FromProto(p.cluster()), group);
  absl::StatusOr<TfConfig> tf = TfConfigFromProto(e.cluster(), e.task());
  ASSERT_TRUE(tf.ok()) << tf.status();
  EXPECT_TRUE(tf->is_evaluator());
  EXPECT_EQ(tf->num_workers(), 2);
}

// A group TF_CONFIG would refuse is refused here, naming the job and the address, instead of
// reaching the workers.
TEST(PartitionerTest, AnAddressUsedTwiceIsRefusedNamingIt) {
  v1::JobSpec spec;
  spec.set_global_batch_size(8);
  const WorkerSlot evaluator{TaskRef{"evaluator", 0}, "10.0.0.5:2222", 1};
  auto parts = MakePartitions("job-000007", 3, spec, Plan(), Workers(), "s", evaluator);
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument) << parts.status();
  EXPECT_THAT(parts.status().message(), HasSubstr("job job-000007 attempt 3"));
  EXPECT_THAT(parts.status().message(), HasSubstr("cluster.worker[1]"));
  EXPECT_THAT(parts.status().message(), HasSubstr("10.0.0.5:2222"));
}

// The slots count what the plan puts on each worker (ReplicasOn: 1 for ONE_DEVICE).
TEST(PartitionerTest, OneDeviceIsOneReplica) {
  v1::JobSpec spec;
  spec.set_strategy(v1::ONE_DEVICE);
  spec.set_global_batch_size(7);
  v1::JobPlan plan = Plan();
  plan.set_strategy(v1::ONE_DEVICE);
  plan.mutable_devices()->set_per_worker(1);
  WorkerSlot one = Workers()[0];
  one.devices = 1;
  auto parts = MakePartitions("j", 1, spec, plan, {one}, "s");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_THAT((*parts)[0].replica_ids(), ElementsAre(0));
  EXPECT_EQ((*parts)[0].num_replicas_in_sync(), 1);
}

TEST(PartitionerTest, BatchMustSplitOverReplicas) {
  v1::JobSpec spec;
  spec.set_global_batch_size(6);
  auto parts = MakePartitions("j", 1, spec, Plan(), Workers(), "s");
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parts.status().message(), HasSubstr("global_batch_size: 6"));
  EXPECT_THAT(parts.status().message(), HasSubstr("4 replicas"));
  absl::Status nobody = MakePartitions("j", 1, spec, Plan(), {}, "s").status();
  EXPECT_EQ(nobody.code(), absl::StatusCode::kInvalidArgument) << nobody;
  EXPECT_THAT(nobody.message(), HasSubstr("job j: no worker to run it on"));
}

TEST(PartitionerTest, SecretsAreFreshHex) {
  const std::string a = NewJobSecret(), b = NewJobSecret();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
