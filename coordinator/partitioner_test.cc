#include "coordinator/partitioner.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<WorkerSlot> Workers() {
  return {{TaskRef{"worker", 3}, "10.0.0.3:2222", 2}, {TaskRef{"worker", 5}, "10.0.0.5:2222", 2}};
}

TEST(PartitionerTest, ReplicasInTaskOrderChiefFirstGroupAsTfConfig) {
  v1::JobSpec spec;
  spec.set_global_batch_size(8);
  auto parts = MakePartitions("job-000007", 2, spec, Workers(), "ab12");
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  const v1::Partition& p1 = (*parts)[1];
  EXPECT_THAT((*parts)[0].replica_ids(), ElementsAre(0, 1));
  EXPECT_THAT(p1.replica_ids(), ElementsAre(2, 3));
  EXPECT_EQ(p1.num_replicas_in_sync(), 4);
  EXPECT_TRUE((*parts)[0].is_chief());
  EXPECT_FALSE(p1.is_chief());
  EXPECT_EQ(p1.worker_rank(), 1);
  EXPECT_EQ(p1.task().index(), 1);  // its task in the job's group, not worker/5
  EXPECT_EQ(p1.rendezvous_prefix(), "jobs/job-000007/2");
  EXPECT_EQ(p1.secret(), "ab12");
  auto tf = TfConfig::Parse(p1.tf_config());
  ASSERT_TRUE(tf.ok()) << tf.status();
  EXPECT_THAT(tf->cluster().at("worker"), ElementsAre("10.0.0.3:2222", "10.0.0.5:2222"));
  EXPECT_EQ(tf->task_index(), 1);
}

TEST(PartitionerTest, OneDeviceIsOneReplica) {
  v1::JobSpec spec;
  spec.set_strategy(v1::ONE_DEVICE);
  spec.set_global_batch_size(7);
  auto parts = MakePartitions("j", 1, spec, {Workers()[0]}, "s");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_THAT((*parts)[0].replica_ids(), ElementsAre(0));
  EXPECT_EQ((*parts)[0].num_replicas_in_sync(), 1);
}

TEST(PartitionerTest, BatchMustSplitOverReplicas) {
  v1::JobSpec spec;
  spec.set_global_batch_size(6);
  auto parts = MakePartitions("j", 1, spec, Workers(), "s");
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parts.status().message(), HasSubstr("global_batch_size: 6"));
  EXPECT_THAT(parts.status().message(), HasSubstr("4 replicas"));
  absl::Status nobody = MakePartitions("j", 1, spec, {}, "s").status();
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
